//! `ReadConcern::local()/majority()/available()/custom(..)` and their
//! levels, per operation.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{ReadConcern, ReadConcernLevel};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_read_concerns").collection::<Document>("c");
    coll.drop().run()?;
    coll.insert_one(doc! { "x": 1 }).run()?;

    assert_eq!(ReadConcern::local().level, ReadConcernLevel::Local);
    assert_eq!(ReadConcern::majority().level, ReadConcernLevel::Majority);
    assert_eq!(ReadConcern::snapshot().level, ReadConcernLevel::Snapshot);
    assert_eq!(ReadConcern::linearizable().level, ReadConcernLevel::Linearizable);
    assert_eq!(ReadConcern::available().level, ReadConcernLevel::Available);
    assert_eq!(ReadConcern::custom("local").level, ReadConcernLevel::Local);

    assert_eq!(coll.find(doc! {}).read_concern(ReadConcern::local()).run()?.count(), 1);
    assert_eq!(coll.count_documents(doc! {}).read_concern(ReadConcern::majority()).run()?, 1);
    assert_eq!(
        coll.aggregate([doc! { "$match": {} }]).read_concern(ReadConcern::local()).run()?.count(),
        1
    );
    Ok(())
}

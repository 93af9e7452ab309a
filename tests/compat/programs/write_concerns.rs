//! `WriteConcern` built and named (`majority()`, `nodes`), per operation
//! through `InsertOneOptions`/`InsertManyOptions` and setters.

use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{Acknowledgment, InsertManyOptions, InsertOneOptions, WriteConcern};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_write_concerns").collection::<Document>("c");
    coll.drop().run()?;

    let majority = WriteConcern::majority();
    assert_eq!(majority.w, Some(Acknowledgment::Majority));
    let one = WriteConcern::nodes(1);
    assert_eq!(one.w, Some(Acknowledgment::Nodes(1)));
    let journaled = WriteConcern::builder()
        .w(Acknowledgment::from(1))
        .journal(true)
        .w_timeout(Duration::from_secs(5))
        .build();
    assert_eq!(journaled.w_timeout, Some(Duration::from_secs(5)));

    let options = InsertOneOptions::builder().write_concern(journaled).build();
    coll.insert_one(doc! { "n": 1 }).with_options(options).run()?;
    let options = InsertManyOptions::builder().write_concern(majority).ordered(true).build();
    coll.insert_many([doc! { "n": 2 }, doc! { "n": 3 }]).with_options(options).run()?;
    coll.delete_one(doc! { "n": 1 }).write_concern(one).run()?;

    let unacknowledged = WriteConcern::builder().w(Acknowledgment::Nodes(0)).build();
    assert_eq!(unacknowledged.w, Some(Acknowledgment::Nodes(0)));
    assert_eq!(coll.count_documents(doc! {}).run()?, 2);
    Ok(())
}

//! `start_session()` with `SessionOptions` (causal consistency, default
//! transaction options); `id`, `cluster_time`, `client`.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{ReadConcern, SessionOptions, TransactionOptions, WriteConcern};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_session_options").collection::<Document>("c");
    coll.drop().run()?;

    let defaults = TransactionOptions::builder()
        .read_concern(ReadConcern::majority())
        .write_concern(WriteConcern::majority())
        .build();
    let mut session = client
        .start_session()
        .causal_consistency(true)
        .default_transaction_options(defaults)
        .run()?;
    assert!(session.id().contains_key("id"));
    coll.insert_one(doc! { "x": 1 }).session(&mut session).run()?;
    assert!(session.cluster_time().is_some());
    let read = coll.find_one(doc! { "x": 1 }).session(&mut session).run()?;
    assert!(read.is_some());

    session.start_transaction().run()?;
    coll.insert_one(doc! { "x": 2 }).session(&mut session).run()?;
    session.commit_transaction().run()?;
    assert_eq!(session.client().database("compat_session_options").collection::<Document>("c")
        .count_documents(doc! {}).run()?, 2);

    let options = SessionOptions::builder().causal_consistency(false).build();
    let other = client.start_session().with_options(options).run()?;
    assert_ne!(other.id(), session.id());
    Ok(())
}

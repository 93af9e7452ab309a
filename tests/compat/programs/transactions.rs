//! A transaction by hand: `start_transaction` with options (built and set
//! one by one), writes in the session, `commit_transaction`,
//! `abort_transaction`.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{Acknowledgment, ReadConcern, TransactionOptions, WriteConcern};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let accounts = client.database("compat_transactions").collection::<Document>("accounts");
    accounts.drop().run()?;
    accounts.insert_many([doc! { "_id": "a", "balance": 100 }, doc! { "_id": "b", "balance": 0 }]).run()?;

    let mut session = client.start_session().run()?;
    let options = TransactionOptions::builder()
        .read_concern(ReadConcern::majority())
        .write_concern(WriteConcern::builder().w(Acknowledgment::Majority).build())
        .build();
    session.start_transaction().with_options(options).run()?;
    accounts
        .update_one(doc! { "_id": "a" }, doc! { "$inc": { "balance": -30 } })
        .session(&mut session)
        .run()?;
    accounts
        .update_one(doc! { "_id": "b" }, doc! { "$inc": { "balance": 30 } })
        .session(&mut session)
        .run()?;
    let inside = accounts.find_one(doc! { "_id": "b" }).session(&mut session).run()?.unwrap();
    assert_eq!(inside.get_i32("balance"), Ok(30));
    session.commit_transaction().run()?;

    session
        .start_transaction()
        .read_concern(ReadConcern::local())
        .write_concern(WriteConcern::majority())
        .run()?;
    accounts.delete_many(doc! {}).session(&mut session).run()?;
    session.abort_transaction().run()?;

    let b = accounts.find_one(doc! { "_id": "b" }).run()?.unwrap();
    assert_eq!(b.get_i32("balance"), Ok(30));
    assert_eq!(accounts.count_documents(doc! {}).run()?, 2);
    Ok(())
}

//! The retried callback form: `start_transaction().and_run(|session| ..)`,
//! returning the callback's value.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{ReadConcern, WriteConcern};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let orders = client.database("compat_and_run").collection::<Document>("orders");
    let stock = client.database("compat_and_run").collection::<Document>("stock");
    orders.drop().run()?;
    stock.drop().run()?;
    stock.insert_one(doc! { "_id": "widget", "left": 3 }).run()?;

    let mut session = client.start_session().run()?;
    let mut calls = 0;
    let left = session
        .start_transaction()
        .read_concern(ReadConcern::majority())
        .write_concern(WriteConcern::majority())
        .and_run(|session| {
            calls += 1;
            orders.insert_one(doc! { "item": "widget" }).session(&mut *session).run()?;
            let after = stock
                .find_one_and_update(doc! { "_id": "widget" }, doc! { "$inc": { "left": -1 } })
                .return_document(mongodb::options::ReturnDocument::After)
                .session(&mut *session)
                .run()?;
            Ok(after.and_then(|d| d.get_i32("left").ok()))
        })?;
    assert_eq!(left, Some(2));
    assert_eq!(calls, 1);
    assert_eq!(orders.count_documents(doc! {}).run()?, 1);
    Ok(())
}

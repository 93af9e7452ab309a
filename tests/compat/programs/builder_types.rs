//! The write, count and drop builders named by their types, as a program
//! that passes them around writes them: none names the collection's
//! document type (`Update<'_>`, `Delete<'_>`, `CountDocuments<'_>`,
//! `EstimatedDocumentCount<'_>`, `Distinct<'_>`, `InsertOne<'_>`,
//! `InsertMany<'_>`, `DropCollection<'_>`), `drop_index` and
//! `drop_indexes` make the same `DropIndex<'_>`, and `start_transaction`
//! a `StartTransaction<&mut ClientSession>`. Each runs, some in a
//! transaction.

use mongodb::action::{
    CountDocuments, Delete, Distinct, DropCollection, DropIndex, EstimatedDocumentCount,
    InsertMany, InsertOne, StartTransaction, Update,
};
use mongodb::bson::{doc, Bson};
use mongodb::error::Result;
use mongodb::sync::{Client, ClientSession, Collection};
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    sku: String,
    qty: i32,
}

fn item(sku: &str, qty: i32) -> Item {
    Item { sku: sku.into(), qty }
}

fn add<'a>(items: &'a Collection<Item>, one: &Item) -> InsertOne<'a> {
    items.insert_one(one)
}

fn add_all<'a>(items: &'a Collection<Item>, list: &[Item]) -> InsertMany<'a> {
    items.insert_many(list)
}

fn restock(items: &Collection<Item>, by: i32) -> Update<'_> {
    items.update_many(doc! {}, doc! { "$inc": { "qty": by } })
}

fn remove<'a>(items: &'a Collection<Item>, sku: &str, session: &'a mut ClientSession) -> Delete<'a> {
    items.delete_one(doc! { "sku": sku }).session(session)
}

fn low_stock(items: &Collection<Item>) -> CountDocuments<'_> {
    items.count_documents(doc! { "qty": { "$lt": 5 } })
}

fn roughly(items: &Collection<Item>) -> EstimatedDocumentCount<'_> {
    items.estimated_document_count()
}

fn skus(items: &Collection<Item>) -> Distinct<'_> {
    items.distinct("sku", doc! {})
}

/// One builder type whether one index goes or every one but `_id`'s.
fn drop_indexes_named<'a>(items: &'a Collection<Item>, name: Option<&str>) -> DropIndex<'a> {
    match name {
        Some(name) => items.drop_index(name),
        None => items.drop_indexes(),
    }
}

fn reset(items: &Collection<Item>) -> DropCollection<'_> {
    items.drop()
}

fn begin(session: &mut ClientSession) -> StartTransaction<&mut ClientSession> {
    session.start_transaction()
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let items = client.database("compat_builder_types").collection::<Item>("items");
    reset(&items).run()?;

    assert!(matches!(add(&items, &item("a", 1)).run()?.inserted_id, Bson::ObjectId(_)));
    let more = add_all(&items, &[item("b", 3), item("c", 7)]).run()?;
    assert_eq!(more.inserted_ids.len(), 2);
    for keys in [doc! { "sku": 1 }, doc! { "qty": 1 }] {
        items.create_index(IndexModel::builder().keys(keys).build()).run()?;
    }

    let mut session = client.start_session().run()?;
    begin(&mut session).run()?;
    let restocked = restock(&items, 2).session(&mut session).run()?;
    assert_eq!((restocked.matched_count, restocked.modified_count), (3, 3));
    assert_eq!(remove(&items, "c", &mut session).run()?.deleted_count, 1);
    // In the transaction: a has 3, b 5, c is gone.
    assert_eq!(low_stock(&items).session(&mut session).run()?, 1);
    session.commit_transaction().run()?;

    assert_eq!(low_stock(&items).run()?, 1);
    assert_eq!(roughly(&items).run()?, 2);
    let mut names: Vec<Bson> = skus(&items).run()?;
    names.sort_by_key(|sku| sku.to_string());
    assert_eq!(names, [Bson::from("a"), Bson::from("b")]);

    drop_indexes_named(&items, Some("sku_1")).run()?;
    assert_eq!(items.list_index_names().run()?, ["_id_", "qty_1"]);
    drop_indexes_named(&items, None).run()?;
    assert_eq!(items.list_index_names().run()?, ["_id_"]);

    reset(&items).run()?;
    assert_eq!(items.count_documents(doc! {}).run()?, 0);
    Ok(())
}

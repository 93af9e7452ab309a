//! The action builders named by their types, as a program that passes them
//! around writes them: one `CreateIndex<'_, M>` for `create_index`
//! (`Single`) and `create_indexes` (`Multiple`), `ListIndexes`,
//! `ListCollections` and `ListDatabases` in their `ListSpecifications` and
//! `ListNames` modes (the names' options and session reach the server),
//! and `ReplaceOne`.

use std::sync::{Arc, Mutex};

use mongodb::action::{
    CreateIndex, ListCollections, ListDatabases, ListIndexes, ListNames, ListSpecifications,
    Multiple, ReplaceOne, Single,
};
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::Result;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::results::{CreateIndexResult, CreateIndexesResult};
use mongodb::sync::Client;
use mongodb::IndexModel;

const DB: &str = "compat_builder_modes";

fn quietly(index: CreateIndex<'_, Single>) -> Result<CreateIndexResult> {
    index.comment("one").run()
}

fn all_at_once(indexes: CreateIndex<'_, Multiple>) -> Result<CreateIndexesResult> {
    indexes.comment("several").run()
}

fn names_of(listing: ListIndexes<'_, ListNames>) -> Result<Vec<String>> {
    listing.batch_size(1).comment("index names").run()
}

fn models_of(listing: ListIndexes<'_, ListSpecifications>) -> Result<Vec<IndexModel>> {
    listing.batch_size(1).run()?.collect()
}

fn only_c(listing: ListCollections<'_, ListNames>) -> ListCollections<'_, ListNames> {
    listing.filter(doc! { "name": "c" }).comment("collection names")
}

fn this_database(listing: ListDatabases<'_, ListNames>) -> ListDatabases<'_, ListNames> {
    listing.filter(doc! { "name": DB })
}

fn upserting(replace: ReplaceOne<'_>) -> ReplaceOne<'_> {
    replace.upsert(true)
}

pub fn run(uri: &str) -> Result<()> {
    let events: Arc<Mutex<Vec<Document>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let mut options = ClientOptions::parse(uri).run()?;
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        if let CommandEvent::Started(started) = event {
            seen.lock().unwrap().push(started.command);
        }
    }));
    let client = Client::with_options(options)?;
    let db = client.database(DB);
    let coll = db.collection::<Document>("c");
    coll.drop().run()?;
    coll.insert_one(doc! { "_id": 1, "a": 1 }).run()?;

    assert_eq!(quietly(coll.create_index(IndexModel::builder().keys(doc! { "a": 1 }).build()))?.index_name, "a_1");
    let created = all_at_once(coll.create_indexes([
        IndexModel::builder().keys(doc! { "b": 1 }).build(),
        IndexModel::builder().keys(doc! { "c": -1 }).build(),
    ]))?;
    assert_eq!(created.index_names, ["b_1", "c_-1"]);

    assert_eq!(names_of(coll.list_index_names())?, ["_id_", "a_1", "b_1", "c_-1"]);
    let models = models_of(coll.list_indexes())?;
    assert_eq!(models.len(), 4);
    assert_eq!(models[1].keys, doc! { "a": 1 });

    let result = upserting(coll.replace_one(doc! { "_id": 2 }, doc! { "a": 2 })).run()?;
    assert_eq!(result.upserted_id, Some(Bson::Int32(2)));

    assert_eq!(only_c(db.list_collection_names()).run()?, ["c"]);
    assert_eq!(this_database(client.list_database_names()).run()?, [DB]);

    // In a session the names' modes still return names.
    let mut session = client.start_session().run()?;
    let names = coll.list_index_names().session(&mut session).run()?;
    assert_eq!(names.len(), 4);
    let collections = only_c(db.list_collection_names()).session(&mut session).run()?;
    assert_eq!(collections, ["c"]);
    let databases = this_database(client.list_database_names()).session(&mut session).run()?;
    assert_eq!(databases, [DB]);

    // What the names' builders were given reached the server.
    let commands = events.lock().unwrap().clone();
    let index_names = commands
        .iter()
        .find(|c| c.get_str("comment").ok() == Some("index names"))
        .expect("list_index_names' listIndexes");
    assert_eq!(index_names.get_str("listIndexes").ok(), Some("c"));
    let batch_size = index_names.get_document("cursor").ok().and_then(|c| c.get("batchSize"));
    assert!(matches!(batch_size, Some(Bson::Int32(1) | Bson::Int64(1))), "{batch_size:?}");
    let session_lists = commands
        .iter()
        .filter(|c| c.get_str("comment").ok() == Some("collection names"))
        .collect::<Vec<_>>();
    assert_eq!(session_lists.len(), 2);
    assert!(session_lists.iter().all(|c| c.get_bool("nameOnly").ok() == Some(true)));
    assert_eq!(session_lists[1].get_document("lsid").ok(), Some(session.id()));
    let created = commands
        .iter()
        .filter(|c| c.contains_key("createIndexes"))
        .map(|c| c.get_str("comment").unwrap_or_default())
        .collect::<Vec<_>>();
    assert_eq!(created, ["one", "several"]);

    db.drop().run()?;
    Ok(())
}

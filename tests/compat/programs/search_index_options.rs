//! Search index management with each operation's own builder and options
//! type: `CreateSearchIndexOptions`, `UpdateSearchIndexOptions`,
//! `DropSearchIndexOptions`, `ListSearchIndexOptions` through
//! `with_options`. The commands reach the server as the index-management
//! spec writes them; SecantusDB, not being Atlas, refuses each with an error
//! naming Atlas (what a mongod without mongot does too).

use std::sync::{Arc, Mutex};

use mongodb::action::{CreateSearchIndex, DropSearchIndex, Multiple, UpdateSearchIndex};
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::Result;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{
    AggregateOptions, ClientOptions, CreateSearchIndexOptions, DropSearchIndexOptions,
    ListSearchIndexOptions, UpdateSearchIndexOptions,
};
use mongodb::sync::Client;
use mongodb::{SearchIndexModel, SearchIndexType};

fn refused_by_a_server_without_atlas<T>(result: Result<T>) {
    let Err(error) = result else { panic!("SecantusDB has no Atlas Search") };
    assert!(error.to_string().contains("Atlas"), "{error}");
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
    let db = client.database("compat_search_index_options");
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! { "x": 1 }).run()?;

    let model = SearchIndexModel::builder()
        .definition(doc! { "mappings": { "dynamic": true } })
        .name("by_text".to_string())
        .index_type(SearchIndexType::Search)
        .build();
    let create: CreateSearchIndex<'_, Multiple> = coll
        .create_search_indexes([model.clone()])
        .with_options(CreateSearchIndexOptions::builder().build());
    refused_by_a_server_without_atlas(create.run());
    refused_by_a_server_without_atlas(
        coll.create_search_index(model).with_options(CreateSearchIndexOptions::default()).run(),
    );
    let update: UpdateSearchIndex<'_> = coll
        .update_search_index("by_text", doc! { "mappings": { "dynamic": false } })
        .with_options(UpdateSearchIndexOptions::builder().build());
    refused_by_a_server_without_atlas(update.run());
    let drop: DropSearchIndex<'_> =
        coll.drop_search_index("by_text").with_options(DropSearchIndexOptions::builder().build());
    refused_by_a_server_without_atlas(drop.run());
    let list = coll
        .list_search_indexes()
        .name("by_text")
        .aggregate_options(AggregateOptions::builder().comment(Bson::from("listing")).build())
        .with_options(ListSearchIndexOptions::builder().build());
    refused_by_a_server_without_atlas(list.run());

    let commands = events.lock().unwrap().clone();
    let sent = |name: &str| commands.iter().filter(|c| c.contains_key(name)).cloned().collect::<Vec<_>>();
    let creates = sent("createSearchIndexes");
    assert_eq!(creates.len(), 2);
    for create in &creates {
        assert_eq!(create.get_str("createSearchIndexes").ok(), Some("c"));
        let indexes = create.get_array("indexes").expect("indexes");
        assert_eq!(
            indexes,
            &vec![Bson::Document(doc! {
                "definition": { "mappings": { "dynamic": true } },
                "name": "by_text",
                "type": "search",
            })]
        );
    }
    let update = &sent("updateSearchIndex")[0];
    assert_eq!(update.get_str("name").ok(), Some("by_text"));
    assert_eq!(update.get_document("definition").ok(), Some(&doc! { "mappings": { "dynamic": false } }));
    assert_eq!(sent("dropSearchIndex")[0].get_str("name").ok(), Some("by_text"));
    let list = &sent("aggregate")[0];
    assert_eq!(list.get_str("comment").ok(), Some("listing"));
    let pipeline = list.get_array("pipeline").expect("pipeline");
    assert_eq!(pipeline, &vec![Bson::Document(doc! { "$listSearchIndexes": { "name": "by_text" } })]);

    db.drop().run()?;
    Ok(())
}

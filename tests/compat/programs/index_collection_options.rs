//! Index and collection option types: `TimeseriesOptions`, `ClusteredIndex`,
//! `IndexOptionDefaults`, `ChangeStreamPreAndPostImages` and
//! `expire_after_seconds` in `create`; `IndexVersion`,
//! `Sphere2DIndexVersion`, `bits` and `CommitQuorum` in `createIndexes`.
//! Each is checked in the command sent (a command event) and read back,
//! typed, from `listCollections` / `listIndexes`; so is an index's
//! read-only `clustered()`, which a listed model sends back as read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{ErrorKind, Result};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{
    ChangeStreamPreAndPostImages, ClientOptions, ClusteredIndex, CommitQuorum,
    IndexOptionDefaults, IndexOptions, IndexVersion, Sphere2DIndexVersion, TimeseriesGranularity,
    TimeseriesOptions,
};
use mongodb::results::{CollectionSpecification, CollectionType};
use mongodb::sync::{Client, Database};
use mongodb::IndexModel;

type Events = Arc<Mutex<Vec<CommandEvent>>>;

/// The last `name` command sent.
fn last_sent(events: &Events, name: &str) -> Document {
    events
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find_map(|event| match event {
            CommandEvent::Started(e) if e.command_name == name => Some(e.command.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} command was sent"))
}

pub fn run(uri: &str) -> Result<()> {
    let events: Events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let mut options = ClientOptions::parse(uri).run()?;
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        seen.lock().unwrap().push(event);
    }));
    let client = Client::with_options(options)?;
    let db = client.database("compat_index_collection_options");
    db.drop().run()?;
    collections(&db, &events)?;
    indexes(&db, &events)?;
    clustered_index_listed_and_sent_back(&db, &events)?;
    db.drop().run()?;
    Ok(())
}

fn collections(db: &Database, events: &Events) -> Result<()> {
    let series = TimeseriesOptions::builder()
        .time_field("at")
        .meta_field("sensor".to_string())
        .granularity(TimeseriesGranularity::Hours)
        .build();
    db.create_collection("readings").timeseries(series).run()?;
    let sent = last_sent(events, "create");
    assert_eq!(
        sent.get_document("timeseries").ok(),
        Some(&doc! { "timeField": "at", "metaField": "sensor", "granularity": "hours" })
    );

    let mut clustered = ClusteredIndex::default();
    clustered.name = Some("by_id".to_string());
    db.create_collection("journal")
        .clustered_index(clustered)
        .expire_after_seconds(Duration::from_secs(120))
        .change_stream_pre_and_post_images(
            ChangeStreamPreAndPostImages::builder().enabled(true).build(),
        )
        .index_option_defaults(
            IndexOptionDefaults::builder()
                .storage_engine(doc! { "wiredTiger": {} })
                .build(),
        )
        .run()?;
    let sent = last_sent(events, "create");
    assert_eq!(
        sent.get_document("clusteredIndex").ok(),
        Some(&doc! { "key": { "_id": 1 }, "unique": true, "name": "by_id" })
    );
    // Whole seconds, as an `int` (the official driver's serde form).
    assert_eq!(sent.get("expireAfterSeconds"), Some(&Bson::Int32(120)));
    assert_eq!(
        sent.get_document("changeStreamPreAndPostImages").ok(),
        Some(&doc! { "enabled": true })
    );
    assert_eq!(
        sent.get_document("indexOptionDefaults").ok(),
        Some(&doc! { "storageEngine": { "wiredTiger": {} } })
    );

    let specs: Vec<CollectionSpecification> =
        db.list_collections().run()?.collect::<Result<_>>()?;
    let readings = specs.iter().find(|s| s.name == "readings").expect("readings is listed");
    // MongoDB lists it as `timeseries`; SecantusDB 0.7 as `collection`.
    assert!(matches!(
        readings.collection_type,
        CollectionType::Timeseries | CollectionType::Collection
    ));
    let listed = readings.options.timeseries.as_ref().expect("its timeseries options");
    assert_eq!(listed.time_field, "at");
    assert_eq!(listed.meta_field.as_deref(), Some("sensor"));
    assert_eq!(listed.granularity, Some(TimeseriesGranularity::Hours));

    let journal = specs.iter().find(|s| s.name == "journal").expect("journal is listed");
    let index = journal.options.clustered_index.as_ref().expect("its clustered index");
    assert_eq!(index.key, doc! { "_id": 1 });
    assert!(index.unique);
    assert_eq!(index.name.as_deref(), Some("by_id"));
    assert_eq!(
        journal.options.expire_after_seconds,
        Some(Duration::from_secs(120))
    );
    let images = journal.options.change_stream_pre_and_post_images.as_ref();
    assert!(images.expect("its pre- and post-image setting").enabled);
    let defaults = journal.options.index_option_defaults.as_ref();
    assert_eq!(
        defaults.expect("its index defaults").storage_engine,
        doc! { "wiredTiger": {} }
    );
    Ok(())
}

fn indexes(db: &Database, events: &Events) -> Result<()> {
    let coll = db.collection::<Document>("places");
    let models = vec![
        IndexModel::builder()
            .keys(doc! { "loc": "2dsphere" })
            .options(
                IndexOptions::builder()
                    .sphere_2d_index_version(Sphere2DIndexVersion::V3)
                    .version(IndexVersion::V2)
                    .build(),
            )
            .build(),
        IndexModel::builder()
            .keys(doc! { "kind": 1 })
            .options(IndexOptions::builder().version(IndexVersion::V1).build())
            .build(),
        IndexModel::builder()
            .keys(doc! { "grid": "2d" })
            .options(IndexOptions::builder().bits(26u32).build())
            .build(),
    ];
    coll.create_indexes(models).commit_quorum(CommitQuorum::VotingMembers).run()?;
    let sent = last_sent(events, "createIndexes");
    assert_eq!(sent.get_str("commitQuorum").ok(), Some("votingMembers"));
    let specs = sent.get_array("indexes").expect("the indexes sent");
    let loc = specs[0].as_document().expect("an index specification");
    assert_eq!(loc.get("2dsphereIndexVersion"), Some(&Bson::Int32(3)));
    assert_eq!(loc.get("v"), Some(&Bson::Int32(2)));
    let grid = specs[2].as_document().expect("an index specification");
    assert_eq!(grid.get("bits"), Some(&Bson::Int32(26)));

    let by_name = IndexModel::builder().keys(doc! { "name": 1 }).build();
    coll.create_index(by_name).commit_quorum(CommitQuorum::Nodes(1)).run()?;
    let sent = last_sent(events, "createIndexes");
    assert_eq!(sent.get("commitQuorum"), Some(&Bson::Int32(1)));

    let listed: Vec<IndexModel> = coll.list_indexes().run()?.collect::<Result<_>>()?;
    let options_of = |keys: Document| {
        listed
            .iter()
            .find(|m| m.keys == keys)
            .and_then(|m| m.options.clone())
            .expect("the index is listed with options")
    };
    let loc = options_of(doc! { "loc": "2dsphere" });
    assert!(matches!(loc.sphere_2d_index_version, Some(Sphere2DIndexVersion::V3)));
    assert!(matches!(loc.version, Some(IndexVersion::V2)));
    let kind = options_of(doc! { "kind": 1 });
    assert!(matches!(kind.version, Some(IndexVersion::V1)));
    assert_eq!(options_of(doc! { "grid": "2d" }).bits, Some(26));
    Ok(())
}

/// The clustered collection `journal` (made by `collections`) lists its
/// clustered index with `clustered: true`; sent back as listed, the field
/// reaches the server, which decides (SecantusDB 0.7 refuses it as unknown).
fn clustered_index_listed_and_sent_back(db: &Database, events: &Events) -> Result<()> {
    let coll = db.collection::<Document>("journal");
    let listed: Vec<IndexModel> = coll.list_indexes().run()?.collect::<Result<_>>()?;
    let clustered = listed
        .into_iter()
        .find(|m| m.options.as_ref().and_then(|o| o.clustered()) == Some(true))
        .expect("the clustered index is listed as clustered");
    assert_eq!(clustered.keys, doc! { "_id": 1 });
    if let Err(error) = coll.create_index(clustered).run() {
        assert!(matches!(*error.kind, ErrorKind::Command(_)), "{error}");
    }
    let sent = last_sent(events, "createIndexes");
    let spec = sent.get_array("indexes").expect("the indexes sent")[0].as_document();
    assert_eq!(spec.and_then(|s| s.get("clustered")), Some(&Bson::Boolean(true)));
    Ok(())
}

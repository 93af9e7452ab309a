//! `db.run_cursor_command(..)` with its options (`batch_size`, `comment`,
//! `selection_criteria`) iterated to the end over several `getMore`s, a
//! tailable one (`cursor_type`, `max_time` for each `getMore`) that sees a
//! document inserted after it was opened, and
//! `let_vars` on find, aggregate, update and delete (`$$name` in `$expr`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::Result;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{
    ClientOptions, CreateCollectionOptions, CursorType, ReadPreference, SelectionCriteria,
};
use mongodb::sync::Client;

/// The `getMore`s among the commands recorded so far.
fn recorded_get_mores(started: &Mutex<Vec<Document>>) -> Vec<Document> {
    started
        .lock()
        .unwrap()
        .iter()
        .filter(|command| command.contains_key("getMore"))
        .cloned()
        .collect()
}

pub fn run(uri: &str) -> Result<()> {
    let started: Arc<Mutex<Vec<Document>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = started.clone();
    let mut options = ClientOptions::parse(uri).run()?;
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        if let CommandEvent::Started(event) = event {
            seen.lock().unwrap().push(event.command);
        }
    }));
    let client = Client::with_options(options)?;
    let db = client.database("compat_cursor_commands");
    let coll = db.collection::<Document>("items");
    coll.drop().run()?;
    coll.insert_many((0..7).map(|n| doc! { "n": n, "even": n % 2 == 0 }))
        .run()?;

    // The command's own batchSize sizes the first batch; the options size
    // and label each getMore.
    let cursor = db
        .run_cursor_command(doc! {
            "find": "items",
            "filter": {},
            "sort": { "n": 1 },
            "batchSize": 3,
        })
        .batch_size(2)
        .comment("compat cursor")
        .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        .run()?;
    let ns = cursor
        .map(|document| document.map(|d| d.get_i32("n").unwrap_or(-1)))
        .collect::<Result<Vec<i32>>>()?;
    assert_eq!(ns, (0..7).collect::<Vec<_>>());
    let get_mores = recorded_get_mores(&started);
    // 7 documents: 3, then 2 and 2 (and an empty last batch if the server
    // only finds the end on the next getMore).
    assert!(get_mores.len() >= 2, "{get_mores:?}");
    for get_more in &get_mores {
        assert_eq!(get_more.get_str("collection").ok(), Some("items"));
        assert_eq!(get_more.get("batchSize"), Some(&Bson::Int32(2)));
        assert_eq!(get_more.get_str("comment").ok(), Some("compat cursor"));
    }

    // A tailable, awaitData find on a capped collection: the cursor stays
    // open at the end, and each getMore waits at most max_time.
    let capped = db.collection::<Document>("capped");
    capped.drop().run()?;
    db.create_collection("capped")
        .with_options(
            CreateCollectionOptions::builder()
                .capped(true)
                .size(64 * 1024)
                .build(),
        )
        .run()?;
    capped.insert_many((0..3).map(|n| doc! { "n": n })).run()?;
    started.lock().unwrap().clear();
    let mut tail = db
        .run_cursor_command(doc! {
            "find": "capped",
            "tailable": true,
            "awaitData": true,
            "batchSize": 2,
        })
        .cursor_type(CursorType::TailableAwait)
        .batch_size(1)
        .max_time(Duration::from_millis(100))
        .run()?;
    for n in 0..3 {
        let document = tail.next().expect("a tailable cursor does not end")?;
        assert_eq!(document.get_i32("n").ok(), Some(n));
    }
    capped.insert_one(doc! { "n": 3 }).run()?;
    let late = tail.next().expect("a tailable cursor does not end")?;
    assert_eq!(late.get_i32("n").ok(), Some(3));
    drop(tail);
    let get_mores = recorded_get_mores(&started);
    assert!(get_mores.len() >= 2, "{get_mores:?}");
    for get_more in &get_mores {
        assert_eq!(get_more.get("batchSize"), Some(&Bson::Int32(1)));
        assert_eq!(get_more.get("maxTimeMS"), Some(&Bson::Int32(100)));
    }

    // An aggregate is a cursor command too.
    let mut grouped = db
        .run_cursor_command(doc! {
            "aggregate": "items",
            "pipeline": [
                { "$group": { "_id": "$even", "count": { "$sum": 1 } } },
                { "$sort": { "_id": 1 } },
            ],
            "cursor": {},
        })
        .run()?;
    let odd = grouped.next().expect("the odd group")?;
    assert_eq!(odd.get_bool("_id").ok(), Some(false));
    assert_eq!(odd.get_i32("count").ok(), Some(3));
    assert!(grouped.next().expect("the even group").is_ok());
    assert!(grouped.next().is_none());

    // let_vars: constants the filter, pipeline or update read as `$$name`.
    let at_least = doc! { "$expr": { "$gte": ["$n", "$$low"] } };
    let found = coll
        .find(at_least.clone())
        .let_vars(doc! { "low": 5 })
        .run()?
        .collect::<Result<Vec<Document>>>()?;
    assert_eq!(found.len(), 2);

    let mut aggregated = coll
        .aggregate([
            doc! { "$match": { "$expr": { "$lt": ["$n", "$$high"] } } },
            doc! { "$count": "below" },
        ])
        .let_vars(doc! { "high": 3 })
        .run()?;
    let count = aggregated.next().expect("a $count result")?;
    assert_eq!(count.get_i32("below").ok(), Some(3));

    let updated = coll
        .update_many(at_least.clone(), doc! { "$set": { "top": true } })
        .let_vars(doc! { "low": 4 })
        .run()?;
    assert_eq!(updated.modified_count, 3);
    let one = coll
        .update_one(
            doc! { "$expr": { "$eq": ["$n", "$$which"] } },
            vec![doc! { "$set": { "label": "$$tag" } }],
        )
        .let_vars(doc! { "which": 0, "tag": "zero" })
        .run()?;
    assert_eq!(one.modified_count, 1);
    let zero = coll.find_one(doc! { "n": 0 }).run()?.expect("n: 0");
    assert_eq!(zero.get_str("label").ok(), Some("zero"));

    let deleted = coll
        .delete_many(at_least)
        .let_vars(doc! { "low": 4 })
        .run()?;
    assert_eq!(deleted.deleted_count, 3);
    let gone = coll
        .delete_one(doc! { "$expr": { "$eq": ["$label", "$$tag"] } })
        .let_vars(doc! { "tag": "zero" })
        .run()?;
    assert_eq!(gone.deleted_count, 1);
    assert_eq!(coll.count_documents(doc! {}).run()?, 3);
    Ok(())
}

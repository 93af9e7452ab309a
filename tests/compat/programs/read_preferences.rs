//! `ReadPreference` as the official enum inside
//! `SelectionCriteria::ReadPreference`, its `ReadPreferenceOptions` built
//! by the builder, the URI's `readPreference`/`maxStalenessSeconds`/
//! `readPreferenceTags` parsed into it, and `SelectionCriteria::Predicate`
//! over `ServerInfo`, per operation and as the client's default; a
//! transaction's `selection_criteria`.

use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{
    ClientOptions, FindOptions, ReadPreference, ReadPreferenceOptions, SelectionCriteria, TagSet,
};
use mongodb::sync::Client;
use mongodb::{ServerInfo, ServerType};

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_read_preferences").collection::<Document>("c");
    coll.drop().run()?;
    coll.insert_many([doc! { "x": 1 }, doc! { "x": 2 }]).run()?;

    let staleness = ReadPreferenceOptions::builder()
        .max_staleness(Duration::from_secs(120))
        .build();
    let secondary_preferred = ReadPreference::SecondaryPreferred {
        options: Some(staleness.clone()),
    };
    assert_eq!(secondary_preferred, ReadPreference::secondary_preferred(staleness));
    assert_eq!(
        secondary_preferred.to_string(),
        "{ Mode: SecondaryPreferred, Max Staleness: 120s }"
    );
    let criteria = SelectionCriteria::ReadPreference(secondary_preferred.clone());
    assert_eq!(coll.find(doc! {}).selection_criteria(criteria.clone()).run()?.count(), 2);
    let options = FindOptions::builder().selection_criteria(criteria).build();
    assert_eq!(coll.find(doc! {}).with_options(options).run()?.count(), 2);
    let nearest = SelectionCriteria::ReadPreference(ReadPreference::Nearest { options: None });
    assert_eq!(coll.count_documents(doc! {}).selection_criteria(nearest).run()?, 2);
    let primary = SelectionCriteria::from(ReadPreference::Primary);
    assert_eq!(coll.distinct("x", doc! {}).selection_criteria(primary.clone()).run()?.len(), 2);

    // A transaction's reads: primary.
    let mut session = client.start_session().run()?;
    session.start_transaction().selection_criteria(primary).run()?;
    assert!(coll.find_one(doc! { "x": 1 }).session(&mut session).run()?.is_some());
    session.abort_transaction().run()?;

    // The connection string's read preference, in the same shape.
    let separator = if uri.contains('?') { '&' } else { '?' };
    let parsed = ClientOptions::parse(format!(
        "{uri}{separator}readPreference=secondaryPreferred&maxStalenessSeconds=120"
    ))
    .run()?;
    assert_eq!(
        parsed.selection_criteria,
        Some(SelectionCriteria::ReadPreference(secondary_preferred))
    );
    let tagged = ClientOptions::parse(format!(
        "{uri}{separator}readPreference=nearest&readPreferenceTags=dc:ny,rack:1&readPreferenceTags="
    ))
    .run()?;
    let ny: TagSet = [("dc", "ny"), ("rack", "1")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let expected = ReadPreference::Nearest {
        options: Some(ReadPreferenceOptions::builder().tag_sets(vec![ny, TagSet::new()]).build()),
    };
    assert_eq!(tagged.selection_criteria, Some(SelectionCriteria::ReadPreference(expected)));
    assert!(ClientOptions::parse(format!(
        "{uri}{separator}readPreference=primary&maxStalenessSeconds=120"
    ))
    .run()
    .is_err());

    // A predicate over the servers: only data-bearing ones here.
    let data_bearing = SelectionCriteria::Predicate(Arc::new(|server: &ServerInfo| {
        matches!(
            server.server_type(),
            ServerType::Standalone | ServerType::RsPrimary | ServerType::RsSecondary
        )
    }));
    assert_eq!(coll.find(doc! {}).selection_criteria(data_bearing.clone()).run()?.count(), 2);
    let nothing = SelectionCriteria::Predicate(Arc::new(|_: &ServerInfo| false));
    let mut options = ClientOptions::parse(format!("{uri}{separator}serverSelectionTimeoutMS=200")).run()?;
    options.selection_criteria = Some(nothing);
    let refusing = Client::with_options(options)?;
    let coll = refusing.database("compat_read_preferences").collection::<Document>("c");
    assert!(coll.count_documents(doc! {}).run().is_err());
    assert_eq!(coll.count_documents(doc! {}).selection_criteria(data_bearing).run()?, 2);
    Ok(())
}

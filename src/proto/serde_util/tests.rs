//! The public types' serde shapes: for each family, the exact document a
//! few values serialize to (the official driver's attributes, e.g.
//! `maxTimeMS` in milliseconds, `let`, skipped unset fields) and round trips.

use std::collections::HashMap;
use std::time::Duration;

use bson::{doc, oid::ObjectId, Bson, Document};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{CommandError, Error, InsertManyError};
use crate::event::cmap::{
    ConnectionCheckedOutEvent, ConnectionClosedEvent, ConnectionClosedReason,
};
use crate::event::command::{
    CommandEvent, CommandFailedEvent, CommandStartedEvent, ConnectionInfo,
};
use crate::event::sdam::{SdamEvent, ServerHeartbeatStartedEvent, TopologyOpeningEvent};
use crate::options::*;
use crate::results::{DatabaseSpecification, DeleteResult, UpdateResult, WriteError, WriteFailure};
use crate::Namespace;

fn written(value: &impl Serialize) -> Document {
    bson::to_document(value).expect("serializes to a document")
}

fn read<T: DeserializeOwned>(document: Document) -> T {
    bson::from_document(document).expect("deserializes")
}

fn tcp(host: &str) -> ServerAddress {
    ServerAddress::tcp(host, 27017)
}

#[test]
fn find_options_write_the_command_fields_and_read_back() {
    let options = FindOptions::builder()
        .limit(-5)
        .sort(doc! { "x": 1 })
        .max_time(Duration::from_millis(1500))
        .skip(3u64)
        .let_vars(doc! { "v": 1 })
        .selection_criteria(SelectionCriteria::from(ReadPreference::Nearest {
            options: None,
        }))
        .read_concern(ReadConcern::majority())
        .build();
    assert_eq!(
        written(&options),
        doc! { "limit": 5_i64, "maxTimeMS": 1500, "skip": 3_i64, "sort": { "x": 1 }, "let": { "v": 1 } }
    );
    let back: FindOptions =
        read(doc! { "limit": 5_i64, "maxTimeMS": 1500, "readConcern": { "level": "local" } });
    assert_eq!(back.limit, Some(5));
    assert_eq!(back.max_time, Some(Duration::from_millis(1500)));
    assert_eq!(back.read_concern, Some(ReadConcern::local()));
    // serde's own `Duration` form (what the official crate reads here) too.
    let back: FindOptions = read(doc! { "maxTimeMS": { "secs": 2_i64, "nanos": 0 } });
    assert_eq!(back.max_time, Some(Duration::from_secs(2)));
}

#[test]
fn options_skip_what_the_driver_sends_elsewhere() {
    let aggregate = AggregateOptions::builder()
        .batch_size(10u32)
        .max_await_time(Duration::from_secs(1))
        .write_concern(WriteConcern::majority())
        .build();
    assert_eq!(written(&aggregate), doc! { "cursor": { "batchSize": 10 } });
    let insert = InsertManyOptions::builder()
        .ordered(false)
        .write_concern(WriteConcern::nodes(1))
        .build();
    assert_eq!(written(&insert), doc! { "ordered": false });
    assert_eq!(written(&DropDatabaseOptions::default()), doc! {});
    assert_eq!(
        written(&BulkWriteOptions::default()),
        doc! { "ordered": true }
    );
    let drop = DropIndexOptions::builder()
        .max_time(Duration::from_secs(2))
        .build();
    assert_eq!(written(&drop), doc! { "maxTimeMS": 2000 });
    let err = bson::from_document::<DropIndexOptions>(doc! { "unknown": 1 }).unwrap_err();
    assert!(err.to_string().contains("unknown"), "{err}");
}

#[test]
fn deserialize_only_options_read_the_official_names() {
    let one: FindOneOptions =
        read(doc! { "maxTime": 250, "let": { "a": 1 }, "showRecordId": true });
    assert_eq!(one.max_time, Some(Duration::from_millis(250)));
    assert_eq!(one.let_vars, Some(doc! { "a": 1 }));
    assert_eq!(one.show_record_id, Some(true));
    let update: FindOneAndUpdateOptions =
        read(doc! { "returnDocument": "After", "maxTime": { "secs": 1_i64, "nanos": 0 } });
    assert_eq!(update.return_document, Some(ReturnDocument::After));
    assert_eq!(update.max_time, Some(Duration::from_secs(1)));
    let cursor: RunCursorCommandOptions =
        read(doc! { "maxTimeMS": 40, "cursorType": "tailableAwait" });
    assert_eq!(cursor.max_time, Some(Duration::from_millis(40)));
    assert_eq!(cursor.cursor_type, Some(CursorType::TailableAwait));
    let collection: CollectionOptions = read(doc! {
        "readConcern": { "level": "majority" },
        "writeConcern": { "w": 2 },
        "selectionCriteria": { "mode": "secondaryPreferred" },
    });
    assert_eq!(collection.write_concern, Some(WriteConcern::nodes(2)));
    assert!(bson::from_document::<ReturnDocument>(doc! {}).is_err());
}

#[test]
fn concerns_and_read_preferences_have_the_wire_shape() {
    let w = WriteConcern::builder()
        .w(Acknowledgment::Majority)
        .w_timeout(Duration::from_millis(100))
        .journal(true)
        .build();
    assert_eq!(
        written(&w),
        doc! { "w": "majority", "wtimeout": 100, "j": true }
    );
    assert_eq!(read::<WriteConcern>(written(&w)), w);
    assert_eq!(
        read::<WriteConcern>(doc! { "w": 3, "wtimeoutMS": 5, "journal": false }),
        WriteConcern::nodes(3)
            .with_w_timeout(Duration::from_millis(5))
            .with_journal(false)
    );
    assert_eq!(
        written(&ReadConcern::snapshot()),
        doc! { "level": "snapshot" }
    );
    assert_eq!(
        read::<ReadConcern>(doc! { "level": "future" }),
        ReadConcern::custom("future")
    );

    let mut tags = HashMap::new();
    tags.insert("dc".to_string(), "east".to_string());
    let secondary = ReadPreference::Secondary {
        options: Some(
            ReadPreferenceOptions::builder()
                .tag_sets(vec![tags])
                .max_staleness(Duration::from_secs(120))
                .build(),
        ),
    };
    let doc = written(&secondary);
    assert_eq!(
        doc,
        doc! { "mode": "secondary", "tagSets": [{ "dc": "east" }], "maxStalenessSeconds": 120 }
    );
    assert_eq!(read::<ReadPreference>(doc), secondary);
    assert_eq!(
        written(&ReadPreference::Primary),
        doc! { "mode": "primary" }
    );
    let err = bson::from_document::<ReadPreference>(
        doc! { "mode": "primary", "maxStalenessSeconds": 90 },
    )
    .unwrap_err();
    assert!(err.to_string().contains("primary"), "{err}");
}

#[test]
fn transaction_options_write_max_time_ms_and_read_max_commit_time_ms() {
    let options = TransactionOptions::builder()
        .max_commit_time(Duration::from_secs(3))
        .write_concern(WriteConcern::majority())
        .build();
    assert_eq!(written(&options), doc! { "maxTimeMS": 3000 });
    let back: TransactionOptions = read(doc! {
        "maxCommitTimeMS": 3000,
        "readPreference": { "mode": "primary" },
        "writeConcern": { "w": "majority" },
    });
    assert_eq!(back.max_commit_time, Some(Duration::from_secs(3)));
    assert_eq!(back.write_concern, Some(WriteConcern::majority()));
    let session: SessionOptions =
        read(doc! { "defaultTransactionOptions": { "maxCommitTimeMS": 10 } });
    assert_eq!(
        session
            .default_transaction_options
            .and_then(|t| t.max_commit_time),
        Some(Duration::from_millis(10))
    );
}

#[test]
fn write_models_hints_and_namespaces_are_untagged() {
    let model = UpdateOneModel::builder()
        .namespace(Namespace::new("db", "c.d"))
        .filter(doc! { "x": 1 })
        .update(doc! { "$set": { "y": 2 } })
        .upsert(true)
        .build();
    assert_eq!(
        written(&WriteModel::UpdateOne(model)),
        doc! { "filter": { "x": 1 }, "updateMods": { "$set": { "y": 2 } }, "upsert": true }
    );
    let json = |value: &dyn erased::Json| value.json();
    assert_eq!(json(&Hint::Name("x_1".into())), r#""x_1""#);
    assert_eq!(json(&Hint::Keys(doc! { "x": 1 })), r#"{"x":1}"#);
    assert_eq!(
        json(&UpdateModifications::Pipeline(vec![
            doc! { "$set": { "a": 1 } }
        ])),
        r#"[{"$set":{"a":1}}]"#
    );
    assert_eq!(json(&Namespace::new("db", "c.d")), r#""db.c.d""#);
    let namespace: Namespace = serde_json::from_str(r#""db.c.d""#).unwrap();
    assert_eq!(namespace, Namespace::new("db", "c.d"));
    assert!(serde_json::from_str::<Namespace>(r#""nodot""#).is_err());
    let hint: Hint = serde_json::from_str(r#"{"x":1}"#).unwrap();
    assert_eq!(hint, Hint::Keys(doc! { "x": 1 }));
}

/// Serializing through a trait object, for values that are not documents.
mod erased {
    pub(super) trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).expect("serializes")
        }
    }
}

fn connection() -> ConnectionInfo {
    ConnectionInfo {
        id: 7,
        server_id: Some(70),
        address: tcp("a"),
    }
}

#[test]
fn command_events_serialize_as_the_official_ones() {
    let started = CommandEvent::Started(CommandStartedEvent {
        command: doc! { "ping": 1 },
        db: "admin".into(),
        command_name: "ping".into(),
        request_id: 3,
        connection: connection(),
        service_id: None,
    });
    assert_eq!(
        written(&started),
        doc! {
            "command": { "ping": 1 }, "db": "admin", "commandName": "ping", "requestId": 3,
            "connection": { "id": 7_i64, "serverId": 70_i64, "address": { "Tcp": { "host": "a", "port": 27017 } } },
            "serviceId": Bson::Null,
        }
    );
    let failed = CommandFailedEvent {
        duration: Duration::from_millis(1),
        command_name: "find".into(),
        failure: Error::invalid_argument("no such thing"),
        request_id: 4,
        connection: connection(),
        service_id: None,
    };
    let failure = written(&failed).get_str("failure").unwrap().to_string();
    assert_eq!(failure, failed.failure.to_string());
}

#[test]
fn sdam_and_cmap_events_round_trip_what_the_official_reads() {
    let started = ServerHeartbeatStartedEvent {
        server_address: tcp("b"),
        awaited: false,
        driver_connection_id: 2,
        server_connection_id: Some(9),
    };
    let doc = written(&SdamEvent::ServerHeartbeatStarted(started.clone()));
    assert_eq!(doc.get_bool("awaited"), Ok(false));
    let back: ServerHeartbeatStartedEvent = read(doc);
    assert_eq!(back.server_address, started.server_address);
    assert_eq!(back.server_connection_id, Some(9));
    let opening = TopologyOpeningEvent {
        topology_id: ObjectId::new(),
    };
    assert_eq!(written(&opening), doc! {});

    let closed = ConnectionClosedEvent {
        address: tcp("c"),
        connection_id: 5,
        reason: ConnectionClosedReason::PoolClosed,
    };
    let doc = written(&closed);
    assert_eq!(doc.get_str("reason"), Ok("poolClosed"));
    let back: ConnectionClosedEvent = read(doc);
    assert_eq!(
        (back.connection_id, back.reason),
        (5, ConnectionClosedReason::PoolClosed)
    );
    // The official driver never reads an address or a duration back.
    assert_eq!(back.address.host(), "");
    let checked_out: ConnectionCheckedOutEvent = read(doc! {});
    assert_eq!(checked_out.connection_id, 42);
    assert_eq!(checked_out.duration, Duration::ZERO);
}

#[test]
fn results_and_errors_have_the_official_names() {
    let update = UpdateResult {
        matched_count: 2,
        modified_count: 1,
        upserted_id: None,
        acknowledged: true,
    };
    assert_eq!(
        written(&update),
        doc! { "matchedCount": 2_i64, "modifiedCount": 1_i64 }
    );
    assert_eq!(
        written(&DeleteResult::unacknowledged()),
        doc! { "deletedCount": 0_i64, "acknowledged": false }
    );
    let database: DatabaseSpecification =
        read(doc! { "name": "d", "sizeOnDisk": 8192.0, "empty": false });
    assert_eq!(database.size_on_disk, 8192);
    assert_eq!(written(&database).get_i64("sizeOnDisk"), Ok(8192));

    let reply = doc! { "ok": 0, "code": 11000, "codeName": "DuplicateKey", "errmsg": "dup", "errInfo": { "k": 1 } };
    let command: CommandError = read(reply.clone());
    assert_eq!(
        (
            command.code,
            command.code_name.as_str(),
            command.message.as_str()
        ),
        (11000, "DuplicateKey", "dup")
    );
    let write: WriteError = read(reply);
    assert_eq!(write.details, Some(doc! { "k": 1 }));
    let failure = WriteFailure::WriteError(write);
    let doc = written(&failure);
    assert_eq!(
        doc.get_document("WriteError").unwrap().get_str("errmsg"),
        Ok("dup")
    );
    assert_eq!(read::<WriteFailure>(doc), failure);
    let insert_many: InsertManyError = read(doc! {
        "writeErrors": [{ "index": 1, "code": 11000, "errmsg": "dup" }],
        "writeConcernError": { "code": 64, "errmsg": "timeout", "errorLabels": ["RetryableWriteError"] },
    });
    assert_eq!(
        insert_many.write_errors.as_ref().map(|e| e[0].index),
        Some(1)
    );
    let wce = insert_many.write_concern_error.as_ref().unwrap();
    assert_eq!((wce.message.as_str(), wce.labels.len()), ("timeout", 1));
    assert!(!written(&insert_many).contains_key("insertedIds"));
}

#[test]
fn index_options_write_the_index_specification_and_read_it_back() {
    let options = IndexOptions::builder()
        .name("ttl".to_string())
        .unique(true)
        .expire_after(Duration::from_secs(3600))
        .default_language("french".to_string())
        .sphere_2d_index_version(Sphere2DIndexVersion::V3)
        .version(IndexVersion::V2)
        .other(doc! { "prepareUnique": true })
        .build();
    let spec = doc! {
        "name": "ttl", "unique": true, "expireAfterSeconds": 3600,
        "default_language": "french", "2dsphereIndexVersion": 3, "v": 2,
        "prepareUnique": true,
    };
    assert_eq!(written(&options), spec);
    let back: IndexOptions = read(spec);
    assert_eq!(back.expire_after, Some(Duration::from_secs(3600)));
    assert_eq!(back.default_language.as_deref(), Some("french"));
    assert_eq!(back.sphere_2d_index_version, Some(Sphere2DIndexVersion::V3));
    assert_eq!(back.version, Some(IndexVersion::V2));
    assert_eq!(back.other, Some(doc! { "prepareUnique": true }));

    // `clustered` has no setter: read from a listing, it is written back.
    let listed = doc! { "bits": 26, "clustered": true };
    let clustered: IndexOptions = read(listed.clone());
    assert_eq!(
        (clustered.bits, clustered.clustered()),
        (Some(26), Some(true))
    );
    assert_eq!(written(&clustered), listed);
}

#[test]
fn create_collection_options_read_the_create_command_fields() {
    let options: CreateCollectionOptions = read(doc! {
        "capped": true, "size": 4096.0, "max": 10_i64,
        "validationLevel": "moderate", "viewOn": "base",
        "writeConcern": { "w": "majority" }, "expireAfterSeconds": 60_i64,
    });
    assert_eq!(options.capped, Some(true));
    assert_eq!(options.size, Some(4096));
    assert_eq!(options.max, Some(10));
    assert_eq!(options.validation_level, Some(ValidationLevel::Moderate));
    assert_eq!(options.view_on.as_deref(), Some("base"));
    assert_eq!(options.write_concern, Some(WriteConcern::majority()));
    assert_eq!(options.expire_after_seconds, Some(Duration::from_secs(60)));
    let negative = bson::from_document::<CreateCollectionOptions>(doc! { "size": -1 });
    assert!(negative.is_err());
}

#[test]
fn create_collection_options_read_clustered_index_as_a_document_or_true() {
    let shorthand: CreateCollectionOptions = read(doc! { "clusteredIndex": true });
    assert_eq!(shorthand.clustered_index, Some(ClusteredIndex::default()));
    let full: CreateCollectionOptions = read(doc! {
        "clusteredIndex": { "key": { "_id": 1 }, "unique": true, "name": "by_id", "v": 2 },
    });
    let index = full.clustered_index.unwrap();
    assert_eq!((index.name.as_deref(), index.v), (Some("by_id"), Some(2)));
    for meaningless in [
        doc! { "clusteredIndex": false },
        doc! { "clusteredIndex": 1 },
    ] {
        let error = bson::from_document::<CreateCollectionOptions>(meaningless).unwrap_err();
        assert!(error.to_string().contains("clusteredIndex"), "{error}");
    }
}

#[test]
fn expire_after_seconds_is_written_and_read_as_whole_seconds() {
    let options = CreateCollectionOptions::builder()
        .expire_after_seconds(Duration::from_secs(90))
        .build();
    let written = bson::to_document(&options).unwrap();
    assert_eq!(written.get("expireAfterSeconds"), Some(&Bson::Int32(90)));
    let back: CreateCollectionOptions = read(written);
    assert_eq!(back.expire_after_seconds, Some(Duration::from_secs(90)));
}

#[test]
fn credential_reads_its_field_names() {
    let credential: Credential = read(doc! {
        "username": "ann", "password": "secret", "source": "admin",
        "mechanism": "ScramSha256", "mechanism_properties": { "SERVICE_NAME": "db" },
    });
    assert_eq!(credential.username.as_deref(), Some("ann"));
    assert_eq!(credential.password.as_deref(), Some("secret"));
    assert_eq!(credential.source.as_deref(), Some("admin"));
    assert_eq!(credential.mechanism, Some(AuthMechanism::ScramSha256));
    assert_eq!(
        credential.mechanism_properties,
        Some(doc! { "SERVICE_NAME": "db" })
    );
}

#[test]
fn tls_and_tls_options_read_the_official_forms() {
    let tls: Tls = read(doc! { "Enabled": {
        "ca_file_path": "/etc/ca.pem", "allow_invalid_certificates": true,
    } });
    let Tls::Enabled(options) = tls else {
        panic!("not enabled: {tls:?}")
    };
    assert_eq!(options.ca_file_path, Some("/etc/ca.pem".into()));
    assert_eq!(options.allow_invalid_certificates, Some(true));
    let wrapped: Document = read(doc! { "tls": "Disabled" });
    let disabled: Tls = bson::from_bson(wrapped.get("tls").unwrap().clone()).unwrap();
    assert_eq!(disabled, Tls::Disabled);
}

#[test]
fn connection_string_and_host_info_write_their_fields_without_secrets() {
    let parsed = ConnectionString::parse(
        "mongodb://AKID:hunter2@db1:27017/app?authMechanism=MONGODB-AWS\
         &authMechanismProperties=AWS_SESSION_TOKEN:tok&tls=true&tlsCAFile=/etc/ca.pem\
         &tlsCertificateKeyFilePassword=keypass&connectTimeoutMS=2500&replicaSet=rs0",
    )
    .unwrap();
    assert_eq!(
        written(&parsed),
        doc! {
            "hostInfo": { "HostIdentifiers": [{ "Tcp": { "host": "db1", "port": 27017 } }] },
            // The official helpers write unset TLS and credential fields as null.
            "tls": {
                "tls": true, "tlscafile": "/etc/ca.pem",
                "tlscertificatekeyfile": Bson::Null, "tlsallowinvalidcertificates": Bson::Null,
            },
            "replicaSet": "rs0",
            "connectTimeout": 2500,
            "credential": { "authsource": Bson::Null, "authmechanism": "MONGODB-AWS" },
            "defaultDatabase": "app",
        }
    );
    let read_back: ConnectionString = bson::from_bson(Bson::String(
        "mongodb://db1:27017/?replicaSet=rs0".to_string(),
    ))
    .unwrap();
    assert_eq!(read_back.replica_set.as_deref(), Some("rs0"));
    let invalid = bson::from_bson::<ConnectionString>(Bson::String("mongodb://ann:pw@".into()));
    assert!(!invalid.unwrap_err().to_string().contains("pw"));
    let srv = HostInfo::DnsRecord("cluster.example.com".to_string());
    assert_eq!(
        bson::to_bson(&srv).unwrap(),
        Bson::Document(doc! { "DnsRecord": "cluster.example.com" })
    );
}

#[test]
fn client_options_read_the_official_field_names() {
    let options: ClientOptions = read(doc! {
        "hosts": ["db1:27018"],
        "appName": "reports",
        "loadbalanced": false,
        "connectTimeout": { "secs": 3_i64, "nanos": 0 },
        "credential": { "username": "ann", "password": "secret" },
        "tls": "Disabled",
        "serverApi": { "apiVersion": "1", "apiStrict": true },
        "writeConcern": { "w": 1 },
        "replSetName": "rs0",
    });
    assert_eq!(options.hosts, vec![ServerAddress::tcp("db1", 27018)]);
    assert_eq!(options.app_name.as_deref(), Some("reports"));
    assert_eq!(options.load_balanced, Some(false));
    assert_eq!(options.connect_timeout, Some(Duration::from_secs(3)));
    let credential = options.credential.as_ref().unwrap();
    assert_eq!(credential.password.as_deref(), Some("secret"));
    assert_eq!(options.tls, Some(Tls::Disabled));
    assert_eq!(
        options.server_api,
        Some(
            ServerApi::builder()
                .version(ServerApiVersion::V1)
                .strict(true)
                .build()
        )
    );
    assert_eq!(options.write_concern, Some(WriteConcern::nodes(1)));
    assert_eq!(options.repl_set_name.as_deref(), Some("rs0"));
    let defaults: ClientOptions = read(Document::new());
    assert!(defaults.hosts.is_empty());
}

#[test]
fn server_api_writes_and_reads_its_command_fields() {
    let api = ServerApi::builder()
        .version(ServerApiVersion::V1)
        .deprecation_errors(true)
        .build();
    let fields = doc! { "apiVersion": "1", "apiDeprecationErrors": true };
    assert_eq!(written(&api), fields);
    assert_eq!(read::<ServerApi>(fields), api);
}

//! GridFS against SecantusDB: round trips at chunk boundaries, a large file
//! with one chunk in hand, bad stored data as the spec's errors (never a
//! short read), uploads that stop leaving no file, the indexes made on the
//! first write, and `timeoutMS` over a whole stream.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use bson::{doc, Bson, Document};
use mongo_inline::error::GridFsErrorKind;
use mongo_inline::gridfs::GridFsBucket;
use mongo_inline::options::GridFsBucketOptions;
use mongo_inline::{Client, ErrorKind};
use support::server::TestServer;

fn client() -> Client {
    Client::with_uri_str(format!(
        "{}/?directConnection=true",
        TestServer::shared().uri()
    ))
    .unwrap()
}

/// A bucket in a database of its own, so tests do not see each other's files.
fn bucket(client: &Client, name: &str, chunk_size: u32) -> GridFsBucket {
    let db = client.database(&format!("gridfs_{name}"));
    db.drop().run().unwrap();
    db.gridfs_bucket(GridFsBucketOptions::default().chunk_size_bytes(chunk_size))
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

fn upload(bucket: &GridFsBucket, name: &str, data: &[u8]) -> Bson {
    let mut stream = bucket.open_upload_stream(name).run().unwrap();
    stream.write_all(data).unwrap();
    stream.close().unwrap();
    stream.id().clone()
}

fn download(bucket: &GridFsBucket, id: Bson) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    bucket
        .open_download_stream(id)
        .run()
        .map_err(std::io::Error::other)?
        .read_to_end(&mut out)?;
    Ok(out)
}

fn gridfs_kind(error: std::io::Error) -> GridFsErrorKind {
    let inner = error.into_inner().expect("a driver error inside");
    let error = inner
        .downcast::<mongo_inline::Error>()
        .expect("a driver error");
    match error.kind() {
        ErrorKind::GridFs(kind) => kind.clone(),
        other => panic!("not a GridFS error: {other}"),
    }
}

#[test]
fn files_round_trip_at_every_chunk_boundary() {
    let client = client();
    let bucket = bucket(&client, "boundaries", 4);
    for len in [0, 1, 3, 4, 5, 8, 9, 1000] {
        let data = pattern(len);
        let id = upload(&bucket, &format!("f{len}"), &data);
        assert_eq!(download(&bucket, id.clone()).unwrap(), data, "length {len}");
        let file = bucket.find_one(doc! { "_id": id }).run().unwrap().unwrap();
        assert_eq!((file.length, file.chunk_size_bytes), (len as u64, 4));
    }
    let chunks = client
        .database("gridfs_boundaries")
        .collection::<Document>("fs.chunks");
    // 0 + 1 + 1 + 1 + 2 + 2 + 3 + 250: no empty chunk for the empty file.
    assert_eq!(chunks.count_documents(doc! {}).run().unwrap(), 260);
}

#[test]
fn revisions_rename_delete_and_drop() {
    let client = client();
    let bucket = bucket(&client, "revisions", 255 * 1024);
    for text in ["one", "two", "three"] {
        upload(&bucket, "notes", text.as_bytes());
        std::thread::sleep(Duration::from_millis(2)); // distinct uploadDates
    }
    let read = |revision: i32| {
        let mut s = String::new();
        let stream = bucket
            .open_download_stream_by_name("notes")
            .revision(revision);
        stream.run().unwrap().read_to_string(&mut s).unwrap();
        s
    };
    assert_eq!(
        [read(0), read(1), read(-1), read(-3)],
        ["one", "two", "three", "one"]
    );
    let error = bucket
        .open_download_stream_by_name("notes")
        .revision(3)
        .run()
        .unwrap_err();
    assert!(matches!(
        error.kind(),
        ErrorKind::GridFs(GridFsErrorKind::RevisionNotFound { revision: 3 })
    ));
    let error = bucket
        .open_download_stream_by_name("nothing")
        .run()
        .unwrap_err();
    assert!(matches!(
        error.kind(),
        ErrorKind::GridFs(GridFsErrorKind::FileNotFound { .. })
    ));

    bucket.rename_by_name("notes", "memo").run().unwrap();
    let names: Vec<_> = bucket
        .find(doc! {})
        .sort(doc! { "uploadDate": 1 })
        .run()
        .unwrap()
        .map(|f| f.unwrap().filename.unwrap())
        .collect();
    assert_eq!(names, ["memo", "memo", "memo"]);
    let first = bucket
        .find_one(doc! {})
        .sort(doc! { "uploadDate": 1 })
        .run()
        .unwrap()
        .unwrap();
    bucket.rename(first.id.clone(), "first").run().unwrap();
    bucket.delete(first.id.clone()).run().unwrap();
    assert!(bucket.delete(first.id).run().is_err(), "deleted twice");
    bucket.delete_by_name("memo").run().unwrap();
    assert!(bucket.find_one(doc! {}).run().unwrap().is_none());
    assert!(bucket.rename(Bson::Int32(42), "x").run().is_err());
    bucket.drop().run().unwrap();
}

#[test]
fn the_first_write_creates_the_indexes_once() {
    let client = client();
    let bucket = bucket(&client, "indexes", 1024);
    upload(&bucket, "a", b"abc");
    let db = client.database("gridfs_indexes");
    let keys = |coll: &str| -> Vec<Document> {
        db.collection::<Document>(coll)
            .list_indexes()
            .run()
            .unwrap()
            .map(|i| i.unwrap().keys)
            .collect()
    };
    assert!(keys("fs.files").contains(&doc! { "filename": 1, "uploadDate": 1 }));
    assert!(keys("fs.chunks").contains(&doc! { "files_id": 1, "n": 1 }));
    // Indexes the shell made (doubles) count as present: nothing is added.
    let other = client.database("gridfs_indexes_shell");
    other.drop().run().unwrap();
    other
        .run_command(doc! { "createIndexes": "fs.files", "indexes": [
        { "key": { "filename": 1.0, "uploadDate": 1.0 }, "name": "by_name" } ] })
        .run()
        .unwrap();
    upload(&other.gridfs_bucket(None), "b", b"abc");
    let files_indexes = other
        .collection::<Document>("fs.files")
        .list_index_names()
        .run()
        .unwrap();
    assert_eq!(files_indexes.len(), 2, "{files_indexes:?}");
}

#[test]
fn a_large_file_streams_with_about_one_chunk_in_hand() {
    let client = client();
    let bucket = bucket(&client, "large", 255 * 1024);
    let len = 6 * 1024 * 1024 + 12345;
    let mut stream = bucket.open_upload_stream("big").run().unwrap();
    // Written in odd-sized pieces, as a pipe delivers them.
    let mut written = 0;
    let piece = pattern(100_003);
    while written < len {
        let n = piece.len().min(len - written);
        stream.write_all(&piece[..n]).unwrap();
        written += n;
    }
    stream.close().unwrap();
    let id = stream.id().clone();
    let mut reader = bucket.open_download_stream(id).run().unwrap();
    let (mut total, mut buf) = (0usize, vec![0u8; 65_536]);
    let mut expected = piece.iter().cycle();
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        assert!(
            buf[..n].iter().zip(&mut expected).all(|(a, b)| a == b),
            "at {total}"
        );
        total += n;
    }
    assert_eq!(total, len);
}

/// A file of 10 bytes in chunks of 4, and the raw chunks collection.
fn stored_ten_bytes(
    client: &Client,
    name: &str,
) -> (GridFsBucket, Bson, mongo_inline::Collection<Document>) {
    let bucket = bucket(client, name, 4);
    let id = upload(&bucket, "ten", &pattern(10));
    let chunks = client
        .database(&format!("gridfs_{name}"))
        .collection::<Document>("fs.chunks");
    (bucket, id, chunks)
}

#[test]
fn bad_stored_data_is_an_error_never_a_short_read() {
    let client = client();

    let (bucket, id, chunks) = stored_ten_bytes(&client, "missing_last");
    chunks
        .delete_one(doc! { "files_id": id.clone(), "n": 2 })
        .run()
        .unwrap();
    let error = download(&bucket, id).unwrap_err();
    assert!(matches!(
        gridfs_kind(error),
        GridFsErrorKind::MissingChunk { n: 2 }
    ));

    let (bucket, id, chunks) = stored_ten_bytes(&client, "missing_middle");
    chunks
        .delete_one(doc! { "files_id": id.clone(), "n": 1 })
        .run()
        .unwrap();
    let error = download(&bucket, id).unwrap_err();
    assert!(matches!(
        gridfs_kind(error),
        GridFsErrorKind::MissingChunk { n: 1 }
    ));

    let (bucket, id, chunks) = stored_ten_bytes(&client, "short_chunk");
    let short = bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: vec![1, 2, 3],
    };
    chunks
        .update_one(
            doc! { "files_id": id.clone(), "n": 1 },
            doc! { "$set": { "data": short } },
        )
        .run()
        .unwrap();
    let error = download(&bucket, id).unwrap_err();
    assert!(matches!(
        gridfs_kind(error),
        GridFsErrorKind::WrongSizeChunk {
            actual_size: 3,
            expected_size: 4,
            n: 1
        }
    ));

    let (bucket, id, chunks) = stored_ten_bytes(&client, "extra_chunk");
    let extra = bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: vec![9; 4],
    };
    chunks
        .insert_one(doc! { "files_id": id.clone(), "n": 3, "data": extra })
        .run()
        .unwrap();
    let error = download(&bucket, id).unwrap_err();
    assert!(matches!(
        gridfs_kind(error),
        GridFsErrorKind::WrongNumberOfChunks {
            actual_number: 4,
            expected_number: 3
        }
    ));

    // The files document says 14 bytes; the chunks hold 10.
    let (bucket, id, _) = stored_ten_bytes(&client, "length_disagrees");
    client
        .database("gridfs_length_disagrees")
        .collection::<Document>("fs.files")
        .update_one(
            doc! { "_id": id.clone() },
            doc! { "$set": { "length": 14 } },
        )
        .run()
        .unwrap();
    let mut stream = bucket.open_download_stream(id).run().unwrap();
    let mut out = Vec::new();
    let error = stream.read_to_end(&mut out).unwrap_err();
    assert!(matches!(
        gridfs_kind(error),
        GridFsErrorKind::WrongSizeChunk { n: 2, .. }
    ));
    // The error stays: a further read does not pass the stream off as ended.
    assert!(stream.read(&mut [0; 16]).is_err());
}

#[test]
fn an_abort_whose_chunks_cannot_be_deleted_is_an_abort_error() {
    // The fail point only answers this client (its appName), so the other
    // tests of the binary, on the same server, are not touched.
    let client = Client::with_uri_str(format!(
        "{}/?directConnection=true&appName=gridfs_abort_error",
        TestServer::shared().uri()
    ))
    .unwrap();
    let bucket = bucket(&client, "abort_error", 4);
    let mut upload = bucket.open_upload_stream("aborted").run().unwrap();
    upload.write_all(&pattern(10)).unwrap();
    let admin = client.database("admin");
    admin
        .run_command(doc! {
            "configureFailPoint": "failCommand", "mode": { "times": 1 },
            "data": {
                "failCommands": ["delete"], "errorCode": 2,
                "appName": "gridfs_abort_error",
            },
        })
        .run()
        .unwrap();
    let error = upload.abort().expect_err("the chunks cannot be deleted");
    admin
        .run_command(doc! { "configureFailPoint": "failCommand", "mode": "off" })
        .run()
        .unwrap();
    match error.kind() {
        ErrorKind::GridFs(GridFsErrorKind::AbortError {
            original_error: None,
            delete_error,
            ..
        }) => assert_eq!(delete_error.code(), Some(2), "{delete_error}"),
        other => panic!("not an abort error: {other:?}"),
    }
}

#[test]
fn an_upload_that_stops_leaves_no_file() {
    let client = client();
    let bucket = bucket(&client, "stopped", 4);
    let chunks = client
        .database("gridfs_stopped")
        .collection::<Document>("fs.chunks");
    let files = client
        .database("gridfs_stopped")
        .collection::<Document>("fs.files");

    let mut aborted = bucket.open_upload_stream("aborted").run().unwrap();
    aborted.write_all(&pattern(10)).unwrap();
    assert_eq!(chunks.count_documents(doc! {}).run().unwrap(), 2);
    aborted.abort().unwrap();
    assert!(
        aborted.write_all(b"more").is_err(),
        "writes after abort fail"
    );
    assert!(aborted.close().is_err());

    // A writer that fails half way drops its stream unclosed.
    {
        let mut dropped = bucket.open_upload_stream("dropped").run().unwrap();
        dropped.write_all(&pattern(10)).unwrap();
    }
    assert_eq!(chunks.count_documents(doc! {}).run().unwrap(), 0);
    assert_eq!(files.count_documents(doc! {}).run().unwrap(), 0);

    let mut closed = bucket.open_upload_stream("closed").run().unwrap();
    closed.close().unwrap();
    assert!(closed.write(b"x").is_err(), "writes after close fail");
    assert_eq!(files.count_documents(doc! {}).run().unwrap(), 1);
    let error = bucket
        .open_upload_stream("zero")
        .chunk_size_bytes(0)
        .run()
        .unwrap_err();
    assert!(error.to_string().contains("chunk_size_bytes 0"), "{error}");
}

#[test]
fn timeout_ms_bounds_a_whole_download() {
    let client = client();
    let name = "timeout_whole";
    // Chunks of 256 KiB come one per batch: a getMore each.
    let bucket = bucket(&client, name, 256 * 1024);
    let id = upload(&bucket, "f", &pattern(6 * 256 * 1024));
    let slow = client
        .database(&format!("gridfs_{name}"))
        .with_timeout(Duration::from_millis(150));
    let bucket = slow.gridfs_bucket(GridFsBucketOptions::default());
    let admin = client.database("admin");
    // Each getMore takes 60 ms: two fit in 150 ms, five do not.
    admin
        .run_command(doc! {
            "configureFailPoint": "failCommand", "mode": { "times": 10 },
            "data": { "failCommands": ["getMore"], "blockConnection": true, "blockTimeMS": 60 },
        })
        .run()
        .unwrap();
    let mut stream = bucket.open_download_stream(id).run().unwrap();
    let result = stream.read_to_end(&mut Vec::new());
    admin
        .run_command(doc! { "configureFailPoint": "failCommand", "mode": "off" })
        .run()
        .unwrap();
    let error = result.unwrap_err().into_inner().unwrap();
    let error = error.downcast::<mongo_inline::Error>().unwrap();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }) || error.is_network_timeout(),
        "{error}"
    );
}

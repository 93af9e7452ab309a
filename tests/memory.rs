//! Peak memory while reading a large reply: a FaaS handler runs under a
//! memory cap, so reading a batch must not cost many times its size. A
//! counting global allocator records the peak of live heap bytes; the test
//! reads 40 MB (batches of up to 16 MiB, the server's cap) through `run_command` and through `find`, prints
//! the figures and bounds them by 2.5× the reply's size (1.75× through a
//! cursor, which keeps the batch as bytes). A GridFS file streamed in and
//! out holds one chunk, however long it is.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Document};
use mongo_inline::options::FindOptions;
use mongo_inline::Client;
use support::heap::peak_during;
use support::server::TestServer;

#[global_allocator]
static ALLOCATOR: support::heap::Counting = support::heap::Counting;

const DOCUMENTS: usize = 40;
const DOCUMENT_BYTES: usize = 1_000_000;

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1_000_000.0
}

/// One test: the allocator counts every thread, so nothing else may run
/// in this binary at the same time.
#[test]
fn reading_large_batches_peaks_under_two_and_a_half_times_the_reply() {
    let server = TestServer::start();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let db = client.database("memory");
    let coll = db.collection::<Document>("big");
    let filler = "x".repeat(DOCUMENT_BYTES);
    for i in 0..DOCUMENTS {
        coll.insert_one(doc! { "_id": i as i32, "filler": filler.as_str() })
            .run()
            .unwrap();
    }
    drop(filler);

    let command = doc! { "find": "big", "batchSize": DOCUMENTS as i32 };
    let (reply, peak) = peak_during(|| db.run_command(command.clone()).run().unwrap());
    let batch = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .expect("a firstBatch")
        .len();
    // The server caps a batch at 16 MiB (as MongoDB does): the first
    // reply is the largest the cursor below reads.
    assert!(
        batch >= 10,
        "a batch of {batch} documents is too small to measure"
    );
    let reply_size = bson::to_vec(&reply).unwrap().len();
    drop(reply);
    println!(
        "run_command find: reply {:.1} MB, peak {:.1} MB ({:.2}x)",
        mb(reply_size),
        mb(peak),
        peak as f64 / reply_size as f64
    );

    let options = FindOptions::default().batch_size(DOCUMENTS as u32);
    let (count, find_peak) = peak_during(|| {
        let mut count = 0;
        for document in coll.find(doc! {}).with_options(options).run().unwrap() {
            document.unwrap();
            count += 1;
        }
        count
    });
    assert_eq!(count, DOCUMENTS);
    println!(
        "find (cursor, each document dropped as read): peak {:.1} MB ({:.2}x)",
        mb(find_peak),
        find_peak as f64 / reply_size as f64
    );

    let bound = reply_size * 5 / 2;
    assert!(peak <= bound, "run_command peaked at {} MB", mb(peak));
    // A cursor keeps its batch as the reply's bytes and decodes one
    // document at a time: the reply once, plus what growing the read
    // buffer costs (it grows with the bytes received, never from the
    // length field alone). A `Document` tree of the batch beside the
    // bytes made it 2.05x.
    let cursor_bound = reply_size * 7 / 4;
    assert!(
        find_peak <= cursor_bound,
        "find peaked at {} MB",
        mb(find_peak)
    );

    gridfs_streams_hold_one_chunk(&db);
}

/// A GridFS file streamed in and out holds one chunk however long it is
/// (the 1 GB round trip through the CLI is benches/gridfs_cli_rss.sh):
/// writing, the chunk document the caller's bytes are appended to, which
/// the insert's message is written from; reading, the reply the chunk came
/// in, whose buffer receives the next one.
fn gridfs_streams_hold_one_chunk(db: &mongo_inline::Database) {
    use std::io::Read;
    let bucket = db.gridfs_bucket(None);
    let chunk = bucket.chunk_size_bytes() as usize;
    let length = 12 * chunk as u64 + 1;
    let (id, upload_peak) = peak_during(|| {
        let mut upload = bucket.open_upload_stream("memory.bin").run().unwrap();
        let copied = std::io::copy(&mut std::io::repeat(7).take(length), &mut upload).unwrap();
        assert_eq!(copied, length);
        upload.close().unwrap();
        upload.id().clone()
    });
    let (read, download_peak) = peak_during(|| {
        let mut download = bucket.open_download_stream(id).run().unwrap();
        std::io::copy(&mut download, &mut std::io::sink()).unwrap()
    });
    assert_eq!(read, length);
    let in_chunks = |bytes: usize| bytes as f64 / chunk as f64;
    println!(
        "GridFS, {length} bytes in chunks of {chunk}: upload peak {:.2} chunks, download peak {:.2} chunks",
        in_chunks(upload_peak),
        in_chunks(download_peak)
    );
    // Measured 1.03 and 1.08 chunks. A doubling chunk document and the
    // buffer kept beside it made the upload 4.0 chunks, then the chunk
    // document beside the message made of it 2.0; the chunk before the
    // next one in hand made the download 3.0, then the chunk copied out of
    // its reply and the next reply's buffer growing as it arrived 2.0.
    let one_chunk_and_a_bit = chunk * 5 / 4;
    assert!(
        upload_peak < one_chunk_and_a_bit,
        "upload peaked at {:.2} chunks",
        in_chunks(upload_peak)
    );
    assert!(
        download_peak < one_chunk_and_a_bit,
        "download peaked at {:.2} chunks",
        in_chunks(download_peak)
    );
}

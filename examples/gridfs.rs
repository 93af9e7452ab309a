//! GridFS: store a file larger than a document and read it back, streamed
//! through `std::io` with about one chunk (255 KiB) in memory, as a CGI
//! handler serving files or a backup script would.
//!
//! ```text
//! MONGODB_URI='mongodb://127.0.0.1:27017/' cargo run --example gridfs
//! ```

use std::io::{Read, Write};

use mongo_inline::bson::doc;
use mongo_inline::options::GridFsUploadOptions;
use mongo_inline::Client;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017/".into());
    let client = Client::with_uri_str(&uri)?;
    let bucket = client.database("examples").gridfs_bucket(None);
    bucket.drop().run()?;

    // Upload from any reader: here 3 MiB generated on the fly; a file or
    // stdin works the same way with `std::io::copy`.
    let size = 3 * 1024 * 1024;
    let mut source = std::io::repeat(b'x').take(size);
    let mut upload = bucket
        .open_upload_stream("backup.bin")
        .with_options(GridFsUploadOptions::default().metadata(doc! { "kind": "backup" }))
        .run()?;
    std::io::copy(&mut source, &mut upload)?;
    upload.close()?;
    println!("stored {} bytes as {}", size, upload.id());

    // Find by metadata, then stream the latest revision back out.
    let file = bucket
        .find_one(doc! { "metadata.kind": "backup" })
        .run()?
        .expect("the file just stored");
    println!(
        "{} has {} bytes in chunks of {}",
        file.filename.as_deref().unwrap_or("?"),
        file.length,
        file.chunk_size_bytes
    );
    let mut download = bucket.open_download_stream_by_name("backup.bin").run()?;
    let copied = std::io::copy(&mut download, &mut std::io::sink())?;
    assert_eq!(copied, size);
    println!("read back {copied} bytes");

    // An upload that stops before `close` leaves no file behind.
    let mut interrupted = bucket.open_upload_stream("partial.bin").run()?;
    interrupted.write_all(&[0; 300 * 1024])?;
    drop(interrupted);
    let partial = bucket.find_one(doc! { "filename": "partial.bin" }).run()?;
    assert!(partial.is_none());
    println!("the interrupted upload left no file");

    bucket.delete(file.id).run()?;
    Ok(())
}

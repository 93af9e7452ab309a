//! The `bucket` entity and the GridFS operations of the unified format
//! (`source/gridfs/tests`, the GridFS retryable-reads tests and the
//! unified format's own GridFS test). A child of `runner`, sharing its
//! argument and outcome types.

use std::io::{Read, Write};

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document};
use mongo_inline::gridfs::GridFsBucket;
use mongo_inline::options::GridFsBucketOptions;
use mongo_inline::Database;

use super::OpTimeout;
use super::{concerns, fail, skip, Args, DriverResult, Outcome};

macro_rules! bucket_op_timeout {
    ($($builder:ident),* $(,)?) => {
        $(impl OpTimeout for mongo_inline::action::gridfs::$builder<'_> {
            fn set_timeout(self, timeout: std::time::Duration) -> Self {
                self.timeout(timeout)
            }
        })*
    };
}

bucket_op_timeout!(
    OpenUploadStream,
    OpenDownloadStream,
    OpenDownloadStreamByName,
    Delete,
    DeleteByName,
    Find,
    Rename,
    RenameByName,
    Drop,
);

/// A bucket entity on `db` with the spec's `bucketOptions`.
pub(super) fn create_bucket(db: &Database, spec: &Document) -> Outcome<GridFsBucket> {
    let mut options = GridFsBucketOptions::default();
    if let Ok(given) = spec.get_document("bucketOptions") {
        let mut rest = Document::new();
        for (key, value) in given {
            match key.as_str() {
                "bucketName" => {
                    options.bucket_name = Some(value.as_str().ok_or("bucketName")?.to_string())
                }
                "chunkSizeBytes" => {
                    let size = value.as_i64().or(value.as_i32().map(i64::from));
                    options.chunk_size_bytes = Some(size.ok_or("chunkSizeBytes")? as u32);
                }
                _ => {
                    rest.insert(key, value.clone());
                }
            }
        }
        let handle = concerns(&rest, "bucketOptions")?;
        if handle.timeout.is_some() {
            return skip("bucketOptions.timeoutMS not supported by the runner");
        }
        if handle.read_preference.is_some() {
            return skip("bucketOptions.readPreference not supported by the runner");
        }
        options.read_concern = handle.read_concern;
        options.write_concern = handle.write_concern;
    }
    Ok(db.gridfs_bucket(options))
}

/// Runs GridFS operation `name` on `bucket`.
pub(super) fn bucket_operation(
    bucket: &GridFsBucket,
    name: &str,
    mut args: Args,
) -> Outcome<DriverResult> {
    let timeout = args.millis("timeoutMS")?;
    let result = match name {
        "upload" => {
            let filename = args.take("filename").ok_or("upload without filename")?;
            let filename = filename.as_str().ok_or("filename")?.to_string();
            let source = hex_bytes(args.take("source"))?;
            let mut action = bucket.open_upload_stream(filename).op_timeout(timeout);
            if let Some(size) = args.int("chunkSizeBytes")? {
                action = action.chunk_size_bytes(size as u32);
            }
            if let Some(metadata) = args.doc("metadata")? {
                action = action.metadata(metadata);
            }
            match args.bool("disableMD5")? {
                // The driver never computes MD5, which the option turns off.
                Some(true) | None => {}
                Some(false) => return skip("upload with MD5: the driver does not compute MD5"),
            }
            args.done()?;
            upload(action, &source)
        }
        "download" => {
            let id = args.take("id").ok_or("download without id")?;
            args.done()?;
            bucket
                .open_download_stream(id)
                .op_timeout(timeout)
                .run()
                .and_then(read_all)
        }
        "downloadByName" => {
            let filename = args
                .take("filename")
                .ok_or("downloadByName without filename")?;
            let mut action = bucket
                .open_download_stream_by_name(filename.as_str().ok_or("filename")?)
                .op_timeout(timeout);
            if let Some(revision) = args.int("revision")? {
                action = action.revision(revision as i32);
            }
            args.done()?;
            action.run().and_then(read_all)
        }
        "delete" => {
            let id = args.take("id").ok_or("delete without id")?;
            args.done()?;
            bucket
                .delete(id)
                .op_timeout(timeout)
                .run()
                .map(|()| Bson::Null)
        }
        "deleteByName" => {
            let filename = args
                .take("filename")
                .ok_or("deleteByName without filename")?;
            args.done()?;
            let filename = filename.as_str().ok_or("filename")?;
            bucket
                .delete_by_name(filename)
                .op_timeout(timeout)
                .run()
                .map(|()| Bson::Null)
        }
        "rename" => {
            let id = args.take("id").ok_or("rename without id")?;
            let new_name = args
                .take("newFilename")
                .ok_or("rename without newFilename")?;
            args.done()?;
            let new_name = new_name.as_str().ok_or("newFilename")?;
            bucket
                .rename(id, new_name)
                .op_timeout(timeout)
                .run()
                .map(|()| Bson::Null)
        }
        "renameByName" => {
            let filename = args
                .take("filename")
                .ok_or("renameByName without filename")?;
            let new_name = args
                .take("newFilename")
                .ok_or("renameByName without newFilename")?;
            args.done()?;
            let (filename, new_name) = (
                filename.as_str().ok_or("filename")?,
                new_name.as_str().ok_or("newFilename")?,
            );
            bucket
                .rename_by_name(filename, new_name)
                .op_timeout(timeout)
                .run()
                .map(|()| Bson::Null)
        }
        "find" => {
            let filter = args.doc("filter")?.unwrap_or_default();
            let mut action = bucket.find(filter).op_timeout(timeout);
            if let Some(n) = args.int("batchSize")? {
                action = action.batch_size(n as u32);
            }
            if let Some(n) = args.int("limit")? {
                action = action.limit(n);
            }
            if let Some(n) = args.int("skip")? {
                action = action.skip(n as u64);
            }
            if let Some(sort) = args.doc("sort")? {
                action = action.sort(sort);
            }
            if let Some(b) = args.bool("allowDiskUse")? {
                action = action.allow_disk_use(b);
            }
            if let Some(t) = args.millis("maxTimeMS")? {
                action = action.max_time(t);
            }
            args.done()?;
            action.run().and_then(|cursor| {
                let files = cursor
                    .map(|file| file.map(|f| bson::to_bson(&f).unwrap_or(Bson::Null)))
                    .collect::<mongo_inline::Result<Vec<Bson>>>()?;
                Ok(Bson::Array(files))
            })
        }
        "drop" => {
            args.done()?;
            bucket.drop().op_timeout(timeout).run().map(|()| Bson::Null)
        }
        other => {
            return skip(format!(
                "GridFS operation {other} not supported by the runner"
            ))
        }
    };
    Ok(result)
}

fn upload(
    action: mongo_inline::action::gridfs::OpenUploadStream<'_>,
    source: &[u8],
) -> DriverResult {
    let mut stream = action.run()?;
    let id = stream.id().clone();
    stream.write_all(source).map_err(into_driver_error)?;
    stream.close().map_err(into_driver_error)?;
    Ok(id)
}

fn read_all(mut stream: mongo_inline::gridfs::GridFsDownloadStream) -> DriverResult {
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).map_err(into_driver_error)?;
    Ok(Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    }))
}

/// The driver's error inside a stream's `io::Error`.
fn into_driver_error(error: std::io::Error) -> mongo_inline::Error {
    match error
        .into_inner()
        .map(|e| e.downcast::<mongo_inline::Error>())
    {
        Some(Ok(e)) => *e,
        Some(Err(other)) => mongo_inline::Error::client(format!("not a driver error: {other}")),
        None => mongo_inline::Error::client("an I/O error without a driver error"),
    }
}

fn hex_bytes(source: Option<Bson>) -> Outcome<Vec<u8>> {
    let Some(Bson::Document(d)) = source else {
        return fail("upload source is not {$$hexBytes: ...}");
    };
    let hex = d.get_str("$$hexBytes").map_err(|e| e.to_string())?;
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("bad hex {hex:?}").into())
        })
        .collect()
}

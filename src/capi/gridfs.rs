//! GridFS through the C ABI: a bucket handle (`mi_gridfs_bucket`), upload
//! and download stream handles, and the bucket's operations. A file id
//! goes in as a BSON document whose first element's value is the id (e.g.
//! `{"_id": ObjectId(...)}`), since BSON has no bare values.

use std::io::{Read, Write};

use bson::{Bson, Document};

use super::error::{Domain, Failure};
use super::ops::{configure, failure, options};
use super::{new_cursor, write_buffer, MiBuffer, MiClient, MiCursor};
use crate::gridfs::{GridFsBucket, GridFsDownloadStream, GridFsUploadStream};
use crate::proto::gridfs::{
    GridFsBucketOptions, GridFsDownloadByNameOptions, GridFsFindOneOptions, GridFsFindOptions,
    GridFsUploadOptions,
};

/// `mi_gridfs_bucket`.
pub struct MiGridFsBucket(GridFsBucket);
/// `mi_gridfs_upload`.
pub struct MiGridFsUpload(GridFsUploadStream);
/// `mi_gridfs_download`.
pub struct MiGridFsDownload(GridFsDownloadStream);

/// The id a `{<name>: id}` document carries.
fn id_of(document: Document, name: &str) -> Result<Bson, Failure> {
    document
        .into_iter()
        .next()
        .map(|(_, id)| id)
        .ok_or_else(|| Failure::argument(name, "is empty: it carries the file id as {\"_id\": id}"))
}

/// An I/O error of a stream: the driver error inside it, else its text.
fn io_failure(error: &std::io::Error) -> Failure {
    match error
        .get_ref()
        .and_then(|e| e.downcast_ref::<crate::Error>())
    {
        Some(inner) => failure(inner),
        None => Failure::new(Domain::Client, error.to_string()),
    }
}

c_function! {
    /// A bucket of database `db` (`"fs"` unless options say `bucketName`);
    /// options are `GridFsBucketOptions` (`bucketName`, `chunkSizeBytes`,
    /// `writeConcern`, `readConcern`, `readPreference`) and `timeoutMS` (of
    /// each of the bucket's operations). No I/O.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_gridfs_bucket_new(
        client: mut MiClient,
        db: str,
        options: options options_len,
        out: mut *mut MiGridFsBucket,
    ) {
        client.used = true;
        let (options, timing) = super::ops::split_timeout(options, false)?;
        let mut db = client.client.database(db);
        if let Some(timeout) = timing.timeout {
            db = db.with_timeout(timeout);
        }
        let bucket = db.gridfs_bucket(options!(GridFsBucketOptions, options));
        *out = Box::into_raw(Box::new(MiGridFsBucket(bucket)));
        Ok(())
    }
}

/// Frees a bucket handle; NULL is a no-op. Streams opened from it keep
/// working.
///
/// # Safety
/// `bucket` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_bucket_free(bucket: *mut MiGridFsBucket) {
    // SAFETY: by the function's contract.
    unsafe { super::free_boxed(bucket) }
}

c_function! {
    /// Opens an upload of a file called `filename`; options are
    /// `GridFsUploadOptions` (`chunkSizeBytes`, `metadata`) and `id` (the file's
    /// id; a new ObjectId when absent). Nothing is stored until
    /// `mi_gridfs_upload_close`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_gridfs_open_upload_stream(
        bucket: mut MiGridFsBucket,
        filename: str,
        options: options options_len,
        out: mut *mut MiGridFsUpload,
    ) {
        let mut options = options.unwrap_or_default();
        let id = options
            .iter()
            .position(|(key, _)| key == "id")
            .map(|at| options.remove(at).1);
        let mut action = configure!(
            bucket.0.open_upload_stream(filename),
            GridFsUploadOptions,
            Some(options)
        );
        if let Some(id) = id {
            action = action.id(id);
        }
        let stream = action.run().map_err(|e| failure(&e))?;
        *out = Box::into_raw(Box::new(MiGridFsUpload(stream)));
        Ok(())
    }
}

c_function! {
    /// Writes `len` bytes to the upload (whole chunks are sent as they fill).
    ///
    /// # Safety
    /// `upload` NULL or live; `data` valid for `len` bytes (NULL if `len` is 0).
    fn mi_gridfs_upload_write(
        upload: mut MiGridFsUpload,
        data: raw *const u8,
        len: raw usize,
    ) {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: by contract.
        let data = unsafe { super::bytes_arg(data, len, "data")? };
        upload.0.write_all(data).map_err(|e| io_failure(&e))
    }
}

c_function! {
    /// The file's id: `result` gets `{"_id": id}`.
    ///
    /// # Safety
    /// `upload` NULL or live; `result` NULL or writable.
    fn mi_gridfs_upload_id(
        upload: mut MiGridFsUpload,
        result: mut MiBuffer,
    ) {
        write_buffer(result, &bson::doc! { "_id": upload.0.id().clone() })
    }
}

c_function! {
    /// Stores the rest and the files document: the file exists once this
    /// succeeds. Closing twice, or after an abort, is an MI_ERROR_CLIENT error.
    ///
    /// # Safety
    /// `upload` NULL or live.
    fn mi_gridfs_upload_close(
        upload: mut MiGridFsUpload,
    ) {
        upload.0.close().map_err(|e| io_failure(&e))
    }
}

c_function! {
    /// Stops the upload and deletes the chunks written so far.
    ///
    /// # Safety
    /// `upload` NULL or live.
    fn mi_gridfs_upload_abort(
        upload: mut MiGridFsUpload,
    ) {
        upload.0.abort().map_err(|e| failure(&e))
    }
}

/// Frees the upload handle; an upload neither closed nor aborted is
/// aborted (its chunks deleted). NULL is a no-op.
///
/// # Safety
/// `upload` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_upload_free(upload: *mut MiGridFsUpload) {
    // SAFETY: by the function's contract.
    unsafe { super::free_boxed(upload) }
}

fn new_download(out: &mut *mut MiGridFsDownload, stream: GridFsDownloadStream) {
    *out = Box::into_raw(Box::new(MiGridFsDownload(stream)));
}

c_function! {
    /// Opens the file whose id `id` carries (`{"_id": id}`) for reading;
    /// options `{timeoutMS}` (the stream's whole life) or NULL.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_gridfs_open_download_stream(
        bucket: mut MiGridFsBucket,
        id: document id_len,
        options: options options_len,
        out: mut *mut MiGridFsDownload,
    ) {
        let (options, timing) = super::ops::split_timeout(options, false)?;
        super::ops::no_options("open_download_stream", options)?;
        let action = bucket.0.open_download_stream(id_of(id, "id")?);
        let stream = match timing.timeout {
            Some(timeout) => action.timeout(timeout),
            None => action,
        }
        .run()
        .map_err(|e| failure(&e))?;
        new_download(out, stream);
        Ok(())
    }
}

c_function! {
    /// Opens a revision of the file called `filename` (options
    /// `{revision}`: -1, the default, the newest; 0 the oldest).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_gridfs_open_download_stream_by_name(
        bucket: mut MiGridFsBucket,
        filename: str,
        options: options options_len,
        out: mut *mut MiGridFsDownload,
    ) {
        let action = bucket.0.open_download_stream_by_name(filename);
        let stream = configure!(action, GridFsDownloadByNameOptions, options)
            .run()
            .map_err(|e| failure(&e))?;
        new_download(out, stream);
        Ok(())
    }
}

c_function! {
    /// Reads up to `capacity` bytes into `buffer`; `*read` is 0 at the end.
    ///
    /// # Safety
    /// `download` NULL or live; `buffer` writable for `capacity` bytes; `read`
    /// NULL or writable.
    fn mi_gridfs_download_read(
        download: mut MiGridFsDownload,
        buffer: raw *mut u8,
        capacity: raw usize,
        read: mut usize,
    ) {
        *read = 0;
        if capacity == 0 {
            return Ok(());
        }
        if buffer.is_null() || capacity > isize::MAX as usize {
            return Err(Failure::argument("buffer", "is NULL or impossibly long"));
        }
        // SAFETY: writable for `capacity` bytes by contract.
        let buffer = unsafe { std::slice::from_raw_parts_mut(buffer, capacity) };
        *read = download.0.read(buffer).map_err(|e| io_failure(&e))?;
        Ok(())
    }
}

c_function! {
    /// The file's files collection document (`_id`, `length`, `chunkSize`,
    /// `uploadDate`, `filename`, `metadata`?).
    ///
    /// # Safety
    /// `download` NULL or live; `result` NULL or writable.
    fn mi_gridfs_download_file(
        download: mut MiGridFsDownload,
        result: mut MiBuffer,
    ) {
        write_buffer(
            result,
            &files_document(download.0.files_collection_document())?,
        )
    }
}

fn files_document(file: &crate::gridfs::FilesCollectionDocument) -> Result<Document, Failure> {
    bson::to_document(file)
        .map_err(|e| Failure::new(Domain::Internal, format!("cannot encode a file: {e}")))
}

/// Frees a download handle; NULL is a no-op.
///
/// # Safety
/// `download` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_download_free(download: *mut MiGridFsDownload) {
    // SAFETY: by the function's contract.
    unsafe { super::free_boxed(download) }
}

c_function! {
    /// Deletes the file whose id `id` carries, its chunks first.
    ///
    /// # Safety
    /// Pointers NULL or valid.
    fn mi_gridfs_delete(
        bucket: mut MiGridFsBucket,
        id: document id_len,
    ) {
        bucket
            .0
            .delete(id_of(id, "id")?)
            .run()
            .map_err(|e| failure(&e))
    }
}

c_function! {
    /// Deletes every revision of the file called `filename`.
    ///
    /// # Safety
    /// Pointers NULL or valid.
    fn mi_gridfs_delete_by_name(
        bucket: mut MiGridFsBucket,
        filename: str,
    ) {
        bucket
            .0
            .delete_by_name(filename)
            .run()
            .map_err(|e| failure(&e))
    }
}

c_function! {
    /// The files documents matching `filter`, as a cursor; options are
    /// `GridFsFindOptions` (`sort`, `limit`, `skip`, `batchSize`, ...).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_gridfs_find(
        bucket: mut MiGridFsBucket,
        filter: document filter_len,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let cursor = configure!(bucket.0.find(filter), GridFsFindOptions, options)
            .run()
            .map_err(|e| failure(&e))?;
        *out = new_cursor(super::ops::DocumentStream::implicit(cursor), None);
        Ok(())
    }
}

c_function! {
    /// The first files document matching `filter` in `*result` (`{NULL, 0}`:
    /// none); options are `GridFsFindOneOptions` (`sort`, `skip`, `maxTimeMS`).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_gridfs_find_one(
        bucket: mut MiGridFsBucket,
        filter: document filter_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let found = configure!(bucket.0.find_one(filter), GridFsFindOneOptions, options)
            .run()
            .map_err(|e| failure(&e))?;
        result.data = std::ptr::null_mut();
        result.len = 0;
        match found {
            Some(file) => write_buffer(result, &files_document(&file)?),
            None => Ok(()),
        }
    }
}

c_function! {
    /// Renames the file whose id `id` carries to `new_filename`.
    ///
    /// # Safety
    /// Pointers NULL or valid.
    fn mi_gridfs_rename(
        bucket: mut MiGridFsBucket,
        id: document id_len,
        new_filename: str,
    ) {
        bucket
            .0
            .rename(id_of(id, "id")?, new_filename)
            .run()
            .map_err(|e| failure(&e))
    }
}

c_function! {
    /// Renames every revision of `filename` to `new_filename`.
    ///
    /// # Safety
    /// Pointers NULL or valid.
    fn mi_gridfs_rename_by_name(
        bucket: mut MiGridFsBucket,
        filename: str,
        new_filename: str,
    ) {
        bucket
            .0
            .rename_by_name(filename, new_filename)
            .run()
            .map_err(|e| failure(&e))
    }
}

c_function! {
    /// Drops the bucket's files and chunks collections.
    ///
    /// # Safety
    /// `bucket` NULL or live.
    fn mi_gridfs_drop(
        bucket: mut MiGridFsBucket,
    ) {
        bucket.0.drop().run().map_err(|e| failure(&e))
    }
}

//! GridFS through the C ABI: a bucket handle (`mi_gridfs_bucket`), upload
//! and download stream handles, and the bucket's operations. A file id
//! goes in as a BSON document whose first element's value is the id (e.g.
//! `{"_id": ObjectId(...)}`), since BSON has no bare values.

use std::ffi::c_char;
use std::io::{Read, Write};

use bson::{Bson, Document};

use super::error::{Domain, Failure};
use super::ops::{failure, options};
use super::{
    document_arg, handle, new_cursor, options_arg, quiet_boundary, str_arg, write_buffer, MiBuffer,
    MiClient, MiCursor, MiError,
};
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

/// A bucket of database `db` (`"fs"` unless options say `bucketName`);
/// options are `GridFsBucketOptions` (`bucketName`, `chunkSizeBytes`,
/// `writeConcern`, `readConcern`, `readPreference`). No I/O.
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_bucket_new(
    client: *mut MiClient,
    db: *const c_char,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiGridFsBucket,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (client, db, options, out) = unsafe {
            (
                handle(client, "client")?,
                str_arg(db, "db")?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        client.used = true;
        let options = options!(GridFsBucketOptions, options);
        let bucket = client.client.database(db).gridfs_bucket(options);
        *out = Box::into_raw(Box::new(MiGridFsBucket(bucket)));
        Ok(())
    })
}

/// Frees a bucket handle; NULL is a no-op. Streams opened from it keep
/// working.
///
/// # Safety
/// `bucket` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_bucket_free(bucket: *mut MiGridFsBucket) {
    quiet_boundary(|| {
        if !bucket.is_null() {
            // SAFETY: made by `mi_gridfs_bucket_new` with `Box`, not freed yet.
            drop(unsafe { Box::from_raw(bucket) });
        }
    })
}

/// Opens an upload of a file called `filename`; options are
/// `GridFsUploadOptions` (`chunkSizeBytes`, `metadata`) and `id` (the file's
/// id; a new ObjectId when absent). Nothing is stored until
/// `mi_gridfs_upload_close`.
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_open_upload_stream(
    bucket: *mut MiGridFsBucket,
    filename: *const c_char,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiGridFsUpload,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, filename, options, out) = unsafe {
            (
                handle(bucket, "bucket")?,
                str_arg(filename, "filename")?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        let mut options = options.unwrap_or_default();
        let id = options
            .iter()
            .position(|(key, _)| key == "id")
            .map(|at| options.remove(at).1);
        let mut action = bucket
            .0
            .open_upload_stream(filename)
            .with_options(options!(GridFsUploadOptions, Some(options)));
        if let Some(id) = id {
            action = action.id(id);
        }
        let stream = action.run().map_err(|e| failure(&e))?;
        *out = Box::into_raw(Box::new(MiGridFsUpload(stream)));
        Ok(())
    })
}

/// Writes `len` bytes to the upload (whole chunks are sent as they fill).
///
/// # Safety
/// `upload` NULL or live; `data` valid for `len` bytes (NULL if `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_upload_write(
    upload: *mut MiGridFsUpload,
    data: *const u8,
    len: usize,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let upload = unsafe { handle(upload, "upload")? };
        if len == 0 {
            return Ok(());
        }
        // SAFETY: by contract.
        let data = unsafe { super::bytes_arg(data, len, "data")? };
        upload.0.write_all(data).map_err(|e| io_failure(&e))
    })
}

/// The file's id: `result` gets `{"_id": id}`.
///
/// # Safety
/// `upload` NULL or live; `result` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_upload_id(
    upload: *mut MiGridFsUpload,
    result: *mut MiBuffer,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (upload, result) = unsafe { (handle(upload, "upload")?, handle(result, "result")?) };
        write_buffer(result, &bson::doc! { "_id": upload.0.id().clone() })
    })
}

/// Stores the rest and the files document: the file exists once this
/// succeeds. Closing twice, or after an abort, is an MI_ERROR_CLIENT error.
///
/// # Safety
/// `upload` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_upload_close(upload: *mut MiGridFsUpload) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let upload = unsafe { handle(upload, "upload")? };
        upload.0.close().map_err(|e| io_failure(&e))
    })
}

/// Stops the upload and deletes the chunks written so far.
///
/// # Safety
/// `upload` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_upload_abort(upload: *mut MiGridFsUpload) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let upload = unsafe { handle(upload, "upload")? };
        upload.0.abort().map_err(|e| failure(&e))
    })
}

/// Frees the upload handle; an upload neither closed nor aborted is
/// aborted (its chunks deleted). NULL is a no-op.
///
/// # Safety
/// `upload` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_upload_free(upload: *mut MiGridFsUpload) {
    quiet_boundary(|| {
        if !upload.is_null() {
            // SAFETY: made by `mi_gridfs_open_upload_stream`, not freed yet.
            drop(unsafe { Box::from_raw(upload) });
        }
    })
}

fn new_download(out: &mut *mut MiGridFsDownload, stream: GridFsDownloadStream) {
    *out = Box::into_raw(Box::new(MiGridFsDownload(stream)));
}

/// Opens the file whose id `id` carries (`{"_id": id}`) for reading; no
/// options exist (`options` NULL or empty).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_open_download_stream(
    bucket: *mut MiGridFsBucket,
    id: *const u8,
    id_len: usize,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiGridFsDownload,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, id, options, out) = unsafe {
            (
                handle(bucket, "bucket")?,
                document_arg(id, id_len, "id")?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        super::ops::no_options("open_download_stream", options)?;
        let stream = bucket
            .0
            .open_download_stream(id_of(id, "id")?)
            .run()
            .map_err(|e| failure(&e))?;
        new_download(out, stream);
        Ok(())
    })
}

/// Opens a revision of the file called `filename` (options
/// `{revision}`: -1, the default, the newest; 0 the oldest).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_open_download_stream_by_name(
    bucket: *mut MiGridFsBucket,
    filename: *const c_char,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiGridFsDownload,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, filename, options, out) = unsafe {
            (
                handle(bucket, "bucket")?,
                str_arg(filename, "filename")?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        let stream = bucket
            .0
            .open_download_stream_by_name(filename)
            .with_options(options!(GridFsDownloadByNameOptions, options))
            .run()
            .map_err(|e| failure(&e))?;
        new_download(out, stream);
        Ok(())
    })
}

/// Reads up to `capacity` bytes into `buffer`; `*read` is 0 at the end.
///
/// # Safety
/// `download` NULL or live; `buffer` writable for `capacity` bytes; `read`
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_download_read(
    download: *mut MiGridFsDownload,
    buffer: *mut u8,
    capacity: usize,
    read: *mut usize,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (download, read) = unsafe { (handle(download, "download")?, handle(read, "read")?) };
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
    })
}

/// The file's files collection document (`_id`, `length`, `chunkSize`,
/// `uploadDate`, `filename`, `metadata`?).
///
/// # Safety
/// `download` NULL or live; `result` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_download_file(
    download: *mut MiGridFsDownload,
    result: *mut MiBuffer,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (download, result) =
            unsafe { (handle(download, "download")?, handle(result, "result")?) };
        write_buffer(
            result,
            &files_document(download.0.files_collection_document())?,
        )
    })
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
    quiet_boundary(|| {
        if !download.is_null() {
            // SAFETY: made by an `mi_gridfs_open_download_stream*`, not freed yet.
            drop(unsafe { Box::from_raw(download) });
        }
    })
}

/// Deletes the file whose id `id` carries, its chunks first.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_delete(
    bucket: *mut MiGridFsBucket,
    id: *const u8,
    id_len: usize,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, id) = unsafe { (handle(bucket, "bucket")?, document_arg(id, id_len, "id")?) };
        bucket
            .0
            .delete(id_of(id, "id")?)
            .run()
            .map_err(|e| failure(&e))
    })
}

/// Deletes every revision of the file called `filename`.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_delete_by_name(
    bucket: *mut MiGridFsBucket,
    filename: *const c_char,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, filename) =
            unsafe { (handle(bucket, "bucket")?, str_arg(filename, "filename")?) };
        bucket
            .0
            .delete_by_name(filename)
            .run()
            .map_err(|e| failure(&e))
    })
}

/// The files documents matching `filter`, as a cursor; options are
/// `GridFsFindOptions` (`sort`, `limit`, `skip`, `batchSize`, ...).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_find(
    bucket: *mut MiGridFsBucket,
    filter: *const u8,
    filter_len: usize,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiCursor,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, filter, options, out) = unsafe {
            (
                handle(bucket, "bucket")?,
                document_arg(filter, filter_len, "filter")?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        let cursor = bucket
            .0
            .find(filter)
            .with_options(options!(GridFsFindOptions, options))
            .run()
            .map_err(|e| failure(&e))?;
        *out = new_cursor(super::ops::DocumentStream::implicit(cursor), None);
        Ok(())
    })
}

/// The first files document matching `filter` in `*result` (`{NULL, 0}`:
/// none); options are `GridFsFindOneOptions` (`sort`, `skip`, `maxTimeMS`).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_find_one(
    bucket: *mut MiGridFsBucket,
    filter: *const u8,
    filter_len: usize,
    options: *const u8,
    options_len: usize,
    result: *mut MiBuffer,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, filter, options, result) = unsafe {
            (
                handle(bucket, "bucket")?,
                document_arg(filter, filter_len, "filter")?,
                options_arg(options, options_len, "options")?,
                handle(result, "result")?,
            )
        };
        let found = bucket
            .0
            .find_one(filter)
            .with_options(options!(GridFsFindOneOptions, options))
            .run()
            .map_err(|e| failure(&e))?;
        result.data = std::ptr::null_mut();
        result.len = 0;
        match found {
            Some(file) => write_buffer(result, &files_document(&file)?),
            None => Ok(()),
        }
    })
}

/// Renames the file whose id `id` carries to `new_filename`.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_rename(
    bucket: *mut MiGridFsBucket,
    id: *const u8,
    id_len: usize,
    new_filename: *const c_char,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, id, new_filename) = unsafe {
            (
                handle(bucket, "bucket")?,
                document_arg(id, id_len, "id")?,
                str_arg(new_filename, "new_filename")?,
            )
        };
        bucket
            .0
            .rename(id_of(id, "id")?, new_filename)
            .run()
            .map_err(|e| failure(&e))
    })
}

/// Renames every revision of `filename` to `new_filename`.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_rename_by_name(
    bucket: *mut MiGridFsBucket,
    filename: *const c_char,
    new_filename: *const c_char,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (bucket, filename, new_filename) = unsafe {
            (
                handle(bucket, "bucket")?,
                str_arg(filename, "filename")?,
                str_arg(new_filename, "new_filename")?,
            )
        };
        bucket
            .0
            .rename_by_name(filename, new_filename)
            .run()
            .map_err(|e| failure(&e))
    })
}

/// Drops the bucket's files and chunks collections.
///
/// # Safety
/// `bucket` NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_gridfs_drop(bucket: *mut MiGridFsBucket) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let bucket = unsafe { handle(bucket, "bucket")? };
        bucket.0.drop().run().map_err(|e| failure(&e))
    })
}

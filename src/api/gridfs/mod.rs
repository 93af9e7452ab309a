//! GridFS (`source/gridfs/gridfs-spec.md`): files larger than a document,
//! stored as chunks in `<bucket>.chunks` and described by a document in
//! `<bucket>.files`, with the official `mongodb` crate's sync API.
//!
//! ```
//! use std::io::{Read, Write};
//! use mongo_inline::bson::doc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
//! # let client = mongo_inline::Client::with_uri_str(&uri)?;
//! // Streams fail with `std::io::Error`s that hold a `mongo_inline::Error`.
//! let bucket = client.database("docs_gridfs").gridfs_bucket(None);
//! let mut upload = bucket.open_upload_stream("notes.txt").run()?;
//! upload.write_all(b"stored in chunks")?;
//! upload.close()?;
//!
//! let mut text = String::new();
//! bucket.open_download_stream_by_name("notes.txt").run()?.read_to_string(&mut text)?;
//! assert_eq!(text, "stored in chunks");
//! for file in bucket.find(doc! { "filename": "notes.txt" }).run()? {
//!     bucket.delete(file?.id).run()?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Streams keep about one chunk in memory however large the file: an upload
//! buffers the chunk it is filling, a download the chunk it is reading
//! (its query asks for batches of about one chunk). A stream's `timeoutMS`
//! (the database's) bounds the whole upload or download, from open to
//! close. A download checks every chunk against the file's length and chunk
//! size: a missing, extra or wrongly sized chunk is an error, never a short
//! read. An upload's files collection document is written only by `close`,
//! so an upload that fails, is aborted or is dropped leaves no file
//! (`abort` and `drop` also delete the chunks already written).

pub(crate) mod actions;
mod download;
mod upload;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bson::{doc, Bson, Document, RawDocumentBuf};

use crate::api::client::Database;
use crate::api::coll::Collection;
use crate::error::{Error, GridFsErrorKind, GridFsFileIdentifier, Result};
use crate::proto::coll_options::{IndexModel, IndexOptions};
use crate::proto::concern::{ReadConcern, WriteConcern};
use crate::proto::deadline::Deadline;
use crate::proto::gridfs::{
    same_index_keys, GridFsBucketOptions, CHUNKS_INDEX, DEFAULT_BUCKET_NAME,
    DEFAULT_CHUNK_SIZE_BYTES, FILES_INDEX,
};
use crate::proto::read_preference::ReadPreference;
use crate::proto::read_preference::SelectionCriteria;

pub use crate::proto::gridfs::FilesCollectionDocument;
pub use download::GridFsDownloadStream;
pub use upload::GridFsUploadStream;

/// One GridFS bucket of a database: its files and chunks collections.
/// Made by [`Database::gridfs_bucket`]; cheap to clone, and clones share
/// whether the indexes were checked.
#[derive(Clone, Debug)]
pub struct GridFsBucket {
    inner: Arc<BucketInner>,
    /// One operation's own `timeoutMS` (a builder's `timeout`).
    timeout: Option<std::time::Duration>,
}

#[derive(Debug)]
struct BucketInner {
    db: Database,
    bucket_name: String,
    chunk_size_bytes: u32,
    read_concern: Option<ReadConcern>,
    write_concern: Option<WriteConcern>,
    selection_criteria: Option<SelectionCriteria>,
    /// Set once the first write checked (and made) the spec's indexes.
    indexes_checked: AtomicBool,
}

impl Database {
    /// A handle to a GridFS bucket of this database (`"fs"` unless
    /// `options` names another); concerns and read preference not given
    /// in `options` are the database's. No I/O until an operation runs; an
    /// invalid chunk size is reported by the first upload.
    pub fn gridfs_bucket(&self, options: impl Into<Option<GridFsBucketOptions>>) -> GridFsBucket {
        let options = options.into().unwrap_or_default();
        let inner = BucketInner {
            db: self.clone(),
            bucket_name: options
                .bucket_name
                .unwrap_or_else(|| DEFAULT_BUCKET_NAME.to_string()),
            chunk_size_bytes: options.chunk_size_bytes.unwrap_or(DEFAULT_CHUNK_SIZE_BYTES),
            read_concern: options.read_concern,
            write_concern: options.write_concern,
            selection_criteria: options.selection_criteria,
            indexes_checked: AtomicBool::new(false),
        };
        GridFsBucket {
            inner: Arc::new(inner),
            timeout: None,
        }
    }
}

impl GridFsBucket {
    /// The bucket's read concern, when it has its own.
    pub fn read_concern(&self) -> Option<&ReadConcern> {
        self.inner.read_concern.as_ref()
    }

    /// The bucket's write concern, when it has its own.
    pub fn write_concern(&self) -> Option<&WriteConcern> {
        self.inner.write_concern.as_ref()
    }

    /// The bucket's read preference, when it has its own.
    pub fn selection_criteria(&self) -> Option<&SelectionCriteria> {
        self.inner.selection_criteria.as_ref()
    }

    /// The chunk size of new files.
    pub fn chunk_size_bytes(&self) -> u32 {
        self.inner.chunk_size_bytes
    }

    /// This bucket for one operation with its own `timeoutMS`.
    pub(crate) fn with_operation_timeout(&self, timeout: std::time::Duration) -> GridFsBucket {
        GridFsBucket {
            inner: self.inner.clone(),
            timeout: Some(timeout),
        }
    }

    /// The files collection, with the bucket's concerns and, when given,
    /// the deadline of the stream using it.
    pub(crate) fn files(&self, deadline: Option<Deadline>) -> Collection<Document> {
        self.collection(&format!("{}.files", self.inner.bucket_name), deadline)
    }

    /// The chunks collection, read and written as BSON bytes.
    pub(crate) fn chunks(&self, deadline: Option<Deadline>) -> Collection<RawDocumentBuf> {
        self.collection(&format!("{}.chunks", self.inner.bucket_name), deadline)
    }

    fn collection<T>(&self, name: &str, deadline: Option<Deadline>) -> Collection<T> {
        let options = crate::options::CollectionOptions {
            selection_criteria: self.inner.selection_criteria.clone(),
            read_concern: self.inner.read_concern.clone(),
            write_concern: self.inner.write_concern.clone(),
        };
        let mut coll = self.inner.db.collection_with_options::<T>(name, options);
        if self.timeout.is_some() {
            coll = coll.for_operation(self.timeout, None).into_owned();
        }
        match deadline {
            Some(d) => coll.with_deadline(d),
            None => coll,
        }
    }

    /// The criteria a read given no others uses: a predicate set on the
    /// bucket (a read preference is already on its collections).
    pub(crate) fn read_criteria(&self) -> Option<SelectionCriteria> {
        match &self.inner.selection_criteria {
            Some(c @ SelectionCriteria::Predicate(_)) => Some(c.clone()),
            _ => None,
        }
    }

    /// Keeps `buffer` for the next long reply the client reads.
    pub(crate) fn offer_read_buffer(&self, buffer: Vec<u8>) -> Result<()> {
        self.inner.db.client().state()?.offer_read_buffer(buffer);
        Ok(())
    }

    /// The deadline of a stream opened now: the database's `timeoutMS`
    /// bounds the whole stream.
    pub(crate) fn stream_deadline(&self) -> Result<Deadline> {
        let timeout = self.timeout.or(self.inner.db.defaults().timeout);
        Ok(self.inner.db.client().state()?.deadline_from_now(timeout))
    }

    /// The spec's step before the first write: when the files collection
    /// is empty (asked of the primary), create each index that does not
    /// already exist. Checking first lets a read-only user upload to a
    /// bucket whose indexes an administrator made.
    pub(crate) fn ensure_indexes(&self, deadline: Deadline) -> Result<()> {
        if self.inner.indexes_checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let files = self.files(Some(deadline));
        let any_file = files
            .find_one(doc! {})
            .projection(doc! { "_id": 1 })
            .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::primary()))
            .run()?;
        if any_file.is_none() {
            ensure_index(&files, FILES_INDEX, false)?;
            ensure_index(&self.chunks(Some(deadline)), CHUNKS_INDEX, true)?;
        }
        self.inner.indexes_checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The files collection document with this id.
    pub(crate) fn file_by_id(
        &self,
        id: &Bson,
        deadline: Deadline,
    ) -> Result<FilesCollectionDocument> {
        let files = self
            .files(Some(deadline))
            .clone_with_type::<FilesCollectionDocument>();
        let found = files.find_one(doc! { "_id": id.clone() });
        let found = match self.read_criteria() {
            Some(c) => found.selection_criteria(c),
            None => found,
        };
        found.run()?.ok_or_else(|| {
            Error::gridfs(GridFsErrorKind::FileNotFound {
                identifier: GridFsFileIdentifier::Id(id.clone()),
            })
        })
    }

    /// The files collection document of `revision` of `filename`; no file
    /// of that name and no such revision are different errors.
    pub(crate) fn file_by_name(
        &self,
        filename: &str,
        revision: i32,
        deadline: Deadline,
    ) -> Result<FilesCollectionDocument> {
        let (direction, skip) = crate::proto::gridfs::revision_query(revision);
        let files = self
            .files(Some(deadline))
            .clone_with_type::<FilesCollectionDocument>();
        let mut find = files
            .find_one(doc! { "filename": filename })
            .sort(doc! { "uploadDate": direction })
            .skip(skip);
        if let Some(c) = self.read_criteria() {
            find = find.selection_criteria(c);
        }
        if let Some(file) = find.run()? {
            return Ok(file);
        }
        let any = files
            .clone_with_type::<Document>()
            .find_one(doc! { "filename": filename })
            .projection(doc! { "_id": 1 })
            .run()?;
        Err(Error::gridfs(match any {
            Some(_) => GridFsErrorKind::RevisionNotFound { revision },
            None => GridFsErrorKind::FileNotFound {
                identifier: GridFsFileIdentifier::Filename(filename.to_string()),
            },
        }))
    }
}

/// Creates the index `keys` on `coll` unless an index with those keys
/// exists; a collection that does not exist yet has none.
fn ensure_index<T>(coll: &Collection<T>, keys: &[(&str, i32)], unique: bool) -> Result<()> {
    let existing = match coll.list_indexes().run() {
        Ok(cursor) => cursor.collect::<Result<Vec<IndexModel>>>()?,
        Err(e) if e.code() == Some(26) => Vec::new(),
        Err(e) => return Err(e),
    };
    let present = existing
        .iter()
        .any(|index| same_index_keys(&index.keys, keys));
    if present {
        return Ok(());
    }
    let key: Document = keys
        .iter()
        .map(|(k, v)| ((*k).to_string(), Bson::Int32(*v)))
        .collect();
    let mut model = IndexModel::new(key);
    if unique {
        model = model.options(IndexOptions::default().unique(true));
    }
    coll.create_index(model).run()?;
    Ok(())
}

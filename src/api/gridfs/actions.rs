//! The bucket's operations as builders, in the official driver's shape:
//! `bucket.open_upload_stream("name").chunk_size_bytes(n).run()`.

use std::borrow::Cow;
use std::time::Duration;

use bson::{doc, Bson, Document};

use super::{GridFsBucket, GridFsDownloadStream, GridFsUploadStream};
use crate::api::action::option_setters;
use crate::api::cursor::Cursor;
use crate::error::{Error, GridFsErrorKind, GridFsFileIdentifier, Result};
use crate::proto::coll_options::{FindOneOptions, FindOptions};
use crate::proto::gridfs::{
    check_chunk_size, FilesCollectionDocument, GridFsDownloadByNameOptions, GridFsFindOneOptions,
    GridFsFindOptions, GridFsUploadOptions,
};

/// Declares `.timeout(..)` for a bucket's builder.
macro_rules! bucket_timeout_setter {
    () => {
        /// Sets this operation's `timeoutMS`, overriding the bucket's
        /// database's: for a stream, its whole life from `run` to the last
        /// read or `close`; zero keeps CSOT's rules without a limit.
        pub fn timeout(mut self, timeout: Duration) -> Self {
            self.bucket = Cow::Owned(self.bucket.with_operation_timeout(timeout));
            self
        }
    };
}

impl GridFsBucket {
    /// Opens a stream to write a new file `filename` to; its id is a new
    /// ObjectId unless [`id`](OpenUploadStream::id) gives one.
    pub fn open_upload_stream(&self, filename: impl AsRef<str>) -> OpenUploadStream<'_> {
        OpenUploadStream {
            bucket: Cow::Borrowed(self),
            filename: filename.as_ref().to_string(),
            id: None,
            options: GridFsUploadOptions::default(),
        }
    }

    /// Opens a stream to read the file with this id.
    pub fn open_download_stream(&self, id: Bson) -> OpenDownloadStream<'_> {
        OpenDownloadStream {
            bucket: Cow::Borrowed(self),
            id,
        }
    }

    /// Opens a stream to read a revision (the latest by default) of the
    /// file named `filename`.
    pub fn open_download_stream_by_name(
        &self,
        filename: impl Into<String>,
    ) -> OpenDownloadStreamByName<'_> {
        OpenDownloadStreamByName {
            bucket: Cow::Borrowed(self),
            filename: filename.into(),
            options: GridFsDownloadByNameOptions::default(),
        }
    }

    /// Deletes the file with this id: its files collection document, then
    /// its chunks. No such file is an error (its orphaned chunks, if any,
    /// are deleted first).
    pub fn delete(&self, id: Bson) -> Delete<'_> {
        Delete {
            bucket: Cow::Borrowed(self),
            id,
        }
    }

    /// Deletes every revision of the file named `filename`; no such file is
    /// an error.
    pub fn delete_by_name(&self, filename: impl Into<String>) -> DeleteByName<'_> {
        DeleteByName {
            bucket: Cow::Borrowed(self),
            filename: filename.into(),
        }
    }

    /// The files collection documents matching `filter` (query the
    /// application's fields as `{"metadata.field": value}`).
    pub fn find(&self, filter: Document) -> Find<'_> {
        Find {
            bucket: Cow::Borrowed(self),
            filter,
            options: GridFsFindOptions::default(),
        }
    }

    /// The first files collection document matching `filter`, if any.
    pub fn find_one(&self, filter: Document) -> FindOne<'_> {
        FindOne {
            bucket: Cow::Borrowed(self),
            filter,
            options: GridFsFindOneOptions::default(),
        }
    }

    /// Renames the file with this id; no such file is an error.
    pub fn rename(&self, id: Bson, new_filename: impl Into<String>) -> Rename<'_> {
        Rename {
            bucket: Cow::Borrowed(self),
            id,
            new_filename: new_filename.into(),
        }
    }

    /// Renames every revision of the file named `filename`; no such file is
    /// an error.
    pub fn rename_by_name(
        &self,
        filename: impl Into<String>,
        new_filename: impl Into<String>,
    ) -> RenameByName<'_> {
        RenameByName {
            bucket: Cow::Borrowed(self),
            filename: filename.into(),
            new_filename: new_filename.into(),
        }
    }

    /// Drops the bucket's files collection, then its chunks collection.
    pub fn drop(&self) -> Drop<'_> {
        Drop {
            bucket: Cow::Borrowed(self),
        }
    }
}

/// Opens a [`GridFsUploadStream`]; from [`GridFsBucket::open_upload_stream`].
#[must_use = "nothing is sent until `run`"]
pub struct OpenUploadStream<'a> {
    bucket: Cow<'a, GridFsBucket>,
    filename: String,
    id: Option<Bson>,
    options: GridFsUploadOptions,
}

impl OpenUploadStream<'_> {
    bucket_timeout_setter!();

    option_setters!(GridFsUploadOptions {
        chunk_size_bytes: u32,
        metadata: Document,
    });

    /// The file's id (any BSON value unique in the bucket) instead of a new
    /// ObjectId.
    pub fn id(mut self, id: Bson) -> Self {
        self.id = Some(id);
        self
    }

    /// Opens the stream; nothing is written before its first full chunk
    /// or its `close`. The stream's deadline (`timeoutMS`) starts now.
    pub fn run(self) -> Result<GridFsUploadStream> {
        let chunk_size = check_chunk_size(
            self.options
                .chunk_size_bytes
                .unwrap_or(self.bucket.chunk_size_bytes()),
        )?;
        let id = self
            .id
            .unwrap_or_else(|| Bson::ObjectId(crate::shell::ids::new_object_id()));
        Ok(GridFsUploadStream::new(
            self.bucket.clone().into_owned(),
            id,
            self.filename,
            chunk_size,
            self.options.metadata,
            self.bucket.stream_deadline()?,
        ))
    }
}

/// Opens a [`GridFsDownloadStream`] by id; from
/// [`GridFsBucket::open_download_stream`].
#[must_use = "nothing is sent until `run`"]
pub struct OpenDownloadStream<'a> {
    bucket: Cow<'a, GridFsBucket>,
    id: Bson,
}

impl OpenDownloadStream<'_> {
    bucket_timeout_setter!();

    /// Finds the file and opens the stream; the stream's deadline
    /// (`timeoutMS`) starts now.
    pub fn run(self) -> Result<GridFsDownloadStream> {
        let deadline = self.bucket.stream_deadline()?;
        let file = self.bucket.file_by_id(&self.id, deadline)?;
        GridFsDownloadStream::open(&self.bucket, file, deadline)
    }
}

/// Opens a [`GridFsDownloadStream`] by filename; from
/// [`GridFsBucket::open_download_stream_by_name`].
#[must_use = "nothing is sent until `run`"]
pub struct OpenDownloadStreamByName<'a> {
    bucket: Cow<'a, GridFsBucket>,
    filename: String,
    options: GridFsDownloadByNameOptions,
}

impl OpenDownloadStreamByName<'_> {
    bucket_timeout_setter!();

    option_setters!(GridFsDownloadByNameOptions { revision: i32 });

    /// Finds the revision and opens the stream; the stream's deadline
    /// (`timeoutMS`) starts now.
    pub fn run(self) -> Result<GridFsDownloadStream> {
        let deadline = self.bucket.stream_deadline()?;
        let revision = self.options.revision.unwrap_or(-1);
        let file = self
            .bucket
            .file_by_name(&self.filename, revision, deadline)?;
        GridFsDownloadStream::open(&self.bucket, file, deadline)
    }
}

/// Deletes a file by id; from [`GridFsBucket::delete`].
#[must_use = "nothing is sent until `run`"]
pub struct Delete<'a> {
    bucket: Cow<'a, GridFsBucket>,
    id: Bson,
}

impl Delete<'_> {
    bucket_timeout_setter!();

    /// Runs the deletes.
    pub fn run(self) -> Result<()> {
        let deadline = self.bucket.stream_deadline()?;
        let files = self.bucket.files(Some(deadline));
        let deleted = files
            .delete_one(doc! { "_id": self.id.clone() })
            .run()?
            .deleted_count;
        let chunks = self.bucket.chunks(Some(deadline));
        chunks
            .delete_many(doc! { "files_id": self.id.clone() })
            .run()?;
        if deleted == 0 {
            return Err(Error::gridfs(GridFsErrorKind::FileNotFound {
                identifier: GridFsFileIdentifier::Id(self.id),
            }));
        }
        Ok(())
    }
}

/// Deletes every revision of a file; from [`GridFsBucket::delete_by_name`].
#[must_use = "nothing is sent until `run`"]
pub struct DeleteByName<'a> {
    bucket: Cow<'a, GridFsBucket>,
    filename: String,
}

impl DeleteByName<'_> {
    bucket_timeout_setter!();

    /// Finds the revisions' ids, deletes their files collection documents,
    /// then their chunks.
    pub fn run(self) -> Result<()> {
        let deadline = self.bucket.stream_deadline()?;
        let files = self.bucket.files(Some(deadline));
        let ids = files
            .find(doc! { "filename": self.filename.as_str() })
            .projection(doc! { "_id": 1 })
            .run()?
            .map(|file| file.map(|mut f| f.remove("_id").unwrap_or(Bson::Null)))
            .collect::<Result<Vec<Bson>>>()?;
        if ids.is_empty() {
            return Err(Error::gridfs(GridFsErrorKind::FileNotFound {
                identifier: GridFsFileIdentifier::Filename(self.filename),
            }));
        }
        files
            .delete_many(doc! { "_id": { "$in": ids.clone() } })
            .run()?;
        let chunks = self.bucket.chunks(Some(deadline));
        chunks
            .delete_many(doc! { "files_id": { "$in": ids } })
            .run()?;
        Ok(())
    }
}

/// Finds files collection documents; from [`GridFsBucket::find`].
#[must_use = "nothing is sent until `run`"]
pub struct Find<'a> {
    bucket: Cow<'a, GridFsBucket>,
    filter: Document,
    options: GridFsFindOptions,
}

impl Find<'_> {
    bucket_timeout_setter!();

    option_setters!(GridFsFindOptions {
        allow_disk_use: bool,
        batch_size: u32,
        limit: i64,
        max_time: Duration,
        skip: u64,
        sort: Document,
    });

    /// Runs the query.
    pub fn run(self) -> Result<Cursor<FilesCollectionDocument>> {
        let files = self
            .bucket
            .files(None)
            .clone_with_type::<FilesCollectionDocument>();
        let mut find = files
            .find(self.filter)
            .with_options(FindOptions::from(self.options));
        if let Some(c) = self.bucket.read_criteria() {
            find = find.selection_criteria(c);
        }
        find.run()
    }
}

/// Finds one files collection document; from [`GridFsBucket::find_one`].
#[must_use = "nothing is sent until `run`"]
pub struct FindOne<'a> {
    bucket: Cow<'a, GridFsBucket>,
    filter: Document,
    options: GridFsFindOneOptions,
}

impl FindOne<'_> {
    bucket_timeout_setter!();

    option_setters!(GridFsFindOneOptions {
        max_time: Duration,
        skip: u64,
        sort: Document,
    });

    /// Runs the query.
    pub fn run(self) -> Result<Option<FilesCollectionDocument>> {
        let files = self
            .bucket
            .files(None)
            .clone_with_type::<FilesCollectionDocument>();
        let mut find = files
            .find_one(self.filter)
            .with_options(FindOneOptions::from(self.options));
        if let Some(c) = self.bucket.read_criteria() {
            find = find.selection_criteria(c);
        }
        find.run()
    }
}

/// Renames a file by id; from [`GridFsBucket::rename`].
#[must_use = "nothing is sent until `run`"]
pub struct Rename<'a> {
    bucket: Cow<'a, GridFsBucket>,
    id: Bson,
    new_filename: String,
}

impl Rename<'_> {
    bucket_timeout_setter!();

    /// Runs the update.
    pub fn run(self) -> Result<()> {
        let files = self.bucket.files(None);
        let matched = files
            .update_one(
                doc! { "_id": self.id.clone() },
                doc! { "$set": { "filename": self.new_filename } },
            )
            .run()?
            .matched_count;
        if matched == 0 {
            return Err(Error::gridfs(GridFsErrorKind::FileNotFound {
                identifier: GridFsFileIdentifier::Id(self.id),
            }));
        }
        Ok(())
    }
}

/// Renames every revision of a file; from [`GridFsBucket::rename_by_name`].
#[must_use = "nothing is sent until `run`"]
pub struct RenameByName<'a> {
    bucket: Cow<'a, GridFsBucket>,
    filename: String,
    new_filename: String,
}

impl RenameByName<'_> {
    bucket_timeout_setter!();

    /// Runs the update.
    pub fn run(self) -> Result<()> {
        let files = self.bucket.files(None);
        let matched = files
            .update_many(
                doc! { "filename": self.filename.as_str() },
                doc! { "$set": { "filename": self.new_filename } },
            )
            .run()?
            .matched_count;
        if matched == 0 {
            return Err(Error::gridfs(GridFsErrorKind::FileNotFound {
                identifier: GridFsFileIdentifier::Filename(self.filename),
            }));
        }
        Ok(())
    }
}

/// Drops the bucket's collections; from [`GridFsBucket::drop`].
#[must_use = "nothing is sent until `run`"]
pub struct Drop<'a> {
    bucket: Cow<'a, GridFsBucket>,
}

impl Drop<'_> {
    bucket_timeout_setter!();

    /// Drops the files collection, then the chunks collection; the next
    /// upload checks the indexes again.
    pub fn run(self) -> Result<()> {
        let deadline = self.bucket.stream_deadline()?;
        self.bucket.files(Some(deadline)).drop().run()?;
        self.bucket.chunks(Some(deadline)).drop().run()?;
        self.bucket
            .inner
            .indexes_checked
            .store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

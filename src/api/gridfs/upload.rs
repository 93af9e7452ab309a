//! [`GridFsUploadStream`]: a file written through [`std::io::Write`], one
//! chunk insert each time a chunk fills, the files collection document at
//! `close`.

use std::io::Write;
use std::sync::Arc;

use bson::{doc, Bson, DateTime, Document, RawBson};

use super::GridFsBucket;
use crate::error::{Error, GridFsErrorKind, Result};
use crate::proto::deadline::Deadline;
use crate::proto::gridfs::ChunkBuffer;
use crate::proto::operation::Insert;

/// Where an upload stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// Closed (the file is stored), aborted, or failed: no more writes.
    Done,
}

/// A file being uploaded: write its bytes, then [`close`](Self::close) to
/// store it. [`flush`](Write::flush) sends nothing, since every chunk but
/// the last must be full.
///
/// Until `close` succeeds no files collection document exists, so readers
/// never see a partial file. [`abort`](Self::abort), or dropping the
/// stream unclosed, deletes the chunks already written. If writing a chunk
/// fails, the stream is done and the error returned; the chunks already
/// written stay (the spec's orphaned chunks: the failure that stopped the
/// upload would most likely stop their deletion too).
#[derive(Debug)]
pub struct GridFsUploadStream {
    bucket: GridFsBucket,
    id: Bson,
    /// `id` as the chunks' `files_id`, or why it cannot be stored (the
    /// first chunk's write says so).
    files_id: std::result::Result<RawBson, String>,
    filename: String,
    metadata: Option<Document>,
    chunk_size: u32,
    /// The chunk being filled, in place in the document that carries it.
    chunk: ChunkBuffer,
    chunks_written: u32,
    length: u64,
    deadline: Deadline,
    state: State,
}

impl GridFsUploadStream {
    pub(crate) fn new(
        bucket: GridFsBucket,
        id: Bson,
        filename: String,
        chunk_size: u32,
        metadata: Option<Document>,
        deadline: Deadline,
    ) -> Self {
        let files_id = RawBson::try_from(id.clone()).map_err(|e| e.to_string());
        let chunk = ChunkBuffer::new(files_id.as_ref().unwrap_or(&RawBson::Null), chunk_size);
        GridFsUploadStream {
            bucket,
            id,
            files_id,
            filename,
            metadata,
            chunk_size,
            chunk,
            chunks_written: 0,
            length: 0,
            deadline,
            state: State::Open,
        }
    }

    /// The id the file will have (its files collection `_id`).
    pub fn id(&self) -> &Bson {
        &self.id
    }

    /// Writes what is buffered as the last chunk, then the files collection
    /// document; the file exists once this returns `Ok`. Closing twice, or
    /// after an abort or a failure, is an error.
    pub fn close(&mut self) -> std::io::Result<()> {
        self.finish().map_err(std::io::Error::other)
    }

    fn finish(&mut self) -> Result<()> {
        self.check_open()?;
        // Whatever happens next, no further writes.
        self.state = State::Done;
        if self.chunk.data_len() > 0 {
            self.write_chunk()?;
        }
        self.chunk.release();
        self.bucket.ensure_indexes(self.deadline)?;
        let upload_date = {
            let client = self.bucket.inner.db.client().clone();
            let now = client.state()?.time.wall_time();
            DateTime::from_system_time(now)
        };
        let mut file = doc! {
            "_id": self.id.clone(),
            "length": i64::try_from(self.length).unwrap_or(i64::MAX),
            "chunkSize": self.chunk_size as i32,
            "uploadDate": upload_date,
            "filename": self.filename.clone(),
        };
        if let Some(metadata) = self.metadata.take() {
            file.insert("metadata", metadata);
        }
        self.bucket
            .files(Some(self.deadline))
            .insert_one(file)
            .run()?;
        Ok(())
    }

    /// Stops the upload and deletes the chunks already written; no file is
    /// stored. An error if the stream is already closed or aborted, or if
    /// the chunks cannot be deleted.
    pub fn abort(&mut self) -> Result<()> {
        self.check_open()?;
        self.state = State::Done;
        self.chunk.release();
        self.delete_chunks().map_err(|e| {
            Error::gridfs(GridFsErrorKind::AbortError {
                original_error: None,
                delete_error: e,
            })
        })
    }

    fn delete_chunks(&self) -> Result<()> {
        if self.chunks_written > 0 {
            self.bucket
                .chunks(Some(self.deadline))
                .delete_many(doc! { "files_id": self.id.clone() })
                .run()?;
        }
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        match self.state {
            State::Open => Ok(()),
            State::Done => Err(Error::gridfs(GridFsErrorKind::UploadStreamClosed)),
        }
    }

    /// Inserts the chunk being filled as chunk `chunks_written`. The
    /// insert shares the chunk's bytes (the message is written from them,
    /// see `wire::encode_parts_borrowing_last`) and gives them back for
    /// the next chunk: one chunk-sized buffer for the whole upload.
    fn write_chunk(&mut self) -> Result<()> {
        self.bucket.ensure_indexes(self.deadline)?;
        let n = i32::try_from(self.chunks_written).map_err(|_| {
            Error::invalid_argument("the file has more chunks than GridFS can number")
        })?;
        let files_id = self
            .files_id
            .as_ref()
            .map_err(|e| Error::invalid_argument(format!("the file id cannot be stored: {e}")))?;
        let id = crate::shell::ids::new_object_id();
        let chunk = Arc::new(self.chunk.seal(files_id, id, n)?);
        let chunks = self.bucket.chunks(Some(self.deadline));
        let insert = Insert::shared(chunks.ns().clone(), Arc::clone(&chunk), Bson::ObjectId(id));
        let outcome = chunks.execute(insert, None);
        // The insert is over and dropped its share (else a new buffer is
        // made for the next chunk).
        if let Ok(chunk) = Arc::try_unwrap(chunk) {
            self.chunk.reuse(chunk);
        }
        outcome?;
        self.chunks_written += 1;
        Ok(())
    }

    fn write_bytes(&mut self, bytes: &[u8]) -> Result<usize> {
        self.check_open()?;
        let taken = self.chunk.append(bytes);
        self.length += taken as u64;
        if self.chunk.is_full() {
            if let Err(e) = self.write_chunk() {
                self.state = State::Done;
                self.chunk.release();
                return Err(e);
            }
        }
        Ok(taken)
    }
}

impl Write for GridFsUploadStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_bytes(buf).map_err(std::io::Error::other)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.check_open().map_err(std::io::Error::other)
    }
}

impl Drop for GridFsUploadStream {
    /// An upload neither closed nor aborted (an error or a panic in the
    /// code writing it) deletes its chunks, so it leaves nothing behind.
    fn drop(&mut self) {
        if self.state == State::Open {
            self.state = State::Done;
            if let Err(e) = self.delete_chunks() {
                log::warn!(
                    "GridFS: the chunks of an upload dropped unclosed (file id {}) could not be deleted: {e}",
                    self.id
                );
            }
        }
    }
}

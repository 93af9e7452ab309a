//! [`GridFsDownloadStream`]: a stored file read through [`std::io::Read`],
//! one chunk in hand at a time, each checked against the file document.

use std::io::Read;

use bson::{doc, RawDocumentBuf};

use super::GridFsBucket;
use crate::api::cursor::Cursor;
use crate::error::{Error, GridFsErrorKind, Result};
use crate::proto::deadline::Deadline;
use crate::proto::gridfs::FilesCollectionDocument;

/// About this many bytes of chunks per batch: one default-sized chunk, or
/// several small ones, so memory stays near one chunk however large the file.
const BATCH_BYTES: u32 = 256 * 1024;

/// Room for a reply's fields besides its chunks (cursor id and namespace,
/// cluster time, each chunk's `_id`, `files_id` and `n`), so that the
/// buffer sized for the first reply does not have to grow.
const REPLY_FIELDS_ROOM: u64 = 16 * 1024;

/// Replies of fewer chunk bytes are read into the socket's read-ahead, not
/// a buffer of their own.
const OWN_BUFFER_MIN: u64 = 64 * 1024;

/// A stored file being read. Reads return its bytes in order, then 0 at its
/// end; a chunk that is missing, of the wrong size, or more chunks than the
/// file's length calls for are errors (and every later read repeats the
/// error), never an early end.
#[derive(Debug)]
pub struct GridFsDownloadStream {
    file: FilesCollectionDocument,
    chunk_count: u32,
    /// `None` for an empty file: the spec forbids querying its chunks.
    chunks: Option<Cursor<RawDocumentBuf>>,
    /// The chunk in hand and where its unread data starts and ends.
    current: Option<RawDocumentBuf>,
    start: usize,
    end: usize,
    next_n: u32,
    failed: Option<Error>,
    finished: bool,
}

impl GridFsDownloadStream {
    pub(crate) fn open(
        bucket: &GridFsBucket,
        file: FilesCollectionDocument,
        deadline: Deadline,
    ) -> Result<Self> {
        let chunk_count = file.chunk_count()?;
        let chunks = if chunk_count == 0 {
            None
        } else {
            let batch = (BATCH_BYTES / file.chunk_size_bytes).max(1);
            // The reply's buffer, made once at its full size: it then
            // carries every chunk of the file (`next_chunk` gives it back),
            // where growing it as bytes arrive would copy the first reply
            // and hold it twice.
            let data = (u64::from(batch) * u64::from(file.chunk_size_bytes)).min(file.length);
            if data >= OWN_BUFFER_MIN {
                let room = usize::try_from(data + REPLY_FIELDS_ROOM).unwrap_or(usize::MAX);
                bucket.offer_read_buffer(Vec::with_capacity(room))?;
            }
            let chunks = bucket.chunks(Some(deadline));
            let mut find = chunks
                .find(doc! { "files_id": file.id.clone() })
                .sort(doc! { "n": 1 })
                .batch_size(batch);
            if let Some(c) = bucket.read_criteria() {
                find = find.selection_criteria(c);
            }
            Some(find.run()?)
        };
        Ok(GridFsDownloadStream {
            file,
            chunk_count,
            chunks,
            current: None,
            start: 0,
            end: 0,
            next_n: 0,
            failed: None,
            finished: false,
        })
    }

    /// The stored file's files collection document.
    pub fn files_collection_document(&self) -> &FilesCollectionDocument {
        &self.file
    }

    /// Takes the next chunk in hand; `Ok(false)` at the file's end.
    fn next_chunk(&mut self) -> Result<bool> {
        // The chunk in hand is read to its end: its buffer receives the
        // next one, so that one chunk, not two, is held (and the same
        // buffer serves the whole file).
        let done = self.current.take();
        let Some(cursor) = self.chunks.as_mut() else {
            return Ok(false);
        };
        if let Some(chunk) = done {
            cursor.recycle_buffer(chunk.into_bytes());
        }
        if self.next_n == self.chunk_count {
            // Anything after the last chunk the length calls for means the
            // stored file is not what its document says.
            return match cursor.next() {
                None => {
                    self.chunks = None;
                    Ok(false)
                }
                Some(Err(e)) => Err(e),
                Some(Ok(_)) => Err(Error::gridfs(GridFsErrorKind::WrongNumberOfChunks {
                    actual_number: self.chunk_count + 1,
                    expected_number: self.chunk_count,
                })),
            };
        }
        let chunk = match cursor.next() {
            None => {
                return Err(Error::gridfs(GridFsErrorKind::MissingChunk {
                    n: self.next_n,
                }))
            }
            Some(chunk) => chunk?,
        };
        let data = self.file.chunk_data(&chunk, self.next_n)?;
        // Where the data lies inside the chunk's bytes, so the chunk is
        // kept as received rather than copied.
        let start = data.as_ptr() as usize - chunk.as_bytes().as_ptr() as usize;
        (self.start, self.end) = (start, start + data.len());
        self.current = Some(chunk);
        self.next_n += 1;
        Ok(true)
    }

    fn read_bytes(&mut self, buf: &mut [u8]) -> Result<usize> {
        while self.start == self.end {
            if self.finished || !self.next_chunk()? {
                self.finished = true;
                self.current = None;
                return Ok(0);
            }
        }
        let Some(chunk) = &self.current else {
            return Ok(0);
        };
        let available = &chunk.as_bytes()[self.start..self.end];
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.start += n;
        Ok(n)
    }
}

impl Read for GridFsDownloadStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(e) = &self.failed {
            return Err(std::io::Error::other(e.clone()));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        self.read_bytes(buf).map_err(|e| {
            self.failed = Some(e.clone());
            self.chunks = None;
            std::io::Error::other(e)
        })
    }
}

//! GridFS's rules (`source/gridfs/gridfs-spec.md`): the options, the files
//! collection document as stored by any driver, what a file's length and
//! chunk size say about its chunks, and the checks a download makes on
//! every chunk. The streams that apply them are in `api::gridfs`.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, RawBson, RawDocument, RawDocumentBuf};
use serde::{Deserialize, Serialize};

use crate::error::{Error, GridFsErrorKind, Result};
use crate::proto::coll_options::{options_struct, FindOneOptions, FindOptions};
use crate::proto::concern::{ReadConcern, WriteConcern};
use crate::proto::read_preference::SelectionCriteria;

/// The bucket name when none is given.
pub const DEFAULT_BUCKET_NAME: &str = "fs";
/// The chunk size when none is given: 255 KiB, so a chunk document with its
/// other fields stays under 256 KiB.
pub const DEFAULT_CHUNK_SIZE_BYTES: u32 = 255 * 1024;
/// The largest chunk size accepted: a chunk document must fit in a BSON
/// document (16 MiB) with its `_id`, `files_id` and `n`.
pub const MAX_CHUNK_SIZE_BYTES: u32 = 16 * 1024 * 1024 - 16 * 1024;

options_struct! {
    /// Options of a [`GridFsBucket`](crate::gridfs::GridFsBucket); what is
    /// unset comes from the database.
    #[derive(Deserialize)]
    pub struct GridFsBucketOptions {
        /// The prefix of the bucket's collections (`<name>.files`,
        /// `<name>.chunks`); `"fs"` by default.
        bucket_name: String,
        /// The chunk size of new files; 255 KiB by default.
        chunk_size_bytes: u32,
        /// The write concern of uploads, deletes and renames.
        write_concern: WriteConcern,
        /// The read concern of downloads and finds.
        read_concern: ReadConcern,
        /// Where downloads and finds read.
        selection_criteria: SelectionCriteria,
    }
}

options_struct! {
    /// Options of one upload.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct GridFsUploadOptions {
        /// This file's chunk size, instead of the bucket's.
        chunk_size_bytes: u32,
        /// The files collection document's `metadata`.
        metadata: Document,
    }
}

options_struct! {
    /// Options of a download by filename.
    #[derive(Deserialize)]
    pub struct GridFsDownloadByNameOptions {
        /// Which revision: 0 the first stored, 1 the second, ..., -1 (the
        /// default) the most recent, -2 the one before it, ...
        revision: i32,
    }
}

options_struct! {
    /// Options of `find` on a bucket's files collection, passed on to the
    /// `find` command.
    #[derive(Deserialize)]
    pub struct GridFsFindOptions {
        /// `allowDiskUse`.
        allow_disk_use: bool,
        /// Documents per batch.
        batch_size: u32,
        /// The most documents to return.
        limit: i64,
        /// `maxTimeMS`.
        #[serde(default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
        max_time: Duration,
        /// Documents to skip.
        skip: u64,
        /// The order of the results.
        sort: Document,
    }
}

options_struct! {
    /// Options of `find_one` on a bucket's files collection.
    #[derive(Deserialize)]
    pub struct GridFsFindOneOptions {
        /// `maxTimeMS`.
        #[serde(default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
        max_time: Duration,
        /// Documents to skip.
        skip: u64,
        /// Which document comes first.
        sort: Document,
    }
}

/// The files collection query a bucket's `find` sends.
impl From<GridFsFindOptions> for FindOptions {
    fn from(options: GridFsFindOptions) -> Self {
        FindOptions {
            allow_disk_use: options.allow_disk_use,
            batch_size: options.batch_size,
            limit: options.limit,
            max_time: options.max_time,
            skip: options.skip,
            sort: options.sort,
            ..FindOptions::default()
        }
    }
}

/// The files collection query a bucket's `find_one` sends.
impl From<GridFsFindOneOptions> for FindOneOptions {
    fn from(options: GridFsFindOneOptions) -> Self {
        FindOneOptions {
            max_time: options.max_time,
            skip: options.skip,
            sort: options.sort,
            ..FindOneOptions::default()
        }
    }
}

/// A stored file's document in the files collection. Any numeric type is
/// accepted for `length` and `chunkSize` (other drivers and the shell store
/// doubles or 32-bit lengths), as the spec asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Document")]
#[non_exhaustive]
pub struct FilesCollectionDocument {
    /// The file's id (`_id`).
    #[serde(rename = "_id")]
    pub id: Bson,
    /// Its length in bytes.
    pub length: u64,
    /// The size of every chunk but the last (`chunkSize`).
    #[serde(rename = "chunkSize")]
    pub chunk_size_bytes: u32,
    /// When its upload completed (`uploadDate`).
    #[serde(rename = "uploadDate")]
    pub upload_date: DateTime,
    /// Its name; not unique (revisions share it), absent in some legacy files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The application's data about the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Document>,
}

impl TryFrom<Document> for FilesCollectionDocument {
    type Error = Error;

    fn try_from(mut document: Document) -> Result<Self> {
        let id = document
            .remove("_id")
            .ok_or_else(|| malformed("it has no _id"))?;
        let length = whole_number(document.get("length"), "length")?;
        let chunk_size = whole_number(document.get("chunkSize"), "chunkSize")?;
        let chunk_size_bytes = u32::try_from(chunk_size)
            .ok()
            .filter(|&c| c > 0 || length == 0)
            .ok_or_else(|| malformed(format!("chunkSize {chunk_size} is out of range")))?;
        let upload_date = match document.get("uploadDate") {
            Some(Bson::DateTime(d)) => *d,
            _ => return Err(malformed("uploadDate is missing or not a date")),
        };
        let filename = match document.remove("filename") {
            None | Some(Bson::Null) => None,
            Some(Bson::String(s)) => Some(s),
            Some(_) => return Err(malformed("filename is not a string")),
        };
        let metadata = match document.remove("metadata") {
            None | Some(Bson::Null) => None,
            Some(Bson::Document(d)) => Some(d),
            Some(_) => return Err(malformed("metadata is not a document")),
        };
        let file = FilesCollectionDocument {
            id,
            length,
            chunk_size_bytes,
            upload_date,
            filename,
            metadata,
        };
        file.chunk_count()?;
        Ok(file)
    }
}

fn malformed(message: impl Into<String>) -> Error {
    Error::gridfs(GridFsErrorKind::MalformedFile {
        message: message.into(),
    })
}

/// A non-negative whole number stored as any numeric BSON type.
fn whole_number(value: Option<&Bson>, field: &str) -> Result<u64> {
    let number = match value {
        Some(Bson::Int32(n)) => u64::try_from(*n).ok(),
        Some(Bson::Int64(n)) => u64::try_from(*n).ok(),
        Some(Bson::Double(d)) if d.fract() == 0.0 && *d >= 0.0 && *d < 2f64.powi(63) => {
            Some(*d as u64)
        }
        _ => None,
    };
    number.ok_or_else(|| {
        malformed(format!(
            "{field} is missing or not a non-negative whole number"
        ))
    })
}

impl FilesCollectionDocument {
    /// How many chunks the length and chunk size call for.
    pub(crate) fn chunk_count(&self) -> Result<u32> {
        if self.length == 0 {
            return Ok(0);
        }
        let count = self.length.div_ceil(u64::from(self.chunk_size_bytes));
        u32::try_from(count)
            .ok()
            .filter(|&c| i32::try_from(c).is_ok())
            .ok_or_else(|| malformed(format!("length {} needs {count} chunks", self.length)))
    }

    /// The data length chunk `n` must have: the chunk size, except for the
    /// last chunk, which holds what is left.
    pub(crate) fn expected_chunk_size(&self, n: u32) -> u32 {
        let chunk_size = u64::from(self.chunk_size_bytes);
        let before = u64::from(n) * chunk_size;
        // At most `chunk_size`, so it fits.
        self.length.saturating_sub(before).min(chunk_size) as u32
    }

    /// Chunk `expected_n`'s data, or the spec's error when `chunk` is not
    /// that chunk (one is missing) or its data has the wrong length.
    pub(crate) fn chunk_data<'a>(
        &self,
        chunk: &'a RawDocument,
        expected_n: u32,
    ) -> Result<&'a [u8]> {
        let n = match chunk.get("n") {
            Ok(Some(bson::RawBsonRef::Int32(n))) => i64::from(n),
            Ok(Some(bson::RawBsonRef::Int64(n))) => n,
            Ok(Some(bson::RawBsonRef::Double(d))) if d.fract() == 0.0 => d as i64,
            _ => {
                return Err(malformed_chunk(
                    expected_n,
                    "its n is missing or not a number",
                ))
            }
        };
        if n != i64::from(expected_n) {
            return Err(Error::gridfs(GridFsErrorKind::MissingChunk {
                n: expected_n,
            }));
        }
        let data = match chunk.get("data") {
            Ok(Some(bson::RawBsonRef::Binary(b))) => b.bytes,
            _ => {
                return Err(malformed_chunk(
                    expected_n,
                    "its data is missing or not binary",
                ))
            }
        };
        let expected_size = self.expected_chunk_size(expected_n);
        if data.len() != expected_size as usize {
            return Err(Error::gridfs(GridFsErrorKind::WrongSizeChunk {
                actual_size: data.len(),
                expected_size,
                n: expected_n,
            }));
        }
        Ok(data)
    }
}

fn malformed_chunk(n: u32, what: &str) -> Error {
    Error::gridfs(GridFsErrorKind::MalformedFile {
        message: format!("chunk {n} is malformed: {what}"),
    })
}

/// The sort direction on `uploadDate` and the number of files to skip
/// that find `revision` of a filename.
pub(crate) fn revision_query(revision: i32) -> (i32, u64) {
    if revision < 0 {
        (-1, u64::from((-(i64::from(revision)) - 1) as u32))
    } else {
        (1, u64::from(revision.unsigned_abs()))
    }
}

/// Whether an existing index's key pattern is `wanted`: the same fields in
/// the same order, numbers compared by value (the shell creates indexes
/// with doubles).
pub(crate) fn same_index_keys(existing: &Document, wanted: &[(&str, i32)]) -> bool {
    existing.len() == wanted.len()
        && existing
            .iter()
            .zip(wanted)
            .all(|((key, value), (want_key, want))| {
                let number = match value {
                    Bson::Int32(n) => f64::from(*n),
                    Bson::Int64(n) => *n as f64,
                    Bson::Double(d) => *d,
                    _ => return false,
                };
                key == want_key && number == f64::from(*want)
            })
}

/// One upload's chunk documents, `{_id, files_id, n, data}`, built in one
/// buffer for every chunk of the file: the fields before `data` have the
/// same length in each chunk (an ObjectId, the file's id, an int32), so
/// the data's bytes are appended in place at a fixed offset and the fields
/// before them are written when the chunk is sent. Allocated once, with
/// room for a whole chunk: the allocator is never asked for a chunk-sized
/// block again, and the bytes are never copied into another document.
#[derive(Debug)]
pub(crate) struct ChunkBuffer {
    /// The head's room (zeros until [`Self::seal`]), then the data.
    bytes: Vec<u8>,
    /// The head's length: where the data starts.
    data_start: usize,
    chunk_size: usize,
}

impl ChunkBuffer {
    /// A buffer for the chunks of the file `files_id`; nothing is
    /// allocated until the first [`Self::append`].
    pub(crate) fn new(files_id: &RawBson, chunk_size: u32) -> Self {
        let data_start = chunk_head(ObjectId::from_bytes([0; 12]), files_id, 0, 0).len();
        ChunkBuffer {
            bytes: Vec::new(),
            data_start,
            chunk_size: chunk_size as usize,
        }
    }

    /// Appends as much of `data` as the chunk has room for; returns how
    /// much.
    pub(crate) fn append(&mut self, data: &[u8]) -> usize {
        if self.bytes.capacity() == 0 {
            // The head, the data, the document's closing NUL.
            self.bytes
                .reserve_exact(self.data_start + self.chunk_size + 1);
        }
        if self.bytes.is_empty() {
            self.bytes.resize(self.data_start, 0);
        }
        let taken = (self.chunk_size - self.data_len()).min(data.len());
        self.bytes.extend_from_slice(&data[..taken]);
        taken
    }

    /// The data bytes of the chunk being filled.
    pub(crate) fn data_len(&self) -> usize {
        self.bytes.len().saturating_sub(self.data_start)
    }

    /// Whether the chunk holds `chunk_size` bytes.
    pub(crate) fn is_full(&self) -> bool {
        self.data_len() == self.chunk_size
    }

    /// The chunk as a document, `_id` and `n` given; the buffer is empty
    /// until [`Self::reuse`] gives its bytes back.
    pub(crate) fn seal(
        &mut self,
        files_id: &RawBson,
        id: ObjectId,
        n: i32,
    ) -> Result<RawDocumentBuf> {
        let head = chunk_head(id, files_id, n, self.data_len());
        if head.len() != self.data_start {
            return Err(Error::client("a GridFS chunk's fields changed length"));
        }
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes[..head.len()].copy_from_slice(&head);
        bytes.push(0);
        RawDocumentBuf::from_bytes(bytes)
            .map_err(|e| Error::client(format!("a GridFS chunk is not a document: {e}")))
    }

    /// Takes back a sealed chunk's bytes for the next chunk.
    pub(crate) fn reuse(&mut self, chunk: RawDocumentBuf) {
        let mut bytes = chunk.into_bytes();
        bytes.clear();
        self.bytes = bytes;
    }

    /// Frees the buffer (the upload is over).
    pub(crate) fn release(&mut self) {
        self.bytes = Vec::new();
    }
}

/// A chunk document's bytes before its data: the document's length, `_id`,
/// `files_id`, `n`, and the `data` element's name, length and subtype
/// (generic).
fn chunk_head(id: ObjectId, files_id: &RawBson, n: i32, data_len: usize) -> Vec<u8> {
    let mut fields = RawDocumentBuf::new();
    fields.append("_id", id);
    fields.append("files_id", files_id.clone());
    fields.append("n", n);
    let mut head = fields.into_bytes();
    // Drop the closing NUL: the data element follows.
    head.pop();
    head.push(0x05);
    head.extend_from_slice(b"data\0");
    // At most MAX_CHUNK_SIZE_BYTES, so it fits.
    head.extend_from_slice(&(data_len as i32).to_le_bytes());
    head.push(0x00);
    let total = head.len() + data_len + 1;
    head[..4].copy_from_slice(&(total as i32).to_le_bytes());
    head
}

/// The files collection index the spec requires.
pub(crate) const FILES_INDEX: &[(&str, i32)] = &[("filename", 1), ("uploadDate", 1)];
/// The chunks collection index the spec requires (unique).
pub(crate) const CHUNKS_INDEX: &[(&str, i32)] = &[("files_id", 1), ("n", 1)];

/// Checks a caller's chunk size.
pub(crate) fn check_chunk_size(chunk_size: u32) -> Result<u32> {
    if chunk_size == 0 || chunk_size > MAX_CHUNK_SIZE_BYTES {
        return Err(Error::invalid_argument(format!(
            "chunk_size_bytes {chunk_size} is out of range: a chunk holds 1 to {MAX_CHUNK_SIZE_BYTES} bytes"
        )));
    }
    Ok(chunk_size)
}

#[cfg(test)]
mod tests {
    use bson::{doc, rawdoc, spec::BinarySubtype, Binary};

    use super::*;

    fn file(length: i64, chunk_size: i32) -> FilesCollectionDocument {
        FilesCollectionDocument::try_from(doc! {
            "_id": 1, "length": length, "chunkSize": chunk_size,
            "uploadDate": DateTime::from_millis(0),
        })
        .unwrap()
    }

    fn chunk(n: i32, len: usize) -> bson::RawDocumentBuf {
        rawdoc! { "n": n, "data": Binary { subtype: BinarySubtype::Generic, bytes: vec![7; len] } }
    }

    fn gridfs_kind(error: Error) -> GridFsErrorKind {
        match error.kind() {
            crate::ErrorKind::GridFs(kind) => kind.clone(),
            other => panic!("not a GridFS error: {other}"),
        }
    }

    #[test]
    fn length_and_chunk_size_in_any_numeric_type() {
        let parsed = FilesCollectionDocument::try_from(doc! {
            "_id": 1, "length": 10.0, "chunkSize": 4_i64, "uploadDate": DateTime::from_millis(0),
            "md5": "legacy", "contentType": "ignored",
        })
        .unwrap();
        assert_eq!((parsed.length, parsed.chunk_size_bytes), (10, 4));
        assert_eq!(parsed.chunk_count().unwrap(), 3);
        assert_eq!([0, 1, 2].map(|n| parsed.expected_chunk_size(n)), [4, 4, 2]);
    }

    #[test]
    fn unusable_files_documents_are_errors() {
        for bad in [
            doc! { "_id": 1, "length": -1, "chunkSize": 4, "uploadDate": DateTime::from_millis(0) },
            doc! { "_id": 1, "length": 1.5, "chunkSize": 4, "uploadDate": DateTime::from_millis(0) },
            doc! { "_id": 1, "length": 5, "chunkSize": 0, "uploadDate": DateTime::from_millis(0) },
            doc! { "_id": 1, "length": i64::MAX, "chunkSize": 1, "uploadDate": DateTime::from_millis(0) },
            doc! { "_id": 1, "length": 5, "chunkSize": 4 },
            doc! { "length": 5, "chunkSize": 4, "uploadDate": DateTime::from_millis(0) },
        ] {
            let error = FilesCollectionDocument::try_from(bad.clone()).unwrap_err();
            assert!(
                matches!(gridfs_kind(error), GridFsErrorKind::MalformedFile { .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn each_chunk_must_be_the_next_and_of_the_implied_size() {
        let f = file(10, 4);
        assert_eq!(f.chunk_data(&chunk(0, 4), 0).unwrap().len(), 4);
        assert_eq!(f.chunk_data(&chunk(2, 2), 2).unwrap().len(), 2);
        assert!(matches!(
            gridfs_kind(f.chunk_data(&chunk(2, 4), 1).unwrap_err()),
            GridFsErrorKind::MissingChunk { n: 1 }
        ));
        assert!(matches!(
            gridfs_kind(f.chunk_data(&chunk(1, 3), 1).unwrap_err()),
            GridFsErrorKind::WrongSizeChunk {
                actual_size: 3,
                expected_size: 4,
                n: 1
            }
        ));
        assert!(matches!(
            gridfs_kind(f.chunk_data(&chunk(2, 4), 2).unwrap_err()),
            GridFsErrorKind::WrongSizeChunk {
                actual_size: 4,
                expected_size: 2,
                n: 2
            }
        ));
        assert!(matches!(
            gridfs_kind(
                f.chunk_data(&rawdoc! { "n": 0, "data": "text" }, 0)
                    .unwrap_err()
            ),
            GridFsErrorKind::MalformedFile { .. }
        ));
    }

    #[test]
    fn a_chunk_built_in_place_is_the_document_a_driver_would_build() {
        let files_id = RawBson::String("file".into());
        let mut buffer = ChunkBuffer::new(&files_id, 5);
        assert_eq!(buffer.append(b"abc"), 3);
        assert_eq!(buffer.append(b"defg"), 2, "only the chunk's room");
        assert!(buffer.is_full());
        let id = ObjectId::from_bytes([1; 12]);
        let chunk = buffer.seal(&files_id, id, 0).unwrap();
        let expected = rawdoc! {
            "_id": id, "files_id": "file", "n": 0,
            "data": Binary { subtype: BinarySubtype::Generic, bytes: b"abcde".to_vec() },
        };
        assert_eq!(chunk, expected);

        // The same allocation carries the next (last, short) chunk.
        let at = chunk.as_bytes().as_ptr();
        buffer.reuse(chunk);
        assert_eq!(buffer.append(b"z"), 1);
        let last = buffer.seal(&files_id, id, 1).unwrap();
        assert_eq!(last.as_bytes().as_ptr(), at);
        let expected = rawdoc! {
            "_id": id, "files_id": "file", "n": 1,
            "data": Binary { subtype: BinarySubtype::Generic, bytes: b"z".to_vec() },
        };
        assert_eq!(last, expected);
    }

    #[test]
    fn revisions_sort_and_skip() {
        assert_eq!(revision_query(-1), (-1, 0));
        assert_eq!(revision_query(-3), (-1, 2));
        assert_eq!(revision_query(0), (1, 0));
        assert_eq!(revision_query(2), (1, 2));
        assert_eq!(revision_query(i32::MIN), (-1, 2_147_483_647));
    }

    #[test]
    fn index_keys_compare_numbers_by_value() {
        assert!(same_index_keys(
            &doc! { "filename": 1.0, "uploadDate": 1_i64 },
            FILES_INDEX
        ));
        assert!(same_index_keys(
            &doc! { "files_id": 1, "n": 1 },
            CHUNKS_INDEX
        ));
        assert!(!same_index_keys(
            &doc! { "uploadDate": 1, "filename": 1 },
            FILES_INDEX
        ));
        assert!(!same_index_keys(&doc! { "filename": 1 }, FILES_INDEX));
        assert!(!same_index_keys(
            &doc! { "files_id": 1, "n": -1 },
            CHUNKS_INDEX
        ));
    }
}

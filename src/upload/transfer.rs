//! One file's upload: streamed from disk, hashed on the way, verified.
//!
//! A file up to `part_size` is one PUT; a larger one a multipart upload of
//! `part_size` parts, `parts_in_flight` at once (memory is about their
//! product), after a first local read that hashes it (its SHA-256 goes
//! into the object's metadata, which is named when the upload starts; the
//! bytes sent are hashed again and must agree). A failed multipart upload
//! is aborted, so the store keeps no orphan parts; the object appears only
//! when complete, so a reader never sees half a file.
//!
//! Verification (`[upload] verify`), after the object is complete:
//! - `read-back`: the object is read back whole and its SHA-256 and size
//!   compared with the local file's: what the store holds is what was
//!   read from disk, whatever path the bytes took;
//! - `size`: one HEAD request; the size must match, and the `sha256`
//!   metadata written with the object (S3, GCS, Azure; a local directory
//!   keeps none), when the store returns it, must be the local file's:
//!   this proves the object is the one this upload completed, not that its
//!   bytes were re-hashed.
//!   (An S3 ETag is the MD5 of the bytes only for single-part uploads, so
//!   it is not used.)

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::{
    Attribute, Attributes, GetOptions, ObjectStore, ObjectStoreExt, PutMultipartOptions,
    PutOptions, PutPayload, WriteMultipart,
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::{Target, UploadRecord};
use crate::config::VerifyMode;

/// The user-metadata key of the object's SHA-256 (`x-amz-meta-sha256` on
/// S3).
pub const SHA256_METADATA: &str = "sha256";

/// Read size when hashing a file before a multipart upload.
const HASH_CHUNK: usize = 1 << 20;

/// How files are uploaded.
#[derive(Debug, Clone)]
pub struct TransferSettings {
    /// Files larger than this go up in parts of this size.
    pub part_size: usize,
    /// Parts of one file uploaded at once.
    pub parts_in_flight: usize,
    /// How the object is checked.
    pub verify: VerifyMode,
}

/// Why an upload failed. The local file is kept in every case.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The local file is gone (deleted by hand): nothing to upload.
    #[error("{0} is gone")]
    Missing(PathBuf),
    /// The local file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The store failed (after its own retries).
    #[error("store: {0}")]
    Store(#[from] object_store::Error),
    /// What the store holds is not what was uploaded.
    #[error("verifying {key}: {what} is {found}, expected {expected}")]
    Mismatch {
        key: String,
        what: &'static str,
        expected: String,
        found: String,
    },
}

/// The SHA-256 and length of what went through it.
struct Hashing {
    sha: Sha256,
    bytes: u64,
}

impl Hashing {
    fn new() -> Self {
        Hashing {
            sha: Sha256::new(),
            bytes: 0,
        }
    }

    fn update(&mut self, chunk: &[u8]) {
        self.sha.update(chunk);
        self.bytes += chunk.len() as u64;
    }

    fn hex(self) -> String {
        data_encoding::HEXLOWER.encode(&self.sha.finalize())
    }
}

/// Uploads `dir/file` to `target` and verifies it; the record to keep.
pub async fn upload_file(
    target: Target,
    dir: PathBuf,
    file: String,
    settings: TransferSettings,
) -> Result<UploadRecord, UploadError> {
    let key = target.key(&file);
    let (size, sha256) = upload_path(&target, &dir.join(&file), &key, &settings).await?;
    Ok(UploadRecord {
        location: target.location(&file),
        file,
        bytes: size,
        sha256,
        uploaded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    })
}

/// Uploads the closed local file at `path` under `key`, verified; its size
/// and SHA-256.
pub async fn upload_path(
    target: &Target,
    path: &Path,
    key: &object_store::path::Path,
    settings: &TransferSettings,
) -> Result<(u64, String), UploadError> {
    let mut local = open(path).await?;
    let size = local
        .metadata()
        .await
        .map_err(|e| read_error(path, e))?
        .len();
    let span = Span {
        path,
        from: 0,
        len: size,
        closed: true,
    };
    let sha256 = put_span(target, key, &mut local, &span, settings).await?;
    Ok((size, sha256))
}

/// What a segment upload put, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRecord {
    /// The object's key.
    pub key: String,
    /// Its size.
    pub bytes: u64,
}

/// Uploads bytes `from..to` of `file` in `dir` (read from `file.open`
/// while it is written, from `file` once it closed: the bytes are the
/// same, a WARC file only grows) to its segment key, and verifies them.
pub async fn upload_segment(
    target: Target,
    dir: PathBuf,
    file: String,
    (from, to): (u64, u64),
    settings: TransferSettings,
) -> Result<SegmentRecord, UploadError> {
    let open_path = dir.join(format!("{file}.open"));
    let closed_path = dir.join(&file);
    let (mut local, path) = match open(&open_path).await {
        Ok(local) => (local, open_path),
        Err(UploadError::Missing(_)) => (open(&closed_path).await?, closed_path),
        Err(e) => return Err(e),
    };
    let size = local
        .metadata()
        .await
        .map_err(|e| read_error(&path, e))?
        .len();
    if size < to {
        return Err(mismatch(&target.key(&file), "file size", to, size));
    }
    local
        .seek(std::io::SeekFrom::Start(from))
        .await
        .map_err(|e| read_error(&path, e))?;
    let key = super::join::segment_key(&target, &file, from, to);
    let span = Span {
        path: &path,
        from,
        len: to - from,
        closed: false,
    };
    put_span(&target, &key, &mut local, &span, &settings).await?;
    Ok(SegmentRecord {
        key: key.to_string(),
        bytes: to - from,
    })
}

/// The bytes of a local file an upload sends.
struct Span<'a> {
    path: &'a Path,
    /// Where they start (the file is positioned there).
    from: u64,
    len: u64,
    /// The file is closed: it must end at `from + len` (one that grew is
    /// not ours to trust). A file still written grows on, by design.
    closed: bool,
}

impl Span<'_> {
    /// How much the next read of up to `chunk` bytes asks for, `done`
    /// bytes in: a closed file is read to its end (one that grew is
    /// caught by the size check), a file still written only to the span's.
    fn next_read(&self, chunk: usize, done: u64) -> usize {
        match self.closed {
            true => chunk,
            false => (chunk as u64).min(self.len.saturating_sub(done)) as usize,
        }
    }
}

/// Opens a local file, telling a missing one apart.
async fn open(path: &Path) -> Result<tokio::fs::File, UploadError> {
    tokio::fs::File::open(path)
        .await
        .map_err(|e| read_error(path, e))
}

fn read_error(path: &Path, source: std::io::Error) -> UploadError {
    match source.kind() {
        std::io::ErrorKind::NotFound => UploadError::Missing(path.to_owned()),
        _ => UploadError::Read {
            path: path.to_owned(),
            source,
        },
    }
}

/// Puts `span` of `local` under `key`, in parts when larger than a part,
/// and verifies it as the settings say; its SHA-256.
async fn put_span(
    target: &Target,
    key: &object_store::path::Path,
    local: &mut tokio::fs::File,
    span: &Span<'_>,
    settings: &TransferSettings,
) -> Result<String, UploadError> {
    let sha256 = if span.len <= settings.part_size as u64 {
        put_whole(target, key, local, span).await?
    } else {
        put_parts(target, key, local, span, settings).await?
    };
    match settings.verify {
        VerifyMode::ReadBack => read_back(target, key, span.len, &sha256).await?,
        VerifyMode::Size => head_check(target, key, span.len, &sha256).await?,
    }
    Ok(sha256)
}

/// Checks that what was read is the file as it was measured: a closed
/// file never changes, and one that did is not ours to trust.
fn same_file(
    key: &object_store::path::Path,
    size: u64,
    expected: Option<&str>,
    read: Hashing,
) -> Result<String, UploadError> {
    if read.bytes != size {
        return Err(mismatch(key, "bytes read", size, read.bytes));
    }
    let sha = read.hex();
    match expected {
        Some(first) if first != sha => Err(mismatch(key, "sha256 of a second read", first, sha)),
        _ => Ok(sha),
    }
}

fn mismatch(
    key: &object_store::path::Path,
    what: &'static str,
    expected: impl ToString,
    found: impl ToString,
) -> UploadError {
    UploadError::Mismatch {
        key: key.to_string(),
        what,
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

/// Reads up to `limit` bytes (fewer only at the end of the file).
async fn read_chunk(
    local: &mut tokio::fs::File,
    path: &Path,
    limit: usize,
) -> Result<Bytes, UploadError> {
    let mut buf = Vec::with_capacity(limit);
    (&mut *local)
        .take(limit as u64)
        .read_to_end(&mut buf)
        .await
        .map_err(|source| UploadError::Read {
            path: path.to_owned(),
            source,
        })?;
    Ok(Bytes::from(buf))
}

/// The metadata written with the object: its SHA-256 (where the store
/// keeps metadata).
fn attributes(target: &Target, sha256: &str) -> Attributes {
    let mut attributes = Attributes::new();
    if target.keeps_metadata() {
        attributes.insert(
            Attribute::Metadata(SHA256_METADATA.into()),
            sha256.to_owned().into(),
        );
    }
    attributes
}

/// One PUT of the whole (small) span; its SHA-256.
async fn put_whole(
    target: &Target,
    key: &object_store::path::Path,
    local: &mut tokio::fs::File,
    span: &Span<'_>,
) -> Result<String, UploadError> {
    // A closed file is read one byte past its size: one that grew is caught.
    let limit = span.len as usize + usize::from(span.closed);
    let body = read_chunk(local, span.path, limit).await?;
    let mut read = Hashing::new();
    read.update(&body);
    let sha = same_file(key, span.len, None, read)?;
    let opts = PutOptions {
        attributes: attributes(target, &sha),
        ..Default::default()
    };
    target
        .store()
        .put_opts(key, PutPayload::from_bytes(body), opts)
        .await?;
    Ok(sha)
}

/// Hashes the span (then rewinds to its start): a multipart upload names
/// its metadata before its first part. A closed file is read to its end.
async fn hash_span(
    local: &mut tokio::fs::File,
    span: &Span<'_>,
    part_size: usize,
) -> Result<Hashing, UploadError> {
    let mut hashing = Hashing::new();
    loop {
        let limit = span.next_read(part_size.min(HASH_CHUNK), hashing.bytes);
        if limit == 0 {
            break;
        }
        let chunk = read_chunk(local, span.path, limit).await?;
        if chunk.is_empty() {
            break;
        }
        hashing.update(&chunk);
    }
    local
        .seek(std::io::SeekFrom::Start(span.from))
        .await
        .map_err(|source| UploadError::Read {
            path: span.path.to_owned(),
            source,
        })?;
    Ok(hashing)
}

/// A multipart upload in `part_size` parts, aborted if anything fails; its
/// SHA-256. The span is hashed first (a local read: the digest goes into
/// the object's metadata, named when the upload starts) and again as it
/// is sent; the two must agree.
async fn put_parts(
    target: &Target,
    key: &object_store::path::Path,
    local: &mut tokio::fs::File,
    span: &Span<'_>,
    settings: &TransferSettings,
) -> Result<String, UploadError> {
    let first = same_file(
        key,
        span.len,
        None,
        hash_span(local, span, settings.part_size).await?,
    )?;
    let opts = PutMultipartOptions {
        attributes: attributes(target, &first),
        ..Default::default()
    };
    let upload = target.store().put_multipart_opts(key, opts).await?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, settings.part_size);
    let mut sent = Hashing::new();
    let result: Result<(), UploadError> = async {
        loop {
            let limit = span.next_read(settings.part_size, sent.bytes);
            if limit == 0 {
                return Ok(());
            }
            let chunk = read_chunk(local, span.path, limit).await?;
            if chunk.is_empty() {
                return Ok(());
            }
            sent.update(&chunk);
            writer.wait_for_capacity(settings.parts_in_flight).await?;
            writer.put(chunk);
        }
    }
    .await;
    let checked = result.and_then(|()| same_file(key, span.len, Some(&first), sent));
    match checked {
        Ok(sha) => {
            writer.finish().await?;
            Ok(sha)
        }
        Err(err) => {
            if let Err(abort) = writer.abort().await {
                tracing::warn!(key = %key, error = %abort, "aborting a failed multipart upload failed");
            }
            Err(err)
        }
    }
}

/// Reads the object back and compares its size and SHA-256.
async fn read_back(
    target: &Target,
    key: &object_store::path::Path,
    size: u64,
    sha256: &str,
) -> Result<(), UploadError> {
    let mut stream = target.store().get(key).await?.into_stream();
    let mut hashing = Hashing::new();
    while let Some(chunk) = stream.next().await {
        hashing.update(&chunk?);
    }
    if hashing.bytes != size {
        return Err(mismatch(key, "size", size, hashing.bytes));
    }
    let found = hashing.hex();
    if found != sha256 {
        return Err(mismatch(key, "sha256", sha256, found));
    }
    Ok(())
}

/// One HEAD: the size, and the stored SHA-256 where metadata is kept.
async fn head_check(
    target: &Target,
    key: &object_store::path::Path,
    size: u64,
    sha256: &str,
) -> Result<(), UploadError> {
    let head = GetOptions {
        head: true,
        ..Default::default()
    };
    let got = target.store().get_opts(key, head).await?;
    if got.meta.size != size {
        return Err(mismatch(key, "size", size, got.meta.size));
    }
    let stored = got
        .attributes
        .get(&Attribute::Metadata(SHA256_METADATA.into()))
        .map(|v| v.as_ref().to_owned());
    match stored {
        Some(found) if found != sha256 => Err(mismatch(key, "stored sha256", sha256, found)),
        _ => Ok(()),
    }
}

/// [`read_back`] for the unit tests.
#[cfg(test)]
pub(super) async fn read_back_for_test(
    target: &Target,
    key: &object_store::path::Path,
    size: u64,
    sha256: &str,
) -> Result<(), UploadError> {
    read_back(target, key, size, sha256).await
}

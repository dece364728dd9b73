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
    let path = dir.join(&file);
    let read_err = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => UploadError::Missing(path.clone()),
        _ => UploadError::Read {
            path: path.clone(),
            source,
        },
    };
    let mut local = tokio::fs::File::open(&path).await.map_err(read_err)?;
    let size = local.metadata().await.map_err(read_err)?.len();
    let key = target.key(&file);
    let sha256 = if size <= settings.part_size as u64 {
        put_whole(&target, &key, &mut local, &path, size).await?
    } else {
        put_parts(&target, &key, &mut local, &path, size, &settings).await?
    };
    match settings.verify {
        VerifyMode::ReadBack => read_back(&target, &key, size, &sha256).await?,
        VerifyMode::Size => head_check(&target, &key, size, &sha256).await?,
    }
    Ok(UploadRecord {
        location: target.location(&file),
        file,
        bytes: size,
        sha256,
        uploaded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    })
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

/// One PUT of the whole (small) file; its SHA-256.
async fn put_whole(
    target: &Target,
    key: &object_store::path::Path,
    local: &mut tokio::fs::File,
    path: &Path,
    size: u64,
) -> Result<String, UploadError> {
    // One byte more than the size: a file that grew is caught.
    let body = read_chunk(local, path, size as usize + 1).await?;
    let mut read = Hashing::new();
    read.update(&body);
    let sha = same_file(key, size, None, read)?;
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

/// Hashes the file from its start (then rewinds it): a multipart upload
/// names its metadata before its first part.
async fn hash_file(
    local: &mut tokio::fs::File,
    path: &Path,
    part_size: usize,
) -> Result<Hashing, UploadError> {
    let mut hashing = Hashing::new();
    loop {
        let chunk = read_chunk(local, path, part_size.min(HASH_CHUNK)).await?;
        if chunk.is_empty() {
            break;
        }
        hashing.update(&chunk);
    }
    local
        .seek(std::io::SeekFrom::Start(0))
        .await
        .map_err(|source| UploadError::Read {
            path: path.to_owned(),
            source,
        })?;
    Ok(hashing)
}

/// A multipart upload in `part_size` parts, aborted if anything fails; its
/// SHA-256. The file is hashed first (a local read: the digest goes into
/// the object's metadata, named when the upload starts) and again as it
/// is sent; the two must agree.
async fn put_parts(
    target: &Target,
    key: &object_store::path::Path,
    local: &mut tokio::fs::File,
    path: &Path,
    size: u64,
    settings: &TransferSettings,
) -> Result<String, UploadError> {
    let first = same_file(
        key,
        size,
        None,
        hash_file(local, path, settings.part_size).await?,
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
            let chunk = read_chunk(local, path, settings.part_size).await?;
            if chunk.is_empty() {
                return Ok(());
            }
            sent.update(&chunk);
            writer.wait_for_capacity(settings.parts_in_flight).await?;
            writer.put(chunk);
        }
    }
    .await;
    let checked = result.and_then(|()| same_file(key, size, Some(&first), sent));
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

//! A WARC file's segments in object storage, and putting them back
//! together into the file they were cut from.
//!
//! A checkpoint's seal puts the bytes of the open WARC file that are new
//! since the last seal under `<file>.segments/<from>-<to>` (offsets
//! zero-padded to 20 digits, so names sort by offset). When the file
//! closes, its node puts it up whole under `<file>` and deletes the
//! segments. A node that never closes its file (lost with its disk)
//! leaves the segments; since each starts where the one before ended and
//! ends where a record ends, they concatenate into a valid WARC file: the
//! node's file as it was at its last seal. [`join_file`] does that,
//! verified as any upload, then deletes them.
//!
//! Who joins, and why no one else: a node's own start joins the segments
//! of its earlier runs (the only writer of its file names is itself, and
//! the run that wrote them is over); `trawl uploads join` joins those of
//! a node that is gone for good, when the operator says so. A live
//! node's file is never joined behind its back: the two puts of one key
//! could land in either order, and a join that lands last would replace
//! the node's whole file with a shorter one.

use std::path::{Path, PathBuf};

use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::ObjectStoreExt;
use tokio::io::AsyncWriteExt;

use super::transfer::{upload_path, TransferSettings};
use super::{Target, UploadError};

/// What follows a file's name in the key of its segments' folder.
pub const SEGMENTS: &str = ".segments";

/// Errors joining a file's segments.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The segments do not tile the file: bytes from `at` are in none.
    #[error("{file}: no segment starts at byte {at} (segments end at {end})")]
    Gap { file: String, at: u64, end: u64 },
    /// A segment's name is not `<from>-<to>`.
    #[error("{file}: {name:?} is not a segment's name")]
    BadName { file: String, name: String },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] object_store::Error),
    /// The scratch file failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The joined file's upload failed.
    #[error(transparent)]
    Upload(#[from] UploadError),
}

/// The key of the folder holding `file`'s segments.
pub fn segments_prefix(target: &Target, file: &str) -> Key {
    target.key(&format!("{file}{SEGMENTS}"))
}

/// The key of `file`'s segment of bytes `from..to`.
pub fn segment_key(target: &Target, file: &str, from: u64, to: u64) -> Key {
    segments_prefix(target, file)
        .clone()
        .join(format!("{from:020}-{to:020}"))
}

/// The byte range a segment's name (`<from>-<to>`) stands for.
pub fn parse_segment(name: &str) -> Option<(u64, u64)> {
    let (from, to) = name.split_once('-')?;
    let (from, to) = (from.parse().ok()?, to.parse().ok()?);
    (from < to).then_some((from, to))
}

/// What joining a file's segments takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The whole object holds every segment's bytes: the segments are
    /// only deleted.
    Covered,
    /// The whole object's bytes, if any (`whole`: its length), then these
    /// segments, in order: a file of `len` bytes.
    Join {
        whole: Option<u64>,
        pieces: Vec<(u64, u64)>,
        len: u64,
    },
}

/// Decides how `segments` (byte ranges) and the object already under the
/// file's name (`whole`: its length, if any) make the file: from the end
/// of the whole (or byte 0), the segment starting there that reaches
/// furthest, and so on to the last byte any segment holds. Sans-IO.
pub fn plan(file: &str, whole: Option<u64>, segments: &[(u64, u64)]) -> Result<Plan, JoinError> {
    let end = segments.iter().map(|&(_, to)| to).max().unwrap_or(0);
    let mut at = whole.unwrap_or(0);
    if end <= at {
        return Ok(Plan::Covered);
    }
    let mut pieces = Vec::new();
    while at < end {
        let next = segments
            .iter()
            .filter(|&&(from, _)| from == at)
            .max_by_key(|&&(_, to)| to)
            .ok_or_else(|| JoinError::Gap {
                file: file.to_owned(),
                at,
                end,
            })?;
        pieces.push(*next);
        at = next.1;
    }
    Ok(Plan::Join {
        whole,
        pieces,
        len: end,
    })
}

/// What [`join_file`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The file.
    pub file: String,
    /// Its size in object storage now.
    pub bytes: u64,
    /// Segments deleted.
    pub segments: usize,
    /// Whether a joined file was put (not only segments deleted).
    pub put: bool,
}

/// The files that have segments under the target's prefix, whose names
/// `keep` accepts, sorted.
pub async fn files_with_segments(
    target: &Target,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<String>, JoinError> {
    let listing = target
        .store()
        .list_with_delimiter(Some(target.prefix()))
        .await?;
    let mut files: Vec<String> = listing
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename()?.strip_suffix(SEGMENTS).map(str::to_owned))
        .filter(|file| keep(file))
        .collect();
    files.sort();
    Ok(files)
}

/// The byte ranges of `file`'s segments, and their keys.
async fn segments_of(target: &Target, file: &str) -> Result<Vec<((u64, u64), Key)>, JoinError> {
    let prefix = segments_prefix(target, file);
    let metas: Vec<_> = target.store().list(Some(&prefix)).try_collect().await?;
    metas
        .into_iter()
        .map(|meta| {
            let name = meta.location.filename().unwrap_or_default();
            let range = parse_segment(name).ok_or_else(|| JoinError::BadName {
                file: file.to_owned(),
                name: name.to_owned(),
            })?;
            Ok((range, meta.location))
        })
        .collect()
}

/// Deletes `file`'s segments (after its whole upload, or a join); how
/// many there were.
pub async fn delete_segments(target: &Target, file: &str) -> Result<usize, JoinError> {
    let segments = segments_of(target, file).await?;
    for (_, key) in &segments {
        match target.store().delete(key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // A directory store keeps the emptied folder; an object store has none.
    if let Some(folder) = target.local_path(&segments_prefix(target, file)) {
        let _ = tokio::fs::remove_dir(folder).await;
    }
    Ok(segments.len())
}

/// The size of the object under `key`, if there is one.
async fn size_of(target: &Target, key: &Key) -> Result<Option<u64>, JoinError> {
    match target.store().head(key).await {
        Ok(meta) => Ok(Some(meta.size)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Puts `file`'s segments (after the object already under its name, if
/// any) together in a scratch file under `scratch`, uploads it under the
/// file's name, verified, then deletes the segments. Only for a file no
/// live node is writing (see the module doc).
pub async fn join_file(
    target: &Target,
    scratch: &Path,
    file: &str,
    settings: &TransferSettings,
) -> Result<Joined, JoinError> {
    let segments = segments_of(target, file).await?;
    let key = target.key(file);
    let whole = size_of(target, &key).await?;
    let ranges: Vec<(u64, u64)> = segments.iter().map(|(r, _)| *r).collect();
    let (put, bytes) = match plan(file, whole, &ranges)? {
        Plan::Covered => (false, whole.unwrap_or(0)),
        Plan::Join { whole, pieces, len } => {
            let path = scratch.join(format!("{file}.joining"));
            let mut keys: Vec<Key> = whole.iter().map(|_| key.clone()).collect();
            keys.extend(
                pieces
                    .iter()
                    .map(|&(from, to)| segment_key(target, file, from, to)),
            );
            let written = concatenate(target, &keys, &path).await;
            let uploaded = match written {
                Ok(()) => upload_path(target, &path, &key, settings).await,
                Err(e) => {
                    let _ = tokio::fs::remove_file(&path).await;
                    return Err(e);
                }
            };
            let _ = tokio::fs::remove_file(&path).await;
            let (size, _) = uploaded?;
            debug_assert_eq!(size, len);
            (true, size)
        }
    };
    let deleted = delete_segments(target, file).await?;
    Ok(Joined {
        file: file.to_owned(),
        bytes,
        segments: deleted,
        put,
    })
}

/// Writes the objects under `keys`, one after the other, to `path`
/// (fsynced).
async fn concatenate(target: &Target, keys: &[Key], path: &Path) -> Result<(), JoinError> {
    let io = |source| JoinError::Io {
        path: path.to_owned(),
        source,
    };
    let mut out = tokio::fs::File::create(path).await.map_err(io)?;
    for key in keys {
        let mut stream = target.store().get(key).await?.into_stream();
        while let Some(chunk) = stream.next().await {
            out.write_all(&chunk?).await.map_err(io)?;
        }
    }
    out.flush().await.map_err(io)?;
    out.sync_all().await.map_err(io)?;
    Ok(())
}

//! Uploading closed WARC files to object storage (S3, GCS, Azure, a local
//! directory), so archives leave the node.
//!
//! What is uploaded: every closed `.warc.gz` file of this node (never a
//! `.open` one, which is still being written), oldest name first: files
//! the archive closes while running, and at start those closed earlier
//! (before a crash, or recovered from `.open`) and not in the manifest.
//!
//! How ([`transfer`]): streamed from disk, in parts of `part_size` when
//! larger, hashing SHA-256 on the way; then verified against what the store
//! holds (read back and hashed, or its size and stored digest).
//!
//! What is remembered ([`manifest`]): one fsynced line per verified
//! upload in `uploads.jsonl`, written before the local file may be deleted
//! and before the `uploaded` event is asked for; a second line once the
//! event is written. A file in the manifest is never uploaded again; a
//! file whose upload was cut off is uploaded again, whole, to the same key
//! (the store then holds one object: the last complete one).
//!
//! When a try fails ([`Pending`]): the file waits, with a delay doubling
//! per failure, and is tried again; it is never deleted unless uploaded.
//!
//! The file still being written, at a checkpoint: a cluster publishes a
//! checkpoint only once the records of the pages it counts are in object
//! storage, but closing the WARC file at every checkpoint would leave
//! thousands of small files where an archive expects files of
//! `max_file_bytes`. So a checkpoint's seal puts the open file's new
//! bytes up as a *segment*, `<file>.segments/<from>-<to>` (whole records,
//! fsynced first; see [`Work::Segment`]); when the file closes it goes up
//! whole under its own name and its segments are deleted. A node lost with
//! its disk leaves segments that tile its last file from byte 0: [`join`]
//! puts them together into the file they were part of, at the start of a
//! node with the same id (its earlier runs' files) or by `trawl uploads
//! join` (a node that is gone for good).
//!
//! The Upload actor (`actors/upload.rs`) runs this; the Archive actor
//! tells it about closed files and writes its events.

pub mod join;
pub mod manifest;
mod pending;
mod target;
pub mod transfer;

use std::path::Path;

pub use manifest::{Manifest, UploadRecord};
pub use pending::{Pending, Work};
pub use target::{Target, TargetError};
pub use transfer::{upload_file, upload_segment, TransferSettings, UploadError};

/// Names of the closed WARC files of this node in `dir` (`prefix` is the
/// node's WARC prefix), sorted: `<prefix>-<timestamp>-...warc.gz` (or
/// `.warc.zst`), so files of other nodes sharing the directory are left
/// alone.
pub fn closed_files(dir: &Path, prefix: &str) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| is_own_file(name, prefix))
        .collect();
    names.sort();
    Ok(names)
}

/// Whether `name` is a finished WARC file of the node whose WARC prefix is
/// `prefix` (`<prefix>-<timestamp>-...`; not another node's whose id
/// merely starts with this one's).
pub fn is_own_file(name: &str, prefix: &str) -> bool {
    (name.ends_with(".warc.gz") || name.ends_with(".warc.zst"))
        && name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests;

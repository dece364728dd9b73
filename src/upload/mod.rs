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
//! The Upload actor (`actors/upload.rs`) runs this; the Archive actor
//! tells it about closed files and writes its events.

pub mod manifest;
mod target;
pub mod transfer;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

pub use manifest::{Manifest, UploadRecord};
pub use target::{Target, TargetError};
pub use transfer::{upload_file, TransferSettings, UploadError};

/// Names of the closed WARC files of this node in `dir` (`prefix` is the
/// node's WARC prefix), sorted: `<prefix>-<timestamp>-...warc.gz`, so
/// files of other nodes sharing the directory are left alone.
pub fn closed_files(dir: &Path, prefix: &str) -> std::io::Result<Vec<String>> {
    let head = format!("{prefix}-");
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.ends_with(".warc.gz")
                && name
                    .strip_prefix(&head)
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Files waiting to be uploaded, and those being uploaded: oldest name
/// first, a failed file after its backoff.
#[derive(Debug)]
pub struct Pending {
    /// Files waiting, with the time a failed one may be tried again.
    waiting: BTreeMap<String, Option<Instant>>,
    in_flight: BTreeSet<String>,
    /// Failures of files not yet uploaded (kept while they are in flight).
    failures: BTreeMap<String, u32>,
    retry_delay: Duration,
    max_retry_delay: Duration,
}

impl Pending {
    /// An empty queue; a failed file waits `retry_delay`, doubled per
    /// failure up to `max_retry_delay`.
    pub fn new(retry_delay: Duration, max_retry_delay: Duration) -> Self {
        Pending {
            waiting: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            failures: BTreeMap::new(),
            retry_delay,
            max_retry_delay,
        }
    }

    /// Queues `file`, unless it is queued or being uploaded already.
    pub fn add(&mut self, file: &str) {
        if !self.in_flight.contains(file) {
            self.waiting.entry(file.to_owned()).or_insert(None);
        }
    }

    /// The oldest file ready at `now`, moved to the files in flight.
    pub fn next_ready(&mut self, now: Instant) -> Option<String> {
        let file = self
            .waiting
            .iter()
            .find(|(_, t)| t.is_none_or(|t| t <= now))
            .map(|(f, _)| f.clone())?;
        self.waiting.remove(&file);
        self.in_flight.insert(file.clone());
        Some(file)
    }

    /// `file` is uploaded (or gone): forgotten.
    pub fn done(&mut self, file: &str) {
        self.in_flight.remove(file);
        self.failures.remove(file);
    }

    /// `file`'s upload failed at `now`: it waits, and the wait is returned.
    pub fn failed(&mut self, file: &str, now: Instant) -> Duration {
        self.in_flight.remove(file);
        let failures = self.failures.entry(file.to_owned()).or_insert(0);
        *failures += 1;
        let wait = self
            .retry_delay
            .saturating_mul(1 << (*failures - 1).min(20))
            .min(self.max_retry_delay);
        self.waiting.insert(file.to_owned(), Some(now + wait));
        wait
    }

    /// How long from `now` until the next waiting file is ready (zero if
    /// one is), `None` if none waits.
    pub fn next_wake(&self, now: Instant) -> Option<Duration> {
        self.waiting
            .values()
            .map(|t| t.map_or(Duration::ZERO, |t| t.saturating_duration_since(now)))
            .min()
    }

    /// Files being uploaded.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Files waiting or in flight.
    pub fn len(&self) -> usize {
        self.waiting.len() + self.in_flight.len()
    }

    /// Nothing waits and nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.in_flight.is_empty()
    }

    /// Failures of `file` so far (0 once uploaded).
    pub fn failures(&self, file: &str) -> u32 {
        self.failures.get(file).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;

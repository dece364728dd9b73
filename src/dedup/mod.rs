//! Dedup: the URL-seen set's Bloom pre-filter ([`bloom`]) and cache of
//! popular URLs ([`seen_cache`]) and the SeenSet's shortcut for a site's
//! links to itself ([`shortcut`]), each payload
//! stored once, near-duplicates flagged.
//!
//! - Exact ([`exact`]): the SHA-256 of every archived payload is looked up
//!   at the partition the digest belongs to, crawl-wide (on a cluster, at
//!   the node holding that partition). A later response with the same
//!   payload is archived as a WARC `revisit` record (profile
//!   identical-payload-digest) pointing at the original, and its event
//!   names the original in `duplicate_of`.
//! - Near: the simhash of a page's visible text is looked up among the
//!   stored pages' (within `[dedup] near_distance` bits, at most 3). A match
//!   is flagged in the event (`duplicate_of`), or with
//!   `near_duplicates = "skip-archive"` the page is not archived at all.
//!   Either way its links are still followed. This index is the node's own
//!   ([`DedupIndex`]): on a cluster a page is compared with the pages its
//!   node stored, which for a site's own templates (a site lives in one
//!   partition, on one node) is what matters; near-duplicates across sites
//!   on different nodes are not flagged.
//!
//! [`DedupIndex`] lives in its own RocksDB under the node's dedup
//! directory, written by the Archive actor alone, after the records it
//! points at are written, and without a write-ahead log: a crash can lose
//! recent simhashes (those pages are then not flagged). Simhashes are
//! loaded into memory at start (16 bytes and a URL per page; a crawl of
//! tens of millions of pages wants a disk-backed table here). Exact
//! entries that releases before the partitioned index wrote here are
//! still read, as a fallback, so an upgraded crawl keeps its revisits.
pub mod bloom;
pub mod exact;
pub mod previous;
pub mod seen_cache;
pub mod shortcut;
pub mod simhash;

use std::path::{Path, PathBuf};

use rocksdb::{Direction, IteratorMode, Options, WriteBatch, DB};

pub use crate::config::NearAction;
use crate::store::codec::decode_value;
#[cfg(test)]
use crate::store::codec::encode_value;
use crate::store::StoredCopy;
pub use simhash::{distance, simhash, NearIndex};

/// The response record a payload was first stored in: what a revisit
/// points at. The same shape as a URL record's [`StoredCopy`], which is
/// how it is stored (postcard behind a version byte, `store/codec.rs`;
/// legacy entries of earlier releases are JSON, still read).
pub type Original = StoredCopy;

/// What dedup decided for one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Store it in full.
    New,
    /// Store a revisit of this original.
    Exact(Original),
    /// Store it, flagged as resembling this URL.
    Near(String),
    /// Do not store it (near-duplicate of this URL, skip-archive mode).
    Skip,
}

/// The dedup index could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DedupError {
    /// RocksDB reported an error.
    #[error("dedup index {path}: {source}")]
    Rocks {
        path: PathBuf,
        source: rocksdb::Error,
    },
}

/// What an exact entry's value is, for errors.
const ORIGINAL: &str = "dedup original";
const EXACT: u8 = b'd';
const NEAR: u8 = b's';
/// The key holding the version of the simhash stored under [`NEAR`].
const NEAR_VERSION_KEY: &[u8] = b"v:simhash";
/// Bumped whenever [`simhash`] changes: fingerprints of another version
/// are not comparable, so they are dropped at open (pages archived before
/// then are no longer found as near-duplicates; exact dedup is unaffected).
const NEAR_VERSION: u32 = 3;

/// The dedup store's block cache.
const DEDUP_CACHE_BYTES: usize = 4 << 20;

/// Simhashes remembered before they are written to the store together.
///
/// Why: a put of its own cost ~4.5 µs a page (RocksDB's write path for one
/// key; the memtable insert is 0.7 of it) on the side-by-side bench. The
/// entries are written without a WAL either way, so a crash already lost
/// everything since the last memtable flush; the pending ones add at most
/// this many pages to that, and a close (the index dropped) writes them.
/// Lookups never wait for the write: they read the in-memory index.
const NEAR_BATCH: usize = 256;

/// The node's near index (persisted, loaded into memory), and the exact
/// entries earlier releases kept per node (read only).
pub struct DedupIndex {
    db: DB,
    path: PathBuf,
    near: NearIndex,
    /// Simhash entries not yet written ([`NEAR_BATCH`]).
    pending: WriteBatch,
}

impl DedupIndex {
    /// Opens (or creates) the index in `dir` and loads the simhashes.
    pub fn open(dir: &Path) -> Result<Self, DedupError> {
        let mut opts = Options::default();
        opts.set_info_logger(crate::store::rocks_logger());
        opts.create_if_missing(true);
        // One file-opening thread: RocksDB starts the extra ones even when
        // there is nothing to load (see the partition stores' options).
        opts.set_max_file_opening_threads(1);
        // A small block cache of our own: RocksDB's default is a 32 MiB
        // clock cache whose setup and unmapping showed in a node's start
        // and stop; the simhashes are read once, at open.
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(DEDUP_CACHE_BYTES));
        opts.set_block_based_table_factory(&table);
        let fail = |source| DedupError::Rocks {
            path: dir.to_owned(),
            source,
        };
        let db = DB::open(&opts, dir).map_err(fail)?;
        let stored = db.get(NEAR_VERSION_KEY).map_err(fail)?;
        if stored.as_deref() != Some(&NEAR_VERSION.to_be_bytes()[..]) {
            if stored.is_some() {
                tracing::warn!(dir = %dir.display(), "simhashes of another version dropped");
            }
            let mut batch = WriteBatch::default();
            batch.delete_range([NEAR], [NEAR + 1]);
            batch.put(NEAR_VERSION_KEY, NEAR_VERSION.to_be_bytes());
            db.write(batch).map_err(fail)?;
        }
        let mut near = NearIndex::default();
        for item in db.iterator(IteratorMode::From(&[NEAR], Direction::Forward)) {
            let (key, _) = item.map_err(fail)?;
            if key.first() != Some(&NEAR) || key.len() < 9 {
                break;
            }
            let hash = u64::from_be_bytes(key[1..9].try_into().expect("8 bytes"));
            near.insert(hash, String::from_utf8_lossy(&key[9..]).into_owned());
        }
        Ok(DedupIndex {
            db,
            path: dir.to_owned(),
            near,
            pending: WriteBatch::default(),
        })
    }

    /// The original of a payload stored before, as the node-level index
    /// of earlier releases recorded it, if any.
    pub fn exact(&self, sha256: &[u8; 32]) -> Result<Option<Original>, DedupError> {
        let Some(value) = self.db.get(exact_key(sha256)).map_err(|e| self.fail(e))? else {
            return Ok(None);
        };
        // An unreadable entry is treated as absent: the payload is stored
        // again rather than pointed at something we cannot name.
        match decode_value(ORIGINAL, &value) {
            Ok(original) => Ok(Some(original)),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "unreadable dedup entry ignored");
                Ok(None)
            }
        }
    }

    /// What to do with a payload of SHA-256 `sha256` whose page has the
    /// simhash `hash`, `stored` being the copy its digest's partition
    /// named: exact first (a revisit is cheaper than any flag; the legacy
    /// entries are the fallback), then near, as `settings` ask.
    pub fn judge(
        &self,
        sha256: &[u8; 32],
        stored: Option<Original>,
        hash: Option<u64>,
        settings: &crate::config::DedupConfig,
    ) -> Result<Verdict, DedupError> {
        if settings.exact {
            let original = match stored {
                Some(original) => Some(original),
                None => self.exact(sha256)?,
            };
            if let Some(original) = original {
                return Ok(Verdict::Exact(original));
            }
        }
        let near = hash
            .filter(|_| settings.near_duplicates != NearAction::Off)
            .and_then(|h| self.near(h, settings.near_distance))
            .map(|(url, _)| url.to_owned());
        Ok(match (near, settings.near_duplicates) {
            (Some(_), NearAction::SkipArchive) => Verdict::Skip,
            (Some(url), _) => Verdict::Near(url),
            (None, _) => Verdict::New,
        })
    }

    /// The closest stored page within `max_distance` of `hash`.
    pub fn near(&self, hash: u64, max_distance: u32) -> Option<(&str, u32)> {
        self.near.find(hash, max_distance)
    }

    /// Records the simhash of a page stored in full as an original.
    pub fn remember(&mut self, hash: u64, url: &str) -> Result<(), DedupError> {
        let mut key = Vec::with_capacity(9 + url.len());
        key.push(NEAR);
        key.extend_from_slice(&hash.to_be_bytes());
        key.extend_from_slice(url.as_bytes());
        self.pending.put(key, []);
        self.near.insert(hash, url.to_owned());
        if self.pending.len() >= NEAR_BATCH {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Writes the simhash entries remembered since the last write.
    fn write_pending(&mut self) -> Result<(), DedupError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // No WAL: the index is an optimisation. A crash loses at most the
        // entries since the last memtable flush (those pages are then not
        // flagged); a clean close flushes them.
        let mut opts = rocksdb::WriteOptions::default();
        opts.disable_wal(true);
        let batch = std::mem::take(&mut self.pending);
        self.db.write_opt(batch, &opts).map_err(|e| self.fail(e))
    }

    fn fail(&self, source: rocksdb::Error) -> DedupError {
        DedupError::Rocks {
            path: self.path.clone(),
            source,
        }
    }
}

impl Drop for DedupIndex {
    /// Writes what is pending; the store then flushes its memtable as it
    /// closes.
    fn drop(&mut self) {
        if let Err(err) = self.write_pending() {
            tracing::warn!(error = %err, "simhashes of the last pages not kept");
        }
    }
}

fn exact_key(sha256: &[u8; 32]) -> [u8; 33] {
    let mut key = [0u8; 33];
    key[0] = EXACT;
    key[1..].copy_from_slice(sha256);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn original(uri: &str) -> Original {
        Original {
            uri: uri.into(),
            date: "2026-11-30T00:00:00.000000Z".into(),
            record_id: format!("<urn:uuid:{uri}>"),
        }
    }

    /// An exact entry as the node-level index of earlier releases wrote it.
    fn put_legacy(dir: &Path, sha: &[u8; 32], bytes: Vec<u8>) {
        let db = DB::open_default(dir).unwrap();
        db.put(exact_key(sha), bytes).unwrap();
    }

    #[test]
    fn simhashes_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut index = DedupIndex::open(dir.path()).unwrap();
            index.remember(0xabcd, "http://a.test/").unwrap();
            assert_eq!(index.near(0xabcd, 0), Some(("http://a.test/", 0)));
        }
        let index = DedupIndex::open(dir.path()).unwrap();
        assert_eq!(index.near(0xabcd ^ 0b101, 3), Some(("http://a.test/", 2)));
        assert_eq!(index.near(0xabcd ^ 0b1111, 3), None);
    }

    /// Entries are written in batches: those of full batches and those
    /// still pending at the close are all there after a reopen.
    #[test]
    fn every_simhash_of_several_batches_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let n = NEAR_BATCH as u64 * 2 + 7;
        let url = |i: u64| format!("http://a.test/{i}");
        {
            let mut index = DedupIndex::open(dir.path()).unwrap();
            for i in 0..n {
                index.remember(i << 40, &url(i)).unwrap();
            }
            assert_eq!(index.pending.len(), 7, "two batches written");
        }
        let index = DedupIndex::open(dir.path()).unwrap();
        for i in 0..n {
            assert_eq!(index.near(i << 40, 0), Some((url(i).as_str(), 0)));
        }
    }

    #[test]
    fn legacy_exact_entries_versioned_or_json_are_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let (json, versioned) = ([1u8; 32], [2u8; 32]);
        let old = original("http://a.test/old");
        let new = original("http://a.test/new");
        put_legacy(dir.path(), &json, serde_json::to_vec(&old).unwrap());
        put_legacy(
            dir.path(),
            &versioned,
            encode_value(ORIGINAL, &new).unwrap(),
        );
        let index = DedupIndex::open(dir.path()).unwrap();
        assert_eq!(index.exact(&json).unwrap(), Some(old));
        assert_eq!(index.exact(&versioned).unwrap(), Some(new));
        assert_eq!(index.exact(&[3u8; 32]).unwrap(), None);
    }

    #[test]
    fn the_partitions_copy_comes_first_then_legacy_then_near() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = [1u8; 32];
        put_legacy(
            dir.path(),
            &legacy,
            encode_value(ORIGINAL, &original("http://old.test/")).unwrap(),
        );
        let mut index = DedupIndex::open(dir.path()).unwrap();
        index.remember(0xff00, "http://near.test/").unwrap();
        let settings = crate::config::Config::defaults().dedup;
        let sha = [9u8; 32];
        let stored = original("http://a.test/");
        assert_eq!(
            index
                .judge(&sha, Some(stored.clone()), Some(0xff00), &settings)
                .unwrap(),
            Verdict::Exact(stored)
        );
        assert_eq!(
            index.judge(&legacy, None, None, &settings).unwrap(),
            Verdict::Exact(original("http://old.test/"))
        );
        assert_eq!(
            index.judge(&sha, None, Some(0xff01), &settings).unwrap(),
            Verdict::Near("http://near.test/".into())
        );
        assert_eq!(
            index.judge(&sha, None, Some(0x00ff), &settings).unwrap(),
            Verdict::New
        );
        let off = crate::config::DedupConfig {
            exact: false,
            ..settings
        };
        assert_eq!(
            index
                .judge(&sha, Some(original("http://a.test/")), None, &off)
                .unwrap(),
            Verdict::New,
            "exact dedup off"
        );
    }

    #[test]
    fn simhashes_of_another_version_are_dropped_and_digests_kept() {
        let dir = tempfile::tempdir().unwrap();
        let sha = [9u8; 32];
        put_legacy(
            dir.path(),
            &sha,
            encode_value(ORIGINAL, &original("http://a.test/")).unwrap(),
        );
        {
            let mut index = DedupIndex::open(dir.path()).unwrap();
            index.remember(0xabcd, "http://a.test/").unwrap();
        }
        {
            // As if written by a build with an older simhash.
            let db = DB::open_default(dir.path()).unwrap();
            db.put(NEAR_VERSION_KEY, 1u32.to_be_bytes()).unwrap();
        }
        let index = DedupIndex::open(dir.path()).unwrap();
        assert_eq!(index.near(0xabcd, 3), None);
        assert_eq!(index.exact(&sha).unwrap(), Some(original("http://a.test/")));
    }
}

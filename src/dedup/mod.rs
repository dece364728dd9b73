//! Dedup: the URL-seen set's Bloom pre-filter ([`bloom`]), each payload
//! stored once, near-duplicates flagged.
//!
//! - Exact: the SHA-256 of every archived payload is kept with the
//!   response record that holds it. A later response with the same payload
//!   is archived as a WARC `revisit` record (profile
//!   identical-payload-digest) pointing at the original, and its event
//!   names the original in `duplicate_of`.
//! - Near: the simhash of a page's visible text is looked up among the
//!   stored pages' (within `[dedup] near_distance` bits, at most 3). A match
//!   is flagged in the event (`duplicate_of`), or with
//!   `near_duplicates = "skip-archive"` the page is not archived at all.
//!   Either way its links are still followed.
//!
//! The index lives in its own RocksDB under `data_dir/dedup`, written by
//! the Archive actor alone (one writer, like each partition store), after
//! the records it points at are written, and without a write-ahead log: a
//! crash can lose recent entries (those payloads are then stored in full
//! once more), never produce a revisit without its original.
//! Simhashes are loaded into memory at start (16 bytes and a URL per page;
//! a crawl of tens of millions of pages wants a disk-backed table here).

pub mod bloom;
pub mod simhash;

use std::path::{Path, PathBuf};

use rocksdb::{Direction, IteratorMode, Options, WriteBatch, DB};
use serde::{Deserialize, Serialize};

pub use crate::config::NearAction;
use crate::store::codec::{decode_value, encode_value, CodecError};
pub use simhash::{distance, simhash, NearIndex};

/// The response record a payload was first stored in.
///
/// Stored with [`encode_value`] (postcard behind a version byte): its
/// fields are its stored shape, so changing them means a new version byte
/// (see `store/codec.rs`); entries of earlier releases are JSON, still read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Original {
    /// Its WARC-Target-URI.
    pub uri: String,
    /// Its WARC-Date.
    pub date: String,
    /// Its WARC-Record-ID (`<urn:uuid:…>`).
    pub record_id: String,
}

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
    /// A value could not be encoded.
    #[error("dedup index {path}: {source}")]
    Codec { path: PathBuf, source: CodecError },
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
const NEAR_VERSION: u32 = 2;

/// The persistent exact index and the in-memory near index.
pub struct DedupIndex {
    db: DB,
    path: PathBuf,
    near: NearIndex,
}

impl DedupIndex {
    /// Opens (or creates) the index in `dir` and loads the simhashes.
    pub fn open(dir: &Path) -> Result<Self, DedupError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
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
        })
    }

    /// The original of a payload stored before, if any.
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
    /// simhash `hash`: exact first (a revisit is cheaper than any flag),
    /// then near, as `settings` ask.
    pub fn judge(
        &self,
        sha256: &[u8; 32],
        hash: Option<u64>,
        settings: &crate::config::DedupConfig,
    ) -> Result<Verdict, DedupError> {
        if settings.exact {
            if let Some(original) = self.exact(sha256)? {
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

    /// Records a stored payload (unless its digest is known) and the page's
    /// simhash, in one write.
    pub fn remember(
        &mut self,
        sha256: &[u8; 32],
        original: Option<&Original>,
        hash: Option<u64>,
        url: &str,
    ) -> Result<(), DedupError> {
        let mut batch = WriteBatch::default();
        if let Some(original) = original {
            let bytes = encode_value(ORIGINAL, original).map_err(|source| DedupError::Codec {
                path: self.path.clone(),
                source,
            })?;
            batch.put(exact_key(sha256), bytes);
        }
        if let Some(hash) = hash {
            let mut key = Vec::with_capacity(9 + url.len());
            key.push(NEAR);
            key.extend_from_slice(&hash.to_be_bytes());
            key.extend_from_slice(url.as_bytes());
            batch.put(key, []);
        }
        if batch.is_empty() {
            return Ok(());
        }
        // No WAL: the index is an optimisation. A crash loses at most the
        // entries since the last memtable flush (their payloads are then
        // stored in full once more); a clean close flushes them.
        let mut opts = rocksdb::WriteOptions::default();
        opts.disable_wal(true);
        self.db.write_opt(batch, &opts).map_err(|e| self.fail(e))?;
        if let Some(hash) = hash {
            self.near.insert(hash, url.to_owned());
        }
        Ok(())
    }

    fn fail(&self, source: rocksdb::Error) -> DedupError {
        DedupError::Rocks {
            path: self.path.clone(),
            source,
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

    #[test]
    fn originals_and_simhashes_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let sha = [7u8; 32];
        let original = Original {
            uri: "http://a.test/".into(),
            date: "2026-11-30T00:00:00.000000Z".into(),
            record_id: "<urn:uuid:1>".into(),
        };
        {
            let mut index = DedupIndex::open(dir.path()).unwrap();
            assert_eq!(index.exact(&sha).unwrap(), None);
            index
                .remember(&sha, Some(&original), Some(0xabcd), "http://a.test/")
                .unwrap();
            assert_eq!(index.exact(&sha).unwrap(), Some(original.clone()));
        }
        let index = DedupIndex::open(dir.path()).unwrap();
        assert_eq!(index.exact(&sha).unwrap(), Some(original));
        assert_eq!(index.near(0xabcd ^ 0b101, 3), Some(("http://a.test/", 2)));
        assert_eq!(index.exact(&[8u8; 32]).unwrap(), None);
    }

    #[test]
    fn originals_stored_as_json_by_earlier_releases_are_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let original = Original {
            uri: "http://a.test/old".into(),
            date: "2025-01-01T00:00:00.000000Z".into(),
            record_id: "<urn:uuid:3>".into(),
        };
        let (old, new) = ([1u8; 32], [2u8; 32]);
        {
            let db = DB::open_default(dir.path()).unwrap();
            db.put(exact_key(&old), serde_json::to_vec(&original).unwrap())
                .unwrap();
        }
        let mut index = DedupIndex::open(dir.path()).unwrap();
        assert_eq!(index.exact(&old).unwrap(), Some(original.clone()));
        index
            .remember(&new, Some(&original), None, "http://a.test/new")
            .unwrap();
        let stored = index.db.get(exact_key(&new)).unwrap().unwrap();
        assert_eq!(
            stored[0],
            crate::store::codec::VERSION,
            "new entries are versioned"
        );
        assert_eq!(index.exact(&new).unwrap(), Some(original));
    }

    #[test]
    fn simhashes_of_another_version_are_dropped_and_digests_kept() {
        let dir = tempfile::tempdir().unwrap();
        let sha = [9u8; 32];
        let original = Original {
            uri: "http://a.test/".into(),
            date: "2026-11-30T00:00:00.000000Z".into(),
            record_id: "<urn:uuid:2>".into(),
        };
        {
            let mut index = DedupIndex::open(dir.path()).unwrap();
            index
                .remember(&sha, Some(&original), Some(0xabcd), "http://a.test/")
                .unwrap();
        }
        {
            // As if written by a build with an older simhash.
            let db = DB::open_default(dir.path()).unwrap();
            db.put(NEAR_VERSION_KEY, 1u32.to_be_bytes()).unwrap();
        }
        let index = DedupIndex::open(dir.path()).unwrap();
        assert_eq!(index.near(0xabcd, 3), None);
        assert_eq!(index.exact(&sha).unwrap(), Some(original));
    }
}

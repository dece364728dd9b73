//! The partition store: one RocksDB instance per partition.
//!
//! The PartitionActor is the only writer of its store; HostActors of the
//! partition read their queue range through a shared handle (RocksDB reads
//! are thread-safe and see every acknowledged write). All instances share
//! one block cache and one memtable budget ([`StoreEnv`]) so that 64
//! partitions do not mean 64 times the memory.
//!
//! The central promise lives in [`PartitionStore::admit`]: the seen check
//! and the durable enqueue of a batch of URLs are one `WriteBatch`, so after
//! any crash a URL is either both seen and queued, or neither.
//!
//! One file per concept: `schema.rs` (column families, options, opening),
//! `admission.rs` (the seen check, enqueue and budgets of a batch),
//! `queue.rs` (queue pages, counts, completions), `record.rs` (the URL
//! record: a URL's whole life), `recrawl.rs` (the refresh schedule and its
//! counts by due time), `outbox.rs` (links for partitions owned elsewhere,
//! until acknowledged), `host_state.rs` (robots
//! records and politeness schedules), `files.rs` (the crawl directory's
//! manifest and run marker), [`codec`] (key and value layouts) and
//! `budgets.rs` (the budget counts). This file holds the store type, its
//! error, and the helpers all of them use.

mod admission;
mod blocks;
mod budgets;
mod checkpoint;
pub mod codec;
mod digests;
mod due;
mod files;
mod host_state;
mod inspect;
mod outbox;
mod queue;
mod record;
mod recrawl;
mod schema;
mod slowdowns;
pub mod space;

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use rocksdb::{WriteBatch, WriteOptions, DB};

pub use crate::dedup::bloom::{SeenFilter, SeenMode, SeenSettings};
use crate::dedup::seen_cache::SeenCache;
pub use admission::{AdmitEntry, Admitted, FilterCounts};
pub use blocks::DroppedUrl;
pub use checkpoint::{CheckpointError, CheckpointFile};
pub use codec::{CodecError, QueueValue};
pub use digests::DigestEntry;
pub use due::DueTier;
pub use files::{Manifest, RunMarker};
pub use host_state::HostState;
pub use inspect::{HostQueue, QueuedUrl};
pub use outbox::{OutboxBatch, Pending};
pub use queue::{Completion, QueueEntry};
pub use record::{Lifecycle, Removal, StoredCopy, Tries, UrlRecord, UrlState, Visit};
pub use recrawl::DueCounts;
pub(crate) use schema::rocks_logger;
pub use schema::{StoreEnv, StoreMemory};

use crate::frontier::budget::BudgetSettings;

/// Tunes the process's memory for a crawl; call once, first thing in the
/// process, before any thread starts.
///
/// RocksDB's memtables, table builders and readers are C++ allocations
/// through glibc's malloc (the Rust side uses its own allocator). With
/// glibc's defaults, its mmap threshold rises after the first large free,
/// so later multi-megabyte memtable blocks come from heaps that keep the
/// memory after they are freed, and each of RocksDB's many threads may get
/// an arena of its own. On `benches/frontier_scale.rs` (1 M queued URLs)
/// that left peak RSS at 330–345 MB whatever the block cache and memtable
/// budgets; a fixed 1 MiB threshold and two arenas brought it to 266 MB.
///
/// Transparent huge pages are turned off for the process. mimalloc asks
/// for them on its regions (`madvise`), so every first touch of a region's
/// page faulted in and zeroed 2 MiB, and memory it had given back was
/// zeroed 2 MiB at a time again when reused: the kernel's page clearing
/// was ~7 % of a crawl's CPU samples. Off, on the side-by-side bench (two
/// runs each, alternating): 0.56–0.59 ms of CPU per page against
/// 0.65–0.68, peak RSS 150–152 MB against 179–182.
///
/// Elsewhere than Linux (with glibc, for the heap settings) this does
/// nothing.
pub fn tune_native_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets malloc parameters; it is called before
    // other threads exist, and a rejected value leaves the default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process's memory
    // map; a kernel without it returns an error, which leaves THP as it
    // was (a cost, not a fault).
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Errors of the partition store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB reported an error.
    #[error("rocksdb at {path}: {source}")]
    Rocks {
        path: PathBuf,
        source: rocksdb::Error,
    },
    /// A key or counter does not parse: the store is corrupt or foreign.
    #[error("corrupt {what} in {path}")]
    Corrupt { path: PathBuf, what: &'static str },
    /// A stored value cannot be encoded or decoded (see [`codec`]).
    #[error("{path}: {source}")]
    Codec { path: PathBuf, source: CodecError },
    /// The crawl manifest is unreadable or contradicts the config.
    #[error("crawl manifest {path}: {message}")]
    Manifest { path: PathBuf, message: String },
    /// Another process (or another open in this one) holds the store: on a
    /// cluster, the partition's current owner. Owning a partition means
    /// holding its store open; this is the fence.
    #[error("partition store {path} is held by another owner")]
    Locked { path: PathBuf },
}

/// One partition's RocksDB instance.
pub struct PartitionStore {
    db: DB,
    path: PathBuf,
    /// The Bloom filter in front of the `urls` family.
    seen: SeenFilter,
    /// Fingerprints known to be in the `urls` family, so a filter's
    /// "maybe" for a popular URL is not read from the store each time.
    seen_cache: std::sync::Mutex<SeenCache>,
    /// Host and domain budgets.
    budget: BudgetSettings,
    /// Their counts (the partition actor is the only writer; the lock is
    /// uncontended).
    book: std::sync::Mutex<budgets::Book>,
    /// Next queue sequence number; only the owning PartitionActor admits.
    next_seq: AtomicU64,
    /// The bound stored under `META_SEQ`: every number handed out is below
    /// it (see [`schema::SEQ_RESERVE`]).
    seq_reserved: AtomicU64,
    sync_writes: bool,
    /// Where the queue is: the versioned family, or (only in a store opened
    /// read-only before its first writable open) the unversioned one.
    queue: schema::QueueFamily,
    /// Scheduled refreshes by due minute (`recrawl.rs`).
    due_book: std::sync::Mutex<recrawl::DueBook>,
    /// Next outbox sequence number (`outbox.rs`).
    outbox_seq: AtomicU64,
    /// How each host's queue is ordered (the rank written in its keys).
    ordering: crate::frontier::importance::Ordering,
}

impl PartitionStore {
    /// Makes everything written so far survive a power loss, after
    /// writing the linking domains the budgets hold back (see
    /// `budgets.rs`).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.save_linkers()?;
        self.db.flush_wal(true).map_err(|e| self.rocks(e))
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let mut opts = WriteOptions::default();
        opts.set_sync(self.sync_writes);
        self.db.write_opt(batch, &opts).map_err(|e| self.rocks(e))
    }

    /// [`PartitionStore::write`] without the WAL, for scratch a crash may
    /// lose (the due index's tier).
    fn write_unlogged(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let mut opts = WriteOptions::default();
        opts.disable_wal(true);
        self.db.write_opt(batch, &opts).map_err(|e| self.rocks(e))
    }

    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.db.get_cf(self.cf(cf), key).map_err(|e| self.rocks(e))
    }

    /// Every entry of `cf` in order, read past the block cache: the scans
    /// that open a store (the seen filter's fingerprints, the queue
    /// counts, the due times, the refresh book) read each block once, and
    /// cached they filled the shared cache with blocks nothing reads again
    /// (39 MB of a resumed 1 M-URL crawl's 158 MB heap, up to the whole
    /// cache on a larger one) and pushed out the ones the crawl uses.
    fn scan(&self, cf: &rocksdb::ColumnFamily) -> rocksdb::DBIteratorWithThreadMode<'_, DB> {
        self.db
            .iterator_cf_opt(cf, scan_options(), rocksdb::IteratorMode::Start)
    }

    /// [`PartitionStore::scan`] as a raw iterator (for scans that seek).
    fn raw_scan(&self, cf: &rocksdb::ColumnFamily) -> rocksdb::DBRawIteratorWithThreadMode<'_, DB> {
        self.db.raw_iterator_cf_opt(cf, scan_options())
    }

    fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        self.db
            .cf_handle(name)
            .expect("column families are created at open")
    }

    fn rocks(&self, source: rocksdb::Error) -> StoreError {
        StoreError::Rocks {
            path: self.path.clone(),
            source,
        }
    }

    fn codec(&self, source: CodecError) -> StoreError {
        StoreError::Codec {
            path: self.path.clone(),
            source,
        }
    }

    /// Entries in `cf`'s active memtable: every put, merge and delete
    /// since the last flush, each key as often as it was written.
    #[cfg(test)]
    fn memtable_entries(&self, cf: &str) -> u64 {
        self.db
            .property_int_value_cf(self.cf(cf), "rocksdb.num-entries-active-mem-table")
            .unwrap()
            .unwrap()
    }

    fn corrupt(&self, what: &'static str) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what,
        }
    }
}

/// Helpers shared by the store's unit tests (and `entry` by other
/// modules' tests that build admission entries).
#[cfg(test)]
pub(crate) mod test_support {
    use std::path::Path;

    use super::*;
    use crate::config::Config;
    use crate::frontier::{EntryKind, Priority};
    use crate::store::codec::QueueValue;
    use crate::url::Fingerprint;

    pub(crate) fn entry(url: &str, host: &str) -> AdmitEntry {
        AdmitEntry {
            provenance: Default::default(),
            fp: Fingerprint::of(url),
            url: url.into(),
            host: host.into(),
            depth: 1,
            priority: Priority::NORMAL,
            kind: EntryKind::Page,
            queue: true,
            referrer: None,
            lastmod_ms: None,
            cash: crate::frontier::importance::Cash::UNKNOWN,
        }
    }

    pub(super) fn open(dir: &Path) -> PartitionStore {
        let env = StoreEnv::new(&Config::defaults().storage);
        PartitionStore::open(&env, dir, 0).unwrap()
    }

    /// A store whose hosts' queues are ordered by importance.
    pub(super) fn open_by_importance(dir: &Path) -> PartitionStore {
        let env = StoreEnv::new(&Config::defaults().storage)
            .with_ordering(crate::frontier::importance::Ordering::Importance);
        PartitionStore::open(&env, dir, 0).unwrap()
    }

    pub(super) fn open_with(dir: &Path, mode: SeenMode, expected_urls: usize) -> PartitionStore {
        let seen = SeenSettings {
            mode,
            expected_urls,
            false_positive_rate: 0.3,
            ..SeenSettings::default()
        };
        let env = StoreEnv::new(&Config::defaults().storage).with_seen(seen);
        PartitionStore::open(&env, dir, 0).unwrap()
    }

    pub(super) fn pages(range: std::ops::Range<u32>) -> Vec<AdmitEntry> {
        range
            .map(|i| entry(&format!("http://a.test/{i}"), "a.test"))
            .collect()
    }

    /// The unversioned queue layout of earlier releases, as they wrote it.
    pub(super) fn encode_legacy_queue_value(v: &QueueValue) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + v.url.len());
        out.extend_from_slice(&v.fp.to_bytes());
        out.extend_from_slice(&v.depth.to_le_bytes());
        match &v.kind {
            EntryKind::Page => out.push(0),
            EntryKind::Redirected { hops } => out.extend_from_slice(&[3, *hops]),
            EntryKind::Sitemap { submitter: None } => out.push(1),
            EntryKind::Sitemap {
                submitter: Some(host),
            } => {
                out.push(2);
                out.extend_from_slice(&(host.len() as u16).to_le_bytes());
                out.extend_from_slice(host.as_bytes());
            }
        }
        out.extend_from_slice(v.url.as_bytes());
        out
    }
}

#[cfg(all(test, target_os = "linux"))]
mod heap_tests {
    #[test]
    fn the_tuned_process_has_no_transparent_huge_pages() {
        super::tune_native_heap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let thp = status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:").map(str::trim));
        // Kernels before 6.0 do not report it; where they do, it is off.
        if let Some(enabled) = thp {
            assert_eq!(enabled, "0");
        }
    }
}

/// Read options of a scan that reads each block once: past the block
/// cache (see [`PartitionStore::scan`]).
fn scan_options() -> rocksdb::ReadOptions {
    let mut opts = rocksdb::ReadOptions::default();
    opts.fill_cache(false);
    opts
}

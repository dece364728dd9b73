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

mod budgets;
pub mod codec;
mod due;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, Direction, IteratorMode, Options, WriteBatch,
    WriteBufferManager, WriteOptions, DB,
};
use serde::{Deserialize, Serialize};

pub use crate::dedup::bloom::{SeenFilter, SeenMode, SeenSettings};
pub use codec::{QueueValue, UrlRecord, UrlState};

use crate::config::StorageConfig;
use crate::frontier::budget::{BudgetSettings, OverBudget};
use crate::frontier::{EntryKind, Priority, LEVELS};
use crate::politeness::Schedule;
use crate::robots::RobotsRecord;
use crate::url::Fingerprint;

const CF_URLS: &str = "urls";
const CF_QUEUE: &str = "queue";
const CF_HOSTS: &str = "hosts";
const CF_SCHEDULES: &str = "schedules";
const CF_META: &str = "meta";
const CF_BUDGETS: &str = "budgets";
/// host → URLs queued (i64 BE), kept by merge operands in the same batches
/// as the queue itself, so a partition starts without scanning its queue.
const CF_QUEUED: &str = "queued";
/// Present once `queued` holds the counts (stores made before it existed
/// are counted once, at their first start).
const META_COUNTS: &[u8] = b"queued-counts";
/// host → when a passivated host comes due (see `due.rs`).
const CF_DUE: &str = "due";
const ALL_CFS: [&str; 8] = [
    CF_URLS,
    CF_QUEUE,
    CF_HOSTS,
    CF_SCHEDULES,
    CF_META,
    CF_BUDGETS,
    CF_QUEUED,
    CF_DUE,
];

/// The `queued` family's merge: the sum of the stored count and the deltas.
fn add_counts(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let read = |b: &[u8]| b.try_into().map_or(0, i64::from_be_bytes);
    let sum = operands
        .iter()
        .fold(existing.map_or(0, read), |sum, op| sum + read(op));
    Some(sum.to_be_bytes().to_vec())
}
const META_SEQ: &[u8] = b"seq";

/// Errors of the partition store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB reported an error.
    #[error("rocksdb at {path}: {source}")]
    Rocks {
        path: PathBuf,
        source: rocksdb::Error,
    },
    /// A stored value does not decode: the store is corrupt or foreign.
    #[error("corrupt {what} in {path}")]
    Corrupt { path: PathBuf, what: &'static str },
    /// The crawl manifest is unreadable or contradicts the config.
    #[error("crawl manifest {path}: {message}")]
    Manifest { path: PathBuf, message: String },
}

/// Resources shared by every partition store of a node.
pub struct StoreEnv {
    /// One block cache for all partitions.
    cache: Cache,
    /// One memtable budget for all partitions.
    write_buffers: WriteBufferManager,
    /// fsync the WAL on each write.
    sync_writes: bool,
    /// How each partition's seen filter is sized and used.
    seen: SeenSettings,
    /// Host and domain budgets.
    budget: BudgetSettings,
}

impl StoreEnv {
    /// Sets the host and domain budgets.
    pub fn with_budgets(mut self, budget: BudgetSettings) -> Self {
        self.budget = budget;
        self
    }

    /// Sets how each partition's seen filter is sized and used.
    pub fn with_seen(mut self, seen: SeenSettings) -> Self {
        self.seen = seen;
        self
    }

    /// Builds the shared cache and memtable budget from the config.
    pub fn new(config: &StorageConfig) -> Self {
        let cache = Cache::new_lru_cache(config.block_cache_bytes);
        let write_buffers = WriteBufferManager::new_write_buffer_manager_with_cache(
            config.write_buffer_bytes,
            false,
            cache.clone(),
        );
        StoreEnv {
            cache,
            write_buffers,
            sync_writes: config.sync_writes,
            seen: SeenSettings::default(),
            budget: BudgetSettings::default(),
        }
    }

    fn db_options(&self) -> Options {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_write_buffer_manager(&self.write_buffers);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts.set_max_background_jobs(2);
        // Small partitions: keep per-instance file handles and logs modest.
        opts.set_max_open_files(256);
        opts.set_keep_log_file_num(2);
        opts
    }

    fn cf_options(&self, point_lookups: bool) -> Options {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&self.cache);
        if point_lookups {
            // The seen check is a point lookup that mostly misses: a Bloom
            // filter per SST answers those misses without reading blocks.
            table.set_bloom_filter(10.0, false);
        }
        let mut opts = Options::default();
        opts.set_block_based_table_factory(&table);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts
    }
}

/// A URL offered for admission to a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitEntry {
    /// Fingerprint of the normalised URL (the identity).
    pub fp: Fingerprint,
    /// The URL to fetch.
    pub url: String,
    /// Host key (queue owner).
    pub host: String,
    /// Hops from the seed (pages) or index depth (sitemaps).
    pub depth: u32,
    /// Which of the host's queues it joins.
    pub priority: Priority,
    /// Page or sitemap.
    pub kind: EntryKind,
    /// Queue it for fetching; `false` records it as seen
    /// ([`UrlState::Excluded`]) and nothing more.
    pub queue: bool,
    /// Registrable domain of the page linking to it, if it is a link.
    pub referrer: Option<String>,
}

/// What [`PartitionStore::admit`] did with a batch.
#[derive(Debug, Default)]
pub struct Admitted {
    /// Entries queued, sorted by fingerprint.
    pub entries: Vec<AdmitEntry>,
    /// Entries refused by a budget (not recorded: rediscovery may admit
    /// them once the budget has grown).
    pub over_budget: Vec<OverBudget>,
    /// What the seen filter answered for the batch's distinct URLs.
    pub filter: FilterCounts,
}

/// The seen filter's answers for one batch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FilterCounts {
    /// "Certainly new": no read.
    pub absent: u64,
    /// "Maybe seen", and the store had it (or, in Bloom mode, unchecked).
    pub maybe_seen: u64,
    /// "Maybe seen", but the store did not have it: a false positive that
    /// cost a read (exact mode; their rate tells whether the filter is
    /// sized right).
    pub false_positive: u64,
}

/// One entry of a host's durable queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// The queue key; completing the entry deletes it.
    pub key: Vec<u8>,
    /// The decoded value.
    pub value: QueueValue,
}

impl QueueEntry {
    /// The priority the entry was queued at.
    pub fn priority(&self) -> Priority {
        codec::queue_key_priority(&self.key).unwrap_or(Priority::LOW)
    }
}

/// A finished queue entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The URL's fingerprint.
    pub fp: Fingerprint,
    /// Its queue key.
    pub queue_key: Vec<u8>,
    /// Hops from the seed.
    pub depth: u32,
    /// Final state (never `Queued`).
    pub state: UrlState,
}

/// Durable state of a host: loaded when its actor activates, saved when it
/// passivates (the schedule also with every completion).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostState {
    /// robots.txt fetches by origin key (`scheme://host:port`).
    pub robots: BTreeMap<String, RobotsRecord>,
    /// The politeness schedule, if the host was ever fetched from.
    pub schedule: Option<Schedule>,
}

/// One partition's RocksDB instance.
pub struct PartitionStore {
    db: DB,
    path: PathBuf,
    /// The Bloom filter in front of the `urls` family.
    seen: SeenFilter,
    /// Host and domain budgets.
    budget: BudgetSettings,
    /// Their counts (the partition actor is the only writer; the lock is
    /// uncontended).
    book: std::sync::Mutex<budgets::Book>,
    /// Next queue sequence number; only the owning PartitionActor admits.
    next_seq: AtomicU64,
    sync_writes: bool,
}

impl PartitionStore {
    /// The directory of partition `id` under `data_dir`.
    pub fn dir(data_dir: &Path, id: u16) -> PathBuf {
        data_dir.join("partitions").join(format!("{id:03}"))
    }

    /// Opens (or creates) partition `id` for writing.
    pub fn open(env: &StoreEnv, data_dir: &Path, id: u16) -> Result<Self, StoreError> {
        let path = Self::dir(data_dir, id);
        let cfs = ALL_CFS.map(|name| {
            let mut opts = env.cf_options(name != CF_QUEUE);
            if name == CF_QUEUED {
                opts.set_merge_operator_associative("add_counts", add_counts);
            }
            ColumnFamilyDescriptor::new(name, opts)
        });
        let db = DB::open_cf_descriptors(&env.db_options(), &path, cfs).map_err(|source| {
            StoreError::Rocks {
                path: path.clone(),
                source,
            }
        })?;
        let mut store = Self::from_db(db, path, env.sync_writes)?;
        store.seen = SeenFilter::new(env.seen);
        store.budget = env.budget;
        store.rebuild_seen_filter()?;
        Ok(store)
    }

    /// Fills the seen filter with every fingerprint in the store.
    fn rebuild_seen_filter(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        let mut count = 0u64;
        for item in self.db.iterator_cf(self.cf(CF_URLS), IteratorMode::Start) {
            let (key, _) = item.map_err(|e| self.rocks(e))?;
            if let Some(fp) = Fingerprint::from_bytes(&key) {
                self.seen.insert(fp);
                count += 1;
            }
        }
        if count > 0 {
            tracing::info!(path = %self.path.display(), urls = count, ms = started.elapsed().as_millis() as u64, "seen filter rebuilt");
        }
        Ok(())
    }

    /// Opens partition `id` read-only, e.g. to inspect a crawl that is not
    /// running.
    pub fn open_read_only(data_dir: &Path, id: u16) -> Result<Self, StoreError> {
        let path = Self::dir(data_dir, id);
        let opts = Options::default();
        let db =
            DB::open_cf_for_read_only(&opts, &path, [CF_URLS, CF_QUEUE, CF_HOSTS, CF_META], false)
                .map_err(|source| StoreError::Rocks {
                    path: path.clone(),
                    source,
                })?;
        Self::from_db(db, path, false)
    }

    fn from_db(db: DB, path: PathBuf, sync_writes: bool) -> Result<Self, StoreError> {
        let mut store = PartitionStore {
            db,
            path,
            seen: SeenFilter::new(SeenSettings::default()),
            budget: BudgetSettings::default(),
            book: Default::default(),
            next_seq: AtomicU64::new(0),
            sync_writes,
        };
        let seq = match store.get(CF_META, META_SEQ)? {
            Some(bytes) => u64::from_be_bytes(
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| store.corrupt("sequence counter"))?,
            ),
            None => 0,
        };
        store.next_seq = AtomicU64::new(seq);
        Ok(store)
    }

    /// Admits the entries not seen before: marks them seen and appends them
    /// to their host's queue in one atomic write. Returns the admitted ones
    /// (duplicates within `entries` count once).
    ///
    /// Only entries the seen filter may have seen are looked up (see
    /// `dedup/bloom.rs`); in Bloom mode none are.
    pub fn admit(&self, entries: Vec<AdmitEntry>) -> Result<Admitted, StoreError> {
        // A poisoned lock only means a panic mid-batch: the cache may be
        // ahead of the store, so it is dropped, like after any failure.
        let mut book = self.book.lock().unwrap_or_else(|poisoned| {
            let mut book = poisoned.into_inner();
            book.clear();
            book
        });
        book.trim();
        let result = self.admit_with(&mut book, entries);
        if result.is_err() {
            // Counts of a batch that was not written must not be kept.
            book.clear();
        }
        result
    }

    fn admit_with(
        &self,
        book: &mut budgets::Book,
        mut entries: Vec<AdmitEntry>,
    ) -> Result<Admitted, StoreError> {
        let mut batch = WriteBatch::default();
        let budgets = !self.budget.is_unlimited();
        if budgets {
            // Every link counts toward its target's budget, before the
            // batch's duplicates (other referrers of one URL) are dropped.
            for entry in &entries {
                self.note_link(book, entry, &mut batch)?;
            }
        }
        // Sorted keys let RocksDB's batched multi-get walk each SST once.
        entries.sort_unstable_by_key(|e| e.fp);
        entries.dedup_by_key(|e| e.fp);
        let maybe: Vec<bool> = entries.iter().map(|e| self.seen.maybe_seen(e.fp)).collect();
        let probe: Vec<[u8; 16]> = match self.seen.mode() {
            SeenMode::Exact => entries
                .iter()
                .zip(&maybe)
                .filter(|(_, m)| **m)
                .map(|(e, _)| e.fp.to_bytes())
                .collect(),
            SeenMode::Bloom => Vec::new(),
        };
        let urls = self.cf(CF_URLS);
        let mut found = self.db.batched_multi_get_cf(urls, &probe, true).into_iter();
        let mut seq = self.next_seq.load(Ordering::Relaxed);
        let mut admitted = Vec::new();
        let mut over_budget = Vec::new();
        let mut filter = FilterCounts::default();
        let mut fresh = Vec::new();
        for (entry, maybe) in entries.into_iter().zip(maybe) {
            let key = entry.fp.to_bytes();
            let seen = match (maybe, self.seen.mode()) {
                (false, _) => false,
                (true, SeenMode::Bloom) => true,
                (true, SeenMode::Exact) => {
                    let hit = found.next().expect("one lookup per probed entry");
                    hit.map_err(|e| self.rocks(e))?.is_some()
                }
            };
            match (maybe, seen) {
                (false, _) => filter.absent += 1,
                (true, true) => filter.maybe_seen += 1,
                (true, false) => filter.false_positive += 1,
            }
            if seen {
                continue;
            }
            // Pages are budgeted; sitemaps (a few per host) are not.
            if budgets && entry.queue && entry.kind.is_page() {
                if let Err(over) = self.charge(book, &entry, &mut batch)? {
                    over_budget.push(over);
                    continue;
                }
            }
            fresh.push(entry.fp);
            if !entry.queue {
                let record = UrlRecord {
                    state: UrlState::Excluded,
                    depth: entry.depth,
                };
                batch.put_cf(urls, key, record.encode());
                continue;
            }
            let record = UrlRecord {
                state: UrlState::Queued,
                depth: entry.depth,
            };
            batch.put_cf(urls, key, record.encode());
            let value = QueueValue {
                fp: entry.fp,
                depth: entry.depth,
                kind: entry.kind.clone(),
                url: entry.url.clone(),
            };
            batch.put_cf(
                self.cf(CF_QUEUE),
                codec::queue_key(&entry.host, entry.priority, seq),
                value.encode(),
            );
            seq += 1;
            admitted.push(entry);
        }
        if batch.is_empty() {
            return Ok(Admitted {
                entries: admitted,
                over_budget,
                filter,
            });
        }
        batch.put_cf(self.cf(CF_META), META_SEQ, seq.to_be_bytes());
        let mut queued: HashMap<&str, i64> = HashMap::new();
        for entry in &admitted {
            *queued.entry(entry.host.as_str()).or_default() += 1;
        }
        for (host, delta) in queued {
            batch.merge_cf(self.cf(CF_QUEUED), host, delta.to_be_bytes());
        }
        self.write(batch)?;
        self.next_seq.store(seq, Ordering::Relaxed);
        // After the write: the filter never claims what the store lacks.
        for fp in fresh {
            self.seen.insert(fp);
        }
        Ok(Admitted {
            entries: admitted,
            over_budget,
            filter,
        })
    }

    /// Records finished entries and removes them from their queues, with
    /// their hosts' politeness schedules (a later schedule of one host
    /// wins), in one atomic write.
    pub fn complete(
        &self,
        completions: &[Completion],
        schedules: &[(&str, &Schedule)],
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for (host, schedule) in schedules {
            let bytes = serde_json::to_vec(schedule).expect("schedule serialises");
            batch.put_cf(self.cf(CF_SCHEDULES), host.as_bytes(), bytes);
        }
        let mut done: HashMap<&str, i64> = HashMap::new();
        for c in completions {
            let record = UrlRecord {
                state: c.state,
                depth: c.depth,
            };
            batch.put_cf(self.cf(CF_URLS), c.fp.to_bytes(), record.encode());
            batch.delete_cf(self.cf(CF_QUEUE), &c.queue_key);
            let host =
                codec::queue_key_host(&c.queue_key).ok_or_else(|| self.corrupt("queue key"))?;
            *done.entry(host).or_default() -= 1;
        }
        for (host, delta) in done {
            batch.merge_cf(self.cf(CF_QUEUED), host, delta.to_be_bytes());
        }
        self.write(batch)
    }

    /// Up to `limit` entries of `host`'s queue at `priority` after key
    /// `after` (exclusive), in admission order.
    pub fn queue_page(
        &self,
        host: &str,
        priority: Priority,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        let prefix = codec::queue_prefix(host, priority);
        let start = after.unwrap_or(&prefix);
        let iter = self.db.iterator_cf(
            self.cf(CF_QUEUE),
            IteratorMode::From(start, Direction::Forward),
        );
        let mut out = Vec::new();
        for item in iter {
            let (key, value) = item.map_err(|e| self.rocks(e))?;
            if !key.starts_with(&prefix) || out.len() >= limit {
                break;
            }
            if Some(&key[..]) == after {
                continue;
            }
            let value = QueueValue::decode(&value).ok_or_else(|| self.corrupt("queue entry"))?;
            out.push(QueueEntry {
                key: key.into_vec(),
                value,
            });
        }
        Ok(out)
    }

    /// Every host with queued entries and how many it has. Used once at
    /// start to reactivate the hosts a previous run left with work.
    pub fn queued_by_host(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        if self.get(CF_META, META_COUNTS)?.is_none() {
            return self.count_queue();
        }
        let mut hosts = BTreeMap::new();
        for item in self.db.iterator_cf(self.cf(CF_QUEUED), IteratorMode::Start) {
            let (key, value) = item.map_err(|e| self.rocks(e))?;
            let n = <[u8; 8]>::try_from(value.as_ref())
                .map(i64::from_be_bytes)
                .map_err(|_| self.corrupt("queued count"))?;
            if n > 0 {
                let host = std::str::from_utf8(&key).map_err(|_| self.corrupt("queued host"))?;
                hosts.insert(host.to_owned(), n as u64);
            }
        }
        Ok(hosts)
    }

    /// Counts the queue by scanning it, and stores the counts (a store made
    /// before counts were kept; once).
    fn count_queue(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        let mut hosts = BTreeMap::new();
        for item in self.db.iterator_cf(self.cf(CF_QUEUE), IteratorMode::Start) {
            let (key, _) = item.map_err(|e| self.rocks(e))?;
            let host = codec::queue_key_host(&key).ok_or_else(|| self.corrupt("queue key"))?;
            *hosts.entry(host.to_owned()).or_insert(0u64) += 1;
        }
        let mut batch = WriteBatch::default();
        for (host, n) in &hosts {
            batch.put_cf(
                self.cf(CF_QUEUED),
                host.as_bytes(),
                (*n as i64).to_be_bytes(),
            );
        }
        batch.put_cf(self.cf(CF_META), META_COUNTS, []);
        self.write(batch)?;
        Ok(hosts)
    }

    /// Queued entries of `host` by priority level.
    pub fn queued_by_priority(&self, host: &str) -> Result<[u64; LEVELS], StoreError> {
        let prefix = codec::host_prefix(host);
        let mut counts = [0; LEVELS];
        let iter = self.db.iterator_cf(
            self.cf(CF_QUEUE),
            IteratorMode::From(&prefix, Direction::Forward),
        );
        for item in iter {
            let (key, _) = item.map_err(|e| self.rocks(e))?;
            if !key.starts_with(&prefix) {
                break;
            }
            let level = codec::queue_key_priority(&key).ok_or_else(|| self.corrupt("queue key"))?;
            counts[level.level()] += 1;
        }
        Ok(counts)
    }

    /// Every queued URL (inspection and tests).
    pub fn queued_urls(&self) -> Result<Vec<String>, StoreError> {
        let mut urls = Vec::new();
        for item in self.db.iterator_cf(self.cf(CF_QUEUE), IteratorMode::Start) {
            let (_, value) = item.map_err(|e| self.rocks(e))?;
            let value = QueueValue::decode(&value).ok_or_else(|| self.corrupt("queue entry"))?;
            urls.push(value.url);
        }
        Ok(urls)
    }

    /// The record of a URL, if it was ever admitted.
    pub fn url_record(&self, fp: Fingerprint) -> Result<Option<UrlRecord>, StoreError> {
        match self.get(CF_URLS, &fp.to_bytes())? {
            None => Ok(None),
            Some(bytes) => UrlRecord::decode(&bytes)
                .map(Some)
                .ok_or_else(|| self.corrupt("url record")),
        }
    }

    /// The saved state of `host` (empty if it has none).
    pub fn host_state(&self, host: &str) -> Result<HostState, StoreError> {
        let robots = match self.get(CF_HOSTS, host.as_bytes())? {
            None => BTreeMap::new(),
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|_| self.corrupt("host robots"))?
            }
        };
        let schedule = match self.get(CF_SCHEDULES, host.as_bytes())? {
            None => None,
            Some(bytes) => {
                Some(serde_json::from_slice(&bytes).map_err(|_| self.corrupt("host schedule"))?)
            }
        };
        Ok(HostState { robots, schedule })
    }

    /// Saves the state of `host` in one write.
    pub fn save_host_state(&self, host: &str, state: &HostState) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        self.put_host_state(&mut batch, host, state);
        self.write(batch)
    }

    /// Adds the writes of `host`'s state to `batch`.
    fn put_host_state(&self, batch: &mut WriteBatch, host: &str, state: &HostState) {
        let robots = serde_json::to_vec(&state.robots).expect("robots serialise");
        batch.put_cf(self.cf(CF_HOSTS), host.as_bytes(), robots);
        if let Some(schedule) = &state.schedule {
            let bytes = serde_json::to_vec(schedule).expect("schedule serialises");
            batch.put_cf(self.cf(CF_SCHEDULES), host.as_bytes(), bytes);
        }
    }

    /// Makes everything written so far survive a power loss.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.db.flush_wal(true).map_err(|e| self.rocks(e))
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let mut opts = WriteOptions::default();
        opts.set_sync(self.sync_writes);
        self.db.write_opt(batch, &opts).map_err(|e| self.rocks(e))
    }

    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.db.get_cf(self.cf(cf), key).map_err(|e| self.rocks(e))
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

    fn corrupt(&self, what: &'static str) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what,
        }
    }
}

/// The crawl manifest (`data_dir/crawl.json`): facts fixed when a crawl is
/// created. Reopening a crawl with another partition count would route URLs
/// to the wrong stores, so it is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Number of partitions.
    pub partitions: u16,
}

impl Manifest {
    /// Reads the manifest, writing it first if the crawl is new; errors if it
    /// disagrees with `partitions`.
    pub fn ensure(data_dir: &Path, partitions: u16) -> Result<Manifest, StoreError> {
        let path = data_dir.join("crawl.json");
        let err = |message: String| StoreError::Manifest {
            path: path.clone(),
            message,
        };
        let wanted = Manifest { partitions };
        match std::fs::read(&path) {
            Ok(bytes) => {
                let found: Manifest =
                    serde_json::from_slice(&bytes).map_err(|e| err(e.to_string()))?;
                if found != wanted {
                    return Err(err(format!(
                        "crawl was created with {} partitions, config says {}",
                        found.partitions, partitions
                    )));
                }
                Ok(found)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(data_dir).map_err(|e| err(e.to_string()))?;
                let tmp = path.with_extension("json.tmp");
                std::fs::write(
                    &tmp,
                    serde_json::to_vec_pretty(&wanted).expect("serialises"),
                )
                .and_then(|_| std::fs::rename(&tmp, &path))
                .map_err(|e| err(e.to_string()))?;
                Ok(wanted)
            }
            Err(e) => Err(err(e.to_string())),
        }
    }
}

/// The marker of a running crawl (`data_dir/RUNNING`): created at start,
/// removed after a clean shutdown. Finding it at start means the last run
/// crashed, so hosts may have had requests in flight.
pub struct RunMarker;

impl RunMarker {
    const FILE: &'static str = "RUNNING";

    /// Marks the crawl as running; returns whether the last run crashed.
    pub fn begin(data_dir: &Path) -> std::io::Result<bool> {
        let path = data_dir.join(Self::FILE);
        let crashed = path.exists();
        std::fs::write(&path, format!("pid {}\n", std::process::id()))?;
        Ok(crashed)
    }

    /// Marks a clean stop.
    pub fn end(data_dir: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(data_dir.join(Self::FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn entry(url: &str, host: &str) -> AdmitEntry {
        AdmitEntry {
            fp: Fingerprint::of(url),
            url: url.into(),
            host: host.into(),
            depth: 1,
            priority: Priority::NORMAL,
            kind: EntryKind::Page,
            queue: true,
            referrer: None,
        }
    }

    fn open(dir: &Path) -> PartitionStore {
        let env = StoreEnv::new(&Config::defaults().storage);
        PartitionStore::open(&env, dir, 0).unwrap()
    }

    fn open_with(dir: &Path, mode: SeenMode, expected_urls: usize) -> PartitionStore {
        let seen = SeenSettings {
            mode,
            expected_urls,
            false_positive_rate: 0.3,
        };
        let env = StoreEnv::new(&Config::defaults().storage).with_seen(seen);
        PartitionStore::open(&env, dir, 0).unwrap()
    }

    fn pages(range: std::ops::Range<u32>) -> Vec<AdmitEntry> {
        range
            .map(|i| entry(&format!("http://a.test/{i}"), "a.test"))
            .collect()
    }

    #[test]
    fn an_overfull_filter_costs_reads_in_exact_mode_and_urls_in_bloom_mode() {
        // A filter sized for 10 URLs at 30% holding 2,000: most new URLs
        // look "maybe seen".
        for (mode, all_new_admitted) in [(SeenMode::Exact, true), (SeenMode::Bloom, false)] {
            let dir = tempfile::tempdir().unwrap();
            let store = open_with(dir.path(), mode, 10);
            assert_eq!(
                store.admit(pages(0..2000)).unwrap().entries.len(),
                2000,
                "{mode:?}: an empty filter"
            );
            let outcome = store.admit(pages(2000..3000)).unwrap();
            let admitted = outcome.entries.len();
            assert_eq!(
                admitted == 1000,
                all_new_admitted,
                "{mode:?}: {admitted} of 1000"
            );
            if mode == SeenMode::Exact {
                // Every "maybe" was a false positive, and each is counted.
                let f = outcome.filter;
                assert!(f.false_positive > 0, "{f:?}");
                assert_eq!((f.absent + f.false_positive, f.maybe_seen), (1000, 0));
            }
            assert!(
                store.admit(pages(0..3000)).unwrap().entries.is_empty(),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn budgets_hold_across_a_reopen_and_grow_with_linking_domains() {
        let dir = tempfile::tempdir().unwrap();
        let budget = BudgetSettings {
            base_pages: 3,
            pages_per_linking_domain: 2,
            max_pages_per_domain: 0,
            max_urls_per_host: 0,
        };
        let open = || {
            let env = StoreEnv::new(&Config::defaults().storage).with_budgets(budget);
            PartitionStore::open(&env, dir.path(), 0).unwrap()
        };
        let farm = |range: std::ops::Range<u32>, referrer: Option<&str>| -> Vec<AdmitEntry> {
            range
                .map(|i| AdmitEntry {
                    referrer: referrer.map(str::to_owned),
                    ..entry(
                        &format!("http://s{i}.farm.test/"),
                        &format!("s{i}.farm.test"),
                    )
                })
                .collect()
        };
        {
            let store = open();
            let outcome = store.admit(farm(0..5, Some("farm.test"))).unwrap();
            assert_eq!(outcome.entries.len(), 3, "self-links earn nothing");
            assert_eq!(outcome.over_budget, [OverBudget::Domain; 2]);
        }
        let store = open();
        assert!(store.admit(farm(5..8, None)).unwrap().entries.is_empty());
        // One outside domain links in: two more pages.
        let outcome = store.admit(farm(8..12, Some("other.test"))).unwrap();
        assert_eq!(outcome.entries.len(), 2);
    }

    #[test]
    fn the_filter_is_rebuilt_from_the_store_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open_with(dir.path(), SeenMode::Bloom, 100_000);
            assert_eq!(store.admit(pages(0..500)).unwrap().entries.len(), 500);
        }
        // Bloom mode trusts the filter alone: only a rebuilt filter knows
        // the 500 URLs admitted before the reopen.
        let store = open_with(dir.path(), SeenMode::Bloom, 100_000);
        assert!(store.admit(pages(0..500)).unwrap().entries.is_empty());
        assert_eq!(store.admit(pages(500..600)).unwrap().entries.len(), 100);
    }

    #[test]
    fn admit_is_exact_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let batch = vec![
            entry("http://a.test/1", "a.test"),
            entry("http://a.test/2", "a.test"),
            entry("http://a.test/1", "a.test"),
            entry("http://b.test/1", "b.test"),
        ];
        let admitted = store.admit(batch.clone()).unwrap().entries;
        assert_eq!(admitted.len(), 3, "in-batch duplicate counted once");
        assert!(
            store.admit(batch).unwrap().entries.is_empty(),
            "second offer is seen"
        );
        let queued = store.queued_by_host().unwrap();
        assert_eq!(queued["a.test"], 2);
        assert_eq!(queued["b.test"], 1);
        let rec = store
            .url_record(Fingerprint::of("http://a.test/2"))
            .unwrap();
        assert_eq!(rec.map(|r| r.state), Some(UrlState::Queued));
    }

    #[test]
    fn admit_survives_reopen_and_keeps_sequence() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            store
                .admit(vec![entry("http://a.test/1", "a.test")])
                .unwrap();
        }
        let store = open(dir.path());
        assert!(store
            .admit(vec![entry("http://a.test/1", "a.test")])
            .unwrap()
            .entries
            .is_empty());
        store
            .admit(vec![entry("http://a.test/2", "a.test")])
            .unwrap();
        let page = store
            .queue_page("a.test", Priority::NORMAL, None, 10)
            .unwrap();
        let urls: Vec<_> = page.iter().map(|e| e.value.url.as_str()).collect();
        assert_eq!(
            urls,
            ["http://a.test/1", "http://a.test/2"],
            "admission order kept"
        );
    }

    #[test]
    fn queue_counts_are_kept_with_the_queue_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let expected = |a: u64, b: u64| {
            let mut m = BTreeMap::new();
            if a > 0 {
                m.insert("a.test".to_owned(), a);
            }
            if b > 0 {
                m.insert("b.test".to_owned(), b);
            }
            m
        };
        {
            let store = open(dir.path());
            // Admitted before counting started: counted once by a scan.
            store.admit(pages(0..3)).unwrap();
            assert_eq!(store.queued_by_host().unwrap(), expected(3, 0));
            // From then on, counts come from the counts family.
            store
                .admit(vec![entry("http://b.test/1", "b.test")])
                .unwrap();
            let head = store
                .queue_page("a.test", Priority::NORMAL, None, 2)
                .unwrap();
            let done: Vec<Completion> = head
                .iter()
                .map(|e| Completion {
                    fp: e.value.fp,
                    queue_key: e.key.clone(),
                    depth: 1,
                    state: UrlState::Fetched(200),
                })
                .collect();
            store.complete(&done, &[]).unwrap();
            assert_eq!(store.queued_by_host().unwrap(), expected(1, 1));
        }
        let store = open(dir.path());
        assert_eq!(store.queued_by_host().unwrap(), expected(1, 1));
        let last = store
            .queue_page("a.test", Priority::NORMAL, None, 1)
            .unwrap();
        let done = Completion {
            fp: last[0].value.fp,
            queue_key: last[0].key.clone(),
            depth: 1,
            state: UrlState::Failed,
        };
        store.complete(&[done], &[]).unwrap();
        assert_eq!(
            store.queued_by_host().unwrap(),
            expected(0, 1),
            "empty hosts are left out"
        );
    }

    #[test]
    fn queue_pages_and_completion() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let batch: Vec<_> = (0..5)
            .map(|i| entry(&format!("http://a.test/{i}"), "a.test"))
            .chain([entry("http://a.test.b/x", "a.test.b")])
            .collect();
        store.admit(batch).unwrap();
        let mut seed = entry("http://a.test/seed", "a.test");
        seed.priority = Priority::SEED;
        store.admit(vec![seed]).unwrap();
        assert_eq!(store.queued_by_priority("a.test").unwrap(), [1, 0, 5, 0]);
        let n = Priority::NORMAL;
        let first = store.queue_page("a.test", n, None, 2).unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].priority(), n);
        let rest = store
            .queue_page("a.test", n, Some(&first[1].key), 10)
            .unwrap();
        assert_eq!(
            rest.len(),
            3,
            "other hosts' and other priorities' keys are not in the range"
        );
        let done = Completion {
            fp: first[0].value.fp,
            queue_key: first[0].key.clone(),
            depth: 1,
            state: UrlState::Fetched(200),
        };
        let schedule = Schedule {
            next_allowed_ms: 7,
            ..Schedule::default()
        };
        store.complete(&[done], &[("a.test", &schedule)]).unwrap();
        assert_eq!(store.queue_page("a.test", n, None, 10).unwrap().len(), 4);
        assert_eq!(store.host_state("a.test").unwrap().schedule, Some(schedule));
        let rec = store.url_record(first[0].value.fp).unwrap().unwrap();
        assert_eq!(rec.state, UrlState::Fetched(200));
        // A completed URL stays seen.
        assert!(store
            .admit(vec![entry(&first[0].value.url, "a.test")])
            .unwrap()
            .entries
            .is_empty());
    }

    #[test]
    fn host_state_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        assert_eq!(store.host_state("a.test").unwrap(), HostState::default());
        let mut state = HostState {
            schedule: Some(Schedule {
                next_allowed_ms: 42,
                ..Schedule::default()
            }),
            ..HostState::default()
        };
        state.robots.insert(
            "http://a.test:80".into(),
            RobotsRecord {
                status: Some(200),
                fetched_at_ms: 1,
                body: b"User-agent: *\nDisallow: /x".to_vec(),
            },
        );
        store.save_host_state("a.test", &state).unwrap();
        assert_eq!(store.host_state("a.test").unwrap(), state);
    }

    #[test]
    fn run_marker_tells_a_crash_from_a_clean_stop() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!RunMarker::begin(dir.path()).unwrap());
        RunMarker::end(dir.path()).unwrap();
        assert!(!RunMarker::begin(dir.path()).unwrap());
        // No end: the next start sees a crash.
        assert!(RunMarker::begin(dir.path()).unwrap());
    }

    #[test]
    fn manifest_refuses_a_different_partition_count() {
        let dir = tempfile::tempdir().unwrap();
        Manifest::ensure(dir.path(), 8).unwrap();
        Manifest::ensure(dir.path(), 8).unwrap();
        let err = Manifest::ensure(dir.path(), 16).unwrap_err();
        assert!(err.to_string().contains("8 partitions"), "{err}");
    }
}

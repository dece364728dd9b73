//! The shape of a partition's RocksDB: column families, the options they
//! are opened with, and opening. Key and value layouts are in
//! [`codec`](super::codec) (and, for budgets, `budgets.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, IteratorMode, Options, WriteBufferManager, DB,
};

use super::{PartitionStore, SeenFilter, SeenSettings, StoreError};
use crate::config::StorageConfig;
use crate::frontier::budget::BudgetSettings;
use crate::url::Fingerprint;

pub(super) const CF_URLS: &str = "urls";
pub(super) const CF_QUEUE: &str = "queue";
pub(super) const CF_HOSTS: &str = "hosts";
pub(super) const CF_SCHEDULES: &str = "schedules";
pub(super) const CF_META: &str = "meta";
pub(super) const CF_BUDGETS: &str = "budgets";
/// host → URLs queued (i64 BE), kept by merge operands in the same batches
/// as the queue itself, so a partition starts without scanning its queue.
pub(super) const CF_QUEUED: &str = "queued";
/// Present once `queued` holds the counts (stores made before it existed
/// are counted once, at their first start).
pub(super) const META_COUNTS: &[u8] = b"queued-counts";
pub(super) const ALL_CFS: [&str; 7] = [
    CF_URLS,
    CF_QUEUE,
    CF_HOSTS,
    CF_SCHEDULES,
    CF_META,
    CF_BUDGETS,
    CF_QUEUED,
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
pub(super) const META_SEQ: &[u8] = b"seq";

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

    pub(super) fn from_db(db: DB, path: PathBuf, sync_writes: bool) -> Result<Self, StoreError> {
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
}

//! The shape of a partition's RocksDB: column families, the options they
//! are opened with, and opening. Key and value layouts are in
//! [`codec`](super::codec) (and, for budgets, `budgets.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, Options, WriteBatch, WriteBufferManager, DB,
};

use super::codec::QueueValue;
use super::{CodecError, PartitionStore, SeenCache, SeenFilter, SeenSettings, StoreError};
use crate::config::StorageConfig;
use crate::frontier::budget::BudgetSettings;
use crate::frontier::importance::Ordering;
use crate::url::Fingerprint;

pub(super) const CF_URLS: &str = "urls";
/// The queue, values in the versioned layout (see `codec.rs`); named for
/// the first version, later ones live in it too, told apart by their
/// version byte.
pub(super) const CF_QUEUE: &str = "queue.v1";
/// The queue of earlier releases, values in the unversioned layout: moved
/// into [`CF_QUEUE`] by the first writable open.
const CF_LEGACY_QUEUE: &str = "queue";
/// Entries per write batch while moving a legacy queue.
const MIGRATION_BATCH: usize = 10_000;

/// The most threads [`PartitionStore::open_all`] opens stores on.
const OPEN_THREADS_MAX: usize = 16;

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
/// host → when a passivated host comes due (see `due.rs`).
pub(super) const CF_DUE: &str = "due";
/// Fetched URLs by the time they are due again (`recrawl.rs`).
pub(super) const CF_RECRAWL: &str = "recrawl";
/// Links for partitions owned elsewhere, until acknowledged (`outbox.rs`).
pub(super) const CF_OUTBOX: &str = "outbox";
/// Payload digests whose partition this is → where the payload is stored
/// in full (`digests.rs`).
pub(super) const CF_DIGESTS: &str = "digests";
/// The due index's hosts kept out of memory (`due.rs`, [`super::DueTier`]):
/// scratch, emptied at every open.
pub(super) const CF_DUE_TIER: &str = "due.tier";
pub(super) const ALL_CFS: [&str; 12] = [
    CF_URLS,
    CF_QUEUE,
    CF_HOSTS,
    CF_SCHEDULES,
    CF_META,
    CF_BUDGETS,
    CF_QUEUED,
    CF_DUE,
    CF_RECRAWL,
    CF_OUTBOX,
    CF_DIGESTS,
    CF_DUE_TIER,
];

/// Where a store's queue is, and in which layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum QueueFamily {
    /// `queue.v1`: versioned values.
    Versioned,
    /// `queue`: unversioned values, in a store written by an earlier
    /// release and opened read-only since (a writable open migrates it).
    Legacy,
}

impl QueueFamily {
    /// The column family's name.
    pub(super) fn name(self) -> &'static str {
        match self {
            QueueFamily::Versioned => CF_QUEUE,
            QueueFamily::Legacy => CF_LEGACY_QUEUE,
        }
    }

    /// Decodes a value of this family's layout.
    pub(super) fn decode(self, bytes: &[u8]) -> Result<QueueValue, CodecError> {
        match self {
            QueueFamily::Versioned => QueueValue::decode(bytes),
            QueueFamily::Legacy => QueueValue::decode_legacy(bytes),
        }
    }
}

/// The column families of the store at `path`; none if there is none yet
/// (and if they cannot be listed, opening reports why).
fn families(path: &Path) -> Vec<String> {
    DB::list_cf(&Options::default(), path).unwrap_or_default()
}

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
/// A bound on the queue's sequence numbers: every number handed out is
/// below the stored value, so a store continues from it after a restart.
pub(super) const META_SEQ: &[u8] = b"seq";
/// How far ahead of the numbers in use the stored bound is moved. Storing
/// the exact next number cost a write to `meta` in every admission batch
/// (one of the ~12 memtable inserts a crawled page makes); a bound moved
/// once per this many numbers costs one in 4,096, and a restart skips at
/// most this many numbers (gaps in a host's queue keys change no order).
pub(super) const SEQ_RESERVE: u64 = 4096;

/// The unit in which a memtable takes memory (RocksDB's `arena_block_size`),
/// and so about the least a written column family holds of the shared
/// memtable budget ([`StoreEnv`]).
///
/// RocksDB's default is an eighth of `write_buffer_size`, capped at 1 MiB:
/// with 64 partitions of 11 families, the ~600 memtables a crawl writes to
/// each held a 1 MiB block however little they contained, ~600 MiB counted
/// against the 128 MiB budget. The budget was then always exceeded, and
/// RocksDB switched a memtable on nearly every write to flush it: the crawl
/// bench (500 hosts × 40 pages) made ~1,800 flushes of memtables of ~6 KB
/// (each one an SST, a new WAL, a MANIFEST edit and their fsyncs), 12–18 %
/// of its CPU in the flush thread and more in ext4 creating files. With
/// 32 KiB blocks the budget counts what the memtables hold: that crawl
/// writes ~15 MB of WAL and flushes nothing, and a crawl that fills the
/// budget flushes memtables of about 7/8 of the budget / memtables written
/// (the same bench with a 32 MiB budget: 31 flushes of ~62 KB; ~200 KB at
/// the default budget). Durability is unchanged: every write still goes to
/// the WAL first, synced as `sync_writes` says.
const ARENA_BLOCK_BYTES: usize = 32 << 10;

/// The most a partition's WAL writer buffers (see `db_options`).
const WAL_BUFFER_BYTES: u64 = 64 << 10;

/// How much WAL a partition writes between asking the kernel to start
/// writing it back (see `db_options`).
const WAL_WRITEBACK_BYTES: u64 = 256 << 10;

/// log2 of the shards of a partition's table cache (see `db_options`).
const TABLE_CACHE_SHARD_BITS: i32 = 1;

/// The largest one memtable grows before it is flushed. The node-wide
/// budget (`[storage] write_buffer_bytes`, shared by every partition)
/// flushes long before most families get there; this bounds the rest, and
/// RocksDB preallocates each WAL file to 1.1 × this: with the default
/// 64 MiB that was ~70 MB of real disk blocks per partition (5-20 GB on a
/// node of 64 partitions for a crawl that wrote 15 MB of WAL).
const MEMTABLE_BYTES: usize = 8 << 20;

/// Resources shared by every partition store of a node.
pub struct StoreEnv {
    /// fsync the WAL on each write.
    sync_writes: bool,
    /// How each partition's seen filter is sized and used.
    seen: SeenSettings,
    /// Host and domain budgets.
    budget: BudgetSettings,
    /// How each host's queue is ordered.
    ordering: Ordering,
    /// The options every store and family opens with, built once and
    /// cloned; they hold the one block cache and the one memtable budget
    /// all partitions share.
    templates: Templates,
    /// The block cache the templates hold, to read its use.
    cache: Cache,
    /// Its capacity (RocksDB's C API has no getter).
    cache_capacity: usize,
    /// The memtable budget the templates hold, to read its use.
    write_buffers: WriteBufferManager,
}

/// What the partition stores' shared RocksDB memory holds now, and the
/// bound of each part (`[storage] block_cache_bytes` and
/// `write_buffer_bytes`): the two figures that bound a node's RocksDB
/// memory, whatever the size of its stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreMemory {
    /// Bytes in the block cache: data blocks and the memtables'
    /// reservation (the memtable budget charges what it holds to the
    /// cache). Index and filter blocks are not in it: the open SSTs'
    /// table readers hold them.
    pub cache: usize,
    /// The block cache's capacity.
    pub cache_limit: usize,
    /// Bytes the memtables of every partition hold.
    pub memtables: usize,
    /// The memtable budget: past it, the largest memtable is flushed.
    pub memtable_limit: usize,
}

/// [`StoreEnv`]'s options, built once.
///
/// Why: a fresh `Options` comes with RocksDB's default table factory, and
/// that factory with a 32 MiB block cache of its own, mapped when created
/// and unmapped when our table factory replaces it a moment later. A store
/// opened with 12 families built 14 of them (a node's start, ~220). A
/// clone shares the template's table factory (and so the node's cache)
/// and creates none: an empty crawl's start and stop took ~5 % less CPU
/// (208 ms against 217, `perf stat -r 6`, two rounds each) and ~8 ms
/// less wall time.
struct Templates {
    db: Options,
    /// Families read by point lookups (with Bloom filters).
    lookups: Options,
    /// Families read in order (the queue).
    scans: Options,
}

impl StoreEnv {
    /// Sets the host and domain budgets.
    pub fn with_budgets(mut self, budget: BudgetSettings) -> Self {
        self.budget = budget;
        self
    }

    /// Sets how each host's queue is ordered (`[frontier] ordering`).
    pub fn with_ordering(mut self, ordering: Ordering) -> Self {
        self.ordering = ordering;
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
        let templates = Templates {
            db: db_options(&cache, &write_buffers),
            lookups: cf_options(&cache, true),
            scans: cf_options(&cache, false),
        };
        StoreEnv {
            sync_writes: config.sync_writes,
            seen: SeenSettings::default(),
            budget: BudgetSettings::default(),
            ordering: Ordering::default(),
            templates,
            cache,
            cache_capacity: config.block_cache_bytes,
            write_buffers,
        }
    }

    /// A reader of the shared memory's figures, for a metrics scrape: it
    /// holds the cache and the budget (not the stores), so it reads on
    /// any thread while partitions open and close.
    pub fn memory_reader(&self) -> impl Fn() -> StoreMemory + Send + Sync + 'static {
        let cache = self.cache.clone();
        let write_buffers = self.write_buffers.clone();
        let cache_limit = self.cache_capacity;
        move || StoreMemory {
            cache: cache.get_usage(),
            cache_limit,
            memtables: write_buffers.get_usage(),
            memtable_limit: write_buffers.get_buffer_size(),
        }
    }

    /// The options a store opens with.
    fn db_options(&self) -> Options {
        self.templates.db.clone()
    }

    /// The options of a family, with a Bloom filter for `point_lookups`.
    fn cf_options(&self, point_lookups: bool) -> Options {
        if point_lookups {
            self.templates.lookups.clone()
        } else {
            self.templates.scans.clone()
        }
    }
}

/// RocksDB's own log, into trawl's: its warnings and errors (target
/// `rocksdb`), nothing else. RocksDB's default, a `LOG` file in each
/// store, opens with every option of every column family, ~1,300 lines a
/// partition written one by one, each with a syscall for its thread's id:
/// ~22,000 syscalls for a node's 16 partitions, a large share of its
/// start's CPU (`strace -f -c` of `trawl run` on an empty data
/// directory). The options are in each store's `OPTIONS-*` file anyway;
/// the periodic statistics (info level) are dropped with them.
pub(crate) fn rocks_logger() -> rocksdb::InfoLogger {
    use rocksdb::LogLevel;
    rocksdb::InfoLogger::new_callback_logger(LogLevel::Warn, |level, msg| match level {
        LogLevel::Warn => tracing::warn!(target: "rocksdb", "{}", msg.trim_end()),
        LogLevel::Error | LogLevel::Fatal => {
            tracing::error!(target: "rocksdb", "{}", msg.trim_end())
        }
        // The header (the options, the build) passes any level.
        LogLevel::Header | LogLevel::Info | LogLevel::Debug => {}
    })
}

/// The options a store opens with, sharing `cache` and `write_buffers`.
fn db_options(cache: &Cache, write_buffers: &WriteBufferManager) -> Options {
    let mut opts = Options::default();
    opts.set_info_logger(rocks_logger());
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_write_buffer_manager(write_buffers);
    opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
    opts.set_max_background_jobs(2);
    // Small partitions: keep per-instance file handles and logs modest.
    opts.set_max_open_files(256);
    opts.set_keep_log_file_num(2);
    opts.set_write_buffer_size(MEMTABLE_BYTES);
    // One actor writes each partition, so RocksDB's concurrent memtable
    // insert buys nothing; the serial insert reuses its position in
    // the skip list between the sorted keys of a batch (an admission
    // batch is sorted by fingerprint) instead of searching from the
    // top for every key. Writers from other threads (the admin API)
    // still work: they queue behind the write group's leader.
    opts.set_allow_concurrent_memtable_write(false);
    // The WAL's write buffer grows to the largest batch written, up to
    // this (RocksDB's default is 1 MiB per file writer): with 64
    // partitions the default alone could hold 64 MiB. A larger batch is
    // written through in pieces, as durable as before.
    opts.set_writable_file_max_buffer_size(WAL_BUFFER_BYTES);
    // Without it the WAL sits dirty in the page cache until a sync (or
    // the kernel's 30 s writeback): a node's stop synced the whole
    // crawl's WAL at once, ~0.1 s of 16 partitions waiting on the disk
    // (side-by-side bench). Every WAL_WRITEBACK_BYTES the writer starts
    // the writeback of what it wrote (`sync_file_range`, not waiting for
    // it), so the final sync finds little left. Durability is the same:
    // only a sync makes a write durable, as before.
    opts.set_wal_bytes_per_sync(WAL_WRITEBACK_BYTES);
    // The table cache (open SST readers) is sharded 64 ways by default
    // for concurrent readers a partition does not have (one actor
    // reads it); two shards held ~40 KB less per idle instance.
    opts.set_table_cache_num_shard_bits(TABLE_CACHE_SHARD_BITS);
    // RocksDB loads a family's table readers at open on this many
    // threads, and starts the extra ones even when there is no file to
    // load: at its default of 16 a node's start spawned ~380 threads
    // (~22 a store) that found nothing to do. Stores are opened several
    // at once ([`PartitionStore::open_all`]), which is the parallelism
    // an open needs; each loads its files on its own thread.
    opts.set_max_file_opening_threads(1);
    // The `default` family (unused) is opened with these options. With
    // no table factory of its own it had RocksDB's default: a 32 MiB
    // block cache of its own per store, set up at open and unmapped at
    // close (~10 % of the CPU of a node's start and stop). It shares
    // the node's cache instead.
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    opts.set_block_based_table_factory(&table);
    opts
}

/// The options of a family, sharing `cache`; with a Bloom filter for
/// `point_lookups`.
fn cf_options(cache: &Cache, point_lookups: bool) -> Options {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    if point_lookups {
        // The seen check is a point lookup that mostly misses: a Bloom
        // filter per SST answers those misses without reading blocks.
        table.set_bloom_filter(10.0, false);
    }
    let mut opts = Options::default();
    opts.set_block_based_table_factory(&table);
    opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
    opts.set_arena_block_size(ARENA_BLOCK_BYTES);
    opts.set_write_buffer_size(MEMTABLE_BYTES);
    opts
}

/// Whether RocksDB refused an open because another holder has the store's
/// lock file (it reports an I/O error naming the `LOCK` file).
fn is_lock_error(err: &rocksdb::Error) -> bool {
    err.kind() == rocksdb::ErrorKind::IOError && err.to_string().contains("LOCK")
}

/// The `meta` key present while a node runs on the partition.
const META_RUN: &[u8] = b"run";

impl PartitionStore {
    /// Marks the partition as being run by `node` (synced); returns whether
    /// the previous run on it ended without [`PartitionStore::end_run`]: a
    /// crash, after which requests of the previous owner may still be on
    /// the wire, so its hosts must wait before they are contacted again.
    pub fn begin_run(&self, node: &str) -> Result<bool, StoreError> {
        let crashed = self.get(CF_META, META_RUN)?.is_some();
        self.db
            .put_cf(self.cf(CF_META), META_RUN, node.as_bytes())
            .map_err(|e| self.rocks(e))?;
        self.sync()?;
        Ok(crashed)
    }

    /// Marks a clean end of the run on the partition (synced).
    pub fn end_run(&self) -> Result<(), StoreError> {
        self.db
            .delete_cf(self.cf(CF_META), META_RUN)
            .map_err(|e| self.rocks(e))?;
        self.sync()
    }

    /// The directory of partition `id` under `data_dir`.
    pub fn dir(data_dir: &Path, id: u16) -> PathBuf {
        data_dir.join("partitions").join(format!("{id:03}"))
    }

    /// Opens (or creates) partitions `ids` for writing, several at once;
    /// the stores in the order of `ids`, or the error of the first of them
    /// that failed (the others opened are closed again).
    ///
    /// Why at once: an open is ~7 ms of RocksDB work (its OPTIONS file
    /// written and read back, a MANIFEST and a WAL created and synced),
    /// so sixteen partitions one after another were most of a node's
    /// ~0.2 s start. Creating a store is ~20 fsyncs, which wait on the
    /// disk, not the CPU, and the filesystem commits concurrent ones
    /// together: one thread per store (up to [`OPEN_THREADS_MAX`]) rather
    /// than a few per core.
    pub fn open_all(env: &StoreEnv, data_dir: &Path, ids: &[u16]) -> Result<Vec<Self>, StoreError> {
        let threads = ids.len().clamp(1, OPEN_THREADS_MAX);
        let mut opened: Vec<Option<Result<Self, StoreError>>> = Vec::new();
        opened.resize_with(ids.len(), || None);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        // Thread t opens every threads-th partition.
                        (t..ids.len())
                            .step_by(threads)
                            .map(|i| (i, Self::open(env, data_dir, ids[i])))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for worker in workers {
                let done = worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                for (i, result) in done {
                    opened[i] = Some(result);
                }
            }
        });
        opened
            .into_iter()
            .map(|r| r.expect("every partition was opened by one thread"))
            .collect()
    }

    /// Opens (or creates) partition `id` for writing.
    pub fn open(env: &StoreEnv, data_dir: &Path, id: u16) -> Result<Self, StoreError> {
        let path = Self::dir(data_dir, id);
        let legacy = families(&path).iter().any(|f| f == CF_LEGACY_QUEUE);
        let names = ALL_CFS.into_iter().chain(legacy.then_some(CF_LEGACY_QUEUE));
        let mut cfs: Vec<_> = names
            .map(|name| {
                let queue = name == CF_QUEUE || name == CF_LEGACY_QUEUE;
                let mut opts = env.cf_options(!queue);
                if name == CF_QUEUED {
                    opts.set_merge_operator_associative("add_counts", add_counts);
                }
                ColumnFamilyDescriptor::new(name, opts)
            })
            .collect();
        // Unused, but RocksDB gives it default options (64 MiB memtables,
        // and as much preallocated WAL) unless it is named.
        cfs.push(ColumnFamilyDescriptor::new(
            rocksdb::DEFAULT_COLUMN_FAMILY_NAME,
            env.cf_options(false),
        ));
        let db = DB::open_cf_descriptors(&env.db_options(), &path, cfs).map_err(|source| {
            if is_lock_error(&source) {
                StoreError::Locked { path: path.clone() }
            } else {
                StoreError::Rocks {
                    path: path.clone(),
                    source,
                }
            }
        })?;
        let mut store = Self::from_db(db, path, env.sync_writes, QueueFamily::Versioned)?;
        if legacy {
            store.migrate_legacy_queue()?;
        }
        store.seen = SeenFilter::new(env.seen);
        store.seen_cache = std::sync::Mutex::new(SeenCache::new(env.seen.cache_urls));
        store.budget = env.budget;
        store.ordering = env.ordering;
        store.rebuild_seen_filter()?;
        store.load_due_book()?;
        store.load_outbox_seq()?;
        Ok(store)
    }

    /// Fills the seen filter with every fingerprint in the store.
    fn rebuild_seen_filter(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        let mut count = 0u64;
        for item in self.scan(self.cf(CF_URLS)) {
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

    /// Moves a queue of the unversioned layout (family `queue`, written by
    /// earlier releases) into `queue.v1`, re-encoded, and drops the old
    /// family. Keys, and so the order and the `queued` counts, stay.
    ///
    /// Safe to interrupt: the old family stays whole until every entry is
    /// copied and synced, and copying an entry again writes the same value,
    /// so the next open finishes a migration a crash cut short.
    fn migrate_legacy_queue(&mut self) -> Result<(), StoreError> {
        let started = Instant::now();
        let mut moved = 0u64;
        {
            let (old, new) = (self.cf(CF_LEGACY_QUEUE), self.cf(CF_QUEUE));
            let mut batch = WriteBatch::default();
            for item in self.scan(old) {
                let (key, value) = item.map_err(|e| self.rocks(e))?;
                let value = QueueValue::decode_legacy(&value).map_err(|e| self.codec(e))?;
                batch.put_cf(new, key, value.encode().map_err(|e| self.codec(e))?);
                moved += 1;
                if batch.len() >= MIGRATION_BATCH {
                    self.write(std::mem::take(&mut batch))?;
                }
            }
            self.write(batch)?;
        }
        self.sync()?;
        self.db
            .drop_cf(CF_LEGACY_QUEUE)
            .map_err(|e| self.rocks(e))?;
        tracing::info!(path = %self.path.display(), entries = moved, ms = started.elapsed().as_millis() as u64, "queue moved to the versioned layout");
        Ok(())
    }

    /// Opens partition `id` read-only, e.g. to inspect a crawl that is not
    /// running. A store last written by an earlier release is read as it
    /// is (its queue is migrated only by a writable open).
    pub fn open_read_only(data_dir: &Path, id: u16) -> Result<Self, StoreError> {
        let path = Self::dir(data_dir, id);
        let existing = families(&path);
        let queue = if existing.iter().any(|f| f == CF_LEGACY_QUEUE) {
            QueueFamily::Legacy
        } else {
            QueueFamily::Versioned
        };
        let cfs: Vec<_> = existing
            .iter()
            .filter(|f| ALL_CFS.contains(&f.as_str()) || *f == CF_LEGACY_QUEUE)
            .map(|name| {
                let mut opts = Options::default();
                if name == CF_QUEUED {
                    opts.set_merge_operator_associative("add_counts", add_counts);
                }
                ColumnFamilyDescriptor::new(name, opts)
            })
            .collect();
        let db = DB::open_cf_descriptors_read_only(&Options::default(), &path, cfs, false)
            .map_err(|source| StoreError::Rocks {
                path: path.clone(),
                source,
            })?;
        Self::from_db(db, path, false, queue)
    }

    pub(super) fn from_db(
        db: DB,
        path: PathBuf,
        sync_writes: bool,
        queue: QueueFamily,
    ) -> Result<Self, StoreError> {
        let mut store = PartitionStore {
            db,
            path,
            seen: SeenFilter::new(SeenSettings::default()),
            seen_cache: Default::default(),
            budget: BudgetSettings::default(),
            book: Default::default(),
            next_seq: AtomicU64::new(0),
            seq_reserved: AtomicU64::new(0),
            sync_writes,
            queue,
            due_book: Default::default(),
            outbox_seq: AtomicU64::new(0),
            ordering: Ordering::default(),
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
        store.seq_reserved = AtomicU64::new(seq);
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    #[test]
    fn a_store_writes_no_log_file_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        drop(store);
        let files: Vec<String> = std::fs::read_dir(PartitionStore::dir(dir.path(), 0))
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(files.iter().any(|f| f.starts_with("OPTIONS-")), "{files:?}");
        assert!(!files.iter().any(|f| f.starts_with("LOG")), "{files:?}");
    }

    use super::*;
    use crate::frontier::{EntryKind, Priority};
    use crate::politeness::Schedule;
    use crate::robots::RobotsRecord;
    use crate::store::codec::{self, queue_key, UrlRecord, UrlState};
    use crate::store::test_support::{encode_legacy_queue_value, entry, open};
    use crate::store::HostState;

    /// The families of a partition written by the release before values
    /// were versioned.
    const OLD_FAMILIES: [&str; 7] = [
        "urls",
        "queue",
        "hosts",
        "schedules",
        "meta",
        "budgets",
        "queued",
    ];

    fn url(i: usize) -> String {
        format!("http://a.test/{i}")
    }

    fn old_host_state() -> HostState {
        let mut robots = BTreeMap::new();
        robots.insert(
            "http://a.test:80".to_owned(),
            RobotsRecord {
                retry: None,
                status: Some(200),
                fetched_at_ms: 1_700_000_000_000,
                body: b"User-agent: *\nDisallow: /private".to_vec(),
            },
        );
        HostState {
            robots,
            schedule: Some(Schedule {
                next_allowed_ms: 1_700_000_001_000,
                last_delay_ms: 1000,
                failures: 1,
                parked_until_ms: 0,
            }),
            attempts: Vec::new(),
            ip: None,
            hold: None,
        }
    }

    /// Writes partition 0 as that release did: `urls` queued entries in the
    /// unversioned family `queue`, the host's state as JSON, no queue
    /// counts. The first `copied` entries are also in `queue.v1`, as a
    /// migration cut short by a crash leaves them.
    fn write_old_store(data_dir: &Path, urls: usize, copied: usize) {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let mut names = OLD_FAMILIES.to_vec();
        if copied > 0 {
            names.push(CF_QUEUE);
        }
        let db = DB::open_cf(&opts, PartitionStore::dir(data_dir, 0), names).unwrap();
        let cf = |name| db.cf_handle(name).unwrap();
        for i in 0..urls {
            let value = QueueValue {
                provenance: Default::default(),
                fp: Fingerprint::of(&url(i)),
                depth: 1,
                kind: EntryKind::Page,
                url: url(i),
            };
            let key = queue_key(
                "a.test",
                Priority::NORMAL,
                crate::frontier::importance::Rank::FIFO,
                i as u64,
            );
            let old = encode_legacy_queue_value(&value);
            db.put_cf(cf("queue"), &key, old).unwrap();
            if i < copied {
                db.put_cf(cf(CF_QUEUE), &key, value.encode().unwrap())
                    .unwrap();
            }
            // The seven-byte record of that release.
            let record = UrlRecord::encode_legacy(UrlState::Queued, 1).unwrap();
            db.put_cf(cf("urls"), value.fp.to_bytes(), record).unwrap();
        }
        db.put_cf(cf("meta"), META_SEQ, (urls as u64).to_be_bytes())
            .unwrap();
        let state = old_host_state();
        let robots = serde_json::to_vec(&state.robots).unwrap();
        let schedule = serde_json::to_vec(&state.schedule.unwrap()).unwrap();
        db.put_cf(cf("hosts"), "a.test", robots).unwrap();
        db.put_cf(cf("schedules"), "a.test", schedule).unwrap();
    }

    fn queued(store: &PartitionStore) -> Vec<String> {
        store
            .queue_page("a.test", Priority::NORMAL, None, 100)
            .unwrap()
            .into_iter()
            .map(|e| e.value.url)
            .collect()
    }

    /// Whether any family of `store` has switched its memtable (to flush
    /// it): it then holds an immutable memtable until the flush ends, and
    /// an SST after. Read in that order, a switch is seen whenever the
    /// flush ends.
    fn switched_memtables(store: &PartitionStore) -> bool {
        ALL_CFS.iter().any(|&name| {
            let count = |property: &str| {
                store
                    .db
                    .property_int_value_cf(store.cf(name), property)
                    .unwrap()
                    .unwrap()
            };
            count("rocksdb.num-immutable-mem-table") > 0 || count("rocksdb.num-files-at-level0") > 0
        })
    }

    #[test]
    fn the_memory_reader_sees_what_every_partition_writes_within_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let mut storage = crate::config::Config::defaults().storage;
        storage.block_cache_bytes = 32 << 20;
        storage.write_buffer_bytes = 8 << 20;
        let env = StoreEnv::new(&storage);
        let read = env.memory_reader();
        let stores: Vec<_> = (0..2)
            .map(|id| PartitionStore::open(&env, dir.path(), id).unwrap())
            .collect();
        let before = read();
        assert_eq!(
            (before.cache_limit, before.memtable_limit),
            (32 << 20, 8 << 20)
        );
        let value = vec![7u8; 4096];
        for (n, store) in stores.iter().enumerate() {
            for i in 0..256u32 {
                let key = [n as u8]
                    .iter()
                    .chain(&i.to_be_bytes())
                    .copied()
                    .collect::<Vec<_>>();
                store.db.put_cf(store.cf(CF_URLS), key, &value).unwrap();
            }
        }
        let after = read();
        // Two partitions × 1 MiB written: both show in the one reading,
        // memtables in the budget and their reservation in the cache.
        assert!(
            after.memtables >= before.memtables + (2 << 20),
            "{before:?} -> {after:?}"
        );
        assert!(after.memtables <= after.memtable_limit, "{after:?}");
        assert!(after.cache >= after.memtables, "{after:?}");
        assert!(after.cache <= after.cache_limit, "{after:?}");
    }

    #[test]
    fn a_few_bytes_in_every_family_of_many_partitions_fit_the_memtable_budget() {
        // 4 partitions × 11 families, 4 KB in each (past the memtables'
        // 2 KiB inline block): with RocksDB's default 1 MiB arena blocks
        // they would hold 44 MiB of a 4 MiB budget, and the budget would
        // switch memtables on these first writes.
        let dir = tempfile::tempdir().unwrap();
        let mut storage = crate::config::Config::defaults().storage;
        storage.write_buffer_bytes = 4 << 20;
        let env = StoreEnv::new(&storage);
        let stores: Vec<_> = (0..4)
            .map(|id| PartitionStore::open(&env, dir.path(), id).unwrap())
            .collect();
        for round in 0..4u8 {
            for store in &stores {
                for name in ALL_CFS {
                    let key = [b"k".as_slice(), &[round]].concat();
                    store.db.put_cf(store.cf(name), key, [round; 1000]).unwrap();
                }
            }
        }
        for store in &stores {
            assert!(!switched_memtables(store), "{}", store.path.display());
        }
        // The budget still bounds memtables: past it, they are flushed.
        let big = vec![7u8; 64 << 10];
        for i in 0..128u32 {
            let store = &stores[i as usize % stores.len()];
            store
                .db
                .put_cf(store.cf(CF_URLS), i.to_be_bytes(), &big)
                .unwrap();
        }
        assert!(stores.iter().any(switched_memtables));
    }

    #[test]
    fn a_partitions_wal_takes_the_disk_it_holds_not_a_memtable_preallocated() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for i in 0..100u32 {
            store
                .db
                .put_cf(store.cf(CF_URLS), i.to_be_bytes(), [1u8; 100])
                .unwrap();
        }
        store.sync().unwrap();
        let allocated: u64 = std::fs::read_dir(&store.path)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .map(|e| e.metadata().unwrap().blocks() * 512)
            .sum();
        // With RocksDB's 64 MiB memtables the WAL held ~70 MB at once.
        assert!(
            allocated < 16 << 20,
            "{allocated} bytes allocated to the WAL"
        );
    }

    #[test]
    fn a_held_store_cannot_be_opened_twice_and_a_crashed_run_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let env = crate::store::StoreEnv::new(&crate::config::Config::defaults().storage);
        match PartitionStore::open(&env, dir.path(), 0) {
            Err(StoreError::Locked { path }) => assert!(path.ends_with("partitions/000")),
            Err(other) => panic!("expected Locked, got {other}"),
            Ok(_) => panic!("a held store opened twice"),
        }
        assert!(!store.begin_run("n1").unwrap(), "a fresh store");
        drop(store);
        // No end_run: the next owner learns the last run crashed.
        let store = open(dir.path());
        assert!(store.begin_run("n2").unwrap());
        store.end_run().unwrap();
        drop(store);
        let store = open(dir.path());
        assert!(!store.begin_run("n1").unwrap(), "a clean handoff");
    }

    #[test]
    fn partitions_open_at_once_in_order_and_a_held_one_fails_the_open() {
        let dir = tempfile::tempdir().unwrap();
        let env = StoreEnv::new(&crate::config::Config::defaults().storage);
        let ids = [0u16, 1, 2, 3, 4, 5, 6];
        let held = PartitionStore::open(&env, dir.path(), 3).unwrap();
        match PartitionStore::open_all(&env, dir.path(), &ids) {
            Err(StoreError::Locked { path }) => assert!(path.ends_with("partitions/003")),
            Err(other) => panic!("expected Locked, got {other}"),
            Ok(_) => panic!("a held store opened twice"),
        }
        drop(held);
        // The others opened meanwhile were closed again: all open now.
        let stores = PartitionStore::open_all(&env, dir.path(), &ids).unwrap();
        let paths: Vec<_> = stores.iter().map(|s| s.path.clone()).collect();
        let expected: Vec<_> = ids
            .iter()
            .map(|&id| PartitionStore::dir(dir.path(), id))
            .collect();
        assert_eq!(paths, expected);
        drop(stores);
        assert!(PartitionStore::open_all(&env, dir.path(), &[])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_store_of_the_previous_release_is_read_and_its_queue_migrated() {
        let dir = tempfile::tempdir().unwrap();
        write_old_store(dir.path(), 3, 0);
        let path = PartitionStore::dir(dir.path(), 0);
        let urls: Vec<String> = (0..3).map(url).collect();
        {
            // Read-only: read as it is, nothing migrated.
            let store = PartitionStore::open_read_only(dir.path(), 0).unwrap();
            assert_eq!(store.queued_urls().unwrap(), urls);
            assert_eq!(store.host_state("a.test").unwrap(), old_host_state());
            // No refresh schedule in that release: none to read.
            assert!(store
                .recrawl_page("a.test", u64::MAX, None, 9)
                .unwrap()
                .is_empty());
            assert_eq!(store.recrawl_hosts().unwrap().len(), 0);
        }
        assert!(families(&path).iter().any(|f| f == "queue"));
        {
            let store = open(dir.path());
            assert!(!families(&path).iter().any(|f| f == "queue"), "dropped");
            assert_eq!(queued(&store), urls, "order kept");
            assert_eq!(store.queued_by_host().unwrap()["a.test"], 3);
            assert_eq!(store.host_state("a.test").unwrap(), old_host_state());
            let raw = store
                .db
                .iterator_cf(store.queue_cf(), rocksdb::IteratorMode::Start);
            for item in raw {
                assert_eq!(item.unwrap().1[0], codec::QUEUE_WITH_PROVENANCE);
            }
            // Still seen; a new URL queues after them.
            assert!(store
                .admit(vec![entry(&url(1), "a.test")])
                .unwrap()
                .entries
                .is_empty());
            store.admit(vec![entry(&url(3), "a.test")]).unwrap();
            // Saved again: in the new format, read back the same.
            store.save_host_state("a.test", &old_host_state()).unwrap();
            let raw = store.get(CF_HOSTS, b"a.test").unwrap().unwrap();
            assert_eq!(raw[0], codec::VERSION);
            // Its seven-byte URL records read as records without history,
            // and are rewritten in the versioned form when they change.
            let fp = crate::url::Fingerprint::of(&url(0));
            let old = store.url_record(fp).unwrap().unwrap();
            assert_eq!(old, UrlRecord::new(UrlState::Queued, 1));
            let head = store
                .queue_page("a.test", Priority::NORMAL, None, 1)
                .unwrap();
            let mut record = old.clone();
            record.state = UrlState::Fetched(200);
            record.next_due_ms = Some(5_000);
            let done = crate::store::Completion {
                key: head[0].key.clone(),
                recrawl: false,
                value: head[0].value.clone(),
                record: record.clone(),
            };
            store.complete(&[done], &[]).unwrap();
            let raw = store.get(CF_URLS, &fp.to_bytes()).unwrap().unwrap();
            assert_eq!(raw[0], crate::store::record::RECORD_VERSION);
            assert_eq!(store.url_record(fp).unwrap(), Some(record));
            assert_eq!(store.recrawl_hosts().unwrap()["a.test"], 5_000);
        }
        let store = open(dir.path());
        let all: Vec<String> = (1..4).map(url).collect();
        assert_eq!(queued(&store), all);
        let due = store.recrawl_page("a.test", 5_000, None, 9).unwrap();
        assert_eq!(due.len(), 1, "the schedule survives a reopen");
        assert_eq!(due[0].value.url, url(0));
        assert!(due[0].recrawl);
        assert_eq!(
            due[0].previous.as_ref().map(|r| r.state),
            Some(UrlState::Fetched(200))
        );
        assert!(store
            .recrawl_page("a.test", 4_999, None, 9)
            .unwrap()
            .is_empty());
        assert_eq!(store.due_counts(5_000 + 60_000).now, 1);
        assert_eq!(store.host_state("a.test").unwrap(), old_host_state());
        let store = PartitionStore::open_read_only(dir.path(), 0);
        assert_eq!(store.unwrap().queued_urls().unwrap(), all);
    }

    #[test]
    fn a_migration_cut_short_is_finished_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        write_old_store(dir.path(), 25, 10);
        {
            // Before the next open: the old family is whole and is what
            // counts.
            let store = PartitionStore::open_read_only(dir.path(), 0).unwrap();
            assert_eq!(store.queued_urls().unwrap().len(), 25);
        }
        let store = open(dir.path());
        let urls: Vec<String> = (0..25).map(url).collect();
        assert_eq!(queued(&store), urls, "each entry once, in order");
    }
}

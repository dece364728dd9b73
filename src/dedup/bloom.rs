//! The Bloom filter in front of a partition's URL-seen set.
//!
//! Most candidate links of a crawl have been seen before, and most of the
//! rest are new: a Bloom filter in memory answers "certainly new" without
//! touching RocksDB, so only the "maybe seen" candidates are looked up (in
//! one sorted multi-get per batch).
//!
//! - `[seen] mode = "exact"` (the default): a "maybe" is checked in the
//!   store, so no URL is ever skipped wrongly; the filter only saves reads.
//! - `mode = "bloom"`: a "maybe" counts as seen without a read; a new URL
//!   is skipped with the filter's false-positive rate. For operators who
//!   trade completeness for speed.
//!
//! The filter lives with each partition, beside the store it fronts, not
//! in the SeenSet: a SeenSet routes links to partitions on other nodes too,
//! and only a partition's owner knows what that partition has seen.
//!
//! The filter is sized from `[seen] expected_urls` (split evenly over the
//! partitions) and `false_positive_rate`, and rebuilt at start from the
//! fingerprints in the store, so it never disagrees with it. Fingerprints
//! are already uniform 128-bit hashes: their folded 64 bits feed the filter
//! directly.

use fastbloom::AtomicBloomFilter;

use crate::config::SeenConfig;
pub use crate::config::SeenMode;
use crate::url::Fingerprint;

/// How a partition's filter is sized and used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeenSettings {
    /// Exact or Bloom-only.
    pub mode: SeenMode,
    /// URLs the partition is expected to hold.
    pub expected_urls: usize,
    /// False-positive rate at that size.
    pub false_positive_rate: f64,
    /// Fingerprints confirmed seen kept in memory
    /// ([`super::seen_cache::SeenCache`]).
    pub cache_urls: usize,
}

impl SeenSettings {
    /// The settings of one of `partitions` partitions: `[seen]
    /// expected_urls` and `cache_urls` count the whole crawl, and each
    /// partition's filter and cache hold its share.
    pub fn per_partition(config: &SeenConfig, partitions: u16) -> Self {
        SeenSettings {
            mode: config.mode,
            expected_urls: config.expected_urls / usize::from(partitions.max(1)),
            false_positive_rate: config.false_positive_rate,
            cache_urls: config.cache_urls / usize::from(partitions.max(1)),
        }
    }
}

impl Default for SeenSettings {
    fn default() -> Self {
        SeenSettings {
            mode: SeenMode::Exact,
            expected_urls: 1_000_000,
            false_positive_rate: 0.01,
            cache_urls: 16_384,
        }
    }
}

/// A concurrent Bloom filter over fingerprints.
pub struct SeenFilter {
    bloom: AtomicBloomFilter,
    mode: SeenMode,
}

impl SeenFilter {
    /// An empty filter.
    pub fn new(settings: SeenSettings) -> Self {
        let rate = settings.false_positive_rate.clamp(1e-9, 0.5);
        SeenFilter {
            bloom: AtomicBloomFilter::with_false_pos(rate)
                .expected_items(settings.expected_urls.max(1)),
            mode: settings.mode,
        }
    }

    /// The mode the filter is used in.
    pub fn mode(&self) -> SeenMode {
        self.mode
    }

    /// Whether `fp` may have been seen (`false`: certainly not).
    pub fn maybe_seen(&self, fp: Fingerprint) -> bool {
        self.bloom.contains_hash(fold(fp))
    }

    /// Records `fp` as seen.
    pub fn insert(&self, fp: Fingerprint) {
        self.bloom.insert_hash(fold(fp));
    }
}

fn fold(fp: Fingerprint) -> u64 {
    (fp.0 >> 64) as u64 ^ fp.0 as u64
}

//! A cache of fingerprints confirmed seen, between a partition's Bloom
//! filter and its store.
//!
//! Most links a crawl extracts point at pages it has already seen, and a
//! few of them (a site's home page, its navigation, its footer) are linked
//! from nearly every page. For every one of those the Bloom filter can only
//! say "maybe", and in `[seen] mode = "exact"` each maybe was a read of the
//! `urls` family (one sorted multi-get per batch: ~4 % of a crawl's CPU on
//! the side-by-side bench, all of it confirming what was already known).
//! Mercator's URL-seen test (seed 000) kept a cache of popular URLs in
//! memory in front of its disk-based set for the same reason; this is that
//! cache.
//!
//! It holds only fingerprints the store is known to hold: ones a probe
//! found, and ones an admission batch wrote, added after the write. URL
//! records are never deleted from the store, so a hit is always right and
//! a miss only costs the read it would have cost anyway: the set stays
//! exact.
//!
//! Two-way set-associative with LRU in each set: a hit moves its
//! fingerprint to the set's first slot, an insertion pushes the first
//! slot's down and drops the second's, so a fingerprint looked up often
//! stays while a run of new ones passes through. The set index is the
//! fingerprint's low bits (uniform: fingerprints are 128-bit hashes, and
//! partitions are chosen by domain, not by these bits). 16 bytes per entry.

use crate::url::Fingerprint;

/// An empty slot. A fingerprint of exactly 0 is never cached (it would be
/// taken for an empty slot): it is only ever looked up in the store.
const EMPTY: u128 = 0;

/// Fingerprints known to be in the store, at most a fixed number.
#[derive(Debug, Default)]
pub struct SeenCache {
    /// Sets of two slots, the most recently used first.
    sets: Vec<[u128; 2]>,
}

impl SeenCache {
    /// A cache of about `entries` fingerprints (rounded down to a power of
    /// two; fewer than 2 gives a cache that holds nothing).
    pub fn new(entries: usize) -> Self {
        let sets = if entries < 2 {
            0
        } else {
            1usize << (usize::BITS - 1 - (entries / 2).leading_zeros())
        };
        SeenCache {
            sets: vec![[EMPTY; 2]; sets],
        }
    }

    /// How many fingerprints it can hold.
    pub fn capacity(&self) -> usize {
        self.sets.len() * 2
    }

    /// Whether `fp` is cached (so certainly in the store); a hit makes it
    /// the most recently used of its set.
    pub fn contains(&mut self, fp: Fingerprint) -> bool {
        let Some(set) = self.set(fp) else {
            return false;
        };
        if set[0] == fp.0 {
            true
        } else if set[1] == fp.0 {
            set.swap(0, 1);
            true
        } else {
            false
        }
    }

    /// Caches `fp`, which the store holds, as its set's most recently used.
    pub fn insert(&mut self, fp: Fingerprint) {
        let Some(set) = self.set(fp) else {
            return;
        };
        if set[0] == fp.0 {
            return;
        }
        if set[1] != fp.0 {
            set[1] = set[0];
        }
        set[0] = fp.0;
    }

    fn set(&mut self, fp: Fingerprint) -> Option<&mut [u128; 2]> {
        if fp.0 == EMPTY || self.sets.is_empty() {
            return None;
        }
        let index = (fp.0 as usize) & (self.sets.len() - 1);
        self.sets.get_mut(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fingerprints that share a set in a cache of `sets` sets.
    fn same_set(sets: u128, n: u128) -> Vec<Fingerprint> {
        (1..=n).map(|k| Fingerprint(7 + k * sets)).collect()
    }

    #[test]
    fn capacity_rounds_down_to_a_power_of_two_sets() {
        assert_eq!(SeenCache::new(0).capacity(), 0);
        assert_eq!(SeenCache::new(1).capacity(), 0);
        assert_eq!(SeenCache::new(2).capacity(), 2);
        assert_eq!(SeenCache::new(1000).capacity(), 512);
        assert_eq!(SeenCache::new(1024).capacity(), 1024);
    }

    #[test]
    fn holds_what_was_inserted_and_nothing_else() {
        let mut cache = SeenCache::new(1024);
        let fps: Vec<_> = (1..=200u128)
            .map(|k| Fingerprint(k * 0x9e37_79b9))
            .collect();
        for fp in &fps[..100] {
            cache.insert(*fp);
        }
        // An odd multiplier spreads k = 1..200 over distinct sets.
        assert!(fps[..100].iter().all(|fp| cache.contains(*fp)));
        assert!(fps[100..].iter().all(|fp| !cache.contains(*fp)));
    }

    #[test]
    fn a_fingerprint_looked_up_often_survives_a_run_of_new_ones() {
        let mut cache = SeenCache::new(16);
        let fps = same_set(8, 10);
        let popular = fps[0];
        cache.insert(popular);
        for fp in &fps[1..] {
            cache.insert(*fp);
            assert!(cache.contains(popular), "evicted by {fp:?}");
        }
        // Without the lookups, two insertions push it out.
        let mut cold = SeenCache::new(16);
        cold.insert(popular);
        cold.insert(fps[1]);
        cold.insert(fps[2]);
        assert!(!cold.contains(popular));
        assert!(cold.contains(fps[1]) && cold.contains(fps[2]));
    }

    #[test]
    fn zero_is_never_cached_and_an_empty_cache_holds_nothing() {
        let mut cache = SeenCache::new(16);
        cache.insert(Fingerprint(0));
        assert!(!cache.contains(Fingerprint(0)));
        let mut none = SeenCache::new(0);
        none.insert(Fingerprint(5));
        assert!(!none.contains(Fingerprint(5)));
    }
}

//! Near-duplicate detection: 64-bit simhash (Charikar) over a page's
//! visible text, and the index of Manku, Jain and Das Sarma (WWW 2007) for
//! "is there a stored page within Hamming distance k?".
//!
//! Features are word 3-shingles: lower-cased alphanumeric tokens, three at a
//! time, each hashed with xxh3. Every shingle weighs the same; a bit of the
//! fingerprint is set when more shingles have it set than not. Two pages
//! that share most shingles (one template, a changed date or counter) end
//! up a few bits apart; unrelated pages about 32.
//!
//! The index splits the 64 bits into four 16-bit blocks and keeps one table
//! per block. Two fingerprints at distance ≤ 3 differ in at most three
//! blocks, so they agree exactly on at least one: looking up each of the
//! four blocks finds every candidate, and only candidates are compared.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64;

/// Words per shingle.
const SHINGLE: usize = 3;

/// The simhash of `text`, or `None` when it has no words.
pub fn simhash(text: &str) -> Option<u64> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        return None;
    }
    let mut weights = [0i64; 64];
    let mut add = |h: u64| {
        for (bit, w) in weights.iter_mut().enumerate() {
            *w += if h >> bit & 1 == 1 { 1 } else { -1 };
        }
    };
    if words.len() < SHINGLE {
        add(xxh3_64(words.join(" ").as_bytes()));
    } else {
        for shingle in words.windows(SHINGLE) {
            add(xxh3_64(shingle.join(" ").as_bytes()));
        }
    }
    Some(
        weights
            .iter()
            .enumerate()
            .filter(|(_, w)| **w > 0)
            .fold(0u64, |h, (bit, _)| h | 1 << bit),
    )
}

/// Bits in which `a` and `b` differ.
pub fn distance(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Stored fingerprints with their URLs, searchable within distance 3.
#[derive(Debug, Default)]
pub struct NearIndex {
    /// One table per 16-bit block: block value → indexes into `entries`.
    tables: [HashMap<u16, Vec<u32>>; 4],
    entries: Vec<(u64, String)>,
}

impl NearIndex {
    /// The largest distance the four-table layout finds every match for.
    pub const MAX_DISTANCE: u32 = 3;

    /// Adds a page.
    pub fn insert(&mut self, hash: u64, url: String) {
        let at = self.entries.len() as u32;
        self.entries.push((hash, url));
        for (block, table) in self.tables.iter_mut().enumerate() {
            table.entry(block_of(hash, block)).or_default().push(at);
        }
    }

    /// The first stored page within `max_distance` (at most
    /// [`Self::MAX_DISTANCE`]) of `hash`, closest first.
    pub fn find(&self, hash: u64, max_distance: u32) -> Option<(&str, u32)> {
        let max_distance = max_distance.min(Self::MAX_DISTANCE);
        self.tables
            .iter()
            .enumerate()
            .filter_map(|(block, table)| table.get(&block_of(hash, block)))
            .flatten()
            .map(|&i| {
                let (h, url) = &self.entries[i as usize];
                (url.as_str(), distance(*h, hash))
            })
            .filter(|(_, d)| *d <= max_distance)
            .min_by_key(|(_, d)| *d)
    }

    /// Pages stored.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn block_of(hash: u64, block: usize) -> u16 {
    (hash >> (16 * block)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "The quick brown fox jumps over the lazy dog while the farmer \
        watches from the porch and the sun sets slowly behind the hills of the valley \
        where the river runs quietly towards the sea past the old mill and the church";

    #[test]
    fn near_texts_are_close_and_different_texts_far() {
        let a = simhash(TEXT).unwrap();
        let b = simhash(&TEXT.replace("farmer", "miller")).unwrap();
        let c = simhash(
            "Completely unrelated words about compilers, registers, \
            instruction scheduling, loop unrolling and the cost of cache misses in tight loops",
        )
        .unwrap();
        assert!(distance(a, b) <= 12, "{}", distance(a, b));
        assert!(distance(a, c) > 16, "{}", distance(a, c));
        assert_eq!(simhash(&TEXT.to_uppercase()), Some(a), "case-insensitive");
        assert_eq!(simhash("  ,;  "), None);
    }

    #[test]
    fn the_index_finds_every_fingerprint_within_three_bits() {
        let mut index = NearIndex::default();
        let base = 0x0123_4567_89ab_cdefu64;
        index.insert(base, "http://a.test/".into());
        // Flip up to three bits anywhere, across blocks: always found.
        for bits in [[0, 17, 63], [1, 2, 3], [15, 16, 47], [31, 32, 48]] {
            let probe = bits.iter().fold(base, |h, b| h ^ 1 << b);
            assert_eq!(
                index.find(probe, 3),
                Some(("http://a.test/", 3)),
                "{bits:?}"
            );
        }
        // Four bits, one per block: no block agrees, and it is too far anyway.
        let far = [0, 16, 32, 48].iter().fold(base, |h, b| h ^ 1 << b);
        assert_eq!(index.find(far, 3), None);
        assert_eq!(index.find(base ^ 1, 0), None, "distance 0 means exact");
    }

    #[test]
    fn closest_match_wins() {
        let mut index = NearIndex::default();
        index.insert(0b111, "http://three.test/".into());
        index.insert(0b1, "http://one.test/".into());
        assert_eq!(index.find(0, 3), Some(("http://one.test/", 1)));
    }
}

//! Near-duplicate detection: 64-bit simhash (Charikar) over a page's
//! visible text, and the index of Manku, Jain and Das Sarma (WWW 2007) for
//! "is there a stored page within Hamming distance k?".
//!
//! Features are word 3-shingles: lower-cased alphanumeric tokens, three at a
//! time (each word hashed once, the three hashes mixed). Every shingle
//! weighs the same; a bit of the fingerprint is set when more shingles have
//! it set than not. Two pages
//! that share most shingles (one template, a changed date or counter) end
//! up a few bits apart; unrelated pages about 32.
//!
//! The index splits the 64 bits into four 16-bit blocks and keeps one table
//! per block. Two fingerprints at distance ≤ 3 differ in at most three
//! blocks, so they agree exactly on at least one: looking up each of the
//! four blocks finds every candidate, and only candidates are compared.

use std::collections::HashMap;

/// Fewer words than this give no simhash: two pages that say only
/// "Loading…" or "Next Previous" are not near-duplicates of each other in
/// any useful sense, and a short text moves many bits per changed word.
pub const MIN_WORDS: usize = 10;

/// The simhash of `text`, or `None` when it has fewer than [`MIN_WORDS`]
/// words.
///
/// Characters are lower-cased one at a time (a word-final Greek `Σ`
/// becomes `σ`, not `ς`).
///
/// One pass over the bytes, no allocation: a word's hash is built as its
/// bytes go by (FNV-1a over the lower-cased UTF-8, then mixed); ASCII
/// bytes are classified by table, other characters decoded and asked
/// `char::is_alphanumeric`. A shingle's hash mixes its three word hashes,
/// and the 64 per-bit votes are counted through a per-byte table
/// ([`Votes`]).
pub fn simhash(text: &str) -> Option<u64> {
    let mut votes = Votes::default();
    let mut window = [0u64; 3];
    let mut words = 0usize;
    let mut emit = |h: u64| {
        window = [window[1], window[2], mix(h)];
        words += 1;
        if words >= 3 {
            votes.add(shingle(window));
        }
    };
    let bytes = text.as_bytes();
    let mut h = FNV_OFFSET;
    let mut in_word = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii() {
            if b.is_ascii_alphanumeric() {
                h = (h ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(FNV_PRIME);
                in_word = true;
            } else if in_word {
                emit(h);
                h = FNV_OFFSET;
                in_word = false;
            }
            i += 1;
            continue;
        }
        let c = text[i..].chars().next().expect("a char starts here");
        if c.is_alphanumeric() {
            for lower in c.to_lowercase() {
                let mut utf8 = [0u8; 4];
                for &x in lower.encode_utf8(&mut utf8).as_bytes() {
                    h = (h ^ u64::from(x)).wrapping_mul(FNV_PRIME);
                }
            }
            in_word = true;
        } else if in_word {
            emit(h);
            h = FNV_OFFSET;
            in_word = false;
        }
        i += c.len_utf8();
    }
    if in_word {
        emit(h);
    }
    (words >= MIN_WORDS).then(|| votes.majority())
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// splitmix64's finaliser: FNV's low bits are weak on their own.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A shingle's hash from its words' hashes (order matters).
fn shingle([a, b, c]: [u64; 3]) -> u64 {
    // splitmix64's finaliser over an order-dependent combination.
    let mut z = a ^ b.rotate_left(21) ^ c.rotate_left(42);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The per-bit votes: +1 for each hash with the bit set, -1 without.
#[derive(Debug)]
struct Votes {
    counts: [i32; 64],
    total: u32,
}

impl Default for Votes {
    fn default() -> Self {
        Votes {
            counts: [0; 64],
            total: 0,
        }
    }
}

/// `SIGNS[byte][i]` is +1 if bit `i` of `byte` is set, else -1.
const SIGNS: [[i32; 8]; 256] = {
    let mut table = [[0i32; 8]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            table[byte][bit] = if byte >> bit & 1 == 1 { 1 } else { -1 };
            bit += 1;
        }
        byte += 1;
    }
    table
};

impl Votes {
    /// Counts the bits of `hash`: eight table rows added to eight lanes
    /// (vectorised by the compiler), not 64 branches.
    fn add(&mut self, hash: u64) {
        for (lane, chunk) in self.counts.chunks_exact_mut(8).enumerate() {
            let signs = &SIGNS[(hash >> (8 * lane)) as u8 as usize];
            for (c, s) in chunk.iter_mut().zip(signs) {
                *c += s;
            }
        }
        self.total += 1;
    }

    /// The bits set in more than half of the hashes counted.
    fn majority(&self) -> u64 {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .fold(0u64, |h, (bit, _)| h | 1 << bit)
    }
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
    fn words_are_case_folded_in_any_script_and_punctuation_ignored() {
        let shout = "ÇA VA BIEN MERCI ET TOI MON AMI DU VILLAGE DE GRÜSSE";
        assert!(simhash(shout).is_some());
        assert_eq!(simhash(shout), simhash(&shout.to_lowercase()));
        assert_eq!(
            simhash("Grüße—naïve 東京, x1y2; one two three four five six"),
            simhash("grüße naïve 東京 x1y2 one two three four five six")
        );
        assert_eq!(simhash("Loading… please wait"), None, "too short to judge");
    }

    #[test]
    fn the_vote_is_a_per_bit_majority() {
        let mut votes = Votes::default();
        for h in [0b011u64, 0b110, 0b010, 0b111, 0b000] {
            votes.add(h);
        }
        // Bit 0: 2 of 5, bit 1: 4 of 5, bit 2: 2 of 5.
        assert_eq!(votes.majority(), 0b010);
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

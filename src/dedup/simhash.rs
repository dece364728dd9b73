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
/// bytes are classified and folded by one table lookup, other characters
/// decoded and asked `char::is_alphanumeric`. A shingle's hash mixes its three word hashes,
/// and the 64 per-bit votes are counted bit-sliced ([`Votes`]).
pub fn simhash(text: &str) -> Option<u64> {
    let mut shingles = Shingles::default();
    let bytes = text.as_bytes();
    let mut h = FNV_OFFSET;
    let mut in_word = false;
    let mut i = 0;
    while i < bytes.len() {
        match ASCII_CLASS[usize::from(bytes[i])] {
            SEPARATOR => {
                if in_word {
                    shingles.word(h);
                    h = FNV_OFFSET;
                    in_word = false;
                }
                i += 1;
            }
            NOT_ASCII => {
                let c = text[i..].chars().next().expect("a char starts here");
                if c.is_alphanumeric() {
                    for lower in c.to_lowercase() {
                        let mut utf8 = [0u8; 4];
                        for &x in lower.encode_utf8(&mut utf8).as_bytes() {
                            h = fnv(h, x);
                        }
                    }
                    in_word = true;
                } else if in_word {
                    shingles.word(h);
                    h = FNV_OFFSET;
                    in_word = false;
                }
                i += c.len_utf8();
            }
            lower => {
                // The rest of an ASCII run of the word in a tight loop:
                // most of a page's bytes are here.
                h = fnv(h, lower);
                i += 1;
                while let Some(&b) = bytes.get(i) {
                    let lower = ASCII_CLASS[usize::from(b)];
                    if lower == SEPARATOR || lower == NOT_ASCII {
                        break;
                    }
                    h = fnv(h, lower);
                    i += 1;
                }
                in_word = true;
            }
        }
    }
    if in_word {
        shingles.word(h);
    }
    (shingles.words >= MIN_WORDS).then(|| shingles.votes.majority())
}

/// Words' hashes in, shingles' votes counted.
#[derive(Default)]
struct Shingles {
    /// The last three words' mixed hashes.
    window: [u64; 3],
    words: usize,
    votes: Votes,
}

impl Shingles {
    /// Takes the next word's hash. Inlined into the byte loop, so the
    /// window and the vote lanes can stay in registers.
    #[inline(always)]
    fn word(&mut self, h: u64) {
        self.window = [self.window[1], self.window[2], mix(h)];
        self.words += 1;
        if self.words >= 3 {
            self.votes.add(shingle(self.window));
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// One FNV-1a step.
fn fnv(h: u64, byte: u8) -> u64 {
    (h ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
}

/// [`ASCII_CLASS`] of a byte that ends a word (ASCII, not alphanumeric).
const SEPARATOR: u8 = 0;
/// [`ASCII_CLASS`] of a byte of a multi-byte character (decoded apart).
const NOT_ASCII: u8 = 0xff;
/// Per byte: an ASCII letter or digit lower-cased, [`SEPARATOR`] or
/// [`NOT_ASCII`]; one lookup classifies and folds.
const ASCII_CLASS: [u8; 256] = {
    let mut table = [SEPARATOR; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = if !byte.is_ascii() {
            NOT_ASCII
        } else if byte.is_ascii_alphanumeric() {
            byte.to_ascii_lowercase()
        } else {
            SEPARATOR
        };
        b += 1;
    }
    table
};

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

/// The per-bit votes: how many hashes have each bit set, out of how many.
///
/// Counted bit-sliced: lane `j` is a `u64` of eight byte-wide counters,
/// byte `k` counting bit `8k + j`, so one hash costs eight shift-mask-adds
/// on registers instead of 64 counter updates in memory. A byte counter
/// holds 255 hashes; the lanes are spilled into the wide counts before
/// that.
#[derive(Debug)]
struct Votes {
    lanes: [u64; 8],
    /// Hashes in `lanes` since the last spill.
    in_lanes: u32,
    /// `set[i]`: hashes spilled so far with bit `i` set.
    set: [u32; 64],
    total: u32,
}

impl Default for Votes {
    fn default() -> Self {
        Votes {
            lanes: [0; 8],
            in_lanes: 0,
            set: [0; 64],
            total: 0,
        }
    }
}

/// The lowest bit of every byte.
const BYTE_LOW_BITS: u64 = 0x0101_0101_0101_0101;

impl Votes {
    #[inline(always)]
    fn add(&mut self, hash: u64) {
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            *lane += (hash >> j) & BYTE_LOW_BITS;
        }
        self.in_lanes += 1;
        self.total += 1;
        if self.in_lanes == u32::from(u8::MAX) {
            self.spill();
        }
    }

    /// Moves the byte counters into the wide counts (once per 255 hashes:
    /// kept out of the inlined path).
    #[cold]
    #[inline(never)]
    fn spill(&mut self) {
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            for k in 0..8 {
                self.set[8 * k + j] += ((*lane >> (8 * k)) & 0xff) as u32;
            }
            *lane = 0;
        }
        self.in_lanes = 0;
    }

    /// The bits set in more than half of the hashes counted.
    fn majority(&mut self) -> u64 {
        self.spill();
        let total = u64::from(self.total);
        self.set
            .iter()
            .enumerate()
            .filter(|(_, set)| 2 * u64::from(**set) > total)
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
    fn the_sliced_count_agrees_with_a_count_per_bit_past_many_spills() {
        // Enough hashes to fill the byte counters several times, and a
        // count per bit done the obvious way to compare with.
        for n in [1usize, 254, 255, 256, 1000, 2047] {
            let mut votes = Votes::default();
            let mut naive = [0i64; 64];
            let mut z = n as u64;
            for i in 0..n {
                z = mix(z.wrapping_add(0x9e37_79b9_7f4a_7c15));
                // Skewed bits too, so some majorities are narrow.
                let h = if i % 3 == 0 { z | 0xff } else { z & !0xff00 };
                votes.add(h);
                for (bit, count) in naive.iter_mut().enumerate() {
                    *count += if h >> bit & 1 == 1 { 1 } else { -1 };
                }
            }
            let expected = (0..64)
                .filter(|&b| naive[b] > 0)
                .fold(0u64, |h, b| h | 1 << b);
            assert_eq!(votes.majority(), expected, "{n} hashes");
        }
    }

    #[test]
    fn a_known_text_keeps_its_fingerprint() {
        // Fingerprints are stored across runs (the dedup index): a change
        // to how they are computed must bump the index's version.
        assert_eq!(simhash(TEXT), Some(0x23e6_6beb_6aac_010c));
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

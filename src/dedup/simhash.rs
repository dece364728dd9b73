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
/// Two passes, no per-byte branches on the common path:
/// 1. [`WordBytes`] marks, sixteen bytes at a time, the bytes that may be
///    in a word: ASCII letters and digits, and every byte of a non-ASCII
///    character (whether that character is alphanumeric is decided in
///    pass 2).
/// 2. The runs of marked bytes are read a block of 64 at a time from two
///    masks: where runs start and where they end ([`WordBytes::runs`]).
///    A run of ASCII alone is one word, hashed sixteen bytes per step
///    ([`ascii_word`]); a run with other characters is split and folded a
///    character at a time ([`WordHash`]), which gives the same hash for the
///    same word. A word's hash is over its lower-cased UTF-8 bytes
///    ([`fold`]); a shingle's hash mixes its three words' hashes, and the
///    64 per-bit votes are counted bit-sliced ([`Votes`]).
///
/// The byte-at-a-time loop this replaces (FNV-1a per byte) spent most of
/// its time on a mispredicted branch at every word's end and on a chain of
/// multiplies one byte long.
pub fn simhash(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    let marks = WordBytes::of(bytes);
    let mut shingles = Shingles::default();
    // The words of a run split apart are collected here before they are
    // shingled, so that no function call takes the shingles and their
    // vote lanes can stay in registers.
    let mut split = Vec::new();
    marks.runs(|start, end| {
        if marks.any_wide && marks.wide_in(start, end) {
            // Runs start and end at char boundaries: a multi-byte
            // character's bytes are all marked.
            split_run(&text[start..end], &mut split);
            split.drain(..).for_each(|h| shingles.word(h));
        } else {
            shingles.word(ascii_word(bytes, start, end));
        }
    });
    (shingles.words >= MIN_WORDS).then(|| shingles.votes.majority())
}

/// Pass 1 of [`simhash`]: which bytes may be in a word, as bitsets (bit
/// `i % 64` of `u64` number `i / 64` for byte `i`).
struct WordBytes {
    /// ASCII letters and digits, and bytes of non-ASCII characters.
    marked: Vec<u64>,
    /// Bytes of non-ASCII characters.
    wide: Vec<u64>,
    /// Whether `wide` has any bit set.
    any_wide: bool,
    /// The text's length.
    len: usize,
}

impl WordBytes {
    fn of(bytes: &[u8]) -> Self {
        let blocks = bytes.len().div_ceil(64);
        let mut marked = Vec::with_capacity(blocks);
        let mut wide = Vec::with_capacity(blocks);
        let mut whole = bytes.chunks_exact(64);
        for block in whole.by_ref() {
            let (m, w) = classify_block(block.try_into().expect("64 bytes"));
            marked.push(m);
            wide.push(w);
        }
        let rest = whole.remainder();
        if !rest.is_empty() {
            // Zeros past the end: neither marked nor wide.
            let mut last = [0u8; 64];
            last[..rest.len()].copy_from_slice(rest);
            let (m, w) = classify_block(&last);
            marked.push(m);
            wide.push(w);
        }
        let any_wide = wide.iter().any(|&w| w != 0);
        WordBytes {
            marked,
            wide,
            any_wide,
            len: bytes.len(),
        }
    }

    /// Calls `run(start, end)` for each run of marked bytes, in order.
    ///
    /// A block at a time, from two masks in registers: the bits where a
    /// run starts and those where one has just ended. Each run's end is the
    /// next end bit and its start the next start bit (or the one left
    /// open at the end of an earlier block): the bit scans do not depend
    /// on the run before, so the loop is not a chain of memory reads.
    fn runs(&self, mut run: impl FnMut(usize, usize)) {
        let mut open = None;
        let mut carry = 0u64;
        for (i, &m) in self.marked.iter().enumerate() {
            let base = 64 * i;
            let before = (m << 1) | carry;
            let mut starts = m & !before;
            let mut ends = !m & before;
            while ends != 0 {
                let end = base + ends.trailing_zeros() as usize;
                ends &= ends - 1;
                let start = match open.take() {
                    Some(start) => start,
                    None => {
                        let start = base + starts.trailing_zeros() as usize;
                        starts &= starts - 1;
                        start
                    }
                };
                run(start, end);
            }
            if starts != 0 {
                open = Some(base + starts.trailing_zeros() as usize);
            }
            carry = m >> 63;
        }
        if let Some(start) = open {
            run(start, self.len);
        }
    }

    /// Whether any byte in `start..end` is part of a non-ASCII character.
    fn wide_in(&self, start: usize, end: usize) -> bool {
        let (first, last) = (start / 64, (end - 1) / 64);
        (first..=last).any(|block| {
            let mut bits = self.wide[block];
            if block == first {
                bits &= !0u64 << (start % 64);
            }
            if block == last && end % 64 != 0 {
                bits &= (1u64 << (end % 64)) - 1;
            }
            bits != 0
        })
    }
}

/// [`classify`] of 64 bytes: the marked ones and the wide ones, a bit each.
fn classify_block(block: &[u8; 64]) -> (u64, u64) {
    let (mut marked, mut wide) = (0, 0);
    for (i, sixteen) in block.chunks_exact(16).enumerate() {
        let (m, w) = classify(sixteen.try_into().expect("16 bytes"));
        marked |= u64::from(m) << (16 * i);
        wide |= u64::from(w) << (16 * i);
    }
    (marked, wide)
}

/// Of sixteen bytes, the marked ones (see [`WordBytes`]) and the wide ones,
/// a bit each.
#[cfg(target_arch = "x86_64")]
fn classify(bytes: &[u8; 16]) -> (u16, u16) {
    use std::arch::x86_64::{
        _mm_and_si128, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    // Bytes of 0x80 and up are negative as i8, so the signed range checks
    // leave them out of the ASCII classes.
    // SAFETY: SSE2 is part of x86_64, so these instructions exist on every
    // CPU this runs on; the load reads the 16 bytes of `bytes`.
    let (alnum, wide) = unsafe {
        let x = _mm_loadu_si128(bytes.as_ptr().cast());
        let lower = _mm_or_si128(x, _mm_set1_epi8(0x20));
        let letter = _mm_and_si128(
            _mm_cmpgt_epi8(lower, _mm_set1_epi8(b'a' as i8 - 1)),
            _mm_cmplt_epi8(lower, _mm_set1_epi8(b'z' as i8 + 1)),
        );
        let digit = _mm_and_si128(
            _mm_cmpgt_epi8(x, _mm_set1_epi8(b'0' as i8 - 1)),
            _mm_cmplt_epi8(x, _mm_set1_epi8(b'9' as i8 + 1)),
        );
        (
            _mm_movemask_epi8(_mm_or_si128(letter, digit)) as u16,
            _mm_movemask_epi8(x) as u16,
        )
    };
    (alnum | wide, wide)
}

#[cfg(not(target_arch = "x86_64"))]
fn classify(bytes: &[u8; 16]) -> (u16, u16) {
    classify_bytewise(bytes)
}

/// [`classify`] a byte at a time: elsewhere than x86_64, and what the
/// tests hold the vector version to.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_bytewise(bytes: &[u8; 16]) -> (u16, u16) {
    bytes
        .iter()
        .enumerate()
        .fold((0, 0), |(marked, wide), (i, &b)| {
            let is_wide = !b.is_ascii();
            let is_marked = is_wide || b.is_ascii_alphanumeric();
            (
                marked | u16::from(is_marked) << i,
                wide | u16::from(is_wide) << i,
            )
        })
}

/// The hash of the ASCII word `bytes[start..end]` (letters and digits),
/// lower-cased: the same as [`WordHash`] gives it, sixteen bytes a step.
fn ascii_word(bytes: &[u8], start: usize, end: usize) -> u64 {
    let mut h = 0;
    let mut at = start;
    while at < end {
        let n = (end - at).min(16);
        let piece = match bytes.get(at..at + 16) {
            Some(sixteen) => u128::from_le_bytes(sixteen.try_into().expect("16 bytes")),
            None => {
                let mut tail = [0u8; 16];
                tail[..n].copy_from_slice(&bytes[at..at + n]);
                u128::from_le_bytes(tail)
            }
        };
        let keep = if n == 16 { !0 } else { (1u128 << (8 * n)) - 1 };
        // Setting 0x20 lower-cases a letter and leaves a digit as it is.
        let piece = (piece | LOWER_BITS) & keep;
        h = fold(h, piece as u64, (piece >> 64) as u64);
        at += 16;
    }
    h
}

/// 0x20 in every byte.
const LOWER_BITS: u128 = u128::from_le_bytes([0x20; 16]);

/// A word's hash folded a byte at a time: for words with characters
/// other than ASCII.
#[derive(Default)]
struct WordHash {
    h: u64,
    piece: [u8; 16],
    /// Bytes in `piece`.
    filled: usize,
    /// Bytes folded or in `piece`.
    len: usize,
}

impl WordHash {
    fn push(&mut self, byte: u8) {
        self.piece[self.filled] = byte;
        self.filled += 1;
        self.len += 1;
        if self.filled == 16 {
            self.fold_piece();
        }
    }

    /// Pushes the UTF-8 bytes of `c` lower-cased (one character at a
    /// time: a final `Σ` is `σ`).
    fn push_lowercase(&mut self, c: char) {
        for lower in c.to_lowercase() {
            let mut utf8 = [0u8; 4];
            lower
                .encode_utf8(&mut utf8)
                .bytes()
                .for_each(|b| self.push(b));
        }
    }

    fn fold_piece(&mut self) {
        let piece = u128::from_le_bytes(self.piece);
        self.h = fold(self.h, piece as u64, (piece >> 64) as u64);
        self.piece = [0; 16];
        self.filled = 0;
    }

    /// The word's hash, if it has any bytes; ready for the next word.
    fn finish(&mut self) -> Option<u64> {
        if self.filled > 0 {
            self.fold_piece();
        }
        let h = (self.len > 0).then_some(self.h);
        *self = WordHash::default();
        h
    }
}

/// Splits a run of marked bytes with non-ASCII characters into words at
/// the characters that are not alphanumeric, lower-casing the rest.
fn split_run(run: &str, words: &mut Vec<u64>) {
    let mut word = WordHash::default();
    for c in run.chars() {
        if c.is_alphanumeric() {
            word.push_lowercase(c);
        } else {
            words.extend(word.finish());
        }
    }
    words.extend(word.finish());
}

/// A word's hash: its lower-cased UTF-8 bytes taken sixteen at a time
/// (the last piece padded with zeros, which no word contains), each piece
/// as two little-endian `u64`s multiplied in.
fn fold(h: u64, lo: u64, hi: u64) -> u64 {
    let h = (h ^ lo).wrapping_mul(FOLD_LO);
    (h ^ hi).wrapping_mul(FOLD_HI)
}

/// Odd constants (from splitmix64 and xxHash), so each step is a
/// bijection of the piece.
const FOLD_LO: u64 = 0x9e37_79b9_7f4a_7c15;
const FOLD_HI: u64 = 0xc2b2_ae3d_27d4_eb4f;

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

/// splitmix64's finaliser: a word's hash mixed before it is shingled
/// (its low bits come from a multiply and are weak on their own).
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
            spill(&mut self.set, self.lanes);
            self.lanes = [0; 8];
            self.in_lanes = 0;
        }
    }

    /// The bits set in more than half of the hashes counted.
    fn majority(&mut self) -> u64 {
        spill(&mut self.set, self.lanes);
        self.lanes = [0; 8];
        self.in_lanes = 0;
        let total = u64::from(self.total);
        self.set
            .iter()
            .enumerate()
            .filter(|(_, set)| 2 * u64::from(**set) > total)
            .fold(0u64, |h, (bit, _)| h | 1 << bit)
    }
}

/// Moves the byte counters of `lanes` into the wide counts `set` (once per
/// 255 hashes: kept out of the inlined path). The lanes are passed by
/// value so that the hot loop's copy of them never has its address taken
/// and stays in registers.
#[cold]
#[inline(never)]
fn spill(set: &mut [u32; 64], lanes: [u64; 8]) {
    for (j, lane) in lanes.iter().enumerate() {
        for k in 0..8 {
            set[8 * k + j] += ((lane >> (8 * k)) & 0xff) as u32;
        }
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

    /// [`simhash`] the obvious way: a character at a time, every word
    /// folded byte by byte.
    fn simhash_by_chars(text: &str) -> Option<u64> {
        let mut shingles = Shingles::default();
        let mut word = WordHash::default();
        for c in text.chars() {
            if c.is_alphanumeric() {
                word.push_lowercase(c);
            } else if let Some(h) = word.finish() {
                shingles.word(h);
            }
        }
        if let Some(h) = word.finish() {
            shingles.word(h);
        }
        (shingles.words >= MIN_WORDS).then(|| shingles.votes.majority())
    }

    #[test]
    fn the_two_pass_hash_is_the_character_by_character_one() {
        // Words of every length around the 16-byte pieces and across the
        // 64-byte blocks of the bitsets, in ASCII and not, at the text's
        // very end, with and without separators that are not ASCII.
        let pieces = [
            "a",
            "Z9",
            "word",
            "Eightchr",
            "ninechars",
            "fifteencharacte",
            "SixteenCharacte1",
            "seventeencharacte",
            "thirtytwocharacterslongword12345",
            "thirtythreecharacterslongword1234",
            "Grüße",
            "ΣΊΣΥΦΟΣ",
            "東京",
            "naïve",
            "x1y2",
            "İstanbul",
            "ǅemal",
            "K",
        ];
        let separators = [" ", ", ", "\n", "—", "…", " « ", "\u{a0}", "-", "  \t "];
        let mut z = 7u64;
        let mut next = |n: usize| {
            z = mix(z.wrapping_add(0x9e37_79b9_7f4a_7c15));
            (z % n as u64) as usize
        };
        for round in 0..300 {
            let mut text = String::new();
            if round % 3 == 0 {
                text.push_str(separators[next(separators.len())]);
            }
            for _ in 0..(next(60) + 1) {
                text.push_str(pieces[next(pieces.len())]);
                text.push_str(separators[next(separators.len())]);
            }
            if round % 2 == 0 {
                text.push_str(pieces[next(pieces.len())]);
            }
            assert_eq!(simhash(&text), simhash_by_chars(&text), "{text:?}");
        }
    }

    #[test]
    fn bytes_are_classified_alike_sixteen_at_a_time_and_one_by_one() {
        for first in (0..=255u8).step_by(16) {
            let sixteen: [u8; 16] = std::array::from_fn(|i| first + i as u8);
            assert_eq!(classify(&sixteen), classify_bytewise(&sixteen));
            let mut reversed = sixteen;
            reversed.reverse();
            assert_eq!(classify(&reversed), classify_bytewise(&reversed));
        }
    }

    #[test]
    fn a_known_text_keeps_its_fingerprint() {
        // Fingerprints are stored across runs (the dedup index): a change
        // to how they are computed must bump the index's version.
        assert_eq!(simhash(TEXT), Some(0x00d0_fb24_0e2a_0e01));
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

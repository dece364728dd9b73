//! The frontier's vocabulary: priorities, entry kinds, and the biased
//! choice between a host's priority queues.
//!
//! Every host has [`LEVELS`] queues (the "front queues" of Mercator-style
//! crawlers), one per priority. A host picks its next URL by smooth weighted
//! round robin over its non-empty levels (weights 8:4:2:1), so high
//! priority goes first without starving the rest: even the lowest level
//! gets one turn in fifteen while the others are busy.

pub mod activation;
pub mod batching;
pub mod blocks;
pub mod budget;
pub mod due;
pub mod host;
pub mod importance;
pub mod lifecycle;
pub mod listing;
pub mod page_flow;
pub mod provenance;
pub mod recrawl;
pub mod response;

use serde::{Deserialize, Serialize};
use url::Url;

/// Number of priority levels.
pub const LEVELS: usize = 4;
/// Turns per round each level gets when all are busy.
const WEIGHTS: [i32; LEVELS] = [8, 4, 2, 1];

/// A queue priority; lower is more urgent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Priority(u8);

impl Priority {
    /// Seeds given by the operator.
    pub const SEED: Priority = Priority(0);
    /// Fresh sitemap entries, redirect targets, sitemaps from robots.txt.
    pub const HIGH: Priority = Priority(1);
    /// Links found in pages.
    pub const NORMAL: Priority = Priority(2);
    /// Sitemap entries without a recent lastmod.
    pub const LOW: Priority = Priority(3);

    /// The level index, `0..LEVELS`.
    pub fn level(self) -> usize {
        self.0 as usize
    }

    /// The priority of a level index (clamped to the lowest).
    pub fn from_level(level: u8) -> Priority {
        Priority(level.min(LEVELS as u8 - 1))
    }
}

/// What a queue entry is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    /// A page: fetched, parsed for links, archived.
    Page,
    /// A page reached by following `hops` redirects; a further redirect is
    /// followed only while `hops < max_redirects`.
    Redirected {
        /// Redirects followed to reach it.
        hops: u8,
    },
    /// A sitemap: fetched and read for URLs.
    Sitemap {
        /// The host whose robots.txt listed this sitemap, if any: a sitemap
        /// may list URLs of its own host, and of the host that submitted it.
        submitter: Option<String>,
    },
}

impl EntryKind {
    /// Whether it is a page (as opposed to a sitemap).
    pub fn is_page(&self) -> bool {
        !matches!(self, EntryKind::Sitemap { .. })
    }

    /// Redirects followed to reach it.
    pub fn redirect_hops(&self) -> u8 {
        match self {
            EntryKind::Redirected { hops } => *hops,
            _ => 0,
        }
    }
}

/// A URL found somewhere (seed, link, redirect, sitemap) and offered to
/// the crawl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The URL as found (absolute).
    pub url: Url,
    /// Hops from the seed (pages) or index depth (sitemaps).
    pub depth: u32,
    /// Which of its host's queues it joins.
    pub priority: Priority,
    /// Page or sitemap.
    pub kind: EntryKind,
    /// Registrable domain of the page it was found on (links and
    /// redirects), for domain budgets.
    pub referrer: Option<String>,
    /// The `lastmod` of the sitemap entry it comes from (Unix ms).
    pub lastmod_ms: Option<u64>,
    /// Its estimated importance ([`importance`]): its share of the cash
    /// of the page it was found on, or a seed's.
    pub cash: importance::Cash,
    /// Where it was found and by which hops from its seed
    /// ([`provenance`]): set by whoever read the response it came from.
    pub provenance: provenance::Provenance,
}

impl Candidate {
    /// The registrable domain a link on `page` is counted from: worked out
    /// once for all of a page's links.
    pub fn referrer_of(page: &Url) -> String {
        crate::url::registrable_domain(crate::url::host_key(page)).to_owned()
    }

    /// A page found as a link on a page of `referrer` (see
    /// [`Candidate::referrer_of`]).
    pub fn linked_from(url: Url, depth: u32, referrer: String) -> Self {
        Candidate {
            provenance: Default::default(),
            url,
            depth,
            priority: Priority::NORMAL,
            kind: EntryKind::Page,
            referrer: Some(referrer),
            lastmod_ms: None,
            cash: importance::Cash::UNKNOWN,
        }
    }
}

/// Smooth weighted round robin over the non-empty levels (the nginx
/// algorithm): deterministic, and each level's share of turns matches its
/// weight among the levels that have work.
#[derive(Debug, Clone, Default)]
pub struct LevelPicker {
    current: [i32; LEVELS],
}

impl LevelPicker {
    /// Picks the level to serve next among those for which `has_work` holds.
    pub fn pick(&mut self, has_work: impl Fn(usize) -> bool) -> Option<usize> {
        let busy: Vec<usize> = (0..LEVELS).filter(|&l| has_work(l)).collect();
        if busy.is_empty() {
            return None;
        }
        let total: i32 = busy.iter().map(|&l| WEIGHTS[l]).sum();
        for &l in &busy {
            self.current[l] += WEIGHTS[l];
        }
        let best = *busy
            .iter()
            .max_by_key(|&&l| (self.current[l], std::cmp::Reverse(l)))
            .expect("busy is not empty");
        self.current[best] -= total;
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_share_turns_without_starvation() {
        let mut picker = LevelPicker::default();
        let mut turns = [0; LEVELS];
        for _ in 0..150 {
            turns[picker.pick(|_| true).unwrap()] += 1;
        }
        assert_eq!(turns, [80, 40, 20, 10]);
        // Any 15 consecutive picks serve every level.
        let picks: Vec<usize> = (0..15).map(|_| picker.pick(|_| true).unwrap()).collect();
        for level in 0..LEVELS {
            assert!(picks.contains(&level), "{picks:?}");
        }
    }

    #[test]
    fn only_levels_with_work_are_picked() {
        let mut picker = LevelPicker::default();
        assert_eq!(picker.pick(|_| false), None);
        for _ in 0..10 {
            assert_eq!(picker.pick(|l| l == 2), Some(2));
        }
        let mut seen = [0; LEVELS];
        for _ in 0..9 {
            seen[picker.pick(|l| l == 1 || l == 3).unwrap()] += 1;
        }
        // 4:1 weights: the cycle is 1 1 3 1 1.
        assert_eq!((seen[1], seen[3]), (7, 2));
    }

    #[test]
    fn priority_levels_round_trip() {
        assert!(Priority::SEED < Priority::LOW);
        assert_eq!(Priority::from_level(2), Priority::NORMAL);
        assert_eq!(Priority::from_level(200), Priority::LOW);
        assert_eq!(Priority::HIGH.level(), 1);
    }
}

//! How important a URL is, estimated online before it is fetched, and how
//! that estimate orders a host's queue.
//!
//! # The estimate: OPIC cash
//!
//! trawl estimates importance as Abiteboul, Preda & Cobena's OPIC (On-line
//! Page Importance Computation, WWW 2003) does: every URL holds *cash*.
//! A seed starts with [`Cash::SEED`]; a fetched page hands its cash on to
//! the pages it links to, so a page reached from important pages by few
//! links holds much, and one many hops down a site's long tail little.
//! Baeza-Yates et al. ("Crawling a country", WWW 2005) measured OPIC among
//! the best online orders under politeness, well ahead of breadth-first.
//!
//! What a page with cash `c` gives its `n` followed links:
//! - each link a share of `c` in proportion to its weight: a link to
//!   another registrable domain weighs [`CROSS_DOMAIN_WEIGHT`], one inside
//!   the page's own domain 1. A link from another site is a vote a site
//!   cannot cast for itself (navigation links are the same on every page
//!   of a site), the signal HITS, PageRank's host-level variants and
//!   Common Crawl's harmonic centrality all lean on.
//! - the page keeps nothing (OPIC's conservation: the cash of the crawl is
//!   passed on, not created), but no URL falls below [`Cash::FLOOR`], so
//!   the deepest pages still compare (and f32 never underflows);
//! - a redirect's target takes the whole cash of the URL that redirected;
//! - the sitemaps robots.txt names are seeds of their host
//!   ([`Cash::SEED`]), and the pages a sitemap lists share its cash like
//!   links do, at least [`Cash::LISTED`] each (a sitemap of 50,000 URLs is
//!   a site's own list of what it wants crawled, not 50,000 weak votes).
//!
//! Links to one URL found in one admission batch add up (the batch holds
//! the links of every page processed since the last one). A URL already
//! queued gains the cash of links to it from other registrable domains
//! found later, while its host is dormant (has no actor): its entry moves
//! up to the rank of the sum (`PartitionStore::admit_crediting`; the URL's
//! record notes where the entry is). Links from its own site, and links
//! that arrive while its host is active, leave it where it is: an active
//! host may have read the entry already, and moving it then would fetch
//! the URL twice. Why credit at all: in the simulated polite crawls of
//! `testweb/graph.rs`, cash kept at discovery orders no better than
//! arrival order, while cash credited later (`HostPick::Opic`) holds
//! 5-8 % more PageRank after 10 % of the pages (docs/benchmarks.md, "Crawl
//! order"), most of it from links of other hosts.
//!
//! # The order: a rank in the queue key
//!
//! The cash is written into the queue key as a [`Rank`] (a 16-bit log
//! scale, 1/128 of a doubling per step), between the priority level and
//! the sequence number, so RocksDB's byte order *is* the order of a
//! host's queue: the most important URL of each level first, ties in
//! admission order. A host still takes turns between levels (seeds,
//! sitemaps, links: see [`super::LevelPicker`]); within a level it takes
//! the richest URL it has. With `[frontier] ordering = "fifo"` (the
//! default, see [`Ordering`]) every rank is [`Rank::FIFO`] and each level
//! is in admission order, as before ranks existed (and, the key carrying
//! no cash, none is shown).
//!
//! Queue keys written before ranks (no rank bytes) sort as the first two
//! bytes of their sequence number, almost always zero: they come first in
//! their level, in admission order, and are read with [`Cash::UNKNOWN`].

use serde::{Deserialize, Serialize};
use url::Url;

use super::Candidate;

/// A link to another registrable domain weighs this many same-domain
/// links in the share of the linking page's cash.
pub const CROSS_DOMAIN_WEIGHT: f32 = 4.0;

/// How a partition orders each host's queue (`[frontier] ordering`).
///
/// The default is `Fifo` until the estimate earns its place: measured by
/// `benches/ordering` (docs/benchmarks.md), the importance order captures
/// as much PageRank early as arrival order under politeness (0.93-0.99 of
/// it after 10 % of the pages, one run each) and only a little more when
/// active hosts are scarce (1.05-1.08): a host that starts keeps its slot
/// until its queue is empty, so the order among hosts is chosen rarely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ordering {
    /// By estimated importance within each priority level, and among due
    /// hosts when slots are scarce.
    Importance,
    /// Admission order within each priority level; due hosts in the order
    /// they are found due.
    #[default]
    Fifo,
}

/// A URL's OPIC cash (see the module doc): positive, finite, never NaN
/// (so it is `Eq`), also when read from the network (deserialised through
/// [`Cash::new`]).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(from = "f32", into = "f32")]
pub struct Cash(f32);

impl Eq for Cash {}

impl From<f32> for Cash {
    fn from(value: f32) -> Cash {
        Cash::new(value)
    }
}

impl From<Cash> for f32 {
    fn from(cash: Cash) -> f32 {
        cash.0
    }
}

impl Cash {
    /// What a seed starts with.
    pub const SEED: Cash = Cash(1.0);
    /// The least a page listed in a sitemap gets.
    pub const LISTED: Cash = Cash(1.0 / 64.0);
    /// The least any URL holds.
    pub const FLOOR: Cash = Cash(1.0 / (1u64 << 60) as f32);
    /// Entries queued before cash was kept, and refreshes (whose key is
    /// their due time): as much as a link of a page with 64 links.
    pub const UNKNOWN: Cash = Cash(1.0 / 64.0);

    /// `value`, kept within [`Cash::FLOOR`] and the largest finite f32
    /// (NaN is the floor): cash read from the network is only trusted
    /// that far.
    pub fn new(value: f32) -> Cash {
        if value.is_nan() {
            return Cash::FLOOR;
        }
        Cash(value.clamp(Cash::FLOOR.0, f32::MAX))
    }

    /// The amount.
    pub fn get(self) -> f32 {
        self.0
    }

    /// Both amounts together (links to one URL in one batch).
    pub fn plus(self, other: Cash) -> Cash {
        Cash::new(self.0 + other.0)
    }

    /// The shares of `self` for links of the given weights (see
    /// [`link_weight`]), in order.
    pub fn shares(self, weights: &[f32]) -> Vec<Cash> {
        let total: f32 = weights.iter().sum();
        weights
            .iter()
            .map(|w| match total > 0.0 {
                true => Cash::new(self.0 * w / total),
                false => Cash::FLOOR,
            })
            .collect()
    }
}

/// The weight of a link from a page of domain `from` to one of domain
/// `to` (registrable domains).
pub fn link_weight(from: &str, to: &str) -> f32 {
    if from == to {
        1.0
    } else {
        CROSS_DOMAIN_WEIGHT
    }
}

/// Shares the cash of page `page` among the links found on it (see the
/// module doc). The registrable domain is looked up only for links to
/// other hosts: most links stay on their host.
pub fn share_links(cash: Cash, page: &Url, links: &mut [Candidate]) {
    let page_host = crate::url::host_key(page);
    let page_domain = crate::url::registrable_domain(page_host);
    let weights: Vec<f32> = links
        .iter()
        .map(|link| {
            let host = crate::url::host_key(&link.url);
            match host == page_host {
                true => 1.0,
                false => link_weight(page_domain, crate::url::registrable_domain(host)),
            }
        })
        .collect();
    for (link, share) in links.iter_mut().zip(cash.shares(&weights)) {
        link.cash = share;
    }
}

/// Shares a sitemap's cash among what it lists: child sitemaps and pages
/// alike, each at least [`Cash::LISTED`].
pub fn share_listed(cash: Cash, listed: &mut [Candidate]) {
    let share = Cash::new(cash.get() / listed.len().max(1) as f32);
    let share = if share < Cash::LISTED {
        Cash::LISTED
    } else {
        share
    };
    for candidate in listed {
        candidate.cash = share;
    }
}

/// Cash on the queue key's log scale: smaller is more important, so that
/// ascending key order is descending cash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank(u16);

/// Steps of [`Rank`] per doubling of cash.
const STEPS_PER_DOUBLING: f32 = Rank::STEPS_PER_DOUBLING as f32;
/// log2 of the cash of rank 0: the most any rank tells apart.
const TOP_LOG2: f32 = 256.0;

impl Rank {
    /// Every entry's rank when the queue is in admission order: no cash
    /// ranks there (the largest f32 ranks 16,384), so it tells nothing.
    pub const FIFO: Rank = Rank(0);
    /// The least important rank (cash at or below 2^-256).
    pub const LAST: Rank = Rank(u16::MAX);
    /// Steps per doubling of cash.
    pub const STEPS_PER_DOUBLING: u16 = 128;

    /// Its steps below the top (more is less important).
    pub fn steps(self) -> u16 {
        self.0
    }

    /// The rank, unless it is [`Rank::FIFO`] (which carries no cash).
    pub fn known(self) -> Option<Rank> {
        (self != Rank::FIFO).then_some(self)
    }

    /// The rank of `cash`.
    pub fn of(cash: Cash) -> Rank {
        let below_top = (TOP_LOG2 - cash.0.log2()) * STEPS_PER_DOUBLING;
        Rank(below_top.round().clamp(0.0, f32::from(u16::MAX)) as u16)
    }

    /// The cash a rank stands for (within half a step, 0.3 %).
    pub fn cash(self) -> Cash {
        Cash::new((TOP_LOG2 - f32::from(self.0) / STEPS_PER_DOUBLING).exp2())
    }

    /// The rank `steps` below the top (as [`Rank::steps`] gave it).
    pub fn from_steps(steps: u16) -> Rank {
        Rank(steps)
    }

    /// The two key bytes.
    pub fn to_bytes(self) -> [u8; 2] {
        self.0.to_be_bytes()
    }

    /// From the two key bytes.
    pub fn from_bytes(bytes: [u8; 2]) -> Rank {
        Rank(u16::from_be_bytes(bytes))
    }
}

/// The rank a partition writes for `cash` under `ordering`.
pub fn rank_for(ordering: Ordering, cash: Cash) -> Rank {
    match ordering {
        Ordering::Importance => Rank::of(cash),
        Ordering::Fifo => Rank::FIFO,
    }
}

/// The best (smallest) rank that arrived per priority level, for a host
/// woken with new work: it rereads a level from there when that is ahead
/// of what it has read (see `host.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrivals {
    best: [Rank; super::LEVELS],
    levels: u8,
}

impl Default for Arrivals {
    fn default() -> Self {
        Arrivals {
            best: [Rank::LAST; super::LEVELS],
            levels: 0,
        }
    }
}

impl Arrivals {
    /// Arrivals of the given level bits, of unknown ranks (read from the
    /// cursor on, as before ranks).
    pub fn levels(levels: u8) -> Arrivals {
        Arrivals {
            levels,
            ..Arrivals::default()
        }
    }

    /// An entry of `level` at `rank` arrived.
    pub fn add(&mut self, level: usize, rank: Rank) {
        self.levels |= 1 << level;
        self.best[level] = self.best[level].min(rank);
    }

    /// Adds the bits of `bits` (refreshes: [`super::host::RECRAWL_BIT`]).
    pub fn add_bits(&mut self, bits: u8) {
        self.levels |= bits;
    }

    /// The bits of the levels (and refreshes) that got work.
    pub fn bits(&self) -> u8 {
        self.levels
    }

    /// The best rank that arrived at `level`, if one did with a rank.
    pub fn best(&self, level: usize) -> Option<Rank> {
        (self.levels & (1 << level) != 0 && self.best[level] != Rank::LAST)
            .then_some(self.best[level])
    }

    /// The best rank that arrived at any level, if one carries cash (none
    /// in admission order: every rank there is [`Rank::FIFO`]).
    pub fn best_of_all(&self) -> Option<Rank> {
        (0..super::LEVELS)
            .filter_map(|l| self.best(l))
            .min()
            .and_then(Rank::known)
    }

    /// Both together.
    pub fn merge(&mut self, other: Arrivals) {
        self.levels |= other.levels;
        for (mine, theirs) in self.best.iter_mut().zip(other.best) {
            *mine = (*mine).min(theirs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_cash_is_a_smaller_rank_and_ranks_read_back_closely() {
        let mut last = Rank::LAST;
        for cash in [1e-18, 1e-9, 1e-3, 0.0156, 0.5, 1.0, 3.0, 1e6] {
            let rank = Rank::of(Cash::new(cash));
            assert!(rank < last, "{cash}: {rank:?} !< {last:?}");
            last = rank;
            let back = rank.cash().get();
            assert!(
                (back / cash - 1.0).abs() < 0.003,
                "{cash} read back as {back}"
            );
            assert_eq!(Rank::from_bytes(rank.to_bytes()), rank);
        }
        // Byte order is rank order.
        let (a, b) = (Rank::of(Cash::new(0.5)), Rank::of(Cash::new(0.25)));
        assert!(a.to_bytes() < b.to_bytes());
    }

    #[test]
    fn cash_stays_positive_and_finite() {
        assert_eq!(Cash::new(0.0), Cash::FLOOR);
        assert_eq!(Cash::new(-3.0), Cash::FLOOR);
        assert_eq!(Cash::new(f32::NAN), Cash::FLOOR);
        assert_eq!(Cash::new(f32::INFINITY).get(), f32::MAX);
        assert!(Rank::of(Cash::FLOOR) < Rank::LAST);
        // Read from the wire through the same bounds.
        let read: Cash = serde_json::from_str("-1.5").unwrap();
        assert_eq!(read, Cash::FLOOR);
        assert_eq!(serde_json::to_string(&Cash::SEED).unwrap(), "1.0");
        assert_eq!(Rank::of(Cash::new(f32::MAX)), Rank(16_384));
    }

    #[test]
    fn a_page_shares_its_cash_weighting_other_domains() {
        let from = "a.test";
        let weights: Vec<f32> = ["a.test", "a.test", "b.test"]
            .iter()
            .map(|to| link_weight(from, to))
            .collect();
        let shares = Cash::new(0.6).shares(&weights);
        let got: Vec<f32> = shares.iter().map(|c| c.get()).collect();
        for (got, expected) in got.iter().zip([0.1, 0.1, 0.4]) {
            assert!((got - expected).abs() < 1e-6, "{got} != {expected}");
        }
        let total: f32 = got.iter().sum();
        assert!((total - 0.6).abs() < 1e-6, "cash is conserved: {total}");
        assert!(Cash::SEED.shares(&[]).is_empty());
    }

    fn link(url: &str) -> Candidate {
        Candidate::linked_from(Url::parse(url).unwrap(), 1, "a.test".into())
    }

    #[test]
    fn links_to_other_sites_get_the_larger_shares() {
        let page = Url::parse("http://www.a.test/").unwrap();
        let mut links = vec![
            link("http://www.a.test/1"),
            link("http://blog.a.test/2"),
            link("http://b.test/3"),
        ];
        share_links(Cash::new(0.6), &page, &mut links);
        let got: Vec<f32> = links.iter().map(|l| l.cash.get()).collect();
        // Another host of the same site is the site's own link.
        for (got, expected) in got.iter().zip([0.1, 0.1, 0.4]) {
            assert!((got - expected).abs() < 1e-6, "{got} != {expected}");
        }
    }

    #[test]
    fn a_sitemap_shares_its_cash_but_never_below_the_listed_floor() {
        let mut few = vec![link("http://a.test/1"), link("http://a.test/2")];
        share_listed(Cash::SEED, &mut few);
        assert!(few.iter().all(|c| c.cash == Cash::new(0.5)));
        let mut many: Vec<Candidate> = (0..1000)
            .map(|i| link(&format!("http://a.test/{i}")))
            .collect();
        share_listed(Cash::SEED, &mut many);
        assert!(many.iter().all(|c| c.cash == Cash::LISTED));
    }

    #[test]
    fn fifo_ranks_every_entry_alike() {
        let rich = rank_for(Ordering::Fifo, Cash::SEED);
        let poor = rank_for(Ordering::Fifo, Cash::FLOOR);
        assert_eq!((rich, poor), (Rank::FIFO, Rank::FIFO));
        assert_eq!(rich.known(), None, "a fifo rank carries no cash");
        assert!(Rank::of(Cash::new(f32::MAX)).known().is_some());
        assert!(rank_for(Ordering::Importance, Cash::SEED) < Rank::of(Cash::FLOOR));
    }

    #[test]
    fn arrivals_keep_the_best_rank_per_level() {
        let mut a = Arrivals::default();
        a.add(2, Rank(900));
        a.add(2, Rank(300));
        a.add(0, Rank(5));
        assert_eq!(a.bits(), 0b101);
        assert_eq!(
            (a.best(2), a.best(0), a.best(1)),
            (Some(Rank(300)), Some(Rank(5)), None)
        );
        assert_eq!(a.best_of_all(), Some(Rank(5)));
        let mut fifo = Arrivals::default();
        fifo.add(1, Rank::FIFO);
        assert_eq!(fifo.best_of_all(), None, "a fifo arrival says nothing");
        let mut b = Arrivals::levels(0b10);
        b.merge(a);
        assert_eq!(b.bits(), 0b111);
        assert_eq!((b.best(1), b.best(2)), (None, Some(Rank(300))));
    }
}

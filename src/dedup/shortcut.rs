//! The seen shortcut: links a node already admitted, settled before their
//! partition.
//!
//! Most of a page's links point into its own site, at pages the crawl
//! admitted a moment ago: on the side-by-side bench four links in five,
//! nearly all of them seen. Each went all the way to its partition
//! (routed, batched, sent, counted toward no budget, sorted, checked
//! against the Bloom filter and the partition's seen cache) only to be
//! answered "seen". The SeenSet keeps the fingerprints its partitions
//! answered "admitted" and settles such a link at once.
//!
//! Only links an admission could do nothing for are settled here
//! ([`AdmitEntry::settled_if_seen`]): not a seed or a sitemap entry with
//! a `lastmod` (either may bring a seen URL back into the crawl), and
//! linked from its own registrable domain or from no page (a link from
//! another domain counts that domain toward the target's budget, so it
//! still goes to its partition). The cache holds only fingerprints a
//! partition wrote before it answered, and URL records are never deleted,
//! so a hit is always right and the URL-seen set stays exact. A miss costs
//! what the link cost before.
//!
//! It learns only from "admitted" answers, as a partition's "seen" answer
//! does not tell a seen URL from one a budget refused (which must be
//! offered again). So after a restart, links to URLs admitted before it
//! keep taking the partition's way, where the partition's own cache
//! answers them.

use super::seen_cache::SeenCache;
use crate::store::AdmitEntry;
use crate::url::Fingerprint;

/// Fingerprints this node's partitions admitted, at most a fixed number.
#[derive(Debug, Default)]
pub struct SeenShortcut {
    admitted: SeenCache,
}

impl SeenShortcut {
    /// A shortcut remembering about `entries` admitted URLs (16 bytes
    /// each; 0 settles nothing).
    pub fn new(entries: usize) -> Self {
        SeenShortcut {
            admitted: SeenCache::new(entries),
        }
    }

    /// Whether `entry` is settled as seen here, without its partition.
    pub fn settles(&mut self, entry: &AdmitEntry) -> bool {
        entry.settled_if_seen() && self.admitted.contains(entry.fp)
    }

    /// Notes URLs a partition answered admitted: durably seen from now on.
    pub fn admitted(&mut self, fps: &[Fingerprint]) {
        for fp in fps {
            self.admitted.insert(*fp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::Priority;
    use crate::store::test_support::entry;

    fn link(url: &str, host: &str, referrer: Option<&str>) -> AdmitEntry {
        AdmitEntry {
            referrer: referrer.map(str::to_owned),
            ..entry(url, host)
        }
    }

    #[test]
    fn only_admitted_urls_linked_from_their_own_domain_are_settled() {
        let mut shortcut = SeenShortcut::new(1024);
        let own = link("http://www.a.test/x", "www.a.test", Some("a.test"));
        assert!(!shortcut.settles(&own), "not admitted yet");
        shortcut.admitted(&[own.fp]);
        assert!(shortcut.settles(&own));
        let unlinked = link("http://www.a.test/x", "www.a.test", None);
        assert!(shortcut.settles(&unlinked), "no referrer: no budget note");
        // A link from elsewhere counts its domain toward the budget.
        let foreign = link("http://www.a.test/x", "www.a.test", Some("b.test"));
        assert!(!shortcut.settles(&foreign));
        // Offers that may bring a seen URL back go to the partition.
        let seed = AdmitEntry {
            priority: Priority::SEED,
            ..own.clone()
        };
        assert!(!shortcut.settles(&seed));
        let listed = AdmitEntry {
            lastmod_ms: Some(1),
            ..own.clone()
        };
        assert!(!shortcut.settles(&listed));
        let other = link("http://www.a.test/y", "www.a.test", Some("a.test"));
        assert!(!shortcut.settles(&other), "another URL of the site");
    }

    #[test]
    fn a_shortcut_of_no_size_settles_nothing() {
        let mut shortcut = SeenShortcut::new(0);
        let own = link("http://a.test/", "a.test", Some("a.test"));
        shortcut.admitted(&[own.fp]);
        assert!(!shortcut.settles(&own));
    }
}

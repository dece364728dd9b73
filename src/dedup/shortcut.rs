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
//! still goes to its partition). A hit must always be right, or a URL is
//! lost: the cache holds only fingerprints a partition wrote before it
//! answered, and URL records are never deleted from a store.
//!
//! But a partition's store is not always the same store. On a cluster
//! with a checkpoint chain, a node that loses a partition (its lease
//! lapsed while it was paused or cut off, it was fenced) and later holds
//! it again gets the chain's last published checkpoint, which may not
//! have what the node admitted after it: remembering those URLs as seen
//! would settle the new owner's links to them and lose them (a URL
//! admitted, never fetched). So every entry is keyed by its partition's
//! *life* too: the life moves whenever the partition is rerouted (held
//! elsewhere now, or opened again), which forgets at once, at no cost,
//! everything learnt of the store before; an answer of an earlier life
//! that arrives late teaches nothing. The key is the fingerprint XORed
//! with a 128-bit hash of (partition, life): two keys of different lives
//! meet only if two fingerprints differ by exactly that mask, as unlikely
//! as two URLs sharing a fingerprint, which the URL-seen set already
//! takes as never.
//!
//! It learns only from "admitted" answers, as a partition's "seen" answer
//! does not tell a seen URL from one a budget refused (which must be
//! offered again). So after a restart, links to URLs admitted before it
//! keep taking the partition's way, where the partition's own cache
//! answers them.

use super::seen_cache::SeenCache;
use crate::store::AdmitEntry;
use crate::url::Fingerprint;

/// One life of a partition as the shortcut knows it (see the module doc):
/// taken when a batch is sent, given back with its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Life(u64);

/// Fingerprints this node's partitions admitted, at most a fixed number.
#[derive(Debug, Default)]
pub struct SeenShortcut {
    admitted: SeenCache,
    /// Each partition's present life, by partition id.
    lives: Vec<u64>,
}

impl SeenShortcut {
    /// A shortcut for `partitions` partitions remembering about `entries`
    /// admitted URLs (16 bytes each; 0 settles nothing).
    pub fn new(entries: usize, partitions: u16) -> Self {
        SeenShortcut {
            admitted: SeenCache::new(entries),
            lives: vec![0; usize::from(partitions)],
        }
    }

    /// Whether `entry`, of `partition`, is settled as seen here, without
    /// its partition.
    pub fn settles(&mut self, partition: u16, entry: &AdmitEntry) -> bool {
        if !entry.settled_if_seen() {
            return false;
        }
        let Some(key) = self.key(partition, self.life(partition), entry.fp) else {
            return false;
        };
        self.admitted.contains(key)
    }

    /// `partition`'s present life: a batch sent now is answered in it.
    pub fn life(&self, partition: u16) -> Life {
        Life(self.lives.get(usize::from(partition)).copied().unwrap_or(0))
    }

    /// Notes URLs `partition` answered admitted in `life`: durably seen
    /// for as long as that life lasts. An answer of an earlier life is
    /// dropped (the partition moved since the batch was sent).
    pub fn admitted(&mut self, partition: u16, life: Life, fps: &[Fingerprint]) {
        if life != self.life(partition) {
            return;
        }
        for fp in fps {
            if let Some(key) = self.key(partition, life, *fp) {
                self.admitted.insert(key);
            }
        }
    }

    /// `partition` was rerouted (held by another node now, or opened
    /// again here): what its earlier store admitted is forgotten.
    pub fn moved(&mut self, partition: u16) {
        if let Some(life) = self.lives.get_mut(usize::from(partition)) {
            *life += 1;
        }
    }

    /// The cache's key of `fp` in `partition`'s `life`; `None` for a
    /// partition id out of range (never cached).
    fn key(&self, partition: u16, life: Life, fp: Fingerprint) -> Option<Fingerprint> {
        if usize::from(partition) >= self.lives.len() {
            return None;
        }
        let mut seed = [0u8; 10];
        seed[..2].copy_from_slice(&partition.to_le_bytes());
        seed[2..].copy_from_slice(&life.0.to_le_bytes());
        Some(Fingerprint(fp.0 ^ xxhash_rust::xxh3::xxh3_128(&seed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::Priority;
    use crate::store::test_support::entry;

    /// The partition the tests' links are in.
    const P: u16 = 2;

    fn link(url: &str, host: &str, referrer: Option<&str>) -> AdmitEntry {
        AdmitEntry {
            provenance: Default::default(),
            referrer: referrer.map(str::to_owned),
            ..entry(url, host)
        }
    }

    #[test]
    fn only_admitted_urls_linked_from_their_own_domain_are_settled() {
        let mut shortcut = SeenShortcut::new(1024, 4);
        let own = link("http://www.a.test/x", "www.a.test", Some("a.test"));
        assert!(!shortcut.settles(P, &own), "not admitted yet");
        shortcut.admitted(P, shortcut.life(P), &[own.fp]);
        assert!(shortcut.settles(P, &own));
        let unlinked = link("http://www.a.test/x", "www.a.test", None);
        assert!(
            shortcut.settles(P, &unlinked),
            "no referrer: no budget note"
        );
        // A link from elsewhere counts its domain toward the budget.
        let foreign = link("http://www.a.test/x", "www.a.test", Some("b.test"));
        assert!(!shortcut.settles(P, &foreign));
        // Offers that may bring a seen URL back go to the partition.
        let seed = AdmitEntry {
            priority: Priority::SEED,
            ..own.clone()
        };
        assert!(!shortcut.settles(P, &seed));
        let listed = AdmitEntry {
            lastmod_ms: Some(1),
            ..own.clone()
        };
        assert!(!shortcut.settles(P, &listed));
        let other = link("http://www.a.test/y", "www.a.test", Some("a.test"));
        assert!(!shortcut.settles(P, &other), "another URL of the site");
    }

    #[test]
    fn a_shortcut_of_no_size_settles_nothing() {
        let mut shortcut = SeenShortcut::new(0, 4);
        let own = link("http://a.test/", "a.test", Some("a.test"));
        shortcut.admitted(P, shortcut.life(P), &[own.fp]);
        assert!(!shortcut.settles(P, &own));
    }

    #[test]
    fn what_a_partition_admitted_is_forgotten_once_it_moves() {
        let mut shortcut = SeenShortcut::new(1024, 4);
        let own = link("http://a.test/x", "a.test", Some("a.test"));
        shortcut.admitted(P, shortcut.life(P), &[own.fp]);
        assert!(shortcut.settles(P, &own));
        assert!(!shortcut.settles(P + 1, &own), "another partition's");
        // Lost to another node, then held again from an older checkpoint.
        shortcut.moved(P);
        assert!(!shortcut.settles(P, &own), "the old store's answer");
        shortcut.admitted(P, shortcut.life(P), &[own.fp]);
        assert!(shortcut.settles(P, &own), "the new store's answer");
        // Another partition's move forgets nothing of this one's.
        shortcut.moved(P + 1);
        assert!(shortcut.settles(P, &own));
    }

    #[test]
    fn an_answer_from_before_a_move_teaches_nothing() {
        let mut shortcut = SeenShortcut::new(1024, 4);
        let own = link("http://a.test/x", "a.test", Some("a.test"));
        let sent_in = shortcut.life(P);
        shortcut.moved(P);
        shortcut.admitted(P, sent_in, &[own.fp]);
        assert!(!shortcut.settles(P, &own));
    }

    #[test]
    fn a_partition_id_out_of_range_is_never_settled() {
        let mut shortcut = SeenShortcut::new(1024, 4);
        let own = link("http://a.test/x", "a.test", Some("a.test"));
        shortcut.admitted(9, shortcut.life(9), &[own.fp]);
        assert!(!shortcut.settles(9, &own));
    }
}

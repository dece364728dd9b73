//! Exact content dedup across the whole crawl: which partition answers for
//! a payload digest, and the claims that keep two pages with one payload,
//! fetched at the same time, from both being stored in full.
//!
//! A payload's SHA-256 belongs to partition [`digest_partition`], whatever
//! site served it. That partition's store holds the digest's entry (where
//! the payload is stored in full: `store/digests.rs`), and whoever holds
//! the partition answers questions about it: the local partition actor on
//! a single node, the owning node over the bridge in a cluster. So two
//! nodes crawling mirrors of one site store the payload once.
//!
//! The protocol for one response ([`DigestAsk`]):
//! 1. Before archiving, the page's host asks [`DigestAsk::Claim`]. The
//!    answer is [`DigestReply::Stored`] (write a revisit of that copy),
//!    [`DigestReply::Claimed`] (no copy yet and nobody storing one: store
//!    it, then register or abandon), or [`DigestReply::Unclaimed`] (store
//!    it in full without a claim: the owner could not be asked, or the
//!    claim it waited for was abandoned or expired). While a claim is
//!    open, further claims of the digest wait for it, so the second mirror
//!    page becomes a revisit even when both were fetched at once.
//! 2. After its records are written, the claimant sends
//!    [`DigestAsk::Register`] with its copy (the first copy registered for
//!    a digest is kept; waiters get it), or [`DigestAsk::Abandon`] if it
//!    did not store an original after all (a near-duplicate, or not
//!    archived). Anyone who stored a new original while unclaimed
//!    registers it too; the first one wins.
//! 3. A claim left open (its claimant died, or its node was cut off)
//!    expires after [`ClaimBook::new`]'s `ttl_ms`, and its waiters store
//!    in full, unclaimed.
//!
//! Registering after the records are written keeps the invariant the
//! node-level index had: no revisit ever points at a record that was not
//! written. What this costs: a crash between the records and the
//! registration stores that payload in full once more later. Claims live
//! in memory (a partition's new owner starts with none).

use std::collections::HashMap;

use crate::store::StoredCopy;

/// The partition (of `partitions`) that answers for `digest`: its first
/// eight bytes (uniform, since SHA-256 is) modulo the partition count.
pub fn digest_partition(digest: &[u8; 32], partitions: u16) -> u16 {
    let head = u64::from_be_bytes(digest[..8].try_into().expect("eight bytes"));
    (head % u64::from(partitions.max(1))) as u16
}

/// A question about a digest, asked of the partition it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestAsk {
    /// Where is this payload stored? If nowhere and nobody is storing it,
    /// the asker will.
    Claim,
    /// The asker stored the payload in full here.
    Register(StoredCopy),
    /// The claimant did not store an original after all.
    Abandon,
}

/// The answer to a [`DigestAsk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestReply {
    /// The payload is stored in full here (to a `Register`: the copy that
    /// won, the asker's own or an earlier one).
    Stored(StoredCopy),
    /// Nothing stored yet: the asker claimed it.
    Claimed,
    /// Nothing stored, no claim: store in full.
    Unclaimed,
}

/// Open claims of one partition's digests, and who waits for them.
///
/// `W` is how a waiting asker is answered (a reply channel in the actor,
/// anything in tests): every method returns the answers to send now.
pub struct ClaimBook<W> {
    claims: HashMap<[u8; 32], Claim<W>>,
    ttl_ms: u64,
}

struct Claim<W> {
    expires_ms: u64,
    waiters: Vec<W>,
}

/// Answers to send: each waiter and its reply.
pub type Answers<W> = Vec<(W, DigestReply)>;

impl<W> ClaimBook<W> {
    /// A book whose claims expire `ttl_ms` after they are made.
    pub fn new(ttl_ms: u64) -> Self {
        ClaimBook {
            claims: HashMap::new(),
            ttl_ms,
        }
    }

    /// Open claims.
    pub fn open(&self) -> usize {
        self.claims.len()
    }

    /// Answers `ask` about `digest` from `asker`, `known` being the copy on
    /// record, if any. Returns the answers to send now (the asker's is
    /// among them unless it waits) and, for a `Register` that is the first
    /// copy of the digest, the copy to record.
    pub fn ask(
        &mut self,
        digest: [u8; 32],
        ask: DigestAsk,
        known: Option<&StoredCopy>,
        now_ms: u64,
        asker: W,
    ) -> (Answers<W>, Option<StoredCopy>) {
        match ask {
            DigestAsk::Claim => (self.claim(digest, known, now_ms, asker), None),
            DigestAsk::Register(copy) => {
                let winner = known.cloned().unwrap_or_else(|| copy.clone());
                let record = known.is_none().then_some(copy);
                let mut answers = self.settle(&digest, || DigestReply::Stored(winner.clone()));
                answers.push((asker, DigestReply::Stored(winner)));
                (answers, record)
            }
            DigestAsk::Abandon => {
                let mut answers = self.settle(&digest, || DigestReply::Unclaimed);
                answers.push((asker, DigestReply::Unclaimed));
                (answers, None)
            }
        }
    }

    /// Ends the claims open past their expiry: their waiters store in full.
    pub fn expire(&mut self, now_ms: u64) -> Answers<W> {
        let expired: Vec<[u8; 32]> = self
            .claims
            .iter()
            .filter(|(_, c)| c.expires_ms <= now_ms)
            .map(|(d, _)| *d)
            .collect();
        expired
            .iter()
            .flat_map(|d| self.settle(d, || DigestReply::Unclaimed))
            .collect()
    }

    fn claim(
        &mut self,
        digest: [u8; 32],
        known: Option<&StoredCopy>,
        now_ms: u64,
        asker: W,
    ) -> Answers<W> {
        if let Some(copy) = known {
            return vec![(asker, DigestReply::Stored(copy.clone()))];
        }
        let mut answers = Vec::new();
        if let Some(open) = self.claims.get_mut(&digest) {
            if open.expires_ms > now_ms {
                open.waiters.push(asker);
                return answers;
            }
            answers = self.settle(&digest, || DigestReply::Unclaimed);
        }
        self.claims.insert(
            digest,
            Claim {
                expires_ms: now_ms.saturating_add(self.ttl_ms),
                waiters: Vec::new(),
            },
        );
        answers.push((asker, DigestReply::Claimed));
        answers
    }

    /// Closes `digest`'s claim, if open, answering its waiters.
    fn settle(&mut self, digest: &[u8; 32], reply: impl Fn() -> DigestReply) -> Answers<W> {
        self.claims
            .remove(digest)
            .map(|c| c.waiters.into_iter().map(|w| (w, reply())).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: [u8; 32] = [1; 32];

    fn copy(uri: &str) -> StoredCopy {
        StoredCopy {
            uri: uri.into(),
            date: "2026-11-30T00:00:00.000000Z".into(),
            record_id: format!("<urn:uuid:{uri}>"),
        }
    }

    #[test]
    fn digests_spread_over_every_partition() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..1000u32 {
            let d = crate::warc::payload_sha256(&i.to_be_bytes());
            let p = digest_partition(&d, 16);
            assert!(p < 16);
            seen.insert(p);
        }
        assert_eq!(seen.len(), 16);
        assert_eq!(digest_partition(&D, 1), 0);
    }

    #[test]
    fn a_known_copy_is_answered_at_once() {
        let mut book = ClaimBook::new(1_000);
        let (answers, record) = book.ask(D, DigestAsk::Claim, Some(&copy("a")), 0, "x");
        assert_eq!(answers, vec![("x", DigestReply::Stored(copy("a")))]);
        assert_eq!((record, book.open()), (None, 0));
    }

    #[test]
    fn a_second_claim_waits_for_the_first_and_gets_its_copy() {
        let mut book = ClaimBook::new(1_000);
        let (answers, _) = book.ask(D, DigestAsk::Claim, None, 0, "a");
        assert_eq!(answers, vec![("a", DigestReply::Claimed)]);
        let (answers, _) = book.ask(D, DigestAsk::Claim, None, 10, "b");
        assert!(answers.is_empty(), "b waits");
        let (answers, record) = book.ask(D, DigestAsk::Register(copy("a")), None, 20, "a");
        assert_eq!(record, Some(copy("a")), "the first copy is recorded");
        assert_eq!(
            answers,
            vec![
                ("b", DigestReply::Stored(copy("a"))),
                ("a", DigestReply::Stored(copy("a")))
            ]
        );
        assert_eq!(book.open(), 0);
    }

    #[test]
    fn a_later_registration_keeps_the_first_copy() {
        let mut book: ClaimBook<&str> = ClaimBook::new(1_000);
        let (answers, record) =
            book.ask(D, DigestAsk::Register(copy("b")), Some(&copy("a")), 0, "b");
        assert_eq!(answers, vec![("b", DigestReply::Stored(copy("a")))]);
        assert_eq!(record, None);
    }

    #[test]
    fn waiters_of_an_abandoned_claim_store_in_full() {
        let mut book = ClaimBook::new(1_000);
        book.ask(D, DigestAsk::Claim, None, 0, "a");
        book.ask(D, DigestAsk::Claim, None, 0, "b");
        let (answers, record) = book.ask(D, DigestAsk::Abandon, None, 5, "a");
        assert_eq!(
            answers,
            vec![("b", DigestReply::Unclaimed), ("a", DigestReply::Unclaimed)]
        );
        assert_eq!(record, None);
        let (answers, _) = book.ask(D, DigestAsk::Claim, None, 6, "c");
        assert_eq!(
            answers,
            vec![("c", DigestReply::Claimed)],
            "claimable again"
        );
    }

    #[test]
    fn an_open_claim_expires_and_a_new_claim_replaces_an_expired_one() {
        let mut book = ClaimBook::new(100);
        book.ask(D, DigestAsk::Claim, None, 0, "a");
        book.ask(D, DigestAsk::Claim, None, 50, "b");
        assert!(book.expire(99).is_empty());
        assert_eq!(book.expire(100), vec![("b", DigestReply::Unclaimed)]);
        assert_eq!(book.open(), 0);
        book.ask(D, DigestAsk::Claim, None, 200, "c");
        book.ask(D, DigestAsk::Claim, None, 250, "d");
        // Past expiry, before a sweep: the next claim takes over.
        let (answers, _) = book.ask(D, DigestAsk::Claim, None, 300, "e");
        assert_eq!(
            answers,
            vec![("d", DigestReply::Unclaimed), ("e", DigestReply::Claimed)]
        );
    }
}

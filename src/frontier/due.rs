//! Which dormant hosts come due when: the partition's due index, and the
//! node-wide cap on live host actors.
//!
//! A host with queued work is either *active* (it has an actor, which
//! holds its politeness timer) or *dormant* in the [`DueIndex`], keyed by
//! the Unix millisecond from which it has something to do: 0 for a host
//! that just got work, its next-allowed time for a host passivated while
//! waiting out a long Crawl-delay, Retry-After, backoff or park. The
//! partition activates dormant hosts earliest-due first, while
//! [`ActiveSlots`] has room, so a million known hosts cost an index entry
//! each, not an actor each.
//!
//! The index in memory is rebuilt at open from the store (hosts with
//! queued work, and the due times persisted when hosts passivated), so it
//! is as durable as the queue itself.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::importance::{Cash, Rank};

/// How long being due is worth one doubling of importance: among hosts
/// that are due, one found due a second earlier goes first unless the
/// other's best URL holds more than twice its cash. So the most important
/// work goes first when slots are scarce, and nothing waits for ever (a
/// host's place is fixed when it is found due; later hosts must be ever
/// richer to pass it). A host is found due when the partition looks for
/// hosts to start ([`DueIndex::pop_due`]) at or after its due time: a
/// host given work long after the partition's hold (its due time, see
/// `activation.rs`) queues behind the hosts found before it.
pub const AGING_MS_PER_DOUBLING: u64 = 1_000;

/// Dormant hosts with work: by the time they come due, then, once due,
/// by their best queued URL's importance aged by how long they have been
/// due ([`AGING_MS_PER_DOUBLING`]).
#[derive(Debug, Default)]
pub struct DueIndex {
    /// Hosts not yet found due, by due time.
    waiting: BTreeSet<(u64, Arc<str>)>,
    /// Hosts found due, by [`Dormant::ready_key`].
    ready: BTreeSet<(u64, Arc<str>)>,
    by_host: HashMap<Arc<str>, Dormant>,
}

/// One dormant host.
#[derive(Debug, Clone, Copy)]
struct Dormant {
    due_ms: u64,
    /// The rank of its best queued URL, as last told.
    rank: Rank,
    /// When it was found due (in `ready`; else it is in `waiting`).
    found_ms: Option<u64>,
}

impl Dormant {
    /// Its place among due hosts: the time it was found due in steps of
    /// [`AGING_MS_PER_DOUBLING`] / 128 (a rank step), plus its rank.
    fn ready_key(&self, found_ms: u64) -> u64 {
        let steps_per_doubling = u64::from(Rank::STEPS_PER_DOUBLING);
        found_ms.saturating_mul(steps_per_doubling) / AGING_MS_PER_DOUBLING
            + u64::from(self.rank.steps())
    }
}

impl DueIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// The rank of a host whose queue's importance is not known (read
    /// back at open, before it is told any).
    pub fn unknown_rank() -> Rank {
        Rank::of(Cash::UNKNOWN)
    }

    /// Enters `host` as due at `due_ms`, replacing an earlier entry (its
    /// rank is kept).
    pub fn insert(&mut self, host: &str, due_ms: u64) {
        let rank = self
            .remove_entry(host)
            .map_or(Self::unknown_rank(), |d| d.rank);
        self.enter(Arc::from(host), due_ms, rank);
    }

    /// `host`'s best queued URL is now at least as important as `rank`
    /// (work arrived, or its actor passivated with that loaded).
    pub fn prefer(&mut self, host: &str, rank: Rank) {
        if self.by_host.get(host).is_some_and(|d| rank < d.rank) {
            self.set_rank(host, rank);
        }
    }

    /// `host`'s best queued URL is at `rank` (its actor passivated with
    /// that loaded: the better ones were fetched).
    pub fn set_rank(&mut self, host: &str, rank: Rank) {
        let Some((key, old)) = self.by_host.remove_entry(host) else {
            return;
        };
        self.unlink(&key, &old);
        self.link(key, Dormant { rank, ..old });
    }

    /// Takes `host` out of the index; its due time if it was in.
    pub fn remove(&mut self, host: &str) -> Option<u64> {
        self.remove_entry(host).map(|d| d.due_ms)
    }

    fn remove_entry(&mut self, host: &str) -> Option<Dormant> {
        let (key, dormant) = self.by_host.remove_entry(host)?;
        self.unlink(&key, &dormant);
        Some(dormant)
    }

    fn enter(&mut self, host: Arc<str>, due_ms: u64, rank: Rank) {
        let dormant = Dormant {
            due_ms,
            rank,
            found_ms: None,
        };
        self.link(host, dormant);
    }

    /// Puts `host` in the set its entry says and in the map.
    fn link(&mut self, host: Arc<str>, dormant: Dormant) {
        match dormant.found_ms {
            Some(found) => self.ready.insert((dormant.ready_key(found), host.clone())),
            None => self.waiting.insert((dormant.due_ms, host.clone())),
        };
        self.by_host.insert(host, dormant);
    }

    fn unlink(&mut self, host: &Arc<str>, dormant: &Dormant) {
        match dormant.found_ms {
            Some(found) => self.ready.remove(&(dormant.ready_key(found), host.clone())),
            None => self.waiting.remove(&(dormant.due_ms, host.clone())),
        };
    }

    /// Whether `host` is dormant with work.
    pub fn contains(&self, host: &str) -> bool {
        self.by_host.contains_key(host)
    }

    /// The hosts in the index.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.by_host.keys().map(|h| &**h)
    }

    /// When `host` comes due, if it is in the index.
    pub fn due_ms(&self, host: &str) -> Option<u64> {
        self.by_host.get(host).map(|d| d.due_ms)
    }

    /// When the next host may be started: the earliest due time of those
    /// not yet found due, or, if some were found due and not yet taken,
    /// a time already past (the due time of the first of them).
    pub fn next_due_ms(&self) -> Option<u64> {
        let ready = self.ready.iter().filter_map(|(_, h)| self.due_ms(h)).next();
        let waiting = self.waiting.first().map(|(due, _)| *due);
        match (ready, waiting) {
            (Some(r), Some(w)) => Some(r.min(w)),
            (r, w) => r.or(w),
        }
    }

    /// Takes the host to start next among those due at or before
    /// `until_ms` (now, and how early hosts start): the one with the most
    /// important work, aged (see [`AGING_MS_PER_DOUBLING`]); hosts due
    /// earlier than `until_ms` are found due at `until_ms`.
    pub fn pop_due(&mut self, until_ms: u64) -> Option<String> {
        self.find_due(until_ms);
        let (_, host) = self.ready.pop_first()?;
        self.by_host.remove(&host);
        Some(host.to_string())
    }

    /// Finds the hosts due at or before `until_ms` due at `until_ms`:
    /// from then on they age. The partition looks when it starts hosts,
    /// and while it waits for a slot (so a host waiting for one is older
    /// than a host that passivates meanwhile to give its slot up).
    pub fn find_due(&mut self, until_ms: u64) {
        while let Some((due, _)) = self.waiting.first() {
            if *due > until_ms {
                break;
            }
            let (_, host) = self.waiting.pop_first().expect("just seen");
            let dormant = self.by_host.get_mut(&host).expect("indexed");
            dormant.found_ms = Some(until_ms);
            let key = dormant.ready_key(until_ms);
            self.ready.insert((key, host));
        }
    }

    /// Dormant hosts with work.
    pub fn len(&self) -> usize {
        self.by_host.len()
    }

    /// Whether no host is dormant with work.
    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }
}

/// The node-wide cap on live host actors (`[frontier] max_active_hosts`),
/// shared by every partition.
#[derive(Debug)]
pub struct ActiveSlots {
    cap: usize,
    used: AtomicUsize,
    /// The most slots ever in use at once.
    peak: AtomicUsize,
}

impl ActiveSlots {
    /// Room for `cap` active hosts.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(ActiveSlots {
            cap: cap.max(1),
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        })
    }

    /// Takes a slot if one is free.
    pub fn try_take(&self) -> bool {
        match self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.cap).then_some(n + 1)
            }) {
            Ok(before) => {
                self.peak.fetch_max(before + 1, Ordering::AcqRel);
                true
            }
            Err(_) => false,
        }
    }

    /// The most slots in use at once since start.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }

    /// Frees a slot taken by [`ActiveSlots::try_take`].
    pub fn give_back(&self) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Slots in use.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_come_due_earliest_first_and_reinsertion_moves_them() {
        let mut due = DueIndex::new();
        due.insert("b.test", 500);
        due.insert("a.test", 100);
        due.insert("c.test", 0);
        assert_eq!(due.len(), 3);
        assert_eq!(due.next_due_ms(), Some(0));
        due.insert("c.test", 900); // passivated again, later
        assert_eq!(due.pop_due(99), None, "nothing due before 100");
        assert_eq!(due.pop_due(100).as_deref(), Some("a.test"));
        assert_eq!(due.pop_due(1_000).as_deref(), Some("b.test"));
        assert!(due.contains("c.test"));
        assert_eq!(due.remove("c.test"), Some(900));
        assert!(due.is_empty());
        assert_eq!(due.pop_due(u64::MAX), None);
    }

    #[test]
    fn among_due_hosts_the_most_important_work_goes_first_aged_by_waiting() {
        let rank = |cash: f32| Rank::of(Cash::new(cash));
        let mut due = DueIndex::new();
        for host in ["poor.test", "rich.test", "middle.test"] {
            due.insert(host, 1_000);
        }
        due.prefer("rich.test", rank(0.5));
        due.prefer("middle.test", rank(0.01));
        due.prefer("middle.test", rank(0.0001)); // a poorer arrival changes nothing
        due.set_rank("poor.test", rank(0.0001));
        due.prefer("absent.test", rank(1.0)); // not dormant: nothing
        assert_eq!(due.pop_due(999), None, "none due yet");
        assert_eq!(due.pop_due(1_000).as_deref(), Some("rich.test"));
        // Preferred after it was found due: it moves up at once.
        due.prefer("poor.test", rank(0.02));
        assert_eq!(due.pop_due(1_000).as_deref(), Some("poor.test"));
        assert_eq!(due.pop_due(1_000).as_deref(), Some("middle.test"));
        assert!(due.is_empty() && !due.contains("absent.test"));

        // A second of waiting is worth a doubling: the host found due 3 s
        // earlier beats one four times richer, not one over eight times.
        due.insert("first.test", 10_000);
        due.prefer("first.test", rank(1.0));
        due.insert("early.test", 10_000);
        due.prefer("early.test", rank(0.01));
        assert_eq!(due.pop_due(10_000).as_deref(), Some("first.test"));
        due.insert("richer.test", 13_000);
        due.prefer("richer.test", rank(0.04));
        due.insert("richest.test", 13_000);
        due.prefer("richest.test", rank(0.16 * 1.1));
        assert_eq!(due.next_due_ms(), Some(10_000));
        assert_eq!(due.pop_due(13_000).as_deref(), Some("richest.test"));
        assert_eq!(due.next_due_ms(), Some(10_000), "early is due, not taken");
        assert_eq!(due.pop_due(13_000).as_deref(), Some("early.test"));
        assert_eq!(due.pop_due(13_000).as_deref(), Some("richer.test"));
        // Hosts given work long after their due time are found due when
        // the partition looks: those found earlier keep their lead.
        due.insert("old.test", 0);
        due.prefer("old.test", rank(0.01));
        assert_eq!(due.pop_due(50_000), Some("old.test".to_owned()));
        due.insert("waits.test", 0);
        due.insert("blocker.test", 0);
        due.prefer("blocker.test", rank(1.0));
        assert_eq!(due.pop_due(60_000).as_deref(), Some("blocker.test"));
        due.insert("late-rich.test", 0);
        due.prefer("late-rich.test", rank(0.04));
        assert_eq!(
            due.pop_due(63_000).as_deref(),
            Some("waits.test"),
            "found due 3 s earlier: ahead of a host under eight times richer"
        );
        assert_eq!(due.pop_due(63_000).as_deref(), Some("late-rich.test"));
        // Reinserted hosts keep their rank; removal works from either set.
        due.insert("a.test", 5);
        due.prefer("a.test", rank(0.5));
        assert_eq!(due.pop_due(0), None);
        due.insert("a.test", 7);
        due.insert("b.test", 6);
        assert_eq!(
            due.pop_due(7).as_deref(),
            Some("a.test"),
            "its rank was kept"
        );
        assert_eq!(due.remove("b.test"), Some(6));
        assert!(due.is_empty());
    }

    #[test]
    fn active_slots_never_exceed_the_cap() {
        let slots = ActiveSlots::new(2);
        assert!(slots.try_take());
        assert!(slots.try_take());
        assert!(!slots.try_take());
        slots.give_back();
        assert_eq!(slots.used(), 1);
        assert_eq!(slots.peak(), 2);
        assert!(slots.try_take());
        slots.give_back();
        slots.give_back();
        slots.give_back(); // an extra give-back does not underflow
        assert_eq!(slots.used(), 0);
    }
}

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

/// Dormant hosts with work, by the time they come due.
#[derive(Debug, Default)]
pub struct DueIndex {
    by_time: BTreeSet<(u64, Arc<str>)>,
    by_host: HashMap<Arc<str>, u64>,
}

impl DueIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Enters `host` as due at `due_ms`, replacing an earlier entry.
    pub fn insert(&mut self, host: &str, due_ms: u64) {
        self.remove(host);
        let host: Arc<str> = Arc::from(host);
        self.by_time.insert((due_ms, host.clone()));
        self.by_host.insert(host, due_ms);
    }

    /// Takes `host` out of the index; its due time if it was in.
    pub fn remove(&mut self, host: &str) -> Option<u64> {
        let (key, due_ms) = self.by_host.remove_entry(host)?;
        self.by_time.remove(&(due_ms, key));
        Some(due_ms)
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
        self.by_host.get(host).copied()
    }

    /// The earliest due time.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.by_time.first().map(|(due, _)| *due)
    }

    /// Takes the earliest host due at or before `until_ms`.
    pub fn pop_due(&mut self, until_ms: u64) -> Option<String> {
        let (due, _) = self.by_time.first()?;
        if *due > until_ms {
            return None;
        }
        let (_, host) = self.by_time.pop_first()?;
        self.by_host.remove(&host);
        Some(host.to_string())
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

//! When a whole cluster has run out of work.
//!
//! A node alone knows when *it* is idle (nothing queued or due, nothing in
//! flight, its outboxes empty), but links may still be on their way to it
//! from a node that is busy, and what gossip says of the others is a few
//! rounds old: "every node says idle" can be true of a moment that never
//! was. So each node publishes, beside its idle flag, an activity counter
//! that moves whenever it completes work, and the cluster is idle only
//! when two views taken at least `settle` apart (several gossip rounds:
//! longer than a change takes to spread) show every live node idle with
//! the same counters, and every partition held by one of them. A node
//! that was busy in between (it took a batch, fetched, completed) has
//! moved its counter; a batch still unacknowledged keeps its sender's
//! outbox, and so the sender, busy. (A variant of the counting
//! termination detection of Mattern's four-counter method, with gossip as
//! the wave.)

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// What the detector needs of one live member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberWork {
    /// Its id.
    pub node: String,
    /// It says it is idle.
    pub idle: bool,
    /// Its activity counter.
    pub activity: u64,
    /// The partitions it holds.
    pub partitions: Vec<u16>,
}

/// Cluster-wide idleness from successive views of the live members.
#[derive(Debug)]
pub struct IdleDetector {
    partitions: u16,
    settle: Duration,
    /// The counters of an all-idle view and when it was first seen.
    stable: Option<(Vec<(String, u64)>, Instant)>,
}

impl IdleDetector {
    /// A detector for a crawl of `partitions` partitions, requiring views
    /// `settle` apart.
    pub fn new(partitions: u16, settle: Duration) -> Self {
        IdleDetector {
            partitions,
            settle,
            stable: None,
        }
    }

    /// Takes the view of the live members at `now` (members without
    /// published work are passed as busy); whether the cluster is idle.
    pub fn observe(&mut self, live: &[MemberWork], now: Instant) -> bool {
        let held: BTreeSet<u16> = live
            .iter()
            .flat_map(|m| m.partitions.iter().copied())
            .collect();
        let candidate = !live.is_empty()
            && live.iter().all(|m| m.idle)
            && held.len() == usize::from(self.partitions);
        if !candidate {
            self.stable = None;
            return false;
        }
        let mut counters: Vec<(String, u64)> =
            live.iter().map(|m| (m.node.clone(), m.activity)).collect();
        counters.sort();
        match &self.stable {
            Some((seen, since)) if *seen == counters => now.duration_since(*since) >= self.settle,
            _ => {
                self.stable = Some((counters, now));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(node: &str, idle: bool, activity: u64, partitions: &[u16]) -> MemberWork {
        MemberWork {
            node: node.into(),
            idle,
            activity,
            partitions: partitions.to_vec(),
        }
    }

    const SETTLE: Duration = Duration::from_millis(500);

    #[test]
    fn idle_only_after_a_settled_view_of_everyone_idle_covering_every_partition() {
        let t0 = Instant::now();
        let mut d = IdleDetector::new(4, SETTLE);
        let view = [member("a", true, 5, &[0, 1]), member("b", true, 9, &[2, 3])];
        assert!(!d.observe(&view, t0), "a first view is not enough");
        assert!(!d.observe(&view, t0 + SETTLE / 2), "not settled yet");
        assert!(d.observe(&view, t0 + SETTLE));
        // A partition nobody holds (its owner just died): not idle.
        let mut d = IdleDetector::new(4, SETTLE);
        let gap = [member("a", true, 5, &[0, 1]), member("b", true, 9, &[2])];
        assert!(!d.observe(&gap, t0));
        assert!(!d.observe(&gap, t0 + SETTLE * 2));
    }

    #[test]
    fn a_node_that_worked_in_between_starts_the_wait_over() {
        let t0 = Instant::now();
        let mut d = IdleDetector::new(2, SETTLE);
        assert!(!d.observe(
            &[member("a", true, 1, &[0]), member("b", true, 1, &[1])],
            t0
        ));
        // b took a batch and processed it between the two views: its
        // counter moved, though both views say idle.
        let later = [member("a", true, 1, &[0]), member("b", true, 2, &[1])];
        assert!(!d.observe(&later, t0 + SETTLE));
        assert!(!d.observe(&later, t0 + SETTLE + SETTLE / 2));
        assert!(d.observe(&later, t0 + SETTLE * 2));
        // A busy node resets everything.
        let busy = [member("a", false, 1, &[0]), member("b", true, 2, &[1])];
        assert!(!d.observe(&busy, t0 + SETTLE * 3));
        assert!(!d.observe(&later, t0 + SETTLE * 3), "the wait starts over");
        assert!(
            !IdleDetector::new(1, SETTLE).observe(&[], t0),
            "nobody live"
        );
    }
}

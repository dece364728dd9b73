//! Where a partition's lease meets its requests.
//!
//! With `[cluster] state_url`, an owner may fetch a partition's hosts only
//! until its lease ends ([`crate::cluster::lease::PartitionLease::fetch_until`]).
//! The OwnershipActor stops a lapsed partition's hosts, but that order
//! travels through mailboxes, and after a pause (SIGSTOP, a stalled VM)
//! every timer fires at once: a host's wake-up can run before the order
//! does. So the deadline itself is shared with the partition's hosts and
//! the fetcher, which check it right before a request starts: whatever the
//! order of events after a pause, no request of a lapsed owner is sent.
//!
//! The gate also holds a takeover's hold ([`LeaseGate::hold`]): the hosts
//! keep it too, as wall-clock milliseconds beside their own persisted
//! politeness, but a wall clock can step forward (NTP, an operator)
//! between the take and the hold's end; the gate's instant cannot. So no
//! request of a new owner starts before its hold on the monotonic clock,
//! whatever the wall clock does.
//!
//! The gate reads the node's injected clock, the one the lease runs on.

use std::sync::Mutex;
use std::time::Instant;

use crate::clock::SharedClock;

/// The end of a partition's lease, as its requests see it.
#[derive(Debug)]
pub struct LeaseGate {
    clock: SharedClock,
    /// Requests may start before this instant; `None`: not held.
    until: Mutex<Option<Instant>>,
    /// No request starts before this instant (a takeover's hold).
    not_before: Mutex<Option<Instant>>,
}

impl LeaseGate {
    /// A closed gate on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        LeaseGate {
            clock,
            until: Mutex::new(None),
            not_before: Mutex::new(None),
        }
    }

    /// Requests may start until `until` (`None`: not at all).
    pub fn set(&self, until: Option<Instant>) {
        *self.until.lock().unwrap_or_else(|e| e.into_inner()) = until;
    }

    /// No request starts before `at` (a takeover's hold, on the lease's
    /// clock). A hold never shortens one already set: an actor restart
    /// during a takeover's hold holds for the later of the two (the
    /// simulator's seed 3727).
    pub fn hold(&self, at: Instant) {
        let mut not_before = self.not_before.lock().unwrap_or_else(|e| e.into_inner());
        *not_before = Some(not_before.map_or(at, |held| held.max(at)));
    }

    /// Whether a request may start now: after the hold, before the end.
    pub fn is_open(&self) -> bool {
        let until = *self.until.lock().unwrap_or_else(|e| e.into_inner());
        let not_before = *self.not_before.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.clock.now().at;
        until.is_some_and(|until| now < until) && not_before.is_none_or(|at| now >= at)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, ManualClock};

    #[test]
    fn the_gate_is_open_only_before_the_lease_ends() {
        let clock = ManualClock::new();
        let gate = LeaseGate::new(Arc::new(clock.clone()));
        assert!(!gate.is_open(), "closed until a lease is held");
        let t0 = clock.now().at;
        gate.set(Some(t0 + Duration::from_secs(2)));
        assert!(gate.is_open());
        // A pause past the lease: the gate is shut at the first look
        // after it, before anyone has told it anything.
        clock.advance(Duration::from_secs(2));
        assert!(!gate.is_open());
        gate.set(Some(t0 + Duration::from_secs(4)));
        assert!(gate.is_open());
        gate.set(None);
        assert!(!gate.is_open());
    }

    #[test]
    fn a_takeovers_hold_keeps_the_gate_shut_on_the_monotonic_clock() {
        let clock = ManualClock::new();
        let gate = LeaseGate::new(Arc::new(clock.clone()));
        let t0 = clock.now().at;
        gate.set(Some(t0 + Duration::from_secs(10)));
        gate.hold(t0 + Duration::from_secs(3));
        assert!(!gate.is_open(), "held");
        clock.advance(Duration::from_millis(2999));
        assert!(!gate.is_open(), "still held");
        clock.advance(Duration::from_millis(1));
        assert!(gate.is_open());
    }

    #[test]
    fn a_shorter_hold_set_later_does_not_cut_the_first_short() {
        let clock = ManualClock::new();
        let gate = LeaseGate::new(Arc::new(clock.clone()));
        let t0 = clock.now().at;
        gate.set(Some(t0 + Duration::from_secs(60)));
        gate.hold(t0 + Duration::from_secs(6));
        // An actor restart one second in holds a request timeout.
        gate.hold(t0 + Duration::from_secs(3));
        clock.advance(Duration::from_secs(4));
        assert!(!gate.is_open(), "the takeover's hold still holds");
        clock.advance(Duration::from_secs(2));
        assert!(gate.is_open());
    }
}

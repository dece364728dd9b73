//! Politeness arithmetic: when may the next request to a host start?
//!
//! Pure functions of time: every method takes `now` (or the instants of a
//! request) as an argument, so the schedule is tested exactly, without
//! sleeping. The HostActor owns one [`HostPoliteness`] and asks it before
//! every request.
//!
//! The guarantee: at most `max_in_flight` requests to a host at once, and a
//! request starts no earlier than `completion + delay` of every request that
//! completed before it, where `delay = max(min_delay, delay_factor × response
//! time)`. The delay is measured from completion, not from start, so a slow
//! host automatically gets fewer requests.

use std::time::{Duration, Instant};

use crate::config::PolitenessConfig;

/// The per-host pacing rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Floor of the completion-to-start delay.
    pub min_delay: Duration,
    /// Multiplier of the last response time.
    pub delay_factor: f64,
    /// Concurrent requests allowed per host.
    pub max_in_flight: u32,
}

impl From<&PolitenessConfig> for Policy {
    fn from(c: &PolitenessConfig) -> Self {
        Policy {
            min_delay: c.min_delay,
            delay_factor: c.delay_factor,
            max_in_flight: c.max_in_flight_per_host,
        }
    }
}

impl Policy {
    /// The delay owed after a response that took `response_time`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use trawl::politeness::Policy;
    ///
    /// let policy = Policy { min_delay: Duration::from_secs(1), delay_factor: 10.0, max_in_flight: 1 };
    /// // A fast host gets the floor, a slow one ten times its response time.
    /// assert_eq!(policy.delay_after(Duration::from_millis(30)), Duration::from_secs(1));
    /// assert_eq!(policy.delay_after(Duration::from_millis(400)), Duration::from_secs(4));
    /// ```
    pub fn delay_after(&self, response_time: Duration) -> Duration {
        let scaled = response_time.mul_f64(self.delay_factor);
        self.min_delay.max(scaled)
    }
}

/// Proof that a request slot was taken; handing it back to
/// [`HostPoliteness::release`] is the only way to free the slot, so a permit
/// cannot be released twice and the compiler flags one that is forgotten.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit must be released when the request completes"]
pub struct Permit {
    /// When the request started, to measure its response time.
    pub started: Instant,
}

/// Why a request may not start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// All slots are taken; wait for a completion.
    Busy,
    /// Slots are free but the delay runs until this instant.
    Until(Instant),
}

/// The politeness state of one host.
#[derive(Debug, Clone)]
pub struct HostPoliteness {
    /// Requests started and not yet released.
    in_flight: u32,
    /// Earliest start of the next request.
    next_allowed: Instant,
}

impl HostPoliteness {
    /// A host that may be asked from `next_allowed` on.
    pub fn new(next_allowed: Instant) -> Self {
        HostPoliteness {
            in_flight: 0,
            next_allowed,
        }
    }

    /// Requests currently in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Earliest start of the next request.
    pub fn next_allowed(&self) -> Instant {
        self.next_allowed
    }

    /// Takes a slot if the policy allows a request to start at `now`.
    pub fn try_acquire(&mut self, policy: &Policy, now: Instant) -> Result<Permit, Wait> {
        if self.in_flight >= policy.max_in_flight {
            return Err(Wait::Busy);
        }
        if now < self.next_allowed {
            return Err(Wait::Until(self.next_allowed));
        }
        self.in_flight += 1;
        Ok(Permit { started: now })
    }

    /// Frees the slot of a request that completed (or failed or timed out)
    /// at `completed`, and pushes the next start past its delay.
    pub fn release(&mut self, policy: &Policy, permit: Permit, completed: Instant) {
        debug_assert!(self.in_flight > 0, "release without acquire");
        self.in_flight = self.in_flight.saturating_sub(1);
        let response_time = completed.saturating_duration_since(permit.started);
        let earliest = completed + policy.delay_after(response_time);
        self.next_allowed = self.next_allowed.max(earliest);
    }

    /// Pushes the next start to at least `until` (e.g. a persisted schedule
    /// or a server's Retry-After).
    pub fn defer_until(&mut self, until: Instant) {
        self.next_allowed = self.next_allowed.max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_in_flight: u32) -> Policy {
        Policy {
            min_delay: Duration::from_secs(1),
            delay_factor: 10.0,
            max_in_flight,
        }
    }

    #[test]
    fn delay_is_the_larger_of_floor_and_scaled_response_time() {
        let p = policy(1);
        assert_eq!(
            p.delay_after(Duration::from_millis(20)),
            Duration::from_secs(1)
        );
        assert_eq!(
            p.delay_after(Duration::from_millis(300)),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn one_in_flight_then_delay_from_completion() {
        let p = policy(1);
        let t0 = Instant::now();
        let mut host = HostPoliteness::new(t0);
        let permit = host.try_acquire(&p, t0).unwrap();
        assert_eq!(host.try_acquire(&p, t0), Err(Wait::Busy));
        let done = t0 + Duration::from_millis(200);
        host.release(&p, permit, done);
        // 200 ms response × 10 = 2 s after completion.
        let due = done + Duration::from_secs(2);
        assert_eq!(
            host.try_acquire(&p, due - Duration::from_millis(1)),
            Err(Wait::Until(due))
        );
        assert!(host.try_acquire(&p, due).is_ok());
    }

    #[test]
    fn two_slots_and_every_completion_pushes_the_schedule() {
        let p = policy(2);
        let t0 = Instant::now();
        let mut host = HostPoliteness::new(t0);
        let a = host.try_acquire(&p, t0).unwrap();
        let b = host.try_acquire(&p, t0).unwrap();
        assert_eq!(host.try_acquire(&p, t0), Err(Wait::Busy));
        host.release(&p, a, t0 + Duration::from_millis(10));
        assert_eq!(host.in_flight(), 1);
        let first_due = t0 + Duration::from_millis(1010);
        assert_eq!(
            host.try_acquire(&p, t0 + Duration::from_millis(500)),
            Err(Wait::Until(first_due))
        );
        // A later, slower completion moves the schedule further out, never back.
        host.release(&p, b, t0 + Duration::from_millis(150));
        assert_eq!(
            host.next_allowed(),
            t0 + Duration::from_millis(150) + Duration::from_millis(1500)
        );
    }

    #[test]
    fn deferral_never_moves_the_schedule_earlier() {
        let p = policy(1);
        let t0 = Instant::now();
        let mut host = HostPoliteness::new(t0 + Duration::from_secs(5));
        host.defer_until(t0 + Duration::from_secs(1));
        assert_eq!(host.next_allowed(), t0 + Duration::from_secs(5));
        host.defer_until(t0 + Duration::from_secs(9));
        assert_eq!(
            host.try_acquire(&p, t0 + Duration::from_secs(8)),
            Err(Wait::Until(t0 + Duration::from_secs(9)))
        );
    }
}

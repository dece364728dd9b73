//! Politeness arithmetic: when may the next request to a host start?
//!
//! Pure functions of time: every method takes `now` (or the instants of a
//! request) as an argument, so schedules are tested exactly, without
//! sleeping. The HostActor owns one [`HostPoliteness`] and asks it before
//! every request.
//!
//! The promise:
//! - at most `max_in_flight` requests to a host at once; a slot is taken
//!   with a [`Permit`] and only [`HostPoliteness::release`] frees it, on
//!   completion, failure or timeout alike;
//! - a request starts no earlier than `completion + delay` of every request
//!   that completed before it, with
//!   `delay = max(min_delay, min(delay_factor × response time, max_delay),
//!   min(Crawl-delay, max_crawl_delay), Retry-After)`; the response time is
//!   measured on the wire (from when the request was sent, not from when
//!   the host took its permit: a wait for a global fetch slot is not the
//!   host's slowness), and `max_delay` caps the adaptive part so one
//!   request that ran into a 30 s timeout does not hold its host for five
//!   minutes (Crawl-delay and Retry-After keep their own caps);
//! - 429 and 503 honour Retry-After (seconds or HTTP-date, capped by
//!   `max_retry_after`): the server said when, so that is not counted as a
//!   failure; without it, and after timeouts, connection errors and other
//!   5xx, the delay grows exponentially (`backoff_base × 2^(n-1)`,
//!   capped by `backoff_max`, lengthened by up to 25 % jitter so hosts that
//!   failed together do not retry together);
//! - after `park_after_failures` consecutive failures the host is parked
//!   for `park_duration`; its queue is kept;
//! - optionally, at most `max_in_flight_per_ip` requests to one address
//!   across all hosts ([`ip`]);
//! - a request occupies its host until the server could have finished
//!   with it: its answer, or, when the crawl stops waiting (a timeout, a
//!   reset, a drain, a lost lease, a crash), its *deadline* (its start
//!   plus `fetch.timeout`: a server does not learn that a client stopped
//!   waiting). The delay after it is computed from the time it took,
//!   answered or not. So a request's [`Hold`] is written to the store
//!   before it leaves, and whoever opens the host next (a restart after
//!   `kill -9`, a takeover, a hand-back, a join) honours it
//!   ([`HostPoliteness::honour_hold`]): the same rule on every path.

pub mod handover;
pub mod ip;
pub mod slowdown;

use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

pub use crate::clock::{unix_ms, unix_ms_ceil};
use crate::config::PolitenessConfig;

/// The per-host pacing rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Floor of the completion-to-start delay.
    pub min_delay: Duration,
    /// Multiplier of the last response time.
    pub delay_factor: f64,
    /// Cap on `delay_factor × response time`.
    pub max_delay: Duration,
    /// Concurrent requests allowed per host.
    pub max_in_flight: u32,
    /// Cap on a robots.txt Crawl-delay.
    pub max_crawl_delay: Duration,
    /// Cap on a server's Retry-After.
    pub max_retry_after: Duration,
    /// First backoff after a failure.
    pub backoff_base: Duration,
    /// Largest backoff.
    pub backoff_max: Duration,
    /// Consecutive failures that park a host (0 = never).
    pub park_after_failures: u32,
    /// How long a parked host waits.
    pub park_duration: Duration,
}

impl From<&PolitenessConfig> for Policy {
    fn from(c: &PolitenessConfig) -> Self {
        Policy {
            min_delay: c.min_delay,
            delay_factor: c.delay_factor,
            max_delay: c.max_delay,
            max_in_flight: c.max_in_flight_per_host,
            max_crawl_delay: c.max_crawl_delay,
            max_retry_after: c.max_retry_after,
            backoff_base: c.backoff_base,
            backoff_max: c.backoff_max,
            park_after_failures: c.park_after_failures,
            park_duration: c.park_duration,
        }
    }
}

impl Policy {
    /// A policy with the given floor and factor and the default caps
    /// (tests and examples).
    pub fn simple(min_delay: Duration, delay_factor: f64, max_in_flight: u32) -> Self {
        Policy {
            min_delay,
            delay_factor,
            max_delay: Duration::from_secs(60),
            max_in_flight,
            max_crawl_delay: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(3600),
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(600),
            park_after_failures: 5,
            park_duration: Duration::from_secs(3600),
        }
    }

    /// The delay owed after a successful response that took
    /// `response_time`, given the host's Crawl-delay.
    ///
    /// ```
    /// use std::time::Duration;
    /// use trawl::politeness::Policy;
    ///
    /// let policy = Policy::simple(Duration::from_secs(1), 10.0, 1);
    /// // A fast host gets the floor, a slow one ten times its response time
    /// // (up to `max_delay`), and a Crawl-delay counts up to its cap.
    /// assert_eq!(policy.delay_after(Duration::from_millis(30), None), Duration::from_secs(1));
    /// assert_eq!(policy.delay_after(Duration::from_millis(400), None), Duration::from_secs(4));
    /// assert_eq!(policy.delay_after(Duration::from_secs(30), None), policy.max_delay);
    /// assert_eq!(policy.delay_after(Duration::ZERO, Some(Duration::from_secs(600))), Duration::from_secs(60));
    /// ```
    pub fn delay_after(&self, response_time: Duration, crawl_delay: Option<Duration>) -> Duration {
        let scaled = response_time.mul_f64(self.delay_factor).min(self.max_delay);
        let crawl = crawl_delay.unwrap_or_default().min(self.max_crawl_delay);
        self.min_delay.max(scaled).max(crawl)
    }

    /// The backoff after `failures` consecutive failures; `jitter` in
    /// `[0, 1)` lengthens it by up to 25 %.
    pub fn backoff(&self, failures: u32, jitter: f64) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        let raw = self.backoff_base.saturating_mul(1u32 << doublings);
        raw.min(self.backoff_max)
            .mul_f64(1.0 + 0.25 * jitter.clamp(0.0, 1.0))
    }
}

/// How a request ended, as far as politeness cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response that is not a throttle or a server error.
    Success,
    /// 429 or 503, with the server's Retry-After if it sent a valid one.
    Throttled {
        /// The wait the server asked for.
        retry_after: Option<Duration>,
    },
    /// Other 5xx, timeout, connection error.
    Failure,
    /// The answer was lost inside the crawler (not the host's doing): the
    /// host owes at least its last delay again, its failure count is left
    /// as it was.
    Lost,
}

impl Outcome {
    /// Classifies an HTTP status and its Retry-After header.
    pub fn of_status(status: u16, retry_after: Option<&str>, now: SystemTime) -> Outcome {
        match status {
            429 | 503 => Outcome::Throttled {
                retry_after: retry_after.and_then(|v| parse_retry_after(v, now)),
            },
            500..=599 => Outcome::Failure,
            _ => Outcome::Success,
        }
    }

    /// Whether the request should be tried again later.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Outcome::Success | Outcome::Lost)
    }
}

/// Parses Retry-After: delay-seconds or an HTTP-date (RFC 9110 §10.2.3);
/// a date in the past means no wait.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Proof that a request slot was taken; handing it back to
/// [`HostPoliteness::release`] is the only way to free the slot, so a permit
/// cannot be released twice and the compiler flags one that is forgotten.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit must be released when the request completes"]
pub struct Permit {
    _private: (),
}

/// Why a request may not start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// All slots are taken; wait for a completion.
    Busy,
    /// Slots are free but the delay runs until this instant.
    Until(Instant),
}

/// The part of a host's politeness that survives restarts, in wall-clock
/// milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// No request before this (Unix ms).
    pub next_allowed_ms: u64,
    /// The delay owed after the last request, so a restart after a crash
    /// (with a request possibly in flight) waits at least this long.
    pub last_delay_ms: u64,
    /// Consecutive failures.
    pub failures: u32,
    /// Parked until this (Unix ms), 0 if not parked.
    pub parked_until_ms: u64,
}

/// A request's claim on its host, persisted before the request leaves:
/// it may be on the wire, and the server may be working on it, from
/// `sent_ms` until `until_ms` (its deadline), both Unix ms. A hold still in
/// the store when a host is opened again means its last life ended with a
/// request out (a crash, a drain that timed out, a lost lease): the host
/// waits until the deadline and then the delay a request that took that
/// long owes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// When the request was handed out (Unix ms).
    pub sent_ms: u64,
    /// Its deadline: the server may work on it until then (Unix ms).
    pub until_ms: u64,
}

impl Hold {
    /// The hold of requests `a` and `b` together (several in flight).
    pub fn join(self, b: Hold) -> Hold {
        Hold {
            sent_ms: self.sent_ms.min(b.sent_ms),
            until_ms: self.until_ms.max(b.until_ms),
        }
    }
}

/// The politeness state of one host.
#[derive(Debug, Clone)]
pub struct HostPoliteness {
    /// Requests started and not yet released.
    in_flight: u32,
    /// Earliest start of the next request.
    next_allowed: Instant,
    /// Crawl-delay from robots.txt, uncapped (the policy caps it).
    crawl_delay: Option<Duration>,
    /// Consecutive failures since the last success.
    failures: u32,
    /// The delay imposed by the last release.
    last_delay: Duration,
    /// Parked until this instant.
    parked_until: Option<Instant>,
}

/// What a release decided, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// The wait imposed before the next request.
    pub delay: Duration,
    /// The host was parked by this release.
    pub parked: bool,
    /// What set the wait.
    pub reason: WaitReason,
}

/// What set a host's wait: a bounded metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// `min_delay` or `delay_factor × response time`.
    Delay,
    /// robots.txt Crawl-delay.
    CrawlDelay,
    /// The server's Retry-After.
    RetryAfter,
    /// Exponential backoff after a failure.
    Backoff,
    /// The host was parked.
    Parked,
}

impl WaitReason {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::Delay => "delay",
            WaitReason::CrawlDelay => "crawl_delay",
            WaitReason::RetryAfter => "retry_after",
            WaitReason::Backoff => "backoff",
            WaitReason::Parked => "parked",
        }
    }
}

impl HostPoliteness {
    /// A host that may be asked from `next_allowed` on.
    pub fn new(next_allowed: Instant) -> Self {
        HostPoliteness {
            in_flight: 0,
            next_allowed,
            crawl_delay: None,
            failures: 0,
            last_delay: Duration::ZERO,
            parked_until: None,
        }
    }

    /// Restores a persisted schedule; `now`/`now_wall` anchor wall-clock
    /// milliseconds to the monotonic clock. `crashed` means the previous run
    /// did not stop cleanly, so a request may have been in flight: the last
    /// delay is owed again from now.
    pub fn restore(s: &Schedule, now: Instant, now_wall: SystemTime, crashed: bool) -> Self {
        let now_ms = unix_ms(now_wall);
        let at = |ms: u64| now + Duration::from_millis(ms.saturating_sub(now_ms));
        let mut host = HostPoliteness::new(at(s.next_allowed_ms));
        host.failures = s.failures;
        host.last_delay = Duration::from_millis(s.last_delay_ms);
        host.parked_until = (s.parked_until_ms > now_ms).then(|| at(s.parked_until_ms));
        if crashed {
            host.defer_until(now + host.last_delay);
        }
        host
    }

    /// Honours `hold`, a request of an earlier life that may still be on
    /// the wire: no start before its deadline plus the delay owed after a
    /// request that took from its start to its deadline (the most it can
    /// have taken). Counted as neither a success nor a failure.
    pub fn honour_hold(&mut self, policy: &Policy, hold: Hold, now: Instant, now_wall: SystemTime) {
        let now_ms = unix_ms(now_wall);
        let until = now + Duration::from_millis(hold.until_ms.saturating_sub(now_ms));
        let took = Duration::from_millis(hold.until_ms.saturating_sub(hold.sent_ms));
        let delay = policy.delay_after(took, self.crawl_delay);
        self.last_delay = self.last_delay.max(delay);
        self.defer_until(until + delay);
    }

    /// The persisted form, relative to `now`/`now_wall`. Rounded up: a
    /// restart may wait a millisecond longer, never less.
    pub fn schedule(&self, now: Instant, now_wall: SystemTime) -> Schedule {
        // A far-off instant saturates instead of overflowing the clock.
        let ms = |at: Instant| {
            now_wall
                .checked_add(at.saturating_duration_since(now))
                .map_or(u64::MAX, |t| unix_ms_ceil(t).saturating_add(1))
        };
        Schedule {
            next_allowed_ms: ms(self.next_allowed),
            last_delay_ms: self.last_delay.as_millis() as u64 + 1,
            failures: self.failures,
            parked_until_ms: self.parked_until.filter(|&p| p > now).map_or(0, ms),
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

    /// Consecutive failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether the host is parked at `now`.
    pub fn parked(&self, now: Instant) -> bool {
        self.parked_until.is_some_and(|p| p > now)
    }

    /// The Crawl-delay in force (uncapped).
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
    }

    /// Sets the Crawl-delay read from robots.txt.
    pub fn set_crawl_delay(&mut self, delay: Option<Duration>) {
        self.crawl_delay = delay;
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
        Ok(Permit { _private: () })
    }

    /// Hands back a permit whose request never started (another limit, such
    /// as the per-IP one, said no); the schedule is unchanged.
    pub fn cancel(&mut self, permit: Permit) {
        let Permit { .. } = permit;
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Frees the slot of a request that ended at `completed` with `outcome`
    /// after `response_time` on the wire, and pushes the next start past
    /// the delay it owes. `jitter` in `[0, 1)` spreads backoffs.
    pub fn release(
        &mut self,
        policy: &Policy,
        permit: Permit,
        completed: Instant,
        response_time: Duration,
        outcome: Outcome,
        jitter: f64,
    ) -> Released {
        let Permit { .. } = permit;
        debug_assert!(self.in_flight > 0, "release without acquire");
        self.in_flight = self.in_flight.saturating_sub(1);
        let mut delay = policy.delay_after(response_time, self.crawl_delay);
        let mut reason = if delay > policy.delay_after(response_time, None) {
            WaitReason::CrawlDelay
        } else {
            WaitReason::Delay
        };
        let mut raise = |candidate: Duration, why: WaitReason| {
            if candidate > delay {
                delay = candidate;
                reason = why;
            }
        };
        match outcome {
            Outcome::Success => self.failures = 0,
            // The server said when: honoured exactly, and not a failure (it
            // neither grows the backoff nor parks the host).
            Outcome::Throttled {
                retry_after: Some(wait),
            } => raise(wait.min(policy.max_retry_after), WaitReason::RetryAfter),
            Outcome::Lost => raise(self.last_delay, WaitReason::Delay),
            Outcome::Throttled { retry_after: None } | Outcome::Failure => {
                self.failures += 1;
                raise(policy.backoff(self.failures, jitter), WaitReason::Backoff);
            }
        }
        let parked = policy.park_after_failures > 0 && self.failures >= policy.park_after_failures;
        if parked {
            raise(policy.park_duration, WaitReason::Parked);
            self.parked_until = Some(completed + delay);
            self.failures = 0;
        }
        self.last_delay = delay;
        self.next_allowed = self.next_allowed.max(completed + delay);
        Released {
            delay,
            parked,
            reason,
        }
    }

    /// Pushes the next start to at least `until`.
    pub fn defer_until(&mut self, until: Instant) {
        self.next_allowed = self.next_allowed.max(until);
    }

    /// Makes the wait owed after the last request at least `min_delay`
    /// (a slow-down applied now, not only after the next response): the
    /// next start moves to `last completion + min_delay`, where the last
    /// completion is `next_allowed - last_delay`.
    pub fn stretch_to(&mut self, min_delay: Duration) {
        if self.last_delay >= min_delay {
            return;
        }
        let completed = self
            .next_allowed
            .checked_sub(self.last_delay)
            .unwrap_or(self.next_allowed);
        self.next_allowed = self.next_allowed.max(completed + min_delay);
        self.last_delay = min_delay;
    }
}

#[cfg(test)]
mod tests;

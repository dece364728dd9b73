//! Time as a parameter.
//!
//! Every decision that depends on time (politeness, robots.txt expiry,
//! backoff, when a host comes due) takes a [`Now`] as an argument. The
//! actors read it from an injected [`Clock`]: [`SystemClock`] in a crawl,
//! [`ManualClock`] in tests, which moves only when told, so a test asserts
//! exact schedules without sleeping.
//!
//! A `Now` carries both clocks a crawler needs: the monotonic instant for
//! waits within a run (immune to wall-clock jumps) and the wall clock for
//! what is persisted (a restart has no common monotonic origin with the run
//! before it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// One reading of both clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Monotonic time: waits and timers.
    pub at: Instant,
    /// Wall-clock time: what is persisted and shown.
    pub wall: SystemTime,
}

impl Now {
    /// Milliseconds since the Unix epoch (0 before it).
    pub fn unix_ms(&self) -> u64 {
        unix_ms(self.wall)
    }

    /// The instant at wall-clock `ms` (Unix milliseconds), as seen from
    /// this reading; a time in the past maps to `self.at`.
    pub fn instant_at_ms(&self, ms: u64) -> Instant {
        self.at + Duration::from_millis(ms.saturating_sub(self.unix_ms()))
    }

    /// Wall-clock Unix milliseconds of `at`, as seen from this reading,
    /// rounded up (a persisted deadline may be a millisecond late, never
    /// early).
    pub fn ms_at(&self, at: Instant) -> u64 {
        let ahead = at.saturating_duration_since(self.at);
        if ahead.is_zero() {
            self.unix_ms()
        } else {
            self.unix_ms() + ahead.as_millis() as u64 + 1
        }
    }

    /// This reading moved forward by `d` (both clocks).
    pub fn plus(&self, d: Duration) -> Now {
        Now {
            at: self.at + d,
            wall: self.wall + d,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A source of [`Now`].
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current reading.
    fn now(&self) -> Now;
}

/// The operating system's clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Now {
        Now {
            at: Instant::now(),
            wall: SystemTime::now(),
        }
    }
}

/// A clock that moves only when [`ManualClock::advance`] is called.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<Now>>,
}

impl ManualClock {
    /// A clock reading `wall` (and the current monotonic instant).
    pub fn at_wall(wall: SystemTime) -> Self {
        ManualClock {
            now: Arc::new(Mutex::new(Now {
                at: Instant::now(),
                wall,
            })),
        }
    }

    /// A clock at an arbitrary fixed date (2026-01-01T00:00:00Z).
    pub fn new() -> Self {
        Self::at_wall(SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600))
    }

    /// Moves both clocks forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *now = now.plus(d);
    }

    /// Moves both clocks forward to `at` (no-op if `at` is past).
    pub fn advance_to(&self, at: Instant) {
        let d = at.saturating_duration_since(self.now().at);
        self.advance(d);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Now {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The clock actors share.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_and_monotonic_move_together() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        clock.advance(Duration::from_millis(1500));
        let t1 = clock.now();
        assert_eq!(t1.at - t0.at, Duration::from_millis(1500));
        assert_eq!(t1.unix_ms() - t0.unix_ms(), 1500);
        assert_eq!(t0.instant_at_ms(t1.unix_ms()), t1.at);
        assert_eq!(t0.ms_at(t1.at), t1.unix_ms() + 1, "rounded up");
        assert_eq!(t1.ms_at(t0.at), t1.unix_ms(), "the past is now");
    }
}

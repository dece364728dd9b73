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
    /// rounded up from the exact time (a persisted deadline may be a
    /// millisecond late, never early: adding whole milliseconds to this
    /// reading's truncated ones could land up to one early, and a host
    /// persisted and restored twice then asked ~2 ms before its delay
    /// was over); a time in the past maps to this reading.
    pub fn ms_at(&self, at: Instant) -> u64 {
        let ahead = at.saturating_duration_since(self.at);
        if ahead.is_zero() {
            self.unix_ms()
        } else {
            // A far-off instant saturates instead of overflowing.
            self.wall.checked_add(ahead).map_or(u64::MAX, unix_ms_ceil)
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

/// Unix milliseconds of `t`, rounded up: a deadline written in whole
/// milliseconds that is never earlier than `t`.
pub fn unix_ms_ceil(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| {
        u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
    })
}

/// A source of [`Now`].
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current reading.
    fn now(&self) -> Now;
}

/// The operating system's clocks.
///
/// Its monotonic reading counts the time a suspended machine slept
/// (Linux's `CLOCK_BOOTTIME`; elsewhere `Instant`'s clock). `Instant`
/// reads `CLOCK_MONOTONIC`, which stops while a VM or laptop is
/// suspended: resumed, a node would believe the lease it renewed before
/// the sleep still fresh and fetch on it while another node owns the
/// partition (`src/cluster/lease.rs`), and every politeness delay would
/// seem unserved. Counted from boot, the lease ran out during the sleep,
/// as it did for every other node, and the delays were served. A
/// backwards or forward step of the wall clock changes nothing here.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Now {
        Now {
            at: boot_instant(),
            wall: SystemTime::now(),
        }
    }
}

/// An `Instant` that advances with the boot-time clock: the process's
/// first reading of both, plus the boot time elapsed since. Equal to
/// `Instant::now()` until the machine first sleeps, ahead of it after.
fn boot_instant() -> Instant {
    static ANCHOR: std::sync::OnceLock<(Instant, Duration)> = std::sync::OnceLock::new();
    let (at, boot) = *ANCHOR.get_or_init(|| (Instant::now(), since_boot()));
    at + since_boot().saturating_sub(boot)
}

/// Time since boot, sleep included (`CLOCK_BOOTTIME`).
#[cfg(target_os = "linux")]
fn since_boot() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill;
    // CLOCK_BOOTTIME exists on every Linux since 2.6.39.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0;
    if !ok {
        return monotonic_since_start();
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Elsewhere: `Instant`'s own clock.
#[cfg(not(target_os = "linux"))]
fn since_boot() -> Duration {
    monotonic_since_start()
}

/// `Instant`'s clock, from a fixed origin of this process.
fn monotonic_since_start() -> Duration {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed()
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
mod boot_tests {
    use super::*;

    #[test]
    fn the_system_clock_advances_with_the_boot_time_clock_and_never_back() {
        let clock = SystemClock;
        let (a, boot_a) = (clock.now().at, since_boot());
        std::thread::sleep(Duration::from_millis(20));
        let (b, boot_b) = (clock.now().at, since_boot());
        assert!(b >= a);
        // Both moved by the boot clock's 20 ms (and what the reads took).
        let moved = b - a;
        let booted = boot_b - boot_a;
        assert!(moved >= Duration::from_millis(20), "{moved:?}");
        assert!(
            moved.abs_diff(booted) < Duration::from_millis(5),
            "{moved:?} vs {booted:?}"
        );
    }
}

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
        assert_eq!(t0.ms_at(t1.at), unix_ms_ceil(t1.wall), "rounded up");
        assert_eq!(t1.ms_at(t0.at), t1.unix_ms(), "the past is now");
    }

    #[test]
    fn a_deadline_in_milliseconds_is_never_earlier_than_the_instant() {
        // Readings 0.9 ms into a millisecond, deadlines 10.9 ms ahead: the
        // truncated reading plus truncated whole milliseconds plus one
        // landed 0.8 ms early.
        let base = SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000);
        let clock = ManualClock::at_wall(base + Duration::from_micros(900));
        let now = clock.now();
        let at = now.at + Duration::from_micros(10_900);
        let exact = base + Duration::from_micros(11_800);
        let ms = now.ms_at(at);
        assert_eq!(ms, 1_000_012);
        assert!(SystemTime::UNIX_EPOCH + Duration::from_millis(ms) >= exact);
        // Read back from a later reading, it is not earlier either.
        clock.advance(Duration::from_micros(3_050));
        let later = clock.now();
        assert!(later.instant_at_ms(ms) >= at);
        assert_eq!(unix_ms_ceil(base), 1_000_000, "a whole millisecond stays");
        // An instant centuries ahead (a host held for ever) saturates.
        let far = now.at + Duration::from_secs(u64::MAX / 4);
        assert_eq!(now.ms_at(far), u64::MAX);
    }
}

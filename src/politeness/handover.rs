//! What a partition handed back still owes its hosts, carried on the
//! clock that can carry it.
//!
//! A drained host's next request time is persisted in its schedule in
//! this node's wall-clock milliseconds ([`super::Schedule`]). The next
//! owner reads it on its own wall clock: one ahead of this node's (skew,
//! an NTP step) reads a request given up on, still at its server, as over,
//! and asks the host again while the server works. Between owners the
//! lease carries a hold on each node's monotonic clock instead
//! (`cluster::lease`, the released manifest's `hold_ms`); so a clean drain
//! reports the longest wait of any of its hosts as a duration measured
//! here, and the next owner holds the partition that long.
//!
//! The wait is capped at a request timeout plus the least delay: a request
//! ends by its deadline, at most a request timeout away, so no longer
//! hold guards a request still at a server, and a host backed off for an
//! hour (a Retry-After, a parked host) keeps that wait in its own schedule
//! instead of holding every host of the partition for it.

use std::time::Duration;

/// What a drained partition owes before any of its hosts may be asked
/// again: the longest wait of its hosts (`next_ms`: when each may next be
/// asked, Unix ms on this node's wall clock, read at `now_ms`), at least
/// `min_delay` and at most `request_timeout + min_delay` (see the module
/// doc).
pub fn owed_after_drain(
    now_ms: u64,
    next_ms: impl IntoIterator<Item = u64>,
    min_delay: Duration,
    request_timeout: Duration,
) -> Duration {
    let longest = next_ms
        .into_iter()
        .map(|ms| ms.saturating_sub(now_ms))
        .max()
        .unwrap_or(0);
    Duration::from_millis(longest).clamp(min_delay, request_timeout + min_delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: Duration = Duration::from_millis(100);
    const TIMEOUT: Duration = Duration::from_millis(30_000);

    #[test]
    fn a_drained_partition_owes_its_longest_host_wait() {
        let owed = owed_after_drain(10_000, [10_050, 12_500, 9_000], FLOOR, TIMEOUT);
        assert_eq!(owed, Duration::from_millis(2_500));
    }

    #[test]
    fn the_least_delay_is_owed_whatever_the_hosts_wait() {
        assert_eq!(owed_after_drain(10_000, [], FLOOR, TIMEOUT), FLOOR);
        let owed = owed_after_drain(10_000, [9_999, 10_020], FLOOR, TIMEOUT);
        assert_eq!(owed, FLOOR);
    }

    #[test]
    fn a_wait_past_any_request_deadline_is_left_to_the_host() {
        let parked = 10_000 + 3_600_000;
        let owed = owed_after_drain(10_000, [parked], FLOOR, TIMEOUT);
        assert_eq!(owed, TIMEOUT + FLOOR);
        // No timeout still owes the floor.
        let owed = owed_after_drain(10_000, [parked], FLOOR, Duration::ZERO);
        assert_eq!(owed, FLOOR);
    }
}

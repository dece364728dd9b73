//! When a fetched URL should be fetched again: its change rate, estimated
//! from its own history.
//!
//! Groundwork for the refresh loop (issue 9): the arithmetic only, pure
//! and tested; nothing in the crawl calls it yet, so trawl does not
//! refresh pages today.
//!
//! **Estimator.** A page visited `n` times at a regular interval `I`, found
//! changed at `X` of those visits, changes at an estimated rate
//!
//! ```text
//! λ̂ = −ln((n − X + 0.5) / (n + 0.5)) / I
//! ```
//!
//! (Cho & Garcia-Molina, "Estimating frequency of change", 2003). The
//! naive `X / (n·I)` undercounts: a visit only sees *whether* the page
//! changed since the last one, not how often, and a page that changes
//! every hour looks like "changed once" to a daily visit. This estimator
//! corrects for the changes hidden between two visits and, thanks to the
//! 0.5 terms, stays finite when every visit saw a change (`X = n`) and
//! zero when none did. For irregular intervals `I` is the mean interval
//! (the maximum-likelihood form for irregular visits is a possible
//! refinement; the mean is what the seed design calls for first).
//!
//! **Interval.** The next visit is one expected change away, `1 / λ̂`,
//! clamped to `[min_interval, max_interval]`; a page never seen to change
//! waits `max_interval`, a URL without history `default_interval`.

use std::time::Duration;

/// A URL's visit history, as far as change detection goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeHistory {
    /// Visits that could be compared with the one before (the first fetch
    /// of a URL is not one).
    pub visits: u32,
    /// Of those, visits that found the content changed.
    pub changes: u32,
    /// The time spanned by those visits, first to last.
    pub span: Duration,
}

impl ChangeHistory {
    /// The history with one more compared visit, `after` the previous one.
    pub fn record(self, changed: bool, after: Duration) -> ChangeHistory {
        ChangeHistory {
            visits: self.visits.saturating_add(1),
            changes: self.changes.saturating_add(u32::from(changed)),
            span: self.span.saturating_add(after),
        }
    }

    /// The estimated change rate, in changes per second; `None` without
    /// history.
    pub fn change_rate(&self) -> Option<f64> {
        if self.visits == 0 || self.span.is_zero() {
            return None;
        }
        let n = f64::from(self.visits);
        let x = f64::from(self.changes.min(self.visits));
        let mean_interval = self.span.as_secs_f64() / n;
        Some(-((n - x + 0.5) / (n + 0.5)).ln() / mean_interval)
    }
}

/// The bounds of revisit intervals (`[recrawl]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecrawlPolicy {
    /// Never sooner than this.
    pub min_interval: Duration,
    /// Never later than this.
    pub max_interval: Duration,
    /// For a URL with no history yet.
    pub default_interval: Duration,
}

impl RecrawlPolicy {
    /// How long after its last visit a URL with `history` is due again.
    pub fn interval(&self, history: &ChangeHistory) -> Duration {
        let Some(rate) = history.change_rate() else {
            return self
                .default_interval
                .clamp(self.min_interval, self.max_interval);
        };
        if rate <= 0.0 || !rate.is_finite() {
            return self.max_interval;
        }
        let secs = (1.0 / rate).min(self.max_interval.as_secs_f64());
        Duration::from_secs_f64(secs).clamp(self.min_interval, self.max_interval)
    }
}

impl RecrawlPolicy {
    /// How long after this visit the URL is due again, given its history
    /// (this visit included) and the interval it was on (`None` on its
    /// first fetch).
    pub fn next_interval(&self, history: &ChangeHistory, previous: Option<Duration>) -> Duration {
        let _ = previous;
        self.interval(history)
    }
}

/// Whether a refetched page changed: a different payload digest, and for
/// pages with a simhash, visible text more than `max_distance` bits apart
/// (so a changed timestamp in a footer is not a change).
pub fn changed(
    old_digest: &[u8; 32],
    new_digest: &[u8; 32],
    old_simhash: Option<u64>,
    new_simhash: Option<u64>,
    max_distance: u32,
) -> bool {
    if old_digest == new_digest {
        return false;
    }
    match (old_simhash, new_simhash) {
        (Some(a), Some(b)) => (a ^ b).count_ones() > max_distance,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn policy() -> RecrawlPolicy {
        RecrawlPolicy {
            min_interval: DAY,
            max_interval: DAY * 90,
            default_interval: DAY * 7,
        }
    }

    fn history(visits: u32, changes: u32, every: Duration) -> ChangeHistory {
        (0..visits).fold(ChangeHistory::default(), |h, i| {
            h.record(i < changes, every)
        })
    }

    #[test]
    fn the_estimate_matches_the_formula_and_corrects_for_hidden_changes() {
        // 10 daily visits, 5 changes: −ln(5.5 / 10.5) per day.
        let h = history(10, 5, DAY);
        let rate = h.change_rate().unwrap() * DAY.as_secs_f64();
        assert!((rate - -(5.5f64 / 10.5).ln()).abs() < 1e-12, "{rate}");
        // Higher than the naive 5 changes / 10 days: some changes hid.
        assert!(rate > 0.5);
        // Every visit saw a change: finite, and above one per interval.
        let always = history(10, 10, DAY).change_rate().unwrap() * DAY.as_secs_f64();
        assert!((always - 21f64.ln()).abs() < 1e-12);
        // No change seen: rate zero.
        assert_eq!(history(10, 0, DAY).change_rate(), Some(0.0));
        assert_eq!(ChangeHistory::default().change_rate(), None);
    }

    #[test]
    fn intervals_follow_the_rate_within_their_bounds() {
        let p = policy();
        assert_eq!(p.interval(&ChangeHistory::default()), DAY * 7);
        assert_eq!(p.interval(&history(10, 0, DAY)), DAY * 90);
        // A page that changed at every daily visit is due at the floor.
        assert_eq!(p.interval(&history(10, 10, DAY)), DAY);
        // One change in ten weekly visits: about 1 / (−ln(9.5/10.5)/7 d).
        let weekly = p.interval(&history(10, 1, DAY * 7));
        let expect = 7.0 / -(9.5f64 / 10.5).ln();
        assert!(
            (weekly.as_secs_f64() / DAY.as_secs_f64() - expect).abs() < 1e-6,
            "{weekly:?}"
        );
        // Rarer changes mean longer intervals.
        assert!(p.interval(&history(10, 2, DAY * 3)) < p.interval(&history(10, 1, DAY * 3)));
    }

    #[test]
    fn a_changed_footer_is_not_a_change() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        assert!(!changed(&a, &a, Some(1), Some(u64::MAX), 3), "same bytes");
        assert!(
            !changed(&a, &b, Some(0b1011), Some(0b0011), 3),
            "1 bit apart"
        );
        assert!(changed(&a, &b, Some(0), Some(0b1111), 3), "4 bits apart");
        assert!(
            changed(&a, &b, None, None, 3),
            "no simhash: the digest decides"
        );
    }
}

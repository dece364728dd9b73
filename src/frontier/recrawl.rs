//! When a fetched URL should be fetched again: the refresh scheduler.
//!
//! A refetched URL is due again after [`RecrawlPolicy::next_interval`],
//! computed from its own change history. The aim is the freshness of the
//! whole store for a fixed fetch capacity: the share of stored pages that
//! still equal the live page, averaged over time.
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
//! 0.5 terms, stays finite when every visit saw a change (`X = n`). For
//! irregular intervals `I` is the mean interval (the maximum-likelihood
//! form for irregular visits is a possible refinement).
//!
//! **Interval: freshness-optimal under a fixed budget.** A page changing
//! as a Poisson process of rate `λ`, refreshed every `I`, is fresh on
//! average `F = (1 − e^{−λI}) / (λI)` of the time. Maximising `Σ F` over
//! all pages for a fixed number of fetches per unit time (Lagrange; Cho &
//! Garcia-Molina, "Effective page refresh policies for Web crawlers",
//! TODS 2003) gives, with `t = λI` the expected changes per interval,
//!
//! ```text
//! h(t) = 1 − (1 + t)·e^{−t} = λ·μ,     I = t / λ
//! ```
//!
//! for one multiplier `μ` (a time) common to all pages. `h` rises from 0
//! to 1, and `h(t) ≈ t²/2` for small `t`, so slow pages get
//! `I ≈ √(2μ/λ)`: the interval grows like `1/√λ`, not like `1/λ` — a page
//! that changes rarely is still looked at now and then, because when it
//! does change, it stays stale until the next visit.
//!
//! **Monotone.** The optimum itself is not monotone in `λ`: `I(λ)` falls to
//! a minimum at `t* ≈ 1.793` (the root of `eᵗ = 1 + t + t²`) and then
//! rises, and pages changing faster than `1/μ` get no refresh at all —
//! they are stale almost always, so fetches are "better spent" elsewhere.
//! A crawler must not abandon a news front page, so beyond the minimum
//! (`λ ≥ h(t*)/μ`) the interval stays at `I_min = t*·μ / h(t*)`: the
//! fastest pages are refreshed most often, and no more often than that.
//!
//! **The multiplier.** `μ` belongs to the budget, which this module does
//! not see; it comes from `default_interval` `D`, read as the interval at
//! which the fetch capacity would refetch every page alike (pages ÷
//! fetches per unit time). It is fixed so that a page changing once per
//! `D` is refetched every `D/2`: `t = ½` at `λ = 1/D`, so
//! `μ = h(½)·D ≈ 0.090·D`, which puts `I_min ≈ 0.30·D` (reached from about
//! six changes per `D`). The first form, `t = 1` at `λ = 1/D`
//! (`μ = h(1)·D`), asked for only two thirds of the capacity in
//! `benches/freshness.rs`, and capacity left idle is freshness lost: it
//! came out below uniform refresh (0.594 against 0.637). Asking for more
//! than the capacity costs little freshness: the due queue is served
//! earliest-due first, so pages come due a common delay late and keep
//! their order. In the bench freshness was flat (0.645–0.646) for `t`
//! from 0.3 to 0.7 at `λ = 1/D`, while the mean delay fell from 81 to 15
//! hours; at `t = 0.8` it spent 93% of the budget and fell to 0.639.
//! `t = ½` keeps a margin for webs slower than the bench's, at the price
//! of a queue running about two days late when `D` is a week.
//!
//! **Never seen to change.** With `X = 0` the estimator says `λ̂ = 0`, and
//! the optimum would send the page away for good; pages changing monthly
//! look unchanged to a few weekly visits. Taking it literally
//! (`max_interval` under the growth cap) fell below uniform in the bench
//! (0.633). Instead such a page counts half a change — the 0.5 correction
//! the estimator already applies at `X = n` — so
//! `λ̂ = ln(1 + 1/(2n)) / I ≈ 1/(2·span)`: its interval grows like the
//! square root of the time it has stayed unchanged. An unchanged history
//! never brings a page sooner than the interval it was on.
//!
//! **Growth cap.** The interval at most doubles from one visit to the
//! next, so one lucky observation (or a first compared visit after a long
//! gap) does not send a page away for months. Everything is finally
//! clamped to `[min_interval, max_interval]`; a URL without history waits
//! `default_interval`.

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
    /// For a URL with no history yet; also sets the scheduler's budget
    /// (see the module documentation): the interval at which the fetch
    /// capacity would refetch every page alike.
    pub default_interval: Duration,
}

/// `t*`, where the optimal interval `t·μ / h(t)` is shortest: the root of
/// `eᵗ = 1 + t + t²`.
const T_STAR: f64 = 1.793_282_132_900_761;

/// `h(t*)`.
const H_T_STAR: f64 = 0.535_161_309_975_783_5;

/// Changes per interval of a page that changes once per `default_interval`
/// (which fixes `μ`).
const T_DEFAULT: f64 = 0.5;

/// How much the interval may grow from one visit to the next.
const MAX_GROWTH: f64 = 2.0;

/// Below this `λ·μ`, `h⁻¹(y) = √(2y)` to double precision (and `y` is
/// near underflow).
const SMALL_Y: f64 = 1e-200;

impl RecrawlPolicy {
    /// How long after this visit the URL is due again, given its history
    /// (after recording this visit) and the interval it was on (`None` on
    /// its first fetch).
    pub fn next_interval(&self, history: &ChangeHistory, previous: Option<Duration>) -> Duration {
        let min = self.min_interval;
        // A misconfigured max below min must not panic in `clamp`.
        let max = self.max_interval.max(min);
        let fallback = self.default_interval.clamp(min, max);
        if history.visits == 0 || history.span.is_zero() {
            return fallback;
        }
        let never_changed = history.changes == 0;
        let rate = if never_changed {
            // Half a change, as the estimator's own 0.5 correction at X = n.
            let n = f64::from(history.visits);
            (0.5 / n).ln_1p() / (history.span.as_secs_f64() / n)
        } else {
            history.change_rate().unwrap_or(0.0)
        };
        let mut secs = if rate > 0.0 {
            self.optimal_secs(rate)
        } else {
            f64::INFINITY
        };
        if let Some(previous) = previous {
            let previous = previous.as_secs_f64();
            secs = secs.min(MAX_GROWTH * previous);
            if never_changed {
                secs = secs.max(previous);
            }
        }
        secs_within(secs, min, max).unwrap_or(fallback)
    }

    /// `μ`, in seconds: `h(T_DEFAULT)·default_interval`.
    fn multiplier(&self) -> f64 {
        h(T_DEFAULT) * self.default_interval.as_secs_f64()
    }

    /// The freshness-optimal interval for a page changing `rate` times a
    /// second, made monotone, before the cap and the clamp; in seconds.
    fn optimal_secs(&self, rate: f64) -> f64 {
        let mu = self.multiplier();
        let y = rate * mu;
        if y.is_nan() {
            return f64::NAN;
        }
        if y >= H_T_STAR {
            return T_STAR * mu / H_T_STAR;
        }
        if y < SMALL_Y {
            // h(t) ≈ t²/2; t/λ would lose y to underflow, √(2μ/λ) does not.
            return (2.0 * mu / rate).sqrt();
        }
        h_inverse(y) / rate
    }
}

/// `secs` as a duration within `[min, max]` (`min ≤ max`); `None` for NaN.
fn secs_within(secs: f64, min: Duration, max: Duration) -> Option<Duration> {
    if secs.is_nan() {
        return None;
    }
    if secs <= min.as_secs_f64() {
        return Some(min);
    }
    if secs >= max.as_secs_f64() {
        return Some(max);
    }
    Some(Duration::try_from_secs_f64(secs).map_or(max, |d| d.clamp(min, max)))
}

/// `h(t) = 1 − (1 + t)·e^{−t}`, the marginal freshness of one more fetch
/// times `λ`: 0 at 0, increasing, 1 at infinity.
fn h(t: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    if t <= 0.0 {
        return 0.0;
    }
    if t < 0.1 {
        // Σ_{k≥2} (−1)^k (k−1) t^k / k!, without the cancellation of the
        // closed form near 0.
        let mut term = t; // t^k / k!, k = 1
        let mut sum = 0.0;
        for k in 2..16u32 {
            term *= t / f64::from(k);
            let signed = if k % 2 == 0 { term } else { -term };
            sum += f64::from(k - 1) * signed;
        }
        return sum;
    }
    if t > 750.0 {
        return 1.0;
    }
    -(-t).exp_m1() - t * (-t).exp()
}

/// The `t > 0` with `h(t) = y`: 0 for `y ≤ 0`, infinite for `y ≥ 1`.
/// Newton steps (`h'(t) = t·e^{−t}`) kept inside a bisection bracket.
fn h_inverse(y: f64) -> f64 {
    if y.is_nan() {
        return f64::NAN;
    }
    if y <= 0.0 {
        return 0.0;
    }
    if y >= 1.0 {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while h(hi) < y && hi < 1024.0 {
        lo = hi;
        hi *= 2.0;
    }
    // h(t) < t²/2, so √(2y) is below the root: a good start for small y.
    let mut t = (2.0 * y).sqrt().clamp(lo, hi);
    for _ in 0..200 {
        let f = h(t) - y;
        if f == 0.0 {
            return t;
        }
        if f > 0.0 {
            hi = t;
        } else {
            lo = t;
        }
        let slope = t * (-t).exp();
        let mut next = t - f / slope;
        if !(next > lo && next < hi) {
            next = 0.5 * (lo + hi);
        }
        if (next - t).abs() <= 4.0 * f64::EPSILON * t || hi - lo <= f64::EPSILON * hi {
            return next;
        }
        t = next;
    }
    t
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

    /// The monotone curve's floor, `I_min`, for `p`, in seconds.
    fn shortest(p: &RecrawlPolicy) -> f64 {
        T_STAR * p.multiplier() / H_T_STAR
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
    fn h_and_its_inverse_round_trip() {
        assert_eq!(h(0.0), 0.0);
        assert!((h(1.0) - (1.0 - 2.0 / std::f64::consts::E)).abs() < 1e-15);
        // t* is where eᵗ = 1 + t + t², and H_T_STAR is h there.
        assert!((T_STAR.exp() - (1.0 + T_STAR + T_STAR * T_STAR)).abs() < 1e-13);
        assert!((h(T_STAR) - H_T_STAR).abs() < 1e-15);
        // The series (below 0.1) and the closed form agree where they meet.
        let closed = |t: f64| -(-t).exp_m1() - t * (-t).exp();
        assert!((h(0.099_999_999) / closed(0.099_999_999) - 1.0).abs() < 1e-12);
        let mut last = 0.0;
        for t in [
            1e-150, 1e-9, 1e-4, 0.05, 0.099, 0.1, 0.5, 1.0, T_STAR, 3.0, 10.0,
        ] {
            let y = h(t);
            assert!(y > last, "h increases: h({t}) = {y}");
            last = y;
            let back = h_inverse(y);
            assert!((back / t - 1.0).abs() < 1e-9, "{t} → {y} → {back}");
        }
        assert_eq!(h_inverse(0.0), 0.0);
        assert_eq!(h_inverse(-1.0), 0.0);
        assert_eq!(h_inverse(1.0), f64::INFINITY);
        assert!(h_inverse(f64::NAN).is_nan());
        assert!(h_inverse(1.0 - 1e-12).is_finite());
    }

    #[test]
    fn a_page_changing_once_per_default_interval_is_due_twice_as_often() {
        let p = policy();
        let d = p.default_interval.as_secs_f64();
        assert!((p.multiplier() / d - 0.090_204_010_431_049_86).abs() < 1e-15);
        let secs = p.optimal_secs(1.0 / d);
        assert!((secs / d - 0.5).abs() < 1e-12, "{}", secs / d);
    }

    #[test]
    fn slow_pages_follow_the_square_root_law() {
        let p = policy();
        let (d, mu) = (p.default_interval.as_secs_f64(), p.multiplier());
        for every in [100.0, 1e4, 1e8, 1e250] {
            let rate = 1.0 / (every * d);
            let secs = p.optimal_secs(rate);
            let law = (2.0 * mu / rate).sqrt();
            // The next term: t ≈ s·(1 + s/3) with s = √(2λμ).
            let s = (2.0 * rate * mu).sqrt();
            assert!(
                (secs / law - 1.0).abs() <= s,
                "once per {every} D: {secs} vs {law}"
            );
        }
        // A quarter of the rate, twice the interval (not four times).
        let rate = 1.0 / (1e4 * d);
        let ratio = p.optimal_secs(rate / 4.0) / p.optimal_secs(rate);
        assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    }

    #[test]
    fn fast_pages_keep_the_shortest_interval() {
        let p = policy();
        let d = p.default_interval.as_secs_f64();
        let floor = shortest(&p);
        assert!((floor / d - 0.302_266_320_839_440_8).abs() < 1e-12);
        // The curve meets the floor where it turns.
        let turn = H_T_STAR / p.multiplier();
        assert!((p.optimal_secs(turn * (1.0 - 1e-9)) / floor - 1.0).abs() < 1e-6);
        for k in [1.0, 2.0, 10.0, 1e3, 1e9, f64::INFINITY] {
            assert_eq!(p.optimal_secs(turn * k), floor, "{k} × the turn");
        }
        // Never longer for a faster page, never shorter than the floor:
        // rates from once per 10⁴ D to 10⁴ times per D.
        let mut last = f64::INFINITY;
        for i in -400..=400 {
            let rate = 10f64.powf(f64::from(i) / 100.0) / d;
            let secs = p.optimal_secs(rate);
            assert!(secs <= last * (1.0 + 1e-12), "rate {rate}: {secs} > {last}");
            assert!(secs >= floor * (1.0 - 1e-12), "rate {rate}: {secs}");
            last = secs;
        }
        // A page that changed at every daily visit is due at the floor.
        assert_eq!(
            p.next_interval(&history(10, 10, DAY), Some(DAY * 7)),
            Duration::from_secs_f64(floor)
        );
    }

    #[test]
    fn pages_seen_changing_come_back_sooner_than_pages_never_seen_changing() {
        let p = policy();
        for visits in [1, 3, 10, 100] {
            for every in [DAY, DAY * 7, DAY * 30] {
                let always = p.next_interval(&history(visits, visits, every), None);
                let half = p.next_interval(&history(visits, visits.div_ceil(2), every), None);
                let never = p.next_interval(&history(visits, 0, every), None);
                assert!(
                    always <= half && half < never,
                    "{visits} × {every:?}: {always:?} {half:?} {never:?}"
                );
                assert!(always < never);
            }
        }
        // More changes in the same visits: never a longer interval.
        let mut last = Duration::MAX;
        for changes in 0..=10 {
            let i = p.next_interval(&history(10, changes, DAY * 7), None);
            assert!(i <= last, "{changes} changes: {i:?} > {last:?}");
            last = i;
        }
    }

    #[test]
    fn the_interval_at_most_doubles_per_visit() {
        let p = policy();
        for changes in [0, 1] {
            // A hundred weekly visits with at most one change: a long
            // interval, but from a 3-day interval only 6 days.
            let h = history(100, changes, DAY * 7);
            assert!(p.next_interval(&h, None) > DAY * 25, "{changes}");
            assert_eq!(p.next_interval(&h, Some(DAY * 3)), DAY * 6);
        }
        // Shrinking is not capped.
        assert_eq!(
            p.next_interval(&history(10, 10, DAY), Some(DAY * 60)),
            Duration::from_secs_f64(shortest(&p))
        );
        // An unchanged page never comes back sooner than it was due:
        // one unchanged week keeps it weekly.
        let once = history(1, 0, DAY * 7);
        assert!(p.next_interval(&once, None) < DAY * 7);
        assert_eq!(p.next_interval(&once, Some(DAY * 7)), DAY * 7);
    }

    #[test]
    fn intervals_stay_within_their_bounds() {
        let p = RecrawlPolicy {
            min_interval: DAY * 3,
            max_interval: DAY * 20,
            default_interval: DAY * 7,
        };
        assert_eq!(p.next_interval(&ChangeHistory::default(), None), DAY * 7);
        assert_eq!(
            p.next_interval(&ChangeHistory::default(), Some(DAY)),
            DAY * 7
        );
        let no_span = ChangeHistory {
            visits: 3,
            changes: 1,
            span: Duration::ZERO,
        };
        assert_eq!(p.next_interval(&no_span, None), DAY * 7);
        // The floor (2.1 days) is below min_interval.
        assert_eq!(p.next_interval(&history(10, 10, DAY), None), DAY * 3);
        assert_eq!(p.next_interval(&history(1000, 0, DAY * 7), None), DAY * 20);
        assert_eq!(
            p.next_interval(&history(1000, 0, DAY * 7), Some(DAY * 100)),
            DAY * 20
        );
        let far = RecrawlPolicy {
            default_interval: DAY * 100,
            ..p
        };
        assert_eq!(far.next_interval(&ChangeHistory::default(), None), DAY * 20);
        // A max below min is a misconfiguration, not a panic: min wins.
        let crossed = RecrawlPolicy {
            min_interval: DAY * 10,
            max_interval: DAY,
            default_interval: DAY,
        };
        for h in [
            ChangeHistory::default(),
            history(5, 5, DAY),
            history(5, 0, DAY),
        ] {
            assert_eq!(crossed.next_interval(&h, Some(DAY)), DAY * 10);
        }
    }

    #[test]
    fn extreme_histories_give_finite_intervals_in_bounds() {
        let policies = [
            policy(),
            RecrawlPolicy {
                min_interval: Duration::ZERO,
                max_interval: Duration::MAX,
                default_interval: Duration::ZERO,
            },
            RecrawlPolicy {
                min_interval: Duration::ZERO,
                max_interval: Duration::MAX,
                default_interval: Duration::MAX,
            },
            RecrawlPolicy {
                min_interval: Duration::from_nanos(1),
                max_interval: Duration::from_nanos(2),
                default_interval: Duration::from_secs(1),
            },
        ];
        let spans = [
            Duration::from_nanos(1),
            Duration::from_secs(1),
            DAY,
            DAY * 36_500,
            Duration::MAX,
        ];
        let previous = [
            None,
            Some(Duration::ZERO),
            Some(Duration::from_nanos(1)),
            Some(DAY),
            Some(Duration::MAX),
        ];
        for p in policies {
            for visits in [1, 2, 1000, u32::MAX] {
                for changes in [0, 1, visits / 2, visits] {
                    for span in spans {
                        for prev in previous {
                            let h = ChangeHistory {
                                visits,
                                changes,
                                span,
                            };
                            let i = p.next_interval(&h, prev);
                            assert!(
                                i >= p.min_interval && i <= p.max_interval,
                                "{p:?} {h:?} {prev:?}: {i:?}"
                            );
                        }
                    }
                }
            }
        }
        // The arithmetic underneath: positive, finite unless the rate is
        // so small that even √(2μ/λ) overflows (then max_interval).
        let p = policy();
        for rate in [1e-300, 1e-30, 1.0, 1e30, f64::MAX, f64::INFINITY] {
            let secs = p.optimal_secs(rate);
            assert!(secs.is_finite() && secs > 0.0, "{rate}: {secs}");
        }
        assert_eq!(p.optimal_secs(f64::MIN_POSITIVE), f64::INFINITY);
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

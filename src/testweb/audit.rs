//! The server-side politeness audit.
//!
//! Judges the crawler from the outside, by what the server saw: per host,
//! how many requests overlapped, and the smallest gap between a response's
//! end and the start of a later request. A request must not start before
//! `end + min_delay` of any request that ended before it started.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// Host name from the Host header (without port).
    pub host: String,
    /// Request path and query.
    pub path: String,
    /// Status sent.
    pub status: u16,
    /// When the request reached the handler.
    pub start: Instant,
    /// When the response was complete.
    pub end: Instant,
}

/// A broken promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The host it happened to.
    pub host: String,
    /// What happened.
    pub what: String,
}

/// The audit's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditReport {
    /// Hosts that received requests.
    pub hosts: usize,
    /// Requests seen.
    pub requests: usize,
    /// Largest number of overlapping requests at one host.
    pub max_concurrent: u32,
    /// Smallest end-to-next-start gap seen at any host, in milliseconds.
    pub min_gap_ms: Option<f64>,
    /// Every violation of the limits audited against.
    pub violations: Vec<Violation>,
}

/// Audits `records` against at most `max_in_flight` concurrent requests per
/// host and `min_delay` from any completion to a later start.
pub fn audit(records: &[RequestRecord], max_in_flight: u32, min_delay: Duration) -> AuditReport {
    let mut by_host: BTreeMap<&str, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records {
        by_host.entry(&r.host).or_default().push(r);
    }
    let mut report = AuditReport {
        hosts: by_host.len(),
        requests: records.len(),
        ..AuditReport::default()
    };
    for (host, mut reqs) in by_host {
        reqs.sort_by_key(|r| r.start);
        let concurrent = max_overlap(&reqs);
        report.max_concurrent = report.max_concurrent.max(concurrent);
        if concurrent > max_in_flight {
            report.violations.push(Violation {
                host: host.to_owned(),
                what: format!("{concurrent} requests in flight, limit {max_in_flight}"),
            });
        }
        for (k, r) in reqs.iter().enumerate() {
            let last_end = reqs[..k]
                .iter()
                .map(|p| p.end)
                .filter(|&e| e <= r.start)
                .max();
            let Some(last_end) = last_end else { continue };
            let gap = r.start - last_end;
            let gap_ms = gap.as_secs_f64() * 1000.0;
            report.min_gap_ms = Some(report.min_gap_ms.map_or(gap_ms, |m: f64| m.min(gap_ms)));
            if gap < min_delay {
                report.violations.push(Violation {
                    host: host.to_owned(),
                    what: format!(
                        "{} started {gap_ms:.3} ms after a response ended (delay {} ms)",
                        r.path,
                        min_delay.as_millis()
                    ),
                });
            }
        }
    }
    report
}

/// The most requests in flight at once (an end at the same instant as a
/// start does not overlap it).
fn max_overlap(reqs: &[&RequestRecord]) -> u32 {
    let mut events: Vec<(Instant, i32)> = Vec::with_capacity(reqs.len() * 2);
    for r in reqs {
        events.push((r.start, 1));
        events.push((r.end, -1));
    }
    events.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        max = max.max(now);
    }
    max as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(host: &str, t0: Instant, start_ms: u64, end_ms: u64) -> RequestRecord {
        RequestRecord {
            host: host.into(),
            path: format!("/{start_ms}"),
            status: 200,
            start: t0 + Duration::from_millis(start_ms),
            end: t0 + Duration::from_millis(end_ms),
        }
    }

    #[test]
    fn clean_log_passes() {
        let t0 = Instant::now();
        let log = [
            rec("a", t0, 0, 10),
            rec("a", t0, 110, 120),
            rec("b", t0, 5, 15),
        ];
        let r = audit(&log, 1, Duration::from_millis(100));
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!((r.hosts, r.requests, r.max_concurrent), (2, 3, 1));
        assert_eq!(r.min_gap_ms, Some(100.0));
    }

    #[test]
    fn overlap_and_short_gap_are_violations() {
        let t0 = Instant::now();
        let log = [
            rec("a", t0, 0, 50),
            rec("a", t0, 20, 60),
            rec("a", t0, 100, 110),
        ];
        let r = audit(&log, 1, Duration::from_millis(100));
        assert_eq!(r.max_concurrent, 2);
        // One overlap, and /100 starts 40 ms after /20 ended.
        assert_eq!(r.violations.len(), 2, "{:?}", r.violations);
        let ok = audit(&log[..2], 2, Duration::from_millis(0));
        assert!(ok.violations.is_empty());
    }
}

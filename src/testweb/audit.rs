//! The server-side politeness audit.
//!
//! Judges the crawler from the outside, by what the server saw: per host,
//! how many requests overlapped, and the gaps between a response's end and
//! the start of a later request. A request must not start before
//! `end + max(min_gap, factor × server time)` of any request that ended
//! before it started (the server's time for a request is at most the
//! crawler's response time, so the check is never stricter than the
//! policy), nor before a Retry-After the server sent.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// Host name from the Host header (without port).
    pub host: String,
    /// Request path and query.
    pub path: String,
    /// Status sent.
    pub status: u16,
    /// HTTP version of the request, e.g. `HTTP/1.1`, `HTTP/2.0`.
    pub version: String,
    /// When the request reached the handler.
    pub start: Instant,
    /// When the response was complete.
    pub end: Instant,
    /// The earliest next request the server asked for (Retry-After).
    pub not_before: Option<Instant>,
    /// The request's `If-None-Match` (several fields joined with `, `),
    /// so a test can tell a conditional refetch from a plain one.
    pub if_none_match: Option<String>,
    /// The request's `If-Modified-Since`.
    pub if_modified_since: Option<String>,
    /// The ETag the response carried (with a 200 or a 304), which names
    /// the version served.
    pub etag: Option<String>,
    /// The address the request came from (which node, in a cluster).
    pub client: Option<std::net::IpAddr>,
    /// The client had stopped waiting before the server finished: the
    /// request still counts as in flight until `end`, as it would at a
    /// real server (which does not learn that a client gave up).
    pub abandoned: bool,
}

/// What the audit expects of one host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostRule {
    /// Smallest completion-to-start gap (min_delay, or Crawl-delay).
    pub min_gap: Duration,
    /// Gap as a multiple of the previous request's time at the server.
    pub factor: f64,
}

/// A broken promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The host it happened to.
    pub host: String,
    /// What happened.
    pub what: String,
}

/// The audit's result.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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

/// Page requests by URL (`http://host:port/path`), with their counts, as
/// a crawl is judged by: robots.txt and sitemap files are left out, and
/// so are refusals with Retry-After (asked again later by design).
pub fn page_fetches(records: &[RequestRecord], port: u16) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let pages = records.iter().filter(|r| {
        super::generator::request_kind(&r.path) == super::RequestKind::Page
            && r.not_before.is_none()
    });
    for r in pages {
        *out.entry(format!("http://{}:{port}{}", r.host, r.path))
            .or_default() += 1;
    }
    out
}

/// What a server's log says of a crawl, as `trawl testweb --report-out`
/// writes it: how a crawl of a web served elsewhere (a container) is
/// judged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebReport {
    /// The politeness audit.
    pub audit: AuditReport,
    /// Page URL → times fetched ([`page_fetches`]).
    pub pages: BTreeMap<String, usize>,
}

/// Audits `records` against at most `max_in_flight` concurrent requests per
/// host and `min_delay` from any completion to a later start.
pub fn audit(records: &[RequestRecord], max_in_flight: u32, min_delay: Duration) -> AuditReport {
    let rule = HostRule {
        min_gap: min_delay,
        factor: 0.0,
    };
    audit_with(records, max_in_flight, |_| rule)
}

/// Audits `records` with a rule per host.
pub fn audit_with(
    records: &[RequestRecord],
    max_in_flight: u32,
    rule_of: impl Fn(&str) -> HostRule,
) -> AuditReport {
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
        let rule = rule_of(host);
        for (k, r) in reqs.iter().enumerate() {
            for p in reqs[..k].iter().filter(|p| p.end <= r.start) {
                check_gap(&mut report, host, rule, p, r);
            }
        }
    }
    report
}

/// Checks request `r` against the earlier, completed request `p`.
fn check_gap(
    report: &mut AuditReport,
    host: &str,
    rule: HostRule,
    p: &RequestRecord,
    r: &RequestRecord,
) {
    let gap = r.start - p.end;
    let gap_ms = gap.as_secs_f64() * 1000.0;
    report.min_gap_ms = Some(report.min_gap_ms.map_or(gap_ms, |m: f64| m.min(gap_ms)));
    let owed = rule.min_gap.max((p.end - p.start).mul_f64(rule.factor));
    if gap < owed {
        report.violations.push(Violation {
            host: host.to_owned(),
            what: format!(
                "{} started {gap_ms:.3} ms after {} ended (owed {:.3} ms)",
                r.path,
                p.path,
                owed.as_secs_f64() * 1000.0
            ),
        });
    }
    if p.not_before.is_some_and(|nb| r.start < nb) {
        report.violations.push(Violation {
            host: host.to_owned(),
            what: format!("{} started before the Retry-After of {}", r.path, p.path),
        });
    }
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
            version: "HTTP/1.1".into(),
            start: t0 + Duration::from_millis(start_ms),
            end: t0 + Duration::from_millis(end_ms),
            not_before: None,
            if_none_match: None,
            if_modified_since: None,
            etag: None,
            client: None,
            abandoned: false,
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
        // One overlap, and /100 starts 50 and 40 ms after the two ended.
        assert_eq!(r.violations.len(), 3, "{:?}", r.violations);
        let ok = audit(&log[..2], 2, Duration::from_millis(0));
        assert!(ok.violations.is_empty());
    }

    #[test]
    fn per_host_rules_and_retry_after() {
        let t0 = Instant::now();
        // A 50 ms response owes 500 ms at factor 10; 300 ms is too soon.
        let slow = [rec("s", t0, 0, 50), rec("s", t0, 350, 360)];
        let rule = |_: &str| HostRule {
            min_gap: Duration::from_millis(100),
            factor: 10.0,
        };
        assert_eq!(audit_with(&slow, 1, rule).violations.len(), 1);
        let mut throttled = [rec("t", t0, 0, 10), rec("t", t0, 500, 510)];
        throttled[0].not_before = Some(t0 + Duration::from_millis(1010));
        let report = audit(&throttled, 1, Duration::from_millis(100));
        assert_eq!(report.violations.len(), 1, "{:?}", report.violations);
        assert!(report.violations[0].what.contains("Retry-After"));
    }
}

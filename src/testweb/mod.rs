//! The synthetic web: trawl's own internet for tests, demo and benchmarks.
//!
//! - [`generator`]: deterministic hosts, pages, links, robots.txt, sitemaps
//!   and the ground truth a correct crawl must match;
//! - [`dupes`]: mirrors, near-duplicates, session-ID variants, calendars,
//!   repeating paths and a link farm;
//! - [`changing`]: `changing.test`, pages that change, vanish, move or
//!   become disallowed as time passes, answering conditional requests, and
//!   the ground truth of what it served when (for the refresh loop);
//! - [`graph`]: a link graph (read from a file or generated with the web's
//!   host structure) served as a web of hosts, PageRank, and the share of
//!   it a crawl order reaches first (issue #49's measurement);
//! - [`hostile`]: `hostile.test`, the server behaviours a crawler must
//!   survive (SSRF bait, redirect loops, stalls, endless bodies, resets);
//! - [`profile`]: each host's behaviour (robots.txt variants, throttling,
//!   slowness, sitemaps);
//! - [`server`]: one loopback HTTP server for every host, logging each
//!   request's start and end;
//! - [`audit`]: the politeness audit over that log;
//! - [`tls`]: a test CA and the certificates of the HTTPS listener.

pub mod audit;
pub mod changing;
pub mod dupes;
pub mod generator;
pub mod graph;
pub mod hostile;
pub mod profile;
pub mod raw;
pub mod server;
pub mod tls;

pub use audit::{
    audit, audit_with, page_fetches, AuditReport, HostRule, RequestRecord, Violation, WebReport,
};
pub use generator::{request_kind, RequestKind, SyntheticWeb, Target, WebSpec};
pub use server::{RequestLog, ServerOptions, TestWebServer};

/// The DNS override pattern that sends every synthetic host to loopback.
pub const DNS_PATTERN: &str = "*.test";

/// The config layer a crawl of the synthetic web needs, into `data_dir`
/// with `min_delay_ms` between requests to a host, with `extra` (TOML)
/// merged on top: the `*.test` names on loopback (allowed past the SSRF
/// guard), no depth limit (the web is finite, and its ground truth must not
/// depend on discovery order), the importance ordering (so every crawl of
/// the test suite runs its rewinds and ranks; the default is arrival
/// order), and backoffs in milliseconds rather than the
/// production minutes, since some hosts fail on purpose (one host in twenty
/// never serves its robots.txt and is given up after a second instead of
/// 30 days; parking lasts 2 s instead of an hour).
pub fn config_layer(data_dir: &std::path::Path, min_delay_ms: u64, extra: &str) -> String {
    let base = format!(
        r#"
[crawl]
max_depth = 0
[frontier]
ordering = "importance"
[politeness]
min_delay = "{min_delay_ms}ms"
backoff_base = "20ms"
park_duration = "2s"
[robots]
retry_base = "20ms"
retry_max = "100ms"
give_up_after = "1s"
[dns.overrides]
"{DNS_PATTERN}" = "127.0.0.1"
[fetch]
allow_addresses = ["127.0.0.0/8"]
[storage]
data_dir = {data:?}
"#,
        data = data_dir.display().to_string()
    );
    let mut table: toml::Table = base.parse().expect("static layer is valid TOML");
    let extra: toml::Table = extra.parse().expect("extra layer is valid TOML");
    crate::config::merge(&mut table, extra);
    toml::to_string(&table).expect("a table serialises")
}

//! The synthetic web: trawl's own internet for tests, demo and benchmarks.
//!
//! - [`generator`]: deterministic hosts, pages, links, robots.txt, sitemaps
//!   and the ground truth a correct crawl must match;
//! - [`profile`]: each host's behaviour (robots.txt variants, throttling,
//!   slowness, sitemaps);
//! - [`server`]: one loopback HTTP server for every host, logging each
//!   request's start and end;
//! - [`audit`]: the politeness audit over that log.

pub mod audit;
pub mod generator;
pub mod profile;
pub mod server;

pub use audit::{audit, audit_with, AuditReport, HostRule, RequestRecord, Violation};
pub use generator::{request_kind, RequestKind, SyntheticWeb, WebSpec};
pub use server::{RequestLog, TestWebServer};

/// The DNS override pattern that sends every synthetic host to loopback.
pub const DNS_PATTERN: &str = "*.test";

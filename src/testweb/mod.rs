//! The synthetic web: trawl's own internet for tests, demo and benchmarks.
//!
//! - [`generator`]: deterministic hosts, pages, links, robots.txt and the
//!   ground truth a correct crawl must match;
//! - [`server`]: one loopback HTTP server for every host, logging each
//!   request's start and end;
//! - [`audit`]: the politeness audit over that log.

pub mod audit;
pub mod generator;
pub mod server;

pub use audit::{audit, AuditReport, RequestRecord, Violation};
pub use generator::{SyntheticWeb, WebSpec};
pub use server::{RequestLog, TestWebServer};

/// The DNS override pattern that sends every synthetic host to loopback.
pub const DNS_PATTERN: &str = "*.test";

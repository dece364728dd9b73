//! trawl: a polite, durable web crawler on actix actors.
//!
//! # Layout
//!
//! The domain (what a crawler knows) is plain, synchronous code in this
//! crate's modules; the actor layer (who does it, and when) is in
//! [`actors`]. The domain never imports the actors; only the edges do
//! (`main.rs` and [`admin`]).
//!
//! - [`archive`]: the archive transaction (dedup verdict, records, event,
//!   index update)
//! - [`durable`]: group commit of the archive's files (`sync_writes`)
//! - [`clock`]: time as a parameter (the injected clock)
//! - [`error`]: failures that cross pipeline stages
//! - [`config`]: typed configuration, defaults embedded from `config/trawl.toml`
//! - [`validate`]: the config checks that need domain code
//! - [`url`]: normalisation, fingerprints, partition routing
//! - [`robots`]: robots.txt policy (RFC 9309)
//! - [`politeness`]: the per-host delay arithmetic
//! - [`frontier`]: priorities, entry kinds, the choice between queues, the
//!   host state machine ([`frontier::host`]), what a response means
//!   ([`frontier::response`]), a URL's life ([`frontier::lifecycle`]) and
//!   its refresh interval ([`frontier::recrawl`]), a partition's
//!   activations ([`frontier::activation`])
//! - [`scheduler`]: the node's decisions over its partitions: what it
//!   holds, the hold rule, where batches go, outbox delivery, idleness
//! - [`cluster`]: membership by gossip, partition assignment, the lease
//!   over a partition's checkpoint chain, the peer link and the bridge's
//!   wire protocol
//! - [`sitemap`]: sitemap parsing
//! - [`store`]: the RocksDB partition store and its atomic admit
//! - [`fetch`]: the HTTP client, resolver and limits
//! - [`parse`]: HTML links, canonical, meta robots
//! - [`warc`]: the WARC 1.1 writer
//! - [`events`]: JSON-lines output events
//! - [`upload`]: uploading closed WARC files to object storage
//! - [`metrics`]: every Prometheus metric
//! - [`admin`]: the admin HTTP API
//! - [`testweb`]: the synthetic web for tests, demo and benchmarks

pub mod admin;
pub mod archive;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod control;
pub mod dedup;
pub mod durable;
pub mod error;
pub mod events;
pub mod fetch;
pub mod frontier;
pub mod metrics;
pub mod parse;
pub mod politeness;
pub mod report;
pub mod robots;
pub mod scheduler;
pub mod sitemap;
pub mod store;
pub mod testweb;
pub mod upload;
pub mod url;
pub mod validate;
pub mod warc;

#[path = "../actors/mod.rs"]
pub mod actors;

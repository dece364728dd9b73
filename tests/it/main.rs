//! trawl's integration tests, as one test binary: each module below was a
//! binary of its own, and each linked RocksDB (tens of seconds a link on
//! these machines). One module per subject; what they share is in
//! [`common`]. Run one subject with a filter on its module path:
//!
//! ```text
//! cargo test --release --test it cluster_hosts::
//! ```

mod common;

mod admin;
mod admin_control;
mod admin_fuzz;
mod admin_hosts;
mod admin_tls;
mod bridge;
mod cdxj;
mod cli;
mod cluster;
mod cluster_failover;
mod cluster_hosts;
mod cluster_liveness;
mod cluster_state;
mod compose;
mod crawl;
mod dedup;
mod depth;
mod durability;
mod frontier;
mod fuzz_corpus;
mod hostile;
mod https;
mod logs;
mod monitoring;
mod per_ip;
mod previous;
mod provenance;
mod proxy;
mod refresh;
mod report;
mod restart;
mod robots_cli;
mod shutdown;
mod simulation;
mod slow;
mod supervision;
mod upload;

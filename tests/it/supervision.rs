//! A partition actor that fails is restarted by the node over the same
//! store: its queue survives, its hosts go and come back, and the crawl
//! still fetches the whole ground truth.

use std::sync::Arc;

use crate::common::*;
use trawl::actors::{CrashHostActor, CrashPartition, GetStatus, Node, Seed, Shutdown, WhenIdle};
use trawl::metrics::Metrics;

const PARTITIONS: u16 = 4;

#[test]
fn failed_partitions_are_restarted_and_lose_no_queued_url() {
    crash_every_partition("");
}

/// As above with most dormant hosts in the store's tier when their
/// partitions fail: the restarted actor's index starts over the same
/// store, its tier emptied (`store/due.rs` tests that), and fills it
/// again from the queue.
#[test]
fn failed_partitions_with_dormant_hosts_in_the_store_are_restarted_and_lose_nothing() {
    crash_every_partition("[frontier]\nmax_active_hosts = 2\ndormant_hosts_in_memory = 1\n");
}

/// Crashes every partition of a crawl of 12 hosts (config `extra`) once
/// its hosts are seeded; the crawl must end whole and polite.
fn crash_every_partition(extra: &str) {
    let (web, server) = start_web(12, 15, 11);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    // A delay long enough that every partition still has work queued when
    // it is made to fail.
    // A restarted partition's hosts wait out `fetch.timeout` first (a
    // request of the failed ones may still be on the wire): keep it short.
    let extra = format!("[fetch]\ntimeout = \"1s\"\n{extra}");
    let config = config_with(data.path(), 30, PARTITIONS, &extra);
    let seeds = web.seeds(port);
    let status = actix_rt::System::new().block_on(async move {
        let node = Node::start(config, Arc::new(Metrics::new())).expect("node starts");
        node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        for id in 0..PARTITIONS {
            node.send(CrashPartition { id }).await.unwrap();
        }
        node.send(WhenIdle).await.unwrap();
        let status = node.send(GetStatus).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        status
    });
    let log = server.log().records();
    server.stop();

    assert_eq!(status.partition_restarts, u64::from(PARTITIONS));
    assert_eq!(status.queued, 0);
    // Nothing lost: every page of the ground truth was fetched (a request
    // in flight when its partition failed may have been fetched twice).
    assert_sites_complete(&log, &web, port);
    let pages = page_requests(&log, port);
    let thrice: Vec<_> = pages.iter().filter(|(_, n)| **n > 2).collect();
    assert!(thrice.is_empty(), "fetched more than twice: {thrice:?}");
    // Politeness held across the restarts: the new hosts waited out any
    // request the failed ones may still have had on the wire.
    let report = audit_log(&web, &log, 30);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn a_host_actor_that_dies_comes_back_from_the_store() {
    let (web, server) = start_web(3, 20, 13);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config_with(data.path(), 30, PARTITIONS, "[fetch]\ntimeout = \"1s\"\n");
    let seeds = web.seeds(port);
    let host = trawl::testweb::SyntheticWeb::host_name(0);
    let (status, crashed) = actix_rt::System::new().block_on(async move {
        let node = Node::start(config, Arc::new(Metrics::new())).expect("node starts");
        node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        // Seeds activate their hosts: the host's actor is live now.
        let crashed = node.send(CrashHostActor { host }).await.unwrap();
        node.send(WhenIdle).await.unwrap();
        let status = node.send(GetStatus).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        (status, crashed)
    });
    let log = server.log().records();
    server.stop();

    assert!(crashed, "the host was active when it was made to fail");
    assert_eq!(status.host_restarts, 1);
    assert_sites_complete(&log, &web, port);
    let report = audit_log(&web, &log, 30);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

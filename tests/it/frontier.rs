//! Hosts are active only when due, at most `[frontier] max_active_hosts`
//! at once: a crawl under a small cap still fetches exactly the ground
//! truth, politely, and never runs more host actors than the cap.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use trawl::actors::{GetStatus, Node, NodeStatus, Seed, Shutdown, WhenIdle};
use trawl::config::Config;
use trawl::frontier::importance::Ordering;
use trawl::metrics::Metrics;

/// Crawls until idle; the node's status just before it stops.
fn crawl_status(config: Config, seeds: Vec<String>) -> NodeStatus {
    crawl_status_with(config, seeds, Arc::new(Metrics::new()))
}

/// [`crawl_status`] with the node's metrics. A crawl that stalls (work
/// queued that nothing starts) fails after three minutes.
fn crawl_status_with(config: Config, seeds: Vec<String>, metrics: Arc<Metrics>) -> NodeStatus {
    actix_rt::System::new().block_on(async move {
        let node = Node::start(config, metrics).expect("node starts");
        node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        tokio::time::timeout(Duration::from_secs(180), node.send(WhenIdle))
            .await
            .expect("the crawl stalled: queued work that never started")
            .unwrap();
        let status = node.send(GetStatus).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        status
    })
}

#[test]
fn a_small_cap_on_active_hosts_holds_and_the_crawl_completes() {
    let metrics = crawl_under_a_cap_of_three("");
    // The test web's config orders by importance: waiting hosts are
    // dormant, and links from other sites move their queued URLs up.
    assert!(
        metrics.urls_credited.get() > 0,
        "no queued URL was credited"
    );
    assert_eq!(metrics.host_slot_yields.get(), 0, "no cycle, no yield");
}

#[test]
fn with_a_host_cycle_hosts_take_turns_for_the_slots_and_the_crawl_completes() {
    let metrics = crawl_under_a_cap_of_three("host_cycle = \"30ms\"\n");
    assert!(
        metrics.host_slot_yields.get() > 0,
        "no host gave its slot up"
    );
}

/// With the 24 hosts in one partition that keeps two dormant hosts of
/// each kind in memory, the others wait in the store's tier and are read
/// back as slots free: the crawl is the same, whole and polite, each page
/// stored once (the checks of [`crawl_under_a_cap_of_three`]), and hosts
/// moved both ways.
#[test]
fn with_a_window_of_two_dormant_hosts_the_rest_wait_in_the_store_and_the_crawl_completes() {
    let metrics =
        crawl_under_a_cap_of_three("dormant_hosts_in_memory = 2\n[storage]\npartitions = 1\n");
    let moved = |to: &str| metrics.due_host_moves.with_label_values(&[to]).get();
    assert!(moved("store") > 0, "no dormant host left memory");
    assert!(moved("memory") > 0, "no dormant host was read back");
}

/// Crawls 24 hosts with at most 3 active (`[frontier]` settings `extra`
/// besides): the cap holds, the crawl fetches exactly the ground truth,
/// politely, each page stored once, and ends with nothing queued. The
/// node's metrics.
fn crawl_under_a_cap_of_three(extra: &str) -> Arc<Metrics> {
    let (web, server) = start_web(24, 12, 5);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let frontier = format!("[frontier]\nmax_active_hosts = 3\n{extra}");
    let config = config_with(data.path(), 5, 8, &frontier);
    assert_eq!(config.frontier.ordering, Ordering::Importance);
    let metrics = Arc::new(Metrics::new());
    let status = crawl_status_with(config.clone(), web.seeds(port), metrics.clone());
    let log = server.log().records();
    server.stop();

    assert_eq!(status.active_hosts_cap, 3);
    assert!(
        (1..=3).contains(&status.active_hosts_peak),
        "peak {} active hosts with a cap of 3",
        status.active_hosts_peak
    );
    assert_eq!(status.queued, 0);
    assert_eq!(
        status.due_hosts, status.refresh_hosts,
        "nothing left waiting but for its next refresh"
    );
    assert!(status.refresh_due.scheduled > 0);
    assert_eq!(status.refresh_due.now, 0);
    let fetched: BTreeSet<String> = page_requests(&log, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
    let report = audit_log(&web, &log, 5);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // Moved, never copied: each page is stored once.
    let mut stored = BTreeSet::new();
    for event in page_events(&config) {
        assert!(
            stored.insert(event.url.clone()),
            "{} stored twice",
            event.url
        );
    }
    metrics
}

/// A single node's crawl ends when its partitions' queues run empty and
/// they say so (`QueueEmptied`), not when a poll finds it: with the poll
/// an hour apart, the crawl still ends, whole, within the deadline. (Were
/// the announcement lost, `WhenIdle` would wait for the hour's poll.)
#[test]
fn a_crawl_ends_when_its_queues_run_empty_not_at_the_next_poll() {
    let (web, server) = start_web(6, 5, 21);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config_with(data.path(), 5, 4, "");
    let seeds = web.seeds(port);
    let status = actix_rt::System::new().block_on(async move {
        let clock = Arc::new(trawl::clock::SystemClock);
        let hour = Duration::from_secs(3600);
        let node = Node::start_with_idle_poll(config, Arc::new(Metrics::new()), clock, hour)
            .expect("node starts");
        node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        tokio::time::timeout(Duration::from_secs(120), node.send(WhenIdle))
            .await
            .expect("the crawl's end was announced, not left to the hourly poll")
            .unwrap();
        let status = node.send(GetStatus).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        status
    });
    let log = server.log().records();
    server.stop();
    assert_eq!(status.queued, 0);
    let fetched: BTreeSet<String> = page_requests(&log, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
}

#[test]
fn a_crawl_keeps_the_partition_count_it_was_created_with_unless_the_config_names_one() {
    let (web, server) = start_web(6, 4, 9);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let created = crawl_status(config_with(data.path(), 5, 5, ""), web.seeds(port));
    assert_eq!(created.partitions.len(), 5);
    let fetched = server.log().len();

    // A config that names no count (the default is another) reopens the
    // crawl with its own five partitions: everything is seen already.
    let unnamed = Config::from_layers(&[(
        "test".into(),
        trawl::testweb::config_layer(data.path(), 5, ""),
    )])
    .unwrap();
    assert!(!unnamed.storage.partitions_given);
    assert_ne!(
        unnamed.storage.partitions, 5,
        "the default is not the crawl's"
    );
    let reopened = crawl_status(unnamed, web.seeds(port));
    assert_eq!(reopened.partitions.len(), 5);
    assert_eq!(reopened.queued, 0);
    assert_eq!(server.log().len(), fetched, "nothing fetched again");

    // A count the config names is the operator's word: a mismatch is
    // refused, not adopted.
    let named = config_with(data.path(), 5, 7, "");
    assert!(named.storage.partitions_given);
    let refused = actix_rt::System::new()
        .block_on(async move { Node::start(named, Arc::new(Metrics::new())).err() });
    let err = refused.expect("a mismatched count is refused").to_string();
    assert!(err.contains("created with 5 partitions"), "{err}");
    server.stop();
}

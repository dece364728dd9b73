//! A full crawl of the synthetic web, checked from the outside: the server
//! saw exactly the ground truth, robots.txt first and obeyed, politeness
//! held, and every event points at its response record in valid WARC files.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use trawl::testweb::generator::RobotsMode;
use trawl::testweb::{audit, SyntheticWeb};

const MIN_DELAY_MS: u64 = 20;

#[test]
fn crawl_of_100_hosts_matches_ground_truth_politely() {
    let (web, server) = start_web(100, 30, 42);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), MIN_DELAY_MS, 64);
    let archive = crawl_in_process(config.clone(), web.seeds(port));
    let log = server.log().records();
    server.stop();

    // Exactly the ground truth, each URL once.
    let truth = web.ground_truth(port);
    let pages = page_requests(&log, port);
    let twice: Vec<_> = pages.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "fetched more than once: {twice:?}");
    let fetched: BTreeSet<String> = pages.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    assert!(
        truth.len() > 2000,
        "the web is big enough to mean something"
    );

    // No disallowed URL was requested, and robots.txt came first per host.
    for r in &log {
        let host = web.host_index(&r.host).expect("only synthetic hosts");
        let private = r.path.starts_with("/private/") && !r.path.starts_with("/private/open-");
        assert!(
            !(private && web.robots_mode(host) != RobotsMode::Missing),
            "disallowed URL requested: {}",
            url_of(r, port)
        );
    }
    for host in 0..100 {
        let name = SyntheticWeb::host_name(host);
        let mut reqs: Vec<_> = log.iter().filter(|r| r.host == name).collect();
        reqs.sort_by_key(|r| r.start);
        assert_eq!(
            reqs[0].path, "/robots.txt",
            "{name} got a page before robots.txt"
        );
        let robots = reqs.iter().filter(|r| r.path == "/robots.txt").count();
        assert_eq!(robots, 1, "{name}: robots.txt fetched {robots} times");
    }

    // The politeness audit, from the server's side.
    let report = audit(&log, 1, Duration::from_millis(MIN_DELAY_MS));
    assert!(
        report.violations.is_empty(),
        "{:#?}",
        &report.violations[..report.violations.len().min(5)]
    );
    assert_eq!(report.max_concurrent, 1);

    // Every page has one event, and its warc_ref opens its response record.
    let events = page_events(&config);
    let event_urls: BTreeSet<String> = events.iter().map(|e| e.url.clone()).collect();
    assert_eq!(event_urls, truth);
    assert_eq!(events.len(), truth.len());
    for e in &events {
        let record = record_at(&config, e);
        assert!(
            record.starts_with("WARC/1.1\r\nWARC-Type: response\r\n"),
            "{}",
            &record[..80]
        );
        assert!(
            record.contains(&format!("\r\nWARC-Target-URI: {}\r\n", e.url)),
            "{}",
            e.url
        );
        assert!(record.contains(&format!("\r\n\r\nHTTP/1.1 {} ", e.status)));
        assert_eq!(e.content_sha256.len(), 64);
    }
    assert!(
        events.iter().any(|e| e.status == 404),
        "links to missing pages give 404 events"
    );
    assert_eq!(
        archive.records,
        1 + 2 * (truth.len() as u64 + 100),
        "warcinfo + request/response per fetch"
    );

    // The files are valid WARC for warcio, with no `.open` leftovers.
    warcio_check(&warc_files(&config));
}

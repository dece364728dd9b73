//! Durability: a crawl stopped by SIGINT or killed with SIGKILL and then
//! restarted on the same data directory fetches the ground truth exactly,
//! re-fetching only what was in flight at a kill.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::common::*;
use trawl::store::PartitionStore;
use trawl::testweb::generator::{HostProfile, RobotsMode};
use trawl::testweb::SyntheticWeb;

const MIN_DELAY_MS: u64 = 20;
const PARTITIONS: u16 = 16;
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

struct Setup {
    data: tempfile::TempDir,
    config_path: std::path::PathBuf,
    seeds_path: std::path::PathBuf,
}

fn setup(seeds: &[String]) -> Setup {
    let data = tempfile::tempdir().unwrap();
    let config_path = data.path().join("trawl.toml");
    let seeds_path = data.path().join("seeds.txt");
    let crawl_dir = data.path().join("crawl");
    std::fs::write(
        &config_path,
        config_toml(&crawl_dir, MIN_DELAY_MS, PARTITIONS),
    )
    .unwrap();
    std::fs::write(&seeds_path, seeds.join("\n")).unwrap();
    Setup {
        data,
        config_path,
        seeds_path,
    }
}

/// Every URL still queued in the stopped crawl's stores.
fn queued_urls(crawl_dir: &Path) -> BTreeSet<String> {
    (0..PARTITIONS)
        .flat_map(|id| {
            PartitionStore::open_read_only(crawl_dir, id)
                .unwrap()
                .queued_urls()
                .unwrap()
        })
        .collect()
}

#[test]
fn sigint_then_restart_fetches_everything_once() {
    let (web, server) = start_web(60, 30, 7);
    let port = server.addr().port();
    let truth = web.ground_truth(port);
    let s = setup(&web.seeds(port));

    let mut first = spawn_run(&s.config_path, &s.seeds_path);
    assert!(
        server.log().wait_for(truth.len() / 3, RUN_TIMEOUT),
        "first run made progress"
    );
    let pid = first.id() as libc::pid_t;
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = wait_exit(&mut first, RUN_TIMEOUT);
    assert!(status.success(), "graceful stop exits 0, got {status:?}");
    let after_first = server.log().len();
    assert!(
        after_first < truth.len(),
        "stopped before the end ({after_first} requests)"
    );

    let mut second = spawn_run(&s.config_path, &s.seeds_path);
    assert!(wait_exit(&mut second, RUN_TIMEOUT).success());
    let log = server.log().records();
    server.stop();

    let pages = page_requests(&log, port);
    let twice: Vec<_> = pages.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "fetched twice across the restart: {twice:?}"
    );
    assert_same_urls(&pages.keys().cloned().collect(), &truth);
    // robots.txt is kept across the restart: hosts with a plain file ask
    // for it once in both runs together.
    for host in (0..60).filter(|&h| HostProfile::of(h).robots == RobotsMode::Star) {
        let name = SyntheticWeb::host_name(host);
        let robots = log
            .iter()
            .filter(|r| r.host == name && r.path == "/robots.txt")
            .count();
        assert_eq!(robots, 1, "{name}");
    }
    // The schedule persisted at the stop holds across the restart.
    let report = audit_log(&web, &log, MIN_DELAY_MS);
    assert!(
        report.violations.is_empty(),
        "politeness across the restart: {:?}",
        report.violations.first()
    );
    let crawl = config(&s.data.path().join("crawl"), MIN_DELAY_MS, PARTITIONS);
    warcio_check(&warc_files(&crawl));
}

#[test]
fn kill_9_then_restart_loses_nothing_and_refetches_only_in_flight() {
    let (web, server) = start_web(60, 30, 11);
    let port = server.addr().port();
    let truth = web.ground_truth(port);
    let s = setup(&web.seeds(port));
    let crawl_dir = s.data.path().join("crawl");

    let mut first = spawn_run(&s.config_path, &s.seeds_path);
    assert!(server.log().wait_for(truth.len() / 3, RUN_TIMEOUT));
    first.kill().unwrap(); // SIGKILL
    let _ = first.wait();
    // What the first run had sent is not read from the server's log here:
    // requests the killed process wrote to its sockets can still be read and
    // logged by the server after this point. The store is the ground truth
    // of what was still owed at the kill.
    let queued_at_kill = queued_urls(&crawl_dir);
    assert!(!queued_at_kill.is_empty(), "killed mid-crawl");

    let mut second = spawn_run(&s.config_path, &s.seeds_path);
    assert!(wait_exit(&mut second, RUN_TIMEOUT).success());
    let log = server.log().records();
    server.stop();

    let pages = page_requests(&log, port);
    assert_same_urls(&pages.keys().cloned().collect(), &truth);
    let refetched: BTreeSet<&String> = pages
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(u, _)| u)
        .collect();
    for url in &refetched {
        assert!(
            queued_at_kill.contains(*url),
            "{url} was completed before the kill but fetched again"
        );
    }
    assert!(pages.values().all(|&n| n <= 2));
    // The WARC file the kill left open was recovered and indexed;
    // everything validates.
    let crawl = config(&crawl_dir, MIN_DELAY_MS, PARTITIONS);
    warcio_check(&warc_files(&crawl));
    cdxj_check(&warc_files(&crawl));
    let event_urls: BTreeSet<String> = page_events(&crawl).into_iter().map(|e| e.url).collect();
    assert_same_urls(&event_urls, &truth);
}

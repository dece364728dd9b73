//! Faults that meet slow requests: pages that take seconds, slower than the
//! crawler's timeouts, a `kill -9` while they are on the wire. Judged from
//! the server's log, where a request the crawler gave up on (or whose
//! crawler was killed) counts in flight until the server finished it, as
//! at a real server: no host ever has two requests in flight, every page
//! is fetched, the crawl ends.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use crate::common::*;
use trawl::testweb::server::SlowPages;
use trawl::testweb::{RequestRecord, ServerOptions, SyntheticWeb, TestWebServer, WebSpec};

const PARTITIONS: u16 = 4;
const MIN_DELAY_MS: u64 = 100;
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A plain web (no robots variants, throttling or slowness of its own) of
/// `hosts` × `pages` whose `slow` pages answer late.
fn slow_web(hosts: u32, pages: u32, slow: &str) -> (SyntheticWeb, TestWebServer) {
    let web = SyntheticWeb::new(WebSpec {
        hosts,
        pages_per_host: pages,
        seed: 5,
        behaviours: false,
    });
    let options = ServerOptions {
        slow_pages: slow.parse::<SlowPages>().expect("slow pages"),
        ..Default::default()
    };
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    // Several workers: a slow request must not delay the other hosts'.
    let server = TestWebServer::start_with(web.clone(), listen, 4, options).expect("start web");
    (web, server)
}

/// `[politeness] delay_factor` of these crawls.
const DELAY_FACTOR: f64 = 0.5;

/// Writes a config with `fetch` and `frontier` (TOML lines of `[fetch]`
/// and `[frontier]`) and the seeds;
/// returns the directory, the config's path and the seeds' path. A host
/// waiting longer than 500 ms passivates: a slow page's delay (half its
/// time) sends its host to the due index and back.
fn setup(
    seeds: &[String],
    fetch: &str,
    frontier: &str,
) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "[storage]\npartitions = {PARTITIONS}\n[politeness]\ndelay_factor = {DELAY_FACTOR:?}\n\
         max_delay = \"5s\"\n[frontier]\npassivate_after = \"500ms\"\n{frontier}\n\
         [fetch]\n{fetch}\n[admin]\nenabled = false\n"
    );
    let toml = trawl::testweb::config_layer(&dir.path().join("crawl"), MIN_DELAY_MS, &extra);
    let config = dir.path().join("trawl.toml");
    let seeds_path = dir.path().join("seeds.txt");
    std::fs::write(&config, toml).unwrap();
    std::fs::write(&seeds_path, seeds.join("\n")).unwrap();
    (dir, config, seeds_path)
}

/// The server's log judged per host: no two requests in flight at once
/// (abandoned ones counted until the server finished them), no request
/// sooner than `min_delay` after the end of another.
fn assert_polite(web: &SyntheticWeb, log: &[RequestRecord]) {
    let report = audit_log_with_factor(web, log, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(
        report.violations.is_empty(),
        "{} violations, the first: {:?}",
        report.violations.len(),
        report.violations.first()
    );
}

#[test]
fn a_host_slower_than_the_timeouts_never_has_two_requests_in_flight() {
    // Pages 2 and 5 of every host answer after 2 s; the crawler stops
    // waiting for the first byte after 1 s, but the server goes on to the
    // end. A request's deadline is 3 s: its host is held until then.
    let (web, server) = slow_web(3, 8, "2=2s,5=2s");
    let port = server.addr().port();
    let (_dir, config, seeds) = setup(
        &web.seeds(port),
        "first_byte_timeout = \"1s\"\ntimeout = \"3s\"\nmax_attempts = 2",
        "",
    );
    let mut run = spawn_run(&config, &seeds);
    assert!(wait_exit(&mut run, RUN_TIMEOUT).success());
    // Requests the crawler gave up on are still being served: wait for
    // the server to finish them (it logs each one when done).
    assert!(eventually_true(RUN_TIMEOUT, || server.log().in_progress() == 0));
    let log = server.log().records();
    server.stop();
    assert_polite(&web, &log);

    // The crawler gave up on every slow request it made (each URL tried
    // twice), and the server finished each one after it had.
    let slow_paths = |host: u32| [web.path_of(host, 2), web.path_of(host, 5)];
    let mut slow_urls = 0;
    for host in 0..3 {
        let name = SyntheticWeb::host_name(host);
        for path in slow_paths(host) {
            let tries: Vec<&RequestRecord> = log
                .iter()
                .filter(|r| r.host == name && r.path == path)
                .collect();
            if tries.is_empty() {
                continue; // robots.txt disallows it
            }
            slow_urls += 1;
            assert_eq!(tries.len(), 2, "{name}{path}: {tries:?}");
            assert!(tries.iter().all(|r| r.abandoned), "{name}{path}");
        }
    }
    assert!(slow_urls >= 3, "only {slow_urls} slow pages were asked for");
    // Everything else that was reached was fetched once, and only pages of
    // the web were asked for.
    let pages = page_requests(&log, port);
    let truth = web.ground_truth(port);
    let slow: BTreeSet<String> = (0..3)
        .flat_map(|h| {
            let base = format!("http://{}:{port}", SyntheticWeb::host_name(h));
            slow_paths(h).map(|p| format!("{base}{p}"))
        })
        .collect();
    for (url, n) in &pages {
        assert!(truth.contains(url), "{url} is not a page of the web");
        assert!(slow.contains(url) || *n == 1, "{url} fetched {n} times");
    }
    assert!(pages.len() > 3 * 4, "the crawl went past the slow pages");
}

/// Runs the crawl of `config` from `seeds` until `on_the_wire` holds of
/// the server, kills it (SIGKILL), runs it again from `again` to its end
/// (it must exit 0), and returns the server's log once the server has
/// finished every request, the killed life's included.
fn kill_9_then_resume(
    server: TestWebServer,
    config: &std::path::Path,
    seeds: &std::path::Path,
    again: &std::path::Path,
    on_the_wire: impl Fn(&TestWebServer) -> bool,
) -> Vec<RequestRecord> {
    let mut first = spawn_run(config, seeds);
    let out = eventually_true(RUN_TIMEOUT, || on_the_wire(&server));
    assert!(out, "the requests to kill during are in flight");
    first.kill().unwrap(); // SIGKILL
    let _ = first.wait();

    let mut second = spawn_run(config, again);
    assert!(
        wait_exit(&mut second, RUN_TIMEOUT).success(),
        "the restart finishes the crawl and exits 0"
    );
    assert!(eventually_true(RUN_TIMEOUT, || server.log().in_progress() == 0));
    let log = server.log().records();
    server.stop();
    log
}

#[test]
fn kill_9_during_slow_requests_then_restart_fetches_every_page_once_the_holds_end() {
    // Every seed page takes 3 s; the crawler waits up to 4 s. It is killed
    // while all four are on the wire and started again at once: the
    // server is still working on them, so no host may be asked before its
    // request's deadline, and then every queued URL must be fetched. The
    // delay after a 3 s page (1.5 s) is longer than `passivate_after`: a
    // restart that made a host owe its last delay again at every start of
    // its life would never fetch from it again.
    let hosts = 4;
    let (web, server) = slow_web(hosts, 5, "0=3s");
    let port = server.addr().port();
    let truth = web.ground_truth(port);
    let (_dir, config, seeds) = setup(
        &web.seeds(port),
        "first_byte_timeout = \"4s\"\ntimeout = \"4s\"",
        "",
    );
    let all_out = |server: &TestWebServer| {
        server.log().in_progress() == hosts as usize && server.log().len() == hosts as usize
    };
    let log = kill_9_then_resume(server, &config, &seeds, &seeds, all_out);

    assert_polite(&web, &log);
    let pages = page_requests(&log, port);
    let fetched: BTreeSet<String> = pages.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    for seed in web.seeds(port) {
        let abandoned = log
            .iter()
            .filter(|r| r.abandoned && url_of(r, port) == seed)
            .count();
        assert_eq!(abandoned, 1, "{seed}: the killed life's request");
        assert_eq!(pages[&seed], 2, "{seed}: asked again after the kill");
    }
    assert!(
        pages
            .iter()
            .filter(|(u, _)| !web.seeds(port).contains(u))
            .all(|(_, n)| *n == 1),
        "no other page twice"
    );
}

#[test]
fn kill_9_during_slow_requests_with_dormant_hosts_in_the_store_loses_nothing() {
    // 24 hosts over four partitions, four active at a time, a window of
    // two dormant hosts in memory a partition: most wait in the store's
    // tier, before the kill and after the restart (whose index is loaded
    // from the queue in one batch). Every seed page takes 2 s; the crawler
    // is killed while three or four active hosts' seeds are on the wire
    // and started again at once, with no seeds: every host comes back from
    // the store.
    let hosts = 24;
    let (web, server) = slow_web(hosts, 3, "0=2s");
    let port = server.addr().port();
    let truth = web.ground_truth(port);
    let (_dir, config, seeds) = setup(
        &web.seeds(port),
        "first_byte_timeout = \"3s\"\ntimeout = \"3s\"",
        "max_active_hosts = 4\ndormant_hosts_in_memory = 1",
    );
    // Resumed with no seeds: the hosts come back from the store alone.
    let none = seeds.with_file_name("no-seeds.txt");
    std::fs::write(&none, "").unwrap();
    let three_out = |server: &TestWebServer| server.log().in_progress() >= 3;
    let log = kill_9_then_resume(server, &config, &seeds, &none, three_out);

    assert_polite(&web, &log);
    let pages = page_requests(&log, port);
    let fetched: BTreeSet<String> = pages.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    let killed: BTreeSet<String> = log
        .iter()
        .filter(|r| r.abandoned)
        .map(|r| url_of(r, port))
        .collect();
    assert!(killed.len() >= 3, "the killed life's requests: {killed:?}");
    for (url, n) in &pages {
        let expected = if killed.contains(url) { 2 } else { 1 };
        assert_eq!(*n, expected, "{url}");
    }
}

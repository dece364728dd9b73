//! The refresh loop against `changing.test`, a site that changes while it
//! is crawled (`src/testweb/changing.rs`): conditional requests, 304s as
//! `server-not-modified` revisits, intervals learned from change, removals,
//! and a schedule that survives a restart. Revisit intervals are seconds
//! (`min_interval = "2s"`) so a crawl of a few seconds sees several visits;
//! every check is made from the server's log and the crawl's output.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{events, eventually_async, record_at, warc_files, warcio_check};
use trawl::actors::{GetStatus, Node, NodeStatus, Seed, Shutdown};
use trawl::config::Config;
use trawl::events::{Event, EventKind};
use trawl::metrics::Metrics;
use trawl::testweb::changing::{self, ChangingSpec};
use trawl::testweb::{
    audit_with, HostRule, RequestRecord, ServerOptions, SyntheticWeb, TestWebServer, WebSpec,
};

const MIN_DELAY_MS: u64 = 50;

fn start_server(spec: ChangingSpec) -> TestWebServer {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 1,
        pages_per_host: 2,
        seed: 9,
        behaviours: false,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let options = ServerOptions {
        changing: spec,
        ..ServerOptions::default()
    };
    TestWebServer::start_with(web, listen, 1, options).expect("start the changing web")
}

/// Refreshes every 2 s to 8 s, robots.txt kept 2 s, small delays.
fn refresh_config(data: &Path) -> Config {
    crate::common::config_with(
        data,
        MIN_DELAY_MS,
        4,
        "[recrawl]\nmin_interval = \"2s\"\ndefault_interval = \"2s\"\nmax_interval = \"8s\"\n\
         [robots]\ncache_ttl = \"2s\"\n[politeness]\ndelay_factor = 0.0\n",
    )
}

fn path_of(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| url.to_owned(), |u| u.path().to_owned())
}

/// Requests of `path` in the order they started.
fn requests<'a>(log: &'a [RequestRecord], path: &str) -> Vec<&'a RequestRecord> {
    let mut out: Vec<_> = log
        .iter()
        .filter(|r| r.host == changing::HOST && r.path == path)
        .collect();
    out.sort_by_key(|r| r.start);
    out
}

fn removed(events: &[Event]) -> BTreeMap<String, (String, u16)> {
    events
        .iter()
        .filter(|e| e.kind == EventKind::Removed)
        .map(|e| {
            let reason = e.reason.clone().expect("a removal has its reason");
            (path_of(&e.url), (reason, e.status))
        })
        .collect()
}

/// Runs a node on `config` (seeded with `seeds`, counting in `metrics`)
/// until `done` holds for the server's log and the events written so far,
/// or `limit` passes; then shuts it down gracefully. Returns whether `done`
/// was reached, and the node's status just before the shutdown.
fn crawl_until(
    config: Config,
    seeds: Vec<String>,
    server: &TestWebServer,
    metrics: Arc<Metrics>,
    limit: Duration,
    done: impl Fn(&[RequestRecord], &[Event]) -> bool,
) -> (bool, NodeStatus) {
    let log = server.log().clone();
    let events_path = config.events_file();
    actix_rt::System::new().block_on(async move {
        let node = Node::start(config, metrics).expect("node starts");
        if !seeds.is_empty() {
            node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        }
        // Polls the two outputs the crawl is judged by (the server's log
        // and the events file) until the condition holds.
        let reached = eventually_async(limit, || async {
            let written = trawl::events::read_all(&events_path).unwrap_or_default();
            done(&log.records(), &written).then_some(())
        })
        .await
        .is_some();
        let status = node.send(GetStatus).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        (reached, status)
    })
}

fn seed(server: &TestWebServer) -> String {
    format!("http://{}:{}/", changing::HOST, server.addr().port())
}

#[test]
fn a_changing_site_is_refreshed_conditionally_and_loses_what_it_removes() {
    let spec = ChangingSpec::default();
    let server = start_server(spec);
    let dir = tempfile::tempdir().unwrap();
    let config = refresh_config(dir.path());
    let all_removed = ["/gone404", "/gone410", "/private/page", "/old"];
    let metrics = Arc::new(Metrics::new());
    let (reached, status) = crawl_until(
        config.clone(),
        vec![seed(&server)],
        &server,
        metrics.clone(),
        Duration::from_secs(90),
        |log, written| {
            let gone = removed(written);
            let (always, never) = (
                requests(log, "/always").len(),
                requests(log, "/never").len(),
            );
            // Early on both pages are due every `min_interval`; the gap
            // opens as `/never`'s interval grows with its unchanged span
            // (by ~20 s on this policy). Waiting for it, rather than for a
            // fixed count, keeps the comparison below from racing on which
            // of the two was fetched first.
            always >= 6
                && never >= 3
                && always >= never + 2
                && all_removed.iter().all(|p| gone.contains_key(*p))
        },
    );
    let log = server.log().records();
    let events = events(&config);
    assert!(
        reached,
        "not every refresh happened: /always {} /never {}, removed {:?}",
        requests(&log, "/always").len(),
        requests(&log, "/never").len(),
        removed(&events)
    );

    // Every refetch of a page whose last answer had validators sends them.
    let mut refetches = 0;
    for path in changing::linked_paths() {
        let reqs = requests(&log, &path);
        for pair in reqs.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            if !matches!(before.status, 200 | 304) {
                continue;
            }
            refetches += 1;
            if let Some(etag) = &before.etag {
                assert_eq!(
                    after.if_none_match.as_ref(),
                    Some(etag),
                    "{path}: {after:?}"
                );
            }
            if path.starts_with("/lastmod/") || path.starts_with("/both/") {
                assert!(after.if_modified_since.is_some(), "{path}: {after:?}");
            }
            if path.starts_with("/none/") || path == "/footer" {
                assert!(after.if_none_match.is_none() && after.if_modified_since.is_none());
            }
        }
    }
    assert!(refetches >= 20, "only {refetches} refetches");

    // A page that changes on every visit is visited more often than one
    // that never does (the stop condition waited for two visits ahead; at
    // most one more of `/never` can start before the shutdown).
    let (always, never) = (
        requests(&log, "/always").len(),
        requests(&log, "/never").len(),
    );
    assert!(always > never, "/always {always} vs /never {never}");

    // 304s are server-not-modified revisits of the copy on record.
    let by_url: HashMap<&str, Vec<&Event>> = events
        .iter()
        .filter(|e| e.kind == EventKind::Page)
        .fold(HashMap::new(), |mut m, e| {
            m.entry(e.url.as_str()).or_default().push(e);
            m
        });
    let mut not_modified = 0;
    for (url, evs) in &by_url {
        assert!(
            evs[0].changed.is_none(),
            "{url}: a first fetch has no change"
        );
        for (i, e) in evs.iter().enumerate().skip(1) {
            assert!(
                e.changed.is_some(),
                "{url}: a refetch says whether it changed"
            );
            if e.status != 304 {
                continue;
            }
            not_modified += 1;
            assert_eq!(e.changed, Some(false));
            let record = record_at(&config, e);
            assert!(record.contains("WARC-Type: revisit\r\n"), "{record}");
            assert!(record.contains(
                "WARC-Profile: http://netpreserve.org/warc/1.1/revisit/server-not-modified\r\n"
            ));
            // It points at the last full copy of this URL.
            let copy = evs[..i]
                .iter()
                .rev()
                .find(|c| c.status == 200)
                .unwrap_or_else(|| panic!("{url}: a 304 with no copy before it"));
            let original = record_at(&config, copy);
            let header = |text: &str, name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
                    .map(str::to_owned)
            };
            let target = header(&original, "WARC-Target-URI:");
            let date = header(&original, "WARC-Date:");
            assert_eq!(
                header(&record, "WARC-Refers-To-Target-URI:"),
                target,
                "{url}"
            );
            assert_eq!(header(&record, "WARC-Refers-To-Date:"), date, "{url}");
            assert_eq!(
                header(&record, "WARC-Payload-Digest:"),
                header(&original, "WARC-Payload-Digest:"),
                "{url}: the stored digest is carried"
            );
        }
    }
    assert!(not_modified >= 2, "only {not_modified} 304s");
    warcio_check(&warc_files(&config));

    // Removals: their events, and no request afterwards.
    let gone = removed(&events);
    assert_eq!(gone["/gone404"], ("gone".into(), 404));
    assert_eq!(gone["/gone410"], ("gone".into(), 410));
    assert_eq!(gone["/private/page"].0, "disallowed");
    assert_eq!(gone["/old"], ("moved".into(), 301));
    let timeline = server.changing_timeline();
    for path in ["/gone404", "/gone410"] {
        let misses = requests(&log, path)
            .into_iter()
            .filter(|r| timeline.elapsed(r.start) >= spec.gone_after)
            .count();
        assert_eq!(misses, 2, "{path}: two missing answers, then never again");
    }
    let first_301 = requests(&log, "/old")
        .into_iter()
        .position(|r| r.status == 301)
        .expect("/old moved");
    assert_eq!(
        requests(&log, "/old").len(),
        first_301 + 1,
        "/old not asked again"
    );
    assert!(
        !requests(&log, "/new").is_empty(),
        "the redirect target is crawled"
    );
    let disallowing = requests(&log, "/robots.txt")
        .into_iter()
        .find(|r| timeline.elapsed(r.start) >= spec.disallow_after)
        .expect("robots.txt read again after it changed");
    assert!(
        requests(&log, "/private/page")
            .iter()
            .all(|r| r.start < disallowing.start),
        "nothing is fetched once robots.txt disallows it"
    );

    // Operators see it: refreshes by result, removals by reason, and the
    // schedule in the status.
    let count =
        |vec: &prometheus::IntCounterVec, label: &str| vec.with_label_values(&[label]).get();
    assert_eq!(
        count(&metrics.refreshes, "not_modified"),
        not_modified as u64
    );
    assert!(count(&metrics.refreshes, "changed") >= 5);
    assert!(
        count(&metrics.refreshes, "unchanged") >= 1,
        "/footer's clock"
    );
    // (The site has no sitemap: its /sitemap.xml, a 404, goes too.)
    for reason in ["gone", "disallowed", "moved"] {
        let written = events
            .iter()
            .filter(|e| e.kind == EventKind::Removed && e.reason.as_deref() == Some(reason))
            .count();
        assert_eq!(count(&metrics.removed, reason), written as u64, "{reason}");
    }
    assert_eq!(count(&metrics.removed, "moved"), 1);
    assert!(status.refresh_due.scheduled > 0, "{:?}", status.refresh_due);
    assert!(status.refresh_due.within_day >= status.refresh_due.within_hour);
    assert_eq!(status.refresh_due.within_day, status.refresh_due.scheduled);

    // Politeness holds through all of it.
    let report = audit_with(&log, 1, |_| HostRule {
        min_gap: Duration::from_millis(MIN_DELAY_MS),
        factor: 0.0,
    });
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn a_restart_keeps_every_urls_schedule() {
    let spec = ChangingSpec {
        // Nothing goes away in this test.
        gone_after: Duration::from_secs(3600),
        disallow_after: Duration::from_secs(3600),
        move_after: Duration::from_secs(3600),
        ..ChangingSpec::default()
    };
    let server = start_server(spec);
    let dir = tempfile::tempdir().unwrap();
    let config = refresh_config(dir.path());
    let (reached, _) = crawl_until(
        config.clone(),
        vec![seed(&server)],
        &server,
        Arc::new(Metrics::new()),
        Duration::from_secs(60),
        |log, _| requests(log, "/never").len() >= 2,
    );
    assert!(reached, "/never refetched before the restart");
    let before = server.log().len();

    // Every fetched URL left with a record and a due time.
    let urls: std::collections::BTreeSet<String> = events(&config)
        .into_iter()
        .filter(|e| e.kind == EventKind::Page)
        .map(|e| e.url)
        .collect();
    let mut scheduled = 0;
    for p in 0..config.storage.partitions {
        let store =
            trawl::store::PartitionStore::open_read_only(&config.storage.data_dir, p).unwrap();
        for url in &urls {
            let fp = trawl::url::Fingerprint::of(url);
            if let Some(record) = store.url_record(fp).unwrap() {
                assert!(record.next_due_ms.is_some(), "{url}: {record:?}");
                scheduled += 1;
            }
        }
    }
    let distinct: std::collections::BTreeSet<_> = urls.iter().collect();
    assert_eq!(
        scheduled,
        distinct.len(),
        "every fetched url has its record"
    );

    // Restarted with no seeds: the schedule alone brings the refreshes,
    // conditional as before.
    let (reached, _) = crawl_until(
        config,
        Vec::new(),
        &server,
        Arc::new(Metrics::new()),
        Duration::from_secs(60),
        |log, _| log.len() > before && requests(log, "/never").len() >= 3,
    );
    assert!(reached, "refreshes go on after the restart");
    let log = server.log().records();
    let after_restart = requests(&log, "/never");
    let last = after_restart.last().unwrap();
    assert_eq!(last.if_none_match.as_deref(), Some("\"v0\""));
}

//! A full crawl of the synthetic web, checked from the outside: the server
//! saw exactly the ground truth, robots.txt first and obeyed in every
//! variant, politeness held per host (delays, Crawl-delay, slow hosts,
//! Retry-After), sitemap-only pages found, and every event points at its
//! response record in valid WARC files.

use std::collections::BTreeSet;

use crate::common::*;
use trawl::events::EventKind;
use trawl::testweb::generator::{HostProfile, RobotsMode, Target, Throttle, ORPHANS};
use trawl::testweb::{request_kind, RequestKind, SyntheticWeb};

const MIN_DELAY_MS: u64 = 20;
const HOSTS: u32 = 100;

#[test]
fn crawl_of_100_hosts_matches_ground_truth_politely() {
    let (web, server) = start_web(HOSTS, 30, 42);
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

    // robots.txt first, and obeyed, for every host and every variant.
    assert_robots_obeyed(&web, &log, port);
    for host in 0..HOSTS {
        let name = SyntheticWeb::host_name(host);
        let mut reqs: Vec<_> = log.iter().filter(|r| r.host == name).collect();
        reqs.sort_by_key(|r| r.start);
        assert_eq!(
            reqs[0].path, "/robots.txt",
            "{name} got a page before robots.txt"
        );
        let profile = HostProfile::of(host);
        let robots = reqs
            .iter()
            .filter(|r| request_kind(&r.path) == RequestKind::Robots);
        match profile.robots {
            // 5xx robots.txt: nothing else is ever requested.
            RobotsMode::ServerError => assert!(
                reqs.iter()
                    .all(|r| request_kind(&r.path) == RequestKind::Robots),
                "{name}: requests beyond robots.txt"
            ),
            // Redirects are followed (at most five hops).
            RobotsMode::Redirects { hops } => {
                assert_eq!(robots.count() as u32, hops.min(5) + 1, "{name}")
            }
            // 503 twice, then the file: three requests.
            RobotsMode::FlakyThenStar { failures } => {
                assert_eq!(robots.count() as u32, failures + 1, "{name}")
            }
            _ => assert_eq!(robots.count(), 1, "{name}: robots.txt cached"),
        }
        // Sitemap-only pages are found.
        if profile.has_sitemaps() {
            let orphans = (30..30 + ORPHANS)
                .filter(|id| pages.contains_key(&format!("http://{name}:{port}/orphan/{id}.html")))
                .count();
            assert_eq!(orphans as u32, ORPHANS, "{name}: sitemap pages");
        }
    }
    // 4xx robots.txt: private pages crawled too; the huge file's late rule
    // (beyond 500 KiB) is never read.
    for (host, path) in [(2, "/private/"), (3, "/private/"), (12, "/p/")] {
        let prefix = format!("http://{}:{port}{path}", SyntheticWeb::host_name(host));
        assert!(fetched.iter().any(|u| u.starts_with(&prefix)), "{prefix}");
    }

    // The politeness audit, from the server's side, host by host.
    let report = audit_log(&web, &log, MIN_DELAY_MS);
    let first: Vec<_> = report.violations.iter().take(5).collect();
    assert!(report.violations.is_empty(), "{first:#?}");
    assert_eq!(report.max_concurrent, 1);
    // Throttling hosts refuse page 2 once (with Retry-After), then serve it.
    let throttled = log.iter().filter(|r| r.not_before.is_some()).count();
    let expected = (0..HOSTS)
        .filter(|&h| HostProfile::of(h).throttle != Throttle::None)
        .map(|host| web.url_of(Target::Page { host, id: 2 }, port))
        .filter(|url| truth.contains(url))
        .count();
    assert!(expected >= 5);
    assert_eq!(throttled, expected);

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
        assert_eq!(e.content_sha256.as_deref().map(str::len), Some(64));
        // Distinct pages are neither duplicates nor near-duplicates.
        assert_eq!(e.duplicate_of, None, "{} flagged", e.url);
        if e.status == 200 {
            assert!(e.simhash.is_some(), "{}", e.url);
        }
    }
    assert!(
        events.iter().any(|e| e.status == 404),
        "links to missing pages give 404 events"
    );
    // Every response but the refused-and-retried ones is archived (request
    // + response records), a page's or sitemap's with its metadata record,
    // after one warcinfo; and each host's name once (its `dns:` record,
    // the override's answer).
    let archived = (log.len() - throttled) as u64;
    let described = crate::common::events(&config)
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Page | EventKind::Sitemap))
        .count() as u64;
    let names = log.iter().map(|r| &r.host).collect::<BTreeSet<_>>().len() as u64;
    assert_eq!(archive.records, 1 + 2 * archived + described + names);

    // The files are valid WARC for warcio, with no `.open` leftovers.
    warcio_check(&warc_files(&config));
}

/// The pipeline bound (`[fetch] max_pipeline_pages`), far below the hosts
/// ready to fetch: never more pages in the pipeline (nor fetched and not
/// yet archived) than the bound, every place given back on every path
/// (retries, errors, redirects, 404s, throttled hosts), and the crawl
/// still complete and polite.
#[test]
fn a_small_pipeline_bound_holds_and_the_crawl_completes() {
    // Two fetch slots and one page beyond them: three places.
    const BOUND: i64 = 3;
    let (web, server) = start_web(40, 12, 7);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let extra = "[fetch]\nconcurrency = 2\nmax_pipeline_pages = 1\n";
    let config = config_with(data.path(), 5, 8, extra);
    let metrics = std::sync::Arc::new(trawl::metrics::Metrics::new());
    let node_metrics = metrics.clone();
    let (node_config, seeds) = (config.clone(), web.seeds(port));
    let (archive, at_idle) = actix_rt::System::new().block_on(async move {
        let node = trawl::actors::Node::start(node_config, node_metrics.clone()).unwrap();
        node.send(trawl::actors::Seed { urls: seeds })
            .await
            .unwrap()
            .unwrap();
        node.send(trawl::actors::WhenIdle).await.unwrap();
        // Idle: nothing of the crawl is left in the pipeline.
        let at_idle = (
            node_metrics.pipeline_pages.get(),
            node_metrics.pipeline_backlog.get(),
        );
        let archive = node.send(trawl::actors::Shutdown).await.unwrap().unwrap();
        (archive, at_idle)
    });
    let log = server.log().records();
    server.stop();

    assert_eq!(at_idle, (0, 0), "places not given back (pages, backlog)");
    assert_eq!(
        metrics.pipeline_pages.peak(),
        BOUND,
        "the pipeline filled up to its bound and never beyond"
    );
    let backlog = metrics.pipeline_backlog.peak();
    assert!((1..=BOUND).contains(&backlog), "backlog peak {backlog}");

    // Complete: exactly the ground truth, each page once, each archived.
    let truth = web.ground_truth(port);
    let pages = page_requests(&log, port);
    assert!(pages.values().all(|&n| n == 1), "a page fetched twice");
    assert_same_urls(&pages.keys().cloned().collect(), &truth);
    let events = page_events(&config);
    let archived: BTreeSet<String> = events.iter().map(|e| e.url.clone()).collect();
    assert_eq!(archived, truth);
    assert_eq!(events.len(), truth.len());
    assert!(archive.records > 2 * truth.len() as u64);

    // Waiting for the pipeline only ever lengthened a host's gaps.
    let report = audit_log(&web, &log, 5);
    let first: Vec<_> = report.violations.iter().take(5).collect();
    assert!(report.violations.is_empty(), "{first:#?}");
    assert_eq!(report.max_concurrent, 1);
}

#[test]
fn a_byte_budget_of_one_lets_one_body_at_a_time_and_the_crawl_completes() {
    let (web, server) = start_web(30, 10, 8);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config_with(data.path(), 5, 4, "[fetch]\nmax_pipeline_bytes = 1\n");
    let (_, metrics) = crawl_with_metrics(config.clone(), web.seeds(port));
    let log = server.log().records();
    server.stop();
    // Every page's body held the budget: new pages waited for it, and
    // none waited forever.
    assert_eq!(metrics.pipeline_bytes.get(), 0, "bytes not given back");
    let truth = web.ground_truth(port);
    let archived: BTreeSet<String> = page_events(&config).into_iter().map(|e| e.url).collect();
    assert_eq!(archived, truth);
    assert!(page_requests(&log, port).values().all(|&n| n == 1));
}

#[test]
fn a_compressing_web_is_crawled_whole_and_archived_as_received() {
    let web = trawl::testweb::SyntheticWeb::new(trawl::testweb::WebSpec {
        hosts: 24,
        pages_per_host: 15,
        seed: 11,
        behaviours: true,
    });
    let options = trawl::testweb::ServerOptions {
        compress: true,
        ..Default::default()
    };
    let listen = "127.0.0.1:0".parse().unwrap();
    let server =
        trawl::testweb::TestWebServer::start_with(web.clone(), listen, 1, options).unwrap();
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 4);
    crawl_in_process(config.clone(), web.seeds(port));
    let log = server.log().records();
    server.stop();

    // Links, robots.txt rules and sitemaps were all read through the
    // codings: exactly the ground truth, robots.txt obeyed.
    let truth = web.ground_truth(port);
    let pages = page_requests(&log, port);
    assert!(pages.values().all(|&n| n == 1), "a page fetched twice");
    assert_same_urls(&pages.keys().cloned().collect(), &truth);
    assert_robots_obeyed(&web, &log, port);
    let report = audit_log(&web, &log, 5);
    assert!(
        report.violations.is_empty(),
        "{:#?}",
        &report.violations[..1]
    );

    // Archived as received (the server compresses only when asked, so
    // trawl asked): each page's record keeps the response's
    // Content-Encoding and its compressed body, all three codings are
    // there, and warcio and pywb's indexer read the files
    // (warcio check recomputes the payload digests over the bodies as
    // stored).
    let events = page_events(&config);
    assert_eq!(events.len(), truth.len());
    let mut codings = BTreeSet::new();
    for event in events.iter().filter(|e| e.status == 200) {
        let record = record_at(&config, event);
        let coding = record
            .lines()
            .find_map(|l| {
                l.strip_prefix("content-encoding: ")
                    .or(l.strip_prefix("Content-Encoding: "))
            })
            .unwrap_or_else(|| panic!("no content-encoding in {}", event.url));
        codings.insert(coding.trim().to_owned());
        assert!(
            !record.contains("<html"),
            "{}: the body is archived compressed, as received",
            event.url
        );
    }
    assert_eq!(
        codings,
        BTreeSet::from(["br".into(), "gzip".into(), "zstd".into()])
    );
    assert!(
        events.iter().any(|e| e.links_out > 0),
        "links read from decoded bodies"
    );
    let files = warc_files(&config);
    warcio_check(&files);
    cdxj_check(&files);
    // A replay tool undoes the coding as trawl kept it: warcio's content
    // stream decodes the gzip pages back to their HTML.
    let decoded = warcio_decoded_html(&files, "gzip");
    let gzip_pages = events
        .iter()
        .filter(|e| e.status == 200)
        .filter(|e| {
            record_at(&config, e)
                .to_ascii_lowercase()
                .contains("content-encoding: gzip")
        })
        .count();
    assert!(gzip_pages > 0);
    assert_eq!(decoded, gzip_pages, "gzip pages warcio decoded to HTML");
}

/// Response records with `Content-Encoding: coding` whose payload warcio's
/// content stream decodes to HTML.
fn warcio_decoded_html(files: &[std::path::PathBuf], coding: &str) -> usize {
    let python = std::env::var("TRAWL_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = r#"
import sys
from warcio.archiveiterator import ArchiveIterator
coding, n = sys.argv[1], 0
for path in sys.argv[2:]:
    with open(path, 'rb') as f:
        for r in ArchiveIterator(f):
            if r.rec_type != 'response' or not r.http_headers:
                continue
            if r.http_headers.get_header('content-encoding') != coding:
                continue
            if b'<html' in r.content_stream().read():
                n += 1
print(n)
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script, coding])
        .args(files)
        .output()
        .expect("python with warcio");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

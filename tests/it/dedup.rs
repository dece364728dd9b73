//! The repeating web: mirrors are stored once (the copy as a WARC revisit
//! record naming its original), near-duplicate template pages are flagged,
//! session-ID variants of one page are fetched once, calendars and
//! repeating paths end, and none of the distinct pages of the synthetic web
//! is ever flagged as a duplicate.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;
use chrono::Datelike;
use trawl::events::Event;
use trawl::testweb::dupes::{self, CALENDAR, LOOP, MIRRORS, SESSION, TEMPLATE};
use trawl::testweb::{SyntheticWeb, WebSpec};

fn event_by_url(events: &[Event]) -> BTreeMap<&str, &Event> {
    events.iter().map(|e| (e.url.as_str(), e)).collect()
}

#[test]
fn duplicates_are_stored_once_and_traps_end() {
    let (web, server) = start_web(10, 15, 4);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 2);
    let mut seeds = web.seeds(port);
    seeds.push(format!("http://{}:{port}/", dupes::HUB));
    let (_, metrics) = crawl_with_metrics(config.clone(), seeds);
    let log = server.log().records();
    server.stop();
    let events = page_events(&config);
    let by_url = event_by_url(&events);
    let url = |host: &str, path: &str| format!("http://{host}:{port}{path}");

    // Mirrors: of each pair one is the original, the other a revisit of it.
    let paths: Vec<String> = std::iter::once("/".to_owned())
        .chain((1..=dupes::MIRROR_PAGES).map(|n| format!("/m/{n}.html")))
        .collect();
    for path in &paths {
        let (a, b) = (url(MIRRORS[0], path), url(MIRRORS[1], path));
        let (ea, eb) = (by_url[a.as_str()], by_url[b.as_str()]);
        let (original, copy) = match (&ea.duplicate_of, &eb.duplicate_of) {
            (None, Some(_)) => (ea, eb),
            (Some(_), None) => (eb, ea),
            other => panic!("{path}: exactly one copy is a duplicate, got {other:?}"),
        };
        assert_eq!(copy.duplicate_of.as_deref(), Some(original.url.as_str()));
        assert_eq!(copy.content_sha256, original.content_sha256);
        let record = record_at(&config, copy);
        assert!(
            record.starts_with("WARC/1.1\r\nWARC-Type: revisit\r\n"),
            "{record}"
        );
        assert!(record.contains(
            "WARC-Profile: http://netpreserve.org/warc/1.1/revisit/identical-payload-digest\r\n"
        ));
        assert!(record.contains(&format!("WARC-Refers-To-Target-URI: {}\r\n", original.url)));
        assert!(record_at(&config, original).starts_with("WARC/1.1\r\nWARC-Type: response\r\n"));
    }
    assert_eq!(
        metrics.duplicates.with_label_values(&["exact"]).get(),
        paths.len() as u64
    );

    // Template pages: one original, the rest flagged as resembling one.
    let template: Vec<&Event> = (0..dupes::TEMPLATE_PAGES)
        .map(|n| by_url[url(TEMPLATE, &format!("/t/{n}")).as_str()])
        .collect();
    let originals: BTreeSet<&str> = template
        .iter()
        .filter(|e| e.duplicate_of.is_none())
        .map(|e| e.url.as_str())
        .collect();
    assert_eq!(originals.len(), 1, "{originals:?}");
    for e in &template {
        assert!(e.simhash.is_some());
        if let Some(of) = &e.duplicate_of {
            assert!(originals.contains(of.as_str()), "{} → {of}", e.url);
            assert!(record_at(&config, e).starts_with("WARC/1.1\r\nWARC-Type: response\r\n"));
        }
    }

    // Distinct pages of the synthetic web are never duplicates.
    let site_events: Vec<&Event> = events.iter().filter(|e| e.url.contains("site0")).collect();
    assert!(!site_events.is_empty());
    for e in site_events {
        assert_eq!(e.duplicate_of, None, "{} flagged", e.url);
        assert!(e.simhash.is_some() || e.status != 200, "{}", e.url);
    }
    assert_sites_complete(&log, &web, port);

    // Session-ID variants of one item: one fetch.
    let items = log
        .iter()
        .filter(|r| r.host == SESSION && r.path.starts_with("/item"))
        .count();
    assert_eq!(items, 1);

    // The calendar ends at the window; the repeating path at three.
    let this_year = chrono::Utc::now().year();
    let months: Vec<(i32, u32)> = log
        .iter()
        .filter(|r| r.host == CALENDAR && r.path.starts_with("/cal/"))
        .map(|r| {
            let mut p = r.path.trim_matches('/').split('/').skip(1);
            (
                p.next().unwrap().parse().unwrap(),
                p.next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    let last = *months.iter().max().unwrap();
    assert_eq!(
        last,
        (this_year + 2, 12),
        "the calendar stops at the window"
    );
    let (y0, m0) = dupes::CALENDAR_START;
    let expected = (last.0 - y0) * 12 + last.1 as i32 - m0 as i32 + 1;
    assert_eq!(months.len() as i32, expected, "each month once");
    let loop_paths: BTreeSet<&str> = log
        .iter()
        .filter(|r| r.host == LOOP && r.path != "/robots.txt" && r.path != "/sitemap.xml")
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(loop_paths, BTreeSet::from(["/", "/a/", "/a/a/", "/a/a/a/"]));
    // Robots directives and canonical links, end to end.
    let hub = |path: &str| url(dupes::HUB, path);
    let hits = |path: &str| {
        log.iter()
            .filter(|r| r.host == dupes::HUB && r.path == path)
            .count()
    };
    assert_eq!(hits("/x-never"), 0, "X-Robots-Tag: trawl: nofollow");
    assert_eq!(hits("/after-otherbot"), 1, "another crawler's nofollow");
    assert_eq!(hits("/after-noindex"), 1, "noindex is not nofollow");
    let meta = |path: &str| by_url[hub(path).as_str()].robots_meta.clone();
    assert_eq!(meta("/xrobots").as_deref(), Some("nofollow"));
    assert_eq!(meta("/otherbot"), None);
    assert_eq!(meta("/noindex").as_deref(), Some("noindex"));
    assert_eq!(
        by_url[hub("/canonical").as_str()].canonical_url.as_deref(),
        Some(hub("/canonical-target").as_str())
    );

    let dropped = |reason: &str| metrics.urls_dropped.with_label_values(&[reason]).get();
    assert!(dropped("trap_calendar") >= 1);
    assert!(dropped("trap_repeated_segment") >= 1);

    warcio_check(&warc_files(&config));
}

#[test]
fn near_duplicates_can_be_left_out_of_the_archive() {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 1,
        pages_per_host: 1,
        seed: 1,
        behaviours: false,
    });
    let server =
        trawl::testweb::TestWebServer::start(web, "127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config_with(
        data.path(),
        5,
        1,
        "[dedup]\nnear_duplicates = \"skip-archive\"\n",
    );
    let (_, metrics) =
        crawl_with_metrics(config.clone(), vec![format!("http://{TEMPLATE}:{port}/")]);
    let log = server.log().records();
    server.stop();
    let fetched = log.iter().filter(|r| r.path.starts_with("/t/")).count();
    assert_eq!(
        fetched,
        dupes::TEMPLATE_PAGES as usize,
        "every page is fetched"
    );
    let archived: Vec<Event> = page_events(&config)
        .into_iter()
        .filter(|e| e.url.contains("/t/"))
        .collect();
    assert_eq!(
        archived.len(),
        1,
        "only the first of the near-duplicates is stored"
    );
    assert_eq!(archived[0].duplicate_of, None);
    assert_eq!(
        metrics
            .duplicates
            .with_label_values(&["near_skipped"])
            .get(),
        u64::from(dupes::TEMPLATE_PAGES - 1)
    );
}

#[test]
fn a_link_farm_gets_its_base_budget_and_real_sites_are_complete() {
    let (web, server) = start_web(6, 15, 8);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    // The farm is reached through a seed, and a seeded domain has a
    // budget of its own (`seeded_base_pages`): here it is held to the
    // base, as a farm nobody asked for would be.
    let config = config_with(
        data.path(),
        5,
        2,
        "[budget]\nbase_pages = 20\npages_per_linking_domain = 10\nseeded_base_pages = 0\n",
    );
    let mut seeds = web.seeds(port);
    seeds.push(format!("http://s0.{}:{port}/", dupes::FARM_DOMAIN));
    let (_, metrics) = crawl_with_metrics(config, seeds);
    let log = server.log().records();
    server.stop();
    // The farm (60 hosts × 5 pages, linking only to each other) is held to
    // the base budget: nobody outside links in.
    let farm_pages = log
        .iter()
        .filter(|r| r.host.ends_with(dupes::FARM_DOMAIN))
        .filter(|r| r.path == "/" || r.path.starts_with("/f/"))
        .count();
    assert_eq!(farm_pages, 20);
    // Counted as a seeded domain cut short, with the setting to raise.
    let dropped = |label: &str| metrics.urls_dropped.with_label_values(&[label]).get();
    assert!(dropped("budget_seeded_domain") > 0);
    assert_eq!(dropped("budget_domain"), 0, "only the seeded farm is cut");
    // Real sites fit their budgets and are crawled completely.
    assert_sites_complete(&log, &web, port);
}

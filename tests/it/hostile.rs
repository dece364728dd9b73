//! The hostile web: SSRF bait in every spelling never reaches the canary
//! (another loopback address, in the deny list), redirect loops and long
//! chains end, stalls and slow bodies time out, endless and huge bodies are
//! cut at the cap and archived as truncated, resets are classified, markup
//! that would stall the parser is read up to a bound; and the rest of the
//! web is crawled completely all the same.

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};

use crate::common::*;
use trawl::config::Config;
use trawl::testweb::hostile;
use trawl::testweb::raw::{self, RawServer};
use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};

#[test]
fn hostile_server_is_survived_and_the_canary_never_connected_to() {
    let canary = TcpListener::bind("127.0.0.3:0").expect("bind a second loopback address");
    canary.set_nonblocking(true).unwrap();
    let canary_addr = canary.local_addr().unwrap();
    let web = SyntheticWeb::new(WebSpec {
        hosts: 10,
        pages_per_host: 10,
        seed: 9,
        behaviours: false,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let raw = RawServer::start().unwrap();
    let targets = hostile::Targets {
        canary: Some(canary_addr),
        raw: Some(raw.addr()),
    };
    let server = TestWebServer::start_hostile(web.clone(), listen, 2, targets).unwrap();
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    // Only 127.0.0.1 is allowed; the canary's 127.0.0.3 stays in the
    // default deny list (127.0.0.0/8).
    // A delay factor of 0.5: a timed-out request (1 s) must not cost the
    // host the usual 10 s.
    let hostile_layer = format!(
        "[politeness]\ndelay_factor = 0.5\n[fetch]\nallow_addresses = [\"127.0.0.1/32\"]\ntimeout = \"1s\"\nidle_timeout = \"400ms\"\n\
         max_body_bytes = 1048576\nmax_attempts = 2\n[parse]\nmax_links_per_page = 40\n[dns.overrides]\n\"{}\" = \"127.0.0.3\"\n",
        hostile::CANARY_HOST
    );
    let config = Config::from_layers(&[
        ("test".into(), config_toml(data.path(), 20, 4)),
        ("hostile".into(), hostile_layer),
    ])
    .unwrap();
    let mut seeds = web.seeds(port);
    seeds.push(format!("http://{}:{port}/", hostile::HOST));
    let (_, metrics) = crawl_with_metrics(config.clone(), seeds);
    let log = server.log().records();
    server.stop();

    // Not one connection reached the canary.
    match canary.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the canary was connected to: {other:?}"),
    }
    let errors = |kind: &str| metrics.fetch_errors.with_label_values(&[kind]).get();
    assert!(errors("ssrf_denied") > 0);

    // The rest of the web is complete.
    let (hostile_log, rest): (Vec<_>, Vec<_>) =
        log.into_iter().partition(|r| r.host == hostile::HOST);
    let fetched: BTreeSet<String> = page_requests(&rest, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));

    // Redirect loop: each side once. Chain: the limit of 5 redirects.
    let hits = |path: &str| hostile_log.iter().filter(|r| r.path == path).count();
    assert_eq!((hits("/loop/a"), hits("/loop/b")), (1, 1));
    for n in 0..=5 {
        assert_eq!(hits(&format!("/chain/{n}")), 1, "/chain/{n}");
    }
    assert_eq!(hits("/chain/6"), 0, "the sixth redirect is not followed");
    assert_eq!(metrics.redirects.with_label_values(&["too_many"]).get(), 1);

    // Stalls and slow bodies time out (and are retried once); a broken
    // connection is a reset; nothing of them is archived.
    for path in ["/stall", "/silent-body", "/slow-body", "/reset"] {
        assert_eq!(hits(path), 2, "{path}: attempted twice");
    }
    assert!(errors("timeout") >= 6, "{}", errors("timeout"));
    // /reset, /premature-eof and /bad-chunked, twice each.
    assert_eq!(errors("reset"), 6);
    let events = page_events(&config);
    let base = format!("http://{}:{port}", hostile::HOST);
    for path in ["/stall", "/silent-body", "/slow-body", "/reset"] {
        assert!(
            !events.iter().any(|e| e.url == format!("{base}{path}")),
            "{path}"
        );
    }

    // Each step of the redirect chain names the URL that redirected to
    // it and is one `R` further from its seed than that one.
    let event_of = |path: String| {
        let url = format!("{base}{path}");
        events
            .iter()
            .find(|e| e.url == url)
            .unwrap_or_else(|| panic!("{url} archived"))
    };
    for n in 1..=5 {
        let (e, before) = (
            event_of(format!("/chain/{n}")),
            event_of(format!("/chain/{}", n - 1)),
        );
        assert_eq!(e.via.as_deref(), Some(before.url.as_str()), "/chain/{n}");
        assert_eq!(e.hop.as_deref(), Some("redirect"), "/chain/{n}");
        let hops = before.hops.clone().unwrap() + "R";
        assert_eq!(e.hops.as_deref(), Some(hops.as_str()), "/chain/{n}");
    }

    // Broken pages still yield their links; a page of 200,000 links gives
    // the per-page cap of them.
    for path in ["/after-mislabelled", "/after-bad-utf8", "/after-malformed"] {
        assert_eq!(hits(path), 1, "{path}");
    }
    let many = hostile_log
        .iter()
        .filter(|r| r.path.starts_with("/l/"))
        .count();
    assert_eq!(many, 40);

    // Markup that would take html5ever's tree builder minutes. The
    // default reader (html5ever's tokenizer alone) reads deep nesting
    // whole, in linear time: the links before and after it are followed
    // and nothing is cut. A tag with too many attributes (quadratic in the
    // tokenizer too) is a bound for both readers: the link before it is
    // followed, none after it, the page is archived and the cut counted.
    assert_eq!(
        (hits("/after-deep-nesting"), hits("/past-deep-nesting")),
        (1, 1)
    );
    assert_eq!(metrics.parse_cuts.with_label_values(&["depth"]).get(), 0);
    assert_eq!(
        (
            hits("/after-many-attributes"),
            hits("/past-many-attributes")
        ),
        (1, 0)
    );
    for path in ["/deep-nesting", "/many-attributes"] {
        assert!(events
            .iter()
            .any(|e| e.url == format!("{base}{path}") && e.status == 200));
    }
    let cuts = metrics.parse_cuts.with_label_values(&["attributes"]).get();
    assert_eq!(cuts, 1);

    // The gzip bomb is decoded for parsing only up to the cap: its link is
    // found and followed.
    assert_eq!(hits("/gzip-bomb"), 1);
    assert_eq!(hits("/after-bomb"), 1);
    assert_eq!(hits("/brotli-bomb"), 1);
    assert_eq!(hits("/after-brotli-bomb"), 1);

    // The raw server's protocol violations: HTTP/1.0 is read (its link
    // followed); a premature EOF, broken chunking and stalled headers fail
    // and are archived never.
    let raw_url = |path: &str| format!("http://{}:{}{path}", raw::HOST, raw.addr().port());
    for path in [
        "/premature-eof",
        "/bad-chunked",
        "/stalled-headers",
        "/big-headers",
        "/endless-headers",
    ] {
        assert!(
            !events.iter().any(|e| e.url == raw_url(path)),
            "{path} archived"
        );
    }
    assert!(events
        .iter()
        .any(|e| e.url == raw_url("/http10") && e.status == 200));
    // Oversized heads (over our cap; over the parser's) are too_large, and
    // not retried: they would be as large next time.
    assert_eq!(errors("too_large"), 2);
    assert!(events
        .iter()
        .any(|e| e.url == raw_url("/http10-link") && e.status == 404));

    // Endless and huge bodies: cut at the cap, archived as truncated.
    for path in ["/endless", "/big"] {
        let event = events
            .iter()
            .find(|e| e.url == format!("{base}{path}"))
            .unwrap_or_else(|| panic!("{path} archived"));
        let record = record_at(&config, event);
        assert!(record.contains("\r\nWARC-Truncated: length\r\n"), "{path}");
        assert!(record.len() < 1_100_000, "{path}: {} bytes", record.len());
    }
    warcio_check(&warc_files(&config));
}

#[test]
fn non_html_is_archived_unless_configured_not_to_be_and_never_parsed() {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 1,
        pages_per_host: 2,
        seed: 1,
        behaviours: false,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start_hostile(web, listen, 1, Default::default()).unwrap();
    let port = server.addr().port();
    let base = format!("http://{}:{port}", hostile::HOST);
    let seeds = vec![format!("{base}/data.bin"), format!("{base}/malformed")];
    for archive_non_html in [true, false] {
        let data = tempfile::tempdir().unwrap();
        let config = Config::from_layers(&[
            ("test".into(), config_toml(data.path(), 5, 1)),
            (
                "types".into(),
                format!("[fetch]\narchive_non_html = {archive_non_html}\n"),
            ),
        ])
        .unwrap();
        let (_, metrics) = crawl_with_metrics(config.clone(), seeds.clone());
        let events = page_events(&config);
        let archived = events.iter().any(|e| e.url.ends_with("/data.bin"));
        assert_eq!(archived, archive_non_html);
        assert!(events.iter().any(|e| e.url.ends_with("/malformed")));
        let skipped = metrics.urls.with_label_values(&["not_archived_type"]).get();
        assert_eq!(skipped, u64::from(!archive_non_html));
    }
    let log = server.log().records();
    server.stop();
    assert!(!log.iter().any(|r| r.path == "/never-followed"));
}

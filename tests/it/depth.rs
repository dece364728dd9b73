//! `[crawl] max_depth` end to end: a crawl from one seed fetches exactly
//! the pages within that many link hops, and nothing deeper.
//!
//! The web is plain (no sitemaps, redirects or robots.txt variants: a
//! sitemap entry or a redirect target has its own depth rule), and the
//! limit is 2 from a single seed, so the depth at which the crawl first
//! meets a page is its shortest link distance whatever the order of
//! discovery: every depth-1 page is a link of the one seed page, every
//! depth-2 page a link of a depth-1 page.

use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;

use crate::common::*;
use trawl::testweb::generator::Target;
use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};

const MAX_DEPTH: u32 = 2;

/// The URLs within `max_depth` hops of `seed`, by breadth-first search.
fn within(web: &SyntheticWeb, seed: Target, max_depth: u32, port: u16) -> BTreeSet<String> {
    let mut seen = BTreeSet::from([seed]);
    let mut queue = VecDeque::from([(seed, 0u32)]);
    let mut urls = BTreeSet::new();
    while let Some((target, depth)) = queue.pop_front() {
        // robots.txt rules as in the web's own ground truth: a disallowed
        // page is neither fetched nor followed.
        let Target::Page { host, id } = target else {
            urls.insert(web.url_of(target, port));
            continue;
        };
        if !web.allowed(host, id) {
            continue;
        }
        urls.insert(web.url_of(target, port));
        if depth == max_depth {
            continue;
        }
        for link in web.links(host, id, port) {
            if seen.insert(link.target) {
                queue.push_back((link.target, depth + 1));
            }
        }
    }
    urls
}

#[test]
fn max_depth_bounds_the_crawl_from_a_seed() {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 4,
        pages_per_host: 120,
        seed: 7,
        behaviours: false,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start(web.clone(), listen, 1).expect("start synthetic web");
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config_with(
        data.path(),
        0,
        4,
        &format!("[crawl]\nmax_depth = {MAX_DEPTH}\n[sitemap]\nenabled = false\n"),
    );
    let seed = Target::Page { host: 0, id: 0 };
    crawl_in_process(config, vec![web.url_of(seed, port)]);
    let log = server.log().records();
    server.stop();

    let fetched: BTreeSet<String> = page_requests(&log, port).into_keys().collect();
    let truth = within(&web, seed, MAX_DEPTH, port);
    assert_same_urls(&fetched, &truth);
    // The limit cut something off: the web goes deeper than 2 hops.
    let deeper = within(&web, seed, MAX_DEPTH + 1, port);
    assert!(
        deeper.len() > truth.len(),
        "the test web must be deeper than the limit"
    );
}

//! What a response means, decided without I/O.

use super::*;

fn response(status: u16, headers: &[(&str, &str)]) -> FetchResponse {
    FetchResponse::synthetic(status, headers, "body")
}

fn url() -> Url {
    Url::parse("http://a.test/dir/page.html").unwrap()
}

const LIMITS: RetryLimits = RetryLimits {
    max_attempts: 3,
    max_throttled_attempts: 5,
};

#[test]
fn transient_failures_and_5xx_share_max_attempts() {
    let mut a = Attempts::default();
    let err = Err(FetchError::Timeout);
    assert_eq!(classify(&err, &mut a, LIMITS), Retry::Again);
    assert_eq!(
        classify(&Ok(response(502, &[])), &mut a, LIMITS),
        Retry::Again
    );
    // The third failure is final; a 5xx response is still archived.
    assert_eq!(
        classify(&Ok(response(500, &[])), &mut a, LIMITS),
        Retry::Process
    );
    let mut a = Attempts::default();
    for _ in 0..2 {
        assert_eq!(classify(&err, &mut a, LIMITS), Retry::Again);
    }
    assert_eq!(classify(&err, &mut a, LIMITS), Retry::GiveUp);
}

#[test]
fn a_proxy_failure_is_never_charged_to_the_url() {
    let mut a = Attempts::default();
    let proxy = Err(FetchError::Proxy("proxy refused the tunnel: 502".into()));
    for _ in 0..(LIMITS.max_attempts * 4) {
        assert_eq!(classify(&proxy, &mut a, LIMITS), Retry::Again);
    }
    assert_eq!((a.failed, a.throttled), (0, 0));
    // The URL's own failures still count from zero.
    let err = Err(FetchError::Timeout);
    assert_eq!(classify(&err, &mut a, LIMITS), Retry::Again);
    assert_eq!(a.failed, 1);
}

#[test]
fn throttling_counts_apart_from_failures() {
    let mut a = Attempts::default();
    for _ in 0..4 {
        assert_eq!(
            classify(&Ok(response(429, &[])), &mut a, LIMITS),
            Retry::Again
        );
    }
    assert_eq!(a.failed, 0);
    // Failures still have their own three tries meanwhile.
    assert_eq!(
        classify(&Err(FetchError::Reset("x".into())), &mut a, LIMITS),
        Retry::Again
    );
    assert_eq!(
        classify(&Ok(response(503, &[])), &mut a, LIMITS),
        Retry::Process
    );
}

#[test]
fn failures_that_would_repeat_are_final_at_once() {
    let mut a = Attempts::default();
    let denied = Err(FetchError::SsrfDenied("10.0.0.1".into()));
    assert_eq!(classify(&denied, &mut a, LIMITS), Retry::Denied);
    for err in [
        FetchError::BadUrl("x".into()),
        FetchError::Tls("untrusted".into()),
        FetchError::TooLarge("head".into()),
    ] {
        assert_eq!(classify(&Err(err), &mut a, LIMITS), Retry::GiveUp);
    }
    assert_eq!(a, Attempts::default(), "none counted as an attempt");
}

#[test]
fn plans_follow_the_kind_and_the_status() {
    let m = Metrics::new();
    let page = EntryKind::Page;
    let sitemap = EntryKind::Sitemap { submitter: None };
    let html = response(200, &[("content-type", "text/html")]);
    let pdf = response(200, &[("content-type", "application/pdf")]);
    assert_eq!(
        plan(&sitemap, 0, &url(), &html, false, true, 5, &m),
        Plan::ReadSitemap
    );
    assert_eq!(
        plan(&sitemap, 0, &url(), &response(404, &[]), false, true, 5, &m),
        Plan::Archive { found: None }
    );
    assert_eq!(
        plan(&page, 0, &url(), &html, false, true, 5, &m),
        Plan::ParseHtml
    );
    assert_eq!(
        plan(&page, 0, &url(), &pdf, false, true, 5, &m),
        Plan::Archive { found: None }
    );
    assert_eq!(
        plan(&page, 0, &url(), &pdf, false, false, 5, &m),
        Plan::NotArchived
    );
    assert_eq!(m.urls.with_label_values(&["not_archived_type"]).get(), 1);
    assert_eq!(
        plan(&page, 0, &url(), &response(404, &[]), false, false, 5, &m),
        Plan::Archive { found: None },
        "an error page is archived whatever its type"
    );
    let not_modified = response(304, &[]);
    assert_eq!(
        plan(&page, 0, &url(), &not_modified, true, true, 5, &m),
        Plan::NotModified,
        "a 304 confirming the copy on record"
    );
    assert_eq!(
        plan(&page, 0, &url(), &not_modified, false, true, 5, &m),
        Plan::Archive { found: None },
        "a 304 with no copy on record is archived as it is"
    );
}

#[test]
fn a_redirect_target_is_a_new_url_one_hop_further_until_the_limit() {
    let m = Metrics::new();
    let moved = response(301, &[("location", "../other.html")]);
    let Plan::Archive { found: Some(c) } =
        plan(&EntryKind::Page, 4, &url(), &moved, false, true, 2, &m)
    else {
        panic!("a redirect target")
    };
    assert_eq!(c.url.as_str(), "http://a.test/other.html");
    assert_eq!((c.depth, c.priority), (4, Priority::HIGH));
    assert_eq!(c.kind, EntryKind::Redirected { hops: 1 });
    assert_eq!(c.referrer.as_deref(), Some("a.test"));
    let two = EntryKind::Redirected { hops: 2 };
    assert_eq!(
        plan(&two, 4, &url(), &moved, false, true, 2, &m),
        Plan::Archive { found: None }
    );
    assert_eq!(m.redirects.with_label_values(&["too_many"]).get(), 1);
    // No Location: nothing to follow.
    assert_eq!(
        plan(
            &EntryKind::Page,
            0,
            &url(),
            &response(302, &[]),
            false,
            true,
            2,
            &m
        ),
        Plan::Archive { found: None }
    );
}

#[test]
fn nofollow_from_the_header_or_the_page_keeps_links_unfollowed() {
    let parsed = || ParsedPage {
        links: vec![Url::parse("http://b.test/x").unwrap()],
        robots_meta: None,
        ..ParsedPage::default()
    };
    let open = page_findings(parsed(), None, &url(), 2);
    assert_eq!(open.found.len(), 1);
    assert_eq!(open.found[0].depth, 3);
    let by_header = page_findings(parsed(), Some("nofollow"), &url(), 2);
    assert!(by_header.found.is_empty());
    assert_eq!(by_header.robots_meta.as_deref(), Some("nofollow"));
    let mut meta = parsed();
    meta.robots_meta = Some("noindex, none".into());
    let by_meta = page_findings(meta, Some("noarchive"), &url(), 2);
    assert!(by_meta.found.is_empty());
    let directives = by_meta.robots_meta.unwrap();
    assert!(directives.contains("none") && directives.contains("noarchive"));
}

#[test]
fn x_robots_tag_for_another_bot_does_not_apply() {
    let resp = response(200, &[("x-robots-tag", "otherbot: nofollow")]);
    assert_eq!(header_directives(&resp, "trawl"), None);
    let ours = response(200, &[("x-robots-tag", "trawl: nofollow")]);
    assert_eq!(
        header_directives(&ours, "trawl").as_deref(),
        Some("nofollow")
    );
}

#[test]
fn robots_txt_sitemaps_or_the_default_one() {
    let robots = Url::parse("http://a.test/robots.txt").unwrap();
    let named = robots_sitemaps(&robots, &["/s1.xml".into()], RobotsStatus::Parsed, "a.test");
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].url.as_str(), "http://a.test/s1.xml");
    assert_eq!(
        named[0].kind,
        EntryKind::Sitemap {
            submitter: Some("a.test".into())
        }
    );
    // No robots.txt (a 4xx): the conventional location is tried.
    let default = robots_sitemaps(&robots, &[], RobotsStatus::Unavailable, "a.test");
    assert_eq!(default.len(), 1);
    assert_eq!(default[0].url.as_str(), "http://a.test/sitemap.xml");
    // A robots.txt that names none: none is guessed (one request saved
    // on every such host); unreachable: nothing is fetched anyway.
    for status in [RobotsStatus::Parsed, RobotsStatus::Unreachable] {
        assert!(
            robots_sitemaps(&robots, &[], status, "a.test").is_empty(),
            "{status:?}"
        );
    }
}

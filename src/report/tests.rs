use super::*;

/// An event of `kind` for `url`, answered `status`, started `at_ms` after
/// a fixed instant and taking `fetch_ms`.
fn event(kind: EventKind, url: &str, status: u16, at_ms: i64, fetch_ms: u64) -> Event {
    let start = chrono::DateTime::from_timestamp_millis(1_800_000_000_000 + at_ms).unwrap();
    Event {
        url: url.into(),
        canonical_url: None,
        fetched_at: start.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        status,
        content_type: Some("text/html; charset=utf-8".into()),
        warc_ref: None,
        content_sha256: None,
        simhash: None,
        duplicate_of: None,
        robots_meta: None,
        links_out: 0,
        links_dropped: 0,
        kind,
        depth: 0,
        score: None,
        changed: None,
        reason: None,
        file: None,
        via: None,
        hop: (kind == EventKind::Page).then(|| "seed".into()),
        hops: None,
        fetch_ms: Some(fetch_ms),
        ip: None,
        bytes: Some(100),
        mime_detected: None,
        language: None,
    }
}

/// A page found from `via` by `hop`.
fn found(url: &str, via: &str, hop: &str, status: u16, at_ms: i64) -> Event {
    Event {
        via: Some(via.into()),
        hop: Some(hop.into()),
        ..event(EventKind::Page, url, status, at_ms, 10)
    }
}

#[test]
fn hosts_count_responses_bytes_statuses_robots_and_the_delay_the_site_saw() {
    let mut r = CrawlReport::new(ReportLimits::default());
    r.record(&event(
        EventKind::Robots,
        "http://a.test/robots.txt",
        404,
        0,
        50,
    ));
    // 50 ms robots.txt, then 1,000 ms of delay before the seed.
    r.record(&event(EventKind::Page, "http://a.test/", 200, 1_050, 200));
    // 200 ms page, then 2,000 ms.
    r.record(&found(
        "http://a.test/x",
        "http://a.test/",
        "link",
        500,
        3_250,
    ));
    r.record(&event(
        EventKind::Robots,
        "http://b.test/robots.txt",
        200,
        0,
        5,
    ));
    let a = &r.hosts["a.test"];
    assert_eq!((a.responses, a.bytes), (3, 300));
    assert_eq!(a.statuses, BTreeMap::from([(200, 1), (404, 1), (500, 1)]));
    assert_eq!(
        a.robots,
        Some(RobotsAnswer {
            outcome: RobotsOutcome::Unavailable,
            status: 404
        })
    );
    assert_eq!(a.delay.samples, 2);
    assert_eq!(a.delay.min_ms, Some(1_000));
    assert_eq!(a.delay.mean_ms, Some(1_500));
    assert_eq!(
        r.hosts["b.test"].robots.unwrap().outcome,
        RobotsOutcome::Rules
    );
    assert_eq!(
        r.totals,
        Tally {
            responses: 4,
            bytes: 400
        }
    );
    assert_eq!(r.mime_types["text/html"].responses, 4);
    assert_eq!(r.status_codes[&200].responses, 2);
    assert_eq!(RobotsOutcome::of(503), RobotsOutcome::Unreachable);
    // A redirect chain's last 3xx: too many to follow.
    assert_eq!(RobotsOutcome::of(301), RobotsOutcome::Unavailable);
}

#[test]
fn a_seed_says_its_status_where_its_redirects_led_and_what_was_found_from_it() {
    let mut r = CrawlReport::new(ReportLimits::default());
    r.offered("http://a.test/", "admitted");
    r.offered("http://z.test/", "refused: out of scope");
    r.record(&event(EventKind::Page, "http://a.test/", 301, 0, 1));
    r.record(&found(
        "http://a.test/b",
        "http://a.test/",
        "redirect",
        302,
        10,
    ));
    r.record(&found(
        "http://a.test/c",
        "http://a.test/b",
        "redirect",
        200,
        20,
    ));
    for i in 0..3 {
        r.record(&found(
            &format!("http://a.test/c{i}"),
            "http://a.test/c",
            "link",
            200,
            30 + i,
        ));
    }
    // Found from a page the seed led to, not from the seed: not counted.
    r.record(&found(
        "http://a.test/deep",
        "http://a.test/c0",
        "link",
        200,
        40,
    ));
    let removed = Event {
        reason: Some("gone".into()),
        ..event(EventKind::Removed, "http://a.test/", 404, 50, 0)
    };
    r.record(&removed);
    let a = &r.seeds["http://a.test/"];
    assert_eq!(a.offered.as_deref(), Some("admitted"));
    assert_eq!(a.status, Some(301));
    assert_eq!(a.led_to.as_deref(), Some("http://a.test/c"));
    assert_eq!(a.led_to_status, Some(200));
    assert_eq!(a.found, 3);
    assert_eq!(a.removed.as_deref(), Some("gone"));
    assert_eq!(r.hosts["a.test"].removed, 1);
    let z = &r.seeds["http://z.test/"];
    assert_eq!((z.status, z.found), (None, 0));
    let text = r.to_string();
    assert!(text.contains("refused"), "{text}");
    assert!(
        text.contains("http://a.test/c (200); removed: gone"),
        "{text}"
    );
}

#[test]
fn hosts_and_seeds_past_the_caps_are_summed_not_listed() {
    let limits = ReportLimits {
        max_hosts: 2,
        max_seeds: 1,
    };
    let mut r = CrawlReport::new(limits);
    for host in ["a", "b", "c", "d", "a"] {
        r.record(&event(
            EventKind::Page,
            &format!("http://{host}.test/"),
            200,
            0,
            1,
        ));
    }
    assert_eq!(r.hosts.keys().collect::<Vec<_>>(), ["a.test", "b.test"]);
    assert_eq!(r.hosts["a.test"].responses, 2);
    assert_eq!(r.other_hosts.as_ref().unwrap().responses, 2);
    assert_eq!(r.seeds.len(), 1);
    assert_eq!(r.seeds_not_listed, 3);
    assert_eq!(r.totals.responses, 5);
}

#[test]
fn merged_reports_add_up_and_an_events_file_folds_to_the_same_report() {
    let events = [
        event(EventKind::Robots, "http://a.test/robots.txt", 200, 0, 10),
        event(EventKind::Page, "http://a.test/", 200, 1_000, 10),
        found("http://a.test/1", "http://a.test/", "link", 404, 2_000),
        event(EventKind::Page, "http://b.test/", 200, 0, 10),
    ];
    let mut whole = CrawlReport::new(ReportLimits::default());
    let (mut first, mut second) = (whole.clone(), whole.clone());
    for (i, e) in events.iter().enumerate() {
        whole.record(e);
        (if i < 3 { &mut first } else { &mut second }).record(e);
    }
    first.merge(&second);
    assert_eq!(first.hosts, whole.hosts);
    // One host's delays measured on two nodes (or runs) add up.
    let (mut one, mut two) = (CrawlReport::default(), CrawlReport::default());
    one.record(&event(EventKind::Page, "http://d.test/1", 200, 0, 10));
    one.record(&event(EventKind::Page, "http://d.test/2", 200, 1_000, 10));
    two.record(&event(EventKind::Page, "http://d.test/3", 200, 5_000, 10));
    two.record(&event(EventKind::Page, "http://d.test/4", 200, 5_510, 10));
    one.merge(&two);
    let d = &one.hosts["d.test"].delay;
    assert_eq!((d.samples, d.min_ms, d.mean_ms), (2, Some(500), Some(745)));
    assert_eq!(first.totals, whole.totals);
    assert_eq!(first.status_codes, whole.status_codes);
    assert_eq!(first.seeds, whole.seeds);

    let mut file: Vec<u8> = Vec::new();
    for e in &events {
        file.extend(serde_json::to_vec(e).unwrap());
        file.push(b'\n');
    }
    // A torn last line, cut inside a character.
    file.extend(&"{\"url\": \"é".as_bytes()[..10]);
    let mut folded = CrawlReport::new(ReportLimits::default());
    assert_eq!(folded.fold_lines(&file[..]).unwrap(), 1);
    assert_eq!(folded.hosts, whole.hosts);
    assert_eq!(folded.seeds, whole.seeds);
    let json = serde_json::to_value(&folded).unwrap();
    assert_eq!(json["hosts"]["a.test"]["responses"], 3);
    assert_eq!(json["hosts"]["a.test"]["statuses"]["404"], 1);
    assert_eq!(json["status_codes"]["200"]["responses"], 3);
}

#[test]
fn the_frontier_lists_hosts_by_queued_urls() {
    use crate::frontier::listing::Condition;
    let row = |host: &str, queued| HostRow {
        host: host.into(),
        state: Condition::Waiting,
        queued,
        in_flight: 0,
        wait_ms: 0,
        failures: 0,
        fetched: 0,
        errors: 0,
        response_ms: None,
        slowed: false,
    };
    let page = HostPage {
        total: 5,
        hosts: vec![row("a.test", 7), row("b.test", 3)],
    };
    let r = CrawlReport::default().with_frontier(page);
    assert_eq!(r.frontier.as_ref().unwrap().queued, 10);
    let text = r.to_string();
    assert!(text.contains("frontier: 10 URLs queued"), "{text}");
    assert!(
        text.find("a.test").unwrap() < text.find("b.test").unwrap(),
        "{text}"
    );
}

#[test]
fn what_a_hostile_server_sends_keeps_the_report_small() {
    let mut r = CrawlReport::new(ReportLimits::default());
    for i in 0..(MAX_MIME_TYPES + 50) as u16 {
        let e = Event {
            content_type: Some(format!("x/{i}{}", "y".repeat(500))),
            ..event(
                EventKind::Page,
                "http://a.test/",
                100 + (i % 500),
                i64::from(i),
                1,
            )
        };
        r.record(&e);
    }
    assert_eq!(r.mime_types.len(), MAX_MIME_TYPES + 1, "the rest are other");
    assert!(r.mime_types.contains_key("other"));
    assert!(r
        .mime_types
        .keys()
        .all(|m| m.chars().count() <= MAX_MIME_LEN));
    let statuses = &r.hosts["a.test"].statuses;
    assert!(statuses.len() <= MAX_HOST_STATUSES + 5, "{statuses:?}");
    assert_eq!(statuses.values().sum::<u64>(), (MAX_MIME_TYPES + 50) as u64);
}

#[test]
fn idle_time_and_hosts_past_the_cap_are_no_politeness_delay() {
    let limits = ReportLimits {
        max_hosts: 1,
        max_seeds: 10,
    };
    let mut r = CrawlReport::new(limits);
    let idle = IDLE_GAP_MS as i64 + 1_000;
    r.record(&event(EventKind::Page, "http://a.test/1", 200, 0, 10));
    r.record(&event(EventKind::Page, "http://a.test/2", 200, 1_010, 10));
    r.record(&event(
        EventKind::Page,
        "http://a.test/3",
        200,
        1_020 + idle,
        10,
    ));
    let a = &r.hosts["a.test"];
    assert_eq!(
        (a.delay.samples, a.delay.min_ms, a.delay.mean_ms),
        (1, Some(1_000), Some(1_000))
    );
    // Two other hosts a millisecond apart: no delay of anyone's.
    r.record(&event(EventKind::Page, "http://b.test/", 200, 5, 1));
    r.record(&event(EventKind::Page, "http://c.test/", 200, 7, 1));
    let other = r.other_hosts.as_ref().unwrap();
    assert_eq!((other.responses, other.delay.samples), (2, 0));
}

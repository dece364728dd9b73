//! Crawl reports: `trawl run` writes `report.json`, `report.txt` and
//! `summary.json` at its end, and the report agrees with the events the
//! run wrote (hosts, statuses, robots outcome, MIME types, seeds and what
//! each led to, the delay each host saw); `trawl report` folds the events
//! file to the same report; the admin API serves it (with the frontier of
//! what is queued) as JSON and text, and `trawl ctl report` prints it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use serde_json::Value;
use trawl::actors::messages::{GetReport, SetControls};
use trawl::actors::{Shutdown, WhenIdle};
use trawl::admin::Access;
use trawl::events::{Event, EventKind};

const MIN_DELAY_MS: u64 = 40;

fn host_of(url: &str) -> String {
    url::Url::parse(url).unwrap().host_str().unwrap().to_owned()
}

/// The responses of each host in `events`, by status.
fn statuses_by_host(events: &[Event]) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut hosts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind != EventKind::Removed) {
        let host = url::Url::parse(&e.url)
            .unwrap()
            .host_str()
            .unwrap()
            .to_owned();
        *hosts
            .entry(host)
            .or_default()
            .entry(e.status.to_string())
            .or_default() += 1;
    }
    hosts
}

#[test]
fn a_run_writes_its_report_beside_its_summary_and_the_report_agrees_with_the_events() {
    let (web, server) = start_web(4, 10, 23);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config_path = data.path().join("trawl.toml");
    std::fs::write(&config_path, config_toml(data.path(), MIN_DELAY_MS, 2)).unwrap();
    let config = config(data.path(), MIN_DELAY_MS, 2);
    let seeds = web.seeds(port);
    let refused = format!("http://site0000.test:{port}/logo.png");
    let seeds_path = data.path().join("seeds.txt");
    std::fs::write(&seeds_path, format!("{}\n{refused}\n", seeds.join("\n"))).unwrap();
    let mut run = spawn_run(&config_path, &seeds_path);
    assert!(wait_exit(&mut run, Duration::from_secs(120)).success());
    server.stop();

    let dir = data.path().join("reports");
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended"], "idle", "{summary}");

    let events = events(&config);
    let responses: Vec<&Event> = events
        .iter()
        .filter(|e| e.kind != EventKind::Removed)
        .collect();
    assert_eq!(report["totals"]["responses"], responses.len() as u64);
    let bytes: u64 = responses.iter().map(|e| e.bytes.unwrap()).sum();
    assert_eq!(report["totals"]["bytes"], bytes);
    // Each host's statuses are its events'; its robots outcome is its
    // robots.txt answer's; the delay it saw is at least the floor.
    for (host, statuses) in statuses_by_host(&events) {
        let row = &report["hosts"][&host];
        let reported: BTreeMap<String, u64> =
            serde_json::from_value(row["statuses"].clone()).unwrap();
        assert_eq!(reported, statuses, "{host}");
        let robots = events
            .iter()
            .rfind(|e| e.kind == EventKind::Robots && host_of(&e.url) == host)
            .map(|e| e.status);
        assert_eq!(
            row["robots"]["status"].as_u64().map(|s| s as u16),
            robots,
            "{host}"
        );
        if let Some(min) = row["delay"]["min_ms"].as_u64() {
            // Millisecond rounding of the start and the fetch time.
            assert!(min + 3 >= MIN_DELAY_MS, "{host} saw {min} ms: {row}");
        }
        assert!(text.contains(&host), "{text}");
    }
    assert!(report["hosts"]
        .as_object()
        .unwrap()
        .values()
        .any(|h| h["delay"]["samples"].as_u64() > Some(0)));
    let html = &report["mime_types"]["text/html"]["responses"];
    let html_events = responses
        .iter()
        .filter(|e| {
            e.content_type
                .as_deref()
                .is_some_and(|c| c.starts_with("text/html"))
        })
        .count();
    assert_eq!(html, html_events as u64);
    // Every seed is listed with what became of it; a fetched seed with
    // its status and the URLs found on it and fetched.
    let seeds_report = report["seeds"].as_object().unwrap();
    assert_eq!(seeds_report.len(), seeds.len() + 1);
    assert!(seeds_report[&refused]["offered"]
        .as_str()
        .unwrap()
        .starts_with("refused"));
    let by_url: BTreeMap<&str, &Event> = events.iter().map(|e| (e.url.as_str(), e)).collect();
    for seed in &seeds {
        let row = &seeds_report[seed];
        assert_eq!(row["offered"], "admitted", "{seed}");
        let Some(event) = by_url.get(seed.as_str()) else {
            assert!(row["status"].is_null(), "{seed} was not fetched: {row}");
            continue;
        };
        assert_eq!(row["status"], event.status, "{seed}");
        let mut roots = BTreeSet::from([seed.as_str()]);
        roots.extend(row["led_to"].as_str());
        let found = events
            .iter()
            .filter(|e| e.kind == EventKind::Page && e.hop.as_deref() != Some("redirect"))
            .filter(|e| e.via.as_deref().is_some_and(|v| roots.contains(v)))
            .count();
        assert_eq!(row["found"], found as u64, "{seed}");
        assert!(found > 0 || event.status != 200, "{seed}: {row}");
    }
    assert!(text.contains("MIME types") && text.contains("status codes") && text.contains("seeds"));

    // `trawl report` folds the events file to the same hosts and counts.
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["report", "--json"])
        .arg(config.events_file())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded: Value = serde_json::from_slice(&out.stdout).unwrap();
    for section in ["totals", "hosts", "mime_types", "status_codes"] {
        assert_eq!(folded[section], report[section], "{section}");
    }
    assert!(
        folded["seeds"][&refused].is_null(),
        "only a run knows what it refused"
    );
}

/// The answer's status, content type and body.
async fn get(url: &str) -> (u16, String, String) {
    let mut res = awc::Client::default().get(url).send().await.unwrap();
    let body = res.body().limit(16 << 20).await.unwrap();
    let content_type = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (
        res.status().as_u16(),
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[test]
fn the_admin_api_serves_the_report_with_what_is_queued_and_ctl_prints_it() {
    let (web, server) = start_web(3, 6, 5);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 2);
    let seeds = web.seeds(port);
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::with_token("t", false));
        let base = format!("http://{}", admin.addr);
        // Paused, the seeds stay queued: the frontier lists their hosts.
        node.send(SetControls {
            paused: Some(true),
            ..Default::default()
        })
        .await
        .unwrap()
        .unwrap();
        node.send(trawl::actors::Seed {
            urls: seeds.clone(),
        })
        .await
        .unwrap()
        .unwrap();
        let (code, _, body) = get(&format!("{base}/api/v1/report")).await;
        assert_eq!(code, 200, "{body}");
        let report: Value = serde_json::from_str(&body).unwrap();
        let frontier = &report["frontier"];
        assert_eq!(frontier["queued"], seeds.len() as u64, "{frontier}");
        let listed: BTreeSet<&str> = frontier["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["host"].as_str().unwrap())
            .collect();
        assert_eq!(listed.len(), seeds.len(), "{frontier}");
        assert_eq!(report["totals"]["responses"], 0);

        node.send(SetControls {
            paused: Some(false),
            ..Default::default()
        })
        .await
        .unwrap()
        .unwrap();
        node.send(WhenIdle).await.unwrap();
        let report = node.send(GetReport).await.unwrap();
        assert!(report.totals.responses > seeds.len() as u64, "{report}");
        assert_eq!(report.frontier.as_ref().unwrap().queued, 0, "{report}");
        let (code, content_type, text) = get(&format!("{base}/api/v1/report?format=text")).await;
        assert_eq!(code, 200);
        assert!(content_type.starts_with("text/plain"), "{content_type}");
        assert!(text.starts_with("crawl report: "), "{text}");
        assert!(text.contains("site0000.test"), "{text}");
        let (code, _, body) = get(&format!("{base}/api/v1/report?format=xml")).await;
        assert_eq!(code, 400, "{body}");
        assert!(body.contains("json or text"), "{body}");

        let addr = admin.addr.to_string();
        let ctl = actix_rt::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_trawl"))
                .args(["ctl", "--admin", &addr, "report"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let printed = String::from_utf8(ctl.stdout).unwrap();
        assert!(
            ctl.status.success(),
            "{}",
            String::from_utf8_lossy(&ctl.stderr)
        );
        assert!(printed.starts_with("crawl report: "), "{printed}");
        assert!(printed.contains("frontier: 0 URLs queued"), "{printed}");
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
    server.stop();
}

//! The admin API's host endpoints on a live node: a slowed host waits its
//! slow-down between requests (the server's log shows it) and keeps it
//! across a restart until lifted; a slow-down never speeds a host up;
//! listings filter, sort and page; a host's queue shows its URLs with
//! their priority; bad parameters are 400s with a code; `trawl ctl`
//! drives the same endpoints.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};
use trawl::actors::{Shutdown, WhenIdle};
use trawl::admin::Access;
use trawl::testweb::SyntheticWeb;

const TOKEN: &str = "slow-please";
/// The configured floor between requests.
const MIN_DELAY_MS: u64 = 5;
/// The slow-down asked for.
const SLOW_MS: u64 = 300;

/// The answer's status and JSON body.
async fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let method = awc::http::Method::from_bytes(method.as_bytes()).unwrap();
    let req = awc::Client::default()
        .request(method, url)
        .insert_header(("Authorization", format!("Bearer {TOKEN}")));
    let mut res = match body {
        Some(body) => req.send_json(&body).await.unwrap(),
        None => req.send().await.unwrap(),
    };
    let bytes = res.body().limit(8 << 20).await.unwrap();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (res.status().as_u16(), value)
}

/// Asks `url` until `check` holds of the answer (bounded), and gives the
/// last answer.
async fn until(url: &str, check: impl Fn(&Value) -> bool) -> Value {
    let check = &check;
    let answer = || async move { call("GET", url, None).await.1 };
    let held = eventually_async(Duration::from_secs(20), || async move {
        Some(answer().await).filter(check)
    });
    match held.await {
        Some(held) => held,
        None => answer().await,
    }
}

/// A host of `web` among the first `hosts` without a Crawl-delay (so its
/// gaps are the configured floor unless slowed).
fn plain_host(web: &SyntheticWeb, hosts: u32) -> String {
    (0..hosts)
        .map(SyntheticWeb::host_name)
        .find(|h| {
            let rule = web.politeness_rule(h, Duration::from_millis(MIN_DELAY_MS), 10.0);
            rule.min_gap < Duration::from_millis(50)
        })
        .expect("a host without a Crawl-delay")
}

#[test]
fn a_slowed_host_waits_its_slowdown_and_keeps_it_until_lifted() {
    let (web, server) = start_web(3, 6, 5);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), MIN_DELAY_MS, 2);
    let restart_config = config.clone();
    let seeds = web.seeds(port);
    let slow = plain_host(&web, 3);
    let slow_host = slow.clone();
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::with_token(TOKEN, false));
        let url = |p: &str| format!("http://{}{p}", admin.addr);
        call("POST", &url("/api/v1/crawl/pause"), None).await;
        call(
            "POST",
            &url("/api/v1/seeds"),
            Some(json!({ "urls": seeds })),
        )
        .await;
        let path = format!("/api/v1/hosts/{slow}/politeness");
        // Asking for less than the configuration gives the configuration.
        let (code, snapshot) = call(
            "PUT",
            &url(&path),
            Some(json!({ "min_delay_ms": 1, "max_in_flight": 4 })),
        )
        .await;
        assert_eq!(code, 200, "{snapshot}");
        assert_eq!(snapshot["politeness"]["min_delay_ms"], MIN_DELAY_MS);
        assert_eq!(snapshot["politeness"]["max_in_flight"], 1);
        let (code, snapshot) =
            call("PUT", &url(&path), Some(json!({ "min_delay_ms": SLOW_MS }))).await;
        assert_eq!(code, 200, "{snapshot}");
        assert_eq!(snapshot["politeness"]["min_delay_ms"], SLOW_MS);
        assert_eq!(snapshot["politeness"]["slowdown"]["min_delay_ms"], SLOW_MS);
        for (body, code) in [
            (json!({}), "bad_request"),
            (json!({ "max_in_flight": 0 }), "bad_request"),
            (json!({ "min_delay_ms": 86_400_001u64 }), "bad_request"),
            (json!({ "min_delay_ms": -1 }), "bad_json"),
            (json!({ "min_delay_ms": 5, "speed": 2 }), "bad_json"),
        ] {
            let (status, answer) = call("PUT", &url(&path), Some(body.clone())).await;
            assert_eq!(
                (status, answer["code"].clone()),
                (400, json!(code)),
                "{body}"
            );
        }
        call("POST", &url("/api/v1/crawl/resume"), None).await;
        node.send(WhenIdle).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
    // Every request to the slowed host started at least SLOW_MS after the
    // previous one ended (the server saw them later than they were sent);
    // the other hosts kept the configured floor.
    let log = server.log().records();
    let mut slowed: Vec<_> = log.iter().filter(|r| r.host == slow_host).collect();
    slowed.sort_by_key(|r| r.start);
    assert!(slowed.len() >= 4, "{} requests", slowed.len());
    for pair in slowed.windows(2) {
        let gap = pair[1].start.saturating_duration_since(pair[0].end);
        assert!(
            gap >= Duration::from_millis(SLOW_MS),
            "{} then {} after {gap:?}",
            pair[0].path,
            pair[1].path
        );
    }
    let report = audit_log(&web, &log, MIN_DELAY_MS);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // Restarted: the slow-down is still there (the host is dormant: its
    // stored state shows it) until lifted.
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } =
            Served::start(restart_config, Access::with_token(TOKEN, false));
        let url = format!("http://{}/api/v1/hosts/{slow_host}", admin.addr);
        let (_, snapshot) = call("GET", &url, None).await;
        assert_eq!(
            snapshot["politeness"]["min_delay_ms"], SLOW_MS,
            "{snapshot}"
        );
        let (code, snapshot) = call("DELETE", &format!("{url}/politeness"), None).await;
        assert_eq!(code, 200);
        assert_eq!(snapshot["politeness"]["slowdown"], Value::Null);
        assert_eq!(snapshot["politeness"]["min_delay_ms"], MIN_DELAY_MS);
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
}

#[test]
fn listings_filter_sort_and_page_and_a_hosts_queue_shows_its_urls() {
    let (web, server) = start_web(4, 5, 13);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), MIN_DELAY_MS, 2);
    let mut seeds = web.seeds(port);
    // site0000 gets three seeds (the busiest), the others one each.
    let busy = SyntheticWeb::host_name(0);
    let extra: Vec<String> = web
        .ground_truth(port)
        .into_iter()
        .filter(|u| u.contains(&format!("//{busy}:")) && !seeds.contains(u))
        .take(2)
        .collect();
    assert_eq!(extra.len(), 2);
    seeds.extend(extra.clone());
    let blocked = SyntheticWeb::host_name(3);
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::with_token(TOKEN, false));
        let url = |p: &str| format!("http://{}{p}", admin.addr);
        // Paused: every host's robots.txt request is held at the gate, its
        // seeds stay queued.
        call("POST", &url("/api/v1/crawl/pause"), None).await;
        call(
            "POST",
            &url("/api/v1/seeds"),
            Some(json!({ "urls": seeds })),
        )
        .await;
        call("PUT", &url(&format!("/api/v1/hosts/{blocked}/block")), None).await;
        let (code, page) = call("GET", &url("/api/v1/hosts?sort=queued&limit=2"), None).await;
        assert_eq!(code, 200, "{page}");
        assert_eq!(page["total"], 4, "{page}");
        let rows = page["hosts"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0]["host"].as_str(), rows[0]["queued"].clone()),
            (Some(busy.as_str()), json!(3))
        );
        let (_, next) = call(
            "GET",
            &url("/api/v1/hosts?sort=queued&limit=2&offset=2"),
            None,
        )
        .await;
        let names = |v: &Value| -> Vec<String> {
            v["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["host"].as_str().unwrap().to_owned())
                .collect()
        };
        let mut all = names(&page);
        all.extend(names(&next));
        all.sort();
        let want: Vec<String> = (0..4).map(SyntheticWeb::host_name).collect();
        assert_eq!(all, want, "pages overlap or miss hosts");
        let (_, only) = call("GET", &url("/api/v1/hosts?state=blocked"), None).await;
        assert_eq!(names(&only), std::slice::from_ref(&blocked), "{only}");
        assert_eq!(
            only["hosts"][0]["queued"], 0,
            "a blocked host's queue is dropped"
        );
        // Each unblocked host's robots.txt request is dispatched, held at
        // the gate: in flight, so active (activation runs as they come due).
        let active = until(&url("/api/v1/hosts?state=active&sort=host"), |v| {
            v["total"] == 3
        })
        .await;
        assert_eq!(active["total"], 3, "{active}");
        assert!(!names(&active).contains(&blocked), "{active}");
        // The busy host's queue: its three seeds, at seed priority, due as
        // soon as politeness allows.
        let (code, queue) = call("GET", &url(&format!("/api/v1/hosts/{busy}/queue")), None).await;
        assert_eq!(code, 200, "{queue}");
        let queued = queue["queued"].as_array().unwrap();
        assert_eq!(queued.len(), 3, "{queue}");
        assert!(queued
            .iter()
            .all(|q| q["priority"] == 0 && q["due_ms"].is_null() && q["kind"] == "page"));
        assert!(queued.iter().any(|q| q["url"] == json!(extra[0])));
        let (_, one) = call(
            "GET",
            &url(&format!("/api/v1/hosts/{busy}/queue?limit=1")),
            None,
        )
        .await;
        assert_eq!(one["queued"].as_array().unwrap().len(), 1);
        for bad in [
            "/api/v1/hosts?state=sleeping",
            "/api/v1/hosts?sort=colour",
            "/api/v1/hosts?limit=0",
            "/api/v1/hosts?limit=1001",
            "/api/v1/hosts?limit=many",
            "/api/v1/hosts?page=2",
            "/api/v1/hosts/a%20b/queue",
            "/api/v1/hosts/site0000.test/queue?limit=0",
        ] {
            let (code, answer) = call("GET", &url(bad), None).await;
            assert_eq!(code, 400, "{bad}: {answer}");
            assert!(answer["code"].is_string(), "{bad}: {answer}");
        }
        // `trawl ctl` reads and writes the same.
        let admin_addr = admin.addr.to_string();
        let ctl = |args: &[&str]| {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_trawl"));
            cmd.args(["ctl", "--admin", &admin_addr])
                .args(args)
                .env("TRAWL_ADMIN_TOKEN", TOKEN);
            actix_rt::task::spawn_blocking(move || cmd.output().unwrap())
        };
        let out = ctl(&["hosts", "--state", "blocked"]).await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() && text.contains(&blocked) && text.contains("1 of 1"),
            "{text} {out:?}"
        );
        let out = ctl(&["queue", &busy]).await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success() && text.contains(&extra[1]), "{text}");
        let out = ctl(&["slow", &busy, "--min-delay-ms", "50"]).await.unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (_, snapshot) = call("GET", &url(&format!("/api/v1/hosts/{busy}")), None).await;
        assert_eq!(snapshot["politeness"]["min_delay_ms"], 50);
        let out = ctl(&["unblock", &blocked]).await.unwrap();
        assert!(out.status.success());
        let (_, none) = call("GET", &url("/api/v1/hosts?state=blocked"), None).await;
        assert_eq!(none["total"], 0, "{none}");
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
    server.stop();
}

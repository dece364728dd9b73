//! The admin API's controls on a live node: pause holds every request at
//! the gate (the server sees none) until resume, and survives a restart;
//! seeds answer each URL's outcome; the rate is set and checked; tokens
//! guard mutations; every bad request is a 4xx with a JSON code; `trawl
//! ctl` drives the same endpoints; the OpenAPI document names them all.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};
use trawl::actors::{Shutdown, WhenIdle};
use trawl::admin::Access;

const TOKEN: &str = "let-me-in";

/// The answer's status and JSON body.
async fn call(method: &str, url: &str, token: Option<&str>, body: Body) -> (u16, Value) {
    let client = awc::Client::default();
    let method = awc::http::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = client.request(method, url);
    if let Some(token) = token {
        req = req.insert_header(("Authorization", format!("Bearer {token}")));
    }
    let mut res = match body {
        Some((content_type, bytes)) => req
            .insert_header(("Content-Type", content_type))
            .send_body(bytes)
            .await
            .unwrap(),
        None => req.send().await.unwrap(),
    };
    let bytes = res.body().limit(8 << 20).await.unwrap();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (res.status().as_u16(), value)
}

/// A request's body: content type and bytes.
type Body = Option<(&'static str, Vec<u8>)>;

/// A bad request and the status and code it must get.
type Case = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Body,
    u16,
    &'static str,
);

fn json_body(value: Value) -> Body {
    Some(("application/json", serde_json::to_vec(&value).unwrap()))
}

/// Waits (bounded) until `check` holds for the host's snapshot.
async fn until_host(base: &str, host: &str, check: impl Fn(&Value) -> bool) -> Value {
    let (url, check) = (&format!("{base}/api/v1/hosts/{host}"), &check);
    let snapshot = || async move { call("GET", url, None, None).await.1 };
    let held = eventually_async(Duration::from_secs(20), || async move {
        Some(snapshot().await).filter(check)
    });
    match held.await {
        Some(held) => held,
        None => snapshot().await,
    }
}

#[test]
fn pause_holds_every_request_until_resume_and_survives_a_restart() {
    let (web, server) = start_web(2, 3, 7);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 2);
    let log = server.log().clone();
    let seeds = web.seeds(port);
    let truth = web.ground_truth(port);
    let restart_config = config.clone();
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::with_token(TOKEN, false));
        let base = format!("http://{}", admin.addr);
        let (code, controls) = call(
            "POST",
            &format!("{base}/api/v1/crawl/pause"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!((code, controls["paused"].clone()), (200, json!(true)));
        let mut urls = seeds.clone();
        urls.push(seeds[0].clone());
        urls.push("not a url".into());
        urls.push(format!("http://site0000.test:{port}/logo.png"));
        let (code, answer) = call(
            "POST",
            &format!("{base}/api/v1/seeds"),
            Some(TOKEN),
            json_body(json!({ "urls": urls })),
        )
        .await;
        assert_eq!(code, 200, "{answer}");
        let outcomes: Vec<(&str, Option<&str>)> = answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["outcome"].as_str().unwrap(), r["reason"].as_str()))
            .collect();
        let mut expected = vec![("admitted", None); seeds.len()];
        expected.push(("seen", None));
        expected.push(("filtered", Some("invalid")));
        expected.push(("filtered", Some("extension")));
        assert_eq!(outcomes, expected, "{answer}");
        // The host's robots.txt request is dispatched (in flight) but
        // held at the gate: the server has seen nothing.
        let host = "site0000.test";
        let held = until_host(&base, host, |s| s["politeness"]["in_flight"] == 1).await;
        assert_eq!(held["politeness"]["in_flight"], 1, "{held}");
        assert!(log.records().is_empty(), "a request went out while paused");
        let (code, status) = call("GET", &format!("{base}/api/v1/status"), None, None).await;
        assert_eq!(
            (code, status["controls"]["paused"].clone()),
            (200, json!(true))
        );
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
    assert!(server.log().records().is_empty());
    // Restarted: still paused, until resumed; then the crawl completes.
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } =
            Served::start(restart_config, Access::with_token(TOKEN, false));
        let base = format!("http://{}", admin.addr);
        let (_, controls) = call("GET", &format!("{base}/api/v1/crawl"), None, None).await;
        assert_eq!(controls["paused"], true, "{controls}");
        let (code, controls) = call(
            "POST",
            &format!("{base}/api/v1/crawl/resume"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!((code, controls["paused"].clone()), (200, json!(false)));
        node.send(WhenIdle).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
    let fetched = page_requests(&server.log().records(), port);
    let fetched: std::collections::BTreeSet<String> = fetched.into_keys().collect();
    assert_same_urls(&fetched, &truth);
}

#[test]
fn bad_requests_are_4xx_with_a_code_and_tokens_guard_mutations() {
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 2);
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::with_token(TOKEN, false));
        let base = format!("http://{}", admin.addr);
        let url = |p: &str| format!("{base}{p}");
        let cases: Vec<Case> = vec![
            (
                "POST",
                "/api/v1/crawl/pause",
                None,
                None,
                401,
                "unauthorized",
            ),
            (
                "POST",
                "/api/v1/crawl/pause",
                Some("wrong"),
                None,
                401,
                "unauthorized",
            ),
            (
                "POST",
                "/api/v1/seeds",
                Some(TOKEN),
                Some(("application/json", b"{\"urls\": [".to_vec())),
                400,
                "bad_json",
            ),
            (
                "POST",
                "/api/v1/seeds",
                Some(TOKEN),
                json_body(json!({"urls": "http://a.test/"})),
                400,
                "bad_json",
            ),
            (
                "POST",
                "/api/v1/seeds",
                Some(TOKEN),
                json_body(json!({"urls": [], "extra": 1})),
                400,
                "bad_json",
            ),
            (
                "POST",
                "/api/v1/seeds",
                Some(TOKEN),
                Some(("text/plain", b"{\"urls\": []}".to_vec())),
                415,
                "unsupported_media_type",
            ),
            (
                "POST",
                "/api/v1/seeds",
                Some(TOKEN),
                Some(("application/json", vec![b' '; 2 << 20])),
                413,
                "payload_too_large",
            ),
            (
                "POST",
                "/api/v1/seeds",
                Some(TOKEN),
                json_body(json!({"urls": vec!["x"; 10_001]})),
                413,
                "payload_too_large",
            ),
            (
                "PUT",
                "/api/v1/crawl/rate",
                Some(TOKEN),
                json_body(json!({"max_requests_per_second": -1.0})),
                400,
                "bad_request",
            ),
            (
                "PUT",
                "/api/v1/crawl/rate",
                Some(TOKEN),
                json_body(json!({"max_requests_per_second": "fast"})),
                400,
                "bad_json",
            ),
            ("GET", "/api/v1/hosts/a%20b", None, None, 400, "bad_request"),
            ("GET", "/api/v1/nope", None, None, 404, "not_found"),
            (
                "DELETE",
                "/api/v1/status",
                None,
                None,
                405,
                "method_not_allowed",
            ),
            ("GET", "/api/v1/cluster", None, None, 404, "not_a_cluster"),
        ];
        for (method, path, token, body, status, code) in cases {
            let (got, answer) = call(method, &url(path), token, body).await;
            assert_eq!(
                (got, answer["code"].as_str()),
                (status, Some(code)),
                "{method} {path}: {answer}"
            );
            assert!(answer["error"].is_string(), "{answer}");
        }
        // Reads are open; a good token mutates; the rate is kept.
        let (code, _) = call("GET", &url("/api/v1/status"), None, None).await;
        assert_eq!(code, 200);
        let (code, controls) = call(
            "PUT",
            &url("/api/v1/crawl/rate"),
            Some(TOKEN),
            json_body(json!({"max_requests_per_second": 12.5})),
        )
        .await;
        assert_eq!(
            (code, controls["max_requests_per_second"].as_f64()),
            (200, Some(12.5))
        );
        let (_, controls) = call("GET", &url("/api/v1/crawl"), None, None).await;
        assert_eq!(controls["max_requests_per_second"], 12.5);
        // The document names every endpoint the server routes.
        let (code, doc) = call("GET", &url("/api/v1/openapi.json"), None, None).await;
        assert_eq!(code, 200);
        assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
        for path in [
            "/api/v1/status",
            "/api/v1/cluster",
            "/api/v1/hosts/{host}",
            "/api/v1/crawl",
            "/api/v1/crawl/pause",
            "/api/v1/crawl/resume",
            "/api/v1/crawl/rate",
            "/api/v1/seeds",
            "/api/v1/openapi.json",
        ] {
            assert!(doc["paths"][path].is_object(), "{path} missing");
        }
        // `trawl ctl` against the same node.
        let addr = admin.addr.to_string();
        let ctl = |args: Vec<String>| {
            let addr = addr.clone();
            actix_web::rt::task::spawn_blocking(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_trawl"))
                    .args(["ctl", "--admin", &addr])
                    .args(args)
                    .env("TRAWL_ADMIN_TOKEN", TOKEN)
                    .output()
                    .unwrap()
            })
        };
        let out = ctl(vec!["pause".into()]).await.unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("paused: true"));
        let out = ctl(vec!["status".into()]).await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("paused") && text.contains("partition"),
            "{text}"
        );
        let out = ctl(vec!["seed".into(), "http://a.test/".into(), "::".into()])
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("admitted") && text.contains("invalid"),
            "{text}"
        );
        let out = ctl(vec!["rate".into(), "-3".into()]).await.unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("bad_request"));
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
}

#[test]
fn a_blocked_host_is_dropped_at_once_and_stays_blocked_after_a_restart() {
    let (web, server) = start_web(3, 4, 11);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 2);
    let seeds = web.seeds(port);
    let events_config = config.clone();
    let restart_config = config.clone();
    let reseed = format!("http://site0002.test:{port}/");
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::with_token(TOKEN, false));
        let base = format!("http://{}", admin.addr);
        let url = |p: &str| format!("{base}{p}");
        call("POST", &url("/api/v1/crawl/pause"), Some(TOKEN), None).await;
        let (code, _) = call(
            "POST",
            &url("/api/v1/seeds"),
            Some(TOKEN),
            json_body(json!({ "urls": seeds })),
        )
        .await;
        assert_eq!(code, 200);
        // Blocked while its robots.txt request waits at the gate: that
        // request never goes out, and its queued seed is dropped.
        let (code, answer) = call(
            "PUT",
            &url("/api/v1/hosts/SITE0001.test/block"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!(code, 200, "{answer}");
        assert_eq!(answer["target"], "site0001.test");
        assert_eq!(
            (answer["blocked"].clone(), answer["dropped"].clone()),
            (json!(true), json!(1))
        );
        // A domain block, then its unblock: the host can be seeded again.
        let (code, answer) = call(
            "PUT",
            &url("/api/v1/domains/www.site0002.test/block"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!(
            (code, answer["kind"].clone(), answer["target"].clone()),
            (200, json!("domain"), json!("site0002.test"))
        );
        assert_eq!(answer["dropped"], 1);
        let (code, _) = call(
            "DELETE",
            &url("/api/v1/domains/site0002.test/block"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!(code, 200);
        // The seed offered again, as a restart with the same seed list
        // would: it was given as a seed before, so its removal stands.
        let (_, answer) = call(
            "POST",
            &url("/api/v1/seeds"),
            Some(TOKEN),
            json_body(json!({ "urls": [&reseed] })),
        )
        .await;
        assert_eq!(answer["results"][0]["outcome"], "seen", "{answer}");
        // Asked for: back in the crawl (as a refresh due now).
        let (_, answer) = call(
            "POST",
            &url("/api/v1/seeds"),
            Some(TOKEN),
            json_body(json!({ "urls": [&reseed], "reseed": true })),
        )
        .await;
        assert_eq!(answer["results"][0]["outcome"], "admitted", "{answer}");
        let (code, answer) =
            call("PUT", &url("/api/v1/hosts/a%20b/block"), Some(TOKEN), None).await;
        assert_eq!((code, answer["code"].clone()), (400, json!("bad_request")));
        let (code, _) = call("PUT", &url("/api/v1/hosts/site0000.test/block"), None, None).await;
        assert_eq!(code, 401);
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
    // Restarted and resumed: site0001 stays blocked (no request at all,
    // links to it are not admitted); the others are crawled in full.
    actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } =
            Served::start(restart_config, Access::with_token(TOKEN, false));
        let base = format!("http://{}", admin.addr);
        call(
            "POST",
            &format!("{base}/api/v1/crawl/resume"),
            Some(TOKEN),
            None,
        )
        .await;
        node.send(WhenIdle).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
    });
    let log = server.log().records();
    server.stop();
    assert!(
        log.iter().all(|r| r.host != "site0001.test"),
        "a blocked host was contacted"
    );
    let fetched: std::collections::BTreeSet<String> =
        page_requests(&log, port).into_keys().collect();
    let truth = web.ground_truth(port);
    for host in ["site0000.test", "site0002.test"] {
        let want: Vec<&String> = truth.iter().filter(|u| u.contains(host)).collect();
        assert!(!want.is_empty());
        assert!(
            want.iter().all(|u| fetched.contains(*u)),
            "{host} incomplete"
        );
    }
    // The dropped seeds got removed events, reason blocked.
    let removed: Vec<(String, Option<String>)> = events(&events_config)
        .into_iter()
        .filter(|e| e.kind == trawl::events::EventKind::Removed)
        .map(|e| (e.url, e.reason))
        .collect();
    let blocked = Some("blocked".to_owned());
    assert!(
        removed.contains(&(format!("http://site0001.test:{port}/"), blocked.clone())),
        "{removed:?}"
    );
    assert!(
        removed.contains(&(format!("http://site0002.test:{port}/"), blocked)),
        "{removed:?}"
    );
}

//! The admin API on a live node: Prometheus metrics, the status JSON, and
//! one host's robots.txt, politeness and queue state.

use crate::common::*;
use trawl::actors::{Seed, Shutdown, WhenIdle};
use trawl::admin::Access;
use trawl::testweb::generator::HostProfile;

#[test]
fn metrics_status_and_hosts_describe_the_crawl() {
    let (web, server) = start_web(5, 10, 3);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 4);
    let truth = web.ground_truth(port).len();
    let (metrics_text, status, hosts, errors) = actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::open());
        node.send(Seed {
            urls: web.seeds(port),
        })
        .await
        .unwrap()
        .unwrap();
        node.send(WhenIdle).await.unwrap();
        let client = awc::Client::default();
        let base = format!("http://{}", admin.addr);
        let get = |path: &str| client.get(format!("{base}{path}")).send();
        let mut res = get("/metrics").await.unwrap();
        assert_eq!(res.status(), 200);
        let metrics_text = String::from_utf8(res.body().await.unwrap().to_vec()).unwrap();
        let status: serde_json::Value = get("/api/v1/status").await.unwrap().json().await.unwrap();
        let mut hosts = Vec::new();
        for host in [
            "site0000.test",
            "SITE0002.test",
            "site0004.test",
            "nowhere.test",
        ] {
            let mut res = get(&format!("/api/v1/hosts/{host}")).await.unwrap();
            assert_eq!(res.status(), 200, "{host}");
            hosts.push(res.json::<serde_json::Value>().await.unwrap());
        }
        let errors = [
            get("/api/v1/nope").await.unwrap().status().as_u16(),
            get("/api/v1/hosts/a%20b").await.unwrap().status().as_u16(),
            // A single node is no cluster node.
            get("/api/v1/cluster").await.unwrap().status().as_u16(),
        ];
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
        (metrics_text, status, hosts, errors)
    });
    let log = server.log().records();
    server.stop();

    let value = |name: &str| -> f64 {
        metrics_text
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    // Every response the server sent is counted by status class.
    assert_eq!(value("trawl_pages_total{") as usize, log.len());
    assert_eq!(
        value("trawl_stage_seconds_count{stage=\"fetch\"}") as usize,
        log.len()
    );
    assert!(value("trawl_fetched_bytes_total") > 10_000.0 * truth as f64);
    assert_eq!(value("trawl_frontier_size"), 0.0);
    // Idle: every page fetched was archived (or settled without an
    // archive), and each took back the one it held in the backlog.
    assert!(metrics_text.contains("\ntrawl_pipeline_backlog_pages 0\n"));
    assert!(value("trawl_warc_bytes_total") > 0.0);
    assert!(value("trawl_politeness_waits_total{reason=\"delay\"}") > 0.0);
    assert_eq!(
        value("trawl_politeness_waits_total{reason=\"retry_after\"}"),
        1.0,
        "host 4 throttles once"
    );
    assert!(value("trawl_sitemap_urls_total{outcome=\"queued\"}") >= 4.0);
    assert_eq!(
        value("trawl_sitemap_urls_total{outcome=\"dropped_host\"}"),
        1.0
    );
    assert!(metrics_text.contains("trawl_active_host_actors"));

    // Completed = fetched + robots-disallowed (dequeued without a fetch).
    let disallowed = value("trawl_robots_decisions_total{outcome=\"disallowed\"}") as usize;
    assert!(disallowed > 0);
    assert_eq!(status["queued"], 0);
    let sitemaps = value("trawl_sitemap_urls_total{outcome=\"queued\"}") as usize;
    let completed = status["completed"].as_u64().unwrap() as usize;
    // Sitemap files are queue entries too (one per host that names one
    // or has no robots.txt, 404 or not).
    let sitemap_files = (0..5)
        .filter(|&h| HostProfile::of(h).asks_for_a_sitemap())
        .count();
    assert_eq!(
        sitemap_files, 3,
        "site 0 names one; 2 (a 403) and 3 (a 404) have none"
    );
    assert_eq!(
        completed,
        truth + disallowed + sitemap_files,
        "{sitemaps} sitemap urls"
    );
    assert_eq!(status["partitions"].as_array().unwrap().len(), 4);

    let site0 = &hosts[0];
    assert_eq!(site0["robots"][0]["status"], "parsed");
    assert_eq!(site0["robots"][0]["rules"], 2);
    let sitemap = format!("http://site0000.test:{port}/sitemap.xml");
    assert_eq!(site0["robots"][0]["sitemaps"][0], sitemap.as_str());
    assert_eq!(site0["queued_by_priority"], serde_json::json!([0, 0, 0, 0]));
    assert_eq!(site0["politeness"]["in_flight"], 0);
    assert_eq!(
        hosts[1]["host"], "site0002.test",
        "names are case-insensitive"
    );
    assert_eq!(hosts[1]["robots"][0]["status"], "unavailable");
    assert_eq!(hosts[1]["robots"][0]["http_status"], 403);
    assert_eq!(
        hosts[2]["politeness"]["failures"], 0,
        "a success clears the 429"
    );
    assert_eq!(
        hosts[3]["robots"],
        serde_json::json!([]),
        "unknown host: empty state"
    );
    assert_eq!(errors, [404, 400, 404]);
}

//! The admin API on a live node: Prometheus metrics and the status JSON.

mod common;

use std::sync::Arc;

use common::*;
use trawl::actors::{Node, Seed, Shutdown, WhenIdle};
use trawl::metrics::Metrics;

#[test]
fn metrics_and_status_describe_the_crawl() {
    let (web, server) = start_web(5, 10, 3);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config(data.path(), 5, 4);
    let truth = web.ground_truth(port).len();
    let (metrics_text, status, missing) = actix_rt::System::new().block_on(async move {
        let metrics = Arc::new(Metrics::new());
        let node = Node::start(config, metrics.clone()).unwrap();
        let admin = trawl::admin::start("127.0.0.1:0", node.clone(), metrics).unwrap();
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
        let mut res = get("/api/v1/status").await.unwrap();
        assert_eq!(res.status(), 200);
        let status: serde_json::Value = res.json().await.unwrap();
        let missing = get("/api/v1/nope").await.unwrap().status();
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
        (metrics_text, status, missing)
    });
    server.stop();

    let value = |name: &str| -> f64 {
        metrics_text
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in\n{metrics_text}"))
    };
    // Pages plus the robots.txt of each host (host 3 answers 404).
    let responses =
        value("trawl_pages_total{class=\"2xx\"}") + value("trawl_pages_total{class=\"4xx\"}");
    assert_eq!(responses as usize, truth + 5);
    assert!(value("trawl_fetched_bytes_total") > 10_000.0 * truth as f64);
    assert_eq!(
        value("trawl_fetch_duration_seconds_count") as usize,
        truth + 5
    );
    assert_eq!(value("trawl_frontier_size"), 0.0);
    assert!(value("trawl_warc_bytes_total") > 0.0);
    assert!(metrics_text.contains("trawl_active_host_actors"));
    assert_eq!(status["queued"], 0);
    // Completed = fetched + robots-disallowed (dequeued without a fetch).
    let disallowed = value("trawl_robots_decisions_total{outcome=\"disallowed\"}") as usize;
    assert!(disallowed > 0);
    assert_eq!(
        status["completed"].as_u64().unwrap() as usize,
        truth + disallowed
    );
    assert_eq!(status["partitions"].as_array().unwrap().len(), 4);
    assert_eq!(missing, 404);
}

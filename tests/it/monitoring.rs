//! The shipped monitoring setup works out of the box: a real Prometheus
//! (the Debian package, which `scripts/setup.sh` installs), started on
//! `config/monitoring/prometheus.yml` pointed at two crawling cluster
//! nodes' admin servers, scrapes them through a crawl, and every query of
//! `config/monitoring/grafana-dashboard.json` returns data over it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use trawl::actors::{GetStatus, Seed, Shutdown};
use trawl::config::Config;
use trawl::metrics::Metrics;
use trawl::testweb::dupes;

const PARTITIONS: u16 = 8;
const MIN_DELAY_MS: u64 = 20;
/// How often the test's Prometheus scrapes (the shipped file says 15s).
const SCRAPE_INTERVAL: &str = "250ms";
/// What `$__rate_interval` stands for: a few scrapes.
const RATE_INTERVAL: &str = "5s";
/// Scrapes of each node, at least, before the dashboard is queried.
const MIN_SCRAPES: f64 = 8.0;

/// A running Prometheus, killed when dropped (a failing test included).
struct Prometheus {
    child: Child,
    base: String,
    _data: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Prometheus binary: `TRAWL_PROMETHEUS`, or the Debian package's.
fn prometheus_binary() -> PathBuf {
    let path = std::env::var_os("TRAWL_PROMETHEUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus"));
    assert!(
        path.is_file(),
        "no Prometheus at {}: run `TRAWL_NEED_PROMETHEUS=1 source scripts/setup.sh` \
         (or `apt-get install prometheus`), or set TRAWL_PROMETHEUS",
        path.display()
    );
    path
}

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The shipped `prometheus.yml`, scraping `targets` every
/// [`SCRAPE_INTERVAL`].
fn prometheus_config(targets: &[SocketAddr]) -> String {
    let shipped = std::fs::read_to_string(repo_file("config/monitoring/prometheus.yml")).unwrap();
    let default_target = r#"- targets: ["127.0.0.1:9090"]"#;
    let interval = "  scrape_interval: 15s";
    assert!(shipped.contains(default_target) && shipped.contains(interval));
    let list: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
    shipped
        .replace(default_target, &format!("- targets: [{}]", list.join(", ")))
        .replace(interval, &format!("  scrape_interval: {SCRAPE_INTERVAL}"))
}

/// The alert names of the shipped `alerts.yml`, in order.
fn shipped_alerts() -> Vec<String> {
    let text = std::fs::read_to_string(repo_file("config/monitoring/alerts.yml")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect()
}

/// `promtool`: `TRAWL_PROMTOOL`, or the Debian package's (it comes with
/// Prometheus).
fn promtool() -> PathBuf {
    let path = std::env::var_os("TRAWL_PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/promtool"));
    assert!(path.is_file(), "no promtool at {}", path.display());
    path
}

#[test]
fn the_alert_rules_are_valid_and_pass_their_unit_tests() {
    let alerts = shipped_alerts();
    assert!(alerts.len() >= 10, "{alerts:?}");
    // Each rule's runbook_url is a section of docs/operations.md (the
    // anchor of a `### Name` heading is its name in lower case).
    let rules = std::fs::read_to_string(repo_file("config/monitoring/alerts.yml")).unwrap();
    let anchors: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: \"docs/operations.md#"))
        .map(|a| a.trim_end_matches('"'))
        .collect();
    assert_eq!(anchors.len(), alerts.len(), "a runbook_url per alert");
    let operations = std::fs::read_to_string(repo_file("docs/operations.md")).unwrap();
    let sections: Vec<String> = operations
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::to_lowercase)
        .collect();
    for anchor in anchors {
        assert!(
            sections.iter().any(|s| s == anchor),
            "no runbook section for #{anchor} in docs/operations.md"
        );
    }
    for args in [
        ["check", "rules", "config/monitoring/alerts.yml"],
        ["test", "rules", "config/monitoring/alerts_test.yml"],
    ] {
        let out = Command::new(promtool())
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run promtool");
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn free_tcp() -> SocketAddr {
    crate::common::reserved_port()
}

/// Starts Prometheus scraping `targets`, on a free loopback port.
fn start_prometheus(targets: &[SocketAddr]) -> Prometheus {
    let binary = prometheus_binary();
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("prometheus.yml");
    std::fs::write(&config, prometheus_config(targets)).unwrap();
    // The shipped rules, where the shipped config names them.
    std::fs::copy(
        repo_file("config/monitoring/alerts.yml"),
        data.path().join("alerts.yml"),
    )
    .unwrap();
    let listen = free_tcp();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            data.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={listen}"))
        .arg("--log.level=warn")
        .spawn()
        .expect("start prometheus");
    Prometheus {
        child,
        base: format!("http://{listen}"),
        _data: data,
    }
}

/// Every query of the dashboard (`targets[].expr` of every panel, rows'
/// nested panels included), with its variables given concrete values.
fn dashboard_queries() -> Vec<String> {
    let text = std::fs::read_to_string(repo_file("config/monitoring/grafana-dashboard.json"))
        .expect("the dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut exprs = Vec::new();
    collect_exprs(&dashboard["panels"], &mut exprs);
    exprs
        .into_iter()
        .map(|e| {
            let q = e
                .replace("$__rate_interval", RATE_INTERVAL)
                .replace("$node", ".*");
            assert!(!q.contains('$'), "a variable left in {q}");
            q
        })
        .collect()
}

fn collect_exprs(panels: &serde_json::Value, out: &mut Vec<String>) {
    for panel in panels.as_array().expect("a panel list") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push(target["expr"].as_str().expect("a target's expr").to_owned());
        }
        if panel["panels"].is_array() {
            collect_exprs(&panel["panels"], out);
        }
    }
}

fn node_config(id: &str, data: &Path, gossip: SocketAddr, peer: SocketAddr) -> Config {
    let bridge = crate::common::ANY_BRIDGE;
    crate::common::config_with(
        data,
        MIN_DELAY_MS,
        PARTITIONS,
        &format!(
            "[cluster]\nenabled = true\ncluster_id = \"test\"\nnode_id = \"{id}\"\n\
             gossip = \"{gossip}\"\nbridge = \"{bridge}\"\npeers = [\"{peer}\"]\n\
             gossip_interval = \"100ms\"\n{auth}",
            auth = crate::common::cluster_auth(id),
        ),
    )
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A Prometheus API call's `data`; `None` while Prometheus does not answer
/// (starting up).
async fn api(client: &awc::Client, url: &str) -> Option<serde_json::Value> {
    let mut res = client.get(url).send().await.ok()?;
    if !res.status().is_success() {
        let body = res.body().await.unwrap_or_default();
        panic!("{url}: {} {}", res.status(), String::from_utf8_lossy(&body));
    }
    let body: serde_json::Value = res.json().limit(64 << 20).await.ok()?;
    assert_eq!(body["status"], "success", "{url}: {body}");
    Some(body["data"].clone())
}

fn query_url(base: &str, path: &str, params: &[(&str, String)]) -> String {
    let mut url = url::Url::parse(&format!("{base}{path}")).unwrap();
    url.query_pairs_mut().extend_pairs(params);
    url.to_string()
}

/// The values of an instant vector query (none while Prometheus is not up).
async fn instant(client: &awc::Client, base: &str, query: &str) -> Vec<f64> {
    let url = query_url(base, "/api/v1/query", &[("query", query.to_owned())]);
    let Some(data) = api(client, &url).await else {
        return Vec::new();
    };
    data["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
        .collect()
}

/// Polls `done` until it holds; false after `limit`.
async fn wait_for<F, Fut>(limit: Duration, mut done: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let held = crate::common::eventually_async(limit, || {
        let done = done();
        async move { done.await.then_some(()) }
    });
    held.await.is_some()
}

/// Whether every target of `base` is up, scraped at least `scrapes` times
/// and last scraped after `after` (Unix seconds).
async fn scraped(
    client: &awc::Client,
    base: &str,
    targets: usize,
    scrapes: f64,
    after: f64,
) -> bool {
    let counts = instant(client, base, "count_over_time(up{job=\"trawl\"}[1h])").await;
    let up = instant(client, base, "up{job=\"trawl\"}").await;
    let last = instant(client, base, "timestamp(up{job=\"trawl\"})").await;
    counts.len() == targets
        && counts.iter().all(|&n| n >= scrapes)
        && up.iter().all(|&v| v == 1.0)
        && last.len() == targets
        && last.iter().all(|&t| t > after)
}

/// One dashboard query's series over `[start, end]`.
async fn range(
    client: &awc::Client,
    base: &str,
    query: &str,
    start: f64,
    end: f64,
) -> Vec<serde_json::Value> {
    let url = query_url(
        base,
        "/api/v1/query_range",
        &[
            ("query", query.to_owned()),
            ("start", format!("{start:.3}")),
            ("end", format!("{end:.3}")),
            ("step", "1".to_owned()),
        ],
    );
    let data = api(client, &url).await.expect("Prometheus answers");
    data["result"].as_array().unwrap().clone()
}

/// The largest number among a range result's values (NaN left out).
fn max_value(series: &[serde_json::Value]) -> f64 {
    series
        .iter()
        .flat_map(|s| s["values"].as_array().unwrap().iter())
        .filter_map(|v| v[1].as_str()?.parse::<f64>().ok())
        .filter(|v| !v.is_nan())
        .fold(f64::NEG_INFINITY, f64::max)
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_prometheus() {
    let queries = dashboard_queries();
    for metric in [
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "trawl_stage_seconds_bucket",
        "trawl_partition_queued_urls",
        "trawl_partition_active_hosts",
        "trawl_bridge_batches_total",
        "trawl_refresh_due_urls",
    ] {
        assert!(
            queries.iter().any(|q| q.contains(metric)),
            "no dashboard query reads {metric}"
        );
    }
    let (web, server) = crate::common::start_web(8, 30, 11);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let (g1, g2) = (crate::common::gossip_addr(), crate::common::gossip_addr());
    let c1 = node_config("n1", data.path(), g1, g2);
    let c2 = node_config("n2", data.path(), g2, g1);
    let ((l1, a1), (l2, a2)) = (
        crate::common::admin_listener(),
        crate::common::admin_listener(),
    );
    let admins = [a1, a2];
    let prometheus = start_prometheus(&admins);
    let truth = web.ground_truth(port);
    let log = server.log().clone();
    let mut seeds = web.seeds(port);
    // Mirrored pages: exact duplicates for the dashboard's panel.
    seeds.push(format!("http://{}:{port}/", dupes::HUB));

    actix_rt::System::new().block_on(async move {
        let (m1, m2) = (
            Arc::new(Metrics::for_node(Some("n1"))),
            Arc::new(Metrics::for_node(Some("n2"))),
        );
        let crate::common::Served {
            node: node1,
            admin: admin1,
            ..
        } = crate::common::Served::start_on(c1, l1, m1);
        let crate::common::Served {
            node: node2,
            admin: admin2,
            ..
        } = crate::common::Served::start_on(c2, l2, m2);
        let client = awc::Client::builder()
            .timeout(Duration::from_secs(10))
            .finish();
        let base = prometheus.base.clone();
        let (client, base, n1, n2) = (&client, base.as_str(), &node1, &node2);
        let (truth, log) = (&truth, &log);

        // Both nodes hold partitions, and Prometheus scrapes both.
        let split = wait_for(Duration::from_secs(30), move || async move {
            let (s1, s2) = (
                n1.send(GetStatus).await.unwrap(),
                n2.send(GetStatus).await.unwrap(),
            );
            !s1.partitions.is_empty()
                && !s2.partitions.is_empty()
                && s1.partitions.len() + s2.partitions.len() == usize::from(PARTITIONS)
        })
        .await;
        assert!(split, "the nodes did not split the partitions");
        let up = wait_for(Duration::from_secs(60), move || {
            scraped(client, base, 2, 1.0, 0.0)
        })
        .await;
        assert!(up, "Prometheus did not scrape both nodes");

        let start = unix_now();
        node1
            .send(Seed { urls: seeds })
            .await
            .unwrap()
            .expect("seeds");
        // Done: every page of the sites fetched, nothing queued on either
        // node. (Not WhenIdle: on a cluster that was idle before the
        // seeds, it may answer from the idle view before they arrive.)
        let done = wait_for(Duration::from_secs(120), move || async move {
            let fetched: BTreeSet<String> = crate::common::page_requests(&log.records(), port)
                .into_keys()
                .collect();
            let (s1, s2) = (
                n1.send(GetStatus).await.unwrap(),
                n2.send(GetStatus).await.unwrap(),
            );
            truth.is_subset(&fetched) && s1.queued + s2.queued == 0
        })
        .await;
        assert!(done, "the crawl did not finish");
        let crawled = unix_now();
        // Scrapes after the crawl hold its final counts.
        let done = wait_for(Duration::from_secs(60), move || {
            scraped(client, base, 2, MIN_SCRAPES, crawled)
        })
        .await;
        assert!(done, "Prometheus did not scrape both nodes after the crawl");
        let end = unix_now();
        eprintln!(
            "crawled in {:.1}s; {} dashboard queries",
            crawled - start,
            queries.len()
        );

        let mut empty = Vec::new();
        for query in &queries {
            let series = range(client, base, query, start - 1.0, end).await;
            if series.is_empty() {
                empty.push(query.clone());
            }
            if query.contains("trawl_pages_total") || query.contains("trawl_stage_seconds") {
                assert!(max_value(&series) > 0.0, "{query} was never above 0");
            }
        }
        assert!(empty.is_empty(), "queries without data: {empty:#?}");
        // Each partition is shown once, by the node that holds it: the
        // series of a partition a node handed over are gone.
        let shown = instant(client, base, "count(trawl_partition_queued_urls)").await;
        assert_eq!(shown, [f64::from(PARTITIONS)]);
        // What the alert rules read is there: every partition held, the
        // data disk's space known; and every shipped rule is loaded.
        let unowned = "max(trawl_partitions) - sum(trawl_partitions_held)";
        assert_eq!(instant(client, base, unowned).await, [0.0]);
        let free = "trawl_storage_available_bytes / trawl_storage_capacity_bytes";
        let free = instant(client, base, free).await;
        assert_eq!(free.len(), 2, "{free:?}");
        assert!(free.iter().all(|f| *f > 0.0 && *f <= 1.0), "{free:?}");
        let rules = api(client, &format!("{base}/api/v1/rules"))
            .await
            .expect("Prometheus answers");
        let loaded: Vec<String> = rules["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .filter_map(|r| r["name"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(
            loaded,
            shipped_alerts(),
            "alerts.yml as Prometheus loaded it"
        );

        admin1.handle.stop(true).await;
        admin2.handle.stop(true).await;
        node1.send(Shutdown).await.unwrap().expect("n1 stops");
        node2.send(Shutdown).await.unwrap().expect("n2 stops");
    });
    server.stop();
}

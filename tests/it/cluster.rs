//! Two cluster nodes in one process, on loopback, sharing one data
//! directory: they split the partitions by gossip and rendezvous hashing
//! (each holding the stores of its own), seeds given to one reach their
//! owners through the bridge, links found on one node's pages for the
//! other's partitions travel through the outbox and the bridge, and the
//! union of what they fetch is the synthetic web's ground truth, each page
//! once, politely; and both nodes tell, from gossip, when the whole cluster
//! has run out of work.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use crate::common::{
    admin_listener, assert_same_urls, audit_log, eventually_async, gossip_addr, page_requests,
    start_web, Served, ANY_BRIDGE,
};
use trawl::actors::{GetCluster, GetStatus, Node, NodeStatus, Seed, Shutdown, WhenIdle};
use trawl::config::Config;
use trawl::metrics::Metrics;
use trawl::testweb::dupes::{self, MIRRORS};

const PARTITIONS: u16 = 8;
const MIN_DELAY_MS: u64 = 5;

/// The admin token both nodes share: their APIs want it for every request
/// (`protect_reads`), so a request one forwards to the other is answered
/// only if the caller's credentials go with it.
const TOKEN: &str = "cluster-test-token";

fn node_config(
    data: &Path,
    id: &str,
    gossip: SocketAddr,
    peer: SocketAddr,
    admin: SocketAddr,
) -> Config {
    let token = data.join("admin-token");
    std::fs::write(&token, TOKEN).unwrap();
    crate::common::config_with(
        data,
        MIN_DELAY_MS,
        PARTITIONS,
        &format!(
            "[cluster]\nenabled = true\ncluster_id = \"test\"\nnode_id = \"{id}\"\n\
             gossip = \"{gossip}\"\nbridge = \"{ANY_BRIDGE}\"\npeers = [\"{peer}\"]\n\
             gossip_interval = \"100ms\"\n{auth}[admin]\nenabled = true\nlisten = \"{admin}\"\n\
             token_file = {token:?}\nprotect_reads = true\n",
            auth = crate::common::cluster_auth(id),
            token = token.display().to_string(),
        ),
    )
}

/// A client of the nodes' admin APIs, with their token.
fn admin_client() -> awc::Client {
    awc::Client::builder().bearer_auth(TOKEN).finish()
}

/// An admin API call, with the token: status and JSON body.
async fn admin_call(method: &str, url: &str) -> (u16, serde_json::Value) {
    let method = awc::http::Method::from_bytes(method.as_bytes()).unwrap();
    let mut answer = admin_client().request(method, url).send().await.unwrap();
    let body = answer.body().await.unwrap();
    let value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (answer.status().as_u16(), value)
}

fn held(status: &NodeStatus) -> BTreeSet<u16> {
    status.partitions.iter().map(|p| p.id).collect()
}

/// Waits for two nodes to split the partitions: every partition held, by
/// exactly one node, and both holding some. `None` if that takes too long.
async fn wait_split(
    n1: &actix::Addr<Node>,
    n2: &actix::Addr<Node>,
) -> Option<(BTreeSet<u16>, BTreeSet<u16>)> {
    eventually_async(Duration::from_secs(30), || async {
        let (s1, s2) = (
            n1.send(GetStatus).await.unwrap(),
            n2.send(GetStatus).await.unwrap(),
        );
        let (h1, h2) = (held(&s1), held(&s2));
        let split = !h1.is_empty()
            && !h2.is_empty()
            && h1.is_disjoint(&h2)
            && h1.len() + h2.len() == usize::from(PARTITIONS);
        split.then_some((h1, h2))
    })
    .await
}

/// A client of node `id`'s admin API over HTTPS: the cluster's CA alone,
/// the certificate naming the node, the token.
fn https_client(ca: &Path, id: &str) -> awc::Client {
    let name = trawl::cluster::tls::node_name(id);
    let tls = trawl::admin::tls::client_config(ca, Some(&name)).unwrap();
    awc::Client::builder()
        .connector(awc::Connector::new().rustls_0_23(tls))
        .bearer_auth(TOKEN)
        .finish()
}

#[test]
fn admin_apis_on_https_forward_to_each_other_checking_the_peer() {
    trawl::fetch::install_crypto_provider();
    let data = tempfile::tempdir().unwrap();
    let (g1, g2) = (gossip_addr(), gossip_addr());
    let ((l1, a1), (l2, a2)) = (admin_listener(), admin_listener());
    // Both APIs serve HTTPS with their node's cluster certificate.
    let tls = |mut c: Config| {
        c.admin.tls = true;
        c
    };
    let c1 = tls(node_config(data.path(), "n1", g1, g2, a1));
    let c2 = tls(node_config(data.path(), "n2", g2, g1, a2));
    let ca = c1.cluster.tls_ca.clone();
    let (m1, m2) = (
        Arc::new(Metrics::for_node(Some("n1"))),
        Arc::new(Metrics::for_node(Some("n2"))),
    );
    actix_rt::System::new().block_on(async move {
        let Served {
            node: n1,
            admin: admin1,
            ..
        } = Served::start_on(c1, l1, m1);
        let Served {
            node: n2,
            admin: admin2,
            ..
        } = Served::start_on(c2, l2, m2);
        let split = wait_split(&n1, &n2)
            .await
            .expect("the nodes split the partitions");
        let n1_api = https_client(&ca, "n1");
        // A host of n2's partitions, asked of n1: n1 asks n2 over HTTPS
        // (n2 serves nothing else), checking n2's certificate.
        let host = (0..64)
            .map(trawl::testweb::SyntheticWeb::host_name)
            .find(|h| split.1.contains(&trawl::url::partition_of(h, PARTITIONS)))
            .expect("a host of n2's");
        let mut answer = n1_api
            .get(format!("https://{a1}/api/v1/hosts/{host}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200, "{host}");
        let snapshot: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(snapshot["host"], host.as_str());
        // A pause asked of n1 is set on n2 too, over HTTPS.
        let mut paused = n1_api
            .post(format!("https://{a1}/api/v1/crawl/pause"))
            .send()
            .await
            .unwrap();
        let paused: serde_json::Value = paused.json().await.unwrap();
        assert_eq!(paused["nodes"][0]["node"], "n2", "{paused}");
        assert_eq!(paused["nodes"][0]["status"], 200, "{paused}");
        // Plain HTTP is not served; n1's certificate is not n2's.
        let plain = n1_api.get(format!("http://{a2}/api/v1/crawl")).send().await;
        assert!(plain.is_err() || plain.unwrap().status().as_u16() >= 400);
        let wrong = n1_api
            .get(format!("https://{a2}/api/v1/crawl"))
            .send()
            .await;
        assert!(wrong.is_err(), "n2's API passed for n1");
        admin1.handle.stop(true).await;
        admin2.handle.stop(true).await;
        n1.send(Shutdown).await.unwrap().expect("n1 stops");
        n2.send(Shutdown).await.unwrap().expect("n2 stops");
    });
}

#[test]
fn two_nodes_split_the_partitions_and_crawl_the_web_once() {
    let (web, server) = start_web(12, 8, 21);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let (g1, g2) = (gossip_addr(), gossip_addr());
    let ((l1, a1), (l2, a2)) = (admin_listener(), admin_listener());
    let c1 = node_config(data.path(), "n1", g1, g2, a1);
    let c2 = node_config(data.path(), "n2", g2, g1, a2);
    let seeds = web.seeds(port);
    let truth = web.ground_truth(port);
    let log = server.log().clone();
    let (m1, m2) = (
        Arc::new(Metrics::for_node(Some("n1"))),
        Arc::new(Metrics::for_node(Some("n2"))),
    );
    let (node_m1, node_m2) = (m1.clone(), m2.clone());
    let (split, reached) = actix_rt::System::new().block_on(async move {
        let Served {
            node: n1,
            admin: admin1,
            ..
        } = Served::start_on(c1, l1, node_m1);
        let Served {
            node: n2,
            admin: admin2,
            ..
        } = Served::start_on(c2, l2, node_m2);
        let Some(split) = wait_split(&n1, &n2).await else {
            n1.send(Shutdown).await.unwrap().ok();
            n2.send(Shutdown).await.unwrap().ok();
            return (None, false);
        };
        // Pausing one node pauses the cluster: n1 sets n2 too.
        let (code, paused) = admin_call("POST", &format!("http://{a1}/api/v1/crawl/pause")).await;
        assert_eq!(code, 200, "{paused}");
        assert_eq!(paused["nodes"][0]["node"], "n2", "{paused}");
        assert_eq!(paused["nodes"][0]["status"], 200, "{paused}");
        let (_, n2_controls) = admin_call("GET", &format!("http://{a2}/api/v1/crawl")).await;
        assert_eq!(n2_controls["paused"], true, "{n2_controls}");
        // Every seed to one node: the other's reach it by the bridge.
        let hosts = seeds.len();
        n1.send(Seed { urls: seeds })
            .await
            .unwrap()
            .expect("seeds admitted");
        // Either node lists the hosts of both (paused: each one's
        // robots.txt request waits at its node's gate).
        let listing = format!("http://{a2}/api/v1/hosts?sort=host&limit=1000");
        let listing = &listing;
        let listed = eventually_async(Duration::from_secs(20), || async move {
            Some(admin_call("GET", listing).await.1).filter(|l| l["total"] == hosts)
        })
        .await
        .unwrap_or(admin_call("GET", listing).await.1);
        assert_eq!(listed["total"], hosts, "{listed}");
        assert_eq!(listed["nodes"][0]["node"], "n1", "{listed}");
        assert!(log.records().is_empty(), "a request went out while paused");
        // A host of n2's partitions, slowed and inspected through n1: the
        // request goes to n2 with its body and query.
        let theirs = (0..12)
            .map(trawl::testweb::SyntheticWeb::host_name)
            .find(|h| split.1.contains(&trawl::url::partition_of(h, PARTITIONS)))
            .expect("a host of n2");
        let mut answer = admin_client()
            .put(format!("http://{a1}/api/v1/hosts/{theirs}/politeness"))
            .send_json(&serde_json::json!({ "min_delay_ms": 1 }))
            .await
            .unwrap();
        let snapshot: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(answer.status().as_u16(), 200, "{snapshot}");
        assert_eq!(
            snapshot["politeness"]["slowdown"]["min_delay_ms"], 1,
            "{snapshot}"
        );
        let queue = format!("http://{a1}/api/v1/hosts/{theirs}/queue?limit=1");
        let (code, queue) = admin_call("GET", &queue).await;
        assert_eq!(code, 200, "{queue}");
        assert_eq!(queue["host"], theirs.as_str());
        assert_eq!(queue["queued"].as_array().map(Vec::len), Some(1), "{queue}");
        // Resuming through the other node resumes both (else the crawl
        // below never ends).
        let (code, _) = admin_call("POST", &format!("http://{a2}/api/v1/crawl/resume")).await;
        assert_eq!(code, 200);
        // Both learn, from gossip alone, that the cluster ran out of work.
        let idle = futures_util::future::join(n1.send(WhenIdle), n2.send(WhenIdle));
        let reached = tokio::time::timeout(Duration::from_secs(60), idle)
            .await
            .is_ok();
        let fetched: BTreeSet<String> = page_requests(&log.records(), port).into_keys().collect();
        let reached = reached && truth.is_subset(&fetched);
        // Either node describes the whole cluster.
        let view = n2.send(GetCluster).await.unwrap().expect("a cluster node");
        assert_eq!(view.node, "n2");
        let live: Vec<&str> = view
            .members
            .iter()
            .filter(|m| m.live)
            .map(|m| m.node.as_str())
            .collect();
        assert_eq!(live, ["n1", "n2"]);
        assert!(view.owners.iter().all(Option::is_some), "{:?}", view.owners);
        let held: BTreeSet<u16> = view.held.iter().copied().collect();
        assert_eq!(held, split.1, "what n2 holds");
        assert!(view.taking.is_empty() && view.handing_back.is_empty());
        // Either node's report is the cluster's: its own hosts and the
        // other node's, merged.
        let own = n2.send(trawl::actors::messages::GetReport).await.unwrap();
        let (code, report) = admin_call("GET", &format!("http://{a2}/api/v1/report")).await;
        assert_eq!(code, 200, "{report}");
        assert_eq!(report["nodes"][0]["node"], "n1", "{report}");
        assert_eq!(report["nodes"][0]["status"], 200, "{report}");
        // (Asserted once the crawl is idle: no response lands between the
        // two reads.)
        if reached {
            let reported = report["hosts"].as_object().unwrap().len();
            assert_eq!(reported, hosts, "{report}");
            assert!(own.hosts.len() < hosts, "n2 alone crawled every host");
            let total = report["totals"]["responses"].as_u64().unwrap();
            assert!(total > own.totals.responses, "nothing of n1's: {report}");
        }
        // n1's admin API answers for a host of n2's partitions by asking
        // n2's, and for its own hosts itself.
        let host_of = |held: &BTreeSet<u16>| {
            (0..12)
                .map(trawl::testweb::SyntheticWeb::host_name)
                .find(|h| held.contains(&trawl::url::partition_of(h, PARTITIONS)))
                .expect("a host in those partitions")
        };
        for host in [host_of(&split.1), host_of(&split.0)] {
            let mut answer = admin_client()
                .get(format!("http://{a1}/api/v1/hosts/{host}"))
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status().as_u16(), 200, "{host}");
            let snapshot: serde_json::Value = answer.json().await.unwrap();
            assert_eq!(snapshot["host"], host.as_str());
        }
        // Without the token, n1 answers 401 itself and asks no one.
        let stranger = awc::Client::new()
            .get(format!("http://{a1}/api/v1/hosts/{}", host_of(&split.1)))
            .send()
            .await
            .unwrap();
        assert_eq!(stranger.status().as_u16(), 401);
        admin1.handle.stop(true).await;
        admin2.handle.stop(true).await;
        n1.send(Shutdown).await.unwrap().expect("n1 stops");
        n2.send(Shutdown).await.unwrap().expect("n2 stops");
        (Some(split), reached)
    });
    let (h1, h2) = split.expect("the nodes split the partitions");
    assert!(reached, "the cluster did not fetch the whole web");
    let records = server.log().records();
    let requests = page_requests(&records, port);
    let fetched: BTreeSet<String> = requests.keys().cloned().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
    let twice: Vec<_> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "fetched more than once: {twice:?}");
    let report = audit_log(&web, &records, MIN_DELAY_MS);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // Links and seeds crossed the bridge both ways, and every batch the
    // outboxes held was delivered and deleted.
    let acked =
        |m: &Metrics, peer: &str| m.bridge_batches.with_label_values(&[peer, "acked"]).get();
    assert!(acked(&m1, "n2") > 0, "n1 sent nothing to n2");
    assert!(acked(&m2, "n1") > 0, "n2 sent nothing to n1");
    for p in 0..PARTITIONS {
        let store = trawl::store::PartitionStore::open_read_only(data.path(), p).unwrap();
        assert!(
            store.outbox_page(None, 1).unwrap().is_empty(),
            "partition {p}'s outbox"
        );
    }
    // Each node wrote its own files.
    let dir = data.path();
    assert!(dir.join("events-n1.jsonl").exists() && dir.join("events-n2.jsonl").exists());
    eprintln!("n1 held {h1:?}, n2 held {h2:?}");
}

/// Two node ids under which the two mirror sites belong to different
/// nodes, so each node fetches one copy of every mirrored page.
fn ids_splitting_the_mirrors() -> (String, String) {
    let [a, b] = MIRRORS.map(|m| trawl::url::partition_of(m, PARTITIONS));
    (1..100)
        .map(|i| (format!("m{i}"), format!("m{}", i + 1)))
        .find(|(x, y)| {
            let members = [x.clone(), y.clone()];
            let owner = |p| trawl::cluster::assign::owner(p, &members).map(str::to_owned);
            owner(a) != owner(b)
        })
        .expect("some pair of ids splits two partitions")
}

#[test]
fn a_payload_fetched_on_two_nodes_is_stored_once() {
    let (web, server) = start_web(3, 3, 4);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let (id1, id2) = ids_splitting_the_mirrors();
    let (g1, g2) = (gossip_addr(), gossip_addr());
    // Their admin servers are not started: the addresses are only said.
    let (a1, a2) = (admin_listener().1, admin_listener().1);
    let c1 = node_config(data.path(), &id1, g1, g2, a1);
    let c2 = node_config(data.path(), &id2, g2, g1, a2);
    let mut seeds = web.seeds(port);
    seeds.push(format!("http://{}:{port}/", dupes::HUB));
    let (m1, m2) = (
        Arc::new(Metrics::for_node(Some(&id1))),
        Arc::new(Metrics::for_node(Some(&id2))),
    );
    let (node_m1, node_m2) = (m1.clone(), m2.clone());
    let (cc1, cc2) = (c1.clone(), c2.clone());
    let finished = actix_rt::System::new().block_on(async move {
        let n1 = Node::start(cc1, node_m1).expect("node 1 starts");
        let n2 = Node::start(cc2, node_m2).expect("node 2 starts");
        let split = wait_split(&n1, &n2).await.is_some();
        if split {
            n1.send(Seed { urls: seeds }).await.unwrap().expect("seeds");
            let idle = futures_util::future::join(n1.send(WhenIdle), n2.send(WhenIdle));
            let _ = tokio::time::timeout(Duration::from_secs(60), idle).await;
        }
        n1.send(Shutdown).await.unwrap().expect("node 1 stops");
        n2.send(Shutdown).await.unwrap().expect("node 2 stops");
        split
    });
    assert!(finished, "the nodes did not split the partitions");
    server.stop();
    // Which node fetched which page, from each node's own events.
    let mut events = BTreeMap::new();
    for config in [&c1, &c2] {
        for e in crate::common::page_events(config) {
            events.insert(e.url.clone(), (config, e));
        }
    }
    let paths: Vec<String> = std::iter::once("/".to_owned())
        .chain((1..=dupes::MIRROR_PAGES).map(|n| format!("/m/{n}.html")))
        .collect();
    for path in &paths {
        let url = |host: &str| format!("http://{host}:{port}{path}");
        let (ca, ea) = &events[&url(MIRRORS[0])];
        let (cb, eb) = &events[&url(MIRRORS[1])];
        assert_ne!(
            ca.cluster.node_id, cb.cluster.node_id,
            "{path}: the mirrors are on different nodes"
        );
        let ((_, original), (copy_config, copy)) = match (&ea.duplicate_of, &eb.duplicate_of) {
            (None, Some(_)) => ((ca, ea), (cb, eb)),
            (Some(_), None) => ((cb, eb), (ca, ea)),
            other => panic!("{path}: exactly one copy is a duplicate, got {other:?}"),
        };
        assert_eq!(copy.duplicate_of.as_deref(), Some(original.url.as_str()));
        assert_eq!(copy.content_sha256, original.content_sha256);
        let record = crate::common::record_at(copy_config, copy);
        assert!(
            record.starts_with("WARC/1.1\r\nWARC-Type: revisit\r\n"),
            "{record}"
        );
        assert!(record.contains(&format!("WARC-Refers-To-Target-URI: {}\r\n", original.url)));
    }
    let exact = |m: &Metrics| m.duplicates.with_label_values(&["exact"]).get();
    // One node's revisit names the other's record: only the digest's
    // partition, asked across the bridge, can have told it.
    assert_eq!(exact(&m1) + exact(&m2), paths.len() as u64);
}

//! Liveness you can see, and that recovers.
//!
//! Nodes whose gossip never forms: each is given a peer address where
//! datagrams go and nothing answers (a firewall that drops UDP while the
//! bridge's TCP would pass). Each must say it is alone (log,
//! `/api/v1/cluster`, `trawl ctl status`), and then:
//!
//! - with `state_url`, crawl what it holds: the chains fence the
//!   partitions between the two, and a node given the seeds crawls the
//!   hosts of its own partitions (before, it waited forever for the
//!   other to hand back the rest, and offered no seed: 0 pages);
//! - without it, on separate disks, open no partition: neither can know
//!   which the other holds (before, both opened every partition and
//!   crawled every host twice). Given the right peers they form a cluster
//!   and crawl the web once.
//!
//! And a chain head this build cannot read (a newer trawl's manifest,
//! during a rolling upgrade): the node steps aside from that partition,
//! says so, publishes it as shunned, and crawls every other partition,
//! rather than stop.
//!
//! Judged from the web server's log and the nodes' own answers.

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::common::{
    assert_same_urls, audit_log_with_factor, eventually, eventually_true, gossip_addr,
    page_requests, wait_exit, ANY_BRIDGE,
};
use trawl::testweb::{SyntheticWeb, TestWebServer};

const MIN_DELAY_MS: u64 = 60;
const DELAY_FACTOR: f64 = 0.0;
const PARTITIONS: u16 = 8;

/// One node of the test: its config file, log, admin address, data dir.
struct NodeFiles {
    config: PathBuf,
    log: PathBuf,
    admin: SocketAddr,
    data: PathBuf,
}

/// Writes node `n<i>`'s config: gossip on `gossip`, joining through
/// `peers`, its own data directory, an admin API, `state` if given.
fn node_files(
    dir: &Path,
    i: usize,
    gossip: SocketAddr,
    peers: &[SocketAddr],
    state: Option<&Path>,
) -> NodeFiles {
    let id = format!("n{i}");
    let admin = crate::common::reserved_port();
    let peers: Vec<String> = peers.iter().map(|p| format!("\"{p}\"")).collect();
    let state = state.map_or(String::new(), |s| {
        format!(
            "state_url = \"file://{}\"\nlease = \"2s\"\ncheckpoint_interval = \"500ms\"\n",
            s.display()
        )
    });
    let extra = format!(
        "[cluster]\nenabled = true\ncluster_id = \"alone\"\nnode_id = \"{id}\"\n\
         gossip = \"{gossip}\"\nbridge = \"{ANY_BRIDGE}\"\npeers = [{peers}]\n\
         gossip_interval = \"100ms\"\n{state}{auth}\
         [storage]\npartitions = {PARTITIONS}\n[fetch]\ntimeout = \"2s\"\n\
         [admin]\nenabled = true\nlisten = \"{admin}\"\n\
         [politeness]\ndelay_factor = {DELAY_FACTOR:?}\n",
        peers = peers.join(", "),
        auth = crate::common::cluster_auth(&id),
    );
    let data = dir.join(&id);
    let config = dir.join(format!("{id}.toml"));
    std::fs::write(
        &config,
        trawl::testweb::config_layer(&data, MIN_DELAY_MS, &extra),
    )
    .unwrap();
    NodeFiles {
        config,
        log: dir.join(format!("{id}.log")),
        admin,
        data,
    }
}

/// `trawl run --config <config> <args>`, logging into the node's log.
fn spawn(node: &NodeFiles, args: &[&str]) -> Child {
    let log = std::fs::File::create(&node.log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["run", "--config"])
        .arg(&node.config)
        .args(args)
        .env("RUST_LOG", "warn,trawl::actors::node=info")
        .env("NO_COLOR", "1")
        .stderr(log)
        .spawn()
        .expect("spawn trawl")
}

/// `trawl ctl --admin <node> status`: its output, once it answers.
fn ctl_status(node: &NodeFiles) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["ctl", "--admin", &node.admin.to_string(), "status"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `GET /api/v1/cluster` of `node`, as JSON.
fn cluster_view(node: &NodeFiles) -> Option<serde_json::Value> {
    let answer = crate::common::moto::request(node.admin, "GET /api/v1/cluster HTTP/1.1").ok()?;
    let body = answer.split_once("\r\n\r\n")?.1;
    serde_json::from_str(body).ok()
}

/// Waits until `node` says it is alone, in its API; its view then.
fn wait_alone(node: &NodeFiles) -> serde_json::Value {
    eventually(Duration::from_secs(30), || {
        cluster_view(node).filter(|v| v["hearing"]["alone"] == true)
    })
    .unwrap_or_else(|| {
        panic!(
            "{} never said it is alone: {:?}\n{}",
            node.config.display(),
            cluster_view(node),
            std::fs::read_to_string(&node.log).unwrap_or_default()
        )
    })
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A socket gossip is sent to and nothing answers: the peer behind a
/// firewall that drops UDP.
fn black_hole() -> (UdpSocket, SocketAddr) {
    let hole = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = hole.local_addr().unwrap();
    (hole, addr)
}

fn web(seed: u64) -> (SyntheticWeb, TestWebServer, u16) {
    crate::common::start_plain_web(6, 8, seed)
}

/// The partitions `node` holds, per its API.
fn held(node: &NodeFiles) -> Option<BTreeSet<u16>> {
    let view = cluster_view(node)?;
    let held = view["held"].as_array()?;
    Some(
        held.iter()
            .filter_map(|p| p.as_u64())
            .map(|p| p as u16)
            .collect(),
    )
}

#[test]
fn with_a_state_store_a_lonely_node_says_so_and_crawls_what_it_holds() {
    let (web, server, port) = web(61);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let gossip = [gossip_addr(), gossip_addr()];
    // First as a cluster: the chains split the partitions between n1 and
    // n2 (no seeds yet); then both die at once, leaving each partition's
    // head to its last owner.
    let formed: Vec<NodeFiles> = (0..2)
        .map(|i| node_files(dir.path(), i + 1, gossip[i], &[gossip[1 - i]], Some(&state)))
        .collect();
    let mut children: Vec<Child> = formed.iter().map(|n| spawn(n, &[])).collect();
    let split = eventually(Duration::from_secs(60), || {
        let (a, b) = (held(&formed[0])?, held(&formed[1])?);
        (!a.is_empty()
            && !b.is_empty()
            && a.is_disjoint(&b)
            && a.len() + b.len() == PARTITIONS as usize)
            .then_some(a)
    });
    children.iter_mut().for_each(stop);
    let mine = split.expect("the two nodes never split the partitions");
    // Restarted with gossip that cannot form (each node's peer answers
    // nothing): each takes back the chains it last held at once and
    // renews them, so neither can take the other's. The seeds are n1's
    // (they were one node's, in the issue that found this: before, n1
    // waited for the other partitions and offered none, 0 pages).
    let (_hole, hole) = black_hole();
    let lonely: Vec<NodeFiles> = (0..2)
        .map(|i| node_files(dir.path(), i + 1, gossip[i], &[hole], Some(&state)))
        .collect();
    let seeds = seeds.to_str().unwrap();
    let mut children = [
        spawn(&lonely[0], &["--seeds", seeds]),
        spawn(&lonely[1], &[]),
    ];
    let views: Vec<serde_json::Value> = lonely.iter().map(wait_alone).collect();
    // Every seed of a host in n1's partitions is fetched; no host of
    // n2's ever is (n1 does not hold them, n2 has no seed of them).
    let hosts: Vec<String> = web
        .seeds(port)
        .iter()
        .map(|s| url::Url::parse(s).unwrap().host_str().unwrap().to_owned())
        .collect();
    let ours: BTreeSet<String> = web
        .seeds(port)
        .into_iter()
        .zip(&hosts)
        .filter(|(_, h)| mine.contains(&trawl::url::partition_of(h, PARTITIONS)))
        .map(|(s, _)| s)
        .collect();
    assert!(!ours.is_empty(), "n1 holds no seed's partition: {mine:?}");
    let crawled = eventually_true(Duration::from_secs(60), || {
        let fetched: BTreeSet<String> = page_requests(&server.log().records(), port)
            .into_keys()
            .collect();
        ours.is_subset(&fetched)
    });
    let status = ctl_status(&lonely[0]);
    let lonely_held = held(&lonely[0]);
    children.iter_mut().for_each(stop);
    let log = std::fs::read_to_string(&lonely[0].log).unwrap_or_default();
    let records = server.log().records();
    server.stop();
    assert!(
        crawled,
        "the lonely node did not crawl its partitions' seeds:\n{log}"
    );
    assert_eq!(lonely_held, Some(mine.clone()), "n1 took back what it held");
    for url in page_requests(&records, port).keys() {
        let host = url::Url::parse(url).unwrap().host_str().unwrap().to_owned();
        let p = trawl::url::partition_of(&host, PARTITIONS);
        assert!(mine.contains(&p), "{url}: partition {p} is not n1's");
    }
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    for view in &views {
        assert_eq!(view["hearing"]["live_peers"], 0, "{view}");
    }
    assert!(log.contains("no peer heard"), "{log}");
    let status = status.expect("trawl ctl status answers");
    assert!(status.contains("ALONE"), "{status}");
}

#[test]
fn without_a_state_store_lonely_nodes_open_nothing_until_they_hear_each_other() {
    let (web, server, port) = web(62);
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let seeds = seeds.to_str().unwrap();
    let (_hole, hole) = black_hole();
    let gossip = [gossip_addr(), gossip_addr()];
    let lonely: Vec<NodeFiles> = (0..2)
        .map(|i| node_files(dir.path(), i + 1, gossip[i], &[hole], None))
        .collect();
    let mut children: Vec<Child> = lonely
        .iter()
        .map(|n| spawn(n, &["--seeds", seeds]))
        .collect();
    for node in &lonely {
        wait_alone(node);
    }
    // Each said which partitions wait: the decision is made, and made again
    // every second; nothing was opened, nothing fetched.
    let decided = eventually_true(Duration::from_secs(30), || {
        lonely.iter().all(|n| {
            std::fs::read_to_string(&n.log).is_ok_and(|l| l.contains("waits for gossip to form"))
        })
    });
    let status = ctl_status(&lonely[0]);
    let views: Vec<Option<serde_json::Value>> = lonely.iter().map(cluster_view).collect();
    let requests = server.log().records().len();
    children.iter_mut().for_each(stop);
    assert!(decided, "a node never said its partitions wait");
    assert_eq!(requests, 0, "a lonely node crawled without a fence");
    for view in views.iter().flatten() {
        assert_eq!(view["held"], serde_json::json!([]), "{view}");
    }
    let status = status.expect("trawl ctl status answers");
    assert!(status.contains("ALONE"), "{status}");
    for node in &lonely {
        let stores = trawl::store::PartitionStore::dir(&node.data, 0);
        let any =
            (0..PARTITIONS).any(|p| trawl::store::PartitionStore::dir(&node.data, p).exists());
        assert!(
            !any,
            "a partition store was created, e.g. {}",
            stores.display()
        );
    }

    // Given each other's address, they form a cluster, split the
    // partitions, and crawl the web once.
    let together: Vec<NodeFiles> = (0..2)
        .map(|i| node_files(dir.path(), i + 1, gossip[i], &[gossip[1 - i]], None))
        .collect();
    let mut children: Vec<Child> = together
        .iter()
        .map(|n| spawn(n, &["--until-idle", "--seeds", seeds]))
        .collect();
    for (child, node) in children.iter_mut().zip(&together) {
        let status = wait_exit(child, Duration::from_secs(120));
        assert!(
            status.success(),
            "{}",
            std::fs::read_to_string(&node.log).unwrap_or_default()
        );
    }
    let records = server.log().records();
    server.stop();
    let pages = page_requests(&records, port);
    let fetched: BTreeSet<String> = pages.keys().cloned().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
    let twice: Vec<_> = pages.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "fetched twice: {twice:?}");
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn a_head_of_a_newer_layout_makes_the_node_step_aside_and_crawl_the_rest() {
    let (web, server, port) = web(63);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // Partition 3's chain holds one manifest written by a newer trawl.
    let newer = 3u16;
    let manifests = state.join(format!("partitions/{newer:03}/manifests"));
    std::fs::create_dir_all(&manifests).unwrap();
    let mut m = trawl::cluster::manifest::Manifest {
        version: trawl::cluster::manifest::MANIFEST_VERSION,
        partition: newer,
        number: 1,
        owner: trawl::cluster::manifest::Owner {
            node: "n9".into(),
            incarnation: 1,
            epoch: 1,
        },
        released: true,
        hold_ms: 0,
        covers: 0,
        files: Vec::new(),
    };
    m.version += 1;
    std::fs::write(
        manifests.join(format!("{:020}.json", 1)),
        serde_json::to_vec(&m).unwrap(),
    )
    .unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    // One node, alone by design (no peers): every partition is its own.
    let node = node_files(dir.path(), 1, gossip_addr(), &[], Some(&state));
    let mut child = spawn(&node, &["--seeds", seeds.to_str().unwrap()]);
    let host_of = |url: &str| url::Url::parse(url).unwrap().host_str().unwrap().to_owned();
    let others: BTreeSet<String> = web
        .ground_truth(port)
        .into_iter()
        .filter(|u| trawl::url::partition_of(&host_of(u), PARTITIONS) != newer)
        .collect();
    // Every page of the other partitions is fetched: no cluster-wide stop.
    let crawled = eventually_true(Duration::from_secs(60), || {
        let fetched: BTreeSet<String> = page_requests(&server.log().records(), port)
            .into_keys()
            .collect();
        others.is_subset(&fetched)
    });
    let view = eventually(Duration::from_secs(30), || {
        cluster_view(&node).filter(|v| v["members"][0]["shunned"] == serde_json::json!([newer]))
    });
    stop(&mut child);
    let log = std::fs::read_to_string(&node.log).unwrap_or_default();
    let records = server.log().records();
    server.stop();
    assert!(crawled, "the other partitions were not crawled:\n{log}");
    assert!(
        view.is_some(),
        "partition {newer} not published as shunned:\n{log}"
    );
    assert!(
        log.contains("stepping aside"),
        "the node did not say it steps aside:\n{log}"
    );
    for url in page_requests(&records, port).keys() {
        assert_ne!(
            trawl::url::partition_of(&host_of(url), PARTITIONS),
            newer,
            "{url}: a partition whose head it cannot read was crawled"
        );
    }
    // The newer trawl's manifest is untouched, and nothing was claimed
    // over it.
    let names: Vec<_> = std::fs::read_dir(&manifests).unwrap().collect();
    assert_eq!(names.len(), 1);
}

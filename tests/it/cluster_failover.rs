//! Three `trawl run` processes crawl the synthetic web as one cluster, and
//! one of them fails in the middle:
//! - killed with SIGKILL: its partitions move to the others (their stores'
//!   locks died with it), nothing is lost, what is fetched twice is only
//!   what the dead node had in flight, and the server-side politeness audit
//!   stays clean across the takeover;
//! - paused with SIGSTOP for longer than the failure timeout, then resumed:
//!   gossip declares it dead, but it still holds its stores, so no other
//!   node crawls its hosts meanwhile (nothing is fetched twice), and the
//!   crawl completes once it is back.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::common::{
    assert_same_urls, audit_log_with_factor, gossip_addr, logged_within, page_requests, wait_exit,
    ANY_BRIDGE,
};
use trawl::testweb::RequestRecord;
use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};

const MIN_DELAY_MS: u64 = 60;
/// The nodes' `[politeness] delay_factor`: the audit owes exactly this.
const DELAY_FACTOR: f64 = 0.0;

/// A node of the test cluster (its bridge takes any free port:
/// [`ANY_BRIDGE`]).
struct Member {
    id: String,
    gossip: SocketAddr,
}

fn members(n: usize) -> Vec<Member> {
    (1..=n)
        .map(|i| Member {
            id: format!("n{i}"),
            gossip: gossip_addr(),
        })
        .collect()
}

/// Writes node `me`'s config into `dir`; its path.
fn write_config(dir: &Path, data: &Path, all: &[Member], me: usize) -> PathBuf {
    let m = &all[me];
    let peers: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != me)
        .map(|(_, p)| format!("\"{}\"", p.gossip))
        .collect();
    let extra = format!(
        "[cluster]\nenabled = true\ncluster_id = \"failover\"\nnode_id = \"{}\"\n\
         gossip = \"{}\"\nbridge = \"{}\"\npeers = [{}]\ngossip_interval = \"100ms\"\n{}\
         [storage]\npartitions = 8\n[fetch]\ntimeout = \"2s\"\n[admin]\nenabled = false\n\
         [politeness]\ndelay_factor = {DELAY_FACTOR:?}\n",
        m.id,
        m.gossip,
        ANY_BRIDGE,
        peers.join(", "),
        crate::common::cluster_auth(&m.id),
    );
    let path = dir.join(format!("{}.toml", m.id));
    std::fs::write(
        &path,
        trawl::testweb::config_layer(data, MIN_DELAY_MS, &extra),
    )
    .unwrap();
    path
}

/// Starts node `config`, its log (warnings) into `log`.
fn spawn(config: &Path, seeds: Option<&Path>, log: &Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trawl"));
    cmd.args(["run", "--until-idle", "--config"]).arg(config);
    if let Some(seeds) = seeds {
        cmd.arg("--seeds").arg(seeds);
    }
    let log = std::fs::File::create(log).unwrap();
    cmd.env("RUST_LOG", "warn,trawl::actors::node=info")
        .stderr(log)
        .spawn()
        .expect("spawn trawl")
}

/// Three nodes crawling a synthetic web of 24 hosts × `pages` (generator
/// seed `seed`), seeds given to n1, each logging into `n<i>.log`.
struct Cluster {
    web: SyntheticWeb,
    server: TestWebServer,
    port: u16,
    dir: tempfile::TempDir,
    configs: Vec<PathBuf>,
    logs: Vec<PathBuf>,
    nodes: [Child; 3],
}

fn start_cluster(pages: u32, seed: u64) -> Cluster {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 24,
        pages_per_host: pages,
        seed,
        behaviours: false,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start(web.clone(), listen, 1).expect("start synthetic web");
    let port = server.addr().port();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let all = members(3);
    let configs: Vec<PathBuf> = (0..3)
        .map(|i| write_config(dir.path(), &data, &all, i))
        .collect();
    let logs: Vec<PathBuf> = (1..=3)
        .map(|i| dir.path().join(format!("n{i}.log")))
        .collect();
    let nodes = [
        spawn(&configs[0], Some(&seeds), &logs[0]),
        spawn(&configs[1], None, &logs[1]),
        spawn(&configs[2], None, &logs[2]),
    ];
    Cluster {
        web,
        server,
        port,
        dir,
        configs,
        logs,
        nodes,
    }
}

#[test]
fn a_node_killed_mid_crawl_loses_nothing_and_its_partitions_move() {
    let Cluster {
        web,
        server,
        port,
        dir: _dir,
        configs: _configs,
        logs,
        nodes: [mut n1, mut n2, mut n3],
    } = start_cluster(16, 33);

    // Mid-crawl: a third of the pages requested.
    let truth = web.ground_truth(port);
    let third = truth.len() / 3;
    assert!(
        server.log().wait_for(third, Duration::from_secs(60)),
        "the cluster did not get going"
    );
    n2.kill().unwrap(); // SIGKILL: its locks go with it
    let _ = n2.wait();
    let killed_at = server.log().len();
    assert!(killed_at < truth.len(), "killed mid-crawl");

    // The others take its partitions over and finish the crawl.
    assert!(wait_exit(&mut n1, Duration::from_secs(120)).success());
    assert!(wait_exit(&mut n3, Duration::from_secs(120)).success());
    let records = server.log().records();
    server.stop();

    let requests = page_requests(&records, port);
    let fetched: BTreeSet<String> = requests.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    // Refetched: only what the dead node had in flight, at most one
    // request per host (one in flight per host).
    let twice: Vec<_> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.len() <= 24, "fetched twice: {twice:?}");
    assert!(twice.iter().all(|(_, n)| **n == 2), "{twice:?}");
    // No host saw two requests at once or too close, across the takeover.
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // The survivors took over partitions whose owner had not stopped
    // cleanly (and held their hosts back for it).
    let survivors = [&logs[0], &logs[2]].map(|p| std::fs::read_to_string(p).unwrap());
    assert!(
        survivors.iter().any(
            |log| log.contains("taking over a partition whose last owner did not stop cleanly")
        ),
        "no takeover logged: {survivors:?}"
    );
}

#[test]
fn a_paused_node_keeps_its_partitions_and_the_crawl_completes() {
    let Cluster {
        web,
        server,
        port,
        dir: _dir,
        configs: _configs,
        logs: _logs,
        nodes: [mut n1, mut n2, mut n3],
    } = start_cluster(16, 34);
    let truth = web.ground_truth(port);
    assert!(
        server
            .log()
            .wait_for(truth.len() / 3, Duration::from_secs(60)),
        "the cluster did not get going"
    );
    let pid = n2.id() as libc::pid_t;
    // SAFETY: signals to a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // Paused for well past the failure timeout (8 rounds of 100 ms): the
    // others declare it dead and try to take its partitions.
    let paused = server.log().len();
    let grew = server.log().wait_for(truth.len(), Duration::from_secs(3));
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    assert!(
        !grew,
        "the crawl finished without the paused node's partitions"
    );
    assert!(wait_exit(&mut n1, Duration::from_secs(120)).success());
    assert!(wait_exit(&mut n2, Duration::from_secs(120)).success());
    assert!(wait_exit(&mut n3, Duration::from_secs(120)).success());
    let records: Vec<RequestRecord> = server.log().records();
    server.stop();
    assert!(paused < truth.len());
    let requests = page_requests(&records, port);
    let fetched: BTreeSet<String> = requests.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    let twice: Vec<_> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "a paused node's hosts were crawled by another: {twice:?}"
    );
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

/// `text` without terminal colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Waits until `log` contains `text` (a node's log line), at most `limit`.
#[test]
fn a_killed_node_that_comes_back_gets_its_partitions_back_gracefully() {
    let Cluster {
        web,
        server,
        port,
        dir,
        configs,
        logs,
        nodes: [mut n1, mut n2, mut n3],
    } = start_cluster(24, 35);
    let truth = web.ground_truth(port);
    assert!(server
        .log()
        .wait_for(truth.len() / 4, Duration::from_secs(60)));
    n2.kill().unwrap();
    let _ = n2.wait();
    // The survivors take its partitions over...
    let takeover = "taking over a partition whose last owner did not stop cleanly";
    assert!(
        logged_within(&[&logs[0], &logs[2]], takeover, Duration::from_secs(30)),
        "no takeover"
    );
    // ...and it comes back: they hand its partitions back, cleanly.
    let again_log = dir.path().join("n2-again.log");
    let mut again = spawn(&configs[1], None, &again_log);
    for (name, child) in [("n1", &mut n1), ("n2", &mut again), ("n3", &mut n3)] {
        assert!(
            wait_exit(child, Duration::from_secs(120)).success(),
            "{name} failed"
        );
    }
    let records = server.log().records();
    server.stop();
    let requests = page_requests(&records, port);
    let fetched: BTreeSet<String> = requests.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    let twice: Vec<_> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.len() <= 24, "fetched twice: {twice:?}");
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let back = plain(&std::fs::read_to_string(&again_log).unwrap());
    let survivors = [&logs[0], &logs[2]].map(|p| plain(&std::fs::read_to_string(p).unwrap()));
    assert!(
        survivors
            .iter()
            .any(|l| l.contains("partition handed back") && l.contains("clean=true")),
        "no partition handed back cleanly: {survivors:?}"
    );
    assert!(back.contains("partition taken"), "{back}");
}

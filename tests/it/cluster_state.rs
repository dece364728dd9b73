//! Three `trawl run` processes, each with a data directory of its own (its
//! "disk"), crawl the synthetic web as one cluster with `[cluster]
//! state_url` on a `file://` store; then one node is lost with its disk:
//! SIGKILL, and its data directory deleted.
//!
//! Checked from the server's log and the store, not from trawl's word:
//! every page of the ground truth is fetched, no host ever sees requests
//! closer than the politeness delay (across the takeover included), and
//! the dead node's partitions were restored by the others from their
//! chains. What the dead node did after its last checkpoint is fetched
//! again, bounded by the checkpoint interval.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::common::{
    archived_uris, assert_same_urls, audit_log_with_factor, eventually_true, gossip_addr, log_tail,
    logged_within, page_requests, segment_files, wait_exit, warc_files_in, ANY_BRIDGE,
};
use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};

const MIN_DELAY_MS: u64 = 60;
/// The nodes' `[politeness] delay_factor`: the audit owes exactly this.
const DELAY_FACTOR: f64 = 0.0;
const NODES: usize = 3;

/// Writes node `me`'s config (its own data dir under `dir`); its path.
/// The `[upload]` layer putting WARC files under `warcs`.
fn upload_layer(warcs: &Path) -> String {
    format!(
        "[upload]\nenabled = true\nurl = \"file://{}\"\nverify = \"size\"\n\
         retry_delay = \"100ms\"\n[warc]\nmax_file_bytes = {MAX_FILE_BYTES}\n",
        warcs.display()
    )
}

/// The nodes' `[warc] max_file_bytes` with uploads: small, so a crawl of
/// a few hundred pages fills several files per node.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

fn write_config(dir: &Path, state: Option<&Path>, gossip: &[SocketAddr], me: usize) -> PathBuf {
    write_node_config(
        dir,
        state,
        gossip,
        me,
        ("2s", "500ms"),
        "[admin]\nenabled = false\n",
    )
}

/// [`write_config`] with a lease and checkpoint interval and an `[admin]`
/// section.
fn write_node_config(
    dir: &Path,
    state: Option<&Path>,
    gossip: &[SocketAddr],
    me: usize,
    (lease, checkpoint_interval): (&str, &str),
    admin: &str,
) -> PathBuf {
    let peers: Vec<String> = gossip
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != me)
        .map(|(_, g)| format!("\"{g}\""))
        .collect();
    let extra = format!(
        "[cluster]\nenabled = true\ncluster_id = \"state\"\nnode_id = \"n{}\"\n\
         gossip = \"{}\"\nbridge = \"{ANY_BRIDGE}\"\npeers = [{}]\ngossip_interval = \"100ms\"\n\
         {}{}lease = \"{lease}\"\ncheckpoint_interval = \"{checkpoint_interval}\"\n\
         [storage]\npartitions = 8\n[fetch]\ntimeout = \"2s\"\n{admin}\
         [politeness]\ndelay_factor = {DELAY_FACTOR:?}\n",
        me + 1,
        gossip[me],
        peers.join(", "),
        state.map_or(String::new(), |s| format!(
            "state_url = \"file://{}\"\n",
            s.display()
        )),
        crate::common::cluster_auth(&format!("n{}", me + 1)),
    );
    // With a state store, records go to object storage too (before the
    // checkpoints that cover their pages).
    let extra = match state {
        Some(state) => extra + &upload_layer(&state.with_file_name("warcs")),
        None => extra,
    };
    let data = dir.join(format!("n{}", me + 1));
    let path = dir.join(format!("n{}.toml", me + 1));
    std::fs::write(
        &path,
        trawl::testweb::config_layer(&data, MIN_DELAY_MS, &extra),
    )
    .unwrap();
    path
}

fn spawn(config: &Path, seeds: Option<&Path>, log: &Path) -> Child {
    let mut args = vec!["--until-idle".into()];
    if let Some(seeds) = seeds {
        args.extend(["--seeds".into(), seeds.as_os_str().to_owned()]);
    }
    spawn_with(config, &args, log)
}

/// `trawl run --config <config> <args>`, logging into `log`.
fn spawn_with(config: &Path, args: &[std::ffi::OsString], log: &Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trawl"));
    cmd.args(["run", "--config"]).arg(config).args(args);
    let log = std::fs::File::create(log).unwrap();
    cmd.env(
        "RUST_LOG",
        "warn,trawl::actors::node=info,trawl::actors::ownership=info",
    )
    .env("NO_COLOR", "1")
    .stderr(log)
    .spawn()
    .expect("spawn trawl")
}

/// Manifests in the state store, per partition.
fn manifests(state: &Path) -> Vec<usize> {
    (0..8)
        .map(|p| {
            let dir = state.join(format!("partitions/{p:03}/manifests"));
            std::fs::read_dir(dir).map_or(0, |d| d.count())
        })
        .collect()
}

/// Waits until a manifest of `node` names checkpoint files.
fn wait_for_checkpoint_by(state: &Path, node: &str, limit: Duration) -> bool {
    eventually_true(limit, || {
        (0..8).any(|p| {
            let dir = state.join(format!("partitions/{p:03}/manifests"));
            std::fs::read_dir(dir).into_iter().flatten().any(|e| {
                let bytes = std::fs::read(e.unwrap().path()).unwrap_or_default();
                trawl::cluster::manifest::Manifest::decode(&bytes)
                    .is_ok_and(|m| m.owner.node == node && !m.files.is_empty())
            })
        })
    })
}

/// Three nodes on data directories of their own crawling a web of 24
/// hosts × 30 pages (generator seed `seed`), seeds given to n1, each
/// logging into `n<i>.log`; with `with_state`, a `file://` state store at
/// `state` (and uploads beside it).
struct Cluster {
    web: SyntheticWeb,
    server: TestWebServer,
    port: u16,
    dir: tempfile::TempDir,
    state: PathBuf,
    configs: Vec<PathBuf>,
    logs: Vec<PathBuf>,
    nodes: [Child; NODES],
}

fn start_cluster(seed: u64, with_state: bool) -> Cluster {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 24,
        pages_per_host: 30,
        seed,
        behaviours: false,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start(web.clone(), listen, 1).expect("start synthetic web");
    let port = server.addr().port();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let gossip: Vec<SocketAddr> = (0..NODES).map(|_| gossip_addr()).collect();
    let state_url = with_state.then_some(state.as_path());
    let configs: Vec<PathBuf> = (0..NODES)
        .map(|i| write_config(dir.path(), state_url, &gossip, i))
        .collect();
    let logs: Vec<PathBuf> = (1..=NODES)
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
        state,
        configs,
        logs,
        nodes,
    }
}

#[test]
fn a_node_lost_with_its_disk_loses_no_queued_url() {
    let Cluster {
        web,
        server,
        port,
        dir,
        state,
        configs,
        logs,
        nodes: [mut n1, mut n2, mut n3],
    } = start_cluster(41, true);

    let truth = web.ground_truth(port);
    assert!(
        server
            .log()
            .wait_for(truth.len() / 3, Duration::from_secs(60)),
        "the cluster did not get going"
    );
    // n2 has published a checkpoint with content: what it admitted and
    // fetched is in object storage.
    assert!(
        wait_for_checkpoint_by(&state, "n2", Duration::from_secs(30)),
        "n2 published no checkpoint; {}",
        log_tail(&logs[1], 40)
    );
    // A reclaimed spot instance: the process and its disk are gone.
    n2.kill().unwrap();
    let _ = n2.wait();
    std::fs::remove_dir_all(dir.path().join("n2")).unwrap();
    let killed_at = server.log().len();

    assert!(
        wait_exit(&mut n1, Duration::from_secs(120)).success(),
        "n1 failed"
    );
    assert!(
        wait_exit(&mut n3, Duration::from_secs(120)).success(),
        "n3 failed"
    );
    let records = server.log().records();
    server.stop();
    assert!(killed_at < truth.len(), "killed mid-crawl");

    let requests = page_requests(&records, port);
    let fetched: BTreeSet<String> = requests.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    // Redone: what n2 fetched after its partitions' last checkpoints
    // (half a second apart) and what it had in flight; a small share.
    let twice: Vec<_> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.len() * 5 < truth.len(),
        "fetched twice: {} of {}",
        twice.len(),
        truth.len()
    );
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // The survivors restored n2's partitions from their chains.
    let survivors = [&logs[0], &logs[2]].map(|p| std::fs::read_to_string(p).unwrap());
    assert!(
        survivors
            .iter()
            .any(|log| log.contains("partition restored from its chain")),
        "no partition restored: {survivors:?}"
    );
    // Every page is archived in object storage (a response, or a revisit
    // of a payload stored before), though n2's disk is gone: n2's last
    // file in the segments its checkpoints put.
    let warcs = dir.path().join("warcs");
    let archived = archived_uris(&warcs);
    let missing: Vec<_> = truth.difference(&archived).collect();
    assert!(
        missing.is_empty(),
        "not archived in object storage: {missing:?}"
    );
    let segments = segment_files(&warcs);
    assert!(
        !segments.is_empty()
            && segments
                .iter()
                .all(|s| s.to_string_lossy().contains("-n2-")),
        "n2's last file should be in segments, and only n2's: {segments:?}"
    );
    // The operator joins them into the file they were cut from.
    let joined = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["uploads", "join", "--node", "n2", "--config"])
        .arg(&configs[0])
        .arg("--scratch")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        joined.status.success(),
        "{}",
        String::from_utf8_lossy(&joined.stderr)
    );
    let said = String::from_utf8_lossy(&joined.stdout);
    assert!(
        said.contains("-n2-") && said.contains(" joined: "),
        "{said}"
    );
    assert!(
        segment_files(&warcs).is_empty(),
        "segments left after the join"
    );
    assert_eq!(
        archived_uris(&warcs),
        archived,
        "the join kept every record"
    );
    // n2's joined files end at its last seal; the others' are full.
    assert_files_reach_their_size(&warcs, &["n1", "n3"]);
    // Every partition has a chain, and each ends in a clean hand-back.
    for (p, n) in manifests(&state).into_iter().enumerate() {
        assert!(n > 0, "partition {p} has no manifest");
        let last = std::fs::read_dir(state.join(format!("partitions/{p:03}/manifests")))
            .unwrap()
            .map(|e| e.unwrap().path())
            .max()
            .unwrap();
        let m = trawl::cluster::manifest::Manifest::decode(&std::fs::read(&last).unwrap()).unwrap();
        assert!(
            m.released,
            "partition {p}'s last manifest is not a hand-back: {m:?}"
        );
    }
}

/// Every WARC file in object storage of `nodes` (nodes that stopped
/// cleanly) but the last of each holds at least 90 % of `max_file_bytes`
/// (a file rotates before the exchange that would not fit): checkpoints
/// put segments, they do not close files.
fn assert_files_reach_their_size(warcs: &Path, nodes: &[&str]) {
    let files = warc_files_in(warcs);
    let mut by_node: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let node = name.split('-').nth(1).unwrap().to_owned();
        if !nodes.contains(&node.as_str()) {
            continue;
        }
        let size = std::fs::metadata(file).unwrap().len();
        by_node.entry(node).or_default().push(size);
    }
    for (node, sizes) in &by_node {
        let (_last, full) = sizes.split_last().unwrap();
        for size in full {
            assert!(
                *size * 10 >= MAX_FILE_BYTES * 9 && *size <= MAX_FILE_BYTES,
                "{node}: a file of {size} bytes, max_file_bytes {MAX_FILE_BYTES}: {sizes:?}"
            );
        }
    }
    assert_eq!(
        by_node.len(),
        nodes.len(),
        "a node uploaded nothing: {by_node:?}"
    );
    let files_total: usize = by_node.values().map(Vec::len).sum();
    assert!(
        files_total > by_node.len(),
        "no node filled a file: {by_node:?}"
    );
    eprintln!("WARC files per node (bytes): {by_node:?}");
}

/// A seed a cluster node has answered outlives the node and its disk:
/// the answer waits until a published checkpoint holds the seed. The
/// node (alone in its cluster, so holding every partition, checkpoints
/// 10 s apart) is lost with its disk right after answering; another
/// takes its partitions from their chains and crawls every page the
/// seeds lead to. Answered before a checkpoint, the seeds would be in no
/// chain, and the second node would find nothing to do.
#[test]
fn a_seed_answered_outlives_the_node_and_its_disk() {
    let (web, server, port) = crate::common::start_plain_web(4, 12, 43);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let gossip = [gossip_addr(), gossip_addr()];
    let admin = crate::common::reserved_port();
    let configs = [
        format!("[admin]\nenabled = true\nlisten = \"{admin}\"\n"),
        "[admin]\nenabled = false\n".to_owned(),
    ]
    .iter()
    .enumerate()
    .map(|(i, a)| write_node_config(dir.path(), Some(&state), &gossip, i, ("20s", "10s"), a))
    .collect::<Vec<_>>();
    let logs = [dir.path().join("n1.log"), dir.path().join("n2.log")];
    // n1 runs until killed: without `--until-idle`, and with no seeds yet.
    let mut n1 = spawn_with(&configs[0], &[], &logs[0]);
    // `trawl ctl seed` succeeds once n1 holds the seeds' partitions.
    let seeded = eventually_true(Duration::from_secs(30), || {
        Command::new(env!("CARGO_BIN_EXE_trawl"))
            .args(["ctl", "--admin", &admin.to_string(), "seed"])
            .args(web.seeds(port))
            .output()
            .is_ok_and(|out| out.status.success())
    });
    n1.kill().unwrap();
    let _ = n1.wait();
    let n1_log = std::fs::read_to_string(&logs[0]).unwrap_or_default();
    assert!(seeded, "n1 never answered the seeds: {n1_log}");
    std::fs::remove_dir_all(dir.path().join("n1")).unwrap();

    let mut n2 = spawn(&configs[1], None, &logs[1]);
    let status = wait_exit(&mut n2, Duration::from_secs(120));
    let n2_log = std::fs::read_to_string(&logs[1]).unwrap_or_default();
    assert!(status.success(), "n2 failed: {n2_log}");
    let records = server.log().records();
    server.stop();
    let fetched: BTreeSet<String> = page_requests(&records, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
    assert!(
        n2_log.contains("partition restored from its chain"),
        "n2 restored no partition: {n2_log}"
    );
}

/// Without `state_url`, a cluster on separate disks is restart-in-place:
/// while a node is down, no other node opens its partitions (their state
/// is on its disk); it comes back, and the crawl completes with nothing
/// fetched twice but what it had in flight.
#[test]
fn without_state_url_a_dead_nodes_partitions_wait_for_it() {
    let Cluster {
        web,
        server,
        port,
        dir,
        state: _state,
        configs,
        logs,
        nodes: [mut n1, mut n2, mut n3],
    } = start_cluster(42, false);
    let truth = web.ground_truth(port);
    assert!(
        server
            .log()
            .wait_for(truth.len() / 3, Duration::from_secs(60)),
        "the cluster did not get going"
    );
    n2.kill().unwrap();
    let _ = n2.wait();
    // The others are assigned its partitions and refuse them.
    let waiting = "its state is on its last holder's disk";
    assert!(
        logged_within(&[&logs[0], &logs[2]], waiting, Duration::from_secs(30)),
        "nobody waits for n2"
    );
    let mut again = spawn(&configs[1], None, &dir.path().join("n2-again.log"));
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
    // Fetched twice: only what n2 had in flight (one request per host).
    let twice: Vec<_> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.len() <= 24, "fetched twice: {twice:?}");
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // No partition store was created beside n2's.
    for n in ["n1", "n3"] {
        let mine: BTreeSet<_> = std::fs::read_dir(dir.path().join(n).join("partitions"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let n2s: BTreeSet<_> = std::fs::read_dir(dir.path().join("n2").join("partitions"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            mine.is_disjoint(&n2s),
            "{n} opened n2's partitions: {mine:?} / {n2s:?}"
        );
    }
}

/// A rolling restart with `state_url`: n2 stops cleanly (SIGTERM) and
/// hands its partitions back through final checkpoints; the others take
/// them at once; n2 returns and gets them back, each hand-back restoring
/// from the chain. Nothing is lost and, every hand-back drained first,
/// nothing but what was in flight at a stop is fetched twice.
#[test]
fn a_rolling_restart_hands_partitions_back_and_forth_through_the_chain() {
    let Cluster {
        web,
        server,
        port,
        dir,
        state,
        configs,
        logs,
        nodes: [mut n1, mut n2, mut n3],
    } = start_cluster(43, true);
    let truth = web.ground_truth(port);
    assert!(
        wait_for_checkpoint_by(&state, "n2", Duration::from_secs(60)),
        "n2 published no checkpoint; {}",
        log_tail(&logs[1], 40)
    );
    // SAFETY: a signal to a child process this test started.
    assert_eq!(
        unsafe { libc::kill(n2.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    assert!(
        wait_exit(&mut n2, Duration::from_secs(60)).success(),
        "n2 did not stop cleanly"
    );
    let stopped_at = server.log().len();
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
    assert!(stopped_at < truth.len(), "stopped mid-crawl");
    let requests = page_requests(&records, port);
    let fetched: BTreeSet<String> = requests.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    let twice: Vec<_> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.len() <= 24, "fetched twice: {twice:?}");
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let first = std::fs::read_to_string(&logs[1]).unwrap();
    assert!(
        first.contains("partitions handed back to the state store"),
        "{first}"
    );
    let back = std::fs::read_to_string(&again_log).unwrap();
    assert!(back.contains("partition restored from its chain"), "{back}");
}

/// The head manifest of every partition in the `file://` state store.
fn heads(state: &Path) -> Vec<trawl::cluster::manifest::Manifest> {
    (0..8)
        .filter_map(|p| {
            let dir = state.join(format!("partitions/{p:03}/manifests"));
            let last = std::fs::read_dir(dir)
                .ok()?
                .map(|e| e.unwrap().path())
                .max()?;
            trawl::cluster::manifest::Manifest::decode(&std::fs::read(last).ok()?).ok()
        })
        .collect()
}

/// A partition whose chain cannot be restored for a while (one of its
/// files is missing from the store) is not held unfetched: the node that
/// claimed it hands it back and tries again later, and once the file is
/// back the partition is restored and crawled to the end.
#[test]
fn a_claim_that_cannot_be_restored_is_handed_back_and_tried_again() {
    let Cluster {
        web,
        server,
        port,
        dir,
        state,
        configs: _configs,
        logs,
        nodes: [mut n1, mut n2, mut n3],
    } = start_cluster(44, true);
    let truth = web.ground_truth(port);
    assert!(
        wait_for_checkpoint_by(&state, "n2", Duration::from_secs(60)),
        "n2 published no checkpoint; {}",
        log_tail(&logs[1], 40)
    );
    n2.kill().unwrap();
    let _ = n2.wait();
    std::fs::remove_dir_all(dir.path().join("n2")).unwrap();
    // A file n2 uploaded itself (no survivor has it cached) of a head n2
    // left: hidden before the survivors claim (they watch a lease first).
    let (p, key) = heads(&state)
        .into_iter()
        .filter(|m| m.owner.node == "n2")
        .find_map(|m| {
            let epoch = format!("{:020}", m.owner.epoch);
            let file = m
                .files
                .iter()
                .find(|f| f.name.ends_with(".sst") && f.key.contains(&epoch))?;
            Some((m.partition, file.key.clone()))
        })
        .expect("a head of n2's with a file of its own");
    let object = state.join(format!("partitions/{p:03}/{key}"));
    let hidden = object.with_extension("hidden");
    std::fs::rename(&object, &hidden).unwrap();
    let failed = "cannot open a claimed partition; handing it back";
    assert!(
        logged_within(&[&logs[0], &logs[2]], failed, Duration::from_secs(60)),
        "no survivor failed to restore partition {p}"
    );
    std::fs::rename(&hidden, &object).unwrap();
    for (name, child) in [("n1", &mut n1), ("n3", &mut n3)] {
        assert!(
            wait_exit(child, Duration::from_secs(120)).success(),
            "{name} failed"
        );
    }
    let records = server.log().records();
    server.stop();
    let fetched: BTreeSet<String> = page_requests(&records, port).keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let restored = format!("partition restored from its chain partition={p}");
    assert!(
        [&logs[0], &logs[2]]
            .iter()
            .any(|l| std::fs::read_to_string(l).unwrap().contains(&restored)),
        "partition {p} was never restored"
    );
}

/// A node that cannot checkpoint gives its partitions up. n1's uploads
/// of WARC files fail (its upload target is under a regular file), so no
/// checkpoint of its partitions can be published (records go to object
/// storage before the checkpoints that count their pages); renewals
/// would keep its leases for ever while nothing it does becomes durable.
/// After a lease of failures it hands each partition back and shuns it,
/// gossip passes it to n2, and every page ends up archived in object
/// storage by n2. Before, n1's partitions were never archived.
#[test]
fn a_node_that_cannot_checkpoint_gives_its_partitions_to_one_that_can() {
    let (web, server, port) = crate::common::start_plain_web(8, 10, 44);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let gossip = [gossip_addr(), gossip_addr()];
    let configs: Vec<PathBuf> = (0..2)
        .map(|i| {
            write_node_config(
                dir.path(),
                Some(&state),
                &gossip,
                i,
                ("2s", "500ms"),
                "[admin]\nenabled = false\n",
            )
        })
        .collect();
    // n1's uploads go under a regular file: every one fails.
    let blocked = dir.path().join("not-a-directory");
    std::fs::write(&blocked, b"").unwrap();
    let warcs = state.with_file_name("warcs");
    let n1 = std::fs::read_to_string(&configs[0]).unwrap().replace(
        &format!("file://{}", warcs.display()),
        &format!("file://{}/warcs", blocked.display()),
    );
    std::fs::write(&configs[0], n1).unwrap();
    let logs = [dir.path().join("n1.log"), dir.path().join("n2.log")];
    let args = ["--seeds".into(), seeds.as_os_str().to_owned()];
    let mut nodes = [
        spawn_with(&configs[0], &args, &logs[0]),
        spawn_with(&configs[1], &args, &logs[1]),
    ];
    let truth = web.ground_truth(port);
    let archived_all = eventually_true(Duration::from_secs(120), || {
        warcs.exists() && truth.is_subset(&archived_uris(&warcs))
    });
    for node in &mut nodes {
        let _ = node.kill();
        let _ = node.wait();
    }
    let n1_log = std::fs::read_to_string(&logs[0]).unwrap_or_default();
    let records = server.log().records();
    server.stop();
    let archived = archived_uris(&warcs);
    let missing: Vec<_> = truth.difference(&archived).collect();
    assert!(
        archived_all,
        "not archived in object storage: {missing:?}\n{n1_log}"
    );
    assert!(
        n1_log.contains("no checkpoint of the partition could be made for a lease"),
        "n1 never gave a partition up:\n{n1_log}"
    );
    let report = audit_log_with_factor(&web, &records, MIN_DELAY_MS, DELAY_FACTOR);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

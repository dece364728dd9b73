//! Takeover of a lost node's partitions from object storage: how long
//! from the new node's start to its first request, and how many bytes it
//! restored, for a frontier of a million queued URLs.
//!
//! ```text
//! cargo bench --bench takeover                       # 1,000,000 URLs over 100,000 hosts
//! TRAWL_SCALE_URLS=200000 TRAWL_SCALE_HOSTS=20000 cargo bench --bench takeover
//! ```
//!
//! Node n1 (`[cluster] state_url` on a `file://` store, lease 4 s,
//! checkpoints every 2 s) is given N seed URLs over H hosts, all resolving
//! to a loopback listener that accepts and closes every connection (every
//! robots.txt is unreachable: nothing is fetched, everything stays
//! queued). Once the frontier holds them all and checkpoints covering
//! them are published, n1 is killed (SIGKILL) and its data directory
//! deleted. Node n2, on a data directory of its own, starts with one new
//! seed (a host not seen before, so its robots.txt request is the first
//! request the restored frontier can make). Measured:
//! - from n2's start to its first connection on the listener: membership,
//!   a whole lease watching n1's heads unchanged, the claims, the
//!   restores, and the hold every taken host owes (`lease +
//!   fetch.timeout` from the heads first seen);
//! - the bytes restored (`trawl_restore_bytes_total`) and the time from
//!   the first claim to the last restore, from n2's log;
//! - the frontier n2 holds once it fetches: all N URLs, or some were lost.
//!
//! Target (issue 33): restored and fetching within 30 s on loopback.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::{env_or, free_port, metric_sum, trawl_run, write_seeds, Listener};

const PARTITIONS: u16 = 16;

/// Node `node`'s config: a cluster of the two, its own data directory, the
/// shared state store.
fn write_config(
    dir: &Path,
    node: usize,
    state: &Path,
    expected: u64,
) -> (std::path::PathBuf, std::net::SocketAddr) {
    let admin = free_port();
    let gossip = |n: usize| format!("127.0.0.{}:{}", 10 + n, 17_946);
    let other = 3 - node;
    let toml = format!(
        r#"
[crawl]
max_depth = 0
[robots]
retry_base = "10m"
[dns.overrides]
"*.test" = "127.0.0.1"
[fetch]
allow_addresses = ["127.0.0.0/8"]
timeout = "2s"
[seen]
expected_urls = {expected}
[admin]
enabled = true
listen = "{admin}"
[storage]
data_dir = {data:?}
partitions = {PARTITIONS}
[cluster]
enabled = true
cluster_id = "takeover"
node_id = "n{node}"
gossip = "{me}"
bridge = "127.0.0.{node_ip}:0"
peers = ["{peer}"]
gossip_interval = "200ms"
state_url = "file://{state}"
lease = "4s"
checkpoint_interval = "2s"
{auth}"#,
        data = dir.join(format!("n{node}")).display().to_string(),
        me = gossip(node),
        node_ip = 10 + node,
        peer = gossip(other),
        state = state.display(),
        auth = {
            let certs = trawl::cluster::tls::CertsDir::new(dir.join("certs"));
            let id = format!("n{node}");
            certs
                .make("takeover", std::slice::from_ref(&id))
                .expect("cluster credentials");
            certs.toml(&id)
        },
    );
    let path = dir.join(format!("n{node}.toml"));
    std::fs::write(&path, toml).unwrap();
    (path, admin)
}

fn spawn(config: &Path, seeds: Option<&Path>, seed: Option<&str>, log: &Path) -> Child {
    trawl_run(config, seeds, seed)
        .env("RUST_LOG", "warn,trawl::actors::ownership=info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn trawl")
}

/// Waits until `admin`'s frontier holds `queued` URLs.
fn wait_queued(child: &mut Child, admin: std::net::SocketAddr, queued: u64) -> Duration {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(1800) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("trawl exited early: {status}");
        }
        if metric_sum(admin, "trawl_frontier_size", "").is_some_and(|n| n as u64 >= queued) {
            return started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("the frontier never reached {queued} URLs");
}

/// Bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => bytes_under(&e.path()),
                _ => e.metadata().map_or(0, |m| m.len()),
            })
            .sum()
    })
}

/// Seconds from the first `partition claimed` to the last `partition
/// restored from its chain` in a node's log (RFC 3339 timestamps).
fn restore_span(log: &str) -> Option<f64> {
    let at = |line: &str| {
        let stamp = line.split_whitespace().next()?;
        chrono::DateTime::parse_from_rfc3339(stamp).ok()
    };
    let first = log
        .lines()
        .filter(|l| l.contains("partition claimed"))
        .find_map(at)?;
    let last = log
        .lines()
        .rev()
        .filter(|l| l.contains("partition restored from its chain"))
        .find_map(at)?;
    Some((last - first).num_milliseconds() as f64 / 1000.0)
}

fn main() {
    let urls = env_or("TRAWL_SCALE_URLS", 1_000_000);
    let hosts = env_or("TRAWL_SCALE_HOSTS", 100_000);
    let listener = Listener::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let seeds = dir.path().join("seeds.txt");
    write_seeds(&seeds, urls, hosts, listener.addr.port());
    let (c1, admin1) = write_config(dir.path(), 1, &state, urls);
    let (c2, admin2) = write_config(dir.path(), 2, &state, urls);

    let mut n1 = spawn(&c1, Some(&seeds), None, &dir.path().join("n1.log"));
    let queued_in = wait_queued(&mut n1, admin1, urls);
    // Checkpoints covering the whole frontier: two intervals and a margin.
    std::thread::sleep(Duration::from_secs(6));
    n1.kill().unwrap();
    let _ = n1.wait();
    std::fs::remove_dir_all(dir.path().join("n1")).unwrap();
    let chain_bytes = bytes_under(&state);

    listener.reset();
    let started_ms = listener.epoch.elapsed().as_millis() as u64;
    let fresh = format!("http://fresh.test:{}/", listener.addr.port());
    let log2 = dir.path().join("n2.log");
    let mut n2 = spawn(&c2, None, Some(&fresh), &log2);
    let deadline = Instant::now() + Duration::from_secs(300);
    let first_ms = loop {
        if let Some(ms) = listener.first() {
            break Some(ms.saturating_sub(started_ms));
        }
        if Instant::now() > deadline || n2.try_wait().unwrap().is_some() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let held = metric_sum(admin2, "trawl_frontier_size", "").unwrap_or(0.0) as u64;
    let downloaded = metric_sum(admin2, "trawl_restore_bytes_total", "downloaded").unwrap_or(0.0);
    let _ = n2.kill();
    let _ = n2.wait();
    let log = std::fs::read_to_string(&log2).unwrap_or_default();
    let restores = log.matches("partition restored from its chain").count();
    println!(
        "takeover: {urls} URLs over {hosts} hosts queued in {:.1} s; chain {:.1} MB in object storage; \
         new owner: first request {} after its start; {restores} of {PARTITIONS} partitions restored, \
         {:.1} MB downloaded, first claim to last restore {}; frontier after the takeover: {held} URLs \
         ({} lost)",
        queued_in.as_secs_f64(),
        chain_bytes as f64 / 1e6,
        first_ms.map_or("never".to_owned(), |ms| format!("{:.2} s", ms as f64 / 1000.0)),
        downloaded / 1e6,
        restore_span(&log).map_or("?".to_owned(), |s| format!("{s:.2} s")),
        (urls + 1).saturating_sub(held),
    );
}

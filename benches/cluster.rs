//! The cluster's cost: one `trawl run` process against three cluster nodes
//! on the same synthetic web, and the time from a node's death to its
//! partitions crawling again.
//!
//! ```text
//! cargo bench --bench cluster -- [HOSTS] [PAGES_PER_HOST] [MIN_DELAY_MS] [CHECKPOINT_MS]
//! ```
//! Defaults: 300 hosts × 20 pages, 5 ms delay. The synthetic web is served
//! from this process; the crawlers are child processes, whose CPU time is
//! read from `getrusage(RUSAGE_CHILDREN)` around each run, so the figures
//! are the crawlers' alone (bridge, gossip, outbox and acks included on
//! the cluster's side). Three nodes share this machine's cores, so the
//! cluster is not expected to be faster here: the figure that matters is
//! CPU per page, the cost of being a cluster.
//!
//! The third and fourth runs are the cost of checkpointing, side by side:
//! the same cluster, each node on a data directory of its own with
//! `[upload]` to a `file://` store, first without `state_url`
//! (checkpointing off: restart-in-place), then with `[cluster] state_url`
//! on another `file://` store (checkpoints every `checkpoint_interval`,
//! 5 s by default, or the fourth argument in ms). Only checkpointing
//! differs between them; the figures are their ratios, and the
//! object-store writes per page (every object in the two stores is one
//! PUT).
//!
//! With `TRAWL_BENCH_TIMELINE=1` each run also prints the requests the
//! server saw per half second.
//!
//! The failover run kills one node (SIGKILL) a third into the crawl and
//! reports how long until a survivor has taken one of its partitions over
//! and how long until the first request to a host of that partition (the
//! takeover waits `fetch.timeout`, 2 s here, before contacting its hosts).

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};

const PARTITIONS: u16 = 16;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

struct Member {
    id: String,
    gossip: SocketAddr,
    bridge: SocketAddr,
}

fn free(udp: bool) -> SocketAddr {
    if udp {
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    } else {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }
}

/// Writes the config of node `me` of `all` (a single node if `all` is
/// empty) into `dir`.
fn config(dir: &Path, data: &Path, delay_ms: u64, all: &[Member], me: usize) -> PathBuf {
    config_with(dir, data, delay_ms, all, me, "")
}

/// [`config`] with `more` appended to the `[cluster]` section and after.
fn config_with(
    dir: &Path,
    data: &Path,
    delay_ms: u64,
    all: &[Member],
    me: usize,
    more: &str,
) -> PathBuf {
    let mut extra = format!(
        "[politeness]\ndelay_factor = 0.0\n[admin]\nenabled = false\n\
         [storage]\npartitions = {PARTITIONS}\n[fetch]\ntimeout = \"2s\"\n"
    );
    if let Some(m) = all.get(me) {
        let peers: Vec<String> = all
            .iter()
            .filter(|p| p.id != m.id)
            .map(|p| format!("\"{}\"", p.gossip))
            .collect();
        extra += &format!(
            "[cluster]\nenabled = true\ncluster_id = \"bench\"\nnode_id = \"{}\"\n\
             gossip = \"{}\"\nbridge = \"{}\"\npeers = [{}]\ngossip_interval = \"100ms\"\n",
            m.id,
            m.gossip,
            m.bridge,
            peers.join(", ")
        );
        let certs = trawl::cluster::tls::CertsDir::new(dir.join("certs"));
        certs
            .make("bench", std::slice::from_ref(&m.id))
            .expect("cluster credentials");
        extra += &certs.toml(&m.id);
        extra += more;
    }
    let name = all.get(me).map_or("single".to_owned(), |m| m.id.clone());
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, trawl::testweb::config_layer(data, delay_ms, &extra)).unwrap();
    path
}

fn spawn(config: &Path, seeds: Option<&Path>, log: &Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trawl"));
    cmd.args(["run", "--until-idle", "--config"]).arg(config);
    if let Some(seeds) = seeds {
        cmd.arg("--seeds").arg(seeds);
    }
    cmd.env("RUST_LOG", "warn,trawl::actors::node=info")
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn trawl")
}

struct Run {
    wall: Duration,
    cpu: f64,
    pages: usize,
    /// Objects in the state and upload stores (0 without them).
    objects: usize,
}

/// Crawls `web` with `nodes` processes (0: one single node).
fn crawl(web: &SyntheticWeb, delay_ms: u64, nodes: usize) -> Run {
    crawl_as(web, delay_ms, nodes, Disks::Shared)
}

/// Where a cluster's nodes keep their state.
#[derive(Clone, Copy)]
enum Disks {
    /// One data directory for every node, no uploads.
    Shared,
    /// A data directory each and `[upload]`; with `Some(ms)`, also
    /// `state_url`, checkpointing every `ms`.
    Own(Option<u64>),
}

/// Objects (files) under `dir`, recursively.
fn objects(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.file_type().is_ok_and(|t| t.is_dir()) {
                true => objects(&e.path()),
                false => 1,
            })
            .sum()
    })
}

/// [`crawl`], the nodes' state kept as `disks` says; the objects the
/// state and upload stores hold afterwards in `Run::objects`.
fn crawl_as(web: &SyntheticWeb, delay_ms: u64, nodes: usize, disks: Disks) -> Run {
    let server = TestWebServer::start(web.clone(), "127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let port = server.addr().port();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let seeds = dir.path().join("seeds");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let all: Vec<Member> = (1..=nodes)
        .map(|i| Member {
            id: format!("n{i}"),
            gossip: free(true),
            bridge: free(false),
        })
        .collect();
    let cpu = children_cpu_seconds();
    let started = Instant::now();
    let state = dir.path().join("state");
    let warcs = dir.path().join("warcs");
    let mut children: Vec<Child> = (0..nodes.max(1))
        .map(|i| {
            let cfg = match disks {
                Disks::Shared => config(dir.path(), &data, delay_ms, &all, i),
                Disks::Own(checkpoint_ms) => {
                    let chain = checkpoint_ms.map_or(String::new(), |ms| {
                        let lease = (4 * ms).max(2000);
                        format!(
                            "state_url = \"file://{}\"\ncheckpoint_interval = \"{ms}ms\"\n\
                             lease = \"{lease}ms\"\n",
                            state.display()
                        )
                    });
                    let more = format!(
                        "{chain}[upload]\nenabled = true\nurl = \"file://{}\"\nverify = \"size\"\n",
                        warcs.display()
                    );
                    let own = dir.path().join(format!("data{i}"));
                    config_with(dir.path(), &own, delay_ms, &all, i, &more)
                }
            };
            let log = dir.path().join(format!("{i}.log"));
            spawn(&cfg, (i == 0).then_some(seeds.as_path()), &log)
        })
        .collect();
    for (i, child) in children.iter_mut().enumerate() {
        let status = child.wait().unwrap();
        if !status.success() {
            let log = std::fs::read_to_string(dir.path().join(format!("{i}.log")));
            let log = log.unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "crawler {i} of {nodes} failed ({status}); its log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
    let wall = started.elapsed();
    let pages = server.log().len();
    if std::env::var_os("TRAWL_BENCH_TIMELINE").is_some() {
        eprintln!("requests per 0.5 s: {:?}", timeline(&server, started, wall));
    }
    server.stop();
    Run {
        wall,
        cpu: children_cpu_seconds() - cpu,
        pages,
        objects: objects(&state) + objects(&warcs),
    }
}

/// Requests the server saw in each half second since `started`: where a
/// crawl slowed down, and its tail (a stall every checkpoint, say).
fn timeline(server: &TestWebServer, started: Instant, wall: Duration) -> Vec<usize> {
    let mut bins = vec![0usize; (wall.as_millis() / 500 + 1) as usize];
    let last = bins.len() - 1;
    for r in server.log().records() {
        let at = r.start.saturating_duration_since(started).as_millis() / 500;
        bins[(at as usize).min(last)] += 1;
    }
    bins
}

/// Kills one of three nodes a third into the crawl: (death → a survivor
/// holds one of its partitions, death → the survivor's first request to a
/// host of it).
fn failover(web: &SyntheticWeb, delay_ms: u64) -> (Duration, Option<Duration>) {
    let server = TestWebServer::start(web.clone(), "127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let port = server.addr().port();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let seeds = dir.path().join("seeds");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let all: Vec<Member> = (1..=3)
        .map(|i| Member {
            id: format!("n{i}"),
            gossip: free(true),
            bridge: free(false),
        })
        .collect();
    let logs: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("{i}.log")))
        .collect();
    let mut children: Vec<Child> = (0..3)
        .map(|i| {
            let cfg = config(dir.path(), &data, delay_ms, &all, i);
            spawn(&cfg, (i == 0).then_some(seeds.as_path()), &logs[i])
        })
        .collect();
    let truth = web.ground_truth(port).len();
    assert!(server.log().wait_for(truth / 3, Duration::from_secs(120)));
    children[1].kill().unwrap();
    let died = Instant::now();
    let _ = children[1].wait();
    // The first takeover a survivor logs, and the partition it names.
    let (taken_after, partition) = loop {
        let text: String = [&logs[0], &logs[2]]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        let line = text.lines().find(|l| l.contains("did not stop cleanly"));
        if let Some(line) = line {
            let plain: String = line
                .split('\u{1b}')
                .map(|s| s.split_once('m').map_or(s, |(_, r)| r))
                .collect();
            let partition = plain
                .rsplit("partition=")
                .next()
                .and_then(|p| p.trim().parse::<u16>().ok());
            break (died.elapsed(), partition);
        }
        assert!(died.elapsed() < Duration::from_secs(60), "no takeover");
        std::thread::sleep(Duration::from_millis(10));
    };
    let first_request = partition.and_then(|p| {
        let deadline = died + Duration::from_secs(60);
        while Instant::now() < deadline {
            // After the takeover: requests the dead node had sent may
            // still reach the server after its death.
            let taken_at = died + taken_after;
            let hit =
                server.log().records().into_iter().find(|r| {
                    r.start > taken_at && trawl::url::partition_of(&r.host, PARTITIONS) == p
                });
            if let Some(r) = hit {
                return Some(r.start - died);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    });
    for i in [0, 2] {
        let _ = children[i].wait();
    }
    server.stop();
    (taken_after, first_request)
}

fn main() {
    let (hosts, pages, delay_ms) = (arg(0, 300) as u32, arg(1, 20) as u32, arg(2, 5));
    let web = SyntheticWeb::new(WebSpec {
        hosts,
        pages_per_host: pages,
        seed: 9,
        behaviours: false,
    });
    println!("cluster bench: {hosts} hosts × {pages} pages, {delay_ms} ms delay, {PARTITIONS} partitions");
    let checkpoint_ms = arg(3, 5000);
    let one = crawl(&web, delay_ms, 0);
    let three = crawl(&web, delay_ms, 3);
    let local = crawl_as(&web, delay_ms, 3, Disks::Own(None));
    let durable = crawl_as(&web, delay_ms, 3, Disks::Own(Some(checkpoint_ms)));
    for (name, run) in [
        ("1 node", &one),
        ("3 nodes", &three),
        ("3 local", &local),
        ("3 durable", &durable),
    ] {
        println!(
            "{name:8} {:6} requests in {:6.2} s = {:7.0} pages/s; CPU {:6.2} s = {:5.3} ms/page",
            run.pages,
            run.wall.as_secs_f64(),
            run.pages as f64 / run.wall.as_secs_f64(),
            run.cpu,
            run.cpu * 1000.0 / run.pages as f64
        );
    }
    println!(
        "cluster/single: CPU per page × {:.2}, wall × {:.2}",
        (three.cpu / three.pages as f64) / (one.cpu / one.pages as f64),
        three.wall.as_secs_f64() / one.wall.as_secs_f64()
    );
    println!(
        "checkpointing on (every {checkpoint_ms} ms)/off, both with [upload]: CPU per page × {:.2}, \
         pages/s × {:.2}; {} objects written = {:.3} PUTs per page (off: {:.3})",
        (durable.cpu / durable.pages as f64) / (local.cpu / local.pages as f64),
        local.wall.as_secs_f64() / durable.wall.as_secs_f64(),
        durable.objects,
        durable.objects as f64 / durable.pages as f64,
        local.objects as f64 / local.pages as f64
    );
    let (taken, crawling) = failover(&web, delay_ms);
    println!(
        "failover: a partition of the killed node taken over after {:.2} s, its first host contacted after {}",
        taken.as_secs_f64(),
        crawling.map_or("(none seen)".into(), |d| format!("{:.2} s", d.as_secs_f64()))
    );
}

//! Crawl order measured like the papers do (issue #49, item 5): trawl
//! crawls a web built from a link graph, under the default politeness but
//! a small `min_delay`, and the bench reports the share of the graph's
//! total PageRank held by the first 1, 2, 5, 10 and 25 % of the pages it
//! fetched, beside orders computed on the same graph: breadth-first (the
//! papers' plain global one, and the polite one: per-host FIFO queues
//! served round-robin), in-link order (true in-degrees), the polite
//! oracle (round-robin, each host taking its known page of highest
//! PageRank: what an importance ordering aims at under politeness), both
//! again with a fetch capacity of one host in ten per round (`cap-`: a
//! crawl bound by its connections rather than by politeness, where the
//! oracle also picks the hosts whose best page ranks highest), the same
//! rounds on trawl's online estimate (`polite-opic`, `cap-opic`: OPIC
//! cash, a queued page credited by later links from other hosts), and the
//! best possible order (the N pages of highest PageRank).
//!
//! ```text
//! cargo bench --bench ordering
//! ```
//!
//! - `TRAWL_ORDERING_PAGES=N` (default 3000): pages of each generated
//!   graph (a host per ten pages; `src/testweb/graph.rs`);
//! - `TRAWL_ORDERING_GRAPHS=S,S..` (default `1,2`): the seeds of the
//!   generated graphs, one crawl (per ordering) each;
//! - `TRAWL_ORDERING_GRAPH=FILE`: crawl the graph in FILE instead (the
//!   format of `trawl testweb --graph`; its hosts must be `*.test` names);
//! - `TRAWL_ORDERING=fifo|importance|both` (default both): the
//!   `[frontier] ordering` of the crawls; where the config does not know
//!   that key yet, the crawl runs without it (with a note);
//! - `TRAWL_ORDERING_ACTIVE_HOSTS=N`: `[frontier] max_active_hosts` (a
//!   crawl bound by its live hosts, like the `cap-` orders; e.g. a tenth
//!   of the graph's hosts);
//! - `TRAWL_ORDERING_CYCLE=DURATION`: `[frontier] host_cycle` (e.g. `2s`:
//!   with active hosts capped, a host gives its slot up after a cycle);
//! - `TRAWL_ORDERING_DELAY_MS=N`: `[politeness] min_delay`; by default the
//!   largest host's pages take about 25 s of delays, at least 20 ms each.
//!
//! The fetch order is the order in which the server saw the pages'
//! requests start (robots.txt aside). The server runs in this process;
//! CPU per page is the crawler's: the process' CPU less the server
//! threads'. A bench prints figures and asserts nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

// The allocator the `trawl` binary uses, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use trawl::actors::{Node, Seed, Shutdown, WhenIdle};
use trawl::config::Config;
use trawl::metrics::Metrics;
use trawl::testweb::graph::{self, GraphSpec, HostPick, LinkGraph};
use trawl::testweb::{
    audit, request_kind, AuditReport, RequestKind, ServerOptions, SyntheticWeb, TestWebServer,
    WebSpec,
};

/// The points of the fetch order the papers report (percent of pages).
const PERCENTS: [f64; 5] = [1.0, 2.0, 5.0, 10.0, 25.0];

/// The orders computed on a graph, to set a crawl's beside.
struct Baselines {
    /// PageRank of every page.
    rank: Vec<f64>,
    /// Pages reachable from the seeds.
    reachable: usize,
    /// Named orders, in the table's column order.
    orders: Vec<(&'static str, Vec<u32>)>,
}

impl Baselines {
    fn of(graph: &LinkGraph) -> Self {
        let rank = graph::pagerank(graph);
        let bfs = graph::bfs_order(graph);
        let cap = (graph.hosts() / 10).max(1);
        let oracle = HostPick::ByRank(&rank);
        let orders = vec![
            ("bfs", bfs.clone()),
            ("polite-bfs", graph::polite_order(graph, HostPick::Fifo)),
            ("in-link", graph::inlink_order(graph)),
            ("polite-opic", graph::polite_order(graph, HostPick::Opic)),
            ("polite-best", graph::polite_order(graph, oracle)),
            (
                "cap-bfs",
                graph::polite_order_capped(graph, HostPick::Fifo, cap),
            ),
            (
                "cap-opic",
                graph::polite_order_capped(graph, HostPick::Opic, cap),
            ),
            ("cap-best", graph::polite_order_capped(graph, oracle, cap)),
            ("best", graph::best_order(graph, &rank)),
        ];
        Baselines {
            reachable: bfs.len(),
            rank,
            orders,
        }
    }

    fn share(&self, order: &[u32], percent: f64) -> f64 {
        graph::share(order, &self.rank, self.reachable, percent)
    }

    fn named(&self, name: &str) -> &[u32] {
        &self
            .orders
            .iter()
            .find(|(n, _)| *n == name)
            .expect("a baseline")
            .1
    }
}

/// What a crawl of a graph gave.
struct Crawl {
    /// Pages of the graph in the order their requests started.
    order: Vec<u32>,
    /// Seeding to idle.
    wall: Duration,
    /// CPU seconds of the crawler over the same span.
    cpu: f64,
    /// The politeness audit of the server's log: an order that buys its
    /// share by breaking politeness would not count.
    audit: AuditReport,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds of the whole process.
fn process_cpu() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// CPU seconds of this process' live threads whose name starts with one
/// of `prefixes` (the test web's: its thread and actix-server's workers).
fn threads_cpu(prefixes: &[&str]) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut total = 0.0;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is the 3rd field,
        // utime and stime the 14th and 15th.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<f64>().ok());
        total += (field(14).unwrap_or(0.0) + field(15).unwrap_or(0.0)) / ticks;
    }
    total
}

/// Threads of the test web's server.
const SERVER_THREADS: [&str; 2] = ["testweb", "actix-server"];

/// The graphs to crawl, with a label each.
fn graphs() -> Vec<(String, LinkGraph)> {
    if let Ok(path) = std::env::var("TRAWL_ORDERING_GRAPH") {
        let g = LinkGraph::read(std::path::Path::new(&path)).expect("reading the graph file");
        return vec![(path, g)];
    }
    let pages = env_u64("TRAWL_ORDERING_PAGES", 3000) as u32;
    let seeds = std::env::var("TRAWL_ORDERING_GRAPHS").unwrap_or_else(|_| "1,2".into());
    seeds
        .split(',')
        .filter_map(|s| s.trim().parse::<u64>().ok())
        .map(|seed| {
            let label = format!("generated pages={pages} seed={seed}");
            (label, graph::generate(GraphSpec::new(pages, seed)))
        })
        .collect()
}

/// The `[frontier] ordering` values to crawl with.
fn orderings() -> Vec<&'static str> {
    match std::env::var("TRAWL_ORDERING").as_deref() {
        Ok("fifo") => vec!["fifo"],
        Ok("importance") => vec!["importance"],
        _ => vec!["importance", "fifo"],
    }
}

/// `TRAWL_ORDERING_ACTIVE_HOSTS`: `[frontier] max_active_hosts` of the
/// crawls (default: trawl's), to measure a crawl bound by its active
/// hosts, where which host starts next is the frontier's choice.
fn active_hosts() -> Option<usize> {
    std::env::var("TRAWL_ORDERING_ACTIVE_HOSTS")
        .ok()
        .and_then(|n| n.parse().ok())
}

/// The config of a crawl of the graph's web into `data`, with `ordering`
/// as `[frontier] ordering` if given.
fn config(data: &std::path::Path, delay_ms: u64, ordering: Option<&str>) -> Result<Config, String> {
    let mut extra = String::from("[admin]\nenabled = false\n[frontier]\n");
    if let Some(ordering) = ordering {
        extra.push_str(&format!("ordering = {ordering:?}\n"));
    }
    if let Some(n) = active_hosts() {
        extra.push_str(&format!("max_active_hosts = {n}\n"));
    }
    if let Ok(cycle) = std::env::var("TRAWL_ORDERING_CYCLE") {
        extra.push_str(&format!("host_cycle = {cycle:?}\n"));
    }
    let toml = trawl::testweb::config_layer(data, delay_ms, &extra);
    Config::from_layers(&[("bench".into(), toml)]).map_err(|e| {
        e.to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// Crawls `graph` served on loopback with `config`; the fetch order is
/// read from the server's log.
fn crawl(graph: &Arc<LinkGraph>, config: Config) -> Crawl {
    let min_delay = config.politeness.min_delay;
    let web = SyntheticWeb::new(WebSpec {
        hosts: 0,
        pages_per_host: 1,
        seed: 0,
        behaviours: false,
    });
    let options = ServerOptions {
        graph: Some(graph.clone()),
        ..Default::default()
    };
    let server = TestWebServer::start_with(web, "127.0.0.1:0".parse().unwrap(), 2, options)
        .expect("starting the test web");
    let port = server.addr().port();
    let seeds = graph.seed_urls(port);
    let cpu_before = process_cpu() - threads_cpu(&SERVER_THREADS);
    let (wall, cpu) = actix_rt::System::new().block_on(async move {
        let node = Node::start(config, Arc::new(Metrics::new())).expect("starting the node");
        let started = Instant::now();
        node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        node.send(WhenIdle).await.unwrap();
        let wall = started.elapsed();
        let cpu = process_cpu() - threads_cpu(&SERVER_THREADS) - cpu_before;
        node.send(Shutdown).await.unwrap().unwrap();
        (wall, cpu)
    });
    let mut records = server.log().records();
    server.stop();
    records.sort_by_key(|r| r.start);
    let audit = audit(&records, 1, min_delay);
    let mut seen = HashSet::new();
    let order = records
        .iter()
        .filter(|r| r.status == 200 && request_kind(&r.path) == RequestKind::Page)
        .filter_map(|r| graph.page(graph.host_of_name(&r.host)?, &r.path))
        .filter(|&p| seen.insert(p))
        .collect();
    Crawl {
        order,
        wall,
        cpu,
        audit,
    }
}

fn print_graph(label: &str, graph: &LinkGraph, base: &Baselines) {
    let mut sizes = graph.host_sizes();
    sizes.sort_unstable();
    let degrees = graph.in_degrees();
    let max_in = degrees.iter().max().copied().unwrap_or(0);
    println!(
        "graph {label}: {} pages ({} reachable) on {} hosts, {} links ({:.0} % within a host), \
         host size median {} max {}, in-degree mean {:.1} max {max_in}, {} seeds",
        graph.pages(),
        base.reachable,
        graph.hosts(),
        graph.links_count(),
        graph.within_host_share() * 100.0,
        sizes[sizes.len() / 2],
        sizes[sizes.len() - 1],
        graph.links_count() as f64 / graph.pages().max(1) as f64,
        graph.seeds().len(),
    );
}

fn print_table(base: &Baselines, trawl: Option<&[u32]>) {
    let mut head = String::from("   p %");
    if trawl.is_some() {
        head.push_str("   trawl");
    }
    for (name, _) in &base.orders {
        head.push_str(&format!(" {name:>11}"));
    }
    if trawl.is_some() {
        head.push_str("  trawl/bfs trawl/polite-bfs trawl/best");
    }
    println!("{head}");
    for p in PERCENTS {
        let mut line = format!("  {p:>4}");
        if let Some(order) = trawl {
            line.push_str(&format!("  {:>6.3}", base.share(order, p)));
        }
        for (_, order) in &base.orders {
            line.push_str(&format!(" {:>11.3}", base.share(order, p)));
        }
        if let Some(order) = trawl {
            let t = base.share(order, p);
            let ratio = |name| t / base.share(base.named(name), p);
            line.push_str(&format!(
                "  {:>9.2} {:>16.2} {:>10.2}",
                ratio("bfs"),
                ratio("polite-bfs"),
                ratio("best")
            ));
        }
        println!("{line}");
    }
}

fn main() {
    trawl::store::tune_native_heap();
    for (label, graph) in graphs() {
        let base = Baselines::of(&graph);
        print_graph(&label, &graph, &base);
        let largest = graph.host_sizes().into_iter().max().unwrap_or(1) as u64;
        let delay_ms = env_u64("TRAWL_ORDERING_DELAY_MS", (25_000 / largest).max(20));
        println!("baselines (share of total PageRank held by the first p % of reachable pages):");
        print_table(&base, None);
        let graph = Arc::new(graph);
        for ordering in orderings() {
            let probe = tempfile::tempdir().unwrap();
            let key = match config(probe.path(), delay_ms, Some(ordering)) {
                Ok(_) => Some(ordering),
                Err(e) if e.contains("unknown field `ordering`") => {
                    println!(
                        "note: this trawl's config has no [frontier] ordering ({e}); \
                         crawling with its only order"
                    );
                    None
                }
                Err(e) => panic!("bench config: {e}"),
            };
            let data = tempfile::tempdir().unwrap();
            let config = config(data.path(), delay_ms, key).expect("config checked above");
            let crawl = crawl(&graph, config);
            let pages = crawl.order.len();
            let wall = crawl.wall.as_secs_f64();
            println!(
                "trawl, [frontier] ordering = {}, max_active_hosts {}, host_cycle {}, min_delay {delay_ms} ms: \
                 {pages} of {} pages in {wall:.1} s = {:.0} pages/s; crawler cpu {:.2} s = {:.0} µs/page",
                key.unwrap_or("(key absent)"),
                active_hosts().map_or("default".to_owned(), |n| n.to_string()),
                std::env::var("TRAWL_ORDERING_CYCLE").unwrap_or_else(|_| "default".to_owned()),
                base.reachable,
                pages as f64 / wall,
                crawl.cpu,
                crawl.cpu / pages.max(1) as f64 * 1e6,
            );
            println!(
                "politeness audit: {} requests to {} hosts, at most {} in flight to a host, \
                 smallest gap {:.1} ms, {} violations",
                crawl.audit.requests,
                crawl.audit.hosts,
                crawl.audit.max_concurrent,
                crawl.audit.min_gap_ms.unwrap_or(f64::NAN),
                crawl.audit.violations.len()
            );
            print_table(&base, Some(&crawl.order));
            if key.is_none() {
                break;
            }
        }
        println!();
    }
}

//! The frontier past RAM: memory and resume time of a large queue.
//!
//! ```text
//! cargo bench --bench frontier_scale                 # 1,000,000 URLs over 100,000 hosts
//! TRAWL_SCALE=large cargo bench --bench frontier_scale  # 10,000,000 over 1,000,000
//! TRAWL_SCALE_URLS=200000 TRAWL_SCALE_HOSTS=20000 cargo bench --bench frontier_scale
//! TRAWL_BIN=/path/to/other/trawl cargo bench --bench frontier_scale  # another build
//! ```
//!
//! What a new user would try: a seeds file of N URLs over H hosts, all of
//! which resolve to a loopback listener that accepts and closes every
//! connection, so every robots.txt is unreachable and nothing is fetched;
//! the hosts wait out their robots.txt retries, passivated. The bench runs
//! the `trawl` binary twice on one data directory:
//! 1. `trawl run --seeds` until every URL is queued and then a few seconds
//!    more; it samples the process's RSS and the `trawl_active_host_actors`
//!    gauge from the admin API, then stops it with SIGTERM;
//! 2. `trawl run` on the same directory (resume): the time from process
//!    start to its first connection on the listener (its first fetch).
//!
//! Prints peak RSS, RSS per queued URL and per active host, the most
//! active host actors seen against `max_active_hosts`, and the resume time.
//! Targets (issue 8): 1 M URLs / 100 k hosts within 300 MB peak RSS and a
//! first fetch within 5 s of a resume; 10 M / 1 M within 1 GB.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use support::{
    env_or, free_port, get, metric, metric_sum, rss_kb, trawl_run, write_seeds, Listener,
};

fn write_config(path: &Path, data: &Path, admin: SocketAddr, expected: u64) {
    // TRAWL_SCALE_EXTRA: more TOML, to try other settings.
    let extra = std::env::var("TRAWL_SCALE_EXTRA").unwrap_or_default();
    let toml = format!(
        r#"
[crawl]
max_depth = 0
[robots]
# Every robots.txt is unreachable: hosts wait out their retries dormant.
retry_base = "10m"
[dns.overrides]
"*.test" = "127.0.0.1"
[fetch]
allow_addresses = ["127.0.0.0/8"]
[seen]
expected_urls = {expected}
[admin]
enabled = true
listen = "{admin}"
[storage]
data_dir = {data:?}
{extra}
"#,
        data = data.display().to_string()
    );
    std::fs::write(path, toml).unwrap();
}

/// Starts `trawl run` with a seeds file or one seed URL.
fn spawn(config: &Path, seeds: Option<&Path>, seed: Option<&str>) -> Child {
    trawl_run(config, seeds, seed)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn trawl")
}

fn stop(child: &mut Child) {
    // SAFETY: kill(2) on the pid of a child we own.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait for trawl");
    assert!(status.success(), "trawl exited with {status}");
}

/// What one observation of a running crawl found.
#[derive(Default)]
struct Observed {
    peak_rss_kb: u64,
    max_active: f64,
    queued: f64,
    /// `[frontier] max_active_hosts` as the node resolved it.
    cap: u64,
    /// The most RSS one sample read, and what the stores' shared RocksDB
    /// memory held at that sample (`trawl_store_memory_bytes`, MB: block
    /// cache, memtables): what holds the memory at the peak.
    at_peak: (u64, f64, f64),
}

/// Samples `child` until `queued` URLs are in the frontier, then `linger`
/// longer.
fn observe(child: &mut Child, admin: SocketAddr, queued: u64, linger: Duration) -> Observed {
    let mut seen = Observed::default();
    let mut full_since: Option<Instant> = None;
    let deadline = Instant::now() + Duration::from_secs(1800);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("trawl exited early: {status}");
        }
        let (now, hwm) = rss_kb(child.id());
        seen.peak_rss_kb = seen.peak_rss_kb.max(hwm);
        if now > seen.at_peak.0 {
            let part = |p: &str| {
                metric_sum(admin, "trawl_store_memory_bytes", &format!("part=\"{p}\""))
                    .unwrap_or(0.0)
                    / 1048576.0
            };
            seen.at_peak = (now, part("cache"), part("memtables"));
        }
        if let Some(active) = metric(admin, "trawl_active_host_actors") {
            seen.max_active = seen.max_active.max(active);
        }
        if let Some(size) = metric(admin, "trawl_frontier_size") {
            seen.queued = size;
            if size as u64 >= queued && full_since.is_none() {
                full_since = Some(Instant::now());
            }
        }
        if full_since.is_some_and(|t| t.elapsed() >= linger) {
            let status = get(admin, "/api/v1/status").unwrap_or_default();
            seen.cap = serde_json::from_str::<serde_json::Value>(&status)
                .ok()
                .and_then(|v| v["active_hosts_cap"].as_u64())
                .unwrap_or(0);
            return seen;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "the frontier never reached {queued} URLs (at {})",
        seen.queued
    );
}

fn main() {
    let large = std::env::var("TRAWL_SCALE").is_ok_and(|v| v == "large");
    let (default_urls, default_hosts) = if large {
        (10_000_000, 1_000_000)
    } else {
        (1_000_000, 100_000)
    };
    let urls = env_or("TRAWL_SCALE_URLS", default_urls);
    let hosts = env_or("TRAWL_SCALE_HOSTS", default_hosts);
    let listener = Listener::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let seeds = dir.path().join("seeds.txt");
    let config = dir.path().join("scale.toml");
    let admin = free_port();
    write_seeds(&seeds, urls, hosts, listener.addr.port());
    write_config(&config, &data, admin, urls);

    let started = Instant::now();
    let mut first = spawn(&config, Some(&seeds), None);
    let run = observe(&mut first, admin, urls, Duration::from_secs(5));
    let queued_in = started.elapsed();
    stop(&mut first);

    // Every stored host waits out its robots.txt retry, so the resumed
    // crawl is given one new host: its robots.txt request is the first
    // fetch, and it can start only once the crawl is open (stores, seen
    // filter, due index).
    listener.reset();
    let resumed_at = listener.epoch.elapsed().as_millis() as u64;
    let fresh = format!("http://fresh.test:{}/", listener.addr.port());
    let mut second = spawn(&config, None, Some(&fresh));
    let resume = observe(&mut second, admin, urls + 1, Duration::from_secs(2));
    let first_fetch_ms = listener.first().map(|ms| ms.saturating_sub(resumed_at));
    stop(&mut second);

    let cap = run.cap;
    let peak_mb = run.peak_rss_kb as f64 / 1024.0;
    println!(
        "frontier_scale: {urls} URLs over {hosts} hosts queued in {:.1} s; \
         peak RSS {peak_mb:.0} MB ({:.0} bytes per queued URL); \
         active host actors at most {} (cap {cap}; {:.0} KB of RSS per active host if all RSS were theirs); \
         at the most RSS a sample read ({:.0} MB) the block cache held {:.0} MB and the memtables {:.0} MB \
         (the cache counts the memtables' reservation); \
         resume: peak RSS {:.0} MB (cache {:.0} MB, memtables {:.0} MB at its most), first fetch {} after start; {} connections in all",
        queued_in.as_secs_f64(),
        run.peak_rss_kb as f64 * 1024.0 / urls as f64,
        run.max_active,
        run.peak_rss_kb as f64 / run.max_active.max(1.0),
        run.at_peak.0 as f64 / 1024.0,
        run.at_peak.1,
        run.at_peak.2,
        resume.peak_rss_kb as f64 / 1024.0,
        resume.at_peak.1,
        resume.at_peak.2,
        first_fetch_ms.map_or("never".to_owned(), |ms| format!("{:.2} s", ms as f64 / 1000.0)),
        listener.accepted.load(Ordering::Acquire),
    );
}

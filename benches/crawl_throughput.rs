//! Crawl throughput on the synthetic web: pages/s, CPU seconds per 1,000
//! pages, peak RSS, with the full pipeline (durable frontier, WARC, events)
//! and one request in flight per host.
//!
//! ```text
//! cargo bench --bench crawl_throughput -- [HOSTS] [PAGES_PER_HOST] [MIN_DELAY_MS]
//! ```
//! `TRAWL_SYNC_WRITES=true` crawls with `[storage] sync_writes` (RocksDB
//! batches, WARC and events fsynced, grouped).
//! `TRAWL_WRITE_BUFFER_BYTES=N` sets `[storage] write_buffer_bytes` (the
//! memtable budget of all partitions): a budget smaller than what the crawl
//! writes makes this short crawl flush as a long one does.
//! Defaults: 1000 hosts × 20 pages, 1 ms delay (delay_factor 0, so loopback
//! response times do not stretch the delay). The synthetic web's server runs
//! in the same process, as on a machine where crawler and server share the
//! cores; CPU figures cover both. Opening and closing the stores are
//! one-time costs, reported apart from the per-page figures. The backlog's
//! peak (`trawl_pipeline_backlog_peak_pages`: the most pages fetched, not
//! yet archived, at once) and the pipeline's (`trawl_pipeline_peak_pages`:
//! the most pages holding a place, at most `[fetch] max_pipeline_pages`)
//! are printed, and the backlog over time: one line per second of the
//! crawl with the pages fetched and archived by its end and the largest
//! backlog and pipeline sampled within it (every 20 ms, in process), so a
//! stage that falls behind shows as a backlog that grows while fetching
//! goes on. The last line gives the whole process, start to exit (stores
//! opened and closed included): wall pages/s and CPU per page.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

// The allocator the `trawl` binary uses, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;

use trawl::actors::{Node, Seed, Shutdown, WhenIdle};
use trawl::config::Config;
use trawl::metrics::Metrics;
use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn cpu_seconds_and_max_rss_kb() -> (f64, i64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime) + secs(usage.ru_stime), usage.ru_maxrss)
}

/// How often the backlog sampler reads the node's gauges.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// One second of the crawl, as the backlog sampler saw it.
struct Second {
    /// Seconds since seeding, counted from 1.
    second: u64,
    /// Responses received by the end of the second (any status).
    fetched: u64,
    /// Archive transactions done by the end of the second.
    archived: u64,
    /// The largest backlog (pages fetched, not yet archived) sampled.
    backlog_max: i64,
    /// The most pages holding a pipeline place sampled.
    pipeline_max: i64,
}

/// Responses received so far, summed over the status classes.
fn fetched(metrics: &Metrics) -> u64 {
    use prometheus::core::Collector;
    metrics
        .pages
        .collect()
        .iter()
        .flat_map(|family| family.get_metric())
        .map(|m| m.get_counter().get_value() as u64)
        .sum()
}

/// Samples the node's backlog every [`SAMPLE_EVERY`] until `stop`, and
/// returns one [`Second`] per second since it started. Reading the gauges
/// in process (no HTTP scrape) keeps the sampler's own cost out of the
/// crawl's figures but for a few atomic loads a sample.
fn sample_backlog(metrics: Arc<Metrics>, stop: Arc<AtomicBool>) -> JoinHandle<Vec<Second>> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut seconds: Vec<Second> = Vec::new();
        loop {
            let last = stop.load(Ordering::Acquire);
            let now = Second {
                second: start.elapsed().as_secs() + 1,
                fetched: fetched(&metrics),
                archived: metrics.archive_duration.get_sample_count(),
                backlog_max: metrics.pipeline_backlog.get(),
                pipeline_max: metrics.pipeline_pages.get(),
            };
            match seconds.last_mut() {
                Some(s) if s.second == now.second => {
                    s.fetched = now.fetched;
                    s.archived = now.archived;
                    s.backlog_max = s.backlog_max.max(now.backlog_max);
                    s.pipeline_max = s.pipeline_max.max(now.pipeline_max);
                }
                _ => seconds.push(now),
            }
            if last {
                return seconds;
            }
            std::thread::sleep(SAMPLE_EVERY);
        }
    })
}

fn print_backlog(seconds: &[Second]) {
    println!("backlog over time (second, fetched, archived, backlog max, pipeline max):");
    for s in seconds {
        println!(
            "  {:>4} {:>8} {:>8} {:>6} {:>6}",
            s.second, s.fetched, s.archived, s.backlog_max, s.pipeline_max
        );
    }
}

fn main() {
    let process_start = Instant::now();
    // As the `trawl` binary does, so the figures are the binary's.
    trawl::store::tune_native_heap();
    let (hosts, pages, delay_ms) = (arg(0, 1000) as u32, arg(1, 20) as u32, arg(2, 1));
    let web = SyntheticWeb::new(WebSpec {
        hosts,
        pages_per_host: pages,
        seed: 5,
        behaviours: false,
    });
    let server = TestWebServer::start(web.clone(), "127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let sync_writes = std::env::var("TRAWL_SYNC_WRITES").is_ok_and(|v| v == "true");
    let write_buffers = std::env::var("TRAWL_WRITE_BUFFER_BYTES")
        .ok()
        .map(|v| format!("write_buffer_bytes = {v}\n"))
        .unwrap_or_default();
    let extra = format!(
        "[politeness]\ndelay_factor = 0.0\n[admin]\nenabled = false\n\
         [storage]\nsync_writes = {sync_writes}\n{write_buffers}"
    );
    let toml = trawl::testweb::config_layer(data.path(), delay_ms, &extra);
    let config = Config::from_layers(&[("bench".into(), toml)]).unwrap();
    let expected = web.ground_truth(port).len();
    let (cpu_start, _) = cpu_seconds_and_max_rss_kb();
    let metrics = Arc::new(Metrics::new());
    let (backlog, pipeline) = (
        metrics.pipeline_backlog.clone(),
        metrics.pipeline_pages.clone(),
    );
    let opened = Instant::now();
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler_metrics = metrics.clone();
    let sampler_stop = stop_sampling.clone();
    let (archive, cpu0, started, idle, sampler) = actix_rt::System::new().block_on(async move {
        let node = Node::start(config, metrics).unwrap();
        // Opening (creating) the partition stores is a one-time cost of a
        // crawl: it is reported apart from the per-page figures.
        let (cpu0, _) = cpu_seconds_and_max_rss_kb();
        let started = Instant::now();
        let sampler = sample_backlog(sampler_metrics, sampler_stop);
        node.send(Seed {
            urls: web.seeds(port),
        })
        .await
        .unwrap()
        .unwrap();
        node.send(WhenIdle).await.unwrap();
        // Closing (flushing every partition's memtables, closing the WARC
        // file) is a one-time cost too, reported apart.
        let idle = (Instant::now(), cpu_seconds_and_max_rss_kb().0);
        let archive = node.send(Shutdown).await.unwrap().unwrap();
        (archive, cpu0, started, idle, sampler)
    });
    stop_sampling.store(true, Ordering::Release);
    let seconds = sampler.join().expect("the sampler thread");
    let (idle_at, cpu1) = idle;
    let wall = (idle_at - started).as_secs_f64();
    let (cpu_end, rss_kb) = cpu_seconds_and_max_rss_kb();
    let (backlog_max, pipeline_max) = (backlog.peak(), pipeline.peak());
    let fetched = server.log().len();
    server.stop();
    let cpu = cpu1 - cpu0;
    println!(
        "crawl_throughput hosts={hosts} pages_per_host={pages} min_delay_ms={delay_ms}: \
         {fetched} requests ({expected} pages expected) in {wall:.2} s = {:.0} pages/s; \
         cpu {cpu:.2} s = {:.3} cpu-s per 1000 pages ({:.0} µs/page); peak rss {:.0} MiB; \
         warc {:.1} MB; sync_writes {sync_writes}: {} fsync rounds; store open {:.2} s wall, \
         {:.2} s cpu; close {:.2} s cpu; backlog max {backlog_max} pages; \
         pipeline max {pipeline_max} pages",
        expected as f64 / wall,
        cpu / expected as f64 * 1000.0,
        cpu / expected as f64 * 1e6,
        rss_kb as f64 / 1024.0,
        archive.bytes as f64 / 1e6,
        archive.syncs,
        (started - opened).as_secs_f64(),
        cpu0 - cpu_start,
        cpu_end - cpu1,
    );
    print_backlog(&seconds);
    let process_wall = process_start.elapsed().as_secs_f64();
    println!(
        "whole process (start to exit, stores opened and closed): {process_wall:.2} s = {:.0} pages/s; \
         cpu {cpu_end:.2} s = {:.0} µs/page (crawler and server)",
        expected as f64 / process_wall,
        cpu_end / expected as f64 * 1e6,
    );
}

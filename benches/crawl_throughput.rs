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
//! are printed.

use std::sync::Arc;

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

fn main() {
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
    let (archive, cpu0, started, idle) = actix_rt::System::new().block_on(async move {
        let node = Node::start(config, metrics).unwrap();
        // Opening (creating) the partition stores is a one-time cost of a
        // crawl: it is reported apart from the per-page figures.
        let (cpu0, _) = cpu_seconds_and_max_rss_kb();
        let started = Instant::now();
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
        (archive, cpu0, started, idle)
    });
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
}

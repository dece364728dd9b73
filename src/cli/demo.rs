//! `trawl demo`: the synthetic web, crawled with the full pipeline, checked.
//!
//! Starts the synthetic web in-process on a free loopback port (its
//! answers compressed with gzip, br or zstd, by host, since trawl asks),
//! crawls it into the demo directory until idle, and compares what the server saw
//! with the ground truth and the politeness promise. The demo asks its own
//! web faster than the production defaults (`min_delay` 50 ms instead of
//! 1 s, backoffs in milliseconds, see [`trawl::testweb::config_layer`]);
//! `--config` can override all of it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde::Serialize;
use trawl::events::{self, EventKind};
use trawl::testweb::{
    audit_with, page_fetches, request_kind, RequestKind, ServerOptions, SyntheticWeb,
    TestWebServer, WebSpec,
};

/// Marks a directory as made by the demo, so a rerun may clear it.
const MARKER: &str = ".trawl-demo";

/// Arguments of `trawl demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Hosts of the synthetic web.
    #[arg(long, default_value_t = 50)]
    hosts: u32,
    /// Pages per host.
    #[arg(long, default_value_t = 30)]
    pages_per_host: u32,
    /// Directory for the crawl's data (cleared first if a demo made it).
    #[arg(long, default_value = "./trawl-demo")]
    data: PathBuf,
    /// Seed of the synthetic web.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A TOML file layered on the demo's settings.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// The demo's verdict.
#[derive(Debug, Serialize)]
struct Summary {
    pages_fetched: usize,
    pages_expected: usize,
    pages_missed: usize,
    pages_over_fetched: usize,
    duplicate_fetches: usize,
    robots_requests: usize,
    sitemap_requests: usize,
    throttled_requests: usize,
    politeness_violations: usize,
    max_concurrent_per_host: u32,
    min_gap_ms: Option<f64>,
    warc_files: usize,
    warc_records: u64,
    events_written: usize,
    events_missing: usize,
    elapsed_seconds: f64,
    pages_per_second: f64,
    data_dir: PathBuf,
    ok: bool,
}

/// The demo's settings, between the defaults and the user's file.
fn demo_layer(data: &Path) -> String {
    let extra = "[storage]\npartitions = 16\n[admin]\nlisten = \"127.0.0.1:0\"\n";
    trawl::testweb::config_layer(data, 50, extra)
}

/// Runs `trawl demo`.
pub fn main(args: DemoArgs) -> anyhow::Result<ExitCode> {
    prepare_dir(&args.data)?;
    let mut layers = vec![("demo settings".to_owned(), demo_layer(&args.data))];
    if let Some(path) = &args.config {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        layers.push((path.display().to_string(), text));
    }
    let config = trawl::validate::from_layers(&layers)?;
    let web = SyntheticWeb::new(WebSpec {
        hosts: args.hosts.max(1),
        pages_per_host: args.pages_per_host.max(1),
        seed: args.seed,
        behaviours: true,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().expect("static address");
    // Compressed when asked, as most of the real web answers: the crawl
    // reads links, robots.txt and sitemaps through gzip, br and zstd.
    let options = ServerOptions {
        compress: true,
        ..Default::default()
    };
    let server = TestWebServer::start_with(web.clone(), listen, 1, options)
        .context("starting the synthetic web")?;
    let port = server.addr().port();
    tracing::info!(hosts = args.hosts, pages_per_host = args.pages_per_host, addr = %server.addr(), "synthetic web up");

    let outcome = super::run_system(super::crawl::crawl(
        config.clone(),
        web.seeds(port).into_iter().map(Ok),
        super::crawl::RunMode {
            until_idle: true,
            reseed: false,
        },
    ))?;
    let log = server.log().records();
    server.stop();

    let truth = web.ground_truth(port);
    let fetched = page_fetches(&log, port);
    let (mut robots_requests, mut sitemap_requests, mut retried) = (0, 0, 0);
    for r in &log {
        match request_kind(&r.path) {
            RequestKind::Robots => robots_requests += 1,
            RequestKind::Sitemap => sitemap_requests += 1,
            // A refusal with Retry-After is asked again: not a duplicate.
            RequestKind::Page if r.not_before.is_some() => retried += 1,
            RequestKind::Page => {}
        }
    }
    let fetched_set: BTreeSet<&String> = fetched.keys().collect();
    let missed = truth.iter().filter(|u| !fetched.contains_key(*u)).count();
    let over = fetched_set.iter().filter(|u| !truth.contains(**u)).count();
    let duplicates = fetched.values().map(|n| n - 1).sum();
    let policy = &config.politeness;
    let report = audit_with(&log, policy.max_in_flight_per_host, |host| {
        web.politeness_rule(host, policy.min_delay, policy.delay_factor)
    });
    let events = events::read_all(&config.events_file()).unwrap_or_default();
    let event_urls: BTreeSet<&str> = events
        .iter()
        .filter(|e| e.kind == EventKind::Page)
        .map(|e| e.url.as_str())
        .collect();
    let events_missing = truth
        .iter()
        .filter(|u| !event_urls.contains(u.as_str()))
        .count();
    let warc_files = trawl::warc::list_files(&config.data_path(&config.warc.dir))
        .map(|f| f.len())
        .unwrap_or(0);
    let elapsed = outcome.elapsed.max(Duration::from_millis(1)).as_secs_f64();
    let ok = missed == 0
        && over == 0
        && duplicates == 0
        && report.violations.is_empty()
        && events_missing == 0
        && !outcome.interrupted;
    let summary = Summary {
        pages_fetched: fetched.len(),
        pages_expected: truth.len(),
        pages_missed: missed,
        pages_over_fetched: over,
        duplicate_fetches: duplicates,
        robots_requests,
        sitemap_requests,
        throttled_requests: retried,
        politeness_violations: report.violations.len(),
        max_concurrent_per_host: report.max_concurrent,
        min_gap_ms: report.min_gap_ms,
        warc_files,
        warc_records: outcome.archive.records,
        events_written: events.len(),
        events_missing,
        elapsed_seconds: elapsed,
        pages_per_second: fetched.len() as f64 / elapsed,
        data_dir: config.storage.data_dir.clone(),
        ok,
    };
    let written =
        super::summary::write_reports(&config.report_dir(), &outcome.summary, &outcome.report)?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary);
        println!("  crawl report         {}", written.display());
        for v in report.violations.iter().take(10) {
            println!("  violation at {}: {}", v.host, v.what);
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_summary(s: &Summary) {
    println!("trawl demo: {}", if s.ok { "OK" } else { "FAILED" });
    println!(
        "  pages fetched        {} of {} expected ({} missed, {} over-fetched, {} fetched twice)",
        s.pages_fetched,
        s.pages_expected,
        s.pages_missed,
        s.pages_over_fetched,
        s.duplicate_fetches
    );
    println!(
        "  other requests       {} robots.txt, {} sitemaps, {} refused with Retry-After and retried",
        s.robots_requests, s.sitemap_requests, s.throttled_requests
    );
    println!(
        "  politeness           {} violations (max {} in flight per host, smallest gap {} ms)",
        s.politeness_violations,
        s.max_concurrent_per_host,
        s.min_gap_ms.map_or("-".into(), |g| format!("{g:.1}"))
    );
    println!(
        "  warc                 {} files, {} records",
        s.warc_files, s.warc_records
    );
    println!(
        "  events               {} written, {} expected pages without one",
        s.events_written, s.events_missing
    );
    println!(
        "  time                 {:.1} s, {:.0} pages/s",
        s.elapsed_seconds, s.pages_per_second
    );
    println!("  data                 {}", s.data_dir.display());
}

/// Creates the demo directory, clearing it if a previous demo made it;
/// refuses to touch a non-empty directory the demo did not make.
fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)?.next().is_none();
        if !empty {
            if !dir.join(MARKER).exists() {
                bail!(
                    "{} exists and was not made by `trawl demo`; choose another --data",
                    dir.display()
                );
            }
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join(MARKER),
        "made by trawl demo; rerunning the demo clears this directory\n",
    )?;
    Ok(())
}

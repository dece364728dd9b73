//! `trawl testweb`: serve the synthetic web on loopback, or a link graph
//! as a web of hosts (`--graph`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use trawl::testweb::graph::{self, GraphSpec, LinkGraph};
use trawl::testweb::tls::TestPki;
use trawl::testweb::{
    audit_with, page_fetches, ServerOptions, SyntheticWeb, TestWebServer, WebReport, WebSpec,
};

/// Arguments of `trawl testweb`.
#[derive(Debug, clap::Args)]
pub struct TestwebArgs {
    /// Number of hosts.
    #[arg(long, default_value_t = 100)]
    hosts: u32,
    /// Pages per host.
    #[arg(long, default_value_t = 30)]
    pages_per_host: u32,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Listen address (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Every host plain (no robots.txt variants, sitemaps, throttling or
    /// slowness).
    #[arg(long)]
    plain: bool,
    /// Server worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Write the seed URLs here, one per line.
    #[arg(long)]
    seeds_out: Option<PathBuf>,
    /// Write the ground truth (every URL a correct crawl fetches) here.
    #[arg(long)]
    truth_out: Option<PathBuf>,
    /// The politeness delay the exit audit holds each host to (the
    /// crawler's `[politeness] min_delay`; a host's Crawl-delay raises it).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    min_delay: Duration,
    /// The crawler's `[politeness] delay_factor`, for the exit audit.
    #[arg(long, default_value_t = 0.0)]
    delay_factor: f64,
    /// At exit, also write a JSON report here: the audit and every page
    /// fetched with its count (how a crawl served from elsewhere, a
    /// container say, is checked).
    #[arg(long)]
    report_out: Option<PathBuf>,
    /// Serve HTTPS too (HTTP/1.1 and HTTP/2) on another port, with a fresh
    /// test CA whose certificate, and the self-signed host's, are written
    /// into this directory (list them in `[fetch] extra_root_certificates`).
    #[arg(long)]
    tls_dir: Option<PathBuf>,
    /// Pages of every host that answer late, as `ID=DURATION` pairs
    /// separated by commas (page 0 is each host's seed page), e.g.
    /// `--slow-pages 0=25s,3=12s`: a web slower than the crawler's
    /// timeouts. A request the crawler gives up on is still served to its
    /// end and counts in flight until then.
    #[arg(long, default_value = "")]
    slow_pages: trawl::testweb::server::SlowPages,
    /// Serve the link graph in this file (its format is documented in
    /// `src/testweb/graph.rs`: `seed PAGE`, `PAGE`, `PAGE PAGE` lines)
    /// instead of the synthetic hosts: each of its hosts on this listener,
    /// its pages' links as `<a href>`, robots.txt allowing all.
    /// `--seeds-out` writes its seeds, `--truth-out` the pages reachable
    /// from them. Hosts outside `*.test` need `[dns] overrides` of their
    /// own in the crawler's config.
    #[arg(long, value_name = "FILE")]
    graph: Option<PathBuf>,
    /// Write a generated link graph of this many pages (a host per ten
    /// pages, heavy-tailed host sizes, power-law in-degrees, most links
    /// within a host; `--seed` seeds it) to the `--graph` file, and exit.
    #[arg(long, value_name = "PAGES", requires = "graph")]
    graph_generate: Option<u32>,
}

/// Runs `trawl testweb` until SIGINT/SIGTERM, then prints the audit.
pub fn main(args: TestwebArgs) -> anyhow::Result<ExitCode> {
    if let (Some(pages), Some(path)) = (args.graph_generate, &args.graph) {
        write_generated(pages.max(1), args.seed, path)?;
        return Ok(ExitCode::SUCCESS);
    }
    let link_graph = match &args.graph {
        Some(path) => Some(Arc::new(LinkGraph::read(path)?)),
        None => None,
    };
    // A graph replaces the synthetic hosts.
    let hosts = if link_graph.is_some() { 0 } else { args.hosts };
    let web = SyntheticWeb::new(WebSpec {
        hosts,
        pages_per_host: args.pages_per_host.max(1),
        seed: args.seed,
        behaviours: !args.plain,
    });
    let tls = match &args.tls_dir {
        Some(dir) => {
            let names: Vec<String> = match &link_graph {
                Some(g) => (0..g.hosts() as u32)
                    .map(|h| g.host_name(h).to_owned())
                    .collect(),
                None => (0..args.hosts).map(SyntheticWeb::host_name).collect(),
            };
            let pki = TestPki::generate(&names)?;
            std::fs::create_dir_all(dir)?;
            let files = pki.write_trust(dir)?;
            tracing::info!(files = ?files, "test CA and self-signed certificate written");
            Some(pki)
        }
        None => None,
    };
    let options = ServerOptions {
        tls,
        slow_pages: args.slow_pages.clone(),
        graph: link_graph.clone(),
        ..Default::default()
    };
    let server = TestWebServer::start_with(web.clone(), args.listen, args.workers, options)
        .with_context(|| format!("binding {}", args.listen))?;
    if let Some(tls) = server.tls_addr() {
        tracing::info!("serving HTTPS on {tls}");
    }
    let port = server.addr().port();
    let (seeds, truth) = match &link_graph {
        Some(g) => graph_seeds_and_truth(g, port),
        None => (
            web.seeds(port),
            web.ground_truth(port).into_iter().collect(),
        ),
    };
    if let Some(path) = &args.seeds_out {
        std::fs::write(path, seeds.join("\n") + "\n")?;
    }
    if let Some(path) = &args.truth_out {
        std::fs::write(path, truth.join("\n") + "\n")?;
    }
    // Machine-readable first line: tools wait for it.
    println!("listening on {}", server.addr());
    tracing::info!(
        hosts,
        pages_per_host = args.pages_per_host,
        graph_pages = link_graph.as_ref().map(|g| g.pages()),
        "serving the *.test hosts on {}; map *.test to {} in [dns] overrides",
        server.addr(),
        server.addr().ip()
    );
    super::run_system(async { super::crawl::shutdown_signal().await });
    let records = server.log().records();
    server.stop();
    let report = audit_with(&records, 1, |host| {
        web.politeness_rule(host, args.min_delay, args.delay_factor)
    });
    println!("{}", serde_json::to_string(&report)?);
    if let Some(path) = &args.report_out {
        let report = WebReport {
            audit: report,
            pages: page_fetches(&records, port),
        };
        std::fs::write(path, serde_json::to_vec(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes a generated graph of `pages` pages (seeded by `seed`) to `path`.
fn write_generated(pages: u32, seed: u64, path: &std::path::Path) -> anyhow::Result<()> {
    let generated = graph::generate(GraphSpec::new(pages, seed));
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    generated
        .write(std::io::BufWriter::new(file))
        .with_context(|| format!("writing {}", path.display()))?;
    tracing::info!(
        pages = generated.pages(),
        hosts = generated.hosts(),
        links = generated.links_count(),
        "link graph written to {}",
        path.display()
    );
    Ok(())
}

/// A served graph's seed URLs, and the URLs of the pages reachable from
/// them (sorted): what a complete crawl of it fetches.
fn graph_seeds_and_truth(g: &LinkGraph, port: u16) -> (Vec<String>, Vec<String>) {
    let mut truth: Vec<String> = graph::bfs_order(g)
        .into_iter()
        .map(|p| g.url(p, port))
        .collect();
    truth.sort();
    (g.seed_urls(port), truth)
}

//! `trawl testweb`: serve the synthetic web on loopback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
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
}

/// Runs `trawl testweb` until SIGINT/SIGTERM, then prints the audit.
pub fn main(args: TestwebArgs) -> anyhow::Result<ExitCode> {
    let web = SyntheticWeb::new(WebSpec {
        hosts: args.hosts,
        pages_per_host: args.pages_per_host.max(1),
        seed: args.seed,
        behaviours: !args.plain,
    });
    let tls = match &args.tls_dir {
        Some(dir) => {
            let names: Vec<String> = (0..args.hosts).map(SyntheticWeb::host_name).collect();
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
        ..Default::default()
    };
    let server = TestWebServer::start_with(web.clone(), args.listen, args.workers, options)
        .with_context(|| format!("binding {}", args.listen))?;
    if let Some(tls) = server.tls_addr() {
        tracing::info!("serving HTTPS on {tls}");
    }
    let port = server.addr().port();
    if let Some(path) = &args.seeds_out {
        std::fs::write(path, web.seeds(port).join("\n") + "\n")?;
    }
    if let Some(path) = &args.truth_out {
        let truth: Vec<String> = web.ground_truth(port).into_iter().collect();
        std::fs::write(path, truth.join("\n") + "\n")?;
    }
    // Machine-readable first line: tools wait for it.
    println!("listening on {}", server.addr());
    tracing::info!(
        hosts = args.hosts,
        pages_per_host = args.pages_per_host,
        "serving site0000.test … on {}; map *.test to {} in [dns] overrides",
        server.addr(),
        server.addr().ip()
    );
    actix_rt::System::new().block_on(async { super::crawl::shutdown_signal().await });
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

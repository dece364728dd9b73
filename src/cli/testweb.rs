//! `trawl testweb`: serve the synthetic web on loopback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use trawl::testweb::{audit, SyntheticWeb, TestWebServer, WebSpec};

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
}

/// Runs `trawl testweb` until SIGINT/SIGTERM, then prints the audit.
pub fn main(args: TestwebArgs) -> anyhow::Result<ExitCode> {
    let web = SyntheticWeb::new(WebSpec {
        hosts: args.hosts,
        pages_per_host: args.pages_per_host.max(1),
        seed: args.seed,
        behaviours: !args.plain,
    });
    let server = TestWebServer::start(web.clone(), args.listen, args.workers)
        .with_context(|| format!("binding {}", args.listen))?;
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
    actix_rt::System::new().block_on(super::crawl::shutdown_signal());
    let report = audit(&server.log().records(), 1, Duration::ZERO);
    server.stop();
    println!("{}", serde_json::to_string(&report)?);
    Ok(ExitCode::SUCCESS)
}

//! Peak memory of a crawl that meets the hostile web, against the same
//! crawl without it: what endless and 100 MB bodies, gzip and brotli bombs,
//! 200,000-link pages, stalls and oversized heads cost in RSS with the
//! production body cap (10 MiB) and link cap.
//!
//! ```text
//! cargo bench --bench hostile_memory
//! ```
//! Each crawl runs in its own child process (this binary, re-run with
//! `--child=plain` or `--child=hostile`), so each peak RSS is its own.
//! Prints both peaks and their difference; the bound to hold is "a few
//! times the body cap", not "the size of the worst response".

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

// The allocator the `trawl` binary uses, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use trawl::actors::{Node, Seed, Shutdown, WhenIdle};
use trawl::config::Config;
use trawl::metrics::Metrics;
use trawl::testweb::hostile::{self, Targets};
use trawl::testweb::raw::RawServer;
use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};

fn max_rss_kb() -> i64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss
}

/// Crawls 20 hosts × 20 pages, plus `hostile.test` if `hostile`; prints
/// the peak RSS in KiB.
fn child(hostile: bool) {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 20,
        pages_per_host: 20,
        seed: 3,
        behaviours: false,
    });
    let raw = RawServer::start().unwrap();
    let targets = Targets {
        canary: None,
        raw: Some(raw.addr()),
    };
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start_hostile(web.clone(), listen, 1, targets).unwrap();
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    // Production caps; short timeouts so stalls end quickly.
    let extra = "[politeness]\ndelay_factor = 0.0\n[admin]\nenabled = false\n\
                 [fetch]\ntimeout = \"2s\"\nidle_timeout = \"500ms\"\nfirst_byte_timeout = \"2s\"\nmax_attempts = 1\n";
    let toml = trawl::testweb::config_layer(data.path(), 5, extra);
    let config = Config::from_layers(&[("bench".into(), toml)]).unwrap();
    let mut seeds = web.seeds(port);
    if hostile {
        seeds.push(format!("http://{}:{port}/", hostile::HOST));
    }
    actix_rt::System::new().block_on(async move {
        let node = Node::start(config, Arc::new(Metrics::new())).unwrap();
        node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        node.send(WhenIdle).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
    });
    let requests = server.log().len();
    server.stop();
    println!("{} {requests}", max_rss_kb());
}

/// Runs one child crawl; returns (peak RSS KiB, requests served).
fn run(mode: &str) -> (i64, usize) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .arg(format!("--child={mode}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{mode} crawl failed: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    let rss = fields.next().and_then(|f| f.parse().ok()).unwrap();
    let requests = fields.next().and_then(|f| f.parse().ok()).unwrap();
    (rss, requests)
}

fn main() {
    // As the `trawl` binary does, so the figures are the binary's.
    trawl::store::tune_native_heap();
    let child_mode = std::env::args().find_map(|a| a.strip_prefix("--child=").map(str::to_owned));
    match child_mode.as_deref() {
        Some(mode) => child(mode == "hostile"),
        None => {
            let (plain, plain_requests) = run("plain");
            let (hostile, hostile_requests) = run("hostile");
            println!(
                "hostile_memory: plain crawl peak rss {:.0} MiB ({plain_requests} requests); \
                 with the hostile web {:.0} MiB ({hostile_requests} requests); \
                 difference {:.0} MiB (body cap 10 MiB)",
                plain as f64 / 1024.0,
                hostile as f64 / 1024.0,
                (hostile - plain) as f64 / 1024.0
            );
        }
    }
}

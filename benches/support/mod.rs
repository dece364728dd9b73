//! What the process-level benches share: a listener that counts
//! connections, the admin API's metrics, seeds files.
#![allow(dead_code)]

use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Accepts and closes connections; counts them and remembers when the
/// first one after [`Listener::reset`] came.
pub struct Listener {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicU64>,
    first_ms: Arc<AtomicU64>,
    pub epoch: Instant,
}

impl Listener {
    pub fn start() -> Listener {
        let socket = TcpListener::bind("127.0.0.1:0").expect("bind a loopback listener");
        let addr = socket.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let first_ms = Arc::new(AtomicU64::new(u64::MAX));
        let epoch = Instant::now();
        let (a, f) = (accepted.clone(), first_ms.clone());
        std::thread::spawn(move || {
            for conn in socket.incoming() {
                let Ok(conn) = conn else { continue };
                let ms = epoch.elapsed().as_millis() as u64;
                let _ = f.compare_exchange(u64::MAX, ms, Ordering::AcqRel, Ordering::Acquire);
                a.fetch_add(1, Ordering::AcqRel);
                drop(conn);
            }
        });
        Listener {
            addr,
            accepted,
            first_ms,
            epoch,
        }
    }

    pub fn reset(&self) {
        self.first_ms.store(u64::MAX, Ordering::Release);
    }

    /// Milliseconds since the epoch of the first connection since reset.
    pub fn first(&self) -> Option<u64> {
        let ms = self.first_ms.load(Ordering::Acquire);
        (ms != u64::MAX).then_some(ms)
    }
}

pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident and peak resident memory of `pid`, in KiB.
pub fn rss_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The body of a GET of `path` on the admin API.
pub fn get(admin: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&admin, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text.split_once("\r\n\r\n")?.1.to_owned())
}

/// A metric's value from the admin API's `/metrics`.
pub fn metric(admin: SocketAddr, name: &str) -> Option<f64> {
    let text = get(admin, "/metrics")?;
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

pub fn free_port() -> SocketAddr {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap()
}

pub fn write_seeds(path: &Path, urls: u64, hosts: u64, port: u16) {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..urls {
        let host = i % hosts;
        let page = i / hosts;
        writeln!(out, "http://scale{host}.test:{port}/p/{page}.html").unwrap();
    }
    out.flush().unwrap();
}

/// The sum of a metric's samples on the admin API's `/metrics` whose
/// labels contain `labels` (every sample for ""): a cluster node labels
/// its metrics with its id.
pub fn metric_sum(admin: SocketAddr, name: &str, labels: &str) -> Option<f64> {
    let text = get(admin, "/metrics")?;
    let samples: Vec<f64> = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
                && l.contains(labels)
        })
        .filter_map(|l| l.split_whitespace().last()?.parse().ok())
        .collect();
    (!samples.is_empty()).then(|| samples.iter().sum())
}

/// `trawl run` on `config`, with a seeds file or one seed URL.
pub fn trawl_run(config: &Path, seeds: Option<&Path>, seed: Option<&str>) -> Command {
    // TRAWL_BIN: another build of trawl, to compare two on one machine.
    let bin = std::env::var_os("TRAWL_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_trawl").into());
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--config"]).arg(config);
    if let Some(seeds) = seeds {
        cmd.arg("--seeds").arg(seeds);
    }
    if let Some(seed) = seed {
        cmd.arg("--seed").arg(seed);
    }
    cmd
}

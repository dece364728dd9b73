//! What a request waiting on a slow web costs: trawl's RSS and CPU with
//! N requests in flight at once, each to a host of its own that does not
//! answer until the bench lets it.
//!
//! ```text
//! cargo bench --bench inflight -- [N ...]     # default: 1000 5000
//! ```
//! A loopback server answers every robots.txt at once (404: everything
//! allowed) and holds every page request; `trawl run` (the binary, its
//! defaults but a fixed `[fetch] concurrency` = N, since `"auto"` stops at
//! its memory budget, ~4,700 requests by default) is
//! seeded with one page on each of N hosts (`held<i>.test`, resolved to
//! loopback). Once N requests are held, the bench reads trawl's RSS and,
//! over the next five seconds, its CPU time (what waiting costs: timers,
//! polls). The same run with one request in flight is the idle baseline:
//! per request is (RSS(N) − RSS(1)) / (N − 1). Then the held requests are
//! answered and trawl is stopped.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

/// The server's side: requests held now, and the switch that answers them.
struct Held {
    held: Arc<AtomicU64>,
    release: watch::Sender<bool>,
    addr: std::net::SocketAddr,
}

/// Serves robots.txt at once and holds every other request until
/// released; keeps connections open (a crawler may reuse one). Runs on a
/// thread of its own, which ends with the process.
fn serve() -> Held {
    let held = Arc::new(AtomicU64::new(0));
    let (release, released) = watch::channel(false);
    let (tx, rx) = std::sync::mpsc::channel();
    let counter = held.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            // A backlog for thousands of connects at once: with the
            // default (1,024) the kernel drops SYNs, and the crawler's
            // connects wait out TCP's retransmission (1, 3, 7 s...).
            let socket = TcpSocket::new_v4().expect("a socket");
            socket
                .bind("127.0.0.1:0".parse().unwrap())
                .expect("bind a loopback listener");
            let listener: TcpListener = socket.listen(16_384).expect("listen");
            let _ = tx.send(listener.local_addr().unwrap());
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(hold(stream, counter.clone(), released.clone()));
            }
        });
    });
    let addr = rx.recv().expect("the server's address");
    Held {
        held,
        release,
        addr,
    }
}

/// One connection: robots.txt answered, every page held until released.
async fn hold(stream: TcpStream, counter: Arc<AtomicU64>, mut released: watch::Receiver<bool>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(request)) = lines.next_line().await {
        // The head's other lines, up to the blank one.
        while let Ok(Some(line)) = lines.next_line().await {
            if line.is_empty() {
                break;
            }
        }
        let answer: &[u8] = if request.contains(" /robots.txt ") {
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
        } else {
            counter.fetch_add(1, Ordering::AcqRel);
            let _ = released.wait_for(|r| *r).await;
            counter.fetch_sub(1, Ordering::AcqRel);
            b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 13\r\n\r\n<p>done</p>\r\n"
        };
        if write.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// Lets this process (and trawl, which inherits it) open as many sockets
/// as the hard limit allows.
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// User + system CPU seconds `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's closing parenthesis: state is field 3, utime 14.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// What one run measured.
struct Sample {
    reached: u64,
    rss_kb: u64,
    cpu_per_s: f64,
    seconds_to_reach: f64,
}

/// Runs trawl on `n` held hosts.
fn run(n: u64, dir: &Path) -> Sample {
    let server = serve();
    let data = dir.join(format!("data-{n}"));
    let extra = format!("[fetch]\nconcurrency = {n}\n");
    let config = dir.join(format!("inflight-{n}.toml"));
    std::fs::write(&config, trawl::testweb::config_layer(&data, 0, &extra)).unwrap();
    let seeds = dir.join(format!("seeds-{n}"));
    let port = server.addr.port();
    let list: Vec<String> = (0..n)
        .map(|i| format!("http://held{i}.test:{port}/p/0.html"))
        .collect();
    std::fs::write(&seeds, list.join("\n")).unwrap();
    let mut child: Child = support::trawl_run(&config, Some(&seeds), None)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn trawl");
    let pid = child.id();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    while server.held.load(Ordering::Acquire) < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let seconds_to_reach = started.elapsed().as_secs_f64();
    let reached = server.held.load(Ordering::Acquire);
    // Settled: allocations for the last requests are made.
    std::thread::sleep(Duration::from_secs(1));
    let cpu_before = cpu_seconds(pid);
    let window = Duration::from_secs(5);
    std::thread::sleep(window);
    let cpu_per_s = (cpu_seconds(pid) - cpu_before) / window.as_secs_f64();
    let rss_kb = support::rss_kb(pid).0;
    let _ = server.release.send(true);
    // SAFETY: kill only sends a signal.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let _ = child.wait();
    Sample {
        reached,
        rss_kb,
        cpu_per_s,
        seconds_to_reach,
    }
}

fn main() {
    let counts: Vec<u64> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| a.parse().ok())
        .collect();
    let counts = if counts.is_empty() {
        vec![1000, 5000]
    } else {
        counts
    };
    raise_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    let idle = run(1, dir.path());
    println!(
        "inflight bench: 1 request held: RSS {} KiB, CPU {:.3} s/s while waiting",
        idle.rss_kb, idle.cpu_per_s
    );
    for n in counts {
        let s = run(n, dir.path());
        let per = (s.rss_kb as f64 - idle.rss_kb as f64) / (s.reached.max(2) - 1) as f64;
        println!(
            "{n:>6} asked, {:>6} held after {:.1} s: RSS {} KiB = {:.1} KiB a request beyond the idle run; CPU {:.3} s/s while waiting",
            s.reached, s.seconds_to_reach, s.rss_kb, per, s.cpu_per_s
        );
    }
}

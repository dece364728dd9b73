//! Helpers shared by the integration tests: the synthetic web, configs,
//! in-process and out-of-process crawls, WARC checks.
#![allow(dead_code)]

pub mod moto;
pub mod netns;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use trawl::actors::messages::ArchiveSnapshot;
use trawl::actors::{Node, Seed, Shutdown, WhenIdle};
use trawl::config::Config;
use trawl::events::{Event, EventKind};
use trawl::metrics::Metrics;
use trawl::testweb::{
    audit_with, AuditReport, RequestRecord, SyntheticWeb, TestWebServer, WebSpec,
};

/// Where a test node's bridge listens: any free loopback port. The node
/// tells its peers the port it got (through gossip), so no test needs to
/// know it beforehand.
pub const ANY_BRIDGE: &str = "127.0.0.1:0";

/// A loopback address for a server a child process binds itself (a
/// node's gossip, its admin API, a port with nothing listening): a port
/// below the kernel's ephemeral range (`ip_local_port_range`, from 32768
/// by default), handed out once per test process and free for both TCP
/// and UDP when probed. A port probed free in the ephemeral range could
/// be given to any socket the moment the probe closed (another test's
/// connection, a DNS query): the node then failed to start with
/// `AddrInUse`, a flake no test could tell from a bug. Below the range
/// only explicit binds take ports, and this counter is the only one
/// handing them out; the start depends on the process id, so two test
/// processes on one machine rarely meet either.
pub fn reserved_port() -> SocketAddr {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        (std::process::id() % 60) * 200,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    for _ in 0..SPAN {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::AcqRel) % SPAN) as u16;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if TcpListener::bind(addr).is_ok() && UdpSocket::bind(addr).is_ok() {
            return addr;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + SPAN);
}

/// A loopback address for a node's gossip, which the gossip library
/// binds itself (see [`reserved_port`]).
pub fn gossip_addr() -> SocketAddr {
    reserved_port()
}

/// A bound loopback listener for an admin server
/// (`trawl::admin::start_on`), and its address for the node's config: the
/// port stays taken from the moment it is chosen.
pub fn admin_listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// A node and its admin API, started as `trawl run` starts them: one
/// metrics registry for both (the API's `/metrics` is the node's). Made
/// inside the test's actix system.
pub struct Served {
    pub node: actix::Addr<Node>,
    pub admin: trawl::admin::AdminServer,
    pub metrics: Arc<Metrics>,
}

impl Served {
    /// The API on a free loopback port, with `access`.
    pub fn start(config: Config, access: trawl::admin::Access) -> Served {
        let metrics = Arc::new(Metrics::new());
        let node = Node::start(config, metrics.clone()).expect("the node starts");
        let admin = trawl::admin::start_with("127.0.0.1:0", access, node.clone(), metrics.clone())
            .expect("the admin API starts");
        Served {
            node,
            admin,
            metrics,
        }
    }

    /// The API on `listener` (a cluster test binds it first: its port is
    /// in the node's config), with the access rules and the TLS of the
    /// config's `[admin]` and the node's own `metrics`.
    pub fn start_on(config: Config, listener: TcpListener, metrics: Arc<Metrics>) -> Served {
        let access =
            trawl::admin::Access::from_config(&config.admin).expect("the admin API's access rules");
        let tls = trawl::admin::tls::AdminTls::from_config(&config).expect("the admin API's TLS");
        let node = Node::start(config, metrics.clone()).expect("the node starts");
        let admin =
            trawl::admin::start_secured_on(listener, access, tls, node.clone(), metrics.clone())
                .expect("the admin API starts");
        Served {
            node,
            admin,
            metrics,
        }
    }

    /// The URL of `path` on the API.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin.addr)
    }
}

/// A synthetic web and its server on a free loopback port.
pub fn start_web(hosts: u32, pages_per_host: u32, seed: u64) -> (SyntheticWeb, TestWebServer) {
    let (web, server, _) = serve_web(hosts, pages_per_host, seed, true);
    (web, server)
}

/// A plain synthetic web (no robots.txt variants, sitemaps, throttling or
/// slowness), its server on a free loopback port, and the port.
pub fn start_plain_web(
    hosts: u32,
    pages_per_host: u32,
    seed: u64,
) -> (SyntheticWeb, TestWebServer, u16) {
    serve_web(hosts, pages_per_host, seed, false)
}

fn serve_web(
    hosts: u32,
    pages_per_host: u32,
    seed: u64,
    behaviours: bool,
) -> (SyntheticWeb, TestWebServer, u16) {
    let web = SyntheticWeb::new(WebSpec {
        hosts,
        pages_per_host,
        seed,
        behaviours,
    });
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start(web.clone(), listen, 1).expect("start synthetic web");
    let port = server.addr().port();
    (web, server, port)
}

/// The TOML of a test crawl into `data` with `min_delay_ms`.
pub fn config_toml(data: &Path, min_delay_ms: u64, partitions: u16) -> String {
    let extra = format!(
        "[storage]\npartitions = {partitions}\n[politeness]\ndelay_factor = 10.0\n\
         [fetch]\ntimeout = \"10s\"\n[admin]\nenabled = false\n"
    );
    trawl::testweb::config_layer(data, min_delay_ms, &extra)
}

/// A test config.
pub fn config(data: &Path, min_delay_ms: u64, partitions: u16) -> Config {
    Config::from_layers(&[("test".into(), config_toml(data, min_delay_ms, partitions))]).unwrap()
}

/// A test config with `extra` (TOML) layered on top.
pub fn config_with(data: &Path, min_delay_ms: u64, partitions: u16, extra: &str) -> Config {
    Config::from_layers(&[
        ("test".into(), config_toml(data, min_delay_ms, partitions)),
        ("extra".into(), extra.to_owned()),
    ])
    .unwrap()
}

/// Crawls in this process until idle; returns the archive's counters.
pub fn crawl_in_process(config: Config, seeds: Vec<String>) -> ArchiveSnapshot {
    crawl_with_metrics(config, seeds).0
}

/// Crawls in this process until idle; returns the archive's counters and
/// the node's metrics.
pub fn crawl_with_metrics(config: Config, seeds: Vec<String>) -> (ArchiveSnapshot, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let node_metrics = metrics.clone();
    let archive = actix_rt::System::new().block_on(async move {
        let node = Node::start(config, node_metrics).expect("node starts");
        node.send(Seed { urls: seeds }).await.unwrap().unwrap();
        node.send(WhenIdle).await.unwrap();
        node.send(Shutdown).await.unwrap().unwrap()
    });
    (archive, metrics)
}

/// URL of a logged request.
pub fn url_of(r: &RequestRecord, port: u16) -> String {
    format!("http://{}:{port}{}", r.host, r.path)
}

/// Page requests by URL, with their counts: robots.txt and sitemap files
/// are left out, and so are refusals with Retry-After (asked again later
/// by design).
pub fn page_requests(log: &[RequestRecord], port: u16) -> BTreeMap<String, usize> {
    trawl::testweb::page_fetches(log, port)
}

/// The politeness audit with each host's own rule (Crawl-delay, the
/// delay factor of the test config, Retry-After).
pub fn audit_log(web: &SyntheticWeb, log: &[RequestRecord], min_delay_ms: u64) -> AuditReport {
    audit_log_with_factor(web, log, min_delay_ms, 10.0)
}

/// [`audit_log`] for a crawl configured with another `delay_factor`: the
/// audit must owe what the crawler was told to wait, no more (a server
/// slowed by a busy machine would otherwise make a factor the crawler
/// does not use look violated).
pub fn audit_log_with_factor(
    web: &SyntheticWeb,
    log: &[RequestRecord],
    min_delay_ms: u64,
    delay_factor: f64,
) -> AuditReport {
    audit_with(log, 1, |host| {
        web.politeness_rule(host, Duration::from_millis(min_delay_ms), delay_factor)
    })
}

/// Asserts the synthetic sites' (`siteNNNN.test`) page requests in `log`
/// are exactly the web's ground truth, whatever else the log holds.
pub fn assert_sites_complete(log: &[RequestRecord], web: &SyntheticWeb, port: u16) {
    let sites: Vec<RequestRecord> = log
        .iter()
        .filter(|r| r.host.starts_with("site"))
        .cloned()
        .collect();
    let fetched: BTreeSet<String> = page_requests(&sites, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
}

/// Asserts every request in `log` was to a synthetic host and allowed by
/// its robots.txt.
pub fn assert_robots_obeyed(web: &SyntheticWeb, log: &[RequestRecord], port: u16) {
    for r in log {
        let host = web.host_index(&r.host).expect("only synthetic hosts");
        assert!(
            web.path_allowed(host, &r.path),
            "disallowed: {}",
            url_of(r, port)
        );
    }
}

/// Asserts two URL sets are equal, showing a readable difference.
pub fn assert_same_urls(fetched: &BTreeSet<String>, truth: &BTreeSet<String>) {
    let missed: Vec<_> = truth.difference(fetched).take(10).collect();
    let extra: Vec<_> = fetched.difference(truth).take(10).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "fetched {} vs truth {}; missed (first 10): {missed:?}; extra (first 10): {extra:?}",
        fetched.len(),
        truth.len()
    );
}

/// Every event in the crawl's events file.
pub fn events(config: &Config) -> Vec<Event> {
    trawl::events::read_all(&config.events_file()).unwrap()
}

/// Page events only.
pub fn page_events(config: &Config) -> Vec<Event> {
    events(config)
        .into_iter()
        .filter(|e| e.kind == EventKind::Page)
        .collect()
}

/// Reads the record an event points at, decompressed, as text.
pub fn record_at(config: &Config, event: &Event) -> String {
    let warc_ref = event
        .warc_ref
        .as_ref()
        .expect("the event points at a record");
    let path = config.data_path(&config.warc.dir).join(&warc_ref.file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = warc_ref.offset as usize;
    let end = start + warc_ref.length as usize;
    assert!(
        end <= bytes.len(),
        "warc_ref past the end of {}",
        path.display()
    );
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(&bytes[start..end])
        .read_to_end(&mut text)
        .expect("warc_ref is one complete gzip member");
    String::from_utf8_lossy(&text).into_owned()
}

/// The WARC files of a crawl.
pub fn warc_files(config: &Config) -> Vec<PathBuf> {
    trawl::warc::list_files(&config.data_path(&config.warc.dir)).unwrap()
}

/// The `warcio` command of the virtualenv the test script set up.
fn warcio() -> Command {
    let python = std::env::var("TRAWL_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(python);
    cmd.args([
        "-c",
        "import sys; from warcio.cli import main; sys.exit(main())",
    ]);
    cmd
}

/// Runs `warcio check` and `warcio index` on every file; panics with
/// warcio's output on failure.
pub fn warcio_check(files: &[PathBuf]) {
    assert!(!files.is_empty(), "no WARC files to check");
    for sub in ["check", "index"] {
        let out = warcio()
            .arg(sub)
            .args(files)
            .output()
            .expect("python with warcio (scripts/test.sh installs it; set TRAWL_PYTHON)");
        assert!(
            out.status.success(),
            "warcio {sub} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if sub == "index" {
            let lines = String::from_utf8_lossy(&out.stdout).lines().count();
            assert!(lines > 0, "warcio index listed no records");
        }
    }
}

/// `line` without the fields trawl adds to pywb's (Common Crawl's
/// `mime-detected` and `languages`).
fn pywb_fields(line: &str) -> String {
    let mut line = line.to_owned();
    for key in ["mime-detected", "languages"] {
        let field = format!(", \"{key}\": \"");
        if let Some(start) = line.find(&field) {
            let value = start + field.len();
            let end = value + line[value..].find('"').expect("a closing quote") + 1;
            line.replace_range(start..end, "");
        }
    }
    line
}

/// Asserts each file's CDXJ index (beside it) is, line for line, what
/// pywb's `cdxj-indexer --sort` computes from the file (but for the
/// fields trawl adds, [`pywb_fields`]); returns the indexes.
pub fn cdxj_check(files: &[PathBuf]) -> Vec<String> {
    assert!(!files.is_empty(), "no WARC files to index");
    let python = std::env::var("TRAWL_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut indexes = Vec::new();
    for file in files {
        let index = trawl::warc::cdxj::index_path(file);
        let ours =
            std::fs::read_to_string(&index).unwrap_or_else(|e| panic!("{}: {e}", index.display()));
        let out = Command::new(&python)
            .args(["-c", "from cdxj_indexer.main import main; main()", "--sort"])
            .arg(file)
            .output()
            .expect("python with cdxj-indexer (scripts/test.sh installs it; set TRAWL_PYTHON)");
        assert!(
            out.status.success(),
            "cdxj-indexer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs = String::from_utf8(out.stdout).unwrap();
        assert!(!theirs.is_empty(), "{} indexes to nothing", file.display());
        let as_pywb: Vec<String> = ours.lines().map(pywb_fields).collect();
        for (a, b) in as_pywb.iter().zip(theirs.lines()) {
            assert_eq!(a, b, "first differing line of {}", index.display());
        }
        assert_eq!(as_pywb.len(), theirs.lines().count(), "{}", index.display());
        indexes.push(ours);
    }
    indexes
}

/// The target URIs of the response and revisit records in the WARC files
/// of `dir` (a page archived in full, or as a revisit of a payload stored
/// before), and in the segments of files still being written (each
/// segment is whole records: `src/upload/join.rs`).
pub fn archived_uris(dir: &Path) -> BTreeSet<String> {
    let mut uris = BTreeSet::new();
    for path in warc_files_in(dir).iter().chain(&segment_files(dir)) {
        // Polled while nodes run: a segment listed may be deleted before
        // it is read (its file went up whole, which the next poll reads).
        let Ok(reader) = warc::WarcReader::from_path_gzip(path) else {
            assert!(!path.exists(), "{} cannot be read", path.display());
            continue;
        };
        for record in reader.iter_records() {
            let record = record.unwrap();
            let kind = record.warc_type().to_string();
            if kind == "response" || kind == "revisit" {
                if let Some(uri) = record.header(warc::WarcHeader::TargetURI) {
                    // A `dns:` record answers a name; it is no page.
                    if !uri.starts_with("dns:") {
                        uris.insert(uri.into_owned());
                    }
                }
            }
        }
    }
    uris
}

/// The finished `.warc.gz` files in `dir`, sorted.
pub fn warc_files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".warc.gz"))
        .collect();
    files.sort();
    files
}

/// The segments in `dir` of WARC files not yet whole there, sorted.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".segments") && path.is_dir() {
            // Gone since the listing: its file went up whole.
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            // Not the store's staging files (`NAME#N`, renamed to `NAME`
            // once written whole: object_store's local uploads): one read
            // half-written is no segment yet.
            let whole = |p: &PathBuf| !p.to_string_lossy().contains('#');
            files.extend(entries.filter_map(|e| Some(e.ok()?.path())).filter(whole));
        }
    }
    files.sort();
    files
}

/// How often the `eventually` helpers look again.
const POLL: Duration = Duration::from_millis(50);

/// Polls `probe` until it gives a value, for at most `limit`; `None` after.
/// The one way these tests wait for what sends no signal they could wait
/// on instead (a line in another process's log, a file in a store, a
/// count at a server): never a fixed sleep.
pub fn eventually<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = probe() {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// [`eventually`] for a condition: whether `holds` came true within `limit`.
pub fn eventually_true(limit: Duration, mut holds: impl FnMut() -> bool) -> bool {
    eventually(limit, || holds().then_some(())).is_some()
}

/// [`eventually`] with an async probe, on the test's actix system (the
/// probe may ask actors or the admin API).
pub async fn eventually_async<T, F, Fut>(limit: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = probe().await {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        actix_rt::time::sleep(POLL).await;
    }
}

/// Whether any of `logs` (files another process writes) holds `line`
/// within `limit`.
pub fn logged_within(logs: &[impl AsRef<Path>], line: &str, limit: Duration) -> bool {
    eventually_true(limit, || {
        logs.iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|l| l.contains(line)))
    })
}

/// The last `lines` lines of a log another process writes, for a failed
/// assertion's message: what the process said before the test gave up.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| format!("<{e}>"));
    let all: Vec<&str> = text.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    format!("{} (last {lines} lines):\n{tail}", log.display())
}

/// Waits for a child process to exit, at most `timeout` (then kills it and
/// fails the test).
pub fn wait_exit(child: &mut std::process::Child, timeout: Duration) -> std::process::ExitStatus {
    eventually(timeout, || child.try_wait().unwrap()).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("process did not exit within {timeout:?}");
    })
}

/// Starts `trawl run` on a config file and a seeds file.
pub fn spawn_run(config_path: &Path, seeds_path: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["run", "--until-idle", "--config"])
        .arg(config_path)
        .arg("--seeds")
        .arg(seeds_path)
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("spawn trawl")
}

/// The `[cluster]` credentials of test node `id`: a certificate from one
/// CA shared by every cluster of this test process, and its gossip key
/// (the files live in a temporary directory for the process's life). The
/// cluster tests run authenticated, as production clusters do.
pub fn cluster_auth(id: &str) -> String {
    use std::sync::{Mutex, OnceLock};
    use trawl::cluster::tls::CertsDir;
    static CERTS: OnceLock<Mutex<(tempfile::TempDir, CertsDir)>> = OnceLock::new();
    let certs = CERTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let certs = CertsDir::new(dir.path());
        Mutex::new((dir, certs))
    });
    let certs = certs.lock().unwrap_or_else(|e| e.into_inner());
    certs
        .1
        .make("tests", &[id.to_owned()])
        .expect("test cluster credentials");
    certs.1.toml(id)
}

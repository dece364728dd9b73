//! Closed WARC files leave the node: a crawl with small WARC files uploads
//! each closed file to an S3-compatible server (moto, started by the test)
//! byte-identical, with one `uploaded` event per file naming its final
//! location. A proxy between trawl and the server cuts requests in the
//! middle of their bodies, and refuses every connection during a whole
//! run: nothing is lost (every file ends up in the bucket, intact, or
//! still on disk), and nothing is uploaded twice (the proxy sees one
//! completed upload per key).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::moto::Moto;
use crate::common::*;
use trawl::config::Config;
use trawl::events::{Event, EventKind};
use trawl::upload::Manifest;

const BUCKET: &str = Moto::BUCKET;
const PREFIX: &str = "crawl/warcs";
const MIN_DELAY_MS: u64 = 5;

/// A request the proxy passed on whole, and the status it got.
#[derive(Debug, Clone)]
struct Passed {
    method: String,
    target: String,
    status: u16,
}

/// What the proxy does and saw.
struct ProxyState {
    upstream: SocketAddr,
    /// Requests with a body still to cut in the middle of it.
    cut_bodies: AtomicUsize,
    /// Requests cut so far.
    cut: AtomicUsize,
    /// Close every connection at once.
    refuse: AtomicBool,
    passed: Mutex<Vec<Passed>>,
}

/// An HTTP/1.1 proxy in front of moto, one request per connection (it
/// asks for `Connection: close`), that can fail requests.
struct Proxy {
    addr: SocketAddr,
    state: Arc<ProxyState>,
}

impl Proxy {
    fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ProxyState {
            upstream,
            cut_bodies: AtomicUsize::new(0),
            cut: AtomicUsize::new(0),
            refuse: AtomicBool::new(false),
            passed: Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || serve(client, &state));
            }
        });
        Proxy { addr, state }
    }

    /// Successful completions of an object (a single PUT, or the POST
    /// completing a multipart upload), by key.
    fn completions(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for p in self.state.passed.lock().unwrap().iter() {
            let (path, query) = p.target.split_once('?').unwrap_or((&p.target, ""));
            let single = p.method == "PUT" && !query.contains("partNumber=");
            let complete = p.method == "POST" && query.contains("uploadId=");
            if (single || complete)
                && (200..300).contains(&p.status)
                && path != format!("/{BUCKET}")
            {
                *out.entry(path.to_owned()).or_default() += 1;
            }
        }
        out
    }
}

/// Serves one connection: the request head, its body (cut in the middle
/// if asked), then the whole response.
fn serve(client: TcpStream, state: &ProxyState) {
    if state.refuse.load(Ordering::SeqCst) {
        return;
    }
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        head.push(line);
    }
    let mut words = head[0].split_whitespace();
    let (method, target) = (
        words.next().unwrap().to_owned(),
        words.next().unwrap().to_owned(),
    );
    let header = |name: &str| {
        head.iter().find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    assert!(
        header("transfer-encoding").is_none(),
        "the proxy reads Content-Length bodies only"
    );
    let length: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
    let mut upstream = TcpStream::connect(state.upstream).unwrap();
    for line in head
        .iter()
        .filter(|h| !h.to_ascii_lowercase().starts_with("connection:"))
    {
        upstream.write_all(line.as_bytes()).unwrap();
    }
    upstream.write_all(b"Connection: close\r\n\r\n").unwrap();
    let cut = length > 0
        && state
            .cut_bodies
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
    let send = if cut { length / 2 } else { length };
    let mut body = vec![0; send];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let _ = upstream.write_all(&body);
    if cut {
        state.cut.fetch_add(1, Ordering::SeqCst);
        let _ = upstream.shutdown(Shutdown::Both);
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let mut response = Vec::new();
    if upstream.read_to_end(&mut response).is_err() {
        return;
    }
    let status = String::from_utf8_lossy(&response)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut client = client;
    let _ = client.write_all(&response);
    state.passed.lock().unwrap().push(Passed {
        method,
        target,
        status,
    });
}

/// The `[upload]` layer of a crawl uploading through `endpoint`.
fn upload_toml(endpoint: SocketAddr, delete: bool, shutdown_wait: &str) -> String {
    format!(
        r#"
[warc]
max_file_bytes = 150000
[upload]
enabled = true
url = "s3://{BUCKET}/{PREFIX}"
delete_after_upload = {delete}
verify = "read-back"
retries = 0
retry_delay = "100ms"
max_retry_delay = "400ms"
concurrency = 2
part_size = 65536
shutdown_wait = "{shutdown_wait}"
[upload.options]
aws_endpoint = "http://{endpoint}"
aws_allow_http = "true"
aws_region = "us-east-1"
aws_access_key_id = "test"
aws_secret_access_key = "test"
"#
    )
}

/// The bucket, read directly from moto: object bytes by file name.
fn bucket(moto: &Moto) -> BTreeMap<String, Vec<u8>> {
    moto.objects(PREFIX)
        .into_iter()
        .map(|(key, bytes)| (key.rsplit('/').next().unwrap_or(&key).to_owned(), bytes))
        .collect()
}

fn warc_dir(config: &Config) -> PathBuf {
    config.data_path(&config.warc.dir)
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The `uploaded` events, by file.
fn uploaded_events(config: &Config) -> BTreeMap<String, Vec<Event>> {
    let mut out: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for e in events(config)
        .into_iter()
        .filter(|e| e.kind == EventKind::Uploaded)
    {
        out.entry(e.file.clone().expect("an uploaded event names its file"))
            .or_default()
            .push(e);
    }
    out
}

/// Asserts each file has exactly one `uploaded` event with its location,
/// one manifest entry, and one completed upload at the server.
fn assert_once_each(config: &Config, proxy: &Proxy, files: &BTreeSet<String>) {
    let uploaded = uploaded_events(config);
    assert_eq!(uploaded.keys().cloned().collect::<BTreeSet<_>>(), *files);
    for (file, events) in &uploaded {
        assert_eq!(events.len(), 1, "{file}: {events:?}");
        assert_eq!(events[0].url, format!("s3://{BUCKET}/{PREFIX}/{file}"));
    }
    let manifest = Manifest::open(&config.upload_manifest()).unwrap();
    let recorded: BTreeSet<String> = manifest.uploads().map(|r| r.file.clone()).collect();
    assert_eq!(recorded, *files);
    assert!(manifest.unannounced().is_empty());
    let completions = proxy.completions();
    let expected: BTreeMap<String, usize> = files
        .iter()
        .map(|f| (format!("/{BUCKET}/{PREFIX}/{f}"), 1))
        .collect();
    assert_eq!(completions, expected, "one completed upload per file");
}

#[test]
fn closed_files_reach_the_bucket_intact_and_once_despite_cut_requests() {
    let moto = Moto::start();
    let proxy = Proxy::start(moto.addr);
    // Requests cut in the middle of their bodies (parts, single PUTs,
    // completions): with `retries = 0` each fails its file's try.
    proxy.state.cut_bodies.store(4, Ordering::SeqCst);
    let (web, server) = start_web(8, 25, 3);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config_with(
        data.path(),
        MIN_DELAY_MS,
        4,
        &upload_toml(proxy.addr, false, "60s"),
    );
    let (archive, metrics) = crawl_with_metrics(config.clone(), web.seeds(port));

    let local = warc_files(&config);
    assert!(local.len() >= 4, "several files closed: {local:?}");
    assert_eq!(archive.files_closed, local.len());
    assert_eq!(
        proxy.state.cut.load(Ordering::SeqCst),
        4,
        "every cut happened"
    );
    let failed = metrics.uploads.with_label_values(&["failed"]).get();
    assert!(failed >= 1, "cut requests failed tries");
    let ok = metrics.uploads.with_label_values(&["ok"]).get();
    assert_eq!(ok as usize, local.len());

    // Nothing lost: every closed file is in the bucket, byte for byte.
    let objects = bucket(&moto);
    let names: BTreeSet<String> = local.iter().map(|p| file_name(p)).collect();
    assert_eq!(objects.keys().cloned().collect::<BTreeSet<_>>(), names);
    for path in &local {
        let object = &objects[&file_name(path)];
        assert!(
            &std::fs::read(path).unwrap() == object,
            "{} differs",
            path.display()
        );
    }
    // Nothing twice.
    assert_once_each(&config, &proxy, &names);
    let open: Vec<_> = std::fs::read_dir(warc_dir(&config))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".open"))
        .collect();
    assert!(open.is_empty(), "no file left open: {open:?}");

    // A restart uploads none of them again (they are in the manifest);
    // only what it writes itself, if anything.
    let (_, metrics) = crawl_with_metrics(config.clone(), web.seeds(port));
    server.stop();
    let now: BTreeSet<String> = warc_files(&config).iter().map(|p| file_name(p)).collect();
    assert!(now.is_superset(&names));
    assert_eq!(
        metrics.uploads.with_label_values(&["ok"]).get() as usize,
        now.len() - names.len()
    );
    assert_once_each(&config, &proxy, &now);
}

#[test]
fn files_closed_while_the_store_is_down_are_uploaded_by_the_next_run() {
    let moto = Moto::start();
    let proxy = Proxy::start(moto.addr);
    proxy.state.refuse.store(true, Ordering::SeqCst);
    let (web, server) = start_web(6, 25, 5);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();

    // First run: the store refuses every connection.
    let first = config_with(
        data.path(),
        MIN_DELAY_MS,
        4,
        &upload_toml(proxy.addr, true, "300ms"),
    );
    let (_, metrics) = crawl_with_metrics(first.clone(), web.seeds(port));
    let closed = warc_files(&first);
    assert!(closed.len() >= 3, "several files closed: {closed:?}");
    assert!(metrics.uploads.with_label_values(&["failed"]).get() >= 1);
    assert_eq!(metrics.uploads.with_label_values(&["ok"]).get(), 0);
    assert!(bucket(&moto).is_empty());
    assert!(uploaded_events(&first).is_empty());
    let names: BTreeSet<String> = closed.iter().map(|p| file_name(p)).collect();
    // Kept to compare with what the bucket gets (the next run deletes
    // uploaded files).
    let copies: BTreeMap<String, Vec<u8>> = closed
        .iter()
        .map(|p| (file_name(p), std::fs::read(p).unwrap()))
        .collect();

    // Second run: the store is back; nothing new to crawl.
    proxy.state.refuse.store(false, Ordering::SeqCst);
    let second = config_with(
        data.path(),
        MIN_DELAY_MS,
        4,
        &upload_toml(proxy.addr, true, "60s"),
    );
    let (_, metrics) = crawl_with_metrics(second.clone(), web.seeds(port));
    server.stop();
    let objects = bucket(&moto);
    for (name, bytes) in &copies {
        let object = objects
            .get(name)
            .unwrap_or_else(|| panic!("{name} not uploaded"));
        assert!(object == bytes, "{name} differs");
    }
    // Whatever the second run wrote itself (a robots.txt fetched again)
    // went up too.
    let all: BTreeSet<String> = objects.keys().cloned().collect();
    assert!(all.is_superset(&names));
    assert_eq!(
        metrics.uploads.with_label_values(&["ok"]).get() as usize,
        all.len()
    );
    assert!(
        warc_files(&second).is_empty(),
        "uploaded files are deleted locally"
    );
    assert_once_each(&second, &proxy, &all);

    // Every record the events point at is in the bucket's objects.
    let pages = page_events(&second);
    assert!(!pages.is_empty());
    for event in &pages {
        let at = event.warc_ref.as_ref().unwrap();
        let object = &objects[&at.file];
        let member = &object[at.offset as usize..(at.offset + at.length) as usize];
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(member)
            .read_to_end(&mut text)
            .unwrap();
        let text = String::from_utf8_lossy(&text);
        assert!(
            text.contains(&format!("WARC-Target-URI: {}", event.url)),
            "{}",
            event.url
        );
    }
    // The objects are valid WARC files.
    let out = tempfile::tempdir().unwrap();
    let written: Vec<PathBuf> = objects
        .iter()
        .map(|(name, bytes)| {
            let path = out.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect();
    warcio_check(&written);
}

//! Replay-ready output: the CDXJ index trawl writes beside each closed
//! WARC file is the one pywb's own indexer (`cdxj-indexer`, run by the
//! Python of `TRAWL_PYTHON`, which scripts/setup.sh installs it into)
//! computes from the file, line for line; trawl's SURT keys are the
//! Python `surt` package's; and `.warc.zst` output holds the same records
//! as `.warc.gz`, one zstd frame per record, each frame where its index
//! line says.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use trawl::testweb::{dupes, SyntheticWeb, TestWebServer, WebSpec};
use trawl::warc::cdxj;

/// The Python the test script set up (with warcio and cdxj-indexer).
fn python() -> Command {
    Command::new(std::env::var("TRAWL_PYTHON").unwrap_or_else(|_| "python3".into()))
}

/// Runs Python `code` with `args`; its standard output.
fn run_python(code: &str, args: &[&str]) -> String {
    let out = python()
        .args(["-c", code])
        .args(args)
        .output()
        .expect("python with cdxj-indexer (scripts/test.sh installs it; set TRAWL_PYTHON)");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Crawls `web` (and, with `hub`, its repeating hub, for revisit
/// records), served at `port`, into `data` with `extra` config; returns
/// the WARC files.
fn crawl(web: &SyntheticWeb, port: u16, hub: bool, data: &Path, extra: &str) -> Vec<PathBuf> {
    let config = config_with(data, 5, 2, extra);
    let mut seeds = web.seeds(port);
    if hub {
        seeds.push(format!("http://{}:{port}/", dupes::HUB));
    }
    crawl_in_process(config.clone(), seeds);
    warc_files(&config)
}

#[test]
fn every_closed_file_has_the_index_pywbs_indexer_computes() {
    let (web, server) = start_web(4, 8, 11);
    let data = tempfile::tempdir().unwrap();
    // Small files: several rotations, each file with its own index.
    let port = server.addr().port();
    let files = crawl(
        &web,
        port,
        true,
        data.path(),
        "[warc]\nmax_file_bytes = 40000\n[parse]\ndetect_language = true\n",
    );
    server.stop();
    assert!(files.len() >= 3, "expected rotation, got {files:?}");
    let indexes = cdxj_check(&files);
    let revisits: usize = indexes
        .iter()
        .map(|i| i.matches("\"mime\": \"warc/revisit\"").count())
        .sum();
    let lines: usize = indexes.iter().map(|i| i.lines().count()).sum();
    assert!(revisits > 0, "the crawl stored no revisit to compare");
    assert!(lines > 30, "only {lines} index lines");
    // Every HTML page's response says it is HTML by its bytes too, and
    // the synthetic web's English prose is known as English.
    let html_responses = indexes
        .iter()
        .flat_map(|i| i.lines())
        .filter(|l| l.contains("\"mime\": \"text/html\"") && l.contains("\"status\": \"200\""));
    let mut english = 0;
    for line in html_responses {
        assert!(line.contains("\"mime-detected\": \"text/html\""), "{line}");
        english += usize::from(line.contains("\"languages\": \"eng\""));
    }
    assert!(english > 0, "no page was known as English");
    // Each file's Parquet index holds its CDXJ index's records, in its
    // order, as pyarrow reads them.
    for (file, index) in files.iter().zip(&indexes) {
        parquet_matches_cdxj(file, index);
    }
}

/// Reads `warc`'s Parquet index with pyarrow and checks it against its
/// CDXJ index `cdxj`, line by line.
fn parquet_matches_cdxj(warc: &Path, cdxj: &str) {
    let parquet = trawl::warc::parquet::index_path(warc);
    let read = run_python(
        "import sys, json, pyarrow.parquet as pq\n\
         t = pq.read_table(sys.argv[1])\n\
         for r in t.to_pylist():\n\
         \x20   r['fetch_time'] = r['fetch_time'].strftime('%Y%m%d%H%M%S')\n\
         \x20   print(json.dumps(r, sort_keys=True))",
        &[parquet.to_str().unwrap()],
    );
    let rows: Vec<serde_json::Value> = read
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), cdxj.lines().count(), "{}", parquet.display());
    for (row, line) in rows.iter().zip(cdxj.lines()) {
        let mut parts = line.splitn(3, ' ');
        let (key, time) = (parts.next().unwrap(), parts.next().unwrap());
        let fields: serde_json::Value = serde_json::from_str(parts.next().unwrap()).unwrap();
        let url = fields["url"].as_str().unwrap();
        assert_eq!(row["url"], url, "{line}");
        assert_eq!(row["url_surtkey"], key, "{line}");
        assert_eq!(row["fetch_time"], time, "{line}");
        assert_eq!(row["warc_filename"], fields["filename"], "{line}");
        let number = |name: &str| fields[name].as_str().and_then(|n| n.parse::<i64>().ok());
        assert_eq!(
            row["warc_record_offset"].as_i64(),
            number("offset"),
            "{line}"
        );
        assert_eq!(
            row["warc_record_length"].as_i64(),
            number("length"),
            "{line}"
        );
        assert_eq!(row["fetch_status"].as_i64(), number("status"), "{line}");
        assert_eq!(
            row["content_mime_type"].as_str(),
            fields["mime"].as_str(),
            "{line}"
        );
        assert_eq!(
            row["content_digest"].as_str(),
            fields["digest"].as_str(),
            "{line}"
        );
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned));
        assert_eq!(row["url_host_name"].as_str(), host.as_deref(), "{line}");
        assert_eq!(
            row["content_mime_detected"].as_str(),
            fields["mime-detected"].as_str(),
            "{line}"
        );
        assert_eq!(
            row["content_languages"].as_str(),
            fields["languages"].as_str(),
            "{line}"
        );
    }
}

/// URLs whose SURT keys need the canonicaliser's rules.
const TRICKY: &[&str] = &[
    "http://site0001.test:40123/p/1.html",
    // The target of a `dns:` record.
    "dns:site0001.test",
    "http://www.Example.com/A/B/?b=2&a=1#frag",
    "https://example.com:443/",
    "http://example.com:80",
    "https://a.test:80/",
    "http://127.0.0.1:8080/x",
    "http://2130706433/",
    "http://a.test/%7Euser/a%20b?q=%41",
    "http://a.test/a/./b/../c//d/",
    "http://a.test/../x",
    "http://a.test/?",
    "http://www2.a.test/x?jsessionid=0123456789abcdef0123456789abcdef&z=1",
    "http://a.test/x?PHPSESSID=0123456789abcdef0123456789abcdef",
    "http://a.test/path;p?x=1&x",
    "http://user:pw@a.test/",
    "http://a.test/é?q=ü",
    "http://[::1]:8080/x",
    "http://a.test/%zz%2541",
    "http://a.test/a%2fb",
    "http://a.test/x?a=%26b&c",
    "http://WWW.a.test./x",
    "http://a.test/x?b&a=",
    "http://a.test/x?q=a+b%20c",
    "http://www10.site.test/",
    "http://a.test/p?a=1&A=2",
    "http://a.test/(abcdefghijklmnopqrstuvwx)/Foo.aspx",
    "a.test/x",
    "http://https://a.test/x",
    "http:////a.test/x",
    "mailto:A@B.c",
];

#[test]
fn surt_keys_are_the_python_packages() {
    let theirs = run_python(
        "import sys, surt\nfor u in sys.argv[1:]: print(surt.surt(u))",
        TRICKY,
    );
    let theirs: Vec<&str> = theirs.lines().collect();
    assert_eq!(theirs.len(), TRICKY.len());
    for (url, key) in TRICKY.iter().zip(theirs) {
        assert_eq!(trawl::warc::surt::surt(url), key, "{url}");
    }
}

/// Each record of a WARC file's bytes (gzip or zstd), by target URI
/// (response and revisit records): its type and payload digest.
fn records(text: &[u8]) -> BTreeMap<String, (String, String)> {
    let text = String::from_utf8_lossy(text);
    let mut out = BTreeMap::new();
    for record in text.split("WARC/1.1\r\n").skip(1) {
        let header = |name: &str| {
            record
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .unwrap_or_default()
                .to_owned()
        };
        let kind = header("WARC-Type");
        // A `dns:` record's block starts with its time: two crawls a
        // second apart write different ones.
        if header("WARC-Target-URI").starts_with("dns:") {
            continue;
        }
        if kind == "response" || kind == "revisit" {
            let digest = header("WARC-Payload-Digest");
            out.insert(header("WARC-Target-URI"), (kind, digest));
        }
    }
    out
}

#[test]
fn zstd_files_hold_the_same_records_one_frame_each() {
    // A web without flaky behaviours or mirrors, crawled twice: both
    // crawls see the same pages, and store the same ones in full.
    let web = SyntheticWeb::new(WebSpec {
        hosts: 4,
        pages_per_host: 8,
        seed: 11,
        behaviours: false,
    });
    let server = TestWebServer::start(web.clone(), "127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let port = server.addr().port();
    let gz_data = tempfile::tempdir().unwrap();
    let gz_files = crawl(&web, port, false, gz_data.path(), "");
    let zst_data = tempfile::tempdir().unwrap();
    let zst_files = crawl(
        &web,
        port,
        false,
        zst_data.path(),
        "[warc]\ncompression = \"zstd\"\ncompression_level = 3\n",
    );
    server.stop();
    assert!(zst_files
        .iter()
        .all(|f| f.to_string_lossy().ends_with(".warc.zst")));

    let mut gz_text = Vec::new();
    for file in &gz_files {
        flate2::read::MultiGzDecoder::new(std::fs::File::open(file).unwrap())
            .read_to_end(&mut gz_text)
            .unwrap();
    }
    let mut zst_text = Vec::new();
    for file in &zst_files {
        let bytes = std::fs::read(file).unwrap();
        // The file starts with a zstd frame: no dictionary frame.
        assert_eq!(&bytes[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
        zst_text.extend(read_frames(&bytes));
        check_index_points_at_frames(file, &bytes);
    }
    let (gz, zst) = (records(&gz_text), records(&zst_text));
    assert!(gz.len() > 30, "only {} records", gz.len());
    // Same URLs with the same payloads; which of two identical pages is
    // the revisit depends on fetch order, so only the digests compare.
    let digests = |m: &BTreeMap<String, (String, String)>| -> BTreeMap<String, String> {
        m.iter().map(|(u, (_, d))| (u.clone(), d.clone())).collect()
    };
    let (gz, zst) = (digests(&gz), digests(&zst));
    let differ: Vec<_> = gz
        .iter()
        .filter(|(u, d)| zst.get(*u) != Some(d))
        .chain(zst.iter().filter(|(u, d)| gz.get(*u) != Some(d)))
        .take(10)
        .collect();
    assert!(differ.is_empty(), "records differ (first 10): {differ:?}");
}

/// Decompresses `bytes` frame by frame, checking each frame holds exactly
/// one whole record (it starts with `WARC/1.1` and its Content-Length
/// ends where the frame does).
fn read_frames(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let size = zstd::zstd_safe::find_frame_compressed_size(&bytes[at..]).unwrap();
        let record = zstd::stream::decode_all(&bytes[at..at + size]).unwrap();
        assert_one_record(&record);
        out.extend(record);
        at += size;
    }
    out
}

fn assert_one_record(record: &[u8]) {
    assert!(record.starts_with(b"WARC/1.1\r\n"));
    let view = cdxj::parse_record(record).expect("a whole record");
    let head_len = record.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(
        head_len + view.block.len() + 4,
        record.len(),
        "one record per frame"
    );
}

/// Every index line of a zstd file names a frame: decompressing
/// `length` bytes at `offset` gives exactly one record, of that URL.
fn check_index_points_at_frames(file: &Path, bytes: &[u8]) {
    let index = std::fs::read_to_string(cdxj::index_path(file)).unwrap();
    assert!(index.lines().count() > 0);
    for line in index.lines() {
        let json: serde_json::Value =
            serde_json::from_str(&line[line.find('{').unwrap()..]).unwrap();
        let offset: usize = json["offset"].as_str().unwrap().parse().unwrap();
        let length: usize = json["length"].as_str().unwrap().parse().unwrap();
        let frame = &bytes[offset..offset + length];
        assert_eq!(
            zstd::zstd_safe::find_frame_compressed_size(frame),
            Ok(length),
            "{line}"
        );
        let record = zstd::stream::decode_all(frame).unwrap();
        assert_one_record(&record);
        let url = json["url"].as_str().unwrap();
        let text = String::from_utf8_lossy(&record);
        assert!(
            text.contains(&format!("WARC-Target-URI: {url}\r\n")),
            "{line}"
        );
    }
}

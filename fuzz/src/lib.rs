//! The properties trawl's readers of outside bytes must keep, one function
//! per fuzz target: `fuzz/fuzz_targets/<name>.rs` hands libFuzzer's input
//! to [`<name>`](TARGETS), and the main crate's test suite
//! (`tests/it/fuzz_corpus.rs`) replays every file of `fuzz/corpus/<name>/`
//! through the same function, so an input that once failed stays fixed.
//!
//! Each function panics (and so fails the fuzzer or the test) when a
//! property does not hold. Beyond "no panic, bounded time and memory"
//! (libFuzzer's `-timeout` and `-rss_limit_mb`, and the allocation cap
//! below), they check:
//!
//! - [`robots`]: the decision for every URL derived from the input equals
//!   the decision of a clean rewrite of the parsed rules;
//! - [`url`]: normalising a URL's normal form changes nothing;
//! - [`store_codec`], [`wire`]: a value decoded from the input encodes and
//!   decodes back to itself;
//! - [`decode`], [`sitemap`]: compressing with a coding and decoding gives
//!   the input back (within the cap);
//! - [`warc_record`], [`warc_recover`]: what trawl's writer writes, its
//!   readers read back; recovery keeps every complete member and only a
//!   prefix of the file;
//! - [`crawl_index`]: an earlier crawl's CDXJ lines, an events file folded
//!   into a crawl report, a payload's sniffed type and a text's language
//!   stay within their bounds.
//!
//! This file depends only on `trawl`, std, and crates trawl itself depends
//! on, so the main crate's tests can include it as a module.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use url::Url;

/// A target's property function.
pub type Target = fn(&[u8]);

/// Every target, by name (the name of its corpus directory).
pub const TARGETS: &[(&str, Target)] = &[
    ("robots", robots),
    ("sitemap", sitemap),
    ("html_stream", html_stream),
    ("html_tree", html_tree),
    ("url", url),
    ("decode", decode),
    ("response_head", response_head),
    ("warc_record", warc_record),
    ("warc_recover", warc_recover),
    ("wire", wire),
    ("store_codec", store_codec),
    ("admin_json", admin_json),
    ("admin_request", admin_request),
    ("config", config),
    ("crawl_index", crawl_index),
];

/// Caps a single allocation while fuzzing, as `-malloc_limit_mb` does
/// under a sanitizer: the targets are built without one (see
/// `fuzz/README.md`), and an input that asks for this much memory at once
/// is a finding, not a slow input.
#[cfg(fuzzing)]
mod allocation_cap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::io::Write;

    /// The largest single allocation an input may cause.
    const MAX_ALLOCATION: usize = 512 << 20;

    struct Capped;

    fn check(size: usize) {
        if size > MAX_ALLOCATION {
            // No allocation on the way out: stderr is unbuffered.
            let _ = std::io::stderr().write_all(b"==trawl-fuzz== allocation over the cap\n");
            std::process::abort();
        }
    }

    // SAFETY: every call is forwarded to the system allocator unchanged.
    unsafe impl GlobalAlloc for Capped {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            check(layout.size());
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            check(layout.size());
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            check(new_size);
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static CAPPED: Capped = Capped;
}

/// The embedded default configuration, read once.
fn defaults() -> &'static trawl::config::Config {
    static CONFIG: OnceLock<trawl::config::Config> = OnceLock::new();
    CONFIG.get_or_init(trawl::config::Config::defaults)
}

/// A parse clock that never advances: the readers' time budget never cuts
/// a parse, so results do not depend on the machine's speed (libFuzzer's
/// `-timeout` bounds the time instead).
struct Frozen;

impl trawl::parse::ParseClock for Frozen {
    fn elapsed(&self) -> Duration {
        Duration::ZERO
    }
}

/// A fixed "now" (2026-01-01), so results do not depend on the date.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600)
}

/// Splits `data` at its first `\n` (a target's parameters, then its body).
fn first_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&[][..], data),
    }
}

// ---------------------------------------------------------------- robots

/// A robots.txt file: parsed for two product tokens, decided for URLs
/// taken from its own lines; the rules in force, rewritten as a clean file
/// and parsed again, decide every such URL the same way.
pub fn robots(data: &[u8]) {
    let urls = robots_urls(data);
    for token in ["trawl", "FooBot", "*"] {
        let rules = trawl::robots::Rules::parse(data, token);
        let clean = rewrite_robots(&rules);
        let again = trawl::robots::Rules::parse(clean.as_bytes(), token);
        assert_eq!(
            rules.rules().len(),
            again.rules().len(),
            "the rewrite has as many rules\n{clean}"
        );
        assert_eq!(
            rules.sitemaps, again.sitemaps,
            "sitemaps survive the rewrite"
        );
        match (rules.crawl_delay, again.crawl_delay) {
            (Some(a), Some(b)) => assert!(
                a.abs_diff(b) <= Duration::from_micros(1),
                "crawl-delay {a:?} rewritten as {b:?}"
            ),
            (a, b) => assert_eq!(a, b, "crawl-delay survives the rewrite"),
        }
        for url in &urls {
            let decision = rules.decide(url);
            let rewritten = again.decide(url);
            assert_eq!(
                decision.allowed,
                rewritten.allowed,
                "{url} for {token}: the file says {:?}, its clean rewrite {:?}\n{clean}",
                decision.rule.as_ref().map(|r| &r.line),
                rewritten.rule.as_ref().map(|r| &r.line),
            );
            if url.path() == "/robots.txt" {
                assert!(decision.allowed, "/robots.txt is always allowed");
            }
        }
    }
}

/// The rules in force written as a clean robots.txt: one `*` group.
fn rewrite_robots(rules: &trawl::robots::Rules) -> String {
    let mut out = String::from("User-agent: *\n");
    for rule in rules.rules() {
        let key = if rule.allow { "Allow" } else { "Disallow" };
        out.push_str(&format!("{key}: {}\n", rule.pattern()));
    }
    if let Some(delay) = rules.crawl_delay {
        out.push_str(&format!("Crawl-delay: {}\n", delay.as_secs_f64()));
    }
    for sitemap in &rules.sitemaps {
        out.push_str(&format!("Sitemap: {sitemap}\n"));
    }
    out
}

/// URLs to decide: every path-like word of the file, and each pattern
/// with its wildcards filled in two ways.
fn robots_urls(data: &[u8]) -> Vec<Url> {
    let base = Url::parse("http://robots.test/").expect("a valid URL");
    let text = String::from_utf8_lossy(&data[..data.len().min(64 * 1024)]);
    let mut paths: Vec<String> = vec!["/".into(), "/robots.txt".into()];
    for word in text.split(|c: char| c.is_whitespace() || c == ':' || c == '#') {
        if word.starts_with('/') || word.starts_with('%') || word.starts_with('*') {
            let word = word.trim_end_matches('$');
            paths.push(word.replace('*', ""));
            paths.push(word.replace('*', "/x"));
            paths.push(format!("{word}$"));
        }
        if paths.len() > 96 {
            break;
        }
    }
    paths
        .iter()
        .filter_map(|p| {
            let p = if p.starts_with('/') {
                p.clone()
            } else {
                format!("/{p}")
            };
            base.join(&p).ok()
        })
        .collect()
}

// --------------------------------------------------------------- sitemap

/// Per-file limits small enough for the fuzzer to reach.
const SITEMAP_LIMITS: trawl::sitemap::SitemapLimits = trawl::sitemap::SitemapLimits {
    max_urls: 64,
    max_bytes: 256 * 1024,
};

/// A sitemap body (XML urlset or index, text, gzip): entries within the
/// limits; the same file gzipped reads the same; the entries' selection
/// accounts for every entry.
pub fn sitemap(data: &[u8]) {
    use trawl::sitemap::{parse_sitemap, read_sitemap, select_entries, SitemapKind};

    let parsed = parse_sitemap(data, SITEMAP_LIMITS);
    assert!(parsed.entries.len() <= SITEMAP_LIMITS.max_urls);
    assert_eq!(read_sitemap(data, None, SITEMAP_LIMITS), parsed);
    for entry in &parsed.entries {
        assert!(!entry.loc.is_empty(), "no empty <loc>");
    }
    if !data.starts_with(&[0x1f, 0x8b]) {
        let gz = gzip(data);
        let unzipped = parse_sitemap(&gz, SITEMAP_LIMITS);
        assert_eq!(unzipped, parsed, "a gzipped sitemap reads as the plain one");
        assert_eq!(read_sitemap(&gz, Some("gzip"), SITEMAP_LIMITS), parsed);
    }
    let sitemap_url = Url::parse("http://sitemap.test/sitemap.xml").expect("a valid URL");
    let fresh = chrono::DateTime::<chrono::Utc>::from(now());
    let selection = select_entries(&parsed, &sitemap_url, Some("other.test"), 1, 2, fresh);
    let joined = parsed
        .entries
        .iter()
        .filter(|e| sitemap_url.join(&e.loc).is_ok())
        .count();
    assert_eq!(
        selection.pages.len()
            + selection.sitemaps.len()
            + selection.dropped_host
            + selection.dropped_depth,
        joined,
        "every entry is selected or counted as dropped"
    );
    if parsed.kind != SitemapKind::Index {
        assert!(selection.sitemaps.is_empty());
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).expect("writing to a Vec");
    enc.finish().expect("writing to a Vec")
}

// ------------------------------------------------------------------ html

/// Parse limits small enough for the fuzzer to reach each bound.
fn html_limits(engine: trawl::parse::ParseEngine) -> trawl::parse::ParseLimits {
    let defaults = trawl::parse::ParseLimits::from(&defaults().parse);
    trawl::parse::ParseLimits {
        engine,
        max_links: 32,
        max_html_bytes: 64 * 1024,
        max_nesting: 64,
        max_attributes: 64,
        max_tree_steps: 200_000,
        time_budget: defaults.time_budget,
        // The language detector reads what hostile pages say, too.
        detect_language: true,
    }
}

/// An HTML body (its first line, if it names a charset or Content-Type,
/// is taken as the header) read by the streaming reader.
pub fn html_stream(data: &[u8]) {
    html(data, trawl::parse::ParseEngine::Stream);
}

/// An HTML body read by the bounded tree reader.
pub fn html_tree(data: &[u8]) {
    html(data, trawl::parse::ParseEngine::Tree);
}

fn html(data: &[u8], engine: trawl::parse::ParseEngine) {
    let (head, body) = first_line(data);
    let content_type = std::str::from_utf8(head)
        .ok()
        .filter(|h| h.contains('/') || h.contains("charset"));
    let (body, content_type) = match content_type {
        Some(ct) => (body, Some(ct)),
        None => (data, None),
    };
    let (text, _encoding) = trawl::parse::charset::decode_html(body, content_type);
    let page_url = Url::parse("http://page.test/dir/page.html?q=1").expect("a valid URL");
    let limits = html_limits(engine);
    let page = trawl::parse::parse_html_timed(&text, &page_url, &limits, &Frozen);
    assert!(page.links.len() <= limits.max_links);
    let mut seen = std::collections::HashSet::new();
    for link in &page.links {
        assert!(link.fragment().is_none(), "{link} keeps no fragment");
        assert!(seen.insert(link.as_str()), "{link} listed twice");
    }
    if page.links_dropped > 0 {
        assert_eq!(page.links.len(), limits.max_links);
    }
    if let Some(cut) = page.truncated {
        assert!(cut.parsed_bytes <= text.len());
    }
    if let Some(meta) = &page.robots_meta {
        assert_eq!(meta, &meta.to_ascii_lowercase());
    }
    let findings = trawl::frontier::response::page_findings(page, Some("noarchive"), &page_url, 1);
    assert!(findings.found.len() <= limits.max_links);
}

// ------------------------------------------------------------------- url

/// The URL rules of the default configuration, with and without tracking
/// parameters stripped: `(rules, the same without a length limit)`. The
/// normal form may be longer than the URL (a lone `%` is written `%25`),
/// so it is normalised again without the limit, which is the fetch URL's.
fn url_rules() -> &'static [(trawl::url::UrlRules, trawl::url::UrlRules); 2] {
    type Pair = (trawl::url::UrlRules, trawl::url::UrlRules);
    static RULES: OnceLock<[Pair; 2]> = OnceLock::new();
    RULES.get_or_init(|| {
        let mut tracking = defaults().url.clone();
        tracking.strip_tracking = true;
        let pair = |config: &trawl::config::UrlConfig| {
            (
                trawl::url::UrlRules::new(config, 2048),
                trawl::url::UrlRules::new(config, usize::MAX),
            )
        };
        [pair(&defaults().url), pair(&tracking)]
    })
}

/// A URL (absolute, or relative to a page): its normal form is a fixed
/// point, the fingerprint is the normal form's, and the fetch URL
/// normalises to the same identity.
pub fn url(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let base = Url::parse("http://base.test/a/b/c.html?x=1").expect("a valid URL");
    let candidates: Vec<Url> = [Url::parse(raw.trim()), base.join(raw.trim())]
        .into_iter()
        .flatten()
        .collect();
    for (rules, unbounded) in url_rules() {
        for url in &candidates {
            let Ok(once) = rules.normalise(url.clone()) else {
                continue;
            };
            assert_eq!(once.fp, trawl::url::Fingerprint::of(&once.identity));
            assert_eq!(
                trawl::url::Fingerprint::from_bytes(&once.fp.to_bytes()),
                Some(once.fp)
            );
            let twice = unbounded
                .parse(&once.identity)
                .unwrap_or_else(|e| panic!("the normal form {} is no URL: {e}", once.identity));
            assert_eq!(
                twice.identity, once.identity,
                "normalising {url} twice differs from once"
            );
            let refetched = rules
                .parse(once.fetch.as_str())
                .unwrap_or_else(|e| panic!("the fetch URL {} is no URL: {e}", once.fetch));
            assert_eq!(refetched.identity, once.identity);
            let host = trawl::url::host_key(&once.fetch);
            let _ = trawl::url::registrable_domain(host);
            assert!(trawl::url::partition_of(host, 64) < 64);
            let _ = trawl::robots::robots_url(&once.fetch);
        }
    }
    let _ = trawl::warc::surt::surt(&raw);
    let _ = trawl::url::host_name(&raw);
}

// ---------------------------------------------------------------- decode

/// Content-Encoding values the first byte picks from.
const CODING_HEADERS: &[&str] = &[
    "gzip",
    "x-gzip",
    "deflate",
    "br",
    "zstd",
    "identity",
    "gzip, br",
    "br, gzip",
    "zstd, zstd",
    "GZIP",
    "compress",
    "",
];

/// Codings trawl can decode and this target can encode.
const ROUND_TRIP: &[&str] = &["gzip", "deflate", "br", "zstd"];

/// A compressed body (first byte: the coding; second: the cap): decoded
/// within the cap; any body compressed by a coding decodes back to itself;
/// a body in chunks is gathered in order.
pub fn decode(data: &[u8]) {
    let [pick, cap_byte, body @ ..] = data else {
        return;
    };
    let cap = if *cap_byte == 0 {
        1 << 20
    } else {
        usize::from(*cap_byte) * 64
    };
    let header = CODING_HEADERS[usize::from(*pick) % CODING_HEADERS.len()];
    if let Ok(decoded) = trawl::fetch::decode::decode_body(body, Some(header), cap) {
        if matches!(decoded.bytes, std::borrow::Cow::Borrowed(_)) {
            // No coding to undo: the body as it came.
            assert_eq!(decoded.bytes.as_ref(), body, "{header}: the body itself");
            assert!(!decoded.truncated);
        } else {
            assert!(decoded.bytes.len() <= cap, "{header}: more than the cap");
        }
    }

    let coding = ROUND_TRIP[usize::from(*pick) % ROUND_TRIP.len()];
    let encoded = encode(coding, body);
    let decoded = trawl::fetch::decode::decode_body(&encoded, Some(coding), cap)
        .unwrap_or_else(|e| panic!("{coding} of {} bytes: {e}", body.len()));
    let want = &body[..body.len().min(cap)];
    assert_eq!(decoded.bytes.as_ref(), want, "{coding} round trip");
    assert_eq!(decoded.truncated, body.len() > cap, "{coding} truncation");

    let mut buffer = trawl::fetch::body::BodyBuffer::with_hint(usize::from(*cap_byte));
    let mut rest = body;
    while !rest.is_empty() {
        let n = (usize::from(rest[0]) % 17).min(rest.len());
        let (chunk, tail) = rest.split_at(n.max(1));
        buffer.push(Bytes::copy_from_slice(chunk));
        rest = tail;
    }
    assert_eq!(buffer.len(), body.len());
    assert_eq!(buffer.finish().as_ref(), body, "chunks gathered in order");
}

fn encode(coding: &str, data: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" => gzip(data),
        "deflate" => {
            let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(data).expect("writing to a Vec");
            enc.finish().expect("writing to a Vec")
        }
        "br" => {
            let mut out = Vec::new();
            {
                let mut enc = brotli::CompressorWriter::new(&mut out, 4096, 1, 18);
                enc.write_all(data).expect("writing to a Vec");
            }
            out
        }
        _ => zstd::encode_all(data, 1).expect("writing to a Vec"),
    }
}

// --------------------------------------------------------- response head

/// A response as it arrives (status line, headers, blank line, body):
/// every header trawl reads (Content-Type, Content-Encoding, Location,
/// Retry-After, X-Robots-Tag) read, the body decoded and parsed.
pub fn response_head(data: &[u8]) {
    let split = find(data, b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| find(data, b"\n\n").map(|i| (i, i + 2)));
    let (head, body) = match split {
        Some((end, start)) => (&data[..end], &data[start..]),
        None => (data, &[][..]),
    };
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(200);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let response = trawl::fetch::FetchResponse {
        status,
        headers,
        head: head.to_vec(),
        request_head: Vec::new(),
        body: Bytes::copy_from_slice(body),
        truncated: false,
        ip: None,
        started_at: now(),
        elapsed: Duration::ZERO,
        pipeline: None,
    };
    let url = Url::parse("http://head.test/a/page.html").expect("a valid URL");
    let _ = response.is_html();
    let directives = trawl::frontier::response::header_directives(&response, "trawl");
    if let Some(d) = &directives {
        assert_eq!(d, &d.to_ascii_lowercase());
    }
    let _ = trawl::frontier::response::may_retry(&Ok(response.clone()));
    let _ = trawl::frontier::response::politeness_outcome(&Ok(response.clone()), now());
    if let Some(value) = response.header("retry-after") {
        let _ = trawl::politeness::parse_retry_after(value, now());
    }
    if let Some(location) = response.header("location") {
        let _ = url.join(location);
    }
    let coding = response.header("content-encoding");
    let decoded = trawl::fetch::decode::decode_body(&response.body, coding, 64 * 1024);
    let bytes = decoded
        .as_ref()
        .map_or(&response.body[..], |d| &d.bytes[..]);
    let (html, _) = trawl::parse::charset::decode_html(bytes, response.header("content-type"));
    let limits = html_limits(trawl::parse::ParseEngine::Stream);
    let page = trawl::parse::parse_html_timed(&html, &url, &limits, &Frozen);
    let _ = trawl::frontier::response::page_findings(page, directives.as_deref(), &url, 0);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

// ------------------------------------------------------------------ warc

/// Header names of the records this target writes.
const WARC_NAMES: &[&str] = &[
    "WARC-Type",
    "WARC-Target-URI",
    "WARC-Date",
    "WARC-Payload-Digest",
    "Content-Type",
];

/// A decompressed WARC record, as recovery reads it: parsed, indexed;
/// and a record written by trawl from parts of the input reads back with
/// its headers and block.
pub fn warc_record(data: &[u8]) {
    if let Some(view) = trawl::warc::cdxj::parse_record(data) {
        let length: usize = view
            .header("Content-Length")
            .and_then(|v| v.parse().ok())
            .expect("a record has a Content-Length");
        assert_eq!(view.block.len(), length);
        let mut lines = trawl::warc::cdxj::IndexLines::new("f.warc.gz", &std::env::temp_dir());
        lines.push(&view, 0, data.len() as u64);
    }

    let (head, block) = first_line(data);
    let head = String::from_utf8_lossy(head);
    let headers: Vec<(&'static str, String)> = head
        .split('|')
        .zip(WARC_NAMES)
        .map(|(value, name)| (*name, value.replace(['\r', '\n'], "").trim().to_owned()))
        .collect();
    let (block, payload) = block.split_at(block.len() / 2);
    let record = trawl::warc::Record {
        headers: headers.clone(),
        block: block.to_vec(),
        payload,
    };
    let bytes = record.to_bytes();
    let view = trawl::warc::cdxj::parse_record(&bytes).expect("trawl's record reads back");
    let mut want: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let length = record.block_len().to_string();
    want.push(("Content-Length", &length));
    assert_eq!(view.headers, want);
    assert_eq!(view.block.len(), record.block_len());
    assert_eq!(&view.block[..block.len()], block);
    assert_eq!(&view.block[block.len()..], payload);
    let mut lines = trawl::warc::cdxj::IndexLines::new("f.warc.gz", &std::env::temp_dir());
    lines.push(&view, 0, bytes.len() as u64);
}

/// A WARC file a crash left open (first byte: gzip or zstd; then records
/// separated by `\0\0`, each compressed as trawl writes it, then the rest
/// of the input as written, a torn tail): recovery keeps every complete
/// member, and what it keeps is a prefix of the file; a file without one
/// complete member is removed.
pub fn warc_recover(data: &[u8]) {
    let [codec, rest @ ..] = data else {
        return;
    };
    let zstd = codec % 2 == 1;
    let (records, tail) = match find(rest, b"\0\0\0") {
        Some(i) => (&rest[..i], &rest[i + 3..]),
        None => (&[][..], rest),
    };
    let mut file = Vec::new();
    for record in records.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        if zstd {
            file.extend(zstd::encode_all(record, 1).expect("writing to a Vec"));
        } else {
            file.extend(gzip(record));
        }
    }
    let complete = file.len();
    file.extend_from_slice(tail);

    let dir = scratch_dir();
    let extension = if zstd { "warc.zst" } else { "warc.gz" };
    let final_name = format!("trawl-20260101000000-00000.{extension}");
    let open = dir.join(format!("{final_name}.open"));
    std::fs::write(&open, &file).expect("writing the scratch file");
    let recovered = trawl::warc::recover_open_files(&dir, "trawl", false).expect("recovery");
    assert!(!open.exists(), "no open file is left");
    if recovered.is_empty() {
        // Without one complete record the file is removed, not kept empty.
        assert_eq!(complete, 0, "a file with a complete record is kept");
        assert!(!dir.join(&final_name).exists());
        return;
    }
    assert_eq!(recovered.len(), 1, "the open file is recovered");
    let kept = std::fs::read(dir.join(&final_name)).expect("the recovered file");
    assert!(kept.len() >= complete, "every complete member is kept");
    assert_eq!(kept[..], file[..kept.len()], "recovery keeps a prefix");
    assert!(dir.join(format!("{final_name}.cdxj")).exists());
}

/// A directory of this thread's own (tests replay corpora in parallel),
/// emptied.
fn scratch_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static DIR: std::path::PathBuf = {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let name = format!("trawl-fuzz-{}-{n}", std::process::id());
            let dir = std::env::temp_dir().join(name);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("creating the scratch directory");
            dir
        };
    }
    let dir = DIR.with(Clone::clone);
    for entry in std::fs::read_dir(&dir)
        .expect("the scratch directory")
        .flatten()
    {
        let _ = std::fs::remove_file(entry.path());
    }
    dir
}

// ------------------------------------------------------------------ wire

/// Bytes from a peer's bridge connection: framed by the bridge's codec,
/// each frame's message decoded; a decoded message encodes and decodes
/// back to itself, and frames it again to the same payload. The input is
/// also read as one frame's payload, so messages are reached unframed.
pub fn wire(data: &[u8]) {
    use tokio_util::codec::{Decoder, Encoder};
    use trawl::cluster::wire;

    message(data);
    let mut codec = wire::codec();
    let mut buf = BytesMut::from(data);
    let mut frames = 0;
    while let Ok(Some(frame)) = codec.decode(&mut buf) {
        assert!(frame.len() <= wire::MAX_FRAME);
        message(&frame);
        let mut out = BytesMut::new();
        codec
            .encode(frame.clone().freeze(), &mut out)
            .expect("a frame that was read can be written");
        let again = codec
            .decode(&mut out)
            .expect("a written frame reads")
            .expect("a whole frame");
        assert_eq!(again, frame);
        frames += 1;
        if frames > 1000 {
            break;
        }
    }
}

fn message(payload: &[u8]) {
    use trawl::cluster::wire;

    let Ok(msg) = wire::decode(payload) else {
        return;
    };
    let bytes = wire::encode(&msg).expect("a decoded message encodes");
    let again = wire::decode(&bytes).expect("an encoded message decodes");
    assert_eq!(again, msg, "wire round trip");
    let _ = wire::check_hello(&msg, "fuzz", "n1");
}

// ----------------------------------------------------------- store codec

/// A stored value (first byte: which kind; the rest: its bytes): a value
/// decoded from the input encodes and decodes back to itself; keys built
/// from the input give their parts back.
pub fn store_codec(data: &[u8]) {
    use trawl::store::codec;

    let [kind, bytes @ ..] = data else {
        return;
    };
    match kind % 7 {
        0 => {
            if let Ok(record) = trawl::store::UrlRecord::decode(bytes) {
                let encoded = record.encode().expect("a decoded record encodes");
                let again = trawl::store::UrlRecord::decode(&encoded).expect("decodes");
                assert_eq!(again, record, "url record round trip");
            }
        }
        1 => {
            let decoded = [
                codec::QueueValue::decode(bytes),
                codec::QueueValue::decode_legacy(bytes),
            ];
            for value in decoded.into_iter().flatten() {
                let encoded = value.encode().expect("a decoded queue value encodes");
                let again = codec::QueueValue::decode(&encoded).expect("decodes");
                assert_eq!(again, value, "queue value round trip");
            }
        }
        2 => {
            if let Ok(records) = codec::decode_robots(bytes) {
                let encoded = codec::encode_robots(&records).expect("encodes");
                let again = codec::decode_robots(&encoded).expect("decodes");
                assert_eq!(again, records, "robots records round trip");
            }
        }
        3 => {
            if let Ok(memory) = codec::decode_memory(bytes) {
                let encoded = codec::encode_memory(&memory).expect("encodes");
                let again = codec::decode_memory(&encoded).expect("decodes");
                assert_eq!(again, memory, "host memory round trip");
            }
        }
        4 => {
            if let Ok(schedule) = codec::decode_schedule(bytes) {
                let encoded = codec::encode_schedule(&schedule).expect("encodes");
                let again = codec::decode_schedule(&encoded).expect("decodes");
                assert_eq!(again, schedule, "schedule round trip");
            }
        }
        5 => {
            let _ = codec::queue_key_host(bytes);
            let _ = codec::queue_key_priority(bytes);
            let _ = codec::queue_key_rank(bytes);
            let _ = codec::recrawl_key_due(bytes);
            let (host, rest) = first_line(bytes);
            if let Ok(host) = std::str::from_utf8(host) {
                if !host.contains('\0') {
                    let seq = u64_of(rest);
                    let level = rest.first().copied().unwrap_or(0) % 4;
                    let priority = trawl::frontier::Priority::from_level(level);
                    let cash = f32::from_bits(u64_of(rest.get(8..).unwrap_or(&[])) as u32);
                    let rank = trawl::frontier::importance::Rank::of(cash.into());
                    let key = codec::queue_key(host, priority, rank, seq);
                    assert_eq!(codec::queue_key_host(&key), Some(host));
                    assert_eq!(codec::queue_key_priority(&key), Some(priority));
                    assert_eq!(codec::queue_key_rank(&key), Some(rank));
                    let fp = trawl::url::Fingerprint::of(host);
                    let key = codec::recrawl_key(host, seq, fp);
                    assert_eq!(codec::recrawl_key_due(&key), Some(seq));
                }
            }
        }
        _ => {
            // A map of robots records as the JSON of an earlier release.
            let _ = codec::decode_value::<BTreeMap<String, serde_json::Value>>("fuzz", bytes);
            let _ = codec::decode_robots(&[b"{".as_slice(), bytes].concat());
        }
    }
}

fn u64_of(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(word)
}

// ------------------------------------------------------------ admin json

/// A request body of the admin API (first byte: which endpoint), read
/// into the type its handler takes and checked as the handler does.
pub fn admin_json(data: &[u8]) {
    let [kind, body @ ..] = data else {
        return;
    };
    match kind % 5 {
        0 => {
            if let Ok(req) = serde_json::from_slice::<trawl::admin::crawl::RateRequest>(body) {
                let _ = trawl::control::check_rate(req.max_requests_per_second);
            }
        }
        1 => {
            if let Ok(req) = serde_json::from_slice::<trawl::admin::crawl::SeedRequest>(body) {
                for url in req.urls.iter().take(64) {
                    let _ = url_rules()[0].0.parse(url);
                }
            }
        }
        2 => {
            if let Ok(req) = serde_json::from_slice::<trawl::admin::hosts::SlowdownRequest>(body) {
                let slowdown = trawl::politeness::slowdown::Slowdown {
                    min_delay_ms: req.min_delay_ms,
                    max_in_flight: req.max_in_flight,
                };
                let _ = slowdown.check();
            }
        }
        3 => {
            // A `{domain}` path segment (the listing parameters are a
            // query string: `admin_request`).
            let _ = trawl::frontier::blocks::BlockTarget::domain(&String::from_utf8_lossy(body));
        }
        _ => {
            // A `{host}` path segment.
            let _ = trawl::url::host_name(&String::from_utf8_lossy(body));
        }
    }
}

// --------------------------------------------------------- admin request

/// The parts of an admin API request that are not a JSON body: a path and
/// query (read by the query extractor as the listing handlers read it,
/// and marked forwarded as a node sends it on) and an `Authorization`
/// header checked against a token. Input: the token, a NUL, the header
/// value, a NUL, the path and query.
pub fn admin_request(data: &[u8]) {
    let mut parts = data.splitn(3, |b| *b == 0);
    let (token, header, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    authorization(token, header);
    query(&String::from_utf8_lossy(target));
}

/// A request is let in only with `Bearer <token>` (spaces around the
/// token aside), and always with exactly that. The header is built as
/// actix builds it from the wire: bytes it refuses never reach a handler.
fn authorization(token: &[u8], header: &[u8]) {
    use actix_web::http::header::HeaderValue;
    use trawl::admin::auth::Access;
    let Ok(header) = HeaderValue::from_bytes(header) else {
        return;
    };
    assert!(
        Access::open().accepts(Some(&header)),
        "no token: all let in"
    );
    let Ok(token) = std::str::from_utf8(token) else {
        return;
    };
    let token = token.trim();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return; // not a token a header can carry
    }
    let access = Access::with_token(token, true);
    let exact = HeaderValue::from_str(&format!("Bearer {token}")).expect("a visible-ASCII value");
    assert!(access.accepts(Some(&exact)));
    assert!(!access.accepts(None));
    if access.accepts(Some(&header)) {
        let given = header
            .as_bytes()
            .strip_prefix(b"Bearer ")
            .expect("accepted without Bearer");
        assert_eq!(
            std::str::from_utf8(given).map(str::trim),
            Ok(token),
            "accepted another token"
        );
    }
}

/// The listing parameters read back from the path a node asks its peers
/// with give the listing it asks for; marking a request forwarded keeps
/// its parameters, makes it read as forwarded, and is idempotent.
fn query(target: &str) {
    use actix_web::web::Query;
    use trawl::admin::forward::{mark_forwarded, query_is_forwarded};
    use trawl::admin::hosts::{peer_listing_path, HostsParams, QueueParams};
    let target = target.split('#').next().unwrap_or_default();
    let query_of = |path: &str| {
        path.split_once('?')
            .map(|(_, q)| q.to_owned())
            .unwrap_or_default()
    };
    let marked = mark_forwarded(target);
    assert!(query_is_forwarded(&query_of(&marked)), "{marked}");
    assert_eq!(mark_forwarded(&marked), marked, "marking twice");
    let others = |query: &str| -> Vec<(String, String)> {
        form_urlencoded::parse(query.as_bytes())
            .filter(|(k, _)| k != "forwarded")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    };
    assert_eq!(others(&query_of(&marked)), others(&query_of(target)));
    let listing = |query: &str| {
        Query::<HostsParams>::from_query(query)
            .ok()
            .map(|p| p.query().ok())
    };
    if let Some(asked) = listing(&query_of(target)) {
        assert_eq!(
            listing(&query_of(&marked)),
            Some(asked),
            "forwarding changed the listing"
        );
        if let Some(asked) = asked {
            let holders = asked.for_holders();
            let path = peer_listing_path(&holders);
            let read = listing(&query_of(&path))
                .flatten()
                .expect("a peer refuses its listing");
            let capped = trawl::frontier::listing::MAX_LIMIT;
            assert_eq!(
                read,
                trawl::frontier::listing::ListQuery {
                    limit: holders.limit.min(capped),
                    ..holders
                }
            );
        }
    }
    if Query::<QueueParams>::from_query(&query_of(target)).is_ok() {
        assert!(Query::<QueueParams>::from_query(&query_of(&marked)).is_ok());
    }
}

// ---------------------------------------------------------------- config

/// A configuration file: read over the defaults and validated; a valid
/// one prints as TOML that reads back and prints the same.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let layers = [("fuzz.toml".to_owned(), text.to_owned())];
    let Ok(config) = trawl::config::Config::from_layers(&layers) else {
        return;
    };
    if trawl::validate::domain(&config).is_err() {
        return;
    }
    let printed = config.to_toml();
    if printed.contains("redacted") {
        return; // redacted secrets do not read back as the originals
    }
    let again = trawl::config::Config::from_layers(&[("printed".to_owned(), printed.clone())])
        .unwrap_or_else(|e| panic!("the printed config does not read back: {e}\n{printed}"));
    assert_eq!(again.to_toml(), printed, "printing is a fixed point");
}

// ------------------------------------------------------------ crawl index

/// What a recurring crawl and a crawl report read from files others may
/// have written, and what is sniffed from a payload: byte 0 picks a
/// Content-Encoding for the sniff; the rest is read as CDXJ lines, as an
/// events file, as a payload and as page text.
pub fn crawl_index(data: &[u8]) {
    let Some((&coding, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    for line in text.lines() {
        let Some(capture) = trawl::warc::cdxj::Capture::parse(line) else {
            continue;
        };
        assert_eq!(capture.timestamp.len(), 14, "{line}");
        let _ = (capture.is_page(), capture.unix_ms(), capture.sha256());
        if let Some((digest, copy)) = capture.stored_copy() {
            assert_eq!(Some(digest), capture.sha256(), "{line}");
            assert_eq!(copy.uri, capture.url);
            assert!(copy.record_id.is_empty());
        }
    }
    let limits = trawl::report::ReportLimits {
        max_hosts: 4,
        max_seeds: 4,
    };
    let mut report = trawl::report::CrawlReport::new(limits);
    let lines = rest.split(|b| *b == b'\n').count() as u64;
    let skipped = report.fold_lines(rest).expect("reading from memory");
    assert!(skipped <= lines);
    assert!(report.totals.responses <= lines);
    assert!(report.hosts.len() <= 4 && report.seeds.len() <= 4);
    assert!(report.mime_types.len() <= trawl::report::MAX_MIME_TYPES + 1);
    let _ = report.to_string();
    let json = serde_json::to_vec(&report).expect("a report serialises");
    let back: trawl::report::CrawlReport = serde_json::from_slice(&json).expect("and reads back");
    assert_eq!(back.totals, report.totals);
    let encoding = ["", "gzip", "br", "deflate", "zstd", "gzip, br"][usize::from(coding) % 6];
    let encoding = (!encoding.is_empty()).then_some(encoding);
    let sniffed = trawl::parse::sniff::payload_type(rest, encoding);
    if encoding.is_none() {
        assert_eq!(sniffed.is_some(), !rest.is_empty());
        assert_eq!(sniffed, trawl::parse::sniff::decoded_type(rest));
    }
    if let Some(code) = trawl::parse::sniff::language(&text) {
        assert_eq!(code.len(), 3, "{code}");
    }
}

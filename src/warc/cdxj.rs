//! CDXJ indexes beside closed WARC files, in pywb's format.
//!
//! A replay tool (pywb, and anything reading its CDXJ) finds a capture by
//! its URL's SURT key and timestamp, then reads `length` bytes at `offset`
//! of `filename`. Indexing a finished file means reading it again; the
//! writer already knows every record's place, so it builds each line as it
//! writes the record and keeps it ([`IndexLines`]) and writes the sorted
//! index when it closes the file. Only crash recovery reads a file again
//! ([`parse_record`]), to index what it kept.
//!
//! A line is what `cdxj-indexer` (pywb's indexer) writes by default with
//! `--sort`, byte for byte: `SURT-key timestamp {json}` with `url`, `mime`,
//! `status`, `digest` (the record's `WARC-Payload-Digest` as written, so
//! `sha256:BASE32`), `length`, `offset`, `filename`, values as strings,
//! keys in that order, JSON spaced and ASCII-escaped as Python writes it;
//! plus, as Common Crawl's index lines have them, `mime-detected` (after
//! `mime`: a response record's `WARC-Identified-Payload-Type`, the type
//! sniffed from its payload) and `languages` (before `length`: the page's
//! language, ISO 639-3, when detected as it was written; not after crash
//! recovery, which has only the records). Readers of pywb's lines ignore
//! fields they do not know.
//! Response, revisit, resource and metadata records are indexed (not
//! requests, nor `application/warc-fields` resource or metadata records);
//! a revisit's `mime` is `warc/revisit`. Lines are sorted as whole lines,
//! which is by key, then timestamp (keys hold no spaces).

use std::cmp::Ordering;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::surt::surt;

/// A record's headers and block, borrowed: from a [`super::Record`] being
/// written, or from a record read back by recovery.
#[derive(Debug, Clone)]
pub struct RecordView<'a> {
    /// WARC headers, in order.
    pub headers: Vec<(&'a str, &'a str)>,
    /// The record block; from a [`super::Record`], its first part (which
    /// holds a response's HTTP head, all the index reads of a block).
    pub block: &'a [u8],
    /// The page's language (ISO 639-3), when the writer knows it: the
    /// line's `languages` (a record read back by recovery has none).
    pub languages: Option<&'a str>,
}

impl<'a> RecordView<'a> {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

impl<'a> From<&'a super::Record<'_>> for RecordView<'a> {
    fn from(record: &'a super::Record<'_>) -> Self {
        RecordView {
            headers: record
                .headers
                .iter()
                .map(|(n, v)| (*n, v.as_str()))
                .collect(),
            block: &record.block,
            languages: None,
        }
    }
}

/// The record types the default index holds.
const INDEXED: [&str; 4] = ["response", "revisit", "resource", "metadata"];

/// Bytes of index lines an open file keeps in memory before it sorts them
/// and spills them to disk as a run (see [`IndexLines`]).
pub const RUN_BYTES: usize = 4 << 20;

/// The index lines of one WARC file, until the file closes.
///
/// Every line of a file's index ends with the same field, the file's name,
/// so a line is kept without it (its stem) and in a boxed `str` of its
/// exact size: ~250 bytes a record, where whole lines in `String`s grown
/// while formatting took ~620.
///
/// Memory is bounded: once the stems held reach [`RUN_BYTES`], they are
/// sorted and written as a run to an unnamed temporary file beside the
/// WARC file (`O_TMPFILE`: a crash leaves nothing behind, and recovery
/// indexes the WARC file again anyway); closing merges the runs and what
/// is still in memory into the sorted index. Kept whole, a 1 GB WARC file
/// of 15 KB pages (~200,000 records) held ~50 MB of lines until it
/// closed, 20 MB of a 2,000-host crawl's heap at its peak. The merge is
/// written here rather than taken from an external-sort crate because
/// lines sort by an order that depends on the file's name (the common
/// end) and repeated lines are dropped as they merge; runs are few (one
/// per 4 MB of lines), so each line is chosen by a scan of the runs'
/// heads. A run that cannot be written (a full disk) leaves its lines in
/// memory: the index stays whole, and the WARC file's own writes report
/// the disk.
#[derive(Debug)]
pub struct IndexLines {
    stems: Vec<Box<str>>,
    /// Bytes the stems in memory take, their boxes included.
    held: usize,
    /// What ends every line: the file's name (see [`line_end`]).
    end: String,
    /// Where runs are spilled; `None` once a spill failed.
    spill_dir: Option<PathBuf>,
    /// The spilled runs, each sorted and without repeats.
    runs: Vec<File>,
    run_bytes: usize,
}

impl IndexLines {
    /// The lines of the WARC file named `file_name`, spilling runs in
    /// `spill_dir` (the WARC file's directory).
    pub fn new(file_name: &str, spill_dir: &Path) -> Self {
        Self::with_run_bytes(file_name, spill_dir, RUN_BYTES)
    }

    /// [`IndexLines::new`] that spills once `run_bytes` are held.
    fn with_run_bytes(file_name: &str, spill_dir: &Path, run_bytes: usize) -> Self {
        IndexLines {
            stems: Vec::new(),
            held: 0,
            end: line_end(file_name),
            spill_dir: Some(spill_dir.to_owned()),
            runs: Vec::new(),
            run_bytes,
        }
    }

    /// Adds the line of `record`, stored at `offset` with `length` bytes
    /// (nothing for a record the index leaves out).
    pub fn push(&mut self, record: &RecordView<'_>, offset: u64, length: u64) {
        let Some(stem) = line_stem(record, offset, length) else {
            return;
        };
        self.held += stem.len() + std::mem::size_of::<Box<str>>();
        self.stems.push(stem.into_boxed_str());
        if self.held >= self.run_bytes {
            self.spill();
        }
    }

    /// Runs spilled so far.
    #[cfg(test)]
    fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Sorts the stems in memory and writes them as a run.
    fn spill(&mut self) {
        let Some(dir) = self.spill_dir.clone() else {
            return;
        };
        self.sort_held();
        match write_run(&dir, &self.stems) {
            Ok(run) => {
                self.runs.push(run);
                self.stems.clear();
                self.held = 0;
            }
            Err(err) => {
                tracing::warn!(dir = %dir.display(), %err,
                    "cannot spill a WARC file's index lines; keeping them in memory");
                self.spill_dir = None;
            }
        }
    }

    fn sort_held(&mut self) {
        let end = &self.end;
        self.stems.sort_unstable_by(|a, b| cmp_with_end(a, b, end));
        self.stems.dedup();
    }

    /// Writes the sorted index of the WARC file at `warc` (the file named
    /// at [`IndexLines::new`]): into a temporary file, synced, then
    /// renamed, so a crash never leaves half an index under the final
    /// name.
    pub fn write(mut self, warc: &Path) -> io::Result<PathBuf> {
        self.sort_held();
        let path = index_path(warc);
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut out = io::BufWriter::new(File::create(&tmp)?);
        let end = self.end.clone();
        self.merge(|stem| {
            out.write_all(stem.as_bytes())?;
            out.write_all(end.as_bytes())?;
            out.write_all(b"\n")
        })?;
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// Calls `emit` with every stem, runs and memory merged, in order,
    /// each once.
    fn merge(self, mut emit: impl FnMut(&str) -> io::Result<()>) -> io::Result<()> {
        let mut sources: Vec<Source> = self.runs.into_iter().map(Source::run).collect();
        sources.push(Source::Memory(self.stems.into_iter()));
        let mut heads: Vec<Option<Box<str>>> = Vec::with_capacity(sources.len());
        for source in &mut sources {
            heads.push(source.next()?);
        }
        let mut last: Option<Box<str>> = None;
        loop {
            let mut least: Option<usize> = None;
            for (i, head) in heads.iter().enumerate() {
                let Some(head) = head else { continue };
                let smaller = least.is_none_or(|l| {
                    let l = heads[l].as_deref().expect("a chosen head is there");
                    cmp_with_end(head, l, &self.end) == Ordering::Less
                });
                if smaller {
                    least = Some(i);
                }
            }
            let Some(i) = least else {
                return Ok(());
            };
            let stem = std::mem::replace(&mut heads[i], sources[i].next()?);
            let stem = stem.expect("the least head is there");
            if last.as_deref() != Some(&*stem) {
                emit(&stem)?;
                last = Some(stem);
            }
        }
    }
}

/// Writes sorted `stems` to an unnamed temporary file in `dir`, each as
/// its length (u32, little-endian) and bytes (a stem read back from a
/// damaged file may hold any byte), and rewinds it for reading.
fn write_run(dir: &Path, stems: &[Box<str>]) -> io::Result<File> {
    let mut out = io::BufWriter::new(tempfile::tempfile_in(dir)?);
    for stem in stems {
        let len = u32::try_from(stem.len()).map_err(io::Error::other)?;
        out.write_all(&len.to_le_bytes())?;
        out.write_all(stem.as_bytes())?;
    }
    let mut file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(file)
}

/// One sorted sequence of stems being merged.
enum Source {
    Run(io::BufReader<File>),
    Memory(std::vec::IntoIter<Box<str>>),
}

impl Source {
    fn run(file: File) -> Source {
        Source::Run(io::BufReader::with_capacity(64 * 1024, file))
    }

    fn next(&mut self) -> io::Result<Option<Box<str>>> {
        match self {
            Source::Memory(stems) => Ok(stems.next()),
            Source::Run(reader) => {
                let mut len = [0u8; 4];
                match reader.read_exact(&mut len) {
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                    other => other?,
                }
                let mut bytes = vec![0u8; u32::from_le_bytes(len) as usize];
                reader.read_exact(&mut bytes)?;
                let stem = String::from_utf8(bytes).map_err(io::Error::other)?;
                Ok(Some(stem.into_boxed_str()))
            }
        }
    }
}

/// `a + end` against `b + end`, comparing the stems alone where they
/// differ before one of them ends (nearly always).
fn cmp_with_end(a: &str, b: &str, end: &str) -> Ordering {
    let n = a.len().min(b.len());
    match a.as_bytes()[..n].cmp(&b.as_bytes()[..n]) {
        Ordering::Equal => a
            .bytes()
            .chain(end.bytes())
            .cmp(b.bytes().chain(end.bytes())),
        unequal => unequal,
    }
}

/// What ends every line of the index of the file `file_name`.
fn line_end(file_name: &str) -> String {
    format!(", \"filename\": {}}}", py_json_string(file_name))
}

/// A record's line up to its `filename` field.
fn line_stem(record: &RecordView<'_>, offset: u64, length: u64) -> Option<String> {
    let kind = record.header("WARC-Type")?;
    if !INDEXED.contains(&kind) {
        return None;
    }
    let content_type = record.header("Content-Type");
    if matches!(kind, "resource" | "metadata") && content_type == Some("application/warc-fields") {
        return None;
    }
    let url = record.header("WARC-Target-URI").unwrap_or_default();
    let timestamp = timestamp(record.header("WARC-Date")?)?;
    let http = matches!(kind, "response" | "revisit")
        && !record.block.is_empty()
        && (url.starts_with("http:") || url.starts_with("https:"));
    let head = http.then(|| HttpHead::parse(record.block));
    let mime = match kind {
        "revisit" => Some("warc/revisit".to_owned()),
        "response" => head
            .as_ref()
            .and_then(|h| h.header("content-type"))
            .map(short_mime),
        _ => content_type.map(short_mime),
    };
    let status = head.as_ref().map(|h| h.status.clone());
    let mut fields: Vec<(&str, String)> = vec![("url", url.to_owned())];
    fields.extend(mime.map(|m| ("mime", m)));
    let detected = record
        .header("WARC-Identified-Payload-Type")
        .filter(|_| kind == "response");
    fields.extend(detected.map(|d| ("mime-detected", short_mime(d))));
    fields.extend(status.map(|s| ("status", s)));
    fields.extend(
        record
            .header("WARC-Payload-Digest")
            .map(|d| ("digest", d.to_owned())),
    );
    fields.extend(record.languages.map(|l| ("languages", l.to_owned())));
    fields.push(("length", length.to_string()));
    fields.push(("offset", offset.to_string()));
    let json: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {}", py_json_string(v)))
        .collect();
    Some(format!("{} {timestamp} {{{}", surt(url), json.join(", ")))
}

/// `20261130154354` from `2026-11-30T15:43:54.123456Z`: the first 14
/// digits (fractions are dropped, as pywb does).
fn timestamp(date: &str) -> Option<String> {
    let digits: String = date.chars().filter(char::is_ascii_digit).take(14).collect();
    (digits.len() == 14).then_some(digits)
}

/// A Content-Type's media type alone (`text/html` of
/// `text/html; charset=utf-8`).
fn short_mime(value: &str) -> String {
    value
        .split([';', ' ', '\t', '\n', '\r', '\x0b', '\x0c'])
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A JSON string as Python's `json.dumps` writes it: non-ASCII as
/// `\uXXXX` escapes.
fn py_json_string(value: &str) -> String {
    let json = serde_json::to_string(value).expect("a string serialises");
    if json.is_ascii() {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// The status code and headers of an HTTP response head, read as warcio
/// reads them.
#[derive(Debug, PartialEq, Eq)]
struct HttpHead {
    status: String,
    headers: Vec<(String, String)>,
}

impl HttpHead {
    fn parse(block: &[u8]) -> HttpHead {
        // Only the head is read: decoding the payload too cost ~2 % of a
        // crawl's CPU on the archive thread.
        Self::from_text(&String::from_utf8_lossy(head_of(block)))
    }

    /// Reads `text` up to its first line that is empty once trimmed.
    fn from_text(text: &str) -> HttpHead {
        let mut lines = text.split('\n').map(|l| l.trim_end());
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .split_once(' ')
            .map(|(_, rest)| rest.trim_start().split(' ').next().unwrap_or_default())
            .unwrap_or_default()
            .to_owned();
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in lines.take_while(|l| !l.is_empty()) {
            if line.starts_with([' ', '\t']) {
                if let Some((_, value)) = headers.last_mut() {
                    value.push_str(line);
                }
                continue;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((
                    name.trim_end_matches([' ', '\t']).to_owned(),
                    value.trim_start().to_owned(),
                ));
            }
        }
        HttpHead { status, headers }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One capture of a CDXJ index, read back from its line (ours, or any
/// pywb-style index: `SURT TIMESTAMP {json}`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capture {
    /// The SURT key.
    pub surt: String,
    /// The 14-digit timestamp (`20261130154354`).
    pub timestamp: String,
    /// The URL.
    pub url: String,
    /// `mime` (`warc/revisit` for a revisit).
    pub mime: Option<String>,
    /// `mime-detected`: the type sniffed from the payload.
    pub mime_detected: Option<String>,
    /// `status`, if the record has one.
    pub status: Option<u16>,
    /// `digest`, as written (`sha256:BASE32`).
    pub digest: Option<String>,
    /// `filename`, `offset` and `length`, if given.
    pub filename: Option<String>,
    /// Byte offset of the record in `filename`.
    pub offset: Option<u64>,
    /// Its length there.
    pub length: Option<u64>,
    /// `languages`: the page's language(s), ISO 639-3, comma-separated.
    pub languages: Option<String>,
}

impl Capture {
    /// The capture of a CDXJ line; `None` for a line that is not one (a
    /// comment, a torn line, a `url` missing).
    pub fn parse(line: &str) -> Option<Capture> {
        let (surt, rest) = line.split_once(' ')?;
        let (timestamp, json) = rest.split_once(' ')?;
        if timestamp.len() != 14 || !timestamp.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let fields: serde_json::Value = serde_json::from_str(json).ok()?;
        let text = |name: &str| fields.get(name)?.as_str().map(str::to_owned);
        let number = |name: &str| text(name)?.parse::<u64>().ok();
        Some(Capture {
            surt: surt.to_owned(),
            timestamp: timestamp.to_owned(),
            url: text("url")?,
            mime: text("mime"),
            mime_detected: text("mime-detected"),
            status: number("status").and_then(|s| u16::try_from(s).ok()),
            digest: text("digest"),
            filename: text("filename"),
            offset: number("offset"),
            length: number("length"),
            languages: text("languages"),
        })
    }

    /// Its time, as a WARC date (`2026-11-30T15:43:54Z`).
    pub fn warc_date(&self) -> Option<String> {
        let time = chrono::NaiveDateTime::parse_from_str(&self.timestamp, "%Y%m%d%H%M%S").ok()?;
        Some(time.and_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string())
    }

    /// Its time, Unix milliseconds.
    pub fn unix_ms(&self) -> Option<i64> {
        let time = chrono::NaiveDateTime::parse_from_str(&self.timestamp, "%Y%m%d%H%M%S").ok()?;
        Some(time.and_utc().timestamp_millis())
    }

    /// The payload's SHA-256, if its digest is one (`sha256:BASE32`, or
    /// hex); `None` for other algorithms.
    pub fn sha256(&self) -> Option<[u8; 32]> {
        let (algorithm, value) = self.digest.as_deref()?.split_once(':')?;
        if !algorithm.eq_ignore_ascii_case("sha256") {
            return None;
        }
        let bytes = data_encoding::BASE32
            .decode(value.as_bytes())
            .or_else(|_| data_encoding::HEXLOWER_PERMISSIVE.decode(value.as_bytes()))
            .ok()?;
        bytes.try_into().ok()
    }
}

/// The index file of the WARC file at `warc`: its name plus `.cdxj`.
pub fn index_path(warc: &Path) -> PathBuf {
    let mut name = warc.as_os_str().to_owned();
    name.push(".cdxj");
    PathBuf::from(name)
}

/// Reads one serialised record (`WARC/1.x`, headers, blank line, block),
/// as recovery decompresses it; `None` if it is not one.
pub fn parse_record(bytes: &[u8]) -> Option<RecordView<'_>> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut lines = head.split("\r\n");
    if !lines.next()?.starts_with("WARC/") {
        return None;
    }
    let headers: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim(), v.trim()))
        .collect();
    let view = RecordView {
        block: &[],
        headers,
        languages: None,
    };
    let length: usize = view.header("Content-Length")?.parse().ok()?;
    // A torn or corrupt record may claim any length: no overflow.
    let block = bytes.get(end + 4..(end + 4).checked_add(length)?)?;
    Some(RecordView { block, ..view })
}

/// `block` up to and including the newline before its first blank line
/// (`\n\n` or `\n\r\n`), or all of it: everything [`HttpHead::parse`]
/// reads, which stops at the first line that is empty once trimmed.
fn head_of(block: &[u8]) -> &[u8] {
    let mut from = 0;
    while let Some(p) = block[from..].iter().position(|&b| b == b'\n') {
        let next = from + p + 1;
        if let Some([b'\n', ..] | [b'\r', b'\n', ..]) = block.get(next..) {
            return &block[..next];
        }
        from = next;
    }
    block
}

#[cfg(test)]
mod tests {
    use super::super::WarcRef;
    use super::*;

    /// Found with the `warc_record` fuzz target (built with overflow
    /// checks): a Content-Length near `usize::MAX` overflowed the block's
    /// end (a panic with overflow checks, a wrapped range without). The
    /// release profile these tests run in has no overflow checks, so the
    /// guard against its return is the input kept in
    /// `fuzz/corpus/warc_record/`, which the fuzz smoke runs with them.
    #[test]
    fn a_record_claiming_more_than_memory_is_none() {
        let record = b"WARC/1.1\r\nContent-Length: 18446744073709551615\r\n\r\nabc";
        assert!(parse_record(record).is_none());
        let record = b"WARC/1.1\r\nContent-Length: 4\r\n\r\nabc";
        assert!(parse_record(record).is_none(), "a torn block");
        let record = b"WARC/1.1\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(parse_record(record).unwrap().block, b"abc");
    }

    /// The whole CDXJ line of a record stored at `at`, or `None` for a
    /// record the index leaves out.
    fn index_line(record: &RecordView<'_>, at: &WarcRef) -> Option<String> {
        line_stem(record, at.offset, at.length).map(|stem| stem + &line_end(&at.file))
    }

    fn at() -> WarcRef {
        WarcRef {
            file: "t.warc.gz".into(),
            offset: 10,
            length: 20,
        }
    }

    #[test]
    fn a_response_line_has_pywb_fields_in_order() {
        let record = RecordView {
            headers: vec![
                ("WARC-Type", "response"),
                ("WARC-Date", "2026-11-30T15:43:54.999999Z"),
                ("WARC-Target-URI", "http://www.a.test:8080/P?b=1&a=2"),
                ("WARC-Payload-Digest", "sha256:ABC"),
            ],
            block: b"HTTP/1.1 404 Not Found\r\ncontent-type: Text/HTML; charset=utf-8\r\n\r\nx",
            languages: None,
        };
        assert_eq!(
            index_line(&record, &at()).unwrap(),
            "test,a:8080)/p?a=2&b=1 20261130154354 {\"url\": \
             \"http://www.a.test:8080/P?b=1&a=2\", \"mime\": \"Text/HTML\", \
             \"status\": \"404\", \"digest\": \"sha256:ABC\", \"length\": \"20\", \
             \"offset\": \"10\", \"filename\": \"t.warc.gz\"}"
        );
    }

    #[test]
    fn the_detected_type_and_the_language_are_common_crawls_fields() {
        let record = RecordView {
            headers: vec![
                ("WARC-Type", "response"),
                ("WARC-Date", "2026-11-30T15:43:54Z"),
                ("WARC-Target-URI", "http://a.test/"),
                ("WARC-Identified-Payload-Type", "text/html"),
            ],
            block: b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n",
            languages: Some("eng"),
        };
        let line = index_line(&record, &at()).unwrap();
        assert!(
            line.contains("\"mime\": \"text/plain\", \"mime-detected\": \"text/html\", \"status\": \"200\", \"languages\": \"eng\", \"length\""),
            "{line}"
        );
        let capture = Capture::parse(&line).unwrap();
        assert_eq!(capture.mime_detected.as_deref(), Some("text/html"));
        assert_eq!(capture.languages.as_deref(), Some("eng"));
    }

    #[test]
    fn revisits_say_so_and_requests_are_left_out() {
        let mut record = RecordView {
            headers: vec![
                ("WARC-Type", "revisit"),
                ("WARC-Date", "2026-11-30T15:43:54Z"),
                ("WARC-Target-URI", "http://a.test/"),
            ],
            block: b"HTTP/1.1 304 Not Modified\r\n\r\n",
            languages: None,
        };
        let line = index_line(&record, &at()).unwrap();
        assert!(
            line.contains("\"mime\": \"warc/revisit\", \"status\": \"304\""),
            "{line}"
        );
        record.headers[0].1 = "request";
        assert_eq!(index_line(&record, &at()), None);
        record.headers[0].1 = "warcinfo";
        assert_eq!(index_line(&record, &at()), None);
    }

    #[test]
    fn non_ascii_is_escaped_as_python_does() {
        assert_eq!(
            py_json_string("é😀\"\n"),
            "\"\\u00e9\\ud83d\\ude00\\\"\\n\""
        );
    }

    #[test]
    fn records_read_back_and_the_index_is_sorted() {
        let bytes = b"WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 3\r\n\r\nabc\r\n\r\n";
        let view = parse_record(bytes).unwrap();
        assert_eq!(view.block, b"abc");
        assert_eq!(view.header("warc-type"), Some("response"));
        assert!(parse_record(b"WARC/1.1\r\nContent-Length: 9\r\n\r\nabc").is_none());
        let dir = tempfile::tempdir().unwrap();
        let warc = dir.path().join("a.warc.gz");
        let mut lines = IndexLines::new("a.warc.gz", dir.path());
        let response = |url: &str, date: &str| {
            format!(
                "WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: {url}\r\n\
                 WARC-Date: {date}\r\nContent-Length: 0\r\n\r\n\r\n\r\n"
            )
        };
        let b = response("http://b.test/", "2026-11-30T10:00:00Z");
        let a = response("http://a.test/", "2026-11-30T11:00:00Z");
        let a_again = response("http://a.test/", "2026-11-30T09:00:00Z");
        for (record, offset) in [(&b, 0), (&a, 100), (&a_again, 200), (&a, 100)] {
            lines.push(&parse_record(record.as_bytes()).unwrap(), offset, 50);
        }
        let path = lines.write(&warc).unwrap();
        assert_eq!(path, dir.path().join("a.warc.gz.cdxj"));
        let end = r#", "filename": "a.warc.gz"}"#;
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!(
                "test,a)/ 20261130090000 {{\"url\": \"http://a.test/\", \"length\": \"50\", \"offset\": \"200\"{end}\n\
                 test,a)/ 20261130110000 {{\"url\": \"http://a.test/\", \"length\": \"50\", \"offset\": \"100\"{end}\n\
                 test,b)/ 20261130100000 {{\"url\": \"http://b.test/\", \"length\": \"50\", \"offset\": \"0\"{end}\n"
            ),
            "sorted by key then time, the repeated line once"
        );
    }

    /// An index spilled as many runs is the index kept whole: every line
    /// once, sorted as whole lines (the oracle sorts full lines as
    /// strings), with repeats that fall in different runs, keys that are
    /// prefixes of others and non-ASCII paths.
    #[test]
    fn an_index_spilled_in_runs_is_the_index_sorted_whole() {
        let dir = tempfile::tempdir().unwrap();
        let warc = dir.path().join("b.warc.gz");
        let mut lines = IndexLines::with_run_bytes("b.warc.gz", dir.path(), 600);
        let mut expected = Vec::new();
        let mut state = 7u64;
        for n in 0..400u64 {
            // A small LCG: a shuffled order that repeats itself.
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (state >> 33) % 150;
            let url = match pick % 3 {
                0 => format!("http://h{}.test/p", pick),
                1 => format!("http://h{}.test/p?q={}", pick / 3, pick),
                _ => format!("http://h{}.test/é{}", pick % 7, pick),
            };
            let record = RecordView {
                headers: vec![
                    ("WARC-Type", "response"),
                    ("WARC-Date", "2026-11-30T10:00:00Z"),
                    ("WARC-Target-URI", &url),
                ],
                block: b"",
                languages: None,
            };
            let (offset, length) = (pick * 10, 5 + n % 2);
            lines.push(&record, offset, length);
            expected.push(line_stem(&record, offset, length).unwrap() + &line_end("b.warc.gz"));
        }
        assert!(lines.runs() > 10, "spilled {} runs", lines.runs());
        expected.sort();
        expected.dedup();
        assert!(expected.len() < 400, "the input repeats lines");
        let path = lines.write(&warc).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        let written: Vec<&str> = written.lines().collect();
        assert_eq!(written, expected);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["b.warc.gz.cdxj"], "runs leave no file behind");
    }

    #[test]
    fn an_http_head_is_read_the_same_from_the_head_alone() {
        let blocks: [&[u8]; 6] = [
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>\n\nbody\xff</p>",
            b"HTTP/1.1 301 Moved\nLocation: /x\n folded\n\nrest",
            b"HTTP/1.1 200 OK\r\nX: 1\r\n  \r\nY: 2\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\nA: b",
            b"",
            b"\n\nHTTP/1.1 200",
        ];
        for block in blocks {
            let whole = HttpHead::from_text(&String::from_utf8_lossy(block));
            assert_eq!(
                HttpHead::parse(block),
                whole,
                "{:?}",
                String::from_utf8_lossy(block)
            );
        }
        let page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>";
        assert_eq!(head_of(page).len(), page.len() - "\r\n<html>".len());
    }
}

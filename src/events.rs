//! Output events: one JSON line per stored response (and one per WARC
//! file uploaded to object storage: `kind` `uploaded`).
//!
//! Consumers (indexers, corpus builders) tail this file instead of parsing
//! WARCs: each event says what was fetched, when, with what result, and
//! where its record is (`warc_ref`). The file is append-only; a line torn by
//! a crash is cut off at the next start, and the response it described is
//! fetched again because its URL was never completed.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::durable::Writeback;
use crate::warc::WarcRef;

/// One stored response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The URL fetched.
    pub url: String,
    /// The page's `rel=canonical` target, when it names one.
    pub canonical_url: Option<String>,
    /// RFC 3339 time the request started.
    pub fetched_at: String,
    /// HTTP status (for `removed`, of the URL's last response; 0 if it
    /// had none).
    pub status: u16,
    /// Content-Type header, if any.
    pub content_type: Option<String>,
    /// Where the response (or revisit) record is; absent from `removed`
    /// events, which record no response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warc_ref: Option<WarcRef>,
    /// Hex SHA-256 of the payload (of a 304, the payload it confirmed);
    /// absent from `removed` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
    /// 64-bit simhash (hex) of the visible text of an HTML page; null for
    /// other responses and pages of fewer than ten words.
    pub simhash: Option<String>,
    /// URL of the earlier response this one repeats (identical payload: its
    /// record is a revisit) or resembles (near-duplicate), if any.
    pub duplicate_of: Option<String>,
    /// Robots directives from the meta tag and the `X-Robots-Tag` header
    /// (`noindex`, `nofollow`, ...), comma-joined.
    pub robots_meta: Option<String>,
    /// Distinct links found on the page (kept under the per-page cap).
    pub links_out: usize,
    /// Distinct links dropped over `[parse] max_links_per_page`; absent
    /// when none was.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub links_dropped: usize,
    /// `page`, `robots` (robots.txt) or `sitemap`.
    pub kind: EventKind,
    /// Hops from the seed.
    pub depth: u32,
    /// The estimated importance the URL was queued with (its OPIC cash,
    /// `src/frontier/importance.rs`): a seed has 1; absent under `[frontier]
    /// ordering = "fifo"` and from events of refreshes, robots.txt,
    /// removals and uploads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// On a refetch, whether the content changed since the last fetch
    /// (a 304 or an identical or near-identical payload: `false`); null on
    /// a URL's first fetch.
    #[serde(default)]
    pub changed: Option<bool>,
    /// Why a URL was `removed`: `gone` (404/410 twice in a row),
    /// `disallowed` (robots.txt now disallows it), `moved` (301/308);
    /// absent from other events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `uploaded` events: the WARC file uploaded (its object's URL is
    /// `url`, the file's SHA-256 `content_sha256`); absent from others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The URL whose fetch found this one (a page's link, a redirect, a
    /// sitemap or robots.txt listing it); absent for seeds and from
    /// robots.txt, removal and upload events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// How it was reached last: `seed`, `link`, `redirect` or `sitemap`
    /// (page and sitemap events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<String>,
    /// Its hop path from the seed, one letter a hop (`L` link, `R`
    /// redirect, `M` sitemap; empty for a seed), as Heritrix writes it
    /// (`src/frontier/provenance.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<String>,
    /// Milliseconds from the request's start to its last body byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_ms: Option<u64>,
    /// The address fetched from (also the record's `WARC-IP-Address`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Payload bytes received (of a truncated response, those kept);
    /// absent from `removed` and `uploaded` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The payload's type as sniffed from its bytes (the record's
    /// `WARC-Identified-Payload-Type`), when it could be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_detected: Option<String>,
    /// A page's language (ISO 639-3), when detected from its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// Serde's test for a count left out of an event when it is 0.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What kind of fetch an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// A URL of the crawl.
    Page,
    /// A robots.txt fetch.
    Robots,
    /// A sitemap fetch.
    Sitemap,
    /// A URL left the crawl (see `reason`); no record.
    Removed,
    /// A closed WARC file (`file`) is in object storage at `url`.
    Uploaded,
}

/// Appends events to a JSON-lines file.
pub struct EventWriter {
    path: PathBuf,
    out: BufWriter<File>,
    written: u64,
    /// A second handle on the file, for syncing it from another thread.
    sync_handle: Option<std::sync::Arc<File>>,
    /// One event's line, reused: its length is what the file grows by.
    line: Vec<u8>,
    /// The file's length, buffered bytes included.
    len: u64,
    /// Its bytes' writing is started as it grows, so the sync at close
    /// waits for the last MiB, not for the run's events (see [`Writeback`]).
    writeback: Writeback,
}

impl EventWriter {
    /// Opens `path` for appending, cutting a torn last line.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)?;
        cut_torn_line(&mut file)?;
        let len = file.metadata()?.len();
        Ok(EventWriter {
            path: path.to_owned(),
            out: BufWriter::with_capacity(64 * 1024, file),
            written: 0,
            sync_handle: None,
            line: Vec::with_capacity(1024),
            len,
            writeback: Writeback::from_offset(len),
        })
    }

    /// Appends one event.
    pub fn append(&mut self, event: &Event) -> std::io::Result<()> {
        self.append_after(event, || Ok(()))
    }

    /// Appends one event, calling `before` first if the line is about to
    /// reach the OS (it does not fit the buffer): the archive flushes the
    /// WARC records the line points at there, so that no line is in the
    /// file before its records are.
    pub fn append_after(
        &mut self,
        event: &Event,
        before: impl FnOnce() -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, event)?;
        self.line.push(b'\n');
        if self.out.buffer().len() + self.line.len() > self.out.capacity() {
            before()?;
        }
        self.out.write_all(&self.line)?;
        self.len += self.line.len() as u64;
        self.written += 1;
        let handed_over = self.len - self.out.buffer().len() as u64;
        self.writeback.advance(self.out.get_ref(), handed_over);
        Ok(())
    }

    /// Pushes buffered lines to the OS.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// Flushes and fsyncs.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }

    /// A handle on the file, for syncing what was flushed from another
    /// thread while this writer appends ([`crate::durable`]).
    pub fn sync_handle(&mut self) -> std::io::Result<std::sync::Arc<File>> {
        if let Some(handle) = &self.sync_handle {
            return Ok(handle.clone());
        }
        let handle = std::sync::Arc::new(self.out.get_ref().try_clone()?);
        self.sync_handle = Some(handle.clone());
        Ok(handle)
    }

    /// Events appended by this writer.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Truncates `file` after its last newline.
pub(crate) fn cut_torn_line(file: &mut File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    // Scan back in blocks for the last newline; events are short.
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(pos) = chunk.iter().rposition(|&b| b == b'\n') {
            let keep = start + pos as u64 + 1;
            if keep != len {
                file.set_len(keep)?;
            }
            return Ok(());
        }
        end = start;
    }
    file.set_len(0)
}

/// Reads every event of a file (tests and the demo's summary).
pub fn read_all(path: &Path) -> std::io::Result<Vec<Event>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .map(|line| serde_json::from_str(line).map_err(std::io::Error::other))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(url: &str) -> Event {
        Event {
            url: url.into(),
            canonical_url: None,
            fetched_at: "2026-11-30T00:00:00Z".into(),
            status: 200,
            content_type: Some("text/html".into()),
            warc_ref: Some(WarcRef {
                file: "f.warc.gz".into(),
                offset: 1,
                length: 2,
            }),
            content_sha256: Some("00".into()),
            simhash: None,
            duplicate_of: None,
            robots_meta: None,
            links_out: 3,
            links_dropped: 0,
            kind: EventKind::Page,
            depth: 0,
            score: None,
            changed: None,
            reason: None,
            file: None,
            via: None,
            hop: None,
            hops: None,
            fetch_ms: None,
            ip: None,
            bytes: None,
            mime_detected: None,
            language: None,
        }
    }

    #[test]
    fn the_hook_runs_just_before_a_line_would_reach_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut w = EventWriter::open(&path).unwrap();
        let mut hooks = 0;
        let mut lines = 0;
        while hooks == 0 {
            let on_disk = std::fs::metadata(&path).unwrap().len();
            w.append_after(&event("http://127.0.0.1/a-fairly-long-path/"), || {
                // Before the buffer goes out: the file is still empty.
                assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
                hooks += 1;
                Ok(())
            })
            .unwrap();
            lines += 1;
            if hooks == 0 {
                assert_eq!(on_disk, 0, "a line reached the file without the hook");
            }
        }
        assert!(lines > 10, "the buffer holds many lines");
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
    }

    #[test]
    fn appends_and_cuts_a_torn_line_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut w = EventWriter::open(&path).unwrap();
        w.append(&event("http://a.test/1")).unwrap();
        w.append(&event("http://a.test/2")).unwrap();
        w.flush().unwrap();
        drop(w);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"url\":\"http://a.te").unwrap();
        drop(f);
        let mut w = EventWriter::open(&path).unwrap();
        w.append(&event("http://a.test/3")).unwrap();
        w.flush().unwrap();
        let urls: Vec<_> = read_all(&path)
            .unwrap()
            .into_iter()
            .map(|e| e.url)
            .collect();
        assert_eq!(
            urls,
            ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
        );
        let line = std::fs::read_to_string(&path).unwrap();
        assert!(line.contains("\"kind\":\"page\""));
        assert!(line.contains("\"simhash\":null"));
        assert!(line.contains("\"changed\":null"));
        assert!(!line.contains("reason"), "only removals have a reason");
    }

    /// The writeback only ever starts on bytes already in the file (not
    /// those still buffered), from where the file stood when opened.
    #[test]
    fn writeback_follows_what_reached_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut w = EventWriter::open(&path).unwrap();
        w.append(&event("http://a.test/first")).unwrap();
        w.flush().unwrap();
        drop(w);
        let before = std::fs::metadata(&path).unwrap().len();
        let mut w = EventWriter::open(&path).unwrap();
        assert_eq!(w.writeback.started_to(), before);
        let mut n = 0;
        while w.writeback.started_to() == before {
            w.append(&event(&format!("http://a.test/{n}"))).unwrap();
            n += 1;
            assert!(n < 100_000, "writeback never started");
        }
        let on_disk = std::fs::metadata(&path).unwrap().len();
        assert_eq!(w.writeback.started_to(), on_disk);
        assert!(on_disk >= before + Writeback::EVERY_BYTES);
        w.flush().unwrap();
        assert_eq!(read_all(&path).unwrap().len(), n + 1);
    }

    #[test]
    fn links_dropped_is_written_only_when_some_were() {
        let quiet = serde_json::to_value(event("http://a.test/")).unwrap();
        assert!(quiet.get("links_dropped").is_none(), "{quiet}");
        let capped = Event {
            links_dropped: 7,
            ..event("http://a.test/")
        };
        let json = serde_json::to_value(&capped).unwrap();
        assert_eq!(json["links_dropped"], 7);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back.links_dropped, 7);
    }

    #[test]
    fn the_score_is_written_when_known() {
        let unknown = serde_json::to_value(event("http://a.test/")).unwrap();
        assert!(unknown.get("score").is_none(), "{unknown}");
        let scored = Event {
            score: Some(0.25),
            ..event("http://a.test/")
        };
        let json = serde_json::to_value(&scored).unwrap();
        assert_eq!(json["score"], 0.25);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back.score, Some(0.25));
    }
}

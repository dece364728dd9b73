//! The archive transaction: one fetched response becomes WARC records, an
//! output event and an entry in the dedup index, in that order.
//!
//! [`Archiver::store`] decides and writes:
//! 1. the dedup verdict ([`DedupIndex::judge`]): only a page's whole,
//!    non-empty 2xx is a candidate; a payload archived before becomes a
//!    WARC `revisit` record pointing at the first copy, a near-duplicate
//!    page is flagged (or, with `skip-archive`, neither archived nor given
//!    an event);
//! 2. the records (response plus request) and their bytes flushed to the
//!    OS, then the event that points at them, flushed too, so an
//!    acknowledged response survives a crash of the process;
//! 3. only then the index update: a stored original becomes what later
//!    identical payloads (and similar pages) are compared with; a
//!    near-duplicate never does, so similarity does not drift.
//!
//! The Archive actor (`actors/archive.rs`) runs this on its own thread
//! (gzip and file writes are blocking work) and does nothing else.

use std::sync::Arc;

use url::Url;

use crate::config::DedupConfig;
use crate::dedup::{DedupIndex, NearAction, Original, Verdict};
use crate::error::Failure;
use crate::events::{Event, EventKind, EventWriter};
use crate::fetch::FetchResponse;
use crate::metrics::Metrics;
use crate::warc::{Exchange, Stored, WarcRef, WarcWriter};

/// One response to archive, with what parsing found in it.
#[derive(Debug)]
pub struct ArchiveRequest {
    /// The URL fetched.
    pub url: Url,
    /// The response (shared: the host keeps it until the page is done, to
    /// run a failed step again without fetching again).
    pub response: Arc<FetchResponse>,
    /// Page, robots.txt or sitemap.
    pub kind: EventKind,
    /// Hops from the seed.
    pub depth: u32,
    /// `rel=canonical`, if the page has one.
    pub canonical: Option<Url>,
    /// Meta robots directives.
    pub robots_meta: Option<String>,
    /// Links found.
    pub links_out: usize,
    /// Simhash of the page's visible text, if it is an HTML page.
    pub simhash: Option<u64>,
}

impl ArchiveRequest {
    /// A response archived as it is (no parse results): robots.txt,
    /// redirects, errors.
    pub fn side(url: Url, response: Arc<FetchResponse>, kind: EventKind) -> Self {
        ArchiveRequest {
            url,
            response,
            kind,
            depth: 0,
            canonical: None,
            robots_meta: None,
            links_out: 0,
            simhash: None,
        }
    }

    /// Whether dedup looks at it: a page's 2xx with a whole, non-empty
    /// body.
    pub fn is_dedup_candidate(&self) -> bool {
        self.kind == EventKind::Page
            && (200..300).contains(&self.response.status)
            && !self.response.body.is_empty()
            && !self.response.truncated
    }
}

/// Counters of what the archive wrote this run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArchiveCounts {
    /// Records written this run.
    pub records: u64,
    /// Compressed bytes written this run.
    pub bytes: u64,
    /// Events written this run.
    pub events: u64,
    /// WARC files closed this run.
    pub files_closed: usize,
}

/// The archive's writers and index.
pub struct Archiver {
    warc: WarcWriter,
    events: EventWriter,
    /// `None` once closed: its RocksDB must be gone before the process
    /// exits, or exit races the C++ teardown of its background threads.
    dedup: Option<DedupIndex>,
    settings: DedupConfig,
    metrics: Arc<Metrics>,
}

impl Archiver {
    /// An archiver over opened writers.
    pub fn new(
        warc: WarcWriter,
        events: EventWriter,
        dedup: DedupIndex,
        settings: DedupConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        Archiver {
            warc,
            events,
            dedup: Some(dedup),
            settings,
            metrics,
        }
    }

    /// The dedup index, unless the archive is closed.
    fn index(&mut self) -> Result<&mut DedupIndex, Failure> {
        self.dedup
            .as_mut()
            .ok_or_else(|| Failure::Archive("the archive is closed".into()))
    }

    /// Dedup's decision for a request (only candidates are judged).
    fn verdict(&mut self, req: &ArchiveRequest, sha256: &[u8; 32]) -> Result<Verdict, Failure> {
        if !req.is_dedup_candidate() {
            return Ok(Verdict::New);
        }
        let settings = self.settings.clone();
        self.index()?
            .judge(sha256, req.simhash, &settings)
            .map_err(|e| Failure::Archive(e.to_string()))
    }

    fn count(&self, kind: &str) {
        self.metrics.duplicates.with_label_values(&[kind]).inc();
    }

    /// Archives `req`: where its response record is, or `None` when dedup
    /// chose not to store it.
    pub fn store(&mut self, req: ArchiveRequest) -> Result<Option<WarcRef>, Failure> {
        let fail = |e: &dyn std::fmt::Display| Failure::Archive(e.to_string());
        let resp = &req.response;
        let date = chrono::DateTime::<chrono::Utc>::from(resp.started_at);
        let exchange = Exchange {
            target_uri: req.url.as_str(),
            date,
            ip: resp.ip,
            request_head: &resp.request_head,
            response_head: &resp.head,
            payload: &resp.body,
            truncated: resp.truncated.then_some("length"),
        };
        let sha256 = crate::warc::payload_sha256(&resp.body);
        let verdict = self.verdict(&req, &sha256)?;
        let records_before = self.warc.bytes();
        // `in_full`: the payload is in this record, so later identical
        // payloads can point at it; `index_simhash`: later pages are
        // compared with this one.
        let (stored, duplicate_of, in_full, index_simhash) = match verdict {
            Verdict::Skip => {
                self.count("near_skipped");
                return Ok(None);
            }
            Verdict::Exact(original) => {
                self.count("exact");
                let stored = self
                    .warc
                    .write_revisit(&exchange, sha256, &original)
                    .map_err(|e| fail(&e))?;
                (stored, Some(original.uri), false, false)
            }
            Verdict::Near(url) => {
                self.count("near_flagged");
                let stored = self
                    .warc
                    .write_digested(&exchange, sha256)
                    .map_err(|e| fail(&e))?;
                (stored, Some(url), true, false)
            }
            Verdict::New => {
                let stored = self
                    .warc
                    .write_digested(&exchange, sha256)
                    .map_err(|e| fail(&e))?;
                (stored, None, true, true)
            }
        };
        // A response stored in full is the original of later identical
        // payloads, flagged near-duplicates included.
        let original = (in_full && req.is_dedup_candidate()).then(|| Original {
            uri: req.url.to_string(),
            date: crate::warc::warc_date(date),
            record_id: stored.record_id.clone(),
        });
        let Stored { at, .. } = stored;
        self.metrics.warc_records.inc_by(2);
        self.metrics
            .warc_bytes
            .inc_by(self.warc.bytes() - records_before);
        let event = Event {
            url: req.url.to_string(),
            canonical_url: req.canonical.map(String::from),
            fetched_at: date.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            status: resp.status,
            content_type: resp.header("content-type").map(str::to_owned),
            warc_ref: at.clone(),
            content_sha256: data_encoding::HEXLOWER.encode(&sha256),
            simhash: req.simhash.map(|h| format!("{h:016x}")),
            duplicate_of,
            robots_meta: req.robots_meta,
            links_out: req.links_out,
            kind: req.kind,
            depth: req.depth,
        };
        // The WARC bytes reach the OS before the event that points at them.
        self.warc.flush().map_err(|e| fail(&e))?;
        self.events.append(&event).map_err(|e| fail(&e))?;
        self.events.flush().map_err(|e| fail(&e))?;
        // Only a stored original enters the index, after its records.
        if let Some(original) = &original {
            let near = req
                .simhash
                .filter(|_| index_simhash && self.settings.near_duplicates != NearAction::Off);
            self.index()?
                .remember(&sha256, Some(original), near, &original.uri)
                .map_err(|e| fail(&e))?;
        }
        Ok(Some(at))
    }

    /// Closes the WARC file, syncs the events file and closes the index.
    pub fn close(&mut self) -> Result<ArchiveCounts, Failure> {
        self.warc
            .close()
            .map_err(|e| Failure::Archive(e.to_string()))?;
        self.events
            .sync()
            .map_err(|e| Failure::Archive(e.to_string()))?;
        drop(self.dedup.take());
        Ok(self.counts())
    }

    /// What was written this run.
    pub fn counts(&self) -> ArchiveCounts {
        ArchiveCounts {
            records: self.warc.records(),
            bytes: self.warc.bytes(),
            events: self.events.written(),
            files_closed: self.warc.closed_files().len(),
        }
    }
}

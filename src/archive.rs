//! The archive transaction: one fetched response becomes WARC records, an
//! output event and an entry in the dedup index, in that order.
//!
//! [`Archiver::store`] decides and writes:
//! 1. the dedup verdict ([`DedupIndex::judge`]): only a page's whole,
//!    non-empty 2xx is a candidate; a payload archived before (the copy its
//!    digest's partition named, asked by the host before archiving:
//!    [`crate::dedup::exact`]) becomes a WARC `revisit` record pointing at
//!    the first copy, a near-duplicate page is flagged (or, with
//!    `skip-archive`, neither archived nor given an event);
//! 2. the records (response plus request), then the event that points at
//!    them, written to buffers; the reply carries a [`Ticket`] that
//!    settles once both are handed to the OS ([`Archiver::hand_over`], when
//!    no page waits in the actor's mailbox ahead of the flush it queued),
//!    so a completed page's records survive a crash of the process; with
//!    `[storage] sync_writes`, once a group fsync ([`crate::durable`]) made
//!    them durable, so they survive a power loss too. The page is
//!    completed only then;
//! 3. only then the index update: a stored original's simhash becomes
//!    what later similar pages are compared with (a near-duplicate's never
//!    does, so similarity does not drift), and the reply names it as a
//!    new original, for the host to register at its digest's partition.
//!
//! On a refetch it also judges whether the content changed since the copy
//! on record ([`lifecycle::judge_change`]), says so in the event, and
//! answers it with the payload's digest and where the payload now is, for
//! the URL's record. A 304 confirming the copy on record becomes a
//! `server-not-modified` revisit pointing at that copy. A URL leaving the
//! crawl gets a `removed` event ([`Archiver::removed`]).
//!
//! The Archive actor (`actors/archive.rs`) runs this on its own thread
//! (gzip and file writes are blocking work) and does nothing else.

use std::sync::Arc;

use url::Url;

use crate::config::DedupConfig;
use crate::dedup::{DedupIndex, NearAction, Verdict};
use crate::durable::{GroupCommit, SyncHandle, Ticket, Tickets};
use crate::error::Failure;
use crate::events::{Event, EventKind, EventWriter};
use crate::fetch::FetchResponse;
use crate::frontier::host::Removed;
use crate::frontier::lifecycle;
use crate::frontier::provenance::Provenance;
use crate::metrics::Metrics;
use crate::store::{StoredCopy, Visit};
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
    /// The cash the URL was queued with, if it was a new queue entry.
    pub score: Option<f32>,
    /// `rel=canonical`, if the page has one.
    pub canonical: Option<Url>,
    /// Meta robots directives.
    pub robots_meta: Option<String>,
    /// Links found.
    pub links_out: usize,
    /// Links dropped over the per-page cap.
    pub links_dropped: usize,
    /// Simhash of the page's visible text, if it is an HTML page.
    pub simhash: Option<u64>,
    /// The URL's last visit on record (a refresh), to judge change against.
    pub previous: Option<Visit>,
    /// A 304 confirming `previous`'s copy: archived as a
    /// `server-not-modified` revisit of it.
    pub not_modified: bool,
    /// The payload's SHA-256, if computed already (by the parser).
    pub digest: Option<[u8; 32]>,
    /// Where the payload is stored in full, as its digest's partition
    /// answered (a dedup candidate's, asked before archiving).
    pub stored: Option<StoredCopy>,
    /// Where the URL was found (`frontier/provenance.rs`).
    pub provenance: Provenance,
    /// The links found on the page, for its metadata record.
    pub outlinks: Vec<String>,
    /// The page's language (ISO 639-3), if the parser detected it.
    pub language: Option<&'static str>,
    /// The payload's type by its bytes, if the parser sniffed it (else
    /// the archive does).
    pub mime_detected: Option<&'static str>,
}

/// What archiving a response produced, for the URL's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    /// Where its record is, unless dedup chose not to store it.
    pub at: Option<WarcRef>,
    /// The payload's SHA-256 (of a 304: the confirmed copy's).
    pub digest: [u8; 32],
    /// Where this payload is stored in full, if it is.
    pub copy: Option<StoredCopy>,
    /// Whether the content changed since `previous` (`None` on a first
    /// fetch).
    pub changed: Option<bool>,
    /// Set when this response was stored in full as the first copy of its
    /// payload: the copy to register at the digest's partition.
    pub original: Option<StoredCopy>,
    /// Settles once its records and event are in the OS (with
    /// `sync_writes`: on disk). Nothing that vouches for them (the page's
    /// completion, the registration of its copy) is written before.
    /// `None` when nothing was written.
    pub durable: Option<Ticket>,
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
            score: None,
            canonical: None,
            robots_meta: None,
            links_out: 0,
            links_dropped: 0,
            simhash: None,
            previous: None,
            not_modified: false,
            digest: None,
            stored: None,
            provenance: Provenance::seed(),
            outlinks: Vec::new(),
            language: None,
            mime_detected: None,
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

/// The block of a `dns:` record (see [`Archiver::dns`]).
fn dns_block(resolved: &crate::fetch::Resolved, at: chrono::DateTime<chrono::Utc>) -> String {
    let ttl = resolved.ttl.map_or(0, |t| t.as_secs());
    let mut block = at.format("%Y%m%d%H%M%S\n").to_string();
    for ip in &resolved.addresses {
        let kind = if ip.is_ipv4() { "A" } else { "AAAA" };
        block.push_str(&format!("{}.\t{ttl}\tIN\t{kind}\t{ip}\n", resolved.host));
    }
    block
}

/// What [`Archiver::write`] stored.
struct Written {
    stored: Stored,
    /// The URL it duplicates (identical payload) or resembles.
    duplicate_of: Option<String>,
    /// Where its payload is in full.
    copy: Option<StoredCopy>,
}

/// Counters of what the archive wrote this run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ArchiveCounts {
    /// Records written this run.
    pub records: u64,
    /// Compressed bytes written this run.
    pub bytes: u64,
    /// Events written this run.
    pub events: u64,
    /// WARC files closed this run.
    pub files_closed: usize,
    /// Rounds of fsyncs run for `sync_writes` (0 without).
    pub syncs: u64,
    /// Tickets (archived pages and `removed` events) those rounds made
    /// durable.
    pub synced: u64,
}

/// The archive's writers and index.
pub struct Archiver {
    warc: WarcWriter,
    events: EventWriter,
    /// `None` once closed: its RocksDB must be gone before the process
    /// exits, or exit races the C++ teardown of its background threads.
    dedup: Option<DedupIndex>,
    settings: DedupConfig,
    /// `[recrawl] change_distance`.
    change_distance: u32,
    /// The last record written is a new original whose simhash later
    /// pages are compared with (see [`Archiver::write`]).
    index_simhash: bool,
    metrics: Arc<Metrics>,
    /// The tickets of what was written: settled at handover, or (with
    /// `sync_writes`) by the group commit.
    tickets: Tickets,
    /// With `sync_writes`: the events file's handle for the group commit.
    events_handle: Option<SyncHandle>,
    /// `[warc] metadata_records`.
    metadata_records: bool,
    /// The crawl report each event is folded into (`src/report`), shared
    /// with whoever reads it.
    report: Option<ReportBook>,
}

/// A crawl report being folded by the archive and read by others.
pub type ReportBook = Arc<std::sync::Mutex<crate::report::CrawlReport>>;

impl Archiver {
    /// An archiver over opened writers.
    pub fn new(
        warc: WarcWriter,
        events: EventWriter,
        dedup: DedupIndex,
        settings: DedupConfig,
        change_distance: u32,
        metrics: Arc<Metrics>,
    ) -> Self {
        Archiver {
            warc,
            events,
            dedup: Some(dedup),
            settings,
            change_distance,
            index_simhash: false,
            metrics,
            tickets: Tickets::handover(),
            events_handle: None,
            metadata_records: false,
            report: None,
        }
    }

    /// Folds each event written into `report`.
    pub fn with_report(mut self, report: ReportBook) -> Self {
        self.report = Some(report);
        self
    }

    /// Writes a `metadata` record beside each page's and sitemap's
    /// response (`[warc] metadata_records`).
    pub fn with_metadata_records(mut self, on: bool) -> Self {
        self.metadata_records = on;
        self
    }

    /// Makes every record and event durable through `commit` before its
    /// ticket settles (`[storage] sync_writes`); file names too: the
    /// directories are synced when files are created or renamed.
    pub fn with_group_commit(mut self, commit: GroupCommit) -> std::io::Result<Self> {
        let events: SyncHandle = self.events.sync_handle()?;
        if let Some(dir) = self.events.path().parent() {
            crate::durable::sync_dir(dir)?;
        }
        self.warc.sync_directory(true);
        self.tickets = Tickets::synced(commit);
        self.events_handle = Some(events);
        Ok(self)
    }

    /// Hands what the writers buffered to the OS and settles the tickets
    /// waiting for it (with `sync_writes`, submits them to the group
    /// commit). The actor calls it once the pages queued ahead of its
    /// flush are written: one write(2) per file for all of them.
    pub fn hand_over(&mut self) -> Result<(), Failure> {
        if !self.tickets.waiting() {
            return Ok(());
        }
        let (files, written) = match self.flush_writers() {
            Ok(files) => (files, Ok(())),
            Err(why) => (Vec::new(), Err(why)),
        };
        let group = self.tickets.handed_over(&files, written.clone());
        self.metrics.archive_handover_group.observe(group as f64);
        written.map_err(Failure::Archive)
    }

    /// Whether written pages wait for [`Archiver::hand_over`].
    pub fn awaits_handover(&self) -> bool {
        self.tickets.waiting()
    }

    /// Flushes the WARC and events buffers; the files the group commit
    /// syncs for them (none without `sync_writes`).
    fn flush_writers(&mut self) -> Result<Vec<SyncHandle>, String> {
        self.warc.flush().map_err(|e| e.to_string())?;
        self.events.flush().map_err(|e| e.to_string())?;
        let Some(events) = self.events_handle.clone() else {
            return Ok(Vec::new());
        };
        let warc = self.warc.sync_handle().map_err(|e| e.to_string())?;
        Ok(warc
            .map(|f| f as SyncHandle)
            .into_iter()
            .chain([events])
            .collect())
    }

    /// After a failed write or fsync the current WARC file's state on
    /// disk is unknown: later records go to a new file (the pages whose
    /// tickets failed are archived again).
    fn leave_failed_file(&mut self) {
        if !self.tickets.take_failure() {
            return;
        }
        if let Err(err) = self.warc.close() {
            tracing::error!(error = %err, "closing a WARC file after a failed fsync failed; it is recovered at the next start");
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
            .judge(sha256, req.stored.clone(), req.simhash, &settings)
            .map_err(|e| Failure::Archive(e.to_string()))
    }

    fn count(&self, kind: &str) {
        self.metrics.duplicates.with_label_values(&[kind]).inc();
    }

    /// Archives `req`: where its record is (none when dedup chose not to
    /// store it), its digest, where its payload is stored in full, and
    /// whether it changed since the copy on record.
    pub fn store(&mut self, req: ArchiveRequest) -> Result<Archived, Failure> {
        self.leave_failed_file();
        let resp = req.response.clone();
        let date = chrono::DateTime::<chrono::Utc>::from(resp.started_at);
        let exchange = Exchange {
            target_uri: req.url.as_str(),
            date,
            ip: resp.ip,
            request_head: &resp.request_head,
            response_head: &resp.head,
            payload: &resp.body,
            truncated: resp.truncated.then_some("length"),
            identified_type: req.mime_detected.or_else(|| {
                crate::parse::sniff::payload_type(&resp.body, resp.header("content-encoding"))
            }),
            languages: req.language,
        };
        if req.not_modified {
            let confirmed = req
                .previous
                .as_ref()
                .and_then(|v| Some((v.digest?, v.copy.clone()?)));
            if let Some((digest, copy)) = confirmed {
                return self.store_not_modified(&req, &exchange, digest, copy);
            }
        }
        let sha256 = req
            .digest
            .unwrap_or_else(|| crate::warc::payload_sha256(&resp.body));
        let verdict = self.verdict(&req, &sha256)?;
        let changed = lifecycle::judge_change(
            req.previous.as_ref(),
            resp.status,
            false,
            &sha256,
            req.simhash,
            self.change_distance,
        );
        let Some(Written {
            stored,
            duplicate_of,
            copy,
        }) = self.write(&req, &exchange, sha256, verdict)?
        else {
            return Ok(Archived {
                at: None,
                digest: sha256,
                copy: None,
                changed,
                original: None,
                durable: None,
            });
        };
        self.write_metadata(&req, date, &stored)?;
        let event = Event {
            duplicate_of,
            changed,
            mime_detected: exchange.identified_type.map(str::to_owned),
            ..Self::event(&req, date, &stored.at, &sha256)
        };
        let durable = self.append(event)?;
        // Only a stored original is indexed, after its records.
        let original = copy
            .as_ref()
            .filter(|c| c.record_id == stored.record_id && req.is_dedup_candidate())
            .cloned();
        let near = req
            .simhash
            .filter(|_| self.index_simhash && self.settings.near_duplicates != NearAction::Off);
        if let (Some(c), Some(hash)) = (&original, near) {
            self.index()?
                .remember(hash, &c.uri)
                .map_err(|e| Failure::Archive(e.to_string()))?;
        }
        Ok(Archived {
            at: Some(stored.at),
            digest: sha256,
            copy,
            changed,
            original,
            durable,
        })
    }

    /// Writes the records of `verdict`: what was stored, the URL it
    /// duplicates (if any) and where its payload is in full (this record,
    /// or the original of an identical payload); `None` when dedup skips
    /// it.
    fn write(
        &mut self,
        req: &ArchiveRequest,
        exchange: &Exchange<'_>,
        sha256: [u8; 32],
        verdict: Verdict,
    ) -> Result<Option<Written>, Failure> {
        let fail = |e: &dyn std::fmt::Display| Failure::Archive(e.to_string());
        let records_before = self.warc.bytes();
        // `index_simhash`: later pages are compared with this one.
        self.index_simhash = false;
        let (stored, duplicate_of, copy) = match verdict {
            Verdict::Skip => {
                self.count("near_skipped");
                return Ok(None);
            }
            Verdict::Exact(original) => {
                self.count("exact");
                let stored = self
                    .warc
                    .write_revisit(exchange, sha256, &original)
                    .map_err(|e| fail(&e))?;
                let uri = original.uri.clone();
                (stored, Some(uri), Some(original))
            }
            Verdict::Near(url) => {
                self.count("near_flagged");
                let stored = self
                    .warc
                    .write_digested(exchange, sha256)
                    .map_err(|e| fail(&e))?;
                let copy = Self::own_copy(req, exchange, &stored);
                (stored, Some(url), Some(copy))
            }
            Verdict::New => {
                let stored = self
                    .warc
                    .write_digested(exchange, sha256)
                    .map_err(|e| fail(&e))?;
                self.index_simhash = true;
                let copy = Self::own_copy(req, exchange, &stored);
                (stored, None, Some(copy))
            }
        };
        self.metrics.warc_records.inc_by(2);
        self.metrics
            .warc_bytes
            .inc_by(self.warc.bytes() - records_before);
        // Only a whole 2xx payload is a copy a later revisit may point at.
        let whole = (200..300).contains(&req.response.status) && !req.response.truncated;
        let copy = copy.filter(|_| whole);
        Ok(Some(Written {
            stored,
            duplicate_of,
            copy,
        }))
    }

    /// The copy this response's own record holds.
    fn own_copy(req: &ArchiveRequest, exchange: &Exchange<'_>, stored: &Stored) -> StoredCopy {
        StoredCopy {
            uri: req.url.to_string(),
            date: crate::warc::warc_date(exchange.date),
            record_id: stored.record_id.clone(),
        }
    }

    /// A 304 confirming `copy` (whose payload digest is `digest`): a
    /// `server-not-modified` revisit pointing at it, and its event.
    fn store_not_modified(
        &mut self,
        req: &ArchiveRequest,
        exchange: &Exchange<'_>,
        digest: [u8; 32],
        copy: StoredCopy,
    ) -> Result<Archived, Failure> {
        let records_before = self.warc.bytes();
        let stored = self
            .warc
            .write_not_modified(exchange, digest, &copy)
            .map_err(|e| Failure::Archive(e.to_string()))?;
        self.metrics.warc_records.inc_by(2);
        self.metrics
            .warc_bytes
            .inc_by(self.warc.bytes() - records_before);
        self.write_metadata(req, exchange.date, &stored)?;
        let event = Event {
            duplicate_of: Some(copy.uri.clone()),
            changed: Some(false),
            ..Self::event(req, exchange.date, &stored.at, &digest)
        };
        let durable = self.append(event)?;
        Ok(Archived {
            at: Some(stored.at),
            digest,
            copy: Some(copy),
            changed: Some(false),
            original: None,
            durable,
        })
    }

    /// The `metadata` record of a page's or sitemap's response (or
    /// revisit) `stored`, as Heritrix writes it: the URL it was found on,
    /// its hop path, the fetch's duration and its outlinks (each with the
    /// hop it is, `L`, and where it was found, `a/@href`).
    fn write_metadata(
        &mut self,
        req: &ArchiveRequest,
        date: chrono::DateTime<chrono::Utc>,
        stored: &Stored,
    ) -> Result<(), Failure> {
        if !self.metadata_records || !matches!(req.kind, EventKind::Page | EventKind::Sitemap) {
            return Ok(());
        }
        let mut fields: Vec<(&str, String)> = Vec::with_capacity(3 + req.outlinks.len());
        if let Some(via) = &req.provenance.via {
            fields.push(("via", via.to_string()));
        }
        let hops = req.provenance.hops.as_str();
        if !hops.is_empty() {
            fields.push(("hopsFromSeed", hops.to_owned()));
        }
        let fetch_ms = req.response.elapsed.as_millis();
        fields.push(("fetchTimeMs", fetch_ms.to_string()));
        for link in &req.outlinks {
            fields.push(("outlink", format!("{link} L a/@href")));
        }
        let before = self.warc.bytes();
        self.warc
            .write_metadata(req.url.as_str(), date, &stored.record_id, &fields)
            .map_err(|e| Failure::Archive(e.to_string()))?;
        self.metrics.warc_records.inc();
        self.metrics.warc_bytes.inc_by(self.warc.bytes() - before);
        Ok(())
    }

    /// Writes the `dns:` record of a DNS answer the fetcher obtained, as
    /// Heritrix does: a `response` record of type `text/dns` whose block
    /// is the answer's time (`YYYYMMDDHHMMSS`) and its address records,
    /// one a line (`name. TTL IN A|AAAA address`; an answer from `[dns]
    /// overrides` has TTL 0).
    pub fn dns(&mut self, resolved: &crate::fetch::Resolved) -> Result<(), Failure> {
        // An answer that arrives after the archive closed (a lookup that
        // outlived the stop's drain) would open a file no one closes: it
        // is dropped (the next run looks the name up again).
        if self.dedup.is_none() {
            return Ok(());
        }
        self.leave_failed_file();
        let at = chrono::DateTime::<chrono::Utc>::from(resolved.at);
        let block = dns_block(resolved, at);
        let before = self.warc.bytes();
        let record = crate::warc::Record::dns(&resolved.host, at, block);
        self.warc
            .write_record(&record)
            .map_err(|e| Failure::Archive(e.to_string()))?;
        self.metrics.warc_records.inc();
        self.metrics.warc_bytes.inc_by(self.warc.bytes() - before);
        Ok(())
    }

    /// The event of a stored response.
    fn event(
        req: &ArchiveRequest,
        date: chrono::DateTime<chrono::Utc>,
        at: &WarcRef,
        sha256: &[u8; 32],
    ) -> Event {
        let resp = &req.response;
        // Pages and sitemaps were found somewhere; robots.txt was not.
        let found = matches!(req.kind, EventKind::Page | EventKind::Sitemap);
        Event {
            url: req.url.to_string(),
            canonical_url: req.canonical.as_ref().map(|u| u.to_string()),
            fetched_at: date.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            status: resp.status,
            content_type: resp.header("content-type").map(str::to_owned),
            warc_ref: Some(at.clone()),
            content_sha256: Some(data_encoding::HEXLOWER.encode(sha256)),
            simhash: req.simhash.map(|h| format!("{h:016x}")),
            duplicate_of: None,
            robots_meta: req.robots_meta.clone(),
            links_out: req.links_out,
            links_dropped: req.links_dropped,
            kind: req.kind,
            depth: req.depth,
            score: req.score,
            changed: None,
            reason: None,
            file: None,
            via: found
                .then(|| req.provenance.via.as_deref().map(str::to_owned))
                .flatten(),
            hop: found.then(|| req.provenance.how().to_owned()),
            hops: found.then(|| req.provenance.hops.as_str().to_owned()),
            fetch_ms: Some(resp.elapsed.as_millis() as u64),
            ip: resp.ip.map(|ip| ip.to_string()),
            bytes: Some(resp.body.len() as u64),
            mime_detected: None,
            language: req.language.map(str::to_owned),
        }
    }

    /// Appends an event (after the WARC records it points at: they reach
    /// the OS first, see [`EventWriter::append_after`]); the ticket that
    /// settles once both are in the OS (with `sync_writes`, durable).
    fn append(&mut self, event: Event) -> Result<Option<Ticket>, Failure> {
        let warc = &mut self.warc;
        self.events
            .append_after(&event, || warc.flush().map_err(std::io::Error::other))
            .map_err(|e| Failure::Archive(e.to_string()))?;
        if let Some(report) = &self.report {
            // A poisoned lock only means a reader panicked: the report
            // itself is whole (each fold is one call under the lock).
            let mut report = report.lock().unwrap_or_else(|p| p.into_inner());
            report.record(&event);
        }
        Ok(Some(self.tickets.issue()))
    }

    /// Writes the `removed` event of a URL that left the crawl; the ticket
    /// that settles once it is in the OS (with `sync_writes`, durable).
    pub fn removed(&mut self, removed: &Removed) -> Result<Option<Ticket>, Failure> {
        self.leave_failed_file();
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(removed.at_ms);
        let at = chrono::DateTime::<chrono::Utc>::from(at);
        let event = Event {
            url: removed.url.to_string(),
            canonical_url: None,
            fetched_at: at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            status: removed.last_status.unwrap_or(0),
            content_type: None,
            warc_ref: None,
            content_sha256: None,
            simhash: None,
            duplicate_of: None,
            robots_meta: None,
            links_out: 0,
            links_dropped: 0,
            kind: EventKind::Removed,
            depth: removed.depth,
            score: None,
            changed: None,
            reason: Some(removed.reason.as_str().to_owned()),
            file: None,
            via: None,
            hop: None,
            hops: None,
            fetch_ms: None,
            ip: None,
            bytes: None,
            mime_detected: None,
            language: None,
        };
        self.metrics
            .removed
            .with_label_values(&[removed.reason.as_str()])
            .inc();
        self.append(event)
    }

    /// Writes (and syncs) the `uploaded` event of a WARC file now in
    /// object storage: said once per file, so it is made durable at once.
    pub fn uploaded(&mut self, upload: &crate::upload::UploadRecord) -> Result<(), Failure> {
        let event = Event {
            url: upload.location.clone(),
            canonical_url: None,
            fetched_at: upload.uploaded_at.clone(),
            status: 0,
            content_type: None,
            warc_ref: None,
            content_sha256: Some(upload.sha256.clone()),
            simhash: None,
            duplicate_of: None,
            robots_meta: None,
            links_out: 0,
            links_dropped: 0,
            kind: EventKind::Uploaded,
            depth: 0,
            score: None,
            changed: None,
            reason: None,
            file: Some(upload.file.clone()),
            via: None,
            hop: None,
            hops: None,
            fetch_ms: None,
            ip: None,
            bytes: None,
            mime_detected: None,
            language: None,
        };
        // The sync pushes the events buffer out: the records its lines
        // point at go first.
        self.hand_over()?;
        self.events
            .append(&event)
            .and_then(|()| self.events.sync())
            .map_err(|e| Failure::Archive(e.to_string()))
    }

    /// Hands what is buffered over and makes the WARC records written so
    /// far durable on disk (see [`crate::warc::WarcWriter::seal`]): how far
    /// the open file's are.
    pub fn seal(&mut self) -> Result<Option<crate::warc::Sealed>, Failure> {
        self.hand_over()?;
        self.warc
            .seal()
            .map_err(|e| Failure::Archive(e.to_string()))
    }

    /// Names of the WARC files closed so far this run, in order.
    pub fn closed_files(&self) -> &[String] {
        self.warc.closed_files()
    }

    /// Hands what is buffered over, closes the WARC file, syncs the events
    /// file and closes the index; the group commit's last round settles
    /// the tickets still waiting.
    ///
    /// The three wait on the disk (the near-dup index, which has no WAL,
    /// writes its memtable out as it closes), so they run at once: the
    /// events' sync and the near-dup index's close on threads of their own.
    pub fn close(&mut self) -> Result<ArchiveCounts, Failure> {
        let handed = self.hand_over();
        let dedup = self.dedup.take();
        let (warc, events) = (&mut self.warc, &mut self.events);
        let (closed, synced) = std::thread::scope(|scope| {
            let synced = scope.spawn(|| events.sync());
            scope.spawn(move || drop(dedup));
            let closed = warc.close();
            let synced = synced
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (closed, synced)
        });
        self.tickets.close();
        handed?;
        closed.map_err(|e| Failure::Archive(e.to_string()))?;
        synced.map_err(|e| Failure::Archive(e.to_string()))?;
        Ok(self.counts())
    }

    /// What was written this run.
    pub fn counts(&self) -> ArchiveCounts {
        let stats = self.tickets.stats();
        ArchiveCounts {
            records: self.warc.records(),
            bytes: self.warc.bytes(),
            events: self.events.written(),
            files_closed: self.warc.closed_files().len(),
            syncs: stats.rounds,
            synced: stats.durable,
        }
    }
}

/// Whether the archive can write, as the node's checkpoints see it. A
/// node whose pages cannot be archived (a full disk, a dead one) makes no
/// progress on its partitions, while its checkpoints would still renew
/// their leases (nothing changes: every page fails before its completion
/// is written). So once a write of the archive failed, and until one
/// succeeds, the node refuses its partitions' checkpoints: the lease
/// machine gives them up after a lease of that (`cluster::lease`), and
/// another node crawls them. Writes come only with pages: before each
/// refusal the node probes the archive's directory ([`Self::probe`]), so a
/// disk freed while the node holds nothing to archive is seen at once.
#[derive(Debug)]
pub struct ArchiveHealth {
    /// The archive's directory (where the probe writes).
    dir: std::path::PathBuf,
    failing: std::sync::atomic::AtomicBool,
}

impl ArchiveHealth {
    /// Health of the archive writing in `dir`.
    pub fn new(dir: std::path::PathBuf) -> Self {
        ArchiveHealth {
            dir,
            failing: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A write failed.
    pub fn failed(&self) {
        self.failing
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A write succeeded.
    pub fn wrote(&self) {
        self.failing
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the last write failed.
    pub fn failing(&self) -> bool {
        self.failing.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the archive can write now: at once if its last write did;
    /// else a page's worth (64 KiB) is written to a probe file in its
    /// directory, synced and removed, and a success counts as a write.
    pub fn probe(&self) -> bool {
        if !self.failing() {
            return true;
        }
        let path = self.dir.join(".trawl-probe");
        let wrote = std::fs::File::create(&path).and_then(|mut file| {
            std::io::Write::write_all(&mut file, &[0u8; 64 * 1024])?;
            file.sync_all()
        });
        let _ = std::fs::remove_file(&path);
        if wrote.is_ok() {
            self.wrote();
        }
        wrote.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::path::Path;

    use super::*;
    use crate::config::WarcCompression;
    use crate::warc::WarcSettings;

    fn archiver(dir: &Path) -> Archiver {
        let warc = WarcWriter::new(WarcSettings {
            dir: dir.join("warc"),
            prefix: "test".into(),
            max_file_bytes: 1 << 30,
            compression: WarcCompression::Gzip,
            compression_level: 1,
            store_below: 1024,
            parquet_index: false,
            info: Vec::new(),
        })
        .unwrap();
        let events = EventWriter::open(&dir.join("events.jsonl")).unwrap();
        let dedup = DedupIndex::open(&dir.join("dedup")).unwrap();
        let settings = DedupConfig {
            exact: true,
            near_duplicates: NearAction::Flag,
            near_distance: 3,
            dir: "dedup".into(),
        };
        Archiver::new(warc, events, dedup, settings, 3, Arc::new(Metrics::new()))
    }

    fn handovers(a: &Archiver) -> (u64, f64) {
        let h = &a.metrics.archive_handover_group;
        (h.get_sample_count(), h.get_sample_sum())
    }

    fn page(n: usize) -> ArchiveRequest {
        let body = format!("<p>page {n}</p>");
        let response = FetchResponse::synthetic(200, &[("content-type", "text/html")], &body);
        let url = Url::parse(&format!("http://127.0.0.1/{n}")).unwrap();
        ArchiveRequest::side(url, Arc::new(response), EventKind::Page)
    }

    /// The response records in the WARC files under `dir`, as on disk.
    fn responses_on_disk(dir: &Path) -> usize {
        let mut text = String::new();
        for entry in std::fs::read_dir(dir.join("warc")).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&path).unwrap();
            if !(name.ends_with(".warc.gz") || name.ends_with(".warc.gz.open")) || bytes.is_empty()
            {
                continue;
            }
            flate2::read::MultiGzDecoder::new(&bytes[..])
                .read_to_string(&mut text)
                .unwrap();
        }
        text.matches("WARC-Type: response").count()
    }

    fn events_on_disk(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("events.jsonl"))
            .unwrap()
            .lines()
            .count()
    }

    #[test]
    fn pages_are_vouched_for_only_once_handed_to_the_os_all_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = archiver(dir.path());
        let tickets: Vec<Ticket> = (0..3)
            .map(|n| a.store(page(n)).unwrap().durable.expect("a ticket"))
            .collect();
        // Buffered: nothing vouches for them, and nothing is in the files.
        assert!(tickets.iter().all(|t| t.outcome().is_none()));
        assert_eq!(events_on_disk(dir.path()), 0);
        assert_eq!(responses_on_disk(dir.path()), 0);
        a.hand_over().unwrap();
        assert_eq!(handovers(&a), (1, 3.0), "one handover of three pages");
        assert!(tickets.iter().all(Ticket::is_durable));
        assert_eq!(events_on_disk(dir.path()), 3);
        assert_eq!(responses_on_disk(dir.path()), 3);
        // A page after the handover waits for the next one.
        let later = a.store(page(3)).unwrap().durable.unwrap();
        assert_eq!(later.outcome(), None);
        a.close().unwrap();
        assert!(later.is_durable(), "closing hands over what is left");
        assert_eq!(handovers(&a), (2, 4.0));
        assert_eq!(events_on_disk(dir.path()), 4);
    }

    #[test]
    fn a_failed_write_fails_the_archive_until_a_write_or_a_probe_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let health = ArchiveHealth::new(dir.path().to_owned());
        assert!(!health.failing() && health.probe());
        health.failed();
        assert!(health.failing());
        health.wrote();
        assert!(!health.failing(), "a write that succeeds clears it");
        health.failed();
        assert!(health.probe(), "the directory takes writes");
        assert!(!health.failing(), "a probe that succeeds clears it");
        assert!(!dir.path().join(".trawl-probe").exists());
        // A directory that takes no writes (gone, here): still failing.
        let gone = ArchiveHealth::new(dir.path().join("missing"));
        gone.failed();
        assert!(!gone.probe());
        assert!(gone.failing());
    }
}

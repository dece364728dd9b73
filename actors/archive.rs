//! Archive: the only writer of WARC files and output events.
//!
//! Runs on a one-thread SyncArbiter: gzip and file writes are blocking work
//! and stay off the async executor. Each response is written as a response
//! record plus its request record, then its event line; both files are
//! flushed to the OS before the reply, so an acknowledged response survives
//! a process crash.
//!
//! Content dedup happens here, the one place that sees every stored
//! payload (see `src/dedup/`): a repeated payload becomes a revisit record,
//! a near-duplicate page is flagged or not archived.

use std::sync::{Arc, Mutex};

use actix::prelude::*;

use super::messages::{Archive, ArchiveSnapshot, CloseArchive, Failure, GetArchiveSnapshot};
use crate::config::{Config, DedupConfig};
use crate::dedup::{DedupIndex, NearAction, Original, Verdict};
use crate::events::{Event, EventKind, EventWriter};
use crate::metrics::Metrics;
use crate::warc::{Exchange, Stored, WarcRef, WarcSettings, WarcWriter};

/// The archive's writers.
pub struct ArchiveActor {
    warc: WarcWriter,
    events: EventWriter,
    /// `None` once closed: its RocksDB must be gone before the process
    /// exits, or exit races the C++ teardown of its background threads.
    dedup: Option<DedupIndex>,
    settings: DedupConfig,
    metrics: Arc<Metrics>,
}

/// Errors opening the archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveOpenError {
    /// The WARC directory could not be prepared.
    #[error(transparent)]
    Warc(#[from] crate::warc::WarcError),
    /// The events file could not be opened.
    #[error("events file: {0}")]
    Events(#[from] std::io::Error),
    /// The dedup index could not be opened.
    #[error(transparent)]
    Dedup(#[from] crate::dedup::DedupError),
}

impl ArchiveActor {
    /// Opens the writers (recovering files a crash left) and starts the
    /// actor on its own thread.
    pub fn start(
        config: &Config,
        metrics: Arc<Metrics>,
    ) -> Result<Addr<ArchiveActor>, ArchiveOpenError> {
        let warc = WarcWriter::new(WarcSettings {
            dir: config.data_path(&config.warc.dir),
            prefix: config.warc.prefix.clone(),
            max_file_bytes: config.warc.max_file_bytes,
            compression_level: config.warc.compression_level,
            info: vec![
                ("software".into(), format!("trawl/{}", env!("CARGO_PKG_VERSION"))),
                ("format".into(), "WARC File Format 1.1".into()),
                (
                    "conformsTo".into(),
                    "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
                        .into(),
                ),
                ("robots".into(), "obey".into()),
                ("http-header-user-agent".into(), config.crawl.user_agent.clone()),
            ],
        })?;
        let events = EventWriter::open(&config.data_path(&config.events.path))?;
        let dedup = DedupIndex::open(&config.data_path(&config.dedup.dir))?;
        let settings = config.dedup.clone();
        // SyncArbiter wants a factory; the writers exist once, so the single
        // thread takes them on its first (and only) start.
        let slot = Arc::new(Mutex::new(Some((warc, events, dedup))));
        Ok(SyncArbiter::start(1, move || {
            let (warc, events, dedup) = slot
                .lock()
                .expect("archive slot lock")
                .take()
                .expect("the archive actor is started once");
            ArchiveActor {
                warc,
                events,
                dedup: Some(dedup),
                settings: settings.clone(),
                metrics: metrics.clone(),
            }
        }))
    }

    /// The dedup index, unless the archive is closed.
    fn index(&mut self) -> Result<&mut DedupIndex, Failure> {
        self.dedup
            .as_mut()
            .ok_or_else(|| Failure::Archive("the archive is closed".into()))
    }

    /// Dedup's decision for a response (only candidates are judged).
    fn verdict(&mut self, msg: &Archive, sha256: &[u8; 32]) -> Result<Verdict, Failure> {
        if !Self::is_dedup_candidate(msg) {
            return Ok(Verdict::New);
        }
        let settings = self.settings.clone();
        self.index()?
            .judge(sha256, msg.simhash, &settings)
            .map_err(|e| Failure::Archive(e.to_string()))
    }

    fn count(&self, kind: &str) {
        self.metrics.duplicates.with_label_values(&[kind]).inc();
    }

    fn archive(&mut self, msg: Archive) -> Result<Option<WarcRef>, Failure> {
        let fail = |e: &dyn std::fmt::Display| Failure::Archive(e.to_string());
        let resp = &msg.response;
        let date = chrono::DateTime::<chrono::Utc>::from(resp.started_at);
        let exchange = Exchange {
            target_uri: msg.url.as_str(),
            date,
            ip: resp.ip,
            request_head: &resp.request_head,
            response_head: &resp.head,
            payload: &resp.body,
            truncated: resp.truncated.then_some("length"),
        };
        let sha256 = crate::warc::payload_sha256(&resp.body);
        let verdict = self.verdict(&msg, &sha256)?;
        let records_before = self.warc.bytes();
        // `in_full`: the payload is in this record, so later identical
        // payloads can point at it; `index_simhash`: later pages are
        // compared with this one (not with a near-duplicate, so similarity
        // does not drift).
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
        let original = (in_full && Self::is_dedup_candidate(&msg)).then(|| Original {
            uri: msg.url.to_string(),
            date: crate::warc::warc_date(date),
            record_id: stored.record_id.clone(),
        });
        let Stored { at, .. } = stored;
        self.metrics.warc_records.inc_by(2);
        self.metrics
            .warc_bytes
            .inc_by(self.warc.bytes() - records_before);
        let event = Event {
            url: msg.url.to_string(),
            canonical_url: msg.canonical.map(String::from),
            fetched_at: date.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            status: resp.status,
            content_type: resp.header("content-type").map(str::to_owned),
            warc_ref: at.clone(),
            content_sha256: data_encoding::HEXLOWER.encode(&sha256),
            simhash: msg.simhash.map(|h| format!("{h:016x}")),
            duplicate_of,
            robots_meta: msg.robots_meta,
            links_out: msg.links_out,
            kind: msg.kind,
            depth: msg.depth,
        };
        // The WARC bytes reach the OS before the event that points at them.
        self.warc.flush().map_err(|e| fail(&e))?;
        self.events.append(&event).map_err(|e| fail(&e))?;
        self.events.flush().map_err(|e| fail(&e))?;
        // Only a stored original enters the index, after its records.
        if let Some(original) = &original {
            let near = msg
                .simhash
                .filter(|_| index_simhash && self.settings.near_duplicates != NearAction::Off);
            self.index()?
                .remember(&sha256, Some(original), near, &original.uri)
                .map_err(|e| fail(&e))?;
        }
        Ok(Some(at))
    }

    /// Whether dedup looks at a response: a page's 2xx with a whole,
    /// non-empty body.
    fn is_dedup_candidate(msg: &Archive) -> bool {
        msg.kind == EventKind::Page
            && (200..300).contains(&msg.response.status)
            && !msg.response.body.is_empty()
            && !msg.response.truncated
    }

    fn snapshot(&self) -> ArchiveSnapshot {
        ArchiveSnapshot {
            records: self.warc.records(),
            bytes: self.warc.bytes(),
            events: self.events.written(),
            files_closed: self.warc.closed_files().len(),
        }
    }
}

impl Actor for ArchiveActor {
    type Context = SyncContext<Self>;
}

impl Handler<Archive> for ArchiveActor {
    type Result = Result<Option<WarcRef>, Failure>;

    fn handle(&mut self, msg: Archive, _: &mut Self::Context) -> Self::Result {
        let url = msg.url.clone();
        self.archive(msg).inspect_err(|err| {
            tracing::error!(url = %url, error = %err, "archiving failed");
        })
    }
}

impl Handler<CloseArchive> for ArchiveActor {
    type Result = Result<ArchiveSnapshot, Failure>;

    fn handle(&mut self, _: CloseArchive, _: &mut Self::Context) -> Self::Result {
        self.warc
            .close()
            .map_err(|e| Failure::Archive(e.to_string()))?;
        self.events
            .sync()
            .map_err(|e| Failure::Archive(e.to_string()))?;
        // Closed here, on this thread, before the node reports shut down.
        drop(self.dedup.take());
        Ok(self.snapshot())
    }
}

impl Handler<GetArchiveSnapshot> for ArchiveActor {
    type Result = MessageResult<GetArchiveSnapshot>;

    fn handle(&mut self, _: GetArchiveSnapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

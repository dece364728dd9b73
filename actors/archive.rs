//! Archive: the only writer of WARC files and output events.
//!
//! Runs on a one-thread SyncArbiter: gzip and file writes are blocking work
//! and stay off the async executor. Each response is written as a response
//! record plus its request record, then its event line; both files are
//! flushed to the OS before the reply, so an acknowledged response survives
//! a process crash.

use std::sync::{Arc, Mutex};

use actix::prelude::*;

use super::messages::{Archive, ArchiveSnapshot, CloseArchive, Failure, GetArchiveSnapshot};
use crate::config::Config;
use crate::events::{Event, EventWriter};
use crate::metrics::Metrics;
use crate::warc::{Exchange, WarcRef, WarcSettings, WarcWriter};

/// The archive's writers.
pub struct ArchiveActor {
    warc: WarcWriter,
    events: EventWriter,
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
        // SyncArbiter wants a factory; the writers exist once, so the single
        // thread takes them on its first (and only) start.
        let slot = Arc::new(Mutex::new(Some((warc, events))));
        Ok(SyncArbiter::start(1, move || {
            let (warc, events) = slot
                .lock()
                .expect("archive slot lock")
                .take()
                .expect("the archive actor is started once");
            ArchiveActor {
                warc,
                events,
                metrics: metrics.clone(),
            }
        }))
    }

    fn archive(&mut self, msg: Archive) -> Result<WarcRef, Failure> {
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
        let records_before = self.warc.bytes();
        let (at, sha256) = self.warc.write_exchange(&exchange).map_err(|e| fail(&e))?;
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
            simhash: None,
            duplicate_of: None,
            robots_meta: msg.robots_meta,
            links_out: msg.links_out,
            kind: msg.kind,
            depth: msg.depth,
        };
        // The WARC bytes reach the OS before the event that points at them.
        self.warc.flush().map_err(|e| fail(&e))?;
        self.events.append(&event).map_err(|e| fail(&e))?;
        self.events.flush().map_err(|e| fail(&e))?;
        Ok(at)
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
    type Result = Result<WarcRef, Failure>;

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
        Ok(self.snapshot())
    }
}

impl Handler<GetArchiveSnapshot> for ArchiveActor {
    type Result = MessageResult<GetArchiveSnapshot>;

    fn handle(&mut self, _: GetArchiveSnapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

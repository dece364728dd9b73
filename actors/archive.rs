//! Archive: the only writer of WARC files and output events.
//!
//! Runs the archive transaction ([`Archiver`], `src/archive.rs`: dedup
//! verdict, records, event, index update) on a one-thread SyncArbiter:
//! gzip and file writes are blocking work and stay off the async executor.
//! It is the one place that sees every stored payload, which is why content
//! dedup happens in it. It tells the uploader (if uploads are on) about
//! each WARC file it closes, and writes the uploader's `uploaded` events.

use std::sync::{Arc, Mutex};

use actix::prelude::*;

use super::messages::{
    Archive, ArchiveRemoval, ArchiveSnapshot, ArchiveUploaded, CloseArchive, Failure,
    GetArchiveSnapshot, WarcClosed,
};
use crate::archive::{Archived, Archiver};
use crate::config::Config;
use crate::dedup::DedupIndex;
use crate::durable::{GroupCommit, GroupSettings, Ticket};
use crate::events::EventWriter;
use crate::metrics::Metrics;
use crate::warc::{WarcSettings, WarcWriter};

/// The archive's thread.
pub struct ArchiveActor {
    archiver: Archiver,
    metrics: Arc<Metrics>,
    /// The uploader, told about each closed file.
    uploads: Option<Recipient<WarcClosed>>,
    /// Closed files it was told about.
    told: usize,
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
    /// The group commit of `sync_writes` could not start (its thread, or
    /// a first sync of the directories).
    #[error("archive sync: {0}")]
    Sync(std::io::Error),
}

impl ArchiveActor {
    /// Opens the writers (recovering files a crash left) and starts the
    /// actor on its own thread; `uploads` hears of every file it closes.
    pub fn start(
        config: &Config,
        metrics: Arc<Metrics>,
        uploads: Option<Recipient<WarcClosed>>,
    ) -> Result<Addr<ArchiveActor>, ArchiveOpenError> {
        let warc = WarcWriter::new(WarcSettings {
            dir: config.data_path(&config.warc.dir),
            prefix: config.warc_prefix(),
            max_file_bytes: config.warc.max_file_bytes,
            compression: config.warc.compression,
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
        let events = EventWriter::open(&config.events_file())?;
        let dedup = DedupIndex::open(&config.dedup_dir())?;
        let mut archiver = Archiver::new(
            warc,
            events,
            dedup,
            config.dedup.clone(),
            config.recrawl.change_distance,
            metrics.clone(),
        );
        if config.storage.sync_writes {
            let commit = GroupCommit::start(GroupSettings::default(), metrics.clone())
                .map_err(ArchiveOpenError::Sync)?;
            archiver = archiver
                .with_group_commit(commit)
                .map_err(ArchiveOpenError::Sync)?;
        }
        // SyncArbiter wants a factory; the archiver exists once, so the
        // single thread takes it on its first (and only) start.
        let slot = Arc::new(Mutex::new(Some(archiver)));
        Ok(SyncArbiter::start(1, move || ArchiveActor {
            archiver: slot
                .lock()
                .expect("archive slot lock")
                .take()
                .expect("the archive actor is started once"),
            metrics: metrics.clone(),
            uploads: uploads.clone(),
            told: 0,
        }))
    }

    /// Tells the uploader about files closed since last told.
    fn tell_closed(&mut self) {
        let closed = self.archiver.closed_files();
        if let Some(uploads) = &self.uploads {
            for file in &closed[self.told..] {
                uploads.do_send(WarcClosed { file: file.clone() });
            }
        }
        self.told = closed.len();
    }
}

impl Actor for ArchiveActor {
    type Context = SyncContext<Self>;
}

impl Handler<Archive> for ArchiveActor {
    type Result = Result<Archived, Failure>;

    fn handle(&mut self, msg: Archive, _: &mut Self::Context) -> Self::Result {
        let _timer = self.metrics.archive_duration.start_timer();
        let url = msg.url.clone();
        let stored = self.archiver.store(msg).inspect_err(|err| {
            tracing::error!(url = %url, error = %err, "archiving failed");
        });
        self.tell_closed();
        stored
    }
}

impl Handler<ArchiveRemoval> for ArchiveActor {
    type Result = Result<Option<Ticket>, Failure>;

    fn handle(&mut self, msg: ArchiveRemoval, _: &mut Self::Context) -> Self::Result {
        self.archiver.removed(&msg.0).inspect_err(|err| {
            tracing::error!(url = %msg.0.url, error = %err, "writing a removed event failed");
        })
    }
}

impl Handler<CloseArchive> for ArchiveActor {
    type Result = Result<ArchiveSnapshot, Failure>;

    fn handle(&mut self, _: CloseArchive, _: &mut Self::Context) -> Self::Result {
        // Closed here, on this thread, before the node reports shut down.
        let closed = self.archiver.close();
        self.tell_closed();
        closed
    }
}

impl Handler<ArchiveUploaded> for ArchiveActor {
    type Result = Result<(), Failure>;

    fn handle(&mut self, msg: ArchiveUploaded, _: &mut Self::Context) -> Self::Result {
        self.archiver.uploaded(&msg.0).inspect_err(|err| {
            tracing::error!(file = %msg.0.file, error = %err, "writing an uploaded event failed");
        })
    }
}

impl Handler<GetArchiveSnapshot> for ArchiveActor {
    type Result = MessageResult<GetArchiveSnapshot>;

    fn handle(&mut self, _: GetArchiveSnapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.archiver.counts())
    }
}

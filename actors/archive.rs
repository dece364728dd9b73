//! Archive: the only writer of WARC files and output events.
//!
//! Runs the archive transaction ([`Archiver`], `src/archive.rs`: dedup
//! verdict, records, event, index update) on a one-thread SyncArbiter:
//! gzip and file writes are blocking work and stay off the async executor.
//! It is the one place that sees every stored payload, which is why content
//! dedup happens in it.
//!
//! What it writes is buffered, and handed to the OS once per run of pages
//! in its mailbox: the first page written after a handover queues a
//! [`HandOver`] behind the pages already waiting, and the pages' tickets
//! settle when it is handled. Under load that is one write(2) per file for
//! tens of pages; idle, the handover follows the page at once.
//!
//! It tells the uploader (if uploads are on) about each WARC file it
//! closes, and writes the uploader's `uploaded` events.

use std::sync::{Arc, Mutex};

use actix::prelude::*;

use super::messages::{
    Archive, ArchiveDns, ArchiveRemoval, ArchiveSnapshot, ArchiveUploaded, CloseArchive, Failure,
    GetArchiveSnapshot, HandOver, WarcClosed,
};
use crate::archive::{ArchiveHealth, Archived, Archiver, ReportBook};
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
    /// Whether writes fail (the node's checkpoints read it).
    health: Arc<ArchiveHealth>,
    /// The uploader, told about each closed file.
    uploads: Option<Recipient<WarcClosed>>,
    /// Closed files it was told about.
    told: usize,
    /// A [`HandOver`] waits in the mailbox.
    handover_queued: bool,
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
    /// actor on its own thread, archiving into `dedup` (opened by the
    /// caller: see [`DedupIndex::open`]); `uploads` hears of every file it
    /// closes; each event it writes is folded into `report`.
    pub fn start(
        config: &Config,
        dedup: DedupIndex,
        metrics: Arc<Metrics>,
        uploads: Option<Recipient<WarcClosed>>,
        health: Arc<ArchiveHealth>,
        report: ReportBook,
    ) -> Result<Addr<ArchiveActor>, ArchiveOpenError> {
        let warc = WarcWriter::new(WarcSettings {
            dir: config.data_path(&config.warc.dir),
            prefix: config.warc_prefix(),
            max_file_bytes: config.warc.max_file_bytes,
            compression: config.warc.compression,
            compression_level: config.warc.compression_level,
            store_below: config.warc.store_below,
            parquet_index: config.warc.parquet_index,
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
        let mut archiver = Archiver::new(
            warc,
            events,
            dedup,
            config.dedup.clone(),
            config.recrawl.change_distance,
            metrics.clone(),
        )
        .with_metadata_records(config.warc.metadata_records)
        .with_report(report);
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
            health: health.clone(),
            told: 0,
            handover_queued: false,
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

    /// Queues a [`HandOver`] behind the mail waiting if written pages
    /// wait for one and none is queued.
    fn queue_handover(&mut self, ctx: &mut SyncContext<Self>) {
        if !self.handover_queued && self.archiver.awaits_handover() {
            self.handover_queued = true;
            ctx.address().do_send(HandOver);
        }
    }
}

impl Actor for ArchiveActor {
    type Context = SyncContext<Self>;
}

impl Handler<Archive> for ArchiveActor {
    type Result = Result<Archived, Failure>;

    fn handle(&mut self, msg: Archive, ctx: &mut Self::Context) -> Self::Result {
        let _timer = self.metrics.archive_duration.start_timer();
        let url = msg.url.clone();
        let stored = self.archiver.store(msg).inspect_err(|err| {
            self.health.failed();
            tracing::error!(url = %url, error = %err, "archiving failed");
        });
        self.tell_closed();
        self.queue_handover(ctx);
        stored
    }
}

impl Handler<HandOver> for ArchiveActor {
    type Result = ();

    fn handle(&mut self, _: HandOver, _: &mut Self::Context) {
        self.handover_queued = false;
        match self.archiver.hand_over() {
            Ok(_) => self.health.wrote(),
            Err(err) => {
                // The tickets waiting fail: their pages are archived again.
                self.health.failed();
                tracing::error!(error = %err, "writing the archive's buffers failed; their pages will be archived again");
            }
        }
    }
}

impl Handler<ArchiveRemoval> for ArchiveActor {
    type Result = Result<Option<Ticket>, Failure>;

    fn handle(&mut self, msg: ArchiveRemoval, ctx: &mut Self::Context) -> Self::Result {
        let ticket = self.archiver.removed(&msg.0).inspect_err(|err| {
            tracing::error!(url = %msg.0.url, error = %err, "writing a removed event failed");
        });
        self.queue_handover(ctx);
        ticket
    }
}

impl Handler<ArchiveDns> for ArchiveActor {
    type Result = ();

    fn handle(&mut self, msg: ArchiveDns, ctx: &mut Self::Context) {
        if let Err(err) = self.archiver.dns(&msg.0) {
            tracing::warn!(host = %msg.0.host, error = %err, "writing a dns record failed");
        }
        self.queue_handover(ctx);
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

impl Handler<super::messages::SealArchive> for ArchiveActor {
    type Result = Result<Option<crate::warc::Sealed>, Failure>;

    fn handle(&mut self, _: super::messages::SealArchive, _: &mut Self::Context) -> Self::Result {
        let sealed = self.archiver.seal().inspect_err(|err| {
            tracing::error!(error = %err, "sealing the archive failed");
        })?;
        self.tell_closed();
        Ok(sealed)
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

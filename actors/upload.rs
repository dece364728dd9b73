//! Upload: copies closed WARC files to object storage.
//!
//! Runs the uploader of `src/upload/` on its own arbiter (uploads are long
//! network work and must not hold up the node's actors): it learns of
//! closed files from the Archive ([`WarcClosed`]) and, once the archive is
//! open ([`ArchiveOpened`]: its crash recovery renamed what a crash left
//! `.open`), from a scan of the WARC directory for closed files not in
//! the manifest. Up to `concurrency` files go up at once, oldest first; a
//! verified upload is recorded in the manifest (fsynced) before its local
//! file may be deleted, then its `uploaded` event is written by the
//! Archive ([`ArchiveUploaded`]). A failed upload leaves the file in place
//! and tries it again after a backoff.
//!
//! A checkpoint's seal ([`UploadSegment`]) has it put the open file's new
//! bytes up as a segment; a file uploaded whole has its segments deleted;
//! at start, the segments of this node's earlier runs whose files are not
//! on this disk (it was lost) are joined into their files
//! (`src/upload/join.rs`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::messages::{ArchiveOpened, ArchiveUploaded, FinishUploads, UploadSegment, WarcClosed};
use crate::clock::SharedClock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::upload::join::{delete_segments, files_with_segments, join_file, JoinError};
use crate::upload::manifest::ManifestError;
use crate::upload::transfer::SegmentRecord;
use crate::upload::{
    closed_files, is_own_file, upload_file, upload_segment, Manifest, Pending, Target, TargetError,
    TransferSettings, UploadError, UploadRecord, Work,
};

/// Parts of one file uploaded at once (memory: about
/// `concurrency × (PARTS_IN_FLIGHT + 1) × part_size`).
const PARTS_IN_FLIGHT: usize = 2;

/// Errors starting the uploader.
#[derive(Debug, thiserror::Error)]
pub enum UploadOpenError {
    /// The store could not be configured.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The manifest could not be read.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

/// What an upload put.
enum Done {
    /// A whole file, and how its segments' deletion went.
    Whole(UploadRecord, Result<usize, JoinError>),
    /// A segment.
    Segment(SegmentRecord),
}

/// The running uploader and its thread.
pub struct Uploads {
    /// The actor.
    pub addr: Addr<UploadActor>,
    arbiter: Arbiter,
}

impl Uploads {
    /// Stops the uploader's thread (uploads in flight are dropped: their
    /// files stay, to be uploaded by the next start).
    pub fn stop(self) {
        self.arbiter.stop();
        if self.arbiter.join().is_err() {
            tracing::error!("the upload thread panicked while stopping");
        }
    }
}

/// The uploader.
pub struct UploadActor {
    target: Target,
    settings: TransferSettings,
    /// The WARC directory, and this node's file prefix in it.
    dir: PathBuf,
    prefix: String,
    manifest: Manifest,
    pending: Pending,
    concurrency: usize,
    delete_after_upload: bool,
    /// Writes `uploaded` events; set once the archive is open.
    archive: Option<Recipient<ArchiveUploaded>>,
    /// Files whose event is being written.
    announcing: BTreeSet<String>,
    /// Answered when nothing is left to do ([`FinishUploads`]).
    waiters: Vec<oneshot::Sender<()>>,
    /// The timer of the next retry.
    wake: Option<SpawnHandle>,
    metrics: Arc<Metrics>,
    /// What the retries' backoff counts on: the node's clock.
    clock: SharedClock,
}

impl UploadActor {
    /// Starts the uploader on its own thread, if `[upload]` is enabled.
    pub fn start(
        config: &Config,
        metrics: Arc<Metrics>,
        clock: SharedClock,
    ) -> Result<Option<Uploads>, UploadOpenError> {
        let u = &config.upload;
        if !u.enabled {
            return Ok(None);
        }
        let target = Target::open(&u.url, &u.options, u.retries)?;
        let manifest = Manifest::open(&config.upload_manifest())?;
        let actor = UploadActor {
            target,
            settings: TransferSettings {
                part_size: u.part_size,
                parts_in_flight: PARTS_IN_FLIGHT,
                verify: u.verify,
            },
            dir: config.data_path(&config.warc.dir),
            prefix: config.warc_prefix(),
            manifest,
            pending: Pending::new(u.retry_delay, u.max_retry_delay),
            concurrency: u.concurrency,
            delete_after_upload: u.delete_after_upload,
            archive: None,
            announcing: BTreeSet::new(),
            waiters: Vec::new(),
            wake: None,
            metrics,
            clock,
        };
        let arbiter = Arbiter::new();
        let addr = UploadActor::start_in_arbiter(&arbiter.handle(), move |_| actor);
        Ok(Some(Uploads { addr, arbiter }))
    }

    /// Queues `file` unless it was uploaded; deletes an uploaded file's
    /// local copy if that is asked for and a crash came in between.
    fn offer(&mut self, file: &str) {
        if !self.manifest.contains(file) {
            self.pending.add(file);
        } else if self.delete_after_upload {
            self.delete_local(file);
        }
    }

    fn delete_local(&self, file: &str) {
        let path = self.dir.join(file);
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::debug!(file, "deleted the uploaded local copy"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot delete an uploaded file")
            }
        }
    }

    /// Starts uploads up to the concurrency, and sets the timer of the
    /// next retry.
    fn kick(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now().at;
        self.metrics.upload_pending.set(self.pending.len() as i64);
        while self.pending.in_flight() < self.concurrency {
            let Some(work) = self.pending.next_ready(now) else {
                break;
            };
            let (target, dir, settings) =
                (self.target.clone(), self.dir.clone(), self.settings.clone());
            let upload = async move {
                let done = match &work {
                    Work::Whole(file) => {
                        match upload_file(target.clone(), dir, file.clone(), settings).await {
                            Ok(record) => {
                                let deleted = delete_segments(&target, file).await;
                                Ok(Done::Whole(record, deleted))
                            }
                            Err(e) => Err(e),
                        }
                    }
                    Work::Segment { file, from, to } => {
                        upload_segment(target, dir, file.clone(), (*from, *to), settings)
                            .await
                            .map(Done::Segment)
                    }
                };
                match done {
                    Ok(done) => Ok((work, done)),
                    Err(e) => Err((work, Some(e))),
                }
            };
            ctx.spawn(
                upload
                    .into_actor(self)
                    .map(move |result, act, ctx| act.finished(result, ctx)),
            );
        }
        if let Some(handle) = self.wake.take() {
            ctx.cancel_future(handle);
        }
        if self.pending.in_flight() < self.concurrency {
            if let Some(wait) = self.pending.next_wake(now) {
                self.wake = Some(ctx.run_later(wait, |act, ctx| {
                    act.wake = None;
                    act.kick(ctx);
                }));
            }
        }
        self.answer_if_idle();
    }

    /// An upload ended.
    fn finished(
        &mut self,
        result: Result<(Work, Done), (Work, Option<UploadError>)>,
        ctx: &mut Context<Self>,
    ) {
        match result {
            Ok((work, Done::Whole(record, deleted))) => {
                self.whole_done(&work, record, deleted, ctx)
            }
            Ok((work, Done::Segment(segment))) => {
                self.pending.done(&work);
                self.metrics
                    .upload_segments
                    .with_label_values(&["ok"])
                    .inc();
                self.metrics.upload_segment_bytes.inc_by(segment.bytes);
                tracing::debug!(key = %segment.key, bytes = segment.bytes, "segment uploaded");
            }
            Err((work, Some(UploadError::Missing(path)))) => {
                self.pending.done(&work);
                self.count(&work, "missing");
                tracing::warn!(path = %path.display(), "a WARC file vanished before its upload");
            }
            Err((work, err)) => {
                self.count(&work, "failed");
                let wait = self.pending.failed(&work, self.clock.now().at);
                let failures = self.pending.failures(&work);
                let file = work.file();
                match err {
                    Some(err) => {
                        tracing::error!(file, ?work, error = %err, failures, retry_in = ?wait, "upload failed; the file is kept and tried again")
                    }
                    None => {
                        tracing::error!(file, failures, retry_in = ?wait, "upload not recorded; tried again")
                    }
                }
            }
        }
        self.kick(ctx);
    }

    /// Counts an upload's `result` on the metric of its kind.
    fn count(&self, work: &Work, result: &str) {
        let metric = match work {
            Work::Whole(_) => &self.metrics.uploads,
            Work::Segment { .. } => &self.metrics.upload_segments,
        };
        metric.with_label_values(&[result]).inc();
    }

    /// A whole file is in object storage, its segments deleted (`deleted`):
    /// recorded in the manifest (fsynced) before its local copy may go.
    fn whole_done(
        &mut self,
        work: &Work,
        record: UploadRecord,
        deleted: Result<usize, JoinError>,
        ctx: &mut Context<Self>,
    ) {
        let file = record.file.clone();
        match deleted {
            Ok(n) => self.metrics.upload_segments_deleted.inc_by(n as u64),
            // Left for the next start's join, which finds them covered.
            Err(e) => {
                tracing::warn!(file, error = %e, "cannot delete the segments of an uploaded file")
            }
        }
        // Durable before anything relies on it.
        if let Err(e) = self.manifest.record(record.clone()) {
            tracing::error!(file, error = %e, "cannot record an upload; it will be uploaded again");
            self.finished(Err((work.clone(), None)), ctx);
            return;
        }
        self.pending.done(work);
        self.metrics.uploads.with_label_values(&["ok"]).inc();
        self.metrics.upload_bytes.inc_by(record.bytes);
        tracing::info!(file, location = %record.location, bytes = record.bytes, "uploaded");
        if self.delete_after_upload {
            self.delete_local(&file);
        }
        self.announce(record, ctx);
    }

    /// Joins the segments of this node's files that are not on this disk
    /// (an earlier run's, lost with its disk) into their files; a failure
    /// is logged and tried again at the next start.
    fn join_earlier_runs(&mut self, ctx: &mut Context<Self>) {
        let (target, dir, prefix) = (self.target.clone(), self.dir.clone(), self.prefix.clone());
        let settings = self.settings.clone();
        let metrics = self.metrics.clone();
        ctx.spawn(
            async move {
                let local = |file: &str| {
                    dir.join(file).exists() || dir.join(format!("{file}.open")).exists()
                };
                let files =
                    files_with_segments(&target, |f| is_own_file(f, &prefix) && !local(f)).await?;
                for file in files {
                    let joined = join_file(&target, &dir, &file, &settings).await?;
                    metrics.upload_segments_deleted.inc_by(joined.segments as u64);
                    if joined.put {
                        metrics.upload_files_joined.inc();
                        tracing::warn!(file, bytes = joined.bytes, segments = joined.segments, "joined the segments an earlier run left (its disk was lost) into its file");
                    }
                }
                Ok::<(), JoinError>(())
            }
            .into_actor(self)
            .map(|result, _, _| {
                if let Err(e) = result {
                    tracing::error!(error = %e, "cannot join the segments an earlier run left; tried again at the next start");
                }
            }),
        );
    }

    /// Has the Archive write `record`'s `uploaded` event, then notes it in
    /// the manifest. Unwritten, it is tried again at the next start.
    fn announce(&mut self, record: UploadRecord, ctx: &mut Context<Self>) {
        let Some(archive) = self.archive.clone() else {
            return;
        };
        if !self.announcing.insert(record.file.clone()) {
            return;
        }
        let file = record.file.clone();
        let sent = archive.send(ArchiveUploaded(record));
        ctx.spawn(sent.into_actor(self).map(move |result, act, _| {
            act.announcing.remove(&file);
            let written = result
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            match written.and_then(|()| act.manifest.announced(&file).map_err(|e| e.to_string())) {
                Ok(()) => {}
                Err(e) => tracing::error!(file, error = %e, "the uploaded event is not recorded; written again at the next start"),
            }
            act.answer_if_idle();
        }));
    }

    /// Nothing to upload and no event being written.
    fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.announcing.is_empty()
    }

    fn answer_if_idle(&mut self) {
        if self.is_idle() {
            for waiter in self.waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

impl Actor for UploadActor {
    type Context = Context<Self>;
}

impl Handler<ArchiveOpened> for UploadActor {
    type Result = ();

    fn handle(&mut self, msg: ArchiveOpened, ctx: &mut Self::Context) {
        self.archive = Some(msg.0);
        match closed_files(&self.dir, &self.prefix) {
            Ok(files) => files.iter().for_each(|f| self.offer(f)),
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot list WARC files to upload")
            }
        }
        for record in self.manifest.unannounced() {
            self.announce(record, ctx);
        }
        self.join_earlier_runs(ctx);
        self.kick(ctx);
    }
}

impl Handler<UploadSegment> for UploadActor {
    type Result = ();

    /// A seal's segment: queued, unless the file went up whole already.
    fn handle(&mut self, msg: UploadSegment, ctx: &mut Self::Context) {
        if !self.manifest.contains(&msg.0.file) {
            self.pending.add_segment(&msg.0);
        }
        self.kick(ctx);
    }
}

impl Handler<WarcClosed> for UploadActor {
    type Result = ();

    fn handle(&mut self, msg: WarcClosed, ctx: &mut Self::Context) {
        self.offer(&msg.file);
        self.kick(ctx);
    }
}

impl Handler<FinishUploads> for UploadActor {
    type Result = ResponseFuture<bool>;

    fn handle(&mut self, msg: FinishUploads, _: &mut Self::Context) -> Self::Result {
        if self.is_idle() {
            return Box::pin(async { true });
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push(tx);
        Box::pin(async move { matches!(tokio::time::timeout(msg.timeout, rx).await, Ok(Ok(()))) })
    }
}

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

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::messages::{ArchiveOpened, ArchiveUploaded, FinishUploads, WarcClosed};
use crate::clock::SharedClock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::upload::manifest::ManifestError;
use crate::upload::{
    closed_files, upload_file, Manifest, Pending, Target, TargetError, TransferSettings,
    UploadError, UploadRecord,
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
            let Some(file) = self.pending.next_ready(now) else {
                break;
            };
            let upload = upload_file(
                self.target.clone(),
                self.dir.clone(),
                file.clone(),
                self.settings.clone(),
            );
            ctx.spawn(
                upload
                    .into_actor(self)
                    .map(move |result, act, ctx| act.finished(file, result, ctx)),
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
        file: String,
        result: Result<UploadRecord, UploadError>,
        ctx: &mut Context<Self>,
    ) {
        let recorded = result.map_err(Some).and_then(|record| {
            // Durable before anything relies on it.
            self.manifest
                .record(record.clone())
                .map(|()| record)
                .map_err(|e| {
                    tracing::error!(file, error = %e, "cannot record an upload; it will be uploaded again");
                    None
                })
        });
        match recorded {
            Ok(record) => {
                self.pending.done(&file);
                self.metrics.uploads.with_label_values(&["ok"]).inc();
                self.metrics.upload_bytes.inc_by(record.bytes);
                tracing::info!(file, location = %record.location, bytes = record.bytes, "uploaded");
                if self.delete_after_upload {
                    self.delete_local(&file);
                }
                self.announce(record, ctx);
            }
            Err(Some(UploadError::Missing(path))) => {
                self.pending.done(&file);
                self.metrics.uploads.with_label_values(&["missing"]).inc();
                tracing::warn!(path = %path.display(), "a closed WARC file vanished before its upload");
            }
            Err(err) => {
                self.metrics.uploads.with_label_values(&["failed"]).inc();
                let wait = self.pending.failed(&file, self.clock.now().at);
                let failures = self.pending.failures(&file);
                match err {
                    Some(err) => {
                        tracing::error!(file, error = %err, failures, retry_in = ?wait, "upload failed; the file is kept and tried again")
                    }
                    None => {
                        tracing::error!(file, failures, retry_in = ?wait, "upload not recorded; tried again")
                    }
                }
            }
        }
        self.kick(ctx);
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

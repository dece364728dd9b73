//! The ownership actor's orders, carried out: take, checkpoint, seal
//! records, drain and stop a partition (with `[cluster] state_url`).

use super::*;
use crate::actors::messages::{
    CheckpointPartition, Checkpointed, DrainPartition, SealArchive, SealRecords, StopPartition,
    TakeCheckpoint, TakePartition, UploadSegment,
};

impl Handler<TakePartition> for Node {
    type Result = Result<(), Failure>;

    fn handle(&mut self, msg: TakePartition, _: &mut Self::Context) -> Self::Result {
        if self.shutting_down {
            return Err(Failure::Mailbox("shutting down".into()));
        }
        if self.schedule.held(msg.id).is_some() {
            return Ok(());
        }
        self.open_held(msg.id, msg.hold_until_ms, msg.covers, Some(msg.lease))
            .map_err(|e| Failure::Store(e.to_string()))?;
        // A new owner's watermarks count on from its checkpoint.
        self.schedule.taken(msg.id, msg.covers);
        tracing::info!(partition = msg.id, "partition taken");
        self.wake_assigned_waiters();
        Ok(())
    }
}

impl Handler<CheckpointPartition> for Node {
    type Result = ResponseActFuture<Self, Result<Checkpointed, Failure>>;

    /// The partition's checkpoint; what it covers is known to the node
    /// machine before it goes on to be published, so a restarted actor
    /// numbers its writes after it ([`NodeScheduler::write_floor`]). None
    /// while the archive's writes fail: the lease gives the partition up
    /// after a lease of that (`ArchiveHealth`).
    fn handle(&mut self, msg: CheckpointPartition, _: &mut Self::Context) -> Self::Result {
        let id = msg.id;
        let Some(held) = self.schedule.held(id) else {
            let reason = format!("partition {id} is not open here");
            return Box::pin(fut::ready(Err(Failure::Peer(reason))));
        };
        let take = TakeCheckpoint {
            dir: msg.dir,
            unless_at: msg.unless_at,
        };
        let taken: futures_util::future::BoxFuture<'static, _> = match self.archive_health.failing()
        {
            false => {
                let send = held.addr.send(take);
                Box::pin(async move { send.await? })
            }
            // Its pages cannot be archived, so nothing of it progresses:
            // a renewal would keep it here for nothing (`ArchiveHealth`),
            // unless a probe (a write and an fsync, off this thread) finds
            // the disk writable again.
            true => {
                let (addr, health) = (held.addr.clone(), self.archive_health.clone());
                Box::pin(async move {
                    let probe = tokio::task::spawn_blocking(move || health.probe());
                    if !probe.await.unwrap_or(false) {
                        let reason = "the archive cannot write (disk full?): no checkpoint";
                        return Err(Failure::Store(reason.to_owned()));
                    }
                    addr.send(take).await?
                })
            }
        };
        Box::pin(taken.into_actor(self).map(move |taken, act, _| {
            if let Ok(Checkpointed::Made { covers, .. } | Checkpointed::Unchanged { covers }) =
                &taken
            {
                act.schedule.checkpoint_taken(id, *covers);
            }
            taken
        }))
    }
}

impl Handler<SealRecords> for Node {
    type Result = ResponseFuture<bool>;

    /// The records of every page completed so far reach object storage:
    /// the archive makes them durable on disk, the uploader puts the open
    /// file's new bytes up as a segment (and any closed file still
    /// pending, whole). The open file stays open, so files grow to their
    /// size target. Without `[upload]` they stay on this node's disk.
    fn handle(&mut self, msg: SealRecords, _: &mut Self::Context) -> Self::Result {
        let Some(uploads) = self.uploads.as_ref().map(|u| u.addr.clone()) else {
            return Box::pin(async { false });
        };
        let seal = self.archive.send(SealArchive);
        Box::pin(async move {
            let sealed = match seal.await {
                Ok(Ok(sealed)) => sealed,
                _ => return false,
            };
            if let Some(sealed) = sealed {
                if uploads.send(UploadSegment(sealed)).await.is_err() {
                    return false;
                }
            }
            uploads
                .send(FinishUploads {
                    timeout: msg.timeout,
                })
                .await
                .unwrap_or(false)
        })
    }
}

impl Handler<DrainPartition> for Node {
    type Result = ResponseFuture<Option<std::time::Duration>>;

    /// No new links reach the partition (they wait in outboxes for its
    /// next owner); its hosts stop and finish what is in flight.
    fn handle(&mut self, msg: DrainPartition, _: &mut Self::Context) -> Self::Result {
        let Some(held) = self.schedule.held(msg.id) else {
            return Box::pin(async { Some(std::time::Duration::ZERO) });
        };
        let drain = held.addr.send(Drain {
            timeout: self.shutdown_timeout,
        });
        self.schedule.releasing(msg.id);
        self.publish_routes();
        Box::pin(async move { drain.await.ok().flatten() })
    }
}

impl Handler<StopPartition> for Node {
    type Result = ResponseFuture<()>;

    /// Closes the partition: after a hand-back, its store marked as ended
    /// cleanly; fenced or lapsed, at once (its hosts die with its actor;
    /// requests in flight end on their own, and the next owner's hold
    /// covers them). Link batches waiting on its durability are refused,
    /// so their senders send them again, to its next owner. Resolves once
    /// its store is closed (the last handle on it dropped), so a later take
    /// of the partition here never restores into a directory an old
    /// instance still writes to.
    fn handle(&mut self, msg: StopPartition, _: &mut Self::Context) -> Self::Result {
        // Dropped, each waiter's admission fails `NotHeld`.
        let (held, waiting) = self.schedule.closed(msg.id);
        self.schedule.released(msg.id);
        self.publish_routes();
        drop(waiting);
        let Some(held) = held else {
            return Box::pin(async {});
        };
        let clean = msg.reason == StopReason::Released;
        let id = msg.id;
        Box::pin(async move {
            if clean {
                sync_stores(vec![held.store.clone()], true).await;
            }
            held.addr.do_send(crate::actors::messages::Retire);
            let store = Arc::downgrade(&held.store);
            drop(held);
            tracing::info!(partition = id, reason = ?msg.reason, "partition closed");
            wait_closed(id, store).await;
        })
    }
}

/// Waits until the last handle on a stopped partition's store is dropped
/// (its hosts and actor have stopped), at most [`CLOSE_WAIT`].
pub(super) async fn wait_closed(id: u16, store: std::sync::Weak<crate::store::PartitionStore>) {
    let deadline = tokio::time::Instant::now() + CLOSE_WAIT;
    while store.strong_count() > 0 {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(partition = id, "a stopped partition's store is still open");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

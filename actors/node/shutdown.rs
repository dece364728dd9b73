//! The node's stop, carried out in the order its plan gives
//! (`scheduler::stop`).

use super::*;
use crate::scheduler::stop::{StopPlan, StopStep, StoreEnd};

/// Drains the node and closes its files. The caller stops the system after.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<ArchiveSnapshot, Failure>")]
pub struct Shutdown;

impl Handler<Shutdown> for Node {
    type Result = ResponseActFuture<Self, Result<ArchiveSnapshot, Failure>>;

    /// Walks the stop's steps in the order its plan gives
    /// ([`StopPlan`]); the plan decides from the drain how the stores and
    /// the run marker are left.
    fn handle(&mut self, _: Shutdown, _: &mut Self::Context) -> Self::Result {
        self.shutting_down = true;
        let cluster_node = self.cluster.is_some();
        let mut plan = StopPlan::new(
            cluster_node,
            self.ownership().is_some(),
            self.uploads.is_some(),
        );
        tracing::info!(
            timeout_s = self.shutdown_timeout.as_secs_f64(),
            "draining: no new requests; waiting for requests in flight"
        );
        // Leave, drain and hand-back are asked at once (a drain does not
        // wait for gossip, nor a hand-back's own drain for this one); the
        // stop waits for them in the plan's order.
        let drain = Drain {
            timeout: self.shutdown_timeout,
        };
        let mut drains: Vec<_> = self.held().map(|h| h.addr.send(drain)).collect();
        let mut stores: Vec<Arc<PartitionStore>> = self.held().map(|h| h.store.clone()).collect();
        let mut leave = self.cluster.as_ref().map(|c| c.controller.send(Leave));
        let mut release = self.ownership().map(|o| {
            o.addr.send(crate::actors::messages::ReleaseAll {
                timeout: self.shutdown_timeout,
            })
        });
        let archive = self.archive.clone();
        let fetcher = self.fetcher.clone();
        let uploads = self.uploads.as_ref().map(|u| u.addr.clone());
        let upload_wait = self.upload_wait;
        let steps = plan.steps();
        let done = async move {
            let mut closed = None;
            for step in steps {
                match step {
                    StopStep::Leave => {
                        if let Some(leave) = leave.take() {
                            let _ = leave.await;
                        }
                    }
                    StopStep::Drain => {
                        let drained =
                            futures_util::future::join_all(std::mem::take(&mut drains)).await;
                        plan.drained(drained.into_iter().all(|d| d.ok().flatten().is_some()));
                    }
                    StopStep::HandBack => {
                        if let Some(release) = release.take() {
                            let released = release.await.unwrap_or(0);
                            tracing::info!(
                                partitions = released,
                                "partitions handed back to the state store"
                            );
                        }
                    }
                    StopStep::Close => {
                        let stores = std::mem::take(&mut stores);
                        let end = plan.store_end();
                        closed = Some(close_together(&archive, &fetcher, stores, end).await?);
                    }
                    StopStep::FinishUploads => {
                        if let Some(uploads) = &uploads {
                            finish_uploads(uploads, upload_wait).await;
                        }
                    }
                    // On the node's own thread, below.
                    StopStep::CloseStores | StopStep::EndRun => {}
                }
            }
            let closed = closed.expect("every plan closes the archive");
            Ok::<_, Failure>((closed, plan))
        };
        Box::pin(done.into_actor(self).map(move |result, act, _| {
            act.close_stores_and_uploads();
            act.metrics.active_hosts.set(0);
            // [`StopStep::EndRun`], if the plan has it and the drain allows.
            if let Ok((_, plan)) = &result {
                if plan.ends_run(true) {
                    if let Err(err) = RunMarker::end(&act.data_dir) {
                        tracing::error!(error = %err, "cannot clear the run marker");
                    }
                }
            }
            result.map(|(snap, _)| snap)
        }))
    }
}

impl Node {
    /// [`StopStep::CloseStores`]: the partitions' threads end, then their
    /// stores close; the uploader's thread stops.
    fn close_stores_and_uploads(&mut self) {
        // The node's own handles on the stores are taken first, so the
        // last ones are dropped below, not when the node is.
        let stores: Vec<Arc<PartitionStore>> = self
            .held_ids()
            .into_iter()
            .filter_map(|id| self.schedule.closed(id).0.map(|h| h.store))
            .collect();
        // The partitions' actors, and their handles, end with their
        // threads; wait for that.
        stop_threads(std::mem::take(&mut self.store_arbiters));
        // Then the RocksDB instances close, before the process exits
        // (which would race the C++ teardown). This blocks the node's
        // thread, like the joins above: it is the stop's last step.
        close_stores(stores);
        // Nothing routes to a partition that is gone.
        self.publish_routes();
        if let Some(uploads) = self.uploads.take() {
            uploads.stop();
        }
    }
}

/// [`StopStep::Close`]: nothing is fetched, archived or completed from
/// here on. The stores' syncs and the archive's close wait on the disk,
/// the connections' teardown is this thread's work: at once, a stop takes
/// the longest of them, not their sum (~0.15 s of the side-by-side
/// bench's 500 hosts). Syncing the stores before the archive bought
/// nothing: neither order is a power-loss guarantee without `sync_writes`
/// (see `durable`). The archive's message goes first: a SyncArbiter's
/// mail is forwarded by this thread, which the teardown then keeps busy.
async fn close_together(
    archive: &Addr<ArchiveActor>,
    fetcher: &Addr<FetcherPool>,
    stores: Vec<Arc<PartitionStore>>,
    end: StoreEnd,
) -> Result<ArchiveSnapshot, Failure> {
    let closed = archive.send(CloseArchive);
    let synced = sync_stores(stores, end == StoreEnd::MarkEnded);
    fetcher.do_send(CloseConnections);
    let (closed, ()) = futures_util::future::join(closed, synced).await;
    closed?
}

/// [`StopStep::FinishUploads`]: the file just closed is among those
/// waited for.
async fn finish_uploads(uploads: &Addr<UploadActor>, wait: Duration) {
    let finished = uploads.send(FinishUploads { timeout: wait }).await;
    if !finished.unwrap_or(false) {
        tracing::warn!("uploads left pending at shutdown; the next start uploads them");
    }
}

/// Starts syncing `stores` (their WALs), each on a blocking thread, at
/// once (a sync waits on the disk; the stores sync together instead of one
/// after another); the future completes when all have. With `mark_ended`,
/// each is marked as ended cleanly ([`PartitionStore::end_run`], which
/// syncs) instead. A store that cannot sync is logged: what it lost is
/// fetched again (see `durable`).
pub(super) fn sync_stores(
    stores: Vec<Arc<PartitionStore>>,
    mark_ended: bool,
) -> impl std::future::Future<Output = ()> {
    let syncs: Vec<_> = stores
        .into_iter()
        .map(|store| {
            tokio::task::spawn_blocking(move || match mark_ended {
                true => store.end_run(),
                false => store.sync(),
            })
        })
        .collect();
    async move {
        for synced in futures_util::future::join_all(syncs).await {
            match synced {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::error!(error = %err, "cannot sync a partition's store"),
                Err(err) => tracing::error!(error = %err, "a partition store's sync failed"),
            }
        }
    }
}

/// Drops `stores`, each on a thread of its own: the last handle on a store
/// closes its RocksDB instance, which waits for the instance's background
/// work and frees its memtables and table readers (~5 ms a store; one
/// after another on the node's thread, ~80 ms of a 16-partition stop).
/// Stops the partitions' threads and waits for them to end (their actors,
/// and the actors' handles on the stores, end with them).
fn stop_threads(arbiters: Vec<Arbiter>) {
    for arbiter in arbiters {
        arbiter.stop();
        if arbiter.join().is_err() {
            tracing::error!("a partition thread panicked while stopping");
        }
    }
}

pub(super) fn close_stores(stores: Vec<Arc<PartitionStore>>) {
    std::thread::scope(|scope| {
        for store in stores {
            scope.spawn(move || drop(store));
        }
    });
}

//! The node's stop, in its one order (see the module's docs of
//! `actors/node.rs`).

use super::*;

/// Drains the node and closes its files. The caller stops the system after.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<ArchiveSnapshot, Failure>")]
pub struct Shutdown;

impl Handler<Shutdown> for Node {
    type Result = ResponseActFuture<Self, Result<ArchiveSnapshot, Failure>>;

    fn handle(&mut self, _: Shutdown, _: &mut Self::Context) -> Self::Result {
        self.shutting_down = true;
        let cluster_node = self.cluster.is_some();
        tracing::info!(
            timeout_s = self.shutdown_timeout.as_secs_f64(),
            "draining: no new requests; waiting for requests in flight"
        );
        let drain = Drain {
            timeout: self.shutdown_timeout,
        };
        let drains: Vec<_> = self.held().map(|h| h.addr.send(drain)).collect();
        let stores: Vec<Arc<PartitionStore>> = self.held().map(|h| h.store.clone()).collect();
        let leave = self.cluster.as_ref().map(|c| c.controller.send(Leave));
        let release = self.ownership().map(|o| {
            o.addr.send(crate::actors::messages::ReleaseAll {
                timeout: self.shutdown_timeout,
            })
        });
        let archive = self.archive.clone();
        let fetcher = self.fetcher.clone();
        let uploads = self.uploads.as_ref().map(|u| u.addr.clone());
        let upload_wait = self.upload_wait;
        let done = async move {
            if let Some(leave) = leave {
                // Peers stop routing to us before we stop taking links.
                let _ = leave.await;
            }
            let drained = futures_util::future::join_all(drains).await;
            let complete = drained.into_iter().all(|d| d.unwrap_or(false));
            if let Some(release) = release {
                // Each partition's final checkpoint, published as a clean
                // hand-back: its next owner restores it and holds only
                // what its hosts still owe.
                let released = release.await.unwrap_or(0);
                tracing::info!(
                    partitions = released,
                    "partitions handed back to the state store"
                );
            }
            // Nothing is fetched, archived or completed from here on. The
            // stores' syncs and the archive's close wait on the disk, the
            // connections' teardown is this thread's work: at once, a stop
            // takes the longest of them, not their sum (~0.15 s of the
            // side-by-side bench's 500 hosts). Syncing the stores before
            // the archive bought nothing: neither order is a power-loss
            // guarantee without `sync_writes` (see `durable`). The
            // archive's message goes first: a SyncArbiter's mail is
            // forwarded by this thread, which the teardown then keeps busy.
            let closed = archive.send(CloseArchive);
            let synced = sync_stores(stores, complete && cluster_node);
            fetcher.do_send(CloseConnections);
            let (closed, ()) = futures_util::future::join(closed, synced).await;
            let closed = closed?;
            if let Some(uploads) = uploads {
                // The file just closed is among those waited for.
                let finished = uploads
                    .send(FinishUploads {
                        timeout: upload_wait,
                    })
                    .await;
                if !finished.unwrap_or(false) {
                    tracing::warn!("uploads left pending at shutdown; the next start uploads them");
                }
            }
            closed.map(|snap| (snap, complete))
        };
        Box::pin(done.into_actor(self).map(move |result, act, _| {
            // The node's own handles on the stores are taken first, so the
            // last ones are dropped below, not when the node is.
            let stores: Vec<Arc<PartitionStore>> = act
                .held_ids()
                .into_iter()
                .filter_map(|id| act.schedule.closed(id).0.map(|h| h.store))
                .collect();
            // The partitions' actors, and their handles, end with their
            // threads; wait for that.
            for arbiter in act.store_arbiters.drain(..) {
                arbiter.stop();
                if arbiter.join().is_err() {
                    tracing::error!("a partition thread panicked while stopping");
                }
            }
            // Then the RocksDB instances close, before the process exits
            // (which would race the C++ teardown). This blocks the node's
            // thread, like the joins above: it is the stop's last step.
            close_stores(stores);
            if let Some(uploads) = act.uploads.take() {
                uploads.stop();
            }
            act.metrics.active_hosts.set(0);
            // Requests abandoned at the timeout may still be served: the
            // marker stays, so the next run treats this stop as a crash and
            // every host waits its last delay again before its first request.
            if let (Ok((_, true)), false) = (&result, cluster_node) {
                if let Err(err) = RunMarker::end(&act.data_dir) {
                    tracing::error!(error = %err, "cannot clear the run marker");
                }
            }
            result.map(|(snap, _)| snap)
        }))
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
pub(super) fn close_stores(stores: Vec<Arc<PartitionStore>>) {
    std::thread::scope(|scope| {
        for store in stores {
            scope.spawn(move || drop(store));
        }
    });
}

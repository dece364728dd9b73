//! Link batches: the held partitions' outboxes sent where the node
//! machine routes them, and batches admitted here answered once durable
//! (at once without a checkpoint chain; once a published checkpoint
//! covers them with one).

use super::*;

impl Node {
    /// Sends what waits in the held partitions' outboxes to the owners of
    /// its partitions (this node's own partitions included), and deletes
    /// each batch once its owner admitted it; what is read and sent is the
    /// scheduler's (`scheduler::outbox`).
    pub(super) fn send_outboxes(&mut self, ctx: &mut Context<Self>) {
        if self.cluster.is_none() {
            return;
        }
        let pass = self.schedule.outbox_mut().pass();
        let mut sends = Vec::new();
        let mut readings = Vec::new();
        for (id, held) in self.schedule.iter() {
            let mut reading = self.schedule.outbox().read(id, pass);
            loop {
                let page = match held.store.outbox_page(reading.after(), OUTBOX_PAGE) {
                    Ok(page) => page,
                    Err(err) => {
                        tracing::error!(partition = id, error = %err, "cannot read the outbox");
                        reading.held_back();
                        break;
                    }
                };
                let full = page.len() == OUTBOX_PAGE;
                for pending in page {
                    let key = pending.key;
                    if self.schedule.outbox().saw(&mut reading, key) == Batch::OnItsWay {
                        continue;
                    }
                    let Some(send) = self.deliver(pending.batch) else {
                        reading.held_back();
                        continue;
                    };
                    reading.sent();
                    sends.push(((id, key), held.store.clone(), send));
                }
                if !reading.more(full) {
                    break;
                }
            }
            readings.push(reading);
        }
        for reading in readings {
            self.schedule.outbox_mut().finish(reading);
        }
        for ((id, key), store, send) in sends {
            self.schedule.outbox_mut().sending(id, key);
            ctx.spawn(send.into_actor(self).map(move |result, act, _| {
                let done = result
                    .map_err(|e| e.to_string())
                    .and_then(|()| store.outbox_done(&[key]).map_err(|e| e.to_string()));
                if let Err(err) = &done {
                    tracing::debug!(partition = id, error = %err, "an outbox batch is sent again");
                }
                act.schedule.outbox_mut().answered(id, key, done.is_ok());
            }));
        }
    }

    /// Delivers `batch` to its partition's owner, where the scheduler
    /// routes it: admitted here if this node holds it, sent through the
    /// bridge if another owns it. `None` while it has nowhere to go.
    pub(super) fn deliver(
        &self,
        batch: OutboxBatch,
    ) -> Option<futures_util::future::BoxFuture<'static, Result<(), Failure>>> {
        let cluster = self.cluster.as_ref()?;
        match self.schedule.route_of(batch.partition) {
            Route::Here => Some(self.admit_durably(batch.partition, batch.entries)),
            Route::Peer(peer) => {
                let send = cluster.bridge.send(SendBatch {
                    peer,
                    partition: batch.partition,
                    entries: batch.entries.iter().map(WireEntry::from).collect(),
                });
                Some(Box::pin(async move { send.await? }))
            }
            Route::Nowhere => None,
        }
    }
}

impl Handler<RemoteAdmit> for Node {
    type Result = ResponseFuture<Result<(), Failure>>;

    fn handle(&mut self, msg: RemoteAdmit, _: &mut Self::Context) -> Self::Result {
        let entries: Vec<_> = msg.entries.into_iter().map(Into::into).collect();
        self.admit_durably(msg.partition, entries)
    }
}

impl Node {
    /// Admits a link batch into held partition `id`; resolves once the
    /// sender may forget it: at once without a checkpoint chain, else once
    /// a published checkpoint covers the admission (an owner lost before
    /// that loses nothing the sender does not still have).
    pub(super) fn admit_durably(
        &self,
        id: u16,
        entries: Vec<crate::store::AdmitEntry>,
    ) -> futures_util::future::BoxFuture<'static, Result<(), Failure>> {
        let Some(held) = self.schedule.held(id) else {
            return Box::pin(async move { Err(Failure::NotHeld { partition: id }) });
        };
        if !self.schedule.durable() {
            let admit = held.addr.send(AdmitBatch { entries });
            return Box::pin(async move { admit.await?.map(drop) });
        }
        let marked = self.admit_marked(id, entries);
        Box::pin(async move {
            marked
                .await?
                .await
                .map_err(|_| Failure::NotHeld { partition: id })
        })
    }

    /// With a checkpoint chain, admits `entries` into held partition `id`
    /// and registers for the write's durability: resolves, once the
    /// admission is written, to a receiver that resolves when a published
    /// checkpoint covers it (dropped if the partition is lost first). An
    /// empty batch is a marker: its write number follows every write made
    /// to the partition before it.
    pub(super) fn admit_marked(
        &self,
        id: u16,
        entries: Vec<crate::store::AdmitEntry>,
    ) -> futures_util::future::BoxFuture<'static, Result<oneshot::Receiver<()>, Failure>> {
        let Some(held) = self.schedule.held(id) else {
            return Box::pin(async move { Err(Failure::NotHeld { partition: id }) });
        };
        let admit = held
            .addr
            .send(crate::actors::messages::AdmitMarked { entries });
        let admitter = held.addr.clone();
        let node = self.self_addr.clone();
        Box::pin(async move {
            let seq = admit.await??;
            node.send(AwaitDurable { id, seq, admitter })
                .await?
                .ok_or(Failure::NotHeld { partition: id })
        })
    }

    /// Resolves once a published checkpoint of each of `partitions` (held
    /// here) covers everything written to it before this call; at once
    /// without a checkpoint chain. Their checkpoints are hurried, so this
    /// waits a tenth of `checkpoint_interval`
    /// ([`crate::cluster::lease::HURRY_GAP`]) after each partition's last
    /// publication, at most an interval (one already being taken may not
    /// cover the write).
    pub(super) fn published(
        &self,
        partitions: Vec<u16>,
    ) -> futures_util::future::BoxFuture<'static, Result<(), Failure>> {
        if !self.schedule.durable() || partitions.is_empty() {
            return Box::pin(async { Ok(()) });
        }
        let marks: Vec<_> = partitions
            .iter()
            .map(|&id| (id, self.admit_marked(id, Vec::new())))
            .collect();
        let ownership = self.ownership().map(|o| o.addr.clone());
        Box::pin(async move {
            let mut covered = Vec::with_capacity(marks.len());
            for (id, mark) in marks {
                covered.push((id, mark.await?));
            }
            // Only now: a checkpoint taken before a marker's write would
            // not cover it.
            if let Some(ownership) = ownership {
                ownership.do_send(crate::actors::messages::Hurry { partitions });
            }
            for (id, rx) in covered {
                rx.await.map_err(|_| Failure::NotHeld { partition: id })?;
            }
            Ok(())
        })
    }

    /// With nothing left to fetch here, has the partitions whose link
    /// batches wait on a checkpoint checkpointed now.
    pub(super) fn hurry_checkpoints(&self) {
        let Some(o) = self.ownership() else {
            return;
        };
        let partitions = self.schedule.awaiting_checkpoint();
        if !partitions.is_empty() {
            o.addr
                .do_send(crate::actors::messages::Hurry { partitions });
        }
    }
}

/// Registers for the durability of write `seq` of partition `id`: a
/// receiver that resolves when a published checkpoint covers it (`None` if
/// the partition is not held here, or not by the actor that admitted: a
/// later owner's write numbers say nothing of the stopped one's writes).
#[derive(Message)]
#[rtype(result = "Option<oneshot::Receiver<()>>")]
struct AwaitDurable {
    id: u16,
    seq: u64,
    admitter: Addr<PartitionActor>,
}

impl Handler<AwaitDurable> for Node {
    type Result = Option<oneshot::Receiver<()>>;

    fn handle(&mut self, msg: AwaitDurable, _: &mut Self::Context) -> Self::Result {
        let held = self.schedule.held(msg.id)?;
        if held.addr != msg.admitter {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        if let Some(tx) = self.schedule.admitted(msg.id, msg.seq, tx) {
            let _ = tx.send(());
        }
        Some(rx)
    }
}

impl Handler<crate::actors::messages::DurableUpTo> for Node {
    type Result = ();

    fn handle(&mut self, msg: crate::actors::messages::DurableUpTo, _: &mut Self::Context) {
        for tx in self.schedule.covered(msg.id, msg.covers) {
            let _ = tx.send(());
        }
    }
}

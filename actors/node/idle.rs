//! The end of a crawl: a single node decides it from its partitions'
//! snapshots, asked for when a partition's queue runs empty
//! (`QueueEmptied`) and on a slow safety poll (`scheduler::idle`); a
//! cluster node reports its work and hears the cluster's end.

use super::*;

impl Node {
    pub(super) fn poll_partitions(&mut self, ctx: &mut Context<Self>) {
        self.supervise_partitions();
        self.metrics.partitions_held.set(self.held().count() as i64);
        let asks: Vec<_> = self
            .held()
            .map(|h| h.addr.send(GetPartitionSnapshot))
            .collect();
        let gather = futures_util::future::join_all(asks);
        ctx.spawn(gather.into_actor(self).map(|snaps, act, _| {
            let mut totals = Totals::default();
            // A partition that did not answer (it failed, and is being
            // restarted) may hold work: the node is not idle then.
            let all_answered = snaps.iter().all(Result::is_ok);
            for snap in snaps.into_iter().flatten() {
                totals.queued += snap.queued + snap.refresh_due.now;
                totals.completed += snap.completed;
                totals.active_hosts += snap.active_hosts;
            }
            let idle = totals.idle(all_answered);
            if idle {
                act.hurry_checkpoints();
            }
            match &act.cluster {
                // A cluster node is idle when the cluster is (ClusterIdle).
                Some(c) => c.controller.do_send(LocalWork {
                    idle: idle && act.outboxes_empty(),
                    activity: totals.completed,
                }),
                None if idle => {
                    for waiter in act.idle_waiters.drain(..) {
                        let _ = waiter.send(());
                    }
                }
                None => {}
            }
        }));
    }
}

impl Handler<QueueEmptied> for Node {
    type Result = ();

    /// A partition ran out of work: whoever waits for the end hears of it
    /// from a poll now, not from the next one.
    fn handle(&mut self, _: QueueEmptied, ctx: &mut Self::Context) {
        if !self.idle_waiters.is_empty() {
            self.poll_partitions(ctx);
        }
    }
}

impl Handler<ClusterIdle> for Node {
    type Result = ();

    fn handle(&mut self, _: ClusterIdle, _: &mut Self::Context) {
        for waiter in self.idle_waiters.drain(..) {
            let _ = waiter.send(());
        }
    }
}

/// Resolves once nothing is queued or in flight anywhere on the node.
///
/// A URL leaves the queue only after its links are admitted, so "nothing
/// queued" also means nothing in flight or in processing.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct WhenIdle;

impl Handler<WhenIdle> for Node {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: WhenIdle, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.idle_waiters.push(tx);
        // Answer from fresh snapshots, not the last poll's.
        self.poll_partitions(ctx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

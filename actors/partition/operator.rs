//! The partition's operator side: blocks, slow-downs, host snapshots,
//! queues and listings (what the admin API asks of one partition). Split
//! from the partition's file to keep the crawl path readable; the same
//! actor.

use actix::prelude::*;

use super::PartitionActor;
use crate::actors::messages::{
    ArchiveRemoval, AskHost, BlockOutcome, Crash, Failure, GetHostSnapshot, HostAnswer, HostAsk,
    HostPage, HostSnapshot, ListHosts, SetBlock, SlowDown,
};
use crate::frontier::blocks::BlockTarget;
use crate::frontier::host::Removed;
use crate::frontier::importance::Arrivals;
use crate::frontier::listing::{self, HostRow};
use crate::frontier::LEVELS;
use crate::politeness::slowdown::Slowdown;
use crate::store::Removal;

impl Handler<SetBlock> for PartitionActor {
    type Result = Result<BlockOutcome, Failure>;

    fn handle(&mut self, msg: SetBlock, ctx: &mut Self::Context) -> Self::Result {
        let stored = self
            .store
            .set_block(&msg.target, msg.blocked)
            .map_err(|e| Failure::Store(e.to_string()));
        if stored.is_err() {
            self.store_errors += 1;
        }
        stored?;
        self.blocks.set(msg.target.clone(), msg.blocked);
        let hosts = self.hosts_covered(&msg.target);
        if !msg.blocked {
            tracing::info!(
                partition = self.id,
                target = msg.target.name(),
                "unblocked by the operator"
            );
            for host in &hosts {
                self.activation.unblock(host);
                self.wake(host, Arrivals::levels(u8::MAX), ctx);
            }
            return Ok(BlockOutcome { dropped: 0 });
        }
        tracing::info!(
            partition = self.id,
            target = msg.target.name(),
            hosts = hosts.len(),
            "blocked by the operator"
        );
        // At once: an active host's actor stops now. A request of it still
        // waiting for the fetch gate or a slot is never started (its asker
        // is gone); one already on the wire ends unread. When unblocked,
        // the host comes back owing its last delay, as after a crash.
        let mut dropped = 0;
        for host in &hosts {
            self.stop_host(host);
            dropped += self.drop_blocked(host)?;
        }
        Ok(BlockOutcome { dropped })
    }
}

impl PartitionActor {
    /// The hosts of this partition `target` covers: active, dormant, or
    /// with queued URLs in the store.
    fn hosts_covered(&self, target: &BlockTarget) -> Vec<String> {
        let mut hosts: std::collections::BTreeSet<String> = self
            .activation
            .hosts()
            .into_iter()
            .filter(|h| target.covers(h))
            .collect();
        if let Ok(queued) = self.store.queued_by_host() {
            hosts.extend(queued.into_keys().filter(|h| target.covers(h)));
        }
        hosts.into_iter().collect()
    }

    /// Stops a blocked host's actor, if active; holds it back (out of the
    /// due index) until unblocked.
    fn stop_host(&mut self, host: &str) {
        if let Some(addr) = self.hosts.remove(host) {
            addr.do_send(Crash);
        }
        self.activation.block(host);
        self.report_hosts();
    }

    /// Drops a blocked host's queued URLs, each with a `removed` event.
    fn drop_blocked(&mut self, host: &str) -> Result<usize, Failure> {
        let now_ms = self.clock.now().unix_ms();
        let dropped = self.store.drop_queued(host, now_ms).map_err(|e| {
            self.store_errors += 1;
            Failure::Store(e.to_string())
        })?;
        let n = dropped.len();
        self.dequeued(n as u64);
        for d in dropped {
            let Ok(url) = url::Url::parse(&d.url) else {
                continue;
            };
            self.pipeline.removed.do_send(ArchiveRemoval(Removed {
                url,
                reason: Removal::Blocked,
                last_status: None,
                depth: d.depth,
                at_ms: now_ms,
            }));
        }
        self.report_partition();
        Ok(n)
    }
}

impl Handler<AskHost> for PartitionActor {
    type Result = ResponseFuture<Result<HostAnswer, Failure>>;

    fn handle(&mut self, msg: AskHost, _: &mut Self::Context) -> Self::Result {
        let AskHost { host, ask } = msg;
        match ask {
            HostAsk::Snapshot => {
                let snapshot = self.snapshot_of(&host);
                Box::pin(async move { Ok(HostAnswer::Snapshot(snapshot.await?)) })
            }
            HostAsk::Queue { limit } => {
                let queue = self
                    .store
                    .host_queue(&host, limit)
                    .map_err(|e| Failure::Store(e.to_string()));
                let snapshot = self.snapshot_of(&host);
                Box::pin(async move { Ok(HostAnswer::Queue(queue?, snapshot.await?)) })
            }
            HostAsk::SlowDown(slowdown) => {
                if let Err(err) = self.store.set_slowdown(&host, slowdown.as_ref()) {
                    self.store_errors += 1;
                    let failure = Failure::Store(err.to_string());
                    return Box::pin(async move { Err(failure) });
                }
                tracing::info!(
                    partition = self.id,
                    host,
                    ?slowdown,
                    "slow-down set by the operator"
                );
                match slowdown {
                    Some(s) => self.slowdowns.insert(host.clone(), s),
                    None => self.slowdowns.remove(&host),
                };
                let snapshot = match self.hosts.get(&host) {
                    Some(addr) => {
                        let ask = addr.send(SlowDown(slowdown));
                        Box::pin(async move { Ok(ask.await?) })
                    }
                    None => self.snapshot_of(&host),
                };
                Box::pin(async move { Ok(HostAnswer::Snapshot(snapshot.await?)) })
            }
        }
    }
}

impl Handler<ListHosts> for PartitionActor {
    type Result = ResponseFuture<HostPage>;

    /// Rows of the active hosts (their actors' snapshots), the dormant ones
    /// in the due index and those held back by a block (one read of the
    /// stored state each); queue sizes from the per-host totals (one scan
    /// of the counts, never of a queue).
    fn handle(&mut self, msg: ListHosts, _: &mut Self::Context) -> Self::Result {
        let query = msg.0;
        let asks: Vec<_> = self
            .hosts
            .values()
            .map(|addr| addr.send(GetHostSnapshot { count_queue: false }))
            .collect();
        let queued = self.store.queued_by_host().unwrap_or_else(|err| {
            tracing::warn!(partition = self.id, %err, "cannot read the queue sizes");
            Default::default()
        });
        let now = self.clock.now();
        let now_ms = now.unix_ms();
        let mut rows = Vec::new();
        for (host, due_ms) in self.activation.dormant_hosts() {
            let host = host.as_str();
            let snapshot = match self.stored_snapshot(host, false, now) {
                Ok(snapshot) => snapshot,
                Err(err) => {
                    tracing::warn!(partition = self.id, host, %err, "cannot list host");
                    continue;
                }
            };
            let due_in = due_ms.map_or(0, |d| d.saturating_sub(now_ms));
            let mut row = HostRow::of(&snapshot, self.blocks.blocks(host), due_in);
            row.queued = queued.get(host).copied().unwrap_or(0);
            rows.push(row);
        }
        Box::pin(async move {
            let snapshots = futures_util::future::join_all(asks).await;
            for snapshot in snapshots.into_iter().flatten() {
                let mut row = HostRow::of(&snapshot, false, 0);
                row.queued = queued.get(&snapshot.host).copied().unwrap_or(0);
                rows.push(row);
            }
            listing::select(rows, &query)
        })
    }
}

impl PartitionActor {
    /// The snapshot of `host`: its actor's, or what the store knows.
    fn snapshot_of(
        &self,
        host: &str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<HostSnapshot, Failure>>>> {
        if let Some(addr) = self.hosts.get(host) {
            let ask = addr.send(GetHostSnapshot { count_queue: true });
            return Box::pin(async move { Ok(ask.await?) });
        }
        let result = self.stored_snapshot(host, true, self.clock.now());
        Box::pin(async move { result })
    }

    /// The snapshot of a host without an actor, from its stored state;
    /// with `count_queue`, its queue counted by priority (a scan of it),
    /// as [`GetHostSnapshot`] does for an active host.
    fn stored_snapshot(
        &self,
        host: &str,
        count_queue: bool,
        now: crate::clock::Now,
    ) -> Result<HostSnapshot, Failure> {
        let fail = |e: crate::store::StoreError| Failure::Store(e.to_string());
        let state = self.store.host_state(host).map_err(fail)?;
        let queued = match count_queue {
            true => self.store.queued_by_priority(host).map_err(fail)?,
            false => [0; LEVELS],
        };
        let slowdown = self.slowdown_of(host);
        Ok(HostSnapshot::dormant(
            host,
            &state,
            queued,
            &self.settings,
            slowdown,
            now,
        ))
    }

    /// The operator's slow-down of `host`, if any.
    pub(super) fn slowdown_of(&self, host: &str) -> Option<Slowdown> {
        self.slowdowns.get(host).copied()
    }
}

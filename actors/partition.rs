//! PartitionActor: owns one partition's store and supervises its hosts.
//!
//! The only writer of its RocksDB instance: admissions, completions and
//! host state all go through its mailbox, so every write is ordered. It
//! activates a HostActor when a host has queued work and passivates it when
//! the host reports idle (its state goes back to the store), so dormant
//! hosts cost no memory. Host actors run on the partition's arbiter.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use actix::prelude::*;

use super::host::{HostActor, HostLinks, HostSettings};
use super::messages::{
    AdmitBatch, Complete, Drain, DrainHost, Failure, GetHost, GetHostSnapshot,
    GetPartitionSnapshot, HostIdle, HostSnapshot, PartitionSnapshot, PolitenessSnapshot,
    SaveHostState, Wake,
};
use crate::metrics::Metrics;
use crate::politeness::Schedule;
use crate::store::{Completion, PartitionStore};
use crate::url::Fingerprint;

/// The downstream recipients every host of the node shares.
#[derive(Clone)]
pub struct PipelineLinks {
    /// FetcherPool.
    pub fetch: Recipient<super::messages::Fetch>,
    /// ParserPool: HTML.
    pub parse: Recipient<super::messages::Parse>,
    /// ParserPool: sitemaps.
    pub parse_sitemap: Recipient<super::messages::ParseSitemap>,
    /// Archive.
    pub archive: Recipient<super::messages::Archive>,
    /// SeenSet.
    pub discover: Recipient<super::messages::Discover>,
}

struct ActiveHost {
    addr: Addr<HostActor>,
    /// Bumped by every wake; a host idle at an older generation has work.
    generation: u64,
}

/// One partition.
pub struct PartitionActor {
    id: u16,
    store: Arc<PartitionStore>,
    settings: Arc<HostSettings>,
    pipeline: PipelineLinks,
    hosts: HashMap<String, ActiveHost>,
    /// Queued, not completed (mirrors the store's queue size).
    queued: u64,
    /// Completed since start.
    completed: u64,
    /// Draining: no new hosts are activated; work stays queued.
    draining: bool,
    /// Completions waiting for the next write.
    pending: PendingCompletions,
    metrics: Arc<Metrics>,
}

/// Completions are written together: those arriving within
/// [`COMPLETE_AFTER`] (or [`COMPLETE_AT`] of them) share one write batch,
/// and each is acknowledged once that batch is written. A crash before the
/// write leaves them queued, to be fetched again, like any request in
/// flight.
#[derive(Default)]
struct PendingCompletions {
    completions: Vec<Completion>,
    schedules: Vec<(String, Schedule)>,
    waiters: Vec<oneshot::Sender<Result<(), Failure>>>,
    armed: bool,
}

/// Completions written at once at most...
const COMPLETE_AT: usize = 256;
/// ...or after this wait since the first one.
const COMPLETE_AFTER: Duration = Duration::from_millis(1);

impl PartitionActor {
    /// A partition over an opened store.
    pub fn new(
        id: u16,
        store: Arc<PartitionStore>,
        settings: Arc<HostSettings>,
        pipeline: PipelineLinks,
        metrics: Arc<Metrics>,
    ) -> Self {
        PartitionActor {
            id,
            store,
            settings,
            pipeline,
            hosts: HashMap::new(),
            queued: 0,
            completed: 0,
            draining: false,
            pending: PendingCompletions::default(),
            metrics,
        }
    }

    /// Tells `host` it has new work at the priority `levels` (a bit per
    /// level), activating its actor if needed.
    fn wake(&mut self, host: &str, levels: u8, ctx: &mut Context<Self>) {
        if let Some(active) = self.hosts.get_mut(host) {
            active.generation += 1;
            active.addr.do_send(Wake {
                generation: active.generation,
                levels,
            });
            return;
        }
        if self.draining {
            return;
        }
        let state = match self.store.host_state(host) {
            Ok(state) => state,
            Err(err) => {
                tracing::error!(partition = self.id, host, error = %err, "cannot load host state");
                Default::default()
            }
        };
        let me = ctx.address();
        let links = HostLinks {
            pipeline: self.pipeline.clone(),
            complete: me.clone().recipient(),
            idle: me.clone().recipient(),
            save: me.recipient(),
        };
        let addr = HostActor::new(
            host.to_owned(),
            self.store.clone(),
            self.settings.clone(),
            links,
            state,
            self.metrics.clone(),
        )
        .start();
        self.metrics.active_hosts.inc();
        self.hosts.insert(
            host.to_owned(),
            ActiveHost {
                addr,
                generation: 0,
            },
        );
    }

    fn snapshot(&self) -> PartitionSnapshot {
        PartitionSnapshot {
            id: self.id,
            queued: self.queued,
            completed: self.completed,
            active_hosts: self.hosts.len(),
            draining: self.draining,
        }
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(usize::MAX);
        match self.store.queued_by_host() {
            Ok(hosts) => {
                self.queued = hosts.values().sum();
                self.metrics.frontier_size.add(self.queued as i64);
                for host in hosts.keys() {
                    self.wake(host, u8::MAX, ctx);
                }
                if !hosts.is_empty() {
                    tracing::info!(
                        partition = self.id,
                        hosts = hosts.len(),
                        queued = self.queued,
                        "resuming queued work"
                    );
                }
            }
            Err(err) => {
                tracing::error!(partition = self.id, error = %err, "cannot scan the queue");
            }
        }
    }

    fn stopping(&mut self, _: &mut Self::Context) -> Running {
        // Completions waiting for their timer are written, not dropped.
        self.flush_completions();
        Running::Stop
    }
}

impl Handler<AdmitBatch> for PartitionActor {
    type Result = Result<Vec<Fingerprint>, Failure>;

    fn handle(&mut self, msg: AdmitBatch, ctx: &mut Self::Context) -> Self::Result {
        let outcome = self.store.admit(msg.entries).map_err(|err| {
            tracing::error!(partition = self.id, error = %err, "admit failed");
            Failure::Store(err.to_string())
        })?;
        for over in &outcome.over_budget {
            self.metrics
                .urls_dropped
                .with_label_values(&[over.label()])
                .inc();
        }
        let filter = outcome.filter;
        for (result, n) in [
            ("absent", filter.absent),
            ("maybe_seen", filter.maybe_seen),
            ("false_positive", filter.false_positive),
        ] {
            self.metrics
                .seen_filter
                .with_label_values(&[result])
                .inc_by(n);
        }
        let admitted = outcome.entries;
        self.queued += admitted.len() as u64;
        self.metrics.frontier_size.add(admitted.len() as i64);
        let mut hosts: BTreeMap<&str, u8> = BTreeMap::new();
        for e in &admitted {
            *hosts.entry(e.host.as_str()).or_default() |= 1 << e.priority.level();
        }
        for (host, levels) in hosts {
            self.wake(host, levels, ctx);
        }
        // admit() returns entries sorted by fingerprint.
        Ok(admitted.into_iter().map(|e| e.fp).collect())
    }
}

impl PartitionActor {
    /// Writes the pending completions in one batch and answers their
    /// senders.
    fn flush_completions(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if pending.completions.is_empty() {
            return;
        }
        let schedules: Vec<(&str, &Schedule)> = pending
            .schedules
            .iter()
            .map(|(host, schedule)| (host.as_str(), schedule))
            .collect();
        let result = self
            .store
            .complete(&pending.completions, &schedules)
            .map_err(|err| {
                tracing::error!(partition = self.id, error = %err, "complete failed");
                Failure::Store(err.to_string())
            });
        if result.is_ok() {
            let n = pending.completions.len() as u64;
            self.queued = self.queued.saturating_sub(n);
            self.completed += n;
            self.metrics.frontier_size.sub(n as i64);
        }
        for waiter in pending.waiters {
            let _ = waiter.send(result.clone());
        }
    }
}

impl Handler<Complete> for PartitionActor {
    type Result = ResponseFuture<Result<(), Failure>>;

    fn handle(&mut self, msg: Complete, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.pending.completions.push(msg.completion);
        self.pending.schedules.push((msg.host, msg.schedule));
        self.pending.waiters.push(tx);
        if self.pending.completions.len() >= COMPLETE_AT {
            self.flush_completions();
        } else if !self.pending.armed {
            self.pending.armed = true;
            ctx.run_later(COMPLETE_AFTER, |act, _| act.flush_completions());
        }
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(Failure::Mailbox("a completion was dropped".into())))
        })
    }
}

impl Handler<HostIdle> for PartitionActor {
    type Result = bool;

    fn handle(&mut self, msg: HostIdle, _: &mut Self::Context) -> bool {
        let current = self.hosts.get(&msg.host).map(|h| h.generation);
        if current != Some(msg.generation) {
            return false;
        }
        if let Err(err) = self.store.save_host_state(&msg.host, &msg.state) {
            tracing::error!(partition = self.id, host = %msg.host, error = %err, "cannot save host state");
        }
        self.hosts.remove(&msg.host);
        self.metrics.active_hosts.dec();
        true
    }
}

impl Handler<SaveHostState> for PartitionActor {
    type Result = Result<(), Failure>;

    fn handle(&mut self, msg: SaveHostState, _: &mut Self::Context) -> Self::Result {
        self.store
            .save_host_state(&msg.host, &msg.state)
            .map_err(|e| Failure::Store(e.to_string()))
    }
}

impl Handler<Drain> for PartitionActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: Drain, _: &mut Self::Context) -> Self::Result {
        self.draining = true;
        let drains: Vec<_> = self
            .hosts
            .iter()
            .map(|(host, h)| {
                let drained = h.addr.send(DrainHost);
                let host = host.clone();
                async move { (host, drained.await) }
            })
            .collect();
        let store = self.store.clone();
        let id = self.id;
        let drained = async move {
            // A host that passivated meanwhile answers with a closed mailbox:
            // it had nothing in flight and saved its state when it went.
            for (host, drained) in futures_util::future::join_all(drains).await {
                if let Ok(state) = drained {
                    if let Err(err) = store.save_host_state(&host, &state) {
                        tracing::error!(partition = id, host, error = %err, "cannot save host state");
                    }
                }
            }
        };
        Box::pin(drained.into_actor(self).map(|(), act, _| {
            // Hosts drain only once their completions are acknowledged, so
            // none should be pending; write any that are before the sync.
            act.flush_completions();
            if let Err(err) = act.store.sync() {
                tracing::error!(partition = act.id, error = %err, "cannot sync the store");
            }
        }))
    }
}

impl Handler<GetPartitionSnapshot> for PartitionActor {
    type Result = MessageResult<GetPartitionSnapshot>;

    fn handle(&mut self, _: GetPartitionSnapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

impl Handler<GetHost> for PartitionActor {
    type Result = ResponseFuture<Result<HostSnapshot, Failure>>;

    fn handle(&mut self, msg: GetHost, _: &mut Self::Context) -> Self::Result {
        if let Some(active) = self.hosts.get(&msg.host) {
            let ask = active.addr.send(GetHostSnapshot);
            return Box::pin(async move { Ok(ask.await?) });
        }
        // Dormant: what the store knows.
        let result = stored_snapshot(&self.store, &msg.host, &self.settings);
        Box::pin(async move { result })
    }
}

/// The snapshot of a host without an actor, from its stored state.
fn stored_snapshot(
    store: &PartitionStore,
    host: &str,
    settings: &HostSettings,
) -> Result<HostSnapshot, Failure> {
    let fail = |e: crate::store::StoreError| Failure::Store(e.to_string());
    let state = store.host_state(host).map_err(fail)?;
    let queued = store.queued_by_priority(host).map_err(fail)?;
    let now = std::time::SystemTime::now();
    let now_ms = crate::politeness::unix_ms(now);
    let token = &settings.robots.product_token;
    let robots: Vec<_> = state
        .robots
        .iter()
        .map(|(origin, record)| crate::robots::RobotsSummary::of(origin, record, token))
        .collect();
    let schedule = state.schedule.unwrap_or_default();
    Ok(HostSnapshot {
        host: host.to_owned(),
        active: false,
        politeness: PolitenessSnapshot {
            in_flight: 0,
            next_allowed_in_ms: schedule.next_allowed_ms.saturating_sub(now_ms),
            failures: schedule.failures,
            parked: schedule.parked_until_ms > now_ms,
            crawl_delay_ms: robots.iter().find_map(|r| r.crawl_delay_ms),
        },
        robots,
        robots_failing: Vec::new(),
        queued_by_priority: queued,
        head: 0,
        processing: 0,
    })
}

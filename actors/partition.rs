//! PartitionActor: owns one partition's store and supervises its hosts.
//!
//! The only writer of its RocksDB instance: admissions, completions and
//! host state all go through its mailbox, so every write is ordered.
//!
//! Hosts with queued work are active (a HostActor) or dormant in the due
//! index, by the time they next have something to do. Which hosts start
//! when is decided by an [`Activation`] (`src/frontier/activation.rs`: due
//! order, the node-wide cap of [`crate::frontier::due::ActiveSlots`],
//! generations, the hold after a restart or takeover); this actor starts,
//! wakes and stops the host actors it names. A host that
//! is idle, or waiting longer than `passivate_after`, hands its state back
//! (and its due time, persisted with it) and leaves. Opening a partition
//! only fills the index: no host is activated before it is due and has a
//! slot. A host actor that dies is noticed by a periodic check and comes
//! back from the store (its queue is durable; its in-flight request, if
//! any, is fetched again). Host actors run on the partition's arbiter.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use actix::prelude::*;

mod operator;

use super::host::HostActor;
use super::messages::{
    AdmitBatch, AdmitMarked, AdmitReply, Checkpointed, Complete, Crash, CrashHost, DigestQuery,
    Drain, DrainHost, Failure, GetPartitionSnapshot, HoldHost, HostIdle, HostLinks,
    PartitionSnapshot, PipelineLinks, QueueEmptied, SaveHostState, TakeCheckpoint, Wake, YieldSlot,
};
use crate::clock::SharedClock;
use crate::dedup::exact::{ClaimBook, DigestReply};
use crate::frontier::activation::{Activation, Step};
use crate::frontier::batching::{CompletionBatching, Flush};
use crate::frontier::blocks::BlockList;
use crate::frontier::budget::OverBudget;
use crate::frontier::due::{ActiveSlots, Moves, Window};
use crate::frontier::host::{HostMachine, HostSettings, RECRAWL_BIT};
use crate::frontier::importance::Arrivals;
use crate::metrics::Metrics;
use crate::politeness::handover::owed_after_drain;
use crate::politeness::Schedule;
use crate::store::{Completion, DigestEntry, DueCounts, PartitionStore, StoredCopy};
use crate::url::Fingerprint;

/// A host that passivated idle with entries still stored (its queue read
/// failed) comes due again after this.
const STRAY_WORK_DELAY_MS: u64 = 1_000;
/// Messages waiting for a partition before senders wait in turn.
const PARTITION_MAILBOX: usize = 1024;
/// How often the partition looks after itself: host actors that died,
/// due hosts its timer may have missed, its gauges, expired digest claims.
/// Its one periodic wakeup (the rest are deadlines: the due timer, the
/// pending batch's): a partition waiting on slow hosts costs a wakeup a
/// second, whatever the number of hosts.
const SUPERVISE_EVERY: Duration = Duration::from_secs(1);
/// Seeded domains cut short by a budget that one partition names in the
/// log (the metric counts every URL).
const SEEDED_CUT_NAMED: usize = 1_000;

/// What a partition is given to run its hosts.
#[derive(Clone)]
pub struct PartitionSetup {
    /// Settings every host shares.
    pub settings: Arc<HostSettings>,
    /// The pipeline after the hosts.
    pub pipeline: PipelineLinks,
    /// The node's cap on active hosts.
    pub slots: Arc<ActiveSlots>,
    /// The injected clock.
    pub clock: SharedClock,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// No host of the partition is activated before this (Unix ms): set
    /// when a partition is restarted after a failure, since requests of its
    /// former hosts may still be on the wire; and when a cluster node
    /// takes a partition from another owner (`src/cluster/lease.rs`).
    pub hold_until_ms: u64,
    /// The write watermark to count on from: the one the partition's last
    /// published checkpoint covers (0 without a checkpoint chain).
    pub covers: u64,
    /// With a checkpoint chain, the end of this node's lease over the
    /// partition, which its hosts and the fetcher check before every
    /// request (`None` without one).
    pub lease: Option<Arc<crate::cluster::gate::LeaseGate>>,
    /// Told when the partition's queue runs empty.
    pub emptied: Recipient<QueueEmptied>,
}

/// One partition.
pub struct PartitionActor {
    id: u16,
    store: Arc<PartitionStore>,
    settings: Arc<HostSettings>,
    pipeline: PipelineLinks,
    clock: SharedClock,
    /// The actors of the active hosts.
    hosts: HashMap<String, Addr<HostActor>>,
    /// Told when the queue runs empty (the node, which ends the crawl).
    emptied: Recipient<QueueEmptied>,
    /// Which hosts are active, and when dormant ones start: the
    /// decisions, with no I/O (`src/frontier/activation.rs`).
    activation: Activation,
    /// The due and active host counts last added to the node's gauges.
    reported: (usize, usize),
    /// The due index's moves last added to the node's counter.
    reported_moves: Moves,
    /// The armed activation timer and its Unix ms.
    due_timer: Option<(u64, SpawnHandle)>,
    /// Store writes that failed since start (shown in status).
    store_errors: u64,
    /// The latest time a passivated host may next be asked (Unix ms, its
    /// saved schedule and hold), whatever brings it back: a hand-back owes
    /// it on this node's clock ([`crate::politeness::handover`]).
    idle_waits_until_ms: u64,
    /// Host actors restarted after they died.
    host_restarts: u64,
    /// Seeded domains a budget cut short that the log named already (at
    /// most [`SEEDED_CUT_NAMED`]; each is named once per actor life).
    seeded_cut_named: HashSet<String>,
    /// Writes of admissions and completions so far, counted on from
    /// [`PartitionSetup::covers`]: a checkpoint covers every write counted
    /// before it was made ([`TakeCheckpoint`]), so a link batch admitted
    /// at write `n` is durable once a published checkpoint covers `n`.
    writes: u64,
    /// Queued, not completed (mirrors the store's queue size).
    queued: u64,
    /// Completed since start.
    completed: u64,
    /// Completions waiting for the next write.
    pending: PendingCompletions,
    /// When the pending completions are written.
    batching: CompletionBatching,
    /// Refresh counts last added to the node's gauges.
    refresh_due: DueCounts,
    /// This partition's part of exact dedup.
    digests: Digests,
    /// Hosts and domains an operator blocked (see `frontier::blocks`).
    blocks: BlockList,
    /// Operators' slow-downs of hosts (see `politeness::slowdown`).
    slowdowns: HashMap<String, crate::politeness::slowdown::Slowdown>,
    /// See [`PartitionSetup::lease`].
    lease: Option<Arc<crate::cluster::gate::LeaseGate>>,
    metrics: Arc<Metrics>,
}

/// The partition's side of exact dedup ([`crate::dedup::exact`]): the
/// open claims of its digests, and copies registered but not yet written
/// (they go into the next completion batch, and are answered from here
/// until then).
struct Digests {
    claims: ClaimBook<oneshot::Sender<DigestReply>>,
    unwritten: HashMap<[u8; 32], StoredCopy>,
}

/// An open claim expires after this. A claimant archives in milliseconds;
/// one that takes this long has died or is cut off, and its waiters store
/// the payload in full rather than wait longer.
const CLAIM_TTL_MS: u64 = 10_000;

/// Completions written together, as `frontier::batching` decides.
#[derive(Default)]
struct PendingCompletions {
    completions: Vec<Completion>,
    /// Links for partitions other nodes own, found by those pages.
    outbox: Vec<crate::store::OutboxBatch>,
    schedules: Vec<(String, Schedule)>,
    /// Holds of requests waiting to leave until they are written.
    holds: Vec<(String, crate::politeness::Hold)>,
    /// New entries of the partition's digest index.
    digests: Vec<DigestEntry>,
    waiters: Vec<oneshot::Sender<Result<(), Failure>>>,
    /// The archive tickets the completions vouch for.
    tickets: Vec<crate::durable::Ticket>,
}

impl PartitionActor {
    /// A partition over an opened store.
    pub fn new(id: u16, store: Arc<PartitionStore>, setup: PartitionSetup) -> Self {
        let PartitionSetup {
            settings,
            pipeline,
            slots,
            clock,
            metrics,
            hold_until_ms,
            covers,
            lease,
            emptied,
        } = setup;
        let request_timeout = settings.request_timeout;
        // A crashed last life makes each host it left owe its last delay
        // at its first start (the activation's), not at every start.
        let mut activation = Activation::new(slots, hold_until_ms, request_timeout)
            .with_lead(settings.passivate_after)
            .with_cycle(settings.host_cycle);
        // Dormant hosts beyond the window wait in the store, not memory.
        match crate::store::DueTier::emptied(store.clone()) {
            Ok(tier) => {
                let window = Window::of(settings.dormant_in_memory);
                activation = activation.with_due_tier(Box::new(tier), window);
            }
            Err(err) => tracing::error!(
                partition = id,
                %err,
                "cannot empty the due index's store: every dormant host stays in memory"
            ),
        }
        let settings = match settings.crashed {
            true => {
                activation = activation.after_crash();
                let mut settings = (*settings).clone();
                settings.crashed = false;
                Arc::new(settings)
            }
            false => settings,
        };
        PartitionActor {
            id,
            store,
            settings,
            pipeline,
            clock,
            hosts: HashMap::new(),
            emptied,
            activation,
            reported: (0, 0),
            reported_moves: Moves::default(),
            due_timer: None,
            store_errors: 0,
            idle_waits_until_ms: 0,
            host_restarts: 0,
            seeded_cut_named: HashSet::new(),
            writes: covers,
            queued: 0,
            completed: 0,
            pending: PendingCompletions::default(),
            batching: CompletionBatching::default(),
            refresh_due: DueCounts::default(),
            digests: Digests {
                claims: ClaimBook::new(CLAIM_TTL_MS),
                unwritten: HashMap::new(),
            },
            blocks: BlockList::default(),
            slowdowns: HashMap::new(),
            lease,
            metrics,
        }
    }

    /// Tells `host` it has new work (`arrivals`: the priority levels, a
    /// bit per level, with the best rank of each; [`RECRAWL_BIT`]:
    /// refreshes made due now). An active host
    /// reads its queue again; a dormant one waiting in the due index keeps
    /// its place (it may not be contacted earlier), unless refreshes were
    /// made due: it may be waiting for a later refresh, and its restored
    /// politeness state still spaces its requests; any other becomes due
    /// now.
    fn wake(&mut self, host: &str, arrivals: Arrivals, ctx: &mut Context<Self>) {
        let blocked = self.blocks.blocks(host);
        if let Some(rank) = arrivals.best_of_all() {
            self.activation.prefer(host, rank);
        }
        match self.activation.wake(host, arrivals.bits(), blocked) {
            Some(Step::Wake { generation, .. }) => {
                if let Some(addr) = self.hosts.get(host) {
                    addr.do_send(Wake {
                        generation,
                        arrivals,
                    });
                }
            }
            _ if blocked => {}
            _ => self.activate_due(ctx),
        }
    }

    /// Tells the operator, once per domain, that a budget cut short a
    /// domain they seeded, and which setting would let it through.
    fn name_seeded_cut(&mut self, cut: &[(String, OverBudget)]) {
        for (domain, over) in cut {
            if self.seeded_cut_named.len() >= SEEDED_CUT_NAMED
                || !self.seeded_cut_named.insert(domain.clone())
            {
                continue;
            }
            tracing::warn!(
                partition = self.id,
                domain = %domain,
                reason = over.label(),
                raise = over.settings_to_raise(),
                "a domain you seeded is over its budget: its further URLs are dropped until the budget grows or the setting is raised"
            );
        }
    }

    /// Starts the due hosts the activation lets start, and arms its timer.
    fn activate_due(&mut self, ctx: &mut Context<Self>) {
        let now_ms = self.clock.now().unix_ms();
        let blocks = &self.blocks;
        let steps = self.activation.activate(now_ms, |h| blocks.blocks(h));
        for step in steps {
            match step {
                Step::Start {
                    host,
                    generation,
                    crashed,
                } => self.start_host(host, generation, crashed, ctx),
                Step::Timer { at_ms } => self.arm_due_timer(at_ms, now_ms, ctx),
                Step::Yield { host, generation } => {
                    if let Some(addr) = self.hosts.get(&host) {
                        self.metrics.host_slot_yields.inc();
                        addr.do_send(YieldSlot { generation });
                    }
                }
                Step::Wake { .. } => {}
            }
        }
        self.report_hosts();
    }

    fn arm_due_timer(&mut self, at_ms: u64, now_ms: u64, ctx: &mut Context<Self>) {
        if let Some((armed, handle)) = self.due_timer {
            if armed <= at_ms {
                return;
            }
            ctx.cancel_future(handle);
        }
        let wait = Duration::from_millis(at_ms.saturating_sub(now_ms));
        let handle = ctx.run_later(wait, |act, ctx| {
            act.due_timer = None;
            act.activate_due(ctx);
        });
        self.due_timer = Some((at_ms, handle));
    }

    /// Starts the actor of `host` at `generation` (its slot is taken)
    /// from its stored state; `crashed`: it owes its last delay again.
    fn start_host(
        &mut self,
        host: String,
        generation: u64,
        crashed: bool,
        ctx: &mut Context<Self>,
    ) {
        let state = match self.store.host_state(&host) {
            Ok(state) => state,
            Err(err) => {
                tracing::error!(partition = self.id, host, error = %err, "cannot load host state");
                Default::default()
            }
        };
        let me = ctx.address();
        let links = HostLinks {
            pipeline: self.pipeline.clone(),
            partition: self.id,
            complete: me.clone().recipient(),
            forward: me.clone().recipient(),
            idle: me.clone().recipient(),
            save: me.clone().recipient(),
            hold: me.recipient(),
            lease: self.lease.clone(),
        };
        let settings = if crashed {
            let mut crashed = (*self.settings).clone();
            crashed.crashed = true;
            Arc::new(crashed)
        } else {
            self.settings.clone()
        };
        let mut machine = HostMachine::new(
            host.clone(),
            settings,
            self.metrics.clone(),
            state,
            self.clock.now(),
        );
        machine.set_slowdown(self.slowdown_of(&host));
        let addr = HostActor::new(
            machine,
            self.store.clone(),
            links,
            self.clock.clone(),
            generation,
        )
        .start();
        self.hosts.insert(host, addr);
        self.report_partition();
    }

    /// Brings back hosts whose actor died (a panic stops only that actor):
    /// their queue is in the store, so they come due again once a request
    /// of the dead actor could have ended, owing their last delay.
    fn supervise(&mut self, ctx: &mut Context<Self>) {
        let dead: Vec<String> = self
            .hosts
            .iter()
            .filter(|(_, addr)| !addr.connected())
            .map(|(host, _)| host.clone())
            .collect();
        let now_ms = self.clock.now().unix_ms();
        for host in dead {
            tracing::warn!(
                partition = self.id,
                host,
                "a host actor died; restarting it from the store"
            );
            self.host_restarts += 1;
            self.hosts.remove(&host);
            self.activation.died(&host, now_ms);
        }
        self.activate_due(ctx);
        self.report_refresh_due();
        self.report_partition();
        for (asker, reply) in self.digests.claims.expire(now_ms) {
            let _ = asker.send(reply);
        }
    }

    /// Moves the node's due and active host gauges by this partition's
    /// change since the last report.
    fn report_hosts(&mut self) {
        let now = (self.activation.due_len(), self.hosts.len());
        self.metrics
            .due_hosts
            .add(now.0 as i64 - self.reported.0 as i64);
        self.metrics
            .active_hosts
            .add(now.1 as i64 - self.reported.1 as i64);
        self.reported = now;
        let moves = self.activation.due_moves();
        let moved = |to: &str, n: u64, before: u64| {
            self.metrics
                .due_host_moves
                .with_label_values(&[to])
                .inc_by(n - before);
        };
        moved("store", moves.stored, self.reported_moves.stored);
        moved("memory", moves.loaded, self.reported_moves.loaded);
        self.reported_moves = moves;
    }

    /// Shows this partition's queue size and active hosts on its own
    /// series (the node-wide gauges move by deltas elsewhere).
    fn report_partition(&self) {
        self.metrics
            .set_partition(self.id, self.queued, self.hosts.len());
    }

    /// Moves the node's refresh gauges by this partition's change since
    /// the last report.
    fn report_refresh_due(&mut self) {
        let now = self.store.due_counts(self.clock.now().unix_ms());
        let gauge = |within: &str| self.metrics.refresh_due.with_label_values(&[within]);
        gauge("now").add(now.now as i64 - self.refresh_due.now as i64);
        gauge("hour").add(now.within_hour as i64 - self.refresh_due.within_hour as i64);
        gauge("day").add(now.within_day as i64 - self.refresh_due.within_day as i64);
        self.refresh_due = now;
    }

    fn snapshot(&self) -> PartitionSnapshot {
        PartitionSnapshot {
            id: self.id,
            queued: self.queued,
            completed: self.completed,
            active_hosts: self.hosts.len(),
            due_hosts: self.activation.due_len(),
            refresh_hosts: self.activation.refresh_len(),
            store_errors: self.store_errors,
            host_restarts: self.host_restarts,
            draining: self.activation.is_draining(),
            refresh_due: self.store.due_counts(self.clock.now().unix_ms()),
        }
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Bounded: hosts (completions) and the SeenSet (admissions) `send`,
        // so when the store falls behind they wait; nothing is dropped.
        ctx.set_mailbox_capacity(PARTITION_MAILBOX);
        match self.store.blocks() {
            Ok(blocks) => self.blocks = blocks,
            Err(err) => {
                tracing::error!(partition = self.id, error = %err, "cannot read the blocks");
            }
        }
        match self.store.slowdowns() {
            Ok(slowdowns) => self.slowdowns = slowdowns,
            Err(err) => {
                tracing::error!(partition = self.id, error = %err, "cannot read the slow-downs");
            }
        }
        if let Err(err) = self.open_due_index() {
            tracing::error!(partition = self.id, error = %err, "cannot read the queue");
        }
        ctx.run_interval(SUPERVISE_EVERY, |act, ctx| act.supervise(ctx));
        self.activate_due(ctx);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // Whatever stopped the partition, its hosts go with it (none may
        // fetch for a partition that is gone) and give back what they held.
        for addr in self.hosts.values() {
            addr.do_send(Crash);
        }
        self.activation.retire();
        self.metrics.active_hosts.sub(self.reported.1 as i64);
        self.metrics.due_hosts.sub(self.reported.0 as i64);
        self.metrics.frontier_size.sub(self.queued as i64);
        self.metrics.forget_partition(self.id);
        let gone = std::mem::take(&mut self.refresh_due);
        let gauge = |within: &str| self.metrics.refresh_due.with_label_values(&[within]);
        gauge("now").sub(gone.now as i64);
        gauge("hour").sub(gone.within_hour as i64);
        gauge("day").sub(gone.within_day as i64);
    }

    fn stopping(&mut self, _: &mut Self::Context) -> Running {
        // Completions waiting for their timer are written, not dropped.
        self.flush_completions();
        Running::Stop
    }
}

impl PartitionActor {
    /// Fills the due index from the store: every host with queued work,
    /// due when it passivated (or at once), and every host with scheduled
    /// refreshes, due at its first. Activates nobody.
    fn open_due_index(&mut self) -> Result<(), crate::store::StoreError> {
        let hosts = self.store.queued_by_host()?;
        let due = self.store.due_times()?;
        let refreshes = self.store.recrawl_hosts()?;
        self.queued = hosts.values().sum();
        self.metrics.frontier_size.add(self.queued as i64);
        self.report_partition();
        // After a restart, nothing starts before the hold; after a crash
        // each host also owes its last delay, at its first start.
        self.activation
            .open(hosts.keys().map(String::as_str), &due, &refreshes);
        self.report_hosts();
        if !hosts.is_empty() {
            tracing::info!(
                partition = self.id,
                hosts = hosts.len(),
                queued = self.queued,
                "resuming queued work"
            );
        }
        Ok(())
    }
}

impl Handler<AdmitBatch> for PartitionActor {
    type Result = Result<AdmitReply, Failure>;

    fn handle(&mut self, msg: AdmitBatch, ctx: &mut Self::Context) -> Self::Result {
        self.admit(msg, ctx)
    }
}

impl Handler<AdmitMarked> for PartitionActor {
    type Result = Result<u64, Failure>;

    fn handle(&mut self, msg: AdmitMarked, ctx: &mut Self::Context) -> Self::Result {
        self.admit(
            AdmitBatch {
                entries: msg.entries,
            },
            ctx,
        )?;
        Ok(self.writes)
    }
}

impl Handler<TakeCheckpoint> for PartitionActor {
    type Result = ResponseFuture<Result<Checkpointed, Failure>>;

    /// The pending completions are written first, and the writes counted
    /// so far are what the checkpoint is said to cover. RocksDB then
    /// flushes the memtables and hard-links the files on a blocking
    /// thread, not this one: the flush waits on the disk (milliseconds
    /// each, every partition every `checkpoint_interval`), and the hosts
    /// and partitions sharing this thread go on meanwhile. Their writes
    /// may land in the checkpoint too (RocksDB's checkpoint is consistent
    /// at some point after the call began): a checkpoint holds every write
    /// it covers, and maybe a few more, which the next owner keeps; the
    /// count is only ever an under-statement, so nothing acknowledged on
    /// its strength can be missing.
    ///
    /// A store whose sequence number is still `unless_at` (nothing
    /// written since the checkpoint the chain holds was begun) makes none:
    /// an idle partition costs its chain a renewal, not a checkpoint's
    /// files.
    fn handle(&mut self, msg: TakeCheckpoint, _: &mut Self::Context) -> Self::Result {
        self.flush_completions();
        let covers = self.writes;
        let store = self.store.clone();
        let sequence = store.sequence();
        if msg.unless_at == Some(sequence) {
            return Box::pin(async move { Ok(Checkpointed::Unchanged { covers }) });
        }
        Box::pin(async move {
            let made = tokio::task::spawn_blocking(move || store.checkpoint(&msg.dir))
                .await
                .map_err(|err| Failure::Store(format!("checkpoint task: {err}")))?;
            let files = made.map_err(|err| Failure::Store(err.to_string()))?;
            Ok(Checkpointed::Made {
                files,
                covers,
                sequence,
            })
        })
    }
}

impl PartitionActor {
    /// The seen check and durable enqueue of a batch; wakes the hosts
    /// with new work.
    fn admit(
        &mut self,
        mut msg: AdmitBatch,
        ctx: &mut Context<Self>,
    ) -> Result<AdmitReply, Failure> {
        let now_ms = self.clock.now().unix_ms();
        let offered = msg.entries.len();
        msg.entries.retain(|e| !self.blocks.blocks(&e.host));
        if msg.entries.len() < offered {
            self.metrics
                .urls_dropped
                .with_label_values(&["blocked"])
                .inc_by((offered - msg.entries.len()) as u64);
        }
        // A host with an actor may hold its entries in memory, and one whose
        // completions are not written yet still has their keys stored: only
        // the others' queued URLs are moved up (see `admit_crediting`).
        let hosts = &self.hosts;
        let unwritten = &self.pending.schedules;
        let dormant =
            |host: &str| !hosts.contains_key(host) && !unwritten.iter().any(|(h, _)| h == host);
        let outcome = self
            .store
            .admit_crediting(msg.entries, now_ms, &dormant)
            .map_err(|err| {
                tracing::error!(partition = self.id, error = %err, "admit failed");
                self.store_errors += 1;
                Failure::Store(err.to_string())
            })?;
        self.writes += 1;
        self.name_seeded_cut(&outcome.seeded_cut);
        let mut refused: Vec<(Fingerprint, &'static str)> = outcome
            .over_budget
            .iter()
            .map(|(fp, over)| (*fp, over.label()))
            .collect();
        refused.sort_unstable();
        for (_, label) in &refused {
            self.metrics.urls_dropped.with_label_values(&[label]).inc();
        }
        let filter = outcome.filter;
        for (result, n) in [
            ("absent", filter.absent),
            ("maybe_seen", filter.maybe_seen),
            ("cached", filter.cached),
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
        self.report_partition();
        let mut hosts: BTreeMap<&str, Arrivals> = BTreeMap::new();
        for (e, rank) in admitted.iter().zip(&outcome.ranks) {
            let arrivals = hosts.entry(e.host.as_str()).or_default();
            arrivals.add(e.priority.level(), *rank);
        }
        self.metrics
            .urls_credited
            .inc_by(outcome.credited.len() as u64);
        for (host, priority, rank) in &outcome.credited {
            hosts
                .entry(host.as_str())
                .or_default()
                .add(priority.level(), *rank);
        }
        for e in &outcome.refreshed {
            hosts
                .entry(e.host.as_str())
                .or_default()
                .add_bits(RECRAWL_BIT);
        }
        for (host, arrivals) in hosts {
            self.wake(host, arrivals, ctx);
        }
        // admit() returns entries sorted by fingerprint.
        Ok(AdmitReply {
            admitted: admitted.into_iter().map(|e| e.fp).collect(),
            brought_back: outcome.refreshed.iter().map(|e| e.fp).collect(),
            refused,
        })
    }
}

impl PartitionActor {
    /// Writes the pending completions in one batch and answers their
    /// senders.
    fn flush_completions(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.batching.written();
        if pending.completions.is_empty() && pending.digests.is_empty() && pending.holds.is_empty()
        {
            return;
        }
        // The hosts wait for their records to be handed to the OS (with
        // `sync_writes`, synced) before they complete; a ticket still open
        // here would be a broken promise.
        let early = pending.tickets.iter().filter(|t| !t.is_durable()).count();
        if early > 0 {
            tracing::error!(
                partition = self.id,
                early,
                "completions written before their records were safe"
            );
            self.metrics.completions_ahead_of_sync.inc_by(early as u64);
        }
        let schedules: Vec<(&str, &Schedule)> = pending
            .schedules
            .iter()
            .map(|(host, schedule)| (host.as_str(), schedule))
            .collect();
        let holds: Vec<(&str, &crate::politeness::Hold)> = pending
            .holds
            .iter()
            .map(|(host, hold)| (host.as_str(), hold))
            .collect();
        let result = self
            .store
            .complete_with_holds(
                &pending.completions,
                &schedules,
                &holds,
                &pending.outbox,
                &pending.digests,
            )
            .map_err(|err| {
                tracing::error!(partition = self.id, error = %err, "complete failed");
                Failure::Store(err.to_string())
            });
        // Written, or lost with the batch (the payloads are then stored
        // in full once more: the index is an optimisation).
        for entry in &pending.digests {
            self.digests.unwritten.remove(&entry.digest);
        }
        if result.is_err() {
            self.store_errors += 1;
        }
        if result.is_ok() {
            self.writes += 1;
            self.dequeued(PartitionStore::new_urls_done(&pending.completions));
            self.report_partition();
            self.completed += pending
                .completions
                .iter()
                .filter(|c| c.record.state != crate::store::UrlState::RetryDue)
                .count() as u64;
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
        self.pending.outbox.extend(msg.outbox);
        self.pending.schedules.push((msg.host, msg.schedule));
        self.pending.waiters.push(tx);
        self.pending.tickets.extend(msg.durable);
        self.schedule_flush(ctx);
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(Failure::Mailbox("a completion was dropped".into())))
        })
    }
}

impl Handler<HoldHost> for PartitionActor {
    type Result = ResponseFuture<Result<(), Failure>>;

    /// Writes a request's hold in the next batch, beside the completions
    /// (one WAL write for both); the request leaves once it is written.
    fn handle(&mut self, msg: HoldHost, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.pending.holds.push((msg.host, msg.hold));
        self.pending.waiters.push(tx);
        self.schedule_flush(ctx);
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(Failure::Mailbox("a hold was dropped".into())))
        })
    }
}

impl PartitionActor {
    /// `n` URLs left the queue (fetched, or dropped): a queue that ran
    /// empty tells the node, which looks at once whether the crawl is over.
    fn dequeued(&mut self, n: u64) {
        self.queued = self.queued.saturating_sub(n);
        self.metrics.frontier_size.sub(n as i64);
        if n > 0 && self.queued == 0 {
            self.emptied.do_send(QueueEmptied);
        }
    }

    /// Writes the pending batch now if it is full, or arms its timer.
    fn schedule_flush(&mut self, ctx: &mut Context<Self>) {
        let pending =
            self.pending.completions.len() + self.pending.digests.len() + self.pending.holds.len();
        match self.batching.added(pending) {
            Flush::Now => self.flush_completions(),
            Flush::After(wait) => {
                ctx.run_later(wait, |act, _| act.flush_completions());
            }
            Flush::Wait => {}
        }
    }

    /// The copy of `digest` on record: registered (maybe not yet written)
    /// or in the store.
    fn stored_copy(&mut self, digest: &[u8; 32]) -> Result<Option<StoredCopy>, Failure> {
        if let Some(copy) = self.digests.unwritten.get(digest) {
            return Ok(Some(copy.clone()));
        }
        self.store.stored_copy(digest).map_err(|err| {
            self.store_errors += 1;
            Failure::Store(err.to_string())
        })
    }
}

impl Handler<DigestQuery> for PartitionActor {
    type Result = ResponseFuture<Result<DigestReply, Failure>>;

    fn handle(&mut self, msg: DigestQuery, ctx: &mut Self::Context) -> Self::Result {
        let known = match self.stored_copy(&msg.digest) {
            Ok(known) => known,
            Err(failure) => return Box::pin(async move { Err(failure) }),
        };
        let (tx, rx) = oneshot::channel();
        let now_ms = self.clock.now().unix_ms();
        let (answers, record) =
            self.digests
                .claims
                .ask(msg.digest, msg.ask, known.as_ref(), now_ms, tx);
        if let Some(copy) = record {
            self.digests.unwritten.insert(msg.digest, copy.clone());
            self.pending.digests.push(DigestEntry {
                digest: msg.digest,
                copy,
            });
            self.schedule_flush(ctx);
        }
        for (asker, reply) in answers {
            let _ = asker.send(reply);
        }
        // A claim that waits is answered when it is settled or expires (or
        // fails, if the partition stops meanwhile).
        Box::pin(async move {
            rx.await
                .map_err(|_| Failure::Mailbox("the partition stopped".into()))
        })
    }
}

impl Handler<super::messages::Forward> for PartitionActor {
    type Result = Result<(), Failure>;

    fn handle(&mut self, msg: super::messages::Forward, _: &mut Self::Context) -> Self::Result {
        self.store
            .complete_with_outbox(&[], &[], &msg.outbox, &[])
            .map_err(|err| {
                self.store_errors += 1;
                Failure::Store(err.to_string())
            })
    }
}

impl Handler<HostIdle> for PartitionActor {
    type Result = bool;

    fn handle(&mut self, msg: HostIdle, ctx: &mut Self::Context) -> bool {
        if !self.activation.idle(&msg.host, msg.generation) {
            return false;
        }
        let waits_until = msg.state.next_request_ms();
        self.idle_waits_until_ms = self.idle_waits_until_ms.max(waits_until);
        // Only politeness waits are persisted as due times: a refresh
        // wait is read back from the refresh schedule itself at open.
        let persisted = msg.due_ms.filter(|_| !msg.refresh_wait);
        if let Err(err) = self.store.passivate(&msg.host, &msg.state, persisted) {
            // The host leaves anyway: its queue is durable, and without a
            // due time it is simply due at once when it comes back.
            self.store_errors += 1;
            tracing::error!(partition = self.id, host = %msg.host, error = %err, "cannot save host state");
        }
        self.hosts.remove(&msg.host);
        self.report_partition();
        // A host that found nothing new to do (or could not read its
        // queue) while entries are still stored comes back shortly, even
        // if a refresh is due later: no queued URL is left without a host
        // that will fetch it.
        let stray = || {
            let left = self.store.queued_of(&msg.host).unwrap_or(1);
            (left > 0).then(|| self.clock.now().unix_ms() + STRAY_WORK_DELAY_MS)
        };
        let due_ms = match msg.due_ms {
            Some(due) if !msg.refresh_wait => Some(due),
            refresh => match (refresh, stray()) {
                (Some(refresh), Some(stray)) => Some(refresh.min(stray)),
                (refresh, stray) => refresh.or(stray),
            },
        };
        if let Some(due_ms) = due_ms {
            self.activation.due_at(&msg.host, due_ms, msg.refresh_wait);
            if let Some(rank) = msg.best_rank {
                self.activation.rank_as(&msg.host, rank);
            }
        }
        self.activate_due(ctx);
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
    /// `Some(owed)` once every host drained: what the partition still
    /// owes before any of its hosts may be asked again, measured on this
    /// node's clock ([`crate::politeness::handover`]); `None` if requests
    /// were still in flight at the timeout.
    type Result = ResponseActFuture<Self, Option<std::time::Duration>>;

    fn handle(&mut self, msg: Drain, _: &mut Self::Context) -> Self::Result {
        self.activation.drain();
        let drains: Vec<_> = self
            .hosts
            .iter()
            .map(|(host, addr)| {
                let drained = addr.send(DrainHost);
                let host = host.clone();
                async move { (host, drained.await) }
            })
            .collect();
        let store = self.store.clone();
        let id = self.id;
        let drained = async move {
            // A host that passivated meanwhile answers with a closed mailbox:
            // it had nothing in flight and saved its state when it went.
            let all = futures_util::future::join_all(drains);
            let Ok(results) = tokio::time::timeout(msg.timeout, all).await else {
                tracing::warn!(
                    partition = id,
                    "requests still in flight after the shutdown timeout; they stay queued"
                );
                return None;
            };
            let states: Vec<_> = results
                .into_iter()
                .filter_map(|(host, drained)| drained.ok().map(|state| (host, state)))
                .collect();
            let saved = store.save_host_states(states.iter().map(|(h, s)| (h.as_str(), s)));
            if let Err(err) = saved {
                tracing::error!(partition = id, hosts = states.len(), error = %err, "cannot save the hosts' states");
            }
            let waits: Vec<u64> = states.iter().map(|(_, s)| s.next_request_ms()).collect();
            Some(waits)
        };
        Box::pin(drained.into_actor(self).map(|waits, act, _| {
            // Hosts drain only once their completions are acknowledged, so
            // none should be pending; write any that are before the caller
            // syncs the store.
            act.flush_completions();
            let waits = waits?;
            // Hosts that passivated (a queue run dry has no due time)
            // and those waiting in the due index.
            let idle = std::iter::once(act.idle_waits_until_ms);
            let dormant = act.activation.politeness_dues().into_iter().chain(idle);
            Some(owed_after_drain(
                act.clock.now().unix_ms(),
                waits.into_iter().chain(dormant),
                act.settings.policy.min_delay,
                act.settings.request_timeout,
            ))
        }))
    }
}

impl Handler<super::messages::Retire> for PartitionActor {
    type Result = ();

    fn handle(&mut self, _: super::messages::Retire, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Crash> for PartitionActor {
    type Result = ();

    fn handle(&mut self, _: Crash, ctx: &mut Self::Context) {
        tracing::warn!(partition = self.id, "stopping as if failed (fault drill)");
        ctx.stop();
    }
}

impl Handler<CrashHost> for PartitionActor {
    type Result = bool;

    fn handle(&mut self, msg: CrashHost, _: &mut Self::Context) -> bool {
        let Some(addr) = self.hosts.get(&msg.host) else {
            return false;
        };
        addr.do_send(Crash);
        true
    }
}

impl Handler<GetPartitionSnapshot> for PartitionActor {
    type Result = MessageResult<GetPartitionSnapshot>;

    fn handle(&mut self, _: GetPartitionSnapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

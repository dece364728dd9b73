//! OwnershipActor: carries out the partitions' leases over their
//! checkpoint chains (`[cluster] state_url`).
//!
//! One [`PartitionLease`] per partition (`src/cluster/lease.rs`) decides;
//! this actor only does what it asks: reads a chain's head, creates a
//! manifest, has the node make a checkpoint and uploads it, restores a
//! partition it takes, and tells the node to open, drain or stop one. It
//! reads the injected clock for every event it feeds a machine, and
//! drives the machines' timers every [`TICK`].
//!
//! Before a checkpoint is published, the archive is sealed and its files
//! uploaded (`[upload]` on): the records of every page the checkpoint
//! counts as fetched are in object storage first. Checkpoints of many
//! partitions share one seal ([`OwnershipActor::sealed`]).
//!
//! Its files, under the data directory: `partitions/NNN` (the hot copy,
//! restored from the chain when a partition is taken), `checkpoints/NNN/`
//! (the checkpoint being uploaded, hard links into the hot copy), and
//! `state-cache/` (immutable files downloaded before, reused by name when
//! a partition comes back).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::messages::{
    Advice, CheckpointPartition, Checkpointed, DrainPartition, DurableUpTo, ReleaseAll,
    SealRecords, Shunned, StopPartition, TakePartition,
};
use crate::clock::SharedClock;
use crate::cluster::chain::{ChainError, StateStore};
use crate::cluster::gate::LeaseGate;
use crate::cluster::lease::{
    Draft, DraftKind, Effect, HeadView, LeaseSettings, PartitionLease, Published, StopReason,
};
use crate::cluster::manifest::{FileRef, Manifest, MANIFEST_VERSION};
use crate::store::PartitionStore;

/// The directory (under the data directory) of immutable checkpoint files
/// kept by object key, reused by a restore on this node.
const STATE_CACHE: &str = "state-cache";

/// How often the leases' timers are looked at.
const TICK: Duration = Duration::from_millis(100);

/// An owner collects its partition's chain (`StateStore::collect`) after
/// this many of its checkpoints or renewals: objects stay bounded (about
/// the head's files and [`crate::cluster::chain::KEEP_MANIFESTS`]
/// manifests, plus what this many publications add), at one listing per
/// this many publications.
const COLLECT_EVERY: u32 = 12;

/// What the actor needs.
pub struct OwnershipSettings {
    /// This node's id.
    pub node: String,
    /// Partitions of the crawl.
    pub partitions: u16,
    /// The protocol's timing.
    pub lease: LeaseSettings,
    /// The node's data directory.
    pub data_dir: PathBuf,
    /// The chains.
    pub state: Arc<StateStore>,
    /// The node's injected clock.
    pub clock: SharedClock,
    /// The least delay a drained host still owes (`politeness.min_delay`).
    pub owed: Duration,
    /// `fetch.timeout`: what a drain that timed out leaves owed (a request
    /// still in flight may run that long). Each host's own hold is in the
    /// store the next owner opens; this covers the partition as a whole.
    pub request_timeout: Duration,
    /// Metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// Where the node takes the actor's orders.
pub struct NodeOrders {
    /// Open a partition.
    pub take: Recipient<TakePartition>,
    /// Make a checkpoint.
    pub checkpoint: Recipient<CheckpointPartition>,
    /// Drain one.
    pub drain: Recipient<DrainPartition>,
    /// Stop one.
    pub stop: Recipient<StopPartition>,
    /// Acknowledge what is durable.
    pub durable: Recipient<DurableUpTo>,
    /// Put the archive's records in object storage (with `[upload]`).
    pub seal: Option<Recipient<SealRecords>>,
    /// The partitions shunned here, when they change (gossip publishes
    /// them, and the assignment passes them to other nodes).
    pub shunned: Recipient<Shunned>,
}

/// What a checkpoint asked for became, uploaded.
enum CheckpointDone {
    /// Made and uploaded: its files, the watermark it covers, the store's
    /// sequence number before it.
    Made {
        refs: Vec<FileRef>,
        covers: u64,
        sequence: u64,
    },
    /// Nothing written since the chain's checkpoint: none made.
    Unchanged { covers: u64 },
}

/// One partition's side of the actor.
struct Chain {
    lease: PartitionLease,
    /// The last manifest read or published: the files a claim or a renewal
    /// names again, and what an upload descends from.
    head: Option<Manifest>,
    /// The files of the checkpoint uploaded for manifest `.0`, and the
    /// store's sequence number before it was made.
    uploaded: Option<(u64, Vec<FileRef>, u64)>,
    /// The store's sequence number before the checkpoint whose files the
    /// chain's head names, if this life made it: the next checkpoint is
    /// skipped while the store's number has not moved.
    published_sequence: Option<u64>,
    /// The owner this node was last said to wait on (logged once).
    waiting_on: Option<String>,
    /// Counts the partition's stops. A take whose restore was still
    /// running when the lease stopped the partition (advice moved it on
    /// at once, or it was fenced) must not open it afterwards: the lease
    /// is over, and another node may hold it by then.
    stops: u64,
    /// Held by a take from the start of its restore until the node has
    /// the partition (or the take gave up): two takes of one partition
    /// never work on its directory at once.
    taking: Arc<tokio::sync::Mutex<()>>,
    /// The lease's end as the partition's requests see it, moved after
    /// every event of the lease.
    gate: Arc<LeaseGate>,
    /// Publications since the chain was last collected.
    since_collected: u32,
    /// A collection is under way.
    collecting: bool,
}

/// The actor.
pub struct OwnershipActor {
    settings: OwnershipSettings,
    orders: NodeOrders,
    chains: Vec<Chain>,
    /// A shutdown asked for every partition back: advice is ignored.
    releasing_all: bool,
    /// A seal of the archive is under way ([`OwnershipActor::sealed`]).
    seal_running: bool,
    /// Checkpoints waiting for the next seal.
    seal_next: Vec<tokio::sync::oneshot::Sender<bool>>,
    /// Its answer: when to give up, and how many were held.
    release_waiter: Option<(tokio::sync::oneshot::Sender<usize>, Instant, usize)>,
    /// The partitions last reported shunned to the node.
    shunned: Vec<u16>,
}

impl OwnershipActor {
    /// An actor for a node's process (`incarnation`: random, new at every
    /// start).
    pub fn new(settings: OwnershipSettings, orders: NodeOrders, incarnation: u64) -> Self {
        let chains = (0..settings.partitions)
            .map(|p| Chain {
                lease: PartitionLease::new(&settings.node, incarnation, settings.lease)
                    .staggered(p, settings.partitions),
                head: None,
                uploaded: None,
                published_sequence: None,
                waiting_on: None,
                stops: 0,
                taking: Arc::default(),
                gate: Arc::new(LeaseGate::new(settings.clock.clone())),
                since_collected: 0,
                collecting: false,
            })
            .collect();
        OwnershipActor {
            settings,
            orders,
            chains,
            releasing_all: false,
            seal_running: false,
            seal_next: Vec::new(),
            release_waiter: None,
            shunned: Vec::new(),
        }
    }

    fn now(&self) -> Instant {
        self.settings.clock.now().at
    }

    /// Runs the timers of every lease and carries out what they ask.
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let now = self.now();
        for p in 0..self.chains.len() {
            let chain = &mut self.chains[p];
            if chain.lease.poll_timeout().is_some_and(|t| t <= now) {
                chain.lease.handle_timeout(now);
            }
            self.effects(p as u16, ctx);
        }
        self.answer_release(now);
        self.report_shunned(now);
    }

    /// Tells the node which partitions are shunned here, when that changed
    /// (a shun is taken on a failure and ends with its backoff).
    fn report_shunned(&mut self, now: Instant) {
        let shunned: Vec<u16> = (0..self.chains.len() as u16)
            .filter(|&p| self.chains[usize::from(p)].lease.shunned(now))
            .collect();
        if shunned != self.shunned {
            let count = shunned.len() as i64;
            self.settings.metrics.partitions_shunned.set(count);
            self.orders.shunned.do_send(Shunned(shunned.clone()));
            self.shunned = shunned;
        }
    }

    /// Carries out what partition `p`'s lease asks (it was just told
    /// something), and moves the lease's gate.
    fn effects(&mut self, p: u16, ctx: &mut Context<Self>) {
        let chain = &self.chains[usize::from(p)];
        chain.gate.set(chain.lease.fetch_until());
        while let Some(effect) = self.chains[usize::from(p)].lease.poll() {
            match effect {
                Effect::ReadHead => self.read_head(p, ctx),
                Effect::Publish(draft) => self.publish(p, draft, ctx),
                Effect::Take {
                    owner,
                    from,
                    hold_until,
                } => {
                    tracing::info!(
                        partition = p,
                        epoch = owner.epoch,
                        from = from.as_ref().map(|h| h.number),
                        "partition claimed"
                    );
                    self.take(p, owner.epoch, from, hold_until, ctx)
                }
                Effect::Checkpoint { number } => self.checkpoint(p, number, ctx),
                Effect::Durable { covers } => {
                    self.orders.durable.do_send(DurableUpTo { id: p, covers });
                }
                Effect::Drain => self.drain(p, ctx),
                Effect::GaveUp { wait } => {
                    tracing::error!(
                        partition = p,
                        wait_s = wait.as_secs_f64(),
                        "no checkpoint of the partition could be made for a lease (disk full? uploads failing?): handing it back so another node crawls it, and not taking it here again for a while"
                    );
                }
                Effect::Stop { reason } => {
                    self.chains[usize::from(p)].stops += 1;
                    self.chains[usize::from(p)].published_sequence = None;
                    match reason {
                        StopReason::Released => {
                            tracing::info!(partition = p, "partition handed back")
                        }
                        StopReason::Fenced => tracing::warn!(
                            partition = p,
                            "another node took the partition (its next manifest was created by another owner): stopped"
                        ),
                        StopReason::Lapsed => tracing::warn!(
                            partition = p,
                            "no checkpoint accepted by the state store for a lease: stopped fetching the partition"
                        ),
                    }
                    self.settings
                        .metrics
                        .partition_stops
                        .with_label_values(&[reason.label()])
                        .inc();
                    // After a take under way has opened it (or given up),
                    // and before the next take restores it.
                    let turn = self.chains[usize::from(p)].taking.clone();
                    let stop = self.orders.stop.clone();
                    ctx.spawn(
                        async move {
                            let _turn = turn.lock_owned().await;
                            let _ = stop.send(StopPartition { id: p, reason }).await;
                        }
                        .into_actor(self),
                    );
                }
            }
        }
    }

    fn read_head(&mut self, p: u16, ctx: &mut Context<Self>) {
        let state = self.settings.state.clone();
        let after = self.chains[usize::from(p)].head.as_ref().map(|m| m.number);
        let read = async move { state.head(p, after).await };
        ctx.spawn(read.into_actor(self).map(move |head, act, ctx| {
            let now = act.now();
            let chain = &mut act.chains[usize::from(p)];
            match head {
                Ok(head) => {
                    let view = head.as_ref().map(HeadView::from);
                    if head.is_some() {
                        chain.head = head;
                    }
                    chain.lease.on_head(now, Ok(view));
                    act.say_waiting(p);
                }
                Err(err @ (ChainError::Manifest { .. } | ChainError::Invalid { .. })) => {
                    let wait = chain.lease.on_head_unreadable(now);
                    tracing::error!(
                        partition = p,
                        error = %err,
                        wait_s = wait.as_secs_f64(),
                        "the partition's chain head cannot be read by this build (written by a newer trawl, or damaged): stepping aside so a node that reads it takes the partition"
                    );
                }
                Err(err) => {
                    tracing::warn!(partition = p, error = %err, "cannot read the partition's chain");
                    chain.lease.on_head(now, Err(()));
                }
            }
            act.effects(p, ctx);
        }));
    }

    /// Says (once per owner) that partition `p` is wanted here but its
    /// chain's head is another owner's, still renewed: it is taken once
    /// that owner hands it back or stops renewing for a lease.
    fn say_waiting(&mut self, p: u16) {
        let chain = &mut self.chains[usize::from(p)];
        if chain.lease.snapshot().phase != "observing" {
            chain.waiting_on = None;
            return;
        }
        let Some(owner) = chain.head.as_ref().map(|m| m.owner.node.clone()) else {
            return;
        };
        if chain.waiting_on.as_ref() != Some(&owner) {
            tracing::info!(
                partition = p,
                owner = %owner,
                "partition wanted here, held by another node: taken when it hands it back or stops renewing it for a lease"
            );
            chain.waiting_on = Some(owner);
        }
    }

    /// The manifest a draft becomes: the new checkpoint's files, or the
    /// last manifest's (a claim's head, or this owner's last).
    fn manifest(&self, p: u16, draft: &Draft) -> Option<Manifest> {
        let chain = &self.chains[usize::from(p)];
        let files = if draft.new_checkpoint {
            match &chain.uploaded {
                Some((number, files, _)) if *number == draft.number => files.clone(),
                _ => return None,
            }
        } else {
            chain
                .head
                .as_ref()
                .map(|m| m.files.clone())
                .unwrap_or_default()
        };
        Some(Manifest {
            version: MANIFEST_VERSION,
            partition: p,
            number: draft.number,
            owner: draft.owner.clone(),
            released: draft.released,
            hold_ms: draft.hold_ms,
            covers: draft.covers,
            files,
        })
    }

    fn publish(&mut self, p: u16, draft: Draft, ctx: &mut Context<Self>) {
        let number = draft.number;
        let kind = draft.kind;
        let Some(manifest) = self.manifest(p, &draft) else {
            tracing::error!(partition = p, number, "a checkpoint to publish is missing");
            let now = self.now();
            self.chains[usize::from(p)]
                .lease
                .on_published(now, number, Published::Failed);
            return self.effects(p, ctx);
        };
        let state = self.settings.state.clone();
        let create = async move {
            let outcome = match state.create(&manifest).await {
                Ok(()) => Published::Created,
                Err(ChainError::Taken { .. }) => Published::Taken {
                    by: state.get(p, number).await.ok().map(|m| m.owner),
                },
                Err(err) => {
                    tracing::warn!(partition = p, number, error = %err, "cannot create a manifest");
                    Published::Failed
                }
            };
            (outcome, manifest)
        };
        ctx.spawn(
            create
                .into_actor(self)
                .map(move |(outcome, manifest), act, ctx| {
                    let now = act.now();
                    let chain = &mut act.chains[usize::from(p)];
                    match outcome {
                        Published::Created => {
                            act.settings
                                .metrics
                                .manifests
                                .with_label_values(&[kind.label()])
                                .inc();
                            let cache = act.settings.data_dir.join(STATE_CACHE);
                            let files = manifest.files.clone();
                            // Off the executor; a file pruned while the
                            // next checkpoint keeps it is only downloaded
                            // again by a later restore.
                            tokio::task::spawn_blocking(move || {
                                StateStore::prune_reuse(p, &files, &cache)
                            });
                            // A checkpoint uploaded for this number: the
                            // chain now holds what the store had then.
                            if let Some((n, _, sequence)) = &chain.uploaded {
                                if *n == number {
                                    chain.published_sequence = Some(*sequence);
                                }
                            }
                            let ongoing =
                                matches!(kind, DraftKind::Checkpoint | DraftKind::Renewal);
                            chain.since_collected += u32::from(ongoing);
                            chain.head = Some(manifest);
                        }
                        Published::Failed => act.settings.metrics.manifest_failures.inc(),
                        Published::Taken { .. } => {}
                    }
                    chain.lease.on_published(now, number, outcome);
                    act.collect(p, ctx);
                    act.effects(p, ctx);
                }),
        );
    }

    /// Deletes what no restore reads and no owner may still publish from
    /// partition `p`'s chain, every [`COLLECT_EVERY`] publications of its
    /// owner (this node), one collection at a time.
    fn collect(&mut self, p: u16, ctx: &mut Context<Self>) {
        let chain = &mut self.chains[usize::from(p)];
        if chain.collecting || chain.since_collected < COLLECT_EVERY {
            return;
        }
        let Some(latest) = chain.head.clone() else {
            return;
        };
        chain.collecting = true;
        chain.since_collected = 0;
        let state = self.settings.state.clone();
        let collect = async move { state.collect(&latest).await };
        ctx.spawn(collect.into_actor(self).map(move |done, act, _| {
            act.chains[usize::from(p)].collecting = false;
            match done {
                Ok(deleted) => {
                    act.settings
                        .metrics
                        .chain_objects_deleted
                        .inc_by(deleted as u64);
                    tracing::debug!(partition = p, deleted, "chain collected");
                }
                Err(err) => {
                    tracing::warn!(partition = p, error = %err, "cannot collect the partition's chain")
                }
            }
        }));
    }

    /// Restores the partition from `from` into its directory and has the
    /// node open it.
    fn take(
        &mut self,
        p: u16,
        epoch: u64,
        from: Option<HeadView>,
        hold_until: Instant,
        ctx: &mut Context<Self>,
    ) {
        // A restored store: its sequence numbers say nothing of the chain.
        self.chains[usize::from(p)].published_sequence = None;
        let now = self.settings.clock.now();
        let hold_until_ms = now.ms_at(hold_until);
        // The hold on the monotonic clock, whatever the wall clock does
        // before it ends (the hosts count it in wall-clock ms).
        self.chains[usize::from(p)].gate.hold(hold_until);
        let covers = from.as_ref().map_or(0, |h| h.covers);
        let manifest = self.chains[usize::from(p)]
            .head
            .clone()
            // The claim (published by now, naming `from`'s files) or `from`.
            .filter(|m| m.number == epoch || from.as_ref().is_some_and(|h| h.number == m.number));
        let state = self.settings.state.clone();
        let dir = PartitionStore::dir(&self.settings.data_dir, p);
        let cache = self.settings.data_dir.join(STATE_CACHE);
        let take = self.orders.take.clone();
        let metrics = self.settings.metrics.clone();
        let chain = &self.chains[usize::from(p)];
        let (stops, taking) = (chain.stops, chain.taking.clone());
        let restore = async move {
            let turn = taking.lock_owned().await;
            let restored = async {
                match (&from, manifest) {
                    // A chain never written to: a store on disk (a crawl
                    // that ran without state_url) is adopted as the first
                    // state.
                    (None, _) => {}
                    (Some(_), Some(m)) if m.files.is_empty() => remove_dir(dir.clone()).await?,
                    (Some(_), Some(m)) => {
                        remove_dir(dir.clone()).await?;
                        let stats = state
                            .restore(&m, &dir, &cache)
                            .await
                            .map_err(|e| e.to_string())?;
                        let restored = &metrics.restore_bytes;
                        restored
                            .with_label_values(&["downloaded"])
                            .inc_by(stats.downloaded);
                        restored.with_label_values(&["reused"]).inc_by(stats.reused);
                        tracing::info!(
                            partition = p,
                            number = m.number,
                            downloaded = stats.downloaded,
                            reused = stats.reused,
                            "partition restored from its chain"
                        );
                    }
                    (Some(h), None) => {
                        return Err(format!("manifest {} was not read", h.number));
                    }
                }
                Ok(())
            }
            .await;
            (restored, turn)
        };
        // Back in the actor: open the partition only if the lease did not
        // stop it meanwhile (the order to open then goes out before any
        // later order to stop it).
        let open = restore
            .into_actor(self)
            .then(move |(restored, turn), act, _| {
                let stopped = act.chains[usize::from(p)].stops != stops;
                let send = (restored.is_ok() && !stopped).then(|| {
                    take.send(TakePartition {
                        id: p,
                        hold_until_ms,
                        covers,
                        lease: act.chains[usize::from(p)].gate.clone(),
                    })
                });
                async move {
                    restored?;
                    let Some(send) = send else {
                        tracing::info!(
                            partition = p,
                            "partition stopped while it was restored: not opened"
                        );
                        return Ok(());
                    };
                    let opened = send
                        .await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| e.to_string());
                    drop(turn);
                    opened
                }
                .into_actor(act)
            });
        ctx.spawn(open.map(move |taken, act, ctx| match taken {
            Ok(()) => act.chains[usize::from(p)].lease.on_opened(),
            Err(err) => act.give_up_take(p, &err, ctx),
        }));
    }

    /// A claimed partition could not be restored or opened: the lease
    /// hands it back and shuns it for a while
    /// ([`PartitionLease::on_open_failed`]).
    fn give_up_take(&mut self, p: u16, err: &str, ctx: &mut Context<Self>) {
        let now = self.now();
        let wait = self.chains[usize::from(p)].lease.on_open_failed(now);
        tracing::error!(
            partition = p,
            error = %err,
            retry_in_s = wait.as_secs_f64(),
            "cannot open a claimed partition; handing it back"
        );
        self.effects(p, ctx);
    }

    fn checkpoint(&mut self, p: u16, number: u64, ctx: &mut Context<Self>) {
        let base = self
            .settings
            .data_dir
            .join("checkpoints")
            .join(format!("{p:03}"));
        let dir = base.join(format!("{number:020}"));
        let epoch = self.chains[usize::from(p)]
            .lease
            .snapshot()
            .epoch
            .unwrap_or(0);
        let previous = self.chains[usize::from(p)].head.clone();
        let unless_at = self.chains[usize::from(p)].published_sequence;
        let state = self.settings.state.clone();
        let make = self.orders.checkpoint.clone();
        let metrics = self.settings.metrics.clone();
        let cache = self.settings.data_dir.join(STATE_CACHE);
        let made = async move {
            // Earlier checkpoints are uploaded (or abandoned) by now.
            blocking(move || {
                let _ = std::fs::remove_dir_all(&base);
                std::fs::create_dir_all(&base).map_err(|e| e.to_string())
            })
            .await?;
            make.send(CheckpointPartition {
                id: p,
                dir: dir.clone(),
                unless_at,
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
            .map(|made| (made, dir))
        };
        // The checkpoint covers pages completed before it; their records
        // go to object storage first, then the checkpoint's files.
        let work = made.into_actor(self).then(move |made, act, ctx| {
            let sealed = act.sealed(ctx);
            async move {
                let (files, covers, sequence, dir) = match made? {
                    (Checkpointed::Unchanged { covers }, _) => {
                        return Ok(CheckpointDone::Unchanged { covers })
                    }
                    (
                        Checkpointed::Made {
                            files,
                            covers,
                            sequence,
                        },
                        dir,
                    ) => (files, covers, sequence, dir),
                };
                if !sealed.await {
                    return Err("the archive's records could not be uploaded in time".to_owned());
                }
                let (refs, bytes) = state
                    .upload_checkpoint(p, epoch, number, &dir, &files, previous.as_ref())
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::debug!(partition = p, number, bytes, "checkpoint uploaded");
                metrics.checkpoint_bytes.inc_by(bytes);
                let kept = refs.clone();
                blocking(move || {
                    StateStore::keep_for_reuse(p, &kept, &dir, &cache);
                    Ok(())
                })
                .await?;
                Ok::<_, String>(CheckpointDone::Made {
                    refs,
                    covers,
                    sequence,
                })
            }
            .into_actor(act)
        });
        ctx.spawn(work.map(move |done, act, ctx| {
            let now = act.now();
            let chain = &mut act.chains[usize::from(p)];
            match done {
                Ok(CheckpointDone::Made {
                    refs,
                    covers,
                    sequence,
                }) => {
                    chain.uploaded = Some((number, refs, sequence));
                    chain.lease.on_checkpoint(now, Some(covers));
                }
                Ok(CheckpointDone::Unchanged { covers }) => {
                    chain.lease.on_checkpoint_unchanged(now, covers);
                }
                Err(err) => {
                    tracing::warn!(partition = p, number, error = %err, "cannot make a checkpoint; renewing the lease with the last one");
                    chain.lease.on_checkpoint(now, None);
                }
            }
            act.effects(p, ctx);
        }));
    }

    /// Resolves once the archive's records written before this call are
    /// in object storage (at once without `[upload]`: they stay on this
    /// disk). Checkpoints of many partitions share one seal: a call waits
    /// for the next seal that starts after it, and at most one runs.
    fn sealed(
        &mut self,
        ctx: &mut Context<Self>,
    ) -> futures_util::future::BoxFuture<'static, bool> {
        if self.orders.seal.is_none() {
            return Box::pin(async { true });
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.seal_next.push(tx);
        if !self.seal_running {
            self.start_seal(ctx);
        }
        Box::pin(async move { rx.await.unwrap_or(false) })
    }

    fn start_seal(&mut self, ctx: &mut Context<Self>) {
        let Some(seal) = &self.orders.seal else {
            return;
        };
        let waiters = std::mem::take(&mut self.seal_next);
        if waiters.is_empty() {
            return;
        }
        self.seal_running = true;
        let sealing = seal.send(SealRecords {
            timeout: self.settings.lease.checkpoint_every,
        });
        let done = async move { sealing.await.unwrap_or(false) };
        ctx.spawn(done.into_actor(self).map(move |ok, act, ctx| {
            for waiter in waiters {
                let _ = waiter.send(ok);
            }
            act.seal_running = false;
            act.start_seal(ctx);
        }));
    }

    fn drain(&mut self, p: u16, ctx: &mut Context<Self>) {
        let drain = self.orders.drain.send(DrainPartition { id: p });
        let owed = self.settings.owed;
        let timeout = self.settings.request_timeout;
        ctx.spawn(drain.into_actor(self).map(move |drained, act, ctx| {
            let now = act.now();
            // Drained, the hosts' own longest wait, measured here: their
            // schedules are in this node's wall-clock ms, which the next
            // owner's clock may read wrong (`politeness::handover`).
            // Requests still out when the drain gave up may run until their
            // deadlines: the next owner waits that long, then the delay.
            let owed = match drained {
                Ok(Some(wait)) => wait.max(owed),
                _ => timeout + owed,
            };
            act.chains[usize::from(p)].lease.on_drained(now, owed);
            act.effects(p, ctx);
        }));
    }

    /// Partitions still held (or being handed back).
    fn holding(&self) -> usize {
        self.chains
            .iter()
            .filter(|c| matches!(c.lease.snapshot().phase, "held" | "releasing" | "claiming"))
            .count()
    }
}

impl Actor for OwnershipActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(TICK, |act, ctx| act.tick(ctx));
    }
}

impl Handler<Advice> for OwnershipActor {
    type Result = ();

    fn handle(&mut self, msg: Advice, ctx: &mut Self::Context) {
        if self.releasing_all {
            return;
        }
        let wanted: BTreeSet<u16> = msg.wanted.into_iter().collect();
        let now = self.now();
        for p in 0..self.chains.len() as u16 {
            self.chains[usize::from(p)]
                .lease
                .want(now, wanted.contains(&p));
            self.effects(p, ctx);
        }
    }
}

impl Handler<super::messages::Hurry> for OwnershipActor {
    type Result = ();

    fn handle(&mut self, msg: super::messages::Hurry, ctx: &mut Self::Context) {
        let now = self.now();
        for p in msg.partitions {
            if let Some(chain) = self.chains.get_mut(usize::from(p)) {
                chain.lease.hurry(now);
                self.effects(p, ctx);
            }
        }
    }
}

impl Handler<ReleaseAll> for OwnershipActor {
    type Result = ResponseFuture<usize>;

    /// Hands every partition back, each through its final checkpoint;
    /// answers once none is held, or `timeout` passed, with the number
    /// handed back.
    fn handle(&mut self, msg: ReleaseAll, ctx: &mut Self::Context) -> Self::Result {
        self.releasing_all = true;
        let now = self.now();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.release_waiter = Some((tx, now + msg.timeout, self.holding()));
        for p in 0..self.chains.len() as u16 {
            self.chains[usize::from(p)].lease.want(now, false);
            self.effects(p, ctx);
        }
        self.answer_release(now);
        Box::pin(async move { rx.await.unwrap_or(0) })
    }
}

impl OwnershipActor {
    /// Answers a [`ReleaseAll`] once it is done or out of time.
    fn answer_release(&mut self, now: Instant) {
        let holding = self.holding();
        let due = self
            .release_waiter
            .as_ref()
            .is_some_and(|(_, deadline, _)| holding == 0 || now >= *deadline);
        if due {
            let (tx, _, held) = self.release_waiter.take().expect("checked");
            if holding > 0 {
                tracing::warn!(
                    partitions = holding,
                    "partitions not handed back at shutdown; their next owner waits out the lease"
                );
            }
            let _ = tx.send(held.saturating_sub(holding));
        }
    }
}

/// Removes a partition's directory, if there is one (off the executor:
/// a large store is many files).
async fn remove_dir(dir: PathBuf) -> Result<(), String> {
    blocking(move || match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("{}: {e}", dir.display()))
        }
        _ => Ok(()),
    })
    .await
}

/// Runs filesystem work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| e.to_string())?
}

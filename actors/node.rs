//! Node: the root actor. Starts, wires and stops everything from the config.
//!
//! It decides nothing of its own about its partitions: which it holds,
//! how long their hosts are held when they open, where a batch or a seed
//! goes, what of the outboxes is sent, when a batch is acknowledged and
//! when the node is idle are its [`NodeScheduler`]'s (`src/scheduler/`);
//! this actor opens stores, starts and stops actors, reads outboxes and
//! sends as it says.
//!
//! Wiring: the FetcherPool runs on the node's arbiter, the ParserPool and
//! Archive on their own SyncArbiter threads, and partitions (with their
//! hosts) spread over `StorageConfig::store_arbiters` arbiters (one by
//! default on two cores), so RocksDB writes never block the fetcher's
//! event loop; the SeenSet and the DigestRouter run on the first of
//! those, beside the hosts and partitions they talk to on every page.
//!
//! Shutdown is one sequence whatever asked for it (SIGINT/SIGTERM, an idle
//! crawl, a test): partitions drain (hosts stop dispatching, in-flight
//! fetches finish or time out, their pages are archived and their links
//! admitted); then, at once, the stores sync, the archive closes its WARC
//! file and the fetcher closes its connections; and (with `[upload]` on)
//! the uploader gets up to `upload.shutdown_wait` to upload what is
//! pending, that last file included.

mod digest;
mod idle;
mod links;
mod operator;
mod orders;
mod report;
mod seeds;
mod shutdown;
mod wiring;

pub use idle::WhenIdle;
pub use seeds::{OfferEarlier, Seed, SeedEach};
use shutdown::sync_stores;
pub use shutdown::Shutdown;

pub use operator::{
    ClusterStatus, CrashHostActor, CrashPartition, GetCluster, GetStatus, NodeStatus,
};

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;
use url::Url;

use super::archive::{ArchiveActor, ArchiveOpenError};
use super::bridge::{BridgeActor, BridgeSettings};
use super::cluster::{ClusterActor, ClusterSettings, Leave};
use super::digests::{self, DigestRouter};
use super::fetcher::FetcherPool;
use super::messages::{
    Admission, AdmitBatch, ArchiveDns, ArchiveOpened, ArchiveSnapshot, BridgeInbound, Candidate,
    CloseArchive, CloseConnections, ClusterIdle, DigestQuery, Discover, Drain, Failure,
    FinishUploads, GetPartitionSnapshot, Hold, Holding, LocalWork, PipelineLinks, QueueEmptied,
    RemoteAdmit, RemoteDigest, SendBatch, SendDigest, UrlOutcome,
};
use super::ownership::{NodeOrders, OwnershipActor, OwnershipSettings};
use super::parser::ParserPool;
use super::partition::{PartitionActor, PartitionSetup};
use super::seen::SeenSet;
use super::upload::{UploadActor, UploadOpenError, Uploads};
use crate::archive::{ArchiveHealth, ReportBook};
use crate::clock::{Now, SharedClock, SystemClock};
use crate::cluster::gossip_auth::GossipKey;
use crate::cluster::lease::StopReason;
use crate::cluster::tls::NodeTls;
use crate::cluster::wire::WireEntry;
use crate::config::Config;
use crate::control::{ControlError, Controls};
use crate::dedup::exact::{digest_partition, DigestReply};
use crate::dedup::DedupIndex;
use crate::fetch::gate::FetchGate;
use crate::frontier::due::ActiveSlots;
use crate::frontier::host::HostSettings;
use crate::frontier::{EntryKind, Priority};
use crate::metrics::Metrics;
use crate::scheduler::idle::Totals;
use crate::scheduler::outbox::{Batch, PAGE as OUTBOX_PAGE};
use crate::scheduler::routes::RouteTable;
use crate::scheduler::view::{Assigned, AssignmentEffect, ClusterView};
use crate::scheduler::{MayOpen, NodeScheduler, Opening, Route};
use crate::store::{
    Manifest, OutboxBatch, PartitionStore, RunMarker, SeenSettings, StoreEnv, StoreError,
};

/// The bridge's window (batches per peer awaiting acknowledgement) at
/// most, with `state_url`: it bounds the memory of batches in flight.
const MAX_DURABLE_WINDOW: usize = 8192;

/// How long a stop waits for its partition's store to close before it
/// gives up waiting (and says so).
const CLOSE_WAIT: Duration = Duration::from_secs(30);
/// How often a cluster node sends what waits in its outboxes.
const OUTBOX_POLL: Duration = Duration::from_millis(100);

/// How often the data directory's free space is read (a Prometheus scrape
/// interval).
const STORAGE_POLL: Duration = Duration::from_secs(15);

/// Errors starting a node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A partition store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The archive could not be opened.
    #[error(transparent)]
    Archive(#[from] ArchiveOpenError),
    /// The run marker could not be written.
    #[error("run marker in {0}: {1}")]
    Marker(std::path::PathBuf, std::io::Error),
    /// `[cluster] state_url` does not open.
    #[error(transparent)]
    State(#[from] crate::upload::TargetError),
    /// The TLS trust store could not be built.
    #[error(transparent)]
    Tls(#[from] crate::fetch::tls::TlsSetupError),
    /// `[fetch] proxy` or `proxy_hosts` cannot be used.
    #[error(transparent)]
    Proxy(#[from] crate::fetch::proxy::ProxyConfigError),
    /// The bridge could not start.
    #[error(transparent)]
    Bridge(#[from] super::bridge::BridgeError),
    /// The cluster's TLS files cannot be used.
    #[error("cluster tls: {0}")]
    ClusterTls(#[from] crate::cluster::tls::TlsError),
    /// The cluster's gossip key cannot be read.
    #[error("cluster.gossip_key {path}: {reason}")]
    GossipKey {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// A `[cluster]` address does not parse.
    #[error("cluster address {0:?}")]
    Address(String),
    /// A scope rule does not compile.
    #[error(transparent)]
    Scope(#[from] crate::url::scope::ScopeError),
    /// The saved runtime controls cannot be read.
    #[error(transparent)]
    Controls(#[from] ControlError),
    /// The uploader could not start.
    #[error(transparent)]
    Upload(#[from] UploadOpenError),
}

/// A partition this node holds: its actor, and its store (open: holding
/// it is what owning the partition means).
struct Held {
    addr: Addr<PartitionActor>,
    /// To restart the actor if it fails.
    store: Arc<PartitionStore>,
    /// Its lease's gate (with a checkpoint chain), kept across restarts.
    lease: Option<Arc<crate::cluster::gate::LeaseGate>>,
}

/// The node's decisions ([`NodeScheduler`]) over its handles on held
/// partitions; what waits on a link batch's durability is its answer.
type Scheduler = NodeScheduler<Held, oneshot::Sender<()>>;

/// The root actor.
pub struct Node {
    data_dir: std::path::PathBuf,
    /// What the node holds and decides (on a single node, every
    /// partition is held).
    schedule: Scheduler,
    /// To open the partitions a cluster node comes to hold.
    env: Arc<StoreEnv>,
    /// On a cluster node: its links to the others.
    cluster: Option<ClusterLinks>,
    /// What partitions are started with.
    setup: PartitionSetup,
    seen: Addr<SeenSet>,
    /// The machine's routes to the partitions admitted here, published
    /// for the SeenSet and the DigestRouter.
    routes: PartitionRoutes,
    archive: Addr<ArchiveActor>,
    /// Whether the archive's writes fail: no checkpoint then.
    archive_health: Arc<ArchiveHealth>,
    /// The crawl report the archive folds its events into.
    report: ReportBook,
    /// Told to close its connections once a stop drained the partitions.
    fetcher: Addr<FetcherPool>,
    /// The uploader, with `[upload]` on; stopped after shutdown.
    uploads: Option<Uploads>,
    /// How long a stop waits for pending uploads.
    upload_wait: Duration,
    metrics: Arc<Metrics>,
    clock: SharedClock,
    started: Now,
    /// The cap on active hosts the partitions share.
    slots: Arc<ActiveSlots>,
    /// How long a stop waits for requests in flight.
    shutdown_timeout: Duration,
    /// Threads of the partitions; stopped after shutdown.
    store_arbiters: Vec<Arbiter>,
    idle_waiters: Vec<oneshot::Sender<()>>,
    /// How often the partitions are polled (`scheduler::idle`).
    idle_poll: Duration,
    shutting_down: bool,
    /// This actor's own address (futures it spawns send back to it).
    self_addr: Addr<Node>,
    /// The operator's runtime controls, and where they are kept.
    controls: Controls,
    controls_path: std::path::PathBuf,
    /// What every request passes: the controls, applied.
    gate: Arc<FetchGate>,
}

/// A cluster node's links to the others.
struct ClusterLinks {
    bridge: Addr<BridgeActor>,
    controller: Addr<ClusterActor>,
    /// Waiting for a first assignment (see [`WhenAssigned`]).
    assigned_waiters: Vec<oneshot::Sender<()>>,
    /// With `[cluster] state_url`: the partitions' leases.
    ownership: Option<Ownership>,
    /// The controller's thread (gossip never waits behind the node's).
    _arbiter: Arbiter,
}

/// With `[cluster] state_url`, the checkpoint chains decide what this
/// node holds ([`OwnershipActor`]); the node opens, drains and stops
/// partitions as it says, and acknowledges link batches only once a
/// published checkpoint covers their admission (the scheduler keeps what
/// waits).
struct Ownership {
    addr: Addr<OwnershipActor>,
}

impl Node {
    /// Restarts every partition whose actor is gone (it failed): over the
    /// same store, so nothing queued is lost; its hosts went with it, so
    /// the new partition's hosts each wait their last delay again first,
    /// as after a crash (a request of the old one may still be running).
    fn supervise_partitions(&mut self) {
        if self.shutting_down {
            return;
        }
        let failed: Vec<u16> = self
            .schedule
            .iter()
            .filter(|(_, held)| !held.addr.connected())
            .map(|(id, _)| id)
            .collect();
        for id in failed {
            tracing::error!(partition = id, "partition actor failed; restarting it");
            let Some(held) = self.schedule.held(id) else {
                continue;
            };
            let (store, lease) = (held.store.clone(), held.lease.clone());
            // Its writes are numbered after every number of the last life
            // the node saw: none is acknowledged before a checkpoint.
            let now = self.clock.now();
            let (opening, floor) = self.schedule.restart(id, now.unix_ms());
            if let Some(gate) = &lease {
                // The last life's requests may still be at their servers:
                // held on the monotonic clock too (see `LeaseGate::hold`).
                gate.hold(now.instant_at_ms(opening.hold_until_ms));
            }
            let addr = self.start_partition(id, store.clone(), opening, floor, lease.clone());
            self.schedule.restarted(id, Held { addr, store, lease });
            self.publish_routes();
        }
    }

    /// Starts partition `id`'s actor over `store`, as `opening` says, its
    /// writes counted from `covers`, its requests gated by `lease` (the
    /// SeenSet and the DigestRouter are pointed at it once the machine
    /// holds it: [`Node::publish_routes`]).
    fn start_partition(
        &self,
        id: u16,
        store: Arc<PartitionStore>,
        opening: Opening,
        covers: u64,
        lease: Option<Arc<crate::cluster::gate::LeaseGate>>,
    ) -> Addr<PartitionActor> {
        let mut setup = PartitionSetup {
            hold_until_ms: opening.hold_until_ms,
            covers,
            lease,
            ..self.setup.clone()
        };
        if opening.crashed {
            let mut settings = (*setup.settings).clone();
            settings.crashed = true;
            setup.settings = Arc::new(settings);
        }
        let arbiter = self.store_arbiters[usize::from(id) % self.store_arbiters.len()].handle();
        PartitionActor::start_in_arbiter(&arbiter, move |_| PartitionActor::new(id, store, setup))
    }

    /// The partitions this node holds.
    fn held(&self) -> impl Iterator<Item = &Held> {
        self.schedule.iter().map(|(_, held)| held)
    }

    /// The held partition of `host`, if this node holds it.
    fn holder_of(&self, host: &str) -> Option<&Held> {
        self.schedule
            .held(crate::url::partition_of(host, self.schedule.partitions()))
    }

    /// Shows the space left on the data directory's filesystem.
    fn measure_storage(&self) {
        match crate::store::space::space(&self.data_dir) {
            Ok(space) => {
                let bytes = |b: u64| i64::try_from(b).unwrap_or(i64::MAX);
                self.metrics.storage_available.set(bytes(space.available));
                self.metrics.storage_capacity.set(bytes(space.capacity));
            }
            Err(err) => {
                tracing::debug!(error = %err, "cannot read the data directory's filesystem space")
            }
        }
    }
}

impl Actor for Node {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.metrics
            .partitions
            .set(i64::from(self.schedule.partitions()));
        self.measure_storage();
        ctx.run_interval(STORAGE_POLL, |act, _| act.measure_storage());
        ctx.run_interval(self.idle_poll, |act, ctx| act.poll_partitions(ctx));
        if self.cluster.is_some() {
            ctx.run_interval(OUTBOX_POLL, |act, ctx| act.send_outboxes(ctx));
        }
    }
}

impl Node {
    /// Opens partition `id`'s store and starts its actor: this node holds
    /// it from now on. A store whose last run did not end cleanly was
    /// held by a node that crashed (or was cut off): its hosts are held
    /// as the scheduler's hold rule says.
    fn open_partition(&mut self, id: u16) -> Result<(), StoreError> {
        self.open_held(id, 0, 0, None)
    }

    /// [`Node::open_partition`], its hosts held until `taken_until_ms` at
    /// least (Unix ms), its writes counted from `covers`, its requests
    /// gated by `lease` (with a checkpoint chain).
    fn open_held(
        &mut self,
        id: u16,
        taken_until_ms: u64,
        covers: u64,
        lease: Option<Arc<crate::cluster::gate::LeaseGate>>,
    ) -> Result<(), StoreError> {
        let store = Arc::new(PartitionStore::open(&self.env, &self.data_dir, id)?);
        let node = self.schedule.view().map_or("", |v| v.me());
        let crashed = store.begin_run(node)?;
        if crashed {
            tracing::warn!(
                partition = id,
                "taking over a partition whose last owner did not stop cleanly"
            );
        }
        let opening =
            self.schedule
                .opening(id, self.clock.now().unix_ms(), taken_until_ms, crashed);
        let addr = self.start_partition(id, store.clone(), opening, covers, lease.clone());
        self.schedule.opened(id, Held { addr, store, lease });
        self.publish_routes();
        Ok(())
    }

    /// Hands partition `id` back: no new links reach it, its hosts stop
    /// dispatching and finish what is in flight, then (if they did) its
    /// run is marked ended cleanly and its store closes with its actor,
    /// freeing its lock for the next owner.
    fn release_partition(&mut self, id: u16, ctx: &mut Context<Self>) {
        let Some(held) = self.schedule.closed(id).0 else {
            return;
        };
        self.schedule.releasing(id);
        self.publish_routes();
        let drain = held.addr.send(Drain {
            timeout: self.shutdown_timeout,
        });
        let handed = async move {
            let clean = drain.await.ok().flatten().is_some();
            sync_stores(vec![held.store.clone()], clean).await;
            held.addr.do_send(super::messages::Retire);
            tracing::info!(partition = id, clean, "partition handed back");
        };
        ctx.spawn(
            handed
                .into_actor(self)
                .map(move |(), act, _| act.schedule.released(id)),
        );
    }
}

impl Handler<Hold> for Node {
    type Result = MessageResult<Hold>;

    /// Carries out what the node machine makes of gossip's round
    /// ([`NodeScheduler::on_assignment`]).
    fn handle(&mut self, msg: Hold, ctx: &mut Self::Context) -> Self::Result {
        if self.shutting_down {
            return MessageResult(self.holding());
        }
        let assigned = Assigned {
            assignment: msg.assignment,
            holders: msg.holders,
            hearing: msg.hearing,
            may_create_stores: msg.may_create_stores,
        };
        let data_dir = self.data_dir.clone();
        let on_disk = |id| PartitionStore::dir(&data_dir, id).exists();
        for effect in self.schedule.on_assignment(assigned, on_disk) {
            match effect {
                AssignmentEffect::Advise(wanted) => {
                    if let Some(o) = self.ownership() {
                        o.addr.do_send(super::messages::Advice { wanted });
                    }
                }
                AssignmentEffect::SaveHolders => {
                    if let Err(err) = self.schedule.holders().save(&self.data_dir) {
                        tracing::error!(error = %err, "cannot save the partitions' holders");
                    }
                }
                AssignmentEffect::Open(id) => match self.open_partition(id) {
                    Ok(()) => tracing::info!(partition = id, "partition taken"),
                    // Its last owner still holds it: next reconcile.
                    Err(StoreError::Locked { .. }) => {}
                    Err(err) => {
                        tracing::error!(partition = id, error = %err, "cannot open a partition")
                    }
                },
                AssignmentEffect::Refused(id, why) => refused(id, why),
                AssignmentEffect::Release(id) => self.release_partition(id, ctx),
            }
        }
        self.wake_assigned_waiters();
        MessageResult(self.holding())
    }
}

/// Says, once per partition, why a partition assigned here is not opened.
fn refused(id: u16, why: MayOpen) {
    match why {
        MayOpen::Unheard { first: true } => tracing::warn!(
            partition = id,
            "partition assigned here has no state on this disk and no peer has been heard: a peer this node cannot hear may hold it, so it waits for gossip to form (set [cluster] state_url for partitions fenced by their chain)"
        ),
        MayOpen::Wait {
            holder,
            first: true,
        } => tracing::warn!(
            partition = id,
            %holder,
            "partition assigned here, but its state is on its last holder's disk: it waits for that node (set [cluster] state_url for partitions that outlive their node)"
        ),
        _ => {}
    }
}

impl Node {
    /// What this node holds and shuns, as gossip publishes it.
    fn holding(&self) -> Holding {
        Holding {
            held: self.held_ids(),
            shunned: self.schedule.shunned(),
        }
    }

    /// The partitions this node holds.
    fn held_ids(&self) -> Vec<u16> {
        self.schedule.held_ids()
    }

    /// Nothing waits in the held partitions' outboxes or on its way.
    fn outboxes_empty(&self) -> bool {
        self.schedule.outbox().quiet()
            && self
                .held()
                .all(|h| h.store.outbox_page(None, 1).is_ok_and(|p| p.is_empty()))
    }
}

/// Resolves once a cluster node has its first assignment, every partition
/// with an owner (at once on a single node): seeds given before would find
/// no owner for the partitions of other nodes.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct WhenAssigned;

impl Handler<WhenAssigned> for Node {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: WhenAssigned, _: &mut Self::Context) -> Self::Result {
        let ready = self.schedule.ready();
        let Some(c) = &mut self.cluster else {
            return Box::pin(async {});
        };
        if ready {
            return Box::pin(async {});
        }
        let (tx, rx) = oneshot::channel();
        c.assigned_waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Node {
    /// Answers [`WhenAssigned`] once the machine says seeds may be
    /// offered ([`NodeScheduler::ready`]).
    fn wake_assigned_waiters(&mut self) {
        let ready = self.schedule.ready();
        let Some(c) = &mut self.cluster else {
            return;
        };
        if ready {
            for waiter in c.assigned_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    fn ownership(&self) -> Option<&Ownership> {
        self.cluster.as_ref()?.ownership.as_ref()
    }
}

impl Handler<super::messages::Shunned> for Node {
    type Result = ();

    fn handle(&mut self, msg: super::messages::Shunned, _: &mut Self::Context) {
        self.schedule.on_shunned(msg.0);
        self.wake_assigned_waiters();
    }
}

/// The tables through which the SeenSet and the DigestRouter read the
/// node machine's routes to the partitions admitted here
/// ([`crate::scheduler::routes`]).
struct PartitionRoutes {
    admit: super::seen::AdmitRoutes,
    digest: digests::DigestRoutes,
}

impl PartitionRoutes {
    /// Tables routing to `held` (index = partition id).
    fn new(held: &[Option<Held>]) -> Self {
        let admit = held
            .iter()
            .map(|h| h.as_ref().map(|h| h.addr.clone().recipient()));
        let digest = held
            .iter()
            .map(|h| h.as_ref().map(|h| h.addr.clone().recipient()));
        PartitionRoutes {
            admit: Arc::new(RouteTable::new(admit.collect())),
            digest: Arc::new(RouteTable::new(digest.collect())),
        }
    }
}

impl Node {
    /// Publishes the machine's routes to the partitions admitted here
    /// ([`Scheduler::here`]): call after every change of what it holds or
    /// hands back.
    fn publish_routes(&self) {
        let here = self.schedule.here();
        let admit = here.iter().map(|h| h.map(|h| h.addr.clone().recipient()));
        let digest = here.iter().map(|h| h.map(|h| h.addr.clone().recipient()));
        self.routes.admit.publish(admit.collect());
        self.routes.digest.publish(digest.collect());
    }
}

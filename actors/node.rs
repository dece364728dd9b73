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

mod operator;

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
    Admission, AdmitBatch, ArchiveOpened, ArchiveSnapshot, BridgeInbound, Candidate, CloseArchive,
    CloseConnections, ClusterIdle, DigestQuery, Discover, Drain, Failure, FinishUploads,
    GetPartitionSnapshot, Hold, Holding, LocalWork, PipelineLinks, RemoteAdmit, RemoteDigest,
    Reroute, SendBatch, SendDigest, UrlOutcome,
};
use super::ownership::{NodeOrders, OwnershipActor, OwnershipSettings};
use super::parser::ParserPool;
use super::partition::{PartitionActor, PartitionSetup};
use super::seen::SeenSet;
use super::upload::{UploadActor, UploadOpenError, Uploads};
use crate::clock::{Now, SharedClock, SystemClock};
use crate::cluster::assign::Assignment;
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
use crate::scheduler::{MayOpen, NodeScheduler, Opening, Route, SeedView};
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

/// How often the node checks whether the crawl ran out of work.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// How often the data directory's free space is read (a Prometheus scrape
/// interval).
const STORAGE_POLL: Duration = Duration::from_secs(15);
/// How soon a single node checks again when its scheduler says the end
/// is near (`scheduler::idle`): the end of a crawl is seen within a few
/// milliseconds instead of half an [`IDLE_POLL`] on average (~25 ms of a
/// 4.5 s bench crawl).
const NEAR_IDLE_POLL: Duration = Duration::from_millis(5);

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
    /// Routes hosts' digest questions to local partitions (others to us).
    digests: Addr<DigestRouter>,
    archive: Addr<ArchiveActor>,
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
    node_id: String,
    bridge: Addr<BridgeActor>,
    controller: Addr<ClusterActor>,
    /// Every partition's owner, as last assigned.
    assignment: Arc<Assignment>,
    /// Waiting for a first assignment (see [`WhenAssigned`]).
    assigned_waiters: Vec<oneshot::Sender<()>>,
    /// With `[cluster] state_url`: the partitions' leases.
    ownership: Option<Ownership>,
    /// Whether peers are heard, as of the last assignment.
    hearing: crate::cluster::hearing::HearingView,
    /// Without `state_url`: stores may be created (a peer was heard, or
    /// none is expected), as of the last assignment.
    may_create_stores: bool,
    /// The partitions the leases shun now (published in gossip).
    shunned: Vec<u16>,
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
    /// Opens the crawl in `config.storage.data_dir` and starts every actor.
    /// Must run inside an actix system.
    pub fn start(config: Config, metrics: Arc<Metrics>) -> Result<Addr<Node>, NodeError> {
        Self::start_with_clock(config, metrics, Arc::new(SystemClock))
    }

    /// [`Node::start`] on an injected clock: every time decision of the
    /// node's actors reads it.
    pub fn start_with_clock(
        mut config: Config,
        metrics: Arc<Metrics>,
        clock: SharedClock,
    ) -> Result<Addr<Node>, NodeError> {
        let tls = crate::fetch::tls::client_config(&config.fetch.extra_root_certificates)?;
        let started = clock.now();
        let year = chrono::Datelike::year(&chrono::DateTime::<chrono::Utc>::from(started.wall));
        let scope = crate::url::Scope::new(&config.scope, &config.traps, year)?;
        let data_dir = config.storage.data_dir.clone();
        let open_with = Manifest::partitions_to_open(
            &data_dir,
            config.storage.partitions,
            config.storage.partitions_given,
        )?;
        if open_with != config.storage.partitions {
            tracing::info!(
                partitions = open_with,
                "the crawl keeps the partition count it was created with (the config does not set one)"
            );
            config.storage.partitions = open_with;
        }
        Manifest::ensure(&data_dir, config.storage.partitions)?;
        // A cluster node learns whether a partition's last run crashed from
        // the partition itself (`begin_run`), when it takes it: the data
        // directory is shared, and so would be a marker in it.
        let crashed = !config.cluster.enabled
            && RunMarker::begin(&data_dir).map_err(|e| NodeError::Marker(data_dir.clone(), e))?;
        if crashed {
            tracing::warn!("the last run did not stop cleanly: every host waits its last delay again before its first request");
        }
        let env = StoreEnv::new(&config.storage)
            .with_seen(SeenSettings::per_partition(
                &config.seen,
                config.storage.partitions,
            ))
            .with_budgets((&config.budget).into());
        // A single node holds every partition; a cluster node those the
        // assignment gives it, once it has joined.
        //
        // The archive's dedup index is a store of its own: it opens on a
        // thread beside the partitions' (each open is mostly RocksDB
        // writing, syncing and reading back its files; one after the
        // other, the dedup index's came last on every start).
        let (stores, dedup) = std::thread::scope(|scope| {
            let dedup = scope.spawn(|| DedupIndex::open(&config.dedup_dir()));
            let stores: Result<Vec<Option<Arc<PartitionStore>>>, StoreError> =
                match config.cluster.enabled {
                    false => {
                        let ids: Vec<u16> = (0..config.storage.partitions).collect();
                        PartitionStore::open_all(&env, &data_dir, &ids)
                            .map(|stores| stores.into_iter().map(|s| Some(Arc::new(s))).collect())
                    }
                    true => Ok((0..config.storage.partitions).map(|_| None).collect()),
                };
            let dedup = dedup
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (stores, dedup)
        });
        let stores = stores?;
        let dedup = dedup.map_err(ArchiveOpenError::from)?;
        let uploads = UploadActor::start(&config, metrics.clone())?;
        let closed_to = uploads.as_ref().map(|u| u.addr.clone().recipient());
        let archive = ArchiveActor::start(&config, dedup, metrics.clone(), closed_to)?;
        if let Some(u) = &uploads {
            u.addr.do_send(ArchiveOpened(archive.clone().recipient()));
        }
        let parser = ParserPool::start(&config.parse, config.fetch.max_body_bytes, metrics.clone());
        let controls_path = config.controls_file();
        let controls = Controls::load(
            &controls_path,
            Controls::new(config.fetch.max_requests_per_second),
        )?;
        if controls.paused {
            tracing::warn!(file = %controls_path.display(), "the crawl is paused (by an operator, before this start): POST /api/v1/crawl/resume to go on");
        }
        let gate = Arc::new(FetchGate::new(&controls));
        let fetcher = FetcherPool::new(&config, tls, gate.clone(), metrics.clone()).start();
        let settings = Arc::new(HostSettings::from_config(&config, crashed));
        let store_arbiters: Vec<Arbiter> = (0..config.storage.store_arbiters())
            .map(|_| Arbiter::new())
            .collect();
        let config = Arc::new(config);
        // The SeenSet needs the partitions and the partitions the SeenSet:
        // create the SeenSet's mailbox first (actix's default capacity) and
        // start it once wired.
        let (seen_tx, seen_rx) = actix::dev::channel::channel::<SeenSet>(16);
        let seen_addr = Addr::new(seen_tx);
        // Hosts ask the DigestRouter, which asks the partitions: likewise.
        let (digests_tx, digests_rx) = actix::dev::channel::channel::<DigestRouter>(16);
        let digests_addr = Addr::new(digests_tx);
        // Hosts ask the node digest questions: its mailbox exists first too.
        let node_ctx = Context::<Node>::new();
        let pipeline = PipelineLinks {
            fetch: fetcher.clone().recipient(),
            parse: parser.clone().recipient(),
            parse_sitemap: parser.clone().recipient(),
            digest: parser.recipient(),
            archive: archive.clone().recipient(),
            removed: archive.clone().recipient(),
            discover: seen_addr.clone().recipient(),
            digests: digests_addr.clone().recipient(),
        };
        let slots = ActiveSlots::new(config.frontier.active_hosts_cap(config.fetch.concurrency));
        let setup = PartitionSetup {
            settings,
            pipeline,
            slots: slots.clone(),
            clock: clock.clone(),
            metrics: metrics.clone(),
            // A single node after a crash holds its partitions as a
            // cluster node does (the scheduler's hold rule).
            hold_until_ms: crate::scheduler::opening(
                clock.now().unix_ms(),
                0,
                crashed,
                config.fetch.timeout,
            )
            .hold_until_ms,
            covers: 0,
            lease: None,
        };
        let restart_setup = setup.clone();
        let partitions: Vec<Option<Held>> = stores
            .into_iter()
            .enumerate()
            .map(|(id, store)| {
                let store = store?;
                let arbiter = &store_arbiters[id % store_arbiters.len()];
                let setup = setup.clone();
                let actor_store = store.clone();
                let addr = PartitionActor::start_in_arbiter(&arbiter.handle(), move |_| {
                    PartitionActor::new(id as u16, actor_store, setup)
                });
                Some(Held {
                    addr,
                    store,
                    lease: None,
                })
            })
            .collect();
        let recipients = partitions
            .iter()
            .map(|p| p.as_ref().map(|h| h.addr.clone().recipient()))
            .collect();
        // The SeenSet runs beside the first partitions and their hosts
        // (with one store thread, all of them): every page's links go from
        // a host to it and on to a partition, and each message between
        // threads is a wake-up (an eventfd write and a context switch).
        // On the side-by-side bench that took ~3 % of the CPU a page.
        let seen = SeenSet::new(&config, scope, recipients, metrics.clone());
        store_arbiters[0].spawn_fn(move || {
            Context::with_receiver(seen_rx).run(seen);
        });
        // The DigestRouter too: each page asks it twice (see its docs).
        let answerers = partitions
            .iter()
            .map(|p| p.as_ref().map(|h| h.addr.clone().recipient()))
            .collect();
        let router = DigestRouter::new(answerers, node_ctx.address().recipient(), metrics.clone());
        store_arbiters[0].spawn_fn(move || {
            Context::with_receiver(digests_rx).run(router);
        });
        let cluster = match config.cluster.enabled {
            true => Some(Self::join(
                &config,
                node_ctx.address(),
                metrics.clone(),
                clock.clone(),
            )?),
            false => None,
        };
        let self_addr = node_ctx.address();
        let mut schedule = Scheduler::new(
            config.storage.partitions,
            config.fetch.timeout,
            cluster.as_ref().is_some_and(|c| c.ownership.is_some()),
            crate::cluster::holders::KnownHolders::load(&data_dir),
        );
        for (id, held) in partitions.into_iter().enumerate() {
            if let Some(held) = held {
                schedule.opened(id as u16, held);
            }
        }
        Ok(node_ctx.run(Node {
            self_addr,
            data_dir,
            schedule,
            env: Arc::new(env),
            cluster,
            setup: restart_setup,
            seen: seen_addr,
            digests: digests_addr,
            archive,
            fetcher,
            uploads,
            upload_wait: config.upload.shutdown_wait,
            metrics,
            clock,
            started,
            slots,
            shutdown_timeout: config.crawl.shutdown_timeout,
            store_arbiters,
            idle_waiters: Vec::new(),
            shutting_down: false,
            controls,
            controls_path,
            gate,
        }))
    }

    /// The bridge's TLS identity and the gossip key, unless the cluster is
    /// insecure (config validation makes sure it is one or the other).
    fn credentials(
        c: &crate::config::ClusterConfig,
    ) -> Result<(Option<Arc<NodeTls>>, Option<GossipKey>), NodeError> {
        if c.insecure {
            tracing::warn!(
                node = %c.node_id,
                "cluster.insecure: the bridge and gossip are not authenticated"
            );
            return Ok((None, None));
        }
        let tls = NodeTls::load(&c.tls_ca, &c.tls_cert, &c.tls_key, &c.node_id)?;
        let key_error = |reason: String| NodeError::GossipKey {
            path: c.gossip_key.clone(),
            reason,
        };
        let text = std::fs::read_to_string(&c.gossip_key).map_err(|e| key_error(e.to_string()))?;
        let key = GossipKey::from_hex(&text).map_err(|e| key_error(e.to_string()))?;
        Ok((Some(Arc::new(tls)), Some(key)))
    }

    /// Starts the bridge and the cluster controller of a cluster node.
    fn join(
        config: &Config,
        node: Addr<Node>,
        metrics: Arc<Metrics>,
        clock: SharedClock,
    ) -> Result<ClusterLinks, NodeError> {
        let c = &config.cluster;
        let addr = |a: &str| {
            a.parse::<std::net::SocketAddr>()
                .map_err(|_| NodeError::Address(a.to_owned()))
        };
        let mut settings = BridgeSettings::new(&c.cluster_id, &c.node_id, addr(&c.bridge)?);
        let (tls, gossip_key) = Self::credentials(c)?;
        settings.tls = tls;
        if !c.state_url.is_empty() {
            // A batch is acknowledged once a published checkpoint covers
            // its admission, up to a checkpoint interval later: the window
            // must hold what a peer sends in that time (Little's law), or
            // it, not the web, paces the crawl. At the default window's
            // rate per 100 ms of acknowledgement delay.
            let intervals = (c.checkpoint_interval.as_millis() / 100).max(1) as usize;
            settings.window = settings
                .window
                .saturating_mul(intervals)
                .min(MAX_DURABLE_WINDOW);
        }
        let inbound = BridgeInbound {
            admit: node.clone().recipient(),
            digest: node.clone().recipient(),
        };
        let (bridge, bridge_addr) = BridgeActor::start(settings, inbound, metrics.clone())?;
        let mut membership = crate::cluster::membership::MembershipConfig::new(
            &c.cluster_id,
            &c.node_id,
            addr(&c.gossip)?,
        );
        membership.seeds = c.peers.clone();
        membership.gossip_key = gossip_key;
        membership.gossip_rejected = Some(metrics.gossip_rejected.clone());
        membership.gossip_interval = c.gossip_interval;
        let arbiter = Arbiter::new();
        let controller = ClusterActor::start_on(
            &arbiter.handle(),
            ClusterSettings {
                membership,
                bridge_addr,
                partitions: config.storage.partitions,
                admin_addr: config
                    .admin
                    .enabled
                    .then(|| config.admin.listen.parse().ok())
                    .flatten(),
                clock: clock.clone(),
                metrics: metrics.clone(),
            },
            node.clone().recipient(),
            node.clone().recipient(),
            bridge.clone().recipient(),
        );
        let ownership = Self::own(config, node, clock, metrics)?;
        Ok(ClusterLinks {
            node_id: c.node_id.clone(),
            bridge,
            controller,
            assignment: Arc::new(Assignment::compute(config.storage.partitions, &[])),
            assigned_waiters: Vec::new(),
            ownership,
            hearing: Default::default(),
            may_create_stores: false,
            shunned: Vec::new(),
            _arbiter: arbiter,
        })
    }

    /// Starts the OwnershipActor, with `[cluster] state_url` set.
    fn own(
        config: &Config,
        node: Addr<Node>,
        clock: SharedClock,
        metrics: Arc<Metrics>,
    ) -> Result<Option<Ownership>, NodeError> {
        let c = &config.cluster;
        if c.state_url.is_empty() {
            return Ok(None);
        }
        let state = crate::cluster::chain::StateStore::open(&c.state_url, &c.state_options)?;
        let settings = OwnershipSettings {
            node: c.node_id.clone(),
            partitions: config.storage.partitions,
            lease: crate::cluster::lease::LeaseSettings::of(config),
            data_dir: config.storage.data_dir.clone(),
            state: Arc::new(state),
            clock,
            owed: config.politeness.min_delay,
            request_timeout: config.fetch.timeout,
            metrics,
        };
        let orders = NodeOrders {
            take: node.clone().recipient(),
            checkpoint: node.clone().recipient(),
            drain: node.clone().recipient(),
            stop: node.clone().recipient(),
            durable: node.clone().recipient(),
            seal: config.upload.enabled.then(|| node.clone().recipient()),
            shunned: node.recipient(),
        };
        if !config.upload.enabled {
            tracing::warn!("[cluster] state_url without [upload]: WARC records stay on this node's disk, and a lost disk loses them (the frontier it does not)");
        }
        let addr = OwnershipActor::new(settings, orders, incarnation(&c.node_id)).start();
        Ok(Some(Ownership { addr }))
    }

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
            let opening = self.schedule.opening(self.clock.now().unix_ms(), 0, true);
            // Its writes are numbered after every number of the last life
            // the node saw: none is acknowledged before a checkpoint.
            let floor = self.schedule.write_floor(id);
            let addr = self.start_partition(id, store.clone(), opening, floor, lease.clone());
            self.schedule.restarted(id, Held { addr, store, lease });
        }
    }

    /// Starts partition `id`'s actor over `store`, as `opening` says, its
    /// writes counted from `covers`, its requests gated by `lease`; points
    /// the SeenSet and the DigestRouter at it.
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
        let addr = PartitionActor::start_in_arbiter(&arbiter, move |_| {
            PartitionActor::new(id, store, setup)
        });
        self.reroute(id, Some(&addr));
        addr
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

    fn poll_partitions(&mut self, ctx: &mut Context<Self>) {
        self.supervise_partitions();
        self.metrics.partitions_held.set(self.held().count() as i64);
        let asks: Vec<_> = self
            .held()
            .map(|h| h.addr.send(GetPartitionSnapshot))
            .collect();
        let gather = futures_util::future::join_all(asks);
        ctx.spawn(gather.into_actor(self).map(|snaps, act, ctx| {
            let mut totals = Totals::default();
            // A partition that did not answer (it failed, and is being
            // restarted) may hold work: the node is not idle then.
            let all_answered = snaps.iter().all(Result::is_ok);
            for snap in snaps.into_iter().flatten() {
                totals.queued += snap.queued + snap.refresh_due.now;
                totals.completed += snap.completed;
                totals.active_hosts += snap.active_hosts;
            }
            // Only a single node decides the end itself (a cluster's end
            // is the cluster's).
            let single = act.cluster.is_none();
            let awaited = !act.idle_waiters.is_empty();
            let verdict = act
                .schedule
                .idle()
                .observe(totals, all_answered, single, awaited);
            let idle = verdict.idle;
            if idle {
                act.hurry_checkpoints();
            }
            if verdict.poll_soon {
                ctx.run_later(NEAR_IDLE_POLL, |act, ctx| {
                    act.schedule.idle().polled_soon();
                    act.poll_partitions(ctx);
                });
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

impl Actor for Node {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.metrics
            .partitions
            .set(i64::from(self.schedule.partitions()));
        self.measure_storage();
        ctx.run_interval(STORAGE_POLL, |act, _| act.measure_storage());
        ctx.run_interval(IDLE_POLL, |act, ctx| act.poll_partitions(ctx));
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
    fn open_partition(&mut self, id: u16, node: &str) -> Result<(), StoreError> {
        self.open_held(id, node, 0, 0, None)
    }

    /// [`Node::open_partition`], its hosts held until `taken_until_ms` at
    /// least (Unix ms), its writes counted from `covers`, its requests
    /// gated by `lease` (with a checkpoint chain).
    fn open_held(
        &mut self,
        id: u16,
        node: &str,
        taken_until_ms: u64,
        covers: u64,
        lease: Option<Arc<crate::cluster::gate::LeaseGate>>,
    ) -> Result<(), StoreError> {
        let store = Arc::new(PartitionStore::open(&self.env, &self.data_dir, id)?);
        let crashed = store.begin_run(node)?;
        if crashed {
            tracing::warn!(
                partition = id,
                "taking over a partition whose last owner did not stop cleanly"
            );
        }
        let opening = self
            .schedule
            .opening(self.clock.now().unix_ms(), taken_until_ms, crashed);
        let addr = self.start_partition(id, store.clone(), opening, covers, lease.clone());
        self.schedule.opened(id, Held { addr, store, lease });
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
        self.reroute(id, None);
        self.schedule.releasing(id);
        let drain = held.addr.send(Drain {
            timeout: self.shutdown_timeout,
        });
        let handed = async move {
            let clean = drain.await.unwrap_or(false);
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

    /// Sends what waits in the held partitions' outboxes to the owners of
    /// its partitions (this node's own partitions included), and deletes
    /// each batch once its owner admitted it; what is read and sent is the
    /// scheduler's (`scheduler::outbox`).
    fn send_outboxes(&mut self, ctx: &mut Context<Self>) {
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
    fn deliver(
        &self,
        batch: OutboxBatch,
    ) -> Option<futures_util::future::BoxFuture<'static, Result<(), Failure>>> {
        let cluster = self.cluster.as_ref()?;
        let owner = cluster.assignment.owner(batch.partition);
        match self
            .schedule
            .route(batch.partition, owner, &cluster.node_id)
        {
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

impl Handler<Hold> for Node {
    type Result = MessageResult<Hold>;

    fn handle(&mut self, msg: Hold, ctx: &mut Self::Context) -> Self::Result {
        if self.shutting_down {
            return MessageResult(self.holding());
        }
        if let Some(c) = &mut self.cluster {
            c.hearing = msg.hearing;
            c.may_create_stores = msg.may_create_stores;
            if let Some(o) = &c.ownership {
                // The chains decide; gossip only advises.
                let wanted = msg.assignment.held_by(&msg.node);
                o.addr.do_send(super::messages::Advice { wanted });
                c.assignment = msg.assignment;
                self.wake_assigned_waiters();
                return MessageResult(self.holding());
            }
        }
        let (take, release) = msg
            .assignment
            .changes_for(&msg.node, |p| self.schedule.held(p).is_some());
        self.learn_holders(&msg.holders);
        for id in take {
            if !self.may_open(id, &msg.node, msg.may_create_stores) {
                continue;
            }
            match self.open_partition(id, &msg.node) {
                Ok(()) => tracing::info!(partition = id, "partition taken"),
                // Its last owner still holds it: next reconcile.
                Err(StoreError::Locked { .. }) => {}
                Err(err) => {
                    tracing::error!(partition = id, error = %err, "cannot open a partition")
                }
            }
        }
        for id in release {
            self.release_partition(id, ctx);
        }
        if let Some(c) = &mut self.cluster {
            c.assignment = msg.assignment;
        }
        self.wake_assigned_waiters();
        MessageResult(self.holding())
    }
}

impl Node {
    /// Remembers who gossip shows holding each partition (restart-in-place,
    /// see `src/cluster/holders.rs`).
    fn learn_holders(&mut self, holders: &std::collections::BTreeMap<u16, String>) {
        if self.schedule.learn_holders(holders) {
            if let Err(err) = self.schedule.holders().save(&self.data_dir) {
                tracing::error!(error = %err, "cannot save the partitions' holders");
            }
        }
    }

    /// Whether partition `id` may be opened here (the scheduler's
    /// [`NodeScheduler::may_open`]); says once per partition which ones
    /// it wants and cannot take.
    fn may_open(&mut self, id: u16, me: &str, may_create: bool) -> bool {
        let on_disk = PartitionStore::dir(&self.data_dir, id).exists();
        match self.schedule.may_open(id, me, on_disk, may_create) {
            MayOpen::Yes => true,
            MayOpen::Unheard { first } => {
                if first {
                    tracing::warn!(
                        partition = id,
                        "partition assigned here has no state on this disk and no peer has been heard: a peer this node cannot hear may hold it, so it waits for gossip to form (set [cluster] state_url for partitions fenced by their chain)"
                    );
                }
                false
            }
            MayOpen::Wait { holder, first } => {
                if first {
                    tracing::warn!(
                        partition = id,
                        %holder,
                        "partition assigned here, but its state is on its last holder's disk: it waits for that node (set [cluster] state_url for partitions that outlive their node)"
                    );
                }
                false
            }
        }
    }

    /// What this node holds and shuns, as gossip publishes it.
    fn holding(&self) -> Holding {
        Holding {
            held: self.held_ids(),
            shunned: self
                .cluster
                .as_ref()
                .map(|c| c.shunned.clone())
                .unwrap_or_default(),
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
        let ready = self.owns_its_assignment();
        let Some(c) = &mut self.cluster else {
            return Box::pin(async {});
        };
        if ready && c.assignment.is_complete() {
            return Box::pin(async {});
        }
        let (tx, rx) = oneshot::channel();
        c.assigned_waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
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
    fn admit_durably(
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
    fn admit_marked(
        &self,
        id: u16,
        entries: Vec<crate::store::AdmitEntry>,
    ) -> futures_util::future::BoxFuture<'static, Result<oneshot::Receiver<()>, Failure>> {
        let Some(held) = self.schedule.held(id) else {
            return Box::pin(async move { Err(Failure::NotHeld { partition: id }) });
        };
        let admit = held.addr.send(super::messages::AdmitMarked { entries });
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
    fn published(
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
                ownership.do_send(super::messages::Hurry { partitions });
            }
            for (id, rx) in covered {
                rx.await.map_err(|_| Failure::NotHeld { partition: id })?;
            }
            Ok(())
        })
    }

    /// Whether this node may offer seeds (the scheduler's
    /// [`NodeScheduler::may_offer_seeds`]); always on a single node.
    fn owns_its_assignment(&self) -> bool {
        let Some(c) = &self.cluster else {
            return true;
        };
        let assigned = c.assignment.held_by(&c.node_id);
        self.schedule.may_offer_seeds(SeedView {
            chain: c.ownership.is_some(),
            assigned: &assigned,
            shunned: &c.shunned,
            alone: c.hearing.alone,
            may_create_stores: c.may_create_stores,
        })
    }

    /// Answers [`WhenAssigned`] once every partition has an owner (and,
    /// with a checkpoint chain, this node holds its own).
    fn wake_assigned_waiters(&mut self) {
        let ready = self.owns_its_assignment();
        let Some(c) = &mut self.cluster else {
            return;
        };
        if ready && c.assignment.is_complete() {
            for waiter in c.assigned_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    fn ownership(&self) -> Option<&Ownership> {
        self.cluster.as_ref()?.ownership.as_ref()
    }

    /// With nothing left to fetch here, has the partitions whose link
    /// batches wait on a checkpoint checkpointed now.
    fn hurry_checkpoints(&self) {
        let Some(o) = self.ownership() else {
            return;
        };
        let partitions = self.schedule.awaiting_checkpoint();
        if !partitions.is_empty() {
            o.addr.do_send(super::messages::Hurry { partitions });
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

impl Handler<super::messages::Shunned> for Node {
    type Result = ();

    fn handle(&mut self, msg: super::messages::Shunned, _: &mut Self::Context) {
        if let Some(c) = &mut self.cluster {
            c.shunned = msg.0;
        }
        self.wake_assigned_waiters();
    }
}

impl Handler<super::messages::DurableUpTo> for Node {
    type Result = ();

    fn handle(&mut self, msg: super::messages::DurableUpTo, _: &mut Self::Context) {
        for tx in self.schedule.covered(msg.id, msg.covers) {
            let _ = tx.send(());
        }
    }
}

impl Handler<super::messages::TakePartition> for Node {
    type Result = Result<(), Failure>;

    fn handle(
        &mut self,
        msg: super::messages::TakePartition,
        _: &mut Self::Context,
    ) -> Self::Result {
        if self.shutting_down {
            return Err(Failure::Mailbox("shutting down".into()));
        }
        if self.schedule.held(msg.id).is_some() {
            return Ok(());
        }
        let node = self
            .cluster
            .as_ref()
            .map(|c| c.node_id.clone())
            .unwrap_or_default();
        self.open_held(
            msg.id,
            &node,
            msg.hold_until_ms,
            msg.covers,
            Some(msg.lease),
        )
        .map_err(|e| Failure::Store(e.to_string()))?;
        // A new owner's watermarks count on from its checkpoint.
        self.schedule.taken(msg.id, msg.covers);
        tracing::info!(partition = msg.id, "partition taken");
        self.wake_assigned_waiters();
        Ok(())
    }
}

impl Handler<super::messages::CheckpointPartition> for Node {
    type Result = ResponseFuture<Result<super::messages::Checkpointed, Failure>>;

    fn handle(
        &mut self,
        msg: super::messages::CheckpointPartition,
        _: &mut Self::Context,
    ) -> Self::Result {
        let Some(held) = self.schedule.held(msg.id) else {
            let reason = format!("partition {} is not open here", msg.id);
            return Box::pin(async move { Err(Failure::Peer(reason)) });
        };
        let take = held.addr.send(super::messages::TakeCheckpoint {
            dir: msg.dir,
            unless_at: msg.unless_at,
        });
        Box::pin(async move { take.await? })
    }
}

impl Handler<super::messages::SealRecords> for Node {
    type Result = ResponseFuture<bool>;

    /// The records of every page completed so far reach object storage:
    /// the WARC file closes and the uploader puts it (and any file still
    /// pending) up. Without `[upload]` they stay on this node's disk.
    fn handle(&mut self, msg: super::messages::SealRecords, _: &mut Self::Context) -> Self::Result {
        let Some(uploads) = self.uploads.as_ref().map(|u| u.addr.clone()) else {
            return Box::pin(async { false });
        };
        let seal = self.archive.send(super::messages::SealArchive);
        Box::pin(async move {
            if !matches!(seal.await, Ok(Ok(_))) {
                return false;
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

impl Handler<super::messages::DrainPartition> for Node {
    type Result = ResponseFuture<bool>;

    /// No new links reach the partition (they wait in outboxes for its
    /// next owner); its hosts stop and finish what is in flight.
    fn handle(
        &mut self,
        msg: super::messages::DrainPartition,
        _: &mut Self::Context,
    ) -> Self::Result {
        let Some(held) = self.schedule.held(msg.id) else {
            return Box::pin(async { true });
        };
        let drain = held.addr.send(Drain {
            timeout: self.shutdown_timeout,
        });
        self.reroute(msg.id, None);
        Box::pin(async move { drain.await.unwrap_or(false) })
    }
}

impl Handler<super::messages::StopPartition> for Node {
    type Result = ResponseFuture<()>;

    /// Closes the partition: after a hand-back, its store marked as ended
    /// cleanly; fenced or lapsed, at once (its hosts die with its actor;
    /// requests in flight end on their own, and the next owner's hold
    /// covers them). Link batches waiting on its durability are refused,
    /// so their senders send them again, to its next owner. Resolves once
    /// its store is closed (the last handle on it dropped), so a later take
    /// of the partition here never restores into a directory an old
    /// instance still writes to.
    fn handle(
        &mut self,
        msg: super::messages::StopPartition,
        _: &mut Self::Context,
    ) -> Self::Result {
        // Dropped, each waiter's admission fails `NotHeld`.
        let (held, waiting) = self.schedule.closed(msg.id);
        drop(waiting);
        let Some(held) = held else {
            return Box::pin(async {});
        };
        self.reroute(msg.id, None);
        let clean = msg.reason == StopReason::Released;
        let id = msg.id;
        Box::pin(async move {
            if clean {
                sync_stores(vec![held.store.clone()], true).await;
            }
            held.addr.do_send(super::messages::Retire);
            let store = Arc::downgrade(&held.store);
            drop(held);
            tracing::info!(partition = id, reason = ?msg.reason, "partition closed");
            wait_closed(id, store).await;
        })
    }
}

/// Waits until the last handle on a stopped partition's store is dropped
/// (its hosts and actor have stopped), at most [`CLOSE_WAIT`].
async fn wait_closed(id: u16, store: std::sync::Weak<crate::store::PartitionStore>) {
    let deadline = tokio::time::Instant::now() + CLOSE_WAIT;
    while store.strong_count() > 0 {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(partition = id, "a stopped partition's store is still open");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A random id of this node's process: a restarted node is a new owner.
fn incarnation(node: &str) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{node}/{}/{nanos}", std::process::id());
    xxhash_rust::xxh3::xxh3_64(seed.as_bytes())
}

impl Node {
    /// Points the SeenSet's admissions and the DigestRouter's questions
    /// for partition `id` at `to` (`None`: not held here any more).
    fn reroute(&self, id: u16, to: Option<&Addr<PartitionActor>>) {
        self.seen.do_send(Reroute::<AdmitBatch> {
            id,
            to: to.map(|a| a.clone().recipient()),
        });
        self.digests.do_send(Reroute::<DigestQuery> {
            id,
            to: to.map(|a| a.clone().recipient()),
        });
    }

    /// Asks `query` of the digest's partition: here if this node holds it,
    /// of its owner over the bridge if another node does; `None` while it
    /// has no owner (or is being opened here).
    fn ask_partition(&self, partition: u16, query: DigestQuery) -> Option<digests::Asked> {
        if let Some(held) = self.schedule.held(partition) {
            let ask = held.addr.send(query);
            return Some(Box::pin(async move { ask.await? }));
        }
        let cluster = self.cluster.as_ref()?;
        let owner = cluster.assignment.owner(partition)?;
        if owner == cluster.node_id {
            return None;
        }
        let ask = cluster.bridge.send(SendDigest {
            peer: owner.to_owned(),
            partition,
            query,
        });
        Some(Box::pin(async move { ask.await? }))
    }
}

impl Handler<DigestQuery> for Node {
    type Result = ResponseFuture<Result<DigestReply, Failure>>;

    /// Questions the DigestRouter could not answer here: for a partition
    /// another node owns (or none does yet).
    fn handle(&mut self, msg: DigestQuery, _: &mut Self::Context) -> Self::Result {
        let partition = digest_partition(&msg.digest, self.schedule.partitions());
        let asked = self.ask_partition(partition, msg);
        let metrics = self.metrics.clone();
        Box::pin(async move { Ok(digests::answer(asked, metrics).await) })
    }
}

impl Handler<RemoteDigest> for Node {
    type Result = ResponseFuture<Result<DigestReply, Failure>>;

    fn handle(&mut self, msg: RemoteDigest, _: &mut Self::Context) -> Self::Result {
        let Some(held) = self.schedule.held(msg.partition) else {
            let partition = msg.partition;
            return Box::pin(async move { Err(Failure::NotHeld { partition }) });
        };
        let ask = held.addr.send(msg.query);
        Box::pin(async move { ask.await? })
    }
}

/// Offers seed URLs (depth 0). Unparseable ones count as filtered.
#[derive(Debug, Message)]
#[rtype(result = "Result<Admission, Failure>")]
pub struct Seed {
    /// The seed URLs.
    pub urls: Vec<String>,
}

impl Handler<Seed> for Node {
    type Result = ResponseActFuture<Self, Result<Admission, Failure>>;

    fn handle(&mut self, msg: Seed, _: &mut Self::Context) -> Self::Result {
        Box::pin(
            self.offer(msg.urls, false, false)
                .map(|r, _, _| r.map(|(a, _)| a)),
        )
    }
}

/// Offers seed URLs as [`Seed`] does, answering what became of each, in
/// order (`trawl run`'s seeds, the admin API's `POST /api/v1/seeds`).
#[derive(Debug, Message)]
#[rtype(result = "Result<Vec<UrlOutcome>, Failure>")]
pub struct SeedEach {
    /// The seed URLs.
    pub urls: Vec<String>,
    /// Offer them as changed now: a removed URL comes back even if it was
    /// given as a seed before, a fetched one is due at once (see
    /// [`crate::frontier::lifecycle::due_again`]).
    pub reseed: bool,
}

impl Handler<SeedEach> for Node {
    type Result = ResponseActFuture<Self, Result<Vec<UrlOutcome>, Failure>>;

    fn handle(&mut self, msg: SeedEach, _: &mut Self::Context) -> Self::Result {
        Box::pin(
            self.offer(msg.urls, true, msg.reseed)
                .map(|r, _, _| r.map(|(_, o)| o)),
        )
    }
}

impl Node {
    /// Offers `urls` as seeds (depth 0); with `detail`, also what became of
    /// each (an unparseable one is filtered as `invalid`); with `reseed`,
    /// as changed now (a `lastmod` of now). With a checkpoint chain it
    /// resolves only once published checkpoints hold the seeds (see
    /// [`Node::published`]): a seed answered is never lost with this node.
    fn offer(
        &mut self,
        urls: Vec<String>,
        detail: bool,
        reseed: bool,
    ) -> impl ActorFuture<Self, Output = Result<(Admission, Vec<UrlOutcome>), Failure>> {
        let parsed: Vec<Option<Url>> = urls.iter().map(|u| Url::parse(u.trim()).ok()).collect();
        let lastmod_ms = reseed.then(|| self.clock.now().unix_ms());
        let candidates: Vec<Candidate> = parsed
            .iter()
            .flatten()
            .map(|url| Candidate {
                referrer: None,
                url: url.clone(),
                depth: 0,
                priority: Priority::SEED,
                kind: EntryKind::Page,
                lastmod_ms,
            })
            .collect();
        let unparsed = urls.len() - candidates.len();
        let send = self.seen.send(Discover {
            candidates,
            detail,
            from: None,
        });
        let discovered = async move { send.await? };
        discovered.into_actor(self).then(move |discovered, act, _| {
            // Seeds of partitions held elsewhere (a cluster node) wait in
            // the outbox of a partition this node holds, durably, and go
            // to their owners like links do (retried until an owner that
            // holds the partition takes them). A node holding no partition
            // yet hands them over at once or fails.
            let routed = discovered.and_then(|d| {
                let mut admission = d.admission;
                admission.filtered += unparsed;
                let mut outcomes = d.outcomes.into_iter();
                let outcomes: Vec<UrlOutcome> = match detail {
                    true => parsed
                        .iter()
                        .map(|p| match p {
                            Some(_) => outcomes.next().unwrap_or(UrlOutcome::Filtered("invalid")),
                            None => UrlOutcome::Filtered("invalid"),
                        })
                        .collect(),
                    false => Vec::new(),
                };
                // What must be in a published checkpoint before the
                // seeds are answered: an answered seed outlives the loss
                // of this node with its disk.
                let mut written = d.straight;
                if d.remote.is_empty() {
                    return Ok((admission, outcomes, Vec::new(), written));
                }
                if let Some((id, held)) = act.schedule.seed_outbox() {
                    held.store
                        .complete_with_outbox(&[], &[], &d.remote, &[])
                        .map_err(|e| Failure::Store(e.to_string()))?;
                    written.push(id);
                    return Ok((admission, outcomes, Vec::new(), written));
                }
                let sends = d
                    .remote
                    .into_iter()
                    .map(|batch| {
                        act.deliver(batch).ok_or_else(|| {
                            Failure::Peer("a seed's partition has no owner yet".into())
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((admission, outcomes, sends, written))
            });
            let routed = routed.map(|(admission, outcomes, sends, written)| {
                (admission, outcomes, sends, act.published(written))
            });
            async move {
                let (admission, outcomes, sends, published) = routed?;
                for send in sends {
                    send.await?;
                }
                published.await?;
                Ok((admission, outcomes))
            }
            .into_actor(act)
        })
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
            o.addr.send(super::messages::ReleaseAll {
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
fn sync_stores(
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
fn close_stores(stores: Vec<Arc<PartitionStore>>) {
    std::thread::scope(|scope| {
        for store in stores {
            scope.spawn(move || drop(store));
        }
    });
}

//! Cluster membership: who is in the crawl, and who is alive.
//!
//! The nodes of a cluster split the web's partitions between them; each
//! node must know the others, what they say about themselves, and which
//! of them have died, so it can recompute the partition assignment when
//! the set changes. This module is a thin layer over
//! [chitchat](https://docs.rs/chitchat/0.10), the gossip library Quickwit
//! runs:
//!
//! - **Gossip with Scuttlebutt reconciliation.** Every `gossip_interval`
//!   each node exchanges digests (node, heartbeat, max version) with up to
//!   three peers over UDP and sends only the key-values the other lacks.
//!   There is no coordinator to elect or lose, a node needs only one seed
//!   to join, and each node talks to a few peers per round however large
//!   the cluster.
//! - **Phi-accrual failure detection.** Instead of a fixed "silent for N
//!   seconds" rule, each node measures how often it hears a peer's
//!   heartbeat and declares the peer dead when the silence is long *for
//!   that peer*: the timeout adapts to the cluster's size and the
//!   network's pace instead of having to be tuned for the worst case.
//!   (See [`MembershipConfig`] for how our settings map to chitchat's.)
//!
//! # What a node publishes
//!
//! A node's [`NodeInfo`] is published as three gossiped key-values:
//! [`KEY_BRIDGE_ADDR`] (the TCP address of its bridge, where peers send
//! it work), [`KEY_PARTITIONS`] (the partitions it holds now, as ranges,
//! e.g. `0-3,7,9-12`) and [`KEY_READY`] (`true` or `false`). Values from a
//! peer are parsed defensively: a missing or malformed value is logged and
//! the peer is listed with no info ([`Member::info`] is `None`), never a
//! panic. The three keys travel separately, so a peer may briefly see a
//! mix of an old and a new `NodeInfo`; that is harmless for the rule below.
//!
//! # Membership is advisory only
//!
//! Gossip is eventually consistent: two nodes can disagree for a while
//! about who is alive (a partition of the network, a paused process, a
//! slow link), so two nodes may both *believe* they should hold a
//! partition. What gossip says only decides which partitions a node
//! *tries* to take. Ownership is fenced by holding the partition's RocksDB
//! store open (its file lock): a node crawls a partition only while it
//! holds that lock, never because membership says so, and a node that
//! loses the race for the lock simply does not crawl it.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chitchat::transport::UdpTransport;
use chitchat::{
    spawn_chitchat, Chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig,
    NodeState, Version,
};
use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::sealed_udp::SealedUdp;

/// Key of a node's bridge address (`SocketAddr`, e.g. `10.0.0.7:7281`).
pub const KEY_BRIDGE_ADDR: &str = "bridge_addr";
/// Key of the partitions a node holds now: sorted ranges, e.g. `0-3,7`.
pub const KEY_PARTITIONS: &str = "partitions";
/// Key of a node's readiness: `true` or `false`.
pub const KEY_READY: &str = "ready";
/// The key of [`NodeInfo::idle`] (`true` or `false`).
pub const KEY_IDLE: &str = "idle";
/// The key of [`NodeInfo::activity`] (a decimal counter).
pub const KEY_ACTIVITY: &str = "activity";
/// The key of [`NodeInfo::admin`] (an address, or empty).
pub const KEY_ADMIN: &str = "admin";
/// The key of [`NodeInfo::shunned`] (ranges as [`KEY_PARTITIONS`]).
pub const KEY_SHUNNED: &str = "shunned";

/// How many characters of a malformed value a log line shows: enough to
/// recognise it, bounded whatever a peer sends.
const LOGGED_VALUE_CHARS: usize = 64;

/// How long chitchat keeps a deleted key's tombstone. We never delete keys
/// (publishing overwrites them), so this only has to be finite.
const KEY_TOMBSTONE_GRACE: Duration = Duration::from_secs(3600);

/// chitchat's sampling window (heartbeat intervals remembered per peer),
/// its default: at a 500 ms gossip interval, a minute or two of history.
const SAMPLING_WINDOW: usize = 1000;

/// What a node publishes about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Where peers reach this node's bridge (TCP).
    pub bridge_addr: SocketAddr,
    /// The partitions this node holds now (their stores are open here).
    /// Published sorted and without duplicates; read back the same way.
    pub partitions: Vec<u16>,
    /// Whether the node is ready to take work.
    pub ready: bool,
    /// Nothing queued, due, in flight or waiting in an outbox here.
    pub idle: bool,
    /// A counter that moves whenever the node does work (completions,
    /// admissions): two snapshots with the same counters of every node,
    /// all idle, taken far enough apart, mean the cluster is idle (see
    /// `cluster::idle`).
    pub activity: u64,
    /// Where its admin API listens, if it serves one (questions about
    /// hosts of its partitions are forwarded there).
    pub admin: Option<SocketAddr>,
    /// Partitions this node will not take for now (it could not open,
    /// read or checkpoint them): the assignment passes them to others.
    /// Optional in gossip (a node of an older build publishes none).
    pub shunned: Vec<u16>,
}

impl NodeInfo {
    /// The key-values that publish this info.
    fn key_values(&self) -> [(&'static str, String); 7] {
        [
            (KEY_BRIDGE_ADDR, self.bridge_addr.to_string()),
            (KEY_PARTITIONS, encode_partitions(&self.partitions)),
            (KEY_READY, self.ready.to_string()),
            (KEY_IDLE, self.idle.to_string()),
            (KEY_ACTIVITY, self.activity.to_string()),
            (
                KEY_ADMIN,
                self.admin.map(|a| a.to_string()).unwrap_or_default(),
            ),
            (KEY_SHUNNED, encode_partitions(&self.shunned)),
        ]
    }

    /// Reads a node's info from its gossiped key-values.
    fn from_state(state: &NodeState) -> Result<NodeInfo, InfoError> {
        let get = |key: &'static str| state.get(key).ok_or(InfoError::Missing(key));
        let malformed = |key: &'static str, value: &str| InfoError::Malformed {
            key,
            value: value.chars().take(LOGGED_VALUE_CHARS).collect(),
        };
        let bridge = get(KEY_BRIDGE_ADDR)?;
        let bridge_addr = bridge
            .parse()
            .map_err(|_| malformed(KEY_BRIDGE_ADDR, bridge))?;
        let partitions = get(KEY_PARTITIONS)?;
        let partitions =
            decode_partitions(partitions).ok_or_else(|| malformed(KEY_PARTITIONS, partitions))?;
        let flag = |key: &'static str| match get(key)? {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(malformed(key, other)),
        };
        let ready = flag(KEY_READY)?;
        let idle = flag(KEY_IDLE)?;
        let activity = get(KEY_ACTIVITY)?;
        let activity = activity
            .parse()
            .map_err(|_| malformed(KEY_ACTIVITY, activity))?;
        // Optional: an unreadable admin address only loses forwarding.
        let admin = state.get(KEY_ADMIN).and_then(|a| a.parse().ok());
        // Optional too: unreadable or absent, the node shuns nothing.
        let shunned = state
            .get(KEY_SHUNNED)
            .and_then(decode_partitions)
            .unwrap_or_default();
        Ok(NodeInfo {
            bridge_addr,
            partitions,
            ready,
            idle,
            activity,
            admin,
            shunned,
        })
    }
}

/// Why a peer's published info could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum InfoError {
    /// Not published (yet): a peer that just joined may not have sent
    /// every key.
    #[error("no value for {0}")]
    Missing(&'static str),
    /// Published, but not in our format (a bug or another version).
    #[error("malformed value for {key}: {value:?}")]
    Malformed { key: &'static str, value: String },
}

/// Encodes partitions as sorted, comma-separated ranges (`0-3,7,9-12`):
/// a node usually holds runs of partitions, and a gossiped value should
/// stay small (4096 partitions held fit in 6 bytes; every other one of
/// them in ~10 KB, well under a UDP datagram).
pub fn encode_partitions(partitions: &[u16]) -> String {
    let mut sorted = partitions.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            end += 1;
            i += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = if start == end {
            write!(out, "{start}")
        } else {
            write!(out, "{start}-{end}")
        };
        i += 1;
    }
    out
}

/// Decodes [`encode_partitions`]' format, sorted and deduplicated; `None`
/// if any part is not a `u16` or an ascending `a-b` range. Lenient about
/// order and overlaps (they are normalised), strict about syntax: a value
/// we cannot read entirely is not half-trusted.
pub fn decode_partitions(value: &str) -> Option<Vec<u16>> {
    if value.is_empty() {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for part in value.split(',') {
        let (start, end) = match part.split_once('-') {
            Some((a, b)) => (parse_u16(a)?, parse_u16(b)?),
            None => {
                let p = parse_u16(part)?;
                (p, p)
            }
        };
        if start > end {
            return None;
        }
        out.extend(start..=end);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// A decimal `u16`, digits only (no sign, no spaces).
fn parse_u16(s: &str) -> Option<u16> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// How to join the cluster, and how quickly to give up on a silent peer.
///
/// # Failure detection and chitchat's `FailureDetectorConfig`
///
/// chitchat's "phi" is `silence / mean heartbeat interval`: the time since
/// a peer's heartbeat last advanced, over the mean interval between its
/// advances as observed here (a plain ratio, not the log-probability of
/// Cassandra's or Akka's phi, so the same threshold means a shorter
/// timeout). A peer is live while phi ≤ `phi_threshold`, which makes the
/// detection time about `phi_threshold × mean interval`. Each gossip round
/// advances a node's heartbeat, and a peer hears it both directly and
/// relayed through others, so the mean is at most about `gossip_interval`
/// and shrinks as the cluster grows. Liveness is re-evaluated once per
/// gossip round. We map:
///
/// - `phi_threshold` → `phi_threshold` (default 8, chitchat's).
/// - `gossip_interval` → `initial_interval`, the prior for the mean (with
///   the weight of 5 samples), so a new peer is judged at the pace we
///   gossip rather than chitchat's 5 s default (made for a 1 s interval).
/// - [`nominal_failure_timeout`](Self::nominal_failure_timeout)
///   (`phi_threshold × gossip_interval`) → `max_interval`: a longer
///   interval is an outage, not a sample, and must not inflate the mean.
/// - `dead_node_grace_period` → `dead_node_grace_period`: how long a dead
///   node stays listed (not live) before it is forgotten (default 1 h;
///   chitchat's is 24 h).
/// - chitchat's `sampling_window_size`: its default, 1000 intervals.
///
/// With the defaults (500 ms, 8) a crashed peer is reported dead within
/// `nominal_failure_timeout` + one round, 4.5 s, and sooner in practice:
/// measured on loopback after 20 s of gossip, 1.5 s in a cluster of 3 and
/// 2.5 s in a cluster of 6 (the more peers, the fewer of them gossip with
/// a given one directly).
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    /// The cluster's name: a node gossiping with another name is refused
    /// (chitchat answers its messages with "bad cluster") and never listed.
    pub cluster_id: String,
    /// This node's id, unique in the cluster and stable across restarts
    /// (partition assignment hashes it).
    pub node_id: String,
    /// Where to listen for gossip (UDP). Port 0 is refused: the port is
    /// also what peers are told.
    pub gossip_addr: SocketAddr,
    /// The gossip address peers should use, when it is not `gossip_addr`
    /// (listening on `0.0.0.0`, or behind NAT).
    pub advertise_addr: Option<SocketAddr>,
    /// Gossip addresses (`ip:port` or `host:port`; names are re-resolved
    /// every minute) of other nodes to join through. Empty for the first
    /// node; one live seed is enough.
    pub seeds: Vec<String>,
    /// How often to gossip (default 500 ms).
    pub gossip_interval: Duration,
    /// How many mean heartbeat intervals of silence make a peer dead
    /// (default 8; see above). At least 1.
    pub phi_threshold: f64,
    /// How long a dead node stays listed before it is forgotten (default
    /// 1 h).
    pub dead_node_grace_period: Duration,
    /// The cluster's gossip key: every datagram sealed and checked
    /// ([`super::gossip_auth`]). `None`: plain chitchat UDP, which anyone
    /// who can reach the port can join (`[cluster] insecure`).
    pub gossip_key: Option<super::gossip_auth::GossipKey>,
    /// Where dropped datagrams are counted (label `reason`).
    pub gossip_rejected: Option<prometheus::IntCounterVec>,
}

impl MembershipConfig {
    /// Defaults for everything but who we are and where we gossip.
    pub fn new(cluster_id: &str, node_id: &str, gossip_addr: SocketAddr) -> MembershipConfig {
        MembershipConfig {
            cluster_id: cluster_id.to_string(),
            node_id: node_id.to_string(),
            gossip_addr,
            advertise_addr: None,
            seeds: Vec::new(),
            gossip_interval: Duration::from_millis(500),
            phi_threshold: 8.0,
            dead_node_grace_period: Duration::from_secs(3600),
            gossip_key: None,
            gossip_rejected: None,
        }
    }

    /// `phi_threshold × gossip_interval`: how long a peer heard once per
    /// gossip interval stays live after it falls silent (one more gossip
    /// interval until the next liveness check). Peers heard more often,
    /// as in a cluster of three or more, are detected sooner.
    pub fn nominal_failure_timeout(&self) -> Duration {
        self.gossip_interval.mul_f64(self.phi_threshold)
    }

    /// Whether this node is given peers to join through (its own address
    /// among them does not count): the first node of a cluster is not,
    /// and expects to be alone until others join.
    pub fn expects_peers(&self) -> bool {
        let own = self.gossip_addr.to_string();
        self.seeds.iter().any(|peer| *peer != own)
    }

    /// The address peers are told to gossip with.
    fn advertised(&self) -> SocketAddr {
        self.advertise_addr.unwrap_or(self.gossip_addr)
    }

    fn validate(&self) -> Result<(), MembershipError> {
        let invalid = |why: &str| Err(MembershipError::Config(why.to_string()));
        if self.cluster_id.is_empty() {
            return invalid("cluster_id is empty");
        }
        if self.node_id.is_empty() {
            return invalid("node_id is empty");
        }
        if self.gossip_addr.port() == 0 {
            return invalid("gossip_addr needs a port (peers are told it)");
        }
        let advertised = self.advertised();
        if advertised.ip().is_unspecified() || advertised.port() == 0 {
            return invalid("the advertised gossip address must be reachable: set advertise_addr");
        }
        if self.gossip_interval.is_zero() {
            return invalid("gossip_interval is zero");
        }
        if !self.phi_threshold.is_finite() || self.phi_threshold < 1.0 {
            return invalid("phi_threshold must be at least 1 (below, a live peer flaps)");
        }
        if self.dead_node_grace_period.is_zero() {
            return invalid("dead_node_grace_period is zero");
        }
        Ok(())
    }

    fn chitchat_config(&self, generation: u64) -> ChitchatConfig {
        ChitchatConfig {
            chitchat_id: ChitchatId::new(self.node_id.clone(), generation, self.advertised()),
            cluster_id: self.cluster_id.clone(),
            gossip_interval: self.gossip_interval,
            listen_addr: self.gossip_addr,
            seed_nodes: self.seeds.clone(),
            failure_detector_config: FailureDetectorConfig {
                phi_threshold: self.phi_threshold,
                sampling_window_size: SAMPLING_WINDOW,
                max_interval: self.nominal_failure_timeout(),
                initial_interval: self.gossip_interval,
                dead_node_grace_period: self.dead_node_grace_period,
            },
            marked_for_deletion_grace_period: KEY_TOMBSTONE_GRACE,
            catchup_callback: None,
            extra_liveness_predicate: None,
        }
    }
}

/// Why membership could not start or stop cleanly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// The configuration cannot work.
    #[error("membership config: {0}")]
    Config(String),
    /// Started outside a tokio runtime (chitchat spawns its tasks on it).
    #[error("membership needs a tokio runtime (an actix System is one)")]
    NoRuntime,
    /// The gossip socket could not be opened.
    #[error("gossip on {addr}: {reason}")]
    Start { addr: SocketAddr, reason: String },
    /// The gossip server had failed before it was shut down.
    #[error("gossip stopped: {0}")]
    Stopped(String),
}

/// One node as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The node's id.
    pub node_id: String,
    /// Where it gossips.
    pub gossip_addr: SocketAddr,
    /// Its incarnation (start time, Unix ms): a restarted node is a new
    /// generation, and only the newest one is listed.
    pub generation: u64,
    /// What it published, if every key was there and readable.
    pub info: Option<NodeInfo>,
    /// Whether the failure detector believes it alive (always true for
    /// ourselves).
    pub live: bool,
}

/// Every node this node knows of, sorted by node id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    self_id: String,
    members: Vec<Member>,
}

impl Members {
    /// Our own node id.
    pub fn self_id(&self) -> &str {
        &self.self_id
    }

    /// Every known node, live or not, sorted by node id.
    pub fn as_slice(&self) -> &[Member] {
        &self.members
    }

    /// The node with this id, if known.
    pub fn get(&self, node_id: &str) -> Option<&Member> {
        self.members
            .binary_search_by(|m| m.node_id.as_str().cmp(node_id))
            .ok()
            .map(|i| &self.members[i])
    }

    /// Ids of the live nodes (ourselves included), sorted.
    pub fn live_ids(&self) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| m.live)
            .map(|m| m.node_id.as_str())
            .collect()
    }

    /// Ids of the live nodes that published `ready: true`, sorted.
    pub fn ready_ids(&self) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| m.live && m.info.as_ref().is_some_and(|i| i.ready))
            .map(|m| m.node_id.as_str())
            .collect()
    }
}

/// This node's membership: gossip running on the tokio runtime, our
/// published [`NodeInfo`], and the latest view of the cluster.
///
/// Dropping it stops gossip abruptly (peers detect a failure);
/// [`shutdown`](Self::shutdown) leaves gracefully.
pub struct Membership {
    handle: ChitchatHandle,
    self_id: ChitchatId,
    gossip_interval: Duration,
    publish: watch::Sender<NodeInfo>,
    members: watch::Receiver<Members>,
    refresher: JoinHandle<()>,
}

impl fmt::Debug for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Membership")
            .field("self_id", &self.self_id)
            .field("published", &*self.publish.borrow())
            .finish_non_exhaustive()
    }
}

impl Membership {
    /// Joins the cluster: opens the gossip socket, publishes `published`
    /// and starts gossiping with the seeds, on the current tokio runtime
    /// (an actix System is one; chitchat needs its net and time drivers).
    ///
    /// Gossip's tasks then share that runtime's thread: a thread blocked
    /// for about a failure timeout (a long synchronous store write, a big
    /// parse) stops our heartbeats and peers declare us dead (and the
    /// stall can make us see them dead). Start it on a thread that never
    /// blocks, e.g. its own `Arbiter`.
    pub async fn start(
        config: MembershipConfig,
        published: NodeInfo,
    ) -> Result<Membership, MembershipError> {
        config.validate()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(MembershipError::NoRuntime);
        }
        // The start time as generation: a restarted node is told apart
        // from its previous life, whose state peers may still hold.
        let generation = crate::clock::unix_ms(SystemTime::now());
        let chitchat_config = config.chitchat_config(generation);
        let self_id = chitchat_config.chitchat_id.clone();
        let initial = published
            .key_values()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let sealed;
        let transport: &dyn chitchat::transport::Transport = match &config.gossip_key {
            Some(key) => {
                sealed = SealedUdp::new(key.clone(), config.gossip_rejected.clone());
                &sealed
            }
            None => &UdpTransport,
        };
        let handle = spawn_chitchat(chitchat_config, initial, transport)
            .await
            .map_err(|e| MembershipError::Start {
                addr: config.gossip_addr,
                reason: format!("{e:#}"),
            })?;
        let chitchat = handle.chitchat();
        let mut view = View::new(self_id.clone());
        let (first, live_nodes) = {
            let guard = chitchat.lock().await;
            let first = view.refresh(&guard);
            (first, guard.live_nodes_watcher())
        };
        let first = first.unwrap_or_else(|| view.members_from_scratch());
        let (members_tx, members) = watch::channel(first);
        let (publish, publish_rx) = watch::channel(published);
        tracing::info!(
            cluster = %config.cluster_id,
            node = %config.node_id,
            gossip = %self_id.gossip_advertise_addr,
            seeds = ?config.seeds,
            "joined gossip"
        );
        let refresher = tokio::spawn(refresh_loop(Refresher {
            chitchat,
            view,
            poll: config.gossip_interval,
            publish: publish_rx,
            live_nodes,
            members: members_tx,
            terminated: Box::pin(handle.termination_watcher()),
        }));
        Ok(Membership {
            handle,
            self_id,
            gossip_interval: config.gossip_interval,
            publish,
            members,
            refresher,
        })
    }

    /// Replaces what we publish. [`published`](Self::published) returns it
    /// at once, our own entry in the view follows as soon as the membership
    /// task runs (it is not awaited here), and peers learn it in the next
    /// gossip round; only the latest info matters, so
    /// a burst of calls publishes the last one. (If gossip has stopped,
    /// nothing reaches anyone; the view then says so: no peer is live.)
    pub fn publish(&self, info: NodeInfo) {
        self.publish.send_replace(info);
    }

    /// What we publish now.
    pub fn published(&self) -> NodeInfo {
        self.publish.borrow().clone()
    }

    /// The latest view of the cluster.
    pub fn snapshot(&self) -> Members {
        self.members.borrow().clone()
    }

    /// A receiver notified on every change of the view: a node joining,
    /// dying or coming back, or publishing new info (heartbeats alone do
    /// not count). Its current value counts as seen, so read it with
    /// `borrow_and_update` before the first `changed().await`.
    pub fn changes(&self) -> watch::Receiver<Members> {
        let mut rx = self.members.clone();
        rx.mark_unchanged();
        rx
    }

    /// Our node id.
    pub fn node_id(&self) -> &str {
        &self.self_id.node_id
    }

    /// The gossip address peers know us by.
    pub fn gossip_addr(&self) -> SocketAddr {
        self.self_id.gossip_advertise_addr
    }

    /// Leaves the cluster: publishes `ready: false` and gossips it for two
    /// rounds, so peers stop counting on us before the failure detector
    /// would tell them, then stops gossip and waits for it to finish.
    /// Peers then see us not live once the failure timeout has passed.
    pub async fn shutdown(self) -> Result<(), MembershipError> {
        let Membership {
            handle,
            self_id,
            gossip_interval,
            publish,
            members: _,
            refresher,
        } = self;
        publish.send_modify(|info| info.ready = false);
        tokio::time::sleep(gossip_interval * 2).await;
        drop(publish);
        // The refresher ends when the publishing side closes.
        if let Err(e) = refresher.await {
            tracing::warn!(error = %e, "membership refresher failed");
        }
        let stopped = handle
            .shutdown()
            .await
            .map_err(|e| MembershipError::Stopped(format!("{e:#}")));
        tracing::info!(node = %self_id.node_id, "left gossip");
        stopped
    }
}

/// The state of the task keeping [`Members`] current.
struct Refresher {
    chitchat: Arc<Mutex<Chitchat>>,
    view: View,
    /// How often to look at chitchat's state even without a live-set
    /// change: a dead node's info or its removal is not notified.
    poll: Duration,
    publish: watch::Receiver<NodeInfo>,
    live_nodes: watch::Receiver<std::collections::BTreeMap<ChitchatId, NodeState>>,
    members: watch::Sender<Members>,
    terminated: std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>>,
}

/// Applies what we publish to chitchat and keeps [`Members`] current, until
/// the [`Membership`] is dropped or shut down or gossip stops.
async fn refresh_loop(mut r: Refresher) {
    let mut tick = tokio::time::interval(r.poll);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            changed = r.publish.changed() => {
                if changed.is_err() {
                    return; // Dropped or shut down.
                }
                let info = r.publish.borrow_and_update().clone();
                let mut chitchat = r.chitchat.lock().await;
                let state = chitchat.self_node_state();
                for (key, value) in info.key_values() {
                    // Unchanged values keep their version: nothing to gossip.
                    state.set(key, value);
                }
            }
            result = &mut r.terminated => {
                if let Err(e) = result {
                    // Without gossip nothing is heard from anyone: report
                    // only ourselves live, as if cut off by the network
                    // (which the fencing rule makes safe).
                    tracing::error!(error = %format!("{e:#}"), "gossip stopped; peers are no longer seen");
                    r.members.send_modify(|members| {
                        for m in &mut members.members {
                            m.live = m.node_id == members.self_id;
                        }
                    });
                }
                return;
            }
            changed = r.live_nodes.changed() => {
                if changed.is_err() {
                    return; // chitchat is gone.
                }
            }
            _ = tick.tick() => {}
        }
        let chitchat = r.chitchat.lock().await;
        if let Some(members) = r.view.refresh(&chitchat) {
            drop(chitchat);
            r.members.send_replace(members);
        }
    }
}

/// Turns chitchat's state into [`Members`], re-reading only what changed.
struct View {
    self_id: ChitchatId,
    /// Per incarnation, each node's (max version, live) last time: a
    /// change of either is a change of the view.
    seen: Vec<(ChitchatId, Version, bool)>,
    /// Per incarnation, the version last parsed and its info: a value is
    /// parsed, and a malformed one logged, once per version.
    parsed: HashMap<ChitchatId, (Version, Option<NodeInfo>)>,
}

impl View {
    fn new(self_id: ChitchatId) -> View {
        View {
            self_id,
            seen: Vec::new(),
            parsed: HashMap::new(),
        }
    }

    /// Ourselves alone, from what we last parsed (for a view built before
    /// any state is known).
    fn members_from_scratch(&self) -> Members {
        Members {
            self_id: self.self_id.node_id.clone(),
            members: vec![Member {
                node_id: self.self_id.node_id.clone(),
                gossip_addr: self.self_id.gossip_advertise_addr,
                generation: self.self_id.generation_id,
                info: self
                    .parsed
                    .get(&self.self_id)
                    .and_then(|(_, info)| info.clone()),
                live: true,
            }],
        }
    }

    /// The new view if anything changed since the last call.
    fn refresh(&mut self, chitchat: &Chitchat) -> Option<Members> {
        let live: HashSet<&ChitchatId> = chitchat.live_nodes().collect();
        let states = chitchat.node_states();
        let unchanged = self.seen.len() == states.len()
            && self.seen.iter().zip(states).all(|((id, v, l), (sid, s))| {
                id == sid && *v == s.max_version() && *l == live.contains(sid)
            });
        if unchanged {
            return None;
        }
        self.seen = states
            .iter()
            .map(|(id, s)| (id.clone(), s.max_version(), live.contains(id)))
            .collect();
        self.parsed.retain(|id, _| states.contains_key(id));

        let mut members: Vec<Member> = Vec::with_capacity(states.len());
        for (id, state) in states {
            let is_self = *id == self.self_id;
            if id.node_id == self.self_id.node_id && !is_self {
                // Our own entry is always ours: another incarnation is our
                // previous life (dead), or a misconfigured twin.
                if live.contains(id) {
                    tracing::warn!(
                        node = %id.node_id,
                        other = %id.gossip_advertise_addr,
                        "another live node gossips with our node id"
                    );
                }
                continue;
            }
            let member = Member {
                node_id: id.node_id.clone(),
                gossip_addr: id.gossip_advertise_addr,
                generation: id.generation_id,
                info: self.info(id, state),
                live: is_self || live.contains(id),
            };
            // States are sorted by (node id, generation, address): of a
            // node's incarnations the newest comes last and replaces the
            // ones before it.
            match members.last_mut() {
                Some(last) if last.node_id == member.node_id => *last = member,
                _ => members.push(member),
            }
        }
        Some(Members {
            self_id: self.self_id.node_id.clone(),
            members,
        })
    }

    /// A node's info, parsed when its version changed.
    fn info(&mut self, id: &ChitchatId, state: &NodeState) -> Option<NodeInfo> {
        let version = state.max_version();
        if let Some((v, info)) = self.parsed.get(id) {
            if *v == version {
                return info.clone();
            }
        }
        let info = match NodeInfo::from_state(state) {
            Ok(info) => Some(info),
            Err(e @ InfoError::Missing(_)) => {
                tracing::debug!(node = ?id, error = %e, "node info incomplete");
                None
            }
            Err(e) => {
                tracing::warn!(node = ?id, error = %e, "ignoring a node's malformed info");
                None
            }
        };
        self.parsed.insert(id.clone(), (version, info.clone()));
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Test gossip pace: fast enough that the whole file runs in seconds.
    const GOSSIP: Duration = Duration::from_millis(100);
    /// Bound on any convergence wait (joins take a few gossip rounds).
    const CONVERGE: Duration = Duration::from_secs(5);

    /// A loopback address with a UDP port free a moment ago.
    fn free_addr() -> SocketAddr {
        std::net::UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .expect("bind a loopback UDP port")
    }

    fn info(bridge_port: u16, partitions: &[u16], ready: bool) -> NodeInfo {
        NodeInfo {
            bridge_addr: SocketAddr::from(([127, 0, 0, 1], bridge_port)),
            partitions: partitions.to_vec(),
            ready,
            idle: false,
            activity: 0,
            admin: None,
            shunned: Vec::new(),
        }
    }

    fn config(
        cluster: &str,
        node: &str,
        addr: SocketAddr,
        seeds: &[SocketAddr],
    ) -> MembershipConfig {
        MembershipConfig {
            seeds: seeds.iter().map(|s| s.to_string()).collect(),
            gossip_interval: GOSSIP,
            ..MembershipConfig::new(cluster, node, addr)
        }
    }

    /// Starts `nodes` in one cluster, each with all the others as seeds.
    async fn start_cluster(cluster: &str, nodes: &[(&str, NodeInfo)]) -> Vec<Membership> {
        let addrs: Vec<SocketAddr> = nodes.iter().map(|_| free_addr()).collect();
        let mut out = Vec::new();
        for (i, (id, info)) in nodes.iter().enumerate() {
            let seeds: Vec<SocketAddr> = addrs.iter().copied().filter(|a| *a != addrs[i]).collect();
            let m = Membership::start(config(cluster, id, addrs[i], &seeds), info.clone())
                .await
                .expect("start membership");
            out.push(m);
        }
        out
    }

    /// Waits (up to `limit`) for `m`'s view to satisfy `pred`.
    async fn wait_for(
        m: &Membership,
        limit: Duration,
        what: &str,
        pred: impl Fn(&Members) -> bool,
    ) -> Members {
        let mut rx = m.changes();
        let seen = tokio::time::timeout(limit, rx.wait_for(|members| pred(members)))
            .await
            .map(|r| r.map(|members| members.clone()));
        match seen {
            Ok(Ok(members)) => members,
            Ok(Err(_)) => panic!("{}: membership stopped waiting for {what}", m.node_id()),
            Err(_) => panic!(
                "{}: no {what} within {limit:?}; view: {:#?}",
                m.node_id(),
                m.snapshot()
            ),
        }
    }

    /// Started on its own Arbiter, it is still used from the actors'.
    #[test]
    fn membership_is_shared_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Membership>();
        shareable::<Members>();
    }

    #[test]
    fn partitions_round_trip_as_ranges() {
        assert_eq!(encode_partitions(&[]), "");
        assert_eq!(encode_partitions(&[7]), "7");
        assert_eq!(
            encode_partitions(&[9, 0, 1, 2, 3, 7, 10, 11, 12, 3]),
            "0-3,7,9-12"
        );
        assert_eq!(encode_partitions(&[65534, 65535]), "65534-65535");
        let cases: [Vec<u16>; 4] = [
            vec![],
            vec![0],
            vec![0, 1, 2, 3, 7, 9, 10, 11, 12],
            (0..4096).collect(),
        ];
        for ps in cases {
            assert_eq!(decode_partitions(&encode_partitions(&ps)), Some(ps));
        }
        assert_eq!(decode_partitions("5,1-2,2"), Some(vec![1, 2, 5]));
    }

    #[test]
    fn malformed_partitions_are_refused_whole() {
        for bad in [
            ",", "1,", "a", "1-", "-1", "3-1", "1-2-3", "65536", " 1", "+1", "1;2", "0x1", "1--2",
        ] {
            assert_eq!(decode_partitions(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn config_refuses_what_cannot_work() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 7000));
        let ok = MembershipConfig::new("c", "n", addr);
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(ok.nominal_failure_timeout(), Duration::from_secs(4));
        let bad = [
            MembershipConfig::new("", "n", addr),
            MembershipConfig::new("c", "", addr),
            MembershipConfig::new("c", "n", SocketAddr::from(([127, 0, 0, 1], 0))),
            MembershipConfig::new("c", "n", SocketAddr::from(([0, 0, 0, 0], 7000))),
            MembershipConfig {
                gossip_interval: Duration::ZERO,
                ..ok.clone()
            },
            MembershipConfig {
                phi_threshold: f64::NAN,
                ..ok.clone()
            },
            MembershipConfig {
                phi_threshold: 0.5,
                ..ok.clone()
            },
        ];
        for config in bad {
            assert!(
                matches!(config.validate(), Err(MembershipError::Config(_))),
                "{config:?}"
            );
        }
        let behind_nat = MembershipConfig {
            advertise_addr: Some(addr),
            ..MembershipConfig::new("c", "n", SocketAddr::from(([0, 0, 0, 0], 7000)))
        };
        assert_eq!(behind_nat.validate(), Ok(()));
    }

    #[test]
    fn a_node_expects_peers_only_when_given_others_than_itself() {
        let me = free_addr();
        assert!(!config("c", "n1", me, &[]).expects_peers());
        assert!(!config("c", "n1", me, &[me]).expects_peers());
        assert!(config("c", "n1", me, &[me, free_addr()]).expects_peers());
    }

    /// Three nodes seeded with each other all see three live members and
    /// each other's info. Runs in an actix System, as the crawler does.
    #[actix_rt::test]
    async fn three_nodes_see_each_other() {
        let started = Instant::now();
        let infos = [
            ("node-a", info(9001, &[0, 1, 2], true)),
            (
                "node-b",
                NodeInfo {
                    // What it will not take crosses too (ranges, as held).
                    shunned: vec![7, 9, 10],
                    ..info(9002, &[3, 4], false)
                },
            ),
            ("node-c", info(9003, &[], true)),
        ];
        let nodes = start_cluster("trawl-test", &infos).await;
        for m in &nodes {
            let members = wait_for(m, CONVERGE, "three live members with info", |ms| {
                ms.live_ids() == ["node-a", "node-b", "node-c"]
                    && ms.as_slice().iter().all(|m| m.info.is_some())
            })
            .await;
            assert_eq!(members.self_id(), m.node_id());
            for (id, published) in &infos {
                let member = members.get(id).expect("listed");
                assert_eq!(
                    member.info.as_ref(),
                    Some(published),
                    "{id} seen by {}",
                    m.node_id()
                );
            }
            assert_eq!(members.ready_ids(), ["node-a", "node-c"]);
            assert_eq!(
                members.get("node-b").unwrap().gossip_addr,
                nodes[1].gossip_addr()
            );
        }
        eprintln!("three nodes converged in {:?}", started.elapsed());
        for m in nodes {
            m.shutdown().await.expect("clean shutdown");
        }
    }

    /// New partitions published by one node reach the others; a graceful
    /// shutdown reaches them as `ready: false` before the node is dead.
    #[tokio::test]
    async fn published_info_reaches_peers() {
        let nodes = start_cluster(
            "trawl-test",
            &[
                ("a", info(9101, &[0, 1], true)),
                ("b", info(9102, &[2, 3], true)),
                ("c", info(9103, &[4, 5], true)),
            ],
        )
        .await;
        for m in &nodes {
            wait_for(m, CONVERGE, "three ready members", |ms| {
                ms.ready_ids().len() == 3
            })
            .await;
        }
        let started = Instant::now();
        let moved = info(9101, &[0, 1, 4, 5, 6, 7, 8], true);
        nodes[0].publish(moved.clone());
        assert_eq!(nodes[0].published(), moved);
        for m in &nodes {
            wait_for(m, CONVERGE, "a's new partitions", |ms| {
                ms.get("a").and_then(|a| a.info.as_ref()) == Some(&moved)
            })
            .await;
        }
        eprintln!("publish reached every node in {:?}", started.elapsed());

        let mut nodes = nodes.into_iter();
        let a = nodes.next().unwrap();
        let rest: Vec<Membership> = nodes.collect();
        a.shutdown().await.expect("clean shutdown");
        for m in &rest {
            let members = wait_for(m, CONVERGE, "a not ready", |ms| {
                ms.get("a")
                    .and_then(|a| a.info.as_ref())
                    .is_some_and(|i| !i.ready)
            })
            .await;
            assert_eq!(members.ready_ids(), ["b", "c"]);
            // Told, not merely detected: a says it is not ready (and
            // still lists what it held).
            let a = members.get("a").expect("a still listed");
            let said = a.info.as_ref().expect("a's info");
            assert!(!said.ready);
            assert_eq!(said.partitions, moved.partitions);
        }
        for m in rest {
            m.shutdown().await.expect("clean shutdown");
        }
    }

    /// A node that stops abruptly (its handle dropped, as in a crash) is
    /// reported not live by the others within the failure timeout, and
    /// stays listed.
    #[tokio::test]
    async fn a_crashed_node_is_reported_dead() {
        let mut nodes = start_cluster(
            "trawl-test",
            &[
                ("a", info(9201, &[0], true)),
                ("b", info(9202, &[1], true)),
                ("c", info(9203, &[2], true)),
            ],
        )
        .await;
        for m in &nodes {
            wait_for(m, CONVERGE, "three live members", |ms| {
                ms.live_ids().len() == 3
            })
            .await;
        }
        let timeout = config("trawl-test", "c", free_addr(), &[]).nominal_failure_timeout();
        let crashed = nodes.pop().expect("c");
        drop(crashed);
        let died = Instant::now();
        // Heard up to one gossip interval before the crash, judged once
        // per gossip interval, one more to refresh the view: slack.
        let limit = timeout + GOSSIP * 4;
        for m in &nodes {
            let members = wait_for(m, limit, "c dead", |ms| ms.live_ids() == ["a", "b"]).await;
            let c = members.get("c").expect("a dead node stays listed");
            assert!(!c.live);
            assert_eq!(c.info.as_ref().map(|i| i.partitions.clone()), Some(vec![2]));
        }
        eprintln!(
            "crash detected by both peers in {:?} (nominal timeout {timeout:?})",
            died.elapsed()
        );
        for m in nodes {
            m.shutdown().await.expect("clean shutdown");
        }
    }

    /// A node of another cluster, seeded with our nodes (and they with
    /// it), is never listed, and never lists them.
    #[tokio::test]
    async fn another_cluster_never_joins() {
        let (a_addr, b_addr, x_addr) = (free_addr(), free_addr(), free_addr());
        let a = Membership::start(
            config("ours", "a", a_addr, &[b_addr, x_addr]),
            info(9301, &[0], true),
        )
        .await
        .unwrap();
        let b = Membership::start(
            config("ours", "b", b_addr, &[a_addr, x_addr]),
            info(9302, &[1], true),
        )
        .await
        .unwrap();
        let x = Membership::start(
            config("theirs", "x", x_addr, &[a_addr, b_addr]),
            info(9303, &[2], true),
        )
        .await
        .unwrap();
        for m in [&a, &b] {
            wait_for(m, CONVERGE, "a and b live", |ms| {
                ms.live_ids() == ["a", "b"]
            })
            .await;
        }
        // Every gossip round x has been knocking on both of them; one more
        // published change, seen by both, proves more rounds have passed.
        for members in rounds_later(&a, &b).await {
            assert!(members.get("x").is_none(), "{members:#?}");
            assert_eq!(members.as_slice().len(), 2);
        }
        let theirs = x.snapshot();
        assert_eq!(theirs.live_ids(), ["x"]);
        assert_eq!(theirs.as_slice().len(), 1);
        for m in [a, b, x] {
            m.shutdown().await.expect("clean shutdown");
        }
    }

    /// Publishes a change of `a`'s (named "a") and waits until `a` and `b`
    /// both see it: proof that gossip rounds went on meanwhile. What each
    /// then lists, `a`'s view first.
    async fn rounds_later(a: &Membership, b: &Membership) -> [Members; 2] {
        let mut changed = a.published();
        changed.partitions.push(9);
        a.publish(changed.clone());
        let sees_it = |ms: &Members| ms.get("a").and_then(|a| a.info.as_ref()) == Some(&changed);
        [
            wait_for(a, CONVERGE, "a's change", sees_it).await,
            wait_for(b, CONVERGE, "a's change", sees_it).await,
        ]
    }

    fn keyed(
        node: &str,
        addr: SocketAddr,
        seeds: &[SocketAddr],
        key: Option<u8>,
        rejected: &prometheus::IntCounterVec,
    ) -> MembershipConfig {
        MembershipConfig {
            gossip_key: key.map(|k| super::super::gossip_auth::GossipKey::from_bytes(&[k; 32])),
            gossip_rejected: Some(rejected.clone()),
            ..config("ours", node, addr, seeds)
        }
    }

    fn rejected_counter() -> prometheus::IntCounterVec {
        prometheus::IntCounterVec::new(prometheus::Opts::new("rejected", "test"), &["reason"])
            .unwrap()
    }

    /// With a gossip key, a node without it (plain chitchat) or with
    /// another key is never listed, though it knocks every round and
    /// names the right cluster; its packets are counted as dropped. A
    /// packet of a member, captured and sent again, is dropped as a
    /// replay.
    #[tokio::test]
    async fn only_holders_of_the_gossip_key_join() {
        let (a_addr, b_addr, plain_addr, other_addr) =
            (free_addr(), free_addr(), free_addr(), free_addr());
        // A socket posing as a seed of b's: it receives b's sealed packets.
        let spy = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let spy_addr = spy.local_addr().unwrap();
        let (counted_a, counted_other) = (rejected_counter(), rejected_counter());
        let everyone = [a_addr, b_addr, plain_addr, other_addr];
        let seeds = |me: SocketAddr| -> Vec<SocketAddr> {
            everyone.iter().copied().filter(|s| *s != me).collect()
        };
        let a = Membership::start(
            keyed("a", a_addr, &seeds(a_addr), Some(1), &counted_a),
            info(9601, &[0], true),
        )
        .await
        .unwrap();
        let mut b_seeds = seeds(b_addr);
        b_seeds.push(spy_addr);
        let b = Membership::start(
            keyed("b", b_addr, &b_seeds, Some(1), &rejected_counter()),
            info(9602, &[1], true),
        )
        .await
        .unwrap();
        let plain = Membership::start(
            keyed(
                "plain",
                plain_addr,
                &seeds(plain_addr),
                None,
                &rejected_counter(),
            ),
            info(9603, &[2], true),
        )
        .await
        .unwrap();
        let other = Membership::start(
            keyed(
                "other",
                other_addr,
                &seeds(other_addr),
                Some(2),
                &counted_other,
            ),
            info(9604, &[3], true),
        )
        .await
        .unwrap();
        wait_for(&a, CONVERGE, "a and b live", |ms| {
            ms.live_ids() == ["a", "b"]
        })
        .await;
        // The intruders knock until a has dropped packets of both kinds,
        // and `other` one of the keyed members' (chitchat picks a seed to
        // gossip with at random: when is not known, that it comes is).
        let dropped = |why: &str| counted_a.with_label_values(&[why]).get();
        let other_dropped = || counted_other.with_label_values(&["forged"]).get();
        let deadline = Instant::now() + CONVERGE;
        while dropped("malformed") == 0 || dropped("forged") == 0 || other_dropped() == 0 {
            assert!(
                Instant::now() < deadline,
                "a or other dropped no intruder's packet"
            );
            tokio::time::sleep(GOSSIP).await;
        }
        // One more change seen by both members: rounds went on meanwhile.
        for members in rounds_later(&a, &b).await {
            assert_eq!(members.live_ids(), ["a", "b"], "{members:#?}");
            assert_eq!(members.as_slice().len(), 2);
        }
        assert_eq!(plain.snapshot().live_ids(), ["plain"]);
        assert_eq!(other.snapshot().live_ids(), ["other"]);

        // Replay: a packet b sent (to the spy), sent to a from the spy.
        let mut packet = vec![0u8; 65_536];
        let (len, _) = tokio::time::timeout(CONVERGE, spy.recv_from(&mut packet))
            .await
            .expect("b gossips with its seeds")
            .unwrap();
        let replays_before = dropped("replayed");
        // b's packets are numbered; a has seen later ones than this by
        // now or will: either way this copy is one a has or can't take.
        for _ in 0..2 {
            spy.send_to(&packet[..len], a_addr).await.unwrap();
        }
        let deadline = Instant::now() + CONVERGE;
        while dropped("replayed") < replays_before + 1 {
            assert!(Instant::now() < deadline, "a took a replayed packet");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for m in [a, b, plain, other] {
            m.shutdown().await.expect("clean shutdown");
        }
    }

    /// If gossip dies under us (here aborted; in life a panic or a socket
    /// error), we no longer vouch for anyone but ourselves.
    #[tokio::test]
    async fn dead_gossip_sees_no_one() {
        let nodes = start_cluster(
            "trawl-test",
            &[("a", info(9501, &[0], true)), ("b", info(9502, &[1], true))],
        )
        .await;
        wait_for(&nodes[0], CONVERGE, "b live", |ms| {
            ms.live_ids() == ["a", "b"]
        })
        .await;
        nodes[0].handle.abort();
        let members = wait_for(&nodes[0], CONVERGE, "only a live", |ms| {
            ms.live_ids() == ["a"]
        })
        .await;
        assert!(members.get("b").is_some_and(|b| b.info.is_some()));
        let mut nodes = nodes.into_iter();
        let a = nodes.next().unwrap();
        assert!(matches!(
            a.shutdown().await,
            Err(MembershipError::Stopped(_))
        ));
        for m in nodes {
            m.shutdown().await.expect("clean shutdown");
        }
    }

    /// A peer's unreadable values leave it listed, live, with no info.
    #[tokio::test]
    async fn malformed_peer_info_is_no_info() {
        let nodes = start_cluster(
            "trawl-test",
            &[("a", info(9401, &[0], true)), ("b", info(9402, &[1], true))],
        )
        .await;
        wait_for(&nodes[0], CONVERGE, "b's info", |ms| {
            ms.get("b").is_some_and(|b| b.live && b.info.is_some())
        })
        .await;
        // Write b's keys behind the layer's back, as a buggy peer would.
        nodes[1]
            .handle
            .with_chitchat(|c| c.self_node_state().set(KEY_PARTITIONS, "1-x"))
            .await;
        let members = wait_for(&nodes[0], CONVERGE, "b without info", |ms| {
            ms.get("b").is_some_and(|b| b.info.is_none())
        })
        .await;
        assert_eq!(members.live_ids(), ["a", "b"]);
        assert_eq!(members.ready_ids(), ["a"]);
        for m in nodes {
            m.shutdown().await.expect("clean shutdown");
        }
    }
}

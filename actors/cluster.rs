//! ClusterActor: this node's place in the cluster.
//!
//! Runs the gossip membership (`src/cluster/membership.rs`) on its own
//! arbiter (gossip must never wait behind a blocked thread, or peers
//! declare the node dead) and, on every membership change and once a
//! second, reconciles: the assignment of partitions over the live members
//! (`src/cluster/assign.rs`) goes to the node, which opens the partitions
//! it should hold and releases the others ([`Hold`]); the bridge learns
//! where every live member's bridge listens ([`SetPeers`]); and what the
//! node holds is published. The periodic pass retries partitions whose
//! store the previous owner still holds open: the store's lock, not
//! gossip, says who owns a partition.
//!
//! Every gossip round it also counts the live peers
//! (`src/cluster/hearing.rs`): a node given peers that hears none for a
//! few rounds says it is alone, once, and the node learns it with the
//! next assignment.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::messages::{ClusterIdle, Hold, Holding, LocalWork, SetPeers};
use crate::cluster::assign::Assignment;
use crate::cluster::hearing::{Hearing, HearingChange};
use crate::cluster::idle::{IdleDetector, MemberWork};
use crate::cluster::membership::{Members, Membership, MembershipConfig, NodeInfo};

/// How many gossip rounds an all-idle view must hold unchanged before the
/// cluster counts as idle (see `src/cluster/idle.rs`).
const IDLE_SETTLE_ROUNDS: u32 = 6;

/// How often the assignment is reconciled without a membership change.
const RECONCILE_EVERY: Duration = Duration::from_secs(1);
/// Gossip rounds a new node listens before it takes partitions.
const JOIN_ROUNDS: u32 = 4;

/// What the ClusterActor needs to know.
#[derive(Clone)]
pub struct ClusterSettings {
    /// Gossip settings (cluster id, node id, address, seeds).
    pub membership: MembershipConfig,
    /// Where this node's bridge listens (published to peers).
    pub bridge_addr: SocketAddr,
    /// Partitions of the crawl.
    pub partitions: u16,
    /// Where this node's admin API listens, if it serves one.
    pub admin_addr: Option<SocketAddr>,
    /// The node's injected clock (idle detection's settle time, how long
    /// no peer was heard).
    pub clock: crate::clock::SharedClock,
    /// Where the peers heard are shown.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// The actor.
pub struct ClusterActor {
    settings: ClusterSettings,
    node: Recipient<Hold>,
    idle_to: Recipient<ClusterIdle>,
    /// This node's work, as last reported by the node.
    work: LocalWork,
    idle: IdleDetector,
    bridge: Recipient<SetPeers>,
    membership: Option<Arc<Membership>>,
    /// The partitions the node said it holds and shuns, as last published.
    holding: Holding,
    /// A reconcile is under way (its answer not yet back).
    reconciling: bool,
    /// The first gossip rounds after joining are over: assignments count.
    joined: bool,
    /// Whether peers are heard.
    hearing: Hearing,
}

/// The membership changed.
#[derive(Message)]
#[rtype(result = "()")]
struct Changed(Members);

/// Leaves the cluster: announces it and stops gossip.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Leave;

impl ClusterActor {
    /// Starts the actor on its own arbiter.
    pub fn start_on(
        arbiter: &ArbiterHandle,
        settings: ClusterSettings,
        node: Recipient<Hold>,
        idle_to: Recipient<ClusterIdle>,
        bridge: Recipient<SetPeers>,
    ) -> Addr<ClusterActor> {
        let settle = settings.membership.gossip_interval * IDLE_SETTLE_ROUNDS;
        let idle = IdleDetector::new(settings.partitions, settle);
        let hearing = Hearing::new(
            settings.membership.expects_peers(),
            Hearing::patience(settings.membership.gossip_interval),
            settings.clock.now().at,
        );
        ClusterActor::start_in_arbiter(arbiter, move |_| ClusterActor {
            settings,
            node,
            idle_to,
            work: LocalWork {
                idle: false,
                activity: 0,
            },
            idle,
            bridge,
            membership: None,
            holding: Holding::default(),
            reconciling: false,
            joined: false,
            hearing,
        })
    }

    /// Counts the live peers; says when the node becomes alone, or hears
    /// a peer again.
    fn listen(&mut self) {
        let Some(m) = &self.membership else {
            return;
        };
        let me = self.settings.membership.node_id.as_str();
        let live = m
            .snapshot()
            .live_ids()
            .iter()
            .filter(|id| **id != me)
            .count();
        let metrics = &self.settings.metrics;
        metrics.cluster_live_peers.set(live as i64);
        match self.hearing.observe(self.settings.clock.now().at, live) {
            Some(HearingChange::Alone {
                quiet,
                heard_before,
            }) => {
                metrics.cluster_alone.set(1);
                tracing::warn!(
                    quiet_s = quiet.as_secs(),
                    peers = ?self.settings.membership.seeds,
                    gossip = %self.settings.membership.gossip_addr,
                    heard_before,
                    "no peer heard: gossip has not formed (or has broken); check that every node reaches the others' gossip port over UDP. This node crawls only the partitions it holds, and creates no partition store (without state_url) until a peer is heard"
                );
            }
            Some(HearingChange::Together { live_peers }) => {
                metrics.cluster_alone.set(0);
                tracing::info!(live_peers, "peers heard again: the cluster has formed");
            }
            None => {}
        }
    }

    fn info(&self, ready: bool) -> NodeInfo {
        NodeInfo {
            bridge_addr: self.settings.bridge_addr,
            partitions: self.holding.held.clone(),
            shunned: self.holding.shunned.clone(),
            ready,
            idle: self.work.idle,
            activity: self.work.activity,
            admin: self.settings.admin_addr,
        }
    }

    /// Tells the node when the live members' published work says the
    /// whole cluster is idle.
    fn check_idle(&mut self) {
        let Some(m) = &self.membership else {
            return;
        };
        let members = m.snapshot();
        let live: Vec<MemberWork> = members
            .as_slice()
            .iter()
            .filter(|m| m.live)
            .map(|m| match &m.info {
                Some(info) => MemberWork {
                    node: m.node_id.clone(),
                    idle: info.idle,
                    activity: info.activity,
                    partitions: info.partitions.clone(),
                },
                // Nothing readable published: busy, as far as we know.
                None => MemberWork {
                    node: m.node_id.clone(),
                    idle: false,
                    activity: 0,
                    partitions: Vec::new(),
                },
            })
            .collect();
        if self.idle.observe(&live, self.settings.clock.now().at) {
            self.idle_to.do_send(ClusterIdle);
        }
    }

    /// Sends the assignment for `members` to the node and the peers'
    /// addresses to the bridge; publishes what the node then holds.
    fn reconcile(&mut self, members: &Members, ctx: &mut Context<Self>) {
        if self.reconciling {
            return;
        }
        let mut live: Vec<String> = members.live_ids().into_iter().map(str::to_owned).collect();
        live.sort();
        let peers: BTreeMap<String, SocketAddr> = members
            .as_slice()
            .iter()
            .filter(|m| m.live)
            .filter_map(|m| Some((m.node_id.clone(), m.info.as_ref()?.bridge_addr)))
            .collect();
        self.bridge.do_send(SetPeers { peers });
        // What each live member will not take goes to the next member.
        let shuns = members
            .as_slice()
            .iter()
            .filter(|m| m.live)
            .filter_map(|m| Some((m.node_id.clone(), m.info.as_ref()?)))
            .map(|(node, info)| (node, info.shunned.iter().copied().collect()))
            .collect();
        let assignment = Arc::new(Assignment::compute_avoiding(
            self.settings.partitions,
            &live,
            &shuns,
        ));
        // Who holds what, as each live member last published it.
        let holders = members
            .as_slice()
            .iter()
            .filter(|m| m.live)
            .filter_map(|m| Some((m.node_id.clone(), m.info.as_ref()?)))
            .flat_map(|(node, info)| info.partitions.iter().map(move |&p| (p, node.clone())))
            .collect();
        let hold = self.node.send(Hold {
            assignment,
            node: self.settings.membership.node_id.clone(),
            holders,
            hearing: self.hearing.view(self.settings.clock.now().at),
            may_create_stores: self.hearing.may_create_stores(),
        });
        self.reconciling = true;
        ctx.spawn(hold.into_actor(self).map(|held, act, _| {
            act.reconciling = false;
            if let Ok(holding) = held {
                if holding.held != act.holding.held {
                    tracing::info!(partitions = holding.held.len(), "holding partitions");
                }
                act.holding = holding;
                if let Some(m) = &act.membership {
                    m.publish(act.info(true));
                }
            }
        }));
    }
}

impl Actor for ClusterActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let config = self.settings.membership.clone();
        let info = self.info(false);
        let join = async move { Membership::start(config, info).await };
        ctx.wait(join.into_actor(self).map(|joined, act, ctx| match joined {
            Ok(membership) => {
                let mut changes = membership.changes();
                act.membership = Some(Arc::new(membership));
                let me = ctx.address();
                actix::spawn(async move {
                    // Every change, as long as the actor lives.
                    loop {
                        let members = changes.borrow_and_update().clone();
                        if me.send(Changed(members)).await.is_err() {
                            return;
                        }
                        if changes.changed().await.is_err() {
                            return;
                        }
                    }
                });
                // Nodes started together first hear of each other: a
                // node that took every partition at once would hand most
                // of them back a moment later.
                let round = act.settings.membership.gossip_interval;
                ctx.run_interval(round, |act, _| act.listen());
                let first = round * JOIN_ROUNDS;
                ctx.run_later(first, |act, ctx| {
                    act.joined = true;
                    ctx.run_interval(RECONCILE_EVERY, |act, ctx| {
                        if let Some(m) = act.membership.clone() {
                            act.reconcile(&m.snapshot(), ctx);
                        }
                    });
                    if let Some(m) = act.membership.clone() {
                        act.reconcile(&m.snapshot(), ctx);
                    }
                });
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot join the cluster; this node holds no partition");
                ctx.stop();
            }
        }));
    }
}

impl Handler<Changed> for ClusterActor {
    type Result = ();

    fn handle(&mut self, msg: Changed, ctx: &mut Self::Context) {
        if self.joined {
            self.reconcile(&msg.0, ctx);
        }
    }
}

impl Handler<LocalWork> for ClusterActor {
    type Result = ();

    fn handle(&mut self, msg: LocalWork, _: &mut Self::Context) {
        let changed = msg.idle != self.work.idle || msg.activity != self.work.activity;
        self.work = msg;
        if changed {
            if let Some(m) = &self.membership {
                m.publish(self.info(true));
            }
        }
        self.check_idle();
    }
}

impl Handler<super::messages::GetMembers> for ClusterActor {
    type Result = MessageResult<super::messages::GetMembers>;

    fn handle(&mut self, _: super::messages::GetMembers, _: &mut Self::Context) -> Self::Result {
        let Some(m) = &self.membership else {
            return MessageResult(Vec::new());
        };
        let members = m.snapshot();
        MessageResult(
            members
                .as_slice()
                .iter()
                .map(|m| super::messages::MemberView {
                    node: m.node_id.clone(),
                    gossip: m.gossip_addr,
                    live: m.live,
                    bridge: m.info.as_ref().map(|i| i.bridge_addr),
                    partitions: m
                        .info
                        .as_ref()
                        .map(|i| i.partitions.clone())
                        .unwrap_or_default(),
                    ready: m.info.as_ref().is_some_and(|i| i.ready),
                    admin: m.info.as_ref().and_then(|i| i.admin),
                    idle: m.info.as_ref().is_some_and(|i| i.idle),
                    shunned: m
                        .info
                        .as_ref()
                        .map(|i| i.shunned.clone())
                        .unwrap_or_default(),
                })
                .collect(),
        )
    }
}

impl Handler<Leave> for ClusterActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: Leave, _: &mut Self::Context) -> Self::Result {
        let membership = self.membership.take();
        Box::pin(
            async move {
                if let Some(m) = membership.and_then(|m| Arc::try_unwrap(m).ok()) {
                    if let Err(err) = m.shutdown().await {
                        tracing::warn!(error = %err, "leaving the cluster");
                    }
                }
            }
            .into_actor(self),
        )
    }
}

//! The node's operator side: its status, its view of the cluster, the
//! runtime controls, blocks, host questions and listings, and the fault
//! drills (what the admin API asks of the node). Split from the node's
//! file to keep the wiring and the crawl's lifecycle readable; the same
//! actor.

use actix::prelude::*;
use serde::Serialize;

use super::Node;
use crate::actors::messages::{
    ArchiveSnapshot, AskHost, BlockOutcome, Crash, CrashHost, Failure, GetArchiveSnapshot,
    GetControls, GetPartitionSnapshot, HostAnswer, HostPage, ListHosts, PartitionSnapshot,
    SetBlock, SetControls,
};
use crate::control::Controls;

/// Asks a cluster node for its view of the cluster (served at
/// `/api/v1/cluster`); `None` on a single node.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Option<ClusterStatus>")]
pub struct GetCluster;

/// A cluster node's view of the cluster.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ClusterStatus {
    /// This node.
    pub node: String,
    /// Every member it knows, live or not.
    pub members: Vec<crate::actors::messages::MemberView>,
    /// Every partition's assigned owner, by partition id.
    pub owners: Vec<Option<String>>,
    /// The partitions this node holds.
    pub held: Vec<u16>,
    /// Partitions assigned here whose store the previous owner still holds.
    pub taking: Vec<u16>,
    /// Partitions this node is handing back (draining).
    pub handing_back: Vec<u16>,
    /// Whether this node hears its peers (alone: gossip has not formed).
    pub hearing: crate::cluster::hearing::HearingView,
}

impl Handler<GetCluster> for Node {
    type Result = ResponseFuture<Option<ClusterStatus>>;

    fn handle(&mut self, _: GetCluster, _: &mut Self::Context) -> Self::Result {
        let (Some(c), Some(view)) = (&self.cluster, self.schedule.view()) else {
            return Box::pin(async { None });
        };
        let count = self.schedule.partitions();
        let assignment = view.assignment();
        let owners: Vec<Option<String>> = (0..count)
            .map(|p| assignment.owner(p).map(str::to_owned))
            .collect();
        let held = self.held_ids();
        let taking = (0..count)
            .filter(|&p| assignment.owner(p) == Some(view.me()))
            .filter(|p| !held.contains(p))
            .collect();
        let node = view.me().to_owned();
        let handing_back = self.schedule.handing_back();
        let hearing = view.hearing();
        let members = c.controller.send(crate::actors::messages::GetMembers);
        Box::pin(async move {
            Some(ClusterStatus {
                node,
                members: members.await.unwrap_or_default(),
                owners,
                held,
                taking,
                handing_back,
                hearing,
            })
        })
    }
}

/// Observable state of the node (served at `/api/v1/status`).
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct NodeStatus {
    /// Seconds since start.
    pub uptime_seconds: f64,
    /// URLs queued and not completed.
    pub queued: u64,
    /// URLs completed since start.
    pub completed: u64,
    /// Active host actors.
    pub active_hosts: usize,
    /// The most host actors active at once since start.
    pub active_hosts_peak: usize,
    /// The cap on active host actors (`[frontier] max_active_hosts`).
    pub active_hosts_cap: usize,
    /// Dormant hosts with work, waiting in the due indexes.
    pub due_hosts: usize,
    /// Of those, hosts waiting only for their next refresh.
    pub refresh_hosts: usize,
    /// Scheduled refreshes due now, within the hour and within the day
    /// (to the minute: a URL counts once the minute it is due in ended).
    pub refresh_due: crate::store::DueCounts,
    /// Partitions restarted after their actor failed.
    pub partition_restarts: u64,
    /// Host actors restarted after they died.
    pub host_restarts: u64,
    /// Shutting down.
    pub shutting_down: bool,
    /// The operator's runtime controls (paused, request rate).
    pub controls: Controls,
    /// On a cluster node: whether it hears its peers (`alone`: gossip has
    /// not formed, and it crawls only what it holds).
    pub peers: Option<crate::cluster::hearing::HearingView>,
    /// The archive's counters.
    pub archive: ArchiveSnapshot,
    /// Each partition.
    pub partitions: Vec<PartitionSnapshot>,
}

/// Asks for the [`NodeStatus`].
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "NodeStatus")]
pub struct GetStatus;

impl Handler<GetStatus> for Node {
    type Result = ResponseFuture<NodeStatus>;

    fn handle(&mut self, _: GetStatus, _: &mut Self::Context) -> Self::Result {
        let asks: Vec<_> = self
            .held()
            .map(|h| h.addr.send(GetPartitionSnapshot))
            .collect();
        let archive = self.archive.send(GetArchiveSnapshot);
        let uptime = (self.clock.now().at - self.started.at).as_secs_f64();
        let shutting_down = self.shutting_down;
        let (peak, cap) = (self.slots.peak(), self.slots.cap());
        let partition_restarts = self.schedule.restarts();
        let controls = self.controls;
        let peers = self.schedule.view().map(|v| v.hearing());
        Box::pin(async move {
            let partitions: Vec<PartitionSnapshot> = futures_util::future::join_all(asks)
                .await
                .into_iter()
                .flatten()
                .collect();
            NodeStatus {
                uptime_seconds: uptime,
                queued: partitions.iter().map(|p| p.queued).sum(),
                completed: partitions.iter().map(|p| p.completed).sum(),
                active_hosts: partitions.iter().map(|p| p.active_hosts).sum(),
                active_hosts_peak: peak,
                active_hosts_cap: cap,
                due_hosts: partitions.iter().map(|p| p.due_hosts).sum(),
                refresh_hosts: partitions.iter().map(|p| p.refresh_hosts).sum(),
                refresh_due: partitions.iter().fold(Default::default(), |mut sum, p| {
                    sum += p.refresh_due;
                    sum
                }),
                partition_restarts,
                host_restarts: partitions.iter().map(|p| p.host_restarts).sum(),
                shutting_down,
                controls,
                peers,
                archive: archive.await.unwrap_or_default(),
                partitions,
            }
        })
    }
}

impl Handler<SetBlock> for Node {
    type Result = ResponseFuture<Result<BlockOutcome, Failure>>;

    fn handle(&mut self, msg: SetBlock, _: &mut Self::Context) -> Self::Result {
        let partition = crate::url::partition_of(msg.target.name(), self.schedule.partitions());
        let Some(held) = self.schedule.held(partition) else {
            return Box::pin(async move { Err(Failure::NotHeld { partition }) });
        };
        let set = held.addr.send(msg);
        Box::pin(async move { set.await? })
    }
}

impl Handler<GetControls> for Node {
    type Result = MessageResult<GetControls>;

    fn handle(&mut self, _: GetControls, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.controls)
    }
}

impl Handler<SetControls> for Node {
    type Result = Result<Controls, Failure>;

    fn handle(&mut self, msg: SetControls, _: &mut Self::Context) -> Self::Result {
        let mut next = self.controls;
        if let Some(paused) = msg.paused {
            next.paused = paused;
        }
        if let Some(rate) = msg.max_requests_per_second {
            crate::control::check_rate(rate).map_err(|e| Failure::Invalid(e.to_string()))?;
            next.max_requests_per_second = rate;
        }
        // Saved first: a change the next start would not see is not made.
        next.save(&self.controls_path)
            .map_err(|e| Failure::Store(e.to_string()))?;
        if next.paused != self.controls.paused {
            tracing::info!(
                paused = next.paused,
                "crawl {} by the operator",
                if next.paused { "paused" } else { "resumed" }
            );
        }
        if next.max_requests_per_second != self.controls.max_requests_per_second {
            tracing::info!(
                max_requests_per_second = next.max_requests_per_second,
                "request rate set by the operator"
            );
        }
        self.gate.set(&next);
        self.controls = next;
        Ok(next)
    }
}

/// Stops partition `id` as if it had failed (tests and fault drills);
/// the node restarts it from its store.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct CrashPartition {
    /// The partition.
    pub id: u16,
}

impl Handler<CrashPartition> for Node {
    type Result = ();

    fn handle(&mut self, msg: CrashPartition, _: &mut Self::Context) {
        if let Some(held) = self.schedule.held(msg.id) {
            held.addr.do_send(Crash);
        }
    }
}

/// Stops the actor of `host` as if it had failed (tests and fault drills);
/// its partition restarts it. Answers whether it was active.
#[derive(Debug, Clone, Message)]
#[rtype(result = "bool")]
pub struct CrashHostActor {
    /// The host name.
    pub host: String,
}

impl Handler<CrashHostActor> for Node {
    type Result = ResponseFuture<bool>;

    fn handle(&mut self, msg: CrashHostActor, _: &mut Self::Context) -> Self::Result {
        let Some(held) = self.holder_of(&msg.host) else {
            return Box::pin(async { false });
        };
        let ask = held.addr.send(CrashHost { host: msg.host });
        Box::pin(async move { ask.await.unwrap_or(false) })
    }
}

impl Handler<AskHost> for Node {
    type Result = ResponseFuture<Result<HostAnswer, Failure>>;

    fn handle(&mut self, mut msg: AskHost, _: &mut Self::Context) -> Self::Result {
        msg.host = msg.host.to_ascii_lowercase();
        let Some(held) = self.holder_of(&msg.host) else {
            let partition = crate::url::partition_of(&msg.host, self.schedule.partitions());
            return Box::pin(async move { Err(Failure::NotHeld { partition }) });
        };
        let ask = held.addr.send(msg);
        Box::pin(async move { ask.await? })
    }
}

impl Handler<ListHosts> for Node {
    type Result = ResponseFuture<HostPage>;

    /// The page of the hosts of every partition held here (each gives its
    /// first `offset + limit` rows; merged, they give the page).
    fn handle(&mut self, msg: ListHosts, _: &mut Self::Context) -> Self::Result {
        let query = msg.0;
        let asks: Vec<_> = self
            .held()
            .map(|h| h.addr.send(ListHosts(query.for_holders())))
            .collect();
        Box::pin(async move {
            let pages = futures_util::future::join_all(asks).await;
            crate::frontier::listing::merge(pages.into_iter().flatten().collect(), &query)
        })
    }
}

//! A cluster node's view of its cluster, as the node machine keeps it:
//! gossip's assignment, whether peers are heard, what this node shuns;
//! and the decisions made from it: which partitions to open or hand back
//! when the assignment changes ([`NodeScheduler::on_assignment`]), where a
//! batch, a seed or a digest question goes (one table:
//! [`NodeScheduler::route_of`]), and when seeds may be offered
//! ([`NodeScheduler::ready`]). The node actor carries out the
//! [`AssignmentEffect`]s; the simulator drives the same calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{MayOpen, NodeScheduler, Route, SeedView};
use crate::cluster::assign::Assignment;
use crate::cluster::hearing::HearingView;

/// What gossip said in one round (the cluster controller's `Hold`).
#[derive(Debug, Clone)]
pub struct Assigned {
    /// Every partition's owner.
    pub assignment: Arc<Assignment>,
    /// Partitions live members say they hold, and who.
    pub holders: BTreeMap<u16, String>,
    /// Whether this node hears its peers.
    pub hearing: HearingView,
    /// Without a chain: stores may be created (a peer was heard, or none
    /// is expected).
    pub may_create_stores: bool,
}

/// What the node carries out after an assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssignmentEffect {
    /// With a checkpoint chain the leases decide: these are the
    /// partitions gossip would have this node hold (advice to the
    /// ownership actor).
    Advise(Vec<u16>),
    /// What is known of the partitions' holders changed: save it.
    SaveHolders,
    /// Open this partition's store and start it here.
    Open(u16),
    /// This partition is assigned here but may not be opened (say so
    /// when `MayOpen` says it is the first time).
    Refused(u16, MayOpen),
    /// Hand this partition back: drain it, then close its store.
    Release(u16),
}

/// A cluster node's view (see the module's docs).
#[derive(Debug, Clone)]
pub struct ClusterView {
    me: String,
    chain: bool,
    assignment: Arc<Assignment>,
    hearing: HearingView,
    may_create_stores: bool,
    shunned: Vec<u16>,
}

impl ClusterView {
    /// Node `me`'s view before gossip said anything: no partition has an
    /// owner. `chain`: partitions live in a checkpoint chain.
    pub fn new(me: &str, chain: bool, partitions: u16) -> Self {
        ClusterView {
            me: me.to_owned(),
            chain,
            assignment: Arc::new(Assignment::compute(partitions, &[])),
            hearing: HearingView::default(),
            may_create_stores: false,
            shunned: Vec::new(),
        }
    }

    /// This node's id.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The last assignment.
    pub fn assignment(&self) -> &Arc<Assignment> {
        &self.assignment
    }

    /// Whether peers are heard, as of the last assignment.
    pub fn hearing(&self) -> HearingView {
        self.hearing
    }
}

impl<H, T, K: Ord + Copy> NodeScheduler<H, T, K> {
    /// Makes this a cluster node's machine, with `view`.
    pub fn join(&mut self, view: ClusterView) {
        self.cluster = Some(view);
    }

    /// The cluster view, on a cluster node.
    pub fn view(&self) -> Option<&ClusterView> {
        self.cluster.as_ref()
    }

    /// Gossip's round `assigned`: what to open, refuse, hand back or
    /// advise. `on_disk(id)`: partition `id`'s store is on this node's
    /// disk. Without a chain, a partition assigned here opens if
    /// [`NodeScheduler::may_open`] lets it, and one assigned elsewhere
    /// that this node holds is handed back; with a chain the leases
    /// decide, and gossip only advises. Nothing on a single node.
    pub fn on_assignment(
        &mut self,
        assigned: Assigned,
        on_disk: impl Fn(u16) -> bool,
    ) -> Vec<AssignmentEffect> {
        let Some(view) = &mut self.cluster else {
            return Vec::new();
        };
        view.hearing = assigned.hearing;
        view.may_create_stores = assigned.may_create_stores;
        view.assignment = assigned.assignment;
        let me = view.me.clone();
        let may_create = view.may_create_stores;
        let assignment = view.assignment.clone();
        if view.chain {
            return vec![AssignmentEffect::Advise(assignment.held_by(&me))];
        }
        let mut effects = Vec::new();
        if self.learn_holders(&assigned.holders) {
            effects.push(AssignmentEffect::SaveHolders);
        }
        let (take, release) = assignment.changes_for(&me, |p| self.held(p).is_some());
        for id in take {
            effects.push(match self.may_open(id, &me, on_disk(id), may_create) {
                MayOpen::Yes => AssignmentEffect::Open(id),
                refused => AssignmentEffect::Refused(id, refused),
            });
        }
        effects.extend(release.into_iter().map(AssignmentEffect::Release));
        effects
    }

    /// The partitions this node's leases shun now (published in gossip).
    pub fn on_shunned(&mut self, shunned: Vec<u16>) {
        if let Some(view) = &mut self.cluster {
            view.shunned = shunned;
        }
    }

    /// The partitions this node shuns.
    pub fn shunned(&self) -> Vec<u16> {
        self.cluster
            .as_ref()
            .map(|v| v.shunned.clone())
            .unwrap_or_default()
    }

    /// Where a batch, a seed or a digest question for `partition` goes:
    /// here if this node holds it and is not handing it back (whoever
    /// gossip names: with a chain the lease, not gossip, says who owns
    /// it), to its assigned owner if that is another node, nowhere while
    /// it has none. The one routing table of a node; a single node holds
    /// everything.
    pub fn route_of(&self, partition: u16) -> Route {
        if self.held(partition).is_some() && !self.releasing.contains(&partition) {
            return Route::Here;
        }
        let Some(view) = &self.cluster else {
            return Route::Nowhere;
        };
        match view.assignment.owner(partition) {
            Some(owner) if owner != view.me => Route::Peer(owner.to_owned()),
            _ => Route::Nowhere,
        }
    }

    /// Whether the links a page of partition `from` found (`None`: seeds)
    /// for partition `to` are admitted into it at once, or handed back
    /// for the finder's outbox: see [`admits_straight`].
    pub fn admits_straight(&self, to: u16, from: Option<u16>) -> bool {
        admits_straight(
            self.route_of(to) == Route::Here,
            self.acks.is_some(),
            to,
            from,
        )
    }

    /// Whether seeds may be offered now (see
    /// [`NodeScheduler::may_offer_seeds`]) and every partition has an
    /// owner: always on a single node.
    pub fn ready(&self) -> bool {
        let Some(view) = &self.cluster else {
            return true;
        };
        let assigned = view.assignment.held_by(&view.me);
        view.assignment.is_complete()
            && self.may_offer_seeds(SeedView {
                chain: view.chain,
                assigned: &assigned,
                shunned: &view.shunned,
                alone: view.hearing.alone,
                may_create_stores: view.may_create_stores,
            })
    }
}

/// Whether the links a page of partition `from` found (`None`: seeds) for
/// partition `to` are admitted into it at once (`held_here`: `to` routes
/// here, [`Route::Here`]), or handed back for the finder's outbox.
///
/// With a checkpoint chain (`durable`), durable means published, and each
/// partition publishes its own checkpoints: a link admitted straight into
/// another partition of this node could be lost with the node while the
/// page that found it, published as completed by its own partition, is
/// never fetched again. So only the finder's own partition (or seeds,
/// which have no finder) takes them straight; the others go by the
/// outbox, acknowledged once a published checkpoint covers them. Without
/// a chain every partition held here takes them straight: one disk makes
/// them durable together.
///
/// The SeenSet applies this per candidate, to the partitions the node's
/// machine routes here ([`NodeScheduler::here`], which the node publishes
/// to it through a [`super::routes::RouteTable`]).
pub fn admits_straight(held_here: bool, durable: bool, to: u16, from: Option<u16>) -> bool {
    held_here && !(durable && from.is_some_and(|f| f != to))
}

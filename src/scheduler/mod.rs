//! The node's decisions over its partitions, with no I/O: which
//! partitions it holds, how long a partition's hosts are held when it
//! opens, where a link batch or a seed goes, when its outboxes are read
//! and what of them is sent, when a link batch is acknowledged, whether a
//! partition may be opened here at all, when the node is idle, and the
//! order of its stop ([`stop`]).
//!
//! The node actor (`actors/node.rs`) carries these out: it opens stores,
//! starts and stops partition actors, reads outboxes, sends over the
//! bridge. Within a partition, the same kind of decisions (when a host
//! wakes or activates, its generations, the hold) are the partition's
//! [`Activation`](crate::frontier::activation::Activation), which starts
//! from the hold decided here. The scheduler is generic over the node's
//! handle on a held partition (`H`: its actor and store) and over what
//! waits on a link batch's durability (`T`: the answer to its sender), so
//! it is tested, and simulated, without either.
//!
//! ## The hold rule, in one place
//!
//! A partition's hosts make no request before the partition's *hold*
//! ([`NodeScheduler::opening`]):
//! - taken from another owner through the checkpoint chain: until that
//!   owner's lease and requests have certainly run out (the lease
//!   machine's hold, `cluster::lease`, carried in the partition's durable
//!   state so no hand-back forgets it);
//! - opened from a store whose last run did not end cleanly (a crash, a
//!   kill, a cut-off owner without a chain; on a single node as in a
//!   cluster), or restarted after its actor failed: until one request
//!   timeout from now, since a request of the last life may still be on
//!   the wire; each host then also owes its last delay again.
//!
//! Within that, each host honours its own [`Hold`](crate::politeness::Hold):
//! written to the partition's store before each request leaves, it keeps a
//! host whose request was still out (a crash, a drain that gave up, a
//! hand-back) waiting until that request's deadline and the delay after
//! it, whoever opens the store next and however (restart, takeover from
//! the chain, hand-back, join): one rule, in the host machine. The
//! partition-wide holds above cover what the store cannot know: a former
//! owner's requests after its last published checkpoint, and holds lost
//! with an unsynced write.

pub mod idle;
pub mod outbox;
pub mod routes;
pub mod stop;
pub mod view;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cluster::holders::{HeldElsewhere, KnownHolders};
use crate::cluster::lease::Watermarks;

use outbox::OutboxSchedule;
use view::ClusterView;

/// An outbox batch's key in the partition store.
pub type OutboxKey = [u8; 10];

/// How a partition opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opening {
    /// No host requests before this (Unix ms; 0: no hold).
    pub hold_until_ms: u64,
    /// The last life may have a request on the wire: each host owes its
    /// last delay again.
    pub crashed: bool,
}

/// How a partition opens at `now_ms` (Unix ms), held until
/// `taken_until_ms` at least (a takeover's hold, 0 if none), and for one
/// `request_timeout` from now if its last life may have a request in
/// flight (`crashed`): the rule of [`NodeScheduler::opening`], which a
/// single node (no scheduler yet when it opens its stores) applies too.
pub fn opening(
    now_ms: u64,
    taken_until_ms: u64,
    crashed: bool,
    request_timeout: Duration,
) -> Opening {
    let hold_until_ms = match crashed {
        true => taken_until_ms.max(now_ms + request_timeout.as_millis() as u64),
        false => taken_until_ms,
    };
    Opening {
        hold_until_ms,
        crashed,
    }
}

/// Where a batch for a partition goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Admitted here: this node holds the partition.
    Here,
    /// Sent to the node that owns it.
    Peer(String),
    /// Nowhere yet: no owner, or this node is its owner but has not
    /// opened it yet. The batch waits in its outbox.
    Nowhere,
}

/// Whether a partition may be opened here (without a checkpoint chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MayOpen {
    /// Yes: its store is on this disk, or nobody else is known to hold it.
    Yes,
    /// No: its state is on another node's disk; it waits for that node.
    /// `first`: the first time this partition was refused (say so once).
    Wait { holder: String, first: bool },
    /// No: its state is not on this disk and no peer has been heard, so
    /// who holds it is unknown (`src/cluster/hearing.rs`); it waits for
    /// gossip to form. `first` as above.
    Unheard { first: bool },
}

/// What a cluster node knows when it decides whether to offer seeds
/// ([`NodeScheduler::may_offer_seeds`]).
#[derive(Debug, Clone, Copy)]
pub struct SeedView<'a> {
    /// Partitions live in a checkpoint chain (`state_url`).
    pub chain: bool,
    /// The partitions gossip assigns this node.
    pub assigned: &'a [u16],
    /// The partitions this node shuns.
    pub shunned: &'a [u16],
    /// No peer heard for a few gossip rounds (`src/cluster/hearing.rs`).
    pub alone: bool,
    /// Without a chain: stores may be created (a peer was heard, or none
    /// is expected).
    pub may_create_stores: bool,
}

/// The node's scheduler: the node machine. `K` keys an outbox batch (the
/// store's key; the simulator's batch numbers).
#[derive(Debug)]
pub struct NodeScheduler<H, T, K = OutboxKey> {
    /// Per partition: this node's handle on it, if it holds it.
    partitions: Vec<Option<H>>,
    /// A request's timeout: how long a crashed life's request may last.
    request_timeout: Duration,
    /// Partitions restarted after their actor failed.
    restarts: u64,
    /// Partitions being handed back (draining).
    releasing: BTreeSet<u16>,
    /// The outboxes' delivery.
    outbox: OutboxSchedule<K>,
    /// With a checkpoint chain, per partition: the answers to link
    /// batches admitted and waiting for a checkpoint to cover them.
    acks: Option<Vec<Watermarks<T>>>,
    /// Per partition: the most writes a checkpoint taken here claims to
    /// cover (it may be publishing still).
    checkpointed: Vec<u64>,
    /// Per partition: the hold its last opening here was given (Unix ms),
    /// which a restart of its actor keeps.
    opened_holds: Vec<u64>,
    /// Without a checkpoint chain: who held each partition.
    holders: KnownHolders,
    /// Partitions refused because another node holds their state.
    waiting_for: BTreeSet<u16>,
    /// On a cluster node: its view of the cluster (`view`).
    cluster: Option<ClusterView>,
}

impl<H, T, K: Ord + Copy> NodeScheduler<H, T, K> {
    /// A scheduler for `partitions` partitions, none held yet. `durable`:
    /// link batches are acknowledged only once a checkpoint covers them
    /// (a checkpoint chain).
    pub fn new(
        partitions: u16,
        request_timeout: Duration,
        durable: bool,
        holders: KnownHolders,
    ) -> Self {
        let n = usize::from(partitions);
        Self {
            partitions: (0..n).map(|_| None).collect(),
            request_timeout,
            restarts: 0,
            releasing: BTreeSet::new(),
            outbox: OutboxSchedule::new(n),
            acks: durable.then(|| (0..n).map(|_| Watermarks::default()).collect()),
            checkpointed: vec![0; n],
            opened_holds: vec![0; n],
            holders,
            waiting_for: BTreeSet::new(),
            cluster: None,
        }
    }

    /// How many partitions the crawl has.
    pub fn partitions(&self) -> u16 {
        self.partitions.len() as u16
    }

    /// This node's handle on partition `id`, if it holds it.
    pub fn held(&self, id: u16) -> Option<&H> {
        self.partitions.get(usize::from(id))?.as_ref()
    }

    /// Per partition, its handle if batches for it are admitted here
    /// (its route is [`Route::Here`]): what the node publishes to its
    /// [`routes::RouteTable`].
    pub fn here(&self) -> Vec<Option<&H>> {
        (0..self.partitions.len() as u16)
            .map(|p| match self.route_of(p) {
                Route::Here => self.held(p),
                _ => None,
            })
            .collect()
    }

    /// The partitions this node holds, with their handles.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &H)> {
        self.partitions
            .iter()
            .enumerate()
            .filter_map(|(id, h)| Some((id as u16, h.as_ref()?)))
    }

    /// The partitions this node holds.
    pub fn held_ids(&self) -> Vec<u16> {
        self.iter().map(|(id, _)| id).collect()
    }

    /// Whether this node holds every partition of `assigned`.
    pub fn holds_all(&self, assigned: &[u16]) -> bool {
        assigned.iter().all(|&p| self.held(p).is_some())
    }

    /// Whether a cluster node may offer seeds now: it holds every
    /// partition its assignment gives it but those it shuns (with a
    /// checkpoint chain; without one, it creates any store it needs) or,
    /// when it cannot expect to hold its assignment, any partition at
    /// all. It cannot when it is alone with a chain (its lonely
    /// assignment gives it partitions peers it cannot hear hold) or,
    /// without one, has heard no peer (it creates no store then, see
    /// `src/cluster/hearing.rs`): it crawls what it has, and the seeds of
    /// partitions it lacks wait in a held partition's outbox until gossip
    /// forms. A partition it shuns is not waited for: gossip passes it to
    /// another node, or nobody can take it, and the others are crawled
    /// either way.
    pub fn may_offer_seeds(&self, view: SeedView<'_>) -> bool {
        let lonely = match view.chain {
            true => view.alone,
            false => !view.may_create_stores,
        };
        if !view.chain && !lonely {
            return true;
        }
        let mut wanted = view.assigned.to_vec();
        wanted.retain(|p| !view.shunned.contains(p));
        self.holds_all(&wanted) || (lonely && self.iter().next().is_some())
    }

    /// How partition `id` opens now (Unix ms `now_ms`): held until
    /// `taken_until_ms` (the lease machine's hold of a takeover, 0 if
    /// none), and one request timeout from now at least if its last life
    /// may have a request in flight (`crashed`). See the module's docs.
    /// The hold is remembered for a restart of the partition's actor.
    pub fn opening(&mut self, id: u16, now_ms: u64, taken_until_ms: u64, crashed: bool) -> Opening {
        let opening = opening(now_ms, taken_until_ms, crashed, self.request_timeout);
        if let Some(hold) = self.opened_holds.get_mut(usize::from(id)) {
            *hold = opening.hold_until_ms;
        }
        opening
    }

    /// Partition `id` is open here, through `handle`: the next outbox
    /// pass reads its outbox from the start.
    pub fn opened(&mut self, id: u16, handle: H) {
        if let Some(slot) = self.partitions.get_mut(usize::from(id)) {
            *slot = Some(handle);
            self.outbox.restart(id);
        }
    }

    /// Partition `id`'s actor failed and was started again over its
    /// store, through `handle`. Its hosts open as [`Self::opening`] says
    /// of a crash.
    pub fn restarted(&mut self, id: u16, handle: H) {
        self.opened(id, handle);
        self.restarts += 1;
    }

    /// Where a restarted actor of partition `id` numbers its writes from:
    /// after every number this node has seen of it (covered by a
    /// published checkpoint, admitted and waiting for one, or claimed by
    /// a checkpoint taken and maybe still being published). Numbered
    /// from 0 again, its first admissions would count as covered by the
    /// coverage the last life reached and be acknowledged before any
    /// checkpoint held them; numbered from the last admission, as
    /// covered by a checkpoint of the last life that counted its later
    /// completions and was published after the restart (the simulator's
    /// seed 36). Every write of the last life is in the store the new
    /// actor continues, so the next checkpoint covers them all.
    pub fn write_floor(&self, id: u16) -> u64 {
        let seen = self
            .acks
            .as_ref()
            .and_then(|acks| acks.get(usize::from(id)))
            .map_or(0, Watermarks::highest);
        let claimed = self.checkpointed.get(usize::from(id)).copied();
        seen.max(claimed.unwrap_or(0))
    }

    /// A checkpoint of partition `id` was taken here, covering its writes
    /// up to `covers`; it goes on to be published (see
    /// [`Self::write_floor`]).
    pub fn checkpoint_taken(&mut self, id: u16, covers: u64) {
        if let Some(c) = self.checkpointed.get_mut(usize::from(id)) {
            *c = (*c).max(covers);
        }
    }

    /// How partition `id`'s actor, found failed at `now_ms`, starts again
    /// over its store: as after a crash (a request of the last life may
    /// still be on the wire), held at least as long as its opening was (a
    /// restart during a takeover's hold does not cut it short: the
    /// simulator's seed 3727), its writes numbered from
    /// [`Self::write_floor`].
    pub fn restart(&mut self, id: u16, now_ms: u64) -> (Opening, u64) {
        let held = self.opened_holds.get(usize::from(id)).copied().unwrap_or(0);
        (self.opening(id, now_ms, held, true), self.write_floor(id))
    }

    /// Partitions restarted after a failure.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Partition `id` is closed here (stopped, or handed back): its
    /// handle, and the answers that waited on its durability. Dropping
    /// those refuses their batches (`NotHeld`): a later owner's write
    /// numbers say nothing of this one's writes, and the senders send
    /// them again, to the next owner.
    pub fn closed(&mut self, id: u16) -> (Option<H>, Vec<T>) {
        let handle = self
            .partitions
            .get_mut(usize::from(id))
            .and_then(Option::take);
        self.outbox.restart(id);
        if let Some(c) = self.checkpointed.get_mut(usize::from(id)) {
            *c = 0;
        }
        let waiting = self
            .acks_mut(id)
            .map(Watermarks::forget)
            .unwrap_or_default();
        (handle, waiting)
    }

    /// Partition `id` is being handed back: it drains, and nothing is
    /// routed to it any more ([`Self::route_of`]).
    pub fn releasing(&mut self, id: u16) {
        self.releasing.insert(id);
    }

    /// Partition `id` was handed back (or closed).
    pub fn released(&mut self, id: u16) {
        self.releasing.remove(&id);
    }

    /// The partitions being handed back.
    pub fn handing_back(&self) -> Vec<u16> {
        self.releasing.iter().copied().collect()
    }

    /// Where seeds of partitions held elsewhere wait, durably, to go to
    /// their owners as links do: the outbox of a partition this node
    /// holds, with its id (`None` if it holds none yet; they are sent at
    /// once then).
    pub fn seed_outbox(&self) -> Option<(u16, &H)> {
        self.iter().next()
    }

    /// Whether partition `id` may be opened here, by node `me`, without a
    /// checkpoint chain: its store is on this node's disk (`on_disk`), or
    /// stores may be created (`may_create`: a peer was heard, or none is
    /// expected) and no other node is known to have held it. A node that
    /// opened an empty store for a partition whose state is on another's
    /// disk would crawl it from nothing beside its state, and strand what
    /// it did; one that never heard its peers cannot know where that is.
    pub fn may_open(&mut self, id: u16, me: &str, on_disk: bool, may_create: bool) -> MayOpen {
        if on_disk {
            return MayOpen::Yes;
        }
        if !may_create {
            return MayOpen::Unheard {
                first: self.waiting_for.insert(id),
            };
        }
        match self.holders.may_create(id, me) {
            Ok(()) => MayOpen::Yes,
            Err(HeldElsewhere { holder, .. }) => MayOpen::Wait {
                holder,
                first: self.waiting_for.insert(id),
            },
        }
    }

    /// Learns who gossip shows holding each partition; `true` if that
    /// changed what is known (to be saved: [`Self::holders`]).
    pub fn learn_holders(&mut self, holders: &BTreeMap<u16, String>) -> bool {
        self.holders.learn(holders)
    }

    /// Who held each partition, as known.
    pub fn holders(&self) -> &KnownHolders {
        &self.holders
    }

    /// Whether link batches wait for a checkpoint before acknowledgement.
    pub fn durable(&self) -> bool {
        self.acks.is_some()
    }

    /// Partition `id` was taken with its checkpoint covering its writes
    /// up to `covers`: its acknowledgements count on from there.
    pub fn taken(&mut self, id: u16, covers: u64) {
        if let Some(c) = self.checkpointed.get_mut(usize::from(id)) {
            *c = covers;
        }
        if let Some(acks) = self.acks_mut(id) {
            *acks = Watermarks::default();
            acks.durable(covers);
        }
    }

    /// A link batch was admitted into partition `id` as its write `seq`:
    /// `answer` is given back at once if a published checkpoint already
    /// covers it (or there is no chain), kept until one does otherwise.
    pub fn admitted(&mut self, id: u16, seq: u64, answer: T) -> Option<T> {
        match self.acks_mut(id) {
            Some(acks) => acks.admitted(seq, answer),
            None => Some(answer),
        }
    }

    /// A published checkpoint of partition `id` covers its writes up to
    /// `covers`: the answers now due.
    pub fn covered(&mut self, id: u16, covers: u64) -> Vec<T> {
        self.acks_mut(id)
            .map(|acks| acks.durable(covers))
            .unwrap_or_default()
    }

    /// The partitions whose admitted link batches wait for a checkpoint
    /// to cover them. When the node has nothing left to fetch, these are
    /// checkpointed at once (`PartitionLease::hurry`): the acknowledgements
    /// are all their senders, and the crawl's end, wait for.
    pub fn awaiting_checkpoint(&self) -> Vec<u16> {
        let Some(acks) = &self.acks else {
            return Vec::new();
        };
        (0..acks.len() as u16)
            .filter(|&id| acks[usize::from(id)].waiting() > 0)
            .collect()
    }

    fn acks_mut(&mut self, id: u16) -> Option<&mut Watermarks<T>> {
        self.acks.as_mut()?.get_mut(usize::from(id))
    }

    /// The outboxes' delivery schedule.
    pub fn outbox(&self) -> &OutboxSchedule<K> {
        &self.outbox
    }

    /// The outboxes' delivery schedule, to move on.
    pub fn outbox_mut(&mut self) -> &mut OutboxSchedule<K> {
        &mut self.outbox
    }
}

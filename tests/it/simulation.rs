//! Deterministic simulation of a cluster's partitions (`src/cluster/lease.rs`)
//! across nodes that crash, leave cleanly and come back, pause, get cut
//! off, fill their disks (no
//! checkpoint can be made: a node gives the partition up after a lease,
//! and gossip passes it to the next node while it is shunned), go deaf to
//! gossip (their UDP dropped one way: they believe themselves alone and
//! want every partition, while the others still see them), fail to open
//! partitions they took and have partition actors fail and restart, on
//! clocks that drift apart, over an object store with create-only puts and
//! a network that delays, drops and duplicates.
//!
//! Everything random comes from one seed, so a failing seed replays
//! exactly: `TRAWL_SIM_SEED=1234 cargo test --release --test it simulation:: --
//! --nocapture` runs that one seed and prints its trace. `TRAWL_SIM_SEEDS`
//! sets how many seeds the suite runs (default 10,000; a campaign runs
//! millions). After FoundationDB's simulation testing and TigerBeetle's
//! VOPR.
//!
//! The machines the node runs are driven here unchanged: each partition's
//! [`PartitionLease`] (on the node's own clock), the [`LeaseGate`] every
//! request passes (set from the lease after each step, as the ownership
//! actor sets it, and read on the node's clock right before a request, as
//! the hosts read it), the node machine [`NodeScheduler`] (gossip's
//! assignment through `on_assignment`, computed by
//! `Assignment::compute_avoiding`; its one routing table, `route_of`; the
//! outbox schedule; the watermarks that acknowledge a link batch only once
//! a published checkpoint covers it; the write floor of a restarted
//! actor), the [`PeerLink`] the bridge runs for each peer, and each end's
//! bridge [`Connection`] (the hello and its checks, the window of the
//! peer's batches, heartbeats, the silence and handshake deadlines, the
//! acknowledgement each answer becomes), on its node's clock, and every
//! host's [`HostMachine`] (`src/frontier/host.rs`: robots.txt first, the
//! delay after each response, the backoff after a timeout, an abandoned
//! request counted until its deadline, the hold of a request of an
//! earlier life restored from the state; see `simulation/hosts.rs`), on
//! its node's monotonic and wall clocks. The driver plays the rest
//! (checkpoints, the partition's store, the servers, the outbox's
//! storage, the partition's activation of its hosts after a hold) and
//! TCP: a connection between two processes delivers in order and loses
//! nothing while it lives; across a cut nothing arrives; a lost packet or
//! a crash breaks it, as does gossip saying the peer left, and the dialer
//! dials again after its link's backoff.
//!
//! Invariants, checked at the step that could break them:
//! - never two owners (node processes) publish under one epoch;
//! - no acknowledged link and no durable completion is missing from its
//!   partition's chain head;
//! - no host has two requests in flight at once, from two owners or from
//!   one (a request runs on the server until it ends, whatever became of
//!   its sender). Requests take up to the request timeout at the server;
//!   some the crawler gives up on sooner (a first-byte timeout) while the
//!   server works on, and drains give up after [`DRAIN_TIMEOUT`] with
//!   requests still out: each request's hold (its deadline) is written to
//!   the partition's state before it leaves, a host waits out an abandoned
//!   request's deadline, and whoever restores the state honours the holds
//!   in it (`politeness::Hold`); a drained partition hands on its hosts'
//!   longest wait, measured on its own clock, since clocks that disagree
//!   (skew, steps) misread each other's wall-clock schedules
//!   (`politeness::handover`);
//! - no request leaves during its partition's hold (a takeover's or an
//!   actor restart's), on its node's own clock;
//! - no host's machine spins (more than a few hundred effects in a step);
//! - and, after the faults stop, the cluster settles: every partition is
//!   held by the owner gossip names (or, if a node's backoff after failed
//!   takes ended in the last seconds, on its way to it, held by at most
//!   one), every link batch is acknowledged, every page queued has been
//!   fetched (each page completed queues the next until [`DISCOVERY_END`],
//!   so hosts have work while the faults last) and every host is idle.
//!
//! Each invariant has a mutation test: a rule broken on purpose
//! ([`Mutation`]) that the simulator must catch by that invariant.

mod hosts;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use trawl::clock::{ManualClock, Now};
use trawl::cluster::assign::Assignment;
use trawl::cluster::conn::{BridgeSettings, Connection};
use trawl::cluster::gate::LeaseGate;
use trawl::cluster::hearing::HearingView;
use trawl::cluster::holders::KnownHolders;
use trawl::cluster::lease::{
    Draft, Effect, HeadView, LeaseSettings, PartitionLease, Published, Watermarks,
};
use trawl::cluster::link::{Backoff, Closed, Handled, PeerLink, Transmit};
use trawl::cluster::wire::Message;
use trawl::fetch::FetchError;
use trawl::frontier::host::{Effect as HostEffect, HostMachine, HostSettings, Task, TaskId};
use trawl::frontier::importance::Arrivals;
use trawl::politeness::handover::owed_after_drain;
use trawl::politeness::Schedule;
use trawl::scheduler::outbox::{Batch as OutboxBatch, PAGE as OUTBOX_PAGE};
use trawl::scheduler::view::{Assigned, AssignmentEffect, ClusterView};
use trawl::scheduler::{NodeScheduler, Route};
use trawl::store::HostState;

const NODES: usize = 3;
const PARTITIONS: usize = 4;
const HOSTS_PER_PARTITION: usize = 2;
const SETTINGS: LeaseSettings = LeaseSettings {
    lease: Duration::from_secs(4),
    checkpoint_every: Duration::from_secs(1),
    request_timeout: Duration::from_secs(2),
    retry: Duration::from_millis(500),
};
/// How often a node looks at its partitions (gossip, timers, dispatch).
const TICK: Duration = Duration::from_millis(50);
/// How late a node's view of who is alive is: short, so that a claimant
/// reads the head soon after its owner's last publish (the hardest case
/// for the hold).
const GOSSIP_LAG: Duration = Duration::from_millis(100);
/// Faults happen before this; then the cluster must settle.
const FAULTS_END: Duration = Duration::from_secs(40);
const END: Duration = Duration::from_secs(70);
/// How long a drain waits for requests in flight before it gives up on
/// them: shorter than a request may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// Time enough for a partition to move to the node gossip names (a drain,
/// a release, a claim and the hold).
const SETTLE: Duration = Duration::from_secs(10);
/// Pages queued per host at the start; each page completed before
/// [`DISCOVERY_END`] queues the next one, so a host always has work while
/// the faults last.
const SEED_PAGES: u64 = 3;
/// No page queues another after this: what is queued by then must all be
/// fetched by [`END`], and every host go idle (the liveness bound).
const DISCOVERY_END: Duration = Duration::from_secs(50);
/// No link is found in the last seconds: time enough to acknowledge all.
const LAST_ACKS: Duration = Duration::from_secs(10);
/// Unacknowledged batches per peer link, at most (small: the window
/// fills).
const WINDOW: usize = 3;
const REDIAL_BASE: Duration = Duration::from_millis(100);
const REDIAL_MAX: Duration = Duration::from_secs(2);
/// Every node's wall clock at the simulation's start (Unix seconds),
/// before its steps.
const WALL0_SECS: u64 = 1_767_225_600;
/// Effects one host may hand out in one step before the driver calls it
/// a busy loop (an actor that would spin).
const MAX_HOST_EFFECTS: usize = 200;

/// SplitMix64: small, fast, and enough for a simulation.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

/// A partition's contents, as a checkpoint holds them.
#[derive(Debug, Clone, Default, PartialEq)]
struct State {
    /// Admission sequence: every write takes the next number.
    seq: u64,
    /// Links admitted, with the sequence number of their admission.
    links: BTreeMap<u64, u64>,
    /// Pages completed (host, page), with theirs.
    done: BTreeMap<(usize, u64), u64>,
    /// Per host, the pages queued: every page below this (admitted as the
    /// pages before it were completed).
    queued: BTreeMap<usize, u64>,
    /// Per host, its state as the partition's store keeps it: robots.txt,
    /// the politeness schedule (rewritten by every completion), and the
    /// hold of the requests it may have out (`politeness::Hold`, written
    /// before each request leaves, kept or cleared by each save).
    hosts: BTreeMap<usize, HostState>,
}

impl State {
    fn write(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Pages below this are queued for `host`.
    fn queued(&self, host: usize) -> u64 {
        self.queued.get(&host).copied().unwrap_or(SEED_PAGES)
    }

    /// Host `host`'s queue as the store holds it.
    fn pages(&self, host: usize) -> hosts::Pages<'_> {
        hosts::Pages {
            host,
            done: &self.done,
            queued: self.queued(host),
        }
    }

    /// The pages queued for `host` and not completed.
    fn left(&self, host: usize) -> Vec<u64> {
        (0..self.queued(host))
            .filter(|&page| !self.done.contains_key(&(host, page)))
            .collect()
    }
}

/// A manifest in the simulated store.
#[derive(Debug, Clone)]
struct Stored {
    view: HeadView,
    state: State,
}

/// What a node asks of the store.
#[derive(Debug, Clone)]
enum StoreOp {
    Head,
    Create {
        draft: Draft,
        snapshot: Option<State>,
    },
}

#[derive(Debug, Clone)]
enum Event {
    Tick {
        node: usize,
    },
    /// A request reaches the store.
    AtStore {
        node: usize,
        inc: u64,
        req: u64,
        p: usize,
        op: StoreOp,
    },
    /// The store's answer reaches the node.
    HeadRead {
        node: usize,
        inc: u64,
        req: u64,
        p: usize,
        head: Option<HeadView>,
    },
    Created {
        node: usize,
        inc: u64,
        req: u64,
        p: usize,
        number: u64,
        outcome: Published,
    },
    /// A store request's timeout: unanswered, it failed.
    StoreTimeout {
        node: usize,
        inc: u64,
        req: u64,
    },
    CheckpointReady {
        node: usize,
        inc: u64,
        p: usize,
        number: u64,
        ok: bool,
    },
    Drained {
        node: usize,
        inc: u64,
        p: usize,
    },
    /// A partition taken could not be restored or opened.
    OpenFailed {
        node: usize,
        inc: u64,
        p: usize,
    },
    /// The drain's timeout: requests still out, it gives up on them.
    DrainTimeout {
        node: usize,
        inc: u64,
        p: usize,
    },
    /// A request's answer reaches the node (or the crawler stops
    /// waiting for it).
    FetchDone {
        node: usize,
        inc: u64,
        p: usize,
        host: usize,
        /// The host machine's name for it.
        id: TaskId,
        epoch: u64,
        /// The partition actor's life that sent it.
        life: u64,
        /// robots.txt (answered 404), not a page.
        robots: bool,
        /// Its time at the server.
        took: Duration,
        /// The crawler stopped waiting before the server finished (a
        /// first-byte timeout, or its deadline): a timeout.
        abandoned: bool,
    },
    /// A host's task (processing a page, completing an entry) ends, its
    /// writes made.
    TaskDone {
        node: usize,
        inc: u64,
        p: usize,
        host: usize,
        id: TaskId,
        epoch: u64,
        life: u64,
        task: Box<Task>,
        /// The host's schedule, persisted with a completion.
        schedule: Schedule,
    },
    /// A link batch reaches the partition's (presumed) owner: over a
    /// connection (`via`: its id and the batch's number on the link), or
    /// from the node itself (`None`).
    Links {
        to: usize,
        from: usize,
        from_inc: u64,
        p: usize,
        batch: u64,
        via: Option<(u64, u64)>,
    },
    /// A connection's hello from `from` reaches `to`.
    Hello {
        to: usize,
        from: usize,
        conn: u64,
    },
    /// A connection's heartbeat from `from` reaches `to`.
    Heartbeat {
        to: usize,
        from: usize,
        conn: u64,
    },
    /// Its acknowledgement (or refusal) reaches the sender, from `by`.
    LinksAnswer {
        node: usize,
        inc: u64,
        by: usize,
        batch: u64,
        acked: bool,
        via: Option<(u64, u64)>,
    },
    Crash {
        node: usize,
        down: Duration,
    },
    Restart {
        node: usize,
    },
    /// The node is stopped cleanly (an operator, a rolling upgrade): it
    /// tells gossip it leaves, hands every partition back, goes down once
    /// it holds none, and starts again after `back`.
    Leave {
        node: usize,
        back: Duration,
    },
    /// Partition `p`'s actor on `node` fails; the node starts it again
    /// over the same store.
    ActorRestart {
        node: usize,
        p: usize,
    },
}

/// A partition a node holds: its hot copy and what waits on durability.
struct Local {
    epoch: u64,
    state: State,
    /// The partition's actor's life: answers to a failed life's requests
    /// are lost with it.
    life: u64,
    /// No request before this, on the node's clock: the hold of a
    /// takeover ([`Effect::Take`]) or of a restart after a failure. The
    /// hosts keep it in wall-clock ms: set when the wall clock was
    /// `hold_wall_ms` off real time, they count it on the wall clock.
    hold_until: Instant,
    hold_wall_ms: i64,
    /// Completions, to count durable once covered.
    done: Watermarks<(usize, u64)>,
    /// The snapshot of the checkpoint being made.
    snapshot: Option<(u64, State)>,
    /// Per host, its machine once activated (after the partition's
    /// hold, as the partition's activation starts host actors), restored
    /// from its saved state; `None` before.
    hosts: Vec<Option<HostMachine>>,
    /// Per host, its drain answered (or it was never activated).
    drained: Vec<bool>,
    /// Per host, passivated with nothing left to do.
    idle: Vec<bool>,
    /// The drain was answered (drained, or given up on).
    drain_answered: bool,
    draining: bool,
    stopped: bool,
}

/// A link batch admitted, to be answered: its sender's process, the
/// batch, and how it came.
type Admitted = (usize, u64, u64, Option<(u64, u64)>);

/// A link batch in a node's outbox until acknowledged.
#[derive(Debug, Clone)]
struct Batch {
    p: usize,
    links: Vec<u64>,
}

/// A TCP connection between two processes; `ends[0]` dialled.
#[derive(Debug)]
struct Conn {
    id: u64,
    ends: [Process; 2],
    /// When the last frame each way (from `ends[i]`) arrives: TCP keeps
    /// order.
    last: [Instant; 2],
    /// Each end's bridge connection machine (`src/cluster/conn.rs`), on
    /// its node's clock: the hello and its checks, the window, the
    /// heartbeat and the silence that closes a connection whose peer is
    /// paused or cut off.
    machines: [Connection; 2],
    /// Whether each end's machine passed the peer's hello.
    ready: [bool; 2],
}

impl Conn {
    /// Which end `node` is.
    fn end(&self, node: usize) -> usize {
        usize::from(self.ends[0].0 != node)
    }
}

struct Node {
    id: String,
    inc: u64,
    up: bool,
    /// Stopping cleanly: gossip says it left; it wants no partition.
    leaving: bool,
    leases: Vec<PartitionLease>,
    /// Per partition, where its hosts' requests meet its lease: set from
    /// the lease after every step as the ownership actor sets it, read
    /// on the node's clock before every request as the hosts read it.
    gates: Vec<LeaseGate>,
    /// The node's own clock (see [`Sim::clock_of`]).
    clock: ManualClock,
    local: Vec<Option<Local>>,
    outbox: BTreeMap<u64, Batch>,
    /// Per peer: the link's bookkeeping, as the bridge keeps it (reply
    /// handles: outbox batch ids).
    links: Vec<PeerLink<u64>>,
    /// The node machine the node actor runs (`src/scheduler/`): what it
    /// holds, gossip's assignment and the one routing table, which
    /// outbox batches go out on a pass (one outbox per node here: a batch
    /// on its way is not sent again until answered or failed), which
    /// admitted batches are acknowledged when (its watermarks), where a
    /// restarted actor numbers its writes from.
    machine: NodeScheduler<(), Admitted, u64>,
    /// Per peer: no dial before this.
    redial_at: Vec<Instant>,
    /// Store requests awaiting their answer: partition, and the number of
    /// a create (`None` for a head read).
    pending: HashMap<u64, (usize, Option<u64>)>,
    /// How fast its clock runs against real time, in parts per million.
    skew_ppm: i64,
}

/// A rule of the code deliberately broken, which the simulator must catch
/// (one per invariant; `Mutation::None` runs the code as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutation {
    None,
    /// The store overwrites instead of creating only (a store without
    /// conditional create): two owners publish under one epoch.
    OverwritingStore,
    /// A link batch is acknowledged when admitted, not once a published
    /// checkpoint covers it: an acknowledged link is lost with its owner.
    AckOnAdmit,
    /// A restarted partition actor numbers its writes from 0 again: its
    /// admissions count as covered by the last life's coverage.
    RestartCountsFromZero,
    /// A restarted partition actor numbers its writes from the last
    /// admission, forgetting a checkpoint of the last life that counted
    /// later writes and is published after the restart (seed 36's bug).
    FloorIgnoresCheckpoints,
    /// A drained partition owes only the least delay, not its hosts'
    /// longest wait: a new owner whose wall clock is ahead reads a request
    /// given up on, still at its server, as over.
    FloorOwed,
    /// Nothing honours the hold of a takeover or a restart: not the
    /// lease gate, not the hosts' activation, not the hosts (restored
    /// without the hold and schedule their state was saved with).
    IgnoreHold,
    /// A request the crawler gave up on no longer counts while the server
    /// still works on it (the fetcher reports it as never connected).
    ForgetAbandoned,
    /// A paused node's clock stops while it is paused (a monotonic clock
    /// that is not the boot clock): it fetches on a lease it believes
    /// fresh.
    FrozenClock,
    /// The lease gate does not keep the hold: the hosts' wall-clock hold
    /// is all there is, and a wall clock stepping forward cuts it short.
    NoGateHold,
    /// A refused link batch is never sent again: the cluster does not
    /// settle.
    DropRefused,
    /// A partition actor restarted after a failure never starts its hosts
    /// again: its hosts stall.
    StuckAfterRestart,
}

/// A node's process: its index and incarnation.
type Process = (usize, u64);

/// Intervals of a node's faults.
#[derive(Default, Clone)]
struct Faults {
    down: Vec<(Instant, Instant)>,
    paused: Vec<(Instant, Instant)>,
    cut: Vec<(Instant, Instant)>,
    /// Its disk is full: every checkpoint fails.
    full: Vec<(Instant, Instant)>,
    /// It hears no gossip (its UDP dropped, one way: the others still
    /// hear it): it believes itself alone, while the store and TCP work.
    deaf: Vec<(Instant, Instant)>,
    /// Its wall clock steps (NTP, an operator) by this many ms, forward
    /// or back; its monotonic clock does not.
    wall_steps: Vec<(Instant, i64)>,
    /// Its wall clock is this many ms off real time from the start (a
    /// clock badly synchronised): the others read what it persists in
    /// wall-clock ms that far off.
    wall_skew_ms: i64,
    /// The heads it reads are unreadable to it (corrupt, or written by a
    /// newer version during a rolling upgrade): it steps aside.
    unreadable: Vec<(Instant, Instant)>,
}

fn within(spans: &[(Instant, Instant)], t: Instant) -> bool {
    spans.iter().any(|&(a, b)| a <= t && t < b)
}

struct Sim {
    rng: Rng,
    t0: Instant,
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<(Instant, u64)>>,
    events: HashMap<u64, Event>,
    chains: Vec<BTreeMap<u64, Stored>>,
    nodes: Vec<Node>,
    faults: Vec<Faults>,
    next_batch: u64,
    next_link: u64,
    conns: BTreeMap<(usize, usize), Conn>,
    next_conn: u64,
    // What the invariants are checked against.
    epoch_owner: HashMap<(usize, u64), (String, u64)>,
    acked_links: Vec<BTreeSet<u64>>,
    durable_done: Vec<BTreeSet<(usize, u64)>>,
    /// Per host: requests on the server (owner process, ends at).
    on_server: HashMap<(usize, usize), Vec<(Process, Instant)>>,
    /// Every page completed by anyone, to count those fetched again.
    completed_ever: std::collections::HashSet<(usize, usize, u64)>,
    trace: bool,
    steps: u64,
    pub refetches: u64,
    mutation: Mutation,
    /// The settings of every host (`src/frontier/host.rs`).
    host_settings: Arc<HostSettings>,
}

impl Sim {
    fn new(seed: u64, trace: bool) -> Sim {
        Sim::mutated(seed, trace, Mutation::None)
    }

    fn mutated(seed: u64, trace: bool, mutation: Mutation) -> Sim {
        // Each node's clock, then the origin: every clock can be moved to
        // it (a manual clock moves only forward).
        let clocks: Vec<ManualClock> = (0..NODES).map(|_| ManualClock::new()).collect();
        let t0 = Instant::now();
        for clock in &clocks {
            clock.advance_to(t0);
        }
        let mut rng = Rng(seed);
        let mut faults = vec![Faults::default(); NODES];
        let mut sim = Sim {
            rng: Rng(seed ^ 0xA5A5),
            t0,
            now: t0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            chains: vec![BTreeMap::new(); PARTITIONS],
            nodes: Vec::new(),
            faults: Vec::new(),
            next_batch: 0,
            next_link: 0,
            conns: BTreeMap::new(),
            next_conn: 0,
            epoch_owner: HashMap::new(),
            acked_links: vec![BTreeSet::new(); PARTITIONS],
            durable_done: vec![BTreeSet::new(); PARTITIONS],
            on_server: HashMap::new(),
            completed_ever: Default::default(),
            trace,
            steps: 0,
            refetches: 0,
            mutation,
            host_settings: hosts::settings(SETTINGS.request_timeout),
        };
        // The fault schedule: a few faults of each kind, anywhere before
        // FAULTS_END, any node.
        let faults_n = 1 + rng.below(5);
        for _ in 0..faults_n {
            let node = rng.below(NODES as u64) as usize;
            let at = t0 + rng.millis(500, FAULTS_END.as_millis() as u64 - 12_000);
            let long = rng.millis(500, 2 * SETTINGS.lease.as_millis() as u64 + 2_000);
            match rng.below(9) {
                0 => sim.schedule_at(at, Event::Crash { node, down: long }),
                8 => sim.schedule_at(at, Event::Leave { node, back: long }),
                // The heads it reads are unreadable to it for a while.
                7 => faults[node].unreadable.push((at, at + long)),
                // Its wall clock steps, forward or back, by up to 8 s.
                6 => {
                    let by = rng.below(16_001) as i64 - 8_000;
                    faults[node].wall_steps.push((at, by));
                }
                // A partition actor fails and is restarted over its store.
                5 => sim.schedule_at(
                    at,
                    Event::ActorRestart {
                        node,
                        p: rng.below(PARTITIONS as u64) as usize,
                    },
                ),
                1 => faults[node].paused.push((at, at + long)),
                // One full disk per node at most: a node that gives a
                // partition up stays away for a doubling while, and the
                // cluster must have settled by the end.
                2 if faults[node].full.is_empty() => faults[node].full.push((at, at + long)),
                3 => faults[node].deaf.push((at, at + long)),
                _ => faults[node].cut.push((at, at + long)),
            }
        }
        // Some clocks are badly synchronised (up to 3 s off), and some
        // step once more (NTP catching up, an operator).
        for f in faults.iter_mut() {
            if rng.chance(300) {
                f.wall_skew_ms = rng.below(6_001) as i64 - 3_000;
            }
            if rng.chance(250) {
                let at = t0 + rng.millis(500, FAULTS_END.as_millis() as u64);
                f.wall_steps.push((at, rng.below(16_001) as i64 - 8_000));
            }
        }
        // Now and then a node joins late, under load: down from the start.
        let late = rng
            .chance(250)
            .then(|| (rng.below(NODES as u64) as usize, rng.millis(2_000, 20_000)));
        if let Some((node, after)) = late {
            faults[node].down.push((t0, t0 + after));
            sim.schedule_at(t0 + after, Event::Restart { node });
        }
        sim.faults = faults;
        for (n, clock) in clocks.into_iter().enumerate() {
            // Clocks drift apart by up to a few hundred parts per million
            // (quartz: tens), far inside the lease's margin.
            let skew_ppm = rng.below(1001) as i64 - 500;
            sim.nodes.push(Node {
                id: format!("n{n}"),
                inc: 0,
                up: false,
                leaving: false,
                leases: Vec::new(),
                gates: Vec::new(),
                clock,
                local: Vec::new(),
                outbox: BTreeMap::new(),
                links: Vec::new(),
                machine: NodeScheduler::new(
                    PARTITIONS as u16,
                    SETTINGS.request_timeout,
                    true,
                    KnownHolders::default(),
                ),
                redial_at: Vec::new(),
                pending: HashMap::new(),
                skew_ppm,
            });
            if late.is_none_or(|(node, _)| node != n) {
                sim.start_node(n);
            }
        }
        sim
    }

    fn log(&self, what: impl FnOnce() -> String) {
        if self.trace {
            println!("{:>8.3} {}", (self.now - self.t0).as_secs_f64(), what());
        }
    }

    fn schedule_at(&mut self, at: Instant, e: Event) {
        self.seq += 1;
        self.events.insert(self.seq, e);
        self.queue.push(Reverse((at, self.seq)));
    }

    fn schedule(&mut self, after: Duration, e: Event) {
        self.schedule_at(self.now + after, e);
    }

    fn start_node(&mut self, n: usize) {
        let inc = self.rng.next();
        let node = &mut self.nodes[n];
        node.inc = inc;
        node.up = true;
        node.leaving = false;
        node.leases = (0..PARTITIONS)
            .map(|_| PartitionLease::new(&node.id, inc, SETTINGS))
            .collect();
        let clock: trawl::clock::SharedClock = Arc::new(node.clock.clone());
        node.gates = (0..PARTITIONS)
            .map(|_| LeaseGate::new(clock.clone()))
            .collect();
        node.local = (0..PARTITIONS).map(|_| None).collect();
        node.outbox.clear();
        node.links = (0..NODES)
            .map(|_| PeerLink::new(WINDOW, Backoff::new(REDIAL_BASE, REDIAL_MAX)))
            .collect();
        node.machine = NodeScheduler::new(
            PARTITIONS as u16,
            SETTINGS.request_timeout,
            true,
            KnownHolders::default(),
        );
        let view = ClusterView::new(&node.id, true, PARTITIONS as u16);
        node.machine.join(view);
        node.redial_at = vec![self.now; NODES];
        node.pending.clear();
        let first = self.rng.millis(0, 50);
        self.schedule(first, Event::Tick { node: n });
    }

    fn paused(&self, n: usize, t: Instant) -> bool {
        within(&self.faults[n].paused, t)
    }

    fn cut(&self, n: usize, t: Instant) -> bool {
        within(&self.faults[n].cut, t)
    }

    /// Whether `a` can reach `b` at `t` (what gossip would find out).
    fn reachable(&self, a: usize, b: usize, t: Instant) -> bool {
        if a == b {
            return true;
        }
        !within(&self.faults[b].down, t)
            && !self.paused(b, t)
            && !self.cut(a, t)
            && !self.cut(b, t)
            && !self.nodes[b].leaving
    }

    /// Gossip's assignment as node `a` sees it: rendezvous hashing over
    /// the nodes `a` believes alive (a view `GOSSIP_LAG` old), as
    /// production computes it. A deaf node believes only itself alive,
    /// and is given every partition.
    fn assignment_seen_by(&self, a: usize) -> Assignment {
        let t = self
            .now
            .checked_sub(GOSSIP_LAG)
            .unwrap_or(self.t0)
            .max(self.t0);
        let deaf = within(&self.faults[a].deaf, t);
        self.assignment_among(
            |b| b == a || (!deaf && self.reachable(a, b, t)),
            Duration::ZERO,
        )
    }

    /// The assignment over the nodes `live` names, passing over those
    /// that shun a partition (as gossip publishes them, as of `shun_lag`
    /// ago) unless all do: `Assignment::compute_avoiding`, the code
    /// production runs.
    fn assignment_among(&self, live: impl Fn(usize) -> bool, shun_lag: Duration) -> Assignment {
        let live_ids: Vec<String> = (0..NODES)
            .filter(|&b| live(b))
            .map(|b| self.nodes[b].id.clone())
            .collect();
        let shuns = (0..NODES)
            .filter(|&b| live(b))
            .map(|b| {
                let t = self.clock_of(b).checked_sub(shun_lag).unwrap_or(self.t0);
                let shunned = (0..PARTITIONS as u16)
                    .filter(|&p| {
                        self.nodes[b]
                            .leases
                            .get(usize::from(p))
                            .is_some_and(|l| l.shunned(t))
                    })
                    .collect();
                (self.nodes[b].id.clone(), shunned)
            })
            .collect();
        Assignment::compute_avoiding(PARTITIONS as u16, &live_ids, &shuns)
    }

    /// How far node `n`'s wall clock is off real time now (ms): its skew
    /// and the sum of its steps so far.
    fn wall_offset(&self, n: usize) -> i64 {
        let steps: i64 = self.faults[n]
            .wall_steps
            .iter()
            .filter(|(at, _)| *at <= self.now)
            .map(|(_, by)| by)
            .sum();
        self.faults[n].wall_skew_ms + steps
    }

    /// Node `n`'s clock now: the boot-time clock production reads (it
    /// counts a paused or suspended node's sleep), running `skew_ppm`
    /// fast or slow; with [`Mutation::FrozenClock`] it stops while the
    /// node is paused.
    fn clock_of(&self, n: usize) -> Instant {
        let mut run = self.now - self.t0;
        if self.mutation == Mutation::FrozenClock {
            for &(a, b) in &self.faults[n].paused {
                let (a, b) = (a.min(self.now), b.min(self.now));
                run = run.saturating_sub(b.saturating_duration_since(a));
            }
        }
        let skew = run.as_nanos() as i128 * i128::from(self.nodes[n].skew_ppm) / 1_000_000;
        let skew = Duration::from_nanos(skew.unsigned_abs() as u64);
        match self.nodes[n].skew_ppm >= 0 {
            true => self.t0 + run + skew,
            false => self.t0 + run - skew,
        }
    }

    /// Node `n`'s reading of both clocks, as its hosts read it: its
    /// monotonic clock, and its wall clock (real time plus its steps).
    fn host_now(&self, n: usize) -> Now {
        let at = self.clock_of(n);
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(WALL0_SECS) + (at - self.t0);
        let offset = Duration::from_millis(self.wall_offset(n).unsigned_abs());
        let wall = match self.wall_offset(n) >= 0 {
            true => wall + offset,
            false => wall - offset,
        };
        Now { at, wall }
    }

    /// A message over the network: delayed, maybe dropped or duplicated,
    /// never delivered across a cut.
    fn send(&mut self, from: usize, to: Option<usize>, e: Event) {
        let cut = self.cut(from, self.now) || to.is_some_and(|t| self.cut(t, self.now));
        // After the faults, the network calms down too: the cluster must
        // then settle.
        let calm = self.now >= self.t0 + FAULTS_END;
        if cut || (!calm && self.rng.chance(20)) {
            return;
        }
        let copies = if !calm && self.rng.chance(20) { 2 } else { 1 };
        for _ in 0..copies {
            let delay = if !calm && self.rng.chance(30) {
                self.rng.millis(300, 3000)
            } else {
                self.rng.millis(1, 120)
            };
            self.schedule(delay, e.clone());
        }
    }

    fn run(&mut self) -> Result<(), String> {
        for (n, f) in self.faults.iter().enumerate() {
            let at = |t: &Instant| (*t - self.t0).as_secs_f64();
            let steps: Vec<_> = f.wall_steps.iter().map(|(t, by)| (at(t), by)).collect();
            let skew = f.wall_skew_ms;
            self.log(|| format!("n{n} wall clock {skew} ms off, steps (s, ms): {steps:?}"));
        }
        while let Some(Reverse((at, id))) = self.queue.pop() {
            if at > self.t0 + END {
                break;
            }
            self.now = at;
            let e = self.events.remove(&id).expect("scheduled");
            self.steps += 1;
            self.step(e)?;
        }
        self.check_settled()
    }

    /// Whether node `n`'s process `inc` is the one running, and awake;
    /// a paused node's events wait for it.
    fn deliverable(&mut self, n: usize, inc: u64, e: &Event) -> bool {
        let node = &self.nodes[n];
        if !node.up || node.inc != inc {
            return false;
        }
        if self.paused(n, self.now) {
            let until = self.faults[n]
                .paused
                .iter()
                .filter(|&&(a, b)| a <= self.now && self.now < b)
                .map(|&(_, b)| b)
                .max()
                .expect("paused");
            self.schedule_at(until, e.clone());
            return false;
        }
        true
    }

    fn step(&mut self, e: Event) -> Result<(), String> {
        match e.clone() {
            Event::Tick { node } => {
                let inc = self.nodes[node].inc;
                if !self.deliverable(node, inc, &e) {
                    return Ok(());
                }
                self.tick(node)?;
                self.schedule(TICK, Event::Tick { node });
            }
            Event::AtStore {
                node,
                inc,
                req,
                p,
                op,
            } => self.at_store(node, inc, req, p, op)?,
            Event::HeadRead {
                node,
                inc,
                req,
                p,
                head,
            } => {
                if self.deliverable(node, inc, &e) && self.answered(node, req) {
                    let t = self.clock_of(node);
                    let unreadable =
                        head.is_some() && within(&self.faults[node].unreadable, self.now);
                    match unreadable {
                        true => {
                            let wait = self.nodes[node].leases[p].on_head_unreadable(t);
                            self.log(|| {
                                format!("n{node} p{p} cannot read the head, away {wait:?}")
                            });
                        }
                        false => self.nodes[node].leases[p].on_head(t, Ok(head)),
                    }
                    self.effects(node, p)?;
                }
            }
            Event::StoreTimeout { node, inc, req } => {
                if self.deliverable(node, inc, &e) {
                    if let Some((p, number)) = self.nodes[node].pending.remove(&req) {
                        let t = self.clock_of(node);
                        let lease = &mut self.nodes[node].leases[p];
                        match number {
                            None => lease.on_head(t, Err(())),
                            Some(n) => lease.on_published(t, n, Published::Failed),
                        }
                        self.effects(node, p)?;
                    }
                }
            }
            Event::Created {
                node,
                inc,
                req,
                p,
                number,
                outcome,
            } => {
                if self.deliverable(node, inc, &e) && self.answered(node, req) {
                    self.log(|| format!("n{node} p{p} #{number}: {outcome:?}"));
                    let t = self.clock_of(node);
                    self.nodes[node].leases[p].on_published(t, number, outcome);
                    self.effects(node, p)?;
                }
            }
            Event::CheckpointReady {
                node,
                inc,
                p,
                number,
                ok,
            } => {
                if self.deliverable(node, inc, &e) {
                    let covers = self.nodes[node].local[p]
                        .as_ref()
                        .and_then(|l| l.snapshot.as_ref())
                        .filter(|(n, _)| *n == number && ok)
                        .map(|(_, s)| s.seq);
                    // The checkpoint's reply passes the node machine on
                    // its way to the lease (as through the node actor).
                    let forgets = self.mutation == Mutation::FloorIgnoresCheckpoints;
                    if let Some(covers) = covers.filter(|_| !forgets) {
                        self.nodes[node].machine.checkpoint_taken(p as u16, covers);
                    }
                    let t = self.clock_of(node);
                    self.nodes[node].leases[p].on_checkpoint(t, covers);
                    self.effects(node, p)?;
                }
            }
            Event::OpenFailed { node, inc, p } => {
                if self.deliverable(node, inc, &e) {
                    let t = self.clock_of(node);
                    let wait = self.nodes[node].leases[p].on_open_failed(t);
                    self.log(|| format!("n{node} p{p} cannot open it, away {wait:?}"));
                    self.effects(node, p)?;
                }
            }
            Event::Drained { node, inc, p } => {
                // A partition never opened drains at once, as the node
                // answers for a partition it does not hold.
                let unopened = self.nodes[node].local[p].is_none();
                if self.deliverable(node, inc, &e) && (unopened || self.answer_drain(node, p, true))
                {
                    // As the partition and the node's ownership actor: a
                    // drained partition owes its hosts' longest wait, on
                    // its own clock (`politeness::handover`).
                    let owed = self.owed_after_drain(node, p);
                    self.log(|| {
                        let now_ms = self.host_now(node).unix_ms();
                        let waits: Vec<_> = self.nodes[node].local[p]
                            .iter()
                            .flat_map(|l| l.state.hosts.iter())
                            .map(|(h, s)| (h, s.next_request_ms().saturating_sub(now_ms)))
                            .collect();
                        format!("n{node} p{p} drained, owes {owed:?} (host waits, ms: {waits:?})")
                    });
                    let t = self.clock_of(node);
                    self.nodes[node].leases[p].on_drained(t, owed);
                    self.effects(node, p)?;
                }
            }
            Event::DrainTimeout { node, inc, p } => {
                if self.deliverable(node, inc, &e) && self.answer_drain(node, p, false) {
                    // As the node's ownership actor: a drain that gave up
                    // owes a request timeout more than the delay.
                    let owed = SETTINGS.request_timeout + hosts::MIN_DELAY;
                    let t = self.clock_of(node);
                    self.nodes[node].leases[p].on_drained(t, owed);
                    self.effects(node, p)?;
                }
            }
            Event::FetchDone {
                node,
                inc,
                p,
                host,
                id,
                epoch,
                life,
                robots,
                took,
                abandoned,
            } => {
                if self.deliverable(node, inc, &e) {
                    let answer = (robots, took, abandoned);
                    self.fetch_done(node, (p, host), id, (epoch, life), answer)?;
                }
            }
            Event::TaskDone {
                node,
                inc,
                p,
                host,
                id,
                epoch,
                life,
                task,
                schedule,
            } => {
                if self.deliverable(node, inc, &e) {
                    self.task_done(node, (p, host), id, (epoch, life), *task, schedule)?;
                }
            }
            Event::Links {
                to,
                from,
                from_inc,
                p,
                batch,
                via,
            } => {
                let carried = via.is_none_or(|(conn, _)| self.conn_is(from, to, conn));
                if carried && self.deliverable(to, self.nodes[to].inc, &e) {
                    if let Some((conn, seq)) = via {
                        let admit = Message::Admit {
                            seq,
                            partition: p as u16,
                            entries: Vec::new(),
                        };
                        if !self.conn_read(to, from, conn, admit) {
                            return Ok(());
                        }
                    }
                    self.admit_links(to, (from, from_inc, batch, via), p);
                }
            }
            Event::LinksAnswer {
                node,
                inc,
                by,
                batch,
                acked,
                via,
            } => {
                let carried = via.is_none_or(|(conn, _)| self.conn_is(by, node, conn));
                if carried && self.deliverable(node, inc, &e) {
                    if let Some((conn, seq)) = via {
                        let answer = match acked {
                            true => Message::Ack { seq },
                            false => Message::Nack {
                                seq,
                                reason: "not held".into(),
                            },
                        };
                        if !self.conn_read(node, by, conn, answer) {
                            return Ok(());
                        }
                    }
                    self.links_answer(node, by, batch, acked, via)?;
                }
            }
            Event::Hello { to, from, conn } => {
                if self.conn_is(from, to, conn) && self.deliverable(to, self.nodes[to].inc, &e) {
                    self.hello(to, from, conn);
                }
            }
            Event::Heartbeat { to, from, conn } => {
                if self.conn_is(from, to, conn) && self.deliverable(to, self.nodes[to].inc, &e) {
                    self.conn_read(to, from, conn, Message::Heartbeat);
                }
            }
            Event::Crash { node, down } => {
                self.log(|| format!("n{node} crashes for {down:?}"));
                self.nodes[node].up = false;
                self.break_conns_of(node);
                let until = self.now + down;
                self.faults[node].down.push((self.now, until));
                self.schedule_at(until, Event::Restart { node });
            }
            Event::Restart { node } => {
                self.log(|| format!("n{node} restarts"));
                self.start_node(node);
            }
            Event::Leave { node, back } => {
                if self.nodes[node].up && !self.nodes[node].leaving {
                    self.log(|| format!("n{node} leaves, back in {back:?}"));
                    self.nodes[node].leaving = true;
                    self.schedule(Duration::ZERO, Event::Leave { node, back });
                } else if self.nodes[node].leaving
                    && self.deliverable(node, self.nodes[node].inc, &e)
                {
                    self.leave_when_empty(node, back);
                }
            }
            Event::ActorRestart { node, p } => {
                let inc = self.nodes[node].inc;
                if self.deliverable(node, inc, &e) {
                    self.restart_actor(node, p);
                }
            }
        }
        Ok(())
    }

    /// A node's periodic work: gossip's advice, timers, dispatch, links.
    fn tick(&mut self, n: usize) -> Result<(), String> {
        let t = self.clock_of(n);
        // Gossip's round, through the node machine: with a chain it only
        // advises the leases.
        let assigned = Assigned {
            assignment: Arc::new(self.assignment_seen_by(n)),
            holders: BTreeMap::new(),
            hearing: HearingView::default(),
            may_create_stores: true,
        };
        let mut wanted = Vec::new();
        for effect in self.nodes[n].machine.on_assignment(assigned, |_| true) {
            match effect {
                AssignmentEffect::Advise(w) => wanted = w,
                other => return Err(format!("n{n}: with a chain, gossip decided {other:?}")),
            }
        }
        if self.nodes[n].leaving {
            wanted.clear();
        }
        let awaiting = self.nodes[n].machine.awaiting_checkpoint();
        for p in 0..PARTITIONS {
            self.nodes[n].leases[p].want(t, wanted.contains(&(p as u16)));
            // As a node with nothing left to fetch does: a checkpoint
            // now for a partition whose admitted batches wait on one.
            if awaiting.contains(&(p as u16)) && self.rng.chance(50) {
                self.nodes[n].leases[p].hurry(t);
            }
            self.nodes[n].leases[p].handle_timeout(t);
            self.effects(n, p)?;
            self.dispatch(n, p)?;
        }
        self.keep_links(n);
        self.send_outbox(n);
        Ok(())
    }

    /// A leaving node goes down once it holds no partition (each handed
    /// back: drained, released), and comes back after `back`; until then
    /// it looks again a tick later.
    fn leave_when_empty(&mut self, n: usize, back: Duration) {
        let node = &self.nodes[n];
        let holds = node.local.iter().any(Option::is_some)
            || node.leases.iter().any(|l| l.fetch_until().is_some());
        if holds {
            self.schedule(TICK, Event::Leave { node: n, back });
            return;
        }
        self.log(|| format!("n{n} has handed everything back and stops"));
        self.nodes[n].up = false;
        self.break_conns_of(n);
        let until = self.now + back;
        self.faults[n].down.push((self.now, until));
        self.schedule_at(until, Event::Restart { node: n });
    }

    /// Partition `p`'s actor on node `n` failed and is started again over
    /// its store, as the node machine says (`NodeScheduler::restart`):
    /// held as after a crash (the last life's requests may still be at
    /// their servers, and their answers are lost with it) and at least to
    /// the end of its opening's hold, its writes numbered after every
    /// number the node saw of the last life.
    fn restart_actor(&mut self, n: usize, p: usize) {
        let now_ms = self.now.duration_since(self.t0).as_millis() as u64;
        let (opening, floor) = self.nodes[n].machine.restart(p as u16, now_ms);
        let hold = Duration::from_millis(opening.hold_until_ms - now_ms);
        let t = self.clock_of(n);
        let counts_from_zero = self.mutation == Mutation::RestartCountsFromZero;
        let hold_wall_ms = self.wall_offset(n);
        let running = self.nodes[n].local[p]
            .as_ref()
            .is_some_and(|l| !l.stopped && !l.draining);
        if !running {
            return;
        }
        self.log(|| format!("n{n} p{p}: its actor fails and restarts"));
        if !matches!(self.mutation, Mutation::NoGateHold | Mutation::IgnoreHold) {
            // As the node does: the gate holds the restart's hold too.
            self.nodes[n].gates[p].hold(t + hold);
        }
        let Some(local) = self.nodes[n].local[p].as_mut() else {
            return;
        };
        local.life += 1;
        // The last life's checkpoint in the making dies with it: its
        // reply never reaches the lease; so do its hosts (started again
        // from the store after the hold) and their answers.
        local.snapshot = None;
        local.hosts = (0..HOSTS_PER_PARTITION).map(|_| None).collect();
        local.idle = vec![false; HOSTS_PER_PARTITION];
        local.hold_until = t + hold;
        local.hold_wall_ms = hold_wall_ms;
        local.state.seq = if counts_from_zero { 0 } else { floor };
    }

    /// Starts the partition's hosts once its hold is over (as its
    /// activation starts host actors), and fires the hosts' timers that
    /// are due, if the lease lets the node fetch: the host machines decide
    /// when each request leaves.
    fn dispatch(&mut self, n: usize, p: usize) -> Result<(), String> {
        let t = self.clock_of(n);
        self.nodes[n].clock.advance_to(t);
        if !self.nodes[n].gates[p].is_open() {
            return Ok(());
        }
        let now = self.host_now(n);
        let ignores_hold = self.mutation == Mutation::IgnoreHold;
        let stuck = self.mutation == Mutation::StuckAfterRestart;
        let wall_offset = self.wall_offset(n);
        for host in 0..HOSTS_PER_PARTITION {
            let settings = self.host_settings.clone();
            let Some(local) = self.nodes[n].local[p].as_mut() else {
                return Ok(());
            };
            if local.draining || local.stopped {
                return Ok(());
            }
            let queue = local.state.pages(host);
            let fx = match &mut local.hosts[host] {
                Some(machine) if machine.armed().is_some_and(|at| at <= now.at) => {
                    machine.timer(&queue, now)
                }
                Some(_) => continue,
                None if local.idle[host] => continue,
                None => {
                    // The hosts count the partition's hold on the wall
                    // clock: a step forward since it was set shortens it.
                    let stepped = wall_offset - local.hold_wall_ms;
                    let wall_t = match stepped >= 0 {
                        true => t + Duration::from_millis(stepped as u64),
                        false => t - Duration::from_millis(stepped.unsigned_abs()),
                    };
                    if !ignores_hold && wall_t < local.hold_until {
                        continue;
                    }
                    if stuck && local.life > 0 {
                        continue;
                    }
                    let mut state = local.state.hosts.get(&host).cloned().unwrap_or_default();
                    if ignores_hold {
                        state.hold = None;
                        state.schedule = None;
                    }
                    let name = hosts::name(p, host);
                    let mut machine =
                        HostMachine::new(name, settings, hosts::metrics(), state, now);
                    let fx = machine.poll(&queue, now);
                    local.hosts[host] = Some(machine);
                    fx
                }
            };
            self.host_effects(n, (p, host), fx)?;
        }
        Ok(())
    }

    /// Carries out host `host` of partition `p`'s effects, as the host
    /// actor does (`actors/host.rs`): a request's hold is written to the
    /// partition's state before it leaves, and it leaves only while the
    /// lease gate is open (else it is handed back unsent); a task's
    /// writes land when it ends; saves and drains write the host's state.
    fn host_effects(
        &mut self,
        n: usize,
        (p, host): (usize, usize),
        fx: Vec<HostEffect>,
    ) -> Result<(), String> {
        let mut work: VecDeque<HostEffect> = fx.into();
        let mut carried = 0;
        while let Some(effect) = work.pop_front() {
            carried += 1;
            if carried > MAX_HOST_EFFECTS {
                return Err(format!("n{n} p{p} h{host}: a busy loop of host effects"));
            }
            let inc = self.nodes[n].inc;
            let now = self.host_now(n);
            // The gate reads the node's clock, as the hosts read it right
            // before a request leaves.
            self.nodes[n].clock.advance_to(now.at);
            let open = self.nodes[n].gates[p].is_open();
            let Some(local) = self.nodes[n].local[p].as_mut() else {
                return Ok(());
            };
            let (epoch, life) = (local.epoch, local.life);
            match effect {
                HostEffect::Fetch {
                    id,
                    hold,
                    deadline,
                    page,
                    ..
                } => {
                    let Some(machine) = local.hosts[host].as_mut() else {
                        return Err(format!("n{n} p{p} h{host}: a request from no machine"));
                    };
                    // As the host actor writes it: the hold the machine
                    // asks for (of every request the host has out), unless
                    // the one on record covers this request already.
                    if let Some(hold) = hold {
                        local.state.hosts.entry(host).or_default().hold = Some(hold);
                        machine.hold_written(hold);
                    }
                    if !open {
                        let queue = local.state.pages(host);
                        work.extend(machine.fetch_lost(id, false, &queue, now));
                        continue;
                    }
                    let request = (id, !page, deadline, (epoch, life));
                    self.send_request(n, (p, host), request)?;
                }
                HostEffect::Run { id, task, schedule } => {
                    let after = self.rng.millis(1, 30);
                    let task = Box::new(task);
                    let done = Event::TaskDone {
                        node: n,
                        inc,
                        p,
                        host,
                        id,
                        epoch,
                        life,
                        task,
                        schedule,
                    };
                    self.schedule(after, done);
                }
                HostEffect::Save(state) => {
                    local.state.hosts.insert(host, state);
                }
                // The node's tick fires it (`HostMachine::armed`).
                HostEffect::WakeAt(_) => {}
                HostEffect::Drained(state) => {
                    local.state.hosts.insert(host, state);
                    local.drained[host] = true;
                    if local.drained.iter().all(|&d| d) {
                        self.schedule(Duration::ZERO, Event::Drained { node: n, inc, p });
                    }
                }
                // Nothing left to do (a refresh, if any, is due long after
                // the run): the partition passivates it; its queue stays
                // empty, so it is not started again.
                HostEffect::Passivate { state, .. } => {
                    local.state.hosts.insert(host, state);
                    local.hosts[host] = None;
                    local.idle[host] = true;
                    self.log(|| format!("n{n} p{p} h{host} is idle"));
                    return Ok(());
                }
                other => return Err(format!("n{n} p{p} h{host}: unexpected {other:?}")),
            }
        }
        Ok(())
    }

    /// Sends request `id` of host `host` (robots.txt or a page), abandoned
    /// at `deadline` on the node's clock, if no request is at that host's
    /// server: the politeness invariant, checked against every process.
    fn send_request(
        &mut self,
        n: usize,
        (p, host): (usize, usize),
        (id, robots, deadline, (epoch, life)): (TaskId, bool, Instant, (u64, u64)),
    ) -> Result<(), String> {
        let inc = self.nodes[n].inc;
        // Some requests run right up to the timeout: the old owner's last
        // request is what a new owner's hold must outwait.
        let timeout = SETTINGS.request_timeout.as_millis() as u64 - 5;
        // Once the faults are over, the servers are well too.
        let calm = self.now >= self.t0 + FAULTS_END;
        let took = match self.rng.chance(250) {
            _ if calm => self.rng.millis(20, 1_000),
            true => self.rng.millis(timeout - 50, timeout),
            false => self.rng.millis(20, timeout),
        };
        // Some the crawler gives up on before the server is done (a
        // first-byte timeout, or a deadline shortened by a wait for a
        // fetch slot): the server works on to its end.
        let left = deadline.saturating_duration_since(self.clock_of(n));
        let given_up = (!calm && self.rng.chance(150)).then(|| self.rng.millis(10, timeout));
        let answer = given_up.map_or(took, |g| g.min(took)).min(left);
        let abandoned = answer < took;
        let end = self.now + took;
        let key = (p, host);
        // Whoever sent it, this process or another: no host ever has two
        // requests on the server at once.
        let other = self
            .on_server
            .get(&key)
            .into_iter()
            .flatten()
            .find(|(_, ends)| *ends > self.now);
        if let Some((who, ends)) = other {
            return Err(format!(
                "host {key:?}: n{n} ({inc}) starts a request while n{} ({}) has one until +{:?}",
                who.0,
                who.1,
                *ends - self.now
            ));
        }
        // Nor does one leave during its partition's hold (a take's, a
        // restart's), on the node's own clock: what the protocol promises,
        // whether or not an earlier request is still at the server.
        let held = self.nodes[n].local[p].as_ref().map(|l| l.hold_until);
        let t = self.clock_of(n);
        if let Some(until) = held.filter(|&until| t < until) {
            return Err(format!(
                "n{n} p{p} h{host} starts a request during the partition's hold, {:?} early",
                until - t
            ));
        }
        self.log(|| {
            format!("n{n} p{p} h{host} sends #{id} robots={robots} (ends +{took:?}, answer +{answer:?})")
        });
        let list = self.on_server.entry(key).or_default();
        list.retain(|(_, ends)| *ends > self.now);
        list.push(((n, inc), end));
        let done = Event::FetchDone {
            node: n,
            inc,
            p,
            host,
            id,
            epoch,
            life,
            robots,
            took,
            abandoned,
        };
        self.schedule(answer, done);
        // Each page finds a link into a random partition (until the last
        // seconds, which are for acknowledging them).
        let finding = self.now + LAST_ACKS < self.t0 + END;
        if !robots && finding && self.rng.chance(500) {
            let to = self.rng.below(PARTITIONS as u64) as usize;
            self.next_link += 1;
            let link = self.next_link;
            self.next_batch += 1;
            let batch = Batch {
                p: to,
                links: vec![link],
            };
            self.nodes[n].outbox.insert(self.next_batch, batch);
        }
        Ok(())
    }

    /// Request `id`'s answer reaches its host: the response after `took`,
    /// or a timeout if the crawler stopped waiting first. Lost with the
    /// actor's life, or the partition, that sent it.
    fn fetch_done(
        &mut self,
        n: usize,
        (p, host): (usize, usize),
        id: TaskId,
        (epoch, life): (u64, u64),
        (robots, took, abandoned): (bool, Duration, bool),
    ) -> Result<(), String> {
        let forgets = self.mutation == Mutation::ForgetAbandoned;
        let now = self.host_now(n);
        let Some(local) = self.nodes[n].local[p].as_mut() else {
            return Ok(());
        };
        if local.epoch != epoch || local.life != life || local.stopped {
            return Ok(());
        }
        let Some(machine) = local.hosts[host].as_mut() else {
            return Ok(());
        };
        let result = match (abandoned, forgets) {
            (false, _) => hosts::answer(robots, took, now),
            (true, false) => Err(FetchError::Timeout),
            (true, true) => Err(FetchError::Connect("refused".into())),
        };
        let queue = local.state.pages(host);
        let fx = machine.fetched(id, result, &queue, now);
        self.host_effects(n, (p, host), fx)
    }

    /// Task `id` of host `host` ends: a page processed, or an entry
    /// finished without one, is completed in the partition's state (the
    /// host's schedule written with it, as a completion writes it).
    fn task_done(
        &mut self,
        n: usize,
        (p, host): (usize, usize),
        id: TaskId,
        (epoch, life): (u64, u64),
        task: Task,
        schedule: Schedule,
    ) -> Result<(), String> {
        let now = self.host_now(n);
        let Some(local) = self.nodes[n].local[p].as_mut() else {
            return Ok(());
        };
        if local.epoch != epoch || local.life != life || local.stopped {
            return Ok(());
        }
        let key = match &task {
            Task::Process(job) => Some(job.entry.key.clone()),
            Task::Complete(finish) => Some(finish.completion.key.clone()),
            _ => None,
        };
        let name = hosts::name(p, host);
        let discovering = self.now < self.t0 + DISCOVERY_END;
        let mut found = false;
        if let Some(key) = key.filter(|k| hosts::is_queue_key(&name, k)) {
            let page = hosts::page_of(&key);
            // The page links to the next one, queued with its completion.
            if discovering && page + 1 >= local.state.queued(host) {
                local.state.queued.insert(host, page + 2);
                found = true;
            }
            let seq = local.state.write();
            local.state.done.insert((host, page), seq);
            local.state.hosts.entry(host).or_default().schedule = Some(schedule);
            local.done.admitted(seq, (host, page));
            if !self.completed_ever.insert((p, host, page)) {
                self.refetches += 1;
            }
        }
        let Some(machine) = local.hosts[host].as_mut() else {
            return Ok(());
        };
        let queue = local.state.pages(host);
        // As the partition wakes a host it queued new work for, when the
        // completion's write admitted it (before the task's answer).
        let mut fx = match found {
            true => machine.wake(Arrivals::levels(hosts::LEVEL_BIT), &queue, now),
            false => Vec::new(),
        };
        fx.extend(machine.task_done(id, task, Ok(()), &queue, now));
        self.host_effects(n, (p, host), fx)
    }

    /// Drains partition `p`'s hosts on node `n`: each active machine stops
    /// dispatching and answers once nothing is in flight or running (a
    /// host never started has nothing to drain); the drain gives up after
    /// [`DRAIN_TIMEOUT`] with requests still out.
    fn drain_hosts(&mut self, n: usize, p: usize) -> Result<(), String> {
        let inc = self.nodes[n].inc;
        let now = self.host_now(n);
        let Some(local) = self.nodes[n].local[p].as_mut() else {
            return Ok(());
        };
        local.draining = true;
        let mut answers = Vec::new();
        for (host, machine) in local.hosts.iter_mut().enumerate() {
            local.drained[host] = machine.is_none();
            if let Some(machine) = machine {
                answers.push((host, machine.drain(now)));
            }
        }
        if answers.is_empty() {
            self.schedule(Duration::ZERO, Event::Drained { node: n, inc, p });
        }
        for (host, fx) in answers {
            self.host_effects(n, (p, host), fx)?;
        }
        // Requests may run longer than the drain waits.
        self.schedule(DRAIN_TIMEOUT, Event::DrainTimeout { node: n, inc, p });
        Ok(())
    }

    /// What partition `p`, drained on node `n`, owes its hosts: their
    /// longest wait read from the states the drain saved, as the partition
    /// actor reads it; with [`Mutation::FloorOwed`] the least delay only.
    fn owed_after_drain(&self, n: usize, p: usize) -> Duration {
        let floor = hosts::MIN_DELAY;
        if self.mutation == Mutation::FloorOwed {
            return floor;
        }
        let now_ms = self.host_now(n).unix_ms();
        let waits = self.nodes[n].local[p]
            .iter()
            .flat_map(|l| l.state.hosts.values().map(HostState::next_request_ms));
        owed_after_drain(now_ms, waits, floor, SETTINGS.request_timeout)
    }

    /// Answers partition `p`'s drain on node `n` once: `clean`, every
    /// request answered (the hosts' holds are cleared, as the drain's
    /// saves clear them), or given up on with requests out (their holds
    /// stay in the state the next owner restores). Whether this answered.
    fn answer_drain(&mut self, n: usize, p: usize, clean: bool) -> bool {
        self.log(|| format!("n{n} p{p} drain answered clean={clean}"));
        let Some(local) = self.nodes[n].local[p].as_mut() else {
            return false;
        };
        if !local.draining || std::mem::replace(&mut local.drain_answered, true) {
            return false;
        }
        // Clean, each host's drained state (no hold: nothing out) is
        // saved; given up on, the holds of the requests still out stay.
        let _ = clean;
        true
    }

    /// Whether `a` believes `b` alive: gossip's view, `GOSSIP_LAG` old.
    fn believed_alive(&self, a: usize, b: usize) -> bool {
        let t = self
            .now
            .checked_sub(GOSSIP_LAG)
            .unwrap_or(self.t0)
            .max(self.t0);
        self.reachable(a, b, t)
    }

    /// Whether connection `conn` is the live one between the present
    /// processes of `a` and `b`.
    fn conn_is(&self, a: usize, b: usize, conn: u64) -> bool {
        self.conns.get(&pair(a, b)).is_some_and(|c| {
            c.id == conn
                && c.ends
                    .iter()
                    .all(|&(x, inc)| self.nodes[x].up && self.nodes[x].inc == inc)
        })
    }

    /// Node `n`'s bridge: breaks connections whose peer is gone, runs
    /// each connection's deadlines (silence, heartbeat), fails the batches of peers gossip
    /// says left (their senders route them again), and dials the peers it
    /// dials once their backoff has passed.
    fn keep_links(&mut self, n: usize) {
        for m in 0..NODES {
            if m == n {
                continue;
            }
            let key = pair(n, m);
            // A process that is gone closed its sockets; a peer paused or
            // cut off is found by the connection's silence.
            let alive = self.conns.get(&key).map(|c| {
                c.ends
                    .iter()
                    .all(|&(x, inc)| self.nodes[x].up && self.nodes[x].inc == inc)
            });
            if alive == Some(false) {
                self.break_conn(key);
            }
            self.conn_deadlines(n, m);
            if !self.believed_alive(n, m) {
                let failed = self.nodes[n].links[m].leave();
                for batch in failed {
                    self.nodes[n].machine.outbox_mut().answered(0, batch, false);
                }
                self.break_conn(key);
                continue;
            }
            if n > m || self.conns.contains_key(&key) || self.now < self.nodes[n].redial_at[m] {
                continue;
            }
            if self.reachable(n, m, self.now) && self.nodes[m].up {
                self.open_conn(n, m);
            } else {
                let delay = self.nodes[n].links[m].redial_delay();
                self.nodes[n].redial_at[m] = self.now + delay;
            }
        }
    }

    fn open_conn(&mut self, n: usize, m: usize) {
        self.next_conn += 1;
        let id = self.next_conn;
        let ends = [(n, self.nodes[n].inc), (m, self.nodes[m].inc)];
        self.log(|| format!("n{n} connects to n{m} (#{id})"));
        let machines = [
            Connection::dialled(
                &self.bridge_settings(n),
                &self.nodes[m].id,
                self.clock_of(n),
            ),
            Connection::accepted(&self.bridge_settings(m), self.clock_of(m)),
        ];
        self.conns.insert(
            pair(n, m),
            Conn {
                id,
                ends,
                last: [self.now; 2],
                machines,
                ready: [false; 2],
            },
        );
        // Each side's hello first; the links start on the peer's hello.
        for (x, y) in [(n, m), (m, n)] {
            self.conn_send(
                x,
                y,
                Event::Hello {
                    to: y,
                    from: x,
                    conn: id,
                },
            );
        }
    }

    /// Node `n`'s bridge settings, as `trawl run` makes them (its id,
    /// the window of the links, the default heartbeat and silence).
    fn bridge_settings(&self, n: usize) -> BridgeSettings {
        let listen = "127.0.0.1:0".parse().expect("an address");
        let mut settings = BridgeSettings::new("sim", self.nodes[n].id.clone(), listen);
        settings.window = WINDOW;
        settings
    }

    /// `to`'s end of the live connection `conn` with `from`, with the
    /// node's clock: `None` if that connection is gone.
    fn conn_end(
        &mut self,
        to: usize,
        from: usize,
        conn: u64,
    ) -> Option<(&mut Conn, usize, Instant)> {
        let now = self.clock_of(to);
        let c = self
            .conns
            .get_mut(&pair(to, from))
            .filter(|c| c.id == conn)?;
        let end = c.end(to);
        Some((c, end, now))
    }

    /// The peer's hello reaches `to`: its machine checks it; once it
    /// passes, `to`'s link to `from` is connected and sends.
    fn hello(&mut self, to: usize, from: usize, conn: u64) {
        let expected = self.nodes[from].id.clone();
        let Some((c, end, now)) = self.conn_end(to, from, conn) else {
            return;
        };
        let hello = c.machines[1 - end].hello();
        match c.machines[end].on_hello(&hello, |_| true, now) {
            Ok(peer) if peer == expected => {
                c.ready[end] = true;
                let (_, out) = self.nodes[to].links[from].connected(conn, self.now);
                self.transmit(to, from, out);
            }
            Ok(peer) => {
                self.log(|| format!("n{to}: hello from {peer} on #{conn}, expected {expected}"));
                self.break_conn(pair(to, from));
            }
            Err(closed) => {
                self.log(|| format!("n{to}: #{conn} refused: {}", closed.label()));
                self.break_conn(pair(to, from));
            }
        }
    }

    /// A frame from `from` reaches `to` on `conn`: `to`'s machine reads
    /// it; `false` if that closed the connection (or it is gone).
    fn conn_read(&mut self, to: usize, from: usize, conn: u64, msg: Message) -> bool {
        let Some((c, end, now)) = self.conn_end(to, from, conn) else {
            return false;
        };
        match c.machines[end].on_message(msg, now) {
            Ok(_) => true,
            Err(closed) => {
                self.log(|| format!("n{to}: #{conn} closes: {}", closed.label()));
                self.break_conn(pair(to, from));
                false
            }
        }
    }

    /// Node `n`'s ends of its connections at its tick: a handshake past
    /// its deadline or a peer silent past the limit closes the connection
    /// (a paused or cut-off peer: what only the silence tells); a
    /// heartbeat goes out when one is due.
    fn conn_deadlines(&mut self, n: usize, m: usize) {
        let key = pair(n, m);
        let now = self.clock_of(n);
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        let end = c.end(n);
        let (id, machine) = (c.id, &mut c.machines[end]);
        let closes = match c.ready[end] {
            false => now >= machine.handshake_deadline(),
            true => machine.on_silence(now).is_some(),
        };
        if closes {
            self.log(|| format!("n{n}: #{id} with n{m} silent; closed"));
            return self.break_conn(key);
        }
        if c.ready[end] && now >= machine.heartbeat_at() {
            machine.on_written(false, now);
            self.conn_send(
                n,
                m,
                Event::Heartbeat {
                    to: m,
                    from: n,
                    conn: id,
                },
            );
        }
    }

    /// The connection between the pair breaks: each end still running
    /// hears it (the dialer redials after its backoff).
    fn break_conn(&mut self, key: (usize, usize)) {
        let Some(c) = self.conns.remove(&key) else {
            return;
        };
        self.log(|| {
            format!(
                "connection #{} between n{} and n{} breaks",
                c.id, key.0, key.1
            )
        });
        for (i, &(x, inc)) in c.ends.iter().enumerate() {
            if !self.nodes[x].up || self.nodes[x].inc != inc {
                continue;
            }
            let y = c.ends[1 - i].0;
            let closed = Closed {
                conn: c.id,
                progress: false,
            };
            self.nodes[x].links[y].closed(closed, self.now);
            if x < y {
                let delay = self.nodes[x].links[y].redial_delay();
                self.nodes[x].redial_at[y] = self.now + delay;
            }
        }
    }

    fn break_conns_of(&mut self, n: usize) {
        let keys: Vec<_> = self
            .conns
            .keys()
            .filter(|(a, b)| *a == n || *b == n)
            .copied()
            .collect();
        for key in keys {
            self.break_conn(key);
        }
    }

    /// Writes what a link lets out on its connection.
    fn transmit(&mut self, from: usize, to: usize, out: Vec<Transmit>) {
        let inc = self.nodes[from].inc;
        for t in out {
            let batch = u64::from_le_bytes(t.frame[..].try_into().expect("a batch id"));
            let Some(conn) = self.conns.get(&pair(from, to)).map(|c| c.id) else {
                return;
            };
            let Some(p) = self.nodes[from].outbox.get(&batch).map(|b| b.p) else {
                continue;
            };
            let e = Event::Links {
                to,
                from,
                from_inc: inc,
                p,
                batch,
                via: Some((conn, t.seq)),
            };
            self.conn_send(from, to, e);
        }
    }

    /// A frame on the pair's connection: in order, after a delay; or the
    /// connection breaks (a reset), and the frame is lost with it.
    fn conn_send(&mut self, from: usize, to: usize, e: Event) {
        let key = pair(from, to);
        let calm = self.now >= self.t0 + FAULTS_END;
        if !self.conns.contains_key(&key) {
            return;
        }
        // Across a cut nothing arrives (TCP retries past the silence).
        if self.cut(from, self.now) || self.cut(to, self.now) {
            return;
        }
        if !calm && self.rng.chance(15) {
            return self.break_conn(key);
        }
        let delay = if !calm && self.rng.chance(30) {
            self.rng.millis(300, 3000)
        } else {
            self.rng.millis(1, 120)
        };
        let c = self.conns.get_mut(&key).expect("checked");
        let dir = usize::from(c.ends[0].0 != from);
        let at = (self.now + delay).max(c.last[dir]);
        c.last[dir] = at;
        self.schedule_at(at, e);
    }

    /// The outbox pass: every batch not on its way goes to its partition's
    /// advised owner, admitted here if that is this node.
    fn send_outbox(&mut self, n: usize) {
        let inc = self.nodes[n].inc;
        let due = self.outbox_pass(n);
        for (batch, p, route) in due {
            let to = match route {
                Route::Peer(peer) => peer[1..].parse().expect("a node id"),
                _ => n,
            };
            if to == n {
                let e = Event::Links {
                    to,
                    from: n,
                    from_inc: inc,
                    p,
                    batch,
                    via: None,
                };
                let delay = self.rng.millis(1, 20);
                self.schedule(delay, e);
                continue;
            }
            let frame = |_| Ok::<_, ()>(Bytes::copy_from_slice(&batch.to_le_bytes()));
            let out = self.nodes[n].links[to]
                .enqueue(frame, batch)
                .expect("a batch id encodes");
            self.transmit(n, to, out);
        }
    }

    /// Reads node `n`'s outbox as the node's scheduler says (from its
    /// cursor, a page budget per pass), marking what it sends as on its
    /// way: (batch, partition) of each.
    fn outbox_pass(&mut self, n: usize) -> Vec<(u64, usize, Route)> {
        let node = &mut self.nodes[n];
        // The machine's one table: here, a peer, or nowhere yet (the
        // batch waits in the outbox).
        let routes: Vec<Route> = (0..PARTITIONS)
            .map(|p| node.machine.route_of(p as u16))
            .collect();
        let outbox = &node.outbox;
        let schedule = node.machine.outbox_mut();
        let pass = schedule.pass();
        let mut reading = schedule.read(0, pass);
        let mut due = Vec::new();
        loop {
            let from = reading.after().map_or(0, |k| k + 1);
            let page: Vec<(u64, usize)> = outbox
                .range(from..)
                .take(OUTBOX_PAGE)
                .map(|(id, b)| (*id, b.p))
                .collect();
            let full = page.len() == OUTBOX_PAGE;
            for (batch, p) in page {
                if schedule.saw(&mut reading, batch) == OutboxBatch::OnItsWay {
                    continue;
                }
                if routes[p] == Route::Nowhere {
                    reading.held_back();
                    continue;
                }
                reading.sent();
                due.push((batch, p, routes[p].clone()));
            }
            if !reading.more(full) {
                break;
            }
        }
        schedule.finish(reading);
        for &(batch, ..) in &due {
            schedule.sending(0, batch);
        }
        due
    }

    /// The owner admits a batch (or refuses it: not held here).
    fn admit_links(&mut self, to: usize, admitted: Admitted, p: usize) {
        let (from, from_inc, batch, _) = admitted;
        let links = self.batch_links(from, from_inc, batch);
        let Some(local) = self.nodes[to].local[p].as_mut().filter(|l| !l.stopped) else {
            return self.answer(to, admitted, false);
        };
        let Some(links) = links else { return };
        let mut last = 0;
        for link in links {
            last = match local.state.links.get(&link) {
                Some(seq) => last.max(*seq),
                None => {
                    let seq = local.state.write();
                    local.state.links.insert(link, seq);
                    seq
                }
            };
        }
        // The node machine keeps the answer until a published checkpoint
        // covers the admission (the mutation answers at once).
        let ready = match self.mutation {
            Mutation::AckOnAdmit => Some(admitted),
            _ => self.nodes[to].machine.admitted(p as u16, last, admitted),
        };
        if let Some(ready) = ready {
            self.answer(to, ready, true);
        }
    }

    fn batch_links(&self, from: usize, from_inc: u64, batch: u64) -> Option<Vec<u64>> {
        let node = &self.nodes[from];
        (node.inc == from_inc)
            .then(|| node.outbox.get(&batch).map(|b| b.links.clone()))
            .flatten()
    }

    /// `owner` answers an admitted batch: the way it came.
    fn answer(&mut self, owner: usize, (from, from_inc, batch, via): Admitted, acked: bool) {
        // On a connection, the owner's machine makes the answer and frees
        // the batch's place of its window once it is written.
        let mut acked = acked;
        if let Some((conn, seq)) = via {
            if let Some((c, end, now)) = self.conn_end(owner, from, conn) {
                let handled = match acked {
                    true => Handled::Admitted,
                    false => Handled::NotHeld("not held".into()),
                };
                match c.machines[end].on_handled(seq, handled) {
                    Ok(msg) => {
                        acked = matches!(msg, Message::Ack { .. });
                        c.machines[end].on_written(true, now);
                    }
                    Err(closed) => {
                        self.log(|| format!("n{owner}: #{conn} closes: {}", closed.label()));
                        return self.break_conn(pair(owner, from));
                    }
                }
            }
        }
        let e = Event::LinksAnswer {
            node: from,
            inc: from_inc,
            by: owner,
            batch,
            acked,
            via,
        };
        match via {
            Some(_) => self.conn_send(owner, from, e),
            None => {
                let delay = self.rng.millis(1, 20);
                self.schedule(delay, e);
            }
        }
    }

    fn links_answer(
        &mut self,
        n: usize,
        by: usize,
        batch: u64,
        acked: bool,
        via: Option<(u64, u64)>,
    ) -> Result<(), String> {
        if let Some((_, seq)) = via {
            let link = &mut self.nodes[n].links[by];
            let answered = if acked {
                link.acked(seq)
            } else {
                link.refused(seq)
            };
            let Some((reply, out)) = answered else {
                return Ok(());
            };
            if reply != batch {
                return Err(format!(
                    "n{n}: the answer to #{seq} from n{by} is for batch {batch}, the link resolved {reply}"
                ));
            }
            self.transmit(n, by, out);
        }
        if !acked && self.mutation == Mutation::DropRefused {
            // Left "on its way": never sent again.
            return Ok(());
        }
        self.nodes[n].machine.outbox_mut().answered(0, batch, acked);
        if !acked {
            return Ok(());
        }
        let Some(b) = self.nodes[n].outbox.remove(&batch) else {
            return Ok(());
        };
        self.acked_links[b.p].extend(b.links.iter().copied());
        self.check_head(b.p)
    }

    /// Every acknowledged link and durable completion is in `p`'s head.
    fn check_head(&self, p: usize) -> Result<(), String> {
        let head = self.chains[p].values().next_back();
        let empty = State::default();
        let state = head.map_or(&empty, |h| &h.state);
        if let Some(lost) = self.acked_links[p]
            .iter()
            .find(|l| !state.links.contains_key(l))
        {
            return Err(format!(
                "p{p}: acknowledged link {lost} is not in the chain's head"
            ));
        }
        if let Some(lost) = self.durable_done[p]
            .iter()
            .find(|d| !state.done.contains_key(d))
        {
            return Err(format!(
                "p{p}: durable completion {lost:?} is not in the chain's head"
            ));
        }
        Ok(())
    }

    /// Whether the answer to `req` is awaited (else it is late or a copy).
    fn answered(&mut self, node: usize, req: u64) -> bool {
        self.nodes[node].pending.remove(&req).is_some()
    }

    /// Sends a store request; unanswered within 3.5 s, it fails.
    fn ask_store(&mut self, n: usize, p: usize, op: StoreOp) {
        let inc = self.nodes[n].inc;
        self.seq += 1;
        let req = self.seq;
        let number = match &op {
            StoreOp::Head => None,
            StoreOp::Create { draft, .. } => Some(draft.number),
        };
        self.nodes[n].pending.insert(req, (p, number));
        self.schedule(
            Duration::from_millis(3500),
            Event::StoreTimeout { node: n, inc, req },
        );
        self.send(
            n,
            None,
            Event::AtStore {
                node: n,
                inc,
                req,
                p,
                op,
            },
        );
    }

    fn at_store(
        &mut self,
        node: usize,
        inc: u64,
        req: u64,
        p: usize,
        op: StoreOp,
    ) -> Result<(), String> {
        match op {
            StoreOp::Head => {
                let head = self.chains[p].values().next_back().map(|s| s.view.clone());
                self.send(
                    node,
                    Some(node),
                    Event::HeadRead {
                        node,
                        inc,
                        req,
                        p,
                        head,
                    },
                );
            }
            StoreOp::Create { draft, snapshot } => {
                let number = draft.number;
                let overwrites = self.mutation == Mutation::OverwritingStore;
                let existing = self.chains[p].get(&number).filter(|_| !overwrites);
                let outcome = if let Some(existing) = existing {
                    Published::Taken {
                        by: Some(existing.view.owner.clone()),
                    }
                } else {
                    let state = match snapshot {
                        Some(s) => s,
                        None => number
                            .checked_sub(1)
                            .and_then(|prev| self.chains[p].get(&prev))
                            .map(|s| s.state.clone())
                            .unwrap_or_default(),
                    };
                    let owner = &draft.owner;
                    let who = (owner.node.clone(), owner.incarnation);
                    match self.epoch_owner.get(&(p, owner.epoch)) {
                        Some(first) if *first != who => {
                            return Err(format!(
                                "p{p}: epoch {} published by {first:?} and by {who:?}",
                                owner.epoch
                            ))
                        }
                        _ => {
                            self.epoch_owner.insert((p, owner.epoch), who);
                        }
                    }
                    let view = HeadView {
                        number,
                        owner: draft.owner.clone(),
                        released: draft.released,
                        hold_ms: draft.hold_ms,
                        covers: draft.covers,
                    };
                    self.log(|| {
                        format!(
                            "store p{p} #{number} by {:?} ({:?})",
                            draft.owner, draft.kind
                        )
                    });
                    self.chains[p].insert(number, Stored { view, state });
                    self.check_head(p)?;
                    Published::Created
                };
                self.send(
                    node,
                    Some(node),
                    Event::Created {
                        node,
                        inc,
                        req,
                        p,
                        number,
                        outcome,
                    },
                );
            }
        }
        Ok(())
    }

    /// Carries out what node `n`'s machine for `p` asks.
    fn effects(&mut self, n: usize, p: usize) -> Result<(), String> {
        while let Some(effect) = self.nodes[n].leases[p].poll() {
            let inc = self.nodes[n].inc;
            match effect {
                Effect::ReadHead => self.ask_store(n, p, StoreOp::Head),
                Effect::Publish(draft) => {
                    let snapshot = if draft.new_checkpoint {
                        let local = self.nodes[n].local[p].as_ref();
                        let snap = local.and_then(|l| l.snapshot.clone());
                        match snap {
                            Some((number, s)) if number == draft.number => Some(s),
                            _ => return Err(format!("n{n} p{p}: publish without its checkpoint")),
                        }
                    } else {
                        None
                    };
                    self.ask_store(n, p, StoreOp::Create { draft, snapshot });
                }
                Effect::Take {
                    owner,
                    from,
                    hold_until,
                } => {
                    self.log(|| {
                        format!(
                            "n{n} p{p} takes epoch {} from {:?}, held {:?}",
                            owner.epoch,
                            from.as_ref().map(|h| h.number),
                            hold_until.saturating_duration_since(self.now)
                        )
                    });
                    // Restore: the files of the manifest claimed over.
                    let state = from
                        .as_ref()
                        .and_then(|h| self.chains[p].get(&h.number))
                        .map(|s| s.state.clone())
                        .unwrap_or_default();
                    let mut done = Watermarks::default();
                    done.durable(state.seq);
                    // Now and then, during the faults, the restore or the
                    // open fails (a chain file missing, the disk): the
                    // partition is handed back unopened.
                    let calm = self.now >= self.t0 + FAULTS_END;
                    if !calm && self.rng.chance(100) {
                        let after = self.rng.millis(1, 200);
                        self.schedule(after, Event::OpenFailed { node: n, inc, p });
                        continue;
                    }
                    // Open at once (as the node reports a take it opened);
                    // the machine's watermarks count on from the
                    // checkpoint's coverage.
                    self.nodes[n].leases[p].on_opened();
                    if !matches!(self.mutation, Mutation::NoGateHold | Mutation::IgnoreHold) {
                        self.nodes[n].gates[p].hold(hold_until);
                    }
                    let hold_wall_ms = self.wall_offset(n);
                    // The node machine opens it with the take's hold (its
                    // milliseconds counted from the simulation's start).
                    let now_ms = self.now.duration_since(self.t0).as_millis() as u64;
                    let held_ms = hold_until.saturating_duration_since(self.clock_of(n));
                    let taken_until_ms = now_ms + held_ms.as_millis() as u64 + 1;
                    self.nodes[n]
                        .machine
                        .opening(p as u16, now_ms, taken_until_ms, false);
                    self.nodes[n].machine.opened(p as u16, ());
                    self.nodes[n].machine.taken(p as u16, state.seq);
                    self.nodes[n].local[p] = Some(Local {
                        epoch: owner.epoch,
                        life: 0,
                        hold_until,
                        hold_wall_ms,
                        state,
                        done,
                        snapshot: None,
                        hosts: (0..HOSTS_PER_PARTITION).map(|_| None).collect(),
                        drained: vec![false; HOSTS_PER_PARTITION],
                        idle: vec![false; HOSTS_PER_PARTITION],
                        drain_answered: false,
                        draining: false,
                        stopped: false,
                    });
                }
                Effect::Checkpoint { number } => {
                    let Some(local) = self.nodes[n].local[p].as_mut() else {
                        // Never opened (its take failed): no checkpoint.
                        let ev = Event::CheckpointReady {
                            node: n,
                            inc,
                            p,
                            number,
                            ok: false,
                        };
                        self.schedule(Duration::ZERO, ev);
                        continue;
                    };
                    local.snapshot = Some((number, local.state.clone()));
                    // Fails while the disk is full, and now and then
                    // during the faults.
                    let calm = self.now >= self.t0 + FAULTS_END;
                    let ok =
                        !within(&self.faults[n].full, self.now) && (calm || !self.rng.chance(50));
                    let took = self.rng.millis(1, 400);
                    self.schedule(
                        took,
                        Event::CheckpointReady {
                            node: n,
                            inc,
                            p,
                            number,
                            ok,
                        },
                    );
                }
                Effect::Durable { covers } => {
                    let Some(local) = self.nodes[n].local[p].as_mut() else {
                        continue;
                    };
                    let done = local.done.durable(covers);
                    let acks = self.nodes[n].machine.covered(p as u16, covers);
                    self.durable_done[p].extend(done);
                    self.check_head(p)?;
                    for a in acks {
                        self.answer(n, a, true);
                    }
                }
                Effect::Drain => {
                    // Nothing is routed to a partition handed back.
                    self.nodes[n].machine.releasing(p as u16);
                    if self.nodes[n].local[p].is_none() {
                        self.schedule(Duration::ZERO, Event::Drained { node: n, inc, p });
                    }
                    if self.nodes[n].local[p].is_some() {
                        self.drain_hosts(n, p)?;
                    }
                }
                Effect::GaveUp { wait } => {
                    self.log(|| format!("n{n} p{p} gives up (checkpoints fail), away {wait:?}"));
                }
                Effect::Stop { reason } => {
                    self.log(|| format!("n{n} p{p} stops: {reason:?}"));
                    // Admitted, not durable: refused, so their senders
                    // route them again.
                    let (_, waiting) = self.nodes[n].machine.closed(p as u16);
                    self.nodes[n].machine.released(p as u16);
                    for a in waiting {
                        self.answer(n, a, false);
                    }
                    if let Some(mut local) = self.nodes[n].local[p].take() {
                        local.done.forget();
                    }
                }
            }
        }
        // As the ownership actor does after every step of a lease.
        let until = self.nodes[n].leases[p].fetch_until();
        self.nodes[n].gates[p].set(until);
        Ok(())
    }

    /// After the faults, everything settled: each partition held by the
    /// node gossip names, and every link batch acknowledged.
    fn check_settled(&self) -> Result<(), String> {
        let live = |b| self.reachable(0, b, self.now);
        let assignment = self.assignment_among(live, Duration::ZERO);
        // A node's backoff after failed takes (up to a minute after
        // repeated ones, `lease::TAKE_RETRY_MAX`) may end only just before
        // the end: a partition whose owner it changed within the last
        // `SETTLE` may still be on its way; it is checked for overlap only.
        let before = self.assignment_among(live, SETTLE);
        let node_of = |a: &Assignment, p: usize| -> usize {
            a.owner(p as u16).expect("a node is up")[1..]
                .parse()
                .expect("a node id")
        };
        for p in 0..PARTITIONS {
            let owner = node_of(&assignment, p);
            let moving = owner != node_of(&before, p);
            let lease = &self.nodes[owner].leases[p];
            let fresh = lease
                .fetch_until()
                .is_some_and(|until| self.clock_of(owner) < until);
            if !moving && (!fresh || self.nodes[owner].local[p].is_none()) {
                return Err(format!(
                    "p{p}: n{owner} should hold it at the end but is {:?}",
                    lease.snapshot()
                ));
            }
            let holders: Vec<usize> = (0..NODES)
                .filter(|&n| self.nodes[n].local[p].is_some())
                .collect();
            if holders.len() > 1 || (!moving && holders != [owner]) {
                return Err(format!(
                    "p{p}: held by {holders:?} at the end, not n{owner} alone"
                ));
            }
            // Liveness: every page queued is fetched, and every host of
            // a settled partition has gone idle.
            let Some(local) = self.nodes[owner].local[p].as_ref().filter(|_| !moving) else {
                continue;
            };
            for host in 0..HOSTS_PER_PARTITION {
                let left = local.state.left(host);
                if !left.is_empty() {
                    return Err(format!("p{p} h{host}: pages {left:?} never fetched"));
                }
                if !local.idle[host] {
                    return Err(format!("p{p} h{host}: not idle at the end"));
                }
            }
        }
        for (n, node) in self.nodes.iter().enumerate() {
            if let Some((batch, b)) = node.outbox.iter().next() {
                return Err(format!(
                    "n{n}: batch {batch} for p{} never acknowledged",
                    b.p
                ));
            }
        }
        Ok(())
    }
}

/// A connection's key: the pair, smaller first.
fn pair(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

fn seeds() -> std::ops::Range<u64> {
    if let Some(one) = std::env::var("TRAWL_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return one..one + 1;
    }
    let n = std::env::var("TRAWL_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    0..n
}

/// What one seed's run counted, and how it ended.
#[derive(Default)]
struct Tally {
    failures: Vec<String>,
    steps: u64,
    manifests: usize,
    refetches: u64,
    connections: u64,
    links: usize,
}

impl Tally {
    fn add(&mut self, seed: u64, trace: bool) {
        let mut sim = Sim::new(seed, trace);
        if let Err(e) = sim.run() {
            self.failures.push(format!("seed {seed}: {e}"));
        }
        self.steps += sim.steps;
        self.manifests += sim.chains.iter().map(BTreeMap::len).sum::<usize>();
        self.refetches += sim.refetches;
        self.connections += sim.next_conn;
        self.links += sim.acked_links.iter().map(BTreeSet::len).sum::<usize>();
    }

    fn merge(&mut self, other: Tally) {
        self.failures.extend(other.failures);
        self.steps += other.steps;
        self.manifests += other.manifests;
        self.refetches += other.refetches;
        self.connections += other.connections;
        self.links += other.links;
    }
}

#[test]
fn ownership_holds_its_invariants_under_crashes_pauses_cuts_and_a_lossy_network() {
    let trace = std::env::var("TRAWL_SIM_SEED").is_ok();
    // Seeds are independent: one thread per core, each taking every
    // `threads`-th seed (a seed's run is the same on any thread).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let seeds = seeds();
    let mut total = Tally::default();
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..threads)
            .map(|t| {
                let seeds = seeds.clone();
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    for seed in seeds.filter(|s| s % threads == t) {
                        tally.add(seed, trace);
                    }
                    tally
                })
            })
            .collect();
        for run in runs {
            total.merge(run.join().expect("a simulation thread"));
        }
    });
    let Tally {
        mut failures,
        steps,
        manifests,
        refetches,
        connections,
        links,
    } = total;
    failures.sort();
    println!(
        "{steps} steps, {manifests} manifests, {refetches} pages fetched again, \
         {connections} connections, {links} links acknowledged"
    );
    assert!(
        failures.is_empty(),
        "{} seeds failed (replay one with TRAWL_SIM_SEED=N):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The first seed of `seeds` on which the simulator catches `mutation`,
/// with what it said: seeds are tried on every core, each thread stopping
/// past the first failure found so far (so the answer is the first failing
/// seed, whatever the threads' timing).
fn caught(mutation: Mutation, seeds: std::ops::Range<u64>) -> Option<(u64, String)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let first = AtomicU64::new(u64::MAX);
    let found = std::sync::Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (seeds, first, found) = (seeds.clone(), &first, &found);
            scope.spawn(move || {
                for seed in seeds.filter(|s| s % threads == t) {
                    if seed > first.load(Ordering::Relaxed) {
                        break;
                    }
                    let mut sim = Sim::mutated(seed, false, mutation);
                    if let Err(e) = sim.run() {
                        first.fetch_min(seed, Ordering::Relaxed);
                        found.lock().expect("not poisoned").insert(seed, e);
                        break;
                    }
                }
            });
        }
    });
    let found = found.into_inner().expect("not poisoned");
    found.into_iter().next()
}

/// Seeds within which each broken rule must be caught.
const MUTATION_SEEDS: u64 = 10_000;

/// Each invariant can fail: a rule of the code broken on purpose is
/// caught, by the invariant it breaks, within [`MUTATION_SEEDS`] (most
/// within a few hundred).
#[test]
fn the_simulator_catches_each_broken_rule_by_its_invariant() {
    let cases = [
        (Mutation::OverwritingStore, "published by"),
        (Mutation::AckOnAdmit, "acknowledged link"),
        (Mutation::RestartCountsFromZero, "acknowledged link"),
        (Mutation::FloorIgnoresCheckpoints, "acknowledged link"),
        (Mutation::IgnoreHold, "during the partition's hold"),
        (Mutation::ForgetAbandoned, "starts a request while"),
        (Mutation::FrozenClock, "starts a request while"),
        (Mutation::FloorOwed, "starts a request while"),
        (Mutation::NoGateHold, "during the partition's hold"),
        (Mutation::DropRefused, "never acknowledged"),
        (Mutation::StuckAfterRestart, "never fetched"),
    ];
    let mut missed = Vec::new();
    for (mutation, invariant) in cases {
        match caught(mutation, 0..MUTATION_SEEDS) {
            Some((seed, e)) if e.contains(invariant) => {
                println!("{mutation:?}: caught on seed {seed}: {e}")
            }
            Some((seed, e)) => missed.push(format!(
                "{mutation:?}: seed {seed} failed, but not on {invariant:?}: {e}"
            )),
            None => missed.push(format!(
                "{mutation:?}: not caught in {MUTATION_SEEDS} seeds"
            )),
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

//! Who *does* own a partition: the lease over its checkpoint chain, as a
//! state machine with no I/O.
//!
//! Gossip (chitchat, rendezvous hashing) says which node *should* own a
//! partition; [`PartitionLease`] turns that wish into ownership through the
//! partition's chain of create-only manifests ([`super::manifest`]) and
//! keeps the one rule trawl promises every site: a paused, cut-off or
//! half-dead old owner and a new one never have requests to one host in
//! flight together, whatever gossip believes and whatever the clocks say.
//!
//! The machine does no I/O and reads no clock: its driver (the node's
//! actors, or the simulator in `tests/it/simulation.rs`) feeds it events with
//! `now` and carries out the [`Effect`]s it asks for (read the chain's
//! head, take a checkpoint, create a manifest, pause or stop the
//! partition's hosts), the shape of `quinn_proto::Connection`.
//!
//! # The protocol
//!
//! - **Claim.** A node that should own a partition reads the chain's head
//!   (manifest `n`). It creates manifest `n + 1` with itself as owner and
//!   `n + 1` as its epoch, when the head is a clean hand-back
//!   (`released`), was written by an earlier process of this node (which
//!   is dead: node ids are unique), or has stayed `n` for a whole `lease`
//!   of its own monotonic clock (its owner stopped renewing, so it
//!   stopped fetching). The create is create-only: of two claimants, one
//!   wins; the other reads the head again.
//! - **Lease.** An owner publishes a manifest every `checkpoint_every`
//!   (a checkpoint, or a renewal that names the last checkpoint's files
//!   again when none could be made). Its lease runs `lease` from the
//!   moment it *sent* its last manifest that the store accepted: the store
//!   created it no earlier than that. An owner that has not published for
//!   a lease (less [`LeaseSettings::margin`], the time its driver may take
//!   to carry the stop to its hosts) stops the partition by itself
//!   ([`StopReason::Lapsed`]) and claims it again like any other node: a
//!   store it cannot reach for a whole lease is not a hiccup.
//! - **Fence.** An owner whose create finds the number taken by another
//!   owner has been replaced: it stops the partition at once
//!   ([`Effect::Stop`]) and forgets what it had not published.
//! - **Hold.** A new owner contacts none of the partition's hosts before
//!   `lease + request_timeout` after the moment it first saw the head it
//!   claimed over (that head was created after its owner's last accepted
//!   send, so that owner stopped dispatching within `lease` of that moment
//!   and its last request ended within `request_timeout` more). Over a
//!   clean hand-back, which drained its hosts first, the new owner holds
//!   what the released manifest says is still owed (`hold_ms`, from its own
//!   acknowledged claim, a later moment than the release was sent). So
//!   the hold is written in the chain, and no hand-back forgets it.
//! - **Durable.** What the owner wrote counts as durable only once a
//!   published manifest covers it ([`Effect::Durable`]); [`Watermarks`]
//!   keeps the acknowledgements (of link batches, say) until then.
//!
//! Safety rests on the create-only chain and on each node's monotonic
//! clock (the boot-time clock, which counts a suspended VM's sleep:
//! `crate::clock::SystemClock`) running at about the real rate (drift of
//! parts per million over a lease of seconds); it never rests on gossip, on wall clocks agreeing, or
//! on messages arriving.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::link::Backoff;
use super::manifest::{Manifest, Owner};

/// After a first partition this node claimed but could not open, gossip's
/// advice to take it is ignored here for this long; the wait doubles with
/// each failure in a row, up to [`TAKE_RETRY_MAX`].
pub const TAKE_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait after failed takes.
pub const TAKE_RETRY_MAX: Duration = Duration::from_secs(60);
/// A hurried checkpoint ([`PartitionLease::hurry`]) comes no sooner than
/// this fraction of `checkpoint_interval` after the last publication.
pub const HURRY_GAP: f64 = 0.1;

/// The protocol's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSettings {
    /// How long an owner may fetch after its last accepted publish was
    /// sent; also how long a claimant watches an unchanged head before
    /// claiming over it.
    pub lease: Duration,
    /// How often an owner publishes (a checkpoint, or a renewal); must be
    /// well under `lease`, so that a slow store costs retries, not the
    /// lease.
    pub checkpoint_every: Duration,
    /// The longest a request may take (`fetch.timeout`): how long a new
    /// owner must assume an old one's last request may still run.
    pub request_timeout: Duration,
    /// How soon a failed read or publish is tried again.
    pub retry: Duration,
}

impl LeaseSettings {
    /// How long before its lease runs out an owner stops by itself: the
    /// stop reaches the hosts through a mailbox or two, and a host must
    /// not start a request after the lease. An eighth of the lease.
    pub fn margin(&self) -> Duration {
        self.lease / 8
    }

    /// How often an owner whose partition saw no write publishes: a
    /// renewal is all it needs, and only for the lease, so half a lease
    /// (the checkpoint interval if longer). Fewer manifests from idle
    /// partitions; a write there waits at most this long to be durable
    /// (less when the node hurries it, having nothing else to do).
    pub fn idle_every(&self) -> Duration {
        (self.lease / 2).max(self.checkpoint_every)
    }

    /// The last instant an owner whose lease runs from `from` may start
    /// a request.
    fn deadline(&self, from: Instant) -> Instant {
        from + self.lease - self.margin()
    }
}

impl LeaseSettings {
    /// The timing of a node running `config`: `[cluster] lease` and
    /// `checkpoint_interval`, `[fetch] timeout`, retries at a quarter of
    /// the checkpoint interval (100 ms at least).
    pub fn of(config: &crate::config::Config) -> Self {
        let every = config.cluster.checkpoint_interval;
        LeaseSettings {
            lease: config.cluster.lease,
            checkpoint_every: every,
            request_timeout: config.fetch.timeout,
            retry: (every / 4).max(Duration::from_millis(100)),
        }
    }

    /// Checks the settings' relations.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease.is_zero() || self.checkpoint_every.is_zero() || self.retry.is_zero() {
            return Err("lease, checkpoint interval and retry must be above zero".into());
        }
        if self.checkpoint_every * 2 > self.lease {
            return Err(format!(
                "checkpoint_interval ({:?}) must be at most half the lease ({:?}): an owner \
                 needs a second try before its lease runs out",
                self.checkpoint_every, self.lease
            ));
        }
        Ok(())
    }
}

/// What the machine reads of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadView {
    /// Its number.
    pub number: u64,
    /// Who wrote it.
    pub owner: Owner,
    /// A clean hand-back.
    pub released: bool,
    /// What a next owner must still hold after a hand-back (ms).
    pub hold_ms: u64,
    /// The admission watermark it covers.
    pub covers: u64,
}

impl From<&Manifest> for HeadView {
    fn from(m: &Manifest) -> Self {
        HeadView {
            number: m.number,
            owner: m.owner.clone(),
            released: m.released,
            hold_ms: m.hold_ms,
            covers: m.covers,
        }
    }
}

/// Why a manifest is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftKind {
    /// Claims the partition: names the files of the head it claims over.
    Claim,
    /// A new checkpoint's files.
    Checkpoint,
    /// The last published files again: keeps the lease when no checkpoint
    /// could be made.
    Renewal,
    /// The final checkpoint of a clean hand-back.
    Release,
}

impl DraftKind {
    /// Its name (a metric label).
    pub fn label(self) -> &'static str {
        match self {
            DraftKind::Claim => "claim",
            DraftKind::Checkpoint => "checkpoint",
            DraftKind::Renewal => "renewal",
            DraftKind::Release => "release",
        }
    }
}

/// A manifest to create: everything but its files, which the driver adds
/// (a new checkpoint's for [`DraftKind::Checkpoint`] and
/// [`DraftKind::Release`] after a ready checkpoint, the last published
/// manifest's otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// The number to create.
    pub number: u64,
    /// Its owner (the epoch included).
    pub owner: Owner,
    /// Why.
    pub kind: DraftKind,
    /// Whether the driver's new checkpoint is in it (else the last
    /// published files).
    pub new_checkpoint: bool,
    /// A clean hand-back.
    pub released: bool,
    /// What the next owner must still hold (ms); 0 unless released.
    pub hold_ms: u64,
    /// The admission watermark it covers.
    pub covers: u64,
}

/// What became of a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The store created it.
    Created,
    /// The number exists, written by `by` (the writer if the driver could
    /// read it, `None` if not).
    Taken { by: Option<Owner> },
    /// The store could not be reached, or refused for another reason: the
    /// create may or may not have happened.
    Failed,
}

/// Why an owner stopped a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Another owner created the next manifest.
    Fenced,
    /// The clean hand-back was published.
    Released,
    /// No publish was accepted for a lease.
    Lapsed,
}

impl StopReason {
    /// Its name (a metric label).
    pub fn label(&self) -> &'static str {
        match self {
            StopReason::Fenced => "fenced",
            StopReason::Released => "released",
            StopReason::Lapsed => "lapsed",
        }
    }
}

/// What the driver is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Read the chain's head and report it ([`PartitionLease::on_head`]).
    ReadHead,
    /// The partition is this node's from now on: restore it from `from`
    /// (nothing to restore if `None`) and start it with every host held
    /// until `hold_until`.
    Take {
        /// The new owner (its epoch).
        owner: Owner,
        /// The manifest to restore.
        from: Option<HeadView>,
        /// No request to any host of the partition before this.
        hold_until: Instant,
    },
    /// Take a checkpoint for manifest `number` and report it
    /// ([`PartitionLease::on_checkpoint`]).
    Checkpoint {
        /// The manifest it is for.
        number: u64,
    },
    /// Create this manifest and report what came of it
    /// ([`PartitionLease::on_published`]).
    Publish(Draft),
    /// Everything written up to `covers` is durable: acknowledge it.
    Durable {
        /// The admission watermark a published manifest covers.
        covers: u64,
    },
    /// Hand the partition back: stop dispatching, let requests in flight
    /// finish, and report it ([`PartitionLease::on_drained`]).
    Drain,
    /// Stop the partition now and drop what was not published.
    Stop {
        /// Why.
        reason: StopReason,
    },
    /// This node gave the partition up: no checkpoint could be made for a
    /// whole lease (a full disk, uploads failing). It is handed back (a
    /// [`Effect::Drain`] follows) and not taken here again for `wait`;
    /// the driver says so, and publishes the partition among those it
    /// shuns so gossip assigns it elsewhere.
    GaveUp {
        /// How long advice to take it again is ignored.
        wait: Duration,
    },
}

/// How a claim's hold is fixed once the claim is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HoldRule {
    /// Nothing to hold: no owner ever published.
    None,
    /// Until this instant.
    Until(Instant),
    /// This long after the acknowledgement (a released head's `hold_ms`).
    AfterAck(Duration),
}

/// A publish in progress.
#[derive(Debug, Clone)]
struct InFlight {
    draft: Draft,
    /// When the first attempt was sent: the lease counts from it (the
    /// store created the manifest no earlier, whichever attempt did).
    first_sent: Instant,
    /// `Some(t)`: the last attempt failed; send again at `t`.
    retry_at: Option<Instant>,
}

/// What an owner does besides fetching.
#[derive(Debug, Clone)]
enum Step {
    /// Nothing: the next checkpoint is due at `Held::next_checkpoint`.
    Waiting,
    /// A checkpoint for manifest `number` is being made; `after_drain`:
    /// begun once the hosts were drained (so it holds every hold they
    /// saved, and can be the hand-back's own).
    Checkpointing { number: u64, after_drain: bool },
    /// A manifest is being created.
    Publishing(InFlight),
}

/// The state of an owner.
#[derive(Debug, Clone)]
struct Held {
    owner: Owner,
    /// The last manifest published (ours).
    number: u64,
    /// The lease runs until `lease_from + lease`.
    lease_from: Instant,
    /// No request before this.
    hold_until: Instant,
    next_checkpoint: Instant,
    step: Step,
    /// Handing back: `Drain` sent.
    releasing: bool,
    /// The hosts are drained; the longest delay they still owe.
    drained: Option<Duration>,
    /// The watermark the last published manifest covers.
    covers: u64,
    /// Since when every checkpoint asked for failed (none ready since).
    failing_since: Option<Instant>,
    /// The last checkpoint asked for found nothing new: the next one is
    /// due after [`LeaseSettings::idle_every`].
    idle: bool,
}

/// The state of a node that wants the partition and does not hold it.
#[derive(Debug, Clone)]
struct Observing {
    /// The head last read, and when it was first seen.
    seen: Option<(HeadView, Instant)>,
    /// A read is in flight.
    reading: bool,
    /// When to read again.
    next_read: Option<Instant>,
    /// A claim whose answer was lost: its number and when it was sent,
    /// and its hold, so a head showing it created is adopted.
    lost_claim: Option<(u64, Instant, HoldRule, Option<HeadView>)>,
}

#[derive(Debug, Clone)]
enum Phase {
    /// Neither held nor wanted.
    Idle,
    /// Wanted: watching the chain's head until it may be claimed.
    Observing(Observing),
    /// A claim is being created.
    Claiming {
        inflight: InFlight,
        hold: HoldRule,
        from: Option<HeadView>,
    },
    /// This node owns the partition.
    Held(Box<Held>),
}

/// One partition's ownership, as seen by one node's process.
#[derive(Debug, Clone)]
pub struct PartitionLease {
    node: String,
    incarnation: u64,
    settings: LeaseSettings,
    /// Gossip's advice: this node should own the partition.
    wanted: bool,
    /// After a take that could not be opened here, advice to take the
    /// partition is ignored until then ([`PartitionLease::on_open_failed`]).
    shunned_until: Option<Instant>,
    /// The wait after the next take that fails.
    take_backoff: Backoff,
    /// The wait after the next time checkpoints fail for a lease: from a
    /// lease, doubling; only a checkpoint made here starts it over (a take
    /// that opens does not: the disk that filled is still full).
    give_up_backoff: Backoff,
    /// The first checkpoint after a take comes this much before a whole
    /// interval: see [`PartitionLease::staggered`].
    stagger: Duration,
    /// The newest manifest number this machine knows to exist (heads it
    /// read, manifests it created or found taken). The chain only grows,
    /// so a head read older than this is a stale answer (a read that
    /// travelled slowly): acted on, it would claim over a chain that has
    /// moved on, and the store's "taken by you" answer about this
    /// process's own earlier manifest of that number would read as the
    /// claim's success (the simulator's seed 22080). Older heads for a
    /// whole lease mean the store itself went back (wiped, restored from
    /// a backup): they are believed then, with an error in the log.
    newest: u64,
    /// Since when every head read was older than [`Self::newest`].
    stale_since: Option<Instant>,
    phase: Phase,
    effects: VecDeque<Effect>,
}

/// A serialisable view of the machine (admin API, logs, tests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseSnapshot {
    /// `idle`, `observing`, `claiming`, `held` or `releasing`.
    pub phase: &'static str,
    /// Gossip says this node should own it.
    pub wanted: bool,
    /// The epoch held, if held.
    pub epoch: Option<u64>,
    /// The last manifest number this node published or read.
    pub number: Option<u64>,
    /// The watermark the last published manifest covers, if held.
    pub covers: Option<u64>,
}

impl PartitionLease {
    /// A machine for a node's process (`incarnation`: a random id of the
    /// process, new at every start).
    pub fn new(node: &str, incarnation: u64, settings: LeaseSettings) -> Self {
        PartitionLease {
            node: node.to_owned(),
            incarnation,
            settings,
            wanted: false,
            shunned_until: None,
            take_backoff: Backoff::new(TAKE_RETRY_FIRST, TAKE_RETRY_MAX),
            give_up_backoff: Backoff::new(settings.lease, TAKE_RETRY_MAX.max(settings.lease)),
            stagger: Duration::ZERO,
            newest: 0,
            stale_since: None,
            phase: Phase::Idle,
            effects: VecDeque::new(),
        }
    }

    /// The machine of partition `slot` of `of` on one node: its first
    /// checkpoint after a take comes between half an interval and a whole
    /// one after it, spread by `slot`. A node takes many partitions at
    /// once (at its start, or a dead peer's); checkpointed in step, each
    /// round would flush and upload all of them in one burst, a stall of
    /// the crawl every `checkpoint_interval`. Spread once, they stay
    /// spread: each next checkpoint counts from its own last publication.
    pub fn staggered(mut self, slot: u16, of: u16) -> Self {
        let of = u32::from(of.max(1));
        self.stagger = self.settings.checkpoint_every * (u32::from(slot) % of) / (2 * of);
        self
    }

    /// The next effect to carry out.
    pub fn poll(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When [`PartitionLease::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Idle => None,
            Phase::Observing(o) => o.next_read,
            Phase::Claiming { inflight, .. } => inflight.retry_at,
            Phase::Held(h) => {
                let lapse = Some(self.settings.deadline(h.lease_from));
                let step = match &h.step {
                    Step::Waiting if !h.releasing => Some(h.next_checkpoint),
                    Step::Publishing(f) => f.retry_at,
                    _ => None,
                };
                [lapse, step].into_iter().flatten().min()
            }
        }
    }

    /// Whether a request to one of the partition's hosts may start now.
    /// The driver asks before every dispatch: effects are carried out a
    /// little late, this answer is exact.
    pub fn may_fetch(&self, now: Instant) -> bool {
        match &self.phase {
            Phase::Held(h) => {
                !h.releasing && now < self.settings.deadline(h.lease_from) && now >= h.hold_until
            }
            _ => false,
        }
    }

    /// Until when the partition's requests may start, as far as the lease
    /// goes (`None`: not held, or being handed back). The hold of a new
    /// owner is the hosts' own ([`Effect::Take`]'s `hold_until`); this is
    /// the other end, shared with them through a
    /// [`crate::cluster::gate::LeaseGate`], so a request never starts
    /// after the lease ends, even before the stop reaches the hosts.
    pub fn fetch_until(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Held(h) if !h.releasing => Some(self.settings.deadline(h.lease_from)),
            _ => None,
        }
    }

    /// The machine's state.
    pub fn snapshot(&self) -> LeaseSnapshot {
        let (phase, epoch, number, covers) = match &self.phase {
            Phase::Idle => ("idle", None, None, None),
            Phase::Observing(o) => ("observing", None, o.seen.as_ref().map(|s| s.0.number), None),
            Phase::Claiming { inflight, .. } => {
                ("claiming", None, Some(inflight.draft.number), None)
            }
            Phase::Held(h) => {
                let phase = if h.releasing { "releasing" } else { "held" };
                (phase, Some(h.owner.epoch), Some(h.number), Some(h.covers))
            }
        };
        LeaseSnapshot {
            phase,
            wanted: self.wanted,
            epoch,
            number,
            covers,
        }
    }

    /// Gossip's advice changed (or is repeated): this node should (or
    /// should not) own the partition. Advice to take it is ignored while
    /// a failed take shuns it ([`PartitionLease::on_open_failed`]).
    pub fn want(&mut self, now: Instant, wanted: bool) {
        let wanted = wanted && self.shunned_until.is_none_or(|until| now >= until);
        self.wanted = wanted;
        match &mut self.phase {
            Phase::Idle if wanted => self.observe(now),
            Phase::Observing(_) if !wanted => self.phase = Phase::Idle,
            Phase::Held(h) if !wanted && !h.releasing => {
                h.releasing = true;
                self.effects.push_back(Effect::Drain);
            }
            _ => {}
        }
    }

    /// The partition taken ([`Effect::Take`]) is open here: the next
    /// failed take waits the shortest backoff again.
    pub fn on_opened(&mut self) {
        self.take_backoff.reset();
    }

    /// The partition taken could not be restored or opened here (a chain
    /// file missing or unreadable, the store down, a full disk). Held, it
    /// would be renewed and never crawled: it is handed back instead (a
    /// release naming the claimed files again, so nothing is lost), and
    /// advice to take it is ignored for a backoff that doubles with each
    /// failure in a row, so another node, or this one later, tries again.
    /// Returns that wait.
    pub fn on_open_failed(&mut self, now: Instant) -> Duration {
        self.step_aside(now)
    }

    /// The chain's head cannot be read by this build: a manifest of a
    /// newer layout (a newer trawl took the partition during a rolling
    /// upgrade) or one that does not parse. This node steps aside as
    /// after a failed take ([`PartitionLease::on_open_failed`]): it stops
    /// watching, ignores advice to take the partition for a backoff, and
    /// its driver publishes the shun, so gossip assigns the partition to
    /// a node that may read it rather than every node of an old build
    /// retrying it forever. Returns the wait.
    pub fn on_head_unreadable(&mut self, now: Instant) -> Duration {
        self.step_aside(now)
    }

    /// Whether advice to take the partition is ignored here now (a take
    /// failed, the head is unreadable, or checkpoints failed): published
    /// in gossip, so the assignment passes the partition to another node.
    pub fn shunned(&self, now: Instant) -> bool {
        self.shunned_until.is_some_and(|until| now < until)
    }

    /// Shuns the partition for the next failed take's backoff and lets
    /// it go; the wait.
    fn step_aside(&mut self, now: Instant) -> Duration {
        let wait = self.take_backoff.next_delay();
        self.shun(now, wait);
        wait
    }

    /// Ignores advice to take the partition for `wait`, and lets it go
    /// (a held one is drained and handed back).
    fn shun(&mut self, now: Instant, wait: Duration) {
        self.shunned_until = Some(now + wait);
        self.want(now, false);
    }

    /// Link batches admitted into the partition wait for a checkpoint to
    /// cover them, and the node has nothing left to fetch: checkpoint now
    /// rather than at the interval's end, so their senders may forget
    /// them and the crawl's end is seen (the batches' acknowledgements
    /// are all that keeps the cluster busy then). Not sooner than
    /// [`HURRY_GAP`] of an interval after the last publication: a node
    /// that keeps going idle checkpoints at most that much more often,
    /// and only while it has nothing else to do.
    pub fn hurry(&mut self, now: Instant) {
        let gap = self.settings.checkpoint_every.mul_f64(HURRY_GAP);
        if let Phase::Held(h) = &mut self.phase {
            if matches!(h.step, Step::Waiting) && !h.releasing {
                h.next_checkpoint = h.next_checkpoint.min(now.max(h.lease_from + gap));
                self.advance(now);
            }
        }
    }

    /// The chain's head was read (`Err(())`: the read failed).
    pub fn on_head(&mut self, now: Instant, head: Result<Option<HeadView>, ()>) {
        if !matches!(self.phase, Phase::Observing(_)) {
            return;
        }
        let head = match head {
            // Older than a manifest known to exist: read again.
            Ok(head) if self.stale(now, head.as_ref().map_or(0, |h| h.number)) => Err(()),
            other => other,
        };
        let Phase::Observing(o) = &mut self.phase else {
            return;
        };
        o.reading = false;
        let Ok(head) = head else {
            o.next_read = Some(now + self.settings.retry);
            return;
        };
        if let Some(h) = &head {
            self.newest = self.newest.max(h.number);
        }
        let lost_claim = o.lost_claim.clone();
        let seen = o.seen.clone();
        // Our own claim, whose answer was lost, did land: adopt it.
        if let (Some(h), Some((number, sent, hold, from))) = (&head, lost_claim) {
            if h.number == number && self.is_me(&h.owner) {
                self.become_owner(now, number, sent, hold, from);
                return;
            }
        }
        let Some(head) = head else {
            // A partition no owner ever published: nothing to hold.
            self.claim(now, 1, HoldRule::None, None);
            return;
        };
        let since = match seen {
            Some((seen, since)) if seen.number == head.number => since,
            _ => now,
        };
        let watched_out = now >= since + self.settings.lease;
        if head.released {
            let hold = HoldRule::AfterAck(Duration::from_millis(head.hold_ms));
            self.claim(now, head.number + 1, hold, Some(head));
        } else if head.owner.node == self.node || watched_out {
            // An earlier process of this node is dead; any other owner
            // has not renewed for a lease and so stopped dispatching
            // within a lease of `since`.
            let hold = HoldRule::Until(since + self.settings.lease + self.settings.request_timeout);
            self.claim(now, head.number + 1, hold, Some(head));
        } else if let Phase::Observing(o) = &mut self.phase {
            // Read again when the lease would have run out, and now and
            // then before, to see a clean hand-back early.
            let at = (since + self.settings.lease).min(now + self.settings.checkpoint_every);
            o.next_read = Some(at);
            o.seen = Some((head, since));
        }
    }

    /// Whether a head numbered `number` read at `now` is a stale answer
    /// (older than a manifest known to exist) to read again. After a
    /// lease of nothing but older heads the store went back: they are
    /// believed.
    fn stale(&mut self, now: Instant, number: u64) -> bool {
        if number >= self.newest {
            self.stale_since = None;
            return false;
        }
        let since = *self.stale_since.get_or_insert(now);
        if now < since + self.settings.lease {
            return true;
        }
        tracing::error!(
            head = number,
            newest = self.newest,
            "the state store's chain went back (wiped or restored?): believing its head"
        );
        self.newest = number;
        self.stale_since = None;
        false
    }

    /// The checkpoint asked for is ready (`Some(covers)`: the admission
    /// watermark it covers) or could not be made (`None`).
    pub fn on_checkpoint(&mut self, now: Instant, covers: Option<u64>) {
        self.checkpoint_ready(now, covers, false);
    }

    /// The checkpoint asked for was not made: nothing was written since
    /// the one the chain holds (`covers`: the watermark, unchanged). The
    /// lease is renewed with the chain's files, and the next checkpoint
    /// is due after [`LeaseSettings::idle_every`].
    pub fn on_checkpoint_unchanged(&mut self, now: Instant, covers: u64) {
        if let Phase::Held(h) = &mut self.phase {
            h.covers = h.covers.max(covers);
        }
        self.checkpoint_ready(now, None, true);
    }

    fn checkpoint_ready(&mut self, now: Instant, covers: Option<u64>, unchanged: bool) {
        let Phase::Held(h) = &mut self.phase else {
            return;
        };
        let Step::Checkpointing {
            number,
            after_drain,
        } = h.step
        else {
            return;
        };
        h.idle = unchanged;
        if covers.is_some() || unchanged {
            h.failing_since = None;
            self.give_up_backoff.reset();
        } else if !h.releasing {
            let since = *h.failing_since.get_or_insert(now);
            if now >= since + self.settings.lease {
                // Renewals would keep the lease forever while nothing new
                // becomes durable: hand the partition to a node that can
                // checkpoint it.
                h.step = Step::Waiting;
                let wait = self.give_up_backoff.next_delay();
                self.effects.push_back(Effect::GaveUp { wait });
                self.shun(now, wait);
                return;
            }
        }
        let released = h.releasing && h.drained.is_some();
        let kind = match (released, covers.is_some()) {
            (true, _) => DraftKind::Release,
            (false, true) => DraftKind::Checkpoint,
            (false, false) => DraftKind::Renewal,
        };
        let hold_ms = match (released, h.drained) {
            (true, Some(owed)) => {
                let held = h.hold_until.saturating_duration_since(now);
                // Without a new checkpoint the release names older files:
                // the holds the drain saved (the deadlines of requests
                // given up on since) are not in them, so the next owner
                // holds for any request of this life still at a server.
                // So with a checkpoint begun before the drain ended (it
                // was under way when the drain finished): a request sent
                // after it began, given up on and still at its server, is
                // not in it (the simulator's seed 35069).
                let unsaved = match covers.is_some() && after_drain {
                    true => Duration::ZERO,
                    false => self.settings.request_timeout + owed,
                };
                held.max(owed).max(unsaved).as_millis() as u64
            }
            _ => 0,
        };
        let draft = Draft {
            number,
            owner: h.owner.clone(),
            kind,
            new_checkpoint: covers.is_some(),
            released,
            hold_ms,
            covers: covers.unwrap_or(h.covers).max(h.covers),
        };
        h.step = Step::Publishing(InFlight {
            draft: draft.clone(),
            first_sent: now,
            retry_at: None,
        });
        self.effects.push_back(Effect::Publish(draft));
    }

    /// The partition's hosts are drained; they still owe `owed` (the
    /// longest delay before any of them may be contacted again).
    pub fn on_drained(&mut self, now: Instant, owed: Duration) {
        if let Phase::Held(h) = &mut self.phase {
            if h.releasing {
                h.drained = Some(owed);
                self.advance(now);
            }
        }
    }

    /// What became of the create of manifest `number`.
    pub fn on_published(&mut self, now: Instant, number: u64, outcome: Published) {
        if matches!(outcome, Published::Created | Published::Taken { .. }) {
            self.newest = self.newest.max(number);
        }
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Claiming {
                mut inflight,
                hold,
                from,
            } if inflight.draft.number == number => match self.created(&outcome, &inflight.draft) {
                Some(true) => self.become_owner(now, number, inflight.first_sent, hold, from),
                Some(false) => self.observe(now),
                None => {
                    // Unknown: read the head; if it shows our claim, adopt it.
                    inflight.retry_at = None;
                    self.observe(now);
                    if let Phase::Observing(o) = &mut self.phase {
                        o.lost_claim = Some((number, inflight.first_sent, hold, from));
                    }
                }
            },
            Phase::Held(mut h) => {
                let Step::Publishing(inflight) = &mut h.step else {
                    self.phase = Phase::Held(h);
                    return;
                };
                if inflight.draft.number != number {
                    self.phase = Phase::Held(h);
                    return;
                }
                match self.created(&outcome, &inflight.draft) {
                    Some(true) => {
                        let draft = inflight.draft.clone();
                        let sent = inflight.first_sent;
                        self.phase = Phase::Held(h);
                        self.published(now, draft, sent);
                    }
                    Some(false) => {
                        self.effects.push_back(Effect::Stop {
                            reason: StopReason::Fenced,
                        });
                        self.after_stop(now);
                    }
                    None => {
                        inflight.retry_at = Some(now + self.settings.retry);
                        self.phase = Phase::Held(h);
                    }
                }
            }
            other => self.phase = other,
        }
    }

    /// Time passed: stop at the lease's end, start a checkpoint, retry a
    /// publish or a read, as due.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.phase {
            Phase::Observing(o) => {
                if !o.reading && o.next_read.is_some_and(|t| now >= t) {
                    o.reading = true;
                    o.next_read = None;
                    self.effects.push_back(Effect::ReadHead);
                }
            }
            Phase::Claiming { inflight, .. } => {
                if inflight.retry_at.is_some_and(|t| now >= t) {
                    inflight.retry_at = None;
                    self.effects
                        .push_back(Effect::Publish(inflight.draft.clone()));
                }
            }
            Phase::Held(_) => {
                if !self.check_lapse(now) {
                    self.advance(now);
                }
            }
            Phase::Idle => {}
        }
    }

    /// Whether `owner` is this process.
    fn is_me(&self, owner: &Owner) -> bool {
        owner.node == self.node && owner.incarnation == self.incarnation
    }

    /// `Some(true)`: the draft is in the chain; `Some(false)`: another
    /// owner has the number; `None`: unknown.
    fn created(&self, outcome: &Published, draft: &Draft) -> Option<bool> {
        match outcome {
            Published::Created => Some(true),
            // An earlier attempt of ours landed and its answer was lost.
            Published::Taken { by: Some(by) } => {
                Some(self.is_me(by) && by.epoch == draft.owner.epoch)
            }
            Published::Taken { by: None } => Some(false),
            Published::Failed => None,
        }
    }

    fn observe(&mut self, _now: Instant) {
        self.phase = Phase::Observing(Observing {
            seen: None,
            reading: true,
            next_read: None,
            lost_claim: None,
        });
        self.effects.push_back(Effect::ReadHead);
    }

    fn claim(&mut self, now: Instant, number: u64, hold: HoldRule, from: Option<HeadView>) {
        let draft = Draft {
            number,
            owner: Owner {
                node: self.node.clone(),
                incarnation: self.incarnation,
                epoch: number,
            },
            kind: DraftKind::Claim,
            new_checkpoint: false,
            released: false,
            hold_ms: 0,
            covers: from.as_ref().map_or(0, |h| h.covers),
        };
        self.effects.push_back(Effect::Publish(draft.clone()));
        self.phase = Phase::Claiming {
            inflight: InFlight {
                draft,
                first_sent: now,
                retry_at: None,
            },
            hold,
            from,
        };
    }

    fn become_owner(
        &mut self,
        now: Instant,
        number: u64,
        sent: Instant,
        hold: HoldRule,
        from: Option<HeadView>,
    ) {
        let hold_until = match hold {
            HoldRule::None => now,
            HoldRule::Until(t) => t,
            HoldRule::AfterAck(d) => now + d,
        };
        let owner = Owner {
            node: self.node.clone(),
            incarnation: self.incarnation,
            epoch: number,
        };
        let covers = from.as_ref().map_or(0, |h| h.covers);
        self.effects.push_back(Effect::Take {
            owner: owner.clone(),
            from,
            hold_until,
        });
        self.phase = Phase::Held(Box::new(Held {
            owner,
            number,
            lease_from: sent,
            hold_until,
            next_checkpoint: sent + self.settings.checkpoint_every - self.stagger,
            step: Step::Waiting,
            releasing: false,
            drained: None,
            covers,
            failing_since: None,
            idle: false,
        }));
        if !self.wanted {
            self.want(now, false);
        }
        if !self.check_lapse(now) {
            self.advance(now);
        }
    }

    /// Our manifest is in the chain.
    fn published(&mut self, now: Instant, draft: Draft, sent: Instant) {
        let Phase::Held(h) = &mut self.phase else {
            return;
        };
        h.number = draft.number;
        h.lease_from = sent;
        h.covers = draft.covers;
        h.step = Step::Waiting;
        let every = match h.idle {
            true => self.settings.idle_every(),
            false => self.settings.checkpoint_every,
        };
        h.next_checkpoint = sent + every;
        self.effects.push_back(Effect::Durable {
            covers: draft.covers,
        });
        if draft.released {
            self.effects.push_back(Effect::Stop {
                reason: StopReason::Released,
            });
            self.after_stop(now);
            return;
        }
        if !self.check_lapse(now) {
            self.advance(now);
        }
    }

    /// The partition stopped here: watch the chain again if still wanted.
    fn after_stop(&mut self, now: Instant) {
        if self.wanted {
            self.observe(now);
        } else {
            self.phase = Phase::Idle;
        }
    }

    /// Stops the partition if the lease ran out; whether it did.
    fn check_lapse(&mut self, now: Instant) -> bool {
        let Phase::Held(h) = &self.phase else {
            return false;
        };
        if now < self.settings.deadline(h.lease_from) {
            return false;
        }
        self.effects.push_back(Effect::Stop {
            reason: StopReason::Lapsed,
        });
        self.after_stop(now);
        true
    }

    /// Starts what is due of an owner's work: the next checkpoint, the
    /// hand-back's final one, a publish to retry.
    fn advance(&mut self, now: Instant) {
        let Phase::Held(h) = &mut self.phase else {
            return;
        };
        match &mut h.step {
            Step::Waiting => {
                let release = h.releasing && h.drained.is_some();
                if release || (!h.releasing && now >= h.next_checkpoint) {
                    let number = h.number + 1;
                    let after_drain = h.drained.is_some();
                    h.step = Step::Checkpointing {
                        number,
                        after_drain,
                    };
                    self.effects.push_back(Effect::Checkpoint { number });
                }
            }
            Step::Publishing(f) => {
                if f.retry_at.is_some_and(|t| now >= t) {
                    f.retry_at = None;
                    self.effects.push_back(Effect::Publish(f.draft.clone()));
                }
            }
            Step::Checkpointing { .. } => {}
        }
    }
}

/// Acknowledgements waiting for durability: what was admitted at a
/// sequence number is acknowledged once a published manifest covers it.
///
/// The receiver of a link batch admits it at once (its links crawl at
/// once) but tells the sender to delete the batch from its outbox only
/// when a manifest covering the admission is in the chain: an owner lost
/// before that loses nothing, since the sender still has the batch.
#[derive(Debug, Clone)]
pub struct Watermarks<T> {
    /// (admitted at, token), in admission order.
    pending: VecDeque<(u64, T)>,
    /// The highest watermark published.
    durable: u64,
}

impl<T> Default for Watermarks<T> {
    fn default() -> Self {
        Watermarks {
            pending: VecDeque::new(),
            durable: 0,
        }
    }
}

impl<T> Watermarks<T> {
    /// `token` was admitted at `seq` (sequence numbers only grow).
    /// Returns it at once if `seq` is already durable.
    pub fn admitted(&mut self, seq: u64, token: T) -> Option<T> {
        if seq <= self.durable {
            return Some(token);
        }
        self.pending.push_back((seq, token));
        None
    }

    /// A manifest covering `covers` is published: the tokens now durable.
    pub fn durable(&mut self, covers: u64) -> Vec<T> {
        self.durable = self.durable.max(covers);
        let mut out = Vec::new();
        while self
            .pending
            .front()
            .is_some_and(|(s, _)| *s <= self.durable)
        {
            out.push(self.pending.pop_front().expect("front exists").1);
        }
        out
    }

    /// The owner was fenced or stopped: nothing pending will be
    /// acknowledged. Returns the tokens, to be refused (dropped, or
    /// answered "not held"), so their senders send again.
    pub fn forget(&mut self) -> Vec<T> {
        self.pending.drain(..).map(|(_, token)| token).collect()
    }

    /// Tokens waiting.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// The highest write number seen: published, or admitted and waiting.
    pub fn highest(&self) -> u64 {
        self.pending
            .back()
            .map_or(self.durable, |(seq, _)| (*seq).max(self.durable))
    }
}

#[cfg(test)]
mod tests;

//! Which dormant hosts come due when: the partition's due index, and the
//! node-wide cap on live host actors.
//!
//! A host with queued work is either *active* (it has an actor, which
//! holds its politeness timer) or *dormant* in the [`DueIndex`], keyed by
//! the Unix millisecond from which it has something to do: 0 for a host
//! that just got work, its next-allowed time for a host passivated while
//! waiting out a long Crawl-delay, Retry-After, backoff or park. The
//! partition activates dormant hosts earliest-due first, while
//! [`ActiveSlots`] has room, so a million known hosts cost an index entry
//! each, not an actor each.
//!
//! **Memory bounded by a window, not by the known web.** With a
//! [`ColdTier`] (the partition's store: `store/due.rs`), the index keeps
//! in memory only a [`Window`]: the dormant hosts that come due first
//! (at most [`Window::hot`]) and those found due and waiting for a slot
//! (at most [`Window::ready`]); every other dormant host is in the tier,
//! ordered the same way, and is read back in batches as the window
//! empties. Seed 000's "the frontier must hold a long backlog per host on
//! disk", for hosts: a node that knows ten million hosts holds a few
//! thousand of them in memory. The price is a point read in the tier for
//! work arriving at a host that is not in the window, and a write for
//! each host that moves between memory and the tier.
//!
//! The index is rebuilt at open from the store (hosts with queued work,
//! and the due times persisted when hosts passivated), so it is as
//! durable as the queue itself; the tier holds no truth of its own and
//! starts empty.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::importance::{Cash, Rank};

/// How long being due is worth one doubling of importance: among hosts
/// that are due, one found due a second earlier goes first unless the
/// other's best URL holds more than twice its cash. So the most important
/// work goes first when slots are scarce, and nothing waits for ever (a
/// host's place is fixed when it is found due; later hosts must be ever
/// richer to pass it). A host is found due when the partition looks for
/// hosts to start ([`DueIndex::pop_due`]) at or after its due time: a
/// host given work long after the partition's hold (its due time, see
/// `activation.rs`) queues behind the hosts found before it.
pub const AGING_MS_PER_DOUBLING: u64 = 1_000;

/// What a dormant host carries besides its due time and rank: kept with
/// its entry (in memory or in the tier), so no set of host names beside
/// the index grows with the hosts a partition knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// Its due time is its next refresh, not a politeness wait: work
    /// arriving makes it due at once.
    pub refresh: bool,
    /// It owes its last delay at its next start (a request of an earlier
    /// life, or of an actor that died, may still be at its server).
    pub owes_delay: bool,
}

impl Marks {
    /// Both marks of `self` and `other`.
    pub fn with(self, other: Marks) -> Marks {
        Marks {
            refresh: self.refresh || other.refresh,
            owes_delay: self.owes_delay || other.owes_delay,
        }
    }

    /// As one byte (the tier's encoding).
    pub fn to_byte(self) -> u8 {
        u8::from(self.refresh) | u8::from(self.owes_delay) << 1
    }

    /// From [`Marks::to_byte`].
    pub fn from_byte(byte: u8) -> Marks {
        Marks {
            refresh: byte & 1 != 0,
            owes_delay: byte & 2 != 0,
        }
    }
}

/// A dormant host as the [`ColdTier`] keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColdEntry {
    /// When it comes due (Unix ms).
    pub due_ms: u64,
    /// The rank of its best queued URL, as last told.
    pub rank: Rank,
    /// Its marks.
    pub marks: Marks,
}

impl ColdEntry {
    /// Its place in the tier's order: by due time, then rank (most
    /// important first), then name; the order the window is cut in.
    pub fn order_key(&self) -> (u64, Rank) {
        (self.due_ms, self.rank)
    }
}

/// The tier could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the due index's store: {0}")]
pub struct ColdError(pub String);

/// Where the dormant hosts beyond the [`Window`] are kept, ordered by
/// (due time, rank, host name). It holds a host at most once; the index
/// only deletes what it put.
pub trait ColdTier: Send {
    /// `host`'s entry, if it is in the tier.
    fn get(&self, host: &str) -> Result<Option<ColdEntry>, ColdError>;
    /// Enters `hosts` in one write, each not in the tier (or in it at the
    /// same due time and rank: its marks are replaced). The index filled
    /// at open writes its dormant hosts in batches, not one by one.
    fn put_many(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError>;
    /// [`ColdTier::put_many`] of one host.
    fn put(&mut self, host: &str, entry: ColdEntry) -> Result<(), ColdError> {
        self.put_many(&[(host, entry)])
    }
    /// Takes out `hosts`, each in the tier at the entry given, at once.
    fn delete(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError>;
    /// The first `n` entries in order.
    fn first(&self, n: usize) -> Result<Vec<(String, ColdEntry)>, ColdError>;
    /// Every entry, in order.
    fn each(&self, f: &mut dyn FnMut(&str, ColdEntry)) -> Result<(), ColdError>;
}

/// Hosts a batch of [`DueIndex::load`] writes to the tier at once.
const LOAD_BATCH: usize = 4_096;

/// How many dormant hosts a partition's index keeps in memory when it has
/// a [`ColdTier`] (`[frontier] dormant_hosts_in_memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Hosts not yet found due: the ones due first.
    pub hot: usize,
    /// Hosts found due and not yet started: the partition looks no
    /// further while this many wait for a slot (further hosts are found
    /// due, in due-time and rank order, as these start).
    pub ready: usize,
}

impl Window {
    /// Nothing moves to a tier: every dormant host in memory.
    pub const UNBOUNDED: Window = Window {
        hot: usize::MAX,
        ready: usize::MAX,
    };

    /// `hosts` of each kind.
    pub fn of(hosts: usize) -> Window {
        Window {
            hot: hosts.max(2),
            ready: hosts.max(1),
        }
    }
}

/// Dormant hosts with work: by the time they come due, then, once due,
/// by their best queued URL's importance aged by how long they have been
/// due ([`AGING_MS_PER_DOUBLING`]).
pub struct DueIndex {
    /// Hosts not yet found due and in memory, by (due time, rank): every
    /// one of them before every host in the tier.
    waiting: BTreeSet<(u64, Rank, Arc<str>)>,
    /// Hosts found due, by [`Dormant::ready_key`].
    ready: BTreeSet<(u64, Arc<str>)>,
    /// The hosts in memory (`waiting` and `ready`); change it through
    /// [`DueIndex::hold`] and [`DueIndex::release`], which count marks.
    by_host: HashMap<Arc<str>, Dormant>,
    /// Hosts in memory marked [`Marks::refresh`].
    refresh_in_memory: usize,
    cold: Option<Cold>,
    window: Window,
}

/// The tier, how many hosts it holds, and how many moved there and back.
struct Cold {
    tier: Box<dyn ColdTier>,
    len: usize,
    /// Of them, marked [`Marks::refresh`].
    refresh: usize,
    moves: Moves,
}

/// Hosts moved between memory and the tier since the index was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moves {
    /// Into the tier.
    pub stored: u64,
    /// Read back into memory.
    pub loaded: u64,
}

impl std::fmt::Debug for DueIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueIndex")
            .field("in_memory", &self.by_host.len())
            .field("ready", &self.ready.len())
            .field("in_tier", &self.cold_len())
            .field("window", &self.window)
            .finish()
    }
}

impl Default for DueIndex {
    fn default() -> Self {
        DueIndex {
            waiting: BTreeSet::new(),
            ready: BTreeSet::new(),
            by_host: HashMap::new(),
            refresh_in_memory: 0,
            cold: None,
            window: Window::UNBOUNDED,
        }
    }
}

/// One dormant host.
#[derive(Debug, Clone, Copy)]
struct Dormant {
    due_ms: u64,
    /// The rank of its best queued URL, as last told.
    rank: Rank,
    /// When it was found due (in `ready`; else it is in `waiting`).
    found_ms: Option<u64>,
    marks: Marks,
}

impl Dormant {
    /// Its place among due hosts: the time it was found due in steps of
    /// [`AGING_MS_PER_DOUBLING`] / 128 (a rank step), plus its rank.
    fn ready_key(&self, found_ms: u64) -> u64 {
        let steps_per_doubling = u64::from(Rank::STEPS_PER_DOUBLING);
        found_ms.saturating_mul(steps_per_doubling) / AGING_MS_PER_DOUBLING
            + u64::from(self.rank.steps())
    }

    fn cold(&self) -> ColdEntry {
        ColdEntry {
            due_ms: self.due_ms,
            rank: self.rank,
            marks: self.marks,
        }
    }

    /// Waiting (not found due) with what the tier kept.
    fn from_cold(entry: ColdEntry) -> Dormant {
        Dormant {
            due_ms: entry.due_ms,
            rank: entry.rank,
            found_ms: None,
            marks: entry.marks,
        }
    }
}

/// Logs a failure of the tier: the index goes on with what it has in
/// memory (a write that failed keeps its host there), and the store
/// rebuilds the index at the partition's next open.
fn tier_failed(what: &str, err: &ColdError) {
    tracing::error!(%err, "{what}: the due index keeps the host where it was");
}

impl DueIndex {
    /// An empty index, all in memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty index keeping `window` in memory and the rest in `tier`,
    /// which must be empty (what it holds is not counted, and would come
    /// back as hosts the index never entered).
    pub fn with_tier(tier: Box<dyn ColdTier>, window: Window) -> Self {
        DueIndex {
            cold: Some(Cold {
                tier,
                len: 0,
                refresh: 0,
                moves: Moves::default(),
            }),
            window,
            ..Self::default()
        }
    }

    /// The rank of a host whose queue's importance is not known (read
    /// back at open, before it is told any).
    pub fn unknown_rank() -> Rank {
        Rank::of(Cash::UNKNOWN)
    }

    /// Enters `host` as due at `due_ms`, replacing an earlier entry (its
    /// rank and marks are kept).
    pub fn insert(&mut self, host: &str, due_ms: u64) {
        self.insert_marked(host, due_ms, Marks::default());
    }

    /// [`DueIndex::insert`], adding `marks` to those it had.
    pub fn insert_marked(&mut self, host: &str, due_ms: u64, marks: Marks) {
        match self.remove_entry(host) {
            Ok(old) => {
                let (rank, kept) = old
                    .map_or((Self::unknown_rank(), Marks::default()), |(d, _)| {
                        (d.rank, d.marks)
                    });
                let in_memory = self.enter(host, due_ms, rank, kept.with(marks));
                self.count_load(old.is_some_and(|(_, from_tier)| from_tier) && in_memory);
            }
            Err(err) => tier_failed("cannot move a dormant host", &err),
        }
    }

    /// Fills an empty index at open with `entries` (host, due time,
    /// marks; each host once, rank unknown): the [`Window::hot`] due first
    /// stay in memory, the others go to the tier in batches of
    /// [`LOAD_BATCH`]. Entered one by one, each was a store write of its
    /// own: ~62,000 a partition on resuming 1 M hosts over 16, seconds
    /// before the first fetch. An index that is not empty takes them one
    /// by one ([`DueIndex::insert_marked`]). A batch the tier refuses is
    /// kept in memory (logged), as a single host would be.
    pub fn load(&mut self, mut entries: Vec<(&str, u64, Marks)>) {
        if !self.by_host.is_empty() || self.cold_len() > 0 {
            for (host, due_ms, marks) in entries {
                self.insert_marked(host, due_ms, marks);
            }
            return;
        }
        let rank = Self::unknown_rank();
        entries.sort_unstable_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)));
        let keep = match self.cold {
            Some(_) => self.window.hot.min(entries.len()),
            None => entries.len(),
        };
        let rest = entries.split_off(keep);
        let dormant = |due_ms, marks| Dormant {
            due_ms,
            rank,
            found_ms: None,
            marks,
        };
        for (host, due_ms, marks) in entries {
            self.hold(Arc::from(host), dormant(due_ms, marks));
        }
        for chunk in rest.chunks(LOAD_BATCH) {
            let batch: Vec<(&str, ColdEntry)> = chunk
                .iter()
                .map(|&(host, due_ms, marks)| (host, dormant(due_ms, marks).cold()))
                .collect();
            if let Err(err) = self.cold_put_many(&batch) {
                tier_failed("cannot move dormant hosts to the store", &err);
                for (host, due_ms, marks) in chunk {
                    self.hold(Arc::from(*host), dormant(*due_ms, *marks));
                }
            }
        }
    }

    /// Takes [`Marks::refresh`] off `host`; whether it had it.
    pub fn unmark_refresh(&mut self, host: &str) -> bool {
        if let Some(dormant) = self.by_host.get_mut(host) {
            let had = dormant.marks.refresh;
            dormant.marks.refresh = false;
            self.refresh_in_memory -= usize::from(had);
            return had;
        }
        let Some(entry) = self.cold_get(host).filter(|e| e.marks.refresh) else {
            return false;
        };
        let unmarked = ColdEntry {
            marks: Marks {
                refresh: false,
                ..entry.marks
            },
            ..entry
        };
        match self.cold_remark(host, unmarked) {
            Ok(()) => true,
            Err(err) => {
                tier_failed("cannot unmark a dormant host", &err);
                false
            }
        }
    }

    /// `host`'s best queued URL is now at least as important as `rank`
    /// (work arrived, or its actor passivated with that loaded).
    pub fn prefer(&mut self, host: &str, rank: Rank) {
        let better = match self.by_host.get(host) {
            Some(d) => rank < d.rank,
            None => self.cold_get(host).is_some_and(|e| rank < e.rank),
        };
        if better {
            self.set_rank(host, rank);
        }
    }

    /// `host`'s best queued URL is at `rank` (its actor passivated with
    /// that loaded: the better ones were fetched).
    pub fn set_rank(&mut self, host: &str, rank: Rank) {
        if let Some(old) = self.release(host) {
            match old.found_ms {
                Some(_) => self.hold(Arc::from(host), Dormant { rank, ..old }),
                None => {
                    self.enter(host, old.due_ms, rank, old.marks);
                }
            }
            return;
        }
        let Some(entry) = self.cold_get(host) else {
            return;
        };
        match self.cold_delete(&[(host, entry)]) {
            Ok(()) => {
                let in_memory = self.enter(host, entry.due_ms, rank, entry.marks);
                self.count_load(in_memory);
            }
            Err(err) => tier_failed("cannot rank a dormant host", &err),
        }
    }

    /// Takes `host` out of the index; its due time and marks if it was in.
    pub fn take(&mut self, host: &str) -> Option<(u64, Marks)> {
        match self.remove_entry(host) {
            Ok(d) => d.map(|(d, _)| (d.due_ms, d.marks)),
            Err(err) => {
                tier_failed("cannot take a dormant host out", &err);
                None
            }
        }
    }

    /// Takes `host` out of the index; its due time if it was in.
    pub fn remove(&mut self, host: &str) -> Option<u64> {
        self.take(host).map(|(due_ms, _)| due_ms)
    }

    /// Takes `host` out of memory or the tier; its entry if it was in,
    /// and whether it was in the tier.
    fn remove_entry(&mut self, host: &str) -> Result<Option<(Dormant, bool)>, ColdError> {
        if let Some(dormant) = self.release(host) {
            return Ok(Some((dormant, false)));
        }
        let Some(cold) = self.cold.as_ref().filter(|c| c.len > 0) else {
            return Ok(None);
        };
        let Some(entry) = cold.tier.get(host)? else {
            return Ok(None);
        };
        self.cold_delete(&[(host, entry)])?;
        Ok(Some((Dormant::from_cold(entry), true)))
    }

    /// Enters `host`, in no set, as waiting: in memory if it comes before
    /// the tier's first host, else in the tier; then keeps the window.
    /// Whether it went to memory.
    fn enter(&mut self, host: &str, due_ms: u64, rank: Rank, marks: Marks) -> bool {
        let dormant = Dormant {
            due_ms,
            rank,
            found_ms: None,
            marks,
        };
        if self.belongs_in_tier(host, &dormant) {
            match self.cold_put(host, dormant.cold()) {
                Ok(()) => return false,
                Err(err) => tier_failed("cannot move a dormant host to the store", &err),
            }
        }
        let host: Arc<str> = Arc::from(host);
        self.hold(host.clone(), dormant);
        self.evict();
        self.by_host.contains_key(&host)
    }

    /// Counts a host read back from the tier into memory, if `loaded`.
    fn count_load(&mut self, loaded: bool) {
        if let Some(cold) = self.cold.as_mut().filter(|_| loaded) {
            cold.moves.loaded += 1;
        }
    }

    /// Whether a waiting host entered now goes to the tier: the tier
    /// holds hosts and this one comes after every host in memory (so
    /// every host in memory still comes before every one in the tier),
    /// or memory is full and it would be the one to leave.
    fn belongs_in_tier(&self, host: &str, dormant: &Dormant) -> bool {
        let Some(cold) = &self.cold else {
            return false;
        };
        let after_memory = self.waiting.last().is_none_or(|(due, rank, last)| {
            (dormant.due_ms, dormant.rank, host) > (*due, *rank, &**last)
        });
        after_memory && (cold.len > 0 || self.waiting.len() >= self.window.hot)
    }

    /// Moves the last waiting hosts in memory to the tier while memory
    /// holds more than the window.
    fn evict(&mut self) {
        while self.cold.is_some() && self.waiting.len() > self.window.hot {
            let (_, _, host) = self.waiting.last().expect("over the window");
            let host = host.clone();
            let dormant = self.by_host[&host];
            if let Err(err) = self.cold_put(&host, dormant.cold()) {
                tier_failed("cannot move a dormant host to the store", &err);
                return;
            }
            self.release(&host);
        }
    }

    /// Reads the tier's first hosts back into memory when fewer than half
    /// the window wait there; whether any came.
    fn refill(&mut self) -> bool {
        let want = self.window.hot.saturating_sub(self.waiting.len());
        let Some(cold) = &self.cold else {
            return false;
        };
        if cold.len == 0 || self.waiting.len() > self.window.hot / 2 || want == 0 {
            return false;
        }
        let batch = match cold.tier.first(want) {
            Ok(batch) => batch,
            Err(err) => {
                tier_failed("cannot read dormant hosts back from the store", &err);
                return false;
            }
        };
        let taken: Vec<(&str, ColdEntry)> = batch.iter().map(|(h, e)| (h.as_str(), *e)).collect();
        if let Err(err) = self.cold_delete(&taken) {
            tier_failed("cannot read dormant hosts back from the store", &err);
            return false;
        }
        if let Some(cold) = &mut self.cold {
            cold.moves.loaded += batch.len() as u64;
        }
        for (host, entry) in &batch {
            self.hold(Arc::from(host.as_str()), Dormant::from_cold(*entry));
        }
        !batch.is_empty()
    }

    fn cold_get(&self, host: &str) -> Option<ColdEntry> {
        let cold = self.cold.as_ref()?;
        if cold.len == 0 {
            return None;
        }
        cold.tier.get(host).unwrap_or_else(|err| {
            tier_failed("cannot read a dormant host", &err);
            None
        })
    }

    fn cold_put_many(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError> {
        let cold = self.cold.as_mut().expect("a tier");
        cold.tier.put_many(hosts)?;
        cold.len += hosts.len();
        cold.refresh += hosts.iter().filter(|(_, e)| e.marks.refresh).count();
        cold.moves.stored += hosts.len() as u64;
        Ok(())
    }

    fn cold_put(&mut self, host: &str, entry: ColdEntry) -> Result<(), ColdError> {
        self.cold_put_many(&[(host, entry)])
    }

    /// Rewrites the marks of `host`, in the tier at the same due time and
    /// rank (`entry` carries the new marks, which drop refresh).
    fn cold_remark(&mut self, host: &str, entry: ColdEntry) -> Result<(), ColdError> {
        let cold = self.cold.as_mut().expect("a tier");
        cold.tier.put(host, entry)?;
        cold.refresh = cold.refresh.saturating_sub(1);
        Ok(())
    }

    fn cold_delete(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError> {
        if hosts.is_empty() {
            return Ok(());
        }
        let cold = self.cold.as_mut().expect("a tier");
        cold.tier.delete(hosts)?;
        cold.len = cold.len.saturating_sub(hosts.len());
        let refresh = hosts.iter().filter(|(_, e)| e.marks.refresh).count();
        cold.refresh = cold.refresh.saturating_sub(refresh);
        Ok(())
    }

    fn cold_len(&self) -> usize {
        self.cold.as_ref().map_or(0, |c| c.len)
    }

    /// Puts `host` in the set its entry says and in the map.
    fn hold(&mut self, host: Arc<str>, dormant: Dormant) {
        match dormant.found_ms {
            Some(found) => self.ready.insert((dormant.ready_key(found), host.clone())),
            None => self
                .waiting
                .insert((dormant.due_ms, dormant.rank, host.clone())),
        };
        self.refresh_in_memory += usize::from(dormant.marks.refresh);
        if let Some(old) = self.by_host.insert(host, dormant) {
            self.refresh_in_memory -= usize::from(old.marks.refresh);
        }
    }

    /// Takes `host` out of memory (its set and the map); its entry.
    fn release(&mut self, host: &str) -> Option<Dormant> {
        let (key, dormant) = self.by_host.remove_entry(host)?;
        match dormant.found_ms {
            Some(found) => self.ready.remove(&(dormant.ready_key(found), key)),
            None => self.waiting.remove(&(dormant.due_ms, dormant.rank, key)),
        };
        self.refresh_in_memory -= usize::from(dormant.marks.refresh);
        Some(dormant)
    }

    /// Whether `host` is dormant with work.
    pub fn contains(&self, host: &str) -> bool {
        self.by_host.contains_key(host) || self.cold_get(host).is_some()
    }

    /// Every host in the index, when it comes due and its marks: those
    /// in memory, then those in the tier (an error of the tier ends the
    /// walk there).
    pub fn each(&self, mut f: impl FnMut(&str, u64, Marks)) -> Result<(), ColdError> {
        for (host, dormant) in &self.by_host {
            f(host, dormant.due_ms, dormant.marks);
        }
        match &self.cold {
            Some(cold) if cold.len > 0 => cold.tier.each(&mut |host, e| f(host, e.due_ms, e.marks)),
            _ => Ok(()),
        }
    }

    /// When `host` comes due, if it is in the index.
    pub fn due_ms(&self, host: &str) -> Option<u64> {
        match self.by_host.get(host) {
            Some(d) => Some(d.due_ms),
            None => self.cold_get(host).map(|e| e.due_ms),
        }
    }

    /// When the next host may be started: the earliest due time of those
    /// not yet found due, or, if some were found due and not yet taken,
    /// a time already past (the due time of the first of them).
    pub fn next_due_ms(&mut self) -> Option<u64> {
        self.refill();
        let ready = self
            .ready
            .first()
            .and_then(|(_, h)| self.by_host.get(h))
            .map(|d| d.due_ms);
        let waiting = self.waiting.first().map(|(due, _, _)| *due);
        match (ready, waiting) {
            (Some(r), Some(w)) => Some(r.min(w)),
            (r, w) => r.or(w),
        }
    }

    /// Takes the host to start next among those due at or before
    /// `until_ms` (now, and how early hosts start): the one with the most
    /// important work, aged (see [`AGING_MS_PER_DOUBLING`]); hosts due
    /// earlier than `until_ms` are found due at `until_ms`. With its
    /// marks.
    pub fn pop_due(&mut self, until_ms: u64) -> Option<(String, Marks)> {
        self.find_due(until_ms);
        let (_, host) = self.ready.first()?;
        let host = host.to_string();
        let dormant = self.release(&host).expect("indexed");
        Some((host, dormant.marks))
    }

    /// Finds the hosts due at or before `until_ms` due at `until_ms`
    /// (earliest due first, then the most important), while fewer than
    /// [`Window::ready`] are: from then on they age. The partition looks
    /// when it starts hosts, and while it waits for a slot (so a host
    /// waiting for one is older than a host that passivates meanwhile to
    /// give its slot up).
    pub fn find_due(&mut self, until_ms: u64) {
        loop {
            while self.ready.len() < self.window.ready {
                let Some((due, _, _)) = self.waiting.first() else {
                    break;
                };
                if *due > until_ms {
                    return;
                }
                let (_, _, host) = self.waiting.pop_first().expect("just seen");
                let dormant = self.by_host.get_mut(&host).expect("indexed");
                dormant.found_ms = Some(until_ms);
                let key = dormant.ready_key(until_ms);
                self.ready.insert((key, host));
            }
            if self.ready.len() >= self.window.ready || !self.refill() {
                return;
            }
        }
    }

    /// Dormant hosts marked [`Marks::refresh`] (in memory and the tier).
    pub fn refresh_len(&self) -> usize {
        self.refresh_in_memory + self.cold.as_ref().map_or(0, |c| c.refresh)
    }

    /// Dormant hosts with work.
    pub fn len(&self) -> usize {
        self.by_host.len() + self.cold_len()
    }

    /// Hosts moved to the tier and back so far.
    pub fn moves(&self) -> Moves {
        self.cold.as_ref().map_or(Moves::default(), |c| c.moves)
    }

    /// Dormant hosts with work in memory (the rest are in the tier).
    pub fn in_memory(&self) -> usize {
        self.by_host.len()
    }

    /// Whether no host is dormant with work.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The node-wide cap on live host actors (`[frontier] max_active_hosts`),
/// shared by every partition.
#[derive(Debug)]
pub struct ActiveSlots {
    cap: usize,
    used: AtomicUsize,
    /// The most slots ever in use at once.
    peak: AtomicUsize,
}

impl ActiveSlots {
    /// Room for `cap` active hosts.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(ActiveSlots {
            cap: cap.max(1),
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        })
    }

    /// Takes a slot if one is free.
    pub fn try_take(&self) -> bool {
        match self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.cap).then_some(n + 1)
            }) {
            Ok(before) => {
                self.peak.fetch_max(before + 1, Ordering::AcqRel);
                true
            }
            Err(_) => false,
        }
    }

    /// The most slots in use at once since start.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }

    /// Frees a slot taken by [`ActiveSlots::try_take`].
    pub fn give_back(&self) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Slots in use.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The host [`DueIndex::pop_due`] takes, without its marks.
    fn pop(due: &mut DueIndex, until_ms: u64) -> Option<String> {
        due.pop_due(until_ms).map(|(host, _)| host)
    }

    #[test]
    fn hosts_come_due_earliest_first_and_reinsertion_moves_them() {
        let mut due = DueIndex::new();
        due.insert("b.test", 500);
        due.insert("a.test", 100);
        due.insert("c.test", 0);
        assert_eq!(due.len(), 3);
        assert_eq!(due.next_due_ms(), Some(0));
        due.insert("c.test", 900); // passivated again, later
        assert_eq!(pop(&mut due, 99), None, "nothing due before 100");
        assert_eq!(pop(&mut due, 100).as_deref(), Some("a.test"));
        assert_eq!(pop(&mut due, 1_000).as_deref(), Some("b.test"));
        assert!(due.contains("c.test"));
        assert_eq!(due.remove("c.test"), Some(900));
        assert!(due.is_empty());
        assert_eq!(pop(&mut due, u64::MAX), None);
    }

    #[test]
    fn among_due_hosts_the_most_important_work_goes_first_aged_by_waiting() {
        let rank = |cash: f32| Rank::of(Cash::new(cash));
        let mut due = DueIndex::new();
        for host in ["poor.test", "rich.test", "middle.test"] {
            due.insert(host, 1_000);
        }
        due.prefer("rich.test", rank(0.5));
        due.prefer("middle.test", rank(0.01));
        due.prefer("middle.test", rank(0.0001)); // a poorer arrival changes nothing
        due.set_rank("poor.test", rank(0.0001));
        due.prefer("absent.test", rank(1.0)); // not dormant: nothing
        assert_eq!(pop(&mut due, 999), None, "none due yet");
        assert_eq!(pop(&mut due, 1_000).as_deref(), Some("rich.test"));
        // Preferred after it was found due: it moves up at once.
        due.prefer("poor.test", rank(0.02));
        assert_eq!(pop(&mut due, 1_000).as_deref(), Some("poor.test"));
        assert_eq!(pop(&mut due, 1_000).as_deref(), Some("middle.test"));
        assert!(due.is_empty() && !due.contains("absent.test"));

        // A second of waiting is worth a doubling: the host found due 3 s
        // earlier beats one four times richer, not one over eight times.
        due.insert("first.test", 10_000);
        due.prefer("first.test", rank(1.0));
        due.insert("early.test", 10_000);
        due.prefer("early.test", rank(0.01));
        assert_eq!(pop(&mut due, 10_000).as_deref(), Some("first.test"));
        due.insert("richer.test", 13_000);
        due.prefer("richer.test", rank(0.04));
        due.insert("richest.test", 13_000);
        due.prefer("richest.test", rank(0.16 * 1.1));
        assert_eq!(due.next_due_ms(), Some(10_000));
        assert_eq!(pop(&mut due, 13_000).as_deref(), Some("richest.test"));
        assert_eq!(due.next_due_ms(), Some(10_000), "early is due, not taken");
        assert_eq!(pop(&mut due, 13_000).as_deref(), Some("early.test"));
        assert_eq!(pop(&mut due, 13_000).as_deref(), Some("richer.test"));
        // Hosts given work long after their due time are found due when
        // the partition looks: those found earlier keep their lead.
        due.insert("old.test", 0);
        due.prefer("old.test", rank(0.01));
        assert_eq!(pop(&mut due, 50_000), Some("old.test".to_owned()));
        due.insert("waits.test", 0);
        due.insert("blocker.test", 0);
        due.prefer("blocker.test", rank(1.0));
        assert_eq!(pop(&mut due, 60_000).as_deref(), Some("blocker.test"));
        due.insert("late-rich.test", 0);
        due.prefer("late-rich.test", rank(0.04));
        assert_eq!(
            pop(&mut due, 63_000).as_deref(),
            Some("waits.test"),
            "found due 3 s earlier: ahead of a host under eight times richer"
        );
        assert_eq!(pop(&mut due, 63_000).as_deref(), Some("late-rich.test"));
        // Reinserted hosts keep their rank; removal works from either set.
        due.insert("a.test", 5);
        due.prefer("a.test", rank(0.5));
        assert_eq!(pop(&mut due, 0), None);
        due.insert("a.test", 7);
        due.insert("b.test", 6);
        assert_eq!(
            pop(&mut due, 7).as_deref(),
            Some("a.test"),
            "its rank was kept"
        );
        assert_eq!(due.remove("b.test"), Some(6));
        assert!(due.is_empty());
    }

    /// A tier in memory: what the store's does, for the index's tests.
    #[derive(Default)]
    struct MemTier {
        order: BTreeMap<(u64, Rank, String), Marks>,
        by_host: HashMap<String, ColdEntry>,
        /// Writes asked for (a batch counts once).
        writes: Arc<std::sync::atomic::AtomicUsize>,
        /// Every write fails.
        refuses: bool,
    }

    impl MemTier {
        fn write(&self) -> Result<(), ColdError> {
            self.writes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match self.refuses {
                true => Err(ColdError("the tier refuses writes".into())),
                false => Ok(()),
            }
        }

        fn keep(&mut self, host: &str, e: ColdEntry) {
            if let Some(old) = self.by_host.insert(host.to_owned(), e) {
                assert_eq!(old.order_key(), e.order_key(), "{host} put twice");
            }
            self.order
                .insert((e.due_ms, e.rank, host.to_owned()), e.marks);
        }
    }

    impl ColdTier for MemTier {
        fn get(&self, host: &str) -> Result<Option<ColdEntry>, ColdError> {
            Ok(self.by_host.get(host).copied())
        }
        fn put_many(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError> {
            self.write()?;
            for (host, e) in hosts {
                self.keep(host, *e);
            }
            Ok(())
        }
        fn delete(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError> {
            self.write()?;
            for (host, e) in hosts {
                assert_eq!(self.by_host.remove(*host), Some(*e), "{host}");
                let key = (e.due_ms, e.rank, (*host).to_owned());
                assert_eq!(self.order.remove(&key), Some(e.marks));
            }
            Ok(())
        }
        fn first(&self, n: usize) -> Result<Vec<(String, ColdEntry)>, ColdError> {
            Ok(self
                .order
                .iter()
                .take(n)
                .map(|((due_ms, rank, h), marks)| {
                    let entry = ColdEntry {
                        due_ms: *due_ms,
                        rank: *rank,
                        marks: *marks,
                    };
                    (h.clone(), entry)
                })
                .collect())
        }
        fn each(&self, f: &mut dyn FnMut(&str, ColdEntry)) -> Result<(), ColdError> {
            for (host, entry) in self.first(usize::MAX)? {
                f(&host, entry);
            }
            Ok(())
        }
    }

    /// A deterministic stream of numbers (xorshift), for random steps.
    struct Steps(u64);

    impl Steps {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Hosts moved between memory and the tier are invisible: an index
    /// keeping 4 hosts in memory answers every step of a random run as
    /// one keeping all in memory (the same bound on hosts found due), and
    /// never holds more than its window.
    #[test]
    fn a_window_over_a_tier_answers_as_all_in_memory_and_holds_no_more() {
        let ready = 3;
        for seed in 1..=40u64 {
            let mut all = DueIndex::with_tier(
                Box::new(MemTier::default()),
                Window {
                    hot: usize::MAX,
                    ready,
                },
            );
            let window = Window { hot: 4, ready };
            let mut tiered = DueIndex::with_tier(Box::new(MemTier::default()), window);
            let mut steps = Steps(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut now = 0u64;
            let rank = |steps: &mut Steps| Rank::of(Cash::new(0.5f32.powi(steps.below(12) as i32)));
            for step in 0..600 {
                let host = format!("h{}.test", steps.below(30));
                let what = steps.below(10);
                let context = format!("seed {seed}, step {step}: {what} on {host} at {now}");
                match what {
                    0..=2 => {
                        let due = now + steps.below(3) * 500;
                        let marks = Marks::from_byte(steps.below(4) as u8);
                        all.insert_marked(&host, due, marks);
                        tiered.insert_marked(&host, due, marks);
                    }
                    3 => {
                        let r = rank(&mut steps);
                        all.prefer(&host, r);
                        tiered.prefer(&host, r);
                    }
                    4 => {
                        let r = rank(&mut steps);
                        all.set_rank(&host, r);
                        tiered.set_rank(&host, r);
                    }
                    5 => assert_eq!(all.take(&host), tiered.take(&host), "{context}"),
                    6 => {
                        all.find_due(now);
                        tiered.find_due(now);
                    }
                    7 => assert_eq!(all.pop_due(now), tiered.pop_due(now), "{context}"),
                    8 => assert_eq!(
                        all.unmark_refresh(&host),
                        tiered.unmark_refresh(&host),
                        "{context}"
                    ),
                    _ => now += steps.below(700),
                }
                assert_eq!(all.next_due_ms(), tiered.next_due_ms(), "{context}");
                assert_eq!(all.len(), tiered.len(), "{context}");
                assert_eq!(all.refresh_len(), tiered.refresh_len(), "{context}");
                assert_eq!(all.due_ms(&host), tiered.due_ms(&host), "{context}");
                assert_eq!(all.contains(&host), tiered.contains(&host), "{context}");
                assert!(
                    tiered.in_memory() <= window.hot + window.ready,
                    "{context}: {tiered:?}"
                );
            }
            let listed = |index: &DueIndex| {
                let mut hosts = Vec::new();
                index
                    .each(|h, due, marks| hosts.push((h.to_owned(), due, marks.to_byte())))
                    .unwrap();
                hosts.sort();
                hosts
            };
            assert_eq!(listed(&all), listed(&tiered), "seed {seed}");
            assert_eq!(all.refresh_len(), tiered.refresh_len(), "seed {seed}");
            while let Some(popped) = all.pop_due(u64::MAX) {
                assert_eq!(tiered.pop_due(u64::MAX), Some(popped), "seed {seed}");
            }
            assert_eq!(tiered.refresh_len(), 0, "seed {seed}");
            assert!(tiered.is_empty(), "seed {seed}: {tiered:?}");
        }
    }

    /// The index filled at open in one go holds what it holds entered
    /// host by host (the same hosts popped in the same order, with their
    /// marks; the same refresh count), keeps its window in memory, and
    /// writes the rest in a few batches, not a write a host. A tier that
    /// refuses the batches loses nothing: the hosts stay in memory.
    #[test]
    fn an_index_loaded_at_open_answers_as_one_filled_host_by_host_in_batches() {
        let mut steps = Steps(7);
        let names: Vec<String> = (0..10_000).map(|i| format!("h{i:05}.test")).collect();
        let entries: Vec<(&str, u64, Marks)> = names
            .iter()
            .map(|host| {
                let marks = Marks {
                    refresh: steps.below(3) == 0,
                    owes_delay: steps.below(2) == 0,
                };
                (host.as_str(), steps.below(50) * 1_000, marks)
            })
            .collect();
        for refuses in [false, true] {
            let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let tier = MemTier {
                writes: writes.clone(),
                refuses,
                ..MemTier::default()
            };
            let mut loaded = DueIndex::with_tier(Box::new(tier), Window::of(8));
            loaded.load(entries.clone());
            let writes = writes.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(writes, (10_000 - 8usize).div_ceil(LOAD_BATCH), "{refuses}");
            match refuses {
                false => assert_eq!(loaded.in_memory(), 8),
                true => assert_eq!(loaded.in_memory(), 10_000, "kept in memory"),
            }
            let mut reference = DueIndex::with_tier(Box::new(MemTier::default()), Window::of(8));
            for (host, due_ms, marks) in &entries {
                reference.insert_marked(host, *due_ms, *marks);
            }
            assert_eq!(loaded.len(), reference.len());
            assert_eq!(loaded.refresh_len(), reference.refresh_len());
            assert!(reference.refresh_len() > 3_000, "marks were drawn");
            while let Some(popped) = reference.pop_due(u64::MAX) {
                assert_eq!(loaded.pop_due(u64::MAX), Some(popped), "{refuses}");
            }
            assert!(loaded.is_empty(), "{refuses}");
        }
    }

    /// Hosts due at once beyond the window are found due in rank order:
    /// with 1,000 hosts due and 8 in memory, the richest go first.
    #[test]
    fn beyond_the_window_the_richest_due_hosts_are_found_first() {
        let mut due = DueIndex::with_tier(Box::new(MemTier::default()), Window::of(8));
        for i in 0..1_000u32 {
            let host = format!("h{i:04}.test");
            due.insert(&host, 0);
            due.set_rank(&host, Rank::from_steps((i * 7919 % 1_000) as u16 + 1));
        }
        assert!(due.in_memory() <= 16, "{due:?}");
        assert_eq!(due.len(), 1_000);
        let ranks: Vec<u16> = (0..1_000)
            .map(|_| {
                let host = pop(&mut due, 0).expect("a due host");
                let i: u32 = host[1..5].parse().unwrap();
                (i * 7919 % 1_000) as u16 + 1
            })
            .collect();
        let mut sorted = ranks.clone();
        sorted.sort();
        assert_eq!(ranks, sorted, "most important first");
        assert!(due.is_empty());
    }

    #[test]
    fn active_slots_never_exceed_the_cap() {
        let slots = ActiveSlots::new(2);
        assert!(slots.try_take());
        assert!(slots.try_take());
        assert!(!slots.try_take());
        slots.give_back();
        assert_eq!(slots.used(), 1);
        assert_eq!(slots.peak(), 2);
        assert!(slots.try_take());
        slots.give_back();
        slots.give_back();
        slots.give_back(); // an extra give-back does not underflow
        assert_eq!(slots.used(), 0);
    }
}

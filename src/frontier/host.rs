//! The host state machine: everything one host decides, as plain code on an
//! injected clock.
//!
//! A [`HostMachine`] is given events (new work, a timer, a fetch result, a
//! finished task, a drain) with the time they happen at ([`Now`]), and
//! answers with the [`Effect`]s to carry out: send this request, run this
//! task, persist this state, call me again at, passivate me. It performs no
//! I/O of its own but reading its queue page by page through
//! [`QueueSource`] (the partition store, or a map in tests). The HostActor
//! (`actors/host.rs`) only carries the effects out; so every schedule here
//! is tested exactly, with a fake clock, no sockets and no sleeps.
//!
//! What the host does next, in order:
//! 1. robots.txt of an origin is fetched (redirects followed, failures
//!    retried) before any other URL of it, under the same permit and delay
//!    as every other request ([`OriginRobots`] holds that lifecycle); an
//!    origin whose address the SSRF guard denies has its URLs recorded
//!    denied at once, never retried;
//! 2. a request starts only with a permit from [`HostPoliteness`], which
//!    enforces `max_in_flight_per_host`, the completion-to-start delay
//!    (adaptive, with a ceiling), Crawl-delay, Retry-After, backoff and
//!    parking; with per-IP politeness also with a slot of its address;
//! 3. the next URL comes from the priority queues by a biased choice
//!    ([`LevelPicker`]); URLs to try again go first; refreshes that are
//!    due (the `recrawl` schedule, see [`super::lifecycle`]) take turns
//!    with new URLs, at most `refresh_share` of the turns while both wait,
//!    and are asked for conditionally (the validators of the copy on
//!    record);
//! 4. a final response becomes a [`Task::Process`] (parse or read, archive,
//!    admit what it links to, then complete the entry in the store, see
//!    [`super::response`]); a task that fails (store or archive down, an
//!    internal mailbox closed) is kept and run again with backoff, and is
//!    never counted against the host;
//! 5. when nothing is queued, in flight or running the host reports idle
//!    (with the time its next refresh is due, if any); when its next
//!    possible request is more than `passivate_after` away it asks to be
//!    passivated until then: the partition's due index wakes it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use url::Url;

use super::importance::{Arrivals, Rank};
use super::lifecycle::{self, RecrawlSettings};
use super::response::{self, Attempts, RetryLimits, SitemapSettings};
use super::{Candidate, LevelPicker, Priority, LEVELS};
use crate::clock::Now;
use crate::error::Failure;
use crate::fetch::{DnsOverrides, FetchError, FetchResponse, Validators};
use crate::metrics::Metrics;
use crate::politeness::ip::{IpSlot, IpSlots, SlotFreed};
use crate::politeness::slowdown::Slowdown;
use crate::politeness::{Hold, HostPoliteness, Outcome, Permit, Policy, Schedule, Wait};
use crate::robots::cache::{FetchResult, Fetched, Need, OriginRobots, RobotsSettings};
use crate::robots::{self, RobotsRecord, RobotsSummary};
use crate::store::codec;
use crate::store::{
    Completion, HostState, QueueEntry, Removal, StoreError, Tries, UrlRecord, UrlState,
};
use crate::url::Fingerprint;

/// Queue entries read from the store at a time, per priority level.
const REFILL: usize = 32;
/// First wait before a failed task runs again; doubles per failure.
const TASK_RETRY_BASE: Duration = Duration::from_secs(1);
/// Longest wait between two runs of a failing task.
const TASK_RETRY_MAX: Duration = Duration::from_secs(60);
/// The bit of [`HostMachine::wake`]'s `levels` that says refreshes were
/// made due (the priority levels use the bits below it).
pub const RECRAWL_BIT: u8 = 1 << LEVELS;

/// Settings shared by every host of a node.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// Politeness policy.
    pub policy: Policy,
    /// robots.txt policy.
    pub robots: RobotsSettings,
    /// Tries per URL.
    pub retries: RetryLimits,
    /// Redirect hops followed from a URL.
    pub max_redirects: u32,
    /// Archive 2xx responses that are not HTML (else only count them).
    pub archive_non_html: bool,
    /// `[dedup] exact`: a page's payload digest is looked up (and claimed)
    /// at its partition before archiving (see [`crate::dedup::exact`]).
    pub exact_dedup: bool,
    /// Sitemap discovery, if enabled.
    pub sitemaps: Option<SitemapSettings>,
    /// The previous run did not stop cleanly: a request may have been in
    /// flight, so every host owes its last delay again.
    pub crashed: bool,
    /// Per-IP limits, if enabled.
    pub ip_slots: Option<IpSlots>,
    /// `[dns] overrides`, to know a host's address before its first fetch.
    pub dns: DnsOverrides,
    /// A host with nothing to do for longer than this is passivated.
    pub passivate_after: Duration,
    /// The longest a request may take (`fetch.timeout`): how long a
    /// request of a failed actor may still be on the wire.
    pub request_timeout: Duration,
    /// `[recrawl]`.
    pub recrawl: RecrawlSettings,
    /// `[frontier] ordering`: under `Fifo` no cash is shared among a
    /// page's links (no rank would keep it, and sharing costs a
    /// registrable-domain lookup per link leaving the host).
    pub ordering: super::importance::Ordering,
    /// `[frontier] host_cycle`: how long a host may hold its slot while
    /// others wait for one (zero: until it has nothing to do soon).
    pub host_cycle: Duration,
    /// `[frontier] dormant_hosts_in_memory`: the due index's window.
    pub dormant_in_memory: usize,
}

impl HostSettings {
    /// The settings of every host of a node running `config`; `crashed`:
    /// the previous run did not stop cleanly.
    pub fn from_config(config: &crate::config::Config, crashed: bool) -> Self {
        HostSettings {
            policy: Policy::from(&config.politeness),
            robots: RobotsSettings {
                product_token: config.crawl.product_token().to_owned(),
                ttl: config.robots.cache_ttl,
                retry_base: config.robots.retry_base,
                retry_max: config.robots.retry_max,
                give_up_after: config.robots.give_up_after,
            },
            retries: RetryLimits {
                max_attempts: config.fetch.max_attempts,
                max_throttled_attempts: config.fetch.max_throttled_attempts,
            },
            max_redirects: config.fetch.max_redirects,
            archive_non_html: config.fetch.archive_non_html,
            exact_dedup: config.dedup.exact,
            sitemaps: config.sitemap.enabled.then_some(SitemapSettings {
                limits: crate::sitemap::SitemapLimits {
                    max_urls: config.sitemap.max_urls,
                    max_bytes: config.sitemap.max_bytes,
                },
                max_index_depth: config.sitemap.max_index_depth,
                fresh_within: config.sitemap.fresh_within,
            }),
            crashed,
            ip_slots: (config.politeness.max_in_flight_per_ip > 0)
                .then(|| IpSlots::new(config.politeness.max_in_flight_per_ip)),
            dns: DnsOverrides::new(&config.dns.overrides),
            passivate_after: config.frontier.passivate_after,
            request_timeout: config.fetch.timeout,
            recrawl: RecrawlSettings::from_config(&config.recrawl),
            ordering: config.frontier.ordering,
            host_cycle: config.frontier.host_cycle,
            dormant_in_memory: config.frontier.dormant_hosts_in_memory,
        }
    }
}

/// Where a host's queue, refresh schedule and URL records are read from.
pub trait QueueSource {
    /// Up to `n` entries of `host`'s queue of `priority` after key `after`.
    fn queue_page(
        &self,
        host: &str,
        priority: Priority,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError>;

    /// A page of each `(priority, after)` read of `host`'s queue, in
    /// order: what [`QueueSource::queue_page`] gives for each, which a
    /// store answers with one iterator (see
    /// `PartitionStore::queue_pages`).
    fn queue_pages(
        &self,
        host: &str,
        reads: &[(Priority, Option<&[u8]>)],
        n: usize,
    ) -> Vec<Result<Vec<QueueEntry>, StoreError>> {
        reads
            .iter()
            .map(|&(priority, after)| self.queue_page(host, priority, after, n))
            .collect()
    }

    /// Up to `n` refreshes of `host` due by `due_by_ms` after key `after`,
    /// with their records.
    fn recrawl_page(
        &self,
        host: &str,
        due_by_ms: u64,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError>;

    /// When `host`'s next refresh after key `after` is due.
    fn next_recrawl_ms(&self, host: &str, after: Option<&[u8]>) -> Result<Option<u64>, StoreError>;

    /// A URL's record (read for the tries of a URL that failed).
    fn url_record(&self, fp: Fingerprint) -> Result<Option<UrlRecord>, StoreError>;
}

impl QueueSource for crate::store::PartitionStore {
    fn queue_page(
        &self,
        host: &str,
        priority: Priority,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        crate::store::PartitionStore::queue_page(self, host, priority, after, n)
    }

    fn queue_pages(
        &self,
        host: &str,
        reads: &[(Priority, Option<&[u8]>)],
        n: usize,
    ) -> Vec<Result<Vec<QueueEntry>, StoreError>> {
        crate::store::PartitionStore::queue_pages(self, host, reads, n)
    }

    fn recrawl_page(
        &self,
        host: &str,
        due_by_ms: u64,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        crate::store::PartitionStore::recrawl_page(self, host, due_by_ms, after, n)
    }

    fn next_recrawl_ms(&self, host: &str, after: Option<&[u8]>) -> Result<Option<u64>, StoreError> {
        crate::store::PartitionStore::next_recrawl_ms(self, host, after)
    }

    fn url_record(&self, fp: Fingerprint) -> Result<Option<UrlRecord>, StoreError> {
        crate::store::PartitionStore::url_record(self, fp)
    }
}

/// Names a request or task of one host, to match its answer.
pub type TaskId = u64;

/// A final response of a queue entry, to be processed.
#[derive(Debug, Clone)]
pub struct Job {
    /// The entry.
    pub entry: QueueEntry,
    /// Its URL.
    pub url: Url,
    /// The response, shared with the archive.
    pub response: Arc<FetchResponse>,
    /// Where its processing stands: the steps done on earlier runs of
    /// the task are skipped ([`super::page_flow`]).
    pub flow: super::page_flow::PageFlow,
    /// The archive's answer on an earlier run of the task (not to be
    /// archived twice).
    pub archived: Option<crate::archive::Archived>,
    /// Its links for partitions other nodes own, handed back by their
    /// admission: written to the outbox with the completion.
    pub outbox: Vec<crate::store::OutboxBatch>,
    /// When the URL is due again, once the task settled its record (for
    /// the host's refresh schedule).
    pub next_due_ms: Option<u64>,
    /// When the request was sent (Unix ms on the injected clock): the
    /// visit's time, which the change-rate estimator and the refresh
    /// schedule read, so both see one clock. (The WARC record keeps the
    /// response's own wall-clock date: that is what was captured when.)
    pub visited_ms: u64,
}

/// A URL leaving the crawl: what its `removed` event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The URL.
    pub url: Url,
    /// Why.
    pub reason: Removal,
    /// The status of its last response, if it had one.
    pub last_status: Option<u16>,
    /// Hops from the seed.
    pub depth: u32,
    /// When it was removed (Unix ms).
    pub at_ms: u64,
}

/// An entry finished without a response to process.
#[derive(Debug, Clone)]
pub struct Finish {
    /// What the store records.
    pub completion: Completion,
    /// The removal to report first, if the URL left the crawl (cleared
    /// once reported, so a rerun does not report it twice).
    pub removed: Option<Removed>,
}

/// Work the host hands out to be run off its own thread of control.
#[derive(Debug, Clone)]
pub enum Task {
    /// Parse or read, archive, admit what was found, then complete the
    /// entry (see [`super::response`]).
    Process(Box<Job>),
    /// Record an entry finished without a response to process.
    Complete(Box<Finish>),
    /// Store the tries of a URL to be tried again (best effort: the tries
    /// are also in memory; a failed write is not run again).
    RecordTries(Box<Completion>),
    /// Archive a response that completes no entry (robots.txt).
    ArchiveRobots {
        /// Where it came from.
        url: Url,
        /// The response.
        response: Arc<FetchResponse>,
    },
    /// Offer candidates (the sitemaps robots.txt names).
    Discover(Vec<Candidate>),
}

impl Task {
    /// A bounded label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Task::Process(_) => "process",
            Task::Complete(_) => "complete",
            Task::RecordTries(_) => "record_tries",
            Task::ArchiveRobots { .. } => "archive_robots",
            Task::Discover(_) => "discover",
        }
    }

    /// The queue key it completes, once it ran.
    fn completed_key(&self) -> Option<&[u8]> {
        match self {
            Task::Process(job) => Some(&job.entry.key),
            Task::Complete(finish) => Some(&finish.completion.key),
            _ => None,
        }
    }

    /// When the URL it settled is due again, once it ran.
    fn next_due_ms(&self) -> Option<u64> {
        match self {
            Task::Process(job) => job.next_due_ms,
            Task::Complete(finish) => finish.completion.record.next_due_ms,
            _ => None,
        }
    }
}

/// What the host asks its actor to do.
pub enum Effect {
    /// Send a GET for `url`; answer with [`HostMachine::fetched`] (or
    /// [`HostMachine::fetch_lost`] if the request could not be handed over).
    Fetch {
        /// Names the answer.
        id: TaskId,
        /// The URL.
        url: Url,
        /// The claim to persist before the request leaves
        /// ([`crate::store::PartitionStore::hold_host`]), then answer
        /// [`HostMachine::hold_written`]; if it cannot be, answer
        /// [`HostMachine::fetch_lost`] unsent. `None`: the claim on record
        /// covers this request already, send it at once (see
        /// [`HOLD_AHEAD_DIVISOR`]).
        hold: Option<Hold>,
        /// The request is abandoned at this instant at the latest
        /// (`hold.until_ms` on the machine's clock): a request that waited
        /// for a fetch slot gets only what is left of its time, so it
        /// never outlives its hold.
        deadline: Instant,
        /// Validators of the copy on record (a refresh): ask conditionally.
        validators: Validators,
        /// A queue entry (a page or a sitemap), processed once fetched: it
        /// takes a place in the node's pipeline; robots.txt takes none
        /// ([`crate::fetch::pipeline`]).
        page: bool,
    },
    /// Run `task` with the host's schedule `schedule` (completions persist
    /// it); answer with [`HostMachine::task_done`].
    Run {
        /// Names the answer.
        id: TaskId,
        /// The work.
        task: Task,
        /// The host's politeness schedule, persisted with completions.
        schedule: Schedule,
    },
    /// Persist the host's state now.
    Save(HostState),
    /// Call [`HostMachine::timer`] at this instant; replaces an armed
    /// timer (the machine only ever moves it earlier, or re-arms it after
    /// it fired).
    WakeAt(Instant),
    /// Call [`HostMachine::poll`] once this completes (a slot of the host's
    /// address may have freed).
    WaitForIp(SlotFreed),
    /// Nothing is in flight or running: ask the partition to passivate the
    /// host, saving `state`, until `due_ms` (Unix ms) if it still has work,
    /// for good if `due_ms` is `None`. Answer with
    /// [`HostMachine::passivation_refused`] if new work arrived meanwhile.
    Passivate {
        /// The state to persist.
        state: HostState,
        /// When the host has something to do again, if it has work.
        due_ms: Option<u64>,
        /// `due_ms` is when its next refresh is due (not a politeness
        /// wait): new work may bring it back sooner.
        refresh_wait: bool,
    },
    /// The drain is complete: nothing in flight or running.
    Drained(HostState),
}

impl std::fmt::Debug for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Effect::Fetch { id, url, .. } => write!(f, "Fetch({id}, {url})"),
            Effect::Run { id, task, .. } => write!(f, "Run({id}, {task:?})"),
            Effect::Save(_) => write!(f, "Save"),
            Effect::WakeAt(at) => write!(f, "WakeAt({at:?})"),
            Effect::WaitForIp(_) => write!(f, "WaitForIp"),
            Effect::Passivate { due_ms, .. } => write!(f, "Passivate(due {due_ms:?})"),
            Effect::Drained(_) => write!(f, "Drained"),
        }
    }
}

/// A hold is written reaching a quarter of the request timeout past the
/// deadline of the request that needs it, so the requests that leave
/// within that quarter find their claim on record already and go without
/// waiting for a store write: writing a hold before every request put a
/// batch timer, two mailbox hops and a WAL append between each response
/// and the next request, on every host's critical path. What it costs: a
/// host reopened after a crash waits up to that quarter longer (until the
/// hold's end, then the delay a request of that length owes, within
/// `max_delay`).
pub const HOLD_AHEAD_DIVISOR: u32 = 4;

/// A request in flight.
struct InFlight {
    what: Requested,
    permit: Permit,
    /// When it was handed out.
    sent: Instant,
    /// When the crawl stops waiting for it at the latest.
    deadline: Instant,
    /// Its claim on the host, as persisted.
    hold: Hold,
    /// Freed when dropped.
    _ip_slot: Option<IpSlot>,
}

/// The answer to an entry's request, with what the request carried.
struct EntryAnswer {
    entry: QueueEntry,
    url: Url,
    sent_ms: u64,
    result: Result<FetchResponse, FetchError>,
}

enum Requested {
    Robots {
        origin: String,
        url: Url,
    },
    /// `sent_ms`: when the request was handed out, on the machine's
    /// clock: the visit's time (the change-rate estimator reads it).
    Entry {
        entry: QueueEntry,
        url: Url,
        sent_ms: u64,
    },
}

/// How a request stopped occupying its host.
#[derive(Debug, Clone, Copy)]
struct Ended {
    /// Its answer, or its deadline if the crawl stopped waiting first.
    until: Instant,
    /// The time it took (to `until`, from when it was handed out if it
    /// was abandoned; on the wire if answered).
    took: Duration,
    /// What it means for the host's politeness.
    outcome: Outcome,
    /// The crawl stopped waiting while the server may have worked on.
    abandoned: bool,
}

/// A failed task waiting to run again.
struct Delayed {
    at: Instant,
    id: TaskId,
    task: Task,
}

/// Where the next entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Retry,
    Level(usize),
    Recrawl,
}

/// What the host knows of its refreshes not yet read from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecrawlNext {
    /// Read the store to find out.
    Unknown,
    /// None is due before this (Unix ms).
    At(u64),
    /// There are none.
    Never,
}

/// The in-memory head of a host's durable queues.
struct Head {
    /// Entries read from the store, not yet dispatched, per priority.
    queues: [VecDeque<QueueEntry>; LEVELS],
    /// Where each level's next refill starts (exclusive): the key of the
    /// last entry read, or a rank's start once a richer entry arrived.
    cursors: [Option<Vec<u8>>; LEVELS],
    /// Keys of the entries taken from the levels whose completion is not
    /// yet written: a level read again from an earlier rank skips them.
    taken: HashSet<Vec<u8>>,
    /// The store had nothing more at the last refill of each level.
    exhausted: [bool; LEVELS],
    picker: LevelPicker,
    /// The source picked and not yet consumed (a wait keeps the choice).
    chosen: Option<Source>,
    /// Entries to try again, before anything else.
    retry: VecDeque<QueueEntry>,
    /// Due refreshes read from the store, not yet dispatched.
    recrawl: VecDeque<QueueEntry>,
    /// Key of the last refresh read.
    recrawl_cursor: Option<Vec<u8>>,
    recrawl_next: RecrawlNext,
    /// Turns owed to refreshes while new URLs also wait (see
    /// [`Head::refresh_turn`]).
    refresh_credit: f64,
}

impl Default for Head {
    fn default() -> Self {
        Head {
            queues: Default::default(),
            cursors: Default::default(),
            taken: HashSet::new(),
            exhausted: [false; LEVELS],
            picker: LevelPicker::default(),
            chosen: None,
            retry: VecDeque::new(),
            recrawl: VecDeque::new(),
            recrawl_cursor: None,
            recrawl_next: RecrawlNext::Unknown,
            refresh_credit: 0.0,
        }
    }
}

impl Head {
    /// Retries first, then the source chosen before (kept until its entry
    /// is taken), then due refreshes and new URLs in turn.
    fn choose(
        &mut self,
        host: &str,
        queue: &dyn QueueSource,
        now_ms: u64,
        refresh_share: f64,
    ) -> Option<Source> {
        if !self.retry.is_empty() {
            return Some(Source::Retry);
        }
        if let Some(source) = self.chosen {
            if self.peek(source).is_some() {
                return Some(source);
            }
        }
        let empty: Vec<usize> = (0..LEVELS)
            .filter(|&l| self.queues[l].is_empty() && !self.exhausted[l])
            .collect();
        if !empty.is_empty() {
            self.refill_levels(host, &empty, queue);
        }
        if self.recrawl.is_empty() {
            self.refill_recrawl(host, queue, now_ms);
        }
        let new_work = self.queues.iter().any(|q| !q.is_empty());
        let refresh = !self.recrawl.is_empty();
        self.chosen = match (new_work, refresh) {
            (_, true) if !new_work || self.refresh_turn(refresh_share) => Some(Source::Recrawl),
            (true, _) => {
                let queues = &self.queues;
                self.picker
                    .pick(|l| !queues[l].is_empty())
                    .map(Source::Level)
            }
            _ => None,
        };
        self.chosen
    }

    /// Whether a refresh takes this turn while new URLs also wait: each
    /// turn earns `share` of a refresh, and a refresh spends one (a
    /// deficit counter), so refreshes get `share` of the turns.
    fn refresh_turn(&mut self, share: f64) -> bool {
        self.refresh_credit = (self.refresh_credit + share).min(1.0);
        if self.refresh_credit >= 1.0 - 1e-9 {
            self.refresh_credit -= 1.0;
            true
        } else {
            false
        }
    }

    fn peek(&self, source: Source) -> Option<&QueueEntry> {
        match source {
            Source::Retry => self.retry.front(),
            Source::Level(l) => self.queues[l].front(),
            Source::Recrawl => self.recrawl.front(),
        }
    }

    fn take(&mut self, source: Source) -> Option<QueueEntry> {
        match source {
            Source::Retry => self.retry.pop_front(),
            Source::Level(l) => {
                self.chosen = None;
                let entry = self.queues[l].pop_front()?;
                self.taken.insert(entry.key.clone());
                Some(entry)
            }
            Source::Recrawl => {
                self.chosen = None;
                self.recrawl.pop_front()
            }
        }
    }

    /// Loads the next page of each of `levels` in one read of the store,
    /// then reads on (level by level) where a page held only entries
    /// already taken.
    fn refill_levels(&mut self, host: &str, levels: &[usize], queue: &dyn QueueSource) {
        let reads: Vec<(Priority, Option<&[u8]>)> = levels
            .iter()
            .map(|&l| (Priority::from_level(l as u8), self.cursors[l].as_deref()))
            .collect();
        let pages = queue.queue_pages(host, &reads, REFILL);
        for (&level, page) in levels.iter().zip(pages) {
            self.take_page(host, level, page);
        }
        for &level in levels {
            self.refill(host, level, queue);
        }
    }

    /// Loads the next page of one level's queue (read on past entries
    /// already taken, which a level read again from an earlier rank meets
    /// first). A read error leaves the level exhausted until the next
    /// wake: the entries stay in the store.
    fn refill(&mut self, host: &str, level: usize, queue: &dyn QueueSource) {
        let priority = Priority::from_level(level as u8);
        while !self.exhausted[level] && self.queues[level].is_empty() {
            let page = queue.queue_page(host, priority, self.cursors[level].as_deref(), REFILL);
            self.take_page(host, level, page);
        }
    }

    /// Queues a page read for `level` (leaving out entries already
    /// taken), or marks the level exhausted: the page was empty, or the
    /// read failed.
    fn take_page(&mut self, host: &str, level: usize, page: Result<Vec<QueueEntry>, StoreError>) {
        match page {
            Ok(page) if page.is_empty() => self.exhausted[level] = true,
            Ok(page) => {
                self.cursors[level] = page.last().map(|e| e.key.clone());
                let fresh = page.into_iter().filter(|e| !self.taken.contains(&e.key));
                self.queues[level].extend(fresh);
            }
            Err(err) => {
                tracing::error!(host, error = %err, "cannot read the queue");
                self.exhausted[level] = true;
            }
        }
    }

    /// Loads the refreshes due by `now_ms`, unless none can be: when none
    /// is, learns when the next one will be. A read error leaves them in
    /// the store until the next wake.
    fn refill_recrawl(&mut self, host: &str, queue: &dyn QueueSource, now_ms: u64) {
        match self.recrawl_next {
            RecrawlNext::Never => return,
            RecrawlNext::At(at) if at > now_ms => return,
            _ => {}
        }
        let after = self.recrawl_cursor.as_deref();
        let read = queue
            .recrawl_page(host, now_ms, after, REFILL)
            .and_then(|page| match page.is_empty() {
                true => queue.next_recrawl_ms(host, after).map(|next| (page, next)),
                false => Ok((page, None)),
            });
        match read {
            Ok((page, next)) if page.is_empty() => {
                self.recrawl_next = next.map_or(RecrawlNext::Never, RecrawlNext::At);
            }
            Ok((page, _)) => {
                self.recrawl_cursor = page.last().map(|e| e.key.clone());
                self.recrawl.extend(page);
                self.recrawl_next = RecrawlNext::Unknown;
            }
            Err(err) => {
                tracing::error!(host, error = %err, "cannot read the refresh schedule");
                self.recrawl_next = RecrawlNext::Never;
            }
        }
    }

    /// An entry of rank `rank` arrived at `level`: if the level has read
    /// past that rank, it is read again from there when its loaded entries
    /// richer than the newcomer are taken (the rest of them are dropped
    /// from memory and read again in order; entries taken meanwhile are
    /// skipped, see [`Head::taken`]).
    fn arrived(&mut self, host: &str, level: usize, rank: Rank) {
        // The newcomer's key is its rank's start and a sequence number
        // above all others: the level missed it if the cursor (a key, or
        // a rank's start after an earlier arrival) is past that start.
        let start = codec::rank_start(host, Priority::from_level(level as u8), rank);
        let read_past = self.cursors[level]
            .as_deref()
            .is_some_and(|cursor| start.as_slice() < cursor && !cursor.starts_with(&start));
        if !read_past {
            return;
        }
        self.queues[level].retain(|e| e.key < start);
        self.cursors[level] = Some(start);
    }

    /// The entry with key `key` is completed in the store (its task ran).
    fn completed(&mut self, key: &[u8]) {
        self.taken.remove(key);
    }

    /// A refresh was scheduled at `due_ms` (a completion of this host):
    /// the host knows it is coming without reading the store.
    fn recrawl_scheduled(&mut self, due_ms: u64) {
        self.recrawl_next = match self.recrawl_next {
            RecrawlNext::Never => RecrawlNext::At(due_ms),
            RecrawlNext::At(at) => RecrawlNext::At(at.min(due_ms)),
            RecrawlNext::Unknown => RecrawlNext::Unknown,
        };
    }

    /// When the next refresh not yet loaded is due, if one is known to be.
    fn next_refresh_ms(&self) -> Option<u64> {
        match self.recrawl_next {
            RecrawlNext::At(at) => Some(at),
            _ => None,
        }
    }

    /// Nothing to dispatch now: no new URL, no due refresh loaded, no
    /// retry (refreshes due later may remain, see
    /// [`Head::next_refresh_ms`]).
    fn is_empty(&self) -> bool {
        self.retry.is_empty()
            && self.recrawl.is_empty()
            && self.queues.iter().all(VecDeque::is_empty)
            && self.exhausted.iter().all(|&e| e)
    }

    /// The best rank loaded among the levels' next entries.
    fn best_rank(&self) -> Option<Rank> {
        self.queues
            .iter()
            .filter_map(|q| q.front().and_then(QueueEntry::rank))
            .min()
    }

    fn len(&self) -> usize {
        self.retry.len() + self.recrawl.len() + self.queues.iter().map(VecDeque::len).sum::<usize>()
    }
}

/// One host's decisions.
pub struct HostMachine {
    host: String,
    settings: Arc<HostSettings>,
    metrics: Arc<Metrics>,
    head: Head,
    attempts: HashMap<Fingerprint, Attempts>,
    politeness: HostPoliteness,
    /// robots.txt state per origin (`scheme://host:port`).
    origins: HashMap<String, OriginRobots>,
    /// Persisted robots.txt copies not yet turned into an origin state.
    saved_robots: BTreeMap<String, RobotsRecord>,
    in_flight: HashMap<TaskId, InFlight>,
    /// Tasks handed out and not yet answered.
    running: HashMap<TaskId, u32>,
    /// Failed tasks waiting to run again, with their failure counts.
    delayed: Vec<(Delayed, u32)>,
    next_id: TaskId,
    /// The deadline of the armed timer.
    armed: Option<Instant>,
    /// Dispatch stopped for shutdown.
    draining: bool,
    /// A drain awaits its answer.
    drain_pending: bool,
    /// A passivation request awaits its answer.
    passivating: bool,
    /// The partition asked the host to give its slot up (others wait for
    /// one): it passivates at its next quiet moment, whenever its next
    /// request is due.
    yielding: bool,
    /// State of the jitter generator.
    jitter: u64,
    /// The host's address, when known (overrides, IP literal, responses).
    ip: Option<IpAddr>,
    /// Waiting for a slot of `ip` to free.
    ip_waiting: bool,
    /// How far the claim on record reaches (Unix ms; 0: none known): a
    /// request whose deadline is within it goes without writing one.
    held_until_ms: u64,
    /// Tasks that failed and are waiting, for the snapshot.
    failing_tasks: u64,
    /// Origins whose robots.txt names sitemaps not yet admitted, by the
    /// task admitting them: their robots.txt is not persisted until then,
    /// so a crash or a failed host refetches it and finds them again.
    announcing: HashMap<TaskId, String>,
    /// The policy in force: the configured one, slowed by the operator's
    /// [`Slowdown`] if any.
    policy: Policy,
    /// The operator's slow-down of this host.
    slowdown: Option<Slowdown>,
    /// What the host did since its actor started (for listings).
    stats: HostStats,
}

/// What a host did since its actor started: kept in memory only, for the
/// admin API's listings (the busiest, slowest and failing hosts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HostStats {
    /// Responses received for pages and sitemaps.
    pub fetched: u64,
    /// Requests that failed: timeouts, connection errors, 5xx and 429
    /// responses (what backs a host off).
    pub errors: u64,
    /// Time on the wire of its responses, smoothed (EWMA, α = 0.2), in
    /// milliseconds; `None` before the first response.
    pub response_ms: Option<f64>,
}

impl HostStats {
    /// Counts a request's end: a response after `wire` (or none), and
    /// whether it backs the host off.
    fn count(&mut self, wire: Option<Duration>, outcome: Outcome) {
        if !matches!(outcome, Outcome::Success | Outcome::Lost) {
            self.errors += 1;
        }
        let Some(wire) = wire else {
            return;
        };
        self.fetched += 1;
        let ms = wire.as_secs_f64() * 1e3;
        self.response_ms = Some(match self.response_ms {
            Some(avg) => avg + 0.2 * (ms - avg),
            None => ms,
        });
    }
}

impl HostMachine {
    /// A host resuming from its saved `state` at `now`.
    pub fn new(
        host: String,
        settings: Arc<HostSettings>,
        metrics: Arc<Metrics>,
        state: HostState,
        now: Now,
    ) -> Self {
        let mut politeness = match &state.schedule {
            Some(s) => HostPoliteness::restore(s, now.at, now.wall, settings.crashed),
            None => HostPoliteness::new(now.at),
        };
        let crawl_delay = state.robots.values().find_map(|r| {
            robots::Rules::from_record(r, &settings.robots.product_token).crawl_delay
        });
        politeness.set_crawl_delay(crawl_delay);
        if let Some(hold) = state.hold {
            // A request of its last life may still be on the wire.
            politeness.honour_hold(&settings.policy, hold, now.at, now.wall);
        }
        let jitter = xxhash_rust::xxh3::xxh3_64(host.as_bytes()) | 1;
        let ip = host
            .trim_matches(['[', ']'])
            .parse()
            .ok()
            .or_else(|| settings.dns.lookup(&host))
            .or(state.ip);
        let attempts = state
            .attempts
            .iter()
            .map(|&(fp, failed, throttled)| (Fingerprint(fp), Attempts { failed, throttled }))
            .collect();
        let settings_policy = settings.policy.clone();
        HostMachine {
            host,
            settings,
            metrics,
            head: Head::default(),
            attempts,
            politeness,
            origins: HashMap::new(),
            saved_robots: state.robots,
            in_flight: HashMap::new(),
            running: HashMap::new(),
            delayed: Vec::new(),
            next_id: 0,
            armed: None,
            draining: false,
            drain_pending: false,
            passivating: false,
            yielding: false,
            jitter,
            ip,
            ip_waiting: false,
            held_until_ms: 0,
            failing_tasks: 0,
            announcing: HashMap::new(),
            policy: settings_policy,
            slowdown: None,
            stats: HostStats::default(),
        }
    }

    /// Applies (or with `None` lifts) the operator's slow-down. A larger
    /// floor counts from the last response at once; lifting it lets the
    /// next response's delay be the configured one (what is owed now
    /// stays owed). A lower in-flight limit lets the requests in flight
    /// finish. Call [`HostMachine::poll`] after: a lifted limit may let a
    /// request start.
    pub fn set_slowdown(&mut self, slowdown: Option<Slowdown>) {
        self.slowdown = slowdown;
        self.policy = self.settings.policy.slowed_by(slowdown.as_ref());
        self.politeness.stretch_to(self.policy.min_delay);
    }

    /// The host's name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// When the machine wants to be called next ([`Effect::WakeAt`] armed
    /// and not yet fired).
    pub fn armed(&self) -> Option<Instant> {
        self.armed
    }

    /// The rank of the best new URL it has loaded, if any.
    pub fn best_rank(&self) -> Option<Rank> {
        self.head.best_rank()
    }

    /// The settings it decides by.
    pub fn settings(&self) -> Arc<HostSettings> {
        self.settings.clone()
    }

    /// The metrics it counts in.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// New work was queued: at the priority levels and best ranks of
    /// `arrivals` (its [`RECRAWL_BIT`]: refreshes were made due).
    pub fn wake(&mut self, arrivals: Arrivals, queue: &dyn QueueSource, now: Now) -> Vec<Effect> {
        let levels = arrivals.bits();
        for level in 0..LEVELS {
            if levels & (1 << level) != 0 {
                self.head.exhausted[level] = false;
            }
            if let Some(rank) = arrivals.best(level) {
                self.head.arrived(&self.host, level, rank);
            }
        }
        if levels & RECRAWL_BIT != 0 {
            self.head.recrawl_next = RecrawlNext::Unknown;
        }
        self.poll(queue, now)
    }

    /// The armed timer fired.
    pub fn timer(&mut self, queue: &dyn QueueSource, now: Now) -> Vec<Effect> {
        self.armed = None;
        self.poll(queue, now)
    }

    /// A slot of the host's address may have freed.
    pub fn ip_freed(&mut self, queue: &dyn QueueSource, now: Now) -> Vec<Effect> {
        self.ip_waiting = false;
        self.poll(queue, now)
    }

    /// Starts every request and task the policy allows at `now`, then
    /// arms the timer, or asks to be passivated.
    pub fn poll(&mut self, queue: &dyn QueueSource, now: Now) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_due_tasks(now, &mut fx);
        let share = self.settings.recrawl.refresh_share;
        while !self.draining && !self.passivating {
            let Some(source) = self.head.choose(&self.host, queue, now.unix_ms(), share) else {
                break;
            };
            if !self.dispatch_one(source, now, &mut fx) {
                break;
            }
        }
        self.settle(now, &mut fx);
        fx
    }

    /// Tries to start the entry at `source`; `false` when the host must
    /// wait (a timer, a robots.txt fetch or a slot will call again).
    fn dispatch_one(&mut self, source: Source, now: Now, fx: &mut Vec<Effect>) -> bool {
        let Some(raw) = self.head.peek(source).map(|e| e.value.url.clone()) else {
            return false;
        };
        let Ok(url) = Url::parse(&raw) else {
            self.finish_unfetched(source, UrlState::Failed, now, fx);
            return true;
        };
        let origin = robots::origin_key(&url);
        self.ensure_origin(&origin, &url);
        let now_ms = now.unix_ms();
        let robots = &self.origins[&origin];
        let allowed = match robots.need(now_ms, &self.settings.robots) {
            Need::InFlight => return false,
            Need::RetryAt(at_ms) => {
                self.count_robots("unreachable_wait");
                self.arm(now.instant_at_ms(at_ms), fx);
                return false;
            }
            Need::GiveUp => {
                self.count_robots("unreachable_dropped");
                self.finish_unfetched(source, UrlState::RobotsUnreachable, now, fx);
                return true;
            }
            Need::Denied => {
                self.count_robots("denied");
                self.finish_unfetched(source, UrlState::Denied, now, fx);
                return true;
            }
            Need::Fetch(robots_url) => {
                // A parked or backed-off host still gives up on time.
                let give_up = robots.give_up_at_ms(&self.settings.robots);
                match self.acquire(now, fx) {
                    Some((permit, slot)) => {
                        self.start_robots(origin, robots_url, permit, slot, now, fx);
                        return true;
                    }
                    None => {
                        if let Some(at_ms) = give_up {
                            self.arm(now.instant_at_ms(at_ms), fx);
                        }
                        return false;
                    }
                }
            }
            Need::Ready(rules) => rules.allows(&url),
        };
        if !allowed {
            self.count_robots("disallowed");
            self.finish_unfetched(source, UrlState::Disallowed, now, fx);
            return true;
        }
        let Some((permit, slot)) = self.acquire(now, fx) else {
            return false;
        };
        self.count_robots("allowed");
        let Some(entry) = self.head.take(source) else {
            self.politeness.cancel(permit);
            return false;
        };
        let validators = validators(&entry);
        let sent_ms = now.unix_ms();
        self.send(
            Requested::Entry {
                entry,
                url,
                sent_ms,
            },
            validators,
            (permit, slot),
            now,
            fx,
        );
        true
    }

    fn count_robots(&self, decision: &str) {
        self.metrics
            .robots_decisions
            .with_label_values(&[decision])
            .inc();
    }

    fn next_id(&mut self) -> TaskId {
        self.next_id += 1;
        self.next_id
    }

    fn ensure_origin(&mut self, origin: &str, url: &Url) {
        if !self.origins.contains_key(origin) {
            let saved = self.saved_robots.remove(origin);
            let state = OriginRobots::new(url, saved, &self.settings.robots);
            self.origins.insert(origin.to_owned(), state);
        }
    }

    /// Takes a permit (and the address's slot, with per-IP politeness), or
    /// arranges to be called again when one may be free.
    fn acquire(&mut self, now: Now, fx: &mut Vec<Effect>) -> Option<(Permit, Option<IpSlot>)> {
        let permit = match self.politeness.try_acquire(&self.policy, now.at) {
            Ok(permit) => permit,
            Err(Wait::Busy) => return None,
            Err(Wait::Until(at)) => {
                self.arm(at, fx);
                return None;
            }
        };
        let (Some(slots), Some(ip)) = (&self.settings.ip_slots, self.ip) else {
            return Some((permit, None));
        };
        match slots.try_take(ip) {
            Ok(slot) => Some((permit, Some(slot))),
            Err(freed) => {
                self.politeness.cancel(permit);
                if !self.ip_waiting {
                    self.ip_waiting = true;
                    fx.push(Effect::WaitForIp(freed));
                }
                None
            }
        }
    }

    /// Arms the timer for `at` unless it is already armed no later.
    fn arm(&mut self, at: Instant, fx: &mut Vec<Effect>) {
        if self.armed.is_some_and(|armed| armed <= at) {
            return;
        }
        self.armed = Some(at);
        fx.push(Effect::WakeAt(at));
    }

    fn start_robots(
        &mut self,
        origin: String,
        url: Url,
        permit: Permit,
        slot: Option<IpSlot>,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(state) = self.origins.get_mut(&origin) {
            state.fetch_started(url.clone());
        }
        let plain = Validators::default();
        let what = Requested::Robots { origin, url };
        self.send(what, plain, (permit, slot), now, fx);
    }

    /// Hands out the request `what` under its permit (and IP slot), with
    /// its deadline one request timeout from `now` and its hold to persist.
    fn send(
        &mut self,
        what: Requested,
        validators: Validators,
        (permit, slot): (Permit, Option<IpSlot>),
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let id = self.next_id();
        let (url, page) = match &what {
            Requested::Robots { url, .. } => (url.clone(), false),
            Requested::Entry { url, .. } => (url.clone(), true),
        };
        let timeout = self.settings.request_timeout;
        let deadline = now.at + timeout;
        let hold = Hold {
            sent_ms: now.unix_ms(),
            // Never earlier than the deadline (see `Now::ms_at`).
            until_ms: now.ms_at(deadline),
        };
        let write = self.hold_to_write(hold, timeout);
        fx.push(Effect::Fetch {
            id,
            url,
            hold: write,
            deadline,
            validators,
            page,
        });
        self.in_flight.insert(
            id,
            InFlight {
                what,
                permit,
                sent: now.at,
                deadline,
                hold,
                _ip_slot: slot,
            },
        );
    }

    /// The claim to write before a request holding `hold` leaves: `None`
    /// if the claim on record reaches past its deadline already; else the
    /// claim of every request in flight and this one, reaching a quarter
    /// of `timeout` past this one's deadline ([`HOLD_AHEAD_DIVISOR`]).
    fn hold_to_write(&self, hold: Hold, timeout: Duration) -> Option<Hold> {
        if hold.until_ms <= self.held_until_ms {
            return None;
        }
        let ahead = (timeout / HOLD_AHEAD_DIVISOR).as_millis() as u64;
        let joined = self.hold().map_or(hold, |h| h.join(hold));
        Some(Hold {
            sent_ms: joined.sent_ms,
            until_ms: joined.until_ms.saturating_add(ahead),
        })
    }

    /// The claim `hold` of [`Effect::Fetch`] is written: requests whose
    /// deadlines it reaches go without writing one.
    pub fn hold_written(&mut self, hold: Hold) {
        if !self.in_flight.is_empty() {
            self.held_until_ms = self.held_until_ms.max(hold.until_ms);
        }
    }

    /// The state to persist now: once it records no claim (nothing in
    /// flight), the claim on record is gone and the next request writes
    /// one again.
    fn persisted_state(&mut self, now: Now) -> HostState {
        let state = self.state(now);
        if state.hold.is_none() {
            self.held_until_ms = 0;
        }
        state
    }

    /// When request `flight`, answered with `result` at `now`, stopped
    /// occupying its host, and how long it took. An answer ends it at
    /// once, after its time on the wire; a request the crawl gave up on
    /// after it may have reached the server (a timeout, a reset) occupies
    /// the host until its deadline, having taken from its start to then;
    /// one that never reached the server (no address, refused, denied)
    /// ends now, having taken no time of the host's.
    fn ended(
        flight: &InFlight,
        result: &Result<FetchResponse, FetchError>,
        now: Now,
    ) -> (Instant, Duration) {
        match result {
            Ok(response) => (now.at, response.elapsed),
            Err(err) if err.may_have_reached_server() => Self::to_deadline(flight, now),
            Err(_) => (now.at, Duration::ZERO),
        }
    }

    /// An abandoned `flight` occupies its host until its deadline (or
    /// `now`, if later), having taken from its start to then.
    fn to_deadline(flight: &InFlight, now: Now) -> (Instant, Duration) {
        let until = flight.deadline.max(now.at);
        (until, until.saturating_duration_since(flight.sent))
    }

    /// Completes the entry at `source` without fetching it.
    fn finish_unfetched(
        &mut self,
        source: Source,
        state: UrlState,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(entry) = self.head.take(source) {
            self.complete(entry, state, now, fx);
        }
    }

    /// Finishes `entry` without a response (`state` says why): its record
    /// settled by [`lifecycle::unfetched`], a removal reported first.
    fn complete(&mut self, entry: QueueEntry, state: UrlState, now: Now, fx: &mut Vec<Effect>) {
        self.attempts.remove(&entry.value.fp);
        let settled = lifecycle::unfetched(
            entry.previous.as_deref(),
            entry.value.depth,
            state,
            now.unix_ms(),
            &self.settings.recrawl,
        );
        let removed = settled.removed.and_then(|reason| {
            Some(Removed {
                url: Url::parse(&entry.value.url).ok()?,
                reason,
                last_status: settled.record.last.as_ref().map(|v| v.status),
                depth: entry.value.depth,
                at_ms: now.unix_ms(),
            })
        });
        let completion = Completion {
            key: entry.key,
            recrawl: entry.recrawl,
            value: entry.value,
            record: settled.record,
        };
        let finish = Finish {
            completion,
            removed,
        };
        self.run(Task::Complete(Box::new(finish)), now, fx);
    }

    fn run(&mut self, task: Task, now: Now, fx: &mut Vec<Effect>) {
        let id = self.next_id();
        self.run_as(id, task, 0, now, fx);
    }

    fn run_as(&mut self, id: TaskId, task: Task, failures: u32, now: Now, fx: &mut Vec<Effect>) {
        self.running.insert(id, failures);
        fx.push(Effect::Run {
            id,
            task,
            schedule: self.schedule(now),
        });
    }

    /// The answer to [`Effect::Fetch`] `id`: the result and how long the
    /// request took on the wire (from when it was sent, not from when the
    /// host took its permit).
    pub fn fetched(
        &mut self,
        id: TaskId,
        result: Result<FetchResponse, FetchError>,
        queue: &dyn QueueSource,
        now: Now,
    ) -> Vec<Effect> {
        let mut fx = Vec::new();
        let Some(flight) = self.in_flight.remove(&id) else {
            return self.poll(queue, now);
        };
        if let Ok(FetchResponse { ip: Some(ip), .. }) = &result {
            self.ip = Some(*ip);
        }
        let outcome = response::politeness_outcome(&result, now.wall);
        let (until, took) = Self::ended(&flight, &result, now);
        let abandoned = result
            .as_ref()
            .is_err_and(FetchError::may_have_reached_server);
        let ended = Ended {
            until,
            took,
            outcome,
            abandoned,
        };
        if abandoned {
            self.metrics.requests_abandoned.inc();
            tracing::debug!(host = %self.host, held_for_ms = until.saturating_duration_since(now.at).as_millis() as u64, "request abandoned; the host is held until its deadline");
        }
        let InFlight {
            what,
            permit,
            _ip_slot,
            ..
        } = flight;
        match what {
            Requested::Robots { origin, url } => {
                // Read the file first: its Crawl-delay already governs the
                // wait after this very request; the state is saved after the
                // release, with the schedule that request set.
                let save = self.robots_fetched(origin, url, result, now, &mut fx);
                self.release(permit, ended);
                if save {
                    fx.push(Effect::Save(self.persisted_state(now)));
                }
            }
            Requested::Entry {
                entry,
                url,
                sent_ms,
            } => {
                self.stats
                    .count(result.as_ref().ok().map(|r| r.elapsed), outcome);
                self.release(permit, ended);
                let answer = EntryAnswer {
                    entry,
                    url,
                    sent_ms,
                    result,
                };
                self.entry_fetched(answer, queue, now, &mut fx);
            }
        }
        drop(_ip_slot);
        fx.extend(self.poll(queue, now));
        fx
    }

    /// The answer to request `id` was lost inside the node: an internal
    /// condition, never counted against the host (no failure, no backoff,
    /// no try). `sent`: the request may have left (the fetcher's mailbox
    /// closed or its reply was dropped), so it occupies the host until its
    /// deadline like any abandoned request; otherwise it never left (its
    /// hold could not be written, its lease ended, its host is gone) and
    /// the host owes only its ordinary delay before the URL is asked for
    /// again.
    pub fn fetch_lost(
        &mut self,
        id: TaskId,
        sent: bool,
        queue: &dyn QueueSource,
        now: Now,
    ) -> Vec<Effect> {
        if let Some(flight) = self.in_flight.remove(&id) {
            let (until, took) = match sent {
                true => Self::to_deadline(&flight, now),
                false => (now.at, Duration::ZERO),
            };
            let ended = Ended {
                until,
                took,
                outcome: Outcome::Lost,
                abandoned: sent,
            };
            self.release(flight.permit, ended);
            match flight.what {
                Requested::Entry { entry, .. } => self.head.retry.push_front(entry),
                Requested::Robots { origin, .. } => {
                    if let Some(state) = self.origins.get_mut(&origin) {
                        state.fetch_abandoned();
                    }
                }
            }
        }
        self.poll(queue, now)
    }

    /// Frees the permit of a request that `ended`, and counts the wait it
    /// imposed.
    fn release(&mut self, permit: Permit, ended: Ended) {
        let Ended {
            until,
            took,
            outcome,
            abandoned,
        } = ended;
        let jitter = self.next_jitter();
        let released = self
            .politeness
            .release(&self.policy, permit, until, took, outcome, jitter);
        self.metrics
            .politeness_waits
            .with_label_values(&[released.reason.as_str()])
            .inc();
        if released.parked {
            // Routine on a large crawl of unreliable hosts: a debug event
            // (at INFO, 100,000 dead hosts would flood the log), counted by
            // what parked it: a host slower than the timeouts is told
            // apart from one that fails.
            let cause = match abandoned {
                true => "timeouts",
                false => "errors",
            };
            self.metrics.hosts_parked.with_label_values(&[cause]).inc();
            tracing::debug!(host = %self.host, for_s = released.delay.as_secs(), cause, "host parked after repeated failures; its queue is kept");
        }
    }

    /// A number in `[0, 1)` for backoff jitter (xorshift; no need for a
    /// cryptographic generator to spread retries).
    fn next_jitter(&mut self) -> f64 {
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        (self.jitter >> 11) as f64 / (1u64 << 53) as f64
    }

    fn entry_fetched(
        &mut self,
        answer: EntryAnswer,
        queue: &dyn QueueSource,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let EntryAnswer {
            entry,
            url,
            sent_ms,
            result,
        } = answer;
        let fp = entry.value.fp;
        if !self.attempts.contains_key(&fp) && response::may_retry(&result) {
            let tries = self.stored_tries(&entry, queue);
            self.attempts.insert(fp, tries);
        }
        let attempts = self.attempts.entry(fp).or_default();
        match response::classify(&result, attempts, self.settings.retries) {
            response::Retry::Again => {
                // Not archived: the server did not serve the page this time.
                self.metrics.urls.with_label_values(&["retried"]).inc();
                tracing::debug!(host = %self.host, %url, "will try again");
                let tries = Tries {
                    failed: attempts.failed,
                    throttled: attempts.throttled,
                };
                let record = lifecycle::retry(entry.previous.as_deref(), entry.value.depth, tries);
                let completion = Completion {
                    key: entry.key.clone(),
                    recrawl: entry.recrawl,
                    value: entry.value.clone(),
                    record,
                };
                self.run(Task::RecordTries(Box::new(completion)), now, fx);
                self.head.retry.push_back(entry);
            }
            response::Retry::Denied => self.complete(entry, UrlState::Denied, now, fx),
            response::Retry::GiveUp => self.complete(entry, UrlState::Failed, now, fx),
            response::Retry::Process => {
                self.attempts.remove(&fp);
                if let Ok(response) = result {
                    self.run(
                        Task::Process(Box::new(Job {
                            entry,
                            url,
                            response: Arc::new(response),
                            flow: Default::default(),
                            archived: None,
                            outbox: Vec::new(),
                            next_due_ms: None,
                            visited_ms: sent_ms,
                        })),
                        now,
                        fx,
                    );
                }
            }
        }
    }

    /// The tries a URL had before this run (stored with its record), so a
    /// restart does not give a failing URL fresh tries.
    fn stored_tries(&self, entry: &QueueEntry, queue: &dyn QueueSource) -> Attempts {
        let record = match &entry.previous {
            Some(previous) => Some((**previous).clone()),
            None => queue.url_record(entry.value.fp).unwrap_or_else(|err| {
                tracing::warn!(host = %self.host, error = %err, "cannot read a url's tries");
                None
            }),
        };
        record.map_or_else(Attempts::default, |r| Attempts {
            failed: r.tries.failed,
            throttled: r.tries.throttled,
        })
    }

    /// Takes a robots.txt answer; whether the host's state is to be saved.
    fn robots_fetched(
        &mut self,
        origin: String,
        url: Url,
        result: Result<FetchResponse, FetchError>,
        now: Now,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let now_ms = now.unix_ms();
        let Some(state) = self.origins.get_mut(&origin) else {
            return false;
        };
        let fetch_result = match &result {
            Ok(resp) => robots_result(resp),
            Err(FetchError::SsrfDenied(reason)) => {
                // The same next time: nothing of this origin is fetched.
                tracing::debug!(host = %self.host, origin, reason, "robots.txt address denied; the origin's urls are recorded denied");
                state.deny();
                return false;
            }
            Err(err) => {
                tracing::debug!(host = %self.host, error = %err, "robots.txt unreachable");
                FetchResult {
                    status: None,
                    location: None,
                    body: Vec::new(),
                }
            }
        };
        let mut save = false;
        match state.fetch_done(fetch_result, now_ms, &self.settings.robots) {
            Fetched::Stored(record) => {
                let rules =
                    robots::Rules::from_record(&record, &self.settings.robots.product_token);
                if rules
                    .crawl_delay
                    .is_some_and(|d| d > self.settings.policy.max_crawl_delay)
                {
                    self.metrics.crawl_delay_capped.inc();
                }
                self.politeness.set_crawl_delay(rules.crawl_delay);
                if self.settings.sitemaps.is_some() {
                    // Persisted once its sitemaps are admitted.
                    let found = response::robots_sitemaps(
                        &url,
                        &rules.sitemaps,
                        rules.status(),
                        &self.host,
                    );
                    let id = self.next_id();
                    self.announcing.insert(id, origin.clone());
                    self.run_as(id, Task::Discover(found), 0, now, fx);
                } else {
                    save = true;
                }
            }
            Fetched::Failed { retry_at_ms } => {
                save = true;
                tracing::debug!(host = %self.host, origin, retry_in_ms = retry_at_ms.saturating_sub(now_ms), "robots.txt fetch failed; will retry");
            }
            Fetched::Redirect(next) => {
                tracing::debug!(host = %self.host, to = %next, "robots.txt redirects");
            }
        }
        if let Ok(response) = result {
            self.run(
                Task::ArchiveRobots {
                    url,
                    response: Arc::new(response),
                },
                now,
                fx,
            );
        }
        save
    }

    /// The answer to [`Effect::Run`] `id`, with the task given back. A
    /// failed task runs again after a backoff (its entry stays queued in
    /// the store meanwhile, so a crash loses nothing); the host's own
    /// politeness is not touched: the store, the archive or a mailbox
    /// failed, not the host.
    pub fn task_done(
        &mut self,
        id: TaskId,
        task: Task,
        result: Result<(), Failure>,
        queue: &dyn QueueSource,
        now: Now,
    ) -> Vec<Effect> {
        let failures = self.running.remove(&id).unwrap_or(0);
        if result.is_ok() {
            if let Some(key) = task.completed_key() {
                self.head.completed(key);
            }
        }
        if let Err(failure) = result {
            self.metrics
                .pipeline_failures
                .with_label_values(&[task.label(), failure.stage()])
                .inc();
            if let Task::RecordTries(_) = task {
                tracing::warn!(host = %self.host, error = %failure, "cannot store a url's tries; they are kept in memory");
            } else if self.draining {
                // The entry stays queued in the store for the next run.
                tracing::warn!(host = %self.host, task = task.label(), error = %failure, "a task failed while draining; its url stays queued");
            } else {
                let failures = failures + 1;
                let doublings = (failures - 1).min(16);
                let wait = TASK_RETRY_BASE
                    .saturating_mul(1 << doublings)
                    .min(TASK_RETRY_MAX);
                tracing::warn!(host = %self.host, task = task.label(), error = %failure, retry_in_s = wait.as_secs(), "a task failed; it will run again");
                if failures == 1 {
                    self.failing_tasks += 1;
                }
                self.delayed.push((
                    Delayed {
                        at: now.at + wait,
                        id,
                        task,
                    },
                    failures,
                ));
            }
        } else {
            if failures > 0 {
                self.failing_tasks = self.failing_tasks.saturating_sub(1);
            }
            if let Some(due_ms) = task.next_due_ms() {
                self.head.recrawl_scheduled(due_ms);
            }
            if self.announcing.remove(&id).is_some() {
                let mut fx = vec![Effect::Save(self.persisted_state(now))];
                fx.extend(self.poll(queue, now));
                return fx;
            }
        }
        self.poll(queue, now)
    }

    /// Hands out again the failed tasks whose wait is over, and arms the
    /// timer for the next one.
    fn run_due_tasks(&mut self, now: Now, fx: &mut Vec<Effect>) {
        if self.draining {
            return;
        }
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|(d, _)| d.at <= now.at);
        self.delayed = waiting;
        for (d, failures) in due {
            self.run_as(d.id, d.task, failures, now, fx);
        }
        if let Some(at) = self.delayed.iter().map(|(d, _)| d.at).min() {
            self.arm(at, fx);
        }
    }

    /// Stops dispatching; [`Effect::Drained`] follows once nothing is in
    /// flight or running. Failed tasks waiting to run again are dropped:
    /// their entries stay queued in the store for the next run.
    pub fn drain(&mut self, now: Now) -> Vec<Effect> {
        self.draining = true;
        self.drain_pending = true;
        if !self.delayed.is_empty() {
            self.failing_tasks = 0;
            self.delayed.clear();
        }
        let mut fx = Vec::new();
        self.settle(now, &mut fx);
        fx
    }

    /// The partition did not passivate the host: new work arrived.
    pub fn passivation_refused(&mut self, queue: &dyn QueueSource, now: Now) -> Vec<Effect> {
        self.passivating = false;
        self.yielding = false;
        self.poll(queue, now)
    }

    /// The partition asks for the host's slot (hosts wait for one and this
    /// one has held its slot for a cycle, `[frontier] host_cycle`): it
    /// passivates once nothing is in flight or running, due again when
    /// its politeness allows, and takes its turn among the due hosts.
    /// Nothing is dropped: its queue is on disk.
    pub fn yield_slot(&mut self, now: Now) -> Vec<Effect> {
        self.yielding = true;
        let mut fx = Vec::new();
        self.settle(now, &mut fx);
        fx
    }

    /// Nothing in flight and nothing running.
    fn quiet(&self) -> bool {
        self.in_flight.is_empty() && self.running.is_empty()
    }

    /// Answers a drain once quiet; otherwise, when quiet with nothing to
    /// do soon, asks to be passivated.
    fn settle(&mut self, now: Now, fx: &mut Vec<Effect>) {
        if !self.quiet() {
            return;
        }
        if self.draining {
            if std::mem::take(&mut self.drain_pending) {
                fx.push(Effect::Drained(self.persisted_state(now)));
            }
            return;
        }
        if self.passivating || self.ip_waiting || !self.delayed.is_empty() {
            return;
        }
        let refresh_wait = self.head.is_empty();
        let due_ms = if refresh_wait {
            // Only refreshes due later, if any: wait for the next one
            // here when it is close, else in the due index.
            match self.head.next_refresh_ms() {
                None => None,
                Some(at_ms)
                    if self.yielding || at_ms > now.unix_ms() + self.passivate_after_ms() =>
                {
                    Some(at_ms)
                }
                Some(at_ms) => {
                    self.arm(now.instant_at_ms(at_ms), fx);
                    return;
                }
            }
        } else {
            match self.armed {
                Some(at) if self.yielding || at > now.at + self.settings.passivate_after => {
                    Some(now.ms_at(at))
                }
                // Nothing armed: the next step is the host's own (a task's
                // answer); it settles again then.
                _ => return,
            }
        };
        self.passivating = true;
        fx.push(Effect::Passivate {
            state: self.persisted_state(now),
            due_ms,
            refresh_wait,
        });
    }

    fn passivate_after_ms(&self) -> u64 {
        self.settings.passivate_after.as_millis() as u64
    }

    /// The host's politeness schedule as persisted.
    pub fn schedule(&self, now: Now) -> Schedule {
        self.politeness.schedule(now.at, now.wall)
    }

    /// The state persisted when the host passivates or drains.
    pub fn state(&self, now: Now) -> HostState {
        let mut robots = self.saved_robots.clone();
        for (origin, state) in &self.origins {
            if self.announcing.values().any(|o| o == origin) {
                continue;
            }
            if let Some(record) = state.record() {
                robots.insert(origin.clone(), record);
            }
        }
        HostState {
            robots,
            schedule: Some(self.schedule(now)),
            // A URL's tries are in its record (written as they happen).
            attempts: Vec::new(),
            ip: self.ip,
            hold: self.hold(),
        }
    }

    /// The claim of the requests in flight on the host, if any, reaching
    /// as far as the claim on record (a state saved now never shortens
    /// the claim a request in flight went out under).
    pub fn hold(&self) -> Option<Hold> {
        let joined = self.in_flight.values().map(|f| f.hold).reduce(Hold::join)?;
        Some(Hold {
            until_ms: joined.until_ms.max(self.held_until_ms),
            ..joined
        })
    }

    /// Observable state; `queued_by_priority` is the store's count.
    pub fn snapshot(&self, now: Now, queued_by_priority: [u64; LEVELS]) -> HostSnapshot {
        let state = self.state(now);
        let token = &self.settings.robots.product_token;
        HostSnapshot {
            host: self.host.clone(),
            active: true,
            robots: state
                .robots
                .iter()
                .map(|(origin, record)| RobotsSummary::of(origin, record, token))
                .collect(),
            robots_failing: self
                .origins
                .iter()
                .filter(|(_, o)| o.failing())
                .map(|(origin, _)| origin.clone())
                .collect(),
            politeness: PolitenessSnapshot {
                in_flight: self.politeness.in_flight(),
                next_allowed_in_ms: self
                    .politeness
                    .next_allowed()
                    .saturating_duration_since(now.at)
                    .as_millis() as u64,
                failures: self.politeness.failures(),
                parked: self.politeness.parked(now.at),
                crawl_delay_ms: self.politeness.crawl_delay().map(|d| d.as_millis() as u64),
                min_delay_ms: self.policy.min_delay.as_millis() as u64,
                max_in_flight: self.policy.max_in_flight,
                slowdown: self.slowdown,
            },
            queued_by_priority,
            head: self.head.len(),
            best_score: self.head.best_rank().map(|rank| rank.cash().get()),
            processing: self.running.len() + self.delayed.len(),
            failing_tasks: self.failing_tasks,
            stats: self.stats,
        }
    }
}

/// The validators a refresh of `entry` is asked with: those of the copy on
/// record, when a copy is (a 304 must confirm something the archive has).
fn validators(entry: &QueueEntry) -> Validators {
    let last = entry.previous.as_ref().and_then(|r| r.last.as_ref());
    match last {
        Some(v) if v.copy.is_some() && v.digest.is_some() => Validators {
            etag: v.etag.clone(),
            last_modified: v.last_modified.clone(),
        },
        _ => Validators::default(),
    }
}

/// Observable state of a host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HostSnapshot {
    /// The host.
    pub host: String,
    /// Whether an actor is active for it (else the state is the stored one).
    pub active: bool,
    /// robots.txt per origin.
    pub robots: Vec<RobotsSummary>,
    /// Origins whose robots.txt is currently unreachable.
    pub robots_failing: Vec<String>,
    /// Politeness state.
    pub politeness: PolitenessSnapshot,
    /// Durable queue sizes by priority level (0 = seeds … 3 = low).
    pub queued_by_priority: [u64; LEVELS],
    /// Entries loaded in memory and not yet dispatched.
    pub head: usize,
    /// The estimated importance (OPIC cash) of the richest new URL loaded
    /// in memory: what the host fetches next at its level; none when
    /// dormant or when nothing ranked is loaded.
    pub best_score: Option<f32>,
    /// Fetched entries being parsed, archived and admitted (or waiting to
    /// try that again).
    pub processing: usize,
    /// Tasks that failed (store, archive) and wait to run again.
    pub failing_tasks: u64,
    /// What it did since its actor started (zero when dormant).
    pub stats: HostStats,
}

impl HostSnapshot {
    /// The snapshot of a host without an actor, from its stored `state`
    /// and queue sizes, as seen at `now`.
    pub fn dormant(
        host: &str,
        state: &HostState,
        queued_by_priority: [u64; LEVELS],
        settings: &HostSettings,
        slowdown: Option<Slowdown>,
        now: Now,
    ) -> Self {
        let product_token = &settings.robots.product_token;
        let policy = settings.policy.slowed_by(slowdown.as_ref());
        let now_ms = now.unix_ms();
        let robots: Vec<_> = state
            .robots
            .iter()
            .map(|(origin, record)| RobotsSummary::of(origin, record, product_token))
            .collect();
        let schedule = state.schedule.unwrap_or_default();
        HostSnapshot {
            host: host.to_owned(),
            active: false,
            politeness: PolitenessSnapshot {
                in_flight: 0,
                next_allowed_in_ms: schedule.next_allowed_ms.saturating_sub(now_ms),
                failures: schedule.failures,
                parked: schedule.parked_until_ms > now_ms,
                crawl_delay_ms: robots.iter().find_map(|r| r.crawl_delay_ms),
                min_delay_ms: policy.min_delay.as_millis() as u64,
                max_in_flight: policy.max_in_flight,
                slowdown,
            },
            robots,
            robots_failing: Vec::new(),
            queued_by_priority,
            head: 0,
            best_score: None,
            processing: 0,
            failing_tasks: 0,
            stats: HostStats::default(),
        }
    }
}

/// The politeness part of a [`HostSnapshot`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PolitenessSnapshot {
    /// Requests in flight.
    pub in_flight: u32,
    /// Milliseconds until the next request may start (0 if due).
    pub next_allowed_in_ms: u64,
    /// Consecutive failures (backoff grows with them).
    pub failures: u32,
    /// Parked after repeated failures.
    pub parked: bool,
    /// Crawl-delay in force, in milliseconds.
    pub crawl_delay_ms: Option<u64>,
    /// The floor between a response and the next request in force
    /// (configured, or the operator's slow-down).
    pub min_delay_ms: u64,
    /// The in-flight limit in force.
    pub max_in_flight: u32,
    /// The operator's slow-down, if any.
    pub slowdown: Option<Slowdown>,
}

/// A robots.txt response as the rules are read from: its body with its
/// Content-Encoding undone (trawl asks for gzip, br and zstd), at most
/// [`robots::MAX_ROBOTS_BYTES`] of it. A body its coding does not
/// describe (a plain file labelled gzip, a corrupt stream) is read as it
/// came, as it was before trawl asked for codings: the rules of a
/// mislabelled file still apply, and garbage parses to no rules, as
/// RFC 9309's lenient reading of a 2xx body has it.
fn robots_result(resp: &FetchResponse) -> FetchResult {
    let body = if (200..300).contains(&resp.status) {
        let coding = resp.header("content-encoding");
        match crate::fetch::decode::decode_body(&resp.body, coding, robots::MAX_ROBOTS_BYTES) {
            Ok(decoded) => decoded.bytes.into_owned(),
            Err(err) => {
                tracing::debug!(error = %err, "robots.txt body not in its content-encoding; read as it came");
                resp.body.to_vec()
            }
        }
    } else {
        Vec::new()
    };
    FetchResult {
        status: Some(resp.status),
        location: resp.header("location").map(str::to_owned),
        body,
    }
}

#[cfg(test)]
mod tests;

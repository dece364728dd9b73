//! HostActor: one host's queues, robots.txt rules and politeness timer.
//!
//! The host decides *when* its next URL may be fetched and nothing else:
//! - robots.txt of an origin is fetched (redirects followed, failures
//!   retried) before any other URL of it, under the same permit and delay
//!   as every other request ([`OriginRobots`] holds that lifecycle);
//! - a request starts only with a permit from [`HostPoliteness`], which
//!   enforces `max_in_flight_per_host`, the delays, Retry-After, backoff
//!   and parking;
//! - the next URL comes from the host's priority queues by a biased choice
//!   ([`LevelPicker`]); retries go first;
//! - after a fetch the page is parsed (or the sitemap read), archived and
//!   its links admitted, and only then is the URL completed in the store
//!   (with the host's schedule), so a crash at any point re-fetches it
//!   rather than losing it or its links.
//!
//! Queues are refilled from the partition store (read-only; the partition
//! is the only writer). When the host has nothing queued, in flight or in
//! processing, it reports idle and the partition passivates it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use tokio::sync::oneshot;
use url::Url;

use super::messages::{
    Archive, Candidate, Complete, Discover, DrainHost, Failure, Fetch, GetHostSnapshot, HostIdle,
    HostSnapshot, Parse, ParseSitemap, PolitenessSnapshot, SaveHostState, Wake,
};
use super::partition::PipelineLinks;
use crate::events::EventKind;
use crate::fetch::DnsOverrides;
use crate::fetch::{FetchError, FetchResponse};
use crate::frontier::{EntryKind, LevelPicker, Priority, LEVELS};
use crate::metrics::Metrics;
use crate::politeness::ip::{IpSlot, IpSlots, SlotFreed};
use crate::politeness::{unix_ms, HostPoliteness, Outcome, Permit, Policy, Schedule, Wait};
use crate::robots::cache::{FetchResult, Fetched, Need, OriginRobots, RobotsSettings};
use crate::robots::{self, RobotsRecord, RobotsSummary};
use crate::sitemap::{select_entries, SitemapLimits};
use crate::store::{Completion, HostState, PartitionStore, QueueEntry, UrlState};
use crate::url::{self as urls, Fingerprint};

/// Queue entries read from the store at a time, per priority level.
const REFILL: usize = 32;

/// Sitemap handling knobs.
#[derive(Debug, Clone)]
pub struct SitemapSettings {
    /// Per-file limits.
    pub limits: SitemapLimits,
    /// Depth of sitemap indexes followed.
    pub max_index_depth: u32,
    /// lastmod this recent means high priority.
    pub fresh_within: Duration,
}

/// Settings shared by every host of a node.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// Politeness policy.
    pub policy: Policy,
    /// robots.txt policy.
    pub robots: RobotsSettings,
    /// Attempts per URL on retryable failures.
    pub max_attempts: u32,
    /// Redirect hops followed from a URL.
    pub max_redirects: u32,
    /// Archive 2xx responses that are not HTML (else only count them).
    pub archive_non_html: bool,
    /// Sitemap discovery, if enabled.
    pub sitemaps: Option<SitemapSettings>,
    /// The previous run did not stop cleanly: a request may have been in
    /// flight, so every host owes its last delay again.
    pub crashed: bool,
    /// Per-IP limits, if enabled.
    pub ip_slots: Option<IpSlots>,
    /// `[dns] overrides`, to know a host's address before its first fetch.
    pub dns: DnsOverrides,
}

/// What a request holds while in flight: the host's permit and, with
/// per-IP politeness, its address's slot.
struct Ticket {
    permit: Permit,
    /// Freed when dropped.
    _ip_slot: Option<IpSlot>,
}

/// Where a host sends its work.
#[derive(Clone)]
pub struct HostLinks {
    /// The node's pipeline.
    pub pipeline: PipelineLinks,
    /// Its partition: completions.
    pub complete: Recipient<Complete>,
    /// Its partition: idle reports.
    pub idle: Recipient<HostIdle>,
    /// Its partition: host state saves.
    pub save: Recipient<SaveHostState>,
}

/// Where the next entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Retry,
    Level(usize),
}

/// One active host.
pub struct HostActor {
    host: String,
    store: Arc<PartitionStore>,
    settings: Arc<HostSettings>,
    links: HostLinks,
    metrics: Arc<Metrics>,
    /// Last wake generation seen.
    generation: u64,
    /// Entries read from the store, not yet dispatched, per priority.
    queues: [VecDeque<QueueEntry>; LEVELS],
    /// Key of the last entry read per level; refills start after it.
    cursors: [Option<Vec<u8>>; LEVELS],
    /// The store had nothing more at the last refill of each level.
    exhausted: [bool; LEVELS],
    picker: LevelPicker,
    /// The level picked and not yet consumed (a wait keeps the choice).
    chosen: Option<usize>,
    /// Entries to try again (429/503/5xx/timeouts), before anything else.
    retry: VecDeque<QueueEntry>,
    attempts: HashMap<Fingerprint, u32>,
    politeness: HostPoliteness,
    /// robots.txt state per origin (`scheme://host:port`).
    origins: HashMap<String, OriginRobots>,
    /// Persisted robots.txt copies not yet turned into an origin state.
    saved_robots: BTreeMap<String, RobotsRecord>,
    /// Fetched entries still being parsed, archived or admitted.
    processing: usize,
    /// The armed politeness timer and its deadline.
    timer: Option<(Instant, SpawnHandle)>,
    /// Dispatch stopped for shutdown.
    draining: bool,
    drain_waiters: Vec<oneshot::Sender<HostState>>,
    /// A HostIdle report awaits its answer.
    idle_reported: bool,
    /// State of the jitter generator.
    jitter: u64,
    /// The host's address, when known (overrides, IP literal, responses).
    ip: Option<std::net::IpAddr>,
    /// Waiting for a slot of `ip` to free.
    ip_waiting: bool,
}

impl HostActor {
    /// A host resuming from its saved `state`.
    pub fn new(
        host: String,
        store: Arc<PartitionStore>,
        settings: Arc<HostSettings>,
        links: HostLinks,
        state: HostState,
        metrics: Arc<Metrics>,
    ) -> Self {
        let now = Instant::now();
        let mut politeness = match &state.schedule {
            Some(s) => HostPoliteness::restore(s, now, SystemTime::now(), settings.crashed),
            None => HostPoliteness::new(now),
        };
        let crawl_delay = state.robots.values().find_map(|r| {
            robots::Rules::from_record(r, &settings.robots.product_token).crawl_delay
        });
        politeness.set_crawl_delay(crawl_delay);
        let jitter = xxhash_rust::xxh3::xxh3_64(host.as_bytes()) | 1;
        let ip = host
            .trim_matches(['[', ']'])
            .parse()
            .ok()
            .or_else(|| settings.dns.lookup(&host));
        HostActor {
            host,
            store,
            settings,
            links,
            metrics,
            generation: 0,
            queues: Default::default(),
            cursors: Default::default(),
            exhausted: [false; LEVELS],
            picker: LevelPicker::default(),
            chosen: None,
            retry: VecDeque::new(),
            attempts: HashMap::new(),
            politeness,
            origins: HashMap::new(),
            saved_robots: state.robots,
            processing: 0,
            timer: None,
            draining: false,
            drain_waiters: Vec::new(),
            idle_reported: false,
            jitter,
            ip,
            ip_waiting: false,
        }
    }

    /// Starts every request the policy allows now, then arms the timer or
    /// reports idle.
    fn dispatch(&mut self, ctx: &mut Context<Self>) {
        while !self.draining {
            let Some(source) = self.choose() else { break };
            let raw = self.entry(source).value.url.clone();
            let Ok(url) = Url::parse(&raw) else {
                let entry = self.take(source);
                self.complete_without_fetch(entry, UrlState::Failed, ctx);
                continue;
            };
            let origin = robots::origin_key(&url);
            let (now, now_ms) = (Instant::now(), unix_ms(SystemTime::now()));
            self.ensure_origin(&origin, &url);
            let robots = &self.origins[&origin];
            let allowed = match robots.need(now_ms, &self.settings.robots) {
                Need::InFlight => break,
                Need::RetryAt(at_ms) => {
                    self.metrics
                        .robots_decisions
                        .with_label_values(&["unreachable_wait"])
                        .inc();
                    self.arm_timer(
                        now + Duration::from_millis(at_ms.saturating_sub(now_ms)),
                        ctx,
                    );
                    break;
                }
                Need::GiveUp => {
                    self.metrics
                        .robots_decisions
                        .with_label_values(&["unreachable_dropped"])
                        .inc();
                    let entry = self.take(source);
                    self.complete_without_fetch(entry, UrlState::RobotsUnreachable, ctx);
                    continue;
                }
                Need::Fetch(robots_url) => {
                    // A parked or backed-off host still gives up on time.
                    let give_up = robots.give_up_at_ms(&self.settings.robots);
                    match self.acquire(now, ctx) {
                        Some(ticket) => {
                            self.fetch_robots(origin, robots_url, ticket, ctx);
                            continue;
                        }
                        None => {
                            if let Some(at_ms) = give_up {
                                let wait = Duration::from_millis(at_ms.saturating_sub(now_ms));
                                self.arm_timer(now + wait, ctx);
                            }
                            break;
                        }
                    }
                }
                Need::Ready(rules) => rules.allows(&url),
            };
            if !allowed {
                self.metrics
                    .robots_decisions
                    .with_label_values(&["disallowed"])
                    .inc();
                let entry = self.take(source);
                self.complete_without_fetch(entry, UrlState::Disallowed, ctx);
                continue;
            }
            let Some(ticket) = self.acquire(now, ctx) else {
                break;
            };
            self.metrics
                .robots_decisions
                .with_label_values(&["allowed"])
                .inc();
            let entry = self.take(source);
            self.fetch_entry(entry, url, ticket, ctx);
        }
        self.check_quiet(ctx);
    }

    /// Takes a permit (and the address's slot, with per-IP politeness), or
    /// arranges to be woken when one may be free.
    fn acquire(&mut self, now: Instant, ctx: &mut Context<Self>) -> Option<Ticket> {
        let permit = match self.politeness.try_acquire(&self.settings.policy, now) {
            Ok(permit) => permit,
            Err(Wait::Busy) => return None,
            Err(Wait::Until(at)) => {
                self.arm_timer(at, ctx);
                return None;
            }
        };
        let (Some(slots), Some(ip)) = (&self.settings.ip_slots, self.ip) else {
            return Some(Ticket {
                permit,
                _ip_slot: None,
            });
        };
        match slots.try_take(ip) {
            Ok(slot) => Some(Ticket {
                permit,
                _ip_slot: Some(slot),
            }),
            Err(freed) => {
                self.politeness.cancel(permit);
                self.wait_for_ip(freed, ctx);
                None
            }
        }
    }

    fn wait_for_ip(&mut self, freed: SlotFreed, ctx: &mut Context<Self>) {
        if self.ip_waiting {
            return;
        }
        self.ip_waiting = true;
        ctx.spawn(freed.into_actor(self).map(|(), act, ctx| {
            act.ip_waiting = false;
            act.dispatch(ctx);
        }));
    }

    /// Learns the host's address from a response.
    fn learn_ip(&mut self, result: &Result<FetchResponse, FetchError>) {
        if let Ok(FetchResponse { ip: Some(ip), .. }) = result {
            self.ip = Some(*ip);
        }
    }

    /// Where the next entry comes from: retries first, then the level the
    /// picker chose (kept until its entry is taken).
    fn choose(&mut self) -> Option<Source> {
        if !self.retry.is_empty() {
            return Some(Source::Retry);
        }
        if let Some(level) = self.chosen {
            if !self.queues[level].is_empty() {
                return Some(Source::Level(level));
            }
        }
        for level in 0..LEVELS {
            if self.queues[level].is_empty() {
                self.refill(level);
            }
        }
        let queues = &self.queues;
        self.chosen = self.picker.pick(|l| !queues[l].is_empty());
        self.chosen.map(Source::Level)
    }

    fn entry(&self, source: Source) -> &QueueEntry {
        match source {
            Source::Retry => self.retry.front(),
            Source::Level(l) => self.queues[l].front(),
        }
        .expect("chosen source has an entry")
    }

    fn take(&mut self, source: Source) -> QueueEntry {
        match source {
            Source::Retry => self.retry.pop_front(),
            Source::Level(l) => {
                self.chosen = None;
                self.queues[l].pop_front()
            }
        }
        .expect("chosen source has an entry")
    }

    /// Loads the next page of one level's queue from the store.
    fn refill(&mut self, level: usize) {
        if self.exhausted[level] {
            return;
        }
        let priority = Priority::from_level(level as u8);
        match self
            .store
            .queue_page(&self.host, priority, self.cursors[level].as_deref(), REFILL)
        {
            Ok(page) if page.is_empty() => self.exhausted[level] = true,
            Ok(page) => {
                self.cursors[level] = page.last().map(|e| e.key.clone());
                self.queues[level].extend(page);
            }
            Err(err) => {
                tracing::error!(host = %self.host, error = %err, "cannot read the queue");
                self.exhausted[level] = true;
            }
        }
    }

    fn ensure_origin(&mut self, origin: &str, url: &Url) {
        if !self.origins.contains_key(origin) {
            let saved = self.saved_robots.remove(origin);
            let state = OriginRobots::new(url, saved, &self.settings.robots);
            self.origins.insert(origin.to_owned(), state);
        }
    }

    fn arm_timer(&mut self, at: Instant, ctx: &mut Context<Self>) {
        if let Some((armed_at, handle)) = self.timer {
            if armed_at <= at {
                return;
            }
            ctx.cancel_future(handle);
        }
        let delay = at.saturating_duration_since(Instant::now());
        let handle = ctx.run_later(delay, |act, ctx| {
            act.timer = None;
            act.dispatch(ctx);
        });
        self.timer = Some((at, handle));
    }

    /// A number in `[0, 1)` for backoff jitter (xorshift; no need for a
    /// cryptographic generator to spread retries).
    fn next_jitter(&mut self) -> f64 {
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        (self.jitter >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Frees the permit (and IP slot) of a request that just ended and
    /// counts the wait. Taking the whole ticket matters: a closure that
    /// only named `ticket.permit` would capture that field alone and drop
    /// the IP slot when the request *started*.
    fn release(&mut self, ticket: Ticket, outcome: Outcome) {
        let Ticket {
            permit,
            _ip_slot: ip_slot,
        } = ticket;
        let jitter = self.next_jitter();
        let released = self.politeness.release(
            &self.settings.policy,
            permit,
            Instant::now(),
            outcome,
            jitter,
        );
        self.metrics
            .politeness_waits
            .with_label_values(&[released.reason.as_str()])
            .inc();
        drop(ip_slot);
        if released.parked {
            tracing::warn!(host = %self.host, for_s = released.delay.as_secs(), "host parked after repeated failures");
        }
    }

    fn fetch_robots(&mut self, origin: String, url: Url, ticket: Ticket, ctx: &mut Context<Self>) {
        if let Some(state) = self.origins.get_mut(&origin) {
            state.fetch_started(url.clone());
        }
        let fetch = self.links.pipeline.fetch.send(Fetch { url: url.clone() });
        ctx.spawn(fetch.into_actor(self).map(move |result, act, ctx| {
            let result = result.unwrap_or_else(|e| Err(FetchError::Protocol(e.to_string())));
            let outcome = outcome_of(&result);
            act.learn_ip(&result);
            // Read the file first: its Crawl-delay already governs the wait
            // after this very request.
            act.robots_fetched(origin, url, result, ctx);
            act.release(ticket, outcome);
            act.dispatch(ctx);
        }));
    }

    fn robots_fetched(
        &mut self,
        origin: String,
        url: Url,
        result: Result<FetchResponse, FetchError>,
        ctx: &mut Context<Self>,
    ) {
        let fetch_result = match &result {
            Ok(resp) => FetchResult {
                status: Some(resp.status),
                location: resp.header("location").map(str::to_owned),
                body: resp.body.to_vec(),
            },
            Err(err) => {
                tracing::info!(host = %self.host, error = %err, "robots.txt unreachable");
                FetchResult {
                    status: None,
                    location: None,
                    body: Vec::new(),
                }
            }
        };
        let now_ms = unix_ms(SystemTime::now());
        let Some(state) = self.origins.get_mut(&origin) else {
            return;
        };
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
                self.links.save.do_send(SaveHostState {
                    host: self.host.clone(),
                    state: self.state(),
                });
                self.discover_sitemaps(&url, &rules, ctx);
            }
            Fetched::Failed { retry_at_ms } => {
                self.links.save.do_send(SaveHostState {
                    host: self.host.clone(),
                    state: self.state(),
                });
                tracing::info!(host = %self.host, origin, retry_in_ms = retry_at_ms.saturating_sub(now_ms), "robots.txt fetch failed; will retry");
            }
            Fetched::Redirect(next) => {
                tracing::debug!(host = %self.host, to = %next, "robots.txt redirects");
            }
        }
        if let Ok(response) = result {
            self.archive_side_response(url, response, EventKind::Robots, ctx);
        }
    }

    /// Archives a response that completes no queue entry (robots.txt).
    fn archive_side_response(
        &mut self,
        url: Url,
        response: FetchResponse,
        kind: EventKind,
        ctx: &mut Context<Self>,
    ) {
        self.processing += 1;
        let archive = self.links.pipeline.archive.send(Archive {
            url,
            response,
            kind,
            depth: 0,
            canonical: None,
            robots_meta: None,
            links_out: 0,
            simhash: None,
        });
        ctx.spawn(archive.into_actor(self).map(|result, act, ctx| {
            if let Err(err) = result.map_err(Failure::from).and_then(|r| r) {
                tracing::error!(host = %act.host, error = %err, "archiving robots.txt failed");
            }
            act.processing -= 1;
            act.check_quiet(ctx);
        }));
    }

    /// Offers the sitemaps robots.txt names, or `/sitemap.xml` if it names
    /// none.
    fn discover_sitemaps(
        &mut self,
        robots_url: &Url,
        rules: &robots::Rules,
        ctx: &mut Context<Self>,
    ) {
        if self.settings.sitemaps.is_none() {
            return;
        }
        let submitter = Some(self.host.clone());
        let mut candidates: Vec<Candidate> = rules
            .sitemaps
            .iter()
            .filter_map(|s| robots_url.join(s).ok())
            .map(|url| Candidate {
                referrer: None,
                url,
                depth: 0,
                priority: Priority::HIGH,
                kind: EntryKind::Sitemap {
                    submitter: submitter.clone(),
                },
            })
            .collect();
        if candidates.is_empty() {
            if let Ok(url) = robots_url.join("/sitemap.xml") {
                candidates.push(Candidate {
                    referrer: None,
                    url,
                    depth: 0,
                    priority: Priority::HIGH,
                    kind: EntryKind::Sitemap { submitter: None },
                });
            }
        }
        self.processing += 1;
        let discover = self.links.pipeline.discover.send(Discover { candidates });
        ctx.spawn(discover.into_actor(self).map(|result, act, ctx| {
            if let Err(err) = result.map_err(Failure::from).and_then(|r| r.map(|_| ())) {
                tracing::error!(host = %act.host, error = %err, "cannot queue sitemaps");
            }
            act.processing -= 1;
            act.dispatch(ctx);
        }));
    }

    fn fetch_entry(
        &mut self,
        entry: QueueEntry,
        url: Url,
        ticket: Ticket,
        ctx: &mut Context<Self>,
    ) {
        let fetch = self.links.pipeline.fetch.send(Fetch { url: url.clone() });
        ctx.spawn(fetch.into_actor(self).map(move |result, act, ctx| {
            let result = result.unwrap_or_else(|e| Err(FetchError::Protocol(e.to_string())));
            let outcome = outcome_of(&result);
            act.learn_ip(&result);
            act.release(ticket, outcome);
            let fp = entry.value.fp;
            let tries = act.attempts.entry(fp).or_insert(0);
            *tries += 1;
            let transient = result.as_ref().err().is_none_or(FetchError::is_transient);
            if outcome.is_retryable() && transient && *tries < act.settings.max_attempts {
                // Not archived: the server did not serve the page this time.
                act.retry.push_back(entry);
            } else {
                act.attempts.remove(&fp);
                act.processing += 1;
                let schedule = act.politeness.schedule(Instant::now(), SystemTime::now());
                let job = Job {
                    links: act.links.clone(),
                    settings: act.settings.clone(),
                    metrics: act.metrics.clone(),
                    host: act.host.clone(),
                    entry,
                    url,
                    schedule,
                };
                ctx.spawn(job.run(result).into_actor(act).map(|(), act, ctx| {
                    act.processing -= 1;
                    act.dispatch(ctx);
                }));
            }
            act.dispatch(ctx);
        }));
    }

    fn complete_without_fetch(
        &mut self,
        entry: QueueEntry,
        state: UrlState,
        ctx: &mut Context<Self>,
    ) {
        self.processing += 1;
        let done = self.links.complete.send(Complete {
            host: self.host.clone(),
            completion: Completion {
                fp: entry.value.fp,
                queue_key: entry.key,
                depth: entry.value.depth,
                state,
            },
            schedule: self.politeness.schedule(Instant::now(), SystemTime::now()),
        });
        ctx.spawn(done.into_actor(self).map(|result, act, ctx| {
            if let Err(err) = result.map_err(Failure::from).and_then(|r| r) {
                tracing::error!(host = %act.host, error = %err, "cannot complete a queue entry");
            }
            act.processing -= 1;
            act.check_quiet(ctx);
        }));
    }

    /// Answers drains once nothing is in flight, and reports idle once
    /// there is also nothing queued.
    fn check_quiet(&mut self, ctx: &mut Context<Self>) {
        let quiet = self.politeness.in_flight() == 0 && self.processing == 0;
        if !quiet {
            return;
        }
        for waiter in std::mem::take(&mut self.drain_waiters) {
            let _ = waiter.send(self.state());
        }
        let idle = self.retry.is_empty()
            && self.queues.iter().all(VecDeque::is_empty)
            && self.exhausted.iter().all(|&e| e);
        if !idle || self.idle_reported {
            return;
        }
        self.idle_reported = true;
        let report = self.links.idle.send(HostIdle {
            host: self.host.clone(),
            generation: self.generation,
            state: self.state(),
        });
        ctx.spawn(report.into_actor(self).map(|passivate, act, ctx| {
            act.idle_reported = false;
            match passivate {
                Ok(true) | Err(_) => ctx.stop(),
                Ok(false) => act.dispatch(ctx),
            }
        }));
    }

    /// The state persisted when the host passivates or drains.
    fn state(&self) -> HostState {
        let mut robots = self.saved_robots.clone();
        for (origin, state) in &self.origins {
            if let Some(record) = state.record() {
                robots.insert(origin.clone(), record);
            }
        }
        HostState {
            robots,
            schedule: Some(self.politeness.schedule(Instant::now(), SystemTime::now())),
        }
    }

    fn snapshot(&self) -> HostSnapshot {
        let now = Instant::now();
        let state = self.state();
        let token = &self.settings.robots.product_token;
        let queued = self
            .store
            .queued_by_priority(&self.host)
            .unwrap_or_default();
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
                    .saturating_duration_since(now)
                    .as_millis() as u64,
                failures: self.politeness.failures(),
                parked: self.politeness.parked(now),
                crawl_delay_ms: self.politeness.crawl_delay().map(|d| d.as_millis() as u64),
            },
            queued_by_priority: queued,
            head: self.retry.len() + self.queues.iter().map(VecDeque::len).sum::<usize>(),
            processing: self.processing,
        }
    }
}

/// The politeness outcome of a fetch result.
fn outcome_of(result: &Result<FetchResponse, FetchError>) -> Outcome {
    match result {
        Ok(resp) => Outcome::of_status(resp.status, resp.header("retry-after"), SystemTime::now()),
        Err(_) => Outcome::Failure,
    }
}

/// What happens to a fetched entry: parse (page) or read (sitemap),
/// archive, admit what it links to, and only then complete it. If a step
/// fails the entry is not completed: it stays queued and is fetched again
/// after a restart.
struct Job {
    links: HostLinks,
    settings: Arc<HostSettings>,
    metrics: Arc<Metrics>,
    host: String,
    entry: QueueEntry,
    url: Url,
    schedule: Schedule,
}

impl Job {
    async fn run(self, result: Result<FetchResponse, FetchError>) {
        let state = match result {
            Ok(response) => match self.archive_and_follow(response).await {
                Ok(status) => UrlState::Fetched(status),
                Err(err) => {
                    tracing::error!(url = %self.url, error = %err, "processing failed; the url stays queued");
                    return;
                }
            },
            Err(err) => {
                tracing::debug!(url = %self.url, kind = err.kind(), "fetch failed");
                UrlState::Failed
            }
        };
        let done = self
            .links
            .complete
            .send(Complete {
                host: self.host,
                completion: Completion {
                    fp: self.entry.value.fp,
                    queue_key: self.entry.key,
                    depth: self.entry.value.depth,
                    state,
                },
                schedule: self.schedule,
            })
            .await;
        if let Err(err) = done.map_err(Failure::from).and_then(|r| r) {
            tracing::error!(url = %self.url, error = %err, "cannot complete a fetched url");
        }
    }

    async fn archive_and_follow(&self, response: FetchResponse) -> Result<u16, Failure> {
        let status = response.status;
        let ok = (200..300).contains(&status);
        let mut simhash = None;
        let (found, canonical, robots_meta, kind) = match &self.entry.value.kind {
            EntryKind::Sitemap { submitter } => {
                let found = if ok {
                    self.read_sitemap(&response, submitter.as_deref()).await?
                } else {
                    Vec::new()
                };
                (found, None, None, EventKind::Sitemap)
            }
            EntryKind::Page | EntryKind::Redirected { .. } => {
                let mut found = Vec::new();
                let mut canonical = None;
                // X-Robots-Tag applies to any response; meta robots adds to it.
                let header = crate::parse::x_robots_tag(
                    response.header_values("x-robots-tag"),
                    &self.settings.robots.product_token,
                );
                let mut robots_meta = header.clone();
                if ok && response.is_html() {
                    let parsed = self
                        .links
                        .pipeline
                        .parse
                        .send(Parse {
                            url: self.url.clone(),
                            body: response.body.clone(),
                            content_type: response.header("content-type").map(str::to_owned),
                            content_encoding: response
                                .header("content-encoding")
                                .map(str::to_owned),
                        })
                        .await?;
                    canonical = parsed.canonical.clone();
                    simhash = parsed.simhash;
                    robots_meta = crate::parse::robots_directives(
                        parsed.robots_meta.as_deref(),
                        header.as_deref(),
                    );
                    if !crate::parse::forbids_following(robots_meta.as_deref()) {
                        let depth = self.entry.value.depth + 1;
                        found = parsed
                            .links
                            .into_iter()
                            .map(|u| Candidate::link(u, depth, &self.url))
                            .collect();
                    }
                } else if (300..400).contains(&status) {
                    found.extend(self.redirect_target(&response));
                } else if ok && !self.settings.archive_non_html {
                    self.metrics
                        .urls
                        .with_label_values(&["not_archived_type"])
                        .inc();
                    return Ok(status);
                }
                (found, canonical, robots_meta, EventKind::Page)
            }
        };
        self.links
            .pipeline
            .archive
            .send(Archive {
                url: self.url.clone(),
                response,
                kind,
                depth: self.entry.value.depth,
                canonical,
                robots_meta,
                links_out: found.len(),
                simhash,
            })
            .await??;
        if !found.is_empty() {
            self.links
                .pipeline
                .discover
                .send(Discover { candidates: found })
                .await??;
        }
        Ok(status)
    }

    /// The target of a redirect, as a candidate: it enters the crawl like a
    /// link (so robots.txt and politeness apply to its host), at the same
    /// depth, one hop further, unless the chain is already `max_redirects`
    /// long.
    fn redirect_target(&self, response: &FetchResponse) -> Option<Candidate> {
        let target = response
            .header("location")
            .and_then(|l| self.url.join(l).ok())?;
        let hops = self.entry.value.kind.redirect_hops();
        if u32::from(hops) >= self.settings.max_redirects {
            self.metrics
                .redirects
                .with_label_values(&["too_many"])
                .inc();
            tracing::debug!(url = %self.url, hops, "redirect chain too long; not followed");
            return None;
        }
        self.metrics
            .redirects
            .with_label_values(&["followed"])
            .inc();
        Some(Candidate {
            url: target,
            depth: self.entry.value.depth,
            priority: Priority::HIGH,
            kind: EntryKind::Redirected {
                hops: hops.saturating_add(1),
            },
            referrer: Some(urls::registrable_domain(urls::host_key(&self.url)).to_owned()),
        })
    }

    /// Reads a sitemap into candidates: pages of this host (or of the host
    /// whose robots.txt submitted the sitemap), and child sitemaps of an
    /// index up to the depth limit.
    async fn read_sitemap(
        &self,
        response: &FetchResponse,
        submitter: Option<&str>,
    ) -> Result<Vec<Candidate>, Failure> {
        let Some(settings) = &self.settings.sitemaps else {
            return Ok(Vec::new());
        };
        let parsed = self
            .links
            .pipeline
            .parse_sitemap
            .send(ParseSitemap {
                body: response.body.clone(),
                limits: settings.limits,
            })
            .await?;
        let count = |outcome: &str, n: usize| {
            self.metrics
                .sitemap_urls
                .with_label_values(&[outcome])
                .inc_by(n as u64);
        };
        count("dropped_limit", parsed.dropped);
        if let Some(err) = &parsed.error {
            tracing::info!(url = %self.url, error = %err, "sitemap read partly");
        }
        let fresh_since = chrono::Utc::now()
            - chrono::Duration::from_std(settings.fresh_within).unwrap_or_default();
        let child_depth = self.entry.value.depth + 1;
        let selection = select_entries(
            &parsed,
            &self.url,
            submitter,
            child_depth,
            settings.max_index_depth,
            fresh_since,
        );
        count("dropped_host", selection.dropped_host);
        count("dropped_depth", selection.dropped_depth);
        let kind = EntryKind::Sitemap {
            submitter: submitter.map(str::to_owned),
        };
        let sitemaps = selection.sitemaps.into_iter().map(|url| Candidate {
            referrer: None,
            url,
            depth: child_depth,
            priority: Priority::HIGH,
            kind: kind.clone(),
        });
        let pages = selection
            .pages
            .into_iter()
            .map(|(url, priority)| Candidate {
                referrer: None,
                url,
                depth: 0,
                priority,
                kind: EntryKind::Page,
            });
        let found: Vec<Candidate> = sitemaps.chain(pages).collect();
        count("queued", found.len());
        Ok(found)
    }
}

impl Actor for HostActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(usize::MAX);
        self.dispatch(ctx);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        for waiter in std::mem::take(&mut self.drain_waiters) {
            let _ = waiter.send(self.state());
        }
    }
}

impl Handler<Wake> for HostActor {
    type Result = ();

    fn handle(&mut self, msg: Wake, ctx: &mut Self::Context) {
        self.generation = self.generation.max(msg.generation);
        for (level, exhausted) in self.exhausted.iter_mut().enumerate() {
            if msg.levels & (1 << level) != 0 {
                *exhausted = false;
            }
        }
        self.dispatch(ctx);
    }
}

impl Handler<DrainHost> for HostActor {
    type Result = ResponseFuture<HostState>;

    fn handle(&mut self, _: DrainHost, ctx: &mut Self::Context) -> Self::Result {
        self.draining = true;
        if let Some((_, handle)) = self.timer.take() {
            ctx.cancel_future(handle);
        }
        let (tx, rx) = oneshot::channel();
        self.drain_waiters.push(tx);
        self.check_quiet(ctx);
        Box::pin(async move { rx.await.unwrap_or_default() })
    }
}

impl Handler<GetHostSnapshot> for HostActor {
    type Result = MessageResult<GetHostSnapshot>;

    fn handle(&mut self, _: GetHostSnapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

//! HostActor: one host's queue head, robots.txt rules and politeness timer.
//!
//! The host decides *when* its next URL may be fetched and nothing else:
//! - robots.txt of an origin is fetched before any other URL of it, under
//!   the same permit and delay as every other request;
//! - a request starts only with a permit from [`HostPoliteness`], which
//!   enforces `max_in_flight_per_host` and the completion-to-start delay;
//! - after a fetch, the page is parsed, archived and its links admitted,
//!   and only then is the URL completed in the store, so a crash at any
//!   point re-fetches it rather than losing it or its links.
//!
//! The queue head is refilled from the partition store (read-only; the
//! partition is the only writer). When the host has nothing queued, in
//! flight or in processing, it reports idle and the partition passivates it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use tokio::sync::oneshot;
use url::Url;

use super::messages::{
    Archive, Candidate, Complete, Discover, DrainHost, Failure, Fetch, GetHostSnapshot, HostIdle,
    HostSnapshot, Parse, SaveHostState, Wake,
};
use super::partition::PipelineLinks;
use crate::events::EventKind;
use crate::fetch::{FetchError, FetchResponse};
use crate::metrics::Metrics;
use crate::politeness::{HostPoliteness, Permit, Policy, Wait};
use crate::robots::{self, RobotsRecord, Rules, MAX_ROBOTS_BYTES};
use crate::store::{Completion, HostState, PartitionStore, QueueEntry, UrlState};

/// Queue entries read from the store at a time.
const REFILL: usize = 64;
/// How long a robots.txt copy is used before it is fetched again.
const ROBOTS_TTL: Duration = Duration::from_secs(24 * 3600);

/// Settings shared by every host of a node.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// Politeness policy.
    pub policy: Policy,
    /// robots.txt product token.
    pub product_token: String,
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

/// One active host.
pub struct HostActor {
    host: String,
    store: Arc<PartitionStore>,
    settings: Arc<HostSettings>,
    links: HostLinks,
    metrics: Arc<Metrics>,
    /// Last wake generation seen.
    generation: u64,
    /// Entries read from the store, not yet dispatched.
    head: VecDeque<QueueEntry>,
    /// Key of the last entry read; the next refill starts after it.
    cursor: Option<Vec<u8>>,
    /// The store had nothing after `cursor` at the last refill.
    exhausted: bool,
    politeness: HostPoliteness,
    /// Rules by origin, and the fetches they came from (persisted).
    rules: HashMap<String, Rules>,
    robots_records: BTreeMap<String, RobotsRecord>,
    /// Origins whose robots.txt is being fetched.
    robots_pending: HashSet<String>,
    /// Fetched entries still being parsed, archived or admitted.
    processing: usize,
    /// The armed politeness timer and its deadline.
    timer: Option<(Instant, SpawnHandle)>,
    /// Dispatch stopped for shutdown.
    draining: bool,
    drain_waiters: Vec<oneshot::Sender<HostState>>,
    /// A HostIdle report awaits its answer.
    idle_reported: bool,
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
        let now_ms = unix_ms(SystemTime::now());
        let mut rules = HashMap::new();
        let mut robots_records = BTreeMap::new();
        for (origin, record) in state.robots {
            if now_ms.saturating_sub(record.fetched_at_ms) < ROBOTS_TTL.as_millis() as u64 {
                rules.insert(
                    origin.clone(),
                    Rules::from_record(&record, &settings.product_token),
                );
                robots_records.insert(origin, record);
            }
        }
        // The saved schedule is wall-clock; a restart must not burst.
        let wait = Duration::from_millis(state.next_allowed_ms.saturating_sub(now_ms));
        HostActor {
            host,
            store,
            settings,
            links,
            metrics,
            generation: 0,
            head: VecDeque::new(),
            cursor: None,
            exhausted: false,
            politeness: HostPoliteness::new(Instant::now() + wait),
            rules,
            robots_records,
            robots_pending: HashSet::new(),
            processing: 0,
            timer: None,
            draining: false,
            drain_waiters: Vec::new(),
            idle_reported: false,
        }
    }

    /// Starts every request the policy allows now, then arms the timer or
    /// reports idle.
    fn dispatch(&mut self, ctx: &mut Context<Self>) {
        while !self.draining {
            if self.head.is_empty() && !self.refill() {
                break;
            }
            let entry = self.head.front().expect("refilled above");
            let url = match Url::parse(&entry.value.url) {
                Ok(url) => url,
                Err(_) => {
                    let entry = self.head.pop_front().expect("front exists");
                    self.complete_without_fetch(entry, UrlState::Failed, ctx);
                    continue;
                }
            };
            let origin = robots::origin_key(&url);
            let robots_known = self.rules.contains_key(&origin);
            if !robots_known && self.robots_pending.contains(&origin) {
                break;
            }
            if let Some(rules) = self.rules.get(&origin) {
                if !rules.allows(&url) {
                    self.metrics
                        .robots_decisions
                        .with_label_values(&["disallowed"])
                        .inc();
                    let entry = self.head.pop_front().expect("front exists");
                    self.complete_without_fetch(entry, UrlState::Disallowed, ctx);
                    continue;
                }
            }
            let now = Instant::now();
            match self.politeness.try_acquire(&self.settings.policy, now) {
                Ok(permit) if robots_known => {
                    self.metrics
                        .robots_decisions
                        .with_label_values(&["allowed"])
                        .inc();
                    let entry = self.head.pop_front().expect("front exists");
                    self.fetch_page(entry, url, permit, ctx);
                }
                Ok(permit) => self.fetch_robots(origin, &url, permit, ctx),
                Err(Wait::Busy) => break,
                Err(Wait::Until(at)) => {
                    self.arm_timer(at, ctx);
                    break;
                }
            }
        }
        self.check_quiet(ctx);
    }

    /// Loads the next page of the queue; false when there is none.
    fn refill(&mut self) -> bool {
        if self.exhausted {
            return false;
        }
        match self
            .store
            .queue_page(&self.host, self.cursor.as_deref(), REFILL)
        {
            Ok(page) if page.is_empty() => {
                self.exhausted = true;
                false
            }
            Ok(page) => {
                self.cursor = page.last().map(|e| e.key.clone());
                self.head.extend(page);
                true
            }
            Err(err) => {
                tracing::error!(host = %self.host, error = %err, "cannot read the queue");
                self.exhausted = true;
                false
            }
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

    fn fetch_robots(&mut self, origin: String, url: &Url, permit: Permit, ctx: &mut Context<Self>) {
        self.robots_pending.insert(origin.clone());
        let robots_url = robots::robots_url(url);
        let fetch = self.links.pipeline.fetch.send(Fetch {
            url: robots_url.clone(),
        });
        ctx.spawn(fetch.into_actor(self).map(move |result, act, ctx| {
            act.politeness
                .release(&act.settings.policy, permit, Instant::now());
            let result = result.unwrap_or_else(|e| Err(FetchError::Protocol(e.to_string())));
            act.robots_fetched(origin, robots_url, result, ctx);
            act.dispatch(ctx);
        }));
    }

    fn robots_fetched(
        &mut self,
        origin: String,
        robots_url: Url,
        result: Result<FetchResponse, FetchError>,
        ctx: &mut Context<Self>,
    ) {
        let record = match &result {
            Ok(resp) => RobotsRecord {
                status: Some(resp.status),
                fetched_at_ms: unix_ms(SystemTime::now()),
                body: if (200..300).contains(&resp.status) {
                    resp.body[..resp.body.len().min(MAX_ROBOTS_BYTES)].to_vec()
                } else {
                    Vec::new()
                },
            },
            Err(err) => {
                tracing::info!(host = %self.host, error = %err, "robots.txt unreachable: disallowing the origin");
                RobotsRecord {
                    status: None,
                    fetched_at_ms: unix_ms(SystemTime::now()),
                    body: Vec::new(),
                }
            }
        };
        self.rules.insert(
            origin.clone(),
            Rules::from_record(&record, &self.settings.product_token),
        );
        self.robots_records.insert(origin.clone(), record);
        self.robots_pending.remove(&origin);
        self.links.save.do_send(SaveHostState {
            host: self.host.clone(),
            state: self.state(),
        });
        if let Ok(response) = result {
            self.processing += 1;
            let archive = self.links.pipeline.archive.send(Archive {
                url: robots_url,
                response,
                kind: EventKind::Robots,
                depth: 0,
                canonical: None,
                robots_meta: None,
                links_out: 0,
            });
            ctx.spawn(archive.into_actor(self).map(|result, act, ctx| {
                if let Err(err) = result.map_err(Failure::from).and_then(|r| r) {
                    tracing::error!(host = %act.host, error = %err, "archiving robots.txt failed");
                }
                act.processing -= 1;
                act.check_quiet(ctx);
            }));
        }
    }

    fn fetch_page(&mut self, entry: QueueEntry, url: Url, permit: Permit, ctx: &mut Context<Self>) {
        let fetch = self.links.pipeline.fetch.send(Fetch { url: url.clone() });
        ctx.spawn(fetch.into_actor(self).map(move |result, act, ctx| {
            act.politeness
                .release(&act.settings.policy, permit, Instant::now());
            let result = result.unwrap_or_else(|e| Err(FetchError::Protocol(e.to_string())));
            act.processing += 1;
            let pipeline = process(act.links.clone(), act.host.clone(), entry, url, result);
            ctx.spawn(pipeline.into_actor(act).map(|(), act, ctx| {
                act.processing -= 1;
                act.dispatch(ctx);
            }));
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
        let idle = self.head.is_empty() && self.exhausted && self.robots_pending.is_empty();
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

    /// The state persisted when the host passivates.
    fn state(&self) -> HostState {
        let wait = self
            .politeness
            .next_allowed()
            .saturating_duration_since(Instant::now());
        HostState {
            robots: self.robots_records.clone(),
            // Rounded up: a restart may wait a millisecond longer, never less.
            next_allowed_ms: unix_ms(SystemTime::now()) + wait.as_millis() as u64 + 1,
        }
    }
}

/// What happens to a fetched URL: parse, archive, admit its links, and
/// only then complete it. If any step fails the URL is not completed: it
/// stays queued and is fetched again after a restart.
async fn process(
    links: HostLinks,
    host: String,
    entry: QueueEntry,
    url: Url,
    result: Result<FetchResponse, FetchError>,
) {
    let state = match result {
        Ok(response) => match archive_and_follow(&links, &entry, url.clone(), response).await {
            Ok(status) => UrlState::Fetched(status),
            Err(err) => {
                tracing::error!(url = %url, error = %err, "processing failed; the url stays queued");
                return;
            }
        },
        Err(err) => {
            tracing::debug!(url = %url, kind = err.kind(), "fetch failed");
            UrlState::Failed
        }
    };
    let done = links
        .complete
        .send(Complete {
            host,
            completion: Completion {
                fp: entry.value.fp,
                queue_key: entry.key,
                depth: entry.value.depth,
                state,
            },
        })
        .await;
    if let Err(err) = done.map_err(Failure::from).and_then(|r| r) {
        tracing::error!(url = %url, error = %err, "cannot complete a fetched url");
    }
}

async fn archive_and_follow(
    links: &HostLinks,
    entry: &QueueEntry,
    url: Url,
    response: FetchResponse,
) -> Result<u16, Failure> {
    let status = response.status;
    let mut found = Vec::new();
    let mut canonical = None;
    let mut robots_meta = None;
    if (200..300).contains(&status) && response.is_html() {
        let parsed = links
            .pipeline
            .parse
            .send(Parse {
                url: url.clone(),
                body: response.body.clone(),
            })
            .await?;
        canonical = parsed.canonical.clone();
        robots_meta = parsed.robots_meta.clone();
        if !parsed.nofollow() {
            found = parsed.links;
        }
    } else if (300..400).contains(&status) {
        // The redirect target enters the crawl like a link, so robots.txt
        // and politeness apply to its host.
        if let Some(target) = response.header("location").and_then(|l| url.join(l).ok()) {
            found.push(target);
        }
    }
    links
        .pipeline
        .archive
        .send(Archive {
            url,
            response,
            kind: EventKind::Page,
            depth: entry.value.depth,
            canonical,
            robots_meta,
            links_out: found.len(),
        })
        .await??;
    if !found.is_empty() {
        let depth = entry.value.depth + 1;
        let candidates = found
            .into_iter()
            .map(|url| Candidate { url, depth })
            .collect();
        links
            .pipeline
            .discover
            .send(Discover { candidates })
            .await??;
    }
    Ok(status)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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
        self.exhausted = false;
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
        MessageResult(HostSnapshot {
            host: self.host.clone(),
            head: self.head.len(),
            in_flight: self.politeness.in_flight(),
            processing: self.processing,
            next_allowed_in_ms: self
                .politeness
                .next_allowed()
                .saturating_duration_since(Instant::now())
                .as_millis() as u64,
        })
    }
}

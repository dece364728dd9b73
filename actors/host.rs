//! HostActor: carries out one host's [`HostMachine`] effects.
//!
//! Every decision (robots.txt first, when the next request may start,
//! retries, what a response means, when to passivate) is made by the
//! machine in `src/frontier/`; this actor only turns its effects into
//! messages and timers, and feeds the answers back with the time read from
//! the node's injected clock. It reads no clock of its own.
//!
//! A task (processing a fetched page, completing an entry, archiving
//! robots.txt, offering sitemaps) runs as a future on the actor's context.
//! A page's steps (read, archive, admit, settle, note a removal, wait for
//! durability, complete) come from its [`crate::frontier::page_flow::PageFlow`]
//! (`src/frontier/page_flow.rs`), which skips on a rerun what succeeded,
//! so a task that failed half-way (the store was down) does not archive
//! its page twice. The messages it
//! sends use `send`, so a full mailbox downstream makes the task wait:
//! back-pressure, never a drop.

use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::messages::{
    Archive, ArchiveRemoval, Complete, Crash, DigestPayload, DigestQuery, Discover, DrainHost,
    Failure, Fetch, GetHostSnapshot, HoldHost, HostIdle, HostLinks, Parse, ParseSitemap,
    SaveHostState, SlowDown, Wake, YieldSlot,
};
use crate::archive::Archived;
use crate::clock::SharedClock;
use crate::dedup::exact::{DigestAsk, DigestReply};
use crate::durable::Ticket;
use crate::events::EventKind;
use crate::fetch::Validators;
use crate::frontier::host::{
    Effect, Finish, HostMachine, HostSettings, Job, Removed, Task, TaskId,
};
use crate::frontier::importance;
use crate::frontier::lifecycle::{self, Observed};
use crate::frontier::page_flow::PageStep;
use crate::frontier::response::{self, Plan};
use crate::frontier::{Candidate, EntryKind};
use crate::metrics::{GaugeHold, Metrics};
use crate::politeness::Schedule;
use crate::store::{Completion, HostState, PartitionStore, Visit};

/// One active host.
pub struct HostActor {
    machine: HostMachine,
    store: Arc<PartitionStore>,
    /// Shared with its tasks' runners: a clone of the links themselves
    /// was a dozen boxed recipients allocated and counted for each task
    /// (and freed after), ~1 % of a crawl's CPU on the side-by-side bench.
    links: Arc<HostLinks>,
    clock: SharedClock,
    /// Last wake generation seen (the partition's passivation check).
    generation: u64,
    timer: Option<SpawnHandle>,
    drain_waiters: Vec<oneshot::Sender<HostState>>,
}

impl HostActor {
    /// The actor of `machine` (a host restored from its saved state),
    /// started by its partition at wake `generation`.
    pub fn new(
        machine: HostMachine,
        store: Arc<PartitionStore>,
        links: HostLinks,
        clock: SharedClock,
        generation: u64,
    ) -> Self {
        HostActor {
            machine,
            store,
            links: Arc::new(links),
            clock,
            generation,
            timer: None,
            drain_waiters: Vec::new(),
        }
    }

    fn poll(&mut self, ctx: &mut Context<Self>) {
        let fx = self.machine.poll(&*self.store, self.clock.now());
        self.apply(fx, ctx);
    }

    /// Carries out the machine's effects.
    fn apply(&mut self, effects: Vec<Effect>, ctx: &mut Context<Self>) {
        for effect in effects {
            match effect {
                Effect::Fetch {
                    id,
                    url,
                    hold,
                    deadline,
                    validators,
                    page,
                } => {
                    let request = Request {
                        url,
                        hold,
                        deadline,
                        validators,
                        page,
                    };
                    self.hold_then_fetch(id, request, ctx)
                }
                Effect::Run { id, task, schedule } => self.run(id, task, schedule, ctx),
                Effect::Save(state) => self.links.save.do_send(SaveHostState {
                    host: self.machine.host().to_owned(),
                    state,
                }),
                Effect::WakeAt(at) => {
                    if let Some(handle) = self.timer.take() {
                        ctx.cancel_future(handle);
                    }
                    let delay = at.saturating_duration_since(self.clock.now().at);
                    self.timer = Some(ctx.run_later(delay, |act, ctx| {
                        act.timer = None;
                        let fx = act.machine.timer(&*act.store, act.clock.now());
                        act.apply(fx, ctx);
                    }));
                }
                Effect::WaitForIp(freed) => {
                    ctx.spawn(freed.into_actor(self).map(|(), act, ctx| {
                        let fx = act.machine.ip_freed(&*act.store, act.clock.now());
                        act.apply(fx, ctx);
                    }));
                }
                Effect::Passivate {
                    state,
                    due_ms,
                    refresh_wait,
                } => self.passivate(state, due_ms, refresh_wait, ctx),
                Effect::Drained(state) => {
                    for waiter in std::mem::take(&mut self.drain_waiters) {
                        let _ = waiter.send(state.clone());
                    }
                }
            }
        }
    }

    /// Writes the request's hold through the partition, then sends it: a
    /// request never leaves before a claim on the host reaching past its
    /// deadline is in the store (the machine says when the one on record
    /// does already: sent at once). A hold that cannot be written sends
    /// nothing (the URL is asked for again after the host's ordinary
    /// delay).
    fn hold_then_fetch(&mut self, id: TaskId, request: Request, ctx: &mut Context<Self>) {
        let Some(hold) = request.hold else {
            return self.fetch(id, request, ctx);
        };
        let written = self.links.hold.send(HoldHost {
            host: self.machine.host().to_owned(),
            hold,
        });
        ctx.spawn(
            written
                .into_actor(self)
                .map(move |written, act, ctx| match written {
                    Ok(Ok(())) => {
                        act.machine.hold_written(hold);
                        act.fetch(id, request, ctx)
                    }
                    Ok(Err(err)) => act.not_sent(id, &err.to_string(), ctx),
                    Err(err) => act.not_sent(id, &err.to_string(), ctx),
                }),
        );
    }

    /// Request `id` was not sent (`why`).
    fn not_sent(&mut self, id: TaskId, why: &str, ctx: &mut Context<Self>) {
        tracing::debug!(host = self.machine.host(), why, "a request was not sent");
        let fx = self
            .machine
            .fetch_lost(id, false, &*self.store, self.clock.now());
        self.apply(fx, ctx);
    }

    fn fetch(&mut self, id: TaskId, request: Request, ctx: &mut Context<Self>) {
        let lease = self.links.lease.clone();
        if lease.as_ref().is_some_and(|l| !l.is_open()) {
            // The partition's lease ended (after a pause, the stop is on
            // its way): not sent, and asked again if the host lives on.
            return self.not_sent(id, "the partition's lease ended", ctx);
        }
        // The deadline on the machine's clock, as an instant of the
        // runtime's (the fetcher's timers run on it).
        let now = self.clock.now();
        let left = request.deadline.saturating_duration_since(now.at);
        let released = std::time::Instant::now();
        // Dropped with this future, so with the actor if it dies.
        let asker = Arc::new(());
        let fetch = self.links.pipeline.fetch.send(Fetch {
            url: request.url,
            validators: request.validators,
            asker: Arc::downgrade(&asker),
            released,
            deadline: released + left,
            page: request.page,
            lease,
        });
        ctx.spawn(fetch.into_actor(self).map(move |result, act, ctx| {
            drop(asker);
            let now = act.clock.now();
            let fx = match result {
                Ok(Err(crate::fetch::FetchError::NotSent(why))) => {
                    return act.not_sent(id, &why, ctx);
                }
                Ok(result) => act.machine.fetched(id, result, &*act.store, now),
                Err(err) => {
                    // The request may have left before its answer was lost.
                    tracing::debug!(host = act.machine.host(), error = %err, "the fetcher's answer was lost");
                    act.machine.fetch_lost(id, true, &*act.store, now)
                }
            };
            act.apply(fx, ctx);
        }));
    }

    fn run(&mut self, id: TaskId, task: Task, schedule: Schedule, ctx: &mut Context<Self>) {
        let runner = Runner {
            links: self.links.clone(),
            host: self.machine.host().to_owned(),
            settings: self.machine.settings(),
            metrics: self.machine.metrics(),
            clock: self.clock.clone(),
            schedule,
        };
        ctx.spawn(
            runner
                .run(task)
                .into_actor(self)
                .map(move |(task, result), act, ctx| {
                    let fx = act
                        .machine
                        .task_done(id, task, result, &*act.store, act.clock.now());
                    act.apply(fx, ctx);
                }),
        );
    }

    fn passivate(
        &mut self,
        state: HostState,
        due_ms: Option<u64>,
        refresh_wait: bool,
        ctx: &mut Context<Self>,
    ) {
        let report = self.links.idle.send(HostIdle {
            host: self.machine.host().to_owned(),
            generation: self.generation,
            state,
            due_ms,
            refresh_wait,
            best_rank: self.machine.best_rank(),
        });
        ctx.spawn(
            report
                .into_actor(self)
                .map(|passivate, act, ctx| match passivate {
                    Ok(true) | Err(_) => ctx.stop(),
                    Ok(false) => {
                        let fx = act
                            .machine
                            .passivation_refused(&*act.store, act.clock.now());
                        act.apply(fx, ctx);
                    }
                }),
        );
    }
}

/// A request the machine handed out ([`Effect::Fetch`]).
struct Request {
    url: url::Url,
    hold: Option<crate::politeness::Hold>,
    deadline: std::time::Instant,
    validators: Validators,
    page: bool,
}

/// What a page's read step found.
#[derive(Default)]
struct Read {
    /// Candidates for the frontier (links, sitemap entries, a redirect's
    /// target).
    found: Vec<crate::frontier::Candidate>,
    /// The record to archive, unless the response is not kept.
    record: Option<Archive>,
    /// The page's simhash, for its visit.
    simhash: Option<u64>,
    /// The last visit on record, which the archive compares against.
    previous: Option<Visit>,
    /// A 304: the copy on record still holds.
    not_modified: bool,
}

/// Runs one task to its end and hands it back with the result, so a
/// failed task can be run again by the machine.
struct Runner {
    links: Arc<HostLinks>,
    host: String,
    settings: Arc<HostSettings>,
    metrics: Arc<Metrics>,
    clock: SharedClock,
    schedule: Schedule,
}

impl Runner {
    async fn run(self, mut task: Task) -> (Task, Result<(), Failure>) {
        let result = match &mut task {
            Task::Process(job) => self.process(job).await,
            Task::Complete(finish) => self.finish(finish).await,
            Task::RecordTries(completion) => self.complete((**completion).clone()).await,
            Task::ArchiveRobots { url, response } => self
                .archive(Archive::side(
                    url.clone(),
                    response.clone(),
                    EventKind::Robots,
                ))
                .await
                .map(drop),
            Task::Discover(found) => self.discover_all(found.clone()).await,
        };
        (task, result)
    }

    async fn complete(&self, completion: Completion) -> Result<(), Failure> {
        self.complete_with(completion, Vec::new(), Vec::new()).await
    }

    /// Completes an entry, writing `outbox` (its page's links for
    /// partitions other nodes own) in the same batch. `durable`: the
    /// settled tickets of what its archiving wrote, for the partition's
    /// audit.
    async fn complete_with(
        &self,
        completion: Completion,
        outbox: Vec<crate::store::OutboxBatch>,
        durable: Vec<Ticket>,
    ) -> Result<(), Failure> {
        self.links
            .complete
            .send(Complete {
                host: self.host.clone(),
                completion,
                schedule: self.schedule,
                outbox,
                durable,
            })
            .await?
    }

    /// Reports the removal (once), then records the entry finished.
    async fn finish(&self, finish: &mut Finish) -> Result<(), Failure> {
        let mut durable = Vec::new();
        if let Some(removed) = &finish.removed {
            durable.extend(self.removed(removed.clone()).await?);
            finish.removed = None;
        }
        let completion = finish.completion.clone();
        self.complete_with(completion, Vec::new(), durable).await
    }

    /// Writes a `removed` event and waits until it is in the OS (with
    /// `sync_writes`, durable): the removal is completed only then.
    async fn removed(&self, removed: Removed) -> Result<Option<Ticket>, Failure> {
        let msg = ArchiveRemoval(removed);
        let ticket = self.links.pipeline.removed.send(msg).await??;
        if let Some(ticket) = &ticket {
            ticket.durable().await?;
        }
        Ok(ticket)
    }

    async fn archive(&self, msg: Archive) -> Result<Archived, Failure> {
        self.links.pipeline.archive.send(msg).await?
    }

    /// Archives a page's response, storing its payload once crawl-wide: a
    /// dedup candidate's digest is claimed at its partition first (the
    /// answer may name the copy to revisit), and the claim is settled after
    /// the records are written. The page's links are offered meanwhile: a
    /// page found through them with the same payload claims the digest too,
    /// and whichever claim comes second waits for the first and writes a
    /// revisit of its copy (the protocol: [`crate::dedup::exact`]).
    async fn archive_once(&self, mut msg: Archive) -> Result<Archived, Failure> {
        if !(self.settings.exact_dedup && msg.is_dedup_candidate()) {
            return self.archive(msg).await;
        }
        let digest = match msg.digest {
            Some(digest) => digest,
            None => {
                let body = msg.response.body.clone();
                self.links.pipeline.digest.send(DigestPayload(body)).await?
            }
        };
        msg.digest = Some(digest);
        let reply = self.ask_digest(digest, DigestAsk::Claim).await;
        let claimed = reply == DigestReply::Claimed;
        if let DigestReply::Stored(copy) = reply {
            msg.stored = Some(copy);
        }
        let mut archived = self.archive(msg).await;
        // The copy is registered only once its record is durable: an index
        // naming a record a power loss took would make later copies
        // revisits of nothing.
        if let Ok(Archived {
            original: Some(_),
            durable: Some(ticket),
            ..
        }) = &archived
        {
            if let Err(err) = ticket.durable().await {
                archived = Err(err.into());
            }
        }
        let settle = match (&archived, claimed) {
            (
                Ok(Archived {
                    original: Some(copy),
                    ..
                }),
                _,
            ) => Some(DigestAsk::Register(copy.clone())),
            (_, true) => Some(DigestAsk::Abandon),
            (_, false) => None,
        };
        if let Some(ask) = settle {
            self.ask_digest(digest, ask).await;
        }
        archived
    }

    /// Asks `digest`'s partition; an answer that cannot be had is
    /// `Unclaimed` (store in full): exact dedup never stops a page.
    async fn ask_digest(&self, digest: [u8; 32], ask: DigestAsk) -> DigestReply {
        let query = DigestQuery { digest, ask };
        match self.links.pipeline.digests.send(query).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(failure)) => {
                tracing::debug!(host = %self.host, error = %failure, "digest question unanswered; stored in full");
                DigestReply::Unclaimed
            }
            Err(e) => {
                tracing::debug!(host = %self.host, error = %e, "digest question unanswered; stored in full");
                DigestReply::Unclaimed
            }
        }
    }

    /// Offers candidates; those of partitions other nodes own (with a
    /// checkpoint chain, every partition but this host's) come back, to
    /// be written to the outbox with the page's completion.
    async fn discover(
        &self,
        candidates: Vec<crate::frontier::Candidate>,
    ) -> Result<Vec<crate::store::OutboxBatch>, Failure> {
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let discovered = self
            .links
            .pipeline
            .discover
            .send(Discover {
                candidates,
                detail: false,
                from: Some(self.links.partition),
            })
            .await??;
        Ok(discovered.remote)
    }

    /// Offers candidates that complete no entry (the sitemaps robots.txt
    /// names): those of partitions held elsewhere go to the outbox at once.
    async fn discover_all(
        &self,
        candidates: Vec<crate::frontier::Candidate>,
    ) -> Result<(), Failure> {
        let outbox = self.discover(candidates).await?;
        if outbox.is_empty() {
            return Ok(());
        }
        self.links
            .forward
            .send(super::messages::Forward { outbox })
            .await?
    }

    /// Runs the page's steps in the order its [`Job::flow`] gives them
    /// (read, archive and admit side by side, settle, note a removal, wait
    /// for durability, complete), skipping what an earlier run of the task did. A failed
    /// step ends the run; the flow starts over on the next.
    async fn process(&self, job: &mut Job) -> Result<(), Failure> {
        let result = self.run_steps(job).await;
        if result.is_err() {
            job.flow.rerun();
        }
        result
    }

    /// The record `read` found, to archive, with what it says of the page.
    fn record_of(read: &mut Read) -> Archive {
        let mut record = read.record.take().expect("read found a record");
        record.links_out = read.found.len();
        record.previous = read.previous.clone();
        record
    }

    async fn run_steps(&self, job: &mut Job) -> Result<(), Failure> {
        // Fetched, not yet archived: until the archive step is done or
        // skipped, or until this run ends early (a rerun holds it again).
        let mut backlog = Some(GaugeHold::new(&self.metrics.pipeline_backlog));
        let mut read = Read::default();
        let mut settled = None;
        let mut durable = Vec::new();
        while let Some(step) = job.flow.next() {
            if !matches!(
                step,
                PageStep::Read | PageStep::Archive | PageStep::ArchiveAndAdmit
            ) {
                drop(backlog.take());
            }
            match step {
                PageStep::Read => {
                    read = self.read(job).await?;
                    job.flow.read(read.record.is_some());
                }
                PageStep::ArchiveAndAdmit => {
                    let record = Self::record_of(&mut read);
                    let found = std::mem::take(&mut read.found);
                    let (archived, admitted) =
                        futures_util::future::join(self.archive_once(record), self.discover(found))
                            .await;
                    // What went through is kept, whichever half failed.
                    let archived = archived.map(|archived| {
                        job.flow.archived(archived.durable.is_some());
                        job.archived = Some(archived);
                    });
                    job.outbox = admitted?;
                    job.flow.admitted();
                    archived?;
                }
                PageStep::Archive => {
                    let record = Self::record_of(&mut read);
                    let archived = self.archive_once(record).await?;
                    job.flow.archived(archived.durable.is_some());
                    job.archived = Some(archived);
                }
                PageStep::Admit => {
                    job.outbox = self.discover(std::mem::take(&mut read.found)).await?;
                    job.flow.admitted();
                }
                PageStep::Settle => {
                    let seen = self.observed(job, read.simhash, read.not_modified);
                    let outcome = lifecycle::fetched(
                        job.entry.previous.as_deref(),
                        job.entry.value.depth,
                        seen,
                        self.clock.now().unix_ms(),
                        &self.settings.recrawl,
                    );
                    job.next_due_ms = outcome.record.next_due_ms;
                    job.flow.settled(outcome.removed.is_some());
                    settled = Some(outcome);
                }
                PageStep::NoteRemoval => {
                    let reason = settled
                        .as_ref()
                        .and_then(|s| s.removed)
                        .expect("settled as removed");
                    let removal = self
                        .removed(Removed {
                            url: job.url.clone(),
                            reason,
                            last_status: Some(job.response.status),
                            depth: job.entry.value.depth,
                            at_ms: self.clock.now().unix_ms(),
                        })
                        .await?;
                    durable.extend(removal);
                    job.flow.removal_noted();
                }
                PageStep::AwaitDurable => {
                    // Completed only once its records are in the OS (with
                    // `sync_writes`, durable; the wait overlapped the
                    // admission of its links). If they cannot be, the page
                    // is archived again on the task's rerun.
                    let ticket = job
                        .archived
                        .as_ref()
                        .and_then(|a| a.durable.clone())
                        .expect("an archive that wrote records");
                    if let Err(err) = ticket.durable().await {
                        job.archived = None;
                        job.flow.durable_failed();
                        return Err(err.into());
                    }
                    durable.push(ticket);
                    job.flow.durable();
                }
                PageStep::Complete => {
                    let record = settled.take().expect("settled before completing").record;
                    let completion = Completion {
                        key: job.entry.key.clone(),
                        recrawl: job.entry.recrawl,
                        value: job.entry.value.clone(),
                        record,
                    };
                    let durable = std::mem::take(&mut durable);
                    self.complete_with(completion, job.outbox.clone(), durable)
                        .await?;
                    job.flow.completed();
                }
            }
        }
        Ok(())
    }

    /// The read step: parse or read what the response's plan says, and
    /// the record to archive, if any.
    async fn read(&self, job: &Job) -> Result<Read, Failure> {
        let value = &job.entry.value;
        let previous = job.entry.previous.as_ref().and_then(|r| r.last.clone());
        let plan = response::plan(
            &value.kind,
            value.depth,
            &job.url,
            &job.response,
            previous
                .as_ref()
                .is_some_and(|v| v.copy.is_some() && v.digest.is_some()),
            self.settings.archive_non_html,
            self.settings.max_redirects,
            &self.metrics,
        );
        let header =
            response::header_directives(&job.response, &self.settings.robots.product_token);
        let not_modified = plan == Plan::NotModified;
        let hop = plan.hop();
        let (mut found, record) = match plan {
            Plan::NotArchived => (Vec::new(), None),
            Plan::NotModified => {
                let mut record = self.record(job, None);
                record.not_modified = true;
                (Vec::new(), Some(record))
            }
            Plan::ReadSitemap => {
                let mut listed = self.read_sitemap(job).await?;
                if self.settings.ordering == importance::Ordering::Importance {
                    importance::share_listed(job.entry.cash(), &mut listed);
                }
                (listed, Some(self.record(job, None)))
            }
            Plan::ParseHtml => {
                let parsed = self
                    .links
                    .pipeline
                    .parse
                    .send(Parse {
                        url: job.url.clone(),
                        body: job.response.body.clone(),
                        content_type: job.response.header("content-type").map(str::to_owned),
                        content_encoding: job
                            .response
                            .header("content-encoding")
                            .map(str::to_owned),
                    })
                    .await?;
                let findings =
                    response::page_findings(parsed.page, header.as_deref(), &job.url, value.depth);
                if findings.links_dropped > 0 {
                    self.metrics
                        .urls_dropped
                        .with_label_values(&["link_cap"])
                        .inc_by(findings.links_dropped as u64);
                }
                let mut record = self.record(job, findings.robots_meta);
                record.links_dropped = findings.links_dropped;
                record.canonical = findings.canonical;
                record.simhash = findings.simhash;
                record.language = findings.language;
                record.mime_detected = findings.mime_detected;
                record.digest = Some(parsed.digest);
                let mut links = findings.found;
                record.outlinks = links.iter().map(|c| c.url.to_string()).collect();
                if self.settings.ordering == importance::Ordering::Importance {
                    importance::share_links(job.entry.cash(), &job.url, &mut links);
                }
                (links, Some(record))
            }
            Plan::Archive { found } => {
                let meta = value.kind.is_page().then_some(header).flatten();
                // A redirect's target is the URL that redirected, moved.
                let found = found.map(|target| Candidate {
                    cash: job.entry.cash(),
                    ..*target
                });
                (found.into_iter().collect(), Some(self.record(job, meta)))
            }
        };
        if let Some(hop) = hop {
            let via: Arc<str> = Arc::from(job.url.as_str());
            for candidate in &mut found {
                candidate.provenance = value.provenance.then(&via, hop);
            }
        }
        Ok(Read {
            simhash: record.as_ref().and_then(|r| r.simhash),
            found,
            record,
            previous,
            not_modified,
        })
    }

    /// What this fetch saw, for the URL's record; counts the refresh.
    /// `archived` is `None` when nothing was archived (a type not kept:
    /// then what is known of the response is its status and validators).
    fn observed(&self, job: &Job, simhash: Option<u64>, not_modified: bool) -> Observed {
        let response = &job.response;
        let (digest, copy, changed) = match job.archived.clone() {
            Some(a) => (Some(a.digest), a.copy, a.changed),
            None => (None, None, None),
        };
        if job.entry.recrawl {
            let result = match (not_modified, changed) {
                (true, _) => Some("not_modified"),
                (false, Some(true)) => Some("changed"),
                (false, Some(false)) => Some("unchanged"),
                (false, None) => None,
            };
            if let Some(result) = result {
                self.metrics.refreshes.with_label_values(&[result]).inc();
            }
        }
        Observed {
            visit: Visit {
                at_ms: job.visited_ms,
                status: response.status,
                etag: response.header("etag").map(str::to_owned),
                last_modified: response.header("last-modified").map(str::to_owned),
                digest,
                simhash,
                copy,
            },
            not_modified,
            changed,
        }
    }

    /// The archive message of a page or sitemap response.
    fn record(&self, job: &Job, robots_meta: Option<String>) -> Archive {
        let kind = if job.entry.value.kind.is_page() {
            EventKind::Page
        } else {
            EventKind::Sitemap
        };
        let mut msg = Archive::side(job.url.clone(), job.response.clone(), kind);
        msg.depth = job.entry.value.depth;
        msg.provenance = job.entry.value.provenance.clone();
        msg.score = job.entry.rank().map(|rank| rank.cash().get());
        if let Some(score) = msg.score {
            self.metrics.fetched_score.observe(f64::from(score));
        }
        msg.robots_meta = robots_meta;
        msg
    }

    async fn read_sitemap(&self, job: &Job) -> Result<Vec<crate::frontier::Candidate>, Failure> {
        let Some(settings) = &self.settings.sitemaps else {
            return Ok(Vec::new());
        };
        let parsed = self
            .links
            .pipeline
            .parse_sitemap
            .send(ParseSitemap {
                body: job.response.body.clone(),
                content_encoding: job.response.header("content-encoding").map(str::to_owned),
                limits: settings.limits,
            })
            .await?;
        let submitter = match &job.entry.value.kind {
            EntryKind::Sitemap { submitter } => submitter.as_deref(),
            _ => None,
        };
        Ok(response::sitemap_candidates(
            &parsed,
            &job.url,
            submitter,
            job.entry.value.depth,
            settings,
            self.clock.now().wall,
            &self.metrics,
        ))
    }
}

impl Actor for HostActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.poll(ctx);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        let state = self.machine.state(self.clock.now());
        for waiter in std::mem::take(&mut self.drain_waiters) {
            let _ = waiter.send(state.clone());
        }
    }
}

impl Handler<Wake> for HostActor {
    type Result = ();

    fn handle(&mut self, msg: Wake, ctx: &mut Self::Context) {
        self.generation = self.generation.max(msg.generation);
        let fx = self
            .machine
            .wake(msg.arrivals, &*self.store, self.clock.now());
        self.apply(fx, ctx);
    }
}

impl Handler<YieldSlot> for HostActor {
    type Result = ();

    fn handle(&mut self, _: YieldSlot, ctx: &mut Self::Context) {
        let fx = self.machine.yield_slot(self.clock.now());
        self.apply(fx, ctx);
    }
}

impl Handler<DrainHost> for HostActor {
    type Result = ResponseFuture<HostState>;

    fn handle(&mut self, _: DrainHost, ctx: &mut Self::Context) -> Self::Result {
        if let Some(handle) = self.timer.take() {
            ctx.cancel_future(handle);
        }
        let (tx, rx) = oneshot::channel();
        self.drain_waiters.push(tx);
        let fx = self.machine.drain(self.clock.now());
        self.apply(fx, ctx);
        Box::pin(async move { rx.await.unwrap_or_default() })
    }
}

impl Handler<Crash> for HostActor {
    type Result = ();

    fn handle(&mut self, _: Crash, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<SlowDown> for HostActor {
    type Result = MessageResult<SlowDown>;

    fn handle(&mut self, msg: SlowDown, ctx: &mut Self::Context) -> Self::Result {
        self.machine.set_slowdown(msg.0);
        let now = self.clock.now();
        let fx = self.machine.poll(&*self.store, now);
        self.apply(fx, ctx);
        let queued = self
            .store
            .queued_by_priority(self.machine.host())
            .unwrap_or_default();
        MessageResult(self.machine.snapshot(now, queued))
    }
}

impl Handler<GetHostSnapshot> for HostActor {
    type Result = MessageResult<GetHostSnapshot>;

    fn handle(&mut self, msg: GetHostSnapshot, _: &mut Self::Context) -> Self::Result {
        let queued = match msg.count_queue {
            true => self
                .store
                .queued_by_priority(self.machine.host())
                .unwrap_or_default(),
            false => Default::default(),
        };
        MessageResult(self.machine.snapshot(self.clock.now(), queued))
    }
}

//! SeenSet: the entrance of every candidate URL.
//!
//! Normalises and filters candidates, routes them to their partition, and
//! batches them: candidates arriving within one short window (or until a
//! batch is full) go to a partition as one sorted batch, so the store sees
//! one multi-get and one write per batch instead of one random read per
//! link (after IRLbot's DRUM). A `Discover` is answered only when all its
//! candidates are durably admitted or known as seen.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::messages::{Admission, AdmitBatch, Candidate, Discover, Failure, Reroute};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::store::AdmitEntry;
use crate::url::{self as urls, Excluded, Fingerprint, Scope, UrlRules};

/// A partition's batch is sent once it holds this many entries...
const FLUSH_AT: usize = 1024;
/// ...or when this window since the first entry has passed.
const FLUSH_AFTER: Duration = Duration::from_millis(2);

type Waiter = oneshot::Sender<Result<Vec<Fingerprint>, Failure>>;

#[derive(Default)]
struct Pending {
    entries: Vec<AdmitEntry>,
    waiters: Vec<Waiter>,
}

/// The SeenSet actor.
pub struct SeenSet {
    /// One recipient per partition, indexed by partition id.
    partitions: Vec<Recipient<AdmitBatch>>,
    /// Candidates deeper than this are dropped (0 = no limit).
    max_depth: u32,
    /// The normal form.
    rules: UrlRules,
    /// Scope and trap rules.
    scope: Scope,
    /// Batches being filled, one per partition.
    pending: Vec<Pending>,
    /// A flush timer is armed.
    flush_armed: bool,
    metrics: Arc<Metrics>,
}

impl SeenSet {
    /// A SeenSet routing to `partitions` (index = partition id), applying
    /// `scope` (compiled from the config, see [`Scope::new`]).
    pub fn new(
        config: &Config,
        scope: Scope,
        partitions: Vec<Recipient<AdmitBatch>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let pending = partitions.iter().map(|_| Pending::default()).collect();
        SeenSet {
            partitions,
            max_depth: config.crawl.max_depth,
            rules: UrlRules::new(&config.url, config.crawl.max_url_length),
            scope,
            pending,
            flush_armed: false,
            metrics,
        }
    }

    /// Normalises and filters one candidate into an admission entry, or
    /// names why it is dropped. An excluded extension is still admitted,
    /// as a record that is never queued.
    fn entry(&self, c: Candidate) -> Result<AdmitEntry, &'static str> {
        if c.kind.is_page() && self.max_depth > 0 && c.depth > self.max_depth {
            return Err("depth");
        }
        let n = self.rules.normalise(c.url).map_err(|_| "invalid")?;
        let queue = match self.scope.check(&n.fetch) {
            None => true,
            // Sitemaps and robots-submitted files are not pages to judge.
            Some(Excluded::Extension) if c.kind.is_page() => false,
            Some(Excluded::Extension) => true,
            Some(other) => return Err(other.label()),
        };
        let host = urls::host_key(&n.fetch).to_owned();
        Ok(AdmitEntry {
            fp: n.fp,
            url: n.fetch.into(),
            host,
            depth: c.depth,
            priority: c.priority,
            kind: c.kind,
            queue,
            referrer: c.referrer,
            lastmod_ms: c.lastmod_ms,
        })
    }

    fn flush(&mut self, partition: usize) {
        let batch = std::mem::take(&mut self.pending[partition]);
        if batch.entries.is_empty() {
            return;
        }
        let send = self.partitions[partition].send(AdmitBatch {
            entries: batch.entries,
        });
        actix::spawn(async move {
            let result = send.await.map_err(Failure::from).and_then(|r| r);
            for waiter in batch.waiters {
                let _ = waiter.send(result.clone());
            }
        });
    }

    fn flush_all(&mut self) {
        self.flush_armed = false;
        for p in 0..self.pending.len() {
            self.flush(p);
        }
    }
}

impl Actor for SeenSet {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Back-pressure comes from Discover replies, which wait for the
        // store; the mailbox itself must not refuse a page's links.
        ctx.set_mailbox_capacity(usize::MAX);
    }
}

impl Handler<Reroute> for SeenSet {
    type Result = ();

    fn handle(&mut self, msg: Reroute, _: &mut Self::Context) {
        if let Some(slot) = self.partitions.get_mut(usize::from(msg.id)) {
            *slot = msg.to;
        }
    }
}

impl Handler<Discover> for SeenSet {
    type Result = ResponseFuture<Result<Admission, Failure>>;

    fn handle(&mut self, msg: Discover, ctx: &mut Self::Context) -> Self::Result {
        let offered = msg.candidates.len();
        let partitions = self.partitions.len() as u16;
        let mut mine: Vec<Vec<Fingerprint>> = vec![Vec::new(); self.pending.len()];
        for candidate in msg.candidates {
            match self.entry(candidate) {
                Ok(entry) => {
                    if !entry.queue {
                        self.metrics
                            .urls_dropped
                            .with_label_values(&[Excluded::Extension.label()])
                            .inc();
                    }
                    let p = urls::partition_of(&entry.host, partitions) as usize;
                    mine[p].push(entry.fp);
                    self.pending[p].entries.push(entry);
                }
                Err(reason) => self.metrics.urls_dropped.with_label_values(&[reason]).inc(),
            }
        }
        let valid: usize = mine.iter().map(Vec::len).sum();
        let filtered = offered - valid;
        self.metrics
            .urls
            .with_label_values(&["filtered"])
            .inc_by(filtered as u64);
        let mut replies = Vec::new();
        for (p, fps) in mine.into_iter().enumerate() {
            if fps.is_empty() {
                continue;
            }
            let (tx, rx) = oneshot::channel();
            self.pending[p].waiters.push(tx);
            replies.push((fps, rx));
            if self.pending[p].entries.len() >= FLUSH_AT {
                self.flush(p);
            }
        }
        if !self.flush_armed && self.pending.iter().any(|p| !p.entries.is_empty()) {
            self.flush_armed = true;
            ctx.run_later(FLUSH_AFTER, |act, _| act.flush_all());
        }
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let mut admission = Admission {
                filtered,
                ..Admission::default()
            };
            for (fps, rx) in replies {
                let admitted = rx
                    .await
                    .map_err(|_| Failure::Mailbox("seen set dropped a batch".into()))??;
                for fp in fps {
                    if admitted.binary_search(&fp).is_ok() {
                        admission.admitted += 1;
                    } else {
                        admission.seen += 1;
                    }
                }
            }
            metrics
                .urls
                .with_label_values(&["admitted"])
                .inc_by(admission.admitted as u64);
            metrics
                .urls
                .with_label_values(&["seen"])
                .inc_by(admission.seen as u64);
            Ok(admission)
        })
    }
}

//! SeenSet: the entrance of every candidate URL.
//!
//! Normalises and filters candidates, routes them to their partition, and
//! batches them: candidates arriving within one short window (or until a
//! batch is full) go to a partition as one sorted batch, so the store sees
//! one multi-get and one write per batch instead of one random read per
//! link (after IRLbot's DRUM). A `Discover` is answered only when all its
//! candidates are durably admitted or known as seen; candidates of a
//! partition another node owns are handed back, by partition, for the
//! page's completion to write to the outbox (`store/outbox.rs`).
//!
//! Which candidates are admitted straight and which go by the finder's
//! outbox is the node machine's rule (`scheduler::view::admits_straight`):
//! with a checkpoint chain only the finder's own partition takes them
//! straight; the outbox's batches come back here through the node, like a
//! peer's, acknowledged once a published checkpoint covers them.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::messages::{
    Admission, AdmitBatch, AdmitReply, Candidate, Discover, Discovered, Failure, UrlOutcome,
};
use crate::config::Config;
use crate::dedup::shortcut::SeenShortcut;
use crate::metrics::Metrics;
use crate::scheduler::routes::{RouteTable, Routes};
use crate::scheduler::view::admits_straight;
use crate::store::{AdmitEntry, OutboxBatch};
use crate::url::{self as urls, Excluded, Fingerprint, Scope, UrlRules};

/// A partition's batch is sent once it holds this many entries...
const FLUSH_AT: usize = 1024;
/// ...or when this window since the first entry has passed.
const FLUSH_AFTER: Duration = Duration::from_millis(2);

type Waiter = oneshot::Sender<Result<AdmitReply, Failure>>;

#[derive(Default)]
struct Pending {
    entries: Vec<AdmitEntry>,
    waiters: Vec<Waiter>,
}

/// Where a partition admitted here takes its batches.
pub type AdmitRoutes = Arc<RouteTable<Recipient<AdmitBatch>>>;

/// The SeenSet actor.
pub struct SeenSet {
    /// The partitions admitted here, as the node machine decides them
    /// (`NodeScheduler::here`, published by the node): not a table of its
    /// own.
    routes: AdmitRoutes,
    /// Per partition, the route's generation last read: a change means
    /// it moved, and the shortcut forgets what it knew of it.
    generations: Vec<u64>,
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
    /// A checkpoint chain makes partitions durable one by one: only a
    /// finder's own partition takes its links straight (see the module
    /// doc).
    durable: bool,
    /// URLs the partitions admitted: a site's links to them are settled
    /// here (`dedup/shortcut.rs`).
    shortcut: SeenShortcut,
    metrics: Arc<Metrics>,
    /// `trawl_urls_total` by outcome, looked up once (a label lookup
    /// hashes the label on every call).
    counted: Outcomes,
}

/// The `trawl_urls_total` counters a Discover moves.
#[derive(Clone)]
struct Outcomes {
    filtered: prometheus::IntCounter,
    admitted: prometheus::IntCounter,
    seen: prometheus::IntCounter,
    /// `trawl_seen_filter_total{result="shortcut"}`.
    shortcut: prometheus::IntCounter,
}

impl SeenSet {
    /// A SeenSet routing to the partitions `routes` admits here, applying
    /// `scope` (compiled from the config, see [`Scope::new`]).
    pub fn new(config: &Config, scope: Scope, routes: AdmitRoutes, metrics: Arc<Metrics>) -> Self {
        let table = routes.load();
        let pending = (0..table.len()).map(|_| Pending::default()).collect();
        let count = table.len() as u16;
        let generations = (0..count).map(|p| table.generation(p)).collect();
        SeenSet {
            routes,
            generations,
            max_depth: config.crawl.max_depth,
            rules: UrlRules::new(&config.url, config.crawl.max_url_length),
            scope,
            pending,
            flush_armed: false,
            durable: config.cluster.enabled && !config.cluster.state_url.is_empty(),
            shortcut: SeenShortcut::new(config.seen.cache_urls, count),
            counted: Outcomes {
                filtered: metrics.urls.with_label_values(&["filtered"]),
                admitted: metrics.urls.with_label_values(&["admitted"]),
                seen: metrics.urls.with_label_values(&["seen"]),
                shortcut: metrics.seen_filter.with_label_values(&["shortcut"]),
            },
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
            cash: c.cash,
            provenance: c.provenance,
        })
    }

    /// Whether links to partition `p` found by partition `from` are
    /// admitted here now, rather than handed back for the finder's
    /// outbox: the node machine's rule ([`admits_straight`]) over the
    /// partitions it routes here.
    fn takes_straight(
        &self,
        routes: &Routes<Recipient<AdmitBatch>>,
        p: u16,
        from: Option<u16>,
    ) -> bool {
        admits_straight(routes.here(p).is_some(), self.durable, p, from)
    }

    /// The routes now; the shortcut forgets each partition that moved
    /// since the last read.
    fn read_routes(&mut self) -> Arc<Routes<Recipient<AdmitBatch>>> {
        let routes = self.routes.load();
        for (p, seen) in self.generations.iter_mut().enumerate() {
            let now = routes.generation(p as u16);
            if *seen != now {
                *seen = now;
                self.shortcut.moved(p as u16);
            }
        }
        routes
    }

    fn flush(&mut self, partition: usize, ctx: &mut Context<Self>) {
        let batch = std::mem::take(&mut self.pending[partition]);
        if batch.entries.is_empty() {
            return;
        }
        let routes = self.read_routes();
        let Some(to) = routes.here(partition as u16) else {
            // Owned elsewhere since the entries were routed: they go back
            // as failed, and their page is processed again.
            for waiter in batch.waiters {
                let _ = waiter.send(Err(Failure::Mailbox("partition moved".into())));
            }
            return;
        };
        let send = to.send(AdmitBatch {
            entries: batch.entries,
        });
        let id = partition as u16;
        let life = self.shortcut.life(id);
        // Back in the actor: what was admitted is known to the shortcut
        // before any sender hears of it.
        let answered = fut::wrap_future::<_, Self>(send).map(move |sent, act, _| {
            let result = sent.map_err(Failure::from).and_then(|r| r);
            if let Ok(reply) = &result {
                act.shortcut.admitted(id, life, &reply.admitted);
            }
            for waiter in batch.waiters {
                let _ = waiter.send(result.clone());
            }
        });
        ctx.spawn(answered);
    }

    fn flush_all(&mut self, ctx: &mut Context<Self>) {
        self.flush_armed = false;
        for p in 0..self.pending.len() {
            self.flush(p, ctx);
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

impl Handler<Discover> for SeenSet {
    type Result = ResponseFuture<Result<Discovered, Failure>>;

    fn handle(&mut self, msg: Discover, ctx: &mut Self::Context) -> Self::Result {
        let offered = msg.candidates.len();
        let routes = self.read_routes();
        let partitions = routes.len() as u16;
        let mut mine: Vec<Vec<Fingerprint>> = vec![Vec::new(); self.pending.len()];
        let mut remote: std::collections::BTreeMap<u16, Vec<AdmitEntry>> = Default::default();
        // With `detail`: each candidate's outcome, the admitted ones' to be
        // told apart (admitted or seen) by fingerprint once admitted.
        let mut outcomes: Vec<(UrlOutcome, Option<Fingerprint>)> = Vec::new();
        let mut settled = 0;
        for candidate in msg.candidates {
            // Each entry with its partition (a public-suffix lookup, once)
            // and whether it is admitted here straight.
            let outcome = self.entry(candidate).map(|e| {
                let p = urls::partition_of(&e.host, partitions);
                let straight = self.takes_straight(&routes, p, msg.from);
                (e, p, straight)
            });
            // Settled here only where it would be admitted here.
            if outcome
                .as_ref()
                .is_ok_and(|(e, p, straight)| *straight && self.shortcut.settles(*p, e))
            {
                settled += 1;
                if msg.detail {
                    outcomes.push((UrlOutcome::Seen, None));
                }
                continue;
            }
            if msg.detail {
                outcomes.push(match &outcome {
                    Err(reason) => (UrlOutcome::Filtered(reason), None),
                    // Recorded as seen, never fetched.
                    Ok((entry, ..)) if !entry.queue => {
                        (UrlOutcome::Filtered(Excluded::Extension.label()), None)
                    }
                    Ok((entry, ..)) => (UrlOutcome::Forwarded, Some(entry.fp)),
                });
            }
            match outcome {
                Ok((entry, p, straight)) => {
                    if !entry.queue {
                        self.metrics
                            .urls_dropped
                            .with_label_values(&[Excluded::Extension.label()])
                            .inc();
                    }
                    if !straight {
                        remote.entry(p).or_default().push(entry);
                        continue;
                    }
                    mine[usize::from(p)].push(entry.fp);
                    self.pending[usize::from(p)].entries.push(entry);
                }
                Err(reason) => self.metrics.urls_dropped.with_label_values(&[reason]).inc(),
            }
        }
        let forwarded: usize = remote.values().map(Vec::len).sum();
        let valid: usize = mine.iter().map(Vec::len).sum::<usize>() + forwarded;
        let filtered = offered - valid - settled;
        let remote: Vec<OutboxBatch> = remote
            .into_iter()
            .map(|(partition, entries)| OutboxBatch { partition, entries })
            .collect();
        self.counted.filtered.inc_by(filtered as u64);
        self.counted.shortcut.inc_by(settled as u64);
        let mut replies = Vec::new();
        let mut straight = Vec::new();
        for (p, fps) in mine.into_iter().enumerate() {
            if fps.is_empty() {
                continue;
            }
            straight.push(p as u16);
            let (tx, rx) = oneshot::channel();
            self.pending[p].waiters.push(tx);
            replies.push((fps, rx));
            if self.pending[p].entries.len() >= FLUSH_AT {
                self.flush(p, ctx);
            }
        }
        if !self.flush_armed && self.pending.iter().any(|p| !p.entries.is_empty()) {
            self.flush_armed = true;
            ctx.run_later(FLUSH_AFTER, |act, ctx| act.flush_all(ctx));
        }
        let counted = self.counted.clone();
        Box::pin(async move {
            let mut admission = Admission {
                filtered,
                forwarded,
                seen: settled,
                ..Admission::default()
            };
            // Each URL's fate is kept only when the caller asked for it
            // (`detail`): the crawl's own pages need the counts alone.
            let detail = !outcomes.is_empty();
            let mut fates = std::collections::HashMap::new();
            for (fps, rx) in replies {
                let reply = rx
                    .await
                    .map_err(|_| Failure::Mailbox("seen set dropped a batch".into()))??;
                for fp in fps {
                    let refused = reply.refused.binary_search_by_key(&fp, |(f, _)| *f);
                    let taken = |fps: &[Fingerprint]| fps.binary_search(&fp).is_ok();
                    // A URL brought back is in the crawl again: admitted.
                    let fate = if taken(&reply.admitted) || taken(&reply.brought_back) {
                        admission.admitted += 1;
                        UrlOutcome::Admitted
                    } else if let Ok(at) = refused {
                        admission.filtered += 1;
                        UrlOutcome::Filtered(reply.refused[at].1)
                    } else {
                        admission.seen += 1;
                        UrlOutcome::Seen
                    };
                    if detail {
                        fates.insert(fp, fate);
                    }
                }
            }
            // Ours were offered here (the rest went elsewhere); a URL
            // offered twice in one batch is admitted once, then seen.
            let mut told = std::collections::HashSet::new();
            let outcomes = outcomes
                .into_iter()
                .map(
                    |(outcome, fp)| match fp.and_then(|fp| fates.get(&fp).map(|f| (fp, *f))) {
                        Some((fp, UrlOutcome::Admitted)) if !told.insert(fp) => UrlOutcome::Seen,
                        Some((_, fate)) => fate,
                        None => outcome,
                    },
                )
                .collect();
            counted.admitted.inc_by(admission.admitted as u64);
            counted.seen.inc_by(admission.seen as u64);
            Ok(Discovered {
                admission,
                remote,
                outcomes,
                straight,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::{EntryKind, Priority};

    /// A partition that admits what it has not been offered before (but
    /// URLs of hosts over their budget), and counts the entries it is
    /// offered.
    #[derive(Default)]
    struct Admits {
        known: std::collections::HashSet<Fingerprint>,
        offered: Arc<std::sync::atomic::AtomicUsize>,
        over_budget: std::collections::HashSet<String>,
    }

    impl Actor for Admits {
        type Context = Context<Self>;
    }

    impl Handler<AdmitBatch> for Admits {
        type Result = Result<AdmitReply, Failure>;

        fn handle(&mut self, msg: AdmitBatch, _: &mut Self::Context) -> Self::Result {
            use std::sync::atomic::Ordering;
            self.offered.fetch_add(msg.entries.len(), Ordering::Relaxed);
            let (refused, offered): (Vec<_>, Vec<_>) = msg
                .entries
                .iter()
                .partition(|e| self.over_budget.contains(&e.host));
            let mut admitted: Vec<_> = offered
                .iter()
                .map(|e| e.fp)
                .filter(|fp| self.known.insert(*fp))
                .collect();
            admitted.sort();
            let mut refused: Vec<_> = refused.iter().map(|e| (e.fp, "budget_domain")).collect();
            refused.sort();
            Ok(AdmitReply {
                admitted,
                brought_back: Vec::new(),
                refused,
            })
        }
    }

    fn linked(url: &str, referrer: &str) -> Candidate {
        Candidate {
            referrer: Some(referrer.into()),
            ..candidate(url)
        }
    }

    #[test]
    fn a_sites_links_to_pages_it_admitted_are_settled_before_the_partition() {
        use std::sync::atomic::Ordering;
        let offered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let partition = Admits {
            offered: offered.clone(),
            ..Admits::default()
        };
        let metrics = Arc::new(Metrics::new());
        let answers = actix_rt::System::new().block_on({
            let metrics = metrics.clone();
            async move {
                let config = Config::defaults();
                let scope = Scope::new(&config.scope, &config.traps, 2026).unwrap();
                let seen = SeenSet::new(
                    &config,
                    scope,
                    Arc::new(RouteTable::new(vec![Some(partition.start().recipient())])),
                    metrics,
                )
                .start();
                let page = "http://a.test/page";
                let mut answers = Vec::new();
                for candidates in [
                    vec![linked(page, "a.test")],
                    // Seen: from its own site, then from another domain,
                    // whose link still counts toward a.test's budget.
                    vec![linked(page, "a.test"), linked(page, "b.test")],
                    vec![Candidate {
                        provenance: Default::default(),
                        priority: Priority::SEED,
                        ..linked(page, "a.test")
                    }],
                ] {
                    let discovered = seen
                        .send(Discover {
                            candidates,
                            detail: true,
                            from: None,
                        })
                        .await
                        .unwrap()
                        .unwrap();
                    answers.push((discovered.admission, discovered.outcomes));
                }
                answers
            }
        });
        let (first, _) = &answers[0];
        assert_eq!((first.admitted, first.seen), (1, 0), "{first:?}");
        let (second, outcomes) = &answers[1];
        assert_eq!((second.admitted, second.seen), (0, 2), "{second:?}");
        assert_eq!(outcomes, &[UrlOutcome::Seen, UrlOutcome::Seen]);
        let (third, _) = &answers[2];
        assert_eq!(third.seen, 1, "a seed may bring a URL back: it is offered");
        // The own-site link of the second Discover never reached it.
        assert_eq!(offered.load(Ordering::Relaxed), 3);
        let shortcut = metrics.seen_filter.with_label_values(&["shortcut"]).get();
        assert_eq!(shortcut, 1);
    }

    fn candidate(url: &str) -> Candidate {
        Candidate {
            provenance: Default::default(),
            url: url::Url::parse(url).unwrap(),
            depth: 1,
            priority: Priority::NORMAL,
            kind: EntryKind::Page,
            referrer: None,
            lastmod_ms: None,
            cash: crate::frontier::importance::Cash::UNKNOWN,
        }
    }

    #[test]
    fn candidates_of_partitions_held_elsewhere_are_handed_back_by_partition() {
        // Hosts of partition 0 and of partition 1 (of two).
        let hosts: Vec<String> = (0..40).map(|i| format!("h{i}.test")).collect();
        let of = |p: u16| {
            hosts
                .iter()
                .filter(|h| urls::partition_of(h, 2) == p)
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
        };
        let (local, remote) = (of(0), of(1));
        let offered: Vec<Candidate> = local
            .iter()
            .chain(&remote)
            .map(|h| candidate(&format!("http://{h}/")))
            .chain([candidate("ftp://bad.test/")])
            .collect();
        let discovered = actix_rt::System::new().block_on(async move {
            let config = Config::defaults();
            let scope = Scope::new(&config.scope, &config.traps, 2026).unwrap();
            let partition = Admits::default().start().recipient();
            let seen = SeenSet::new(
                &config,
                scope,
                Arc::new(RouteTable::new(vec![Some(partition), None])),
                Arc::new(Metrics::new()),
            )
            .start();
            let candidates = offered;
            seen.send(Discover {
                candidates,
                detail: false,
                from: None,
            })
            .await
            .unwrap()
            .unwrap()
        });
        let a = discovered.admission;
        assert_eq!((a.admitted, a.forwarded, a.filtered), (3, 3, 1), "{a:?}");
        assert_eq!(discovered.remote.len(), 1);
        assert_eq!(discovered.remote[0].partition, 1);
        assert_eq!(
            hosts_in(&discovered.remote[0]),
            remote,
            "normalised and ready for admission"
        );
    }

    /// The hosts of a batch handed back for the outbox, in order.
    fn hosts_in(batch: &OutboxBatch) -> Vec<String> {
        batch.entries.iter().map(|e| e.host.clone()).collect()
    }

    /// Hosts of partition `p` of two.
    fn hosts_of(p: u16) -> Vec<String> {
        (0..40)
            .map(|i| format!("h{i}.test"))
            .filter(|h| urls::partition_of(h, 2) == p)
            .take(3)
            .collect()
    }

    /// Offers a link to each of `hosts`, found by partition `from`, to a
    /// SeenSet over two partitions held here (with a checkpoint chain if
    /// `durable`); returns the answer and how many entries each partition
    /// was offered.
    fn discover_both_held(
        durable: bool,
        from: Option<u16>,
        hosts: &[String],
    ) -> (Discovered, [usize; 2]) {
        let candidates: Vec<Candidate> = hosts
            .iter()
            .map(|h| candidate(&format!("http://{h}/")))
            .collect();
        actix_rt::System::new().block_on(async move {
            let mut config = Config::defaults();
            if durable {
                config.cluster.enabled = true;
                config.cluster.state_url = "file:///nowhere".into();
            }
            let scope = Scope::new(&config.scope, &config.traps, 2026).unwrap();
            let offered = [(); 2].map(|()| Arc::new(std::sync::atomic::AtomicUsize::new(0)));
            let partitions = offered
                .iter()
                .map(|o| {
                    let admits = Admits {
                        offered: o.clone(),
                        ..Admits::default()
                    };
                    Some(admits.start().recipient())
                })
                .collect();
            let routes = Arc::new(RouteTable::new(partitions));
            let seen = SeenSet::new(&config, scope, routes, Arc::new(Metrics::new())).start();
            let discovered = seen
                .send(Discover {
                    candidates,
                    detail: false,
                    from,
                })
                .await
                .unwrap()
                .unwrap();
            let counts = offered.map(|o| o.load(std::sync::atomic::Ordering::Relaxed));
            (discovered, counts)
        })
    }

    #[test]
    fn with_a_checkpoint_chain_only_the_finders_partition_takes_links_straight() {
        let (mine, theirs) = (hosts_of(0), hosts_of(1));
        let both: Vec<String> = mine.iter().chain(&theirs).cloned().collect();
        let (discovered, offered) = discover_both_held(true, Some(0), &both);
        assert_eq!(offered, [3, 0], "partition 1 is published on its own");
        assert_eq!(discovered.admission.admitted, 3);
        assert_eq!(discovered.remote.len(), 1);
        assert_eq!(discovered.remote[0].partition, 1);
        assert_eq!(
            hosts_in(&discovered.remote[0]),
            theirs,
            "for the finder's outbox"
        );
        // Without a chain, a partition held here is as durable as another.
        let (discovered, offered) = discover_both_held(false, Some(0), &both);
        assert_eq!(offered, [3, 3]);
        assert!(discovered.remote.is_empty());
        // Seeds (no finder) go straight to whichever partition holds them.
        let (discovered, offered) = discover_both_held(true, None, &both);
        assert_eq!(offered, [3, 3]);
        assert!(discovered.remote.is_empty());
    }

    #[test]
    fn a_rerouted_partition_is_asked_again_about_links_its_old_store_admitted() {
        let hosts = hosts_of(0);
        let page = format!("http://{}/page", hosts[0]);
        let domain = hosts[0].clone();
        let offers = actix_rt::System::new().block_on(async move {
            let config = Config::defaults();
            let scope = Scope::new(&config.scope, &config.traps, 2026).unwrap();
            let old = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let partition = Admits {
                offered: old.clone(),
                ..Admits::default()
            };
            let routes = Arc::new(RouteTable::new(vec![
                Some(partition.start().recipient()),
                None,
            ]));
            let seen =
                SeenSet::new(&config, scope, routes.clone(), Arc::new(Metrics::new())).start();
            let offer = || Discover {
                candidates: vec![linked(&page, &domain)],
                detail: false,
                from: Some(0),
            };
            seen.send(offer()).await.unwrap().unwrap();
            seen.send(offer()).await.unwrap().unwrap();
            // Partition 0 lost and held again, from an older checkpoint
            // that does not have the page.
            let new = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let restored = Admits {
                offered: new.clone(),
                ..Admits::default()
            };
            // The node publishes both moves before the SeenSet reads
            // again: it still learns the partition moved.
            routes.publish(vec![None, None]);
            routes.publish(vec![Some(restored.start().recipient()), None]);
            let again = seen.send(offer()).await.unwrap().unwrap();
            let load = |c: &Arc<std::sync::atomic::AtomicUsize>| {
                c.load(std::sync::atomic::Ordering::Relaxed)
            };
            (load(&old), load(&new), again.admission.admitted)
        });
        // The second offer was settled by the shortcut; after the move
        // the new store is asked, and admits the page.
        assert_eq!(offers, (1, 1, 1));
    }

    #[test]
    fn a_seed_a_budget_refuses_is_reported_as_refused_by_it_not_as_seen() {
        let partition = Admits {
            over_budget: ["full.test".to_owned()].into(),
            ..Admits::default()
        };
        let discovered = actix_rt::System::new().block_on(async move {
            let config = Config::defaults();
            let scope = Scope::new(&config.scope, &config.traps, 2026).unwrap();
            let seen = SeenSet::new(
                &config,
                scope,
                Arc::new(RouteTable::new(vec![Some(partition.start().recipient())])),
                Arc::new(Metrics::new()),
            )
            .start();
            let seeds = ["http://full.test/", "http://room.test/"]
                .map(|u| Candidate {
                    provenance: Default::default(),
                    depth: 0,
                    priority: Priority::SEED,
                    ..candidate(u)
                })
                .to_vec();
            seen.send(Discover {
                candidates: seeds,
                detail: true,
                from: None,
            })
            .await
            .unwrap()
            .unwrap()
        });
        assert_eq!(
            discovered.outcomes,
            [UrlOutcome::Filtered("budget_domain"), UrlOutcome::Admitted]
        );
        let a = discovered.admission;
        assert_eq!((a.admitted, a.seen, a.filtered), (1, 0, 1), "{a:?}");
    }
}

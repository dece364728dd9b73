//! Seeds offered to the node: routed like links, answered only once
//! durable (with a checkpoint chain).

use super::*;

/// Offers seed URLs (depth 0). Unparseable ones count as filtered.
#[derive(Debug, Message)]
#[rtype(result = "Result<Admission, Failure>")]
pub struct Seed {
    /// The seed URLs.
    pub urls: Vec<String>,
}

impl Handler<Seed> for Node {
    type Result = ResponseActFuture<Self, Result<Admission, Failure>>;

    fn handle(&mut self, msg: Seed, _: &mut Self::Context) -> Self::Result {
        Box::pin(
            self.offer(msg.urls, false, false, Priority::SEED)
                .map(|r, _, _| r.map(|(a, _)| a)),
        )
    }
}

/// Offers seed URLs as [`Seed`] does, answering what became of each, in
/// order (`trawl run`'s seeds, the admin API's `POST /api/v1/seeds`).
#[derive(Debug, Message)]
#[rtype(result = "Result<Vec<UrlOutcome>, Failure>")]
pub struct SeedEach {
    /// The seed URLs.
    pub urls: Vec<String>,
    /// Offer them as changed now: a removed URL comes back even if it was
    /// given as a seed before, a fetched one is due at once (see
    /// [`crate::frontier::lifecycle::due_again`]).
    pub reseed: bool,
}

impl Handler<SeedEach> for Node {
    type Result = ResponseActFuture<Self, Result<Vec<UrlOutcome>, Failure>>;

    fn handle(&mut self, msg: SeedEach, _: &mut Self::Context) -> Self::Result {
        Box::pin(
            self.offer(msg.urls, true, msg.reseed, Priority::SEED)
                .map(|r, _, _| r.map(|(_, o)| o)),
        )
    }
}

/// Offers URLs an earlier crawl fetched (`[previous] reseed`): admitted
/// like seeds (depth 0, no via) but not as seeds: at [`Priority::HIGH`],
/// ahead of what this crawl finds, without marking their domains seeded
/// (which would raise their budgets) or counting as seeds in the report.
/// Replies with each URL's outcome.
#[derive(Debug, Message)]
#[rtype(result = "Result<Vec<UrlOutcome>, Failure>")]
pub struct OfferEarlier {
    /// The URLs.
    pub urls: Vec<String>,
}

impl Handler<OfferEarlier> for Node {
    type Result = ResponseActFuture<Self, Result<Vec<UrlOutcome>, Failure>>;

    fn handle(&mut self, msg: OfferEarlier, _: &mut Self::Context) -> Self::Result {
        Box::pin(
            self.offer(msg.urls, true, false, Priority::HIGH)
                .map(|r, _, _| r.map(|(_, o)| o)),
        )
    }
}

impl Node {
    /// Offers `urls` at depth 0 and `priority` (seeds: [`Priority::SEED`]);
    /// with `detail`, also what became of each (an unparseable one is
    /// filtered as `invalid`); with `reseed`, as changed now (a `lastmod`
    /// of now). With a checkpoint chain it
    /// resolves only once published checkpoints hold the seeds (see
    /// [`Node::published`]): a seed answered is never lost with this node.
    pub(super) fn offer(
        &mut self,
        urls: Vec<String>,
        detail: bool,
        reseed: bool,
        priority: Priority,
    ) -> impl ActorFuture<Self, Output = Result<(Admission, Vec<UrlOutcome>), Failure>> {
        let parsed: Vec<Option<Url>> = urls.iter().map(|u| Url::parse(u.trim()).ok()).collect();
        let lastmod_ms = reseed.then(|| self.clock.now().unix_ms());
        let candidates: Vec<Candidate> = parsed
            .iter()
            .flatten()
            .map(|url| Candidate {
                provenance: Default::default(),
                referrer: None,
                url: url.clone(),
                depth: 0,
                priority,
                kind: EntryKind::Page,
                lastmod_ms,
                cash: crate::frontier::importance::Cash::SEED,
            })
            .collect();
        let unparsed = urls.len() - candidates.len();
        let send = self.seen.send(Discover {
            candidates,
            detail,
            from: None,
        });
        let discovered = async move { send.await? };
        discovered.into_actor(self).then(move |discovered, act, _| {
            // Seeds of partitions held elsewhere (a cluster node) wait in
            // the outbox of a partition this node holds, durably, and go
            // to their owners like links do (retried until an owner that
            // holds the partition takes them). A node holding no partition
            // yet hands them over at once or fails.
            let routed = discovered.and_then(|d| {
                let mut admission = d.admission;
                admission.filtered += unparsed;
                let mut outcomes = d.outcomes.into_iter();
                let outcomes: Vec<UrlOutcome> = match detail {
                    true => parsed
                        .iter()
                        .map(|p| match p {
                            Some(_) => outcomes.next().unwrap_or(UrlOutcome::Filtered("invalid")),
                            None => UrlOutcome::Filtered("invalid"),
                        })
                        .collect(),
                    false => Vec::new(),
                };
                // What must be in a published checkpoint before the
                // seeds are answered: an answered seed outlives the loss
                // of this node with its disk.
                let mut written = d.straight;
                if d.remote.is_empty() {
                    return Ok((admission, outcomes, Vec::new(), written));
                }
                if let Some((id, held)) = act.schedule.seed_outbox() {
                    held.store
                        .complete_with_outbox(&[], &[], &d.remote, &[])
                        .map_err(|e| Failure::Store(e.to_string()))?;
                    written.push(id);
                    return Ok((admission, outcomes, Vec::new(), written));
                }
                let sends = d
                    .remote
                    .into_iter()
                    .map(|batch| {
                        act.deliver(batch).ok_or_else(|| {
                            Failure::Peer("a seed's partition has no owner yet".into())
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((admission, outcomes, sends, written))
            });
            let routed = routed.map(|(admission, outcomes, sends, written)| {
                (admission, outcomes, sends, act.published(written))
            });
            async move {
                let (admission, outcomes, sends, published) = routed?;
                for send in sends {
                    send.await?;
                }
                published.await?;
                Ok((admission, outcomes))
            }
            .into_actor(act)
        })
    }
}

//! DigestRouter: takes each page's payload-digest questions (exact dedup's
//! claim, then its register or abandon, [`crate::dedup::exact`]) to the
//! partition that owns the digest.
//!
//! It runs on the first store arbiter, beside the hosts that ask and the
//! partitions that answer (with one store thread, all of them). Routed
//! through the node, which runs on its own thread, each question was four
//! messages between threads (host → node → partition → node → host), each
//! a wake-up: eight a page. Questions for a partition not held here go on
//! to the node, which asks the partition's owner over the cluster bridge.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::future::BoxFuture;

use super::messages::{DigestQuery, Failure, Reroute};
use crate::dedup::exact::{digest_partition, DigestReply};
use crate::metrics::Metrics;

/// The longest a digest question waits for its answer: longer than a
/// claim may stay open (a waiting claim is answered by then), short
/// enough that a partition whose owner is unreachable holds pages up only
/// briefly (they are then stored in full).
pub(super) const DIGEST_WAIT: Duration = Duration::from_secs(15);

/// A question on its way to the partition that answers it.
pub(super) type Asked = BoxFuture<'static, Result<DigestReply, Failure>>;

/// The DigestRouter actor.
pub struct DigestRouter {
    /// One recipient per partition, indexed by partition id; `None` for a
    /// partition this node does not hold.
    partitions: Vec<Option<Recipient<DigestQuery>>>,
    /// Where questions for the other partitions go.
    node: Recipient<DigestQuery>,
    metrics: Arc<Metrics>,
}

impl DigestRouter {
    /// A router to `partitions` (all of the crawl's, `None` where not held
    /// here) that hands the others' questions to `node`.
    pub fn new(
        partitions: Vec<Option<Recipient<DigestQuery>>>,
        node: Recipient<DigestQuery>,
        metrics: Arc<Metrics>,
    ) -> Self {
        DigestRouter {
            partitions,
            node,
            metrics,
        }
    }
}

/// The answer to a question sent on as `asked` (`None`: no one to ask),
/// counted in `trawl_digest_answers_total`; one that cannot be had in
/// [`DIGEST_WAIT`] is `Unclaimed`, so exact dedup never stops a page.
pub(super) async fn answer(asked: Option<Asked>, metrics: Arc<Metrics>) -> DigestReply {
    let answer = match asked {
        Some(asked) => tokio::time::timeout(DIGEST_WAIT, asked).await.ok(),
        None => None,
    };
    let (reply, label) = match answer {
        Some(Ok(reply)) => {
            let label = match reply {
                DigestReply::Stored(_) => "stored",
                DigestReply::Claimed => "claimed",
                DigestReply::Unclaimed => "unclaimed",
            };
            (reply, label)
        }
        Some(Err(failure)) => {
            tracing::debug!(error = %failure, "digest question failed");
            (DigestReply::Unclaimed, "unanswered")
        }
        None => (DigestReply::Unclaimed, "unanswered"),
    };
    metrics.digest_answers.with_label_values(&[label]).inc();
    reply
}

impl Actor for DigestRouter {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A host has at most one question out, and active hosts are
        // capped: the mailbox need not refuse any.
        ctx.set_mailbox_capacity(usize::MAX);
    }
}

impl Handler<DigestQuery> for DigestRouter {
    type Result = ResponseFuture<Result<DigestReply, Failure>>;

    fn handle(&mut self, msg: DigestQuery, _: &mut Self::Context) -> Self::Result {
        let partition = digest_partition(&msg.digest, self.partitions.len() as u16);
        match self
            .partitions
            .get(usize::from(partition))
            .cloned()
            .flatten()
        {
            Some(held) => {
                let asked: Asked = Box::pin(async move { held.send(msg).await? });
                let metrics = self.metrics.clone();
                Box::pin(async move { Ok(answer(Some(asked), metrics).await) })
            }
            None => {
                // The node asks the owner (and counts the answer).
                let ask = self.node.send(msg);
                Box::pin(async move { ask.await? })
            }
        }
    }
}

impl Handler<Reroute<DigestQuery>> for DigestRouter {
    type Result = ();

    fn handle(&mut self, msg: Reroute<DigestQuery>, _: &mut Self::Context) {
        if let Some(slot) = self.partitions.get_mut(usize::from(msg.id)) {
            *slot = msg.to;
        }
    }
}

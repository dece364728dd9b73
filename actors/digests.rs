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

use super::messages::{DigestQuery, Failure};
use crate::dedup::exact::{digest_partition, DigestReply};
use crate::metrics::Metrics;
use crate::scheduler::routes::RouteTable;

/// Where a partition held here takes its digest questions.
pub type DigestRoutes = Arc<RouteTable<Recipient<DigestQuery>>>;

/// The longest a digest question waits for its answer: longer than a
/// claim may stay open (a waiting claim is answered by then), short
/// enough that a partition whose owner is unreachable holds pages up only
/// briefly (they are then stored in full).
pub(super) const DIGEST_WAIT: Duration = Duration::from_secs(15);

/// A question on its way to the partition that answers it.
pub(super) type Asked = BoxFuture<'static, Result<DigestReply, Failure>>;

/// The DigestRouter actor.
pub struct DigestRouter {
    /// The partitions held here, as the node machine decides them
    /// (`NodeScheduler::here`, published by the node).
    routes: DigestRoutes,
    /// Where questions for the other partitions go.
    node: Recipient<DigestQuery>,
    metrics: Arc<Metrics>,
}

impl DigestRouter {
    /// A router to the partitions `routes` holds here that hands the
    /// others' questions to `node`.
    pub fn new(routes: DigestRoutes, node: Recipient<DigestQuery>, metrics: Arc<Metrics>) -> Self {
        DigestRouter {
            routes,
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
        let routes = self.routes.load();
        let partition = digest_partition(&msg.digest, routes.len() as u16);
        match routes.here(partition).cloned() {
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

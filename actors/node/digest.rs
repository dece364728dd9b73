//! Digest questions: asked of the partition the node machine routes them
//! to (here, or its owner over the bridge), and answered for peers.

use super::*;

impl Node {
    /// Asks `query` of the digest's partition: here if this node holds it,
    /// of its owner over the bridge if another node does; `None` while it
    /// has no owner (or is being opened here).
    pub(super) fn ask_partition(
        &self,
        partition: u16,
        query: DigestQuery,
    ) -> Option<digests::Asked> {
        match self.schedule.route_of(partition) {
            Route::Here => {
                let ask = self.schedule.held(partition)?.addr.send(query);
                Some(Box::pin(async move { ask.await? }))
            }
            Route::Peer(peer) => {
                let ask = self.cluster.as_ref()?.bridge.send(SendDigest {
                    peer,
                    partition,
                    query,
                });
                Some(Box::pin(async move { ask.await? }))
            }
            Route::Nowhere => None,
        }
    }
}

impl Handler<DigestQuery> for Node {
    type Result = ResponseFuture<Result<DigestReply, Failure>>;

    /// Questions the DigestRouter could not answer here: for a partition
    /// another node owns (or none does yet).
    fn handle(&mut self, msg: DigestQuery, _: &mut Self::Context) -> Self::Result {
        let partition = digest_partition(&msg.digest, self.schedule.partitions());
        let asked = self.ask_partition(partition, msg);
        let metrics = self.metrics.clone();
        Box::pin(async move { Ok(digests::answer(asked, metrics).await) })
    }
}

impl Handler<RemoteDigest> for Node {
    type Result = ResponseFuture<Result<DigestReply, Failure>>;

    fn handle(&mut self, msg: RemoteDigest, _: &mut Self::Context) -> Self::Result {
        let Some(held) = self.schedule.held(msg.partition) else {
            let partition = msg.partition;
            return Box::pin(async move { Err(Failure::NotHeld { partition }) });
        };
        let ask = held.addr.send(msg.query);
        Box::pin(async move { ask.await? })
    }
}

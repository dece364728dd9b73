//! What a connection reports to the bridge actor: it is up, and the
//! peer's acks and refusals of our batches, which the peer's
//! [`PeerLink`] resolves.

use super::*;

/// A connection finished its handshake with `peer`: batches go to it
/// through `admits`; the actor keeps `member` up to date.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Established {
    pub(super) conn: u64,
    pub(super) peer: String,
    pub(super) admits: mpsc::UnboundedSender<Bytes>,
    pub(super) member: Arc<AtomicBool>,
}

impl Handler<Established> for BridgeActor {
    type Result = ();

    fn handle(&mut self, msg: Established, ctx: &mut Self::Context) {
        self.handshaking.remove(&msg.conn);
        if !self.conns.contains_key(&msg.conn) {
            // Cancelled while this was in the mailbox (a dial to an old
            // address, a peer that left): its writer is gone.
            return;
        }
        let settings = &self.settings;
        let peer = self
            .peers
            .entry(msg.peer.clone())
            .or_insert_with(|| Peer::new(settings));
        let label = peer.label(&msg.peer);
        msg.member.store(peer.addr.is_some(), Ordering::Relaxed);
        if peer.dialing == Some(msg.conn) {
            peer.dialing = None;
        }
        let (_, out) = peer.link.connected(msg.conn, self.settings.clock.now().at);
        let old = peer.conn.replace(Conn {
            id: msg.conn,
            admits: msg.admits,
            member: msg.member,
        });
        peer.write(&msg.peer, out, &self.metrics);
        self.metrics
            .bridge_connections
            .with_label_values(&[label])
            .inc();
        tracing::info!(peer = %msg.peer, "bridge: connected");
        if let Some(old) = old {
            tracing::info!(peer = %msg.peer, "bridge: a new connection replaces the old one");
            self.metrics
                .bridge_disconnects
                .with_label_values(&["replaced"])
                .inc();
            self.cancel_conn(old.id, ctx);
        }
    }
}

/// The peer acked batch `seq`.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Acked {
    pub(super) peer: String,
    pub(super) seq: u64,
    /// The answer, if `seq` was a question.
    pub(super) answer: Option<WireReply>,
}

impl Handler<Acked> for BridgeActor {
    type Result = ();

    fn handle(&mut self, msg: Acked, _: &mut Self::Context) {
        let Some(peer) = self.peers.get_mut(&msg.peer) else {
            return;
        };
        let Some((waiter, out)) = peer.link.acked(msg.seq) else {
            // A batch acked twice (sent again after a reconnect), or one
            // that failed when the peer left.
            tracing::debug!(peer = %msg.peer, seq = msg.seq, "bridge: ack of no unacked batch");
            return;
        };
        let _ = waiter.reply.send(Ok(msg.answer));
        self.metrics
            .bridge_batches
            .with_label_values(&[peer.label(&msg.peer), "acked"])
            .inc();
        peer.write(&msg.peer, out, &self.metrics);
    }
}

/// The peer did not admit batch `seq`: it does not hold its partition.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Nacked {
    pub(super) peer: String,
    pub(super) seq: u64,
    pub(super) reason: String,
}

impl Handler<Nacked> for BridgeActor {
    type Result = ();

    fn handle(&mut self, msg: Nacked, _: &mut Self::Context) {
        let Some(peer) = self.peers.get_mut(&msg.peer) else {
            return;
        };
        let Some((waiter, out)) = peer.link.refused(msg.seq) else {
            return;
        };
        let partition = waiter.partition;
        tracing::debug!(peer = %msg.peer, partition, reason = %msg.reason, "bridge: batch not taken; the sender routes it again");
        let _ = waiter.reply.send(Err(Failure::NotHeld { partition }));
        self.metrics
            .bridge_batches
            .with_label_values(&[peer.label(&msg.peer), "nacked"])
            .inc();
        peer.write(&msg.peer, out, &self.metrics);
    }
}

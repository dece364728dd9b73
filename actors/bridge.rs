//! Bridge: this node's links to the other nodes of its cluster.
//!
//! One framed connection (TCP, under TLS) per peer node (the protocol is
//! [`crate::cluster::wire`]) carries batches of URLs for partitions the
//! peer owns, each acked once the peer admitted it durably.
//!
//! - **Who may connect.** With `[cluster]` TLS files ([`BridgeSettings::tls`],
//!   the default for a cluster), every connection is mutual TLS 1.3
//!   against the cluster's CA ([`crate::cluster::tls`]): the dialler
//!   checks that the certificate of the node it dialled names that node,
//!   the acceptor that the client's certificate names the node its hello
//!   names. A connection that fails either is closed before a message of
//!   it is read (`tls`, `not_certified`), so no one without a node's key
//!   can hand this node links or digest questions.
//! - **Who dials.** Of two nodes, the one with the smaller node id (byte
//!   order) dials, the other accepts, so a pair has exactly one connection
//!   and two nodes never race to replace each other's. A node that dials
//!   the wrong way is refused (`wrong_direction`). A connection from a node
//!   that is not a member (yet) is accepted and its batches delivered:
//!   membership may lag behind the peer's; nothing is sent to it until a
//!   [`SetPeers`] names it. A newer connection from the same node replaces
//!   an older one (the older is usually half-open: the peer restarted).
//! - **Handshake, window, liveness.** One connection's decisions are its
//!   [`Connection`] machine's (`src/cluster/conn.rs`): the hellos and what
//!   they must say, at most `window` inbound batches being handled (then
//!   TCP pushes back), a heartbeat after an interval with nothing written,
//!   a close after three intervals of silence. A refusal sends
//!   [`WireMessage::Refuse`] with the reason, best effort, and both sides
//!   log it; only that connection closes, and nothing from the network
//!   can make the bridge panic.
//! - **Batches and the window.** [`SendBatch`] resolves only when the peer
//!   acks the batch. The numbering, the window of unacked batches, the
//!   resending of every unacked batch on a new connection and the redial
//!   backoff are [`crate::cluster::link::PeerLink`]'s, a state machine with
//!   no I/O; this actor carries out what it says. A batch too large to
//!   encode fails at once (`Failure::Invalid`): sending it again cannot help.
//! - **Digest questions** ([`SendDigest`]) share the batches' numbering,
//!   window and resending; their answer (`Answer`) resolves the sender's
//!   request with the peer's reply. Inbound, a `Digest` becomes a
//!   [`RemoteDigest`].
//! - **Inbound.** An `Admit` becomes a [`RemoteAdmit`] to the inbound
//!   recipient. What it gets back is [`link::answer`]'s rule: admitted is
//!   acked; `Failure::NotHeld` (this node does not hold the partition: the
//!   sender's view of the cluster is not ours) is answered `Nack`, and the
//!   sender's `SendBatch` fails with the same typed `NotHeld`, so the
//!   sender routes the batch again by its next view; any other failure
//!   closes the connection (`rejected`, logged), so the sender resends it,
//!   to the same node, after its backoff, which paces retries while the
//!   failure lasts. A question that fails here other than `NotHeld` is
//!   answered `Unclaimed` (the asker stores the payload in full).
//! - **Redials** back off exponentially from `reconnect_base` to
//!   `reconnect_max`; the backoff starts over once a connection made
//!   progress (a batch acked either way) or lasted `reconnect_max`, so a
//!   peer that keeps rejecting is not hammered.
//!
//! Connection I/O runs as futures spawned in the actor's context: they
//! stop with it (closing their sockets), and they report to the actor by
//! messages private to the bridge (`reports`). Nothing in them blocks; encoding or
//! decoding a batch (postcard, tens of KiB for a usual batch, at most a
//! frame) is done inline.

mod conn;
mod reports;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use futures_util::Stream;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::sleep;

use super::messages::{
    BridgeInbound, BridgeStatus, Failure, GetBridgeStatus, PeerStatus, SendBatch, SendDigest,
    SetPeers,
};
use crate::cluster::conn::{short, Closed, Connection};
pub use crate::cluster::conn::{BridgeError, BridgeSettings};
use crate::cluster::link::{self, Backoff, PeerLink, Transmit};
use crate::cluster::wire::{self, Message as WireMessage, WireReply};
use crate::dedup::exact::DigestReply;
use crate::metrics::Metrics;
use conn::{ConnSetup, Ended};
use reports::{Acked, Established, Nacked};

/// The metric label of a node that is not a member: node ids from the
/// network are only labels once membership vouches for them.
const UNKNOWN_PEER: &str = "unknown";
/// After a failed `accept` (out of file descriptors...), the listener
/// waits this long rather than spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);
/// Accepted connections still in their handshake, at most: beyond, new
/// ones are closed at once (`busy`), so a flood of idle sockets costs
/// little until their handshake times out.
const MAX_HANDSHAKES: usize = 64;

/// How the bridge runs.
/// Who waits for a batch or question: resolved with its ack or answer, or
/// failed (`NotHeld` for `partition` when the peer refuses it).
struct Waiter {
    reply: oneshot::Sender<Outcome>,
    partition: u16,
}

/// How a batch or question ended: acked (`None`) or answered.
type Outcome = Result<Option<WireReply>, Failure>;

/// An established connection, as the actor sees it.
struct Conn {
    id: u64,
    /// To the connection's writer: encoded `Admit`s (at most `window` per
    /// link ever, so unbounded is bounded).
    admits: mpsc::UnboundedSender<Bytes>,
    /// Shared with the connection: the peer is a member, so its id is its
    /// metric label (a node may connect before membership names it).
    member: Arc<AtomicBool>,
}

/// What the bridge knows of one other node: the link's bookkeeping
/// ([`PeerLink`]: numbers, window, resends, backoff) and its I/O.
struct Peer {
    /// Its bridge address while it is a member.
    addr: Option<SocketAddr>,
    link: PeerLink<Waiter>,
    conn: Option<Conn>,
    /// A dial of ours in progress (connecting or in the handshake).
    dialing: Option<u64>,
    /// A redial timer armed.
    redial: Option<SpawnHandle>,
    /// Dials that failed to connect in a row (only the first is a warning).
    failed_dials: u32,
}

impl Peer {
    fn new(settings: &BridgeSettings) -> Self {
        let backoff = Backoff::new(settings.reconnect_base, settings.reconnect_max);
        Peer {
            addr: None,
            link: PeerLink::new(settings.window, backoff),
            conn: None,
            dialing: None,
            redial: None,
            failed_dials: 0,
        }
    }

    fn label<'a>(&self, id: &'a str) -> &'a str {
        if self.addr.is_some() {
            id
        } else {
            UNKNOWN_PEER
        }
    }

    /// Writes what the link lets out on the connection, and counts it.
    fn write(&self, id: &str, out: Vec<Transmit>, metrics: &Metrics) {
        let label = self.label(id);
        if let Some(conn) = &self.conn {
            for t in out {
                if conn.admits.send(t.frame).is_ok() {
                    let outcome = if t.resent { "resent" } else { "sent" };
                    metrics
                        .bridge_batches
                        .with_label_values(&[label, outcome])
                        .inc();
                }
            }
        }
        metrics
            .bridge_unacked
            .with_label_values(&[label])
            .set(self.link.unacked() as i64);
    }
}

/// The Bridge actor.
pub struct BridgeActor {
    settings: BridgeSettings,
    inbound: BridgeInbound,
    metrics: Arc<Metrics>,
    /// Until `started` makes it a stream of connections.
    listener: Option<TcpListener>,
    peers: BTreeMap<String, Peer>,
    /// Running connections (dialled or accepted), by connection id.
    conns: HashMap<u64, SpawnHandle>,
    /// Accepted connections in their handshake.
    handshaking: std::collections::HashSet<u64>,
    next_conn: u64,
}

impl BridgeActor {
    /// Binds `settings.listen` and starts the bridge; returns its address
    /// and the address it listens on. Must be called inside an actix
    /// system. Batches that arrive go to `inbound`.
    pub fn start(
        settings: BridgeSettings,
        inbound: BridgeInbound,
        metrics: Arc<Metrics>,
    ) -> Result<(Addr<BridgeActor>, SocketAddr), BridgeError> {
        settings.check()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(BridgeError::NoRuntime);
        }
        let (listener, bound) = listen(settings.listen).map_err(|source| BridgeError::Listen {
            addr: settings.listen,
            source,
        })?;
        tracing::info!(node = %settings.node_id, %bound, "bridge listening");
        let actor = BridgeActor {
            settings,
            inbound,
            metrics,
            listener: Some(listener),
            peers: BTreeMap::new(),
            conns: HashMap::new(),
            handshaking: Default::default(),
            next_conn: 0,
        };
        Ok((actor.start(), bound))
    }

    /// What a new connection needs.
    fn setup(&mut self, remote: SocketAddr, ctx: &Context<Self>) -> ConnSetup {
        self.next_conn += 1;
        ConnSetup {
            id: self.next_conn,
            remote,
            bridge: ctx.address(),
            inbound: self.inbound.clone(),
            metrics: self.metrics.clone(),
            tls: self.settings.tls.clone(),
            clock: self.settings.clock.clone(),
        }
    }

    /// Runs a connection in the actor's context; [`Self::closed`] hears
    /// how it ended (unless it is cancelled).
    fn spawn_conn<F>(&mut self, id: u64, conn: F, ctx: &mut Context<Self>)
    where
        F: Future<Output = Ended> + 'static,
    {
        let handle = ctx.spawn(
            conn.into_actor(self)
                .map(move |ended, act, ctx| act.closed(id, ended, ctx)),
        );
        self.conns.insert(id, handle);
    }

    fn cancel_conn(&mut self, id: u64, ctx: &mut Context<Self>) {
        if let Some(handle) = self.conns.remove(&id) {
            ctx.cancel_future(handle);
        }
    }

    /// Dials `id` if we are the dialer, it is a member and nothing is up,
    /// in progress or scheduled.
    fn dial(&mut self, id: &str, ctx: &mut Context<Self>) {
        if !self.settings.dials(id) {
            return;
        }
        let Some(peer) = self.peers.get(id) else {
            return;
        };
        let Some(addr) = peer.addr else { return };
        if peer.conn.is_some() || peer.dialing.is_some() || peer.redial.is_some() {
            return;
        }
        let setup = self.setup(addr, ctx);
        let conn = setup.id;
        if let Some(peer) = self.peers.get_mut(id) {
            peer.dialing = Some(conn);
        }
        let machine = Connection::dialled(&self.settings, id, self.settings.clock.now().at);
        self.spawn_conn(conn, conn::dial(setup, machine), ctx);
    }

    /// Dials `id` again after its backoff, doubling the next one.
    fn schedule_redial(&mut self, id: &str, ctx: &mut Context<Self>) {
        if !self.settings.dials(id) {
            return;
        }
        let Some(peer) = self.peers.get_mut(id) else {
            return;
        };
        if peer.addr.is_none() || peer.redial.is_some() {
            return;
        }
        let delay = peer.link.redial_delay();
        let owned = id.to_owned();
        peer.redial = Some(ctx.run_later(delay, move |act, ctx| {
            if let Some(peer) = act.peers.get_mut(&owned) {
                peer.redial = None;
            }
            act.dial(&owned, ctx);
        }));
    }

    /// A connection ended (it was not cancelled).
    fn closed(&mut self, conn: u64, ended: Ended, ctx: &mut Context<Self>) {
        self.conns.remove(&conn);
        self.handshaking.remove(&conn);
        let Some(id) = ended.peer else { return };
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        if peer.dialing == Some(conn) {
            peer.dialing = None;
        }
        let closed = link::Closed {
            conn,
            progress: ended.progress,
        };
        if peer.link.closed(closed, self.settings.clock.now().at) {
            peer.conn = None;
        }
        if let Closed::Connect(e) = &ended.closed {
            peer.failed_dials += 1;
            if peer.failed_dials == 1 {
                tracing::warn!(peer = %id, error = %e, "bridge: cannot connect; retrying with backoff");
            } else {
                tracing::debug!(peer = %id, error = %e, attempts = peer.failed_dials, "bridge: cannot connect");
            }
        } else {
            peer.failed_dials = 0;
        }
        if peer.addr.is_none() && peer.conn.is_none() {
            // A non-member that went away: nothing to keep (non-members
            // have no batches).
            self.peers.remove(&id);
            return;
        }
        self.schedule_redial(&id, ctx);
    }

    /// `id` left the cluster: disconnect it and fail its batches, which
    /// their senders route again.
    fn leave(&mut self, id: &str, ctx: &mut Context<Self>) {
        let Some(mut peer) = self.peers.remove(id) else {
            return;
        };
        if let Some(handle) = peer.redial.take() {
            ctx.cancel_future(handle);
        }
        if let Some(conn) = peer.dialing.take() {
            self.cancel_conn(conn, ctx);
        }
        if let Some(conn) = peer.conn.take() {
            self.cancel_conn(conn.id, ctx);
            self.metrics
                .bridge_disconnects
                .with_label_values(&["left"])
                .inc();
        }
        let failed = self
            .metrics
            .bridge_batches
            .with_label_values(&[id, "failed"]);
        for waiter in peer.link.leave() {
            failed.inc();
            let _ = waiter
                .reply
                .send(Err(Failure::Peer(format!("{id} left the cluster"))));
        }
        let _ = self.metrics.bridge_unacked.remove_label_values(&[id]);
        tracing::info!(peer = %id, "bridge: peer left");
    }

    /// Queues a batch or question for `peer`, `message` making its frame
    /// from its number; the receiver resolves with the ack or answer.
    /// An encoding error (a batch over a frame's size) fails the send
    /// with [`Failure::Invalid`]: sending it again cannot help.
    fn enqueue(
        &mut self,
        id: &str,
        partition: u16,
        message: impl FnOnce(u64) -> WireMessage,
    ) -> Result<oneshot::Receiver<Outcome>, Failure> {
        let peer = self
            .peers
            .get_mut(id)
            .filter(|p| p.addr.is_some())
            .ok_or_else(|| Failure::Peer(format!("{:?} is not a member", short(id))))?;
        let (reply, rx) = oneshot::channel();
        let waiter = Waiter { reply, partition };
        let out = peer
            .link
            .enqueue(|seq| wire::encode(&message(seq)), waiter)
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        peer.write(id, out, &self.metrics);
        Ok(rx)
    }
}

/// Binds a listener that may reuse the address of a predecessor whose
/// connections linger in TIME_WAIT (a restarted node keeps its address).
fn listen(addr: SocketAddr) -> io::Result<(TcpListener, SocketAddr)> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    let listener = socket.listen(1024)?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}

/// The listener as a stream of accepted connections; it never ends.
fn accepts(listener: TcpListener) -> impl Stream<Item = io::Result<(TcpStream, SocketAddr)>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await;
        if accepted.is_err() {
            sleep(ACCEPT_PAUSE).await;
        }
        Some((accepted, listener))
    })
}

impl Actor for BridgeActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Acks come by `do_send` (never refused for a full mailbox);
        // senders of batches, and connections reporting their handshake,
        // wait for room like for any actor.
        if let Some(listener) = self.listener.take() {
            ctx.add_stream(accepts(listener));
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        for id in self.peers.keys() {
            let _ = self.metrics.bridge_unacked.remove_label_values(&[id]);
        }
        tracing::info!(node = %self.settings.node_id, "bridge stopped");
    }
}

impl StreamHandler<io::Result<(TcpStream, SocketAddr)>> for BridgeActor {
    fn handle(&mut self, item: io::Result<(TcpStream, SocketAddr)>, ctx: &mut Self::Context) {
        match item {
            Ok((stream, remote)) => {
                if self.handshaking.len() >= MAX_HANDSHAKES {
                    self.metrics
                        .bridge_refusals
                        .with_label_values(&["busy"])
                        .inc();
                    tracing::warn!(%remote, "bridge: too many handshakes at once; connection closed");
                    return;
                }
                let setup = self.setup(remote, ctx);
                let id = setup.id;
                self.handshaking.insert(id);
                let machine = Connection::accepted(&self.settings, self.settings.clock.now().at);
                self.spawn_conn(id, conn::run(stream, setup, machine), ctx);
            }
            Err(e) => tracing::warn!(error = %e, "bridge: accept failed"),
        }
    }

    /// The accept stream never ends; the default would stop the actor.
    fn finished(&mut self, _: &mut Self::Context) {
        tracing::error!("bridge: the listener ended");
    }
}

impl Handler<SetPeers> for BridgeActor {
    type Result = ();

    fn handle(&mut self, msg: SetPeers, ctx: &mut Self::Context) {
        let gone: Vec<String> = self
            .peers
            .iter()
            .filter(|(id, p)| p.addr.is_some() && !msg.peers.contains_key(*id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.leave(&id, ctx);
        }
        for (id, addr) in msg.peers {
            if id == self.settings.node_id {
                continue;
            }
            let settings = &self.settings;
            let peer = self
                .peers
                .entry(id.clone())
                .or_insert_with(|| Peer::new(settings));
            if peer.addr != Some(addr) {
                peer.addr = Some(addr);
                if let Some(conn) = &peer.conn {
                    conn.member.store(true, Ordering::Relaxed);
                }
                peer.link.reset_backoff();
                peer.failed_dials = 0;
                // A dial to its old address starts over; an established
                // connection is to the right node whatever its address.
                let redial = peer.redial.take();
                let dialing = peer.dialing.take();
                if let Some(handle) = redial {
                    ctx.cancel_future(handle);
                }
                if let Some(conn) = dialing {
                    self.cancel_conn(conn, ctx);
                }
            }
            // A no-op while connected, dialling or waiting to redial.
            self.dial(&id, ctx);
        }
    }
}

impl Handler<SendBatch> for BridgeActor {
    type Result = ResponseFuture<Result<(), Failure>>;

    fn handle(&mut self, msg: SendBatch, _: &mut Self::Context) -> Self::Result {
        let SendBatch {
            peer,
            partition,
            entries,
        } = msg;
        let sent = self.enqueue(&peer, partition, |seq| WireMessage::Admit {
            seq,
            partition,
            entries,
        });
        Box::pin(async move { outcome(sent).await.map(drop) })
    }
}

impl Handler<SendDigest> for BridgeActor {
    type Result = ResponseFuture<Result<DigestReply, Failure>>;

    fn handle(&mut self, msg: SendDigest, _: &mut Self::Context) -> Self::Result {
        let SendDigest {
            peer,
            partition,
            query,
        } = msg;
        let sent = self.enqueue(&peer, partition, |seq| WireMessage::Digest {
            seq,
            partition,
            digest: query.digest,
            ask: query.ask.into(),
        });
        Box::pin(async move {
            match outcome(sent).await? {
                Some(reply) => Ok(reply.into()),
                None => Err(Failure::Peer(
                    "a digest question was acked, not answered".into(),
                )),
            }
        })
    }
}

/// What became of an enqueued batch or question.
async fn outcome(sent: Result<oneshot::Receiver<Outcome>, Failure>) -> Outcome {
    sent?
        .await
        .unwrap_or_else(|_| Err(Failure::Mailbox("the bridge stopped".into())))
}

impl Handler<GetBridgeStatus> for BridgeActor {
    type Result = MessageResult<GetBridgeStatus>;

    fn handle(&mut self, _: GetBridgeStatus, _: &mut Self::Context) -> Self::Result {
        let peers = self
            .peers
            .iter()
            .map(|(id, p)| PeerStatus {
                node: id.clone(),
                addr: p.addr,
                dials: self.settings.dials(id),
                connected: p.conn.is_some(),
                unacked: p.link.unacked(),
                waiting: p.link.waiting(),
            })
            .collect();
        MessageResult(BridgeStatus { peers })
    }
}

#[cfg(test)]
mod tests;

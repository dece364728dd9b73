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
//! - **Handshake.** Each side sends its hello first and checks the other's
//!   ([`wire::check_hello`]); the dialer also checks that the node it
//!   dialled answered. On a refusal it sends [`WireMessage::Refuse`] with
//!   the reason and closes; both sides log it (`tracing::warn`). So does a
//!   frame that does not decode, one over [`wire::MAX_FRAME`] or a message
//!   out of place after the handshake (a `Refuse` is still sent, best
//!   effort, for the peer's log). Only that connection closes; the bridge
//!   goes on, and nothing from the network can make it panic.
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
//!   answered `Unclaimed` (the asker stores the payload in full). At most
//!   `window` inbound batches per connection are being admitted or acked
//!   at once; beyond that the bridge stops reading and TCP pushes back.
//! - **Liveness.** A side that wrote nothing for a heartbeat interval sends
//!   a heartbeat; a connection silent for three intervals (or whose peer
//!   takes no bytes for that long) is closed, and the dialer dials again.
//!   Redials back off exponentially from `reconnect_base` to
//!   `reconnect_max`; the backoff starts over once a connection made
//!   progress (a batch acked either way) or lasted `reconnect_max`, so a
//!   peer that keeps rejecting is not hammered.
//!
//! Connection I/O runs as futures spawned in the actor's context: they
//! stop with it (closing their sockets), and they talk to the actor by
//! messages private to this file. Nothing in them blocks; encoding or
//! decoding a batch (postcard, tens of KiB for a usual batch, at most a
//! frame) is done inline.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, Stream, StreamExt};
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::{sleep, sleep_until, timeout, Instant};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec, LengthDelimitedCodecError};

use super::messages::{
    BridgeInbound, BridgeStatus, DigestQuery, Failure, GetBridgeStatus, PeerStatus, RemoteAdmit,
    RemoteDigest, SendBatch, SendDigest, SetPeers,
};
use crate::cluster::link::{self, Backoff, Handled, PeerLink, Transmit};
use crate::cluster::tls::{self, NodeTls};
use crate::cluster::valid_node_id;
use crate::cluster::wire::{
    self, Message as WireMessage, Refusal, WireError, WireReply, MAX_FRAME,
};
use crate::dedup::exact::DigestReply;
use crate::metrics::Metrics;

/// The metric label of a node that is not a member: node ids from the
/// network are only labels once membership vouches for them.
const UNKNOWN_PEER: &str = "unknown";
/// Peer-supplied text (reasons, ids) is cut to this many bytes in logs and
/// refusals.
const REASON_MAX: usize = 256;
/// After a failed `accept` (out of file descriptors...), the listener
/// waits this long rather than spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);
/// Accepted connections still in their handshake, at most: beyond, new
/// ones are closed at once (`busy`), so a flood of idle sockets costs
/// little until their handshake times out.
const MAX_HANDSHAKES: usize = 64;

/// How the bridge runs.
#[derive(Debug, Clone)]
pub struct BridgeSettings {
    /// The cluster id; peers of another cluster are refused.
    pub cluster_id: String,
    /// This node's id (see [`valid_node_id`]).
    pub node_id: String,
    /// The address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// Unacked batches per peer, at most.
    pub window: usize,
    /// The first redial delay after a connection failed...
    pub reconnect_base: Duration,
    /// ...doubling up to this.
    pub reconnect_max: Duration,
    /// An idle side sends a heartbeat this often; three intervals of
    /// silence close the connection. Nodes of a cluster should agree on it.
    pub heartbeat: Duration,
    /// Mutual TLS against the cluster's CA ([`crate::cluster::tls`]):
    /// `None` only for an insecure cluster (`[cluster] insecure`).
    pub tls: Option<Arc<NodeTls>>,
}

impl BridgeSettings {
    /// Settings with the defaults: a window of 64, redials from 100 ms to
    /// 10 s, a heartbeat every second.
    pub fn new(
        cluster_id: impl Into<String>,
        node_id: impl Into<String>,
        listen: SocketAddr,
    ) -> Self {
        BridgeSettings {
            cluster_id: cluster_id.into(),
            node_id: node_id.into(),
            listen,
            window: 64,
            reconnect_base: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
            tls: None,
        }
    }

    fn check(&self) -> Result<(), BridgeError> {
        let bad = |msg: &str| Err(BridgeError::Settings(msg.to_owned()));
        if !valid_node_id(&self.node_id) {
            return bad("node_id: 1 to 64 letters, digits, '-' or '_'");
        }
        if self.cluster_id.is_empty() {
            return bad("cluster_id must not be empty");
        }
        if self.window == 0 {
            return bad("window must be at least 1");
        }
        if self.heartbeat.is_zero() || self.reconnect_base.is_zero() {
            return bad("heartbeat and reconnect_base must be positive");
        }
        if self.reconnect_max < self.reconnect_base {
            return bad("reconnect_max must not be below reconnect_base");
        }
        if self
            .tls
            .as_ref()
            .is_some_and(|tls| tls.node() != self.node_id)
        {
            return bad("the TLS identity is another node's");
        }
        Ok(())
    }

    /// How long a connection may be silent, or refuse our bytes.
    fn silence(&self) -> Duration {
        self.heartbeat.saturating_mul(3)
    }
}

/// Why a bridge cannot start.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The settings are unusable.
    #[error("bridge settings: {0}")]
    Settings(String),
    /// Not called from within an actix system (there is no runtime to
    /// listen on).
    #[error("the bridge must be started inside an actix system")]
    NoRuntime,
    /// The listening socket could not be set up.
    #[error("bridge cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
}

// ------------------------------------------------------------------ Actor

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

    /// This node dials `peer` (the smaller id dials).
    fn dials(&self, peer: &str) -> bool {
        self.settings.node_id.as_str() < peer
    }

    /// What a new connection needs.
    fn setup(&mut self, remote: SocketAddr, ctx: &Context<Self>) -> ConnSetup {
        self.next_conn += 1;
        ConnSetup {
            id: self.next_conn,
            remote,
            cluster: self.settings.cluster_id.clone(),
            node: self.settings.node_id.clone(),
            bridge: ctx.address(),
            inbound: self.inbound.clone(),
            metrics: self.metrics.clone(),
            heartbeat: self.settings.heartbeat,
            silence: self.settings.silence(),
            window: self.settings.window,
            tls: self.settings.tls.clone(),
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
        if !self.dials(id) {
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
        self.spawn_conn(conn, dial(setup, id.to_owned()), ctx);
    }

    /// Dials `id` again after its backoff, doubling the next one.
    fn schedule_redial(&mut self, id: &str, ctx: &mut Context<Self>) {
        if !self.dials(id) {
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
        if peer.link.closed(closed, std::time::Instant::now()) {
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
                self.spawn_conn(id, run(stream, setup, None), ctx);
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
                dials: self.dials(id),
                connected: p.conn.is_some(),
                unacked: p.link.unacked(),
                waiting: p.link.waiting(),
            })
            .collect();
        MessageResult(BridgeStatus { peers })
    }
}

/// A connection finished its handshake with `peer`: batches go to it
/// through `admits`; the actor keeps `member` up to date.
#[derive(Message)]
#[rtype(result = "()")]
struct Established {
    conn: u64,
    peer: String,
    admits: mpsc::UnboundedSender<Bytes>,
    member: Arc<AtomicBool>,
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
        let (_, out) = peer.link.connected(msg.conn, std::time::Instant::now());
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
struct Acked {
    peer: String,
    seq: u64,
    /// The answer, if `seq` was a question.
    answer: Option<WireReply>,
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
struct Nacked {
    peer: String,
    seq: u64,
    reason: String,
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

// ------------------------------------------------------------- Connection

/// What one connection is given.
struct ConnSetup {
    id: u64,
    remote: SocketAddr,
    cluster: String,
    node: String,
    bridge: Addr<BridgeActor>,
    inbound: BridgeInbound,
    metrics: Arc<Metrics>,
    heartbeat: Duration,
    silence: Duration,
    window: usize,
    tls: Option<Arc<NodeTls>>,
}

/// How a connection ended.
struct Ended {
    /// The peer, once known (always for a dial).
    peer: Option<String>,
    closed: Closed,
    /// A batch was acked on it, either way.
    progress: bool,
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum Closed {
    /// The peer's hello is refused.
    #[error("{}", short(&.0.to_string()))]
    Refused(Refusal),
    /// The peer's hello names an impossible node id.
    #[error("node id {:?} is not 1 to 64 letters, digits, '-' or '_'", short(.0))]
    BadNodeId(String),
    /// We dialled one node and another answered (stale membership).
    #[error("dialled {expected:?}, but {:?} answered", short(.got))]
    WrongNode { expected: String, got: String },
    /// The TLS handshake failed (no certificate, or one the cluster's CA
    /// did not issue, or not for the node dialled).
    #[error("tls: {}", short(.0))]
    Tls(String),
    /// The peer's certificate does not name the node its hello names.
    #[error("the peer's certificate is not {:?}'s", short(.0))]
    NotCertified(String),
    /// The peer dialled, but we are the one who dials.
    #[error("{0:?} dialled, but the node with the smaller id dials")]
    WrongDirection(String),
    /// The peer refused us.
    #[error("refused by the peer: {}", short(.0))]
    RefusedByPeer(String),
    /// The peer announced a frame over the cap.
    #[error("a frame over {MAX_FRAME} bytes announced")]
    TooLarge,
    /// A frame is not a message.
    #[error("{0}")]
    Malformed(WireError),
    /// A message out of place.
    #[error("unexpected {0} after the handshake")]
    Unexpected(&'static str),
    /// Nothing came for too long.
    #[error("silent for {0:?}")]
    Silent(Duration),
    /// The peer took none of our bytes for too long.
    #[error("the peer took no bytes for {0:?}")]
    Stalled(Duration),
    /// The peer closed the connection.
    #[error("closed by the peer")]
    Eof,
    /// Reading or writing failed.
    #[error("i/o: {0}")]
    Io(io::Error),
    /// A batch from the peer was not admitted (why).
    #[error("a batch was not admitted: {0}")]
    Rejected(String),
    /// A dial failed to connect.
    #[error("cannot connect: {0}")]
    Connect(io::Error),
    /// The bridge is stopping (or dropped the connection).
    #[error("the bridge let the connection go")]
    Stopping,
}

impl Closed {
    /// The bounded metric label.
    fn label(&self) -> &'static str {
        match self {
            Closed::Refused(Refusal::NotHello) => "not_hello",
            Closed::Refused(Refusal::WrongCluster { .. }) => "wrong_cluster",
            Closed::Refused(Refusal::OldProtocol { .. }) => "old_protocol",
            Closed::Refused(Refusal::SameNode(_)) => "same_node",
            Closed::BadNodeId(_) => "bad_node_id",
            Closed::WrongNode { .. } => "wrong_node",
            Closed::WrongDirection(_) => "wrong_direction",
            Closed::Tls(_) => "tls",
            Closed::NotCertified(_) => "not_certified",
            Closed::RefusedByPeer(_) => "refused_by_peer",
            Closed::TooLarge => "too_large",
            Closed::Malformed(_) => "malformed",
            Closed::Unexpected(_) => "unexpected",
            Closed::Silent(_) => "silent",
            Closed::Stalled(_) => "stalled",
            Closed::Eof => "eof",
            Closed::Io(_) => "io",
            Closed::Rejected(_) => "rejected",
            Closed::Connect(_) => "connect",
            Closed::Stopping => "stopping",
        }
    }

    /// The other side failed the handshake or broke the protocol: counted
    /// as a refusal, and (unless it refused us) answered with a `Refuse`.
    fn is_refusal(&self) -> bool {
        matches!(
            self,
            Closed::Refused(_)
                | Closed::BadNodeId(_)
                | Closed::WrongNode { .. }
                | Closed::WrongDirection(_)
                | Closed::Tls(_)
                | Closed::NotCertified(_)
                | Closed::RefusedByPeer(_)
                | Closed::TooLarge
                | Closed::Malformed(_)
                | Closed::Unexpected(_)
        )
    }
}

/// `text` cut to [`REASON_MAX`] bytes (peer-supplied text in logs).
fn short(text: &str) -> &str {
    if text.len() <= REASON_MAX {
        return text;
    }
    let mut end = REASON_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A connection's bytes: TLS, or plain TCP in an insecure cluster.
trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

type Reader = FramedRead<ReadHalf<Box<dyn Io>>, LengthDelimitedCodec>;
type Writer = FramedWrite<WriteHalf<Box<dyn Io>>, LengthDelimitedCodec>;

/// Dials `peer` and runs the connection.
async fn dial(setup: ConnSetup, peer: String) -> Ended {
    let connected = timeout(setup.silence, TcpStream::connect(setup.remote)).await;
    let stream = match connected {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return connect_failed(&setup, peer, e),
        Err(_) => {
            let e = io::Error::new(io::ErrorKind::TimedOut, "connect timed out");
            return connect_failed(&setup, peer, e);
        }
    };
    run(stream, setup, Some(peer)).await
}

fn connect_failed(setup: &ConnSetup, peer: String, e: io::Error) -> Ended {
    setup
        .metrics
        .bridge_disconnects
        .with_label_values(&["connect"])
        .inc();
    Ended {
        peer: Some(peer),
        closed: Closed::Connect(e),
        progress: false,
    }
}

/// Runs one connection: the handshake, then batches both ways until it
/// ends. `expected` is the node dialled (none if accepted). Counts and
/// logs how it ended before its socket closes.
async fn run(stream: TcpStream, setup: ConnSetup, expected: Option<String>) -> Ended {
    let _ = stream.set_nodelay(true);
    let (io, certificate) = match secure(stream, &setup, expected.as_deref()).await {
        Ok(secured) => secured,
        Err(closed) => {
            record(&setup, expected.as_deref(), &closed);
            return Ended {
                peer: expected,
                closed,
                progress: false,
            };
        }
    };
    let (read, write) = tokio::io::split(io);
    let mut reader = FramedRead::new(read, wire::codec());
    let mut writer = FramedWrite::new(write, wire::codec());
    let progress = Cell::new(false);
    let mut peer = None;
    let hello = handshake(&mut reader, &mut writer, &setup, expected.as_deref());
    let checked = hello.await.and_then(|id| match &certificate {
        Some(cert) if !tls::certificate_names(cert, &id) => Err(Closed::NotCertified(id)),
        _ => Ok(id),
    });
    let closed = match checked {
        Err(closed) => closed,
        Ok(id) => {
            peer = Some(id.clone());
            let (admits, rx) = mpsc::unbounded_channel();
            let member = Arc::new(AtomicBool::new(false));
            let established = Established {
                conn: setup.id,
                peer: id.clone(),
                admits,
                member: member.clone(),
            };
            match setup.bridge.send(established).await {
                Ok(()) => {
                    let link = LinkIo {
                        setup: &setup,
                        peer: &id,
                        member: &member,
                        progress: &progress,
                    };
                    let (acks, acks_rx) = mpsc::unbounded_channel();
                    tokio::select! {
                        closed = link.read(&mut reader, acks) => closed,
                        closed = link.write(&mut writer, rx, acks_rx) => closed,
                    }
                }
                Err(_) => Closed::Stopping,
            }
        }
    };
    if closed.is_refusal() && !matches!(closed, Closed::RefusedByPeer(_)) {
        let refuse = WireMessage::Refuse {
            reason: closed.to_string(),
        };
        if let Ok(frame) = wire::encode(&refuse) {
            let _ = timeout(setup.heartbeat, writer.send(frame)).await;
        }
    }
    record(&setup, peer.as_deref().or(expected.as_deref()), &closed);
    Ended {
        peer: peer.or(expected),
        closed,
        progress: progress.get(),
    }
}

/// The connection's TLS handshake (bounded by the silence limit), when
/// the cluster has TLS: the stream to speak over and, for a connection we
/// accepted, the peer's certificate (its hello must name the node the
/// certificate names). A dialled peer's certificate is checked by rustls
/// against the name of the node dialled.
async fn secure(
    stream: TcpStream,
    setup: &ConnSetup,
    expected: Option<&str>,
) -> Result<(Box<dyn Io>, Option<CertificateDer<'static>>), Closed> {
    let Some(node_tls) = &setup.tls else {
        return Ok((Box::new(stream), None));
    };
    let failed = |e: io::Error| Closed::Tls(e.to_string());
    let handshake = async {
        match expected {
            Some(peer) => {
                let name = tls::server_name(peer).map_err(|e| Closed::Tls(e.to_string()))?;
                let stream = node_tls
                    .connector()
                    .connect(name, stream)
                    .await
                    .map_err(failed)?;
                Ok((Box::new(stream) as Box<dyn Io>, None))
            }
            None => {
                let stream = node_tls.acceptor().accept(stream).await.map_err(failed)?;
                let certificate = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|cert| cert.clone().into_owned());
                if certificate.is_none() {
                    return Err(Closed::Tls("no client certificate".into()));
                }
                Ok((Box::new(stream) as Box<dyn Io>, certificate))
            }
        }
    };
    timeout(setup.silence, handshake)
        .await
        .map_err(|_| Closed::Silent(setup.silence))?
}

/// Counts and logs a connection's end.
fn record(setup: &ConnSetup, peer: Option<&str>, closed: &Closed) {
    let peer = peer.unwrap_or("?");
    let remote = setup.remote;
    if closed.is_refusal() {
        setup
            .metrics
            .bridge_refusals
            .with_label_values(&[closed.label()])
            .inc();
        tracing::warn!(peer, %remote, reason = %closed, "bridge: connection refused");
        return;
    }
    if !matches!(closed, Closed::Stopping) {
        setup
            .metrics
            .bridge_disconnects
            .with_label_values(&[closed.label()])
            .inc();
    }
    match closed {
        Closed::Eof | Closed::Stopping => {
            tracing::info!(peer, %remote, reason = %closed, "bridge: connection closed")
        }
        _ => tracing::warn!(peer, %remote, reason = %closed, "bridge: connection lost"),
    }
}

/// Sends our hello, reads and checks the peer's: the peer's node id.
async fn handshake(
    reader: &mut Reader,
    writer: &mut Writer,
    setup: &ConnSetup,
    expected: Option<&str>,
) -> Result<String, Closed> {
    let hello = encode(&wire::hello(&setup.cluster, &setup.node))?;
    write(writer, hello, setup.silence).await?;
    let first = timeout(setup.silence, reader.next())
        .await
        .map_err(|_| Closed::Silent(setup.silence))?;
    let msg = message(first)?;
    if let WireMessage::Refuse { reason } = msg {
        return Err(Closed::RefusedByPeer(reason));
    }
    let peer = wire::check_hello(&msg, &setup.cluster, &setup.node).map_err(Closed::Refused)?;
    if !valid_node_id(&peer) {
        return Err(Closed::BadNodeId(peer));
    }
    match expected {
        Some(expected) if expected != peer => Err(Closed::WrongNode {
            expected: expected.to_owned(),
            got: peer,
        }),
        None if setup.node < peer => Err(Closed::WrongDirection(peer)),
        _ => Ok(peer),
    }
}

/// Encodes one of our own messages (those never exceed a frame).
fn encode(msg: &WireMessage) -> Result<Bytes, Closed> {
    wire::encode(msg).map_err(|e| Closed::Io(io::Error::other(e)))
}

/// Writes one frame, giving up if the peer takes no bytes for `limit`.
async fn write(writer: &mut Writer, frame: Bytes, limit: Duration) -> Result<(), Closed> {
    match timeout(limit, writer.send(frame)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Closed::Io(e)),
        Err(_) => Err(Closed::Stalled(limit)),
    }
}

/// The message in what the reader yielded, or why there is none.
fn message(item: Option<io::Result<BytesMut>>) -> Result<WireMessage, Closed> {
    match item {
        None => Err(Closed::Eof),
        Some(Err(e)) => Err(read_error(e)),
        Some(Ok(frame)) => wire::decode(&frame).map_err(Closed::Malformed),
    }
}

/// The codec reports a frame over the cap as an I/O error wrapping its own.
fn read_error(e: io::Error) -> Closed {
    if e.get_ref()
        .is_some_and(|inner| inner.is::<LengthDelimitedCodecError>())
    {
        Closed::TooLarge
    } else {
        Closed::Io(e)
    }
}

/// An established connection's two halves share this.
struct LinkIo<'a> {
    setup: &'a ConnSetup,
    peer: &'a str,
    /// See [`Link::member`].
    member: &'a AtomicBool,
    progress: &'a Cell<bool>,
}

/// A batch from the peer being admitted (or a question being answered):
/// its number, what became of it, and the permit that holds its place
/// among the connection's `window`.
type Answer = (u64, Handled, OwnedSemaphorePermit);

/// What a failure here is to the peer: "not held" is a refusal, anything
/// else a failure ([`link::answer`] says what each gets).
fn handled(failure: Failure) -> Handled {
    match failure {
        Failure::NotHeld { .. } => Handled::NotHeld(failure.to_string()),
        other => Handled::Failed(other.to_string()),
    }
}

async fn admit(
    request: RecipientRequest<RemoteAdmit>,
    seq: u64,
    permit: OwnedSemaphorePermit,
) -> Answer {
    let result = request.await.map_err(Failure::from).and_then(|r| r);
    (
        seq,
        result.map_or_else(handled, |()| Handled::Admitted),
        permit,
    )
}

async fn answer(
    request: RecipientRequest<RemoteDigest>,
    seq: u64,
    permit: OwnedSemaphorePermit,
) -> Answer {
    let result = request.await.map_err(Failure::from).and_then(|r| r);
    let outcome = match result {
        Ok(reply) => Handled::Answered(reply.into()),
        Err(failure) => {
            tracing::debug!(error = %failure, "bridge: a digest question failed here");
            handled(failure).question()
        }
    };
    (seq, outcome, permit)
}

impl LinkIo<'_> {
    /// The peer's metric label, now.
    fn label(&self) -> &str {
        if self.member.load(Ordering::Relaxed) {
            self.peer
        } else {
            UNKNOWN_PEER
        }
    }

    fn count_batch(&self, outcome: &str) {
        self.setup
            .metrics
            .bridge_batches
            .with_label_values(&[self.label(), outcome])
            .inc();
    }

    fn count_bytes(&self, direction: &str, frame_len: usize) {
        self.setup
            .metrics
            .bridge_bytes
            .with_label_values(&[self.label(), direction])
            .inc_by(frame_len as u64 + 4);
    }

    /// Reads the peer's frames: admits batches (at most `window` at once,
    /// counting those whose ack is not yet written), passes acks on, and
    /// closes on silence. Ends with why the connection closes.
    async fn read(&self, reader: &mut Reader, acks: mpsc::UnboundedSender<AckPlace>) -> Closed {
        let setup = self.setup;
        let places = Arc::new(Semaphore::new(setup.window));
        // The place the next frame will take if it is a batch: while none
        // is free, nothing is read.
        let mut place: Option<OwnedSemaphorePermit> = None;
        let mut answers = FuturesUnordered::new();
        let mut deadline = Instant::now() + setup.silence;
        loop {
            tokio::select! {
                Some(answer) = answers.next() => {
                    if let Err(closed) = self.on_answer(answer, &acks) {
                        return closed;
                    }
                }
                permit = places.clone().acquire_owned(), if place.is_none() => {
                    let Ok(permit) = permit else { return Closed::Stopping };
                    place = Some(permit);
                    // Reading resumes: the peer's silence counts from now.
                    deadline = deadline.max(Instant::now() + setup.silence);
                }
                item = reader.next(), if place.is_some() => {
                    deadline = Instant::now() + setup.silence;
                    if let Some(Ok(frame)) = &item {
                        self.count_bytes("in", frame.len());
                    }
                    match message(item).and_then(|msg| self.on_message(msg, &mut place)) {
                        Ok(Some(admission)) => answers.push(admission),
                        Ok(None) => {}
                        Err(closed) => return closed,
                    }
                }
                _ = sleep_until(deadline), if place.is_some() => return Closed::Silent(setup.silence),
            }
        }
    }

    /// Acts on one message from the peer: a batch is handed to the inbound
    /// recipient, taking the reader's `place`; an ack goes to the actor.
    fn on_message(
        &self,
        msg: WireMessage,
        place: &mut Option<OwnedSemaphorePermit>,
    ) -> Result<Option<BoxFuture<'static, Answer>>, Closed> {
        match msg {
            WireMessage::Admit {
                seq,
                partition,
                entries,
            } => {
                self.count_batch("received");
                let permit = place.take().ok_or(Closed::Stopping)?;
                let request = self.setup.inbound.admit.send(RemoteAdmit {
                    from: self.peer.to_owned(),
                    partition,
                    entries,
                });
                Ok(Some(Box::pin(admit(request, seq, permit))))
            }
            WireMessage::Digest {
                seq,
                partition,
                digest,
                ask,
            } => {
                let permit = place.take().ok_or(Closed::Stopping)?;
                let request = self.setup.inbound.digest.send(RemoteDigest {
                    partition,
                    query: DigestQuery {
                        digest,
                        ask: ask.into(),
                    },
                });
                Ok(Some(Box::pin(answer(request, seq, permit))))
            }
            WireMessage::Answer { seq, reply } => {
                self.progress.set(true);
                self.setup.bridge.do_send(Acked {
                    peer: self.peer.to_owned(),
                    seq,
                    answer: Some(reply),
                });
                Ok(None)
            }
            WireMessage::Ack { seq } => {
                self.progress.set(true);
                self.setup.bridge.do_send(Acked {
                    peer: self.peer.to_owned(),
                    seq,
                    answer: None,
                });
                Ok(None)
            }
            WireMessage::Nack { seq, reason } => {
                self.progress.set(true);
                self.setup.bridge.do_send(Nacked {
                    peer: self.peer.to_owned(),
                    seq,
                    reason: short(&reason).to_owned(),
                });
                Ok(None)
            }
            WireMessage::Heartbeat => Ok(None),
            WireMessage::Refuse { reason } => Err(Closed::RefusedByPeer(reason)),
            WireMessage::Hello { .. } => Err(Closed::Unexpected("hello")),
        }
    }

    /// A batch from the peer was admitted, or refused, or failed: its
    /// answer goes to the writer, or the connection closes, as
    /// [`link::answer`] rules.
    fn on_answer(
        &self,
        (seq, handled, place): Answer,
        acks: &mpsc::UnboundedSender<AckPlace>,
    ) -> Result<(), Closed> {
        match &handled {
            Handled::Admitted | Handled::Answered(_) => self.progress.set(true),
            Handled::NotHeld(_) => self.count_batch("nacked"),
            Handled::Failed(_) => self.count_batch("rejected"),
        }
        let reply = link::answer(seq, handled).map_err(Closed::Rejected)?;
        acks.send((reply, place)).map_err(|_| Closed::Stopping)
    }

    /// Writes acks (first: they free the peer's window), batches from the
    /// actor, and a heartbeat after an interval with nothing to write.
    async fn write(
        &self,
        writer: &mut Writer,
        mut admits: mpsc::UnboundedReceiver<Bytes>,
        mut acks: mpsc::UnboundedReceiver<AckPlace>,
    ) -> Closed {
        let setup = self.setup;
        let heartbeat = match encode(&WireMessage::Heartbeat) {
            Ok(frame) => frame,
            Err(closed) => return closed,
        };
        loop {
            let (frame, place) = tokio::select! {
                biased;
                ack = acks.recv() => match ack {
                    Some((reply, place)) => match encode(&reply) {
                        Ok(frame) => (frame, Some(place)),
                        Err(closed) => return closed,
                    },
                    None => return Closed::Stopping,
                },
                admit = admits.recv() => match admit {
                    Some(frame) => (frame, None),
                    None => return Closed::Stopping,
                },
                _ = sleep(setup.heartbeat) => (heartbeat.clone(), None),
            };
            let len = frame.len();
            if let Err(closed) = write(writer, frame, setup.silence).await {
                return closed;
            }
            self.count_bytes("out", len);
            // The ack is out: its batch's place is free.
            drop(place);
        }
    }
}

/// An answer to write, and the place its batch holds until it is written.
type AckPlace = (WireMessage, OwnedSemaphorePermit);

#[cfg(test)]
mod tests {
    use super::*;

    struct Sink;

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<RemoteAdmit> for Sink {
        type Result = Result<(), Failure>;

        fn handle(&mut self, _: RemoteAdmit, _: &mut Self::Context) -> Self::Result {
            Ok(())
        }
    }

    impl Handler<RemoteDigest> for Sink {
        type Result = Result<DigestReply, Failure>;

        fn handle(&mut self, _: RemoteDigest, _: &mut Self::Context) -> Self::Result {
            Ok(DigestReply::Unclaimed)
        }
    }

    fn loopback() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn settings_are_checked_before_anything_binds() {
        let good = BridgeSettings::new("c1", "n1", loopback());
        assert!(good.check().is_ok());
        assert_eq!(good.silence(), Duration::from_secs(3));
        let bad = [
            BridgeSettings {
                window: 0,
                ..good.clone()
            },
            BridgeSettings {
                node_id: "n 1".into(),
                ..good.clone()
            },
            BridgeSettings {
                cluster_id: String::new(),
                ..good.clone()
            },
            BridgeSettings {
                heartbeat: Duration::ZERO,
                ..good.clone()
            },
            BridgeSettings {
                reconnect_max: Duration::from_millis(1),
                ..good.clone()
            },
        ];
        for settings in bad {
            assert!(
                matches!(settings.check(), Err(BridgeError::Settings(_))),
                "{settings:?}"
            );
        }
    }

    #[test]
    fn a_taken_address_is_an_error_not_a_panic() {
        System::new().block_on(async {
            let taken = std::net::TcpListener::bind(loopback()).unwrap();
            let settings = BridgeSettings::new("c1", "n1", taken.local_addr().unwrap());
            let sink = Sink.start();
            let inbound = BridgeInbound {
                admit: sink.clone().recipient(),
                digest: sink.recipient(),
            };
            let started = BridgeActor::start(settings, inbound, Arc::new(Metrics::new()));
            assert!(matches!(started, Err(BridgeError::Listen { .. })));
        });
    }

    #[test]
    fn peer_text_is_cut_in_reasons_and_labels_are_bounded() {
        let huge = "é".repeat(10_000);
        let closed = Closed::Refused(Refusal::WrongCluster {
            ours: "c1".into(),
            theirs: huge.clone(),
        });
        assert!(closed.to_string().len() <= REASON_MAX);
        assert_eq!(closed.label(), "wrong_cluster");
        assert!(closed.is_refusal());
        assert!(Closed::RefusedByPeer(huge).to_string().len() < REASON_MAX + 30);
        assert_eq!(short("abc"), "abc");
        for (closed, label, refusal) in [
            (Closed::TooLarge, "too_large", true),
            (Closed::Unexpected("hello"), "unexpected", true),
            (Closed::Silent(Duration::from_secs(3)), "silent", false),
            (Closed::Eof, "eof", false),
            (Closed::Rejected("store: x".into()), "rejected", false),
        ] {
            assert_eq!((closed.label(), closed.is_refusal()), (label, refusal));
        }
        // What the codec says of a frame over the cap.
        let mut huge = BytesMut::from(&(MAX_FRAME as u32 + 1).to_be_bytes()[..]);
        let e = tokio_util::codec::Decoder::decode(&mut wire::codec(), &mut huge).unwrap_err();
        assert!(matches!(read_error(e), Closed::TooLarge));
        let e = io::Error::new(io::ErrorKind::ConnectionReset, "reset");
        assert!(matches!(read_error(e), Closed::Io(_)));
    }
}

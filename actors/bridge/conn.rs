//! One bridge connection's I/O: connect, TLS, frames in and out, as its
//! [`Connection`] machine says (`src/cluster/conn.rs`: the handshake's
//! checks, the window, the silence and heartbeat deadlines). Runs as a
//! future spawned in the bridge actor's context and talks to it by the
//! actor's private messages.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodecError};

use super::{Acked, BridgeActor, Established, Nacked, UNKNOWN_PEER};
use crate::actors::messages::{BridgeInbound, DigestQuery, Failure, RemoteAdmit, RemoteDigest};
use crate::clock::SharedClock;
use crate::cluster::conn::{Closed, Connection, Inbound};
use crate::cluster::link::Handled;
use crate::cluster::tls::{self, NodeTls};
use crate::cluster::wire::{self, Message as WireMessage};
use crate::metrics::Metrics;

/// What one connection is given.
pub(super) struct ConnSetup {
    pub id: u64,
    pub remote: SocketAddr,
    pub bridge: Addr<BridgeActor>,
    pub inbound: BridgeInbound,
    pub metrics: Arc<Metrics>,
    pub tls: Option<Arc<NodeTls>>,
    pub clock: SharedClock,
}

impl ConnSetup {
    /// Now, on the node's clock: what the machine's deadlines count on.
    fn now(&self) -> std::time::Instant {
        self.clock.now().at
    }

    /// The runtime's instant of a deadline on the node's clock, for its
    /// timers.
    fn when(&self, deadline: std::time::Instant) -> Instant {
        Instant::now() + deadline.saturating_duration_since(self.now())
    }
}

/// How a connection ended.
pub(super) struct Ended {
    /// The peer, once known (always for a dial).
    pub peer: Option<String>,
    pub closed: Closed,
    /// A batch was acked on it, either way.
    pub progress: bool,
}

/// A connection's bytes: TLS, or plain TCP in an insecure cluster.
trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

type Reader = FramedRead<ReadHalf<Box<dyn Io>>, tokio_util::codec::LengthDelimitedCodec>;
type Writer = FramedWrite<WriteHalf<Box<dyn Io>>, tokio_util::codec::LengthDelimitedCodec>;

/// Dials the peer `conn` expects and runs the connection.
pub(super) async fn dial(setup: ConnSetup, conn: Connection) -> Ended {
    let limit = conn.stall_limit();
    let stream = match timeout(limit, TcpStream::connect(setup.remote)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return connect_failed(&setup, &conn, e),
        Err(_) => {
            let e = io::Error::new(io::ErrorKind::TimedOut, "connect timed out");
            return connect_failed(&setup, &conn, e);
        }
    };
    run(stream, setup, conn).await
}

fn connect_failed(setup: &ConnSetup, conn: &Connection, e: io::Error) -> Ended {
    setup
        .metrics
        .bridge_disconnects
        .with_label_values(&["connect"])
        .inc();
    Ended {
        peer: conn.expected().map(str::to_owned),
        closed: Closed::Connect(e),
        progress: false,
    }
}

/// Runs one connection: the handshake, then batches both ways until it
/// ends. Counts and logs how it ended before its socket closes.
pub(super) async fn run(stream: TcpStream, setup: ConnSetup, conn: Connection) -> Ended {
    let _ = stream.set_nodelay(true);
    let deadline = setup.when(conn.handshake_deadline());
    let (io, certificate) = match secure(stream, &setup, &conn, deadline).await {
        Ok(secured) => secured,
        Err(closed) => {
            record(&setup, conn.peer(), &closed);
            return Ended {
                peer: conn.peer().map(str::to_owned),
                closed,
                progress: false,
            };
        }
    };
    let (read, write) = tokio::io::split(io);
    let mut reader = FramedRead::new(read, wire::codec());
    let mut writer = FramedWrite::new(write, wire::codec());
    let conn = RefCell::new(conn);
    let hello = handshake(
        &setup,
        &mut reader,
        &mut writer,
        &conn,
        certificate,
        deadline,
    );
    let closed = match hello.await {
        Err(closed) => closed,
        Ok(peer) => established(&setup, &conn, peer, &mut reader, &mut writer).await,
    };
    let conn = conn.into_inner();
    if let Some(refuse) = closed.refuse() {
        if let Ok(frame) = wire::encode(&refuse) {
            let _ = timeout(conn.stall_limit(), writer.send(frame)).await;
        }
    }
    record(&setup, conn.peer(), &closed);
    Ended {
        peer: conn.peer().map(str::to_owned),
        closed,
        progress: conn.progress(),
    }
}

/// Tells the actor the connection is up, then carries batches both ways.
async fn established(
    setup: &ConnSetup,
    conn: &RefCell<Connection>,
    peer: String,
    reader: &mut Reader,
    writer: &mut Writer,
) -> Closed {
    let (admits, rx) = mpsc::unbounded_channel();
    let member = Arc::new(AtomicBool::new(false));
    let up = Established {
        conn: setup.id,
        peer: peer.clone(),
        admits,
        member: member.clone(),
    };
    if setup.bridge.send(up).await.is_err() {
        return Closed::Stopping;
    }
    let link = LinkIo {
        setup,
        peer: &peer,
        member: &member,
        conn,
        freed: Notify::new(),
    };
    let (acks, acks_rx) = mpsc::unbounded_channel();
    tokio::select! {
        closed = link.read(reader, acks) => closed,
        closed = link.write(writer, rx, acks_rx) => closed,
    }
}

/// The connection's TLS handshake (by `deadline`), when the cluster has
/// TLS: the stream to speak over and, for a connection we accepted, the
/// peer's certificate (its hello must name the node the certificate
/// names). A dialled peer's certificate is checked by rustls against the
/// name of the node dialled.
async fn secure(
    stream: TcpStream,
    setup: &ConnSetup,
    conn: &Connection,
    deadline: Instant,
) -> Result<(Box<dyn Io>, Option<CertificateDer<'static>>), Closed> {
    let Some(node_tls) = &setup.tls else {
        return Ok((Box::new(stream), None));
    };
    let failed = |e: io::Error| Closed::Tls(e.to_string());
    let handshake = async {
        match conn.expected() {
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
    tokio::time::timeout_at(deadline, handshake)
        .await
        .map_err(|_| Closed::Silent(conn.stall_limit()))?
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

/// Sends our hello, reads the peer's and has the machine check it (by
/// `deadline`): the peer's node id.
async fn handshake(
    setup: &ConnSetup,
    reader: &mut Reader,
    writer: &mut Writer,
    conn: &RefCell<Connection>,
    certificate: Option<CertificateDer<'static>>,
    deadline: Instant,
) -> Result<String, Closed> {
    let (hello, limit) = {
        let c = conn.borrow();
        (encode(&c.hello())?, c.stall_limit())
    };
    write(writer, hello, limit).await?;
    let first = tokio::time::timeout_at(deadline, reader.next())
        .await
        .map_err(|_| Closed::Silent(limit))?;
    let msg = message(first)?;
    let certified = |id: &str| {
        certificate
            .as_ref()
            .is_none_or(|cert| tls::certificate_names(cert, id))
    };
    conn.borrow_mut().on_hello(&msg, certified, setup.now())
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
pub(super) fn read_error(e: io::Error) -> Closed {
    if e.get_ref()
        .is_some_and(|inner| inner.is::<LengthDelimitedCodecError>())
    {
        Closed::TooLarge
    } else {
        Closed::Io(e)
    }
}

/// An established connection's two halves share this (they run on one
/// task: the machine is borrowed only between awaits).
struct LinkIo<'a> {
    setup: &'a ConnSetup,
    peer: &'a str,
    /// Whether the peer is a member (its id is then its metric label).
    member: &'a AtomicBool,
    conn: &'a RefCell<Connection>,
    /// A place of the window was freed: the reader may read again.
    freed: Notify,
}

/// A batch from the peer being admitted (or a question being answered):
/// its number and what became of it.
type Answer = (u64, Handled);

/// What a failure here is to the peer: "not held" is a refusal, anything
/// else a failure ([`crate::cluster::link::answer`] says what each gets).
fn handled(failure: Failure) -> Handled {
    match failure {
        Failure::NotHeld { .. } => Handled::NotHeld(failure.to_string()),
        other => Handled::Failed(other.to_string()),
    }
}

async fn admit(request: RecipientRequest<RemoteAdmit>, seq: u64) -> Answer {
    let result = request.await.map_err(Failure::from).and_then(|r| r);
    (seq, result.map_or_else(handled, |()| Handled::Admitted))
}

async fn answer(request: RecipientRequest<RemoteDigest>, seq: u64) -> Answer {
    let result = request.await.map_err(Failure::from).and_then(|r| r);
    let outcome = match result {
        Ok(reply) => Handled::Answered(reply.into()),
        Err(failure) => {
            tracing::debug!(error = %failure, "bridge: a digest question failed here");
            handled(failure).question()
        }
    };
    (seq, outcome)
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

    /// Reads the peer's frames while the machine's window lets it:
    /// admits batches, answers questions, passes acks on, and closes on
    /// silence. Ends with why the connection closes.
    async fn read(&self, reader: &mut Reader, acks: mpsc::UnboundedSender<WireMessage>) -> Closed {
        let mut answers = FuturesUnordered::new();
        loop {
            let (may_read, silent_at) = {
                let c = self.conn.borrow();
                (c.may_read(), self.setup.when(c.silent_at()))
            };
            tokio::select! {
                Some((seq, handled)) = answers.next() => {
                    if let Err(closed) = self.on_answer(seq, handled, &acks) {
                        return closed;
                    }
                }
                _ = self.freed.notified(), if !may_read => {}
                item = reader.next(), if may_read => {
                    if let Some(Ok(frame)) = &item {
                        self.count_bytes("in", frame.len());
                    }
                    let inbound = message(item)
                        .and_then(|msg| self.conn.borrow_mut().on_message(msg, self.setup.now()));
                    match inbound.map(|inbound| self.on_inbound(inbound)) {
                        Ok(Some(handling)) => answers.push(handling),
                        Ok(None) => {}
                        Err(closed) => return closed,
                    }
                }
                _ = sleep_until(silent_at), if may_read => {
                    if let Some(closed) = self.conn.borrow().on_silence(self.setup.now()) {
                        return closed;
                    }
                }
            }
        }
    }

    /// Carries out what a message from the peer asks: a batch or question
    /// is handed to the inbound recipient; an ack goes to the actor.
    fn on_inbound(&self, inbound: Inbound) -> Option<BoxFuture<'static, Answer>> {
        let inbound_to = &self.setup.inbound;
        let peer = self.peer.to_owned();
        match inbound {
            Inbound::Admit {
                seq,
                partition,
                entries,
            } => {
                self.count_batch("received");
                let request = inbound_to.admit.send(RemoteAdmit {
                    from: peer,
                    partition,
                    entries,
                });
                Some(Box::pin(admit(request, seq)))
            }
            Inbound::Digest {
                seq,
                partition,
                digest,
                ask,
            } => {
                let query = DigestQuery {
                    digest,
                    ask: ask.into(),
                };
                let request = inbound_to.digest.send(RemoteDigest { partition, query });
                Some(Box::pin(answer(request, seq)))
            }
            Inbound::Acked { seq, answer } => {
                self.setup.bridge.do_send(Acked { peer, seq, answer });
                None
            }
            Inbound::Nacked { seq, reason } => {
                self.setup.bridge.do_send(Nacked { peer, seq, reason });
                None
            }
            Inbound::Nothing => None,
        }
    }

    /// A batch from the peer was admitted, or refused, or failed: its
    /// answer goes to the writer, or the connection closes, as the
    /// machine rules.
    fn on_answer(
        &self,
        seq: u64,
        handled: Handled,
        acks: &mpsc::UnboundedSender<WireMessage>,
    ) -> Result<(), Closed> {
        match &handled {
            Handled::NotHeld(_) => self.count_batch("nacked"),
            Handled::Failed(_) => self.count_batch("rejected"),
            Handled::Admitted | Handled::Answered(_) => {}
        }
        let reply = self.conn.borrow_mut().on_handled(seq, handled)?;
        acks.send(reply).map_err(|_| Closed::Stopping)
    }

    /// Writes answers (first: they free the peer's window), batches from
    /// the actor, and a heartbeat when the machine says one is due.
    async fn write(
        &self,
        writer: &mut Writer,
        mut admits: mpsc::UnboundedReceiver<Bytes>,
        mut acks: mpsc::UnboundedReceiver<WireMessage>,
    ) -> Closed {
        let heartbeat = match encode(&WireMessage::Heartbeat) {
            Ok(frame) => frame,
            Err(closed) => return closed,
        };
        loop {
            let (beat_at, limit) = {
                let c = self.conn.borrow();
                (self.setup.when(c.heartbeat_at()), c.stall_limit())
            };
            let (frame, answer) = tokio::select! {
                biased;
                ack = acks.recv() => match ack.map(|reply| encode(&reply)) {
                    Some(Ok(frame)) => (frame, true),
                    Some(Err(closed)) => return closed,
                    None => return Closed::Stopping,
                },
                admit = admits.recv() => match admit {
                    Some(frame) => (frame, false),
                    None => return Closed::Stopping,
                },
                _ = sleep_until(beat_at) => (heartbeat.clone(), false),
            };
            let len = frame.len();
            if let Err(closed) = write(writer, frame, limit).await {
                return closed;
            }
            self.count_bytes("out", len);
            self.conn.borrow_mut().on_written(answer, self.setup.now());
            if answer {
                self.freed.notify_one();
            }
        }
    }
}

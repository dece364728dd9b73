//! One bridge connection's decisions, with no I/O: the handshake's checks
//! and deadline, the inbound window, the silence and heartbeat deadlines,
//! what each message from the peer becomes and how a connection's end is
//! named. The bridge actor (`actors/bridge.rs`) reads and writes frames as
//! [`Connection`] says; [`PeerLink`](super::link::PeerLink) beside it
//! keeps what outlives a connection (numbers, unacked batches, backoff).
//!
//! Every deadline is computed from a `now` passed in: the machine reads no
//! clock, so a test (or the simulator) drives it through hours of silence
//! in microseconds.
//!
//! - **Handshake.** Each side sends its hello first ([`Connection::hello`])
//!   and checks the other's ([`Connection::on_hello`]): the cluster, the
//!   protocol, a usable node id, the node dialled (a dialer), the direction
//!   (an acceptor: the node with the smaller id dials) and, under TLS, that
//!   the peer's certificate names it. It must be over by
//!   [`Connection::handshake_deadline`], a silence limit after the
//!   connection began.
//! - **Inbound window.** At most `window` of the peer's batches and
//!   questions are being handled or answered at once; while the window is
//!   full nothing is read ([`Connection::may_read`]), so TCP pushes back,
//!   and the peer's silence does not count: when reading resumes, the
//!   peer has a whole silence limit again.
//! - **Liveness.** A side that wrote nothing for a heartbeat interval
//!   writes a heartbeat ([`Connection::heartbeat_at`]); one that read
//!   nothing for three intervals while it could read closes
//!   ([`Connection::silent_at`], [`Closed::Silent`]), as does one whose
//!   peer takes none of its bytes for as long ([`Closed::Stalled`]).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::link::{self, Handled};
use super::tls::NodeTls;
use super::valid_node_id;
use super::wire::{self, Message, Refusal, WireError, WireReply, MAX_FRAME};
use crate::clock::{SharedClock, SystemClock};

/// Peer-supplied text (reasons, ids) is cut to this many bytes in logs and
/// refusals.
pub const REASON_MAX: usize = 256;

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
    /// What every deadline of the bridge (its connections' and its
    /// links') is read from: the node's clock.
    pub clock: SharedClock,
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
            clock: Arc::new(SystemClock),
        }
    }

    /// Whether the settings can run a bridge.
    pub fn check(&self) -> Result<(), BridgeError> {
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
    pub fn silence(&self) -> Duration {
        self.heartbeat.saturating_mul(3)
    }

    /// Whether this node dials `peer` (of two nodes, the smaller id
    /// dials: a pair has exactly one connection).
    pub fn dials(&self, peer: &str) -> bool {
        self.node_id.as_str() < peer
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
    #[error("bridge cannot listen on {addr}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum Closed {
    /// The peer's hello is refused.
    #[error("{}", short(&.0.to_string()))]
    Refused(Refusal),
    /// The peer's hello names an impossible node id.
    #[error("node id {:?} is not 1 to 64 letters, digits, '-' or '_'", short(.0))]
    BadNodeId(String),
    /// We dialled one node and another answered (stale membership).
    #[error("dialled {expected:?}, but {:?} answered", short(.got))]
    WrongNode {
        /// The node dialled.
        expected: String,
        /// The node that answered.
        got: String,
    },
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
    pub fn label(&self) -> &'static str {
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
    pub fn is_refusal(&self) -> bool {
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

    /// The `Refuse` to send the peer before closing, best effort: for a
    /// refusal, unless the peer refused us.
    pub fn refuse(&self) -> Option<Message> {
        (self.is_refusal() && !matches!(self, Closed::RefusedByPeer(_))).then(|| Message::Refuse {
            reason: self.to_string(),
        })
    }
}

/// `text` cut to [`REASON_MAX`] bytes (peer-supplied text in logs).
pub fn short(text: &str) -> &str {
    if text.len() <= REASON_MAX {
        return text;
    }
    let mut end = REASON_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a message from the peer asks of the bridge.
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// Admit this batch (it holds a place of the window until its answer
    /// is written).
    Admit {
        /// Its number, to answer.
        seq: u64,
        /// Its partition.
        partition: u16,
        /// Its links.
        entries: Vec<wire::WireEntry>,
    },
    /// Answer this digest question (a place too).
    Digest {
        /// Its number, to answer.
        seq: u64,
        /// The digest's partition.
        partition: u16,
        /// The payload digest.
        digest: [u8; 32],
        /// What to do with it.
        ask: wire::WireAsk,
    },
    /// Our batch or question `seq` was acked (with the answer to a
    /// question).
    Acked {
        /// Its number.
        seq: u64,
        /// The answer, to a question.
        answer: Option<WireReply>,
    },
    /// Our batch `seq` was refused: the peer does not hold its partition.
    Nacked {
        /// Its number.
        seq: u64,
        /// Why, cut to [`REASON_MAX`] bytes.
        reason: String,
    },
    /// Nothing to do (a heartbeat).
    Nothing,
}

/// One connection's state: see the module's docs.
#[derive(Debug)]
pub struct Connection {
    cluster: String,
    node: String,
    /// The node dialled; `None` for a connection accepted.
    expected: Option<String>,
    /// The peer, once its hello passed.
    peer: Option<String>,
    heartbeat: Duration,
    silence: Duration,
    window: usize,
    began: Instant,
    /// The peer's batches and questions being handled or answered.
    inbound: usize,
    /// When the peer's silence closes the connection, while it may read.
    silent_at: Instant,
    /// When a heartbeat is due.
    heartbeat_at: Instant,
    /// A batch or question was acked on it, either way.
    progress: bool,
}

impl Connection {
    /// A connection of ours to `peer`, begun at `now`.
    pub fn dialled(settings: &BridgeSettings, peer: &str, now: Instant) -> Self {
        Self::new(settings, Some(peer.to_owned()), now)
    }

    /// A connection the peer opened, accepted at `now`.
    pub fn accepted(settings: &BridgeSettings, now: Instant) -> Self {
        Self::new(settings, None, now)
    }

    fn new(settings: &BridgeSettings, expected: Option<String>, now: Instant) -> Self {
        let silence = settings.silence();
        Connection {
            cluster: settings.cluster_id.clone(),
            node: settings.node_id.clone(),
            expected,
            peer: None,
            heartbeat: settings.heartbeat,
            silence,
            window: settings.window,
            began: now,
            inbound: 0,
            silent_at: now + silence,
            heartbeat_at: now + settings.heartbeat,
            progress: false,
        }
    }

    /// The node dialled, for a dial.
    pub fn expected(&self) -> Option<&str> {
        self.expected.as_deref()
    }

    /// The peer: once its hello passed, else the node dialled.
    pub fn peer(&self) -> Option<&str> {
        self.peer.as_deref().or(self.expected.as_deref())
    }

    /// Whether a batch or question was acked on it, either way.
    pub fn progress(&self) -> bool {
        self.progress
    }

    /// How long the peer may take none of our bytes (or a TLS handshake,
    /// or a connect, may take).
    pub fn stall_limit(&self) -> Duration {
        self.silence
    }

    /// The hello this side sends first.
    pub fn hello(&self) -> Message {
        wire::hello(&self.cluster, &self.node)
    }

    /// The whole handshake (TLS and hellos) must be over by then.
    pub fn handshake_deadline(&self) -> Instant {
        self.began + self.silence
    }

    /// Checks the peer's first message at `now`: its node id if the
    /// connection may go on. `certified(id)`: whether the peer's TLS
    /// certificate names `id` (always true without TLS, and for a dial,
    /// whose peer rustls checked against the name dialled).
    pub fn on_hello(
        &mut self,
        msg: &Message,
        certified: impl FnOnce(&str) -> bool,
        now: Instant,
    ) -> Result<String, Closed> {
        if let Message::Refuse { reason } = msg {
            return Err(Closed::RefusedByPeer(reason.clone()));
        }
        let peer = wire::check_hello(msg, &self.cluster, &self.node).map_err(Closed::Refused)?;
        if !valid_node_id(&peer) {
            return Err(Closed::BadNodeId(peer));
        }
        match &self.expected {
            Some(expected) if *expected != peer => {
                return Err(Closed::WrongNode {
                    expected: expected.clone(),
                    got: peer,
                })
            }
            None if self.node < peer => return Err(Closed::WrongDirection(peer)),
            _ => {}
        }
        if !certified(&peer) {
            return Err(Closed::NotCertified(peer));
        }
        self.peer = Some(peer.clone());
        self.silent_at = now + self.silence;
        Ok(peer)
    }

    /// Whether the next frame may be read: a place of the window is free
    /// for it, should it be a batch.
    pub fn may_read(&self) -> bool {
        self.inbound < self.window
    }

    /// When the peer's silence closes the connection (only counted while
    /// [`Self::may_read`]).
    pub fn silent_at(&self) -> Instant {
        self.silent_at
    }

    /// The peer was silent past [`Self::silent_at`] at `now`: why the
    /// connection closes (`None` if it was not, or could not read).
    pub fn on_silence(&self, now: Instant) -> Option<Closed> {
        (self.may_read() && now >= self.silent_at).then_some(Closed::Silent(self.silence))
    }

    /// When a heartbeat is due: an interval after the last write.
    pub fn heartbeat_at(&self) -> Instant {
        self.heartbeat_at
    }

    /// Acts on one message from the peer, read at `now`.
    pub fn on_message(&mut self, msg: Message, now: Instant) -> Result<Inbound, Closed> {
        self.silent_at = now + self.silence;
        let inbound = match msg {
            Message::Admit {
                seq,
                partition,
                entries,
            } => Inbound::Admit {
                seq,
                partition,
                entries,
            },
            Message::Digest {
                seq,
                partition,
                digest,
                ask,
            } => Inbound::Digest {
                seq,
                partition,
                digest,
                ask,
            },
            Message::Answer { seq, reply } => Inbound::Acked {
                seq,
                answer: Some(reply),
            },
            Message::Ack { seq } => Inbound::Acked { seq, answer: None },
            Message::Nack { seq, reason } => Inbound::Nacked {
                seq,
                reason: short(&reason).to_owned(),
            },
            Message::Heartbeat => Inbound::Nothing,
            Message::Refuse { reason } => return Err(Closed::RefusedByPeer(reason)),
            Message::Hello { .. } => return Err(Closed::Unexpected("hello")),
        };
        match &inbound {
            Inbound::Admit { .. } | Inbound::Digest { .. } => self.take_place()?,
            Inbound::Acked { .. } | Inbound::Nacked { .. } => self.progress = true,
            Inbound::Nothing => {}
        }
        Ok(inbound)
    }

    fn take_place(&mut self) -> Result<(), Closed> {
        if !self.may_read() {
            // Read with the window full: the caller broke the rule.
            return Err(Closed::Stopping);
        }
        self.inbound += 1;
        Ok(())
    }

    /// A batch or question of the peer was handled: the answer to write
    /// (it keeps its place until written), or why the connection closes
    /// (a failure other than "not held": the peer sends it again after
    /// its backoff, see [`link::answer`]).
    pub fn on_handled(&mut self, seq: u64, handled: Handled) -> Result<Message, Closed> {
        if matches!(handled, Handled::Admitted | Handled::Answered(_)) {
            self.progress = true;
        }
        link::answer(seq, handled).map_err(Closed::Rejected)
    }

    /// A frame was written at `now`; `answer`: it answered one of the
    /// peer's batches or questions, whose place is free again. Reading
    /// that resumes gives the peer a whole silence limit from now.
    pub fn on_written(&mut self, answer: bool, now: Instant) {
        self.heartbeat_at = now + self.heartbeat;
        if answer {
            let resumes = !self.may_read();
            self.inbound = self.inbound.saturating_sub(1);
            if resumes {
                self.silent_at = self.silent_at.max(now + self.silence);
            }
        }
    }
}

#[cfg(test)]
mod tests;

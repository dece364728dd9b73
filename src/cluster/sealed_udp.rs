//! Gossip over UDP with every datagram sealed ([`super::gossip_auth`]):
//! chitchat's UDP transport with the envelope added on send and checked
//! on receive. A datagram that does not open is dropped before chitchat
//! parses a byte of it, and counted by why
//! (`trawl_gossip_rejected_total{reason}`).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::Context as _;
use chitchat::transport::{Socket, Transport};
use chitchat::{ChitchatMessage, Deserializable, Serializable};
use prometheus::IntCounterVec;

use super::gossip_auth::{GossipKey, Opener, Sealer, OVERHEAD};

/// The largest UDP payload (chitchat sizes its messages to fit it; the
/// envelope must fit too, see [`SealedSocket::send`]).
const MAX_DATAGRAM: usize = 65_507;

/// The transport: opens sealed sockets.
pub struct SealedUdp {
    key: GossipKey,
    rejected: Option<IntCounterVec>,
    /// One sealer per process life, so a transport opened twice (it is
    /// not) would still never reuse a counter.
    session: Mutex<u64>,
}

impl SealedUdp {
    /// A transport sealing with `key`; rejections are counted in
    /// `rejected` (label `reason`) when given.
    pub fn new(key: GossipKey, rejected: Option<IntCounterVec>) -> Self {
        let mut session = [0u8; 8];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut session)
            .expect("the system's random source is available");
        SealedUdp {
            key,
            rejected,
            session: Mutex::new(u64::from_be_bytes(session)),
        }
    }
}

#[async_trait::async_trait]
impl Transport for SealedUdp {
    async fn open(&self, listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let socket = tokio::net::UdpSocket::bind(listen_addr)
            .await
            .with_context(|| format!("failed to bind to {listen_addr}/UDP for gossip"))?;
        let session = {
            let mut next = self.session.lock().unwrap_or_else(|e| e.into_inner());
            *next = next.wrapping_add(1);
            *next
        };
        Ok(Box::new(SealedSocket {
            socket,
            sealer: Sealer::new(self.key.clone(), session),
            opener: Opener::new(self.key.clone()),
            rejected: self.rejected.clone(),
            send_buf: Vec::with_capacity(MAX_DATAGRAM),
            plain: Vec::with_capacity(MAX_DATAGRAM),
            recv_buf: vec![0; MAX_DATAGRAM].into_boxed_slice(),
        }))
    }
}

/// One bound gossip socket.
struct SealedSocket {
    socket: tokio::net::UdpSocket,
    sealer: Sealer,
    opener: Opener,
    rejected: Option<IntCounterVec>,
    send_buf: Vec<u8>,
    plain: Vec<u8>,
    recv_buf: Box<[u8]>,
}

fn now_ms() -> u64 {
    crate::clock::unix_ms(SystemTime::now())
}

#[async_trait::async_trait]
impl Socket for SealedSocket {
    /// Seals and sends `msg`. chitchat fills a message up to the largest
    /// datagram, so a message within [`OVERHEAD`] bytes of it is dropped
    /// (logged): gossip sends the rest of the delta next round. Our nodes
    /// publish a few short keys each, far below.
    async fn send(&mut self, to: SocketAddr, msg: ChitchatMessage) -> anyhow::Result<()> {
        self.plain.clear();
        msg.serialize(&mut self.plain);
        if self.plain.len() + OVERHEAD > MAX_DATAGRAM {
            tracing::warn!(len = self.plain.len(), %to, "gossip: message too large to seal; dropped");
            return Ok(());
        }
        self.send_buf.clear();
        self.sealer.seal(&self.plain, now_ms(), &mut self.send_buf);
        if let Err(e) = self.socket.send_to(&self.send_buf, to).await {
            // As chitchat's own transport: an unreachable peer is not a
            // broken transport.
            tracing::debug!(%to, error = %e, "gossip: send failed");
        }
        Ok(())
    }

    async fn recv(&mut self) -> anyhow::Result<(SocketAddr, ChitchatMessage)> {
        loop {
            let (len, from) = match self.socket.recv_from(&mut self.recv_buf).await {
                Ok(got) => got,
                Err(e) if transient(&e) => continue,
                Err(e) => return Err(e).context("gossip: UDP receive failed"),
            };
            let payload = match self.opener.open(&self.recv_buf[..len], now_ms()) {
                Ok(payload) => payload,
                Err(why) => {
                    if let Some(counter) = &self.rejected {
                        counter.with_label_values(&[why.label()]).inc();
                    }
                    tracing::debug!(%from, reason = %why, "gossip: packet dropped");
                    continue;
                }
            };
            let mut buf = payload;
            match ChitchatMessage::deserialize(&mut buf) {
                Ok(msg) => return Ok((from, msg)),
                // Sealed by a key holder, yet not a message: a bug or a
                // version skew, not an attack.
                Err(e) => {
                    tracing::warn!(%from, error = %e, "gossip: sealed packet is not a message")
                }
            }
        }
    }
}

/// Errors a UDP socket reports for an earlier send (ICMP), not its end.
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::OutOfMemory
    )
}

//! Authenticated gossip packets, with no I/O.
//!
//! Gossip decides who is in the cluster: a forged packet could make up a
//! member (and so a share of the partitions) or declare a live node's
//! state. With `[cluster] gossip_key`, every gossip datagram is sealed:
//!
//! ```text
//! "TRG1" | session u64 | counter u64 | sent_at_ms u64 | payload | HMAC-SHA256 (32 bytes)
//! ```
//!
//! - **Forgery**: the tag is HMAC-SHA256 under the cluster's key over
//!   everything before it; a packet whose tag does not verify (compared in
//!   constant time) is dropped unread.
//! - **Replay**: a sender picks a random `session` at start and numbers
//!   its packets; the receiver keeps, per session, the highest counter and
//!   a window of the 64 below it (as IPsec does), so a packet seen once is
//!   dropped if sent again, even reordered within the window. A packet
//!   whose `sent_at` is further than [`MAX_SKEW`] from the receiver's clock
//!   is dropped too, so a session can be forgotten once its packets would
//!   be too old anyway: memory stays bounded by the sessions of the last
//!   few minutes (at most [`MAX_SESSIONS`], and only key holders make
//!   sessions).
//!
//! Nodes' clocks must agree within [`MAX_SKEW`] (NTP does far better).
//! The payload is not encrypted: gossip carries addresses and partition
//! lists, not secrets.

use std::collections::HashMap;

use ring::hmac;

/// What starts every sealed packet (and names the format's version).
pub const MAGIC: &[u8; 4] = b"TRG1";
/// The header's length: magic, session, counter, send time.
pub const HEADER: usize = 4 + 8 + 8 + 8;
/// The tag's length.
pub const TAG: usize = 32;
/// What sealing adds to a packet.
pub const OVERHEAD: usize = HEADER + TAG;
/// How far a packet's send time may be from the receiver's clock.
pub const MAX_SKEW_MS: u64 = 120_000;
/// [`MAX_SKEW_MS`], for docs.
pub const MAX_SKEW: std::time::Duration = std::time::Duration::from_millis(MAX_SKEW_MS);
/// Senders remembered at most; beyond, packets of new sessions are
/// dropped until old ones expire (a flood by a key holder).
pub const MAX_SESSIONS: usize = 4096;
/// Counters below the highest seen that are still told apart.
const WINDOW: u64 = 64;

/// A cluster's gossip key.
#[derive(Clone)]
pub struct GossipKey(hmac::Key);

impl std::fmt::Debug for GossipKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GossipKey(<redacted>)")
    }
}

/// Why a key could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not hex, or too short.
    #[error("a gossip key is at least 32 bytes written as hex (64 hex digits): {0}")]
    Format(&'static str),
}

impl GossipKey {
    /// The key written as hex (whitespace around it ignored): at least 32
    /// bytes, as [`GossipKey::generate_hex`] writes.
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        let bytes = data_encoding::HEXLOWER_PERMISSIVE
            .decode(text.trim().as_bytes())
            .map_err(|_| KeyError::Format("not hex"))?;
        if bytes.len() < 32 {
            return Err(KeyError::Format("too short"));
        }
        Ok(Self::from_bytes(&bytes))
    }

    /// A key from raw bytes.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        GossipKey(hmac::Key::new(hmac::HMAC_SHA256, bytes))
    }

    /// A new random key, as hex.
    pub fn generate_hex() -> String {
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .expect("the system's random source is available");
        data_encoding::HEXLOWER.encode(&bytes)
    }
}

/// Seals the packets one node sends.
#[derive(Debug)]
pub struct Sealer {
    key: GossipKey,
    session: u64,
    counter: u64,
}

impl Sealer {
    /// A sealer for a new session (`session`: random, from the caller).
    pub fn new(key: GossipKey, session: u64) -> Self {
        Sealer {
            key,
            session,
            counter: 0,
        }
    }

    /// Appends the sealed form of `payload`, sent at `now_ms` (Unix ms),
    /// to `out`.
    pub fn seal(&mut self, payload: &[u8], now_ms: u64, out: &mut Vec<u8>) {
        self.counter += 1;
        let start = out.len();
        out.reserve(OVERHEAD + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.session.to_be_bytes());
        out.extend_from_slice(&self.counter.to_be_bytes());
        out.extend_from_slice(&now_ms.to_be_bytes());
        out.extend_from_slice(payload);
        let tag = hmac::sign(&self.key.0, &out[start..]);
        out.extend_from_slice(tag.as_ref());
    }
}

/// Why a packet was dropped (each is a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// Too short, or not this format.
    #[error("not a sealed gossip packet")]
    Malformed,
    /// The tag does not verify: another key, or altered bytes.
    #[error("the tag does not verify (another key, or altered)")]
    Forged,
    /// Sent too long ago, or in the future, by the receiver's clock.
    #[error("sent further than the allowed clock skew from now")]
    Stale,
    /// A packet seen already (or older than the window).
    #[error("replayed")]
    Replayed,
    /// Too many senders at once.
    #[error("too many gossip sessions")]
    Crowded,
}

impl Rejected {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Rejected::Malformed => "malformed",
            Rejected::Forged => "forged",
            Rejected::Stale => "stale",
            Rejected::Replayed => "replayed",
            Rejected::Crowded => "crowded",
        }
    }
}

/// One sender's replay window.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// The highest counter accepted.
    highest: u64,
    /// Bit `i`: counter `highest - i` was accepted.
    seen: u64,
    /// The newest send time accepted: when the session can be forgotten.
    newest_ms: u64,
}

/// Checks the packets one node receives.
#[derive(Debug)]
pub struct Opener {
    key: GossipKey,
    sessions: HashMap<u64, Window>,
    /// When expired sessions were last forgotten.
    pruned_ms: u64,
}

impl Opener {
    /// An opener with no session known.
    pub fn new(key: GossipKey) -> Self {
        Opener {
            key,
            sessions: HashMap::new(),
            pruned_ms: 0,
        }
    }

    /// The payload of `packet`, received at `now_ms`, if it is authentic
    /// and new.
    pub fn open<'a>(&mut self, packet: &'a [u8], now_ms: u64) -> Result<&'a [u8], Rejected> {
        if packet.len() < OVERHEAD || &packet[..4] != MAGIC {
            return Err(Rejected::Malformed);
        }
        let (signed, tag) = packet.split_at(packet.len() - TAG);
        hmac::verify(&self.key.0, signed, tag).map_err(|_| Rejected::Forged)?;
        let field = |at: usize| u64::from_be_bytes(signed[at..at + 8].try_into().expect("8 bytes"));
        let (session, counter, sent_at) = (field(4), field(12), field(20));
        if now_ms.abs_diff(sent_at) > MAX_SKEW_MS {
            return Err(Rejected::Stale);
        }
        self.forget_expired(now_ms);
        self.accept(session, counter, sent_at)?;
        Ok(&signed[HEADER..])
    }

    /// Sessions remembered now.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Records `counter` of `session` as seen, unless it was.
    fn accept(&mut self, session: u64, counter: u64, sent_at: u64) -> Result<(), Rejected> {
        if !self.sessions.contains_key(&session) && self.sessions.len() >= MAX_SESSIONS {
            return Err(Rejected::Crowded);
        }
        let window = self.sessions.entry(session).or_insert(Window {
            highest: 0,
            seen: 0,
            newest_ms: sent_at,
        });
        if counter > window.highest {
            let shift = counter - window.highest;
            window.seen = if shift >= WINDOW {
                0
            } else {
                window.seen << shift
            } | 1;
            window.highest = counter;
        } else {
            let back = window.highest - counter;
            if back >= WINDOW || window.seen & (1 << back) != 0 {
                return Err(Rejected::Replayed);
            }
            window.seen |= 1 << back;
        }
        window.newest_ms = window.newest_ms.max(sent_at);
        Ok(())
    }

    /// Forgets sessions whose every packet is now too old to be accepted:
    /// a replay of one is [`Rejected::Stale`] without its window.
    fn forget_expired(&mut self, now_ms: u64) {
        if now_ms < self.pruned_ms.saturating_add(1_000) {
            return;
        }
        self.pruned_ms = now_ms;
        let horizon = now_ms.saturating_sub(2 * MAX_SKEW_MS);
        self.sessions.retain(|_, w| w.newest_ms >= horizon);
    }
}

#[cfg(test)]
mod tests;

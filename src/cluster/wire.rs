//! The bridge's wire protocol: what two nodes say to each other over their
//! one TCP connection.
//!
//! - **Framing**: length-delimited frames (a 4-byte big-endian length, then
//!   the payload), by `tokio_util`'s [`LengthDelimitedCodec`], capped at
//!   [`MAX_FRAME`]: a peer announcing a larger frame is cut off before a
//!   byte of it is buffered.
//! - **Payloads**: one [`Message`] per frame, in postcard (compact, and
//!   strict: bytes left after a message, an unknown variant or a truncated
//!   field are errors, never a guess).
//! - **Handshake**: each side's first frame is [`Message::Hello`], naming
//!   the cluster, the node and the protocol version; [`check_hello`] says
//!   whether to go on. A wrong cluster id, an older protocol version or
//!   anything but a hello first is answered with [`Message::Refuse`] and
//!   the connection is closed, with the reason logged on both sides.
//! - **Batches and acks**: links for a partition the peer owns travel as
//!   [`Message::Admit`] with a per-connection sequence number; the peer
//!   answers [`Message::Ack`] once they are durably admitted, and only
//!   then does the sender delete them from its outbox. A batch sent again
//!   after a reconnect is harmless: admission is idempotent.
//! - **Digest questions**: exact dedup asks the node holding a digest's
//!   partition ([`crate::dedup::exact`]) with [`Message::Digest`], numbered
//!   and windowed like batches; the answer is [`Message::Answer`] (or a
//!   `Nack` if the receiver does not hold the partition).
//!
//! Enum variants are only appended; anything else is a new
//! [`PROTOCOL_VERSION`].

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

use crate::dedup::exact::{DigestAsk, DigestReply};
use crate::store::StoredCopy;

/// The version of this protocol; a peer speaking an older one is refused.
/// Version 2 added digest questions, version 3 the links' cash, version 4
/// their provenance (via, hop path).
pub const PROTOCOL_VERSION: u16 = 4;

/// The largest frame accepted (and sent): a batch of links is far below
/// it; anything larger is a broken or hostile peer.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The frame codec both ends use.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// One frame's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// The first frame of each side.
    Hello {
        /// The cluster this node belongs to (`[cluster] cluster_id`).
        cluster: String,
        /// The node's id.
        node: String,
        /// The protocol version it speaks.
        protocol: u16,
    },
    /// The handshake failed; the connection closes after this.
    Refuse {
        /// Why, for the other side's log.
        reason: String,
    },
    /// URLs for partition `partition`, which the receiver owns.
    Admit {
        /// Sequence number of the batch on this connection.
        seq: u64,
        /// The partition they belong to.
        partition: u16,
        /// The URLs.
        entries: Vec<WireEntry>,
    },
    /// Batch `seq` was admitted durably.
    Ack {
        /// The batch.
        seq: u64,
    },
    /// Keeps an idle connection's liveness visible.
    Heartbeat,
    /// Batch `seq` was not admitted because the receiver does not hold its
    /// partition (membership changed under it): the sender routes it again
    /// by its own, newer view. Other failures close the connection instead.
    Nack {
        /// The batch.
        seq: u64,
        /// Why, for the sender's log.
        reason: String,
    },
    /// A question about a payload digest of `partition`, which the
    /// receiver owns (numbered like a batch, from the same counter).
    Digest {
        /// Sequence number.
        seq: u64,
        /// The digest's partition.
        partition: u16,
        /// The payload's SHA-256.
        digest: [u8; 32],
        /// The question.
        ask: WireAsk,
    },
    /// The answer to question `seq`.
    Answer {
        /// The question.
        seq: u64,
        /// The answer.
        reply: WireReply,
    },
}

/// Where a payload is stored in full, on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireCopy {
    /// `WARC-Target-URI` of the record.
    pub uri: String,
    /// Its `WARC-Date`.
    pub date: String,
    /// Its `WARC-Record-ID`.
    pub record_id: String,
}

/// [`DigestAsk`] on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireAsk {
    /// See [`DigestAsk::Claim`].
    Claim,
    /// See [`DigestAsk::Register`].
    Register(WireCopy),
    /// See [`DigestAsk::Abandon`].
    Abandon,
}

/// [`DigestReply`] on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireReply {
    /// See [`DigestReply::Stored`].
    Stored(WireCopy),
    /// See [`DigestReply::Claimed`].
    Claimed,
    /// See [`DigestReply::Unclaimed`].
    Unclaimed,
}

impl From<StoredCopy> for WireCopy {
    fn from(c: StoredCopy) -> Self {
        WireCopy {
            uri: c.uri,
            date: c.date,
            record_id: c.record_id,
        }
    }
}

impl From<WireCopy> for StoredCopy {
    fn from(c: WireCopy) -> Self {
        StoredCopy {
            uri: c.uri,
            date: c.date,
            record_id: c.record_id,
        }
    }
}

impl From<DigestAsk> for WireAsk {
    fn from(ask: DigestAsk) -> Self {
        match ask {
            DigestAsk::Claim => WireAsk::Claim,
            DigestAsk::Register(copy) => WireAsk::Register(copy.into()),
            DigestAsk::Abandon => WireAsk::Abandon,
        }
    }
}

impl From<WireAsk> for DigestAsk {
    fn from(ask: WireAsk) -> Self {
        match ask {
            WireAsk::Claim => DigestAsk::Claim,
            WireAsk::Register(copy) => DigestAsk::Register(copy.into()),
            WireAsk::Abandon => DigestAsk::Abandon,
        }
    }
}

impl From<DigestReply> for WireReply {
    fn from(reply: DigestReply) -> Self {
        match reply {
            DigestReply::Stored(copy) => WireReply::Stored(copy.into()),
            DigestReply::Claimed => WireReply::Claimed,
            DigestReply::Unclaimed => WireReply::Unclaimed,
        }
    }
}

impl From<WireReply> for DigestReply {
    fn from(reply: WireReply) -> Self {
        match reply {
            WireReply::Stored(copy) => DigestReply::Stored(copy.into()),
            WireReply::Claimed => DigestReply::Claimed,
            WireReply::Unclaimed => DigestReply::Unclaimed,
        }
    }
}

/// A URL offered to a partition on another node: what admission needs,
/// already normalised and fingerprinted by the sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEntry {
    /// Fingerprint of the normalised URL.
    pub fp: u128,
    /// The URL to fetch.
    pub url: String,
    /// Its host key.
    pub host: String,
    /// Hops from the seed.
    pub depth: u32,
    /// Priority level.
    pub priority: u8,
    /// Page (0), redirected page (1, with `hops`) or sitemap (2, with
    /// `submitter`).
    pub kind: WireKind,
    /// Queue it (else only record it as seen).
    pub queue: bool,
    /// Registrable domain of the linking page.
    pub referrer: Option<String>,
    /// Sitemap `lastmod` (Unix ms).
    pub lastmod_ms: Option<u64>,
    /// Its estimated importance (`frontier/importance.rs`), so a cluster
    /// orders its hosts' queues as one crawler would (since protocol 3).
    pub cash: crate::frontier::importance::Cash,
    /// The URL it was found on (`frontier/provenance.rs`; since protocol
    /// 4).
    pub via: Option<String>,
    /// Its hop path from its seed (since protocol 4).
    pub hops: String,
}

/// The kind of a [`WireEntry`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireKind {
    /// A page.
    Page,
    /// A page reached by `hops` redirects.
    Redirected {
        /// Redirects followed.
        hops: u8,
    },
    /// A sitemap, submitted by a host's robots.txt.
    Sitemap {
        /// The submitting host.
        submitter: Option<String>,
    },
}

impl From<&crate::store::AdmitEntry> for WireEntry {
    fn from(e: &crate::store::AdmitEntry) -> Self {
        use crate::frontier::EntryKind;
        WireEntry {
            fp: e.fp.0,
            url: e.url.clone(),
            host: e.host.clone(),
            depth: e.depth,
            priority: e.priority.level() as u8,
            kind: match &e.kind {
                EntryKind::Page => WireKind::Page,
                EntryKind::Redirected { hops } => WireKind::Redirected { hops: *hops },
                EntryKind::Sitemap { submitter } => WireKind::Sitemap {
                    submitter: submitter.clone(),
                },
            },
            queue: e.queue,
            referrer: e.referrer.clone(),
            lastmod_ms: e.lastmod_ms,
            cash: e.cash,
            via: e.provenance.via.as_deref().map(str::to_owned),
            hops: e.provenance.hops.as_str().to_owned(),
        }
    }
}

impl From<WireEntry> for crate::store::AdmitEntry {
    fn from(w: WireEntry) -> Self {
        use crate::frontier::{EntryKind, Priority};
        crate::store::AdmitEntry {
            fp: crate::url::Fingerprint(w.fp),
            url: w.url,
            host: w.host,
            depth: w.depth,
            priority: Priority::from_level(w.priority),
            kind: match w.kind {
                WireKind::Page => EntryKind::Page,
                WireKind::Redirected { hops } => EntryKind::Redirected { hops },
                WireKind::Sitemap { submitter } => EntryKind::Sitemap { submitter },
            },
            queue: w.queue,
            referrer: w.referrer,
            lastmod_ms: w.lastmod_ms,
            cash: w.cash,
            provenance: crate::frontier::provenance::Provenance {
                via: w.via.map(|v| std::sync::Arc::from(v.as_str())),
                hops: crate::frontier::provenance::HopPath::from_letters(&w.hops),
            },
        }
    }
}

/// A frame that is not a message of this protocol.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The payload is not a [`Message`] (garbage, or a newer variant).
    #[error("malformed frame: {0}")]
    Malformed(postcard::Error),
    /// Bytes follow the message in its frame.
    #[error("malformed frame: {0} bytes after the message")]
    Trailing(usize),
    /// A message could not be encoded (it does not fit a frame).
    #[error("cannot encode a message: {0}")]
    Encode(String),
}

/// Encodes `msg` as a frame's payload.
pub fn encode(msg: &Message) -> Result<Bytes, WireError> {
    let bytes = postcard::to_allocvec(msg).map_err(|e| WireError::Encode(e.to_string()))?;
    if bytes.len() > MAX_FRAME {
        return Err(WireError::Encode(format!(
            "{} bytes, more than a frame's {MAX_FRAME}",
            bytes.len()
        )));
    }
    Ok(Bytes::from(bytes))
}

/// Decodes a frame's payload.
pub fn decode(payload: &[u8]) -> Result<Message, WireError> {
    let (msg, rest) = postcard::take_from_bytes(payload).map_err(WireError::Malformed)?;
    if !rest.is_empty() {
        return Err(WireError::Trailing(rest.len()));
    }
    Ok(msg)
}

/// Why a handshake fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The first frame is not a hello.
    #[error("expected a hello first")]
    NotHello,
    /// The peer belongs to another cluster.
    #[error("wrong cluster: ours is {ours:?}, the peer's {theirs:?}")]
    WrongCluster {
        /// Our cluster id.
        ours: String,
        /// Theirs.
        theirs: String,
    },
    /// The peer speaks an older protocol.
    #[error("protocol {theirs} is older than ours ({ours})")]
    OldProtocol {
        /// Our version.
        ours: u16,
        /// Theirs.
        theirs: u16,
    },
    /// The peer claims our own node id.
    #[error("the peer claims our node id {0:?}")]
    SameNode(String),
}

/// The hello this node sends.
pub fn hello(cluster: &str, node: &str) -> Message {
    Message::Hello {
        cluster: cluster.to_owned(),
        node: node.to_owned(),
        protocol: PROTOCOL_VERSION,
    }
}

/// Checks a peer's first message against our `cluster` and `node` id: the
/// peer's node id if the connection may go on. A newer protocol is
/// accepted (it speaks ours: variants are only appended), an older one is
/// not.
pub fn check_hello(msg: &Message, cluster: &str, node: &str) -> Result<String, Refusal> {
    let Message::Hello {
        cluster: theirs,
        node: peer,
        protocol,
    } = msg
    else {
        return Err(Refusal::NotHello);
    };
    if theirs != cluster {
        return Err(Refusal::WrongCluster {
            ours: cluster.to_owned(),
            theirs: theirs.clone(),
        });
    }
    if *protocol < PROTOCOL_VERSION {
        return Err(Refusal::OldProtocol {
            ours: PROTOCOL_VERSION,
            theirs: *protocol,
        });
    }
    if peer == node {
        return Err(Refusal::SameNode(peer.clone()));
    }
    Ok(peer.clone())
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use tokio_util::codec::{Decoder, Encoder};

    use super::*;

    fn entry(i: u32) -> WireEntry {
        WireEntry {
            fp: u128::from(i) << 64 | 7,
            url: format!("http://a.test/{i}"),
            host: "a.test".into(),
            depth: i,
            priority: 2,
            kind: WireKind::Sitemap {
                submitter: Some("b.test".into()),
            },
            queue: true,
            referrer: Some("b.test".into()),
            cash: crate::frontier::importance::Cash::new(0.125),
            lastmod_ms: Some(1_700_000_000_000),
            via: Some(format!("http://b.test/{i}")),
            hops: "LLM".into(),
        }
    }

    /// Frames `msgs` as the connection would carry them.
    fn wire(msgs: &[Message]) -> BytesMut {
        let mut codec = codec();
        let mut out = BytesMut::new();
        for m in msgs {
            codec.encode(encode(m).unwrap(), &mut out).unwrap();
        }
        out
    }

    #[test]
    fn messages_survive_framing_even_split_anywhere() {
        let msgs = vec![
            hello("c1", "n1"),
            Message::Admit {
                seq: 9,
                partition: 63,
                entries: (0..100).map(entry).collect(),
            },
            Message::Ack { seq: 9 },
            Message::Nack {
                seq: 10,
                reason: "not held here".into(),
            },
            Message::Heartbeat,
            Message::Refuse {
                reason: "bye".into(),
            },
            Message::Digest {
                seq: 11,
                partition: 7,
                digest: [0xab; 32],
                ask: WireAsk::Register(WireCopy {
                    uri: "http://a.test/".into(),
                    date: "2026-11-30T00:00:00Z".into(),
                    record_id: "<urn:uuid:1>".into(),
                }),
            },
            Message::Answer {
                seq: 11,
                reply: WireReply::Claimed,
            },
        ];
        let bytes = wire(&msgs);
        for split in [1, 3, 4, 5, 17, bytes.len() / 2, bytes.len()] {
            let mut codec = codec();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for chunk in bytes.chunks(split) {
                buf.extend_from_slice(chunk);
                while let Some(frame) = codec.decode(&mut buf).unwrap() {
                    got.push(decode(&frame).unwrap());
                }
            }
            assert_eq!(got, msgs, "chunks of {split}");
        }
    }

    #[test]
    fn admission_entries_cross_the_wire_unchanged() {
        let wire = entry(3);
        let admit = crate::store::AdmitEntry::from(wire.clone());
        assert_eq!(WireEntry::from(&admit), wire);
    }

    #[test]
    fn garbage_is_a_typed_error_never_a_panic() {
        // A frame announcing more than the cap is refused before reading it.
        let mut huge = BytesMut::from(&(MAX_FRAME as u32 + 1).to_be_bytes()[..]);
        assert!(codec().decode(&mut huge).is_err());
        // Garbage payloads of every small length decode to an error.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut errors = 0;
        for len in 0..300 {
            let payload: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 24) as u8
                })
                .collect();
            if decode(&payload).is_err() {
                errors += 1;
            }
        }
        assert!(errors > 250, "{errors} of 300 random payloads refused");
        // An unknown variant (a newer peer's message) is an error too.
        assert!(matches!(decode(&[200, 0]), Err(WireError::Malformed(_))));
        let mut long = encode(&Message::Heartbeat).unwrap().to_vec();
        long.push(0);
        assert!(matches!(decode(&long), Err(WireError::Trailing(1))));
    }

    #[test]
    fn the_handshake_refuses_strangers_old_peers_and_ourselves() {
        assert_eq!(check_hello(&hello("c1", "n2"), "c1", "n1"), Ok("n2".into()));
        assert_eq!(
            check_hello(&hello("c2", "n2"), "c1", "n1"),
            Err(Refusal::WrongCluster {
                ours: "c1".into(),
                theirs: "c2".into()
            })
        );
        let old = Message::Hello {
            cluster: "c1".into(),
            node: "n2".into(),
            protocol: 0,
        };
        assert!(matches!(
            check_hello(&old, "c1", "n1"),
            Err(Refusal::OldProtocol { theirs: 0, .. })
        ));
        let newer = Message::Hello {
            cluster: "c1".into(),
            node: "n2".into(),
            protocol: PROTOCOL_VERSION + 1,
        };
        assert!(check_hello(&newer, "c1", "n1").is_ok());
        assert_eq!(
            check_hello(&Message::Heartbeat, "c1", "n1"),
            Err(Refusal::NotHello)
        );
        assert!(matches!(
            check_hello(&hello("c1", "n1"), "c1", "n1"),
            Err(Refusal::SameNode(_))
        ));
        let reason = Refusal::WrongCluster {
            ours: "c1".into(),
            theirs: "c2".into(),
        };
        assert_eq!(
            reason.to_string(),
            "wrong cluster: ours is \"c1\", the peer's \"c2\""
        );
    }
}

//! The cluster's domain: which node should own which partition, which
//! node does, and what nodes say to each other. Plain code, tested on its
//! own; the actors (`actors/cluster.rs`, `actors/ownership.rs`,
//! `actors/bridge.rs`) only carry it out.
//!
//! - [`membership`]: gossip membership and failure detection (chitchat);
//! - [`assign`]: rendezvous hashing of partitions over the live members:
//!   who *should* own a partition;
//! - [`lease`]: who *does*, with `[cluster] state_url`: the lease over a
//!   partition's chain of create-only manifests, as a state machine with
//!   no I/O (fencing, the lease on the owner's own clock, the new owner's
//!   hold, durability watermarks), driven by the simulator of
//!   `tests/it/simulation.rs` as by the OwnershipActor;
//! - [`manifest`] and [`chain`]: the manifests and the chain in object
//!   storage (checkpoint files uploaded once, restores that reuse them);
//! - [`gate`]: the end of a partition's lease, checked by its hosts and
//!   the fetcher right before every request;
//! - [`holders`]: without `state_url`, who held each partition, so no node
//!   creates a store for a partition whose state is on another's disk;
//! - [`hearing`]: whether this node hears the peers it was given: alone
//!   after a few gossip rounds of silence, said and shown, and no store
//!   created for a partition a peer it cannot hear may hold;
//! - [`idle`]: when the whole cluster has run out of work;
//! - [`link`]: one peer link's numbering, window, resending and redial
//!   backoff, with no I/O (the bridge carries it out over TCP);
//! - [`conn`]: one bridge connection's handshake, window, silence and
//!   heartbeat deadlines, with no I/O (the bridge carries it out);
//! - [`wire`]: the bridge's frames, messages and handshake;
//! - [`tls`]: who may open a bridge: mutual TLS against the cluster's CA,
//!   each certificate naming its node;
//! - [`gossip_auth`] and [`sealed_udp`]: who may gossip: every datagram
//!   sealed with the cluster's key (HMAC-SHA256) and numbered against
//!   replays.
//!
//! The rule the rest builds on: membership and assignment are advice. With
//! `state_url`, a node crawls a partition only while its lease over the
//! chain holds; without it, only while it holds the partition's RocksDB
//! store open (its lock file). Either way two nodes never crawl one host
//! at once, whatever gossip says.

pub mod assign;
pub mod chain;
pub mod conn;
pub mod gate;
pub mod gossip_auth;
pub mod hearing;
pub mod holders;
pub mod idle;
pub mod lease;
pub mod link;
pub mod manifest;
pub mod membership;
pub mod sealed_udp;
pub mod tls;
pub mod wire;

/// Whether `id` is a usable node id: 1 to 64 ASCII letters, digits, `-`
/// or `_` (it names files, and labels metrics).
pub fn valid_node_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

//! The cluster's domain: which node owns which partition, and what nodes
//! say to each other. (Issue 10 builds the cluster in steps; what is here
//! is plain code, tested on its own: nothing in a crawl uses it yet, and a
//! trawl node still crawls every partition of its data directory.)
//!
//! - [`membership`]: gossip membership and failure detection (chitchat);
//! - [`assign`]: rendezvous hashing of partitions over the live members;
//! - [`idle`]: when the whole cluster has run out of work;
//! - [`wire`]: the bridge's frames, messages and handshake.
//!
//! The rule the rest builds on: membership and assignment are advice; a
//! node crawls a partition only while it holds that partition's RocksDB
//! store open (its lock file), so two nodes can never crawl one host at
//! once, whatever gossip says.

pub mod assign;
pub mod chain;
pub mod holders;
pub mod idle;
pub mod lease;
pub mod manifest;
pub mod membership;
pub mod wire;

/// Whether `id` is a usable node id: 1 to 64 ASCII letters, digits, `-`
/// or `_` (it names files, and labels metrics).
pub fn valid_node_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

//! The actor system: who does the work, and when.
//!
//! One actor per file; the messages that cross actors are in
//! [`messages`]. Actors hold `Recipient`s of those messages, and only
//! [`node`] knows the concrete types it wires together.

pub mod archive;
pub mod bridge;
pub mod cluster;
pub mod digests;
pub mod fetcher;
pub mod host;
pub mod messages;
pub mod node;
pub mod ownership;
pub mod parser;
pub mod partition;
pub mod seen;
pub mod upload;

pub use node::{
    ClusterStatus, CrashHostActor, CrashPartition, GetCluster, GetStatus, Node, NodeError,
    NodeStatus, OfferEarlier, Seed, SeedEach, Shutdown, WhenAssigned, WhenIdle,
};

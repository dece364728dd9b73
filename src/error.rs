//! Failures that cross from one stage of the pipeline to another.
//!
//! A stage (the store, the archive, the parser) logs its typed source
//! error where it happened and hands the stage before it a [`Failure`]
//! whose variant says *whose* failure it was. That distinction drives
//! policy: a host's own failures (timeouts, 5xx) slow the host down, while
//! a failing store or archive, or an internal mailbox that closed, is never
//! counted against the host; the work is kept and retried.

/// Why a stage could not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The partition store failed (a write or read of RocksDB).
    #[error("store: {0}")]
    Store(String),
    /// The archive (WARC, events or dedup index) failed.
    #[error("archive: {0}")]
    Archive(String),
    /// The receiving actor is gone or its mailbox closed: an internal
    /// condition (usually shutdown), not anything the host did.
    #[error("mailbox: {0}")]
    Mailbox(String),
    /// A peer node could not take the work: it is not (or no longer) a
    /// member, or the work cannot be sent to it. The work stays with the
    /// sender, to be routed again.
    #[error("peer: {0}")]
    Peer(String),
    /// This node does not hold the partition the work is for (it never
    /// did, or it stopped or handed it over): the sender's view of the
    /// cluster is not this node's, and it routes the work again by its
    /// next one. The one failure a link batch is refused with (a `Nack`
    /// on the wire); any other closes the connection, so that it is sent
    /// again rather than routed elsewhere.
    #[error("partition {partition} is not held here")]
    NotHeld {
        /// The partition.
        partition: u16,
    },
    /// A request (from an operator) is not valid: nothing was changed.
    #[error("invalid: {0}")]
    Invalid(String),
}

impl Failure {
    /// The stage that failed, as a bounded metric label.
    pub fn stage(&self) -> &'static str {
        match self {
            Failure::Store(_) => "store",
            Failure::Archive(_) => "archive",
            Failure::Mailbox(_) => "mailbox",
            Failure::Peer(_) => "peer",
            Failure::NotHeld { .. } => "not_held",
            Failure::Invalid(_) => "invalid",
        }
    }
}

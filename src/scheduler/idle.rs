//! When a node has run out of work, from its partitions' snapshots.
//!
//! A single node ends its crawl itself once nothing is queued, due or in
//! flight; a cluster node only reports its own state and counter, and the
//! cluster decides (see `cluster::idle`). The end of a single node's
//! crawl is announced, not polled for: a partition whose queue runs empty
//! says so (`QueueEmptied`), and the node then asks every partition. Its
//! poll is a safety net, slow on purpose, for the ends no such event
//! announces (a partition restarted after a failure with nothing queued,
//! the last due refresh fetched: refreshes are not counted in the queue).
//! A waiting crawler so spends no CPU on a poll it does not need.

use std::time::Duration;

/// How often a single node polls its partitions (the safety net above;
/// it also finds failed partitions to restart).
pub const SINGLE_POLL: Duration = Duration::from_millis(250);

/// How often a cluster node polls its partitions: it reports its work to
/// the cluster, which decides the end from every node's reports.
pub const CLUSTER_POLL: Duration = Duration::from_millis(50);

/// How often a node polls its partitions.
pub fn poll_every(single: bool) -> Duration {
    match single {
        true => SINGLE_POLL,
        false => CLUSTER_POLL,
    }
}

/// What the partitions' snapshots of one poll add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// URLs queued or due (in flight included: a URL leaves the queue
    /// only once its links are admitted).
    pub queued: u64,
    /// URLs completed so far.
    pub completed: u64,
    /// Hosts active now.
    pub active_hosts: usize,
}

impl Totals {
    /// Nothing is queued, due or in flight on this node; `all_answered`
    /// is false if a partition did not answer (it failed and is being
    /// restarted: it may hold work).
    pub fn idle(&self, all_answered: bool) -> bool {
        all_answered && self.queued == 0
    }
}

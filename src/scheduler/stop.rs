//! The node's stop, as a list of steps and the decisions their outcomes
//! make. Sans-IO: the node actor (`actors/node/shutdown.rs`) walks the
//! steps in order and tells the plan how the drain went.
//!
//! Why this order:
//! 1. **Leave** the cluster (gossip says so): peers stop routing link
//!    batches here before this node stops taking them.
//! 2. **Drain** every held partition: no new request; requests in flight
//!    finish, or are abandoned at `shutdown_timeout` (their hosts' holds
//!    are in the stores).
//! 3. **Hand back** (with a checkpoint chain): each partition's final
//!    checkpoint, published as a clean release, so its next owner holds
//!    only what its hosts still owe.
//! 4. **Close the archive, sync the stores, close connections** at once:
//!    nothing is fetched, archived or completed any more, and each waits
//!    on the disk or the network, so the stop takes the longest of them.
//! 5. **Finish uploads** (with `[upload]`): the file just closed among
//!    them, up to `upload_wait`.
//! 6. **Close the stores**: the partitions' threads end, then their
//!    RocksDB instances close before the process exits.
//! 7. **End the run** (a single node whose drain finished): the run
//!    marker is cleared, so the next start is not treated as a crash.

/// One step of a node's stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopStep {
    /// Leave the cluster's gossip.
    Leave,
    /// Drain every held partition.
    Drain,
    /// Publish each partition's final checkpoint as a release.
    HandBack,
    /// Close the archive, sync (or mark ended) the stores, close the
    /// fetcher's connections, together.
    Close,
    /// Wait for pending uploads.
    FinishUploads,
    /// Stop the partitions' threads and close their stores.
    CloseStores,
    /// Clear the run marker.
    EndRun,
}

/// How the stores are left at [`StopStep::Close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreEnd {
    /// Marked as ended cleanly (which syncs): a cluster node whose drain
    /// finished; the next opener holds nothing for a crash.
    MarkEnded,
    /// Synced only: the next opener treats the last run as a crash.
    Sync,
}

/// A node's stop: its steps, and what the drain decides.
#[derive(Debug, Clone)]
pub struct StopPlan {
    cluster: bool,
    chain: bool,
    uploads: bool,
    /// Whether every partition drained in time, once known.
    drained: Option<bool>,
}

impl StopPlan {
    /// The stop of a node that is a cluster member (`cluster`), with a
    /// checkpoint chain (`chain`), uploading its WARC files (`uploads`).
    pub fn new(cluster: bool, chain: bool, uploads: bool) -> Self {
        StopPlan {
            cluster,
            chain,
            uploads,
            drained: None,
        }
    }

    /// The steps, in order (see the module doc for why).
    pub fn steps(&self) -> Vec<StopStep> {
        let mut steps = Vec::with_capacity(7);
        if self.cluster {
            steps.push(StopStep::Leave);
        }
        steps.push(StopStep::Drain);
        if self.chain {
            steps.push(StopStep::HandBack);
        }
        steps.push(StopStep::Close);
        if self.uploads {
            steps.push(StopStep::FinishUploads);
        }
        steps.push(StopStep::CloseStores);
        if !self.cluster {
            steps.push(StopStep::EndRun);
        }
        steps
    }

    /// The drain ended: `all`, every partition finished its requests.
    pub fn drained(&mut self, all: bool) {
        self.drained = Some(all);
    }

    /// How the stores are left: marked ended only by a cluster node whose
    /// drain finished (a request abandoned at the timeout may still be
    /// served, so its hosts must be held by the next opener).
    pub fn store_end(&self) -> StoreEnd {
        match self.cluster && self.drained == Some(true) {
            true => StoreEnd::MarkEnded,
            false => StoreEnd::Sync,
        }
    }

    /// Whether [`StopStep::EndRun`] clears the run marker: only if the
    /// drain finished and the archive closed (`archived`); otherwise the
    /// marker stays and the next run treats this stop as a crash, every
    /// host waiting its last delay again before its first request.
    pub fn ends_run(&self, archived: bool) -> bool {
        !self.cluster && self.drained == Some(true) && archived
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_node_leaves_first_and_hands_back_after_its_drain() {
        let plan = StopPlan::new(true, true, true);
        assert_eq!(
            plan.steps(),
            [
                StopStep::Leave,
                StopStep::Drain,
                StopStep::HandBack,
                StopStep::Close,
                StopStep::FinishUploads,
                StopStep::CloseStores,
            ]
        );
        let single = StopPlan::new(false, false, false);
        assert_eq!(
            single.steps(),
            [
                StopStep::Drain,
                StopStep::Close,
                StopStep::CloseStores,
                StopStep::EndRun
            ]
        );
    }

    #[test]
    fn only_a_finished_drain_ends_a_run_cleanly() {
        let mut cluster = StopPlan::new(true, false, false);
        assert_eq!(cluster.store_end(), StoreEnd::Sync, "drain not known");
        cluster.drained(false);
        assert_eq!(cluster.store_end(), StoreEnd::Sync);
        cluster.drained(true);
        assert_eq!(cluster.store_end(), StoreEnd::MarkEnded);
        assert!(!cluster.ends_run(true), "a cluster node keeps no marker");

        let mut single = StopPlan::new(false, false, true);
        single.drained(false);
        assert_eq!(single.store_end(), StoreEnd::Sync);
        assert!(!single.ends_run(true), "requests abandoned: a crash next");
        single.drained(true);
        assert_eq!(single.store_end(), StoreEnd::Sync, "one marker per node");
        assert!(single.ends_run(true));
        assert!(!single.ends_run(false), "the archive did not close");
    }
}

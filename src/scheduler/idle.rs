//! When a node has run out of work, from its partitions' snapshots.
//!
//! The node polls its partitions on a slow interval. A single node ends
//! its crawl itself once nothing is queued, due or in flight; a cluster
//! node only reports its own state and counter, and the cluster decides
//! (see `cluster::idle`). Near the end of a single node's crawl (a few
//! URLs left, and fewer than at the last poll) while someone waits for
//! it, the next poll comes sooner: the end is seen within milliseconds
//! instead of half a slow interval on average, for at most one extra poll
//! per URL completed at the very end.

/// URLs left (queued or in flight) below which the end is near.
pub const NEAR_IDLE_URLS: u64 = 64;

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

/// One poll's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Nothing is queued or in flight on this node (every partition
    /// answered).
    pub idle: bool,
    /// Poll again soon (the end of a single node's crawl is near).
    pub poll_soon: bool,
}

/// Successive polls of one node.
#[derive(Debug, Default)]
pub struct IdleWatch {
    last: Totals,
    /// A soon poll is pending.
    soon: bool,
}

impl IdleWatch {
    /// A poll of every partition gave `totals`; `all_answered` is false if
    /// a partition did not answer (it failed and is being restarted: it
    /// may hold work). `single`: the node decides the crawl's end itself;
    /// `awaited`: someone waits for that end.
    pub fn observe(
        &mut self,
        totals: Totals,
        all_answered: bool,
        single: bool,
        awaited: bool,
    ) -> Verdict {
        let before = std::mem::replace(&mut self.last, totals).queued;
        let idle = all_answered && totals.queued == 0;
        let closing = single && !idle && totals.queued <= NEAR_IDLE_URLS && totals.queued < before;
        let poll_soon = closing && awaited && !self.soon;
        self.soon |= poll_soon;
        Verdict { idle, poll_soon }
    }

    /// The soon poll asked for is running.
    pub fn polled_soon(&mut self) {
        self.soon = false;
    }
}

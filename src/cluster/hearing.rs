//! Whether this node hears the cluster it was told to join.
//!
//! Gossip that never forms is silent by nature: chitchat lists no peer, a
//! node alone computes an assignment that gives it every partition, and
//! nothing fails. A firewall that lets the bridge's TCP through and drops
//! gossip's UDP does exactly that. This machine turns the silence into a
//! state: a node given peers (`[cluster] peers`) that has had no live
//! peer for `patience` is **alone**, which the node says once in its log
//! (and again when a peer is heard), as the gauge `trawl_cluster_alone`,
//! in `/api/v1/cluster` and `/api/v1/status` (`trawl ctl status`).
//!
//! What the node does about it:
//! - it crawls what it holds: seeds are offered once it is alone even if
//!   it could not take every partition its lonely assignment gives it
//!   (with `state_url`, the chains of partitions another node holds keep
//!   that node's manifests coming, and this node's claim waits);
//! - without `state_url`, it never *creates* a partition's store before it
//!   has heard a peer in this life ([`Hearing::may_create_stores`]): a
//!   store on this disk is continued (restart in place), but a partition
//!   with no state here may be held by a peer it cannot hear, and nothing
//!   but gossip would stop both crawling it.
//!
//! A node without peers (the first node of a cluster) expects nobody and
//! is never alone. No clock is read here: `now` is passed in.

use std::time::{Duration, Instant};

/// How many gossip rounds of silence make a node alone: more than the
/// join's four rounds (a node started with its peers hears them by then)
/// and fewer than the failure detector's eight (an operator learns of a
/// firewall within seconds).
pub const ALONE_ROUNDS: u32 = 6;

/// This node's hearing of its peers.
#[derive(Debug, Clone)]
pub struct Hearing {
    expects_peers: bool,
    patience: Duration,
    /// Since when no peer has been live (start, or the last one heard).
    quiet_since: Instant,
    /// Live peers at the last observation.
    live_peers: usize,
    /// Some peer has been live in this life.
    heard: bool,
    /// Declared alone (and not heard since).
    alone: bool,
}

/// A change worth saying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HearingChange {
    /// No peer heard for `quiet`: the node is alone.
    Alone {
        /// How long no peer has been live.
        quiet: Duration,
        /// Whether a peer was ever heard in this life.
        heard_before: bool,
    },
    /// A peer is heard again after the node was alone.
    Together {
        /// Live peers now.
        live_peers: usize,
    },
}

/// What the operator sees of [`Hearing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, utoipa::ToSchema)]
pub struct HearingView {
    /// Peers gossip shows live now (this node not counted).
    pub live_peers: usize,
    /// Whether some peer has been heard since this node started.
    pub heard_any: bool,
    /// No peer heard for a few gossip rounds while peers are configured:
    /// gossip has not formed (or has broken) and this node crawls alone.
    pub alone: bool,
    /// Seconds since a peer was last live (0 while one is).
    pub quiet_seconds: u64,
}

impl Hearing {
    /// A node started at `now`; `expects_peers` if it was given peers to
    /// join through; alone after `patience` of silence.
    pub fn new(expects_peers: bool, patience: Duration, now: Instant) -> Hearing {
        Hearing {
            expects_peers,
            patience,
            quiet_since: now,
            live_peers: 0,
            heard: false,
            alone: false,
        }
    }

    /// The patience for a gossip interval: [`ALONE_ROUNDS`] of them.
    pub fn patience(gossip_interval: Duration) -> Duration {
        gossip_interval * ALONE_ROUNDS
    }

    /// Gossip shows `live_peers` live peers at `now`; the change to say,
    /// if any.
    pub fn observe(&mut self, now: Instant, live_peers: usize) -> Option<HearingChange> {
        self.live_peers = live_peers;
        if live_peers > 0 {
            self.heard = true;
            self.quiet_since = now;
            return std::mem::take(&mut self.alone)
                .then_some(HearingChange::Together { live_peers });
        }
        let quiet = now.saturating_duration_since(self.quiet_since);
        if self.expects_peers && !self.alone && quiet >= self.patience {
            self.alone = true;
            return Some(HearingChange::Alone {
                quiet,
                heard_before: self.heard,
            });
        }
        None
    }

    /// Whether the node is alone (see the module's doc).
    pub fn alone(&self) -> bool {
        self.alone
    }

    /// Whether, without `state_url`, the node may create a store for a
    /// partition with no state on its disk: it expects no peer, or has
    /// heard one in this life (and so knows, from gossip, who holds what).
    pub fn may_create_stores(&self) -> bool {
        !self.expects_peers || self.heard
    }

    /// What the operator sees, at `now`.
    pub fn view(&self, now: Instant) -> HearingView {
        let quiet = if self.live_peers > 0 {
            Duration::ZERO
        } else {
            now.saturating_duration_since(self.quiet_since)
        };
        HearingView {
            live_peers: self.live_peers,
            heard_any: self.heard,
            alone: self.alone,
            quiet_seconds: quiet.as_secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENCE: Duration = Duration::from_secs(3);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_node_that_hears_nobody_is_alone_after_its_patience_and_says_it_once() {
        let t0 = Instant::now();
        let mut h = Hearing::new(true, PATIENCE, t0);
        assert_eq!(h.observe(t0 + secs(1), 0), None);
        assert!(!h.alone());
        let said = h.observe(t0 + secs(3), 0);
        assert_eq!(
            said,
            Some(HearingChange::Alone {
                quiet: secs(3),
                heard_before: false
            })
        );
        assert!(h.alone());
        assert_eq!(h.observe(t0 + secs(10), 0), None, "said once");
        let view = h.view(t0 + secs(12));
        assert!(view.alone && !view.heard_any);
        assert_eq!(view.quiet_seconds, 12);
        assert!(!h.may_create_stores(), "never heard: no store created");
    }

    #[test]
    fn a_peer_heard_ends_the_solitude_and_allows_stores() {
        let t0 = Instant::now();
        let mut h = Hearing::new(true, PATIENCE, t0);
        h.observe(t0 + secs(5), 0);
        assert_eq!(
            h.observe(t0 + secs(6), 2),
            Some(HearingChange::Together { live_peers: 2 })
        );
        assert!(!h.alone());
        assert!(h.may_create_stores());
        assert_eq!(h.view(t0 + secs(7)).quiet_seconds, 0);
        // Losing every peer later: alone again after the patience, counted
        // from the last time one was live.
        assert_eq!(h.observe(t0 + secs(8), 0), None);
        assert_eq!(
            h.observe(t0 + secs(9), 0),
            Some(HearingChange::Alone {
                quiet: secs(3),
                heard_before: true
            })
        );
        assert!(h.may_create_stores(), "heard in this life: holders known");
    }

    #[test]
    fn a_node_given_no_peers_expects_none_and_is_never_alone() {
        let t0 = Instant::now();
        let mut h = Hearing::new(false, PATIENCE, t0);
        assert_eq!(h.observe(t0 + secs(60), 0), None);
        assert!(!h.alone());
        assert!(h.may_create_stores());
    }

    #[test]
    fn peers_heard_in_time_never_make_a_node_alone() {
        let t0 = Instant::now();
        let mut h = Hearing::new(true, PATIENCE, t0);
        for s in 1..30 {
            assert_eq!(h.observe(t0 + secs(s), 1), None);
        }
        assert!(!h.alone());
    }
}

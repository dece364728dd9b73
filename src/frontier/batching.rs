//! When a partition writes the completions its hosts send it.
//!
//! Every completed URL is a RocksDB write (its record, its host's
//! schedule, the links for other nodes' partitions, new digest entries);
//! written one by one on a fast web, the writes and their WAL appends are
//! a large share of a page's CPU. So completions arriving within
//! [`COMPLETE_AFTER`] of the first one, or [`COMPLETE_AT`] of them,
//! share one write batch, and each is acknowledged once that batch is
//! written. A crash before the write leaves them queued, to be fetched
//! again, like any request in flight: batching delays an acknowledgement
//! by a millisecond at most and never loses one.

use std::time::Duration;

/// Completions (and digest entries) written at once at most...
pub const COMPLETE_AT: usize = 256;
/// ...or after this wait since the first one.
pub const COMPLETE_AFTER: Duration = Duration::from_millis(1);

/// What to do after a completion joined the pending batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// Write the batch now: it is full.
    Now,
    /// Write it after this wait (arm a timer).
    After(Duration),
    /// A timer is armed already.
    Wait,
}

/// The pending batch's timer.
#[derive(Debug, Default)]
pub struct CompletionBatching {
    armed: bool,
}

impl CompletionBatching {
    /// The pending batch holds `pending` entries, one just added.
    pub fn added(&mut self, pending: usize) -> Flush {
        if pending >= COMPLETE_AT {
            return Flush::Now;
        }
        match std::mem::replace(&mut self.armed, true) {
            true => Flush::Wait,
            false => Flush::After(COMPLETE_AFTER),
        }
    }

    /// The pending batch was written (by its timer or because it was
    /// full): the next completion arms a timer again.
    pub fn written(&mut self) {
        self.armed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_waits_one_timer_or_until_it_is_full() {
        let mut b = CompletionBatching::default();
        assert_eq!(b.added(1), Flush::After(COMPLETE_AFTER));
        assert_eq!(b.added(2), Flush::Wait);
        assert_eq!(b.added(COMPLETE_AT), Flush::Now);
        b.written();
        assert_eq!(b.added(1), Flush::After(COMPLETE_AFTER));
        b.written();
        // Full at once: written now, and no timer armed.
        assert_eq!(b.added(COMPLETE_AT), Flush::Now);
        assert_eq!(b.added(1), Flush::After(COMPLETE_AFTER));
    }
}

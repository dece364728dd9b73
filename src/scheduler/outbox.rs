//! When and from where the outboxes are read, and which of their batches
//! go out: the delivery half of "nothing acknowledged is lost".
//!
//! A partition's outbox holds the link batches its pages found for
//! partitions other nodes own (and, on a cluster node, seeds), until the
//! owner acknowledges them. The node reads the outboxes on a short poll
//! and sends what is not already on its way. With a checkpoint chain an
//! acknowledgement waits for the owner's next checkpoint, so a pass must
//! step past the batches on their way (a checkpoint interval's worth)
//! rather than read and decode them again each time: each outbox keeps a
//! cursor, the key of the last batch read with every batch before it on
//! its way or acknowledged. A failed send, a batch no owner can take yet,
//! or a read error sends the next pass back to the start; so does every
//! [`FULL_PASS_EVERY`]th pass, which finds a batch a writer reserved a
//! lower key for but committed after a pass read past it.
//!
//! Keys are the outbox's own (`K`: the store's ten-byte keys on a node,
//! plain numbers in the simulator); they only need an order.

use std::collections::BTreeSet;

/// Every this many passes, each outbox is read from its start.
pub const FULL_PASS_EVERY: u64 = 50;
/// Pages of an outbox read per pass, at most.
pub const PAGES_PER_PASS: usize = 64;
/// Batches per page (and new sends per outbox per pass, at most).
pub const PAGE: usize = 64;

/// The outboxes' delivery schedule.
#[derive(Debug)]
pub struct OutboxSchedule<K> {
    passes: u64,
    /// Per outbox: where the next pass reads on from.
    after: Vec<Option<K>>,
    /// Batches on their way: (outbox, key).
    on_way: BTreeSet<(u16, K)>,
}

/// One pass over the outboxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Every outbox is read from its start.
    pub full: bool,
}

/// One outbox's reading within a pass: where to read, and whether the
/// next pass may start where this one stopped.
#[derive(Debug)]
pub struct Reading<K> {
    outbox: u16,
    after: Option<K>,
    pages: usize,
    fresh: usize,
    /// Every batch read so far is on its way.
    all_out: bool,
}

/// What to do with a batch read from an outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// Already on its way: step past it.
    OnItsWay,
    /// Send it ([`OutboxSchedule::sending`] once it is handed over).
    Send,
}

impl<K: Ord + Copy> OutboxSchedule<K> {
    /// A schedule for `outboxes` outboxes (one per partition).
    pub fn new(outboxes: usize) -> Self {
        Self {
            passes: 0,
            after: (0..outboxes).map(|_| None).collect(),
            on_way: BTreeSet::new(),
        }
    }

    /// Starts a pass.
    pub fn pass(&mut self) -> Pass {
        self.passes += 1;
        Pass {
            full: self.passes % FULL_PASS_EVERY == 0,
        }
    }

    /// Starts reading `outbox` in `pass`: from its cursor, or from the
    /// start on a full pass.
    pub fn read(&self, outbox: u16, pass: Pass) -> Reading<K> {
        let after = match pass.full {
            true => None,
            false => self.after.get(usize::from(outbox)).copied().flatten(),
        };
        Reading {
            outbox,
            after,
            pages: 0,
            fresh: 0,
            all_out: true,
        }
    }

    /// Batch `key` of the reading was read.
    pub fn saw(&self, reading: &mut Reading<K>, key: K) -> Batch {
        reading.after = Some(key);
        match self.on_way.contains(&(reading.outbox, key)) {
            true => Batch::OnItsWay,
            false => Batch::Send,
        }
    }

    /// Ends a reading: the next pass reads on from where it stopped if
    /// every batch it read is on its way, from the start otherwise.
    pub fn finish(&mut self, reading: Reading<K>) {
        if let Some(slot) = self.after.get_mut(usize::from(reading.outbox)) {
            *slot = reading.after.filter(|_| reading.all_out);
        }
    }

    /// Batch `key` of `outbox` was handed over for delivery.
    pub fn sending(&mut self, outbox: u16, key: K) {
        self.on_way.insert((outbox, key));
    }

    /// Batch `key` of `outbox` was answered: `delivered` (acknowledged,
    /// and deleted from the outbox) or not (sent again, from the start of
    /// the next pass).
    pub fn answered(&mut self, outbox: u16, key: K, delivered: bool) {
        self.on_way.remove(&(outbox, key));
        if !delivered {
            self.restart(outbox);
        }
    }

    /// The next pass reads `outbox` from its start (its partition was
    /// opened or closed here).
    pub fn restart(&mut self, outbox: u16) {
        if let Some(slot) = self.after.get_mut(usize::from(outbox)) {
            *slot = None;
        }
    }

    /// Nothing is on its way.
    pub fn quiet(&self) -> bool {
        self.on_way.is_empty()
    }

    /// Batches on their way.
    pub fn on_way(&self) -> usize {
        self.on_way.len()
    }
}

impl<K> Reading<K> {
    /// Where to read from: after this key, or from the start.
    pub fn after(&self) -> Option<&K> {
        self.after.as_ref()
    }

    /// A batch read could not be handed over (its partition has no
    /// owner yet), or the outbox could not be read: the next pass starts
    /// from the beginning.
    pub fn held_back(&mut self) {
        self.all_out = false;
    }

    /// A batch was handed over for delivery.
    pub fn sent(&mut self) {
        self.fresh += 1;
    }

    /// A page was read, `full` if it held [`PAGE`] batches: whether to
    /// read another (the outbox may hold more, within the pass's budget
    /// of pages and of new sends).
    pub fn more(&mut self, full: bool) -> bool {
        self.pages += 1;
        full && self.pages < PAGES_PER_PASS && self.fresh < PAGE
    }
}

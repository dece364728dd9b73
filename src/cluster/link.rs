//! One node's link to one peer, as a state machine with no I/O: the
//! bookkeeping the bridge (`actors/bridge.rs`) carries out over TCP.
//!
//! - **Numbering.** Every batch (or digest question) is numbered once,
//!   from a counter that runs across connections, so a number is unique on
//!   every connection and an acknowledgement always names one batch.
//! - **The window.** At most `window` batches are unacknowledged; later
//!   ones wait, in order, their senders awaiting the reply (the queue holds
//!   only what its senders wait for, so it is as bounded as they are;
//!   nothing is dropped).
//! - **Resending.** When a connection comes up, every unacknowledged batch
//!   is sent on it (again): admission is idempotent, so a duplicate is
//!   harmless, and a batch is never given up on while the peer is a
//!   member. TCP loses nothing on a live connection, so nothing is resent
//!   on a timer.
//! - **Answers.** An acknowledgement or a refusal ends a batch (its reply
//!   handle is given back to be resolved) and makes room in the window. One
//!   that names no unacknowledged batch (a duplicate's second answer) is
//!   ignored.
//! - **Redial backoff.** Redials back off exponentially from `base` to
//!   `max`; the backoff starts over once a connection made progress (a
//!   batch answered either way) or lasted `max`, so a peer that keeps
//!   refusing is not hammered and a healthy one is redialled at once.
//! - **Leaving.** A peer that leaves the cluster gives back every reply
//!   handle, to be failed: their senders route the batches again.
//! - **Answering the peer** ([`answer`]). A batch admitted is acked and a
//!   question answered; a batch for a partition this node does not hold
//!   is refused with a typed `Nack` (the sender routes it again by its
//!   next view of the cluster); any other failure gets no answer at all:
//!   the connection closes, and the sender resends after its backoff
//!   (re-routing a batch the owner merely failed to store would send it
//!   around the cluster forever). A question that fails here other than
//!   "not held" is answered `Unclaimed` instead (the asker stores the
//!   payload in full), never by closing.
//!
//! The reply handle `R` is whatever the driver resolves (a oneshot sender
//! in the bridge, a batch id in the simulator); the frame is opaque bytes.
//! Time is passed in, never read.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::wire::{Message as WireMessage, WireReply};

/// A batch (or question) on its way to the peer.
#[derive(Debug)]
struct Pending<R> {
    seq: u64,
    /// The encoded message, sent again as is after a reconnect.
    frame: Bytes,
    reply: R,
    /// Sent at least once (a later send is a resend).
    sent: bool,
}

/// A frame to write on the connection now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// The batch's number.
    pub seq: u64,
    /// The frame.
    pub frame: Bytes,
    /// Sent before, on an earlier connection.
    pub resent: bool,
}

/// How a connection ended, as the link needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    /// The connection's id.
    pub conn: u64,
    /// A batch was answered on it, either way.
    pub progress: bool,
}

/// Exponential backoff between `base` and `max` (the link's redials; the
/// OwnershipActor's retries of a take that failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff that starts at `base` and doubles up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max: max.max(base),
            next: base,
        }
    }

    /// The delay before the next redial; doubles the one after.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = delay.saturating_mul(2).min(self.max);
        delay
    }

    /// Starts over from `base`.
    pub fn reset(&mut self) {
        self.next = self.base;
    }

    /// What [`Self::next_delay`] would give now.
    pub fn peek(&self) -> Duration {
        self.next
    }
}

/// The link to one peer.
#[derive(Debug)]
pub struct PeerLink<R> {
    window: usize,
    /// The number of the next batch.
    next_seq: u64,
    /// Batches in the window, by number.
    unacked: BTreeMap<u64, Pending<R>>,
    /// Batches waiting for room in the window, in order.
    waiting: VecDeque<Pending<R>>,
    /// The connection batches go out on, and since when.
    conn: Option<(u64, Instant)>,
    backoff: Backoff,
}

impl<R> PeerLink<R> {
    /// A link with no connection; `window` is at least 1.
    pub fn new(window: usize, backoff: Backoff) -> Self {
        PeerLink {
            window: window.max(1),
            next_seq: 1,
            unacked: BTreeMap::new(),
            waiting: VecDeque::new(),
            conn: None,
            backoff,
        }
    }

    /// Numbers a batch, `frame` making its encoding from its number, and
    /// queues it; returns what to write now (nothing while the window is
    /// full or no connection is up). An encoding error takes no number.
    pub fn enqueue<E>(
        &mut self,
        frame: impl FnOnce(u64) -> Result<Bytes, E>,
        reply: R,
    ) -> Result<Vec<Transmit>, E> {
        let seq = self.next_seq;
        let frame = frame(seq)?;
        self.next_seq += 1;
        self.waiting.push_back(Pending {
            seq,
            frame,
            reply,
            sent: false,
        });
        Ok(self.fill_window())
    }

    /// Connection `conn` came up at `now` (a newer one replaces an older):
    /// every unacknowledged batch is to be written on it. Returns the
    /// replaced connection, if any, and what to write.
    pub fn connected(&mut self, conn: u64, now: Instant) -> (Option<u64>, Vec<Transmit>) {
        let old = self.conn.replace((conn, now)).map(|(c, _)| c);
        let out = self.unacked.values_mut().map(transmit).collect();
        (old.filter(|c| *c != conn), out)
    }

    /// A connection ended at `now`. Returns whether it was the one batches
    /// went out on. Its progress, or its having lasted the longest
    /// backoff, starts the backoff over.
    pub fn closed(&mut self, closed: Closed, now: Instant) -> bool {
        let Some((conn, since)) = self.conn else {
            return false;
        };
        if conn != closed.conn {
            return false;
        }
        self.conn = None;
        if closed.progress || now.saturating_duration_since(since) >= self.backoff.max {
            self.backoff.reset();
        }
        true
    }

    /// Batch `seq` was acknowledged (or answered): its reply handle, and
    /// what the freed room lets out. `None` for a number not awaited.
    pub fn acked(&mut self, seq: u64) -> Option<(R, Vec<Transmit>)> {
        let reply = self.answered(seq)?;
        // Progress: a later failure redials from the start.
        self.backoff.reset();
        Some((reply, self.fill_window()))
    }

    /// Batch `seq` was refused (the peer does not hold its partition): its
    /// reply handle, to be failed so the sender routes it again, and what
    /// the freed room lets out.
    pub fn refused(&mut self, seq: u64) -> Option<(R, Vec<Transmit>)> {
        let reply = self.answered(seq)?;
        Some((reply, self.fill_window()))
    }

    /// The peer left: every reply handle, unacknowledged first then
    /// waiting, in number order, to be failed. The link is empty after.
    pub fn leave(&mut self) -> Vec<R> {
        self.conn = None;
        let unacked = std::mem::take(&mut self.unacked).into_values();
        unacked
            .chain(self.waiting.drain(..))
            .map(|p| p.reply)
            .collect()
    }

    /// The delay before the next redial (doubling the one after).
    pub fn redial_delay(&mut self) -> Duration {
        self.backoff.next_delay()
    }

    /// The peer's address changed: redials start over from `base`.
    pub fn reset_backoff(&mut self) {
        self.backoff.reset();
    }

    /// Whether a connection is up.
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Batches sent and not yet answered.
    pub fn unacked(&self) -> usize {
        self.unacked.len()
    }

    /// Batches waiting for room in the window.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn answered(&mut self, seq: u64) -> Option<R> {
        self.unacked.remove(&seq).map(|p| p.reply)
    }

    /// Moves waiting batches into the window while it has room; those to
    /// write now if a connection is up.
    fn fill_window(&mut self) -> Vec<Transmit> {
        let mut out = Vec::new();
        while self.unacked.len() < self.window {
            let Some(mut pending) = self.waiting.pop_front() else {
                break;
            };
            if self.conn.is_some() {
                out.push(transmit(&mut pending));
            }
            self.unacked.insert(pending.seq, pending);
        }
        out
    }
}

fn transmit<R>(pending: &mut Pending<R>) -> Transmit {
    let resent = pending.sent;
    pending.sent = true;
    Transmit {
        seq: pending.seq,
        frame: pending.frame.clone(),
        resent,
    }
}

/// What became, on this node, of a batch or question a peer sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// A batch was admitted.
    Admitted,
    /// A question was answered.
    Answered(WireReply),
    /// This node does not hold the partition (the reason, for the peer's
    /// log).
    NotHeld(String),
    /// It failed otherwise (the reason).
    Failed(String),
}

impl Handled {
    /// A question's outcome: a failure other than "not held" becomes the
    /// answer `Unclaimed` (see the module's docs).
    pub fn question(self) -> Handled {
        match self {
            Handled::Failed(_) => Handled::Answered(WireReply::Unclaimed),
            other => other,
        }
    }
}

/// The frame that answers request `seq` of the peer, as the module's
/// docs say; `Err(reason)`: none, the connection closes.
pub fn answer(seq: u64, handled: Handled) -> Result<WireMessage, String> {
    match handled {
        Handled::Admitted => Ok(WireMessage::Ack { seq }),
        Handled::Answered(reply) => Ok(WireMessage::Answer { seq, reply }),
        Handled::NotHeld(reason) => Ok(WireMessage::Nack { seq, reason }),
        Handled::Failed(reason) => Err(reason),
    }
}

#[cfg(test)]
mod tests;

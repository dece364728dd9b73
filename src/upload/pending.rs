//! The uploader's queue: what waits, what is in flight, when a failed
//! piece may be tried again. Sans-IO: the time is passed in.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::warc::Sealed;

/// One piece of upload work.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Work {
    /// A closed file, whole, under its own name.
    Whole(String),
    /// Bytes `from..to` of a file still being written, made durable by a
    /// checkpoint's seal, under `<file>.segments/<from>-<to>`
    /// ([`super::join::segment_key`]). A segment's range is fixed once
    /// queued (a retry puts the same object), and each starts where the
    /// file's previous one ended, so a file's segments tile it from 0.
    Segment {
        /// The file's final name.
        file: String,
        /// First byte.
        from: u64,
        /// One past the last byte (a record's end).
        to: u64,
    },
}

impl Work {
    /// The file this work is about.
    pub fn file(&self) -> &str {
        match self {
            Work::Whole(file) | Work::Segment { file, .. } => file,
        }
    }
}

/// Work waiting to be uploaded, and work being uploaded: oldest name
/// first, a failed piece after its backoff.
///
/// A file's whole upload supersedes its segments: once it is queued, the
/// segments still waiting are dropped and later seals of it add none
/// (its records are covered by the whole). It does not start while one
/// of its segments is in flight, so the segments it deletes once it is
/// verified are all that will ever be put.
#[derive(Debug)]
pub struct Pending {
    /// Work waiting, with the time a failed piece may be tried again.
    waiting: BTreeMap<Work, Option<Instant>>,
    in_flight: BTreeSet<Work>,
    /// Failures of work not yet done (kept while it is in flight).
    failures: BTreeMap<Work, u32>,
    /// Open files: where their next segment starts.
    segmented: BTreeMap<String, u64>,
    /// Files queued whole this run (waiting, in flight or done).
    wholes: BTreeSet<String>,
    retry_delay: Duration,
    max_retry_delay: Duration,
}

impl Pending {
    /// An empty queue; a failed piece waits `retry_delay`, doubled per
    /// failure up to `max_retry_delay`.
    pub fn new(retry_delay: Duration, max_retry_delay: Duration) -> Self {
        Pending {
            waiting: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            failures: BTreeMap::new(),
            segmented: BTreeMap::new(),
            wholes: BTreeSet::new(),
            retry_delay,
            max_retry_delay,
        }
    }

    /// Queues closed `file` whole, unless it is queued or being uploaded
    /// already; its segments still waiting are dropped.
    pub fn add(&mut self, file: &str) {
        self.segmented.remove(file);
        self.wholes.insert(file.to_owned());
        let superseded: Vec<Work> = self
            .waiting
            .keys()
            .filter(|w| matches!(w, Work::Segment { .. }) && w.file() == file)
            .cloned()
            .collect();
        for work in superseded {
            self.waiting.remove(&work);
            self.failures.remove(&work);
        }
        let whole = Work::Whole(file.to_owned());
        if !self.in_flight.contains(&whole) {
            self.waiting.entry(whole).or_insert(None);
        }
    }

    /// Queues the bytes of the open file a seal made durable that no
    /// segment holds yet; nothing if the file is queued whole (its whole
    /// upload covers them) or no byte is new. The segment queued, if any.
    pub fn add_segment(&mut self, sealed: &Sealed) -> Option<Work> {
        if self.wholes.contains(&sealed.file) {
            return None;
        }
        let from = self.segmented.get(&sealed.file).copied().unwrap_or(0);
        if sealed.to <= from {
            return None;
        }
        self.segmented.insert(sealed.file.clone(), sealed.to);
        let work = Work::Segment {
            file: sealed.file.clone(),
            from,
            to: sealed.to,
        };
        self.waiting.insert(work.clone(), None);
        Some(work)
    }

    /// Whether `work` may start now: a whole upload waits for its file's
    /// segments in flight.
    fn unblocked(&self, work: &Work) -> bool {
        match work {
            Work::Whole(file) => !self
                .in_flight
                .iter()
                .any(|w| matches!(w, Work::Segment { .. }) && w.file() == file),
            Work::Segment { .. } => true,
        }
    }

    /// The oldest work ready at `now`, moved to the work in flight.
    pub fn next_ready(&mut self, now: Instant) -> Option<Work> {
        let work = self
            .waiting
            .iter()
            .find(|(w, t)| t.is_none_or(|t| t <= now) && self.unblocked(w))
            .map(|(w, _)| w.clone())?;
        self.waiting.remove(&work);
        self.in_flight.insert(work.clone());
        Some(work)
    }

    /// `work` is uploaded (or moot): forgotten.
    pub fn done(&mut self, work: &Work) {
        self.in_flight.remove(work);
        self.failures.remove(work);
    }

    /// `work` failed at `now`: it waits, and the wait is returned. A
    /// segment whose file was queued whole meanwhile is dropped (zero).
    pub fn failed(&mut self, work: &Work, now: Instant) -> Duration {
        self.in_flight.remove(work);
        if matches!(work, Work::Segment { .. }) && self.wholes.contains(work.file()) {
            self.failures.remove(work);
            return Duration::ZERO;
        }
        let failures = self.failures.entry(work.clone()).or_insert(0);
        *failures += 1;
        let wait = self
            .retry_delay
            .saturating_mul(1 << (*failures - 1).min(20))
            .min(self.max_retry_delay);
        self.waiting.insert(work.clone(), Some(now + wait));
        wait
    }

    /// How long from `now` until the next waiting work is ready (zero if
    /// some is), `None` if none waits but what waits for a segment in
    /// flight (which ends with that segment, not with time).
    pub fn next_wake(&self, now: Instant) -> Option<Duration> {
        self.waiting
            .iter()
            .filter(|(w, _)| self.unblocked(w))
            .map(|(_, t)| t.map_or(Duration::ZERO, |t| t.saturating_duration_since(now)))
            .min()
    }

    /// Work being uploaded.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Work waiting or in flight.
    pub fn len(&self) -> usize {
        self.waiting.len() + self.in_flight.len()
    }

    /// Nothing waits and nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.in_flight.is_empty()
    }

    /// Failures of `work` so far (0 once done).
    pub fn failures(&self, work: &Work) -> u32 {
        self.failures.get(work).copied().unwrap_or(0)
    }
}

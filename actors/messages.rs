//! The node's protocol: every message that crosses from one actor to another.
//!
//! Read top to bottom, this file is the way of one URL:
//!
//! ```text
//! Discover ─▶ SeenSet ─AdmitBatch─▶ PartitionActor ─Wake─▶ HostActor
//! HostActor ─Fetch─▶ FetcherPool ─(FetchResponse)─▶ HostActor
//! HostActor ─Parse─▶ ParserPool ; ─Archive─▶ Archive ; ─Discover─▶ SeenSet
//! HostActor ─Complete─▶ PartitionActor        (the URL is done, durably)
//! ```
//!
//! Actors hold `Recipient`s of these messages, never each other's types;
//! `node.rs` wires them. Messages private to one actor (timers, ticks) live
//! in that actor's file.

use actix::prelude::*;
use bytes::Bytes;
use serde::Serialize;
use url::Url;

use crate::events::EventKind;
use crate::fetch::{FetchError, FetchResponse};
use crate::frontier::{EntryKind, Priority, LEVELS};
use crate::parse::ParsedPage;
use crate::politeness::Schedule;
use crate::robots::RobotsSummary;
use crate::sitemap::{ParsedSitemap, SitemapLimits};
use crate::store::{AdmitEntry, Completion, HostState};
use crate::url::Fingerprint;
use crate::warc::WarcRef;

/// Why an actor could not do what a message asked. Carried as text across
/// actors: the typed source error is logged where it happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The partition store failed.
    #[error("store: {0}")]
    Store(String),
    /// The archive (WARC or events) failed.
    #[error("archive: {0}")]
    Archive(String),
    /// The receiving actor is gone.
    #[error("mailbox: {0}")]
    Mailbox(String),
}

impl From<MailboxError> for Failure {
    fn from(e: MailboxError) -> Self {
        Failure::Mailbox(e.to_string())
    }
}

// ---------------------------------------------------------------- SeenSet

/// A URL found somewhere (seed, link, redirect, sitemap) and offered to
/// the crawl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The URL as found (absolute).
    pub url: Url,
    /// Hops from the seed (pages) or index depth (sitemaps).
    pub depth: u32,
    /// Which of its host's queues it joins.
    pub priority: Priority,
    /// Page or sitemap.
    pub kind: EntryKind,
    /// Registrable domain of the page it was found on (links and
    /// redirects), for domain budgets.
    pub referrer: Option<String>,
}

impl Candidate {
    /// A page found as a link on `from`.
    pub fn link(url: Url, depth: u32, from: &Url) -> Self {
        Candidate {
            url,
            depth,
            priority: Priority::NORMAL,
            kind: EntryKind::Page,
            referrer: Some(crate::url::registrable_domain(crate::url::host_key(from)).to_owned()),
        }
    }
}

/// Offers candidates to the crawl. Replies once every admissible candidate
/// is durably enqueued (or known as seen), so a page is completed only after
/// its links are safe.
#[derive(Debug, Message)]
#[rtype(result = "Result<Admission, Failure>")]
pub struct Discover {
    /// The candidates.
    pub candidates: Vec<Candidate>,
}

/// What became of a [`Discover`]'s candidates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Admission {
    /// Newly queued.
    pub admitted: usize,
    /// Seen before.
    pub seen: usize,
    /// Rejected by normalisation or filters.
    pub filtered: usize,
}

// ---------------------------------------------------------- PartitionActor

/// Admits a batch of normalised URLs of one partition: the exact seen check
/// and the durable enqueue in one write. Replies with the fingerprints that
/// were new, sorted.
#[derive(Debug, Message)]
#[rtype(result = "Result<Vec<Fingerprint>, Failure>")]
pub struct AdmitBatch {
    /// Entries, all of this partition.
    pub entries: Vec<AdmitEntry>,
}

/// A queue entry is finished: record its outcome and dequeue it, with the
/// host's politeness schedule in the same write (so a restart, even after a
/// crash, does not burst).
#[derive(Debug, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct Complete {
    /// The host whose queue held it.
    pub host: String,
    /// What to record.
    pub completion: Completion,
    /// The host's schedule after the fetch.
    pub schedule: Schedule,
}

/// A host has nothing to do. The partition passivates it (saving `state`)
/// unless work arrived after `generation`; the reply says which.
#[derive(Debug, Message)]
#[rtype(result = "bool")]
pub struct HostIdle {
    /// The host.
    pub host: String,
    /// The last [`Wake`] generation the host saw.
    pub generation: u64,
    /// State to persist.
    pub state: HostState,
}

/// Persists a host's state now (after a robots.txt fetch).
#[derive(Debug, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct SaveHostState {
    /// The host.
    pub host: String,
    /// Its state.
    pub state: HostState,
}

/// Stop dispatching and wait until nothing is in flight or in processing;
/// the partition then syncs its store.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Drain;

/// Tells a host to stop dispatching; answers with the host's state once
/// nothing is in flight or in processing, for the partition to persist (so
/// a restart keeps the politeness schedule).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "HostState")]
pub struct DrainHost;

/// Asks a partition for its [`PartitionSnapshot`].
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "PartitionSnapshot")]
pub struct GetPartitionSnapshot;

/// Observable state of a partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PartitionSnapshot {
    /// Partition id.
    pub id: u16,
    /// URLs queued and not completed.
    pub queued: u64,
    /// URLs completed since start.
    pub completed: u64,
    /// Active host actors.
    pub active_hosts: usize,
    /// Draining for shutdown.
    pub draining: bool,
}

// --------------------------------------------------------------- HostActor

/// New work was queued for the host.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Wake {
    /// Increases with every wake of this host.
    pub generation: u64,
    /// The priority levels that got entries, a bit per level, so the host
    /// re-reads only those queues.
    pub levels: u8,
}

/// Asks a host for its [`HostSnapshot`].
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "HostSnapshot")]
pub struct GetHostSnapshot;

/// Observable state of a host actor.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostSnapshot {
    /// The host.
    pub host: String,
    /// Whether an actor is active for it (else the state is the stored one).
    pub active: bool,
    /// robots.txt per origin.
    pub robots: Vec<RobotsSummary>,
    /// Origins whose robots.txt is currently unreachable.
    pub robots_failing: Vec<String>,
    /// Politeness state.
    pub politeness: PolitenessSnapshot,
    /// Durable queue sizes by priority level (0 = seeds … 3 = low).
    pub queued_by_priority: [u64; LEVELS],
    /// Entries loaded in memory and not yet dispatched.
    pub head: usize,
    /// Fetched entries being parsed, archived and admitted.
    pub processing: usize,
}

/// The politeness part of a [`HostSnapshot`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PolitenessSnapshot {
    /// Requests in flight.
    pub in_flight: u32,
    /// Milliseconds until the next request may start (0 if due).
    pub next_allowed_in_ms: u64,
    /// Consecutive failures (backoff grows with them).
    pub failures: u32,
    /// Parked after repeated failures.
    pub parked: bool,
    /// Crawl-delay in force, in milliseconds.
    pub crawl_delay_ms: Option<u64>,
}

/// Asks a partition about one host, active or not.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<HostSnapshot, Failure>")]
pub struct GetHost {
    /// The host name.
    pub host: String,
}

// ------------------------------------------------------------- FetcherPool

/// Fetches one URL.
#[derive(Debug, Message)]
#[rtype(result = "Result<FetchResponse, FetchError>")]
pub struct Fetch {
    /// The URL.
    pub url: Url,
}

// -------------------------------------------------------------- ParserPool

/// Reads a sitemap body.
#[derive(Debug, Message)]
#[rtype(result = "ParsedSitemap")]
pub struct ParseSitemap {
    /// The body as fetched (gzip or not).
    pub body: Bytes,
    /// Per-file limits.
    pub limits: SitemapLimits,
}

/// Parses an HTML body.
#[derive(Debug, Message)]
#[rtype(result = "ParsedPage")]
pub struct Parse {
    /// The page's URL (base for relative links).
    pub url: Url,
    /// The body bytes, in whatever encoding they came.
    pub body: Bytes,
    /// The Content-Type header (its charset decides the decoding).
    pub content_type: Option<String>,
    /// The Content-Encoding header (gzip, br, ... undone before parsing).
    pub content_encoding: Option<String>,
}

// ----------------------------------------------------------------- Archive

/// Archives one response (WARC records and its output event). Replies
/// with where it was stored, or `None` when dedup chose not to store it.
#[derive(Debug, Message)]
#[rtype(result = "Result<Option<WarcRef>, Failure>")]
pub struct Archive {
    /// The URL fetched.
    pub url: Url,
    /// The response.
    pub response: FetchResponse,
    /// Page, robots.txt or sitemap.
    pub kind: EventKind,
    /// Hops from the seed.
    pub depth: u32,
    /// `rel=canonical`, if the page has one.
    pub canonical: Option<Url>,
    /// Meta robots directives.
    pub robots_meta: Option<String>,
    /// Links found.
    pub links_out: usize,
    /// Simhash of the page's visible text, if it is an HTML page.
    pub simhash: Option<u64>,
}

/// Flushes and closes the current WARC file and syncs the events file.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<ArchiveSnapshot, Failure>")]
pub struct CloseArchive;

/// Asks the archive for its [`ArchiveSnapshot`].
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "ArchiveSnapshot")]
pub struct GetArchiveSnapshot;

/// Observable state of the archive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ArchiveSnapshot {
    /// Records written this run.
    pub records: u64,
    /// Compressed bytes written this run.
    pub bytes: u64,
    /// Events written this run.
    pub events: u64,
    /// WARC files closed this run.
    pub files_closed: usize,
}

//! The node's protocol: every message that crosses from one actor to another.
//!
//! Read top to bottom, this file is the way of one URL:
//!
//! ```text
//! Discover ─▶ SeenSet ─AdmitBatch─▶ PartitionActor ─Wake─▶ HostActor
//! HostActor ─Fetch─▶ FetcherPool ─(FetchResponse)─▶ HostActor
//! HostActor ─Parse─▶ ParserPool ; ─DigestQuery─▶ DigestRouter ─▶ (the digest's PartitionActor,
//!                                                                  or the Node for a remote one)
//! HostActor ─Archive─▶ Archive ; ─DigestQuery (register)─▶ … ; ─Discover─▶ SeenSet
//! HostActor ─Complete─▶ PartitionActor        (the URL is done, durably)
//! ```
//!
//! Between nodes of a cluster, the Bridge carries batches of URLs for
//! partitions another node owns:
//!
//! ```text
//! (outbox) ─SendBatch─▶ Bridge ═Admit/Ack (TCP)═ Bridge ─RemoteAdmit─▶ (owner's admission)
//! DigestRouter ─▶ Node ─SendDigest─▶ Bridge ═Digest/Found (TCP)═ Bridge ─RemoteDigest─▶ (owner's partition)
//! (membership) ─SetPeers─▶ Bridge
//! ```
//!
//! Actors hold `Recipient`s of these messages, never each other's types;
//! `node.rs` wires them. Messages private to one actor (timers, ticks) live
//! in that actor's file.

use actix::prelude::*;
use bytes::Bytes;
use serde::Serialize;
use url::Url;

use crate::cluster::wire::WireEntry;
use crate::fetch::{FetchError, FetchResponse};
use crate::parse::ParsedPage;
use crate::politeness::Schedule;
use crate::sitemap::{ParsedSitemap, SitemapLimits};
use crate::store::{AdmitEntry, Completion, HostState};
use crate::url::Fingerprint;

pub use crate::error::Failure;

impl From<MailboxError> for Failure {
    fn from(e: MailboxError) -> Self {
        Failure::Mailbox(e.to_string())
    }
}

// ----------------------------------------------------------------- Wiring

/// The downstream recipients every host of the node shares: the pipeline
/// after the host. `node.rs` builds it; partitions hand it to their hosts.
#[derive(Clone)]
pub struct PipelineLinks {
    /// FetcherPool.
    pub fetch: Recipient<Fetch>,
    /// ParserPool: HTML.
    pub parse: Recipient<Parse>,
    /// ParserPool: sitemaps.
    pub parse_sitemap: Recipient<ParseSitemap>,
    /// Archive.
    pub archive: Recipient<Archive>,
    /// Archive: `removed` events.
    pub removed: Recipient<ArchiveRemoval>,
    /// SeenSet.
    pub discover: Recipient<Discover>,
    /// ParserPool: payload digests of bodies not parsed.
    pub digest: Recipient<DigestPayload>,
    /// Node: questions for a digest's partition (exact dedup).
    pub digests: Recipient<DigestQuery>,
}

/// Where the Bridge hands what other nodes send: URLs for partitions this
/// node holds, and questions for their digests.
#[derive(Clone)]
pub struct BridgeInbound {
    /// Admission of URLs.
    pub admit: Recipient<RemoteAdmit>,
    /// Digest questions.
    pub digest: Recipient<RemoteDigest>,
}

/// Where a host sends its work: the pipeline, and its own partition.
#[derive(Clone)]
pub struct HostLinks {
    /// The node's pipeline.
    pub pipeline: PipelineLinks,
    /// Its partition's id: the finder of the links its pages offer.
    pub partition: u16,
    /// Its partition: completions.
    pub complete: Recipient<Complete>,
    /// Its partition: links for partitions held elsewhere that complete
    /// no entry (the sitemaps robots.txt names).
    pub forward: Recipient<Forward>,
    /// Its partition: idle and passivation reports.
    pub idle: Recipient<HostIdle>,
    /// Its partition: host state saves.
    pub save: Recipient<SaveHostState>,
    /// Its partition: a request's hold, written before it leaves.
    pub hold: Recipient<HoldHost>,
    /// The end of the node's lease over its partition (with a checkpoint
    /// chain): no request starts after it.
    pub lease: Option<std::sync::Arc<crate::cluster::gate::LeaseGate>>,
}

// ------------------------------------------------------------- Supervision

/// Stops a drained partition this node hands to another (its hosts stop
/// with it, and its store closes once they are gone, freeing its lock).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Retire;

/// Stops the receiving partition or host actor as a failure would (tests
/// and fault drills): its supervisor must bring it back from the store.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Crash;

/// Stops the actor of `host`, if it is active, as a failure would (tests
/// and fault drills): its partition must bring it back from the store.
#[derive(Debug, Clone, Message)]
#[rtype(result = "bool")]
pub struct CrashHost {
    /// The host name.
    pub host: String,
}

// ---------------------------------------------------------------- SeenSet

pub use crate::frontier::Candidate;

/// Offers candidates to the crawl. Replies once every admissible candidate
/// of a partition this node holds is durably enqueued (or known as seen),
/// and hands back those of partitions other nodes own, to be written to the
/// outbox with the page's completion: so a page is completed only after its
/// links are safe. With a checkpoint chain, "durably" means published, and
/// partitions are published one by one: so there the candidates of every
/// partition but `from` come back for the outbox too, held here or not.
#[derive(Debug, Message)]
#[rtype(result = "Result<Discovered, Failure>")]
pub struct Discover {
    /// The candidates.
    pub candidates: Vec<Candidate>,
    /// The partition whose page (or robots.txt) found them, whose
    /// completion carries the outbox; `None` for seeds.
    pub from: Option<u16>,
    /// Answer what became of each candidate ([`Discovered::outcomes`]),
    /// not only the counts (seeds from an operator; a page's links need
    /// only the counts).
    pub detail: bool,
}

/// What became of one candidate of a [`Discover`] with `detail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlOutcome {
    /// Newly queued.
    Admitted,
    /// Seen before.
    Seen,
    /// Not admitted, for this reason (the `trawl_urls_dropped_total`
    /// label: `invalid`, `depth`, a scope or trap rule...).
    Filtered(&'static str),
    /// Its partition is another node's: sent there (admitted or seen
    /// there).
    Forwarded,
}

/// The answer to a [`Discover`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// The counts.
    pub admission: Admission,
    /// Each candidate's outcome, in order (only if asked: `detail`).
    pub outcomes: Vec<UrlOutcome>,
    /// Candidates of partitions this node does not hold (with a
    /// checkpoint chain: of every partition but the finder's), by
    /// partition, for the finder's outbox (on a single node: none).
    pub remote: Vec<crate::store::OutboxBatch>,
    /// The partitions held here that candidates went to straight: their
    /// stores hold them now, a checkpoint chain not yet (seeds wait for
    /// that before they are answered).
    pub straight: Vec<u16>,
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
    /// For partitions other nodes own (handed back in [`Discovered`]).
    pub forwarded: usize,
}

// ---------------------------------------------------------- PartitionActor

/// Admits a batch of normalised URLs of one partition: the exact seen check
/// and the durable enqueue in one write. Replies what became of them.
#[derive(Debug, Message)]
#[rtype(result = "Result<AdmitReply, Failure>")]
pub struct AdmitBatch {
    /// Entries, all of this partition.
    pub entries: Vec<AdmitEntry>,
}

/// What a partition did with an [`AdmitBatch`]: the entries it did not
/// name here were seen before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmitReply {
    /// The fingerprints that were new, sorted.
    pub admitted: Vec<Fingerprint>,
    /// Seen ones the offer brought back into the crawl (a new seed or a
    /// reseed of a removed URL, a newer `lastmod`), sorted.
    pub brought_back: Vec<Fingerprint>,
    /// Those a budget refused, with the budget's label (`budget_host`,
    /// `budget_domain`), sorted by fingerprint.
    pub refused: Vec<(Fingerprint, &'static str)>,
}

/// [`AdmitBatch`] for a link batch another partition sent: replies with
/// the write watermark of the admission, which a published checkpoint
/// must cover before the sender may forget the batch.
#[derive(Debug, Message)]
#[rtype(result = "Result<u64, Failure>")]
pub struct AdmitMarked {
    /// Entries, all of this partition.
    pub entries: Vec<AdmitEntry>,
}

/// Makes a checkpoint of the partition's store in `dir` (which must not
/// exist), unless nothing was written since the store's sequence number
/// was `unless_at`.
#[derive(Debug, Message)]
#[rtype(result = "Result<Checkpointed, Failure>")]
pub struct TakeCheckpoint {
    /// Where (on the store's filesystem: SSTs are hard-linked).
    pub dir: std::path::PathBuf,
    /// The store's sequence number before the checkpoint the chain holds
    /// (`None`: make one whatever was written).
    pub unless_at: Option<u64>,
}

/// What came of a [`TakeCheckpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkpointed {
    /// A checkpoint was made.
    Made {
        /// Its files.
        files: Vec<crate::store::CheckpointFile>,
        /// The write watermark it covers.
        covers: u64,
        /// The store's sequence number before it was made.
        sequence: u64,
    },
    /// Nothing was written since `unless_at`: no checkpoint made (an idle
    /// partition renews its lease with the files the chain has).
    Unchanged {
        /// The write watermark, as the last checkpoint's.
        covers: u64,
    },
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
    /// Links the page found for partitions other nodes own: written to
    /// the outbox in the completion's batch.
    pub outbox: Vec<crate::store::OutboxBatch>,
    /// The tickets of what the page's archiving wrote, settled before
    /// this was sent; the partition audits them when it writes the batch
    /// ([`crate::metrics::Metrics::completions_ahead_of_sync`]).
    pub durable: Vec<crate::durable::Ticket>,
}

/// Links for partitions other nodes own that no completion carries (the
/// sitemaps a robots.txt names): written to the partition's outbox at
/// once.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct Forward {
    /// By partition.
    pub outbox: Vec<crate::store::OutboxBatch>,
}

/// A partition's queue ran empty (nothing of it queued or in flight): the
/// node looks at once whether the crawl is over rather than at its next
/// poll, up to 50 ms later (`actors/node/idle.rs`): the end of a crawl
/// that a caller waits for (`--until-idle`) is its last response plus the
/// last page's processing, not plus a poll interval.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct QueueEmptied;

/// A host has nothing to do (`due_ms` is `None`) or nothing it may do
/// before `due_ms`. The partition passivates it (saving `state`, and
/// entering it in the due index until `due_ms`) unless work arrived after
/// `generation`; the reply says which.
#[derive(Debug, Message)]
#[rtype(result = "bool")]
pub struct HostIdle {
    /// The host.
    pub host: String,
    /// The last [`Wake`] generation the host saw.
    pub generation: u64,
    /// State to persist.
    pub state: HostState,
    /// When it has something to do again (Unix ms), if it has work.
    pub due_ms: Option<u64>,
    /// `due_ms` is its next refresh, not a politeness wait: new work
    /// makes it due at once.
    pub refresh_wait: bool,
    /// The rank of the best new URL it had loaded: its place among due
    /// hosts when slots are scarce (`frontier/due.rs`).
    pub best_rank: Option<crate::frontier::importance::Rank>,
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

/// Persists a host's claim on its host before a request leaves
/// ([`crate::politeness::Hold`]); answered once it is written (in the
/// partition's next batch, with the completions), and only then is the
/// request sent, so whoever opens the host after a crash, a drain that
/// timed out or a hand-back honours it.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct HoldHost {
    /// The host.
    pub host: String,
    /// The hold of its requests in flight, this one included.
    pub hold: crate::politeness::Hold,
}

/// Stop dispatching and wait until nothing is in flight or in processing,
/// at most `timeout`; the partition then writes what it holds to its store
/// (not synced: the node syncs the stores it drained, each off its thread,
/// beside the rest of its stop). Answers, once every host drained, what
/// the partition still owes its hosts on this node's clock
/// (`crate::politeness::handover`); `None` if requests were abandoned
/// (they stay queued).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Option<std::time::Duration>")]
pub struct Drain {
    /// How long to wait for requests in flight.
    pub timeout: std::time::Duration,
}

/// Tells the FetcherPool to close its connections and stop: the node's
/// stop sends it once every partition drained (nothing is fetched after).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct CloseConnections;

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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PartitionSnapshot {
    /// Partition id.
    pub id: u16,
    /// URLs queued and not completed.
    pub queued: u64,
    /// URLs completed since start.
    pub completed: u64,
    /// Active host actors.
    pub active_hosts: usize,
    /// Dormant hosts with work, waiting in the due index.
    pub due_hosts: usize,
    /// Of those, hosts waiting only for their next refresh.
    pub refresh_hosts: usize,
    /// Store writes that failed since start (the work stays queued and is
    /// retried; see `trawl_pipeline_failures_total`).
    pub store_errors: u64,
    /// Host actors restarted after they died.
    pub host_restarts: u64,
    /// Draining for shutdown.
    pub draining: bool,
    /// Scheduled refreshes by when they are due.
    pub refresh_due: crate::store::DueCounts,
}

// --------------------------------------------------------------- HostActor

/// New work was queued for the host.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Wake {
    /// Increases with every wake of this host.
    pub generation: u64,
    /// The priority levels that got entries (a bit per level, so the host
    /// re-reads only those queues) and the best rank of each.
    pub arrivals: crate::frontier::importance::Arrivals,
}

/// Hosts wait for a slot and this one has held its slot for a cycle
/// (`[frontier] host_cycle`): it passivates once quiet, due when its
/// politeness allows. A host woken since (a later generation) may be
/// refused its passivation and keep its slot, as any idle report.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct YieldSlot {
    /// The generation of the start or wake the partition asks at.
    pub generation: u64,
}

/// Asks a host for its [`HostSnapshot`]; with `count_queue`, its queue
/// sizes by priority are counted from the store (a scan of its queue:
/// listings of many hosts take the partition's per-host totals instead).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "HostSnapshot")]
pub struct GetHostSnapshot {
    /// Count the queue by priority.
    pub count_queue: bool,
}

pub use crate::frontier::host::{HostSnapshot, PolitenessSnapshot};

/// A question or an order about one host, for the partition holding it
/// (sent to the node, which routes it; answered by [`HostAnswer`]).
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<HostAnswer, Failure>")]
pub struct AskHost {
    /// The host name (as in URLs, lower-case).
    pub host: String,
    /// What about it.
    pub ask: HostAsk,
}

/// What an [`AskHost`] asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAsk {
    /// Its [`HostSnapshot`], active or dormant.
    Snapshot,
    /// Its queue: up to `limit` queued URLs and refreshes.
    Queue {
        /// Entries of each kind.
        limit: usize,
    },
    /// Slow it down (`Some`) or lift the slow-down, at once and durably;
    /// answered with the snapshot after.
    SlowDown(Option<Slowdown>),
}

/// The answer to an [`AskHost`].
#[derive(Debug, Clone)]
pub enum HostAnswer {
    /// Its snapshot.
    Snapshot(HostSnapshot),
    /// Its queue, and its snapshot (when new URLs may go).
    Queue(HostQueue, HostSnapshot),
}

/// Applies an operator's slow-down to an active host (the partition has
/// stored it).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "HostSnapshot")]
pub struct SlowDown(pub Option<Slowdown>);

/// Lists the hosts a partition attends to (see
/// [`crate::frontier::listing`]): its first `query.limit` rows.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "HostPage")]
pub struct ListHosts(pub ListQuery);

pub use crate::frontier::listing::{HostPage, ListQuery};
pub use crate::politeness::slowdown::Slowdown;

/// Asks the node for its crawl report (`src/report`): what its archive
/// folded from the events it wrote, with its partitions' frontier (the
/// hosts with the most URLs queued).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "crate::report::CrawlReport")]
pub struct GetReport;

/// Asks the node for the report its archive folds into, to read once the
/// node has stopped (the pages that finished during the stop included).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "crate::archive::ReportBook")]
pub struct GetReportBook;
pub use crate::store::HostQueue;

// ------------------------------------------------------------- FetcherPool

/// Fetches one URL.
#[derive(Debug, Message)]
#[rtype(result = "Result<FetchResponse, FetchError>")]
pub struct Fetch {
    /// The URL.
    pub url: Url,
    /// Validators of the copy on record: the request is conditional.
    pub validators: crate::fetch::Validators,
    /// Alive while the asking host waits for the answer: a request whose
    /// host died while it waited for a fetch slot is never started, so a
    /// restarted host cannot overlap it (see the partition's supervision).
    pub asker: std::sync::Weak<()>,
    /// When the host released the request (its politeness allows it): the
    /// wait until a fetch slot starts it is the `queue_wait` stage.
    pub released: std::time::Instant,
    /// Given up at this instant at the latest: the deadline of the hold
    /// its host wrote before sending it (a request that waited for a slot
    /// past it is not sent).
    pub deadline: std::time::Instant,
    /// A page (a queue entry): it takes a place in the node's pipeline
    /// before it starts, carried with its response
    /// ([`crate::fetch::pipeline`]); robots.txt takes none.
    pub page: bool,
    /// With `state_url`, the end of the partition's lease: a request that
    /// waited for its slot past it is not sent
    /// ([`crate::fetch::FetchError::NotSent`]).
    pub lease: Option<std::sync::Arc<crate::cluster::gate::LeaseGate>>,
}

// -------------------------------------------------------------- ParserPool

/// Reads a sitemap body.
#[derive(Debug, Message)]
#[rtype(result = "ParsedSitemap")]
pub struct ParseSitemap {
    /// The body as fetched (gzip or not).
    pub body: Bytes,
    /// The Content-Encoding header (undone before reading).
    pub content_encoding: Option<String>,
    /// Per-file limits.
    pub limits: SitemapLimits,
}

/// Parses an HTML body; replies with what it found and the body's
/// payload digest (computed on the parser's thread, off the executor).
#[derive(Debug, Message)]
#[rtype(result = "Parsed")]
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

/// What [`Parse`] found.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Links, canonical, meta robots, simhash.
    pub page: ParsedPage,
    /// SHA-256 of the body as fetched (the WARC payload digest).
    pub digest: [u8; 32],
}

/// The SHA-256 of a body that is archived without being parsed.
#[derive(Debug, Message)]
#[rtype(result = "[u8; 32]")]
pub struct DigestPayload(pub Bytes);

// ------------------------------------------------------------------- Dedup

/// A question about a payload digest for the partition it belongs to
/// (see [`crate::dedup::exact`]): asked of the DigestRouter, which has
/// the partition answer if this node holds it and hands the question to
/// the node otherwise, which asks the owner over the bridge. A question
/// that cannot be answered in time (no owner, the owner unreachable) is
/// answered [`DigestReply::Unclaimed`](crate::dedup::exact::DigestReply):
/// exact dedup never holds up the crawl.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<crate::dedup::exact::DigestReply, Failure>")]
pub struct DigestQuery {
    /// The payload's SHA-256.
    pub digest: [u8; 32],
    /// What is asked.
    pub ask: crate::dedup::exact::DigestAsk,
}

// ----------------------------------------------------------------- Archive

/// Archives one response (WARC records and its output event). Replies
/// with where it was stored (if dedup stored it), its digest, and whether
/// it changed since the copy on record.
pub type Archive = crate::archive::ArchiveRequest;

impl Message for crate::archive::ArchiveRequest {
    type Result = Result<crate::archive::Archived, Failure>;
}

/// Writes the `removed` event of a URL that left the crawl; answers the
/// ticket that settles once it is in the OS (with `sync_writes`, durable).
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<Option<crate::durable::Ticket>, Failure>")]
pub struct ArchiveRemoval(pub crate::frontier::host::Removed);

/// The archive's note to itself, queued behind the pages in its mailbox
/// when it writes the first page since its last handover: hand what is
/// buffered to the OS (settling those pages' tickets) once the pages
/// queued ahead are written too.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct HandOver;

/// Archives a DNS answer the fetcher obtained as a `dns:` record
/// (`[warc] dns_records`). Told, not asked: a record that cannot be
/// written is logged, and no page waits for it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ArchiveDns(pub crate::fetch::Resolved);

/// Flushes and closes the current WARC file and syncs the events file.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<ArchiveSnapshot, Failure>")]
pub struct CloseArchive;

/// Asks the archive for its [`ArchiveSnapshot`].
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "ArchiveSnapshot")]
pub struct GetArchiveSnapshot;

/// Observable state of the archive.
pub type ArchiveSnapshot = crate::archive::ArchiveCounts;

// ----------------------------------------------------------------- Upload
//
// ```text
// Archive ─WarcClosed─▶ Upload ─ArchiveUploaded─▶ Archive (the `uploaded` event)
// Node ─ArchiveOpened─▶ Upload ; Node ─FinishUploads─▶ Upload (at shutdown)
// ```

/// A WARC file was closed (renamed to its final name): it may be
/// uploaded.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct WarcClosed {
    /// The file's name in the WARC directory.
    pub file: String,
}

/// Writes the `uploaded` event of a WARC file now in object storage (the
/// Archive is the only writer of the events file).
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct ArchiveUploaded(pub crate::upload::UploadRecord);

/// The archive is open, its crash recovery done: the uploader looks for
/// closed files not yet uploaded, and writes its events through it.
#[derive(Clone, Message)]
#[rtype(result = "()")]
pub struct ArchiveOpened(pub Recipient<ArchiveUploaded>);

/// Makes the archive's records durable on disk (a checkpoint's seal):
/// files whose close failed are finished and handed to the uploader; the
/// open file stays open, and the answer says how far its records are
/// ([`crate::warc::Sealed`]), for the uploader's segment.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<Option<crate::warc::Sealed>, Failure>")]
pub struct SealArchive;

/// The open WARC file's bytes up to a seal, to be put in object storage as
/// a segment before the checkpoint that asked is published.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct UploadSegment(pub crate::warc::Sealed);

/// Makes the records written so far safe in object storage: the archive
/// sealed, and every closed file uploaded within `timeout`. Answers
/// whether they are (`false` without `[upload]`: they stay on this disk).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "bool")]
pub struct SealRecords {
    /// How long to wait for the uploads.
    pub timeout: std::time::Duration,
}

/// Waits up to `timeout` for every pending upload (at shutdown); answers
/// whether none is left.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "bool")]
pub struct FinishUploads {
    /// How long to wait at most.
    pub timeout: std::time::Duration,
}

// ------------------------------------------------------------------ Bridge

/// The cluster's other members and their bridge addresses, sent to the
/// Bridge on every membership change (the whole list, not a delta; this
/// node's own id, if present, is ignored). A peer that leaves is
/// disconnected and its batches not yet acked fail with
/// [`Failure::Peer`], to be routed again.
#[derive(Debug, Clone, Default, Message)]
#[rtype(result = "()")]
pub struct SetPeers {
    /// Node id → the address its bridge listens on.
    pub peers: std::collections::BTreeMap<String, std::net::SocketAddr>,
}

/// Sends URLs of `partition`, which `peer` owns, to that node. Resolves
/// `Ok` only once the peer acknowledged them as durably admitted (then the
/// sender may forget them); waits while the peer's window of unacked
/// batches is full. `Err(Failure::NotHeld)` if the peer does not hold the
/// partition (route it again by the next view); `Err(Failure::Peer)` if
/// `peer` is not a member (or leaves before acking);
/// `Err(Failure::Invalid)` if the batch does not fit a frame;
/// `Err(Failure::Mailbox)` if the bridge stopped. Whatever the error the
/// sender still holds the batch, and may send it again: admission is
/// idempotent.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct SendBatch {
    /// The node id of the owner.
    pub peer: String,
    /// The partition the entries belong to.
    pub partition: u16,
    /// The entries.
    pub entries: Vec<WireEntry>,
}

/// Blocks (or unblocks) a host or a registrable domain, at once and
/// durably (see [`crate::frontier::blocks`]). Sent to the node, which
/// hands it to the partition the name belongs to.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<BlockOutcome, Failure>")]
pub struct SetBlock {
    /// What.
    pub target: crate::frontier::blocks::BlockTarget,
    /// Block (`true`) or unblock.
    pub blocked: bool,
}

/// What a [`SetBlock`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BlockOutcome {
    /// Queued URLs dropped (each with a `removed` event).
    pub dropped: usize,
}

/// The node's runtime controls (pause, request rate).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "crate::control::Controls")]
pub struct GetControls;

/// Changes the node's runtime controls: the fields given, the others as
/// they are. Takes effect at once (requests waiting at the gate see it)
/// and is saved, so a restart keeps it. Replies with the controls now.
#[derive(Debug, Clone, Copy, Default, Message)]
#[rtype(result = "Result<crate::control::Controls, Failure>")]
pub struct SetControls {
    /// Pause (`true`) or resume (`false`).
    pub paused: Option<bool>,
    /// Requests per second, node-wide (0 = no limit).
    pub max_requests_per_second: Option<f64>,
}

/// Asks `peer`, which owns `partition`, a question about a digest of it.
/// Resolves with the peer's answer; errors as for [`SendBatch`]
/// (`NotHeld` when the peer does not hold the partition). Asking
/// again is harmless: a registration repeated is answered as the first
/// was, and a claim repeated (resent after a reconnect) at worst waits for
/// the first one's expiry.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<crate::dedup::exact::DigestReply, Failure>")]
pub struct SendDigest {
    /// The node id of the owner.
    pub peer: String,
    /// The digest's partition.
    pub partition: u16,
    /// The question.
    pub query: DigestQuery,
}

/// A question about a digest of `partition` from another node. Answered
/// `Err(Failure::NotHeld)` if this node does not hold the partition (the
/// bridge sends that back as a refusal).
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<crate::dedup::exact::DigestReply, Failure>")]
pub struct RemoteDigest {
    /// The partition.
    pub partition: u16,
    /// The question.
    pub query: DigestQuery,
}

/// URLs another node sent for `partition`, which this node owns. `Ok` means
/// they are durably admitted (the bridge acks them to the sender);
/// `Err(Failure::NotHeld)` if this node does not hold the partition (the
/// bridge refuses them back, to be routed again); on any other `Err` the
/// bridge closes the connection and the sender sends them again after it
/// reconnects, so that is for failures that may pass (a store write, a
/// restarting partition).
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct RemoteAdmit {
    /// The sending node's id (from its hello; it may not be a member yet
    /// as far as this node knows).
    pub from: String,
    /// The partition.
    pub partition: u16,
    /// The entries.
    pub entries: Vec<WireEntry>,
}

/// The partitions this node should hold, from the cluster's assignment
/// (sent by the ClusterActor on every membership change and once a
/// second). The node opens those it does not hold yet (a store its
/// previous owner still holds open is tried again next time) and releases
/// the others. Replies with what it holds now, and what it shuns.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Holding")]
pub struct Hold {
    /// Every partition's owner.
    pub assignment: std::sync::Arc<crate::cluster::assign::Assignment>,
    /// This node's id.
    pub node: String,
    /// Partitions live members say they hold, and who (without `[cluster]
    /// state_url`, a node does not create a store for a partition another
    /// node held: its state is on that node's disk).
    pub holders: std::collections::BTreeMap<u16, String>,
    /// Whether this node hears its peers (`src/cluster/hearing.rs`).
    pub hearing: crate::cluster::hearing::HearingView,
    /// Without `state_url`: whether a store may be created for a
    /// partition with no state on this disk (a peer has been heard, or
    /// none is expected).
    pub may_create_stores: bool,
}

/// What a node holds and will not take, as it publishes in gossip (the
/// answer to [`Hold`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holding {
    /// The partitions it holds now.
    pub held: Vec<u16>,
    /// The partitions it will not take for now (with `state_url`: a take
    /// that could not open, a head it cannot read, checkpoints that kept
    /// failing); the assignment passes them to other nodes.
    pub shunned: Vec<u16>,
}

/// The partitions the OwnershipActor shuns now, sent to the node when
/// they change (it answers [`Hold`] with them).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Shunned(pub Vec<u16>);

// --------------------------------------------------------------- Ownership
//
// With `[cluster] state_url`, the OwnershipActor runs each partition's
// lease (`src/cluster/lease.rs`) over its checkpoint chain and tells the
// node what to open, checkpoint, drain and stop; the node holds exactly
// the partitions the chain says are its own.

/// Gossip's advice to the OwnershipActor: the partitions this node should
/// own (sent on every reconcile).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Advice {
    /// Partition ids, sorted.
    pub wanted: Vec<u16>,
}

/// Link batches wait on checkpoints of these partitions and the node has
/// nothing left to fetch: checkpoint them soon (the node to its
/// OwnershipActor; see `PartitionLease::hurry`).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Hurry {
    /// Partition ids.
    pub partitions: Vec<u16>,
}

/// The partition is this node's: open its store (restored from the chain
/// into its directory already, if the chain had a checkpoint) and start
/// it, every host held until `hold_until_ms`.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<(), Failure>")]
pub struct TakePartition {
    /// The partition.
    pub id: u16,
    /// No request to its hosts before this (Unix ms).
    pub hold_until_ms: u64,
    /// The write watermark its last checkpoint covers.
    pub covers: u64,
    /// The end of the lease, as its hosts check it.
    pub lease: std::sync::Arc<crate::cluster::gate::LeaseGate>,
}

/// Makes a checkpoint of a held partition in `dir` ([`TakeCheckpoint`]).
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<Checkpointed, Failure>")]
pub struct CheckpointPartition {
    /// The partition.
    pub id: u16,
    /// Where.
    pub dir: std::path::PathBuf,
    /// See [`TakeCheckpoint::unless_at`].
    pub unless_at: Option<u64>,
}

/// Stops dispatching a held partition's hosts and waits for their requests
/// in flight (a hand-back's first step). Replies, if all ended, what the
/// partition still owes its hosts ([`Drain`]).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Option<std::time::Duration>")]
pub struct DrainPartition {
    /// The partition.
    pub id: u16,
}

/// Stops a held partition now and closes its store: fenced, lapsed, or
/// handed back (then its final checkpoint is published already). Resolves
/// once the store is closed.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct StopPartition {
    /// The partition.
    pub id: u16,
    /// Why.
    pub reason: crate::cluster::lease::StopReason,
}

/// A published checkpoint of partition `id` covers its writes up to
/// `covers`: the link batches admitted up to there may be acknowledged.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct DurableUpTo {
    /// The partition.
    pub id: u16,
    /// The write watermark.
    pub covers: u64,
}

/// At shutdown: hand every held partition back (a final checkpoint each,
/// published as released), within `timeout`. Replies how many were.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "usize")]
pub struct ReleaseAll {
    /// How long to try.
    pub timeout: std::time::Duration,
}

/// How much work this node has, for the cluster's idle detection (the
/// node to its ClusterActor, every poll).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct LocalWork {
    /// Nothing queued or due, in flight, or waiting in an outbox.
    pub idle: bool,
    /// Moves whenever the node completes work.
    pub activity: u64,
}

/// The whole cluster is idle (the ClusterActor to its node).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ClusterIdle;

/// Asks the ClusterActor for the members it knows.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Vec<MemberView>")]
pub struct GetMembers;

/// A member as this node sees it (served at `/api/v1/cluster`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct MemberView {
    /// Its node id.
    pub node: String,
    /// Its gossip address.
    #[schema(value_type = String)]
    pub gossip: std::net::SocketAddr,
    /// The failure detector thinks it alive.
    pub live: bool,
    /// What it published, if readable: its bridge address...
    #[schema(value_type = Option<String>)]
    pub bridge: Option<std::net::SocketAddr>,
    /// ...the partitions it holds...
    pub partitions: Vec<u16>,
    /// ...whether it is ready and idle...
    pub ready: bool,
    /// ...and where its admin API listens.
    #[schema(value_type = Option<String>)]
    pub admin: Option<std::net::SocketAddr>,
    /// Nothing to do there.
    pub idle: bool,
    /// The partitions it will not take for now (could not open, read or
    /// checkpoint them): assigned to the next node instead.
    pub shunned: Vec<u16>,
}

/// Asks the Bridge for its [`BridgeStatus`].
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "BridgeStatus")]
pub struct GetBridgeStatus;

/// Observable state of the Bridge.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BridgeStatus {
    /// Peers, by node id: members, and nodes connected to us that are not
    /// members (yet).
    pub peers: Vec<PeerStatus>,
}

/// One peer of the Bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeerStatus {
    /// Its node id.
    pub node: String,
    /// Its bridge address, if it is a member.
    pub addr: Option<std::net::SocketAddr>,
    /// This node dials it (the smaller id dials).
    pub dials: bool,
    /// A connection is up (handshake done).
    pub connected: bool,
    /// Batches sent (or to be sent on the next connection), not acked.
    pub unacked: usize,
    /// Batches waiting for room in the window.
    pub waiting: usize,
}

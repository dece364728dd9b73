//! Every Prometheus metric trawl exports, declared in one place.
//!
//! Labels are bounded sets only (status class, error kind, outcome, stage,
//! partition number): never a URL or a host name, which would grow the
//! series without limit. The process's own metrics (memory, CPU, open file
//! descriptors) are exported under Prometheus's standard `process_*` names.
//!
//! The reference operators read (`docs/metrics.md`: every metric, its type,
//! labels and help) is generated from what is registered here
//! ([`Metrics::catalog`], [`catalog_markdown`]); a unit test fails when it
//! is out of date and rewrites it with `TRAWL_BLESS=1`.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Buckets of the stage histograms: parse and archive take milliseconds or
/// less, a fetch from milliseconds to its timeout.
const STAGE_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The node's metrics and the registry that exports them.
pub struct Metrics {
    registry: Registry,
    /// Responses by status class (`2xx` … `5xx`).
    pub pages: IntCounterVec,
    /// Body bytes received.
    pub fetched_bytes: IntCounter,
    /// Time spent per stage of a page's way through the node
    /// (`trawl_stage_seconds{stage}`); its four series are the handles
    /// below.
    pub stage_seconds: HistogramVec,
    /// Stage `queue_wait`: from a host releasing a request (its politeness
    /// allows it) to a fetch slot starting it. Long waits mean the fetch
    /// slots (`fetch.concurrency`) or the fetcher's thread are saturated.
    pub queue_wait: Histogram,
    /// Stage `pipeline_wait`: a page request waiting for a pipeline
    /// permit (`[fetch] max_pipeline_pages`), before the gate and its
    /// slot; part of `queue_wait`. Long waits mean parsing, archiving or
    /// completing pages is slower than fetching them: back-pressure.
    pub pipeline_wait: Histogram,
    /// Stage `fetch`: request start to last body byte.
    pub fetch_duration: Histogram,
    /// Stage `parse`: a parser thread's work on one HTML page (decoding,
    /// payload digest, link extraction).
    pub parse_duration: Histogram,
    /// Stage `archive`: the archive thread's transaction for one response
    /// (dedup verdict, WARC records, event, index update).
    pub archive_duration: Histogram,
    /// The estimated importance (OPIC cash) of the new URLs fetched
    /// (`trawl_fetched_score`): what the frontier's order gives.
    pub fetched_score: Histogram,
    /// Queued URLs moved up their host's queue by links from other
    /// domains found after they were queued (`trawl_urls_credited_total`,
    /// importance ordering: `store/admission.rs`).
    pub urls_credited: IntCounter,
    /// Active hosts asked to give their slot up to hosts waiting for one
    /// (`[frontier] host_cycle`; `trawl_host_slot_yields_total`).
    pub host_slot_yields: IntCounter,
    /// Dormant hosts moved between a partition's memory and its store
    /// (`[frontier] dormant_hosts_in_memory`; `trawl_due_host_moves_total`,
    /// `to` = `store` or `memory`).
    pub due_host_moves: IntCounterVec,
    /// Fetches that produced no response, by error kind.
    pub fetch_errors: IntCounterVec,
    /// URLs queued and not yet completed.
    pub frontier_size: IntGauge,
    /// HostActors alive.
    pub active_hosts: IntGauge,
    /// Pages fetched and not yet archived: a host's task processing a
    /// fetched page holds one from its start (parse, dedup question) until
    /// its archive step is done or skipped. A backlog that grows while
    /// fetches go on means the fetcher outruns parsing and archiving.
    /// Never more than [`Metrics::pipeline_pages`].
    pub pipeline_backlog: Arc<HeldGauge>,
    /// Pages in the pipeline: page requests holding a pipeline permit,
    /// from before the request starts until the page's processing ends
    /// (see [`crate::fetch::pipeline`]); at most the requests in flight
    /// plus `[fetch] max_pipeline_pages`.
    pub pipeline_pages: Arc<HeldGauge>,
    /// Body bytes held by pages in the pipeline (`[fetch]
    /// max_pipeline_bytes` holds new requests past it).
    pub pipeline_bytes: IntGauge,
    /// The fetch slots: `[fetch] concurrency` as a number, or the limit
    /// `"auto"` chose last ([`crate::fetch::inflight`]).
    pub fetch_concurrency_limit: IntGauge,
    /// URLs queued and not yet completed, by partition (a node's own
    /// partitions only; a partition's series goes when it stops here).
    pub partition_queued: IntGaugeVec,
    /// HostActors alive, by partition.
    pub partition_active_hosts: IntGaugeVec,
    /// Compressed bytes written to WARC files.
    pub warc_bytes: IntCounter,
    /// WARC records written.
    pub warc_records: IntCounter,
    /// Rounds of fsyncs of the WARC and events files (`sync_writes`):
    /// each makes every page archived before it durable at once.
    pub archive_syncs: IntCounter,
    /// Pages (and `removed` events) made durable per round of fsyncs.
    pub archive_sync_group: Histogram,
    /// Tickets (archived pages, `removed` events) one handover of the
    /// archive's buffers to the OS settled (with `sync_writes`, submitted
    /// to the group commit): how well its writes batch.
    pub archive_handover_group: Histogram,
    /// Rounds of fsyncs that failed: their pages are archived again.
    pub archive_sync_failures: IntCounter,
    /// Completions written before their records reached the OS (with
    /// `sync_writes`, before their fsync): always 0 unless durability is
    /// broken.
    pub completions_ahead_of_sync: IntCounter,
    /// URLs by outcome: at admission (`admitted`, `seen`, `filtered`) and
    /// after fetching (`not_archived_type`: not HTML, not archived;
    /// `retried`: to be tried again).
    pub urls: IntCounterVec,
    /// Candidates not admitted, by reason (`invalid`, `depth`, scope and
    /// trap reasons, budgets).
    pub urls_dropped: IntCounterVec,
    /// Duplicate responses by kind (`exact`, `near_flagged`,
    /// `near_skipped`).
    pub duplicates: IntCounterVec,
    /// Answers to exact dedup's questions at a digest's partition, by
    /// answer (`stored`, `claimed`, `unclaimed`, `unanswered`: the
    /// partition could not be asked in time), counted where asked.
    pub digest_answers: IntCounterVec,
    /// The seen filter's answers (`absent`, `maybe_seen`, `cached`,
    /// `false_positive`).
    pub seen_filter: IntCounterVec,
    /// robots.txt decisions on queued URLs (`allowed`, `disallowed`,
    /// `unreachable_wait`, `unreachable_dropped`, `denied`).
    pub robots_decisions: IntCounterVec,
    /// Waits imposed on hosts after a request, by what set them (`delay`,
    /// `crawl_delay`, `retry_after`, `backoff`, `parked`).
    pub politeness_waits: IntCounterVec,
    /// robots.txt files whose Crawl-delay exceeded `max_crawl_delay`.
    pub crawl_delay_capped: IntCounter,
    /// Requests the crawl stopped waiting for after they may have reached
    /// the server (a timeout, a reset): each held its host until its
    /// deadline.
    pub requests_abandoned: IntCounter,
    /// Hosts parked after `park_after_failures` consecutive failures, by
    /// what the last one was (`timeouts`: a request given up on after it
    /// may have reached the server; `errors`: anything else).
    pub hosts_parked: IntCounterVec,
    /// Sitemap entries by outcome (`queued`, `dropped_limit`,
    /// `dropped_host`, `dropped_depth`).
    pub sitemap_urls: IntCounterVec,
    /// Redirects by outcome (`followed`, `too_many`).
    pub redirects: IntCounterVec,
    /// DNS lookups by result (`hit`, `miss`, `coalesced`, `error`,
    /// `override`).
    pub dns_lookups: IntCounterVec,
    /// Host tasks that failed and will run again, by task (`process`,
    /// `complete`, `archive_robots`, `discover`) and the stage that failed
    /// (`store`, `archive`, `mailbox`).
    pub pipeline_failures: IntCounterVec,
    /// Hosts waiting in the partitions' due indexes (dormant, with work).
    pub due_hosts: IntGauge,
    /// HTML parses stopped at a bound before the end of the page, by
    /// reason (`size`, `attributes`, `depth`, `work`, `time`; see
    /// [`crate::parse::CutReason`]).
    pub parse_cuts: IntCounterVec,
    /// Refetches done, by result (`not_modified`: a 304; `changed`;
    /// `unchanged`: same payload, or text within `change_distance`).
    pub refreshes: IntCounterVec,
    /// URLs removed from the crawl, by reason (`gone`, `disallowed`,
    /// `moved`).
    pub removed: IntCounterVec,
    /// Scheduled refreshes due, by horizon (`now`, `hour`, `day`; each
    /// includes the earlier ones).
    pub refresh_due: IntGaugeVec,
    /// Bridge batches by peer (a member's node id, or `unknown` for a node
    /// not yet a member) and outcome: `sent`, `resent` (after a
    /// reconnect), `acked`, `nacked` (the peer does not hold the
    /// partition: routed again), `failed` (the peer left before acking) on
    /// the sending side; `received`, `rejected` (admission failed, not
    /// acked), `nacked` on the receiving side.
    pub bridge_batches: IntCounterVec,
    /// Bridge frame bytes (length prefix included) by peer and direction
    /// (`in`, `out`), on connections past their handshake.
    pub bridge_bytes: IntCounterVec,
    /// Bridge connections established (handshake done), by peer: more
    /// than one means it reconnected.
    pub bridge_connections: IntCounterVec,
    /// Bridge connections cut off for what the other side sent or said,
    /// by reason: handshake refusals (`not_hello`, `wrong_cluster`,
    /// `old_protocol`, `same_node`, `wrong_node`, `wrong_direction`,
    /// `refused_by_peer`, `bad_node_id`), authentication failures (`tls`:
    /// no certificate from the cluster's CA, or not for the node dialled;
    /// `not_certified`: a certificate for another node than the hello
    /// names), protocol violations (`malformed`, `too_large`,
    /// `unexpected`), and accepted connections closed at once while too
    /// many are in their handshake (`busy`).
    pub bridge_refusals: IntCounterVec,
    /// Gossip datagrams dropped unread, by reason (`src/cluster/gossip_auth.rs`):
    /// `malformed` (not sealed: a node without the key), `forged` (another
    /// key, or altered), `stale` (sent beyond the allowed clock skew),
    /// `replayed`, `crowded` (too many senders at once).
    pub gossip_rejected: IntCounterVec,
    /// Bridge connections lost otherwise, by reason: `eof`, `io`,
    /// `silent` (nothing came for three heartbeats), `stalled` (the peer
    /// took no bytes as long), `rejected` (a batch from the peer was not
    /// admitted), `connect` (a dial failed), `replaced` (by a newer
    /// connection of the same peer), `left` (the peer left the cluster).
    pub bridge_disconnects: IntCounterVec,
    /// Bridge batches sent to a peer and not yet acked.
    pub bridge_unacked: IntGaugeVec,
    /// WARC file uploads by result: `ok` (verified and recorded),
    /// `failed` (to be tried again later; the file stays), `missing` (the
    /// local file vanished before it could be uploaded).
    pub uploads: IntCounterVec,
    /// Bytes of WARC files uploaded and verified.
    pub upload_bytes: IntCounter,
    /// Segments of open WARC files put by checkpoints' seals, by result
    /// (`ok`, `failed`, `missing`; see `src/upload/join.rs`).
    pub upload_segments: IntCounterVec,
    /// Bytes of segments put and verified.
    pub upload_segment_bytes: IntCounter,
    /// Segments deleted once their file was in object storage whole.
    pub upload_segments_deleted: IntCounter,
    /// Files of earlier runs put together from their segments.
    pub upload_files_joined: IntCounter,
    /// Manifests this node created in its partitions' chains (`[cluster]
    /// state_url`), by kind: `claim`, `checkpoint`, `renewal` (the last
    /// checkpoint's files again: a checkpoint could not be made),
    /// `release`. Renewals growing mean checkpoints fail.
    pub manifests: IntCounterVec,
    /// Creates of a manifest that failed (the store unreachable or
    /// refusing); tried again, and past the lease the partition stops.
    pub manifest_failures: IntCounter,
    /// Partitions this node stopped, by reason: `fenced` (another node
    /// created the next manifest), `lapsed` (no manifest accepted for a
    /// lease), `released` (a clean hand-back).
    pub partition_stops: IntCounterVec,
    /// Partitions this node will not take for now (a take it could not
    /// open, a chain head it cannot read, checkpoints failing for a
    /// lease): published in gossip, so others take them.
    pub partitions_shunned: IntGauge,
    /// Bytes of checkpoint files uploaded to the state store.
    pub checkpoint_bytes: IntCounter,
    /// Objects an owner deleted from its partitions' chains: manifests
    /// long superseded and files no restore reads.
    pub chain_objects_deleted: IntCounter,
    /// Bytes a restore of a partition took, by `source`: `downloaded`
    /// from the state store, or `reused` from files already on disk.
    pub restore_bytes: IntCounterVec,
    /// The crawl's partition count (every node says it: a partition is
    /// without an owner while the nodes hold fewer).
    pub partitions: IntGauge,
    /// Partitions this node holds now.
    pub partitions_held: IntGauge,
    /// Peers gossip shows live now (cluster nodes).
    pub cluster_live_peers: IntGauge,
    /// 1 while this node, given peers, has heard none for a few gossip
    /// rounds (`src/cluster/hearing.rs`): gossip has not formed, or broke.
    pub cluster_alone: IntGauge,
    /// WARC files closed and not yet uploaded (`[upload]`).
    pub upload_pending: IntGauge,
    /// Bytes free to this process on the data directory's filesystem.
    pub storage_available: IntGauge,
    /// Size of the data directory's filesystem, in bytes.
    pub storage_capacity: IntGauge,
    /// Bytes the partition stores' shared RocksDB memory holds, by `part`
    /// (`cache`, `memtables`), read at each scrape.
    pub store_memory: IntGaugeVec,
    /// The bound of each `part` of [`Metrics::store_memory`].
    pub store_memory_limit: IntGaugeVec,
    /// What each registered metric is, in registration order.
    catalog: Vec<MetricDoc>,
    /// Run before each render: they set gauges from figures a library
    /// keeps (RocksDB's memory), which a timer of its own would read just
    /// as late and would cost an idle node its wakeups.
    at_render: Mutex<Vec<(&'static str, RenderHook)>>,
}

/// A reader run before each render (see [`Metrics::read_at_render`]).
type RenderHook = Box<dyn Fn(&Metrics) + Send + Sync>;

/// One metric as its reference describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricDoc {
    /// Its name.
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Its variable labels (the node label of a cluster node aside).
    pub labels: Vec<String>,
    /// Its help text.
    pub help: String,
}

/// Registers `metric` in `registry` and describes it in `docs`.
fn register<C: Collector + Clone + 'static>(
    registry: &Registry,
    docs: &RefCell<Vec<MetricDoc>>,
    metric: C,
) {
    // The prometheus crate's types name their kind: GenericCounter,
    // GenericGauge, Histogram and their Vec forms.
    let type_name = std::any::type_name::<C>();
    let kind = [
        ("Histogram", "histogram"),
        ("Gauge", "gauge"),
        ("Counter", "counter"),
    ]
    .into_iter()
    .find(|(t, _)| type_name.contains(t))
    .map_or("untyped", |(_, kind)| kind);
    for desc in metric.desc() {
        docs.borrow_mut().push(MetricDoc {
            name: desc.fq_name.clone(),
            kind,
            labels: desc.variable_labels.clone(),
            help: desc.help.clone(),
        });
    }
    registry.register(Box::new(metric)).expect("unique metric");
}

/// The metrics reference (`docs/metrics.md`) for `catalog`.
pub fn catalog_markdown(catalog: &[MetricDoc]) -> String {
    let mut out = String::from(
        "# Metrics\n\n\
         <!-- Generated from src/metrics.rs by its unit test \
         (TRAWL_BLESS=1 cargo test --release --lib metrics): do not edit. -->\n\n\
         Every metric a node exports on `GET /metrics`, besides Prometheus's \
         standard `process_*` ones. On a cluster node every series also \
         carries `node=\"<id>\"`. What to watch and why is in \
         [operations.md](operations.md#admin-api-and-metrics).\n\n\
         | name | type | labels | what it counts |\n\
         |---|---|---|---|\n",
    );
    let mut sorted: Vec<&MetricDoc> = catalog.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for m in sorted {
        let labels = m
            .labels
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let help = m.help.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | {} | {labels} | {help} |\n",
            m.name, m.kind
        ));
    }
    out
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        Self::for_node(None)
    }

    /// Every metric, labelled `node="<id>"` on a cluster node (so the
    /// nodes of one cluster can share dashboards).
    pub fn for_node(node: Option<&str>) -> Self {
        let labels =
            node.map(|id| std::collections::HashMap::from([("node".to_owned(), id.to_owned())]));
        let registry = Registry::new_custom(None, labels).expect("a valid node label");
        let docs = RefCell::new(Vec::new());
        let counter_vec = |name: &str, help: &str, label: &str| {
            let m = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            register(&registry, &docs, m.clone());
            m
        };
        let counter = |name: &str, help: &str| {
            let m = IntCounter::new(name, help).expect("valid metric");
            register(&registry, &docs, m.clone());
            m
        };
        let gauge = |name: &str, help: &str| {
            let m = IntGauge::new(name, help).expect("valid metric");
            register(&registry, &docs, m.clone());
            m
        };
        let counter_vec2 = |name: &str, help: &str, labels: &[&str]| {
            let m = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            register(&registry, &docs, m.clone());
            m
        };
        let gauge_vec = |name: &str, help: &str, label: &str| {
            let m = IntGaugeVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            register(&registry, &docs, m.clone());
            m
        };
        let stage_seconds = HistogramVec::new(
            HistogramOpts::new(
                "trawl_stage_seconds",
                "Time per stage: queue_wait (a host releasing a request, politeness permitting, \
                 to a fetch slot starting it), pipeline_wait (part of queue_wait: a page request \
                 waiting for a pipeline permit, fetch.max_pipeline_pages), fetch (request start to last body byte), \
                 parse (one HTML page on a parser thread), archive (one response's archive transaction).",
            )
            .buckets(STAGE_BUCKETS.to_vec()),
            &["stage"],
        )
        .expect("valid metric");
        register(&registry, &docs, stage_seconds.clone());
        register_process_collector(&registry);
        let stage = |name: &str| stage_seconds.with_label_values(&[name]);
        let fetch_errors = counter_vec(
            "trawl_fetch_errors_total",
            "Fetches that produced no response, by error kind.",
            "kind",
        );
        for kind in crate::fetch::FetchError::KINDS {
            fetch_errors.with_label_values(&[kind]);
        }
        Metrics {
            queue_wait: stage("queue_wait"),
            pipeline_wait: stage("pipeline_wait"),
            fetch_duration: stage("fetch"),
            parse_duration: stage("parse"),
            archive_duration: stage("archive"),
            stage_seconds: stage_seconds.clone(),
            partition_queued: gauge_vec(
                "trawl_partition_queued_urls",
                "URLs queued and not yet completed, by partition held by this node.",
                "partition",
            ),
            partition_active_hosts: gauge_vec(
                "trawl_partition_active_hosts",
                "Host actors currently active, by partition held by this node.",
                "partition",
            ),
            pages: counter_vec(
                "trawl_pages_total",
                "Responses received, by status class.",
                "class",
            ),
            fetched_bytes: counter("trawl_fetched_bytes_total", "Response body bytes received."),
            host_slot_yields: counter(
                "trawl_host_slot_yields_total",
                "Active hosts asked to give their slot up to hosts waiting for one after holding it for [frontier] host_cycle.",
            ),
            due_host_moves: counter_vec(
                "trawl_due_host_moves_total",
                "Dormant hosts moved out of a partition's memory to its store (beyond [frontier] dormant_hosts_in_memory) and read back, by destination.",
                "to",
            ),
            urls_credited: counter(
                "trawl_urls_credited_total",
                "Queued URLs of dormant hosts moved up their host's queue by links from other domains found after they were queued (importance ordering).",
            ),
            fetch_errors,
            frontier_size: gauge("trawl_frontier_size", "URLs queued and not yet completed."),
            active_hosts: gauge("trawl_active_host_actors", "Host actors currently active."),
            pipeline_backlog: Arc::new(HeldGauge::new(
                gauge(
                    "trawl_pipeline_backlog_pages",
                    "Pages fetched and not yet archived (their processing started, their archive step not yet done or skipped).",
                ),
                gauge(
                    "trawl_pipeline_backlog_peak_pages",
                    "The largest trawl_pipeline_backlog_pages since the node started.",
                ),
            )),
            pipeline_pages: Arc::new(HeldGauge::new(
                gauge(
                    "trawl_pipeline_pages",
                    "Pages in the pipeline: page requests holding a pipeline permit, from before the request starts until the page is completed or dropped (at most the fetch slots plus fetch.max_pipeline_pages).",
                ),
                gauge(
                    "trawl_pipeline_peak_pages",
                    "The largest trawl_pipeline_pages since the node started.",
                ),
            )),
            pipeline_bytes: gauge(
                "trawl_pipeline_bytes",
                "Body bytes held by pages in the pipeline (new page requests wait past fetch.max_pipeline_bytes).",
            ),
            fetch_concurrency_limit: gauge(
                "trawl_fetch_concurrency_limit",
                "Fetch slots: requests allowed in flight at once (fetch.concurrency, or the limit \"auto\" chose last from the measured latency and CPU per page).",
            ),
            warc_bytes: counter(
                "trawl_warc_bytes_total",
                "Compressed bytes written to WARC files.",
            ),
            warc_records: counter("trawl_warc_records_total", "WARC records written."),
            archive_syncs: counter(
                "trawl_archive_syncs_total",
                "Rounds of fsyncs of the WARC and events files (storage.sync_writes).",
            ),
            archive_sync_group: {
                let m = Histogram::with_opts(
                    HistogramOpts::new(
                        "trawl_archive_sync_group_size",
                        "Archived pages made durable by one round of fsyncs.",
                    )
                    .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
                )
                .expect("valid metric");
                register(&registry, &docs, m.clone());
                m
            },
            fetched_score: {
                // Powers of 4 from a seed's 1 down: a share of a seed
                // ten links of ten pages deep is ~2^-20.
                let buckets = (0..=12).rev().map(|i| 4f64.powi(-i)).collect();
                let m = Histogram::with_opts(
                    HistogramOpts::new(
                        "trawl_fetched_score",
                        "Estimated importance (OPIC cash; a seed has 1) of the new URLs fetched: a crawl ordered by importance fetches the high scores first.",
                    )
                    .buckets(buckets),
                )
                .expect("valid metric");
                register(&registry, &docs, m.clone());
                m
            },
            archive_handover_group: {
                let m = Histogram::with_opts(
                    HistogramOpts::new(
                        "trawl_archive_handover_group_size",
                        "Archived pages (and removed events) one write of the archive's buffers to the OS handed over.",
                    )
                    .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]),
                )
                .expect("valid metric");
                register(&registry, &docs, m.clone());
                m
            },
            archive_sync_failures: counter(
                "trawl_archive_sync_failures_total",
                "Rounds of fsyncs of the archive's files that failed (their pages are archived again).",
            ),
            completions_ahead_of_sync: counter(
                "trawl_completions_ahead_of_sync_total",
                "Completions written before their records reached the OS (with sync_writes: before their fsync); always 0 unless durability is broken.",
            ),
            urls: counter_vec(
                "trawl_urls_total",
                "Candidate URLs by admission outcome.",
                "outcome",
            ),
            urls_dropped: counter_vec(
                "trawl_urls_dropped_total",
                "Candidate URLs not admitted, by reason.",
                "reason",
            ),
            duplicates: counter_vec(
                "trawl_duplicates_total",
                "Responses found to duplicate an archived one, by kind.",
                "kind",
            ),
            digest_answers: counter_vec(
                "trawl_digest_answers_total",
                "Answers to exact dedup's digest questions (claims and registrations), by answer.",
                "answer",
            ),
            seen_filter: counter_vec(
                "trawl_seen_filter_total",
                "Answers of the URL-seen Bloom filter (cached: a maybe the seen cache confirmed without a read; shortcut: a site's link to a URL it admitted, settled before its partition, the filter not asked); false_positive / (false_positive + absent) is its observed false-positive rate.",
                "result",
            ),
            robots_decisions: counter_vec(
                "trawl_robots_decisions_total",
                "robots.txt decisions on queued URLs.",
                "outcome",
            ),
            politeness_waits: counter_vec(
                "trawl_politeness_waits_total",
                "Waits imposed on hosts after a request, by what set them.",
                "reason",
            ),
            crawl_delay_capped: counter(
                "trawl_crawl_delay_capped_total",
                "robots.txt files whose Crawl-delay exceeded max_crawl_delay.",
            ),
            requests_abandoned: counter(
                "trawl_requests_abandoned_total",
                "Requests given up after they may have reached the server (timeout, reset); each held its host until its deadline.",
            ),
            hosts_parked: counter_vec(
                "trawl_hosts_parked_total",
                "Hosts parked after park_after_failures consecutive failures, by what the last one was (timeouts: a request given up on after it may have reached the server; errors: anything else).",
                "cause",
            ),
            sitemap_urls: counter_vec(
                "trawl_sitemap_urls_total",
                "Sitemap entries by outcome.",
                "outcome",
            ),
            redirects: counter_vec(
                "trawl_redirects_total",
                "Redirect responses by outcome.",
                "outcome",
            ),
            dns_lookups: counter_vec(
                "trawl_dns_lookups_total",
                "DNS lookups by result.",
                "result",
            ),
            pipeline_failures: {
                let m = IntCounterVec::new(
                    Opts::new(
                        "trawl_pipeline_failures_total",
                        "Host tasks that failed and will run again, by task and failing stage.",
                    ),
                    &["task", "stage"],
                )
                .expect("valid metric");
                register(&registry, &docs, m.clone());
                m
            },
            due_hosts: gauge(
                "trawl_due_hosts",
                "Dormant hosts with queued work, waiting in the due index.",
            ),
            parse_cuts: counter_vec(
                "trawl_parse_cut_total",
                "HTML parses stopped at a bound before the end of the page (what was read before is kept), by reason.",
                "reason",
            ),
            refreshes: counter_vec(
                "trawl_refreshes_total",
                "Refetches of URLs fetched before, by result.",
                "result",
            ),
            removed: counter_vec(
                "trawl_removed_total",
                "URLs removed from the crawl, by reason.",
                "reason",
            ),
            refresh_due: {
                let m = IntGaugeVec::new(
                    Opts::new(
                        "trawl_refresh_due_urls",
                        "Scheduled refreshes due now, within the hour and within the day (minute resolution).",
                    ),
                    &["within"],
                )
                .expect("valid metric");
                register(&registry, &docs, m.clone());
                m
            },
            bridge_batches: counter_vec2(
                "trawl_bridge_batches_total",
                "Batches of URLs over the cluster bridge, by peer node and outcome.",
                &["peer", "outcome"],
            ),
            bridge_bytes: counter_vec2(
                "trawl_bridge_bytes_total",
                "Bridge frame bytes, by peer node and direction.",
                &["peer", "direction"],
            ),
            bridge_connections: counter_vec(
                "trawl_bridge_connections_total",
                "Bridge connections established, by peer node.",
                "peer",
            ),
            bridge_refusals: counter_vec(
                "trawl_bridge_refusals_total",
                "Bridge connections refused or cut off for what the other side sent, by reason.",
                "reason",
            ),
            gossip_rejected: counter_vec(
                "trawl_gossip_rejected_total",
                "Gossip datagrams dropped unread (not sealed with the cluster's key, replayed or stale), by reason.",
                "reason",
            ),
            bridge_disconnects: counter_vec(
                "trawl_bridge_disconnects_total",
                "Bridge connections lost for other reasons, by reason.",
                "reason",
            ),
            bridge_unacked: {
                let m = IntGaugeVec::new(
                    Opts::new(
                        "trawl_bridge_unacked_batches",
                        "Bridge batches sent to a peer node and not yet acked.",
                    ),
                    &["peer"],
                )
                .expect("valid metric");
                register(&registry, &docs, m.clone());
                m
            },
            uploads: counter_vec(
                "trawl_uploads_total",
                "WARC file uploads to object storage, by result.",
                "result",
            ),
            upload_bytes: counter(
                "trawl_upload_bytes_total",
                "Bytes of WARC files uploaded to object storage and verified.",
            ),
            upload_segments: counter_vec(
                "trawl_upload_segments_total",
                "Segments of the open WARC file put in object storage by checkpoints, by result.",
                "result",
            ),
            upload_segment_bytes: counter(
                "trawl_upload_segment_bytes_total",
                "Bytes of WARC file segments put in object storage and verified.",
            ),
            upload_segments_deleted: counter(
                "trawl_upload_segments_deleted_total",
                "Segments deleted once their WARC file was in object storage whole.",
            ),
            upload_files_joined: counter(
                "trawl_upload_files_joined_total",
                "WARC files of earlier runs put together from their segments in object storage.",
            ),
            manifests: counter_vec(
                "trawl_manifests_total",
                "Manifests created in the partitions' checkpoint chains, by kind.",
                "kind",
            ),
            manifest_failures: counter(
                "trawl_manifest_failures_total",
                "Manifest creates that failed (the state store unreachable or refusing).",
            ),
            partition_stops: counter_vec(
                "trawl_partition_stops_total",
                "Partitions stopped by their lease, by reason (fenced, lapsed, released).",
                "reason",
            ),
            partitions_shunned: gauge(
                "trawl_partitions_shunned",
                "Partitions this node will not take for now (could not open, read or checkpoint them); gossip passes them to other nodes.",
            ),
            checkpoint_bytes: counter(
                "trawl_checkpoint_bytes_total",
                "Bytes of checkpoint files uploaded to the state store.",
            ),
            chain_objects_deleted: counter(
                "trawl_chain_objects_deleted_total",
                "Objects deleted from the partitions' checkpoint chains (superseded manifests, files no restore reads).",
            ),
            restore_bytes: counter_vec(
                "trawl_restore_bytes_total",
                "Bytes of partitions restored from the state store, by source (downloaded, reused).",
                "source",
            ),
            partitions: gauge(
                "trawl_partitions",
                "Partitions of the crawl (each node reports the count).",
            ),
            partitions_held: gauge("trawl_partitions_held", "Partitions this node holds."),
            cluster_live_peers: gauge(
                "trawl_cluster_live_peers",
                "Peer nodes gossip shows live now.",
            ),
            cluster_alone: gauge(
                "trawl_cluster_alone",
                "1 while this node has peers configured and has heard none for a few gossip rounds (gossip not formed, or broken).",
            ),
            upload_pending: gauge(
                "trawl_upload_pending_files",
                "Closed WARC files waiting to be uploaded to object storage, or being uploaded.",
            ),
            storage_available: gauge(
                "trawl_storage_available_bytes",
                "Bytes free to trawl on the data directory's filesystem.",
            ),
            storage_capacity: gauge(
                "trawl_storage_capacity_bytes",
                "Size of the data directory's filesystem.",
            ),
            store_memory: gauge_vec(
                "trawl_store_memory_bytes",
                "Bytes the partition stores' shared RocksDB memory holds, by part: cache (the block cache: data blocks and the memtables' reservation; index and filter blocks are held by the open SSTs, outside it) and memtables (what every partition's memtables hold).",
                "part",
            ),
            store_memory_limit: gauge_vec(
                "trawl_store_memory_limit_bytes",
                "The bound of each part of trawl_store_memory_bytes: [storage] block_cache_bytes and write_buffer_bytes.",
                "part",
            ),
            catalog: docs.take(),
            at_render: Mutex::new(Vec::new()),
            registry,
        }
    }

    /// Counts a response by its status class.
    pub fn count_status(&self, status: u16) {
        let class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.pages.with_label_values(&[class]).inc();
    }

    /// Shows partition `id`'s queue size and active hosts.
    pub fn set_partition(&self, id: u16, queued: u64, active_hosts: usize) {
        let id = id.to_string();
        self.partition_queued
            .with_label_values(&[&id])
            .set(queued as i64);
        self.partition_active_hosts
            .with_label_values(&[&id])
            .set(active_hosts as i64);
    }

    /// Removes partition `id`'s series: it stopped here (a cluster hands
    /// it to another node), and a dashboard should not show it frozen.
    pub fn forget_partition(&self, id: u16) {
        let id = id.to_string();
        // Absent when the partition never reported: nothing to remove.
        let _ = self.partition_queued.remove_label_values(&[&id]);
        let _ = self.partition_active_hosts.remove_label_values(&[&id]);
    }

    /// What each metric is (the reference's one source).
    pub fn catalog(&self) -> &[MetricDoc] {
        &self.catalog
    }

    /// Runs `hook` before each render, to set gauges from figures read
    /// only when someone looks. A hook of the same `name` is replaced: a
    /// node started again on these metrics reads its new stores, and the
    /// old hook (holding the old cache) is dropped. A hook must not call
    /// this or [`Metrics::render`] (the hooks' lock is held while they
    /// run).
    pub fn read_at_render(
        &self,
        name: &'static str,
        hook: impl Fn(&Metrics) + Send + Sync + 'static,
    ) {
        let mut hooks = self
            .at_render
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        hooks.retain(|(n, _)| *n != name);
        hooks.push((name, Box::new(hook)));
    }

    /// Sets the store memory gauges from a reading.
    pub fn set_store_memory(&self, memory: crate::store::StoreMemory) {
        let bytes = |b: usize| i64::try_from(b).unwrap_or(i64::MAX);
        for (part, now, limit) in [
            ("cache", memory.cache, memory.cache_limit),
            ("memtables", memory.memtables, memory.memtable_limit),
        ] {
            self.store_memory.with_label_values(&[part]).set(bytes(now));
            self.store_memory_limit
                .with_label_values(&[part])
                .set(bytes(limit));
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        for (_, hook) in self
            .at_render
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
        {
            hook(self);
        }
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding cannot fail");
        String::from_utf8(out).expect("prometheus text is UTF-8")
    }
}

/// A gauge of units held through [`GaugeHold`]s, with a second gauge of
/// the most held at once since start: a gauge read now and then misses
/// short peaks, and a bound is checked against the true peak.
pub struct HeldGauge {
    /// Units held now and the peak, changed together under the lock so
    /// the two gauges are set in the order the changes happened.
    counts: Mutex<(i64, i64)>,
    now: IntGauge,
    peak: IntGauge,
}

impl HeldGauge {
    /// Counts into `now` and `peak` (registered by the caller).
    pub fn new(now: IntGauge, peak: IntGauge) -> Self {
        HeldGauge {
            counts: Mutex::new((now.get(), peak.get())),
            now,
            peak,
        }
    }

    /// Units held now.
    pub fn get(&self) -> i64 {
        self.now.get()
    }

    /// The most units held at once.
    pub fn peak(&self) -> i64 {
        self.peak.get()
    }

    fn add(&self, delta: i64) {
        let mut counts = self.counts.lock().expect("held gauge lock");
        counts.0 += delta;
        self.now.set(counts.0);
        if counts.0 > counts.1 {
            counts.1 = counts.0;
            self.peak.set(counts.1);
        }
    }
}

impl std::fmt::Debug for HeldGauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeldGauge({}, peak {})", self.get(), self.peak())
    }
}

/// One unit of a [`HeldGauge`] held for as long as this value lives: taken
/// back when it is dropped, however the holder ends (a step done, an early
/// return on a failure, a future dropped with its actor), so the gauge
/// counts each holder exactly once.
#[must_use = "the unit is taken back when this value is dropped"]
#[derive(Debug)]
pub struct GaugeHold(Arc<HeldGauge>);

impl GaugeHold {
    /// Adds one to `gauge` until the returned value is dropped.
    pub fn new(gauge: &Arc<HeldGauge>) -> Self {
        gauge.add(1);
        GaugeHold(gauge.clone())
    }
}

impl Drop for GaugeHold {
    fn drop(&mut self) {
        self.0.add(-1);
    }
}

/// Registers the process's metrics (`process_resident_memory_bytes`,
/// `process_cpu_seconds_total`, `process_open_fds`, ...), read from
/// `/proc` at each scrape. Each registry gets its own collector: several
/// nodes in one process (tests) each export the process's figures.
#[cfg(target_os = "linux")]
fn register_process_collector(registry: &Registry) {
    registry
        .register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("unique metric");
}

/// `/proc` is Linux only: elsewhere the process metrics are absent.
#[cfg(not(target_os = "linux"))]
fn register_process_collector(_: &Registry) {}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_hold_counts_once_however_its_holder_ends() {
        let m = Metrics::new();
        let gauge = &m.pipeline_backlog;
        let first = GaugeHold::new(gauge);
        let second = GaugeHold::new(gauge);
        assert_eq!(gauge.get(), 2);
        drop(first);
        assert_eq!(gauge.get(), 1);
        // A holder that fails half-way returns early; its hold goes too.
        let fails = |g: &Arc<HeldGauge>| -> Result<(), ()> {
            let _hold = GaugeHold::new(g);
            let failed_step: Result<(), ()> = Err(());
            failed_step?;
            Ok(())
        };
        assert!(fails(gauge).is_err());
        assert_eq!(gauge.get(), 1);
        drop(second);
        assert_eq!(gauge.get(), 0);
        assert_eq!(gauge.peak(), 2, "the most held at once");
        let text = m.render();
        assert!(text.contains("trawl_pipeline_backlog_pages 0"), "{text}");
        assert!(
            text.contains("trawl_pipeline_backlog_peak_pages 2"),
            "{text}"
        );
    }

    #[test]
    fn renders_counted_series() {
        let m = Metrics::new();
        m.count_status(204);
        m.count_status(404);
        m.fetch_errors.with_label_values(&["timeout"]).inc();
        m.fetch_duration.observe(0.02);
        m.parse_cuts.with_label_values(&["depth"]).inc();
        let text = m.render();
        assert!(
            text.contains("trawl_pages_total{class=\"2xx\"} 1"),
            "{text}"
        );
        assert!(text.contains("trawl_pages_total{class=\"4xx\"} 1"));
        assert!(text.contains("trawl_fetch_errors_total{kind=\"timeout\"} 1"));
        assert!(text.contains("trawl_stage_seconds_count{stage=\"fetch\"} 1"));
        assert!(text.contains("trawl_stage_seconds_count{stage=\"parse\"} 0"));
        assert!(text.contains("trawl_parse_cut_total{reason=\"depth\"} 1"));
        assert!(text.contains("# HELP trawl_frontier_size"));
        assert!(text.contains("trawl_fetch_errors_total{kind=\"dns\"} 0"));
    }

    #[test]
    fn a_cluster_nodes_series_carry_its_id() {
        let m = Metrics::for_node(Some("n1"));
        m.count_status(200);
        let text = m.render();
        assert!(
            text.contains("trawl_pages_total{class=\"2xx\",node=\"n1\"} 1"),
            "{text}"
        );
        assert!(!Metrics::new().render().contains("node="));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_have_their_standard_names_and_the_node_label() {
        let text = Metrics::for_node(Some("n1")).render();
        for name in [
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
            "process_open_fds",
        ] {
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name} missing: {text}"));
            assert!(
                line.starts_with(&format!("{name}{{node=\"n1\"}} ")),
                "{line}"
            );
        }
        let rss = text
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes{node=\"n1\"} "))
            .and_then(|v| v.parse::<f64>().ok())
            .expect("a number");
        assert!(rss > 0.0);
    }

    #[test]
    fn a_stopped_partition_leaves_no_series() {
        let m = Metrics::new();
        m.set_partition(3, 12, 2);
        m.set_partition(4, 1, 1);
        let text = m.render();
        assert!(
            text.contains("trawl_partition_queued_urls{partition=\"3\"} 12"),
            "{text}"
        );
        assert!(text.contains("trawl_partition_active_hosts{partition=\"3\"} 2"));
        m.forget_partition(3);
        m.forget_partition(9);
        let text = m.render();
        assert!(!text.contains("partition=\"3\""), "{text}");
        assert!(text.contains("trawl_partition_queued_urls{partition=\"4\"} 1"));
    }

    #[test]
    fn a_render_reads_the_store_memory_at_that_moment() {
        let m = Metrics::new();
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = reads.clone();
        m.read_at_render("store_memory", |_| panic!("replaced by the next"));
        m.read_at_render("store_memory", move |m| {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            m.set_store_memory(crate::store::StoreMemory {
                cache: n * 1000,
                cache_limit: 5000,
                memtables: n * 10,
                memtable_limit: 50,
            });
        });
        let first = m.render();
        assert!(
            first.contains("trawl_store_memory_bytes{part=\"cache\"} 1000\n"),
            "{first}"
        );
        assert!(first.contains("trawl_store_memory_bytes{part=\"memtables\"} 10\n"));
        assert!(first.contains("trawl_store_memory_limit_bytes{part=\"cache\"} 5000\n"));
        assert!(first.contains("trawl_store_memory_limit_bytes{part=\"memtables\"} 50\n"));
        let second = m.render();
        assert!(
            second.contains("trawl_store_memory_bytes{part=\"cache\"} 2000\n"),
            "{second}"
        );
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// `docs/metrics.md` is what the registry holds: every metric, its
    /// type, labels and help (`TRAWL_BLESS=1` rewrites it).
    #[test]
    fn the_metrics_reference_is_generated_from_the_registry() {
        let m = Metrics::for_node(Some("n1"));
        let catalog = m.catalog();
        assert!(catalog.len() > 40, "{catalog:?}");
        let stage = catalog
            .iter()
            .find(|d| d.name == "trawl_stage_seconds")
            .expect("the stage histogram");
        assert_eq!(
            (stage.kind, &stage.labels[..]),
            ("histogram", &["stage".to_owned()][..])
        );
        let errors = catalog
            .iter()
            .find(|d| d.name == "trawl_fetch_errors_total")
            .expect("fetch errors");
        assert_eq!(errors.kind, "counter");
        // Every family the node exports is in the catalog.
        for family in m.registry.gather() {
            let name = family.name();
            assert!(
                name.starts_with("process_") || catalog.iter().any(|d| d.name == name),
                "{name} is not in the catalog"
            );
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
        let generated = catalog_markdown(catalog);
        if std::env::var("TRAWL_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &generated).unwrap();
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == generated,
            "docs/metrics.md is out of date: TRAWL_BLESS=1 cargo test --release --lib metrics"
        );
    }
}

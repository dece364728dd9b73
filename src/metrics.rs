//! Every Prometheus metric trawl exports, declared in one place.
//!
//! Labels are bounded sets only (status class, error kind, outcome): never a
//! URL or a host name, which would grow the series without limit.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// The node's metrics and the registry that exports them.
pub struct Metrics {
    registry: Registry,
    /// Responses by status class (`2xx` … `5xx`).
    pub pages: IntCounterVec,
    /// Body bytes received.
    pub fetched_bytes: IntCounter,
    /// Request start to last body byte.
    pub fetch_duration: Histogram,
    /// Fetches that produced no response, by error kind.
    pub fetch_errors: IntCounterVec,
    /// URLs queued and not yet completed.
    pub frontier_size: IntGauge,
    /// HostActors alive.
    pub active_hosts: IntGauge,
    /// Compressed bytes written to WARC files.
    pub warc_bytes: IntCounter,
    /// WARC records written.
    pub warc_records: IntCounter,
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
    /// The seen filter's answers (`absent`, `maybe_seen`,
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
    /// `refused_by_peer`, `bad_node_id`), protocol violations
    /// (`malformed`, `too_large`, `unexpected`), and accepted connections
    /// closed at once while too many are in their handshake (`busy`).
    pub bridge_refusals: IntCounterVec,
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
        let counter_vec = |name: &str, help: &str, label: &str| {
            let m = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            registry
                .register(Box::new(m.clone()))
                .expect("unique metric");
            m
        };
        let counter = |name: &str, help: &str| {
            let m = IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(m.clone()))
                .expect("unique metric");
            m
        };
        let gauge = |name: &str, help: &str| {
            let m = IntGauge::new(name, help).expect("valid metric");
            registry
                .register(Box::new(m.clone()))
                .expect("unique metric");
            m
        };
        let counter_vec2 = |name: &str, help: &str, labels: &[&str]| {
            let m = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(m.clone()))
                .expect("unique metric");
            m
        };
        let fetch_duration = Histogram::with_opts(
            HistogramOpts::new(
                "trawl_fetch_duration_seconds",
                "Time from request start to the last body byte.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
        )
        .expect("valid metric");
        registry
            .register(Box::new(fetch_duration.clone()))
            .expect("unique metric");
        Metrics {
            pages: counter_vec(
                "trawl_pages_total",
                "Responses received, by status class.",
                "class",
            ),
            fetched_bytes: counter("trawl_fetched_bytes_total", "Response body bytes received."),
            fetch_duration,
            fetch_errors: counter_vec(
                "trawl_fetch_errors_total",
                "Fetches that produced no response, by error kind.",
                "kind",
            ),
            frontier_size: gauge("trawl_frontier_size", "URLs queued and not yet completed."),
            active_hosts: gauge("trawl_active_host_actors", "Host actors currently active."),
            warc_bytes: counter(
                "trawl_warc_bytes_total",
                "Compressed bytes written to WARC files.",
            ),
            warc_records: counter("trawl_warc_records_total", "WARC records written."),
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
                "Answers of the URL-seen Bloom filter; false_positive / (false_positive + absent) is its observed false-positive rate.",
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
                registry
                    .register(Box::new(m.clone()))
                    .expect("unique metric");
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
                registry
                    .register(Box::new(m.clone()))
                    .expect("unique metric");
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
                registry
                    .register(Box::new(m.clone()))
                    .expect("unique metric");
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

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding cannot fail");
        String::from_utf8(out).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(text.contains("trawl_fetch_duration_seconds_count 1"));
        assert!(text.contains("trawl_parse_cut_total{reason=\"depth\"} 1"));
        assert!(text.contains("# HELP trawl_frontier_size"));
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
}

//! The hosts of the simulated partitions: the host machine production runs
//! (`src/frontier/host.rs`, [`HostMachine`]), unchanged, over a queue of
//! pages that the partition's state says are not yet done, and the
//! responses and errors the simulated servers answer with.
//!
//! Each host's queue holds the pages below its mark, less those completed;
//! each page completed queues the next (until the simulation stops
//! discovering), so a host has work while the faults last: the machine
//! decides when its next request
//! leaves (robots.txt first, the delay after each response, the backoff
//! after a timeout, the hold of a request of an earlier life restored
//! from the state), and the driver only carries its effects out.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use trawl::clock::Now;
use trawl::config::Config;
use trawl::fetch::{DnsOverrides, FetchError, FetchResponse};
use trawl::frontier::host::{HostSettings, QueueSource};
use trawl::frontier::importance::Rank;
use trawl::frontier::lifecycle::RecrawlSettings;
use trawl::frontier::response::RetryLimits;
use trawl::frontier::{EntryKind, Priority};
use trawl::metrics::Metrics;
use trawl::politeness::Policy;
use trawl::robots::cache::RobotsSettings;
use trawl::store::codec::{queue_key, queue_prefix, QueueValue};
use trawl::store::{QueueEntry, StoreError, UrlRecord};
use trawl::url::Fingerprint;

/// The floor of the delay between two requests to a host; also what a
/// clean drain leaves owed, as the node's ownership actor says
/// (`politeness.min_delay`).
pub(super) const MIN_DELAY: Duration = Duration::from_millis(100);

/// The priority every simulated page is queued at.
const LEVEL: Priority = Priority::NORMAL;
/// [`LEVEL`] as the bit [`trawl::frontier::host::HostMachine::wake`] reads.
pub(super) const LEVEL_BIT: u8 = 1 << 2;

/// The settings of every simulated host: the default politeness but
/// faster (a 100 ms floor, the response time as the delay, a backoff of at
/// most 2 s and no parking, so a host slowed by timeouts is back within
/// the run), robots.txt fetched first, passivation only once a host's
/// queue is empty (an hour after its last response otherwise, longer than
/// a run), requests abandoned at `request_timeout`.
pub(super) fn settings(request_timeout: Duration) -> Arc<HostSettings> {
    let mut policy = Policy::simple(MIN_DELAY, 1.0, 1);
    policy.max_delay = Duration::from_secs(2);
    policy.backoff_base = Duration::from_millis(200);
    policy.backoff_max = Duration::from_secs(2);
    policy.park_after_failures = 0;
    Arc::new(HostSettings {
        policy,
        robots: RobotsSettings {
            product_token: "trawl".into(),
            ttl: Duration::from_secs(24 * 3600),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(2),
            give_up_after: Duration::from_secs(24 * 3600),
        },
        retries: RetryLimits {
            max_attempts: 3,
            max_throttled_attempts: 20,
        },
        max_redirects: 5,
        archive_non_html: true,
        exact_dedup: false,
        sitemaps: None,
        crashed: false,
        ip_slots: None,
        dns: DnsOverrides::default(),
        passivate_after: Duration::from_secs(3600),
        request_timeout,
        recrawl: RecrawlSettings::from_config(&Config::defaults().recrawl),
        ordering: Config::defaults().frontier.ordering,
        host_cycle: Duration::ZERO,
        dormant_in_memory: 4_096,
    })
}

/// One registry for every simulated host of every seed (registering the
/// metrics is the costly part of making them).
pub(super) fn metrics() -> Arc<Metrics> {
    static METRICS: OnceLock<Arc<Metrics>> = OnceLock::new();
    METRICS.get_or_init(|| Arc::new(Metrics::new())).clone()
}

/// The name of host `h` of partition `p`.
pub(super) fn name(p: usize, h: usize) -> String {
    format!("h{h}.p{p}.test")
}

/// Host `host`'s queue as the partition's store holds it: every page below
/// `queued` not yet completed (`done`), in page order.
pub(super) struct Pages<'a> {
    pub host: usize,
    pub done: &'a BTreeMap<(usize, u64), u64>,
    pub queued: u64,
}

impl Pages<'_> {
    fn entry(name: &str, page: u64) -> QueueEntry {
        let url = format!("http://{name}/{page}");
        QueueEntry {
            key: queue_key(name, LEVEL, Rank::FIFO, page),
            value: QueueValue {
                fp: Fingerprint::of(&url),
                depth: 1,
                kind: EntryKind::Page,
                url,
                provenance: Default::default(),
            },
            recrawl: false,
            previous: None,
        }
    }
}

impl QueueSource for Pages<'_> {
    fn queue_page(
        &self,
        host: &str,
        priority: Priority,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        if priority != LEVEL {
            return Ok(Vec::new());
        }
        let first = after.map_or(0, |key| page_of(key) + 1);
        Ok((first..self.queued)
            .filter(|&page| !self.done.contains_key(&(self.host, page)))
            .take(n)
            .map(|page| Self::entry(host, page))
            .collect())
    }

    fn recrawl_page(
        &self,
        _host: &str,
        _due_by_ms: u64,
        _after: Option<&[u8]>,
        _n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        Ok(Vec::new())
    }

    fn next_recrawl_ms(
        &self,
        _host: &str,
        _after: Option<&[u8]>,
    ) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    fn url_record(&self, _fp: Fingerprint) -> Result<Option<UrlRecord>, StoreError> {
        Ok(None)
    }
}

/// The page a queue key names (its sequence number is the page's).
pub(super) fn page_of(key: &[u8]) -> u64 {
    let seq = key.len().saturating_sub(8);
    key.get(seq..)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// Whether `key` is a queue key of `name` (not robots.txt's own record).
pub(super) fn is_queue_key(name: &str, key: &[u8]) -> bool {
    key.starts_with(&queue_prefix(name, LEVEL))
}

/// A server's answer after `took` on the wire: robots.txt is not found
/// (every page allowed), a page is a small HTML page.
pub(super) fn answer(robots: bool, took: Duration, now: Now) -> Result<FetchResponse, FetchError> {
    let (status, body): (u16, &'static [u8]) = match robots {
        true => (404, b""),
        false => (200, b"<html><body>simulated</body></html>"),
    };
    Ok(FetchResponse {
        status,
        headers: vec![("content-type".into(), "text/html".into())],
        head: Vec::new(),
        request_head: Vec::new(),
        body: Bytes::from_static(body),
        truncated: false,
        ip: None,
        started_at: now.wall.checked_sub(took).unwrap_or(SystemTime::UNIX_EPOCH),
        elapsed: took,
        pipeline: None,
    })
}

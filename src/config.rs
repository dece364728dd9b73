//! Typed configuration.
//!
//! The defaults live in `config/trawl.toml`, which the binary embeds; a user
//! file is merged on top of them key by key, so a file only names what it
//! changes. Every struct denies unknown fields, and the error names the full
//! path of the offending key (`politeness.min_dely`), because a silently
//! ignored typo in a politeness setting is how crawlers end up overloading
//! sites.
//!
//! This module is a leaf: it imports nothing from the crate, so any module
//! can read the config without the config depending on it. Domain modules
//! build their own small settings from these plain values (for example
//! `BudgetSettings::from(&config.budget)`,
//! `SeenSettings::per_partition(&config.seen, partitions)`), and the checks
//! that need domain code (compiling the scope's regexes, the near-duplicate
//! index's limit) are in `src/validate.rs`, run by every caller of
//! [`Config::load`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// The embedded defaults (`config/trawl.toml`).
pub const DEFAULT_TOML: &str = include_str!("../config/trawl.toml");

/// Errors raised while loading or validating a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("config {origin} is not valid TOML: {message}")]
    Syntax { origin: String, message: String },
    /// A key is unknown or has the wrong type; `key` is the dotted path.
    #[error("config key `{key}`: {message}")]
    Key { key: String, message: String },
    /// The values parse but contradict each other or are out of range.
    #[error("invalid config: {0}")]
    Invalid(String),
}

/// The whole configuration of a node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What to crawl and how deep.
    pub crawl: CrawlConfig,
    /// Per-host request pacing.
    pub politeness: PolitenessConfig,
    /// robots.txt caching and retries.
    pub robots: RobotsConfig,
    /// Sitemap discovery and limits.
    pub sitemap: SitemapConfig,
    /// Name resolution.
    pub dns: DnsConfig,
    /// The HTTP client.
    pub fetch: FetchConfig,
    /// Durable state.
    pub storage: StorageConfig,
    /// WARC output.
    pub warc: WarcConfig,
    /// JSON-lines output events.
    pub events: EventsConfig,
    /// The admin HTTP API.
    pub admin: AdminConfig,
    /// Logging.
    pub log: LogConfig,
    /// HTML parsing.
    pub parse: ParseConfig,
    /// URL normal form.
    pub url: UrlConfig,
    /// Which URLs the crawl admits.
    pub scope: ScopeConfig,
    /// Crawler-trap defences.
    pub traps: TrapsConfig,
    /// Content dedup.
    pub dedup: DedupConfig,
    /// The URL-seen set.
    pub seen: SeenConfig,
    /// Host and domain budgets.
    pub budget: BudgetConfig,
    /// Which hosts are active at once.
    pub frontier: FrontierConfig,
    /// Refreshing fetched URLs.
    pub recrawl: RecrawlConfig,
    /// Running as one node of a cluster.
    pub cluster: ClusterConfig,
    /// Uploading closed WARC files to object storage.
    pub upload: UploadConfig,
    /// Crawl reports.
    pub report: ReportConfig,
    /// An earlier crawl this one follows.
    pub previous: PreviousConfig,
}

/// An object store's options (`[upload] options`, `[cluster]
/// state_options`): passed to the store as given, but never shown. Their
/// `Debug` (logs) and [`Config::to_toml`] (`trawl config print`) write
/// [`REDACTED`] for the value of every key that names a secret
/// ([`StoreOptions::is_secret`]): credentials in a config file must not
/// reach a terminal, a log or a support ticket.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StoreOptions(pub BTreeMap<String, String>);

/// What a secret's value is shown as.
pub const REDACTED: &str = "<redacted>";

impl StoreOptions {
    /// Whether the option `key` holds a secret: keys, secrets, tokens,
    /// passwords, SAS signatures and service-account keys of the stores'
    /// options (`aws_secret_access_key`, `aws_session_token`,
    /// `azure_storage_account_key`, `azure_storage_sas_key`,
    /// `azure_client_secret`, `google_service_account_key`, ...). An
    /// access key *id* names a key and is shown.
    pub fn is_secret(key: &str) -> bool {
        let key = key.to_ascii_lowercase();
        ["secret", "token", "password", "sas", "credential"]
            .iter()
            .any(|word| key.contains(word))
            || (key.contains("key") && !key.ends_with("key_id"))
    }

    /// The options with every secret's value replaced by [`REDACTED`].
    pub fn redacted(&self) -> StoreOptions {
        let shown = self
            .0
            .iter()
            .map(|(k, v)| {
                let v = if Self::is_secret(k) { REDACTED } else { v };
                (k.clone(), v.to_owned())
            })
            .collect();
        StoreOptions(shown)
    }
}

impl std::ops::Deref for StoreOptions {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.redacted().0.iter()).finish()
    }
}

/// `[fetch] proxy`: a URL whose password (`http://user:password@host:port`)
/// is used as written but never shown: its `Debug` and
/// [`Config::to_toml`] write [`REDACTED`] in its place.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProxyUrl(pub String);

impl ProxyUrl {
    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The URL with its user information (name and password), if it has
    /// any, replaced by [`REDACTED`]: everything between the scheme and
    /// the last `@`, however the URL is spelled (`http:user:pw@h`,
    /// `user:pw@h:1`, a `/` in the password), so no spelling shows it.
    pub fn redacted(&self) -> ProxyUrl {
        let url = &self.0;
        let Some(at) = url.rfind('@') else {
            return self.clone();
        };
        let start = match url.find("://") {
            Some(i) if i + 3 <= at => i + 3,
            // `http:user:pw@h` (a scheme without slashes), else all of it.
            _ => ["http:", "https:"]
                .iter()
                .find(|p| {
                    url.get(..p.len())
                        .is_some_and(|s| s.eq_ignore_ascii_case(p))
                })
                .map_or(0, |p| p.len()),
        };
        ProxyUrl(format!("{}{REDACTED}{}", &url[..start], &url[at..]))
    }
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.redacted().0, f)
    }
}

/// `[upload]`: closed WARC files are copied to object storage (see
/// `src/upload/`). The URL and options are checked against the store's
/// own keys in `src/validate.rs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadConfig {
    /// Upload closed WARC files.
    pub enabled: bool,
    /// Where: `s3://bucket/prefix`, `gs://bucket/prefix`,
    /// `az://container/prefix` or `file:///absolute/dir`.
    pub url: String,
    /// Options of the store (`aws_endpoint`, `aws_region`, ...), passed to
    /// it as given; the store's environment variables are read too.
    pub options: StoreOptions,
    /// Delete a local file once its upload is verified and recorded.
    pub delete_after_upload: bool,
    /// How an upload is verified: `read-back` (the object is read back and
    /// its SHA-256 compared) or `size` (its size, and the SHA-256 stored in
    /// its metadata where the store keeps metadata).
    pub verify: VerifyMode,
    /// Retries of one request to the store (with exponential backoff)
    /// before the file's upload fails.
    pub retries: usize,
    /// Wait before a failed file is tried again; doubles with each
    /// failure of the file, up to `max_retry_delay`.
    #[serde(with = "humantime_serde")]
    pub retry_delay: Duration,
    /// The longest wait between two tries of one file.
    #[serde(with = "humantime_serde")]
    pub max_retry_delay: Duration,
    /// Files uploaded at once.
    pub concurrency: usize,
    /// Files larger than this are uploaded in parts of this size.
    pub part_size: usize,
    /// At shutdown, how long the node waits for pending uploads (the
    /// file closed last among them); what is left is uploaded at the next
    /// start.
    #[serde(with = "humantime_serde")]
    pub shutdown_wait: Duration,
}

/// How an upload is verified (`[upload] verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerifyMode {
    /// Read the object back and compare its SHA-256 and size.
    ReadBack,
    /// Compare the object's size (and the SHA-256 in its metadata, where
    /// the store returns metadata).
    Size,
}

/// `[cluster]`: one node of a cluster (see `src/cluster/`). Checked when
/// loaded; the cluster itself is being built (issue 10): with `enabled`
/// on, a node does not yet join anything.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Run as a cluster node.
    pub enabled: bool,
    /// Nodes of one cluster share this id; others are refused.
    pub cluster_id: String,
    /// This node's id: letters, digits, `-` and `_`, at most 64; unique in
    /// the cluster, and stable across restarts (its files are named by it).
    pub node_id: String,
    /// UDP address gossip listens on.
    pub gossip: String,
    /// TCP address the bridge listens on.
    pub bridge: String,
    /// Gossip addresses of other nodes to join through.
    pub peers: Vec<String>,
    /// How often gossip runs; a node silent for about eight of these is
    /// considered dead.
    #[serde(with = "humantime_serde")]
    pub gossip_interval: Duration,
    /// Where partitions keep their durable copy: a chain of checkpoints
    /// per partition (`s3://`, `gs://`, `az://` or `file:///dir`). Empty:
    /// no durable copy; a partition lives on the disk of the node that
    /// holds it, and the cluster is restart-in-place.
    pub state_url: String,
    /// Options of the state store, as `[upload] options` (its environment
    /// variables are read too).
    pub state_options: StoreOptions,
    /// How long an owner may fetch after its last checkpoint or renewal
    /// the store accepted; a new owner holds every host of a partition it
    /// takes for `lease + fetch.timeout`.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// How often an owner publishes a checkpoint (at most half the lease).
    #[serde(with = "humantime_serde")]
    pub checkpoint_interval: Duration,
    /// The cluster CA's certificate (PEM): bridge peers must present a
    /// certificate it issued.
    pub tls_ca: PathBuf,
    /// This node's certificate (PEM), naming `<node_id>.node.trawl`.
    pub tls_cert: PathBuf,
    /// Its private key (PEM).
    pub tls_key: PathBuf,
    /// A file holding the cluster's gossip key as hex (32 bytes or more).
    pub gossip_key: PathBuf,
    /// Run without authentication (no TLS, plain gossip): only where no
    /// one else can reach the nodes.
    pub insecure: bool,
}

/// `[recrawl]`: when fetched URLs are fetched again (the scheduler is
/// `src/frontier/recrawl.rs`; a URL's life is `src/frontier/lifecycle.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecrawlConfig {
    /// Fetch URLs again; off makes every URL a one-time fetch.
    pub enabled: bool,
    /// No URL is fetched again sooner than this after its last fetch.
    #[serde(with = "humantime_serde")]
    pub min_interval: Duration,
    /// Every URL is fetched again at least this often.
    #[serde(with = "humantime_serde")]
    pub max_interval: Duration,
    /// The interval of a URL without history, and the reference of the
    /// scheduler: a URL changing once per `default_interval` is fetched
    /// once per `default_interval`.
    #[serde(with = "humantime_serde")]
    pub default_interval: Duration,
    /// The share of a host's requests that refreshes may take while new
    /// URLs of the host are also waiting (0 < share ≤ 1).
    pub refresh_share: f64,
    /// Visible texts whose simhashes differ in at most this many bits are
    /// "unchanged" even when their bytes differ (a clock in a footer).
    pub change_distance: u32,
}

/// `[frontier]`: which hosts have a live actor.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontierConfig {
    /// Host actors alive at once per node (0 = 4 × a fixed
    /// `fetch.concurrency`, or [`Concurrency::AUTO_ACTIVE_HOSTS`]).
    pub max_active_hosts: usize,
    /// A host whose next possible request is further away than this is
    /// passivated (its state goes to the store) and revived by the due
    /// index when it comes due.
    #[serde(with = "humantime_serde")]
    pub passivate_after: Duration,
    /// How each host's queue is ordered within a priority level: in
    /// admission order (the default), or by estimated importance
    /// (`src/frontier/importance.rs`).
    #[serde(default)]
    pub ordering: crate::frontier::importance::Ordering,
    /// When hosts wait for a slot, a host that has held its slot this
    /// long is asked to give it up (`frontier/activation.rs`,
    /// `Activation::with_cycle`); zero (the default) never asks.
    #[serde(default, with = "humantime_serde")]
    pub host_cycle: Duration,
    /// Dormant hosts each partition's due index keeps in memory, of each
    /// kind (those coming due first, those due and waiting for a slot);
    /// the others wait in the partition's store
    /// (`frontier/due.rs`, `Window`).
    #[serde(default = "default_dormant_hosts_in_memory")]
    pub dormant_hosts_in_memory: usize,
}

/// `[frontier] dormant_hosts_in_memory` when a config leaves it out.
fn default_dormant_hosts_in_memory() -> usize {
    4_096
}

impl FrontierConfig {
    /// `max_active_hosts` with 0 resolved against `concurrency`.
    pub fn active_hosts_cap(&self, concurrency: Concurrency) -> usize {
        match (self.max_active_hosts, concurrency) {
            (0, Concurrency::Fixed(n)) => n.saturating_mul(4).max(1),
            (0, Concurrency::Auto) => Concurrency::AUTO_ACTIVE_HOSTS,
            (cap, _) => cap,
        }
    }
}

/// `[budget]`: host and domain page budgets (rules in
/// `src/frontier/budget.rs`, which turns these into its `BudgetSettings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Pages any domain may have, linked to or not.
    pub base_pages: u64,
    /// Extra pages per distinct other domain linking to it.
    pub pages_per_linking_domain: u64,
    /// Upper bound of a domain's budget; 0: none.
    pub max_pages_per_domain: u64,
    /// URLs any one host may have; 0: no cap.
    pub max_urls_per_host: u64,
    /// The base budget of a domain the operator seeded (instead of
    /// `base_pages`): the site asked for is crawled, still under the caps.
    #[serde(default = "BudgetConfig::default_seeded_base_pages")]
    pub seeded_base_pages: u64,
}

impl BudgetConfig {
    fn default_seeded_base_pages() -> u64 {
        1_000_000
    }
}

/// `[seen] mode`: how the URL-seen set's Bloom filter is trusted (see
/// `src/dedup/bloom.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeenMode {
    /// Every "maybe" is confirmed in the store: zero false skips.
    Exact,
    /// A "maybe" is taken as seen: false skips at the filter's rate.
    Bloom,
}

/// The most `[seen] cache_urls` may ask for: 2^26 fingerprints, 1 GiB in
/// each of the partitions' caches and the SeenSet's shortcut.
pub const MAX_SEEN_CACHE_URLS: usize = 1 << 26;

/// `[seen]`: the URL-seen set's Bloom filter (see `src/dedup/bloom.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeenConfig {
    /// `exact` (no false skips) or `bloom` (false skips for speed).
    pub mode: SeenMode,
    /// URLs the crawl is expected to see, over all partitions.
    pub expected_urls: usize,
    /// The filter's false-positive rate at that size.
    pub false_positive_rate: f64,
    /// Fingerprints confirmed seen kept in memory, over all partitions
    /// (`src/dedup/seen_cache.rs`), and as many of the URLs this run
    /// admitted (`src/dedup/shortcut.rs`); 0: none.
    pub cache_urls: usize,
}

/// `[dedup]`: exact and near-duplicate content (see `src/dedup/`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// Store repeated payloads as revisit records.
    pub exact: bool,
    /// What to do with near-duplicate pages.
    pub near_duplicates: NearAction,
    /// Largest Hamming distance between simhashes of near-duplicates (≤ 3).
    pub near_distance: u32,
    /// Directory of the dedup index, relative to `storage.data_dir`.
    pub dir: PathBuf,
}

/// `[dedup] near_duplicates`: what to do with a near-duplicate page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NearAction {
    /// No near-duplicate detection.
    Off,
    /// Archive it, and name the page it resembles in its event.
    Flag,
    /// Do not archive it (its links are still followed).
    SkipArchive,
}

/// `[crawl]`: scope of the crawl.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrawlConfig {
    /// User-Agent header; its product token selects the robots.txt group.
    pub user_agent: String,
    /// Maximum hops from a seed; 0 means unlimited.
    pub max_depth: u32,
    /// Longest accepted URL, in bytes.
    pub max_url_length: usize,
    /// How long a graceful stop waits for requests in flight before it
    /// abandons them (they stay queued and are fetched again next run).
    #[serde(with = "humantime_serde")]
    pub shutdown_timeout: Duration,
    /// Stop the run gracefully once this many pages were completed in it
    /// (0: no limit). Counted by the node (on a cluster node, its own
    /// pages) and read every 200 ms, so a run may pass it by what it
    /// completes in that time; pages in flight then finish or stay
    /// queued, as in any graceful stop.
    #[serde(default)]
    pub max_pages: u64,
    /// Stop the run gracefully after this long (0s: no limit).
    #[serde(with = "humantime_serde", default)]
    pub max_duration: Duration,
}

impl CrawlConfig {
    /// The robots.txt product token: the user agent up to the first `/` or
    /// space (RFC 9309 §2.2.1).
    pub fn product_token(&self) -> &str {
        self.user_agent
            .split(['/', ' '])
            .next()
            .unwrap_or(&self.user_agent)
    }
}

/// `[politeness]`: the promise made to every host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolitenessConfig {
    /// Floor of the completion-to-start delay.
    #[serde(with = "humantime_serde")]
    pub min_delay: Duration,
    /// Delay is at least this factor times the last response time.
    pub delay_factor: f64,
    /// Cap on the adaptive part (`delay_factor × response time`).
    #[serde(with = "humantime_serde")]
    pub max_delay: Duration,
    /// Requests in flight to one host at once.
    pub max_in_flight_per_host: u32,
    /// Cap on a robots.txt Crawl-delay.
    #[serde(with = "humantime_serde")]
    pub max_crawl_delay: Duration,
    /// Cap on a server's Retry-After.
    #[serde(with = "humantime_serde")]
    pub max_retry_after: Duration,
    /// First backoff after a failure.
    #[serde(with = "humantime_serde")]
    pub backoff_base: Duration,
    /// Largest backoff.
    #[serde(with = "humantime_serde")]
    pub backoff_max: Duration,
    /// Consecutive failures that park a host (0 = never).
    pub park_after_failures: u32,
    /// How long a parked host waits.
    #[serde(with = "humantime_serde")]
    pub park_duration: Duration,
    /// Requests in flight to one IP address across hosts (0 = no limit).
    pub max_in_flight_per_ip: u32,
}

/// `[robots]`: robots.txt caching and retries.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RobotsConfig {
    /// Lifetime of a fetched robots.txt.
    #[serde(with = "humantime_serde")]
    pub cache_ttl: Duration,
    /// First retry delay while unreachable.
    #[serde(with = "humantime_serde")]
    pub retry_base: Duration,
    /// Largest retry delay.
    #[serde(with = "humantime_serde")]
    pub retry_max: Duration,
    /// Unreachable this long with no good copy: drop the origin's URLs.
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
}

/// `[sitemap]`: sitemap discovery and limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SitemapConfig {
    /// Read sitemaps at all.
    pub enabled: bool,
    /// Depth of sitemap indexes followed.
    pub max_index_depth: u32,
    /// URLs read per file.
    pub max_urls: usize,
    /// Uncompressed bytes read per file.
    pub max_bytes: usize,
    /// lastmod this recent means high priority.
    #[serde(with = "humantime_serde")]
    pub fresh_within: Duration,
}

/// `[dns]`: resolution overrides.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsConfig {
    /// Host pattern (`*.` wildcard allowed) to IP address.
    pub overrides: BTreeMap<String, IpAddr>,
    /// Shortest life of a cached answer.
    #[serde(with = "humantime_serde")]
    pub min_ttl: Duration,
    /// Longest life of a cached answer.
    #[serde(with = "humantime_serde")]
    pub max_ttl: Duration,
    /// Life of a cached failure.
    #[serde(with = "humantime_serde")]
    pub negative_ttl: Duration,
    /// Names cached at most.
    pub max_entries: usize,
    /// Which resolver looks names up.
    pub resolver: ResolverKind,
    /// Name servers for the hickory resolver; empty means the system's.
    pub nameservers: Vec<std::net::SocketAddr>,
}

/// `[dns] resolver`: which backend looks names up (see
/// `src/fetch/dns_backend.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResolverKind {
    /// hickory's stub resolver (TTL-aware).
    Hickory,
    /// The operating system's getaddrinfo (no TTLs).
    System,
}

/// `[fetch] concurrency`: the requests a node keeps in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// Follows the web's latency and the node's processing rate, within
    /// `max_inflight_bytes` ([`crate::fetch::inflight`]).
    Auto,
    /// At most this many, whatever the web does.
    Fixed(usize),
}

impl Concurrency {
    /// Host actors alive at once under `max_active_hosts = 0` and `auto`:
    /// as many as a fixed 1,024 requests in flight would have. A host is
    /// contacted a fraction of the time (politeness delays are ten times
    /// its response time by default), so a web that needs N requests in
    /// flight needs many times N active hosts; the store's due index keeps
    /// the rest.
    pub const AUTO_ACTIVE_HOSTS: usize = 4096;
}

impl Serialize for Concurrency {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Concurrency::Auto => serializer.serialize_str("auto"),
            Concurrency::Fixed(n) => serializer.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for Concurrency {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(u64),
            Word(String),
        }
        const EXPECTED: &str = "\"auto\" or a number of requests (at least 1)";
        match Written::deserialize(deserializer)
            .map_err(|_| serde::de::Error::custom(format!("expected {EXPECTED}")))?
        {
            Written::Word(word) if word == "auto" => Ok(Concurrency::Auto),
            Written::Number(n) if n >= 1 => usize::try_from(n)
                .map(Concurrency::Fixed)
                .map_err(|_| serde::de::Error::custom(format!("{n} is too large"))),
            Written::Word(word) => Err(serde::de::Error::custom(format!(
                "expected {EXPECTED}, found \"{word}\""
            ))),
            Written::Number(n) => Err(serde::de::Error::custom(format!(
                "expected {EXPECTED}, found {n}"
            ))),
        }
    }
}

/// `[fetch]`: the HTTP client.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchConfig {
    /// Global requests in flight: `"auto"` (sized by the measured latency
    /// and the node's processing rate, see [`crate::fetch::inflight`]) or
    /// a fixed number.
    pub concurrency: Concurrency,
    /// Under `concurrency = "auto"`, the memory budget of the requests in
    /// flight, in bytes: the limit never exceeds it divided by a request's
    /// cost (its buffers and its mean body).
    pub max_inflight_bytes: usize,
    /// Pages fetched and being processed at once beyond the requests in
    /// flight (see [`crate::fetch::pipeline`]): back-pressure from parsing
    /// and archiving to fetching.
    pub max_pipeline_pages: usize,
    /// Body bytes the pages in the pipeline may hold before new requests
    /// wait (the page count alone would let large bodies fill memory).
    pub max_pipeline_bytes: usize,
    /// The `Accept-Encoding` sent (empty: none): only codings trawl
    /// decodes ([`crate::fetch::decode`]).
    pub accept_encoding: String,
    /// TCP connect timeout.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// TLS handshake timeout.
    #[serde(with = "humantime_serde")]
    pub handshake_timeout: Duration,
    /// From the request's start to the response head.
    #[serde(with = "humantime_serde")]
    pub first_byte_timeout: Duration,
    /// Largest response head, in bytes.
    pub max_header_bytes: usize,
    /// PEM files of certificates trusted besides the public roots.
    pub extra_root_certificates: Vec<PathBuf>,
    /// Archive successful responses that are not HTML.
    pub archive_non_html: bool,
    /// Deadline of a whole request.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Largest body kept, in bytes.
    pub max_body_bytes: usize,
    /// Attempts per URL on retryable failures.
    pub max_attempts: u32,
    /// Attempts per URL answered 429/503 ("later", not a failure).
    pub max_throttled_attempts: u32,
    /// Longest silence between body chunks.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Redirect hops followed from a URL.
    pub max_redirects: u32,
    /// CIDR blocks the crawler never connects to.
    pub deny_addresses: Vec<IpNet>,
    /// CIDR blocks exempt from the SSRF deny list.
    pub allow_addresses: Vec<IpNet>,
    /// Node-wide cap on requests started per second (0 = none); the admin
    /// API changes it at runtime (`PUT /api/v1/crawl/rate`).
    pub max_requests_per_second: f64,
    /// The egress proxy (`http://[user:password@]host:port`, reached with
    /// HTTP CONNECT; empty: none): see [`crate::fetch::proxy`].
    pub proxy: ProxyUrl,
    /// Hosts sent through `proxy` (exact names and `*.suffix`); empty:
    /// every host.
    pub proxy_hosts: Vec<String>,
}

/// `[storage]`: the partition stores.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Root of the durable state.
    pub data_dir: PathBuf,
    /// Number of partitions, fixed at crawl creation. 0 in a config file
    /// means automatic, resolved when the config is loaded (see
    /// [`StorageConfig::automatic_partitions`]); a loaded config always
    /// holds the count.
    pub partitions: u16,
    /// Whether a layer above the embedded defaults set `partitions`. When
    /// none did, an existing crawl keeps the count it was created with
    /// (its manifest's) instead of being refused for not matching the
    /// default: the default can change between releases, a crawl's count
    /// cannot.
    #[serde(skip)]
    pub partitions_given: bool,
    /// Threads running partitions and their hosts; 0 means one per two
    /// CPU cores (at least one): see [`StorageConfig::store_arbiters`].
    pub store_threads: usize,
    /// Shared block cache size in bytes.
    pub block_cache_bytes: usize,
    /// Shared memtable budget in bytes.
    pub write_buffer_bytes: usize,
    /// fsync the WAL on every write batch, and the WARC and events files
    /// (grouped, [`crate::durable`]) before their pages are completed.
    pub sync_writes: bool,
}

impl StorageConfig {
    /// The arbiters (threads) partitions and their hosts run on:
    /// `store_threads`, or with 0 one per two cores, at least one.
    ///
    /// Why so few: a partition's hosts and its store talk on every page,
    /// and between threads each message is a wake-up (an `eventfd` write
    /// and a context switch). On the side-by-side bench (2 cores, shared
    /// with nginx) one store thread took 0.37 ms of CPU a page where two
    /// took 0.39 (three runs each, alternating), and 3-4 % more pages a
    /// second; the parser pool (one thread a core) does the heavy work.
    pub fn store_arbiters(&self) -> usize {
        store_arbiters_for(
            self.store_threads,
            std::thread::available_parallelism().map_or(2, |n| n.get()),
        )
    }
}

/// The partition count of a cluster node that sets none: every node of a
/// cluster must agree on it, whatever its cores, and 16 spreads over a
/// few nodes (the examples under config/cluster).
pub const CLUSTER_PARTITIONS: u16 = 16;

/// The fewest and the most partitions a single node picks for itself.
const NODE_PARTITIONS: std::ops::RangeInclusive<u16> = 4..=16;

impl StorageConfig {
    /// The partition count `partitions = 0` stands for: on a cluster node
    /// [`CLUSTER_PARTITIONS`]; on a single node two per store thread
    /// ([`StorageConfig::store_arbiters`]), 4 to 16.
    ///
    /// Why a single node takes few: a partition is a RocksDB store of
    /// twelve column families, and creating one is RocksDB's own work per
    /// family (a MANIFEST record and its sync each, the OPTIONS file
    /// written and read back), which no option skips. On two cores 16
    /// stores took 113–120 ms of a new crawl's start, 4 took 32–39 ms;
    /// and every store holds its own budget cache, seen filter share and
    /// memtables. A partition is also the unit one store thread runs, so
    /// two per thread keep every thread busy. On the side-by-side bench
    /// (500 hosts, 2 cores) 4 partitions against 16 started the first
    /// request 112–124 ms after the process against 177–190, stopped in
    /// 44–46 ms against 53–59, and peaked at 121–126 MB against 137–143,
    /// at the same CPU a page (docs/benchmarks.md).
    pub fn automatic_partitions(&self, cluster: bool) -> u16 {
        automatic_partitions_for(cluster, self.store_arbiters())
    }
}

/// [`StorageConfig::automatic_partitions`] with `store_arbiters` threads.
fn automatic_partitions_for(cluster: bool, store_arbiters: usize) -> u16 {
    if cluster {
        return CLUSTER_PARTITIONS;
    }
    let two_a_thread = u16::try_from(store_arbiters.saturating_mul(2)).unwrap_or(u16::MAX);
    two_a_thread.clamp(*NODE_PARTITIONS.start(), *NODE_PARTITIONS.end())
}

/// [`StorageConfig::store_arbiters`] on `cores` cores.
fn store_arbiters_for(store_threads: usize, cores: usize) -> usize {
    match store_threads {
        0 => (cores / 2).max(1),
        n => n,
    }
}

/// `[warc]`: archive files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarcConfig {
    /// Directory of WARC files, relative to `storage.data_dir` unless absolute.
    pub dir: PathBuf,
    /// Rotation size in bytes.
    pub max_file_bytes: u64,
    /// File name prefix.
    pub prefix: String,
    /// Per-record compression: a gzip member (`.warc.gz`) or a zstd
    /// frame (`.warc.zst`) per record.
    pub compression: WarcCompression,
    /// Level per record: gzip 0–9, zstd 1–19.
    pub compression_level: u32,
    /// gzip only: records of fewer bytes than this are stored in their
    /// member, not compressed (0: every record is compressed); at most
    /// 65,535, what one stored deflate block holds. See
    /// `crate::warc::compress` for why.
    pub store_below: usize,
    /// Write a `metadata` record beside each page's and sitemap's
    /// response (how it was reached, the fetch's duration, its outlinks;
    /// see [`crate::archive`]).
    pub metadata_records: bool,
    /// Write each DNS answer the crawl obtains as a `dns:` record
    /// ([`crate::archive::Archiver::dns`]).
    pub dns_records: bool,
    /// Write a Parquet index beside each closed file's CDXJ index
    /// ([`crate::warc::parquet`]).
    pub parquet_index: bool,
}

/// How pages are read (`[parse] engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParseEngine {
    /// html5ever's tokenizer alone, no tree (`crate::parse::stream`): the
    /// default.
    Stream,
    /// html5ever's DOM, as a browser builds it, then one walk of it
    /// (`crate::parse::bounded`, `crate::parse::read`).
    Tree,
}

/// How WARC records are compressed (`[warc] compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WarcCompression {
    /// One gzip member per record: `.warc.gz`, what every WARC tool reads.
    Gzip,
    /// One zstd frame per record, no dictionary: `.warc.zst`, per the IIPC
    /// zstd WARC proposal; warcio and pywb cannot read it.
    Zstd,
}

impl WarcCompression {
    /// The file name suffix of the WARC files it writes.
    pub fn extension(self) -> &'static str {
        match self {
            WarcCompression::Gzip => ".warc.gz",
            WarcCompression::Zstd => ".warc.zst",
        }
    }
}

/// `[events]`: output events.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsConfig {
    /// JSON-lines path, relative to `storage.data_dir` unless absolute.
    pub path: PathBuf,
}

/// `[report]`: the crawl report (`src/report`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// Where `trawl run` writes `report.json`, `report.txt` and
    /// `summary.json` at its end, relative to `storage.data_dir` unless
    /// absolute (a cluster node's gets `-<node>`).
    pub dir: PathBuf,
    /// Hosts listed by name; what the others did is summed.
    pub max_hosts: usize,
    /// Seeds listed by name.
    pub max_seeds: usize,
}

impl ReportConfig {
    /// The report's bounds.
    pub fn limits(&self) -> crate::report::ReportLimits {
        crate::report::ReportLimits {
            max_hosts: self.max_hosts,
            max_seeds: self.max_seeds,
        }
    }
}

/// `[previous]`: an earlier crawl this one follows (a recurring crawl,
/// `src/dedup/previous.rs`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviousConfig {
    /// Its CDXJ indexes: files, or directories whose `*.cdxj` files are
    /// read. A payload fetched again unchanged is written as a revisit of
    /// its copy there.
    pub indexes: Vec<PathBuf>,
    /// Also offer its URLs (its 2xx and 3xx page captures) after the
    /// seeds, as URLs it fetched (not as seeds).
    pub reseed: bool,
}

/// `[admin]`: the admin HTTP API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Listen address.
    pub listen: String,
    /// Whether to start the server.
    pub enabled: bool,
    /// A file holding the bearer token mutating requests must carry (the
    /// environment variable `TRAWL_ADMIN_TOKEN` overrides it).
    pub token_file: Option<PathBuf>,
    /// Whether mutating endpoints (pause, seeds, rate) are served at all.
    pub mutations: bool,
    /// Whether read-only endpoints and `/metrics` need the token too.
    pub protect_reads: bool,
    /// Serve HTTPS (see [`crate::admin::tls`]).
    pub tls: bool,
    /// The certificate chain served (PEM); empty: `[cluster] tls_cert`.
    pub tls_cert: PathBuf,
    /// Its private key (PEM); empty: `[cluster] tls_key`.
    pub tls_key: PathBuf,
}

/// `[log]`: how the binary logs (to stderr; `RUST_LOG` filters).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `text` (human-readable lines) or `json` (one object per line).
    pub format: LogFormat,
    /// Colour in text lines: `auto` (only when stderr is a terminal and
    /// `NO_COLOR` is not set), `always` or `never`.
    pub color: LogColor,
}

/// When text log lines carry ANSI colour codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogColor {
    /// When stderr is a terminal and `NO_COLOR` is unset (a file, a pipe
    /// or a journal gets plain lines).
    Auto,
    /// Always (a pager that shows colour, say).
    Always,
    /// Never.
    Never,
}

impl LogColor {
    /// Whether lines written to a stream that `is_terminal` (or not) are
    /// coloured, `no_color` being whether `NO_COLOR` is set (non-empty,
    /// as no-color.org says).
    pub fn ansi(self, is_terminal: bool, no_color: bool) -> bool {
        match self {
            LogColor::Auto => is_terminal && !no_color,
            LogColor::Always => true,
            LogColor::Never => false,
        }
    }
}

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[url]`: the URL normal form (see `src/url/normalise.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlConfig {
    /// Session-ID parameter names, removed from the identity.
    pub session_params: Vec<String>,
    /// Remove `tracking_params` from the identity too.
    pub strip_tracking: bool,
    /// Tracking parameter names.
    pub tracking_params: Vec<String>,
}

/// `[scope]`: which URLs the crawl admits (see `src/url/scope.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeConfig {
    /// Host patterns admitted (`example.com`, `*.example.com`); empty: all.
    pub allow_hosts: Vec<String>,
    /// Host patterns refused.
    pub deny_hosts: Vec<String>,
    /// Regexes over the URL; when not empty, a URL must match one.
    pub allow_patterns: Vec<String>,
    /// Regexes over the URL refused.
    pub deny_patterns: Vec<String>,
    /// File extensions (lower-case, no dot) recorded but never fetched.
    pub deny_extensions: Vec<String>,
}

/// `[traps]`: endless URL spaces (see `src/url/scope.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrapsConfig {
    /// Most path segments in a URL.
    pub max_path_segments: usize,
    /// Most occurrences of one path segment in a URL.
    pub max_repeated_segment: usize,
    /// Most query parameters in a URL.
    pub max_query_params: usize,
    /// Dates in a URL more than this many years after the current year
    /// mark a calendar running into the future.
    pub calendar_years_ahead: i32,
    /// ...or more than this many years before it.
    pub calendar_years_back: i32,
}

/// `[parse]`: the parser pool.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParseConfig {
    /// Parser threads; 0 = one per core.
    pub threads: usize,
    /// Which reader reads pages.
    pub engine: ParseEngine,
    /// Links kept per page.
    pub max_links_per_page: usize,
    /// HTML parsed per page, in bytes (the rest is archived, not parsed).
    pub max_html_bytes: usize,
    /// Open elements (plus active formatting elements) at which a page's
    /// parse stops; its cost grows with the square of the nesting.
    pub max_nesting: usize,
    /// Attributes on one tag; the parse stops before a tag with more.
    pub max_attributes: usize,
    /// Steps the HTML tree builder may spend walking its element stacks
    /// per page before the parse stops.
    pub max_tree_steps: u64,
    /// Time one page's parse may take before it stops (a backstop).
    #[serde(with = "humantime_serde")]
    pub time_budget: Duration,
    /// Detect each page's language from its text (`parse/sniff.rs`).
    pub detect_language: bool,
}

impl Config {
    /// The embedded defaults alone.
    pub fn defaults() -> Self {
        Self::from_layers(&[]).expect("embedded config/trawl.toml is valid")
    }

    /// Defaults with the file at `path` layered on top.
    ///
    /// Checks what this module can check alone; callers also run
    /// `validate::domain` (or use `validate::load`, which does both).
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_files(path.as_slice())
    }

    /// Defaults with each file layered on top in order: a later file's
    /// values win (a cluster's shared settings, then a node's own).
    pub fn load_files<P: AsRef<Path>>(paths: &[P]) -> Result<Self, ConfigError> {
        let layers = paths
            .iter()
            .map(|path| {
                let path = path.as_ref();
                std::fs::read_to_string(path)
                    .map(|text| (path.display().to_string(), text))
                    .map_err(|source| ConfigError::Read {
                        path: path.to_owned(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_layers(&layers)
    }

    /// Defaults with each `(origin, toml text)` layer merged on top in order.
    pub fn from_layers(layers: &[(String, String)]) -> Result<Self, ConfigError> {
        let mut merged = parse_table("embedded defaults", DEFAULT_TOML)?;
        let mut partitions_given = false;
        for (origin, text) in layers {
            let layer = parse_table(origin, text)?;
            // `partitions = 0` (automatic) sets no count of its own.
            partitions_given |= layer
                .get("storage")
                .and_then(|s| s.get("partitions"))
                .is_some_and(|p| p.as_integer() != Some(0));
            merge(&mut merged, layer);
        }
        let mut config: Config = serde_path_to_error::deserialize(toml::Value::Table(merged))
            .map_err(|err| ConfigError::Key {
                key: err.path().to_string(),
                message: err.into_inner().to_string(),
            })?;
        config.storage.partitions_given = partitions_given;
        if config.storage.partitions == 0 {
            config.storage.partitions = config.storage.automatic_partitions(config.cluster.enabled);
        }
        config.validate()?;
        Ok(config)
    }

    /// Renders the effective configuration as TOML, as `trawl config
    /// print` shows it: the stores' secrets redacted ([`StoreOptions`]).
    pub fn to_toml(&self) -> String {
        let mut shown = self.clone();
        shown.upload.options = shown.upload.options.redacted();
        shown.cluster.state_options = shown.cluster.state_options.redacted();
        shown.fetch.proxy = shown.fetch.proxy.redacted();
        toml::to_string_pretty(&shown).expect("config serialises")
    }

    /// Resolves a path from the config against `storage.data_dir`.
    pub fn data_path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.storage.data_dir.join(path)
        }
    }

    /// The node id of a cluster node, `None` on a single node.
    pub fn node_id(&self) -> Option<&str> {
        self.cluster
            .enabled
            .then_some(self.cluster.node_id.as_str())
    }

    /// The events file this node writes: on a cluster node, one of its
    /// own (`events-<node>.jsonl` for `events.jsonl`), since the data
    /// directory is shared and nothing but the partition stores may be.
    pub fn events_file(&self) -> PathBuf {
        let path = self.data_path(&self.events.path);
        match self.node_id() {
            Some(node) => with_node(&path, node),
            None => path,
        }
    }

    /// The directory this node's crawl reports go to (`<dir>-<node>` on a
    /// cluster node).
    pub fn report_dir(&self) -> PathBuf {
        let path = self.data_path(&self.report.dir);
        match self.node_id() {
            Some(node) => with_node(&path, node),
            None => path,
        }
    }

    /// The prefix of this node's WARC files (`<prefix>-<node>` on a
    /// cluster node).
    pub fn warc_prefix(&self) -> String {
        match self.node_id() {
            Some(node) => format!("{}-{node}", self.warc.prefix),
            None => self.warc.prefix.clone(),
        }
    }

    /// This node's near-duplicate index (one per node on a cluster:
    /// near-duplicates are judged per node; exact dedup lives in the
    /// partitions).
    pub fn dedup_dir(&self) -> PathBuf {
        let path = self.data_path(&self.dedup.dir);
        match self.node_id() {
            Some(node) => with_node(&path, node),
            None => path,
        }
    }

    /// This node's runtime controls (pause, rate), kept across restarts.
    pub fn controls_file(&self) -> PathBuf {
        let path = self.data_path(Path::new("controls.json"));
        match self.node_id() {
            Some(node) => with_node(&path, node),
            None => path,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: &str| Err(ConfigError::Invalid(m.to_owned()));
        let rate = self.fetch.max_requests_per_second;
        if !(rate == 0.0 || (0.001..=1_000_000.0).contains(&rate)) {
            return invalid(
                "fetch.max_requests_per_second must be 0 (no limit) or between 0.001 and 1000000",
            );
        }
        if self.politeness.max_in_flight_per_host == 0 {
            return invalid("politeness.max_in_flight_per_host must be at least 1");
        }
        if !(self.politeness.delay_factor.is_finite() && self.politeness.delay_factor >= 0.0) {
            return invalid("politeness.delay_factor must be a non-negative number");
        }
        if self.storage.partitions == 0 || self.storage.partitions > 4096 {
            return invalid("storage.partitions must be between 1 and 4096");
        }
        if self.fetch.max_attempts == 0 {
            return invalid("fetch.max_attempts must be at least 1");
        }
        if self.fetch.max_throttled_attempts == 0 {
            return invalid("fetch.max_throttled_attempts must be at least 1");
        }
        if self.fetch.max_pipeline_pages == 0 {
            return invalid("fetch.max_pipeline_pages must be at least 1");
        }
        if self.fetch.max_pipeline_bytes == 0 {
            return invalid("fetch.max_pipeline_bytes must be at least 1");
        }
        match self.warc.compression {
            WarcCompression::Gzip if self.warc.compression_level > 9 => {
                return invalid("warc.compression_level must be between 0 and 9 for gzip");
            }
            // Levels 20 and up need windows larger than the 8 MiB the zstd
            // WARC proposal requires readers to support.
            WarcCompression::Zstd if !(1..=19).contains(&self.warc.compression_level) => {
                return invalid("warc.compression_level must be between 1 and 19 for zstd");
            }
            _ => {}
        }
        if self.crawl.user_agent.trim().is_empty() {
            return invalid("crawl.user_agent must not be empty");
        }
        if self.seen.cache_urls > MAX_SEEN_CACHE_URLS {
            return Err(ConfigError::Invalid(format!(
                "seen.cache_urls must be at most {MAX_SEEN_CACHE_URLS} (32 bytes each)"
            )));
        }
        let rate = self.seen.false_positive_rate;
        if !(rate > 0.0 && rate < 0.5) {
            return invalid("seen.false_positive_rate must be between 0 and 0.5");
        }
        self.check_cluster()?;
        self.check_upload()?;
        let r = &self.recrawl;
        if r.min_interval.is_zero() || r.min_interval > r.max_interval {
            return invalid(
                "recrawl.min_interval must be above zero and at most recrawl.max_interval",
            );
        }
        if !(r.refresh_share > 0.0 && r.refresh_share <= 1.0) {
            return invalid("recrawl.refresh_share must be above 0 and at most 1");
        }
        if r.change_distance > 64 {
            return invalid("recrawl.change_distance must be at most 64");
        }
        for pattern in self.dns.overrides.keys() {
            let bare = pattern.strip_prefix("*.").unwrap_or(pattern);
            if bare.is_empty() || bare.contains('*') {
                return Err(ConfigError::Invalid(format!(
                    "dns.overrides pattern `{pattern}`: only a leading `*.` wildcard is allowed"
                )));
            }
        }
        Ok(())
    }
}

impl Config {
    /// `[cluster]`, when enabled: a usable node id and addresses.
    fn check_cluster(&self) -> Result<(), ConfigError> {
        let c = &self.cluster;
        if !c.enabled {
            return Ok(());
        }
        let invalid = |msg: String| Err(ConfigError::Invalid(msg));
        if c.cluster_id.trim().is_empty() {
            return invalid("cluster.cluster_id must not be empty".into());
        }
        for (key, addr) in [("cluster.gossip", &c.gossip), ("cluster.bridge", &c.bridge)] {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                return invalid(format!("{key} {addr:?} is not an address:port"));
            }
        }
        if c.gossip == c.bridge {
            return invalid("cluster.gossip and cluster.bridge must differ".into());
        }
        let auth = [
            ("tls_ca", &c.tls_ca),
            ("tls_cert", &c.tls_cert),
            ("tls_key", &c.tls_key),
            ("gossip_key", &c.gossip_key),
        ];
        let missing: Vec<&str> = auth
            .iter()
            .filter(|(_, path)| path.as_os_str().is_empty())
            .map(|(key, _)| *key)
            .collect();
        match (c.insecure, missing.len()) {
            (false, 0) => {}
            (false, _) => {
                return invalid(format!(
                    "cluster: {} not set: a cluster authenticates its nodes \
                     (`trawl cluster certs` makes the files), or says insecure = true",
                    missing.join(", ")
                ))
            }
            (true, 4) => {}
            (true, _) => {
                return invalid(
                    "cluster: insecure = true with TLS or gossip files set: choose one".into(),
                )
            }
        }
        for peer in &c.peers {
            let port = peer.rsplit_once(':').map(|(_, p)| p.parse::<u16>());
            if !matches!(port, Some(Ok(_))) {
                return invalid(format!("cluster.peers: {peer:?} is not host:port"));
            }
        }
        Ok(())
    }
}

impl Config {
    /// `[upload]`: the numbers; the URL and options are checked with the
    /// store's code (`validate::domain`).
    fn check_upload(&self) -> Result<(), ConfigError> {
        let u = &self.upload;
        let invalid = |m: &str| Err(ConfigError::Invalid(m.to_owned()));
        if u.concurrency == 0 {
            return invalid("upload.concurrency must be at least 1");
        }
        if u.part_size < MIN_PART_SIZE {
            return invalid("upload.part_size must be at least 65536 (S3 needs 5 MiB)");
        }
        if u.retry_delay.is_zero() || u.retry_delay > u.max_retry_delay {
            return invalid(
                "upload.retry_delay must be above zero and at most upload.max_retry_delay",
            );
        }
        if u.enabled && u.url.trim().is_empty() {
            return Err(ConfigError::Key {
                key: "upload.url".into(),
                message: "uploads are enabled but no url is set".into(),
            });
        }
        Ok(())
    }

    /// This node's upload manifest (`uploads.jsonl` in the data directory;
    /// one per node on a cluster, like the events file).
    pub fn upload_manifest(&self) -> PathBuf {
        let path = self.storage.data_dir.join("uploads.jsonl");
        match self.node_id() {
            Some(node) => with_node(&path, node),
            None => path,
        }
    }
}

/// The smallest `[upload] part_size`: parts smaller than this would mean
/// thousands of requests per file.
const MIN_PART_SIZE: usize = 64 * 1024;

/// `path` with `-<node>` after its file stem (`events.jsonl` →
/// `events-n1.jsonl`).
fn with_node(path: &Path, node: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{node}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{node}"),
    };
    path.with_file_name(name)
}

fn parse_table(origin: &str, text: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>()
        .map_err(|err| ConfigError::Syntax {
            origin: origin.to_owned(),
            message: err.to_string(),
        })
}

/// Merges `top` into `base`: tables merge recursively, anything else replaces.
/// `dns.overrides` is a table too, so a user's overrides add to the defaults'.
pub fn merge(base: &mut toml::Table, top: toml::Table) {
    for (key, value) in top {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(text: &str) -> Result<Config, ConfigError> {
        Config::from_layers(&[("test".into(), text.into())])
    }

    #[test]
    fn store_threads_follow_the_cores_unless_set() {
        for (cores, auto) in [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8)] {
            assert_eq!(store_arbiters_for(0, cores), auto, "{cores} cores");
            assert_eq!(store_arbiters_for(3, cores), 3, "set: kept");
        }
        let config = Config::defaults();
        assert_eq!(config.storage.store_threads, 0, "the default is automatic");
        assert!(config.storage.store_arbiters() >= 1);
        assert!(layer("[storage]\nstore_threads = 0\n").is_ok());
    }

    #[test]
    fn partitions_are_two_a_store_thread_on_a_node_and_sixteen_on_a_cluster() {
        for (arbiters, node) in [(1, 4), (2, 4), (3, 6), (4, 8), (8, 16), (64, 16)] {
            assert_eq!(
                automatic_partitions_for(false, arbiters),
                node,
                "{arbiters} threads"
            );
            assert_eq!(automatic_partitions_for(true, arbiters), CLUSTER_PARTITIONS);
        }
        // The default is automatic: resolved at load, and no count given.
        let config = Config::defaults();
        assert_eq!(
            config.storage.partitions,
            config.storage.automatic_partitions(false)
        );
        assert!(!config.storage.partitions_given);
        let zero = layer("[storage]\npartitions = 0\nstore_threads = 4\n").unwrap();
        assert_eq!(
            zero.storage.partitions, 8,
            "0 is automatic, from the threads set"
        );
        assert!(!zero.storage.partitions_given, "0 sets no count");
        let set = layer("[storage]\npartitions = 16\n").unwrap();
        assert_eq!(set.storage.partitions, 16);
        assert!(set.storage.partitions_given);
        // A cluster node takes the cluster's count whatever its threads.
        let cluster = layer(
            "[cluster]\nenabled = true\nnode_id = \"n1\"\ninsecure = true\n\
             gossip = \"127.0.0.1:7946\"\nbridge = \"127.0.0.1:7947\"\n\
             [storage]\nstore_threads = 1\n",
        )
        .unwrap();
        assert_eq!(cluster.storage.partitions, CLUSTER_PARTITIONS);
        assert!(!cluster.storage.partitions_given);
    }

    #[test]
    fn store_secrets_are_never_shown() {
        let text = "[upload]\nenabled = true\nurl = \"s3://b/w\"\n\
                    [upload.options]\naws_region = \"eu-west-1\"\n\
                    aws_access_key_id = \"AKIDEXAMPLE\"\n\
                    aws_secret_access_key = \"wJalrXUtnFEMI\"\n\
                    aws_session_token = \"FwoGZXIvYXdzE\"\n\
                    [cluster]\n[cluster.state_options]\n\
                    azure_storage_account_key = \"c2VjcmV0\"\n\
                    google_service_account_key = \"{json}\"\n\
                    [fetch]\nproxy = \"http://crawler:pr0xyP4ss@10.1.1.1:3128\"\n";
        let config: Config = Config::from_layers(&[("t".to_owned(), text.to_owned())]).unwrap();
        let printed = config.to_toml();
        let logged = format!("{config:?}");
        for (written, shown) in [
            (
                "http:crawler:pw1@10.0.0.1:3128",
                "http:<redacted>@10.0.0.1:3128",
            ),
            ("crawler:pw2@h:3128", "<redacted>@h:3128"),
            ("http://u:pa/ss@h:1", "http://<redacted>@h:1"),
            ("http://h:3128", "http://h:3128"),
        ] {
            assert_eq!(ProxyUrl(written.into()).redacted().0, shown);
            assert!(!format!("{:?}", ProxyUrl(written.into())).contains("pw"));
        }
        for secret in [
            "wJalrXUtnFEMI",
            "FwoGZXIvYXdzE",
            "c2VjcmV0",
            "{json}",
            "pr0xyP4ss",
        ] {
            assert!(!printed.contains(secret), "{printed}");
            assert!(!logged.contains(secret), "{logged}");
        }
        for shown in [
            "eu-west-1",
            "AKIDEXAMPLE",
            REDACTED,
            "http://<redacted>@10.1.1.1:3128",
        ] {
            assert!(printed.contains(shown), "{printed}");
            assert!(logged.contains(shown), "{logged}");
        }
        // The store still gets them as written.
        assert_eq!(
            config.upload.options["aws_secret_access_key"],
            "wJalrXUtnFEMI"
        );
    }

    #[test]
    fn defaults_parse_and_round_trip() {
        let config = Config::defaults();
        assert_eq!(config.politeness.min_delay, Duration::from_secs(1));
        assert_eq!(config.politeness.max_in_flight_per_host, 1);
        assert_eq!(config.admin.listen, "127.0.0.1:9090");
        let printed = config.to_toml();
        let again = Config::from_layers(&[("printed".into(), printed)]).unwrap();
        assert_eq!(again.to_toml(), config.to_toml());
    }

    #[test]
    fn warc_compression_levels_depend_on_the_codec() {
        assert_eq!(Config::defaults().warc.compression, WarcCompression::Gzip);
        let zstd = layer("[warc]\ncompression = \"zstd\"\ncompression_level = 19\n").unwrap();
        assert_eq!(zstd.warc.compression, WarcCompression::Zstd);
        assert_eq!(zstd.warc.compression.extension(), ".warc.zst");
        let err = layer("[warc]\ncompression_level = 10\n").unwrap_err();
        assert!(err.to_string().contains("warc.compression_level"), "{err}");
        let err = layer("[warc]\ncompression = \"zstd\"\ncompression_level = 0\n").unwrap_err();
        assert!(err.to_string().contains("for zstd"), "{err}");
        let err = layer("[warc]\ncompression = \"xz\"\n").unwrap_err();
        assert!(err.to_string().contains("warc.compression"), "{err}");
    }

    #[test]
    fn the_parse_engine_is_stream_or_tree() {
        assert_eq!(Config::defaults().parse.engine, ParseEngine::Stream);
        let tree = layer("[parse]\nengine = \"tree\"\n").unwrap();
        assert_eq!(tree.parse.engine, ParseEngine::Tree);
        let err = layer("[parse]\nengine = \"dom\"\n").unwrap_err();
        assert!(err.to_string().contains("parse.engine"), "{err}");
    }

    #[test]
    fn the_pipeline_bound_is_at_least_one_page() {
        assert_eq!(Config::defaults().fetch.max_pipeline_pages, 256);
        let err = layer("[fetch]\nmax_pipeline_pages = 0\n").unwrap_err();
        assert!(
            err.to_string().contains("fetch.max_pipeline_pages"),
            "{err}"
        );
        let one = layer("[fetch]\nmax_pipeline_pages = 1\n").unwrap();
        assert_eq!(one.fetch.max_pipeline_pages, 1);
    }

    #[test]
    fn concurrency_is_auto_by_default_and_a_number_is_still_accepted() {
        let defaults = Config::defaults();
        assert_eq!(defaults.fetch.concurrency, Concurrency::Auto);
        assert_eq!(
            defaults.frontier.active_hosts_cap(Concurrency::Auto),
            Concurrency::AUTO_ACTIVE_HOSTS
        );
        let fixed = layer("[fetch]\nconcurrency = 64\n").unwrap();
        assert_eq!(fixed.fetch.concurrency, Concurrency::Fixed(64));
        assert_eq!(
            fixed.frontier.active_hosts_cap(fixed.fetch.concurrency),
            256
        );
        let printed = fixed.to_toml();
        assert!(printed.contains("concurrency = 64"), "{printed}");
        assert!(defaults.to_toml().contains("concurrency = \"auto\""));
        for bad in ["0", "\"many\"", "-3", "1.5"] {
            let err = layer(&format!("[fetch]\nconcurrency = {bad}\n")).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("fetch.concurrency"), "{bad}: {text}");
            assert!(text.contains("\"auto\" or a number"), "{bad}: {text}");
        }
        let err = layer("[fetch]\nmax_pipeline_bytes = 0\n").unwrap_err();
        assert!(
            err.to_string().contains("fetch.max_pipeline_bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_seen_cache_over_its_limit_is_refused() {
        let over = MAX_SEEN_CACHE_URLS + 1;
        let err = layer(&format!("[seen]\ncache_urls = {over}\n")).unwrap_err();
        assert!(err.to_string().contains("seen.cache_urls"), "{err}");
        let none = layer("[seen]\ncache_urls = 0\n").unwrap();
        assert_eq!(none.seen.cache_urls, 0);
    }

    #[test]
    fn the_partition_count_is_given_only_when_a_layer_names_it() {
        assert!(
            !layer("[politeness]\nmin_delay = \"1s\"\n")
                .unwrap()
                .storage
                .partitions_given
        );
        let named = layer("[storage]\npartitions = 16\n").unwrap();
        assert!(
            named.storage.partitions_given,
            "even at the default's value"
        );
    }

    #[test]
    fn layer_overrides_only_named_keys() {
        let config = layer("[politeness]\nmin_delay = \"250ms\"\n").unwrap();
        assert_eq!(config.politeness.min_delay, Duration::from_millis(250));
        assert_eq!(config.politeness.delay_factor, 10.0);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = layer("[politeness]\nmin_dely = \"1s\"\n").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("min_dely"), "{text}");
        let err = layer("[nonsense]\nx = 1\n").unwrap_err();
        assert!(err.to_string().contains("nonsense"), "{err}");
    }

    #[test]
    fn bad_duration_names_the_key() {
        let err = layer("[politeness]\nmin_delay = \"soon\"\n").unwrap_err();
        assert!(err.to_string().contains("politeness.min_delay"), "{err}");
    }

    #[test]
    fn dns_overrides_and_cidrs_parse() {
        let config = layer(
            "[dns.overrides]\n\"*.test\" = \"127.0.0.1\"\n[fetch]\nallow_addresses = [\"127.0.0.0/8\"]\n",
        )
        .unwrap();
        assert_eq!(config.dns.overrides["*.test"].to_string(), "127.0.0.1");
        assert_eq!(config.fetch.allow_addresses[0].to_string(), "127.0.0.0/8");
        assert!(layer("[dns.overrides]\n\"a.*.test\" = \"127.0.0.1\"\n").is_err());
    }

    #[test]
    fn recrawl_defaults_and_bounds() {
        let r = Config::defaults().recrawl;
        assert!(r.enabled);
        assert_eq!(r.min_interval, Duration::from_secs(86_400));
        assert_eq!(r.max_interval, Duration::from_secs(90 * 86_400));
        for (bad, key) in [
            ("min_interval = \"100d\"", "recrawl.min_interval"),
            ("min_interval = \"0s\"", "recrawl.min_interval"),
            ("refresh_share = 0.0", "recrawl.refresh_share"),
            ("refresh_share = 1.5", "recrawl.refresh_share"),
            ("change_distance = 65", "recrawl.change_distance"),
        ] {
            let err = layer(&format!("[recrawl]\n{bad}\n")).unwrap_err();
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
        let seconds = layer("[recrawl]\nmin_interval = \"2s\"\n").unwrap();
        assert_eq!(seconds.recrawl.min_interval, Duration::from_secs(2));
    }

    #[test]
    fn a_cluster_node_needs_an_id_and_addresses() {
        assert!(!Config::defaults().cluster.enabled);
        let node = |extra: &str| {
            let base = "[cluster]\nenabled = true\nnode_id = \"n1\"\ninsecure = true\n\
                        gossip = \"127.0.0.1:7946\"\nbridge = \"127.0.0.1:7947\"\n";
            Config::from_layers(&[
                ("node".into(), base.into()),
                ("change".into(), format!("[cluster]\n{extra}\n")),
            ])
        };
        let ok = node("peers = [\"127.0.0.2:7946\", \"node2.local:7946\"]").unwrap();
        // Its own files beside the other nodes' in the shared directory.
        let data = &ok.storage.data_dir;
        assert_eq!(ok.events_file(), data.join("events-n1.jsonl"));
        assert_eq!(ok.dedup_dir(), data.join("dedup-n1"));
        assert_eq!(ok.warc_prefix(), "trawl-n1");
        let single = Config::defaults();
        assert_eq!(
            single.events_file(),
            single.storage.data_dir.join("events.jsonl")
        );
        assert_eq!(single.warc_prefix(), "trawl");
        for (bad, key) in [
            ("gossip = \"localhost\"", "cluster.gossip"),
            ("bridge = \"127.0.0.1:7946\"", "must differ"),
            ("peers = [\"127.0.0.2\"]", "cluster.peers"),
            ("cluster_id = \" \"", "cluster.cluster_id"),
        ] {
            let err = node(bad).unwrap_err();
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
    }

    /// A cluster node authenticates (every credential file named) or says
    /// `insecure = true`; never half of it.
    #[test]
    fn a_cluster_node_is_authenticated_or_says_it_is_not() {
        let node = |extra: &str| {
            let text = format!(
                "[cluster]\nenabled = true\nnode_id = \"n1\"\n\
                 gossip = \"127.0.0.1:7946\"\nbridge = \"127.0.0.1:7947\"\n{extra}"
            );
            Config::from_layers(&[("node".into(), text)])
        };
        let files = "tls_ca = \"ca.pem\"\ntls_cert = \"n1.pem\"\ntls_key = \"n1.key\"\n\
                     gossip_key = \"gossip.key\"\n";
        let authenticated = node(files).unwrap();
        assert!(!authenticated.cluster.insecure);
        assert_eq!(authenticated.cluster.tls_key, PathBuf::from("n1.key"));
        assert!(node("insecure = true").is_ok());
        let none = node("").unwrap_err().to_string();
        assert!(
            none.contains("tls_ca, tls_cert, tls_key, gossip_key not set"),
            "{none}"
        );
        let half = node("tls_ca = \"ca.pem\"\ngossip_key = \"g\"").unwrap_err();
        assert!(
            half.to_string().contains("tls_cert, tls_key not set"),
            "{half}"
        );
        let both = node(&format!("{files}insecure = true")).unwrap_err();
        assert!(both.to_string().contains("choose one"), "{both}");
        // A single node needs none of it.
        assert!(
            Config::from_layers(&[("x".into(), "[cluster]\ninsecure = false\n".into())]).is_ok()
        );
    }

    #[test]
    fn product_token_is_the_first_word() {
        assert_eq!(Config::defaults().crawl.product_token(), "trawl");
    }

    #[test]
    fn log_colour_follows_the_terminal_unless_forced() {
        assert_eq!(Config::defaults().log.color, LogColor::Auto);
        assert!(LogColor::Auto.ansi(true, false));
        assert!(
            !LogColor::Auto.ansi(false, false),
            "a file gets plain lines"
        );
        assert!(!LogColor::Auto.ansi(true, true), "NO_COLOR");
        assert!(LogColor::Always.ansi(false, true));
        assert!(!LogColor::Never.ansi(true, false));
        let config = layer("[log]\ncolor = \"never\"\n").unwrap();
        assert_eq!(config.log.color, LogColor::Never);
        assert!(layer("[log]\ncolor = \"sometimes\"\n").is_err());
    }
}

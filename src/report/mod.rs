//! Crawl reports: what a crawl fetched, by host, MIME type, status code and
//! seed, and what it still has queued, host by host. Heritrix's hosts,
//! mimetype, response-code, seeds and frontier reports, as one document
//! (JSON) and its plain-text rendering ([`text`]).
//!
//! A report is a fold of the output events ([`CrawlReport::record`]): the
//! archive folds each event as it writes it, so a report on demand (the
//! admin API, `trawl ctl report`) costs a copy, not a scan; and `trawl
//! report EVENTS_FILE` folds a whole events file (every run of a crawl)
//! the same way. The frontier section is not an event's: the node fills it
//! from its partitions' host listings when a report is asked for.
//!
//! What is derived, and how:
//! - **hosts**: responses recorded (pages, robots.txt, sitemaps), payload
//!   bytes, status codes, duplicates, URLs removed; the **robots outcome**
//!   is the last robots.txt answer recorded for the host (2xx: its rules
//!   apply; 4xx, or a 3xx ending a redirect chain too long to follow:
//!   unavailable, everything allowed; 5xx: unreachable, everything
//!   disallowed, RFC 9309 §2.3.1); the **politeness delay used**
//!   is measured as the site saw it: from the end of one recorded response
//!   (its start plus its fetch time) to the start of the host's next
//!   request, smallest and mean. Requests that failed without a response
//!   leave no event, so a gap around one counts as one longer delay.
//! - **MIME types** (of the `Content-Type` header, parameters dropped) and
//!   **status codes**: responses and bytes.
//! - **seeds**: each seed's own status, where its redirects led (the last
//!   URL of the chain and its status), and how many URLs were found and
//!   fetched from it (links and sitemap entries of the seed's page or of
//!   the page its redirects led to); a seed removed from the crawl says why.
//!   At the end of `trawl run` every seed offered is listed, with what
//!   became of it when it was offered (admitted, seen already, refused).
//!
//! Bounded, whatever the servers send: at most `max_hosts` hosts and
//! `max_seeds` seeds are kept by name (what hosts past the cap did is
//! summed in `other_hosts`: a crawl can know millions of hosts, and a
//! report is kept in memory); [`MAX_MIME_TYPES`] MIME types (the rest are
//! `other`) of at most [`MAX_MIME_LEN`] characters; [`MAX_HOST_STATUSES`]
//! status codes a host (the rest by class). Counts saturate. Gaps over
//! [`IDLE_GAP_MS`] are idle time, not a delay.

pub mod text;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::events::{Event, EventKind};
use crate::frontier::listing::{HostPage, HostRow, ListQuery, SortKey};

/// How much a report keeps by name (`[report]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportLimits {
    /// Hosts listed by name; the rest are summed in `other_hosts`.
    pub max_hosts: usize,
    /// Seeds listed by name.
    pub max_seeds: usize,
}

impl Default for ReportLimits {
    fn default() -> Self {
        ReportLimits {
            max_hosts: 100_000,
            max_seeds: 100_000,
        }
    }
}

/// Responses and their payload bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Tally {
    /// Responses recorded.
    pub responses: u64,
    /// Their payload bytes.
    pub bytes: u64,
}

impl Tally {
    fn add(&mut self, bytes: u64) {
        self.responses = self.responses.saturating_add(1);
        self.bytes = self.bytes.saturating_add(bytes);
    }

    fn merge(&mut self, other: &Tally) {
        self.responses = self.responses.saturating_add(other.responses);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// What a host's robots.txt answer means for the crawl (RFC 9309 §2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RobotsOutcome {
    /// A 2xx: its rules apply.
    Rules,
    /// A 4xx (or too many redirects): unavailable, everything is allowed.
    Unavailable,
    /// A 5xx (or another status): unreachable, everything is disallowed
    /// until it answers.
    Unreachable,
}

impl RobotsOutcome {
    /// The outcome of a robots.txt response of `status`, if it is the
    /// host's last: a 3xx is followed (its target's answer comes next and
    /// decides), so a 3xx that is last ended a chain too long to follow,
    /// which counts as unavailable (RFC 9309 §2.3.1.2, as
    /// `robots::MAX_ROBOTS_REDIRECTS` does).
    pub fn of(status: u16) -> Self {
        match status {
            200..=299 => RobotsOutcome::Rules,
            300..=499 => RobotsOutcome::Unavailable,
            _ => RobotsOutcome::Unreachable,
        }
    }

    /// Its name in the text report.
    pub fn name(self) -> &'static str {
        match self {
            RobotsOutcome::Rules => "rules",
            RobotsOutcome::Unavailable => "unavailable",
            RobotsOutcome::Unreachable => "unreachable",
        }
    }
}

/// The last robots.txt answer recorded for a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RobotsAnswer {
    /// What it means.
    pub outcome: RobotsOutcome,
    /// Its status.
    pub status: u16,
}

/// Delays between one response's end and the host's next request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DelayUsed {
    /// Delays measured (one fewer than the responses, at most).
    pub samples: u64,
    /// The smallest, milliseconds.
    pub min_ms: Option<u64>,
    /// The mean, milliseconds.
    pub mean_ms: Option<u64>,
    /// Their sum, milliseconds (for the mean and for merging).
    pub total_ms: u64,
}

impl DelayUsed {
    fn add(&mut self, ms: u64) {
        self.samples = self.samples.saturating_add(1);
        self.total_ms = self.total_ms.saturating_add(ms);
        self.min_ms = Some(self.min_ms.map_or(ms, |m| m.min(ms)));
        self.mean_ms = self.total_ms.checked_div(self.samples);
    }

    fn merge(&mut self, other: &DelayUsed) {
        if other.samples == 0 {
            return;
        }
        self.samples = self.samples.saturating_add(other.samples);
        self.total_ms = self.total_ms.saturating_add(other.total_ms);
        self.min_ms = match (self.min_ms, other.min_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.mean_ms = self.total_ms.checked_div(self.samples);
    }
}

/// What the crawl did at one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HostReport {
    /// Responses recorded (pages, robots.txt, sitemaps).
    pub responses: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Responses by status code.
    pub statuses: BTreeMap<u16, u64>,
    /// Responses that repeat or resemble an earlier one (`duplicate_of`).
    pub duplicates: u64,
    /// URLs that left the crawl (`removed` events).
    pub removed: u64,
    /// The last robots.txt answer recorded.
    pub robots: Option<RobotsAnswer>,
    /// The politeness delay the site saw.
    pub delay: DelayUsed,
    /// The last response's start and end (Unix ms), to measure the next
    /// delay from.
    #[serde(skip)]
    last: Option<(i64, i64)>,
}

impl HostReport {
    /// Folds one response of this host, started at `start_ms` (`None`:
    /// the host is `other_hosts`, whose responses are not one site's and
    /// measure no delay).
    fn response(&mut self, event: &Event, start_ms: Option<i64>) {
        self.responses = self.responses.saturating_add(1);
        self.bytes = self.bytes.saturating_add(event.bytes.unwrap_or(0));
        count_status(&mut self.statuses, event.status);
        self.duplicates = self
            .duplicates
            .saturating_add(u64::from(event.duplicate_of.is_some()));
        if event.kind == EventKind::Robots {
            self.robots = Some(RobotsAnswer {
                outcome: RobotsOutcome::of(event.status),
                status: event.status,
            });
        }
        let Some(start) = start_ms else { return };
        if let Some((_, last_end)) = self.last.filter(|(last_start, _)| start > *last_start) {
            let gap = start.saturating_sub(last_end).max(0) as u64;
            // A longer gap is the host having had nothing to do (an empty
            // queue, a refresh interval, the time between two runs).
            if gap <= IDLE_GAP_MS {
                self.delay.add(gap);
            }
        }
        let end = start.saturating_add(event.fetch_ms.unwrap_or(0) as i64);
        if self.last.is_none_or(|(last_start, _)| start > last_start) {
            self.last = Some((start, end));
        }
    }

    fn merge(&mut self, other: &HostReport) {
        self.responses = self.responses.saturating_add(other.responses);
        self.bytes = self.bytes.saturating_add(other.bytes);
        for (status, n) in &other.statuses {
            let key = status_key(&self.statuses, *status);
            let count = self.statuses.entry(key).or_default();
            *count = count.saturating_add(*n);
        }
        self.duplicates = self.duplicates.saturating_add(other.duplicates);
        self.removed = self.removed.saturating_add(other.removed);
        self.robots = self.robots.or(other.robots);
        self.delay.merge(&other.delay);
        // The later response is the one a next delay is measured from.
        self.last = self.last.max(other.last);
    }
}

/// Distinct status codes a host lists; further codes are counted under
/// their class (`400` for a new 4xx): a hostile host answering every code
/// there is keeps a small map.
pub const MAX_HOST_STATUSES: usize = 32;

/// Distinct MIME types listed; further types are counted as `other`.
pub const MAX_MIME_TYPES: usize = 1_000;

/// The longest MIME type kept (longer ones are cut).
pub const MAX_MIME_LEN: usize = 100;

/// A gap between a host's responses longer than this is the host being
/// idle, not a politeness delay (the longest delay trawl waits on its own,
/// `[politeness] max_delay` and Crawl-delay's default cap, is 60 s).
pub const IDLE_GAP_MS: u64 = 5 * 60 * 1000;

/// The key `status` is counted under in `statuses`: itself, unless the
/// map is full and does not have it (then its class).
fn status_key(statuses: &BTreeMap<u16, u64>, status: u16) -> u16 {
    if statuses.len() < MAX_HOST_STATUSES || statuses.contains_key(&status) {
        status
    } else {
        status / 100 * 100
    }
}

/// Counts one response of `status`.
fn count_status(statuses: &mut BTreeMap<u16, u64>, status: u16) {
    let count = statuses.entry(status_key(statuses, status)).or_default();
    *count = count.saturating_add(1);
}

/// What one seed led to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SeedReport {
    /// What became of it when it was offered (`admitted`, `seen`, or
    /// `refused: REASON`), where known (the end of `trawl run`).
    pub offered: Option<String>,
    /// Its own response's status, once fetched.
    pub status: Option<u16>,
    /// Where its redirects led: the chain's last URL fetched.
    pub led_to: Option<String>,
    /// That URL's status.
    pub led_to_status: Option<u16>,
    /// URLs found on it (or on where it led) and fetched.
    pub found: u64,
    /// Why it left the crawl, if it did (`gone`, `disallowed`, `moved`).
    pub removed: Option<String>,
}

/// The frontier: what is still queued, by host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FrontierReport {
    /// Hosts with work queued or scheduled (listed or not).
    pub hosts_total: usize,
    /// URLs queued at the hosts listed.
    pub queued: u64,
    /// The hosts with the most queued URLs first (at most
    /// [`crate::frontier::listing::MAX_LIMIT`]).
    pub hosts: Vec<HostRow>,
}

/// A crawl report (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CrawlReport {
    /// Every response recorded.
    pub totals: Tally,
    /// Hosts by name (at most `max_hosts`).
    pub hosts: BTreeMap<String, HostReport>,
    /// What the hosts past `max_hosts` did, summed.
    pub other_hosts: Option<HostReport>,
    /// Responses by MIME type (`none` without a `Content-Type`).
    pub mime_types: BTreeMap<String, Tally>,
    /// Responses by status code.
    pub status_codes: BTreeMap<u16, Tally>,
    /// Seeds by URL (at most `max_seeds`).
    pub seeds: BTreeMap<String, SeedReport>,
    /// Mentions (an offer, a seed's response) of seeds past `max_seeds`,
    /// which are not listed.
    pub seeds_not_listed: u64,
    /// What is still queued, by host (filled by the node when asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontier: Option<FrontierReport>,
    /// URLs of seeds' redirect chains, to the seed they started from.
    #[serde(skip)]
    roots: HashMap<String, String>,
    #[serde(skip)]
    limits: ReportLimits,
}

impl CrawlReport {
    /// An empty report keeping at most `limits` by name.
    pub fn new(limits: ReportLimits) -> Self {
        CrawlReport {
            limits,
            ..CrawlReport::default()
        }
    }

    /// Folds one output event.
    pub fn record(&mut self, event: &Event) {
        match event.kind {
            EventKind::Uploaded => {}
            EventKind::Removed => self.removal(event),
            EventKind::Page | EventKind::Robots | EventKind::Sitemap => self.response(event),
        }
    }

    /// Folds every event of a JSON-lines events file; lines that are not
    /// events (a torn last line, cut inside a character or not) are
    /// skipped and counted.
    pub fn fold_lines(&mut self, mut input: impl std::io::BufRead) -> std::io::Result<u64> {
        let mut skipped = 0;
        let mut line = Vec::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                return Ok(skipped);
            }
            match serde_json::from_slice::<Event>(&line) {
                Ok(event) => self.record(&event),
                Err(_) => skipped += 1,
            }
        }
    }

    fn response(&mut self, event: &Event) {
        let bytes = event.bytes.unwrap_or(0);
        self.totals.add(bytes);
        let mime = self.mime_key(mime_of(event.content_type.as_deref()));
        self.mime_types.entry(mime).or_default().add(bytes);
        self.status_codes
            .entry(event.status)
            .or_default()
            .add(bytes);
        let start = chrono::DateTime::parse_from_rfc3339(&event.fetched_at)
            .ok()
            .map(|t| t.timestamp_millis());
        match self.host(&event.url) {
            Some((host, true)) => host.response(event, start),
            Some((host, false)) => host.response(event, None),
            None => {}
        }
        if event.kind == EventKind::Page {
            self.seed_response(event);
        }
    }

    fn removal(&mut self, event: &Event) {
        if let Some((host, _)) = self.host(&event.url) {
            host.removed = host.removed.saturating_add(1);
        }
        if let Some(seed) = self.seeds.get_mut(&event.url) {
            seed.removed = event.reason.clone();
        }
    }

    /// The host of `url`'s report, and whether it is the host's own
    /// (`false`: `other_hosts`, past the cap).
    fn host(&mut self, url: &str) -> Option<(&mut HostReport, bool)> {
        let name = url::Url::parse(url).ok()?.host_str()?.to_owned();
        if self.hosts.len() < self.limits.max_hosts || self.hosts.contains_key(&name) {
            return Some((self.hosts.entry(name).or_default(), true));
        }
        Some((
            self.other_hosts.get_or_insert_with(HostReport::default),
            false,
        ))
    }

    /// The key `mime` is counted under: itself, or `other` once
    /// [`MAX_MIME_TYPES`] are listed.
    fn mime_key(&self, mime: String) -> String {
        if self.mime_types.len() < MAX_MIME_TYPES || self.mime_types.contains_key(&mime) {
            mime
        } else {
            "other".to_owned()
        }
    }

    /// A page's part in what the seeds led to.
    fn seed_response(&mut self, event: &Event) {
        if event.hop.as_deref() == Some("seed") {
            let Some(seed) = self.seed(&event.url) else {
                return;
            };
            seed.status = Some(event.status);
            self.roots.insert(event.url.clone(), event.url.clone());
            return;
        }
        let Some(root) = event.via.as_deref().and_then(|via| self.roots.get(via)) else {
            return;
        };
        let root = root.clone();
        let Some(seed) = self.seeds.get_mut(&root) else {
            return;
        };
        if event.hop.as_deref() == Some("redirect") {
            seed.led_to = Some(event.url.clone());
            seed.led_to_status = Some(event.status);
            // Bounded: a seed's chain is as long as the redirect limit.
            if self.roots.len() < self.limits.max_seeds.saturating_mul(8) {
                self.roots.insert(event.url.clone(), root);
            }
        } else {
            seed.found = seed.found.saturating_add(1);
        }
    }

    /// The report of seed `url`, unless the seeds listed are at the cap.
    fn seed(&mut self, url: &str) -> Option<&mut SeedReport> {
        if self.seeds.len() >= self.limits.max_seeds && !self.seeds.contains_key(url) {
            self.seeds_not_listed = self.seeds_not_listed.saturating_add(1);
            return None;
        }
        Some(self.seeds.entry(url.to_owned()).or_default())
    }

    /// Notes what became of seed `url` when it was offered.
    pub fn offered(&mut self, url: &str, outcome: &str) {
        if let Some(seed) = self.seed(url) {
            seed.offered = Some(outcome.to_owned());
        }
    }

    /// A copy of what the report says, without the redirect chains it
    /// follows (up to 8 URLs a seed, not part of the report): what is
    /// handed out on demand, under the lock the archive folds under.
    pub fn snapshot(&self) -> CrawlReport {
        CrawlReport {
            totals: self.totals,
            hosts: self.hosts.clone(),
            other_hosts: self.other_hosts.clone(),
            mime_types: self.mime_types.clone(),
            status_codes: self.status_codes.clone(),
            seeds: self.seeds.clone(),
            seeds_not_listed: self.seeds_not_listed,
            frontier: self.frontier.clone(),
            roots: HashMap::new(),
            limits: self.limits,
        }
    }

    /// Adds `other` (another node's report, say) to this one.
    pub fn merge(&mut self, other: &CrawlReport) {
        self.totals.merge(&other.totals);
        for (name, host) in &other.hosts {
            self.hosts.entry(name.clone()).or_default().merge(host);
        }
        if let Some(other_hosts) = &other.other_hosts {
            self.other_hosts
                .get_or_insert_with(HostReport::default)
                .merge(other_hosts);
        }
        for (mime, tally) in &other.mime_types {
            let mime = self.mime_key(mime.clone());
            self.mime_types.entry(mime).or_default().merge(tally);
        }
        for (status, tally) in &other.status_codes {
            self.status_codes.entry(*status).or_default().merge(tally);
        }
        for (url, seed) in &other.seeds {
            let mine = self.seeds.entry(url.clone()).or_default();
            mine.offered = mine.offered.take().or_else(|| seed.offered.clone());
            mine.status = mine.status.or(seed.status);
            mine.led_to = mine.led_to.take().or_else(|| seed.led_to.clone());
            mine.led_to_status = mine.led_to_status.or(seed.led_to_status);
            mine.found = mine.found.saturating_add(seed.found);
            mine.removed = mine.removed.take().or_else(|| seed.removed.clone());
        }
        self.seeds_not_listed = self.seeds_not_listed.saturating_add(other.seeds_not_listed);
        if let Some(frontier) = &other.frontier {
            let mine = self.frontier.get_or_insert_with(FrontierReport::default);
            mine.hosts_total = mine.hosts_total.saturating_add(frontier.hosts_total);
            mine.queued = mine.queued.saturating_add(frontier.queued);
            mine.hosts.extend(frontier.hosts.iter().cloned());
            mine.hosts
                .sort_by(|a, b| b.queued.cmp(&a.queued).then(a.host.cmp(&b.host)));
            mine.hosts.truncate(crate::frontier::listing::MAX_LIMIT);
        }
    }

    /// Sets the frontier section from a listing of hosts by queued URLs.
    pub fn with_frontier(mut self, page: HostPage) -> Self {
        self.frontier = Some(FrontierReport {
            hosts_total: page.total,
            queued: page.hosts.iter().map(|h| h.queued).sum(),
            hosts: page.hosts,
        });
        self
    }

    /// The listing the frontier section is made of: the hosts with the
    /// most URLs queued, as many as a listing gives.
    pub fn frontier_query() -> ListQuery {
        ListQuery {
            state: None,
            sort: SortKey::Queued,
            offset: 0,
            limit: crate::frontier::listing::MAX_LIMIT,
        }
    }
}

/// A `Content-Type`'s media type, lower-cased, without parameters (`none`
/// without one).
fn mime_of(content_type: Option<&str>) -> String {
    let mime = content_type
        .and_then(|c| c.split(';').next())
        .map(|m| m.trim().chars().take(MAX_MIME_LEN).collect::<String>())
        .map(|m| m.to_ascii_lowercase())
        .filter(|m| !m.is_empty());
    mime.unwrap_or_else(|| "none".into())
}

#[cfg(test)]
mod tests;

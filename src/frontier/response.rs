//! What a fetched response means for the crawl: pure decisions, no I/O.
//!
//! The HostActor's job runner carries them out in order (parse or read the
//! sitemap, archive, admit what was found, complete the entry); every
//! choice on the way is made here:
//! - [`classify`]: whether a fetch result is final for its URL or must be
//!   tried again ([`Retry`]): transient network failures and 5xx count
//!   against `max_attempts`; 429/503 ("later") against their own, larger
//!   `max_throttled_attempts`; failures that would repeat (an address the
//!   SSRF guard denies, a bad URL, an untrusted certificate, an oversized
//!   head) are final at once;
//! - [`plan`]: a sitemap is read, an HTML 2xx page parsed, a 3xx's target
//!   queued as a redirect, a non-HTML 2xx archived or only counted
//!   (`archive_non_html`);
//! - [`page_findings`]: meta robots and X-Robots-Tag together decide
//!   whether links are followed (`nofollow`/`none`);
//! - [`redirect_target`]: a redirect is a new URL of its own, one hop
//!   further, until `max_redirects`;
//! - [`sitemap_candidates`]: which sitemap entries enter the crawl and at
//!   what priority.

use std::time::{Duration, SystemTime};

use url::Url;

use super::importance::Cash;
use super::provenance::{Hop, Provenance};
use super::{Candidate, EntryKind, Priority};
use crate::fetch::{FetchError, FetchResponse};
use crate::metrics::Metrics;
use crate::parse::ParsedPage;
use crate::robots::RobotsStatus;
use crate::sitemap::{select_entries, ParsedSitemap, SitemapLimits};

/// Sitemap handling knobs.
#[derive(Debug, Clone)]
pub struct SitemapSettings {
    /// Per-file limits.
    pub limits: SitemapLimits,
    /// Depth of sitemap indexes followed.
    pub max_index_depth: u32,
    /// lastmod this recent means high priority.
    pub fresh_within: Duration,
}

/// How many times one URL has been tried, by kind of answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts {
    /// Network failures and 5xx other than 503.
    pub failed: u32,
    /// 429 and 503 answers.
    pub throttled: u32,
}

/// Bounds on tries per URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryLimits {
    /// Tries on failures (`fetch.max_attempts`).
    pub max_attempts: u32,
    /// Tries on 429/503 (`fetch.max_throttled_attempts`).
    pub max_throttled_attempts: u32,
}

/// What a fetch result means for its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try the URL again later (the host's delay decides when).
    Again,
    /// The response is final: process it.
    Process,
    /// No response, and none is coming: record the URL failed.
    GiveUp,
    /// The address is denied by the SSRF guard: record it denied.
    Denied,
}

/// Classifies a fetch result, counting it in `attempts`.
pub fn classify(
    result: &Result<FetchResponse, FetchError>,
    attempts: &mut Attempts,
    limits: RetryLimits,
) -> Retry {
    match result {
        Err(FetchError::SsrfDenied(_)) => Retry::Denied,
        // The proxy's failure is not the URL's: tried again (after the
        // host's backoff) however often, so an outage of the proxy, or a
        // proxy that refuses the crawler, loses no URL.
        Err(FetchError::Proxy(_)) => Retry::Again,
        Err(err) if !err.is_transient() => Retry::GiveUp,
        Err(_) => {
            attempts.failed += 1;
            if attempts.failed < limits.max_attempts {
                Retry::Again
            } else {
                Retry::GiveUp
            }
        }
        Ok(resp) if matches!(resp.status, 429 | 503) => {
            attempts.throttled += 1;
            if attempts.throttled < limits.max_throttled_attempts {
                Retry::Again
            } else {
                Retry::Process
            }
        }
        Ok(resp) if (500..600).contains(&resp.status) => {
            attempts.failed += 1;
            if attempts.failed < limits.max_attempts {
                Retry::Again
            } else {
                Retry::Process
            }
        }
        Ok(_) => Retry::Process,
    }
}

/// Whether [`classify`] may answer [`Retry::Again`] for `result`: the
/// only results for which a URL's earlier tries matter.
pub fn may_retry(result: &Result<FetchResponse, FetchError>) -> bool {
    match result {
        Err(err) => err.is_transient(),
        Ok(resp) => matches!(resp.status, 429 | 500..=599),
    }
}

/// The politeness outcome of a fetch result at `now`.
pub fn politeness_outcome(
    result: &Result<FetchResponse, FetchError>,
    now: SystemTime,
) -> crate::politeness::Outcome {
    use crate::politeness::Outcome;
    match result {
        Ok(resp) => Outcome::of_status(resp.status, resp.header("retry-after"), now),
        Err(_) => Outcome::Failure,
    }
}

/// What to do with a final response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// A sitemap 2xx: read it for URLs, then archive it.
    ReadSitemap,
    /// An HTML 2xx page: parse it, then archive it.
    ParseHtml,
    /// Archive as it is, offering `found` (a redirect's target, if any).
    Archive {
        /// The redirect target to queue.
        found: Option<Box<Candidate>>,
    },
    /// A non-HTML 2xx with `archive_non_html` off: count it, store nothing.
    NotArchived,
    /// A 304 to a conditional refetch: the copy on record is current;
    /// archived as a `server-not-modified` revisit of it.
    NotModified,
}

impl Plan {
    /// The hop by which what this response leads to is reached from it
    /// (`frontier/provenance.rs`): a sitemap's entries, a page's links, a
    /// redirect's target; `None` when it leads nowhere.
    pub fn hop(&self) -> Option<Hop> {
        match self {
            Plan::ReadSitemap => Some(Hop::Manifest),
            Plan::ParseHtml => Some(Hop::Link),
            Plan::Archive { .. } => Some(Hop::Redirect),
            Plan::NotArchived | Plan::NotModified => None,
        }
    }
}

/// Plans a final response of a queue entry of `kind` at `depth` fetched
/// from `url`; `has_copy`: the URL's payload is on record (so a 304
/// confirms it; without one a 304 is archived like any response).
#[allow(clippy::too_many_arguments)]
pub fn plan(
    kind: &EntryKind,
    depth: u32,
    url: &Url,
    response: &FetchResponse,
    has_copy: bool,
    archive_non_html: bool,
    max_redirects: u32,
    metrics: &Metrics,
) -> Plan {
    let ok = (200..300).contains(&response.status);
    if response.status == 304 && has_copy {
        return Plan::NotModified;
    }
    match kind {
        EntryKind::Sitemap { .. } if ok => Plan::ReadSitemap,
        EntryKind::Sitemap { .. } => Plan::Archive { found: None },
        _ if ok && response.is_html() => Plan::ParseHtml,
        _ if (300..400).contains(&response.status) => Plan::Archive {
            found: redirect_target(kind, depth, url, response, max_redirects, metrics)
                .map(Box::new),
        },
        _ if ok && !archive_non_html => {
            metrics.urls.with_label_values(&["not_archived_type"]).inc();
            Plan::NotArchived
        }
        _ => Plan::Archive { found: None },
    }
}

/// The robots directives of a response before its body is read:
/// X-Robots-Tag headers for our product token or for all robots.
pub fn header_directives(response: &FetchResponse, product_token: &str) -> Option<String> {
    crate::parse::x_robots_tag(response.header_values("x-robots-tag"), product_token)
}

/// What a parsed page contributes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageFindings {
    /// Links to offer (empty under `nofollow`).
    pub found: Vec<Candidate>,
    /// `rel=canonical`.
    pub canonical: Option<Url>,
    /// Meta robots and X-Robots-Tag together.
    pub robots_meta: Option<String>,
    /// Simhash of the visible text.
    pub simhash: Option<u64>,
    /// The language of the visible text (ISO 639-3), if detected.
    pub language: Option<&'static str>,
    /// The payload's type by its bytes, if the parser sniffed it.
    pub mime_detected: Option<&'static str>,
    /// Distinct links dropped over `[parse] max_links_per_page`.
    pub links_dropped: usize,
}

/// Meta robots adds to X-Robots-Tag (`header`); either one's `nofollow` or
/// `none` keeps the links from being followed.
pub fn page_findings(
    parsed: ParsedPage,
    header: Option<&str>,
    url: &Url,
    depth: u32,
) -> PageFindings {
    let robots_meta = crate::parse::robots_directives(parsed.robots_meta.as_deref(), header);
    let found = if crate::parse::forbids_following(robots_meta.as_deref()) {
        Vec::new()
    } else {
        let referrer = Candidate::referrer_of(url);
        parsed
            .links
            .into_iter()
            .map(|u| Candidate::linked_from(u, depth + 1, referrer.clone()))
            .collect()
    };
    PageFindings {
        found,
        canonical: parsed.canonical,
        robots_meta,
        simhash: parsed.simhash,
        language: parsed.language,
        mime_detected: parsed.mime_detected,
        links_dropped: parsed.links_dropped,
    }
}

/// The target of a redirect, as a candidate: it enters the crawl like a
/// link (so robots.txt and politeness apply to its host), at the same
/// depth, one hop further, unless the chain is already `max_redirects`
/// long.
pub fn redirect_target(
    kind: &EntryKind,
    depth: u32,
    url: &Url,
    response: &FetchResponse,
    max_redirects: u32,
    metrics: &Metrics,
) -> Option<Candidate> {
    let target = response.header("location").and_then(|l| url.join(l).ok())?;
    let hops = kind.redirect_hops();
    if u32::from(hops) >= max_redirects {
        metrics.redirects.with_label_values(&["too_many"]).inc();
        tracing::debug!(%url, hops, "redirect chain too long; not followed");
        return None;
    }
    metrics.redirects.with_label_values(&["followed"]).inc();
    Some(Candidate {
        provenance: Default::default(),
        url: target,
        depth,
        priority: Priority::HIGH,
        kind: EntryKind::Redirected {
            hops: hops.saturating_add(1),
        },
        referrer: Some(crate::url::registrable_domain(crate::url::host_key(url)).to_owned()),
        lastmod_ms: None,
        cash: Cash::UNKNOWN,
    })
}

/// Reads a sitemap into candidates: pages of this host (or of the host
/// whose robots.txt submitted the sitemap), and child sitemaps of an index
/// up to the depth limit. `now` dates "fresh" lastmods.
pub fn sitemap_candidates(
    parsed: &ParsedSitemap,
    sitemap_url: &Url,
    submitter: Option<&str>,
    depth: u32,
    settings: &SitemapSettings,
    now: SystemTime,
    metrics: &Metrics,
) -> Vec<Candidate> {
    let count = |outcome: &str, n: usize| {
        metrics
            .sitemap_urls
            .with_label_values(&[outcome])
            .inc_by(n as u64);
    };
    count("dropped_limit", parsed.dropped);
    if let Some(err) = &parsed.error {
        tracing::debug!(url = %sitemap_url, error = %err, "sitemap read partly");
    }
    let now = chrono::DateTime::<chrono::Utc>::from(now);
    let fresh_since = now - chrono::Duration::from_std(settings.fresh_within).unwrap_or_default();
    let child_depth = depth + 1;
    let selection = select_entries(
        parsed,
        sitemap_url,
        submitter,
        child_depth,
        settings.max_index_depth,
        fresh_since,
    );
    count("dropped_host", selection.dropped_host);
    count("dropped_depth", selection.dropped_depth);
    let kind = EntryKind::Sitemap {
        submitter: submitter.map(str::to_owned),
    };
    let sitemaps = selection.sitemaps.into_iter().map(|url| Candidate {
        provenance: Default::default(),
        referrer: None,
        url,
        depth: child_depth,
        priority: Priority::HIGH,
        kind: kind.clone(),
        lastmod_ms: None,
        cash: Cash::UNKNOWN,
    });
    let pages = selection
        .pages
        .into_iter()
        .map(|(url, priority, lastmod)| Candidate {
            provenance: Default::default(),
            referrer: None,
            url,
            depth: 0,
            priority,
            kind: EntryKind::Page,
            lastmod_ms: lastmod.and_then(|t| u64::try_from(t.timestamp_millis()).ok()),
            cash: Cash::UNKNOWN,
        });
    let found: Vec<Candidate> = sitemaps.chain(pages).collect();
    count("queued", found.len());
    found
}

/// The sitemaps a robots.txt names; `/sitemap.xml` only when the host has
/// no robots.txt (`status` [`RobotsStatus::Unavailable`]: a 4xx).
///
/// Why not always: robots.txt is where a site names its sitemaps
/// (sitemaps.org, RFC 9309 §2.2.4), so a site that wrote one and named
/// none has said what it has; asking for `/sitemap.xml` anyway is one
/// more request on every such host, on its critical path (one in flight
/// a host): on the side-by-side bench's 100 ms web, 42 requests a host
/// for 41 pages. A site with no robots.txt has no other place to name
/// one, so there the conventional location is tried.
pub fn robots_sitemaps(
    robots_url: &Url,
    sitemaps: &[String],
    status: RobotsStatus,
    host: &str,
) -> Vec<Candidate> {
    let submitter = Some(host.to_owned());
    // Found by robots.txt: one manifest hop from it.
    let via: std::sync::Arc<str> = std::sync::Arc::from(robots_url.as_str());
    let provenance = Provenance::seed().then(&via, Hop::Manifest);
    let mut candidates: Vec<Candidate> = sitemaps
        .iter()
        .filter_map(|s| robots_url.join(s).ok())
        .map(|url| Candidate {
            provenance: provenance.clone(),
            referrer: None,
            url,
            depth: 0,
            priority: Priority::HIGH,
            kind: EntryKind::Sitemap {
                submitter: submitter.clone(),
            },
            lastmod_ms: None,
            cash: Cash::SEED,
        })
        .collect();
    if candidates.is_empty() && status == RobotsStatus::Unavailable {
        if let Ok(url) = robots_url.join("/sitemap.xml") {
            candidates.push(Candidate {
                provenance: provenance.clone(),
                referrer: None,
                url,
                depth: 0,
                priority: Priority::HIGH,
                kind: EntryKind::Sitemap { submitter: None },
                lastmod_ms: None,
                cash: Cash::SEED,
            });
        }
    }
    candidates
}

#[cfg(test)]
mod tests;

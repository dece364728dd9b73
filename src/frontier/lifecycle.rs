//! A URL's life after admission, as transitions of its stored record
//! ([`UrlRecord`]): fetched and due again, tried again, removed, brought
//! back. Pure functions of the previous record, what happened and `now`;
//! the host machine and its task runner call them, the store writes what
//! they return.
//!
//! - **Fetched** ([`fetched`]): the visit is recorded (status, validators,
//!   digest, simhash, where the payload is stored), the change history
//!   grows by one compared visit, and with `[recrawl] enabled` the URL is
//!   due again after the scheduler's interval ([`super::recrawl`]).
//! - **Not modified**: a 304 confirms the copy on record; it is a visit
//!   that saw no change, and keeps the copy, its digest and its status.
//! - **Removed** ([`Removal`]): a 404 or 410 on two fetches in a row
//!   (the first one is checked again after `min_interval`: one missing
//!   answer may be a deploy in progress); robots.txt disallowing a URL
//!   that was fetched before; a permanent redirect (301, 308), whose
//!   target is queued as a new URL. A removed URL stays in the seen set:
//!   links to it do not bring it back.
//! - **Brought back** ([`due_again`]): a *new* seed re-admits a removed
//!   URL (one never given as a seed before: an operator naming a page
//!   again); a seed offered again does not, so the same seed list given
//!   on every restart does not undo removals. An operator who wants them
//!   back asks for a reseed (`trawl run --reseed`, `"reseed": true` in the
//!   admin API), which offers each seed as changed now: a `lastmod` of
//!   now, under the sitemap rule below. A sitemap entry whose `lastmod` is
//!   newer than the last fetch (or the removal) makes the URL due at once. A sitemap's `changefreq` and
//!   `priority` are hints only and are not used: a site's own claims
//!   about its change rate are often wrong, the URL's history is not.
//! - **Tried again** ([`retry`]): a failed try is stored with its count,
//!   so a restart does not give the URL fresh tries. A fetched URL whose
//!   refetch finally fails keeps its copy and comes due again after its
//!   interval: an outage does not drop a page from the crawl.
//!
//! Whether a refetched page changed is judged once, by [`judge_change`],
//! in the archive (where the payload digest is computed).

use std::time::Duration;

use super::recrawl::{self, RecrawlPolicy};
use crate::store::{Removal, Tries, UrlRecord, UrlState, Visit};

/// `[recrawl]` as the crawl uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecrawlSettings {
    /// Fetch URLs again at all.
    pub enabled: bool,
    /// Interval bounds and the reference interval.
    pub policy: RecrawlPolicy,
    /// Share of a host's requests refreshes may take while new URLs wait.
    pub refresh_share: f64,
    /// Simhash bits within which a page is "unchanged".
    pub change_distance: u32,
}

impl RecrawlSettings {
    /// From `[recrawl]`.
    pub fn from_config(c: &crate::config::RecrawlConfig) -> Self {
        RecrawlSettings {
            enabled: c.enabled,
            policy: RecrawlPolicy {
                min_interval: c.min_interval,
                max_interval: c.max_interval,
                default_interval: c.default_interval,
            },
            refresh_share: c.refresh_share,
            change_distance: c.change_distance,
        }
    }
}

/// What a fetch that got a final response observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The response: its time, status and validators; the payload's
    /// digest and simhash if the archive saw it; where the payload is
    /// stored in full now (a 2xx archived in full, or the original an
    /// identical payload was recorded as a revisit of).
    pub visit: Visit,
    /// A 304 confirming the copy on record.
    pub not_modified: bool,
    /// Whether the content changed since the last visit (see
    /// [`judge_change`]); `None` on a first fetch.
    pub changed: Option<bool>,
}

/// A record after a transition, and the removal it made, if any (the
/// caller writes a `removed` event for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The record to store.
    pub record: UrlRecord,
    /// The URL left the crawl at this transition.
    pub removed: Option<Removal>,
}

/// Whether a refetch found the content changed, compared with the visit
/// on record: `None` for a first fetch. A 304 is no change; two 2xx
/// compare payload digests and, for pages with a simhash, visible text
/// (so a changed footer timestamp is not a change, see
/// [`recrawl::changed`]); otherwise a change of status is a change.
pub fn judge_change(
    previous: Option<&Visit>,
    status: u16,
    not_modified: bool,
    digest: &[u8; 32],
    simhash: Option<u64>,
    change_distance: u32,
) -> Option<bool> {
    let prev = previous?;
    if not_modified {
        return Some(false);
    }
    let both_ok = (200..300).contains(&prev.status) && (200..300).contains(&status);
    match (&prev.digest, both_ok) {
        (Some(old), true) => Some(recrawl::changed(
            old,
            digest,
            prev.simhash,
            simhash,
            change_distance,
        )),
        _ => Some(prev.status != status || prev.digest.as_ref() != Some(digest)),
    }
}

/// The record of a URL whose fetch got a final response.
pub fn fetched(
    previous: Option<&UrlRecord>,
    depth: u32,
    seen: Observed,
    now_ms: u64,
    settings: &RecrawlSettings,
) -> Settled {
    let (mut rec, was_gone) = starting(previous, depth);
    rec.removed_ms = None;
    if let (Some(last), Some(changed)) = (&rec.last, seen.changed) {
        let after = Duration::from_millis(seen.visit.at_ms.saturating_sub(last.at_ms));
        rec.history = rec.history.record(changed, after);
    }
    let status = record_visit(&mut rec, seen);
    rec.misses = match status {
        404 | 410 => rec.misses.saturating_add(1),
        _ => 0,
    };
    let removal = match status {
        301 | 308 => Some(Removal::Moved),
        404 | 410 if rec.misses >= 2 => Some(Removal::Gone),
        _ => None,
    };
    if let Some(removal) = removal {
        return remove(rec, removal, now_ms, was_gone);
    }
    rec.state = UrlState::Fetched(status);
    schedule(&mut rec, now_ms, settings);
    Settled {
        record: rec,
        removed: None,
    }
}

/// Writes `seen` into `rec.last`; the status the URL now has (a 304 keeps
/// the status of the copy it confirms).
fn record_visit(rec: &mut UrlRecord, seen: Observed) -> u16 {
    let now = seen.visit;
    match (&mut rec.last, seen.not_modified) {
        (Some(last), true) => {
            last.at_ms = now.at_ms;
            if now.etag.is_some() {
                last.etag = now.etag;
            }
            if now.last_modified.is_some() {
                last.last_modified = now.last_modified;
            }
            last.status
        }
        _ => {
            let status = now.status;
            rec.last = Some(now);
            status
        }
    }
}

/// The record a transition starts from (the previous one, or a fresh one
/// at `depth`) with its tries cleared, and whether it was removed.
fn starting(previous: Option<&UrlRecord>, depth: u32) -> (UrlRecord, bool) {
    let was_gone = previous.is_some_and(|p| matches!(p.state, UrlState::Gone(_)));
    let mut rec = previous
        .cloned()
        .unwrap_or_else(|| UrlRecord::new(UrlState::Queued, depth));
    rec.tries = Tries::default();
    (rec, was_gone)
}

/// Sets the next due time of a URL still in the crawl: after a first 404
/// or 410, `min_interval` (to confirm it); otherwise the scheduler's
/// interval. Nothing when refreshing is off.
fn schedule(rec: &mut UrlRecord, now_ms: u64, settings: &RecrawlSettings) {
    if !settings.enabled {
        rec.next_due_ms = None;
        return;
    }
    let previous = (rec.interval_ms > 0).then(|| Duration::from_millis(rec.interval_ms));
    let interval = if rec.misses > 0 {
        settings.policy.min_interval
    } else {
        settings.policy.next_interval(&rec.history, previous)
    };
    if rec.misses == 0 {
        rec.interval_ms = duration_ms(interval);
    }
    rec.next_due_ms = Some(now_ms.saturating_add(duration_ms(interval)));
}

fn duration_ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// `rec` removed for `removal` at `now_ms`; a removal is reported only the
/// first time.
fn remove(mut rec: UrlRecord, removal: Removal, now_ms: u64, was_gone: bool) -> Settled {
    rec.state = UrlState::Gone(removal);
    rec.removed_ms = Some(now_ms);
    rec.next_due_ms = None;
    Settled {
        record: rec,
        removed: (!was_gone).then_some(removal),
    }
}

/// The record of a URL finished without a response: `state` is why
/// (failed, disallowed, robots.txt unreachable, denied). A URL fetched
/// before that robots.txt now disallows is removed; one whose refetch
/// failed keeps its copy and is due again after its interval.
pub fn unfetched(
    previous: Option<&UrlRecord>,
    depth: u32,
    state: UrlState,
    now_ms: u64,
    settings: &RecrawlSettings,
) -> Settled {
    let (mut rec, was_gone) = starting(previous, depth);
    let fetched_before = rec.last.is_some();
    if state == UrlState::Disallowed && fetched_before {
        return remove(rec, Removal::Disallowed, now_ms, was_gone);
    }
    let retryable = matches!(state, UrlState::Failed | UrlState::RobotsUnreachable);
    if fetched_before && retryable {
        let status = rec.last.as_ref().map_or(0, |v| v.status);
        rec.state = UrlState::Fetched(status);
        schedule(&mut rec, now_ms, settings);
    } else {
        rec.state = state;
        rec.next_due_ms = None;
    }
    Settled {
        record: rec,
        removed: None,
    }
}

/// The record of a URL whose try failed and will be tried again.
pub fn retry(previous: Option<&UrlRecord>, depth: u32, tries: Tries) -> UrlRecord {
    let (mut rec, _) = starting(previous, depth);
    rec.state = UrlState::RetryDue;
    rec.tries = tries;
    rec
}

/// Whether an offer of a seen URL is a seed, and whether the URL was
/// given as a seed before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedOffer {
    /// Not a seed: a link, a redirect, a sitemap entry.
    No,
    /// A seed, for a URL never given as a seed before.
    New,
    /// A seed given before (the same seed list, offered on every start).
    Repeated,
}

/// Why a seen URL is offered again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// Given by the operator as a seed, and whether for the first time.
    pub seed: SeedOffer,
    /// The `lastmod` of the sitemap entry that lists it, or the moment of
    /// a reseed (Unix ms).
    pub lastmod_ms: Option<u64>,
}

/// Whether an offer makes a seen URL due at once: a new seed brings back
/// a removed URL; a `lastmod` newer than the last fetch (or than the
/// removal) makes a fetched or removed URL due. Everything else (links,
/// seeds given before, queued URLs, URLs that never got a response)
/// changes nothing.
pub fn due_again(rec: &UrlRecord, offer: Offer) -> bool {
    let newer_than =
        |ms: Option<u64>| matches!((offer.lastmod_ms, ms), (Some(l), Some(t)) if l > t);
    match rec.state {
        UrlState::Gone(_) => offer.seed == SeedOffer::New || newer_than(rec.removed_ms),
        UrlState::Fetched(_) => newer_than(rec.last.as_ref().map(|v| v.at_ms)),
        _ => false,
    }
}

/// `rec` made due at `now_ms` by [`due_again`]: back in the crawl (a
/// removed URL starts its misses again), keeping its last visit so the
/// refetch is conditional.
pub fn bring_back(mut rec: UrlRecord, now_ms: u64) -> UrlRecord {
    if let UrlState::Gone(_) = rec.state {
        rec.state = match &rec.last {
            Some(v) => UrlState::Fetched(v.status),
            None => UrlState::Queued,
        };
        rec.removed_ms = None;
        rec.misses = 0;
    }
    rec.next_due_ms = Some(now_ms);
    rec
}

#[cfg(test)]
mod tests;

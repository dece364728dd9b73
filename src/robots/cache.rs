//! The robots.txt lifecycle of one origin: when to fetch, what a result
//! means, how long it lasts. Pure state with time passed in (Unix ms).
//!
//! - never fetched: fetch before any other URL of the origin;
//! - redirects: followed up to [`MAX_ROBOTS_REDIRECTS`] hops, each hop a
//!   request under the host's politeness; more hops mean "unavailable";
//! - 2xx/4xx: a good copy, used for `ttl`;
//! - 5xx/no response: with no good copy everything waits (disallow all) and
//!   the fetch is retried after `retry_base × 2^(attempts-1)` (capped by
//!   `retry_max`); after `give_up_after` of failures, and at least
//!   [`MIN_ATTEMPTS`] attempts (so downtime of the crawler itself, or a
//!   slow machine, does not give up an origin it barely tried), the
//!   origin's URLs are given up. With a good copy (a failed refresh) the old copy stays in
//!   force and the refresh is retried on the same schedule.

use std::time::Duration;

use url::Url;

use super::{
    robots_url, RobotsRecord, RobotsRetry, RobotsStatus, Rules, MAX_ROBOTS_BYTES,
    MAX_ROBOTS_REDIRECTS,
};

/// Attempts of an unreachable robots.txt before its origin may be given up.
pub const MIN_ATTEMPTS: u32 = 3;

/// The robots.txt policy knobs.
#[derive(Debug, Clone)]
pub struct RobotsSettings {
    /// Our product token.
    pub product_token: String,
    /// Lifetime of a good copy.
    pub ttl: Duration,
    /// First retry delay while unreachable.
    pub retry_base: Duration,
    /// Largest retry delay.
    pub retry_max: Duration,
    /// Unreachable this long with no good copy: give the URLs up.
    pub give_up_after: Duration,
}

/// What the origin's URLs must do now.
#[derive(Debug, PartialEq)]
pub enum Need<'a> {
    /// These rules decide.
    Ready(&'a Rules),
    /// Fetch this URL (robots.txt or a redirect hop) first.
    Fetch(Url),
    /// A robots fetch is in flight; wait for it.
    InFlight,
    /// Unreachable; retry at this Unix ms.
    RetryAt(u64),
    /// Unreachable for longer than `give_up_after`: drop the URLs.
    GiveUp,
    /// The origin's address is denied by the SSRF guard: record its URLs
    /// denied (nothing of it is ever fetched, so nothing is retried).
    Denied,
}

/// The answer to a robots.txt request.
#[derive(Debug, Clone)]
pub struct FetchResult {
    /// Status, or `None` without a response.
    pub status: Option<u16>,
    /// The Location header of a 3xx.
    pub location: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// What a fetch result led to.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    /// A redirect to follow next.
    Redirect(Url),
    /// A new good copy (to persist).
    Stored(RobotsRecord),
    /// Unreachable; retry at this Unix ms (the old copy, if any, stays).
    Failed {
        /// When to retry.
        retry_at_ms: u64,
    },
}

#[derive(Debug, Clone)]
struct Failing {
    since_ms: u64,
    attempts: u32,
    retry_at_ms: u64,
    /// Status of the last failed attempt (`None`: no response).
    status: Option<u16>,
}

#[derive(Debug, Clone)]
struct Hop {
    url: Url,
    hops: u32,
    in_flight: bool,
}

/// robots.txt state of one origin.
#[derive(Debug, Clone)]
pub struct OriginRobots {
    /// Where robots.txt lives.
    robots_url: Url,
    /// The last good copy and its rules.
    good: Option<(RobotsRecord, Rules)>,
    failing: Option<Failing>,
    fetching: Option<Hop>,
    /// The address was denied: the same answer would come every time.
    denied: bool,
}

impl OriginRobots {
    /// The state of the origin of `url`, from its persisted record if any:
    /// a good copy, or an unreachable one whose `fetched_at_ms` is when the
    /// failures began (so passivation or a restart does not reset the
    /// give-up clock; the fetch is retried at once).
    pub fn new(url: &Url, saved: Option<RobotsRecord>, settings: &RobotsSettings) -> Self {
        let mut state = OriginRobots {
            robots_url: robots_url(url),
            good: None,
            failing: None,
            fetching: None,
            denied: false,
        };
        match saved {
            Some(r) if r.status_class() == RobotsStatus::Unreachable => {
                // Records of earlier releases carry no retry state: one
                // attempt, due at once.
                let retry = r.retry.unwrap_or(RobotsRetry {
                    attempts: 1,
                    at_ms: 0,
                });
                state.failing = Some(Failing {
                    since_ms: r.fetched_at_ms,
                    attempts: retry.attempts.max(1),
                    retry_at_ms: retry.at_ms,
                    status: r.status,
                });
            }
            Some(r) => {
                let rules = Rules::from_record(&r, &settings.product_token);
                state.good = Some((r, rules));
            }
            None => {}
        }
        state
    }

    /// What to persist: the good copy, else the unreachable state.
    pub fn record(&self) -> Option<RobotsRecord> {
        match (&self.good, &self.failing) {
            (Some((r, _)), _) => Some(r.clone()),
            (None, Some(f)) => Some(RobotsRecord {
                retry: Some(RobotsRetry {
                    attempts: f.attempts,
                    at_ms: f.retry_at_ms,
                }),
                status: f.status,
                fetched_at_ms: f.since_ms,
                body: Vec::new(),
            }),
            (None, None) => None,
        }
    }

    /// The rules in force, if any.
    pub fn rules(&self) -> Option<&Rules> {
        self.good.as_ref().map(|(_, rules)| rules)
    }

    /// Whether robots.txt is unreachable right now.
    pub fn failing(&self) -> bool {
        self.failing.is_some()
    }

    /// What the origin's URLs must do at `now_ms`.
    pub fn need(&self, now_ms: u64, settings: &RobotsSettings) -> Need<'_> {
        if self.denied {
            return Need::Denied;
        }
        if let Some(hop) = &self.fetching {
            return if hop.in_flight {
                Need::InFlight
            } else {
                Need::Fetch(hop.url.clone())
            };
        }
        let retry_due = self
            .failing
            .as_ref()
            .is_none_or(|f| f.retry_at_ms <= now_ms);
        match (&self.good, &self.failing) {
            (Some((record, rules)), _) => {
                let stale = now_ms >= record.fetched_at_ms + settings.ttl.as_millis() as u64;
                if stale && retry_due {
                    Need::Fetch(self.robots_url.clone())
                } else {
                    Need::Ready(rules)
                }
            }
            (None, Some(f))
                if f.attempts >= MIN_ATTEMPTS
                    && now_ms >= f.since_ms + settings.give_up_after.as_millis() as u64 =>
            {
                Need::GiveUp
            }
            (None, Some(f)) if !retry_due => Need::RetryAt(f.retry_at_ms),
            (None, _) => Need::Fetch(self.robots_url.clone()),
        }
    }

    /// When the origin's URLs will be given up if robots.txt stays
    /// unreachable (Unix ms); `None` while it is not failing or a good copy
    /// exists.
    pub fn give_up_at_ms(&self, settings: &RobotsSettings) -> Option<u64> {
        match (&self.good, &self.failing) {
            (None, Some(f)) if f.attempts >= MIN_ATTEMPTS => {
                Some(f.since_ms + settings.give_up_after.as_millis() as u64)
            }
            _ => None,
        }
    }

    /// Marks the fetch of `url` (from [`Need::Fetch`]) as started.
    pub fn fetch_started(&mut self, url: Url) {
        let hops = self.fetching.as_ref().map_or(0, |h| h.hops);
        self.fetching = Some(Hop {
            url,
            hops,
            in_flight: true,
        });
    }

    /// The fetch in flight was never sent (an internal failure, not the
    /// origin's): the same URL is to be fetched again.
    pub fn fetch_abandoned(&mut self) {
        if let Some(hop) = &mut self.fetching {
            hop.in_flight = false;
        }
    }

    /// The SSRF guard refused the origin's address: its URLs are recorded
    /// denied from now on. Not persisted: a later activation tries once
    /// more, which the guard refuses before any traffic leaves.
    pub fn deny(&mut self) {
        self.fetching = None;
        self.denied = true;
    }

    /// Takes the result of the fetch in flight.
    pub fn fetch_done(
        &mut self,
        result: FetchResult,
        now_ms: u64,
        settings: &RobotsSettings,
    ) -> Fetched {
        let hop = self.fetching.take();
        let (url, hops) = hop.map_or((self.robots_url.clone(), 0), |h| (h.url, h.hops));
        if let (Some(300..=399), Some(location)) = (result.status, &result.location) {
            if let Ok(next) = url.join(location) {
                if hops < MAX_ROBOTS_REDIRECTS {
                    self.fetching = Some(Hop {
                        url: next.clone(),
                        hops: hops + 1,
                        in_flight: false,
                    });
                    return Fetched::Redirect(next);
                }
            }
        }
        let record = RobotsRecord {
            retry: None,
            status: result.status,
            fetched_at_ms: now_ms,
            body: if matches!(result.status, Some(200..=299)) {
                result.body[..result.body.len().min(MAX_ROBOTS_BYTES)].to_vec()
            } else {
                Vec::new()
            },
        };
        if record.status_class() == RobotsStatus::Unreachable {
            let failing = self.failing.get_or_insert(Failing {
                since_ms: now_ms,
                attempts: 0,
                retry_at_ms: now_ms,
                status: None,
            });
            failing.attempts += 1;
            failing.status = record.status;
            let doublings = (failing.attempts - 1).min(30);
            let wait = settings
                .retry_base
                .saturating_mul(1 << doublings)
                .min(settings.retry_max);
            failing.retry_at_ms = now_ms + wait.as_millis() as u64;
            return Fetched::Failed {
                retry_at_ms: failing.retry_at_ms,
            };
        }
        self.failing = None;
        let rules = Rules::from_record(&record, &settings.product_token);
        self.good = Some((record.clone(), rules));
        Fetched::Stored(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RobotsSettings {
        RobotsSettings {
            product_token: "trawl".into(),
            ttl: Duration::from_secs(100),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(4),
            give_up_after: Duration::from_secs(60),
        }
    }

    fn result(status: Option<u16>, location: Option<&str>, body: &str) -> FetchResult {
        FetchResult {
            status,
            location: location.map(str::to_owned),
            body: body.as_bytes().to_vec(),
        }
    }

    fn page() -> Url {
        Url::parse("http://a.test/p/1.html").unwrap()
    }

    fn fetch_url(o: &OriginRobots, now: u64) -> Url {
        match o.need(now, &settings()) {
            Need::Fetch(url) => url,
            other => panic!("expected a fetch, got {other:?}"),
        }
    }

    #[test]
    fn fetch_first_then_use_until_stale() {
        let s = settings();
        let mut o = OriginRobots::new(&page(), None, &s);
        let url = fetch_url(&o, 0);
        assert_eq!(url.as_str(), "http://a.test/robots.txt");
        o.fetch_started(url);
        assert_eq!(o.need(0, &s), Need::InFlight);
        let done = o.fetch_done(
            result(Some(200), None, "User-agent: *\nDisallow: /p/"),
            10,
            &s,
        );
        assert!(matches!(done, Fetched::Stored(_)));
        let Need::Ready(rules) = o.need(50_000, &s) else {
            panic!()
        };
        assert!(!rules.allows(&page()));
        // Stale after the TTL: refetched.
        assert_eq!(fetch_url(&o, 100_010).as_str(), "http://a.test/robots.txt");
    }

    #[test]
    fn redirects_are_followed_five_hops_then_unavailable() {
        let s = settings();
        let mut o = OriginRobots::new(&page(), None, &s);
        for hop in 1..=5 {
            let url = fetch_url(&o, 0);
            o.fetch_started(url);
            let next = format!("/robots-{hop}.txt");
            assert_eq!(
                o.fetch_done(result(Some(301), Some(&next), ""), 0, &s),
                Fetched::Redirect(Url::parse(&format!("http://a.test{next}")).unwrap())
            );
        }
        let url = fetch_url(&o, 0);
        assert_eq!(url.path(), "/robots-5.txt");
        o.fetch_started(url);
        // A sixth redirect is not followed: robots.txt counts as unavailable.
        let done = o.fetch_done(result(Some(302), Some("/robots-6.txt"), ""), 0, &s);
        assert!(matches!(done, Fetched::Stored(ref r) if r.status == Some(302)));
        let Need::Ready(rules) = o.need(0, &s) else {
            panic!()
        };
        assert!(rules.allows(&page()));
    }

    #[test]
    fn unreachable_waits_with_backoff_then_gives_up() {
        let s = settings();
        let mut o = OriginRobots::new(&page(), None, &s);
        let mut retries = Vec::new();
        let mut now = 0;
        for _ in 0..4 {
            let url = fetch_url(&o, now);
            o.fetch_started(url);
            let Fetched::Failed { retry_at_ms } =
                o.fetch_done(result(Some(503), None, ""), now, &s)
            else {
                panic!()
            };
            retries.push(retry_at_ms - now);
            assert_eq!(o.need(retry_at_ms - 1, &s), Need::RetryAt(retry_at_ms));
            now = retry_at_ms;
        }
        assert_eq!(retries, [1000, 2000, 4000, 4000]);
        assert_eq!(o.give_up_at_ms(&s), Some(60_000));
        assert_eq!(o.need(60_000, &s), Need::GiveUp);
        // Persisted and restored (passivation, restart), the clock and the
        // count go on: the next attempt is still due when it was, and past
        // the deadline the origin is given up at once.
        let saved = o.record().unwrap();
        assert_eq!((saved.status, saved.fetched_at_ms), (Some(503), 0));
        assert_eq!(
            saved.retry,
            Some(RobotsRetry {
                attempts: 4,
                at_ms: now
            })
        );
        let restored = OriginRobots::new(&page(), Some(saved.clone()), &s);
        assert_eq!(restored.need(now - 1, &s), Need::RetryAt(now));
        assert!(matches!(restored.need(30_000, &s), Need::Fetch(_)));
        assert_eq!(restored.need(120_000, &s), Need::GiveUp);
        // A record of an earlier release (no retry state), restored long
        // after the deadline, still tries again first.
        let old = RobotsRecord {
            retry: None,
            ..saved
        };
        let mut restored = OriginRobots::new(&page(), Some(old), &s);
        let mut late = 120_000;
        for _ in 0..2 {
            let url = fetch_url(&restored, late);
            restored.fetch_started(url);
            let Fetched::Failed { retry_at_ms } =
                restored.fetch_done(result(Some(503), None, ""), late, &s)
            else {
                panic!()
            };
            late = retry_at_ms;
        }
        assert_eq!(restored.need(late, &s), Need::GiveUp);
        // Recovery before giving up resets everything.
        let mut o = OriginRobots::new(&page(), None, &s);
        o.fetch_started(fetch_url(&o, 0));
        o.fetch_done(result(None, None, ""), 0, &s);
        o.fetch_started(fetch_url(&o, 1000));
        o.fetch_done(result(Some(404), None, ""), 1000, &s);
        assert!(matches!(o.need(2000, &s), Need::Ready(_)));
        assert!(!o.failing());
    }

    #[test]
    fn failed_refresh_keeps_the_last_good_copy() {
        let s = settings();
        let saved = RobotsRecord {
            retry: None,
            status: Some(200),
            fetched_at_ms: 0,
            body: b"User-agent: *\nDisallow: /p/".to_vec(),
        };
        let mut o = OriginRobots::new(&page(), Some(saved), &s);
        let url = fetch_url(&o, 200_000);
        o.fetch_started(url);
        let done = o.fetch_done(result(Some(500), None, ""), 200_000, &s);
        assert_eq!(
            done,
            Fetched::Failed {
                retry_at_ms: 201_000
            }
        );
        let Need::Ready(rules) = o.need(200_500, &s) else {
            panic!()
        };
        assert!(!rules.allows(&page()), "the old rules still apply");
        assert!(
            matches!(o.need(201_000, &s), Need::Fetch(_)),
            "refresh retried"
        );
    }
}

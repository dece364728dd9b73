//! The DNS cache in front of the lookup backend: answers kept for their TTL
//! clamped to `[dns] min_ttl..=max_ttl`, failures kept for `negative_ttl`,
//! at most `max_entries` names (the oldest-expiring are dropped first).
//!
//! hickory reports each answer's TTL; the system resolver does not, so its
//! answers live `min_ttl`.
//! Lookups of one name in flight at once are coalesced by the resolver
//! (see `resolver.rs`), so a burst of links to a new site costs one query.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Cache bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsCacheSettings {
    /// Shortest life of an answer (also the life of TTL-less answers).
    pub min_ttl: Duration,
    /// Longest life of an answer.
    pub max_ttl: Duration,
    /// Life of a failure.
    pub negative_ttl: Duration,
    /// Names kept at most.
    pub max_entries: usize,
}

/// A cached answer: addresses or the error text.
pub type Answer = Result<Vec<IpAddr>, String>;

#[derive(Debug, Clone)]
struct Entry {
    answer: Answer,
    expires: Instant,
}

/// Name → answer, with expiry.
#[derive(Debug, Clone)]
pub struct DnsCache {
    settings: DnsCacheSettings,
    entries: HashMap<String, Entry>,
}

impl DnsCache {
    /// An empty cache.
    pub fn new(settings: DnsCacheSettings) -> Self {
        DnsCache {
            settings,
            entries: HashMap::new(),
        }
    }

    /// The live answer for `host` at `now`.
    pub fn get(&self, host: &str, now: Instant) -> Option<&Answer> {
        self.entries
            .get(host)
            .filter(|e| e.expires > now)
            .map(|e| &e.answer)
    }

    /// Stores an answer; `ttl` is the record's TTL if known.
    pub fn put(&mut self, host: &str, answer: Answer, ttl: Option<Duration>, now: Instant) {
        let life = match (&answer, ttl) {
            (Err(_), _) => self.settings.negative_ttl,
            (Ok(_), Some(ttl)) => ttl.clamp(self.settings.min_ttl, self.settings.max_ttl),
            (Ok(_), None) => self.settings.min_ttl,
        };
        if self.entries.len() >= self.settings.max_entries && !self.entries.contains_key(host) {
            self.evict(now);
        }
        self.entries.insert(
            host.to_owned(),
            Entry {
                answer,
                expires: now + life,
            },
        );
    }

    /// Names cached (live or not yet evicted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops expired entries, or the soonest-expiring tenth if none expired.
    fn evict(&mut self, now: Instant) {
        self.entries.retain(|_, e| e.expires > now);
        if self.entries.len() < self.settings.max_entries {
            return;
        }
        let mut by_expiry: Vec<(Instant, String)> = self
            .entries
            .iter()
            .map(|(k, e)| (e.expires, k.clone()))
            .collect();
        by_expiry.sort();
        let drop = (self.settings.max_entries / 10).max(1);
        for (_, host) in by_expiry.into_iter().take(drop) {
            self.entries.remove(&host);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> DnsCacheSettings {
        DnsCacheSettings {
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(10),
            max_entries: 3,
        }
    }

    fn ip(s: &str) -> Vec<IpAddr> {
        vec![s.parse().unwrap()]
    }

    #[test]
    fn ttls_are_clamped_and_failures_kept_briefly() {
        let t0 = Instant::now();
        let mut c = DnsCache::new(settings());
        c.put(
            "short.test",
            Ok(ip("192.0.2.1")),
            Some(Duration::from_secs(5)),
            t0,
        );
        c.put(
            "long.test",
            Ok(ip("192.0.2.2")),
            Some(Duration::from_secs(86_400)),
            t0,
        );
        c.put("bad.test", Err("nxdomain".into()), None, t0);
        let s = Duration::from_secs;
        assert!(
            c.get("short.test", t0 + s(59)).is_some(),
            "raised to min_ttl"
        );
        assert!(c.get("short.test", t0 + s(60)).is_none());
        assert!(c.get("long.test", t0 + s(3599)).is_some());
        assert!(c.get("long.test", t0 + s(3600)).is_none(), "cut to max_ttl");
        assert_eq!(
            c.get("bad.test", t0 + s(9)),
            Some(&Err("nxdomain".to_owned()))
        );
        assert!(c.get("bad.test", t0 + s(10)).is_none());
    }

    #[test]
    fn bounded_size_evicts_expired_then_soonest() {
        let t0 = Instant::now();
        let mut c = DnsCache::new(settings());
        c.put(
            "a.test",
            Ok(ip("192.0.2.1")),
            Some(Duration::from_secs(100)),
            t0,
        );
        c.put(
            "b.test",
            Ok(ip("192.0.2.2")),
            Some(Duration::from_secs(200)),
            t0,
        );
        c.put(
            "c.test",
            Ok(ip("192.0.2.3")),
            Some(Duration::from_secs(300)),
            t0,
        );
        c.put("d.test", Ok(ip("192.0.2.4")), None, t0);
        assert_eq!(c.len(), 3);
        assert!(c.get("d.test", t0).is_some());
        assert!(c.get("c.test", t0).is_some());
        assert!(c.get("a.test", t0).is_none() || c.get("b.test", t0).is_none());
    }
}

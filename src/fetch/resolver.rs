//! Name resolution for the HTTP client: `[dns] overrides` first, then a
//! lookup [`Backend`] (hickory by default, see `dns_backend.rs`); then the
//! SSRF guard, at connect time: denied addresses are removed from the
//! answer, and a name with only denied addresses fails with [`SsrfDenied`].
//!
//! Lookups go through a [`DnsCache`] that keeps answers for their TTL
//! (clamped); concurrent lookups of one name share one query. Every lookup
//! is counted in `trawl_dns_lookups_total`.
//!
//! The resolver remembers the address each host last resolved to, so the
//! archive can write `WARC-IP-Address` (awc does not report the peer).
//!
//! Each answer the crawl obtains is told to a [`DnsLog`], if one is set
//! (the archive writes it as a `dns:` record, as Heritrix does): every
//! lookup that asked the backend and got addresses, and an override the
//! first time it answers for a name (its record says what the crawl
//! used). Cache hits and lookups that joined one in flight are not told:
//! they are the same answer.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;

use std::sync::Arc;

use futures_util::future::{FutureExt, LocalBoxFuture, Shared};

use super::dns_backend::{Backend, Lookup};
use super::dns_cache::{Answer, DnsCache, DnsCacheSettings};
use super::guard::{AddressPolicy, SsrfDenied};
use crate::clock::SharedClock;
use crate::metrics::Metrics;

/// A name's addresses as the crawl obtained them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The name.
    pub host: String,
    /// Its addresses.
    pub addresses: Vec<IpAddr>,
    /// How long the answer may be kept, if the source said (an override:
    /// none).
    pub ttl: Option<std::time::Duration>,
    /// When it was obtained.
    pub at: std::time::SystemTime,
}

/// Told each answer the crawl obtains (see the module docs).
pub type DnsLog = Rc<dyn Fn(Resolved)>;

/// At most this many names are remembered as having had their override
/// told; past it the set starts again (an override is then told again).
const TOLD_OVERRIDES: usize = 100_000;

/// `[dns] overrides`: exact names and `*.` suffix patterns.
#[derive(Debug, Clone, Default)]
pub struct DnsOverrides {
    exact: HashMap<String, IpAddr>,
    /// `(suffix without "*.", ip)`, longest suffix first.
    wildcards: Vec<(String, IpAddr)>,
}

impl DnsOverrides {
    /// Builds the table from the config's pattern → IP map.
    pub fn new(patterns: &BTreeMap<String, IpAddr>) -> Self {
        let mut table = DnsOverrides::default();
        for (pattern, ip) in patterns {
            let pattern = pattern.to_ascii_lowercase();
            match pattern.strip_prefix("*.") {
                Some(suffix) => table.wildcards.push((suffix.to_owned(), *ip)),
                None => {
                    table.exact.insert(pattern, *ip);
                }
            }
        }
        table
            .wildcards
            .sort_by_key(|(suffix, _)| std::cmp::Reverse(suffix.len()));
        table
    }

    /// The override for `host`: an exact entry, else the longest `*.suffix`
    /// that `host` equals or ends with (at a label boundary).
    pub fn lookup(&self, host: &str) -> Option<IpAddr> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if let Some(ip) = self.exact.get(&host) {
            return Some(*ip);
        }
        self.wildcards
            .iter()
            .find_map(|(suffix, ip)| suffix_matches(&host, suffix).then_some(*ip))
    }
}

/// Whether `host` (lower-case, no trailing dot) is `suffix` or ends with it
/// at a label boundary: the meaning of a `*.suffix` host pattern.
pub(crate) fn suffix_matches(host: &str, suffix: &str) -> bool {
    host == suffix
        || (host.len() > suffix.len()
            && host.ends_with(suffix)
            && host.as_bytes()[host.len() - suffix.len() - 1] == b'.')
}

/// The awc resolver: overrides, then the cached system resolver, then the
/// guard.
#[derive(Clone)]
pub struct OverrideResolver {
    overrides: Rc<DnsOverrides>,
    guard: Rc<AddressPolicy>,
    last: Rc<RefCell<HashMap<String, IpAddr>>>,
    cache: Rc<RefCell<DnsCache>>,
    /// Lookups in flight, shared by everyone asking for the same name.
    inflight: Rc<RefCell<HashMap<String, Shared<LocalBoxFuture<'static, Lookup>>>>>,
    backend: Backend,
    metrics: Arc<Metrics>,
    /// What the cache's TTLs count on: the node's clock.
    clock: SharedClock,
    /// Told each answer obtained, if set.
    log: Option<DnsLog>,
    /// Names whose override was told already.
    told_overrides: Rc<RefCell<std::collections::HashSet<String>>>,
}

impl OverrideResolver {
    /// A resolver using `overrides` before the (cached) `backend`, and
    /// connecting only to addresses `guard` allows.
    pub fn new(
        overrides: DnsOverrides,
        guard: AddressPolicy,
        cache: DnsCacheSettings,
        metrics: Arc<Metrics>,
        backend: Backend,
        clock: SharedClock,
    ) -> Self {
        OverrideResolver {
            overrides: Rc::new(overrides),
            guard: Rc::new(guard),
            last: Rc::default(),
            cache: Rc::new(RefCell::new(DnsCache::new(cache))),
            inflight: Rc::default(),
            backend,
            metrics,
            clock,
            log: None,
            told_overrides: Rc::default(),
        }
    }

    /// Tells `log` each answer obtained from now on.
    pub fn with_log(mut self, log: Option<DnsLog>) -> Self {
        self.log = log;
        self
    }

    /// Tells the log of an answer, if there is a log: the addresses the
    /// guard allows, if any (a name pointing inside the network is never
    /// connected to, and its addresses stay out of the archive).
    fn tell(&self, host: &str, addresses: &[IpAddr], ttl: Option<std::time::Duration>) {
        let Some(log) = &self.log else {
            return;
        };
        let allowed: Vec<IpAddr> = addresses
            .iter()
            .copied()
            .filter(|ip| self.guard.check(*ip).is_ok())
            .collect();
        if !allowed.is_empty() {
            log(Resolved {
                host: host.to_owned(),
                addresses: allowed,
                ttl,
                at: self.clock.now().wall,
            });
        }
    }

    /// The addresses of `host`: override, cache, a lookup in flight, or a
    /// new lookup (in that order).
    pub async fn addresses(&self, host: &str) -> Answer {
        let count = |result: &str| self.metrics.dns_lookups.with_label_values(&[result]).inc();
        if let Some(ip) = self.overrides.lookup(host) {
            count("override");
            if self.log.is_some() {
                let mut told = self.told_overrides.borrow_mut();
                if told.len() >= TOLD_OVERRIDES {
                    told.clear();
                }
                if told.insert(host.to_owned()) {
                    self.tell(host, &[ip], None);
                }
            }
            return Ok(vec![ip]);
        }
        if let Some(answer) = self.cache.borrow().get(host, self.clock.now().at) {
            count("hit");
            return answer.clone();
        }
        let pending = self.inflight.borrow().get(host).cloned();
        if let Some(shared) = pending {
            count("coalesced");
            return shared.await.answer;
        }
        count("miss");
        let shared = (self.backend)(host.to_owned()).shared();
        self.inflight
            .borrow_mut()
            .insert(host.to_owned(), shared.clone());
        // Leaves `inflight` however this future ends: a caller that gives
        // up (a connect timeout drops its future) must not leave the name
        // joined to a stale shared result for the rest of the run.
        let _leave = LeaveInflight {
            inflight: self.inflight.clone(),
            host: host.to_owned(),
        };
        let Lookup { answer, ttl } = shared.await;
        match &answer {
            Ok(addresses) => self.tell(host, addresses, ttl),
            Err(_) => count("error"),
        }
        self.cache
            .borrow_mut()
            .put(host, answer.clone(), ttl, self.clock.now().at);
        answer
    }

    /// Keeps the allowed addresses; fails if none is.
    fn guarded(&self, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, SsrfDenied> {
        let mut denied = None;
        let allowed: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| match self.guard.check(a.ip()) {
                Ok(()) => true,
                Err(e) => {
                    denied.get_or_insert(e);
                    false
                }
            })
            .collect();
        match (allowed.is_empty(), denied) {
            (true, Some(e)) => Err(e),
            _ => Ok(allowed),
        }
    }

    /// The first address `host` last resolved to.
    pub fn last_address(&self, host: &str) -> Option<IpAddr> {
        self.last.borrow().get(host).copied()
    }

    fn remember(&self, host: &str, addrs: &[SocketAddr]) {
        if let Some(first) = addrs.first() {
            let mut last = self.last.borrow_mut();
            // Bounded: the map is a hint for the archive, not a cache.
            if last.len() > 100_000 {
                last.clear();
            }
            last.insert(host.to_owned(), first.ip());
        }
    }
}

/// Removes a name's in-flight lookup when dropped.
struct LeaveInflight {
    inflight: Rc<RefCell<HashMap<String, Shared<LocalBoxFuture<'static, Lookup>>>>>,
    host: String,
}

impl Drop for LeaveInflight {
    fn drop(&mut self) {
        self.inflight.borrow_mut().remove(&self.host);
    }
}

impl actix_tls::connect::Resolve for OverrideResolver {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> LocalBoxFuture<'a, Result<Vec<SocketAddr>, Box<dyn StdError>>> {
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = self
                .addresses(host)
                .await
                .map_err(|e| Box::<dyn StdError>::from(format!("lookup of {host}: {e}")))?
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect();
            let addrs = self
                .guarded(addrs)
                .map_err(|e| Box::new(e) as Box<dyn StdError>)?;
            self.remember(host, &addrs);
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use super::*;

    /// A cache keeping answers 60 s to an hour, failures 30 s.
    fn cache_settings() -> DnsCacheSettings {
        DnsCacheSettings {
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(30),
            max_entries: 100,
        }
    }

    #[test]
    fn concurrent_lookups_share_one_query_and_answers_are_cached() {
        let calls = Rc::new(Cell::new(0));
        let counter = calls.clone();
        let backend: Backend = Rc::new(move |host: String| {
            counter.set(counter.get() + 1);
            // The first lookup of slow.example never answers.
            let hang = host == "slow.example" && counter.get() == 4;
            async move {
                if hang {
                    futures_util::future::pending::<()>().await;
                }
                actix_rt::time::sleep(Duration::from_millis(20)).await;
                let answer = if host == "nx.example" {
                    Err("no such name".to_owned())
                } else {
                    Ok(vec!["192.0.2.7".parse().unwrap()])
                };
                Lookup { answer, ttl: None }
            }
            .boxed_local()
        });
        let settings = cache_settings();
        let metrics = Arc::new(Metrics::new());
        let clock = crate::clock::ManualClock::new();
        let resolver = OverrideResolver::new(
            DnsOverrides::default(),
            AddressPolicy::default(),
            settings,
            metrics.clone(),
            backend,
            Arc::new(clock.clone()),
        );
        actix_rt::System::new().block_on(async {
            let asks = (0..5).map(|_| resolver.addresses("site.example"));
            let answers = futures_util::future::join_all(asks).await;
            assert!(answers
                .iter()
                .all(|a| a.as_deref() == Ok(&["192.0.2.7".parse().unwrap()][..])));
            assert_eq!(calls.get(), 1, "five concurrent lookups, one query");
            resolver.addresses("site.example").await.unwrap();
            assert_eq!(calls.get(), 1, "then a cache hit");
            // The answer's TTL runs on the node's clock (the minimum TTL,
            // 60 s, here): past it, the name is looked up again.
            clock.advance(Duration::from_secs(61));
            resolver.addresses("site.example").await.unwrap();
            assert_eq!(calls.get(), 2, "expired on the injected clock");
            assert!(resolver.addresses("nx.example").await.is_err());
            assert!(resolver.addresses("nx.example").await.is_err());
            assert_eq!(calls.get(), 3, "failures are cached too");
            // A lookup whose caller gives up does not stay in flight.
            let abandoned = resolver.addresses("slow.example");
            let _ = actix_rt::time::timeout(Duration::from_millis(1), abandoned).await;
            assert!(resolver.inflight.borrow().is_empty());
            resolver.addresses("slow.example").await.unwrap();
            assert_eq!(
                calls.get(),
                5,
                "asked again, not joined to the abandoned one"
            );
        });
        let by = |r: &str| metrics.dns_lookups.with_label_values(&[r]).get();
        assert_eq!(
            (by("miss"), by("coalesced"), by("hit"), by("error")),
            (5, 4, 2, 1)
        );
    }

    #[test]
    fn each_answer_obtained_is_told_once_and_the_cache_tells_nothing() {
        let backend: Backend = Rc::new(|host: String| {
            async move {
                actix_rt::time::sleep(Duration::from_millis(5)).await;
                let answer = match host.as_str() {
                    "nx.example" => Err("no such name".to_owned()),
                    "inside.example" => Ok(vec!["10.1.2.3".parse().unwrap()]),
                    _ => Ok(vec!["192.0.2.7".parse().unwrap()]),
                };
                Lookup {
                    answer,
                    ttl: Some(Duration::from_secs(300)),
                }
            }
            .boxed_local()
        });
        let settings = cache_settings();
        let clock = crate::clock::ManualClock::new();
        let mut overrides = BTreeMap::new();
        overrides.insert("over.test".to_owned(), "127.0.0.9".parse().unwrap());
        let told: Rc<RefCell<Vec<Resolved>>> = Rc::default();
        let log = told.clone();
        let denied: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let resolver = OverrideResolver::new(
            DnsOverrides::new(&overrides),
            AddressPolicy::new(&denied, &[]),
            settings,
            Arc::new(Metrics::new()),
            backend,
            Arc::new(clock.clone()),
        )
        .with_log(Some(Rc::new(move |r| log.borrow_mut().push(r))));
        actix_rt::System::new().block_on(async {
            let asks = (0..3).map(|_| resolver.addresses("site.example"));
            futures_util::future::join_all(asks).await;
            resolver.addresses("site.example").await.unwrap();
            assert!(resolver.addresses("nx.example").await.is_err());
            // Denied by the guard: never connected to, never told.
            resolver.addresses("inside.example").await.unwrap();
            resolver.addresses("over.test").await.unwrap();
            resolver.addresses("over.test").await.unwrap();
            clock.advance(Duration::from_secs(301));
            resolver.addresses("site.example").await.unwrap();
        });
        let told = told.borrow();
        let names: Vec<&str> = told.iter().map(|r| r.host.as_str()).collect();
        // A lookup and its joiners once, the override once, the lookup
        // again once its answer expired; never the failure, a hit or a
        // denied answer.
        assert_eq!(names, ["site.example", "over.test", "site.example"]);
        assert_eq!(told[0].addresses, ["192.0.2.7".parse::<IpAddr>().unwrap()]);
        assert_eq!(told[0].ttl, Some(Duration::from_secs(300)));
        assert_eq!(told[1].ttl, None, "an override has no TTL");
        assert!(told[2].at > told[0].at, "dated on the node's clock");
    }

    #[test]
    fn exact_beats_wildcard_and_wildcards_match_at_label_boundaries() {
        let mut m = BTreeMap::new();
        m.insert("*.test".to_owned(), "127.0.0.1".parse().unwrap());
        m.insert("*.web.test".to_owned(), "127.0.0.2".parse().unwrap());
        m.insert("exact.web.test".to_owned(), "127.0.0.3".parse().unwrap());
        let o = DnsOverrides::new(&m);
        assert_eq!(o.lookup("Exact.Web.Test").unwrap().to_string(), "127.0.0.3");
        assert_eq!(o.lookup("a.web.test").unwrap().to_string(), "127.0.0.2");
        assert_eq!(o.lookup("web.test").unwrap().to_string(), "127.0.0.2");
        assert_eq!(o.lookup("site1.test").unwrap().to_string(), "127.0.0.1");
        assert_eq!(o.lookup("notatest"), None);
        assert_eq!(o.lookup("example.com"), None);
    }
}

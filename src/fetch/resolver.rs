//! Name resolution for the HTTP client: `[dns] overrides` first, then the
//! system resolver; then the SSRF guard, at connect time: denied addresses
//! are removed from the answer, and a name with only denied addresses fails
//! with [`SsrfDenied`].
//!
//! The resolver remembers the address each host last resolved to, so the
//! archive can write `WARC-IP-Address` (awc does not report the peer).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;

use futures_util::future::LocalBoxFuture;

use super::guard::{AddressPolicy, SsrfDenied};

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
        self.wildcards.iter().find_map(|(suffix, ip)| {
            let matches = host == *suffix
                || (host.len() > suffix.len()
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.');
            matches.then_some(*ip)
        })
    }
}

/// The awc resolver: overrides, then the system resolver, then the guard.
#[derive(Clone)]
pub struct OverrideResolver {
    overrides: Rc<DnsOverrides>,
    guard: Rc<AddressPolicy>,
    last: Rc<RefCell<HashMap<String, IpAddr>>>,
}

impl OverrideResolver {
    /// A resolver using `overrides` before the system resolver, and
    /// connecting only to addresses `guard` allows.
    pub fn new(overrides: DnsOverrides, guard: AddressPolicy) -> Self {
        OverrideResolver {
            overrides: Rc::new(overrides),
            guard: Rc::new(guard),
            last: Rc::default(),
        }
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

impl actix_tls::connect::Resolve for OverrideResolver {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> LocalBoxFuture<'a, Result<Vec<SocketAddr>, Box<dyn StdError>>> {
        Box::pin(async move {
            let addrs = match self.overrides.lookup(host) {
                Some(ip) => vec![SocketAddr::new(ip, port)],
                None => tokio::net::lookup_host((host, port))
                    .await
                    .map_err(|e| Box::new(e) as Box<dyn StdError>)?
                    .collect(),
            };
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
    use super::*;

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

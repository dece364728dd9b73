//! URL identity: normalisation, fingerprints and partition routing.
//!
//! The URL as found is kept for fetching; the normalised form is the URL's
//! identity, and its 128-bit xxh3 fingerprint is the key of the seen set
//! (64 bits collide at web scale: a billion URLs give ~3% odds of a
//! collision, 128 bits make it negligible).
//!
//! The rules of the normal form are in [`normalise`]:
//!
//! ```
//! use trawl::url::UrlRules;
//! let rules = UrlRules::default();
//! let n = rules.parse("HTTP://Example.COM:80/a/../%7Eb;jsessionid=X?#top").unwrap();
//! assert_eq!(n.identity, "http://example.com/~b");
//! assert_eq!(n.fetch.as_str(), "http://example.com/%7Eb;jsessionid=X");
//! ```

pub mod normalise;
pub mod scope;

pub use normalise::{Normalised, UrlRules};
pub use scope::{Excluded, Scope};

use url::Url;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

/// Why a candidate URL is not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not parseable as an absolute URL.
    #[error("unparseable url: {0}")]
    Parse(String),
    /// Not http or https.
    #[error("unsupported scheme {0}")]
    Scheme(String),
    /// No host (e.g. `http:///x`).
    #[error("url has no host")]
    NoHost,
    /// Longer than the configured maximum.
    #[error("url longer than {0} bytes")]
    TooLong(usize),
}

/// A 128-bit URL fingerprint, big-endian so byte order equals numeric order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint(pub u128);

impl Fingerprint {
    /// Fingerprint of an already normalised URL.
    pub fn of(normalised: &str) -> Self {
        Fingerprint(xxh3_128(normalised.as_bytes()))
    }

    /// The 16-byte key form.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }

    /// Parses the 16-byte key form.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(Fingerprint(u128::from_be_bytes(bytes.try_into().ok()?)))
    }

    /// Lower-case hex, as shown to operators.
    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }
}

/// The host key that politeness and queues are kept by: the lower-case host
/// name without port (two ports of one machine share its politeness).
pub fn host_key(url: &Url) -> &str {
    url.host_str().unwrap_or("")
}

/// A name that is not a host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a host or domain name")]
pub struct BadName(pub String);

/// A host name as an operator gives it (admin API, `trawl ctl`), checked
/// and made a [`host_key`]: lower case, no trailing dot; 1 to 253 letters,
/// digits, dots, hyphens and underscores, or a bracketed IPv6 literal.
pub fn host_name(name: &str) -> Result<String, BadName> {
    let lower = name.trim().trim_end_matches('.').to_ascii_lowercase();
    let ipv6 = lower.len() > 2
        && lower.starts_with('[')
        && lower.ends_with(']')
        && lower[1..lower.len() - 1]
            .parse::<std::net::Ipv6Addr>()
            .is_ok();
    let ok = ipv6
        || (!lower.is_empty()
            && lower.len() <= 253
            && !lower.starts_with('.')
            && !lower.contains("..")
            && lower
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')));
    if ok {
        Ok(lower)
    } else {
        Err(BadName(name.chars().take(80).collect()))
    }
}

/// The registrable domain (eTLD+1 by the public suffix list), or the host
/// itself for IP literals and names the list cannot split.
pub fn registrable_domain(host: &str) -> &str {
    if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return host;
    }
    psl::domain_str(host).unwrap_or(host)
}

/// The partition owning a host: a hash of its registrable domain, so all
/// hosts of one site live together.
pub fn partition_of(host: &str, partitions: u16) -> u16 {
    (xxh3_64(registrable_domain(host).as_bytes()) % u64::from(partitions.max(1))) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_checked_and_made_keys() {
        for bad in [
            "",
            "a b",
            "a/b",
            "..",
            ".a",
            "a..b",
            "a:80",
            "[zz]",
            "a\u{e9}.com",
        ] {
            assert!(host_name(bad).is_err(), "{bad:?}");
        }
        assert!(host_name(&"x".repeat(254)).is_err());
        assert_eq!(host_name("Site0001.TEST.").unwrap(), "site0001.test");
        let url = Url::parse("http://[::1]:8080/").unwrap();
        assert_eq!(host_name("[::1]").unwrap(), host_key(&url));
    }

    #[test]
    fn fingerprint_round_trips_and_orders() {
        let a = Fingerprint::of("http://a.test/");
        assert_eq!(Fingerprint::from_bytes(&a.to_bytes()), Some(a));
        assert_ne!(a, Fingerprint::of("http://a.test/x"));
        let (x, y) = (Fingerprint(1), Fingerprint(2));
        assert!(x.to_bytes() < y.to_bytes());
    }

    #[test]
    fn hosts_of_one_site_share_a_partition() {
        assert_eq!(registrable_domain("www.example.co.uk"), "example.co.uk");
        assert_eq!(
            partition_of("a.example.com", 64),
            partition_of("b.example.com", 64)
        );
        assert_eq!(registrable_domain("127.0.0.1"), "127.0.0.1");
        assert!(partition_of("site0001.test", 64) < 64);
    }
}

//! robots.txt rules (RFC 9309): what a fetch result means, and matching.
//!
//! Matching (group selection by product token with `*` fallback, longest
//! match, Allow winning ties, `*` and `$` patterns, `/robots.txt` always
//! allowed) is done by `texting_robots`, the most tested matcher crate. This
//! module owns the policy around it, which is where crawlers usually go
//! wrong:
//! - 2xx: the body's rules, parsed up to [`MAX_ROBOTS_BYTES`] (RFC 9309
//!   §2.5: at least 500 KiB must be parsed; the rest is ignored);
//! - 4xx (including 401/403): "unavailable", no rules, everything allowed
//!   (§2.3.1.3);
//! - 5xx, timeouts and network errors: "unreachable", everything disallowed
//!   (§2.3.1.4);
//! - 3xx: redirects are not followed yet, so the file counts as unavailable
//!   (§2.3.1.2 allows this after five hops).

use serde::{Deserialize, Serialize};
use texting_robots::Robot;
use url::Url;

/// Bytes of a robots.txt body that are parsed.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;

/// A robots.txt fetch as persisted with the host's state, so a restart or a
/// reactivated host does not fetch it again within its lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsRecord {
    /// HTTP status, or `None` when no response arrived.
    pub status: Option<u16>,
    /// Unix milliseconds of the fetch.
    pub fetched_at_ms: u64,
    /// The body (at most [`MAX_ROBOTS_BYTES`]); empty unless 2xx.
    pub body: Vec<u8>,
}

/// The rules in force for one origin.
#[derive(Debug)]
pub enum Rules {
    /// No robots.txt (4xx) or an empty one: everything is allowed.
    AllowAll,
    /// robots.txt unreachable (5xx, network error): nothing is allowed.
    DisallowAll,
    /// The parsed group for our product token.
    Parsed(Box<Robot>),
}

impl Rules {
    /// Interprets a fetch result for the agent `product_token`.
    pub fn from_record(record: &RobotsRecord, product_token: &str) -> Rules {
        match record.status {
            Some(200..=299) => {
                let body = &record.body[..record.body.len().min(MAX_ROBOTS_BYTES)];
                match Robot::new(product_token, body) {
                    Ok(robot) => Rules::Parsed(Box::new(robot)),
                    // The RFC asks parsers to skip what they cannot read; a
                    // file that yields nothing usable has no rules.
                    Err(_) => Rules::AllowAll,
                }
            }
            Some(300..=499) => Rules::AllowAll,
            _ => Rules::DisallowAll,
        }
    }

    /// Whether `url` (of the origin these rules belong to) may be fetched.
    pub fn allows(&self, url: &Url) -> bool {
        if url.path() == "/robots.txt" {
            return true;
        }
        match self {
            Rules::AllowAll => true,
            Rules::DisallowAll => false,
            Rules::Parsed(robot) => {
                let target = match url.query() {
                    Some(q) => format!("{}?{}", url.path(), q),
                    None => url.path().to_owned(),
                };
                robot.allowed(&target)
            }
        }
    }
}

/// The robots.txt URL of the origin (scheme, host, port) of `url`.
pub fn robots_url(url: &Url) -> Url {
    let mut robots = url.clone();
    robots.set_path("/robots.txt");
    robots.set_query(None);
    robots.set_fragment(None);
    let _ = robots.set_username("");
    let _ = robots.set_password(None);
    robots
}

/// The origin key `scheme://host:port` that robots rules are cached by.
pub fn origin_key(url: &Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: Option<u16>, body: &str) -> RobotsRecord {
        RobotsRecord {
            status,
            fetched_at_ms: 0,
            body: body.as_bytes().to_vec(),
        }
    }

    fn allows(rules: &Rules, url: &str) -> bool {
        rules.allows(&Url::parse(url).unwrap())
    }

    #[test]
    fn status_policy() {
        let body = "User-agent: *\nDisallow: /\n";
        assert!(allows(
            &Rules::from_record(&record(Some(404), body), "trawl"),
            "http://a.test/x"
        ));
        assert!(allows(
            &Rules::from_record(&record(Some(403), body), "trawl"),
            "http://a.test/x"
        ));
        assert!(!allows(
            &Rules::from_record(&record(Some(503), ""), "trawl"),
            "http://a.test/x"
        ));
        assert!(!allows(
            &Rules::from_record(&record(None, ""), "trawl"),
            "http://a.test/x"
        ));
        // robots.txt itself is always allowed.
        assert!(allows(
            &Rules::from_record(&record(None, ""), "trawl"),
            "http://a.test/robots.txt"
        ));
    }

    #[test]
    fn longest_match_and_allow_ties_and_agent_groups() {
        let body = "User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nAllow: /private/open-\n";
        let rules = Rules::from_record(&record(Some(200), body), "trawl");
        assert!(allows(&rules, "http://a.test/p/1.html"));
        assert!(!allows(&rules, "http://a.test/private/1.html"));
        assert!(allows(&rules, "http://a.test/private/open-1.html"));
        let other = Rules::from_record(&record(Some(200), body), "other");
        assert!(!allows(&other, "http://a.test/p/1.html"));
        let ua = "User-agent: TRAWL\nDisallow: /x\n\nUser-agent: *\nDisallow: /\n";
        let rules = Rules::from_record(&record(Some(200), ua), "trawl");
        assert!(allows(&rules, "http://a.test/y"));
        assert!(!allows(&rules, "http://a.test/x?q=1"));
    }

    #[test]
    fn robots_url_and_origin() {
        let url = Url::parse("https://u:p@a.test:8443/x/y?z#f").unwrap();
        assert_eq!(robots_url(&url).as_str(), "https://a.test:8443/robots.txt");
        assert_eq!(origin_key(&url), "https://a.test:8443");
        assert_eq!(
            origin_key(&Url::parse("http://a.test/").unwrap()),
            "http://a.test:80"
        );
    }
}

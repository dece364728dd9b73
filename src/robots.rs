//! robots.txt per RFC 9309: parsing, group selection, matching, and what a
//! fetch result means.
//!
//! Our own matcher rather than a crate's, because operators must see *why*
//! a URL was allowed or not: every decision names the deciding line (as
//! written, with its line number).
//!
//! - **Groups** (§2.1): one or more `user-agent` lines followed by rules.
//!   The groups whose product token equals ours (case-insensitively) are
//!   merged; if none, the `*` groups are merged; if none, nothing is
//!   disallowed. Rules before any `user-agent` line belong to no group.
//!   Only an `allow` or `disallow` line closes a group's list of agents:
//!   blank lines, `sitemap`, `crawl-delay` and unknown lines between two
//!   `user-agent` lines leave both in one group, as in google/robotstxt
//!   (the parser of the RFC's authors), since §2.2.4 makes other records
//!   no part of the group syntax.
//! - **Matching** (§2.2.2): `*` matches any sequence, a trailing `$` anchors
//!   the end. The longest matching pattern (in octets) decides; on a tie
//!   between allow and disallow, allow wins. Patterns and paths are compared
//!   after percent-encoding normalisation: `%XX` of unreserved characters is
//!   decoded, other escapes are upper-cased, non-ASCII octets are encoded.
//!   An empty `disallow:` disallows nothing. `/robots.txt` is always allowed.
//! - **Limits** (§2.5): the first [`MAX_ROBOTS_BYTES`] are parsed; a line
//!   cut at that limit is dropped.
//! - **Fetch results** (§2.3.1): 2xx → the file's rules; 4xx (401/403
//!   included) → "unavailable", everything allowed; 5xx, timeouts, network
//!   errors → "unreachable", everything disallowed. Redirects are followed
//!   by the caller (up to five hops); more hops count as unavailable.
//! - `crawl-delay` of the selected groups and every `sitemap` line are read.
//!
//! # Reading files as their owners meant them
//!
//! Site owners check their robots.txt against Google's reading of it, so a
//! file that google/robotstxt understands is taken to say what Google
//! reads. Where it is lenient in a way that follows the owner's evident
//! intent, so are we; when in doubt, we obey:
//!
//! - A leading UTF-8 byte-order mark (or a leading part of one) is skipped;
//!   one anywhere else makes its line unreadable.
//! - Lines end at LF, CR or CR LF; a CR LF counts as one line end, so line
//!   numbers in explanations match an editor's.
//! - A missing colon is assumed when a line is exactly two words:
//!   `disallow /` reads as `disallow: /`, `user-agent foo` as
//!   `user-agent: foo`. Lines of three or more words without a colon are
//!   ignored.
//! - Keys are case-insensitive and recognised by prefix (`Disallowed: /x`
//!   is a disallow line), with the misspellings Google accepts:
//!   `useragent`, `user agent`, `dissallow`, `dissalow`, `disalow`,
//!   `diasllow`, `disallaw` and `site-map`; `crawldelay` and `crawl delay`
//!   likewise. `allow` has no misspellings, as in Google's parser: reading
//!   an unknown word as an allow would permit what the owner may not have.
//! - A `user-agent` value names the product token made of its leading
//!   letters, digits, `_` and `-`: `trawl/1.0`, `trawl bot` and `trawl*`
//!   all name `trawl`. `*` alone or followed by anything else but a token
//!   character (`* everyone`) is the wildcard. Our own product token is
//!   read the same way.
//!
//! Where we deliberately read a file differently from google/robotstxt:
//!
//! - A space before the first colon that is not one of the spaced
//!   misspellings means the colon belongs to the value: `Sitemap
//!   https://a.test/s.xml` is a sitemap line and `disallow /a:b` disallows
//!   `/a:b` (Google reads the key `sitemap https` and the value
//!   `//a.test/s.xml`, and the pattern `b`).
//! - Digits belong to a `user-agent` token (`MJ12bot` is one crawler;
//!   Google's parser stops at the first digit and reads `MJ`).
//! - `%XX` escapes of unreserved characters are decoded before matching, as
//!   RFC 9309 §2.2.2's table asks (`/foo/bar/%62%61%7A` matches
//!   `/foo/bar/baz`); Google compares them as written.
//! - No `allow: …/index.html` rule also allows its directory (Google's
//!   "index.html is the directory" rule): that would permit a URL no line
//!   names.
//! - Lines are not cut at 16,664 bytes as in Google's parser; a long
//!   pattern means what it says.

pub mod cache;
mod syntax;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use syntax::Key;

/// Bytes of a robots.txt body that are parsed.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;
/// Redirect hops followed when fetching robots.txt.
pub const MAX_ROBOTS_REDIRECTS: u32 = 5;

/// A robots.txt fetch as persisted with the host's state, so a restart or a
/// reactivated host does not fetch it again within its lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsRecord {
    /// Final HTTP status, or `None` when no response arrived.
    pub status: Option<u16>,
    /// Unix milliseconds of the fetch.
    pub fetched_at_ms: u64,
    /// The body (at most [`MAX_ROBOTS_BYTES`]); empty unless 2xx.
    pub body: Vec<u8>,
    /// For an unreachable robots.txt: the failed attempts so far and when
    /// the next one is due, so a host that passivates or restarts goes on
    /// backing off and gives the origin up on time, rather than starting
    /// over.
    #[serde(default)]
    pub retry: Option<RobotsRetry>,
}

/// The retry state of an unreachable robots.txt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsRetry {
    /// Failed attempts in a row.
    pub attempts: u32,
    /// When the next attempt is due (Unix ms).
    pub at_ms: u64,
}

/// How a fetch result is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RobotsStatus {
    /// 2xx: the file's rules apply.
    Parsed,
    /// 4xx or too many redirects: no rules, everything allowed.
    Unavailable,
    /// 5xx or no response: everything disallowed until a retry succeeds.
    Unreachable,
}

impl RobotsRecord {
    /// How this fetch result is to be read.
    pub fn status_class(&self) -> RobotsStatus {
        match self.status {
            Some(200..=299) => RobotsStatus::Parsed,
            Some(300..=499) => RobotsStatus::Unavailable,
            _ => RobotsStatus::Unreachable,
        }
    }
}

/// One allow or disallow rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Allow (true) or disallow.
    pub allow: bool,
    /// The normalised path pattern.
    pattern: String,
    /// The line as written (trimmed), for explanations.
    pub line: String,
    /// 1-based line number in the file.
    pub line_no: usize,
}

/// What decided a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the URL may be fetched.
    pub allowed: bool,
    /// The deciding rule, if a rule decided (none for the defaults, the
    /// status policy, or `/robots.txt` itself).
    pub rule: Option<Rule>,
}

/// The rules in force for one origin and one product token.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    status: RobotsStatus,
    rules: Vec<Rule>,
    /// `crawl-delay` of the selected groups (first one given).
    pub crawl_delay: Option<Duration>,
    /// Every `sitemap` line of the file.
    pub sitemaps: Vec<String>,
}

impl Rule {
    /// The path pattern as matched: percent-encoding normalised
    /// ([`normalise_encoding`]), `*` and a trailing `$` as written. A file
    /// rewritten from these patterns reads as the same rules.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }
}

impl Rules {
    /// Interprets a fetch result for the agent `product_token`.
    pub fn from_record(record: &RobotsRecord, product_token: &str) -> Rules {
        match record.status_class() {
            RobotsStatus::Parsed => Rules::parse(&record.body, product_token),
            status => Rules {
                status,
                rules: Vec::new(),
                crawl_delay: None,
                sitemaps: Vec::new(),
            },
        }
    }

    /// Parses a robots.txt body (the first [`MAX_ROBOTS_BYTES`] of it).
    ///
    /// A body of [`MAX_ROBOTS_BYTES`] or more may have been cut there
    /// (a stored [`RobotsRecord`] keeps that much of a longer file), so
    /// its last line, which may be the beginning of a longer one, is
    /// dropped: `Allow: /public/page` cut to `Allow: /` would allow all.
    pub fn parse(body: &[u8], product_token: &str) -> Rules {
        let cut = body.len() >= MAX_ROBOTS_BYTES;
        let body = syntax::strip_bom(&body[..body.len().min(MAX_ROBOTS_BYTES)]);
        let text = String::from_utf8_lossy(body);
        let mut lines: Vec<&str> = syntax::lines(&text).collect();
        if cut {
            lines.pop(); // the last line may be cut in the middle
        }
        let mut parser = GroupParser::default();
        for (i, raw) in lines.iter().enumerate() {
            parser.line(i + 1, raw);
        }
        parser.finish(&syntax::agent_name(product_token.trim()))
    }

    /// How the fetch result was read.
    pub fn status(&self) -> RobotsStatus {
        self.status
    }

    /// Rules in force (after group selection).
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Decides `url` (of the origin these rules belong to).
    pub fn decide(&self, url: &Url) -> Decision {
        if url.path() == "/robots.txt" {
            return Decision {
                allowed: true,
                rule: None,
            };
        }
        match self.status {
            RobotsStatus::Unavailable => Decision {
                allowed: true,
                rule: None,
            },
            RobotsStatus::Unreachable => Decision {
                allowed: false,
                rule: None,
            },
            RobotsStatus::Parsed => {
                let target = match url.query() {
                    Some(q) => format!("{}?{}", url.path(), q),
                    None => url.path().to_owned(),
                };
                self.decide_path(&normalise_encoding(&target))
            }
        }
    }

    /// Whether `url` may be fetched.
    pub fn allows(&self, url: &Url) -> bool {
        self.decide(url).allowed
    }

    fn decide_path(&self, path: &str) -> Decision {
        let mut best: Option<&Rule> = None;
        for rule in &self.rules {
            if !pattern_matches(&rule.pattern, path) {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => {
                    let (len, blen) = (rule.pattern.len(), b.pattern.len());
                    len > blen || (len == blen && rule.allow && !b.allow)
                }
            };
            if better {
                best = Some(rule);
            }
        }
        Decision {
            allowed: best.is_none_or(|r| r.allow),
            rule: best.cloned(),
        }
    }
}

/// Collects groups line by line.
#[derive(Default)]
struct GroupParser {
    groups: Vec<Group>,
    sitemaps: Vec<String>,
}

#[derive(Default)]
struct Group {
    agents: Vec<String>,
    /// An allow or disallow line was seen, so the next `user-agent` line
    /// starts a new group instead of extending this one. Other lines
    /// (unknown ones, `sitemap`, `crawl-delay`) do not close the agent list.
    has_rule_lines: bool,
    rules: Vec<Rule>,
    crawl_delay: Option<Duration>,
}

impl GroupParser {
    fn line(&mut self, line_no: usize, raw: &str) {
        let content = syntax::content(raw);
        let Some(directive) = syntax::directive(content) else {
            return;
        };
        let value = directive.value;
        match directive.key {
            Key::UserAgent => self.user_agent(value),
            Key::Allow | Key::Disallow => {
                let Some(group) = self.groups.last_mut() else {
                    return; // rules before any user-agent line belong to no group
                };
                group.has_rule_lines = true;
                if value.is_empty() {
                    return; // an empty rule matches nothing
                }
                group.rules.push(Rule {
                    allow: directive.key == Key::Allow,
                    pattern: normalise_encoding(value),
                    line: content.to_owned(),
                    line_no,
                });
            }
            Key::CrawlDelay => {
                if let (Some(group), Ok(secs)) = (self.groups.last_mut(), value.parse::<f64>()) {
                    if secs.is_finite() && secs >= 0.0 && group.crawl_delay.is_none() {
                        group.crawl_delay = Some(Duration::from_secs_f64(secs.min(1e6)));
                    }
                }
            }
            Key::Sitemap => {
                // Sitemap lines stand outside groups.
                if !value.is_empty() {
                    self.sitemaps.push(value.to_owned());
                }
            }
            Key::Other => {}
        }
    }

    fn user_agent(&mut self, value: &str) {
        if self.groups.last().is_none_or(|g| g.has_rule_lines) {
            self.groups.push(Group::default());
        }
        if let Some(group) = self.groups.last_mut() {
            group.agents.push(syntax::agent_name(value));
        }
    }

    fn finish(self, token: &str) -> Rules {
        let mine: Vec<&Group> = if token.is_empty() || token == "*" {
            Vec::new() // a token that names no product has no group of its own
        } else {
            self.groups
                .iter()
                .filter(|g| g.agents.iter().any(|a| a == token))
                .collect()
        };
        let selected = if mine.is_empty() {
            self.groups
                .iter()
                .filter(|g| g.agents.iter().any(|a| a == "*"))
                .collect()
        } else {
            mine
        };
        Rules {
            status: RobotsStatus::Parsed,
            rules: selected
                .iter()
                .flat_map(|g| g.rules.iter().cloned())
                .collect(),
            crawl_delay: selected.iter().find_map(|g| g.crawl_delay),
            sitemaps: self.sitemaps,
        }
    }
}

fn hex_value(d: u8) -> u8 {
    match d {
        b'0'..=b'9' => d - b'0',
        b'a'..=b'f' => d - b'a' + 10,
        _ => d - b'A' + 10,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Normalises percent-encoding for comparison (RFC 9309 §2.2.2): decodes
/// escapes of unreserved characters, upper-cases the hex of the others,
/// and encodes octets outside printable ASCII and a `%` that starts no
/// escape (as `%25`).
///
/// The result is a fixed point, so a pattern and a path compare the same
/// however often they were normalised: a lone `%` kept as it was could
/// start a new escape with a decoded digit (`/%%34a` gave `/%4a`, which
/// is `/J`).
pub fn normalise_encoding(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' && i + 2 < bytes.len() {
            let (hi, lo) = (bytes[i + 1], bytes[i + 2]);
            if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() {
                let v = (hex_value(hi) << 4) | hex_value(lo);
                if is_unreserved(v) {
                    out.push(v as char);
                } else {
                    out.push('%');
                    out.push(hi.to_ascii_uppercase() as char);
                    out.push(lo.to_ascii_uppercase() as char);
                }
                i += 3;
                continue;
            }
        }
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
        i += 1;
    }
    out
}

/// Whether `pattern` (with `*` and a trailing `$`) matches `path` from its
/// start. Rules are prefixes unless anchored with `$`.
fn pattern_matches(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let p = pattern.as_bytes();
    let s = path.as_bytes();
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi == p.len() {
            if !anchored || si == s.len() {
                return true;
            }
        } else if p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
            continue;
        } else if si < s.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
            continue;
        }
        match star {
            Some((sp, ss)) if ss < s.len() => {
                star = Some((sp, ss + 1));
                pi = sp + 1;
                si = ss + 1;
            }
            _ => return false,
        }
    }
}

/// What an operator sees of an origin's robots.txt.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RobotsSummary {
    /// `scheme://host:port`.
    pub origin: String,
    /// How the last fetch was read.
    pub status: RobotsStatus,
    /// Its HTTP status, if a response came.
    pub http_status: Option<u16>,
    /// Unix ms of the last fetch.
    pub fetched_at_ms: u64,
    /// Allow/disallow rules in force.
    pub rules: usize,
    /// Crawl-delay asked for, in milliseconds.
    pub crawl_delay_ms: Option<u64>,
    /// Sitemap lines.
    pub sitemaps: Vec<String>,
}

impl RobotsSummary {
    /// Summarises a fetch record for `product_token`.
    pub fn of(origin: &str, record: &RobotsRecord, product_token: &str) -> Self {
        let rules = Rules::from_record(record, product_token);
        RobotsSummary {
            origin: origin.to_owned(),
            status: rules.status(),
            http_status: record.status,
            fetched_at_ms: record.fetched_at_ms,
            rules: rules.rules().len(),
            crawl_delay_ms: rules.crawl_delay.map(|d| d.as_millis() as u64),
            sitemaps: rules.sitemaps.clone(),
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
mod google_suite;
#[cfg(test)]
mod tests;

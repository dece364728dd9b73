//! Which URLs the crawl admits: `[scope]` host and regex rules, the
//! extension deny list, and the `[traps]` shapes of endless URL spaces.
//!
//! The checks are pure functions of the URL (no per-host state), run by the
//! SeenSet on every candidate before the seen check. Per-host and
//! per-domain caps need counts and live with the partitions
//! (`src/frontier/budget.rs`).
//!
//! Choices where the issue is silent:
//! - host rules match the host name only (any port, any scheme);
//! - a calendar is a year (1900-2999) then `/` or `-` then a month
//!   (`/2031/05/`, `2031-05-01`; `?y=2031&m=5` is not recognised) further
//!   than the configured window
//!   from the current year; a site's real archive (`/2019/04/`) is inside
//!   the window and is crawled;
//! - an excluded extension is decided on the last path segment, before
//!   any query (`/a.zip?x=1` is a zip).

use regex::RegexSet;
use url::Url;

use crate::config::{ScopeConfig, TrapsConfig};

/// Why a URL is not fetched. The label is a bounded metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Excluded {
    /// Host not in `allow_hosts`, or in `deny_hosts`.
    Host,
    /// Matched no `allow_patterns`, or a `deny_patterns` entry.
    Pattern,
    /// An extension of `deny_extensions`: recorded as seen, not fetched.
    Extension,
    /// More path segments than `max_path_segments`.
    TooManySegments,
    /// A path segment repeated more than `max_repeated_segment` times.
    RepeatedSegment,
    /// More query parameters than `max_query_params`.
    TooManyParams,
    /// A date outside the calendar window.
    Calendar,
}

impl Excluded {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Excluded::Host => "scope_host",
            Excluded::Pattern => "scope_pattern",
            Excluded::Extension => "extension",
            Excluded::TooManySegments => "trap_segments",
            Excluded::RepeatedSegment => "trap_repeated_segment",
            Excluded::TooManyParams => "trap_query_params",
            Excluded::Calendar => "trap_calendar",
        }
    }
}

/// A `[scope]` or `[traps]` entry that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ScopeError {
    /// The config key.
    pub key: &'static str,
    /// What is wrong.
    pub message: String,
}

/// The compiled rules.
#[derive(Debug, Clone)]
pub struct Scope {
    allow_hosts: Vec<HostPattern>,
    deny_hosts: Vec<HostPattern>,
    allow: Option<RegexSet>,
    deny: Option<RegexSet>,
    extensions: Vec<String>,
    traps: TrapsConfig,
    /// The current year, for the calendar window.
    year: i32,
}

/// The longest extension `scope.deny_extensions` may list (the config
/// refuses longer ones; none of the usual ones is near it).
pub const MAX_EXTENSION_BYTES: usize = 32;

impl Scope {
    /// Compiles the rules; `year` is the current year (injected for tests).
    pub fn new(scope: &ScopeConfig, traps: &TrapsConfig, year: i32) -> Result<Self, ScopeError> {
        let set =
            |key: &'static str, patterns: &[String]| -> Result<Option<RegexSet>, ScopeError> {
                if patterns.is_empty() {
                    return Ok(None);
                }
                RegexSet::new(patterns).map(Some).map_err(|e| ScopeError {
                    key,
                    message: e.to_string(),
                })
            };
        Ok(Scope {
            allow_hosts: scope
                .allow_hosts
                .iter()
                .map(|p| HostPattern::new(p))
                .collect(),
            deny_hosts: scope
                .deny_hosts
                .iter()
                .map(|p| HostPattern::new(p))
                .collect(),
            allow: set("scope.allow_patterns", &scope.allow_patterns)?,
            deny: set("scope.deny_patterns", &scope.deny_patterns)?,
            extensions: {
                let mut lower: Vec<String> = scope
                    .deny_extensions
                    .iter()
                    .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                    .collect();
                lower.sort_unstable();
                lower.dedup();
                lower
            },
            traps: traps.clone(),
            year,
        })
    }

    /// Why `url` is not fetched, or `None` if it is in scope.
    pub fn check(&self, url: &Url) -> Option<Excluded> {
        let host = url.host_str().unwrap_or("");
        if !self.allow_hosts.is_empty() && !self.allow_hosts.iter().any(|p| p.matches(host)) {
            return Some(Excluded::Host);
        }
        if self.deny_hosts.iter().any(|p| p.matches(host)) {
            return Some(Excluded::Host);
        }
        let text = url.as_str();
        if self.allow.as_ref().is_some_and(|s| !s.is_match(text))
            || self.deny.as_ref().is_some_and(|s| s.is_match(text))
        {
            return Some(Excluded::Pattern);
        }
        self.trap(url).or_else(|| self.extension(url))
    }

    /// Whether the last path segment's extension is a denied one.
    fn extension(&self, url: &Url) -> Option<Excluded> {
        let last = url.path().rsplit('/').next().unwrap_or("");
        // `/a.jpg;jsessionid=X` is a jpg.
        let last = last.split(';').next().unwrap_or("");
        let (_, ext) = last.rsplit_once('.')?;
        // Every link is checked: one binary search of the sorted,
        // lower-cased list, the extension lower-cased on the stack (one
        // longer than any listed cannot match).
        let mut buf = [0u8; MAX_EXTENSION_BYTES];
        let lower = buf.get_mut(..ext.len())?;
        lower.copy_from_slice(ext.as_bytes());
        lower.make_ascii_lowercase();
        self.extensions
            .binary_search_by(|e| e.as_bytes().cmp(lower))
            .is_ok()
            .then_some(Excluded::Extension)
    }

    fn trap(&self, url: &Url) -> Option<Excluded> {
        // Walked twice rather than collected: every link passes here, and
        // the count bounds the quadratic repeat check below.
        let segments = || url.path().split('/').filter(|s| !s.is_empty());
        if segments().count() > self.traps.max_path_segments {
            return Some(Excluded::TooManySegments);
        }
        let repeated = segments()
            .any(|s| segments().filter(|t| *t == s).count() > self.traps.max_repeated_segment);
        if repeated {
            return Some(Excluded::RepeatedSegment);
        }
        let params = url
            .query()
            .map_or(0, |q| q.split('&').filter(|p| !p.is_empty()).count());
        if params > self.traps.max_query_params {
            return Some(Excluded::TooManyParams);
        }
        let outside = |y: i32| {
            y > self.year + self.traps.calendar_years_ahead
                || y < self.year - self.traps.calendar_years_back
        };
        // Path and query as serialised, `?` between them.
        let dated = &url[url::Position::BeforePath..url::Position::AfterQuery];
        date_years(dated)
            .into_iter()
            .any(outside)
            .then_some(Excluded::Calendar)
    }
}

/// Years of the dates in `text`: a year 1900-2999 standing alone (not part
/// of a longer word or number), then `/` or `-`, then a month 1-12 of one
/// or two digits standing alone (`2031/05/`, `2031-5`, `2031-05-30`).
fn date_years(text: &str) -> Vec<i32> {
    let b = text.as_bytes();
    let alnum = |i: usize| b.get(i).is_some_and(u8::is_ascii_alphanumeric);
    let digits_at = |i: usize| {
        b.get(i..)
            .unwrap_or_default()
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let value = |from: usize, len: usize| {
        b[from..from + len]
            .iter()
            .fold(0i32, |v, d| v * 10 + i32::from(d - b'0'))
    };
    let mut years = Vec::new();
    for i in 0..b.len() {
        // The year starts a token, is four digits, and a separator follows.
        if (i > 0 && alnum(i - 1))
            || digits_at(i) != 4
            || !matches!(b.get(i + 4), Some(b'/' | b'-'))
        {
            continue;
        }
        let year = value(i, 4);
        let month_at = i + 5;
        let len = digits_at(month_at);
        if !(1900..3000).contains(&year) || !(1..=2).contains(&len) || alnum(month_at + len) {
            continue;
        }
        if (1..=12).contains(&value(month_at, len)) {
            years.push(year);
        }
    }
    years
}

/// `example.com` (that host) or `*.example.com` (it and its subdomains).
#[derive(Debug, Clone)]
struct HostPattern {
    name: String,
    subdomains: bool,
}

impl HostPattern {
    fn new(pattern: &str) -> Self {
        let pattern = pattern.trim().to_ascii_lowercase();
        match pattern.strip_prefix("*.") {
            Some(domain) => HostPattern {
                name: domain.to_owned(),
                subdomains: true,
            },
            None => HostPattern {
                name: pattern,
                subdomains: false,
            },
        }
    }

    fn matches(&self, host: &str) -> bool {
        host == self.name
            || (self.subdomains
                && host.len() > self.name.len()
                && host.ends_with(&self.name)
                && host.as_bytes()[host.len() - self.name.len() - 1] == b'.')
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn scope(edit: impl FnOnce(&mut ScopeConfig)) -> Scope {
        let config = Config::defaults();
        let mut s = config.scope.clone();
        edit(&mut s);
        Scope::new(&s, &config.traps, 2026).unwrap()
    }

    fn check(scope: &Scope, url: &str) -> Option<Excluded> {
        scope.check(&Url::parse(url).unwrap())
    }

    #[test]
    fn host_and_pattern_rules() {
        let s = scope(|c| {
            c.allow_hosts = vec!["*.example.com".into(), "other.org".into()];
            c.deny_hosts = vec!["private.example.com".into()];
            c.deny_patterns = vec![r"/logout".into(), r"[?&]print=1".into()];
        });
        assert_eq!(check(&s, "http://example.com/"), None);
        assert_eq!(check(&s, "http://www.example.com:8080/a"), None);
        assert_eq!(check(&s, "http://other.org/"), None);
        assert_eq!(check(&s, "http://www.other.org/"), Some(Excluded::Host));
        assert_eq!(check(&s, "http://badexample.com/"), Some(Excluded::Host));
        assert_eq!(
            check(&s, "http://private.example.com/"),
            Some(Excluded::Host)
        );
        assert_eq!(
            check(&s, "http://example.com/logout"),
            Some(Excluded::Pattern)
        );
        assert_eq!(
            check(&s, "http://example.com/a?x=2&print=1"),
            Some(Excluded::Pattern)
        );
        let only_docs = scope(|c| c.allow_patterns = vec![r"^https?://[^/]+/docs/".into()]);
        assert_eq!(check(&only_docs, "http://a.test/docs/x"), None);
        assert_eq!(
            check(&only_docs, "http://a.test/blog/x"),
            Some(Excluded::Pattern)
        );
    }

    #[test]
    fn extensions_are_read_from_the_last_segment() {
        let s = scope(|_| {});
        assert_eq!(
            check(&s, "http://a.test/photo.JPG"),
            Some(Excluded::Extension)
        );
        assert_eq!(
            check(&s, "http://a.test/f.zip?x=1"),
            Some(Excluded::Extension)
        );
        assert_eq!(check(&s, "http://a.test/zip/page.html"), None);
        assert_eq!(
            check(&s, "http://a.test/a.jpg;jsessionid=X"),
            Some(Excluded::Extension)
        );
        assert_eq!(check(&s, "http://a.test/a.mp4/"), None);
        assert_eq!(check(&s, "http://a.test/?file=a.zip"), None);
        // Listed in any case, with or without the dot; a name that only
        // starts or ends like one is not it; a very long one is not listed.
        let listed = scope(|c| c.deny_extensions = vec![".TAR".into(), "gz".into(), "gz".into()]);
        assert_eq!(
            check(&listed, "http://a.test/a.tar"),
            Some(Excluded::Extension)
        );
        assert_eq!(
            check(&listed, "http://a.test/a.Gz"),
            Some(Excluded::Extension)
        );
        assert_eq!(check(&listed, "http://a.test/a.tgz"), None);
        assert_eq!(check(&listed, "http://a.test/a.gzip"), None);
        let long = format!("http://a.test/a.{}", "x".repeat(MAX_EXTENSION_BYTES + 1));
        assert_eq!(check(&listed, &long), None);
    }

    #[test]
    fn trap_shapes() {
        let s = scope(|_| {});
        assert_eq!(
            check(&s, "http://a.test/a/b/a/b/a/b/a/b/x.html"),
            Some(Excluded::RepeatedSegment)
        );
        assert_eq!(check(&s, "http://a.test/a/b/a/b/a/b/x.html"), None);
        let deep = format!(
            "http://a.test/{}",
            (0..30).map(|n| n.to_string()).collect::<Vec<_>>().join("/")
        );
        assert_eq!(check(&s, &deep), Some(Excluded::TooManySegments));
        let query = (0..20)
            .map(|n| format!("p{n}=1"))
            .collect::<Vec<_>>()
            .join("&");
        assert_eq!(
            check(&s, &format!("http://a.test/?{query}")),
            Some(Excluded::TooManyParams)
        );
    }

    #[test]
    fn calendars_beyond_the_window_are_traps_and_archives_are_not() {
        let s = scope(|_| {});
        assert_eq!(check(&s, "http://a.test/cal/2028/12/"), None);
        assert_eq!(
            check(&s, "http://a.test/cal/2029/01/"),
            Some(Excluded::Calendar)
        );
        assert_eq!(
            check(&s, "http://a.test/events?d=2031-05-01"),
            Some(Excluded::Calendar)
        );
        assert_eq!(check(&s, "http://a.test/blog/2019/04/post.html"), None);
        assert_eq!(
            check(&s, "http://a.test/1900/01/"),
            Some(Excluded::Calendar)
        );
        // A four-digit number without a month is not a date.
        assert_eq!(check(&s, "http://a.test/item/4096/x"), None);
        assert_eq!(check(&s, "http://a.test/p/2999.html"), None);
        // Numbers that only look like dates.
        assert_eq!(check(&s, "http://a.test/forum/1234/5"), None);
        assert_eq!(check(&s, "http://a.test/blog/1000-12-tips"), None);
        assert_eq!(check(&s, "http://a.test/x?ids=2100,3"), None);
        assert_eq!(check(&s, "http://a.test/x/2031?05=1"), None);
        assert_eq!(check(&s, "http://a.test/v/12031/05/"), None);
        assert_eq!(check(&s, "http://a.test/v/2031/055/"), None);
        assert_eq!(
            check(&s, "http://a.test/cal/2031/5"),
            Some(Excluded::Calendar)
        );
    }

    #[test]
    fn bad_regexes_name_their_key() {
        let config = Config::defaults();
        let mut s = config.scope.clone();
        s.deny_patterns = vec!["(".into()];
        let err = Scope::new(&s, &config.traps, 2026).unwrap_err();
        assert_eq!(err.key, "scope.deny_patterns");
    }
}

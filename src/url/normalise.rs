//! The URL's identity: the normal form two URLs share exactly when they
//! name the same resource by the rules below, and nothing more.
//!
//! On top of WHATWG parsing (lower-case scheme and host, IDNA, default port
//! removed, dot segments resolved, an empty path made `/`):
//! - the fragment and an empty query are removed;
//! - percent-encoding is normalised in path and query (RFC 3986 §6.2.2.2):
//!   hex digits upper-cased, unreserved characters (`A-Z a-z 0-9 - . _ ~`)
//!   decoded, nothing else decoded (`%2F` stays, it is not `/`);
//! - session-ID parameters are removed from the query and as `;name=value`
//!   path parameters (`;jsessionid=…`), names matched case-insensitively;
//! - listed tracking parameters are removed from the query when
//!   `[url] strip_tracking` is on (off by default: `utm_*` can change a
//!   page).
//!
//! Path case and query order are kept: `/A` and `/a`, `?a=1&b=2` and
//! `?b=2&a=1` may be different resources on real servers.
//!
//! The URL as found (WHATWG-parsed, fragment removed) is what is fetched:
//! a server that needs its session ID still gets it. Only the identity
//! (and its fingerprint) decides whether the URL was seen.

use std::borrow::Cow;

use url::{Position, Url};

use super::{Fingerprint, UrlError};
use crate::config::UrlConfig;

/// A URL ready for the seen check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalised {
    /// What to fetch: the URL as found, without its fragment.
    pub fetch: Url,
    /// The normal form.
    pub identity: String,
    /// Fingerprint of `identity`.
    pub fp: Fingerprint,
}

/// The normalisation rules of a crawl.
#[derive(Debug, Clone)]
pub struct UrlRules {
    /// Parameter names removed always (lower-case).
    session_params: Vec<String>,
    /// Parameter names removed when stripping tracking (lower-case).
    tracking_params: Vec<String>,
    /// Longest fetch URL accepted, in bytes.
    max_len: usize,
}

impl Default for UrlRules {
    /// The defaults of `config/trawl.toml`.
    fn default() -> Self {
        UrlRules::new(&crate::config::Config::defaults().url, 2048)
    }
}

impl UrlRules {
    /// Rules from `[url]`, accepting URLs up to `max_len` bytes.
    pub fn new(config: &UrlConfig, max_len: usize) -> Self {
        let lower = |v: &[String]| v.iter().map(|n| n.to_ascii_lowercase()).collect();
        UrlRules {
            session_params: lower(&config.session_params),
            tracking_params: if config.strip_tracking {
                lower(&config.tracking_params)
            } else {
                Vec::new()
            },
            max_len,
        }
    }

    /// Checks `url` can be crawled and computes its identity.
    pub fn normalise(&self, mut url: Url) -> Result<Normalised, UrlError> {
        match url.scheme() {
            "http" | "https" => {}
            other => return Err(UrlError::Scheme(other.to_owned())),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(UrlError::NoHost);
        }
        url.set_fragment(None);
        if url.query() == Some("") {
            url.set_query(None);
        }
        if url.as_str().len() > self.max_len {
            return Err(UrlError::TooLong(self.max_len));
        }
        let identity = self.identity(&url);
        Ok(Normalised {
            fp: Fingerprint::of(&identity),
            identity,
            fetch: url,
        })
    }

    /// Parses `raw` (absolute) and normalises it.
    pub fn parse(&self, raw: &str) -> Result<Normalised, UrlError> {
        let url = Url::parse(raw.trim()).map_err(|e| UrlError::Parse(e.to_string()))?;
        self.normalise(url)
    }

    /// The normal form of a parsed URL without fragment.
    fn identity(&self, url: &Url) -> String {
        let origin = &url[..Position::BeforePath];
        let path = self.normal_path(url);
        let mut out = String::with_capacity(url.as_str().len());
        out.push_str(origin);
        out.push_str(&path);
        if let Some(query) = url.query() {
            let query = normalise_percent(query);
            let query = self.strip_query(&query);
            if !query.is_empty() {
                out.push('?');
                out.push_str(&query);
            }
        }
        out
    }

    /// The path with escapes normalised and session parameters removed.
    ///
    /// Escapes go first: `%73id` is `sid`. Removing a parameter can leave a
    /// dot segment (`/a/.;sid=1/b` becomes `/a/./b`), which the parser
    /// would resolve when the normal form is read again; so the path is
    /// parsed again until nothing more is removed, and the normal form is
    /// a fixed point. Each round removes at least one `;`, so it ends.
    fn normal_path(&self, url: &Url) -> String {
        let mut path = normalise_percent(url.path()).into_owned();
        loop {
            let stripped = strip_path_params(&path, &self.session_params);
            if stripped == path {
                return path;
            }
            let mut reparsed = url.clone();
            reparsed.set_path(&stripped);
            path = normalise_percent(reparsed.path()).into_owned();
        }
    }

    /// The query without removed parameters, the rest in order.
    fn strip_query<'q>(&self, query: &'q str) -> Cow<'q, str> {
        let removed = |pair: &str| {
            let name = pair.split('=').next().unwrap_or("");
            self.is_removed(name)
        };
        if !query.split('&').any(removed) {
            return Cow::Borrowed(query);
        }
        let kept: Vec<&str> = query.split('&').filter(|p| !removed(p)).collect();
        Cow::Owned(kept.join("&"))
    }

    fn is_removed(&self, name: &str) -> bool {
        let matches = |list: &[String]| list.iter().any(|n| n.eq_ignore_ascii_case(name));
        matches(&self.session_params) || matches(&self.tracking_params)
    }
}

/// `path` without `;name=value` parameters whose name is in `names`.
fn strip_path_params<'p>(path: &'p str, names: &[String]) -> Cow<'p, str> {
    if !path.contains(';') {
        return Cow::Borrowed(path);
    }
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(at) = rest.find(';') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let end = after.find(['/', ';']).unwrap_or(after.len());
        let param = &after[..end];
        let name = param.split('=').next().unwrap_or("");
        if !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            out.push(';');
            out.push_str(param);
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Upper-cases percent-escapes and decodes those of unreserved characters;
/// a `%` that starts no escape is written `%25`, the escape of itself.
/// The input is a serialised URL component, so ASCII.
///
/// The result is a fixed point: every `%` in it starts an escape of a
/// reserved character. (Kept as it was, a lone `%` could start a new
/// escape with what follows it once that is decoded: `%%2%64` gave
/// `%%2d`, which normalised again gives `%-`.)
fn normalise_percent(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| Some((hex(*bytes.get(i + 1)?)?, hex(*bytes.get(i + 2)?)?)))
            .flatten();
        match escape {
            Some((hi, lo)) => {
                let byte = hi << 4 | lo;
                if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                    out.push(byte as char);
                } else {
                    out.push('%');
                    out.push(char::from(b"0123456789ABCDEF"[usize::from(hi)]));
                    out.push(char::from(b"0123456789ABCDEF"[usize::from(lo)]));
                }
                i += 3;
            }
            None if bytes[i] == b'%' => {
                out.push_str("%25");
                i += 1;
            }
            None => {
                out.push(char::from(bytes[i]));
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(strip_tracking: bool) -> UrlRules {
        let mut config = crate::config::Config::defaults().url;
        config.strip_tracking = strip_tracking;
        UrlRules::new(&config, 2048)
    }

    fn id(raw: &str) -> String {
        rules(false).parse(raw).unwrap().identity
    }

    /// (input, normal form): each pair must agree exactly.
    const CASES: &[(&str, &str)] = &[
        // RFC 3986 §6.2.2.1: case of scheme and host; hex digits.
        ("HTTP://www.Example.COM/", "http://www.example.com/"),
        ("http://example.com/a%2fb", "http://example.com/a%2Fb"),
        (
            "http://example.com/?q=%e2%82%ac",
            "http://example.com/?q=%E2%82%AC",
        ),
        // §6.2.2.2: unreserved characters decoded, reserved ones kept.
        (
            "http://example.com/%7Euser/%41%62c",
            "http://example.com/~user/Abc",
        ),
        ("http://example.com/%7euser", "http://example.com/~user"),
        ("http://example.com/a%2Db%2E%5F", "http://example.com/a-b._"),
        (
            "http://example.com/a%3Fb%23c",
            "http://example.com/a%3Fb%23c",
        ),
        (
            "http://example.com/?a=%26&b=%3D",
            "http://example.com/?a=%26&b=%3D",
        ),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/ü", "http://example.com/%C3%BC"),
        // §6.2.2.3: dot segments.
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a/%2E%2E/c", "http://example.com/c"),
        // §6.2.3: default ports, empty path, empty query, fragment.
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/x", "https://example.com/x"),
        ("http://example.com:8080/", "http://example.com:8080/"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/x?", "http://example.com/x"),
        ("http://example.com/x#top", "http://example.com/x"),
        // IDNA.
        ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
        (
            "http://xn--bcher-kva.example/",
            "http://xn--bcher-kva.example/",
        ),
        // Session IDs: query and path parameter, any case.
        (
            "http://e.com/page.jsp;jsessionid=ABC123?x=1",
            "http://e.com/page.jsp?x=1",
        ),
        ("http://e.com/a;JSESSIONID=1/b", "http://e.com/a/b"),
        ("http://e.com/a;v=2;jsessionid=9", "http://e.com/a;v=2"),
        ("http://e.com/?PHPSESSID=abc&id=2", "http://e.com/?id=2"),
        ("http://e.com/?id=2&sid=77", "http://e.com/?id=2"),
        ("http://e.com/p?sid=1", "http://e.com/p"),
        ("http://e.com/p?jsessionid=1&Sid=2", "http://e.com/p"),
        // An escaped name is the name.
        ("http://e.com/p?%73id=1&x=2", "http://e.com/p?x=2"),
        ("http://e.com/a;%6Asessionid=1", "http://e.com/a"),
        // Not session IDs.
        (
            "http://e.com/p?said=1&sidebar=2",
            "http://e.com/p?said=1&sidebar=2",
        ),
        // Tracking parameters stay unless stripping is on.
        (
            "http://e.com/p?utm_source=x&id=1",
            "http://e.com/p?utm_source=x&id=1",
        ),
    ];

    #[test]
    fn equivalent_forms_share_one_identity() {
        for (input, expected) in CASES {
            assert_eq!(&id(input), expected, "{input}");
            // The normal form is a fixed point.
            assert_eq!(&id(expected), expected, "{expected} again");
        }
    }

    #[test]
    fn different_resources_stay_apart() {
        let apart = [
            ("http://e.com/Path", "http://e.com/path"),
            ("http://e.com/?a=1&b=2", "http://e.com/?b=2&a=1"),
            ("http://e.com/a%2Fb", "http://e.com/a/b"),
            ("http://e.com/a", "http://e.com/a/"),
            ("http://e.com/", "https://e.com/"),
            ("http://e.com/?q=a+b", "http://e.com/?q=a%20b"),
            ("http://e.com:8080/", "http://e.com/"),
        ];
        for (a, b) in apart {
            assert_ne!(id(a), id(b), "{a} vs {b}");
            assert_ne!(
                rules(false).parse(a).unwrap().fp,
                rules(false).parse(b).unwrap().fp
            );
        }
    }

    #[test]
    fn tracking_parameters_go_when_asked() {
        let strip = rules(true);
        let n = strip
            .parse("http://e.com/p?utm_source=x&id=1&fbclid=z")
            .unwrap();
        assert_eq!(n.identity, "http://e.com/p?id=1");
    }

    #[test]
    fn the_url_as_found_is_fetched() {
        let n = rules(false)
            .parse("http://e.com/page.jsp;jsessionid=ABC?x=1#f")
            .unwrap();
        assert_eq!(n.fetch.as_str(), "http://e.com/page.jsp;jsessionid=ABC?x=1");
        assert_eq!(n.identity, "http://e.com/page.jsp?x=1");
        assert_eq!(n.fp, Fingerprint::of("http://e.com/page.jsp?x=1"));
    }

    #[test]
    fn rejects_other_schemes_long_and_hostless() {
        let r = UrlRules::new(&crate::config::Config::defaults().url, 50);
        assert!(matches!(r.parse("mailto:a@b.c"), Err(UrlError::Scheme(_))));
        assert!(matches!(r.parse("ftp://x.org/"), Err(UrlError::Scheme(_))));
        let long = format!("http://x.org/{}", "a".repeat(100));
        assert_eq!(r.parse(&long), Err(UrlError::TooLong(50)));
        assert!(matches!(r.parse("not a url"), Err(UrlError::Parse(_))));
        assert!(matches!(r.parse("http://%zz/"), Err(UrlError::Parse(_))));
    }

    #[test]
    fn a_percent_that_starts_no_escape_is_escaped() {
        assert_eq!(id("http://e.com/%zz%4"), "http://e.com/%25zz%254");
        assert_eq!(id("http://e.com/100%"), "http://e.com/100%25");
        assert_eq!(id("http://e.com/100%25"), "http://e.com/100%25");
        assert_eq!(id("http://e.com/?q=5%"), "http://e.com/?q=5%25");
    }

    /// Found by the `url` fuzz target: a lone `%` followed by an escape
    /// of a hex digit made a new escape once that was decoded, so the
    /// normal form was not a fixed point.
    #[test]
    fn a_lone_percent_makes_no_escape_with_a_decoded_digit() {
        let once = id("http://a.test/%zz%2xsid/%%2%64%ac/?%%3%31");
        assert_eq!(once, "http://a.test/%25zz%252xsid/%25%252d%AC/?%25%2531");
        assert_eq!(id(&once), once);
    }

    /// Found by the `url` fuzz target: removing `;sid` left a dot segment
    /// that parsing the normal form again resolved.
    #[test]
    fn a_session_parameter_removed_leaves_no_dot_segment() {
        let cases = [
            ("http://e.com/a/.;sid/b", "http://e.com/a/b"),
            ("http://e.com/a/b/..;jsessionid=1/c", "http://e.com/a/c"),
            ("http://e.com/a/%2E;sid=2//x", "http://e.com/a//x"),
            (
                "http://base.test/a/b/hzttzg/.;sid/////",
                "http://base.test/a/b/hzttzg/////",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(id(input), expected, "{input}");
            assert_eq!(id(expected), expected, "{expected} again");
        }
    }
}

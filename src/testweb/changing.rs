//! `changing.test`: a host whose pages change over time, for the refresh
//! loop (refetch intervals, conditional requests, revisits, removals).
//!
//! Everything it serves is a pure function of the path, the time since the
//! server's clock started ([`Timeline`]), how many requests for the path
//! came before, and a [`ChangingSpec`]: [`respond`] makes the answer and
//! [`expected`] is the ground truth a test compares a crawl's log against,
//! both without sockets or sleeping.
//!
//! Paths (every page HTML, dozens of words of visible text; a new version
//! has different words, so its simhash is far from the last one's):
//! - `/`: links to every page below but `/new`; never changes (ETag);
//! - `/etag/N`, `/lastmod/N`, `/both/N`, `/none/N` for N < [`PAGES`]: a
//!   new version every [`ChangingSpec::period`], with an ETag, a
//!   Last-Modified, both, or no validator;
//! - `/always`: a new version on every request (ETag);
//! - `/never`: never changes (ETag and a fixed Last-Modified);
//! - `/footer`: fixed text and a footer naming the request's time and
//!   number, so the bytes change on every request and the simhash does
//!   not; no validators;
//! - `/gone404`, `/gone410`: 200 until [`ChangingSpec::gone_after`], then
//!   404 or 410;
//! - `/private/page`: always 200, but `/robots.txt` (text, no validators,
//!   not linked) allows everything until [`ChangingSpec::disallow_after`]
//!   and disallows `/private/` from then on;
//! - `/old`: 200 until [`ChangingSpec::move_after`], then `301` to `/new`
//!   (relative `Location`); `/new`: always 200, linked from nowhere, so a
//!   crawler only learns of it from the redirect;
//! - anything else: 404.
//!
//! Pages that never change (`/`, `/never`, `/private/page`, `/new`, and
//! `/gone*` and `/old` while they are 200) carry ETag `"v0"`, all but `/`
//! also Last-Modified [`fixed_date`]. A changing page's ETag is
//! `"v<version>"`, its Last-Modified the start of its version.
//!
//! Conditional requests follow RFC 9110 §13.2.2: `If-None-Match` (weak
//! comparison, a list or `*`) is evaluated when present, and
//! `If-Modified-Since` only without it. A match answers `304` with the
//! page's validators and no body; a page without validators never does.
//! Only 200 answers are conditional: a page gone or moved answers the same
//! whatever the request asks.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix_web::http::StatusCode;
use actix_web::HttpResponse;

use super::dupes::prose;

/// The host name.
pub const HOST: &str = "changing.test";

/// Pages per periodic family (`/etag/0` … `/etag/3`, …).
pub const PAGES: u32 = 4;

/// Words of a page's text (the footer page has [`FOOTER_WORDS`]).
const WORDS: usize = 60;

/// Words of `/footer`'s fixed text: enough that the changing footer moves
/// its simhash by a bit or two at most.
pub const FOOTER_WORDS: usize = 200;

/// Whether `host` is this one.
pub fn serves(host: &str) -> bool {
    host == HOST
}

/// When things happen on `changing.test`. All times count from the
/// server's [`Timeline`] zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangingSpec {
    /// How often the periodic pages (`/etag/N`, `/lastmod/N`, `/both/N`,
    /// `/none/N`) change. Keep it whole seconds where Last-Modified
    /// matters: an HTTP-date has whole seconds, so with a shorter period
    /// several versions share one date, and `If-Modified-Since` cannot tell
    /// them apart (the server then answers 304 for a changed page, as a
    /// real one would). Zero counts as one nanosecond.
    pub period: Duration,
    /// When `/gone404` and `/gone410` start answering 404 and 410.
    pub gone_after: Duration,
    /// When `/robots.txt` starts disallowing `/private/`.
    pub disallow_after: Duration,
    /// When `/old` starts redirecting to `/new`.
    pub move_after: Duration,
}

impl Default for ChangingSpec {
    /// Second-scale times, for tests: a change a second, removals after
    /// three.
    fn default() -> Self {
        ChangingSpec {
            period: Duration::from_secs(1),
            gone_after: Duration::from_secs(3),
            disallow_after: Duration::from_secs(3),
            move_after: Duration::from_secs(3),
        }
    }
}

/// The host's clock: a monotonic zero at a whole wall-clock second, so the
/// version boundaries of a whole-second period fall on whole seconds and
/// their Last-Modified dates are exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    zero: Instant,
    epoch: SystemTime,
}

impl Timeline {
    /// A clock whose zero is the whole wall-clock second at or before now
    /// (so a server starts up to a second into its timeline).
    pub fn start() -> Self {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let into_second = wall
            .duration_since(UNIX_EPOCH)
            .map(|d| Duration::from_nanos(d.subsec_nanos().into()))
            .unwrap_or_default();
        match now.checked_sub(into_second) {
            Some(zero) => Timeline {
                zero,
                epoch: wall - into_second,
            },
            // Within a second of boot: dates may have a fraction.
            None => Timeline {
                zero: now,
                epoch: wall,
            },
        }
    }

    /// The wall-clock time of the zero.
    pub fn epoch(&self) -> SystemTime {
        self.epoch
    }

    /// Time from the zero to `at` (zero before it).
    pub fn elapsed(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.zero)
    }

    /// The moment of a request that reached the server at `at` after
    /// `hits` earlier requests for its path: what [`respond`] and
    /// [`expected`] need. A test maps a [`super::RequestRecord`]'s `start`
    /// through this to get what the server used.
    pub fn moment(&self, at: Instant, hits: u32) -> Moment {
        Moment {
            epoch: self.epoch,
            elapsed: self.elapsed(at),
            hits,
        }
    }
}

/// When a request arrived, as far as the answer depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    /// The wall-clock time of the timeline's zero (Last-Modified dates
    /// are counted from it).
    pub epoch: SystemTime,
    /// Time since the zero.
    pub elapsed: Duration,
    /// Requests for the same path before this one (`/always` and
    /// `/footer` change with it).
    pub hits: u32,
}

impl Moment {
    /// The wall-clock time of the request.
    pub fn wall(&self) -> SystemTime {
        self.epoch + self.elapsed
    }
}

/// A request, as far as the answer depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The path (a query is ignored).
    pub path: &'a str,
    /// The listener's port, for the index's absolute links.
    pub port: u16,
    /// Whether the listener is HTTPS (the links' scheme).
    pub secure: bool,
    /// The `If-None-Match` value (several fields joined with `, `).
    pub if_none_match: Option<&'a str>,
    /// The `If-Modified-Since` value.
    pub if_modified_since: Option<&'a str>,
}

impl<'a> Request<'a> {
    /// An unconditional GET of `path` through plain HTTP on port 80.
    pub fn get(path: &'a str) -> Self {
        Request {
            path,
            port: 80,
            secure: false,
            if_none_match: None,
            if_modified_since: None,
        }
    }
}

/// What the server answers a request at some moment, before conditions:
/// the ground truth of a crawl's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The status of an unconditional request (200, 301, 404 or 410).
    pub status: u16,
    /// The content served with a 200: equal versions of a path are equal
    /// bytes, except `/footer` (its version is the request number, and
    /// only its footer differs) and `/` (the links name the listener).
    /// `None` for any other status.
    pub version: Option<u64>,
    /// The ETag sent with a 200 (or a 304), quotes included.
    pub etag: Option<String>,
    /// The Last-Modified sent with a 200 (or a 304), whole seconds.
    pub last_modified: Option<SystemTime>,
    /// Where a 301 points.
    pub location: Option<&'static str>,
}

impl Expected {
    /// Whether a request with these conditional headers is answered `304`
    /// (see the module doc for the rules).
    pub fn not_modified(
        &self,
        if_none_match: Option<&str>,
        if_modified_since: Option<&str>,
    ) -> bool {
        if self.status != 200 {
            return false;
        }
        if let Some(list) = if_none_match {
            return self
                .etag
                .as_deref()
                .is_some_and(|etag| etag_matches(list, etag));
        }
        let since = if_modified_since.and_then(|s| httpdate::parse_http_date(s).ok());
        matches!((self.last_modified, since), (Some(lm), Some(since)) if lm <= since)
    }

    /// The status a request with these conditional headers gets.
    pub fn status_for(&self, if_none_match: Option<&str>, if_modified_since: Option<&str>) -> u16 {
        if self.not_modified(if_none_match, if_modified_since) {
            304
        } else {
            self.status
        }
    }

    /// Whether the content differs from `earlier`'s: a refetch of a page
    /// at `self` after a fetch at `earlier` must not be told 304.
    pub fn changed_since(&self, earlier: &Expected) -> bool {
        self.version != earlier.version
    }

    fn ok(version: u64, etag: bool, last_modified: Option<SystemTime>) -> Self {
        Expected {
            status: 200,
            version: Some(version),
            etag: etag.then(|| format!("\"v{version}\"")),
            last_modified: last_modified.map(whole_seconds),
            location: None,
        }
    }

    fn status(status: u16) -> Self {
        Expected {
            status,
            version: None,
            etag: None,
            last_modified: None,
            location: None,
        }
    }
}

/// Weak comparison (RFC 9110 §8.8.3.2) of `etag` with each tag of an
/// `If-None-Match` list; `*` matches any. Tags are split at commas, which
/// the tags this host sends never contain.
fn etag_matches(list: &str, etag: &str) -> bool {
    let opaque = |tag: &str| -> String {
        let tag = tag.trim();
        tag.strip_prefix("W/").unwrap_or(tag).to_owned()
    };
    let etag = opaque(etag);
    list.split(',')
        .any(|tag| tag.trim() == "*" || opaque(tag) == etag)
}

/// The Last-Modified of every page that never changes: 2025-01-01
/// 00:00:00 GMT.
pub fn fixed_date() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_735_689_600)
}

/// `t` without its fraction of a second (what an HTTP-date keeps).
fn whole_seconds(t: SystemTime) -> SystemTime {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH + Duration::from_secs(since.as_secs())
}

/// The periodic families: path prefix, whether the pages carry an ETag,
/// whether a Last-Modified.
const FAMILIES: [(&str, bool, bool); 4] = [
    ("etag", true, false),
    ("lastmod", false, true),
    ("both", true, true),
    ("none", false, false),
];

/// The pages besides the periodic ones that `/` links to.
const SINGLES: [&str; 7] = [
    "/always",
    "/never",
    "/footer",
    "/gone404",
    "/gone410",
    "/private/page",
    "/old",
];

/// Every path `/` links to (all pages but `/new` and `/robots.txt`).
pub fn linked_paths() -> Vec<String> {
    let periodic = FAMILIES
        .iter()
        .flat_map(|(family, ..)| (0..PAGES).map(move |n| format!("/{family}/{n}")));
    let singles = SINGLES.iter().map(|p| p.to_string());
    periodic.chain(singles).collect()
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    Index,
    Robots,
    /// Family (index into [`FAMILIES`]) and page number.
    Periodic(usize, u32),
    Always,
    Never,
    Footer,
    /// The status it turns into.
    Gone(u16),
    Private,
    Old,
    New,
}

impl Page {
    fn of(path: &str) -> Option<Page> {
        let page = match path {
            "/" => Page::Index,
            "/robots.txt" => Page::Robots,
            "/always" => Page::Always,
            "/never" => Page::Never,
            "/footer" => Page::Footer,
            "/gone404" => Page::Gone(404),
            "/gone410" => Page::Gone(410),
            "/private/page" => Page::Private,
            "/old" => Page::Old,
            "/new" => Page::New,
            _ => return Page::periodic(path),
        };
        Some(page)
    }

    /// `/family/N`, N in canonical decimal below [`PAGES`].
    fn periodic(path: &str) -> Option<Page> {
        let (family, n) = path.strip_prefix('/')?.split_once('/')?;
        let family = FAMILIES.iter().position(|(name, ..)| *name == family)?;
        let page: u32 = n.parse().ok()?;
        (page < PAGES && page.to_string() == n).then_some(Page::Periodic(family, page))
    }

    /// What the page is at `at`.
    fn state(self, at: &Moment, spec: &ChangingSpec) -> Expected {
        let stable = || Expected::ok(0, true, Some(fixed_date()));
        match self {
            Page::Index => Expected::ok(0, true, None),
            Page::Robots => Expected::ok(u64::from(at.elapsed >= spec.disallow_after), false, None),
            Page::Periodic(family, _) => {
                let (_, etag, last_modified) = FAMILIES[family];
                let (version, start) = version_at(at.elapsed, spec.period);
                Expected::ok(version, etag, last_modified.then(|| at.epoch + start))
            }
            Page::Always => Expected::ok(at.hits.into(), true, None),
            Page::Footer => Expected::ok(at.hits.into(), false, None),
            Page::Never | Page::Private | Page::New => stable(),
            Page::Gone(status) if at.elapsed >= spec.gone_after => Expected::status(status),
            Page::Old if at.elapsed >= spec.move_after => Expected {
                location: Some("/new"),
                ..Expected::status(301)
            },
            Page::Gone(_) | Page::Old => stable(),
        }
    }

    /// A number that tells pages' texts apart.
    fn seed(self) -> u32 {
        match self {
            Page::Index => 1,
            Page::Robots => 2,
            Page::Always => 3,
            Page::Never => 4,
            Page::Footer => 5,
            Page::Gone(status) => status.into(),
            Page::Private => 6,
            Page::Old => 7,
            Page::New => 8,
            Page::Periodic(family, n) => 100 + family as u32 * PAGES + n,
        }
    }
}

/// The version of a page that changes every `period` at `elapsed`, and
/// when that version started.
fn version_at(elapsed: Duration, period: Duration) -> (u64, Duration) {
    let period = period.as_nanos().max(1);
    let elapsed = elapsed.as_nanos();
    let version = elapsed / period;
    let start = u64::try_from(version * period).unwrap_or(u64::MAX);
    (
        u64::try_from(version).unwrap_or(u64::MAX),
        Duration::from_nanos(start),
    )
}

/// What the server serves for `path` at `at` to a request without
/// conditions. A test replays a logged request through it (the moment from
/// [`Timeline::moment`] with the record's `start`; `hits` counts the
/// earlier requests for the path, which for one request at a time is its
/// rank among them by start) and asks the result whether the request
/// should have been answered 304 ([`Expected::not_modified`]).
pub fn expected(path: &str, at: &Moment, spec: &ChangingSpec) -> Expected {
    Page::of(path).map_or_else(|| Expected::status(404), |page| page.state(at, spec))
}

/// An answer, before it becomes an actix response (plain data, so the
/// unit tests read it without a runtime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status.
    pub status: u16,
    /// Header fields, in order.
    pub headers: Vec<(&'static str, String)>,
    /// The body (empty for 301 and 304).
    pub body: String,
}

impl Reply {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The actix response.
    pub fn into_response(self) -> HttpResponse {
        let status = StatusCode::from_u16(self.status).expect("a valid status");
        let mut builder = HttpResponse::build(status);
        for header in self.headers {
            builder.insert_header(header);
        }
        if self.body.is_empty() {
            builder.finish()
        } else {
            builder.body(self.body)
        }
    }

    /// The validators of `expected`.
    fn validators(expected: &Expected) -> Vec<(&'static str, String)> {
        let etag = expected.etag.clone().map(|e| ("ETag", e));
        let date = expected
            .last_modified
            .map(|t| ("Last-Modified", httpdate::fmt_http_date(t)));
        etag.into_iter().chain(date).collect()
    }
}

/// The answer to `req` at `at`.
pub fn respond(req: &Request, at: &Moment, spec: &ChangingSpec) -> Reply {
    let path = req.path.split('?').next().unwrap_or("/");
    let Some(page) = Page::of(path) else {
        return error_page(404);
    };
    let expected = page.state(at, spec);
    if expected.not_modified(req.if_none_match, req.if_modified_since) {
        return Reply {
            status: 304,
            headers: Reply::validators(&expected),
            body: String::new(),
        };
    }
    match (expected.status, expected.version) {
        (200, Some(version)) => {
            let (content_type, body) = body(page, version, req, at);
            let mut headers = vec![("Content-Type", content_type.to_owned())];
            headers.extend(Reply::validators(&expected));
            Reply {
                status: 200,
                headers,
                body,
            }
        }
        (301, _) => Reply {
            status: 301,
            headers: vec![("Location", expected.location.unwrap_or("/").to_owned())],
            body: String::new(),
        },
        (status, _) => error_page(status),
    }
}

/// A 404 or 410 page.
fn error_page(status: u16) -> Reply {
    let what = if status == 410 { "gone" } else { "not found" };
    Reply {
        status,
        headers: vec![("Content-Type", "text/html; charset=utf-8".to_owned())],
        body: format!("<html><body><h1>{what}</h1></body></html>"),
    }
}

/// The content type and body of `page` at `version`.
fn body(page: Page, version: u64, req: &Request, at: &Moment) -> (&'static str, String) {
    const HTML: &str = "text/html; charset=utf-8";
    match page {
        Page::Robots => ("text/plain", robots(version)),
        Page::Index => (HTML, index(req)),
        Page::Footer => {
            let served = crate::clock::unix_ms(at.wall());
            let text = format!(
                "<p>{}</p><p>served at {served} as request {}</p>",
                prose(page.seed(), FOOTER_WORDS),
                at.hits
            );
            (HTML, html("footer", &text))
        }
        _ => {
            // Consecutive versions get unrelated seeds, hence other words.
            let seed = page
                .seed()
                .wrapping_mul(7919)
                .wrapping_add((version as u32).wrapping_mul(104_729));
            let title = req.path.trim_start_matches('/');
            (HTML, html(title, &format!("<p>{}</p>", prose(seed, WORDS))))
        }
    }
}

/// robots.txt: everything allowed (version 0), then `/private/` not.
fn robots(version: u64) -> String {
    let rule = if version == 0 {
        "Disallow:"
    } else {
        "Disallow: /private/"
    };
    format!("User-agent: *\n{rule}\n")
}

/// The index: absolute links to every page of [`linked_paths`].
fn index(req: &Request) -> String {
    let scheme = if req.secure { "https" } else { "http" };
    let base = format!("{scheme}://{HOST}:{}", req.port);
    let links: String = linked_paths()
        .iter()
        .map(|p| format!("<a href=\"{base}{p}\">{p}</a>\n"))
        .collect();
    let text = prose(Page::Index.seed(), 30);
    html("changing pages", &format!("<p>{text}</p>\n{links}"))
}

fn html(title: &str, body: &str) -> String {
    format!("<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::distance;
    use crate::parse::page_simhash;

    /// A whole second, as the server's epoch is.
    fn epoch() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_767_225_600)
    }

    fn at_ms(ms: u64) -> Moment {
        Moment {
            epoch: epoch(),
            elapsed: Duration::from_millis(ms),
            hits: 0,
        }
    }

    fn get(path: &str, ms: u64) -> Reply {
        respond(&Request::get(path), &at_ms(ms), &ChangingSpec::default())
    }

    fn conditional(path: &str, ms: u64, inm: Option<&str>, ims: Option<&str>) -> Reply {
        let req = Request {
            if_none_match: inm,
            if_modified_since: ims,
            ..Request::get(path)
        };
        respond(&req, &at_ms(ms), &ChangingSpec::default())
    }

    fn simhash(reply: &Reply) -> u64 {
        page_simhash(&reply.body).expect("enough words")
    }

    #[test]
    fn index_links_every_page_but_new_and_never_changes() {
        let req = Request {
            port: 8123,
            ..Request::get("/")
        };
        let spec = ChangingSpec::default();
        let first = respond(&req, &at_ms(0), &spec);
        let later = respond(
            &req,
            &Moment {
                hits: 9,
                ..at_ms(99_000)
            },
            &spec,
        );
        assert_eq!(first, later);
        assert_eq!(first.status, 200);
        assert_eq!(first.header("etag"), Some("\"v0\""));
        for path in linked_paths() {
            let link = format!("href=\"http://changing.test:8123{path}\"");
            assert!(first.body.contains(&link), "{link}");
        }
        assert_eq!(linked_paths().len(), 4 * PAGES as usize + 7);
        assert!(!first.body.contains("/new\""));
        let secure = respond(
            &Request {
                secure: true,
                ..req
            },
            &at_ms(0),
            &spec,
        );
        assert!(secure.body.contains("https://changing.test:8123/always"));
    }

    #[test]
    fn periodic_pages_change_every_period_in_words() {
        for (family, etag, last_modified) in FAMILIES {
            for n in 0..PAGES {
                let path = format!("/{family}/{n}");
                let (a, a2, b) = (get(&path, 100), get(&path, 999), get(&path, 1000));
                assert_eq!(a, a2, "{path}: one version within a period");
                assert_ne!(a.body, b.body, "{path}");
                let bits = distance(simhash(&a), simhash(&b));
                assert!(bits > 3, "{path}: versions {bits} bits apart");
                assert_eq!(a.header("content-type"), Some("text/html; charset=utf-8"));
                assert!(a.body.split_whitespace().count() >= WORDS);
                let etags = (a.header("etag"), b.header("etag"));
                if etag {
                    assert_eq!(etags, (Some("\"v0\""), Some("\"v1\"")), "{path}");
                } else {
                    assert_eq!(etags, (None, None), "{path}");
                }
                assert_eq!(a.header("last-modified").is_some(), last_modified);
            }
        }
        // Every change is one, not just the first.
        for path in ["/etag/0", "/none/3"] {
            for version in 1..20 {
                let (a, b) = (get(path, version * 1000 - 1), get(path, version * 1000));
                let bits = distance(simhash(&a), simhash(&b));
                assert!(
                    bits > 3,
                    "{path} version {version}: {bits} bits from the last"
                );
            }
        }
        // Pages of one family differ from each other too.
        assert!(distance(simhash(&get("/etag/0", 0)), simhash(&get("/etag/1", 0))) > 3);
    }

    #[test]
    fn last_modified_is_the_start_of_the_version_in_whole_seconds() {
        let reply = get("/lastmod/2", 2700);
        let date = httpdate::fmt_http_date(epoch() + Duration::from_secs(2));
        assert_eq!(reply.header("last-modified"), Some(date.as_str()));
        let spec = ChangingSpec {
            period: Duration::from_secs(5),
            ..ChangingSpec::default()
        };
        let e = expected("/both/0", &at_ms(12_345), &spec);
        assert_eq!(e.version, Some(2));
        assert_eq!(e.last_modified, Some(epoch() + Duration::from_secs(10)));
        assert_eq!(e.etag.as_deref(), Some("\"v2\""));
    }

    #[test]
    fn if_none_match_answers_304_while_the_etag_holds() {
        for path in ["/etag/1", "/both/1"] {
            let not_modified = conditional(path, 500, Some("\"v0\""), None);
            assert_eq!(not_modified.status, 304, "{path}");
            assert!(not_modified.body.is_empty());
            assert_eq!(not_modified.header("etag"), Some("\"v0\""));
            let has_date = not_modified.header("last-modified").is_some();
            assert_eq!(has_date, path == "/both/1");
            assert_eq!(conditional(path, 1500, Some("\"v0\""), None).status, 200);
        }
        // Weak comparison, lists and `*`.
        for inm in ["W/\"v0\"", "\"x\", \"v0\"", "*"] {
            assert_eq!(
                conditional("/etag/0", 0, Some(inm), None).status,
                304,
                "{inm}"
            );
        }
        assert_eq!(conditional("/etag/0", 0, Some("\"v00\""), None).status, 200);
        // With If-None-Match, If-Modified-Since is not looked at.
        let lm = get("/both/0", 0)
            .header("last-modified")
            .unwrap()
            .to_owned();
        assert_eq!(
            conditional("/both/0", 0, Some("\"v9\""), Some(&lm)).status,
            200
        );
        // A page without an ETag never matches.
        assert_eq!(
            conditional("/lastmod/0", 0, Some("*"), Some(&lm)).status,
            200
        );
    }

    #[test]
    fn if_modified_since_answers_304_until_the_next_version() {
        let lm = get("/lastmod/0", 1200)
            .header("last-modified")
            .unwrap()
            .to_owned();
        let reply = conditional("/lastmod/0", 1900, None, Some(&lm));
        assert_eq!(reply.status, 304);
        assert_eq!(reply.header("last-modified"), Some(lm.as_str()));
        assert_eq!(reply.header("etag"), None);
        assert_eq!(conditional("/lastmod/0", 2000, None, Some(&lm)).status, 200);
        let before = httpdate::fmt_http_date(epoch());
        assert_eq!(
            conditional("/lastmod/0", 1200, None, Some(&before)).status,
            200
        );
        assert_eq!(
            conditional("/lastmod/0", 1200, None, Some("yesterday")).status,
            200
        );
        // A page without Last-Modified ignores the date.
        assert_eq!(conditional("/etag/0", 1200, None, Some(&lm)).status, 200);
    }

    #[test]
    fn pages_without_validators_never_answer_304() {
        let far = httpdate::fmt_http_date(epoch() + Duration::from_secs(3600));
        for path in ["/none/3", "/footer", "/robots.txt"] {
            let reply = get(path, 0);
            assert_eq!(
                (reply.header("etag"), reply.header("last-modified")),
                (None, None)
            );
            for (inm, ims) in [(Some("*"), None), (None, Some(far.as_str()))] {
                assert_eq!(conditional(path, 0, inm, ims).status, 200, "{path}");
            }
        }
        assert_ne!(get("/none/3", 0).body, get("/none/3", 1000).body);
    }

    #[test]
    fn always_changes_on_every_request() {
        let spec = ChangingSpec::default();
        let req = Request::get("/always");
        let replies: Vec<Reply> = (0..3)
            .map(|hits| respond(&req, &Moment { hits, ..at_ms(0) }, &spec))
            .collect();
        assert_eq!(replies[2].header("etag"), Some("\"v2\""));
        assert!(distance(simhash(&replies[0]), simhash(&replies[1])) > 3);
        let refetch = Request {
            if_none_match: Some("\"v0\""),
            ..req
        };
        assert_eq!(
            respond(
                &refetch,
                &Moment {
                    hits: 1,
                    ..at_ms(0)
                },
                &spec
            )
            .status,
            200
        );
    }

    #[test]
    fn never_never_changes_and_validates_both_ways() {
        let a = get("/never", 0);
        let b = respond(
            &Request::get("/never"),
            &Moment {
                hits: 50,
                ..at_ms(500_000)
            },
            &ChangingSpec::default(),
        );
        assert_eq!(a, b);
        let date = httpdate::fmt_http_date(fixed_date());
        assert_eq!(a.header("last-modified"), Some(date.as_str()));
        assert_eq!(a.header("etag"), Some("\"v0\""));
        assert_eq!(
            conditional("/never", 9000, Some("\"v0\""), None).status,
            304
        );
        assert_eq!(conditional("/never", 9000, None, Some(&date)).status, 304);
    }

    #[test]
    fn footer_changes_the_bytes_and_not_the_text() {
        let spec = ChangingSpec::default();
        let req = Request::get("/footer");
        let a = respond(&req, &at_ms(10), &spec);
        let b = respond(
            &req,
            &Moment {
                hits: 1,
                ..at_ms(10)
            },
            &spec,
        );
        let c = respond(
            &req,
            &Moment {
                hits: 2,
                ..at_ms(2345)
            },
            &spec,
        );
        assert_ne!(a.body, b.body);
        assert_ne!(b.body, c.body);
        assert!(a.body.split_whitespace().count() >= 50);
        for other in [&b, &c] {
            assert!(distance(simhash(&a), simhash(other)) <= 3);
        }
        assert_eq!(
            expected(
                "/footer",
                &Moment {
                    hits: 2,
                    ..at_ms(0)
                },
                &spec
            )
            .version,
            Some(2)
        );
    }

    #[test]
    fn gone_pages_turn_404_and_410() {
        for (path, status) in [("/gone404", 404), ("/gone410", 410)] {
            assert_eq!(get(path, 2999).status, 200);
            assert_eq!(conditional(path, 2999, Some("\"v0\""), None).status, 304);
            assert_eq!(get(path, 3000).status, status);
            // Conditions do not apply to a page that is gone.
            assert_eq!(conditional(path, 3000, Some("\"v0\""), None).status, status);
        }
    }

    #[test]
    fn robots_disallows_private_later_and_the_page_stays() {
        assert_eq!(get("/robots.txt", 2999).body, "User-agent: *\nDisallow:\n");
        let later = get("/robots.txt", 3000);
        assert_eq!(later.body, "User-agent: *\nDisallow: /private/\n");
        assert_eq!(later.header("content-type"), Some("text/plain"));
        assert_eq!(get("/private/page", 0), get("/private/page", 60_000));
        assert_eq!(get("/private/page", 60_000).status, 200);
    }

    #[test]
    fn old_moves_to_new() {
        assert_eq!(get("/old", 2999).status, 200);
        let moved = get("/old", 3000);
        assert_eq!(
            (moved.status, moved.header("location")),
            (301, Some("/new"))
        );
        assert_eq!(conditional("/old", 3000, Some("\"v0\""), None).status, 301);
        assert_eq!(get("/new", 0), get("/new", 10_000));
        assert_eq!(get("/new", 0).status, 200);
        let e = expected("/old", &at_ms(3000), &ChangingSpec::default());
        assert_eq!((e.status, e.location, e.version), (301, Some("/new"), None));
    }

    #[test]
    fn anything_else_is_404() {
        for path in [
            "/etag/4",
            "/etag/01",
            "/etag/",
            "/etag/x",
            "/nothing",
            "/private/",
            "",
        ] {
            assert_eq!(get(path, 0).status, 404, "{path}");
            assert_eq!(
                expected(path, &at_ms(0), &ChangingSpec::default()).status,
                404
            );
        }
        // A query is ignored.
        assert_eq!(get("/never?x=1", 0).status, 200);
    }

    #[test]
    fn expected_is_what_respond_serves() {
        let spec = ChangingSpec::default();
        let mut paths = linked_paths();
        paths.extend(["/", "/new", "/robots.txt", "/missing"].map(String::from));
        for path in &paths {
            for ms in [0, 999, 1000, 2500, 3000, 7000] {
                let at = Moment {
                    hits: 4,
                    ..at_ms(ms)
                };
                let e = expected(path, &at, &spec);
                let reply = respond(&Request::get(path), &at, &spec);
                assert_eq!(reply.status, e.status, "{path} at {ms}");
                assert_eq!(reply.header("etag"), e.etag.as_deref(), "{path}");
                let date = e.last_modified.map(httpdate::fmt_http_date);
                assert_eq!(reply.header("last-modified"), date.as_deref(), "{path}");
                assert_eq!(reply.header("location"), e.location, "{path}");
                let etag = e.etag.as_deref();
                assert_eq!(e.not_modified(etag, None), etag.is_some(), "{path}");
                assert_eq!(
                    e.status_for(etag, None),
                    respond(
                        &Request {
                            if_none_match: etag,
                            ..Request::get(path)
                        },
                        &at,
                        &spec
                    )
                    .status
                );
            }
        }
        let (v0, v1) = (
            expected("/none/0", &at_ms(0), &spec),
            expected("/none/0", &at_ms(1000), &spec),
        );
        assert!(v1.changed_since(&v0) && !v0.changed_since(&v0));
    }

    /// One HTTP/1.1 GET of `changing.test` at `addr` with `extra` header
    /// lines: the status line's code and the ETag.
    fn http_get(addr: std::net::SocketAddr, path: &str, extra: &str) -> (u16, Option<String>) {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let head =
            format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n{extra}\r\n");
        conn.write_all(head.as_bytes()).unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        let status = answer[9..12].parse().unwrap();
        let etag = answer.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("etag")
                .then(|| value.trim().to_owned())
        });
        (status, etag)
    }

    #[test]
    fn the_server_answers_a_conditional_request_and_logs_its_headers() {
        use crate::testweb::{ServerOptions, SyntheticWeb, TestWebServer, WebSpec};
        let web = SyntheticWeb::new(WebSpec {
            hosts: 1,
            pages_per_host: 1,
            seed: 1,
            behaviours: false,
        });
        // One version for the whole test, so the refetch cannot race a
        // change.
        let options = ServerOptions {
            changing: ChangingSpec {
                period: Duration::from_secs(3600),
                ..ChangingSpec::default()
            },
            ..ServerOptions::default()
        };
        let listen = "127.0.0.1:0".parse().unwrap();
        let server = TestWebServer::start_with(web, listen, 1, options).unwrap();
        let (status, etag) = http_get(server.addr(), "/both/1", "");
        assert_eq!((status, etag.as_deref()), (200, Some("\"v0\"")));
        let (status, etag) = http_get(server.addr(), "/both/1", "If-None-Match: \"v0\"\r\n");
        assert_eq!((status, etag.as_deref()), (304, Some("\"v0\"")));
        assert!(server.log().wait_for(2, Duration::from_secs(10)));
        let mut log = server.log().records();
        log.sort_by_key(|r| r.start);
        let seen: Vec<_> = log
            .iter()
            .map(|r| {
                (
                    r.host.as_str(),
                    r.status,
                    r.if_none_match.as_deref(),
                    r.etag.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (HOST, 200, None, Some("\"v0\"")),
                (HOST, 304, Some("\"v0\""), Some("\"v0\"")),
            ]
        );
        assert!(log.iter().all(|r| r.if_modified_since.is_none()));
        // The ground truth agrees, replayed from the log.
        let timeline = server.changing_timeline();
        let spec = ChangingSpec {
            period: Duration::from_secs(3600),
            ..ChangingSpec::default()
        };
        for (hits, r) in log.iter().enumerate() {
            let e = expected(&r.path, &timeline.moment(r.start, hits as u32), &spec);
            let inm = r.if_none_match.as_deref();
            let ims = r.if_modified_since.as_deref();
            assert_eq!(e.status_for(inm, ims), r.status);
            assert_eq!(e.etag, r.etag);
        }
        server.stop();
    }

    #[test]
    fn timeline_starts_on_a_whole_second() {
        let timeline = Timeline::start();
        let since = timeline.epoch().duration_since(UNIX_EPOCH).unwrap();
        assert_eq!(since.subsec_nanos(), 0);
        let now = Instant::now();
        assert!(timeline.elapsed(now) < Duration::from_millis(1500));
        let moment = timeline.moment(now, 3);
        assert_eq!((moment.epoch, moment.hits), (timeline.epoch(), 3));
    }
}

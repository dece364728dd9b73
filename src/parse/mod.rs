//! HTML parsing: links, `<base href>`, canonical, meta robots, title, and
//! the simhash of the visible text; `X-Robots-Tag` header directives.
//!
//! Two readers, chosen by `[parse] engine`: [`stream`] (the default)
//! takes what the crawl needs from html5ever's tokens as they go by;
//! the tree reader builds the DOM ([`bounded`]) and walks it once
//! (`read`). Both run on the ParserPool's threads (scraper's `Html` is not
//! `Send`) and return plain data. Malformed HTML never fails: html5ever
//! recovers the way browsers do, and a link that does not resolve is
//! skipped. A page whose parse would cost too much is read only up to a
//! bound and says so in [`ParsedPage::truncated`].

mod attributes;
pub mod bounded;
pub mod charset;
mod read;
pub mod sniff;
pub mod stream;

use std::sync::OnceLock;

use scraper::Html;
use url::Url;

pub use crate::config::ParseEngine;
pub use bounded::{CutReason, ParseClock, ParseCut, ParseLimits, Stopwatch};

/// What the crawl needs from a page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedPage {
    /// Distinct absolute link targets, fragments removed, in the order of
    /// their first appearance (before the URL normal form or filters).
    pub links: Vec<Url>,
    /// Distinct targets dropped over the per-page cap.
    pub links_dropped: usize,
    /// `rel=canonical` target, resolved.
    pub canonical: Option<Url>,
    /// Content of `<meta name="robots">`, lower-cased, if present.
    pub robots_meta: Option<String>,
    /// The `<title>` text, trimmed.
    pub title: Option<String>,
    /// Simhash of the visible text (see [`crate::dedup::simhash`]), if the
    /// page has any words.
    pub simhash: Option<u64>,
    /// The visible text's language (ISO 639-3), when detected with
    /// confidence ([`sniff::language`]).
    pub language: Option<&'static str>,
    /// The payload's type by its bytes ([`sniff::decoded_type`]), set by
    /// whoever decoded the body (the parser pool): the archive need not
    /// decode it again.
    pub mime_detected: Option<&'static str>,
    /// Set when the parse stopped at a bound before the end of the page:
    /// everything above was read from the part before the cut.
    pub truncated: Option<ParseCut>,
}

impl ParsedPage {
    /// Whether meta robots forbids following links (`nofollow` or `none`).
    pub fn nofollow(&self) -> bool {
        forbids_following(self.robots_meta.as_deref())
    }
}

/// Whether comma-separated robots directives include `nofollow` or `none`.
pub fn forbids_following(directives: Option<&str>) -> bool {
    directives.is_some_and(|m| {
        m.split(',')
            .map(str::trim)
            .any(|d| d == "nofollow" || d == "none")
    })
}

/// Directive names of the robots meta tag and `X-Robots-Tag`; a
/// `name:` prefix that is not one of them names a crawler.
const DIRECTIVES: &[&str] = &[
    "all",
    "noindex",
    "nofollow",
    "none",
    "noarchive",
    "nosnippet",
    "notranslate",
    "noimageindex",
    "unavailable_after",
    "max-snippet",
    "max-image-preview",
    "max-video-preview",
    "indexifembedded",
];

/// The directives of `X-Robots-Tag` header values that apply to a crawler
/// called `token`: those without a crawler prefix and those prefixed with
/// `token:` (case-insensitive), lower-cased and comma-joined.
pub fn x_robots_tag<'a>(values: impl IntoIterator<Item = &'a str>, token: &str) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    for value in values {
        let value = value.trim();
        let body = match value.split_once(':') {
            Some((name, rest))
                if !DIRECTIVES.contains(&name.trim().to_ascii_lowercase().as_str()) =>
            {
                if !name.trim().eq_ignore_ascii_case(token) {
                    continue;
                }
                rest
            }
            _ => value,
        };
        out.extend(
            body.split(',')
                .map(|d| d.trim().to_ascii_lowercase())
                .filter(|d| !d.is_empty()),
        );
    }
    (!out.is_empty()).then(|| out.join(", "))
}

/// The simhash of an HTML document's visible text as the crawl records it
/// for the page (parsed within the default limits), or `None` if it has no
/// words.
pub fn page_simhash(html: &str) -> Option<u64> {
    let page_url = Url::parse("http://page.invalid/").expect("a valid URL");
    parse_html(html, &page_url, default_limits()).simhash
}

/// The limits of the embedded default configuration.
fn default_limits() -> &'static ParseLimits {
    static LIMITS: OnceLock<ParseLimits> = OnceLock::new();
    LIMITS.get_or_init(|| ParseLimits::from(&crate::config::Config::defaults().parse))
}

/// A page's robots directives: its meta tag's, then its `X-Robots-Tag`
/// header's, comma-joined.
pub fn robots_directives(meta: Option<&str>, header: Option<&str>) -> Option<String> {
    match (meta, header) {
        (Some(m), Some(h)) => Some(format!("{m}, {h}")),
        (m, h) => m.or(h).map(str::to_owned),
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char
/// boundary: how much of a huge page is parsed.
pub fn prefix_at_char_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The text a reader sees, in document order, separated by spaces.
pub fn visible_text(doc: &Html) -> String {
    read::walk(doc).text
}

/// Parses `html` fetched from `page_url` within `limits`, with the reader
/// `limits.engine` names.
pub fn parse_html(html: &str, page_url: &Url, limits: &ParseLimits) -> ParsedPage {
    parse_html_timed(html, page_url, limits, &Stopwatch::start())
}

/// [`parse_html`] with the parse's time read from `clock`.
pub fn parse_html_timed(
    html: &str,
    page_url: &Url,
    limits: &ParseLimits,
    clock: &dyn ParseClock,
) -> ParsedPage {
    match limits.engine {
        ParseEngine::Stream => stream::parse(html, page_url, limits, clock),
        ParseEngine::Tree => {
            let (doc, cut) = bounded::parse_document(html, limits, clock);
            ParsedPage {
                truncated: cut,
                ..resolve(
                    read::walk(&doc),
                    page_url,
                    limits.max_links,
                    limits.detect_language,
                )
            }
        }
    }
}

/// What the crawl needs from the DOM of a page fetched from `page_url`,
/// keeping at most `max_links` links (one walk of the tree: [`read`]);
/// no language ([`parse_html`] detects it when its limits ask).
pub fn read_page(doc: &Html, page_url: &Url, max_links: usize) -> ParsedPage {
    resolve(read::walk(doc), page_url, max_links, false)
}

/// What either reader found, resolved against the page's base (its first
/// `<base href>`, else `page_url`), keeping at most `max_links` links;
/// with `detect_language`, its text's language too.
fn resolve(
    found: read::Found<'_>,
    page_url: &Url,
    max_links: usize,
    detect_language: bool,
) -> ParsedPage {
    let base = found
        .base
        .and_then(|href| page_url.join(href.trim()).ok())
        .unwrap_or_else(|| page_url.clone());
    let mut page = ParsedPage::default();
    // The cap counts distinct targets: a page's fragments and repeats of
    // one URL are one link (the SeenSet would merge them anyway), so a
    // page of many anchors into few pages keeps all of them.
    let mut distinct = std::collections::HashSet::new();
    for href in found.links {
        let Ok(mut url) = base.join(href.trim()) else {
            continue;
        };
        url.set_fragment(None);
        if distinct.contains(url.as_str()) {
            continue;
        }
        distinct.insert(url.as_str().to_owned());
        if page.links.len() < max_links {
            page.links.push(url);
        } else {
            page.links_dropped += 1;
        }
    }
    page.canonical = found.canonical.and_then(|href| base.join(href.trim()).ok());
    page.robots_meta = found
        .robots_meta
        .flatten()
        .map(|c| c.trim().to_ascii_lowercase());
    page.title = found
        .title
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
    page.simhash = crate::dedup::simhash(&found.text);
    if detect_language {
        page.language = sniff::language(&found.text);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_links: usize) -> ParseLimits {
        ParseLimits {
            max_links,
            ..default_limits().clone()
        }
    }

    #[test]
    fn the_language_is_detected_only_when_asked_by_either_reader() {
        let html = "<html><body><p>The quick brown fox jumps over the lazy dog while \
                    the farmer watches from the porch and the children play.</p></body></html>";
        let url = Url::parse("http://a.test/").unwrap();
        for engine in [ParseEngine::Stream, ParseEngine::Tree] {
            let off = ParseLimits {
                engine,
                ..limits(10)
            };
            assert_eq!(parse_html(html, &url, &off).language, None);
            let on = ParseLimits {
                detect_language: true,
                ..off
            };
            assert_eq!(
                parse_html(html, &url, &on).language,
                Some("eng"),
                "{engine:?}"
            );
        }
    }

    fn page(html: &str) -> ParsedPage {
        parse_html(
            html,
            &Url::parse("http://a.test/dir/page.html").unwrap(),
            &limits(100),
        )
    }

    #[test]
    fn resolves_links_against_the_page_and_base() {
        let p =
            page(r#"<a href="x.html">x</a><a href="/y">y</a><a href="http://b.test/z#f">z</a>"#);
        let links: Vec<_> = p.links.iter().map(Url::as_str).collect();
        assert_eq!(
            links,
            [
                "http://a.test/dir/x.html",
                "http://a.test/y",
                "http://b.test/z"
            ]
        );
        let p = page(r#"<head><base href="http://c.test/base/"></head><a href="x">x</a>"#);
        assert_eq!(p.links[0].as_str(), "http://c.test/base/x");
    }

    #[test]
    fn the_link_cap_counts_distinct_targets_fragments_and_repeats_merged() {
        let url = Url::parse("http://a.test/").unwrap();
        // A table of contents: 60 anchors into 3 pages.
        let toc: String = (0..60)
            .map(|i| format!(r#"<a href="/p{}.html#s{i}">s</a>"#, i % 3))
            .collect();
        for engine in [ParseEngine::Stream, ParseEngine::Tree] {
            let capped = |max_links| ParseLimits {
                engine,
                ..limits(max_links)
            };
            let p = parse_html(&toc, &url, &capped(3));
            let links: Vec<_> = p.links.iter().map(Url::as_str).collect();
            assert_eq!(
                links,
                [
                    "http://a.test/p0.html",
                    "http://a.test/p1.html",
                    "http://a.test/p2.html"
                ],
                "{engine:?}"
            );
            assert_eq!(p.links_dropped, 0, "{engine:?}");
            // Over the cap, each distinct target dropped counts once.
            let p = parse_html(&toc, &url, &capped(1));
            assert_eq!(p.links.len(), 1, "{engine:?}");
            assert_eq!(p.links_dropped, 2, "{engine:?}");
        }
    }

    #[test]
    fn reads_canonical_meta_robots_title_and_nofollow() {
        let p = page(
            r#"<html><head><title> T </title><link rel="canonical" href="/c">
            <meta name="ROBOTS" content="NoIndex, NoFollow"></head>
            <body><a rel="nofollow" href="/skip">s</a><a href="/keep">k</a></body></html>"#,
        );
        assert_eq!(p.title.as_deref(), Some("T"));
        assert_eq!(p.canonical.as_ref().unwrap().as_str(), "http://a.test/c");
        assert_eq!(p.robots_meta.as_deref(), Some("noindex, nofollow"));
        assert!(p.nofollow());
        assert_eq!(p.links.len(), 1);
    }

    #[test]
    fn visible_text_skips_head_scripts_and_styles() {
        let doc = Html::parse_document(
            "<html><head><title>T</title><style>p{}</style></head><body><p>one <b>two</b></p>\
             <script>var x;</script><noscript>n</noscript><p>three</p></body></html>",
        );
        let text = visible_text(&doc);
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(words, ["one", "two", "three"]);
        let words = "one two three four five six seven eight nine ten eleven";
        assert_eq!(
            page(&format!("<p>{words}</p><script>var x;</script>")).simhash,
            crate::dedup::simhash(words)
        );
        assert!(crate::dedup::simhash(words).is_some());
        assert_eq!(page("<script>x</script>").simhash, None);
    }

    #[test]
    fn huge_pages_are_cut_on_a_char_boundary() {
        assert_eq!(prefix_at_char_boundary("abc", 10), "abc");
        assert_eq!(prefix_at_char_boundary("abcdef", 3), "abc");
        // "é" is two bytes: a cut inside it backs off to before it.
        assert_eq!(prefix_at_char_boundary("aé", 2), "a");
        assert_eq!(prefix_at_char_boundary("aé", 3), "aé");
    }

    #[test]
    fn x_robots_tag_applies_to_everyone_or_to_us() {
        let tags = [
            "noindex",
            "trawl: NoFollow",
            "otherbot: noarchive",
            "unavailable_after: 1 Jan 2030",
        ];
        assert_eq!(
            x_robots_tag(tags, "trawl").as_deref(),
            Some("noindex, nofollow, unavailable_after: 1 jan 2030")
        );
        assert!(forbids_following(
            x_robots_tag(["none"], "trawl").as_deref()
        ));
        assert!(!forbids_following(
            x_robots_tag(["otherbot: none"], "trawl").as_deref()
        ));
        assert_eq!(x_robots_tag([], "trawl"), None);
    }

    #[test]
    fn malformed_html_and_bad_hrefs_do_not_fail() {
        let p = page("<a href='http://[::1'>bad</a><a href=ok.html>ok<div><p></a></table>");
        // The unresolvable href is skipped; the adoption agency may clone
        // the open <a> into the misnested block, as browsers do.
        assert!(!p.links.is_empty());
        assert!(p
            .links
            .iter()
            .all(|l| l.as_str() == "http://a.test/dir/ok.html"));
        let many: String = (0..10).map(|i| format!("<a href=/l{i}>l</a>")).collect();
        let p = parse_html(&many, &Url::parse("http://a.test/").unwrap(), &limits(3));
        assert_eq!((p.links.len(), p.links_dropped), (3, 7));
    }
}

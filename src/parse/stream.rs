//! Reading a page from html5ever's tokenizer alone, without its tree
//! builder: the default reader (`[parse] engine = "stream"`).
//!
//! The tree reader ([`super::bounded`], then [`super::read`]) builds the
//! DOM a browser would and walks it. On the synthetic web's 15 KB pages
//! the tree builder was about two fifths of a page's parse, and parsing a
//! fifth of the crawl's CPU on the side-by-side bench. The crawl needs no
//! tree: links, `<base>`, canonical, meta robots, title and the visible
//! text all come from the tags and the text in document order. This reader
//! takes them from the tokens as they go by, with the same tokenizer, so
//! character references and attributes decode exactly as in the tree.
//!
//! A tokenizer alone does not know when to read `<script>`, `<style>` or
//! `<title>` as raw text: a tree builder tells it. [`Reader`] does the
//! same for the HTML elements the spec switches on (script data for
//! `<script>`; RCDATA for `<title>`, `<textarea>`; RAWTEXT for `<style>`,
//! `<xmp>`, `<iframe>`, `<noembed>`, `<noframes>`, `<noscript>` with
//! scripting on, as the tree reader parses; PLAINTEXT), except inside
//! `<svg>` and `<math>`, where they are ordinary elements and CDATA
//! sections are read.
//!
//! The rules are the tree reader's (see [`super::read`]): the first
//! `<base href>`, canonical link, robots meta tag and `<title>` count;
//! `<a>`/`<area>` `href`s without `rel=nofollow`, in document order;
//! visible text is outside `<script>`, `<style>`, `<noscript>`,
//! `<template>` and the title, a space after each text run. On ordinary
//! pages both readers read the same (the tests compare them on the
//! synthetic web and on odd markup). They differ where a tree builder moves
//! or copies markup, and there this reader reads the markup as written:
//!
//! - an `<a>` the adoption agency clones (`<a href=x><div>…</a>`) is one
//!   link here, several in the tree (the seen set drops copies anyway);
//! - text a table foster-parents, or that the tree moves out of `<head>`,
//!   is read where it is written: a word of the simhash may move;
//! - text of `<xmp>`, `<iframe>`, `<noembed>` and `<noframes>` (fallback
//!   content) is not visible text here;
//! - inside `<svg>`/`<math>`, an HTML element of the spec's list (`<p>`,
//!   `<div>`, …) ends foreign content here as in a tree; but the HTML
//!   islands of foreign content (`<foreignObject>`, `<desc>`, MathML's
//!   `<mi>`, …) are read as foreign: a `<script>` there is not raw text.
//!
//! Its cost is linear in the page: there is no stack of open elements to
//! walk, so the tree reader's depth and work bounds do not apply. The size
//! cap, the attribute pre-scan (the tokenizer's duplicate-attribute check
//! is quadratic in one tag) and the time budget, checked between chunks of
//! [`super::bounded::CHUNK_BYTES`], do.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::{local_name, LocalName};
use url::Url;

use super::bounded::{chunk_end, limited_input, CutReason, ParseClock, ParseCut, ParseLimits};
use super::ParsedPage;

/// Reads `html` fetched from `page_url` within `limits`, timed by `clock`.
pub fn parse(
    html: &str,
    page_url: &Url,
    limits: &ParseLimits,
    clock: &dyn ParseClock,
) -> ParsedPage {
    parse_in_chunks(html, page_url, limits, clock, super::bounded::CHUNK_BYTES)
}

/// [`parse`] with a chosen chunk size (tests put chunk boundaries
/// everywhere).
pub(super) fn parse_in_chunks(
    html: &str,
    page_url: &Url,
    limits: &ParseLimits,
    clock: &dyn ParseClock,
    chunk_bytes: usize,
) -> ParsedPage {
    let (input, mut cut) = limited_input(html, limits);
    let tokenizer = Tokenizer::new(Reader::for_input(input), TokenizerOpts::default());
    let queue = BufferQueue::default();
    let mut fed = 0;
    while fed < input.len() {
        let end = chunk_end(input, fed, chunk_bytes);
        queue.push_back(StrTendril::from_slice(&input[fed..end]));
        // The reader never asks the tokenizer to stop for a script, so
        // a feed reads the whole queue.
        let _ = tokenizer.feed(&queue);
        fed = end;
        if clock.elapsed() > limits.time_budget {
            cut = Some(ParseCut {
                reason: CutReason::Time,
                parsed_bytes: fed,
            });
            break;
        }
    }
    tokenizer.end();
    let mut found = tokenizer.sink.found.into_inner();
    ParsedPage {
        truncated: cut,
        ..super::resolve(
            found.as_read(),
            page_url,
            limits.max_links,
            limits.detect_language,
        )
    }
}

/// The token sink: what the page says so far, and where the reader is.
#[derive(Debug, Default)]
struct Reader {
    found: RefCell<Found>,
}

/// What the tokens said, owned (a token lives only while it is handled).
#[derive(Debug, Default)]
struct Found {
    base: Option<String>,
    links: Vec<String>,
    canonical: Option<String>,
    robots_meta: Option<Option<String>>,
    title: Option<String>,
    /// The visible text, its runs separated by a space (as the tree
    /// reader's text nodes are; [`Found::as_read`] adds the last one).
    text: String,
    /// A tag or comment came after the last text: the next text starts a
    /// new run.
    run_ended: bool,
    /// Where the text goes now.
    text_to: TextTo,
    /// Open `<template>`s: their content is not the page's text.
    templates: u32,
    /// Open `<svg>` and `<math>` elements: foreign content.
    foreign: u32,
}

/// Where the characters being read belong.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum TextTo {
    /// The visible text.
    #[default]
    Page,
    /// The first `<title>`.
    Title,
    /// Nowhere: a script, a style sheet, a later title.
    Nowhere,
}

/// The most text [`Reader::for_input`] reserves room for up front.
const TEXT_RESERVE_MAX: usize = 1 << 20;

impl Reader {
    /// A reader whose text buffer has room for `input`'s text (at most
    /// its length, up to [`TEXT_RESERVE_MAX`]): grown from empty, it was
    /// reallocated and copied a dozen times a page (~0.5 % of a crawl's
    /// CPU). The buffer lives only while the page is read.
    fn for_input(input: &str) -> Self {
        let reader = Reader::default();
        reader
            .found
            .borrow_mut()
            .text
            .reserve(input.len().min(TEXT_RESERVE_MAX));
        reader
    }
}

impl TokenSink for Reader {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut found = self.found.borrow_mut();
        match token {
            Token::CharacterTokens(text) => found.characters(&text),
            Token::TagToken(tag) => return found.tag(&tag),
            Token::CommentToken(_) => found.run_ended = true,
            _ => {}
        }
        TokenSinkResult::Continue
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        // Lets the tokenizer read `<![CDATA[…]]>` inside `<svg>`/`<math>`.
        self.found.borrow().foreign > 0
    }
}

impl Found {
    fn characters(&mut self, text: &str) {
        match self.text_to {
            TextTo::Title => {
                if let Some(title) = self.title.as_mut() {
                    title.push_str(text);
                }
            }
            TextTo::Page if self.templates == 0 => {
                if self.run_ended && !self.text.is_empty() {
                    self.text.push(' ');
                }
                self.run_ended = false;
                self.text.push_str(text);
            }
            _ => {}
        }
    }

    /// A tag: what it contributes, and the tokenizer state it starts.
    fn tag(&mut self, tag: &Tag) -> TokenSinkResult<()> {
        self.run_ended = true;
        if tag.kind == TagKind::EndTag {
            self.end_tag(&tag.name);
            return TokenSinkResult::Continue;
        }
        if self.foreign > 0 && breaks_out_of_foreign_content(&tag.name) {
            // What a tree builder does at these in `<svg>`/`<math>`: it
            // closes the foreign elements and reads the tag as HTML.
            self.foreign = 0;
        }
        self.start_tag(tag);
        if self.foreign > 0 {
            // Foreign elements switch no state; an SVG `<title>` is still
            // a title, as in the tree reader.
            if tag.name == local_name!("title") && !tag.self_closing {
                self.text_to = self.title_text();
            }
            return TokenSinkResult::Continue;
        }
        let (to, result) = match tag.name {
            local_name!("script") => (TextTo::Nowhere, RawKind::ScriptData),
            local_name!("title") => (self.title_text(), RawKind::Rcdata),
            local_name!("textarea") => (TextTo::Page, RawKind::Rcdata),
            local_name!("style")
            | local_name!("noscript")
            | local_name!("xmp")
            | local_name!("iframe")
            | local_name!("noembed")
            | local_name!("noframes") => (TextTo::Nowhere, RawKind::Rawtext),
            local_name!("plaintext") => return TokenSinkResult::Plaintext,
            _ => return TokenSinkResult::Continue,
        };
        self.text_to = to;
        TokenSinkResult::RawData(result)
    }

    /// Where a `<title>`'s text goes: the first is the title.
    fn title_text(&mut self) -> TextTo {
        if self.title.is_some() {
            return TextTo::Nowhere;
        }
        self.title = Some(String::new());
        TextTo::Title
    }

    fn start_tag(&mut self, tag: &Tag) {
        let attr = |name: LocalName| attribute(tag, name);
        match tag.name {
            local_name!("a") | local_name!("area") => {
                if let Some(href) = attr(local_name!("href")) {
                    if !super::read::has_token(attr(local_name!("rel")), "nofollow", true) {
                        self.links.push(href.to_owned());
                    }
                }
            }
            local_name!("base") if self.base.is_none() => {
                self.base = attr(local_name!("href")).map(str::to_owned);
            }
            local_name!("link") if self.canonical.is_none() => {
                let html = self.foreign == 0;
                if super::read::has_token(attr(local_name!("rel")), "canonical", html) {
                    self.canonical = attr(local_name!("href")).map(str::to_owned);
                }
            }
            local_name!("meta")
                if self.robots_meta.is_none()
                    && attr(local_name!("name"))
                        .is_some_and(|n| n.eq_ignore_ascii_case("robots")) =>
            {
                self.robots_meta = Some(attr(local_name!("content")).map(str::to_owned));
            }
            local_name!("template") if !tag.self_closing => self.templates += 1,
            local_name!("svg") | local_name!("math") if !tag.self_closing => self.foreign += 1,
            _ => {}
        }
    }

    fn end_tag(&mut self, name: &LocalName) {
        // In raw text, the only end tag the tokenizer emits is the one
        // that closes it; an SVG title (not raw text) holds other
        // elements, and ends at its own end tag.
        if self.text_to != TextTo::Title || *name == local_name!("title") {
            self.text_to = TextTo::Page;
        }
        match *name {
            local_name!("template") => self.templates = self.templates.saturating_sub(1),
            local_name!("svg") | local_name!("math") => {
                self.foreign = self.foreign.saturating_sub(1)
            }
            _ => {}
        }
    }

    /// The tree reader's view of the same findings (the text and title
    /// moved out).
    fn as_read(&mut self) -> super::read::Found<'_> {
        let mut text = std::mem::take(&mut self.text);
        text.push(' ');
        super::read::Found {
            base: self.base.as_deref(),
            links: self.links.iter().map(String::as_str).collect(),
            canonical: self.canonical.as_deref(),
            robots_meta: self.robots_meta.as_ref().map(|m| m.as_deref()),
            title: self.title.take(),
            text,
        }
    }
}

/// HTML start tags that end foreign content (the HTML spec's rules for
/// parsing tokens in foreign content; `<font>` only with attributes that
/// are left out here: it stays foreign).
fn breaks_out_of_foreign_content(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("b")
            | local_name!("big")
            | local_name!("blockquote")
            | local_name!("body")
            | local_name!("br")
            | local_name!("center")
            | local_name!("code")
            | local_name!("dd")
            | local_name!("div")
            | local_name!("dl")
            | local_name!("dt")
            | local_name!("em")
            | local_name!("embed")
            | local_name!("h1")
            | local_name!("h2")
            | local_name!("h3")
            | local_name!("h4")
            | local_name!("h5")
            | local_name!("h6")
            | local_name!("head")
            | local_name!("hr")
            | local_name!("i")
            | local_name!("img")
            | local_name!("li")
            | local_name!("listing")
            | local_name!("menu")
            | local_name!("meta")
            | local_name!("nobr")
            | local_name!("ol")
            | local_name!("p")
            | local_name!("pre")
            | local_name!("ruby")
            | local_name!("s")
            | local_name!("small")
            | local_name!("span")
            | local_name!("strong")
            | local_name!("strike")
            | local_name!("sub")
            | local_name!("sup")
            | local_name!("table")
            | local_name!("tt")
            | local_name!("u")
            | local_name!("ul")
            | local_name!("var")
    )
}

/// The value of `tag`'s attribute `name` without a namespace (what a CSS
/// `[name]` selector matches; `xlink:href` is not `href`).
fn attribute(tag: &Tag, name: LocalName) -> Option<&str> {
    tag.attrs
        .iter()
        .find(|a| a.name.local == name && a.name.ns.is_empty())
        .map(|a| &*a.value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::bounded::tests::{base, limits, ordinary_pages, reference};
    use crate::parse::{ParseEngine, Stopwatch};

    fn stream_limits() -> ParseLimits {
        ParseLimits {
            engine: ParseEngine::Stream,
            ..limits()
        }
    }

    fn read(html: &str) -> ParsedPage {
        parse(html, &base(), &stream_limits(), &Stopwatch::start())
    }

    /// What the tree reader found, with the links as a set in first-seen
    /// order (the adoption agency's copies dropped, as the seen set
    /// drops them).
    fn deduped(mut page: ParsedPage) -> ParsedPage {
        let mut seen = std::collections::HashSet::new();
        page.links.retain(|l| seen.insert(l.clone()));
        page
    }

    #[test]
    fn the_synthetic_web_reads_as_in_the_tree() {
        // The generated pages (with their odd behaviours), exactly.
        for html in ordinary_pages().iter().take(144) {
            assert_eq!(read(html), reference(html), "{html}");
        }
    }

    #[test]
    fn odd_markup_gives_the_trees_links_and_fields() {
        for html in ordinary_pages().iter().skip(144) {
            let (stream, tree) = (read(html), deduped(reference(html)));
            let mut links = stream.links.clone();
            let mut seen = std::collections::HashSet::new();
            links.retain(|l| seen.insert(l.clone()));
            // The tree may move a link (foster parenting); the set is the
            // same.
            let (mut a, mut b) = (links.clone(), tree.links.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "{html}");
            assert_eq!(stream.canonical, tree.canonical, "{html}");
            assert_eq!(stream.robots_meta, tree.robots_meta, "{html}");
            assert_eq!(stream.title, tree.title, "{html}");
        }
    }

    #[test]
    fn chunk_boundaries_anywhere_read_the_same() {
        let html = &ordinary_pages()[150..].concat();
        let whole = read(html);
        for chunk in [1, 2, 3, 7, 64] {
            let page = parse_in_chunks(html, &base(), &stream_limits(), &Stopwatch::start(), chunk);
            assert_eq!(page, whole, "chunks of {chunk}");
        }
    }

    #[test]
    fn raw_text_elements_hide_their_markup() {
        let p = read(
            "<title>A &amp; B</title><script>document.write('<a href=/s>')</script>\
             <style>a { }</style><noscript><a href=/ns>n</a></noscript>\
             <textarea><a href=/ta>shown</textarea><template><p>hidden words</template>\
             <svg><style><a href=/svg-style>in svg</a></style><![CDATA[cdata words]]></svg>\
             <p>caf&eacute; <b>bold</b>-ish</p><a href=/ok>ok</a>",
        );
        let links: Vec<&str> = p.links.iter().map(|l| l.path()).collect();
        assert_eq!(links, ["/svg-style", "/ok"]);
        assert_eq!(p.title.as_deref(), Some("A & B"));
        let svg_title = "<svg><title>an <tspan>icon</tspan> title</title></svg><p>body words";
        assert_eq!(read(svg_title).title.as_deref(), Some("an icon title"));
        assert_eq!(read(svg_title).title, reference(svg_title).title);
        // The textarea's text is shown (its markup as words), SVG's CDATA
        // is text, a character reference is part of its word.
        let page = read(
            "<textarea>&lt;a href=/ta&gt;shown</textarea><svg><text>in svg</text>\
             <![CDATA[cdata words]]></svg><p>caf&eacute; <b>bold</b>-ish</p><a href=/ok>ok</a>",
        );
        let words = "a href ta shown in svg cdata words café bold ish ok";
        // A <p> in <svg> ends foreign content: the <script> after it is
        // raw text again, as in the tree.
        let broken_out = "<svg><p>out<script>s = '<a href=/in-script>'</script><a href=/ok>ok</a>";
        let links: Vec<String> = read(broken_out)
            .links
            .iter()
            .map(|l| l.path().to_owned())
            .collect();
        assert_eq!(links, ["/ok"]);
        assert_eq!(read(broken_out).links, reference(broken_out).links);
        assert!(page.simhash.is_some());
        assert_eq!(page.simhash, crate::dedup::simhash(words));
        assert!(page.simhash.is_some());
    }

    #[test]
    fn the_time_budget_and_the_attribute_scan_still_cut() {
        struct Spent;
        impl ParseClock for Spent {
            fn elapsed(&self) -> std::time::Duration {
                std::time::Duration::from_secs(3600)
            }
        }
        let html = format!(
            "<a href=/first>1</a>{}<a href=/late>2</a>",
            "x".repeat(5000)
        );
        let page = parse(&html, &base(), &stream_limits(), &Spent);
        assert_eq!(page.truncated.map(|c| c.reason), Some(CutReason::Time));
        assert_eq!(page.links.len(), 1);
        let attrs: String = (0..2000).map(|i| format!(" a{i}=x")).collect();
        let html = format!("<a href=/before>b</a><p{attrs}><a href=/after>a</a>");
        let page = read(&html);
        assert_eq!(
            page.truncated.map(|c| c.reason),
            Some(CutReason::Attributes)
        );
        let links: Vec<&str> = page.links.iter().map(|l| l.path()).collect();
        assert_eq!(links, ["/before"]);
    }

    #[test]
    fn nesting_costs_nothing_extra() {
        // The tree reader stops these at its depth bound; the stream reads
        // them whole.
        let html = format!("{}<a href=/deep>d</a>", "<div>".repeat(50_000));
        let page = read(&html);
        assert_eq!(page.truncated, None);
        assert_eq!(page.links.len(), 1);
    }
}

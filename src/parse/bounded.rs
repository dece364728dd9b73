//! Builds a page's DOM with html5ever within a bounded cost, keeping what
//! was parsed when a bound is reached.
//!
//! html5ever has no limits of its own, and some of its work grows faster
//! than the input (measured on 2 cores, release build):
//!
//! - every block start tag checks the stack of open elements for a `<p>` in
//!   scope, so N nested `<div>`s cost N²/2 steps: 20,000 take 0.95 s and
//!   200,000 (1 MB) minutes; nested `<li>`, `<dt>`, `<b id=…>` (the list of
//!   active formatting elements) and `<a><div>` behave alike;
//! - the tokenizer compares each attribute name with every earlier one of
//!   its tag: 20,000 attributes on one tag take 75 ms, 200,000 seconds;
//! - re-creating formatting elements: once `<p>` has closed 400 distinct
//!   `<b id=…>`s, each later `<p>x</p>` (8 bytes) re-creates all 400 inside
//!   it: 86 KB of such markup made 4 million elements in 0.8 s.
//!
//! Three ways to bound this were weighed. A streaming tokenizer alone
//! cannot give the same links and text as the tree (the adoption agency
//! and foster parenting move content), and is quadratic in attributes too.
//! A pre-scan that caps nesting has to re-implement implied end tags and
//! would still miss the cost of staying just under its cap (500 open
//! elements and 180,000 `<div></div>` after them cost 0.55 s) and the
//! re-created elements. So the input is fed to html5ever in chunks of
//! [`CHUNK_BYTES`], and between chunks the parse stops when it passes a
//! bound:
//!
//! - **depth**: the tree builder's open elements plus its active formatting
//!   elements (what its scope checks and "Noah's Ark" walk), read through
//!   its `trace_handles` hook, exceed `max_nesting`;
//! - **work**: the steps it has spent walking them (calls of the sink's
//!   `elem_name` and `same_node`, counted by a wrapping sink) exceed
//!   `max_tree_steps`, which bounds a page that stays just under the
//!   nesting cap; or it has created more elements than it has read bytes
//!   (a tag takes at least three bytes; ordinary pages make at most one
//!   element per 8 bytes), which bounds re-created formatting elements;
//! - **time**: the parse has run longer than `time_budget`, by an injected
//!   [`ParseClock`]: a backstop for costs none of the counts see.
//!
//! The tokenizer's attribute check happens inside one token, where no check
//! between chunks can interrupt it, so a linear scan
//! ([`super::attributes`]) first finds the first tag with more than
//! `max_attributes` attributes and only the input before it is fed.
//!
//! Feeding in chunks does not change the tree: html5ever is a streaming
//! parser (chunk boundaries inside tags, character references or CRLF are
//! handled) and scraper's sink merges adjacent text. The tests compare the
//! trees built both ways; measured by hand on 11,000 HTML files (rustdoc
//! and crate documentation, 270 MB), every page read the same (links,
//! canonical, meta robots, title, simhash) and none was cut. On the
//! synthetic web's 13 KB pages the bounds cost ~6 µs a page over one
//! html5ever call (~3% of [`super::parse_html`]), most of it the attribute
//! scan (~1 ns a byte).

use std::borrow::Cow;
use std::cell::Cell;
use std::time::{Duration, Instant};

use html5ever::interface::{ElementFlags, NodeOrText, QuirksMode, Tracer, TreeSink};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::{Attribute, QualName};
use scraper::{Html, HtmlTreeSink};

use super::attributes::first_tag_over;
use super::prefix_at_char_boundary;
use crate::config::ParseEngine;

/// Markup fed to html5ever between two checks of the bounds. Small enough
/// that one chunk past a bound costs little (~200 more nested `<div>`s:
/// ~1 ms; re-created formatting elements: 65,000 at most, ~12 ms); large
/// enough that the checks (a walk of the open elements and a clock read)
/// cost nothing measurable on ordinary pages (4 KiB and 1 MiB chunks
/// measured the same).
pub const CHUNK_BYTES: usize = 1024;

/// What one page's parse may cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseLimits {
    /// Which reader reads the page. The depth and work bounds below are
    /// the tree reader's; the streaming reader's cost is linear.
    pub engine: ParseEngine,
    /// Links kept per page; the rest are counted in `links_dropped`.
    pub max_links: usize,
    /// Bytes of HTML parsed (the tree grows with the markup).
    pub max_html_bytes: usize,
    /// Open plus active formatting elements at which the parse stops.
    pub max_nesting: usize,
    /// Attributes on one tag; the parse stops before a tag with more.
    pub max_attributes: usize,
    /// Steps the tree builder may spend walking its element stacks.
    pub max_tree_steps: u64,
    /// Time the parse may take, checked between chunks.
    pub time_budget: Duration,
    /// Detect the page's language ([`super::sniff::language`]).
    pub detect_language: bool,
}

impl From<&crate::config::ParseConfig> for ParseLimits {
    fn from(c: &crate::config::ParseConfig) -> Self {
        ParseLimits {
            engine: c.engine,
            max_links: c.max_links_per_page,
            max_html_bytes: c.max_html_bytes,
            max_nesting: c.max_nesting,
            max_attributes: c.max_attributes,
            max_tree_steps: c.max_tree_steps,
            time_budget: c.time_budget,
            detect_language: c.detect_language,
        }
    }
}

/// Why a parse stopped before the end of the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CutReason {
    /// The page is longer than `max_html_bytes`.
    Size,
    /// A tag has more than `max_attributes` attributes.
    Attributes,
    /// Elements nested deeper than `max_nesting`.
    Depth,
    /// The tree builder spent `max_tree_steps`, or created more elements
    /// than it read bytes.
    Work,
    /// The parse ran out of `time_budget`.
    Time,
}

impl CutReason {
    /// The reason's name, as in the `trawl_parse_cut_total{reason}` metric.
    pub fn as_str(self) -> &'static str {
        match self {
            CutReason::Size => "size",
            CutReason::Attributes => "attributes",
            CutReason::Depth => "depth",
            CutReason::Work => "work",
            CutReason::Time => "time",
        }
    }
}

impl std::fmt::Display for CutReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where and why a parse stopped early: what the page says before
/// `parsed_bytes` was read, nothing after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseCut {
    /// The first bound the parse reached.
    pub reason: CutReason,
    /// Bytes of the (decoded) HTML fed to the parser.
    pub parsed_bytes: usize,
}

/// The time a parse has taken so far. Injected so that tests decide when
/// the time budget runs out.
pub trait ParseClock {
    /// Time since the parse began.
    fn elapsed(&self) -> Duration;
}

/// Wall-clock time since it was started. The parse runs on a parser thread
/// of its own, so this is its CPU time unless the machine is oversubscribed;
/// the budget is a backstop set far above what any ordinary page takes.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    /// Starts timing now.
    pub fn start() -> Self {
        Stopwatch(Instant::now())
    }
}

impl ParseClock for Stopwatch {
    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Parses `html` into a DOM within `limits`, timed by `clock`. Returns the
/// tree of what was read and, if the parse stopped early, where and why.
pub fn parse_document(
    html: &str,
    limits: &ParseLimits,
    clock: &dyn ParseClock,
) -> (Html, Option<ParseCut>) {
    parse_in_chunks(html, limits, clock, CHUNK_BYTES)
}

/// [`parse_document`] with a chosen chunk size (tests use tiny ones to
/// put chunk boundaries everywhere).
pub(crate) fn parse_in_chunks(
    html: &str,
    limits: &ParseLimits,
    clock: &dyn ParseClock,
    chunk_bytes: usize,
) -> (Html, Option<ParseCut>) {
    let (input, mut cut) = limited_input(html, limits);
    let mut parser = html5ever::driver::parse_document(
        CountingSink::new(HtmlTreeSink::new(Html::new_document())),
        Default::default(),
    );
    let mut fed = 0;
    while fed < input.len() {
        let end = chunk_end(input, fed, chunk_bytes);
        parser.process(StrTendril::from_slice(&input[fed..end]));
        fed = end;
        if let Some(reason) = bound_reached(&parser, fed, limits, clock) {
            cut = Some(ParseCut {
                reason,
                parsed_bytes: fed,
            });
            break;
        }
    }
    (parser.finish(), cut)
}

/// The part of `html` the parser may read: at most `max_html_bytes`, and
/// nothing from the first tag with too many attributes on.
pub(super) fn limited_input<'a>(
    html: &'a str,
    limits: &ParseLimits,
) -> (&'a str, Option<ParseCut>) {
    let input = prefix_at_char_boundary(html, limits.max_html_bytes);
    let size_cut = (input.len() < html.len()).then_some(ParseCut {
        reason: CutReason::Size,
        parsed_bytes: input.len(),
    });
    match first_tag_over(input, limits.max_attributes) {
        Some(at) => (
            &input[..at],
            Some(ParseCut {
                reason: CutReason::Attributes,
                parsed_bytes: at,
            }),
        ),
        None => (input, size_cut),
    }
}

/// The end of the chunk starting at `start`: `chunk_bytes` on, moved
/// forward to a char boundary.
pub(super) fn chunk_end(input: &str, start: usize, chunk_bytes: usize) -> usize {
    let mut end = (start + chunk_bytes.max(1)).min(input.len());
    while !input.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// The parser of a page, with its counting sink.
type Parser = html5ever::driver::Parser<CountingSink>;

/// The first bound the parse has reached after reading `fed` bytes, if
/// any.
fn bound_reached(
    parser: &Parser,
    fed: usize,
    limits: &ParseLimits,
    clock: &dyn ParseClock,
) -> Option<CutReason> {
    let tree_builder = &parser.tokenizer.sink;
    if tree_builder.sink.overworked(fed, limits.max_tree_steps) {
        return Some(CutReason::Work);
    }
    let nesting = HandleCount::default();
    tree_builder.trace_handles(&nesting);
    if nesting.0.get() > limits.max_nesting {
        return Some(CutReason::Depth);
    }
    (clock.elapsed() > limits.time_budget).then_some(CutReason::Time)
}

/// Counts the handles the tree builder holds: its open elements, its
/// active formatting elements and a few singletons (document, head, form).
#[derive(Default)]
struct HandleCount(Cell<usize>);

impl Tracer for HandleCount {
    type Handle = <HtmlTreeSink as TreeSink>::Handle;

    fn trace_handle(&self, _: &Self::Handle) {
        self.0.set(self.0.get() + 1);
    }
}

/// scraper's sink, counting the elements created and the steps of the
/// tree builder's walks over its element stacks (each step asks the sink
/// an element's name or compares two handles). Parse errors are dropped
/// rather than collected: nothing reads them, and a hostile page can
/// produce one per byte.
struct CountingSink {
    /// The sink that builds the tree.
    inner: HtmlTreeSink,
    /// `elem_name` and `same_node` calls: the steps of stack walks.
    steps: Cell<u64>,
    /// Elements created, re-created formatting elements included.
    elements: Cell<u64>,
}

impl CountingSink {
    fn new(inner: HtmlTreeSink) -> Self {
        CountingSink {
            inner,
            steps: Cell::new(0),
            elements: Cell::new(0),
        }
    }

    fn step(&self) {
        self.steps.set(self.steps.get() + 1);
    }

    /// Whether the tree builder has done more than `fed` bytes of markup
    /// ask for: more than `max_steps` steps, or more elements than bytes (a
    /// tag takes at least three, so only re-created elements get there;
    /// one chunk of slack covers the elements a document implies, such as
    /// `html`, `head`, `body` and `tbody`).
    fn overworked(&self, fed: usize, max_steps: u64) -> bool {
        self.steps.get() > max_steps || self.elements.get() > (fed + CHUNK_BYTES) as u64
    }
}

type Handle = <HtmlTreeSink as TreeSink>::Handle;

/// Every method but `parse_error` (dropped) and the three counted ones
/// forwards to scraper's sink unchanged, so the tree is scraper's.
impl TreeSink for CountingSink {
    type Handle = Handle;
    type Output = Html;
    type ElemName<'a> = <HtmlTreeSink as TreeSink>::ElemName<'a>;

    fn finish(self) -> Html {
        self.inner.finish()
    }

    fn parse_error(&self, _msg: Cow<'static, str>) {}

    fn get_document(&self) -> Handle {
        self.inner.get_document()
    }

    fn elem_name<'a>(&'a self, target: &'a Handle) -> Self::ElemName<'a> {
        self.step();
        self.inner.elem_name(target)
    }

    fn same_node(&self, x: &Handle, y: &Handle) -> bool {
        self.step();
        self.inner.same_node(x, y)
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Handle {
        self.elements.set(self.elements.get() + 1);
        self.inner.create_element(name, attrs, flags)
    }

    fn create_comment(&self, text: StrTendril) -> Handle {
        self.inner.create_comment(text)
    }

    fn create_pi(&self, target: StrTendril, data: StrTendril) -> Handle {
        self.inner.create_pi(target, data)
    }

    fn append(&self, parent: &Handle, child: NodeOrText<Handle>) {
        self.inner.append(parent, child)
    }

    fn append_based_on_parent_node(
        &self,
        element: &Handle,
        prev_element: &Handle,
        child: NodeOrText<Handle>,
    ) {
        self.inner
            .append_based_on_parent_node(element, prev_element, child)
    }

    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        self.inner
            .append_doctype_to_document(name, public_id, system_id)
    }

    fn mark_script_already_started(&self, node: &Handle) {
        self.inner.mark_script_already_started(node)
    }

    fn pop(&self, node: &Handle) {
        self.inner.pop(node)
    }

    fn get_template_contents(&self, target: &Handle) -> Handle {
        self.inner.get_template_contents(target)
    }

    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.inner.set_quirks_mode(mode)
    }

    fn append_before_sibling(&self, sibling: &Handle, new_node: NodeOrText<Handle>) {
        self.inner.append_before_sibling(sibling, new_node)
    }

    fn add_attrs_if_missing(&self, target: &Handle, attrs: Vec<Attribute>) {
        self.inner.add_attrs_if_missing(target, attrs)
    }

    fn associate_with_form(
        &self,
        target: &Handle,
        form: &Handle,
        nodes: (&Handle, Option<&Handle>),
    ) {
        self.inner.associate_with_form(target, form, nodes)
    }

    fn remove_from_parent(&self, target: &Handle) {
        self.inner.remove_from_parent(target)
    }

    fn reparent_children(&self, node: &Handle, new_parent: &Handle) {
        self.inner.reparent_children(node, new_parent)
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &Handle) -> bool {
        self.inner
            .is_mathml_annotation_xml_integration_point(handle)
    }

    fn set_current_line(&self, line_number: u64) {
        self.inner.set_current_line(line_number)
    }

    fn allow_declarative_shadow_roots(&self, intended_parent: &Handle) -> bool {
        self.inner.allow_declarative_shadow_roots(intended_parent)
    }

    fn attach_declarative_shadow(
        &self,
        location: &Handle,
        template: &Handle,
        attrs: &[Attribute],
    ) -> bool {
        self.inner
            .attach_declarative_shadow(location, template, attrs)
    }

    fn maybe_clone_an_option_into_selectedcontent(&self, option: &Handle) {
        self.inner
            .maybe_clone_an_option_into_selectedcontent(option)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::parse::{parse_html_timed, read_page, ParsedPage};
    use crate::testweb::{SyntheticWeb, WebSpec};
    use url::Url;

    /// The embedded defaults, with `max_links` raised so no test page
    /// drops any.
    pub(in crate::parse) fn limits() -> ParseLimits {
        ParseLimits {
            engine: ParseEngine::Tree,
            max_links: 1_000_000,
            ..ParseLimits::from(&crate::config::Config::defaults().parse)
        }
    }

    pub(in crate::parse) fn base() -> Url {
        Url::parse("http://a.test/dir/page.html").unwrap()
    }

    /// A clock that never runs out.
    struct Frozen;

    impl ParseClock for Frozen {
        fn elapsed(&self) -> Duration {
            Duration::ZERO
        }
    }

    /// A clock that advances `tick` each time it is read (once per chunk).
    struct Ticking {
        tick: Duration,
        reads: Cell<u32>,
    }

    impl ParseClock for Ticking {
        fn elapsed(&self) -> Duration {
            self.reads.set(self.reads.get() + 1);
            self.tick * self.reads.get()
        }
    }

    fn bounded(html: &str, limits: &ParseLimits) -> ParsedPage {
        parse_html_timed(html, &base(), limits, &Frozen)
    }

    /// What the crawl read from a page before parses were bounded: one
    /// call of html5ever over the whole input.
    pub(in crate::parse) fn reference(html: &str) -> ParsedPage {
        read_page(&Html::parse_document(html), &base(), limits().max_links)
    }

    /// Ordinary pages: the synthetic web's, and hand-written ones with the
    /// constructs whose parse is most sensitive to where input breaks
    /// (character references, CRLF, scripts, comments, misnested and
    /// unclosed tags, tables, foreign content, non-ASCII text).
    pub(in crate::parse) fn ordinary_pages() -> Vec<String> {
        let web = SyntheticWeb::new(WebSpec {
            hosts: 12,
            pages_per_host: 12,
            seed: 3,
            behaviours: true,
        });
        let mut pages: Vec<String> = (0..12)
            .flat_map(|host| (0..12).map(move |id| (host, id)))
            .map(|(host, id)| web.render(host, id, 8080))
            .collect();
        let handwritten = [
            "<!DOCTYPE html>\r\n<html><head><title>T &amp; T\u{e9}</title>\r\n\
             <link rel=\"canonical\" href=\"/canon?a=1&amp;b=2\">\
             <meta name=\"robots\" content=\"noindex\"><base href=\"/base/\"></head>\r\n\
             <body><p>caf\u{e9} &eacute;t\u{e9} &#x41;&#65;&notin &copy; 2026</p>\
             <a href=\"x.html?q=1&amp;r=2\">x</a><a href=\"/y\" rel=\"nofollow\">y</a></body></html>",
            "<html><body><table><tr><td>one<td>two<a href=/t1>t1</a><tr><td>three</table>\
             <ul><li>a<li>b<a href=/li>li</a><li>c</ul><dl><dt>t<dd>d<dt>u</dl>\
             <p>para<p>para two<div>block</div><select><option>o1<option>o2</select></body></html>",
            "<p><b>bold <i>both</b> italic</i> plain</p><a href=/a1>one<p>inside</a>\
             <b><p>adopted</b></p><table><a href=/foster>fostered</a><tr><td>cell</td></tr></table>",
            "<head><script>var s = '</div><a href=/not-a-link>'; if (a<b && c>d) {}</script>\
             <style>a > b { color: red }</style><noscript><a href=/ns>ns</a></noscript></head>\
             <body><!-- <a href=/commented>c</a> --><textarea><a href=/ta></textarea>\
             <template><a href=/tpl>tpl</a></template><a href=/after-template>ok</a></body>",
            "<body><svg viewBox=\"0 0 10 10\"><title>icon</title><a href=\"/svg-link\"><path d=\"M0 0\"/></a>\
             </svg><math><mi>x</mi></math><p>\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{6587}\u{7ae0}\u{3067}\u{3059} \
             \u{1f600} emoji</p><a href='/\u{e4}\u{f6}\u{fc}'>umlauts</a><img src=x alt='a > b'></body>",
            "<html><body><div><div><span>unclosed<div><p>many<a href=/deep>deep</a></body></html><p>after end",
        ];
        pages.extend(handwritten.iter().map(|p| p.to_string()));
        // A long page of the kind above, crossing many chunk boundaries.
        pages.push(handwritten.concat().repeat(40));
        pages
    }

    #[test]
    fn ordinary_pages_read_as_they_did_before_the_bounds() {
        for html in ordinary_pages() {
            let page = bounded(&html, &limits());
            assert_eq!(page.truncated, None);
            assert_eq!(page, reference(&html), "{html}");
        }
    }

    #[test]
    fn chunk_boundaries_anywhere_build_the_same_tree() {
        for html in ordinary_pages().iter().skip(140) {
            let whole = Html::parse_document(html).html();
            for chunk in [1, 2, 3, 7, 61, CHUNK_BYTES] {
                let (doc, cut) = parse_in_chunks(html, &limits(), &Frozen, chunk);
                assert_eq!(cut, None);
                assert_eq!(doc.html(), whole, "chunk {chunk}: {html}");
            }
        }
    }

    fn nested_divs(n: usize) -> String {
        format!(
            "<html><head><link rel=canonical href=/canon></head><body>\
             <p>some words before the nesting starts, enough for a simhash</p>\
             <a href=/before>b</a>{}\
             <a href=/after>a</a></body></html>",
            "<div>".repeat(n)
        )
    }

    fn link_paths(page: &ParsedPage) -> Vec<&str> {
        page.links.iter().map(Url::path).collect()
    }

    #[test]
    fn deep_nesting_is_cut_keeping_what_came_before() {
        for n in [50_000, 200_000] {
            let html = nested_divs(n);
            let page = bounded(&html, &limits());
            let cut = page.truncated.expect("cut");
            assert_eq!(cut.reason, CutReason::Depth);
            // Cut within a chunk of passing the cap, not at the end.
            let first_div = html.find("<div>").unwrap();
            let cap = first_div + limits().max_nesting * "<div>".len();
            assert!(cut.parsed_bytes > first_div && cut.parsed_bytes < cap + CHUNK_BYTES);
            assert_eq!(link_paths(&page), ["/before"]);
            assert_eq!(page.canonical.as_ref().map(Url::path), Some("/canon"));
            assert_eq!(page.simhash, reference(&html[..first_div]).simhash);
            assert!(page.simhash.is_some());
        }
    }

    #[test]
    fn nesting_through_formatting_elements_is_cut_too() {
        // `<b id=N>` grows the list of active formatting elements as well
        // as the stack; `<ul><li>` and `<a><div>` (the adoption agency)
        // nest too.
        let b_tags: String = (0..5_000).map(|i| format!("<b id={i}>")).collect();
        for html in [
            format!("<a href=/before>b</a>{b_tags}<a href=/after>a</a>"),
            format!(
                "<a href=/before>b</a>{}<a href=/after>a</a>",
                "<ul><li>".repeat(20_000)
            ),
            format!(
                "<a href=/before>b</a>{}<a href=/after>a</a>",
                "<a href=/x><div>".repeat(20_000)
            ),
        ] {
            let page = bounded(&html, &limits());
            assert_eq!(page.truncated.map(|c| c.reason), Some(CutReason::Depth));
            assert_eq!(link_paths(&page)[0], "/before");
            assert!(!link_paths(&page).contains(&"/after"));
        }
    }

    fn attributes(n: usize) -> String {
        (0..n).map(|i| format!(" a{i}")).collect()
    }

    #[test]
    fn a_tag_with_too_many_attributes_is_not_read() {
        let html = format!(
            "<title>t</title><a href=/before>b</a><p>text</p><div{}><a href=/after>a</a></div>",
            attributes(200_000)
        );
        let page = bounded(&html, &limits());
        assert_eq!(
            page.truncated,
            Some(ParseCut {
                reason: CutReason::Attributes,
                parsed_bytes: html.find("<div").unwrap(),
            })
        );
        assert_eq!(link_paths(&page), ["/before"]);
        assert_eq!(page.title.as_deref(), Some("t"));
        // Up to the limit, the tag is read.
        let html = format!(
            "<div{}><a href=/in>x</a></div>",
            attributes(limits().max_attributes)
        );
        let page = bounded(&html, &limits());
        assert_eq!((page.truncated, link_paths(&page)), (None, vec!["/in"]));
    }

    #[test]
    fn staying_just_under_the_nesting_cap_runs_out_of_work() {
        let limits = ParseLimits {
            max_tree_steps: 2_000_000,
            ..limits()
        };
        let html = format!(
            "<a href=/before>b</a>{}{}<a href=/after>a</a>",
            "<div>".repeat(limits.max_nesting - 10),
            "<div></div>".repeat(20_000)
        );
        let page = bounded(&html, &limits);
        let cut = page.truncated.expect("cut");
        assert_eq!(cut.reason, CutReason::Work);
        // Each <div></div> there walks the ~500 open elements about twice:
        // 2 million steps last ~1,800 of them (20 KB).
        let first = html.find("<div></div>").unwrap();
        assert!(
            cut.parsed_bytes > first + 10_000 && cut.parsed_bytes < first + 40_000,
            "{cut:?} {first}"
        );
        assert_eq!(link_paths(&page), ["/before"]);
    }

    #[test]
    fn formatting_elements_recreated_over_and_over_run_out_of_work() {
        // `</p>` closes ~250 <b>s that stay active (open and active, they
        // count twice towards the nesting cap), so each `<p>x</p>`
        // re-creates them all. Every chunk ends after a `</p>`, where the
        // stack is shallow again: only the count of elements sees it.
        let b_tags: String = (0..(limits().max_nesting - 10) / 2)
            .map(|i| format!("<b id={i}>"))
            .collect();
        let head = format!("<a href=/before>b</a><p>{b_tags}</p><!---->");
        let pad = CHUNK_BYTES - head.len() % CHUNK_BYTES;
        let html = format!(
            "{}{}<a href=/after>a</a>",
            head.replace("<!---->", &format!("<!--{}-->", " ".repeat(pad))),
            "<p>x</p>".repeat(10_000)
        );
        assert_eq!(html.find("<p>x").unwrap() % CHUNK_BYTES, 0);
        let page = bounded(&html, &limits());
        assert_eq!(
            page.truncated,
            Some(ParseCut {
                reason: CutReason::Work,
                parsed_bytes: html.find("<p>x").unwrap() + CHUNK_BYTES,
            })
        );
        assert_eq!(link_paths(&page), ["/before"]);
    }

    #[test]
    fn the_time_budget_cuts_between_chunks() {
        // An ordinary page, but the clock says each chunk took 10 ms.
        let html: String = (0..2_000)
            .map(|i| format!("<p>paragraph {i} <a href=/l/{i}>link {i}</a></p>\n"))
            .collect();
        let clock = Ticking {
            tick: Duration::from_millis(10),
            reads: Cell::new(0),
        };
        let limits = ParseLimits {
            time_budget: Duration::from_millis(35),
            ..limits()
        };
        let page = parse_html_timed(&html, &base(), &limits, &clock);
        assert_eq!(
            page.truncated,
            Some(ParseCut {
                reason: CutReason::Time,
                parsed_bytes: 4 * CHUNK_BYTES,
            })
        );
        // Exactly the links whose start tag is inside the first four chunks.
        let read = &html[..4 * CHUNK_BYTES];
        let complete = (0..)
            .take_while(|i| read.contains(&format!("<a href=/l/{i}>")))
            .count();
        assert!(complete > 10);
        assert_eq!(page.links.len(), complete);
        assert_eq!(
            page.links[complete - 1].path(),
            format!("/l/{}", complete - 1)
        );
    }

    #[test]
    fn the_size_cap_cuts_on_a_char_boundary() {
        let html = "<a href=/one>1</a>\u{e9}\u{e9}<a href=/two>2</a>";
        let at = html.find('\u{e9}').unwrap() + 3;
        let limits = ParseLimits {
            max_html_bytes: at,
            ..limits()
        };
        let page = bounded(html, &limits);
        assert_eq!(
            page.truncated,
            Some(ParseCut {
                reason: CutReason::Size,
                parsed_bytes: at - 1,
            })
        );
        assert_eq!(link_paths(&page), ["/one"]);
    }
}

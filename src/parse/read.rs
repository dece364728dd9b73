//! Reading what the crawl needs from a page's DOM in one walk of the tree.
//!
//! The first version asked scraper five CSS selectors (`base[href]`,
//! `a[href], area[href]`, `link[rel~=canonical][href]`, `meta[name]`,
//! `title`) and walked the tree once more for the visible text: six walks,
//! and selector matching on every element for each. This walk visits every
//! node once and matches element names directly, with the selectors'
//! meaning kept exactly (the tests compare both on ordinary and odd
//! markup):
//!
//! - names match in any namespace (a CSS type selector without a default
//!   namespace does: an SVG `<a href>` is a link, an SVG `<title>` a
//!   title);
//! - attributes are the ones without a namespace (`[href]` does not match
//!   `xlink:href`);
//! - `rel~=canonical` is one of `rel`'s whitespace-separated tokens,
//!   compared ASCII case-insensitively on HTML elements (`rel` is in the
//!   HTML list of attributes matched that way) and exactly on others;
//! - the first `<title>`, the first `<base href>`, the first canonical
//!   link and the first `<meta name=robots>` (any case) count, even when
//!   that one is empty or has no `content`.

use html5ever::ns;
use scraper::{ElementRef, Html, Node};

/// Elements whose text is not shown (or not the page's content).
const INVISIBLE: &[&str] = &["head", "script", "style", "noscript", "template"];

/// What one walk of a page's tree found, borrowed from the tree.
#[derive(Debug, Default)]
pub(super) struct Found<'a> {
    /// The first `<base href>`'s `href`.
    pub base: Option<&'a str>,
    /// `href`s of `<a>` and `<area>` without `rel=nofollow`, in document
    /// order.
    pub links: Vec<&'a str>,
    /// The first canonical link's `href`.
    pub canonical: Option<&'a str>,
    /// The first robots meta tag's `content` (`Some(None)`: it has none).
    pub robots_meta: Option<Option<&'a str>>,
    /// The first `<title>`'s text, as it is (`Some("")`: empty).
    pub title: Option<String>,
    /// The visible text, each text node followed by a space.
    pub text: String,
}

/// Walks `doc` once, in document order.
pub(super) fn walk(doc: &Html) -> Found<'_> {
    let mut found = Found::default();
    // Pre-order with an explicit stack; the flag says whether the node is
    // inside an invisible element (its text is not shown, but its links
    // and head elements still count).
    let mut stack = vec![(doc.tree.root(), false)];
    while let Some((node, hidden)) = stack.pop() {
        let mut hide_children = hidden;
        match node.value() {
            Node::Text(text) if !hidden => {
                found.text.push_str(text);
                found.text.push(' ');
            }
            Node::Element(_) => {
                let element = ElementRef::wrap(node).expect("an element node");
                found.element(element);
                hide_children = hidden || INVISIBLE.contains(&element.value().name());
            }
            _ => {}
        }
        stack.extend(node.children().rev().map(|child| (child, hide_children)));
    }
    found
}

impl<'a> Found<'a> {
    /// Takes what `element` contributes.
    fn element(&mut self, element: ElementRef<'a>) {
        let e = element.value();
        match e.name() {
            "a" | "area" => {
                if let Some(href) = e.attr("href") {
                    if !has_token(e.attr("rel"), "nofollow", true) {
                        self.links.push(href);
                    }
                }
            }
            "base" if self.base.is_none() => self.base = e.attr("href"),
            "link" if self.canonical.is_none() => {
                let html = e.name.ns == ns!(html);
                if has_token(e.attr("rel"), "canonical", html) {
                    self.canonical = e.attr("href");
                }
            }
            "meta"
                if self.robots_meta.is_none()
                    && e.attr("name")
                        .is_some_and(|n| n.eq_ignore_ascii_case("robots")) =>
            {
                self.robots_meta = Some(e.attr("content"));
            }
            "title" if self.title.is_none() => self.title = Some(element.text().collect()),
            _ => {}
        }
    }
}

/// Whether the whitespace-separated `tokens` include `token`.
pub(super) fn has_token(tokens: Option<&str>, token: &str, ignore_case: bool) -> bool {
    tokens.is_some_and(|t| {
        t.split_ascii_whitespace().any(|t| {
            if ignore_case {
                t.eq_ignore_ascii_case(token)
            } else {
                t == token
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use scraper::Selector;
    use url::Url;

    use super::*;
    use crate::parse::ParsedPage;

    /// The selector-based reading this walk replaced, kept as the reference
    /// it must agree with.
    fn by_selectors(doc: &Html, page_url: &Url, max_links: usize) -> ParsedPage {
        let s = |css| Selector::parse(css).unwrap();
        let base = doc
            .select(&s("base[href]"))
            .next()
            .and_then(|b| b.value().attr("href"))
            .and_then(|href| page_url.join(href.trim()).ok())
            .unwrap_or_else(|| page_url.clone());
        let mut page = ParsedPage::default();
        let mut distinct = std::collections::HashSet::new();
        for a in doc.select(&s("a[href], area[href]")) {
            let href = a.value().attr("href").unwrap();
            let nofollow = a.value().attr("rel").is_some_and(|r| {
                r.split_ascii_whitespace()
                    .any(|t| t.eq_ignore_ascii_case("nofollow"))
            });
            if nofollow {
                continue;
            }
            if let Ok(mut url) = base.join(href.trim()) {
                url.set_fragment(None);
                if !distinct.insert(url.to_string()) {
                    continue;
                }
                if page.links.len() < max_links {
                    page.links.push(url);
                } else {
                    page.links_dropped += 1;
                }
            }
        }
        page.canonical = doc
            .select(&s("link[rel~=canonical][href]"))
            .next()
            .and_then(|l| l.value().attr("href"))
            .and_then(|href| base.join(href.trim()).ok());
        page.robots_meta = doc
            .select(&s("meta[name]"))
            .find(|m| {
                m.value()
                    .attr("name")
                    .is_some_and(|n| n.eq_ignore_ascii_case("robots"))
            })
            .and_then(|m| m.value().attr("content"))
            .map(|c| c.trim().to_ascii_lowercase());
        page.title = doc
            .select(&s("title"))
            .next()
            .map(|t| t.text().collect::<String>().trim().to_owned())
            .filter(|t| !t.is_empty());
        page.simhash = crate::dedup::simhash(&reference_text(doc));
        page
    }

    fn reference_text(doc: &Html) -> String {
        let mut out = String::new();
        let mut stack = vec![doc.tree.root()];
        while let Some(node) = stack.pop() {
            match node.value() {
                Node::Text(text) => {
                    out.push_str(text);
                    out.push(' ');
                }
                Node::Element(e) if INVISIBLE.contains(&e.name()) => continue,
                _ => {}
            }
            stack.extend(node.children().rev());
        }
        out
    }

    fn agree(html: &str) {
        let url = Url::parse("http://a.test/dir/page.html").unwrap();
        let doc = Html::parse_document(html);
        for max_links in [0, 2, 1000] {
            assert_eq!(
                crate::parse::read_page(&doc, &url, max_links),
                by_selectors(&doc, &url, max_links),
                "max_links {max_links}: {html}"
            );
        }
        assert_eq!(walk(&doc).text, reference_text(&doc), "{html}");
    }

    #[test]
    fn one_walk_reads_what_the_selectors_read() {
        let words = "one two three four five six seven eight nine ten eleven twelve";
        for html in [
            "",
            "<p>no links at all</p>",
            &format!("<title> T </title><p>{words}</p><a href=x>x</a><a href=y rel=NoFollow>y</a>"),
            // Firsts: the first base, canonical, robots meta and title win,
            // even empty or without content.
            "<base href=/b1/><base href=/b2/><a href=x>x</a>",
            "<base><base href=http://c.test/><a href=x>x</a>",
            "<title></title><title>second</title>",
            "<meta name=robots><meta name=ROBOTS content=noindex>",
            "<meta name=description content=d><meta name=Robots content=' NoFollow '>",
            "<link rel=stylesheet href=s.css><link rel='alternate CANONICAL' href=/c1>\
             <link rel=canonical href=/c2>",
            "<link rel=canonical><link rel=canonical href=/c>",
            // Head elements in the body, links in invisible elements.
            "<body><p>text</p><link rel=canonical href=/late><title>late</title>\
             <noscript><a href=/ns>n</a></noscript><template><a href=/t>t</a></template></body>",
            // SVG: links and titles in another namespace; xlink:href is not
            // an href, rel compared exactly.
            "<svg><a href=/svg-a>s</a><a xlink:href=/xlink>x</a><title>svg title</title>\
             <link rel=CANONICAL href=/svg-c/></svg><title>html title</title>",
            "<svg><link rel=canonical href=/svg-c></svg>",
            // Misnested and broken markup, unresolvable hrefs.
            "<a href='http://[::1'>bad</a><a href=ok.html>ok<div><p></a></table>",
            "<table><a href=/in-table>t</a>text in table<tr><td>cell</td></table>",
            "<area href=/map><area nohref><a>no href</a><a href=''>empty</a>",
            &format!("<script>var a = '<a href=/js>';</script><style>p{{}}</style><p>{words}</p>"),
            "<a href=\"  /spaces  \">s</a><a href=&#47;entity>e</a>",
        ] {
            agree(html);
        }
    }

    #[test]
    fn the_synthetic_webs_pages_read_the_same() {
        let web = crate::testweb::SyntheticWeb::new(crate::testweb::WebSpec {
            hosts: 2,
            pages_per_host: 20,
            seed: 11,
            behaviours: true,
        });
        for host in 0..2 {
            for page in 0..20 {
                agree(&web.render(host, page, 8080));
            }
        }
    }
}

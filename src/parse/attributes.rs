//! Finds the first tag with too many attributes before html5ever reads it.
//!
//! html5ever's tokenizer checks each attribute name against every earlier
//! one of the same tag, so one tag with k attributes costs k²/2
//! comparisons: a single tag with 200,000 attributes takes it many seconds,
//! and nothing outside the tokenizer can see that work while it happens.
//! This scan finds such a tag in one linear pass over the markup, so the
//! parser can stop just before it.
//!
//! It follows the WHATWG tokenizer's tag, comment and bogus-comment states
//! exactly, and switches to raw text after `script`, `style`, `xmp`,
//! `iframe`, `noembed`, `noframes`, `noscript`, `title`, `textarea` and
//! `plaintext` start tags as html5ever does in HTML content (with scripting
//! on). It does not model what only the tree builder knows (foreign content
//! such as `<svg><style>`, script double-escaping, CDATA sections): a page
//! built to exploit that can hide a huge tag from this scan, and the
//! parser's time budget is what stops it then.

/// Elements whose content the tokenizer reads as text up to their end tag.
const RAW_TEXT: &[&[u8]] = &[
    b"script",
    b"style",
    b"xmp",
    b"iframe",
    b"noembed",
    b"noframes",
    b"noscript",
    b"title",
    b"textarea",
];

/// The byte offset of the `<` of the first tag (start or end: the
/// tokenizer reads attributes on both) with more than `max` attributes,
/// duplicates included, if there is one.
pub fn first_tag_over(html: &str, max: usize) -> Option<usize> {
    let b = html.as_bytes();
    let mut i = 0;
    while let Some(lt) = find_byte(html, i, b'<') {
        let next = b.get(lt + 1).copied();
        i = match next {
            Some(c) if c.is_ascii_alphabetic() => {
                let tag = scan_tag(html, lt + 1, max);
                if tag.over {
                    return Some(lt);
                }
                let name = &b[lt + 1..tag.name_end];
                if name.eq_ignore_ascii_case(b"plaintext") {
                    return None;
                }
                match RAW_TEXT.iter().find(|raw| name.eq_ignore_ascii_case(raw)) {
                    Some(raw) => raw_text_end(html, tag.end, raw)?,
                    None => tag.end,
                }
            }
            Some(b'/') => match b.get(lt + 2).copied() {
                Some(c) if c.is_ascii_alphabetic() => {
                    let tag = scan_tag(html, lt + 2, max);
                    if tag.over {
                        return Some(lt);
                    }
                    tag.end
                }
                Some(b'>') => lt + 3,
                // `</` then anything else opens a bogus comment.
                Some(_) => after_byte(html, lt + 2, b'>'),
                None => return None,
            },
            Some(b'!') if b[lt + 2..].starts_with(b"--") => comment_end(html, lt + 4),
            Some(b'!' | b'?') => after_byte(html, lt + 2, b'>'),
            // A `<` that opens nothing is text.
            _ => lt + 1,
        };
    }
    None
}

/// What scanning one tag found.
struct TagScan {
    /// Index just past the tag's name.
    name_end: usize,
    /// Index just past its `>` (or the end of the input).
    end: usize,
    /// Whether it has more attributes than allowed.
    over: bool,
}

/// Whitespace as the tokenizer sees it (CR is read as LF).
fn is_space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
}

/// Scans the tag whose name starts at `start`, one attribute at a time,
/// counting attribute names where the tokenizer's tag states start them.
/// A `/` between attributes only matters right before `>` (self-closing),
/// so it is skipped like whitespace.
fn scan_tag(html: &str, start: usize, max: usize) -> TagScan {
    let b = html.as_bytes();
    let name_end = skip_while(b, start, |c| !is_space(c) && c != b'/' && c != b'>');
    let done = |end: usize, over: bool| TagScan {
        name_end,
        end,
        over,
    };
    let mut k = name_end;
    let mut count = 0usize;
    loop {
        // Before an attribute name: the end of the tag, or a new name (a
        // leading `=` is part of it).
        k = skip_while(b, k, |c| is_space(c) || c == b'/');
        match b.get(k) {
            None => return done(b.len(), false),
            Some(b'>') => return done(k + 1, false),
            Some(_) => {}
        }
        count += 1;
        if count > max {
            return done(k, true);
        }
        k = skip_while(b, k + 1, |c| {
            !is_space(c) && c != b'/' && c != b'>' && c != b'='
        });
        // After the name: `=` and a value, or else the next name or the end.
        k = skip_while(b, k, is_space);
        if b.get(k) != Some(&b'=') {
            continue;
        }
        k = skip_while(b, k + 1, is_space);
        match b.get(k) {
            None => return done(b.len(), false),
            Some(b'>') => return done(k + 1, false),
            Some(&quote @ (b'"' | b'\'')) => match find_byte(html, k + 1, quote) {
                // A name glued to the closing quote starts a new attribute.
                Some(close) => k = close + 1,
                None => return done(b.len(), false),
            },
            Some(_) => k = skip_while(b, k, |c| !is_space(c) && c != b'>'),
        }
    }
}

/// The index of the first byte at or after `from` that is not `pred`'s
/// (or the end of the input).
fn skip_while(b: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    b.get(from..)
        .and_then(|rest| rest.iter().position(|&c| !pred(c)))
        .map_or(b.len(), |k| k + from)
}

/// The index just past the end of the comment whose text starts at
/// `start` (after `<!--`): `-->` or `--!>`, or at once for `<!-->` and
/// `<!--->`.
fn comment_end(html: &str, start: usize) -> usize {
    let b = html.as_bytes();
    if b[start..].starts_with(b">") {
        return start + 1;
    }
    if b[start..].starts_with(b"->") {
        return start + 2;
    }
    let mut k = start;
    while let Some(dash) = find_byte(html, k, b'-') {
        let rest = &b[dash..];
        if rest.starts_with(b"-->") {
            return dash + 3;
        }
        if rest.starts_with(b"--!>") {
            return dash + 4;
        }
        k = dash + 1;
    }
    b.len()
}

/// The index of the end tag closing raw text that starts at `start`:
/// `</name` followed by whitespace, `/` or `>`. `None` if the text runs to
/// the end of the input.
fn raw_text_end(html: &str, start: usize, name: &[u8]) -> Option<usize> {
    let b = html.as_bytes();
    let mut k = start;
    while let Some(lt) = find_byte(html, k, b'<') {
        let tail = &b[lt + 1..];
        if tail.first() == Some(&b'/')
            && tail.len() > name.len()
            && tail[1..=name.len()].eq_ignore_ascii_case(name)
        {
            match tail.get(name.len() + 1) {
                Some(&c) if is_space(c) || c == b'/' || c == b'>' => return Some(lt),
                None => return None,
                Some(_) => {}
            }
        }
        k = lt + 1;
    }
    None
}

/// The index just past the next `needle` at or after `from` (or the end of
/// the input).
fn after_byte(html: &str, from: usize, needle: u8) -> usize {
    find_byte(html, from, needle).map_or(html.len(), |k| k + 1)
}

/// The index of the next `needle` at or after `from`. SIMD (`memchr`):
/// most of a page's bytes are text between tags and quoted values, passed
/// over here.
fn find_byte(html: &str, from: usize, needle: u8) -> Option<usize> {
    let rest = html.as_bytes().get(from..)?;
    memchr::memchr(needle, rest).map(|k| k + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(n: usize) -> String {
        (0..n).map(|i| format!(" a{i}")).collect()
    }

    #[test]
    fn finds_the_first_tag_over_the_limit() {
        let html = format!("<p id=x>text</p><div{}><b{}>", attrs(3), attrs(4));
        assert_eq!(first_tag_over(&html, 3), html.find("<b"));
        assert_eq!(first_tag_over(&html, 2), html.find("<div"));
        assert_eq!(first_tag_over(&html, 4), None);
        // End tags are tokenized with their attributes too.
        let html = format!("<p></p{}>", attrs(5));
        assert_eq!(first_tag_over(&html, 4), Some(3));
    }

    #[test]
    fn counts_attributes_as_the_tokenizer_does() {
        // Quoted values hide spaces and `>`; unquoted and missing values,
        // `/` and attributes glued after a quote are read as the spec says.
        let tag = r#"<a href="x > y z" title='a b' data-x=1 hidden / b="c"d="e"f>"#;
        assert_eq!(first_tag_over(tag, 7), None);
        assert_eq!(first_tag_over(tag, 6), Some(0));
        // A name may start with `=`; `a=` with no value is one attribute.
        assert_eq!(first_tag_over("<p =x a= >", 1), Some(0));
        assert_eq!(first_tag_over("<p =x a= >", 2), None);
    }

    #[test]
    fn skips_text_comments_and_raw_text() {
        let many = attrs(10);
        for html in [
            format!("<!-- <x{many}> -->"),
            format!("<!----><!--><!---><p>a -- b</p><!-- x --!><!-- <y{many}> -->"),
            format!("<!DOCTYPE html><?php <q{many}> ?>"),
            format!("</ <x{many}>"),
            format!("a < b <3 <script>if (a <b{many}) {{}}</script >"),
            format!("<style>p{{}} <s{many}></style><textarea><t{many}></TEXTAREA>"),
            format!("<plaintext></plaintext><p{many}>"),
        ] {
            assert_eq!(first_tag_over(&html, 5), None, "{html}");
        }
        // Raw text ends at its own end tag, not at a longer name.
        let html = format!("<script></scripts><x{many}></script><y{many}>");
        assert_eq!(first_tag_over(&html, 5), html.find("<y"));
    }

    #[test]
    fn unfinished_input_is_not_a_match() {
        for html in [
            "<", "<p", "<p a=\"", "<!--", "<script>", "</", "<p a", "<p a=b",
        ] {
            assert_eq!(first_tag_over(html, 5), None, "{html}");
        }
    }

    /// html5ever's own tokenizer, switched to raw text after the same
    /// start tags as the scan (script as plain raw text: the scan does not
    /// model script escapes): the number of attributes of each tag, or
    /// `None` when a tag had duplicate names (the tokenizer drops them).
    fn attributes_by_html5ever(html: &str) -> Option<Vec<usize>> {
        use html5ever::tendril::StrTendril;
        use html5ever::tokenizer::states::RawKind;
        use html5ever::tokenizer::{
            BufferQueue, StartTag, Token, TokenSink, TokenSinkResult, Tokenizer,
        };
        use std::cell::{Cell, RefCell};

        #[derive(Default)]
        struct Counts {
            attributes: RefCell<Vec<usize>>,
            duplicates: Cell<bool>,
        }
        impl TokenSink for Counts {
            type Handle = ();
            fn process_token(&self, token: Token, _: u64) -> TokenSinkResult<()> {
                let Token::TagToken(tag) = token else {
                    return TokenSinkResult::Continue;
                };
                self.attributes.borrow_mut().push(tag.attrs.len());
                self.duplicates
                    .set(self.duplicates.get() || tag.had_duplicate_attributes);
                if tag.kind != StartTag {
                    return TokenSinkResult::Continue;
                }
                match &*tag.name {
                    "plaintext" => TokenSinkResult::Plaintext,
                    "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
                    name if RAW_TEXT.contains(&name.as_bytes()) => {
                        TokenSinkResult::RawData(RawKind::Rawtext)
                    }
                    _ => TokenSinkResult::Continue,
                }
            }
        }
        let tokenizer = Tokenizer::new(Counts::default(), Default::default());
        let input = BufferQueue::default();
        input.push_back(StrTendril::from_slice(html));
        let _ = tokenizer.feed(&input);
        tokenizer.end();
        let counts = &tokenizer.sink;
        (!counts.duplicates.get()).then(|| counts.attributes.take())
    }

    /// Random markup from pieces that exercise every tag state, comments,
    /// bogus comments and raw text; names and values are numbered so that
    /// attribute names rarely repeat.
    fn random_markup(seed: u64) -> String {
        const PIECES: &[&str] = &[
            "<p#",
            "</p#",
            "<DIV#",
            " a#",
            "a#",
            " b#=",
            "=",
            "=\"v# >\"",
            "='v#'",
            "=v#",
            "\"",
            "'",
            ">",
            "/",
            "/>",
            " ",
            "\n",
            "<!--",
            "-->",
            "--!>",
            "<!-->",
            "<!",
            "<?",
            "</",
            "</>",
            "<",
            "-",
            "<!DOCTYPE html>",
            "text# ",
            "<script>",
            "</script>",
            "</SCRIPT ",
            "<style a=1>",
            "</style>",
            "<title>",
            "</title>",
            "<textarea>",
            "</textarea/>",
        ];
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let len = 5 + next() % 80;
        (0..len)
            .map(|n| PIECES[(next() % PIECES.len() as u64) as usize].replace('#', &n.to_string()))
            .collect()
    }

    #[test]
    fn agrees_with_html5ever_on_random_markup() {
        let mut compared = 0;
        for seed in 0..20_000 {
            let html = random_markup(seed);
            let Some(counts) = attributes_by_html5ever(&html) else {
                continue;
            };
            compared += 1;
            // html5ever drops a tag the input ends in; the scan counts it
            // (its attributes were compared all the same).
            let unfinished = |at: usize| attributes_by_html5ever(&html[at..]) == Some(vec![]);
            let most = counts.iter().copied().max().unwrap_or(0);
            if let Some(at) = first_tag_over(&html, most) {
                assert!(unfinished(at), "{html}");
            }
            if most == 0 {
                continue;
            }
            // The tag found is the first with that many attributes.
            let at = first_tag_over(&html, most - 1).expect(&html);
            let before = attributes_by_html5ever(&html[..at]).unwrap();
            assert!(before.iter().all(|&n| n < most), "{html}");
            let from = attributes_by_html5ever(&html[at..]).unwrap();
            assert!(from.first() == Some(&most) || unfinished(at), "{html}");
        }
        assert!(compared > 10_000, "{compared}");
    }
}

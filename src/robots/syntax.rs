//! How one robots.txt line is read: line ends, the byte-order mark, the
//! key, the value, and the lenient readings (see the parent module's docs
//! for why each exists).

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    UserAgent,
    Allow,
    Disallow,
    CrawlDelay,
    Sitemap,
    /// A record this parser does not interpret (RFC 9309 §2.2.4).
    Other,
}

/// Key spellings, matched as case-insensitive prefixes of the line's key,
/// in this order. The misspellings are the ones google/robotstxt accepts
/// (`kAllowFrequentTypos`), plus the same two for `crawl-delay`.
const SPELLINGS: &[(Key, &[&str])] = &[
    (Key::UserAgent, &["user-agent", "useragent", "user agent"]),
    (Key::Allow, &["allow"]),
    (
        Key::Disallow,
        &[
            "disallow",
            "dissallow",
            "dissalow",
            "disalow",
            "diasllow",
            "disallaw",
        ],
    ),
    (Key::Sitemap, &["sitemap", "site-map"]),
    (
        Key::CrawlDelay,
        &["crawl-delay", "crawldelay", "crawl delay"],
    ),
];

impl Key {
    /// Reads a key (already trimmed).
    fn of(key: &str) -> Key {
        SPELLINGS
            .iter()
            .find(|(_, names)| names.iter().any(|name| starts_with_ignore_case(key, name)))
            .map_or(Key::Other, |(key, _)| *key)
    }
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.as_bytes()
        .get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// Whether a key with a space inside is one of the spaced misspellings
/// (`user agent: x`) rather than a colon that belongs to the value
/// (`Sitemap https://…`).
fn is_spaced_key(key: &str) -> bool {
    ["user agent", "crawl delay"]
        .iter()
        .any(|name| starts_with_ignore_case(key, name))
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// One directive: its key and its value (trimmed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Directive<'a> {
    pub key: Key,
    pub value: &'a str,
}

/// Reads the content of a line (comment and surrounding whitespace already
/// removed) as `key: value`, or — when the colon is missing — as exactly
/// two words `key value`. `None` when it is neither.
pub(super) fn directive(content: &str) -> Option<Directive<'_>> {
    if let Some((key, value)) = content.split_once(':') {
        let key = key.trim_ascii();
        if !key.contains(is_blank) || is_spaced_key(key) {
            if key.is_empty() {
                return None;
            }
            return Some(Directive {
                key: Key::of(key),
                value: value.trim_ascii(),
            });
        }
        // A space before the first colon and no known spaced key: the colon
        // is part of the value, as in `Sitemap https://a.test/s.xml`.
    }
    let (key, value) = content.split_once(is_blank)?;
    let value = value.trim_ascii();
    if value.contains(is_blank) {
        return None; // more than two words: not a line we can read
    }
    Some(Directive {
        key: Key::of(key),
        value,
    })
}

/// The content of a raw line: everything before a `#`, trimmed.
pub(super) fn content(raw: &str) -> &str {
    raw.split('#').next().unwrap_or("").trim_ascii()
}

/// `body` without a leading UTF-8 byte-order mark, or the leading part of
/// one (google/robotstxt skips any prefix of the mark).
pub(super) fn strip_bom(body: &[u8]) -> &[u8] {
    let marked = body
        .iter()
        .zip(BOM)
        .take_while(|(byte, bom)| byte == bom)
        .count();
    &body[marked..]
}

/// The lines of `text`, ended by LF, CR, or CR LF (RFC 9309 §2.2: `EOL`),
/// so that a CR LF file numbers its lines like an LF one.
pub(super) fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.find(['\r', '\n']) {
            Some(end) => {
                let eol = if current[end..].starts_with("\r\n") {
                    2
                } else {
                    1
                };
                rest = Some(&current[end + eol..]);
                Some(&current[..end])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// The name a `user-agent` value (or our own product token) stands for:
/// `*`, or its leading run of token characters, lower-cased.
///
/// Token characters are those RFC 9309 §2.2.1 allows (letters, `_`, `-`)
/// plus digits, so `MJ12bot` stays `mj12bot` (google/robotstxt would read
/// `mj`). The run ends at anything else, so `trawl/1.0`, `trawl bot` and
/// `trawl*` all name `trawl`.
pub(super) fn agent_name(value: &str) -> String {
    let is_token = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if let Some(after) = value.strip_prefix('*') {
        if !after.starts_with(is_token) {
            return "*".to_owned();
        }
    }
    let end = value.find(|c: char| !is_token(c)).unwrap_or(value.len());
    value[..end].to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Option<(Key, &str)> {
        directive(content(line)).map(|d| (d.key, d.value))
    }

    #[test]
    fn keys_values_and_lenient_readings() {
        let cases: &[(&str, Option<(Key, &str)>)] = &[
            ("User-agent: trawl", Some((Key::UserAgent, "trawl"))),
            ("  DISALLOW :  /x  # why", Some((Key::Disallow, "/x"))),
            ("disallow /", Some((Key::Disallow, "/"))),
            ("user-agent\tfoo", Some((Key::UserAgent, "foo"))),
            ("disallow /a b", None),
            ("absolutely random line", None),
            ("Error #and comment", None),
            ("Disallow/x", None),
            (": /x", None),
            ("# only a comment", None),
            ("", None),
            ("useragent: baz", Some((Key::UserAgent, "baz"))),
            ("User agent: baz", Some((Key::UserAgent, "baz"))),
            ("disallaw: /some", Some((Key::Disallow, "/some"))),
            ("Dissallow: /a", Some((Key::Disallow, "/a"))),
            ("disalow: /a", Some((Key::Disallow, "/a"))),
            ("Disallowed: /a", Some((Key::Disallow, "/a"))),
            ("allow: /a", Some((Key::Allow, "/a"))),
            ("alow: /a", Some((Key::Other, "/a"))),
            (
                "site-map: https://e/s.xml",
                Some((Key::Sitemap, "https://e/s.xml")),
            ),
            (
                "Sitemap https://e/s.xml",
                Some((Key::Sitemap, "https://e/s.xml")),
            ),
            ("disallow /a:b", Some((Key::Disallow, "/a:b"))),
            ("Crawl delay: 2", Some((Key::CrawlDelay, "2"))),
            ("crawl-delay 2", Some((Key::CrawlDelay, "2"))),
            ("unicorns: /extinct", Some((Key::Other, "/extinct"))),
            ("foo bar: baz", None),
        ];
        for (line, want) in cases {
            assert_eq!(read(line), *want, "{line:?}");
        }
    }

    #[test]
    fn byte_order_mark_and_its_prefixes() {
        assert_eq!(strip_bom(b"\xEF\xBB\xBFUser"), b"User");
        assert_eq!(strip_bom(b"\xEF\xBBUser"), b"User");
        assert_eq!(strip_bom(b"\xEFUser"), b"User");
        assert_eq!(strip_bom(b"\xEF\x11\xBFUser"), b"\x11\xBFUser");
        assert_eq!(strip_bom(b"User\xEF\xBB\xBF"), b"User\xEF\xBB\xBF");
        assert_eq!(strip_bom(b""), b"");
    }

    #[test]
    fn line_ends() {
        fn split(s: &str) -> Vec<&str> {
            lines(s).collect()
        }
        assert_eq!(split("a\nb\r\nc\rd"), ["a", "b", "c", "d"]);
        assert_eq!(split("a\r\n\r\nb\n"), ["a", "", "b", ""]);
        assert_eq!(split("a\r\r\nb"), ["a", "", "b"]);
        assert_eq!(split(""), [""]);
    }

    #[test]
    fn agent_names() {
        for (value, want) in [
            ("*", "*"),
            ("* everyone", "*"),
            ("*/1.0", "*"),
            ("*bot", ""),
            ("TrAwL", "trawl"),
            ("trawl/2.0", "trawl"),
            ("Foo Bar", "foo"),
            ("trawl*", "trawl"),
            ("MJ12bot", "mj12bot"),
            ("Foo_Bar-baz", "foo_bar-baz"),
            ("ツ", ""),
            ("", ""),
        ] {
            assert_eq!(agent_name(value), want, "{value:?}");
        }
    }
}

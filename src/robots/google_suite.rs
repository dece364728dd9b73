//! google/robotstxt's test suite (`robots_test.cc` and
//! `reporting_robots_test.cc`), ported. Each test names the original; where
//! trawl deliberately reads a file differently, the case says so and why
//! (see also the module docs of `robots`).

use super::syntax::agent_name;
use super::*;

fn allowed(robotstxt: &str, agent: &str, url: &str) -> bool {
    allowed_bytes(robotstxt.as_bytes(), agent, url)
}

fn allowed_bytes(robotstxt: &[u8], agent: &str, url: &str) -> bool {
    let url = Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    Rules::parse(robotstxt, agent).allows(&url)
}

/// Asserts the verdict for each `(url, allowed)`.
fn check(robotstxt: &str, agent: &str, cases: &[(&str, bool)]) {
    for (url, want) in cases {
        assert_eq!(
            allowed(robotstxt, agent, url),
            *want,
            "{agent} {url} with\n{robotstxt}"
        );
    }
}

/// `(line number, line)` of each rule in force for `agent`.
fn rule_lines(robotstxt: &[u8], agent: &str) -> Vec<(usize, String)> {
    Rules::parse(robotstxt, agent)
        .rules()
        .iter()
        .map(|r| (r.line_no, r.line.clone()))
        .collect()
}

// GoogleOnly_SystemTest. Its empty-URL case does not apply: we decide
// parsed `Url`s, never empty strings.
#[test]
fn google_only_system_test() {
    let robotstxt = "user-agent: FooBot\ndisallow: /\n";
    assert!(allowed("", "FooBot", "http://foo.bar/x"));
    assert!(allowed(robotstxt, "", "http://foo.bar/x"));
    assert!(allowed("", "", "http://foo.bar/x"));
    assert!(!allowed(robotstxt, "FooBot", "http://foo.bar/x"));
}

// ID_LineSyntax_Line: a missing colon is assumed.
#[test]
fn id_line_syntax_line() {
    let correct = "user-agent: FooBot\ndisallow: /\n";
    let incorrect = "foo: FooBot\nbar: /\n";
    let incorrect_accepted = "user-agent FooBot\ndisallow /\n";
    let url = "http://foo.bar/x/y";
    assert!(!allowed(correct, "FooBot", url));
    assert!(allowed(incorrect, "FooBot", url));
    assert!(!allowed(incorrect_accepted, "FooBot", url));
}

// ID_LineSyntax_Groups
#[test]
fn id_line_syntax_groups() {
    let robotstxt = "allow: /foo/bar/\n\
        \n\
        user-agent: FooBot\n\
        disallow: /\n\
        allow: /x/\n\
        user-agent: BarBot\n\
        disallow: /\n\
        allow: /y/\n\
        \n\
        \n\
        allow: /w/\n\
        user-agent: BazBot\n\
        \n\
        user-agent: FooBot\n\
        allow: /z/\n\
        disallow: /\n";
    let (w, x, y, z) = (
        "http://foo.bar/w/a",
        "http://foo.bar/x/b",
        "http://foo.bar/y/c",
        "http://foo.bar/z/d",
    );
    let foo = "http://foo.bar/foo/bar/";
    check(robotstxt, "FooBot", &[(x, true), (z, true), (y, false)]);
    check(robotstxt, "BarBot", &[(y, true), (w, true), (z, false)]);
    check(robotstxt, "BazBot", &[(z, true)]);
    // Lines with rules outside groups are ignored.
    for agent in ["FooBot", "BarBot", "BazBot"] {
        check(robotstxt, agent, &[(foo, false)]);
    }
}

// ID_LineSyntax_Groups_OtherRules: a group is not closed by lines the RFC
// does not define.
#[test]
fn id_line_syntax_groups_other_rules() {
    for robotstxt in [
        "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
        "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
    ] {
        for agent in ["FooBot", "BarBot"] {
            check(robotstxt, agent, &[("http://foo.bar/", false)]);
        }
    }
}

// ID_REPLineNamesCaseInsensitive
#[test]
fn id_rep_line_names_case_insensitive() {
    for robotstxt in [
        "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
        "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
        "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
    ] {
        check(
            robotstxt,
            "FooBot",
            &[("http://foo.bar/x/y", true), ("http://foo.bar/a/b", false)],
        );
    }
}

// ID_VerifyValidUserAgentsToObey checks the crawler's own token. Ours is
// read like a `user-agent` value: a valid token names itself; in the
// invalid ones, the leading token characters are the name. Unlike
// google/robotstxt, digits are token characters (`MJ12bot`).
#[test]
fn id_verify_valid_user_agents_to_obey() {
    for token in ["Foobot", "Foobot-Bar", "Foo_Bar"] {
        assert_eq!(agent_name(token), token.to_ascii_lowercase());
    }
    for (token, name) in [
        ("", ""),
        ("ツ", ""),
        ("Foobot*", "foobot"),
        ("Foobot/2.1", "foobot"),
        ("Foobot Bar", "foobot"),
    ] {
        assert_eq!(agent_name(token), name, "{token:?}");
    }
    // A token that names nothing selects no group of its own, only `*`.
    let robotstxt = "User-agent: *\nDisallow: /\nUser-agent: ツ\nAllow: /\n";
    assert!(!allowed(robotstxt, "ツ", "http://foo.bar/x"));
}

// ID_UserAgentValueCaseInsensitive
#[test]
fn id_user_agent_value_case_insensitive() {
    for robotstxt in [
        "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
        "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
        "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
    ] {
        for agent in ["Foo", "foo"] {
            check(
                robotstxt,
                agent,
                &[("http://foo.bar/x/y", true), ("http://foo.bar/a/b", false)],
            );
        }
    }
}

// GoogleOnly_AcceptUserAgentUpToFirstSpace. Deliberate difference: Google
// says the invalid token `Foo Bar` matches nothing and falls back to `*`;
// we read our own token the way we read `user-agent` lines (and a crawler's
// product token is the first word of its User-Agent), so `Foo Bar` is
// `Foo` and its group applies.
#[test]
fn google_only_accept_user_agent_up_to_first_space() {
    let robotstxt = "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n";
    let url = "http://foo.bar/x/y";
    assert!(allowed(robotstxt, "Foo", url));
    assert!(allowed(robotstxt, "Foo Bar", url)); // Google: disallowed
}

// ID_GlobalGroups_Secondary
#[test]
fn id_global_groups_secondary() {
    let global = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n";
    let only_specific = "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n";
    let url = "http://foo.bar/x/y";
    assert!(allowed("", "FooBot", url));
    assert!(!allowed(global, "FooBot", url));
    assert!(allowed(global, "BarBot", url));
    assert!(allowed(only_specific, "QuxBot", url));
}

// ID_AllowDisallow_Value_CaseSensitive
#[test]
fn id_allow_disallow_value_case_sensitive() {
    let url = "http://foo.bar/x/y";
    assert!(!allowed(
        "user-agent: FooBot\ndisallow: /x/\n",
        "FooBot",
        url
    ));
    assert!(allowed(
        "user-agent: FooBot\ndisallow: /X/\n",
        "FooBot",
        url
    ));
}

// ID_LongestMatch
#[test]
fn id_longest_match() {
    let url = "http://foo.bar/x/page.html";
    let cases: &[(&str, &[(&str, bool)])] = &[
        (
            "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
            &[(url, false)],
        ),
        (
            "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
            &[(url, true), ("http://foo.bar/x/", false)],
        ),
        // Equivalent allow and disallow patterns: allow is used.
        ("user-agent: FooBot\ndisallow: \nallow: \n", &[(url, true)]),
        (
            "user-agent: FooBot\ndisallow: /\nallow: /\n",
            &[(url, true)],
        ),
        (
            "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
            &[("http://foo.bar/x", false), ("http://foo.bar/x/", true)],
        ),
        (
            "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
            &[(url, true)],
        ),
        // Longest match wins.
        (
            "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
            &[
                ("http://foo.bar/page.html", false),
                ("http://foo.bar/page", true),
            ],
        ),
        (
            "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
            &[(url, true), ("http://foo.bar/x/y.html", false)],
        ),
        // The most specific group for FooBot allows /x/page implicitly.
        (
            "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
            &[
                ("http://foo.bar/x/page", true),
                ("http://foo.bar/y/page", false),
            ],
        ),
    ];
    for (robotstxt, urls) in cases {
        check(robotstxt, "FooBot", urls);
    }
}

// ID_Encoding. Two deliberate differences:
// - a URL is percent-encoded by URL parsing before it reaches the matcher,
//   so `/foo/bar/ツ` is `/foo/bar/%E3%83%84` (Google expects the caller to
//   have encoded it and compares the raw octets);
// - `%XX` of unreserved characters is decoded on both sides, as RFC 9309
//   §2.2.2's table says (`/foo/bar/%62%61%7A` matches `/foo/bar/baz`).
#[test]
fn id_encoding() {
    check(
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        "FooBot",
        &[(
            "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
            true,
        )],
    );
    for robotstxt in [
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
    ] {
        check(
            robotstxt,
            "FooBot",
            &[
                ("http://foo.bar/foo/bar/%E3%83%84", true),
                ("http://foo.bar/foo/bar/ツ", true), // Google: disallowed
            ],
        );
    }
    check(
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        "FooBot",
        &[
            ("http://foo.bar/foo/bar/baz", true), // Google: disallowed
            ("http://foo.bar/foo/bar/%62%61%7A", true),
        ],
    );
}

// ID_SpecialCharacters
#[test]
fn id_special_characters() {
    check(
        "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
        "FooBot",
        &[
            ("http://foo.bar/foo/bar/quz", false),
            ("http://foo.bar/foo/quz", true),
            ("http://foo.bar/foo//quz", true),
            ("http://foo.bar/foo/bax/quz", true),
        ],
    );
    check(
        "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
        "FooBot",
        &[
            ("http://foo.bar/foo/bar", false),
            ("http://foo.bar/foo/bar/qux", true),
            ("http://foo.bar/foo/bar/", true),
            ("http://foo.bar/foo/bar/baz", true),
        ],
    );
    check(
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        "FooBot",
        &[
            ("http://foo.bar/foo/bar", true),
            ("http://foo.bar/foo/quz", false),
        ],
    );
}

// GoogleOnly_IndexHTMLisDirectory. Deliberate difference: allowing
// `index.html` does not allow its directory, because no line names the
// directory and, in doubt, we obey `Disallow: /`.
#[test]
fn google_only_index_html_is_directory() {
    check(
        "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
        "foobot",
        &[
            ("http://foo.com/allowed-slash/", false), // Google: allowed
            ("http://foo.com/allowed-slash/index.htm", false),
            ("http://foo.com/allowed-slash/index.html", true),
            ("http://foo.com/anyother-url", false),
        ],
    );
}

// GoogleOnly_LineTooLong. Deliberate difference: Google cuts lines at
// 8 × 2083 bytes, which turns the pattern into a shorter prefix; we keep
// the whole line, so a pattern means what it says.
#[test]
fn google_only_line_too_long() {
    const MAX_LINE_LEN: usize = 2083 * 8;
    let (allow, disallow) = ("allow: ", "disallow: ");
    let pad = |prefix: &str, fill: char| {
        let mut line = String::from("/x/");
        while line.len() < MAX_LINE_LEN - 3 - prefix.len() + 1 {
            line.push(fill);
        }
        line
    };

    let longline = pad(disallow, 'a');
    let robotstxt = format!("user-agent: FooBot\n{disallow}{longline}/qux\n");
    assert!(allowed(&robotstxt, "FooBot", "http://foo.bar/fux"));
    // Google: disallowed by the cut pattern.
    let fux = format!("http://foo.bar{longline}/fux");
    assert!(allowed(&robotstxt, "FooBot", &fux));
    let qux = format!("http://foo.bar{longline}/qux");
    assert!(!allowed(&robotstxt, "FooBot", &qux));

    let (a, b) = (pad(allow, 'a'), pad(allow, 'b'));
    let robotstxt = format!("user-agent: FooBot\ndisallow: /\n{allow}{a}/qux\n{allow}{b}/qux\n");
    assert!(!allowed(&robotstxt, "FooBot", "http://foo.bar/"));
    let a_qux = format!("http://foo.bar{a}/qux");
    assert!(allowed(&robotstxt, "FooBot", &a_qux));
    // Google: allowed by the cut pattern.
    let b_fux = format!("http://foo.bar{b}/fux");
    assert!(!allowed(&robotstxt, "FooBot", &b_fux));
}

// GoogleOnly_DocumentationChecks (the examples of Google's robots.txt
// documentation).
#[test]
fn google_only_documentation_checks() {
    let fish_prefix: &[(&str, bool)] = &[
        ("http://foo.bar/bar", false),
        ("http://foo.bar/fish", true),
        ("http://foo.bar/fish.html", true),
        ("http://foo.bar/fish/salmon.html", true),
        ("http://foo.bar/fishheads", true),
        ("http://foo.bar/fishheads/yummy.html", true),
        ("http://foo.bar/fish.html?id=anything", true),
        ("http://foo.bar/Fish.asp", false),
        ("http://foo.bar/Fish.bar", false),
        ("http://foo.bar/catfish", false),
        ("http://foo.bar/?id=fish", false),
    ];
    // "/fish", and "/fish*" equals "/fish".
    check(
        "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
        "FooBot",
        fish_prefix,
    );
    check(
        "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
        "FooBot",
        fish_prefix,
    );
    // "/fish/" does not equal "/fish".
    check(
        "user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
        "FooBot",
        &[
            ("http://foo.bar/bar", false),
            ("http://foo.bar/fish/", true),
            ("http://foo.bar/fish/salmon", true),
            ("http://foo.bar/fish/?salmon", true),
            ("http://foo.bar/fish/salmon.html", true),
            ("http://foo.bar/fish/?id=anything", true),
            ("http://foo.bar/fish", false),
            ("http://foo.bar/fish.html", false),
            ("http://foo.bar/Fish/Salmon.html", false),
        ],
    );
    check(
        "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
        "FooBot",
        &[
            ("http://foo.bar/bar", false),
            ("http://foo.bar/filename.php", true),
            ("http://foo.bar/folder/filename.php", true),
            ("http://foo.bar/folder/filename.php?parameters", true),
            ("http://foo.bar//folder/any.php.file.html", true),
            ("http://foo.bar/filename.php/", true),
            ("http://foo.bar/index?f=filename.php/", true),
            ("http://foo.bar/php/", false),
            ("http://foo.bar/index?php", false),
            ("http://foo.bar/windows.PHP", false),
        ],
    );
    check(
        "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
        "FooBot",
        &[
            ("http://foo.bar/bar", false),
            ("http://foo.bar/filename.php", true),
            ("http://foo.bar/folder/filename.php", true),
            ("http://foo.bar/filename.php?parameters", false),
            ("http://foo.bar/filename.php/", false),
            ("http://foo.bar/filename.php5", false),
            ("http://foo.bar/php/", false),
            ("http://foo.bar/filename?php", false),
            ("http://foo.bar/aaaphpaaa", false),
            ("http://foo.bar//windows.PHP", false),
        ],
    );
    check(
        "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
        "FooBot",
        &[
            ("http://foo.bar/bar", false),
            ("http://foo.bar/fish.php", true),
            ("http://foo.bar/fishheads/catfish.php?parameters", true),
            ("http://foo.bar/Fish.PHP", false),
        ],
    );
    // Section "Order of precedence for group-member records".
    let precedence: &[(&str, &[(&str, bool)])] = &[
        (
            "user-agent: FooBot\nallow: /p\ndisallow: /\n",
            &[("http://example.com/page", true)],
        ),
        (
            "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
            &[("http://example.com/folder/page", true)],
        ),
        (
            "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
            &[("http://example.com/page.htm", false)],
        ),
        (
            "user-agent: FooBot\nallow: /$\ndisallow: /\n",
            &[
                ("http://example.com/", true),
                ("http://example.com/page.html", false),
            ],
        ),
    ];
    for (robotstxt, urls) in precedence {
        check(robotstxt, "FooBot", urls);
    }
}

// ID_LinesNumbersAreCountedCorrectly: LF, CR LF, CR, no final line end and
// a mix all number the lines alike.
#[test]
fn id_lines_numbers_are_counted_correctly() {
    for robotstxt in [
        "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
        "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
        "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
        "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
        "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
    ] {
        let body = robotstxt.as_bytes();
        assert_eq!(
            rule_lines(body, "foo"),
            [(2, "Allow: /some/path".to_owned())],
            "{robotstxt:?}"
        );
        assert_eq!(
            rule_lines(body, "bar"),
            [(6, "Disallow: /".to_owned())],
            "{robotstxt:?}"
        );
    }
}

// LinesNumbersAreCountedCorrectly (reporting_robots_test.cc): a missing
// colon, junk, comments, unknown keys and accepted misspellings.
#[test]
fn reporting_lines_numbers_are_counted_correctly() {
    let robotstxt = "User-Agent: foo\n\
        Allow: /some/path\n\
        User-Agent bar # no\n\
        absolutely random line\n\
        #so comment, much wow\n\
        \n\
        unicorns: /extinct\n\
        noarchive: /some\n\
        Disallow: /\n\
        Error #and comment\n\
        useragent: baz\n\
        disallaw: /some\n\
        site-map: https://e/s.xml #comment\n\
        sitemap: https://e/t.xml\n\
        Noarchive: /someCapital\n";
    let body = robotstxt.as_bytes();
    assert_eq!(
        rule_lines(body, "foo"),
        [(2, "Allow: /some/path".to_owned())]
    );
    assert_eq!(rule_lines(body, "bar"), [(9, "Disallow: /".to_owned())]);
    assert_eq!(
        rule_lines(body, "baz"),
        [(12, "disallaw: /some".to_owned())]
    );
    assert!(!allowed(robotstxt, "baz", "http://e/some/x"));
    assert_eq!(
        Rules::parse(body, "foo").sitemaps,
        ["https://e/s.xml", "https://e/t.xml"]
    );
}

// ID_UTF8ByteOrderMarkIsSkipped: a whole or partial mark at the start is
// skipped; a broken one, or one elsewhere, spoils its line.
#[test]
fn id_utf8_byte_order_mark_is_skipped() {
    let rules = "User-Agent: foo\nAllow: /AnyValue\n";
    for bom in [&b"\xEF\xBB\xBF"[..], b"\xEF\xBB", b"\xEF"] {
        let body = [bom, rules.as_bytes()].concat();
        assert_eq!(
            rule_lines(&body, "foo"),
            [(2, "Allow: /AnyValue".to_owned())],
            "{bom:?}"
        );
    }
    // "\x11\xBFUser-Agent: foo" is not a user-agent line: no group for foo.
    let broken = [&b"\xEF\x11\xBF"[..], rules.as_bytes()].concat();
    assert_eq!(rule_lines(&broken, "foo"), []);
    let middle = b"User-Agent: foo\n\xEF\xBB\xBFAllow: /AnyValue\n";
    assert_eq!(rule_lines(middle, "foo"), []);
    // And the lost first line would have mattered: the group applies.
    let body = [&b"\xEF\xBB\xBF"[..], b"User-agent: foo\nDisallow: /\n"].concat();
    assert!(!allowed_bytes(&body, "foo", "http://foo.bar/x"));
}

// ID_NonStandardLineExample_Sitemap: a sitemap line may appear anywhere.
#[test]
fn id_non_standard_line_example_sitemap() {
    let loc = "http://foo.bar/sitemap.xml";
    let groups = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n";
    for robotstxt in [
        format!("{groups}Sitemap: {loc}\n"),
        format!("Sitemap: {loc}\n{groups}"),
    ] {
        assert_eq!(Rules::parse(robotstxt.as_bytes(), "foo").sitemaps, [loc]);
    }
}

// TestGetPathParamsQuery: what is matched is the path with its params and
// query, without the fragment. Our URLs come parsed, so the cases for
// scheme-less strings do not apply.
#[test]
fn test_get_path_params_query() {
    let matched = |url: &str, path: &str| {
        let robotstxt = format!("User-agent: *\nDisallow: {path}$\n");
        !allowed(&robotstxt, "foo", url)
    };
    for (url, path) in [
        ("http://www.example.com", "/"),
        ("http://www.example.com/", "/"),
        ("http://www.example.com/a", "/a"),
        ("http://www.example.com/a/", "/a/"),
        (
            "http://www.example.com/a/b?c=http://d.e/",
            "/a/b?c=http://d.e/",
        ),
        (
            "http://www.example.com/a/b?c=d&e=f#fragment",
            "/a/b?c=d&e=f",
        ),
        ("http://example.com?a", "/?a"),
        ("http://example.com/a;b#c", "/a;b"),
    ] {
        assert!(matched(url, path), "{url} is {path}");
    }
}

// TestMaybeEscapePattern
#[test]
fn test_maybe_escape_pattern() {
    for (pattern, normal) in [
        ("http://www.example.com", "http://www.example.com"),
        ("/a/b/c", "/a/b/c"),
        ("á", "%C3%A1"),
        ("%aa", "%AA"),
    ] {
        assert_eq!(normalise_encoding(pattern), normal);
    }
}

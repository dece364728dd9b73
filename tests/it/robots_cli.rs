//! `trawl robots`: RFC 9309 cases through the command line, with the
//! deciding line named.

use std::process::Command;

const ROBOTS: &str = "\
# RFC 9309 examples, and the corners crawlers get wrong
User-agent: otherbot
Disallow: /

User-agent: *
Disallow: /private/
Allow: /private/open-
Disallow: /*.php$
Allow: /folder
Disallow: /folder
Disallow: /foo/bar/%62%61%7A
Disallow: /ツ

User-agent: TRAWL
Disallow: /only-trawl/
Allow: /$
";

fn run(args: &[&str], urls: &[&str]) -> (bool, String) {
    run_with(ROBOTS.as_bytes(), args, urls)
}

fn run_with(robots: &[u8], args: &[&str], urls: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots.txt");
    std::fs::write(&file, robots).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .arg("robots")
        .arg("--file")
        .arg(&file)
        .args(args)
        .args(urls)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn table_through_the_command_line() {
    // For `trawl` only its own group applies (the `*` group is not merged in).
    let cases = [
        ("http://a.test/", "allow", "Allow: /$"),
        (
            "http://a.test/only-trawl/x",
            "disallow",
            "Disallow: /only-trawl/",
        ),
        ("http://a.test/private/x", "allow", "-"),
        ("http://a.test/robots.txt", "allow", "-"),
    ];
    let urls: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let (ok, out) = run(&["--agent", "trawl"], &urls);
    assert!(ok);
    let expected: String = cases
        .iter()
        .map(|(url, verdict, rule)| format!("{verdict}\t{url}\t{rule}\n"))
        .collect();
    assert_eq!(out, expected);

    // Another agent falls back to `*`.
    let cases = [
        ("http://a.test/private/x", "disallow", "Disallow: /private/"),
        (
            "http://a.test/private/open-1",
            "allow",
            "Allow: /private/open-",
        ),
        ("http://a.test/index.php", "disallow", "Disallow: /*.php$"),
        ("http://a.test/index.php?x=1", "allow", "-"),
        ("http://a.test/folder/a", "allow", "Allow: /folder"),
        (
            "http://a.test/foo/bar/baz",
            "disallow",
            "Disallow: /foo/bar/%62%61%7A",
        ),
        ("http://a.test/%E3%83%84", "disallow", "Disallow: /ツ"),
        ("http://a.test/only-trawl/x", "allow", "-"),
    ];
    let urls: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let (ok, out) = run(&["--agent", "somebot"], &urls);
    assert!(ok);
    for ((url, verdict, rule), line) in cases.iter().zip(out.lines()) {
        assert_eq!(line, format!("{verdict}\t{url}\t{rule}"));
    }
}

#[test]
fn simulated_statuses() {
    let (ok, out) = run(
        &["--agent", "trawl", "--status", "503"],
        &["http://a.test/"],
    );
    assert!(ok);
    assert_eq!(out, "disallow\thttp://a.test/\t-\n");
    let (_, out) = run(&["--agent", "trawl", "--status", "0"], &["http://a.test/x"]);
    assert_eq!(out, "disallow\thttp://a.test/x\t-\n");
    for status in ["404", "403", "401"] {
        let (ok, out) = run(
            &["--agent", "trawl", "--status", status],
            &["http://a.test/only-trawl/x"],
        );
        assert!(ok);
        assert_eq!(out, "allow\thttp://a.test/only-trawl/x\t-\n", "{status}");
    }
}

#[test]
fn json_and_errors() {
    let (ok, out) = run(
        &["--agent", "trawl", "--json"],
        &["http://a.test/only-trawl/x"],
    );
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["url"], "http://a.test/only-trawl/x");
    assert_eq!(v["allowed"], false);
    assert_eq!(v["rule"], "Disallow: /only-trawl/");
    assert_eq!(v["line"], 15);
    let (ok, out) = run(&["--agent", "trawl"], &["not a url", "http://a.test/"]);
    assert!(!ok, "an undecidable URL makes the exit status non-zero");
    assert!(out.starts_with("error\tnot a url\t"));
    assert!(out.ends_with("allow\thttp://a.test/\tAllow: /$\n"));
}

#[test]
fn leniently_read_lines_are_named_as_written() {
    // A byte-order mark, CR LF line ends, a line without its colon, an
    // unknown line inside the agent list and a misspelt key: each read as
    // the owner meant it.
    let robots = b"\xEF\xBB\xBFUser-agent trawl\r\nNoindex: /x\r\nUser-agent: *\r\ndisallow /private\r\nDissallow: /tmp\r\n";
    let (ok, out) = run_with(
        robots,
        &["--agent", "trawl", "--json"],
        &[
            "http://a.test/private/1",
            "http://a.test/tmp/1",
            "http://a.test/open",
        ],
    );
    assert!(ok);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<_> = lines
        .iter()
        .map(|v| (v["allowed"].clone(), v["rule"].clone(), v["line"].clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (false.into(), "disallow /private".into(), 4.into()),
            (false.into(), "Dissallow: /tmp".into(), 5.into()),
            (
                true.into(),
                serde_json::Value::Null,
                serde_json::Value::Null
            ),
        ]
    );
}

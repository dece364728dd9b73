//! Routine per-host events stay out of the default (INFO) log: a crawl of
//! hosts whose robots.txt is unreachable, retried until given up, logs a
//! few lines in all, not a few per host (a crawl of 100,000 unreachable
//! hosts once printed 200,000 lines in 76 s). And a log written to a
//! file or a pipe holds plain lines, without colour codes, unless asked.

use std::process::{Command, Stdio};

use crate::common::*;

const HOSTS: usize = 40;

/// Crawls `hosts` hosts whose every connection is refused, with `extra`
/// layered on the test config, stderr piped; returns the log.
fn crawl_dead_hosts(hosts: usize, extra: &str) -> String {
    // A loopback port with nothing listening: every connection is refused.
    let port = crate::common::reserved_port().port();
    let data = tempfile::tempdir().unwrap();
    let config_path = data.path().join("trawl.toml");
    let seeds_path = data.path().join("seeds.txt");
    let config = config_toml(&data.path().join("crawl"), 5, 4) + extra;
    std::fs::write(&config_path, config).unwrap();
    let seeds: Vec<String> = (0..hosts)
        .map(|i| format!("http://dead{i}.test:{port}/"))
        .collect();
    std::fs::write(&seeds_path, seeds.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["run", "--until-idle", "--config"])
        .arg(&config_path)
        .arg("--seeds")
        .arg(&seeds_path)
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .output()
        .expect("run trawl");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stderr).expect("a log in UTF-8")
}

/// The escape that starts an ANSI colour code.
const ESC: char = '\u{1b}';

#[test]
fn a_log_that_is_not_a_terminal_is_plain_unless_colour_is_asked_for() {
    let plain = crawl_dead_hosts(1, "");
    assert!(plain.contains("INFO"), "{plain}");
    assert!(
        !plain.contains(ESC),
        "colour codes in a piped log:\n{plain}"
    );
    let coloured = crawl_dead_hosts(1, "[log]\ncolor = \"always\"\n");
    assert!(coloured.contains(&format!("{ESC}[")), "{coloured}");
}

#[test]
fn unreachable_hosts_do_not_flood_the_info_log() {
    let log = crawl_dead_hosts(HOSTS, "");
    let per_host = log.lines().filter(|l| l.contains("dead")).count();
    // Every host's robots.txt failed at least three times before it was
    // given up: at one line per event that would be 120+ lines.
    assert!(
        per_host < HOSTS / 4,
        "{per_host} log lines about individual hosts:\n{log}"
    );
}

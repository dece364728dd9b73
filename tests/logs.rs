//! Routine per-host events stay out of the default (INFO) log: a crawl of
//! hosts whose robots.txt is unreachable, retried until given up, logs a
//! few lines in all, not a few per host (a crawl of 100,000 unreachable
//! hosts once printed 200,000 lines in 76 s).

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};

use common::*;

const HOSTS: usize = 40;

#[test]
fn unreachable_hosts_do_not_flood_the_info_log() {
    // A loopback port with nothing listening: every connection is refused.
    let port = {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let data = tempfile::tempdir().unwrap();
    let config_path = data.path().join("trawl.toml");
    let seeds_path = data.path().join("seeds.txt");
    std::fs::write(&config_path, config_toml(&data.path().join("crawl"), 5, 4)).unwrap();
    let seeds: Vec<String> = (0..HOSTS)
        .map(|i| format!("http://dead{i}.test:{port}/"))
        .collect();
    std::fs::write(&seeds_path, seeds.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["run", "--until-idle", "--config"])
        .arg(&config_path)
        .arg("--seeds")
        .arg(&seeds_path)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .output()
        .expect("run trawl");
    assert!(out.status.success(), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    let per_host = log.lines().filter(|l| l.contains("dead")).count();
    // Every host's robots.txt failed at least three times before it was
    // given up: at one line per event that would be 120+ lines.
    assert!(
        per_host < HOSTS / 4,
        "{per_host} log lines about individual hosts:\n{log}"
    );
}

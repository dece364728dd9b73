//! The command line as a user meets it: config printing and errors, the
//! demo's verdict, the end of a run; and the service unit that runs it.

use std::process::Command;

fn trawl() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trawl"));
    cmd.env("RUST_LOG", "warn");
    cmd
}

#[test]
fn config_print_shows_defaults_and_layers() {
    let out = trawl().args(["config", "print"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[politeness]"), "{text}");
    assert!(text.contains("min_delay = \"1s\""), "{text}");
    assert!(text.contains("listen = \"127.0.0.1:9090\""), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(
        &file,
        "[politeness]\nmin_delay = \"250ms\"\n[dns.overrides]\n\"*.test\" = \"127.0.0.1\"\n",
    )
    .unwrap();
    let out = trawl()
        .args(["config", "print", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("min_delay = \"250ms\""), "{text}");
    assert!(text.contains("\"*.test\" = \"127.0.0.1\""), "{text}");
}

#[test]
fn every_shipped_config_file_is_valid() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The cluster demo's nodes get their credentials as a second layer
    // (scripts/cluster-demo.sh); the compose nodes name theirs.
    let dir = tempfile::tempdir().unwrap();
    let auth = dir.path().join("auth.toml");
    let mut checked = 0;
    for dir in ["config/cluster", "config/docker"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let mut print = trawl();
            print.args(["config", "print", "--config"]).arg(&path);
            if dir == "config/cluster" {
                let node = path
                    .file_stem()
                    .unwrap()
                    .to_string_lossy()
                    .replace("node", "n");
                let layer = format!("[cluster]\n{}", crate::common::cluster_auth(&node));
                std::fs::write(&auth, layer).unwrap();
                print.arg("--config").arg(&auth);
            }
            let out = print.output().unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    // config/cluster's three nodes; config/docker's image settings and
    // three nodes.
    assert_eq!(checked, 7);
}

#[test]
fn run_reads_the_config_named_by_trawl_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[politeness]
not_a_key = 1
",
    )
    .unwrap();
    let out = trawl()
        .args(["run", "--until-idle", "--seed", "http://a.test/"])
        .env("TRAWL_CONFIG", &file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not_a_key"), "{err}");
}

#[test]
fn unknown_config_key_is_named_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[politeness]\nmax_inflight = 2\n").unwrap();
    let out = trawl()
        .args(["config", "print", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("politeness") && err.contains("max_inflight"),
        "{err}"
    );
}

#[test]
fn a_bad_scope_regex_is_a_clear_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[scope]\ndeny_patterns = [\"(unclosed\"]\n").unwrap();
    let data = dir.path().join("crawl");
    for args in [
        vec!["config", "print", "--config"],
        vec![
            "run",
            "--until-idle",
            "--data",
            data.to_str().unwrap(),
            "--config",
        ],
    ] {
        let out = trawl().args(&args).arg(&file).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("scope.deny_patterns"), "{args:?}: {err}");
    }
    assert!(!data.exists(), "nothing was created");
}

#[test]
fn demo_json_reports_a_complete_polite_crawl() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let out = trawl()
        .args([
            "demo",
            "--hosts",
            "12",
            "--pages-per-host",
            "15",
            "--json",
            "--data",
        ])
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["pages_fetched"], summary["pages_expected"]);
    assert!(summary["pages_expected"].as_u64().unwrap() > 100);
    assert_eq!(summary["politeness_violations"], 0);
    assert_eq!(summary["duplicate_fetches"], 0);
    assert!(summary["warc_files"].as_u64().unwrap() >= 1);

    // A rerun clears its own directory and crawls everything again...
    let again = trawl()
        .args([
            "demo",
            "--hosts",
            "3",
            "--pages-per-host",
            "5",
            "--json",
            "--data",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    // ...but will not touch a directory it did not make.
    let foreign = dir.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), "keep").unwrap();
    let refused = trawl()
        .args(["demo", "--json", "--data"])
        .arg(&foreign)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(foreign.join("precious.txt").exists());
}

#[test]
fn url_normalize_prints_one_line_per_input_in_order() {
    let out = trawl()
        .args([
            "url",
            "normalize",
            "HTTP://Example.COM:80/a/../%7euser;jsessionid=1?PHPSESSID=2&x=1#f",
            "mailto:someone@example.com",
            "http://e.com/p?utm_source=news",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "one input was rejected");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], "http://example.com/~user?x=1");
    assert!(lines[1].starts_with("error\t"), "{}", lines[1]);
    assert_eq!(lines[2], "http://e.com/p?utm_source=news");

    // The effective config decides: tracking parameters stripped on request,
    // and the fingerprint after a tab.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(&file, "[url]\nstrip_tracking = true\n").unwrap();
    let out = trawl()
        .args(["url", "normalize", "--fingerprint", "--config"])
        .arg(&file)
        .arg("http://e.com/p?utm_source=news")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let (url, fp) = text.trim_end().split_once('\t').unwrap();
    assert_eq!(url, "http://e.com/p");
    assert_eq!(fp, trawl::url::Fingerprint::of("http://e.com/p").to_hex());
}

#[test]
fn simhash_prints_close_fingerprints_for_near_duplicate_files() {
    let dir = tempfile::tempdir().unwrap();
    let text = "the committee met on tuesday to discuss the budget for the coming year \
                and agreed to fund the new library the park and the repairs to the bridge";
    let write = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!("<html><head><title>x</title></head><body><p>{body}</p></body></html>"),
        )
        .unwrap();
        path
    };
    let a = write("a.html", text);
    let b = write("b.html", &text.replace("tuesday", "friday"));
    let c = write(
        "c.html",
        "an entirely different page about sailing boats knots and tides at the harbour",
    );
    let out = trawl().arg("simhash").args([&a, &b, &c]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let hashes: Vec<u64> = text
        .lines()
        .map(|l| u64::from_str_radix(l.split('\t').next().unwrap(), 16).unwrap())
        .collect();
    assert_eq!(hashes.len(), 3);
    let d = |x: u64, y: u64| (x ^ y).count_ones();
    assert!(d(hashes[0], hashes[1]) < d(hashes[0], hashes[2]));
    assert_eq!(
        Some(hashes[0]),
        trawl::parse::page_simhash(&std::fs::read_to_string(&a).unwrap())
    );
    let missing = trawl()
        .args(["simhash", "/nonexistent/x.html"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
}

/// A `trawl run` config in `dir`: the test config, no admin server, the
/// crawl's data under `dir/crawl`.
fn run_config(dir: &std::path::Path) -> std::path::PathBuf {
    run_config_with(dir, "")
}

/// [`run_config`] with `extra` TOML merged in.
fn run_config_with(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let config = dir.join("trawl.toml");
    let extra = format!("[admin]\nenabled = false\n{extra}");
    let text = trawl::testweb::config_layer(&dir.join("crawl"), 0, &extra);
    std::fs::write(&config, text).unwrap();
    config
}

/// Runs `trawl run --until-idle` on `config` and `seeds`; its summary.
fn run_until_idle(config: &std::path::Path, seeds: &std::path::Path) -> serde_json::Value {
    run_until_idle_logged(config, seeds).0
}

/// [`run_until_idle`], with the run's log (stderr) too.
fn run_until_idle_logged(
    config: &std::path::Path,
    seeds: &std::path::Path,
) -> (serde_json::Value, String) {
    let json = seeds.with_file_name("summary.json");
    let out = trawl()
        .args(["run", "--until-idle", "--config"])
        .arg(config)
        .arg("--seeds")
        .arg(seeds)
        .arg("--summary-json")
        .arg(&json)
        .output()
        .unwrap();
    let log = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{log}");
    let summary = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (summary, log)
}

#[test]
fn a_page_budget_ends_the_run_gracefully_and_the_next_run_finishes_the_crawl() {
    let (web, server, port) = crate::common::start_plain_web(4, 30, 11);
    let truth = web.ground_truth(port);
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    // 50 ms between a host's pages: the budget, read every 200 ms, is
    // passed by a few pages at most.
    let slow = "[politeness]\nmin_delay = \"50ms\"\n";
    let limited = run_config_with(dir.path(), &format!("[crawl]\nmax_pages = 20\n{slow}"));
    let first = run_until_idle(&limited, &seeds);
    assert_eq!(first["ended"], "max_pages", "{first}");
    assert_eq!(first["interrupted"], false);
    let done = first["pages_completed"].as_u64().unwrap();
    // Reached within a poll, and the pages in flight then finish.
    assert!(
        (20..60).contains(&done) && done < truth.len() as u64,
        "{first}"
    );
    // The next run, without the limit, resumes and finishes the crawl:
    // every page fetched once over the two runs.
    let unlimited = run_config_with(dir.path(), slow);
    let second = run_until_idle(&unlimited, &seeds);
    assert_eq!(second["ended"], "idle", "{second}");
    let log = server.log().records();
    let fetched = crate::common::page_requests(&log, port);
    let twice: Vec<_> = fetched.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "fetched again: {twice:?}");
    crate::common::assert_sites_complete(&log, &web, port);
}

#[test]
fn a_time_limit_ends_the_run_gracefully_before_the_web_is_done() {
    // One host, 50 ms a page at least: far more than two seconds of work.
    let (web, server, port) = crate::common::start_plain_web(1, 200, 12);
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let extra = "[crawl]\nmax_duration = \"2s\"\n[politeness]\nmin_delay = \"50ms\"\n";
    let config = run_config_with(dir.path(), extra);
    let summary = run_until_idle(&config, &seeds);
    assert_eq!(summary["ended"], "max_duration", "{summary}");
    let done = summary["pages_completed"].as_u64().unwrap();
    let fetched = crate::common::page_requests(&server.log().records(), port).len() as u64;
    assert!(done > 0 && fetched < 200, "{summary}");
}

#[test]
fn seeds_refused_are_named_with_their_reason_and_all_refused_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = run_config(dir.path());
    let out = trawl()
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .args(["run", "--until-idle", "--seed", "ht!tp://x", "--seed"])
        .arg("ftp://files.test/")
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let log = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success(),
        "nothing to crawl is a failure:\n{log}"
    );
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("seed refused")).collect();
    assert_eq!(refused.len(), 2, "{log}");
    assert!(
        refused[0].contains("ht!tp://x") && refused[0].contains("invalid"),
        "{log}"
    );
    assert!(refused[1].contains("ftp://files.test/"), "{log}");
    assert!(log.contains("every seed given was refused"), "{log}");
}

#[test]
fn run_until_idle_ends_with_a_summary_on_stderr_and_as_json() {
    use trawl::testweb::{SyntheticWeb, TestWebServer, WebSpec};
    let web = SyntheticWeb::new(WebSpec {
        hosts: 2,
        pages_per_host: 8,
        seed: 7,
        behaviours: false,
    });
    let server = TestWebServer::start(web.clone(), "127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let port = server.addr().port();
    let dir = tempfile::tempdir().unwrap();
    let config = run_config(dir.path());
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.seeds(port).join("\n")).unwrap();
    let (summary, log) = run_until_idle_logged(&config, &seeds);
    assert!(log.contains("crawl summary:"), "{log}");
    // Every response the server sent (robots.txt included), by class.
    let records = server.log().records();
    let class = |lo: u16| {
        records
            .iter()
            .filter(|r| (lo..lo + 100).contains(&r.status))
            .count() as u64
    };
    let counted = |c: &str| summary["responses"][c].as_u64().unwrap_or(0);
    assert_eq!(counted("2xx"), class(200), "{summary}");
    assert_eq!(counted("4xx"), class(400), "{summary}");
    assert!(class(400) > 0, "the web has missing pages");
    assert_eq!(
        summary["seeds"]["admitted"].as_u64(),
        Some(web.seeds(port).len() as u64)
    );
    assert!(summary["warc_records"].as_u64().unwrap() >= class(200));
    assert_eq!(summary["interrupted"], false);
}

/// `systemd-analyze`: `TRAWL_SYSTEMD_ANALYZE`, or the system's.
fn systemd_analyze() -> std::path::PathBuf {
    let path = std::env::var_os("TRAWL_SYSTEMD_ANALYZE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/systemd-analyze".into());
    assert!(
        path.is_file(),
        "no systemd-analyze at {}: run `TRAWL_NEED_SYSTEMD=1 source scripts/setup.sh`",
        path.display()
    );
    path
}

#[test]
fn the_service_unit_passes_systemd_analyze_verify() {
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/systemd/trawl.service"
    ))
    .unwrap();
    let exec = "ExecStart=/usr/local/bin/trawl run --config /etc/trawl/trawl.toml";
    assert!(shipped.contains(exec), "{shipped}");
    // Its stop timeout leaves room for a graceful stop.
    let stop: u64 = shipped
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .expect("a stop timeout")
        .parse()
        .unwrap();
    let grace = trawl::config::Config::defaults().crawl.shutdown_timeout;
    assert!(stop >= 2 * grace.as_secs(), "TimeoutStopSec={stop}");
    // Verified with the binary this build made where the unit expects it
    // (verify checks that ExecStart is executable).
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("trawl.service");
    let here = format!(
        "ExecStart={} run --config /etc/trawl/trawl.toml",
        env!("CARGO_BIN_EXE_trawl")
    );
    std::fs::write(&unit, shipped.replace(exec, &here)).unwrap();
    let out = Command::new(systemd_analyze())
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A bad value is only a warning to verify: none may be printed.
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

/// `trawl cluster certs` makes a CA, each node's pair and the gossip key,
/// and prints each node's settings; a node given another node's
/// certificate, or no credentials at all, refuses to start and says why.
#[test]
fn cluster_certs_make_a_nodes_credentials_and_a_node_starts_only_with_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let out = trawl()
        .args(["cluster", "certs", "--cluster-id", "t", "--out"])
        .arg(&certs)
        .args(["n1", "n2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    for file in [
        "ca.pem",
        "ca.key",
        "n1.pem",
        "n1.key",
        "n2.pem",
        "n2.key",
        "gossip.key",
    ] {
        assert!(certs.join(file).is_file(), "{file} not made");
    }
    let n1_cert = certs.join("n1.pem").display().to_string();
    assert!(
        printed.contains(&format!("tls_cert = \"{n1_cert}\"")),
        "{printed}"
    );

    let start = |auth: &str| {
        let config = dir.path().join("node.toml");
        let gossip = crate::common::gossip_addr();
        std::fs::write(
            &config,
            format!(
                "[storage]\ndata_dir = \"{}\"\n[admin]\nenabled = false\n\
                 [cluster]\nenabled = true\nnode_id = \"n1\"\ngossip = \"{gossip}\"\n\
                 bridge = \"127.0.0.1:0\"\n{auth}",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let out = trawl()
            .args(["run", "--until-idle", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let theirs = start(&format!(
        "tls_ca = \"{0}/ca.pem\"\ntls_cert = \"{0}/n2.pem\"\ntls_key = \"{0}/n2.key\"\n\
         gossip_key = \"{0}/gossip.key\"\n",
        certs.display()
    ));
    assert!(
        theirs.contains("is not a certificate for node \"n1\""),
        "{theirs}"
    );
    let none = start("");
    assert!(none.contains("trawl cluster certs"), "{none}");
}

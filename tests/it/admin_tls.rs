//! The admin API's edges as an operator meets them through the binary:
//! HTTPS with the node's certificate (`[admin] tls`), checked by `trawl
//! ctl --ca`; and a start that cannot take its port ends with one clear
//! error, not a panic.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::*;
use trawl::cluster::tls::CertsDir;

fn trawl() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trawl"));
    cmd.env("RUST_LOG", "warn");
    cmd
}

/// Writes a `trawl run` config into `dir` with `extra` layered on.
fn run_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let toml = trawl::testweb::config_layer(&dir.join("data"), 20, extra);
    let path = dir.join("node.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// `trawl ctl status` against `admin` with `args` before the command.
fn ctl(admin: &str, args: &[&str]) -> Output {
    trawl()
        .args(["ctl", "--admin", admin])
        .args(args)
        .arg("status")
        .output()
        .unwrap()
}

#[test]
fn the_admin_api_serves_https_with_the_nodes_certificate_and_ctl_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let certs = CertsDir::new(dir.path().join("certs"));
    certs.make("admin-tls", &["n1".to_owned()]).unwrap();
    let admin = reserved_port().to_string();
    // The node's cluster certificate serves (the node itself is not in a
    // cluster).
    let extra = format!(
        "[admin]\nenabled = true\nlisten = {admin:?}\ntls = true\n\
         [cluster]\ntls_cert = {:?}\ntls_key = {:?}\n",
        certs.cert("n1"),
        certs.key("n1")
    );
    let config = run_config(dir.path(), &extra);
    let mut node = trawl()
        .args(["run", "--config"])
        .arg(&config)
        .spawn()
        .unwrap();
    let ca = certs.ca().display().to_string();
    let served = eventually(Duration::from_secs(30), || {
        let out = ctl(&admin, &["--ca", &ca, "--node", "n1", "--json"]);
        out.status.success().then_some(out)
    });
    let refusals = [
        // Plain HTTP to the TLS port.
        ctl(&admin, &["--json"]),
        // The CA, but another node's name.
        ctl(&admin, &["--ca", &ca, "--node", "n2", "--json"]),
        // The CA, and the address (which the certificate does not name).
        ctl(&admin, &["--ca", &ca, "--json"]),
    ];
    let other = CertsDir::new(dir.path().join("other"));
    other.make("another", &["n1".to_owned()]).unwrap();
    let foreign = ctl(
        &admin,
        &["--ca", &other.ca().display().to_string(), "--node", "n1"],
    );
    unsafe { libc::kill(node.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut node, Duration::from_secs(30));

    let served = served.expect("ctl over HTTPS answered");
    let answer: serde_json::Value = serde_json::from_slice(&served.stdout).unwrap();
    assert!(answer["uptime_seconds"].is_number(), "{answer}");
    // Each refused for its own reason.
    let reasons = [
        // TLS bytes where HTTP was expected.
        "error: asking http://",
        "invalid peer certificate: certificate not valid for name \"n2.node.trawl\"",
        "invalid peer certificate: certificate not valid for name \"127.0.0.1\"",
        // Another CA's certificate.
        "invalid peer certificate",
    ];
    let all = refusals.iter().chain([&foreign]).enumerate().zip(reasons);
    for ((i, out), reason) in all {
        assert!(!out.status.success(), "refusal {i} was served");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "refusal {i}: {stderr}");
        assert!(!stderr.contains("uptime"), "refusal {i}: {stderr}");
    }
    assert!(status.success(), "the node stops cleanly: {status:?}");
}

/// Runs `trawl run --until-idle` on `extra` and returns its exit code and
/// stderr, and whether its data directory holds stores.
fn run_failing(extra: &str) -> (Option<i32>, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let config = run_config(dir.path(), extra);
    let out = trawl()
        .args(["run", "--until-idle", "--config"])
        .arg(&config)
        .args(["--seed", "http://site0.test/"])
        .output()
        .unwrap();
    let data = dir.path().join("data");
    let opened = ["partitions", "dedup", "warc"]
        .iter()
        .any(|d| data.join(d).exists());
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        opened,
    )
}

#[test]
fn a_port_in_use_is_one_clear_error_before_anything_opens() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    // The admin API's port, and a cluster node's bridge port (which used
    // to end in a panic, "there is no reactor running", then an abort of
    // RocksDB's teardown, after the error).
    let admin = format!("[admin]\nenabled = true\nlisten = {port:?}\n");
    let bridge = format!(
        "[admin]\nenabled = false\n[cluster]\nenabled = true\nnode_id = \"p1\"\n\
         bridge = {port:?}\ngossip = \"{}\"\n{}",
        gossip_addr(),
        cluster_auth("p1")
    );
    for (case, extra, says) in [
        ("admin", admin, format!("binding the admin api to {port}")),
        ("bridge", bridge, format!("bridge cannot listen on {port}")),
    ] {
        let (code, stderr, opened) = run_failing(&extra);
        assert_eq!(code, Some(2), "{case}: {stderr}");
        assert!(stderr.contains(&says), "{case}: {stderr}");
        assert_eq!(stderr.matches("in use").count(), 1, "{case}: {stderr}");
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{case}: {stderr}");
        assert!(!opened, "{case}: a store was opened");
    }
}

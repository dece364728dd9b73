//! trawl's container image and its compose cluster, as an operator brings
//! them up: the `Dockerfile`'s runtime stage and `config/docker/compose.yml`
//! as shipped (three nodes, each on its own address and volume, moto for
//! the partitions' state and the WARC uploads, Prometheus with the alert
//! rules, the synthetic web in a container of its own).
//!
//! These machines reach no container registry, so three images the
//! compose file names are replaced by a layer over it, written by the
//! test: the runtime stage is built (`--target prebuilt`) on a Debian base
//! made locally by `scripts/docker-base.sh` (debootstrap, then `docker
//! import`) with the trawl binary this build made, moto runs from that base
//! with the test virtualenv's packages mounted, and Prometheus with the
//! host's binary mounted. The layer also makes the nodes stop when the
//! crawl is done (`--until-idle`, no restart) and collects the web's report.
//!
//! Then: one node's container is killed and its volume removed once it has
//! published a checkpoint, and the run is checked as the other cluster
//! tests check theirs, from outside trawl: the web's own log (every page
//! of the ground truth fetched, no host asked closer than the politeness
//! delay), the bucket (every page archived, every partition's chain ended
//! in a clean hand-back), Prometheus (every node scraped, the lost one
//! seen down by the `TrawlNodeDown` rule) and the survivors' logs (a
//! partition restored from its chain).
//!
//! Needs Docker and docker-compose. Without them the test says it is
//! skipped, unless `TRAWL_REQUIRE_DOCKER=1` (the README's test command
//! sets it where a Docker engine answers), where it fails.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::moto::Moto;
use crate::common::{assert_same_urls, eventually, eventually_true};
use trawl::testweb::{SyntheticWeb, WebReport, WebSpec};

/// The base image `scripts/docker-base.sh` makes.
const BASE_IMAGE: &str = "trawl-test/debian:bookworm";
/// The synthetic web the compose file's `web` service serves (its
/// generator seed is `trawl testweb`'s default).
/// A few long sites: each takes PAGES × the politeness delay (100 ms) at
/// least, so the crawl is still going a lease after a node is lost.
const HOSTS: u32 = 12;
const PAGES: u32 = 150;
const WEB_SEED: u64 = 1;
const WEB_PORT: u16 = 8080;
/// The compose file's addresses.
const S3: &str = "198.18.251.5:5000";
const PROMETHEUS: &str = "198.18.251.9:9090";
const LOST_NODE: &str = "n2";
const LOST_ADMIN: &str = "198.18.251.12:9090";
const PARTITIONS: usize = 16;

/// Skips (or, with `TRAWL_REQUIRE_DOCKER=1`, fails) without Docker.
fn docker_available() -> bool {
    let answers = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if answers("docker", "info") && answers("docker-compose", "version") {
        return true;
    }
    let required = std::env::var("TRAWL_REQUIRE_DOCKER").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "Docker is required (TRAWL_REQUIRE_DOCKER=1) but `docker info` or `docker-compose version` failed"
    );
    eprintln!("skipped: no Docker engine or docker-compose");
    false
}

/// Runs `cmd`, failing the test with its output if it fails.
fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The image's runtime stage with this build's binary, as `tag`.
fn build_image(tag: &str, scratch: &Path) {
    let base = Command::new("docker")
        .args(["image", "inspect", BASE_IMAGE])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(
        base.success(),
        "no {BASE_IMAGE}: run scripts/docker-base.sh (scripts/test.sh does)"
    );
    let context = scratch.join("context");
    std::fs::create_dir_all(context.join("config/docker")).unwrap();
    std::fs::copy(repo().join("Dockerfile"), context.join("Dockerfile")).unwrap();
    std::fs::copy(
        repo().join("config/docker/trawl.toml"),
        context.join("config/docker/trawl.toml"),
    )
    .unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_trawl"), context.join("trawl")).unwrap();
    run(Command::new("docker")
        .args(["build", "--quiet", "--target", "prebuilt", "--build-arg"])
        .arg(format!("RUNTIME_IMAGE={BASE_IMAGE}"))
        .args(["--tag", tag])
        .arg(&context));
}

/// Where the test virtualenv's packages (moto's among them) are.
fn python_packages() -> PathBuf {
    let python = std::env::var("TRAWL_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = run(Command::new(&python).args([
        "-c",
        "import moto, os; print(os.path.dirname(os.path.dirname(moto.__file__)))",
    ]));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The layer over the shipped compose file (see the module doc).
fn override_file(dir: &Path, packages: &Path) -> String {
    let node_log = "warn,trawl::actors::node=info,trawl::actors::ownership=info";
    let until_idle = |seeds: bool| {
        let mut args = vec!["run", "--config", "/etc/trawl/node.toml"];
        if seeds {
            args.extend(["--seeds", "/etc/trawl/seeds.txt"]);
        }
        args.push("--until-idle");
        format!("{args:?}")
    };
    let nodes: String = ["n1", "n2", "n3"]
        .iter()
        .map(|n| {
            format!(
                "  {n}:\n    restart: \"no\"\n    command: {}\n    environment:\n      RUST_LOG: \"{node_log}\"\n",
                until_idle(*n == "n1")
            )
        })
        .collect();
    format!(
        "services:\n\
         \x20 s3:\n\
         \x20   image: {BASE_IMAGE}\n\
         \x20   entrypoint: [\"python3\", \"-m\", \"moto.server\", \"-H\", \"0.0.0.0\", \"-p\", \"5000\"]\n\
         \x20   environment:\n\
         \x20     PYTHONPATH: /moto\n\
         \x20   volumes: [\"{packages}:/moto:ro\"]\n\
         \x20 s3-init:\n\
         \x20   image: {BASE_IMAGE}\n\
         \x20 prometheus:\n\
         \x20   image: {BASE_IMAGE}\n\
         \x20   entrypoint: [\"/usr/bin/prometheus\"]\n\
         \x20   volumes: [\"/usr/bin/prometheus:/usr/bin/prometheus:ro\"]\n\
         \x20 web:\n\
         \x20   restart: \"no\"\n\
         \x20   volumes: [\"{web}:/var/lib/trawl\"]\n\
         {nodes}",
        packages = packages.display(),
        web = dir.join("web").display(),
    )
}

/// One compose project: brought up by [`Compose::up`], taken down with
/// its volumes and image on drop (a failed run's logs are kept).
struct Compose {
    project: String,
    image: String,
    dir: tempfile::TempDir,
}

impl Compose {
    fn up() -> Compose {
        let dir = tempfile::tempdir().unwrap();
        let project = format!("trawlit{}", std::process::id());
        let image = format!("trawl-test/trawl:{project}");
        build_image(&image, dir.path());
        let web = dir.path().join("web");
        std::fs::create_dir_all(&web).unwrap();
        // The web runs as the image's own user.
        std::fs::set_permissions(&web, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        let seeds = dir.path().join("seeds.txt");
        std::fs::write(&seeds, spec_web().seeds(WEB_PORT).join("\n") + "\n").unwrap();
        let layer = dir.path().join("override.yml");
        std::fs::write(&layer, override_file(dir.path(), &python_packages())).unwrap();
        let compose = Compose {
            project,
            image,
            dir,
        };
        run(compose.command().args(["up", "--detach", "--no-build"]));
        compose
    }

    /// `docker-compose` on the shipped file and the test's layer.
    fn command(&self) -> Command {
        let mut cmd = Command::new("docker-compose");
        cmd.arg("--project-name")
            .arg(&self.project)
            .arg("--file")
            .arg(repo().join("config/docker/compose.yml"))
            .arg("--file")
            .arg(self.dir.path().join("override.yml"))
            .env("TRAWL_IMAGE", &self.image)
            .env("TRAWL_SEEDS_FILE", self.dir.path().join("seeds.txt"))
            .env("TRAWL_DEMO_HOSTS", HOSTS.to_string())
            .env("TRAWL_DEMO_PAGES", PAGES.to_string());
        cmd
    }

    /// The container of `service`.
    fn container(&self, service: &str) -> String {
        let out = run(self.command().args(["ps", "--quiet", service]));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// SIGKILL to `service`'s container, then the container and its
    /// volume removed: a machine lost with its disk.
    fn lose(&self, service: &str) {
        run(self.command().args(["kill", service]));
        run(self.command().args(["rm", "--force", "--stop", service]));
        run(Command::new("docker")
            .args(["volume", "rm"])
            .arg(format!("{}_{service}-data", self.project)));
    }

    /// Waits (at most `limit`) for `service`'s container to stop; its exit
    /// code.
    fn wait(&self, service: &str, limit: Duration) -> i64 {
        let id = self.container(service);
        let code = eventually(limit, || {
            let out = run(Command::new("docker").args([
                "inspect",
                "--format",
                "{{.State.Running}} {{.State.ExitCode}}",
                &id,
            ]));
            let state = String::from_utf8(out.stdout).unwrap();
            let (running, code) = state.trim().split_once(' ').unwrap();
            (running == "false").then(|| code.parse::<i64>().unwrap())
        });
        code.unwrap_or_else(|| panic!("{service} still running after {limit:?}"))
    }

    /// The web's report, written when it stops.
    fn web_report(&self) -> WebReport {
        run(self.command().args(["stop", "--timeout", "30", "web"]));
        let path = self.dir.path().join("web/report.json");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_slice(&bytes).unwrap()
    }

    /// `service`'s log.
    fn logs(&self, service: &str) -> String {
        let out = run(self.command().args(["logs", "--no-color", service]));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            if let Ok(out) = self.command().args(["logs", "--no-color"]).output() {
                let _ = std::fs::write(self.dir.path().join("compose.log"), out.stdout);
            }
        }
        let _ = self
            .command()
            .args(["down", "--volumes", "--timeout", "5"])
            .output();
        let _ = Command::new("docker")
            .args(["image", "rm", "--force", &self.image])
            .output();
        if failed {
            let scratch = tempfile::tempdir().expect("a scratch directory");
            let kept = std::mem::replace(&mut self.dir, scratch).keep();
            eprintln!(
                "the failed run's files and logs are kept in {}",
                kept.display()
            );
        }
    }
}

fn spec_web() -> SyntheticWeb {
    SyntheticWeb::new(WebSpec {
        hosts: HOSTS,
        pages_per_host: PAGES,
        seed: WEB_SEED,
        behaviours: false,
    })
}

/// Asks Prometheus (the compose file's) `query`; the result's series.
fn prometheus(query: &str) -> Vec<serde_json::Value> {
    let url = format!("http://{PROMETHEUS}/api/v1/query");
    let out = Command::new("curl")
        .args(["--silent", "--fail", "--get", &url, "--data-urlencode"])
        .arg(format!("query={query}"))
        .output();
    let Ok(out) = out else { return Vec::new() };
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    answer["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn the_compose_cluster_loses_a_node_with_its_volume_and_nothing_else() {
    if !docker_available() {
        return;
    }
    let compose = Compose::up();
    let moto = Moto::at(S3.parse::<SocketAddr>().unwrap());
    // Every node scraped, none seen down.
    assert!(
        eventually_true(Duration::from_secs(60), || {
            prometheus("up{job=\"trawl\"} == 1").len() == 3
        }),
        "Prometheus does not see three nodes up"
    );
    // (A node scraped before its admin API listened is pending for an
    // evaluation at most.)
    assert!(
        eventually_true(Duration::from_secs(30), || {
            prometheus("ALERTS{alertname=\"TrawlNodeDown\"}").is_empty()
        }),
        "a node seen down before any was lost"
    );
    // n2 at work, then lost with its disk.
    assert!(
        eventually_true(Duration::from_secs(90), || moto.checkpointed_by(LOST_NODE)),
        "{LOST_NODE} published no checkpoint"
    );
    compose.lose(LOST_NODE);
    assert!(
        eventually_true(Duration::from_secs(60), || {
            let query = format!("ALERTS{{alertname=\"TrawlNodeDown\",instance=\"{LOST_ADMIN}\"}}");
            !prometheus(&query).is_empty()
        }),
        "the TrawlNodeDown rule never saw {LOST_NODE} down"
    );
    for node in ["n1", "n3"] {
        let code = compose.wait(node, Duration::from_secs(240));
        assert_eq!(code, 0, "{node} failed:\n{}", compose.logs(node));
    }
    let report = compose.web_report();

    let truth: BTreeSet<String> = spec_web().ground_truth(WEB_PORT);
    let fetched: BTreeSet<String> = report.pages.keys().cloned().collect();
    assert_same_urls(&fetched, &truth);
    let refetched = report.pages.values().filter(|n| **n > 1).count();
    eprintln!(
        "compose: {} pages, {} requests, {refetched} fetched more than once",
        truth.len(),
        report.audit.requests
    );
    assert!(refetched * 5 < truth.len(), "fetched twice: {refetched}");
    assert!(
        report.audit.violations.is_empty(),
        "politeness violations: {:?}",
        &report.audit.violations[..report.audit.violations.len().min(5)]
    );
    let archived = moto.uploaded_uris(compose.dir.path());
    let missing: Vec<_> = truth.difference(&archived).collect();
    assert!(missing.is_empty(), "not archived: {missing:?}");
    let heads = moto.heads();
    assert_eq!(heads.len(), PARTITIONS, "every partition has a chain");
    for head in heads.values() {
        assert!(head.released, "not handed back at the end: {head:?}");
    }
    let survivors = compose.logs("n1") + &compose.logs("n3");
    assert!(
        survivors.contains("partition restored from its chain"),
        "no survivor restored {LOST_NODE}'s partitions"
    );
}

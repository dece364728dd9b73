//! `trawl ctl`: the admin API from the command line, against a node's
//! admin address. Mutations send the token from `--token-file` or
//! `TRAWL_ADMIN_TOKEN`. An error answer prints its code and message and
//! exits 1. With `--ca FILE` it speaks HTTPS to an API served with
//! `[admin] tls`, trusting that CA alone (see `trawl::admin::tls`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use serde_json::Value;

/// Arguments of `trawl ctl`.
#[derive(Debug, clap::Args)]
pub struct CtlArgs {
    /// The node's admin address (host:port).
    #[arg(long, default_value = "127.0.0.1:9090")]
    admin: String,
    /// A file holding the admin token (else `TRAWL_ADMIN_TOKEN`).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Print the JSON answer as it is.
    #[arg(long)]
    json: bool,
    /// HTTPS, trusting the CA certificate (PEM) in this file alone: for a
    /// node whose admin API serves TLS (`[admin] tls = true`).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// With `--ca`: the node whose certificate must be served (a cluster
    /// certificate names `<ID>.node.trawl`, not the address). Without it,
    /// the certificate must name the host of `--admin`.
    #[arg(long, requires = "ca")]
    node: Option<String>,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Debug, clap::Subcommand)]
enum CtlCommand {
    /// The node's status, as a table.
    Status,
    /// The node's crawl report: hosts, MIME types, status codes, seeds and
    /// what each led to, the frontier by host.
    Report,
    /// Stop starting requests (those in flight finish); kept across restarts.
    Pause,
    /// Start requests again.
    Resume,
    /// Set the node-wide request rate (requests per second, 0 = no limit).
    Rate {
        /// Requests per second.
        #[arg(allow_negative_numbers = true)]
        per_second: f64,
    },
    /// Admit seed URLs; prints each URL's outcome.
    Seed {
        /// The URLs.
        #[arg(required = true)]
        urls: Vec<String>,
        /// As changed now: removed ones come back though given as seeds
        /// before, fetched ones are due at once.
        #[arg(long)]
        reseed: bool,
    },
    /// One host's state.
    Host {
        /// The host name.
        host: String,
    },
    /// The hosts being attended to, as a table (on a cluster, every
    /// node's).
    Hosts {
        /// Only `active`, `waiting`, `parked` or `blocked` hosts.
        #[arg(long)]
        state: Option<String>,
        /// `queued` (busiest), `response_time` (slowest), `failures`,
        /// `wait` (stuck), `fetched` or `host`.
        #[arg(long, default_value = "queued")]
        sort: String,
        /// Rows.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Rows skipped.
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// A host's queued URLs and scheduled refreshes.
    Queue {
        /// The host name.
        host: String,
        /// Entries of each kind.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Slow a host down (a larger minimum delay, fewer requests in flight),
    /// or with `--lift` give it back its configured politeness.
    Slow {
        /// The host name.
        host: String,
        /// Floor between a response and the next request, milliseconds.
        #[arg(long)]
        min_delay_ms: Option<u64>,
        /// Requests in flight at once.
        #[arg(long)]
        max_in_flight: Option<u32>,
        /// Lift the slow-down instead.
        #[arg(long, conflicts_with_all = ["min_delay_ms", "max_in_flight"])]
        lift: bool,
    },
    /// Block a host (or with `--domain`, a registrable domain) at once:
    /// its queued URLs are dropped, nothing of it is fetched again.
    Block {
        /// The host or domain name.
        name: String,
        /// Block the registrable domain `name` belongs to.
        #[arg(long)]
        domain: bool,
    },
    /// Lift a block.
    Unblock {
        /// The host or domain name.
        name: String,
        /// Unblock the registrable domain.
        #[arg(long)]
        domain: bool,
    },
}

/// The method, path and body of a command.
fn plan(command: &CtlCommand) -> (&'static str, String, Option<Value>) {
    let block_path = |name: &str, domain: bool| match domain {
        true => format!("/api/v1/domains/{name}/block"),
        false => format!("/api/v1/hosts/{name}/block"),
    };
    match command {
        CtlCommand::Status => ("GET", "/api/v1/status".to_owned(), None),
        CtlCommand::Report => ("GET", "/api/v1/report".to_owned(), None),
        CtlCommand::Pause => ("POST", "/api/v1/crawl/pause".to_owned(), None),
        CtlCommand::Resume => ("POST", "/api/v1/crawl/resume".to_owned(), None),
        CtlCommand::Rate { per_second } => (
            "PUT",
            "/api/v1/crawl/rate".to_owned(),
            Some(serde_json::json!({ "max_requests_per_second": per_second })),
        ),
        CtlCommand::Seed { urls, reseed } => (
            "POST",
            "/api/v1/seeds".to_owned(),
            Some(serde_json::json!({ "urls": urls, "reseed": reseed })),
        ),
        CtlCommand::Host { host } => ("GET", format!("/api/v1/hosts/{host}"), None),
        CtlCommand::Hosts {
            state,
            sort,
            limit,
            offset,
        } => {
            let mut path = format!("/api/v1/hosts?sort={sort}&limit={limit}&offset={offset}");
            if let Some(state) = state {
                path.push_str(&format!("&state={state}"));
            }
            ("GET", path, None)
        }
        CtlCommand::Queue { host, limit } => (
            "GET",
            format!("/api/v1/hosts/{host}/queue?limit={limit}"),
            None,
        ),
        CtlCommand::Slow {
            host, lift: true, ..
        } => ("DELETE", format!("/api/v1/hosts/{host}/politeness"), None),
        CtlCommand::Slow {
            host,
            min_delay_ms,
            max_in_flight,
            ..
        } => (
            "PUT",
            format!("/api/v1/hosts/{host}/politeness"),
            Some(serde_json::json!({
                "min_delay_ms": min_delay_ms,
                "max_in_flight": max_in_flight,
            })),
        ),
        CtlCommand::Block { name, domain } => ("PUT", block_path(name, *domain), None),
        CtlCommand::Unblock { name, domain } => ("DELETE", block_path(name, *domain), None),
    }
}

/// Runs `trawl ctl`.
pub fn main(args: CtlArgs) -> anyhow::Result<ExitCode> {
    let token = token(args.token_file.as_ref())?;
    let tls = match &args.ca {
        Some(ca) => {
            trawl::fetch::install_crypto_provider();
            let name = args.node.as_deref().map(trawl::cluster::tls::node_name);
            Some(trawl::admin::tls::client_config(ca, name.as_deref())?)
        }
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (method, path, body) = plan(&args.command);
    let url = format!("{scheme}://{}{path}", args.admin);
    let (status, answer) = super::run_system(request(tls, method, &url, token.as_deref(), body))
        .with_context(|| format!("asking {url}"))?;
    if !(200..300).contains(&status) {
        let code = answer["code"].as_str().unwrap_or("?");
        let error = answer["error"].as_str().unwrap_or("(no message)");
        eprintln!("error {status} {code}: {error}");
        return Ok(ExitCode::from(1));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(ExitCode::SUCCESS);
    }
    match &args.command {
        CtlCommand::Status => print!("{}", status_table(&answer)),
        CtlCommand::Report => {
            let report: trawl::report::CrawlReport =
                serde_json::from_value(answer.clone()).context("reading the report")?;
            print!("{report}");
            for node in answer["nodes"].as_array().into_iter().flatten() {
                if let Some(error) = node["error"].as_str() {
                    let id = node["node"].as_str().unwrap_or("?");
                    println!("node {id}: its part is missing from this report ({error})");
                }
            }
        }
        CtlCommand::Seed { .. } => print!("{}", seed_table(&answer)),
        CtlCommand::Pause | CtlCommand::Resume | CtlCommand::Rate { .. } => {
            println!(
                "paused: {}, max_requests_per_second: {}",
                answer["paused"], answer["max_requests_per_second"]
            );
            print!("{}", nodes_lines(&answer));
        }
        CtlCommand::Hosts { .. } => {
            print!("{}", hosts_table(&answer));
            print!("{}", nodes_lines(&answer));
        }
        CtlCommand::Queue { .. } => print!("{}", queue_table(&answer)),
        CtlCommand::Block { .. } | CtlCommand::Unblock { .. } => println!(
            "{} {}: blocked {}, {} queued URLs dropped",
            answer["kind"].as_str().unwrap_or("?"),
            answer["target"].as_str().unwrap_or("?"),
            answer["blocked"],
            answer["dropped"]
        ),
        CtlCommand::Host { .. } | CtlCommand::Slow { .. } => {
            println!("{}", serde_json::to_string_pretty(&answer)?)
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn token(file: Option<&PathBuf>) -> anyhow::Result<Option<String>> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the token from {}", path.display()))?;
        return Ok(Some(text.trim().to_owned()));
    }
    Ok(std::env::var(trawl::admin::auth::TOKEN_ENV).ok())
}

async fn request(
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> anyhow::Result<(u16, Value)> {
    let builder = awc::Client::builder().timeout(std::time::Duration::from_secs(30));
    let client = match tls {
        Some(tls) => builder
            .connector(awc::Connector::new().rustls_0_23(tls))
            .finish(),
        None => builder.finish(),
    };
    let method = awc::http::Method::from_bytes(method.as_bytes())?;
    let mut req = client.request(method, url);
    if let Some(token) = token {
        req = req.insert_header(("Authorization", format!("Bearer {token}")));
    }
    let sent = match body {
        Some(body) => req.send_json(&body).await,
        None => req.send().await,
    };
    let mut res = sent.map_err(|e| anyhow::anyhow!("{e}"))?;
    let bytes = res.body().limit(64 << 20).await?;
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if value.is_null() && !bytes.is_empty() {
        bail!("the answer is not JSON ({} bytes)", bytes.len());
    }
    Ok((res.status().as_u16(), value))
}

/// The status as a table: the totals, then one row per partition.
fn status_table(s: &Value) -> String {
    let mut out = String::new();
    let row = |out: &mut String, k: &str, v: String| out.push_str(&format!("{k:<20} {v}\n"));
    row(
        &mut out,
        "uptime",
        format!("{:.0} s", s["uptime_seconds"].as_f64().unwrap_or(0.0)),
    );
    row(&mut out, "paused", s["controls"]["paused"].to_string());
    row(
        &mut out,
        "rate limit",
        format!("{}/s (0 = none)", s["controls"]["max_requests_per_second"]),
    );
    if let Some(peers) = s.get("peers").filter(|p| !p.is_null()) {
        row(&mut out, "cluster", hearing_line(peers));
    }
    for key in [
        "queued",
        "completed",
        "active_hosts",
        "due_hosts",
        "refresh_hosts",
        "partition_restarts",
        "host_restarts",
    ] {
        row(&mut out, key, s[key].to_string());
    }
    row(
        &mut out,
        "warc records",
        s["archive"]["records"].to_string(),
    );
    row(&mut out, "events", s["archive"]["events"].to_string());
    out.push_str(&format!(
        "\n{:>9} {:>10} {:>10} {:>7} {:>7}\n",
        "partition", "queued", "completed", "active", "due"
    ));
    for p in s["partitions"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:>9} {:>10} {:>10} {:>7} {:>7}\n",
            p["id"], p["queued"], p["completed"], p["active_hosts"], p["due_hosts"]
        ));
    }
    out
}

/// A cluster node's hearing of its peers, in words.
fn hearing_line(peers: &Value) -> String {
    let live = peers["live_peers"].as_u64().unwrap_or(0);
    if peers["alone"].as_bool().unwrap_or(false) {
        format!(
            "ALONE: no peer heard for {} s (gossip not formed: check UDP between nodes)",
            peers["quiet_seconds"].as_u64().unwrap_or(0)
        )
    } else {
        format!("{live} peers live")
    }
}

/// One line per seed: outcome, reason, URL.
fn seed_table(answer: &Value) -> String {
    answer["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{:<10} {:<12} {}\n",
                r["outcome"].as_str().unwrap_or("?"),
                r["reason"].as_str().unwrap_or(""),
                r["url"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// The other nodes' answers to a cluster-wide request, one line each for
/// those that did not take it.
fn nodes_lines(answer: &Value) -> String {
    let mut out = String::new();
    for node in answer["nodes"].as_array().into_iter().flatten() {
        if let Some(error) = node["error"].as_str() {
            out.push_str(&format!(
                "node {}: NOT applied ({error})\n",
                node["node"].as_str().unwrap_or("?")
            ));
        }
    }
    out
}

/// A host listing as a table.
fn hosts_table(answer: &Value) -> String {
    let mut out = format!(
        "{:<40} {:<8} {:>8} {:>6} {:>9} {:>8} {:>7} {:>9}\n",
        "host", "state", "queued", "flight", "wait_ms", "fetched", "errors", "resp_ms"
    );
    for row in answer["hosts"].as_array().into_iter().flatten() {
        let response = row["response_ms"]
            .as_f64()
            .map_or("-".to_owned(), |ms| format!("{ms:.0}"));
        out.push_str(&format!(
            "{:<40} {:<8} {:>8} {:>6} {:>9} {:>8} {:>7} {:>9}\n",
            row["host"].as_str().unwrap_or("?"),
            row["state"].as_str().unwrap_or("?"),
            row["queued"],
            row["in_flight"],
            row["wait_ms"],
            row["fetched"],
            row["errors"],
            response
        ));
    }
    out.push_str(&format!(
        "{} of {} hosts\n",
        answer["hosts"].as_array().map_or(0, Vec::len),
        answer["total"]
    ));
    out
}

/// A host's queue as a table.
fn queue_table(answer: &Value) -> String {
    let mut out = format!(
        "next request in {} ms\n{:<4} {:<10} {:<6} {:<10} {:<14} url\n",
        answer["next_request_in_ms"], "prio", "score", "depth", "kind", "due_ms"
    );
    let rows = answer["queued"]
        .as_array()
        .into_iter()
        .chain(answer["refreshes"].as_array())
        .flatten();
    for row in rows {
        let due = row["due_ms"]
            .as_u64()
            .map_or("next".to_owned(), |ms| ms.to_string());
        let score = row["score"]
            .as_f64()
            .map_or("-".to_owned(), |s| format!("{s:.3e}"));
        out.push_str(&format!(
            "{:<4} {:<10} {:<6} {:<10} {:<14} {}\n",
            row["priority"],
            score,
            row["depth"],
            row["kind"].as_str().unwrap_or("?"),
            due,
            row["url"].as_str().unwrap_or("?")
        ));
    }
    out
}

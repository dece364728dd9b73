//! `trawl ctl`: the admin API from the command line, against a node's
//! admin address. Mutations send the token from `--token-file` or
//! `TRAWL_ADMIN_TOKEN`. An error answer prints its code and message and
//! exits 1.

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
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Debug, clap::Subcommand)]
enum CtlCommand {
    /// The node's status, as a table.
    Status,
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
    },
    /// One host's state.
    Host {
        /// The host name.
        host: String,
    },
}

/// Runs `trawl ctl`.
pub fn main(args: CtlArgs) -> anyhow::Result<ExitCode> {
    let token = token(args.token_file.as_ref())?;
    let base = format!("http://{}", args.admin);
    let (method, path, body) = match &args.command {
        CtlCommand::Status => ("GET", "/api/v1/status".to_owned(), None),
        CtlCommand::Pause => ("POST", "/api/v1/crawl/pause".to_owned(), None),
        CtlCommand::Resume => ("POST", "/api/v1/crawl/resume".to_owned(), None),
        CtlCommand::Rate { per_second } => (
            "PUT",
            "/api/v1/crawl/rate".to_owned(),
            Some(serde_json::json!({ "max_requests_per_second": per_second })),
        ),
        CtlCommand::Seed { urls } => (
            "POST",
            "/api/v1/seeds".to_owned(),
            Some(serde_json::json!({ "urls": urls })),
        ),
        CtlCommand::Host { host } => ("GET", format!("/api/v1/hosts/{host}"), None),
    };
    let url = format!("{base}{path}");
    let (status, answer) = actix_rt::System::new()
        .block_on(request(method, &url, token.as_deref(), body))
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
        CtlCommand::Seed { .. } => print!("{}", seed_table(&answer)),
        CtlCommand::Pause | CtlCommand::Resume | CtlCommand::Rate { .. } => {
            println!(
                "paused: {}, max_requests_per_second: {}",
                answer["paused"], answer["max_requests_per_second"]
            )
        }
        CtlCommand::Host { .. } => println!("{}", serde_json::to_string_pretty(&answer)?),
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
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> anyhow::Result<(u16, Value)> {
    let client = awc::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .finish();
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

//! `trawl robots`: what robots.txt decides for URLs, and by which line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use trawl::robots::{RobotsRecord, Rules};
use url::Url;

/// Arguments of `trawl robots`.
#[derive(Debug, clap::Args)]
pub struct RobotsArgs {
    /// The robots.txt file (needed unless --status says there was no body).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Simulated HTTP status of the robots.txt fetch (404, 503, ...); 0
    /// means no response at all (a network error).
    #[arg(long, default_value_t = 200)]
    status: u16,
    /// Product token of the crawler (e.g. `trawl`).
    #[arg(long)]
    agent: String,
    /// One JSON object per URL instead of tab-separated lines.
    #[arg(long)]
    json: bool,
    /// URLs to decide.
    #[arg(required = true)]
    urls: Vec<String>,
}

/// Runs `trawl robots`: one line per URL, exit 0 when every URL was decided.
pub fn main(args: RobotsArgs) -> anyhow::Result<ExitCode> {
    let body = match (&args.file, args.status) {
        (Some(path), _) => {
            std::fs::read(path).with_context(|| format!("reading {}", path.display()))?
        }
        (None, 200..=299) => bail!("--file is required when the robots.txt fetch succeeded"),
        (None, _) => Vec::new(),
    };
    let record = RobotsRecord {
        retry: None,
        status: (args.status != 0).then_some(args.status),
        fetched_at_ms: 0,
        body,
    };
    let rules = Rules::from_record(&record, &args.agent);
    let mut all_decided = true;
    for raw in &args.urls {
        let url = match Url::parse(raw) {
            Ok(url) => url,
            Err(err) => {
                all_decided = false;
                if args.json {
                    println!(
                        "{}",
                        serde_json::json!({ "url": raw, "error": err.to_string() })
                    );
                } else {
                    println!("error\t{raw}\t{err}");
                }
                continue;
            }
        };
        let decision = rules.decide(&url);
        let rule = decision.rule.as_ref().map(|r| r.line.as_str());
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "url": raw,
                    "allowed": decision.allowed,
                    "rule": rule,
                    "line": decision.rule.as_ref().map(|r| r.line_no),
                })
            );
        } else {
            let verdict = if decision.allowed {
                "allow"
            } else {
                "disallow"
            };
            println!("{verdict}\t{raw}\t{}", rule.unwrap_or("-"));
        }
    }
    Ok(if all_decided {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

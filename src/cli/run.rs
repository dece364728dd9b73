//! `trawl run`: the pipeline for any web.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

/// Arguments of `trawl run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A TOML file layered on the defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A seed URL (repeatable).
    #[arg(long = "seed")]
    seed: Vec<String>,
    /// A file of seed URLs, one per line (`#` starts a comment).
    #[arg(long)]
    seeds: Option<PathBuf>,
    /// Data directory (overrides `storage.data_dir`).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Exit once nothing is queued or in flight.
    #[arg(long)]
    until_idle: bool,
}

/// Runs `trawl run`.
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    let mut config = trawl::validate::load(args.config.as_deref())?;
    if let Some(data) = args.data {
        config.storage.data_dir = data;
    }
    let mut seeds = args.seed;
    if let Some(path) = &args.seeds {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading seeds from {}", path.display()))?;
        seeds.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    let outcome =
        actix_rt::System::new().block_on(super::crawl::crawl(config, seeds, args.until_idle))?;
    tracing::info!(
        completed = outcome.completed,
        warc_records = outcome.archive.records,
        events = outcome.archive.events,
        seconds = format!("{:.1}", outcome.elapsed.as_secs_f64()),
        "crawl stopped"
    );
    Ok(ExitCode::SUCCESS)
}

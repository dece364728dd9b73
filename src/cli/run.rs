//! `trawl run`: the pipeline for any web.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

/// Arguments of `trawl run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A TOML file layered on the defaults (the container image names its
    /// own in `TRAWL_CONFIG`). Repeatable: each file is layered on the one
    /// before (e.g. the cluster's shared settings, then the node's own).
    #[arg(long, env = "TRAWL_CONFIG")]
    config: Vec<PathBuf>,
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
    /// Offer the seeds as changed now: a seed URL removed from the crawl
    /// (gone, moved, blocked) comes back even though it was given as a
    /// seed before, and a fetched one is fetched again at once. Without
    /// it, only a seed never given before brings a removed URL back, so
    /// the same seed list can be given on every start.
    #[arg(long)]
    reseed: bool,
    /// Also write the end-of-run summary (printed on stderr) to this file,
    /// as one JSON object.
    #[arg(long)]
    summary_json: Option<PathBuf>,
}

/// The seed URLs of a file, one per line (`#` starts a comment), read as
/// they are offered.
fn seed_lines(path: &Path) -> anyhow::Result<impl Iterator<Item = anyhow::Result<String>>> {
    use std::io::BufRead;
    let file = std::fs::File::open(path)
        .with_context(|| format!("reading seeds from {}", path.display()))?;
    let path = path.to_owned();
    Ok(std::io::BufReader::new(file)
        .lines()
        .map(move |line| line.with_context(|| format!("reading seeds from {}", path.display())))
        .filter_map(|line| match line {
            Ok(l) if l.trim().is_empty() || l.trim_start().starts_with('#') => None,
            Ok(l) => Some(Ok(l.trim().to_owned())),
            Err(e) => Some(Err(e)),
        }))
}

/// Runs `trawl run`.
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    let loaded = trawl::validate::load_files(&args.config);
    let (format, color) = loaded.as_ref().map_or(
        (
            trawl::config::LogFormat::Text,
            trawl::config::LogColor::Auto,
        ),
        |c| (c.log.format, c.log.color),
    );
    super::init_logging(format, color);
    let mut config = loaded?;
    if let Some(data) = args.data {
        config.storage.data_dir = data;
    }
    let given = args.seed.into_iter().map(Ok);
    let from_file = match &args.seeds {
        Some(path) => Some(seed_lines(path)?),
        None => None,
    };
    let seeds = given.chain(from_file.into_iter().flatten());
    let mode = super::crawl::RunMode {
        until_idle: args.until_idle,
        reseed: args.reseed,
    };
    let report_dir = config.report_dir();
    let outcome = super::run_system(super::crawl::crawl(config, seeds, mode))?;
    tracing::info!(
        completed = outcome.completed,
        warc_records = outcome.archive.records,
        events = outcome.archive.events,
        seconds = format!("{:.1}", outcome.elapsed.as_secs_f64()),
        "crawl stopped"
    );
    eprintln!("{}", outcome.summary);
    if let Some(path) = &args.summary_json {
        outcome.summary.write_json(path)?;
    }
    // The crawl's own outcome decides the exit status; a report that
    // cannot be written is said, not made the crawl's failure.
    match super::summary::write_reports(&report_dir, &outcome.summary, &outcome.report) {
        Ok(written) => eprintln!("  report           {}", written.display()),
        Err(err) => {
            tracing::error!(error = %format!("{err:#}"), "the crawl report was not written")
        }
    }
    if outcome.seeds_all_refused {
        anyhow::bail!("every seed given was refused; nothing was crawled");
    }
    Ok(ExitCode::SUCCESS)
}

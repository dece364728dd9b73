//! `trawl report EVENTS...`: the crawl report of whole events files (every
//! run of a crawl, every node of a cluster), folded the way the archive
//! folds a run's events (`trawl::report`). Read a line at a time: a file
//! of any size takes the report's memory, not its own.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use trawl::report::{CrawlReport, ReportLimits};

/// Arguments of `trawl report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Events files (JSON lines, as `[events] path` writes them).
    #[arg(required = true)]
    events: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Hosts listed by name (the others are summed).
    #[arg(long, default_value_t = ReportLimits::default().max_hosts)]
    max_hosts: usize,
    /// Seeds listed by name.
    #[arg(long, default_value_t = ReportLimits::default().max_seeds)]
    max_seeds: usize,
}

/// Folds the files and prints the report.
pub fn main(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let mut report = CrawlReport::new(ReportLimits {
        max_hosts: args.max_hosts,
        max_seeds: args.max_seeds,
    });
    for path in &args.events {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let skipped = report
            .fold_lines(std::io::BufReader::new(file))
            .with_context(|| format!("reading {}", path.display()))?;
        if skipped > 0 {
            eprintln!(
                "{}: {skipped} lines are not events (skipped)",
                path.display()
            );
        }
    }
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&report)?),
        false => print!("{report}"),
    }
    Ok(ExitCode::SUCCESS)
}

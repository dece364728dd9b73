//! `trawl uploads join`: puts back together the WARC files a lost node
//! left in object storage as segments.
//!
//! A node's open WARC file reaches object storage in segments, one per
//! checkpoint, and whole once it closes (`src/upload/join.rs`). A node
//! lost with its disk never closes it: its last file stays in segments.
//! A node started again with the same id joins them itself; for a node
//! that is gone for good, the operator runs this. It must not be run for
//! a node that is still running (see the module doc of `join`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use trawl::upload::join::{files_with_segments, join_file};
use trawl::upload::transfer::TransferSettings;
use trawl::upload::{is_own_file, Target};

/// Arguments of `trawl uploads join`.
#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    /// A TOML file layered on the defaults (repeatable, as for `run`): its
    /// `[upload]` names the store, `[warc] prefix` the files' prefix.
    #[arg(long)]
    config: Vec<PathBuf>,
    /// The id of a node that is gone for good, whose files to join
    /// (repeatable).
    #[arg(long = "node", required_unless_present = "all")]
    nodes: Vec<String>,
    /// Join every file that has segments: no node of the crawl runs.
    #[arg(long, conflicts_with = "nodes")]
    all: bool,
    /// Where each file is put together before its upload (one file of up
    /// to `[warc] max_file_bytes` at a time).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    scratch: PathBuf,
}

/// Joins the segments of the chosen nodes' files, one file at a time,
/// and prints each file joined.
pub fn main(args: JoinArgs) -> anyhow::Result<ExitCode> {
    let config = trawl::validate::load_files(&args.config)?;
    let u = &config.upload;
    if !u.enabled {
        bail!("[upload] is not enabled in the config: there is no store to join in");
    }
    let target = Target::open(&u.url, &u.options, u.retries)?;
    let settings = TransferSettings {
        part_size: u.part_size,
        parts_in_flight: 2,
        verify: u.verify,
    };
    let prefixes: Vec<String> = args
        .nodes
        .iter()
        .map(|node| format!("{}-{node}", config.warc.prefix))
        .collect();
    let chosen = |file: &str| args.all || prefixes.iter().any(|p| is_own_file(file, p));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let files = files_with_segments(&target, chosen).await?;
        if files.is_empty() {
            eprintln!("no file has segments to join");
        }
        for file in files {
            let joined = join_file(&target, &args.scratch, &file, &settings)
                .await
                .with_context(|| format!("joining {file}"))?;
            let what = if joined.put { "joined" } else { "was whole" };
            println!(
                "{} {what}: {} bytes, {} segments deleted",
                target.location(&file),
                joined.bytes,
                joined.segments
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

//! `trawl simhash`: the near-duplicate fingerprint trawl gives HTML files.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use trawl::parse::charset::decode_html;
use trawl::parse::page_simhash;

/// Arguments of `trawl simhash`.
#[derive(Debug, clap::Args)]
pub struct SimhashArgs {
    /// HTML files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Prints `HEX<TAB>FILE` per file (`-` as HEX when the page has no
/// visible words), in order. Exits 1 if a file cannot be read.
pub fn main(args: SimhashArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    for path in &args.files {
        match std::fs::read(path) {
            Ok(bytes) => {
                let (html, _) = decode_html(&bytes, None);
                let hash =
                    page_simhash(&html).map_or_else(|| "-".to_owned(), |h| format!("{h:016x}"));
                writeln!(out, "{hash}\t{}", path.display())?;
            }
            Err(e) => {
                failed = true;
                eprintln!("error: {}: {e}", path.display());
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

//! `trawl url normalize`: the identity trawl gives each URL.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use trawl::url::UrlRules;

/// Arguments of `trawl url normalize`.
#[derive(Debug, clap::Args)]
pub struct NormalizeArgs {
    /// A TOML file layered on the defaults (`[url]`, `crawl.max_url_length`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the 128-bit fingerprint (hex) after a tab.
    #[arg(long)]
    fingerprint: bool,
    /// Absolute URLs.
    #[arg(required = true)]
    urls: Vec<String>,
}

/// Prints one line per URL, in order: the normal form (and fingerprint), or
/// `error<TAB>reason`. Exits 0 when every URL was accepted, 1 otherwise.
pub fn main(args: NormalizeArgs) -> anyhow::Result<ExitCode> {
    let config = trawl::validate::load(args.config.as_deref())?;
    let rules = UrlRules::new(&config.url, config.crawl.max_url_length);
    let mut out = std::io::stdout().lock();
    let mut rejected = false;
    for raw in &args.urls {
        match rules.parse(raw) {
            Ok(n) if args.fingerprint => writeln!(out, "{}\t{}", n.identity, n.fp.to_hex())?,
            Ok(n) => writeln!(out, "{}", n.identity)?,
            Err(e) => {
                rejected = true;
                writeln!(out, "error\t{e}")?;
            }
        }
    }
    Ok(if rejected {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

//! The subcommands' implementations (binary only).

pub mod crawl;
pub mod demo;
pub mod progress;
pub mod robots;
pub mod run;
pub mod simhash;
pub mod testweb;
pub mod url;

pub mod ctl;

use trawl::config::LogFormat;

/// Logs to stderr in `format`, `info` by default, `RUST_LOG` to change.
/// One line per notable event: nothing is logged per request at `info`.
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,actix_server=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

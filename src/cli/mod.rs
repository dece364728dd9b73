//! The subcommands' implementations (binary only).

pub mod crawl;
pub mod demo;
pub mod progress;
pub mod robots;
pub mod run;
pub mod simhash;
pub mod testweb;
pub mod url;

/// Logs to stderr, `info` by default, `RUST_LOG` to change.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,actix_server=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

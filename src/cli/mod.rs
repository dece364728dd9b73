//! The subcommands' implementations (binary only).

pub mod cluster;
pub mod crawl;
pub mod demo;
pub mod previous;
pub mod progress;
pub mod report;
pub mod robots;
pub mod run;
pub mod simhash;
pub mod summary;
pub mod testweb;
pub mod uploads;
pub mod url;

pub mod ctl;

use std::future::Future;
use std::io::IsTerminal;

use trawl::config::{LogColor, LogFormat};

/// Logs to stderr in `format`, `info` by default, `RUST_LOG` to change.
/// One line per notable event: nothing is logged per request at `info`.
/// Text lines are coloured as `color` says: by default only on a
/// terminal, so a log file or the journal holds plain lines.
pub fn init_logging(format: LogFormat, color: LogColor) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,actix_server=warn"));
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(color.ansi(std::io::stderr().is_terminal(), no_color))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// Runs `work` on a new actix system and drops the system inside its
/// runtime.
///
/// Why: a command that fails after starting actors (the node started, its
/// bridge's port then found in use) returns with actors the runtime never
/// polled. Dropping the system polls each once more to stop it, and an
/// actor starting then sets up its timers, which needs the runtime: outside
/// it that is a panic ("there is no reactor running") printed before the
/// command's own error. Inside it, they start and stop, and the error is
/// the one line the user sees.
pub fn run_system<F: Future>(work: F) -> F::Output {
    let system = actix_rt::System::new();
    let output = system.block_on(work);
    let runtime = system.runtime().tokio_runtime().handle().clone();
    let _inside = runtime.enter();
    drop(system);
    output
}

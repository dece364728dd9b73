//! Progress display: a live bar on a terminal, periodic log lines otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use actix::Addr;
use indicatif::{ProgressBar, ProgressStyle};
use trawl::actors::{GetStatus, Node};

/// How often the display refreshes on a terminal.
const TTY_EVERY: Duration = Duration::from_millis(250);
/// How often a log line is written when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// A running progress display.
pub struct Progress {
    task: actix_rt::task::JoinHandle<()>,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Starts reporting on `node`.
    pub fn start(node: Addr<Node>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .expect("static template"),
            );
            bar
        });
        let every = if bar.is_some() { TTY_EVERY } else { LOG_EVERY };
        let shown = bar.clone();
        let task = actix_rt::spawn(async move {
            let started = Instant::now();
            loop {
                actix_rt::time::sleep(every).await;
                let Ok(s) = node.send(GetStatus).await else {
                    return;
                };
                let rate = s.completed as f64 / started.elapsed().as_secs_f64().max(1e-3);
                let line = format!(
                    "completed {} · queued {} · hosts {} · {:.0} pages/s · warc {:.1} MB",
                    s.completed,
                    s.queued,
                    s.active_hosts,
                    rate,
                    s.archive.bytes as f64 / 1e6
                );
                match &shown {
                    Some(bar) => {
                        bar.set_message(line);
                        bar.tick();
                    }
                    None => tracing::info!("{line}"),
                }
            }
        });
        Progress { task, bar }
    }

    /// Stops the display.
    pub fn finish(self) {
        self.task.abort();
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

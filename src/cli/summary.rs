//! The end-of-crawl summary: what this run did, read from the node's own
//! counters once it has stopped, so a script needs no `/metrics` scrape
//! while the crawl runs. Printed on stderr (a few lines) and, with `trawl
//! run --summary-json FILE`, written as one JSON object.
//!
//! The counts are this process's: a crawl resumed from its data directory
//! reports what this run added, not the crawl's totals.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use prometheus::core::Collector;
use prometheus::IntCounterVec;
use serde::Serialize;

use super::crawl::{Ended, SeedCounts};
use trawl::metrics::Metrics;

/// What one run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Wall time of the run, in seconds.
    pub seconds: f64,
    /// Stopped by SIGINT/SIGTERM, not by running out of work.
    pub interrupted: bool,
    /// Why the run ended: `idle`, `interrupted`, `max_pages` or
    /// `max_duration` (`[crawl]`'s limits).
    pub ended: Ended,
    /// What became of the seeds given.
    pub seeds: SeedCounts,
    /// Pages whose processing completed.
    pub pages_completed: u64,
    /// Responses received, by status class (`2xx` … `5xx`).
    pub responses: BTreeMap<String, u64>,
    /// Response body bytes received.
    pub bytes_fetched: u64,
    /// WARC records written.
    pub warc_records: u64,
    /// WARC bytes written.
    pub warc_bytes: u64,
    /// Fetches that failed, by kind (`timeout`, `connect`, ...).
    pub fetch_errors: BTreeMap<String, u64>,
    /// URLs that left the crawl, by reason (`gone`, `disallowed`, `moved`).
    pub removed: BTreeMap<String, u64>,
    /// Candidate URLs not admitted, by reason (depth, scope and trap
    /// rules, budgets, the per-page link cap).
    pub urls_dropped: BTreeMap<String, u64>,
    /// Duplicate responses, by kind.
    pub duplicates: BTreeMap<String, u64>,
}

impl Summary {
    /// The summary of a run that took `elapsed`, ended as `ended`,
    /// completed `completed` pages and offered `seeds`, from `metrics`.
    pub fn new(
        metrics: &Metrics,
        elapsed: Duration,
        ended: Ended,
        completed: u64,
        seeds: SeedCounts,
    ) -> Self {
        Summary {
            seconds: (elapsed.as_secs_f64() * 10.0).round() / 10.0,
            interrupted: ended == Ended::Interrupted,
            ended,
            seeds,
            pages_completed: completed,
            responses: by_label(&metrics.pages),
            bytes_fetched: metrics.fetched_bytes.get(),
            warc_records: metrics.warc_records.get(),
            warc_bytes: metrics.warc_bytes.get(),
            fetch_errors: by_label(&metrics.fetch_errors),
            removed: by_label(&metrics.removed),
            urls_dropped: by_label(&metrics.urls_dropped),
            duplicates: by_label(&metrics.duplicates),
        }
    }

    /// Writes the summary to `path` as one JSON object.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let json = serde_json::to_vec_pretty(self).context("encoding the summary")?;
        std::fs::write(path, json)
            .with_context(|| format!("writing the summary to {}", path.display()))
    }
}

/// Writes the run's `summary.json`, and its crawl report as
/// `report.json` and `report.txt`, into `dir` (created if need be); each
/// file whole or not at all (written aside, synced, then renamed).
/// Returns the text report's path.
pub fn write_reports(
    dir: &Path,
    summary: &Summary,
    report: &trawl::report::CrawlReport,
) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the report directory {}", dir.display()))?;
    let write = |name: &str, bytes: Vec<u8>| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.join(name);
        let aside = dir.join(format!(".{name}.tmp"));
        let written = std::fs::File::create(&aside).and_then(|mut file| {
            std::io::Write::write_all(&mut file, &bytes)?;
            file.sync_all()
        });
        written
            .and_then(|()| std::fs::rename(&aside, &path))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    };
    write("summary.json", serde_json::to_vec_pretty(summary)?)?;
    write("report.json", serde_json::to_vec_pretty(report)?)?;
    write("report.txt", report.to_string().into_bytes())
}

/// A counter family's non-zero series by their (one) label's value.
fn by_label(family: &IntCounterVec) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for metric in family.collect().iter().flat_map(|f| f.get_metric()) {
        let value = metric.get_counter().get_value() as u64;
        if value == 0 {
            continue;
        }
        let label = metric
            .get_label()
            .iter()
            .map(|l| l.value())
            .collect::<Vec<_>>()
            .join(",");
        *out.entry(label).or_default() += value;
    }
    out
}

/// The drop reasons of seeded domains cut short by a budget, and the
/// setting that lets them through (see `frontier/budget.rs`).
const SEEDED_BUDGETS: [(&str, &str); 2] = [
    (
        "budget_seeded_domain",
        "[budget] seeded_base_pages or max_pages_per_domain",
    ),
    ("budget_seeded_host", "[budget] max_urls_per_host"),
];

/// `a 3 · b 1`, or `none`.
fn list(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return "none".into();
    }
    counts
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self.ended {
            Ended::Interrupted => "interrupted",
            Ended::Idle => "ran out of work",
            Ended::MaxPages => "stopped at [crawl] max_pages (the next run resumes)",
            Ended::MaxDuration => "stopped at [crawl] max_duration (the next run resumes)",
        };
        writeln!(f, "crawl summary: {} s, {how}", self.seconds)?;
        writeln!(f, "  pages completed  {}", self.pages_completed)?;
        writeln!(f, "  responses        {}", list(&self.responses))?;
        writeln!(
            f,
            "  fetched          {} bytes; archived {} records, {} bytes of WARC",
            self.bytes_fetched, self.warc_records, self.warc_bytes
        )?;
        writeln!(f, "  fetch errors     {}", list(&self.fetch_errors))?;
        writeln!(f, "  removed          {}", list(&self.removed))?;
        writeln!(f, "  URLs dropped     {}", list(&self.urls_dropped))?;
        for (label, setting) in SEEDED_BUDGETS {
            if let Some(n) = self.urls_dropped.get(label).filter(|n| **n > 0) {
                writeln!(
                    f,
                    "  note             {n} URLs of domains you seeded were over budget ({label}): raise {setting} to crawl them (the log names each domain)"
                )?;
            }
        }
        writeln!(f, "  duplicates       {}", list(&self.duplicates))?;
        let s = &self.seeds;
        write!(
            f,
            "  seeds            admitted {} · seen {} · refused {}",
            s.admitted, s.seen, s.filtered
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_come_from_the_metrics_zeros_left_out() {
        let metrics = Metrics::new();
        metrics.pages.with_label_values(&["2xx"]).inc_by(7);
        metrics.pages.with_label_values(&["4xx"]).inc();
        metrics
            .fetch_errors
            .with_label_values(&["timeout"])
            .inc_by(2);
        metrics.removed.with_label_values(&["gone"]).inc();
        let seeds = SeedCounts {
            admitted: 1,
            ..SeedCounts::default()
        };
        let s = Summary::new(&metrics, Duration::from_millis(1234), Ended::Idle, 8, seeds);
        assert_eq!(s.seconds, 1.2);
        assert_eq!(s.responses.get("2xx"), Some(&7));
        assert_eq!(s.responses.get("4xx"), Some(&1));
        assert!(!s.responses.contains_key("5xx"));
        assert_eq!(s.fetch_errors, BTreeMap::from([("timeout".into(), 2)]));
        let text = s.to_string();
        assert!(text.contains("pages completed  8"), "{text}");
        assert!(!text.contains("seeded"), "{text}");
        assert!(text.contains("2xx 7 · 4xx 1"), "{text}");
        assert!(text.contains("duplicates       none"), "{text}");
        let json: serde_json::Value = serde_json::to_value(&s).unwrap();
        assert_eq!(json["removed"]["gone"], 1);
        assert_eq!(json["seeds"]["admitted"], 1);
        assert_eq!(json["ended"], "idle");
        assert_eq!(json["interrupted"], false);
    }

    #[test]
    fn a_run_stopped_by_a_limit_says_which_and_that_the_next_resumes() {
        let metrics = Metrics::new();
        let seeds = SeedCounts::default();
        let s = Summary::new(&metrics, Duration::ZERO, Ended::MaxPages, 50, seeds);
        assert!(!s.interrupted);
        let text = s.to_string();
        assert!(text.contains("stopped at [crawl] max_pages"), "{text}");
        let json: serde_json::Value = serde_json::to_value(&s).unwrap();
        assert_eq!(json["ended"], "max_pages");
    }

    #[test]
    fn a_seeded_domain_cut_short_is_said_with_the_setting_to_raise() {
        let metrics = Metrics::new();
        metrics
            .urls_dropped
            .with_label_values(&["budget_seeded_domain"])
            .inc_by(4900);
        let s = Summary::new(
            &metrics,
            Duration::ZERO,
            Ended::Idle,
            0,
            SeedCounts::default(),
        );
        let text = s.to_string();
        assert!(
            text.contains("4900 URLs of domains you seeded were over budget (budget_seeded_domain): raise [budget] seeded_base_pages"),
            "{text}"
        );
    }
}

//! The plain-text rendering of a [`CrawlReport`]: one section a report,
//! in Heritrix's order (hosts, MIME types, status codes, seeds, frontier),
//! columns aligned, largest first, for a terminal or an email.

use std::fmt::{self, Write as _};

use super::{CrawlReport, HostReport, Tally};

/// Rows of a section shown in the text (the JSON has them all).
pub const TEXT_ROWS: usize = 200;

impl fmt::Display for CrawlReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "crawl report: {} responses, {} bytes, {} hosts",
            self.totals.responses,
            self.totals.bytes,
            self.hosts.len()
        )?;
        self.hosts_section(f)?;
        mime_section(f, self)?;
        status_section(f, self)?;
        self.seeds_section(f)?;
        self.frontier_section(f)
    }
}

impl CrawlReport {
    fn hosts_section(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "\nhosts (most responses first)")?;
        let mut hosts: Vec<(&String, &HostReport)> = self.hosts.iter().collect();
        hosts.sort_by(|a, b| b.1.responses.cmp(&a.1.responses).then(a.0.cmp(b.0)));
        writeln!(
            f,
            "  {:<40} {:>9} {:>12} {:>6} {:>6} {:>6} {:>6}  {:<16} {:>10} {:>10}",
            "host",
            "responses",
            "bytes",
            "2xx",
            "3xx",
            "4xx",
            "5xx",
            "robots",
            "delay min",
            "delay mean"
        )?;
        for (name, host) in hosts.iter().take(TEXT_ROWS) {
            host_row(f, name, host)?;
        }
        if hosts.len() > TEXT_ROWS {
            writeln!(
                f,
                "  ... {} more hosts (the JSON report lists them)",
                hosts.len() - TEXT_ROWS
            )?;
        }
        if let Some(other) = &self.other_hosts {
            host_row(f, "(hosts past [report] max_hosts)", other)?;
        }
        Ok(())
    }

    fn seeds_section(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "\nseeds")?;
        writeln!(
            f,
            "  {:<8} {:>6} {:>7}  {:<48} led to",
            "offered", "status", "found", "seed"
        )?;
        for (url, seed) in self.seeds.iter().take(TEXT_ROWS) {
            let offered = seed.offered.as_deref().unwrap_or("-");
            let offered = offered.split(':').next().unwrap_or(offered);
            let status = seed.status.map_or("-".into(), |s| s.to_string());
            let mut led_to = match (&seed.led_to, seed.led_to_status) {
                (Some(to), Some(s)) => format!("{to} ({s})"),
                (Some(to), None) => to.clone(),
                _ => String::new(),
            };
            if let Some(reason) = &seed.removed {
                let _ = write!(
                    led_to,
                    "{}removed: {reason}",
                    if led_to.is_empty() { "" } else { "; " }
                );
            }
            writeln!(
                f,
                "  {offered:<8} {status:>6} {:>7}  {url:<48} {led_to}",
                seed.found
            )?;
        }
        if self.seeds.len() > TEXT_ROWS {
            writeln!(
                f,
                "  ... {} more seeds (the JSON report lists them)",
                self.seeds.len() - TEXT_ROWS
            )?;
        }
        if self.seeds_not_listed > 0 {
            writeln!(
                f,
                "  (seeds past [report] max_seeds are not listed: {} mentions of them)",
                self.seeds_not_listed
            )?;
        }
        Ok(())
    }

    fn frontier_section(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(frontier) = &self.frontier else {
            return Ok(());
        };
        writeln!(
            f,
            "\nfrontier: {} URLs queued at the {} hosts listed (of {} with work; most first)",
            frontier.queued,
            frontier.hosts.len(),
            frontier.hosts_total
        )?;
        writeln!(
            f,
            "  {:<40} {:>9} {:>8}  state",
            "host", "queued", "wait ms"
        )?;
        for row in frontier.hosts.iter().take(TEXT_ROWS) {
            let state = serde_json::to_value(row.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            writeln!(
                f,
                "  {:<40} {:>9} {:>8}  {state}",
                row.host, row.queued, row.wait_ms
            )?;
        }
        Ok(())
    }
}

fn host_row(f: &mut fmt::Formatter<'_>, name: &str, host: &HostReport) -> fmt::Result {
    let class = |c: u16| -> u64 {
        host.statuses
            .iter()
            .filter(|(s, _)| **s / 100 == c)
            .map(|(_, n)| n)
            .sum()
    };
    let robots = host.robots.map_or("-".to_owned(), |r| {
        format!("{} ({})", r.outcome.name(), r.status)
    });
    let ms = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    writeln!(
        f,
        "  {name:<40} {:>9} {:>12} {:>6} {:>6} {:>6} {:>6}  {robots:<16} {:>10} {:>10}",
        host.responses,
        host.bytes,
        class(2),
        class(3),
        class(4),
        class(5),
        ms(host.delay.min_ms),
        ms(host.delay.mean_ms)
    )
}

/// Rows of `(name, tally)`, most responses first.
fn tally_rows<'a, K: fmt::Display + 'a>(
    f: &mut fmt::Formatter<'_>,
    rows: impl Iterator<Item = (K, &'a Tally)>,
) -> fmt::Result {
    let mut rows: Vec<(K, &Tally)> = rows.collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1.responses));
    writeln!(f, "  {:<40} {:>9} {:>12}", "", "responses", "bytes")?;
    for (name, tally) in rows.iter().take(TEXT_ROWS) {
        writeln!(
            f,
            "  {:<40} {:>9} {:>12}",
            name.to_string(),
            tally.responses,
            tally.bytes
        )?;
    }
    Ok(())
}

fn mime_section(f: &mut fmt::Formatter<'_>, report: &CrawlReport) -> fmt::Result {
    writeln!(f, "\nMIME types")?;
    tally_rows(f, report.mime_types.iter())
}

fn status_section(f: &mut fmt::Formatter<'_>, report: &CrawlReport) -> fmt::Result {
    writeln!(f, "\nstatus codes")?;
    tally_rows(f, report.status_codes.iter())
}

//! Recurring crawls (`[previous]`): a crawl told about an earlier crawl's
//! CDXJ indexes starts from that crawl's pages (no seed given), and a page
//! whose payload is unchanged is written as a revisit record pointing at
//! the earlier copy's very record (`WARC-Refers-To`, `-Target-URI` and
//! `-Date`, read from the earlier WARC file beside its index), not stored
//! again; the earlier pages are not offered as seeds; warcio reads the
//! files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::common::*;
use trawl::warc::cdxj::Capture;

/// A record of a WARC file: type, target, and the headers that matter.
#[derive(Debug)]
struct Record {
    kind: String,
    target: String,
    id: String,
    refers_to: Option<String>,
    refers_to_uri: Option<String>,
    refers_to_date: Option<String>,
    digest: Option<String>,
}

fn records(files: &[std::path::PathBuf]) -> Vec<Record> {
    let mut out = Vec::new();
    for path in files {
        let reader = warc::WarcReader::from_path_gzip(path).unwrap();
        for record in reader.iter_records() {
            let record = record.unwrap();
            let header = |h: warc::WarcHeader| record.header(h).map(|v| v.into_owned());
            out.push(Record {
                kind: record.warc_type().to_string(),
                target: header(warc::WarcHeader::TargetURI).unwrap_or_default(),
                id: header(warc::WarcHeader::RecordID).unwrap_or_default(),
                refers_to: header(warc::WarcHeader::RefersTo),
                refers_to_uri: header(warc::WarcHeader::Unknown(
                    "warc-refers-to-target-uri".into(),
                )),
                refers_to_date: header(warc::WarcHeader::Unknown("warc-refers-to-date".into())),
                digest: header(warc::WarcHeader::PayloadDigest),
            });
        }
    }
    out
}

/// Each record's `WARC-Date` as written (the `warc` crate's reader gives
/// it to the second), by `WARC-Record-ID`.
fn written_dates(files: &[std::path::PathBuf]) -> BTreeMap<String, String> {
    use std::io::Read as _;
    let mut dates = BTreeMap::new();
    for path in files {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        for record in text.split("WARC/1.1\r\n").skip(1) {
            let head = &record[..record.find("\r\n\r\n").unwrap_or(record.len())];
            let field = |name: &str| {
                head.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
            };
            if let (Some(id), Some(date)) = (field("WARC-Record-ID:"), field("WARC-Date:")) {
                dates.insert(id, date);
            }
        }
    }
    dates
}

/// Runs `trawl run --until-idle` on `toml` with `seeds` to the end.
fn run(data: &Path, toml: &str, seeds: &[String]) {
    let config_path = data.join("trawl.toml");
    std::fs::write(&config_path, toml).unwrap();
    let seeds_path = data.join("seeds.txt");
    std::fs::write(&seeds_path, seeds.join("\n")).unwrap();
    let mut child = spawn_run(&config_path, &seeds_path);
    assert!(wait_exit(&mut child, Duration::from_secs(120)).success());
}

#[test]
fn a_recurring_crawl_starts_from_the_earlier_one_and_revisits_what_did_not_change() {
    let (web, server) = start_web(3, 8, 11);
    let port = server.addr().port();
    let first = tempfile::tempdir().unwrap();
    run(
        first.path(),
        &config_toml(first.path(), 5, 2),
        &web.seeds(port),
    );
    let first_config = config(first.path(), 5, 2);
    // The earlier crawl's full copies, by payload digest: (record id, URL,
    // date), as its WARC files hold them.
    let mut copies: BTreeMap<String, BTreeSet<(String, String, String)>> = BTreeMap::new();
    let first_files = warc_files(&first_config);
    let dates = written_dates(&first_files);
    for record in records(&first_files) {
        if record.kind == "response" && !record.target.starts_with("dns:") {
            let date = dates[&record.id].clone();
            assert!(date.contains('.'), "written to the microsecond: {date}");
            let known = (record.id, record.target, date);
            copies
                .entry(record.digest.unwrap())
                .or_default()
                .insert(known);
        }
    }
    let mut earlier_pages = BTreeSet::new();
    let index_dir = first.path().join("warc");
    for entry in std::fs::read_dir(&index_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "cdxj") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let capture = Capture::parse(line).unwrap();
            if capture.is_page() {
                earlier_pages.insert(capture.url.clone());
            }
        }
    }
    assert!(!copies.is_empty() && !earlier_pages.is_empty());
    let first_pages: BTreeSet<String> = page_events(&first_config)
        .into_iter()
        .map(|e| e.url)
        .collect();

    // The recurring crawl: no seeds, the earlier crawl's index.
    let second = tempfile::tempdir().unwrap();
    let toml = format!(
        "{}\n[previous]\nindexes = [{:?}]\nreseed = true\n",
        config_toml(second.path(), 5, 2),
        index_dir
    );
    run(second.path(), &toml, &[]);
    server.stop();
    let second_config = config(second.path(), 5, 2);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(second.path().join("reports/report.json")).unwrap())
            .unwrap();
    // They enter without a via, as seeds do, but were offered as none.
    let seeds = report["seeds"].as_object().unwrap();
    assert!(!seeds.is_empty());
    assert!(seeds.values().all(|s| s["offered"].is_null()), "{seeds:?}");
    let events = page_events(&second_config);
    let fetched: BTreeSet<&str> = events.iter().map(|e| e.url.as_str()).collect();
    for url in &earlier_pages {
        assert!(
            fetched.contains(url.as_str()),
            "{url} of the earlier crawl not fetched again"
        );
    }
    assert!(first_pages.iter().all(|u| fetched.contains(u.as_str())));

    let files = warc_files(&second_config);
    warcio_check(&files);
    let mut revisits = BTreeMap::new();
    for record in records(&files) {
        if !matches!(record.kind.as_str(), "response" | "revisit")
            || !earlier_pages.contains(&record.target)
        {
            continue;
        }
        let digest = record.digest.clone().unwrap();
        let Some(known) = copies.get(&digest) else {
            // Changed since (or never stored in full): stored in full.
            assert_eq!(record.kind, "response", "{record:?}");
            continue;
        };
        assert_eq!(
            record.kind, "revisit",
            "an unchanged payload stored again: {record:?}"
        );
        // The earlier record itself, named exactly (read from its file).
        let pointed = (
            record.refers_to.clone().unwrap(),
            record.refers_to_uri.clone().unwrap(),
            record.refers_to_date.clone().unwrap(),
        );
        assert!(
            known.contains(&pointed),
            "{record:?} points at none of {known:?}"
        );
        revisits.insert(record.target.clone(), pointed.1);
    }
    assert!(!revisits.is_empty());
    // Each revisit's event names the copy it points at.
    for e in events.iter().filter(|e| revisits.contains_key(&e.url)) {
        assert_eq!(e.duplicate_of.as_ref(), revisits.get(&e.url), "{}", e.url);
    }
}

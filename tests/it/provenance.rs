//! Provenance: each page's event and its WARC metadata record say where
//! the URL was found (`via`) and how (the hop path from its seed: `L`
//! link, `R` redirect, `M` sitemap), how long the fetch took and the
//! address fetched from; the metadata record lists the page's outlinks
//! and points at the response it describes (`WARC-Concurrent-To`). The
//! paths travel through the store (each queue entry is read back from
//! it before its fetch), and warcio reads the files.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;
use trawl::events::{Event, EventKind};

/// A metadata record: its target, the record it describes, its fields.
#[derive(Debug)]
struct Metadata {
    target: String,
    concurrent_to: String,
    fields: Vec<(String, String)>,
}

impl Metadata {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn outlinks(&self) -> BTreeSet<String> {
        self.fields
            .iter()
            .filter(|(n, _)| n == "outlink")
            .map(|(_, v)| v.strip_suffix(" L a/@href").expect(v).to_owned())
            .collect()
    }
}

/// What the crawl's WARC files hold besides pages.
struct Records {
    metadata: Vec<Metadata>,
    /// The record id of every response or revisit, by its target.
    responses: BTreeMap<String, String>,
    /// The blocks of the `dns:` records, by name.
    dns: BTreeMap<String, Vec<String>>,
}

fn read_records(files: &[std::path::PathBuf]) -> Records {
    let mut metadata = Vec::new();
    let mut responses = BTreeMap::new();
    let mut dns: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in files {
        let reader = warc::WarcReader::from_path_gzip(path).unwrap();
        for record in reader.iter_records() {
            let record = record.unwrap();
            let header = |h| record.header(h).map(|v| v.into_owned()).unwrap_or_default();
            let target = header(warc::WarcHeader::TargetURI);
            match record.warc_type().to_string().as_str() {
                "metadata" => {
                    let body = String::from_utf8(record.body().to_vec()).unwrap();
                    let fields = body
                        .lines()
                        .map(|l| {
                            let (n, v) = l.split_once(": ").expect(l);
                            (n.to_owned(), v.to_owned())
                        })
                        .collect();
                    metadata.push(Metadata {
                        target,
                        concurrent_to: header(warc::WarcHeader::ConcurrentTo),
                        fields,
                    });
                }
                "response" if target.starts_with("dns:") => {
                    assert_eq!(header(warc::WarcHeader::ContentType), "text/dns");
                    let body = String::from_utf8(record.body().to_vec()).unwrap();
                    dns.entry(target["dns:".len()..].to_owned())
                        .or_default()
                        .push(body);
                }
                "response" | "revisit" => {
                    responses.insert(target, header(warc::WarcHeader::RecordID));
                }
                _ => {}
            }
        }
    }
    Records {
        metadata,
        responses,
        dns,
    }
}

#[test]
fn every_page_says_where_it_was_found_and_how_in_its_event_and_its_metadata_record() {
    // The behaving web: robots.txt naming sitemaps, sitemaps listing
    // pages, links between pages.
    let (web, server) = start_web(6, 12, 41);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = config_with(data.path(), 10, 2, "");
    let seeds = web.seeds(port);
    crawl_in_process(config.clone(), seeds.clone());
    server.stop();

    let events: Vec<Event> = events(&config)
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::Page | EventKind::Sitemap))
        .collect();
    let by_url: BTreeMap<&str, &Event> = events.iter().map(|e| (e.url.as_str(), e)).collect();
    let files = warc_files(&config);
    warcio_check(&files);
    let Records {
        metadata,
        responses,
        dns,
    } = read_records(&files);
    let metadata_of: BTreeMap<&str, &Metadata> =
        metadata.iter().map(|m| (m.target.as_str(), m)).collect();

    let mut hops_seen = BTreeSet::new();
    for e in &events {
        let hops = e.hops.as_deref().expect("a page event has a hop path");
        let hop = e
            .hop
            .as_deref()
            .expect("a page event says how it was reached");
        assert!(e.fetch_ms.is_some(), "{}", e.url);
        assert_eq!(e.ip.as_deref(), Some("127.0.0.1"), "{}", e.url);
        match &e.via {
            None => {
                assert_eq!((hop, hops), ("seed", ""), "{}", e.url);
                assert!(
                    seeds.contains(&e.url),
                    "{} has no via and is no seed",
                    e.url
                );
            }
            Some(via) => {
                let last = hops.chars().last().expect("a found URL has a hop");
                hops_seen.insert(last);
                let name = match last {
                    'L' => "link",
                    'R' => "redirect",
                    'M' => "sitemap",
                    other => panic!("{}: hop {other}", e.url),
                };
                assert_eq!(hop, name, "{}", e.url);
                if via.ends_with("/robots.txt") {
                    assert_eq!(hops, "M", "{}: listed by robots.txt", e.url);
                    continue;
                }
                // One hop further than the page it was found on, and
                // listed among that page's outlinks (a link or a
                // sitemap entry).
                let parent = by_url
                    .get(via.as_str())
                    .unwrap_or_else(|| panic!("{}: via {via} was not archived", e.url));
                let parent_hops = parent.hops.as_deref().unwrap();
                assert_eq!(hops, format!("{parent_hops}{last}"), "{}", e.url);
                if last == 'L' {
                    let outlinks = metadata_of[via.as_str()].outlinks();
                    assert!(
                        outlinks.contains(&e.url),
                        "{} not among {via}'s outlinks",
                        e.url
                    );
                }
            }
        }
        // Its metadata record describes its response and says the same.
        let m = metadata_of
            .get(e.url.as_str())
            .unwrap_or_else(|| panic!("{} has no metadata record", e.url));
        assert_eq!(Some(&m.concurrent_to), responses.get(&e.url), "{}", e.url);
        assert_eq!(m.field("via"), e.via.as_deref(), "{}", e.url);
        let written_hops = m.field("hopsFromSeed").unwrap_or("");
        assert_eq!(written_hops, e.hops.as_deref().unwrap(), "{}", e.url);
        let fetch_ms: u64 = m.field("fetchTimeMs").unwrap().parse().unwrap();
        assert_eq!(Some(fetch_ms), e.fetch_ms, "{}", e.url);
    }
    assert_eq!(metadata.len(), events.len(), "one metadata record a page");
    assert!(hops_seen.contains(&'L'), "{hops_seen:?}");
    assert!(hops_seen.contains(&'M'), "{hops_seen:?}");
    // Links carry the path on: some page is two links from its seed.
    assert!(events
        .iter()
        .any(|e| e.hops.as_deref().is_some_and(|h| h.ends_with("LL"))));
    // Each host's name, once: the answer the crawl used (its override,
    // "*.test" to 127.0.0.1, with no TTL).
    let hosts: BTreeSet<String> = seeds
        .iter()
        .map(|s| url::Url::parse(s).unwrap().host_str().unwrap().to_owned())
        .collect();
    assert_eq!(dns.keys().cloned().collect::<BTreeSet<_>>(), hosts);
    for (host, blocks) in &dns {
        assert_eq!(blocks.len(), 1, "{host}: {blocks:?}");
        let lines: Vec<&str> = blocks[0].lines().collect();
        assert_eq!(lines[0].len(), 14, "a 14-digit time first: {lines:?}");
        assert!(lines[0].bytes().all(|b| b.is_ascii_digit()), "{lines:?}");
        assert_eq!(lines[1..], [format!("{host}.\t0\tIN\tA\t127.0.0.1")]);
    }
}

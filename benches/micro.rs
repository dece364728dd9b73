//! Micro-benchmarks of the per-page hot paths: link extraction (and what
//! its bounds cost: an ordinary page against one html5ever call, and the
//! pathological pages the bounds cut short), URL normalisation and
//! fingerprints, simhash, the store's batched seen check (exact and Bloom
//! modes), WARC record writing, the language detector and the type sniff.
//!
//! `cargo bench --bench micro` (add `-- parse` to run one group).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use trawl::config::Config;
use trawl::frontier::{EntryKind, Priority};
use trawl::parse::{parse_html, read_page, CutReason, ParseEngine, ParseLimits};
use trawl::store::{AdmitEntry, PartitionStore, SeenMode, SeenSettings, StoreEnv};
use trawl::testweb::{SyntheticWeb, WebSpec};
use trawl::url::{Fingerprint, UrlRules};
use trawl::warc::{Exchange, WarcSettings, WarcWriter};

fn web() -> SyntheticWeb {
    SyntheticWeb::new(WebSpec {
        hosts: 100,
        pages_per_host: 100,
        seed: 1,
        behaviours: false,
    })
}

fn link_extraction(c: &mut Criterion) {
    let web = web();
    let pages: Vec<String> = (1..21).map(|id| web.render(1, id, 8080)).collect();
    let bytes: usize = pages.iter().map(String::len).sum();
    let base = url::Url::parse("http://site0001.test:8080/p/1.html").unwrap();
    let limits = ParseLimits::from(&Config::defaults().parse);
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(bytes as u64 / pages.len() as u64));
    group.bench_function("links_per_page", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % pages.len();
            black_box(parse_html(&pages[i], &base, &limits))
        })
    });
    // The same pages with `[parse] detect_language`: the language
    // detector's cost is the difference.
    let with_language = ParseLimits {
        detect_language: true,
        ..limits.clone()
    };
    group.bench_function("links_per_page_with_language", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % pages.len();
            black_box(parse_html(&pages[i], &base, &with_language))
        })
    });
    // What sniffing a page's type costs (always on).
    group.bench_function("sniff_type", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % pages.len();
            black_box(trawl::parse::sniff::decoded_type(pages[i].as_bytes()))
        })
    });
    // The same pages read by the tree reader (html5ever's DOM, bounded).
    let tree = ParseLimits {
        engine: ParseEngine::Tree,
        ..limits.clone()
    };
    group.bench_function("links_per_page_tree", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % pages.len();
            black_box(parse_html(&pages[i], &base, &tree))
        })
    });
    // The same pages read from one unbounded html5ever call: the cost of
    // the tree reader's bounds is the difference.
    group.bench_function("links_per_page_unbounded", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % pages.len();
            let doc = scraper::Html::parse_document(&pages[i]);
            black_box(read_page(&doc, &base, limits.max_links))
        })
    });
    group.finish();
}

/// Pages whose unbounded parse takes seconds to minutes (50,000 nested
/// `<div>`s: 11 s; 200,000: minutes; one tag with 200,000 attributes:
/// seconds), each with a link before the pathological part, read by the
/// tree reader: its depth bound is what these pages reach (the stream
/// reader, the default, has no stack of elements to bound).
fn pathological_pages(c: &mut Criterion) {
    let nested = |n: usize| {
        format!(
            "<a href=/before>b</a>{}{}",
            "<div>".repeat(n),
            "</div>".repeat(n)
        )
    };
    let attributes: String = (0..200_000).map(|i| format!(" a{i}")).collect();
    let pages = [
        ("nested_divs_50k", nested(50_000), CutReason::Depth),
        ("nested_divs_200k", nested(200_000), CutReason::Depth),
        (
            "attributes_200k",
            format!("<a href=/before>b</a><div{attributes}>"),
            CutReason::Attributes,
        ),
    ];
    let base = url::Url::parse("http://site0001.test:8080/p/1.html").unwrap();
    let limits = ParseLimits {
        engine: ParseEngine::Tree,
        ..ParseLimits::from(&Config::defaults().parse)
    };
    let mut group = c.benchmark_group("parse_bounded");
    for (name, html, reason) in &pages {
        let page = parse_html(html, &base, &limits);
        assert_eq!(page.truncated.map(|cut| cut.reason), Some(*reason));
        assert_eq!(page.links.len(), 1);
        group.throughput(Throughput::Bytes(html.len() as u64));
        group.bench_function(*name, |b| {
            b.iter(|| black_box(parse_html(html, &base, &limits)))
        });
    }
    group.finish();
}

fn entries(start: u64, n: u64) -> Vec<AdmitEntry> {
    // Links found on one page: each keeps the page it was found on.
    let via: std::sync::Arc<str> = std::sync::Arc::from("http://site0000.test/p/0.html");
    let provenance = trawl::frontier::provenance::Provenance::seed()
        .then(&via, trawl::frontier::provenance::Hop::Link);
    (start..start + n)
        .map(|i| {
            let url = format!("http://site{:04}.test/p/{i}.html", i % 1000);
            AdmitEntry {
                fp: Fingerprint::of(&url),
                host: format!("site{:04}.test", i % 1000),
                url,
                depth: 1,
                priority: Priority::NORMAL,
                kind: EntryKind::Page,
                queue: true,
                referrer: None,
                lastmod_ms: None,
                cash: trawl::frontier::importance::Cash::new(1.0 / (i % 97 + 1) as f32),
                provenance: provenance.clone(),
            }
        })
        .collect()
}

fn store_admit(c: &mut Criterion) {
    let mut group = c.benchmark_group("store");
    group.throughput(Throughput::Elements(1000));
    // `exact_cached`: the seen cache holds every URL the batches offer
    // again, so "seen" batches are answered without a read.
    for (mode, cache_urls, name) in [
        (SeenMode::Exact, 0, "exact"),
        (SeenMode::Bloom, 0, "bloom"),
        (SeenMode::Exact, 4_000_000, "exact_cached"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let seen = SeenSettings {
            mode,
            expected_urls: 2_000_000,
            false_positive_rate: 0.01,
            cache_urls,
        };
        let env = StoreEnv::new(&Config::defaults().storage).with_seen(seen);
        let store = PartitionStore::open(&env, dir.path(), 0).unwrap();
        // A store that already knows a million URLs.
        for chunk in 0..1000 {
            store.admit(entries(chunk * 1000, 1000)).unwrap();
        }
        let mut next = 10_000_000u64;
        group.bench_function(format!("admit_1000_new_{name}"), |b| {
            b.iter_batched(
                || {
                    next += 1000;
                    entries(next, 1000)
                },
                |batch| black_box(store.admit(batch).unwrap()),
                BatchSize::SmallInput,
            )
        });
        group.bench_function(format!("admit_1000_seen_{name}"), |b| {
            b.iter_batched(
                || entries(500_000, 1000),
                |batch| black_box(store.admit(batch).unwrap()),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// A host refilling every level of its queue, as its first poll does:
/// one read per level (an iterator each) against one read of all four
/// (one iterator, a seek per level). 1,000 hosts of 10 queued URLs.
fn queue_refill(c: &mut Criterion) {
    let mut group = c.benchmark_group("store");
    let dir = tempfile::tempdir().unwrap();
    let env = StoreEnv::new(&Config::defaults().storage);
    let store = PartitionStore::open(&env, dir.path(), 0).unwrap();
    store.admit(entries(0, 10_000)).unwrap();
    let levels: Vec<Priority> = (0..trawl::frontier::LEVELS as u8)
        .map(Priority::from_level)
        .collect();
    let mut host = 0;
    let mut next_host = || {
        host = (host + 1) % 1000;
        format!("site{host:04}.test")
    };
    group.bench_function("refill_levels_one_read_each", |b| {
        b.iter(|| {
            let host = next_host();
            for &p in &levels {
                black_box(store.queue_page(&host, p, None, 32).unwrap());
            }
        })
    });
    let reads: Vec<_> = levels.iter().map(|&p| (p, None)).collect();
    group.bench_function("refill_levels_one_read", |b| {
        b.iter(|| black_box(store.queue_pages(&next_host(), &reads, 32)))
    });
    group.finish();
}

/// Links as pages carry them: mixed case, ports, dot segments, escapes,
/// session IDs, fragments.
fn raw_urls() -> Vec<String> {
    (0..1000)
        .map(|i| match i % 5 {
            0 => format!("http://Site{:04}.TEST:80/p/{i}.html#top", i % 97),
            1 => format!(
                "https://site{:04}.test/a/./b/../%7Euser/{i}?q=%e2%82%ac",
                i % 97
            ),
            2 => format!(
                "http://site{:04}.test/item.jsp;jsessionid=ABC{i}?id={i}",
                i % 97
            ),
            3 => format!(
                "http://site{:04}.test/list?page={i}&PHPSESSID=x&sort=asc",
                i % 97
            ),
            _ => format!("http://site{:04}.test/p/{i}.html", i % 97),
        })
        .collect()
}

fn url_identity(c: &mut Criterion) {
    let rules = UrlRules::default();
    let raw = raw_urls();
    let parsed: Vec<url::Url> = raw.iter().map(|u| url::Url::parse(u).unwrap()).collect();
    let identities: Vec<String> = raw
        .iter()
        .map(|u| rules.parse(u).unwrap().identity)
        .collect();
    let mut group = c.benchmark_group("url");
    group.throughput(Throughput::Elements(raw.len() as u64));
    group.bench_function("parse_and_normalise_1000", |b| {
        b.iter(|| {
            for u in &raw {
                black_box(rules.parse(u).unwrap());
            }
        })
    });
    group.bench_function("normalise_parsed_1000", |b| {
        b.iter_batched(
            || parsed.clone(),
            |urls| {
                for u in urls {
                    black_box(rules.normalise(u).unwrap());
                }
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("fingerprint_1000", |b| {
        b.iter(|| {
            for id in &identities {
                black_box(Fingerprint::of(id));
            }
        })
    });
    group.finish();
}

fn simhash(c: &mut Criterion) {
    let web = web();
    let pages: Vec<String> = (1..21).map(|id| web.render(1, id, 8080)).collect();
    let texts: Vec<String> = pages
        .iter()
        .map(|p| trawl::parse::visible_text(&scraper::Html::parse_document(p)))
        .collect();
    let mut group = c.benchmark_group("simhash");
    group.bench_function("text_of_a_page", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % texts.len();
            black_box(trawl::dedup::simhash(&texts[i]))
        })
    });
    group.finish();
}

/// A page's request and response records written, and the SHA-256 of
/// its payload alone (a response record takes two: payload and block).
fn warc_write(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = WarcWriter::new(WarcSettings {
        dir: dir.path().to_owned(),
        prefix: "bench".into(),
        max_file_bytes: 1 << 30,
        compression: trawl::config::WarcCompression::Gzip,
        compression_level: 1,
        store_below: 1024,
        parquet_index: false,
        info: vec![],
    })
    .unwrap();
    let page = web().render(1, 1, 8080);
    let mut group = c.benchmark_group("warc");
    group.throughput(Throughput::Bytes(page.len() as u64));
    group.bench_function("write_exchange", |b| {
        b.iter(|| {
            let ex = Exchange {
                target_uri: "http://site0001.test/p/1.html",
                date: chrono::Utc::now(),
                ip: None,
                request_head: b"GET /p/1.html HTTP/1.1\r\nHost: site0001.test\r\n\r\n",
                response_head: b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n",
                payload: page.as_bytes(),
                truncated: None,
                identified_type: None,
                languages: None,
            };
            black_box(writer.write_exchange(&ex).unwrap())
        })
    });
    group.bench_function("payload_sha256", |b| {
        b.iter(|| black_box(trawl::warc::payload_sha256(page.as_bytes())))
    });
    group.finish();
}

criterion_group!(
    benches,
    link_extraction,
    pathological_pages,
    url_identity,
    simhash,
    store_admit,
    queue_refill,
    warc_write
);
criterion_main!(benches);

//! The fuzz targets' corpora, replayed: every file of
//! `fuzz/corpus/<target>/` through the property function its fuzz target
//! runs (`fuzz/src/lib.rs`, included below), so an input the fuzzer once
//! found failing fails the ordinary test suite if the bug comes back.
//!
//! `write_seeds` (ignored) regenerates the seed files that come from trawl
//! itself: the synthetic web's robots.txt files, sitemaps and pages, and
//! values in the stored and wire formats.
//!
//! ```text
//! cargo test --release --test it fuzz_corpus:: -- --ignored write_seeds
//! ```

use std::path::{Path, PathBuf};

#[allow(unexpected_cfgs)] // `cfg(fuzzing)`: set by cargo fuzz only
#[path = "../../fuzz/src/lib.rs"]
mod targets;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// Runs every file of `target`'s corpus through its property function.
fn replay(target: &str) {
    let (_, run) = targets::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    replay_dir(*run, &corpus_dir(target));
}

/// Runs every file of `dir` through `run`; names each failing input.
fn replay_dir(run: targets::Target, dir: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} has no inputs", dir.display());
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).expect("a corpus file");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            failed.push(file.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} inputs of {} fail:\n{}",
        failed.len(),
        files.len(),
        dir.display(),
        failed.join("\n")
    );
}

macro_rules! corpus_tests {
    ($($target:ident),* $(,)?) => {
        $(
            #[test]
            fn $target() {
                replay(stringify!($target));
            }
        )*

        #[test]
        fn every_target_has_a_corpus_test() {
            let tested = [$(stringify!($target)),*];
            for (name, _) in targets::TARGETS {
                assert!(tested.contains(name), "no corpus test for {name}");
            }
        }
    };
}

corpus_tests!(
    robots,
    sitemap,
    html_stream,
    html_tree,
    url,
    decode,
    response_head,
    warc_record,
    warc_recover,
    wire,
    store_codec,
    admin_json,
    admin_request,
    config,
    crawl_index,
);

/// A corpus input whose property fails fails the replay, by name.
#[test]
fn a_failing_input_fails_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fine"), b"fine").unwrap();
    std::fs::write(dir.path().join("broken"), b"broken").unwrap();
    let run: targets::Target = |data| assert_ne!(data, b"broken");
    let failure = std::panic::catch_unwind(|| replay_dir(run, dir.path()))
        .expect_err("the broken input fails");
    let message = failure
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(message.contains("1 of 2 inputs"), "{message}");
    assert!(message.contains("broken"), "{message}");
}

/// Writes the seeds that come from trawl itself into the corpora.
#[test]
#[ignore = "regenerates fuzz/corpus seeds; run by hand"]
fn write_seeds() {
    use trawl::testweb::generator::SitemapFile;
    use trawl::testweb::{SyntheticWeb, WebSpec};

    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
    };
    let web = SyntheticWeb::new(WebSpec {
        hosts: 8,
        pages_per_host: 12,
        seed: 36,
        behaviours: true,
    });
    let port = 8080;
    for host in 0..8 {
        let base = format!("http://{}:{port}", SyntheticWeb::host_name(host));
        let profile = web.profile(host);
        write(
            "robots",
            &format!("testweb-{host}"),
            profile.robots_body(host, &base).as_bytes(),
        );
        for id in [0, 3] {
            let page = web.render(host, id, port);
            write(
                "html_stream",
                &format!("testweb-{host}-{id}"),
                page.as_bytes(),
            );
            write(
                "html_tree",
                &format!("testweb-{host}-{id}"),
                page.as_bytes(),
            );
        }
        if profile.has_sitemaps() {
            for (name, file) in [
                ("main", SitemapFile::Main),
                ("index", SitemapFile::Index),
                ("gzip", SitemapFile::GzipPart),
                ("text", SitemapFile::TextPart),
            ] {
                let body = web.sitemap_body(host, file, port);
                write("sitemap", &format!("testweb-{host}-{name}"), &body);
            }
        }
    }

    // Stored values, each behind the byte that selects its kind.
    use trawl::store::codec;
    let kinded = |kind: u8, bytes: Vec<u8>| [vec![kind], bytes].concat();
    let mut record = trawl::store::UrlRecord::new(trawl::store::UrlState::Fetched(200), 3);
    record.last = Some(trawl::store::Visit {
        at_ms: 1_767_225_600_000,
        status: 200,
        etag: Some("\"abc\"".into()),
        last_modified: Some("Thu, 01 Jan 2026 00:00:00 GMT".into()),
        digest: Some([7; 32]),
        simhash: Some(0x1234_5678_9abc_def0),
        copy: None,
    });
    write(
        "store_codec",
        "url-record",
        &kinded(0, record.encode().unwrap()),
    );
    let queued = codec::QueueValue {
        fp: trawl::url::Fingerprint::of("http://a.test/"),
        depth: 2,
        kind: trawl::frontier::EntryKind::Sitemap {
            submitter: Some("a.test".into()),
        },
        url: "http://a.test/sitemap.xml".into(),
        provenance: trawl::frontier::provenance::Provenance::seed().then(
            &std::sync::Arc::from("http://a.test/robots.txt"),
            trawl::frontier::provenance::Hop::Manifest,
        ),
    };
    write(
        "store_codec",
        "queue-value",
        &kinded(1, queued.encode().unwrap()),
    );
    let robots: std::collections::BTreeMap<String, trawl::robots::RobotsRecord> = [(
        "http://a.test:80".to_owned(),
        trawl::robots::RobotsRecord {
            status: Some(200),
            fetched_at_ms: 1_767_225_600_000,
            body: b"User-agent: *\nDisallow: /private/\n".to_vec(),
            retry: None,
        },
    )]
    .into();
    write(
        "store_codec",
        "robots",
        &kinded(2, codec::encode_robots(&robots).unwrap()),
    );
    let memory = codec::HostMemory {
        attempts: vec![(42, 1, 2)],
        ip: Some("127.0.0.1".parse().unwrap()),
        robots_retry: vec![("http://a.test:80".into(), 2, 1_767_225_600_000)],
    };
    write(
        "store_codec",
        "memory",
        &kinded(3, codec::encode_memory(&memory).unwrap()),
    );
    let schedule = trawl::politeness::Schedule {
        next_allowed_ms: 1_767_225_600_000,
        last_delay_ms: 1000,
        failures: 1,
        parked_until_ms: 0,
    };
    write(
        "store_codec",
        "schedule",
        &kinded(4, codec::encode_schedule(&schedule).unwrap()),
    );
    write(
        "store_codec",
        "keys",
        b"\x05a.test\n\x02\x00\x00\x00\x00\x00\x00\x07",
    );
    write(
        "store_codec",
        "robots-json",
        b"\x02{\"http://a.test:80\":{\"status\":200,\"fetched_at_ms\":1,\"body\":[65]}}",
    );

    // The bridge's messages: a hello alone, and framed after it.
    use trawl::cluster::wire;
    let hello = wire::encode(&wire::hello("fuzz", "n1")).unwrap();
    write("wire", "hello", &hello);
    let mut framed = Vec::new();
    for msg in [
        wire::hello("fuzz", "n2"),
        wire::Message::Refuse {
            reason: "wrong cluster".into(),
        },
    ] {
        let payload = wire::encode(&msg).unwrap();
        framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        framed.extend_from_slice(&payload);
    }
    write("wire", "framed", &framed);

    // A WARC record as trawl writes it.
    let record = trawl::warc::Record::warcinfo(
        "trawl-20260101000000-00000.warc.gz",
        &[("software".into(), "trawl".into())],
    );
    write("warc_record", "warcinfo", &record.to_bytes());

    // The embedded defaults, as a config file.
    write(
        "config",
        "defaults",
        include_bytes!("../../config/trawl.toml"),
    );
}

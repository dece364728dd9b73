//! `[storage] sync_writes`: a page is completed only once its WARC records
//! and event are durable, through group commit (`src/durable.rs`).
//!
//! There is no power-loss simulator here. What is checked is the order
//! that makes a power loss harmless: every partition audits, when it
//! writes a completion batch, that the archive tickets its completions
//! carry were settled by a successful fsync round
//! (`trawl_completions_ahead_of_sync_total` stays 0); and the grouping
//! that makes it cheap: fewer fsync rounds than records.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{crawl_with_metrics, eventually_async, start_web};
use trawl::actors::{Node, Seed, Shutdown};
use trawl::events::EventKind;
use trawl::metrics::Metrics;
use trawl::testweb::changing::{self, ChangingSpec};
use trawl::testweb::{ServerOptions, SyntheticWeb, TestWebServer, WebSpec};

/// A test config with `sync_writes` as given.
fn config(data: &std::path::Path, sync_writes: bool) -> trawl::config::Config {
    crate::common::config_with(
        data,
        1,
        4,
        &format!("[storage]\nsync_writes = {sync_writes}\n[politeness]\ndelay_factor = 0.0\n"),
    )
}

#[test]
fn with_sync_writes_no_page_completes_before_its_records_are_synced() {
    let (web, server) = start_web(40, 10, 7);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), true);
    let (archive, metrics) = crawl_with_metrics(config.clone(), web.seeds(server.addr().port()));
    let events = crate::common::events(&config);
    let pages = events.iter().filter(|e| e.kind == EventKind::Page).count();
    assert!(pages >= 300, "only {pages} pages crawled");

    // Every event written took a ticket, and every ticket was settled
    // durable (none failed).
    assert_eq!(archive.events, events.len() as u64);
    assert_eq!(archive.synced, archive.events, "{archive:?}");
    // The completions were audited when written: none came before the
    // fsync of its records.
    assert_eq!(metrics.completions_ahead_of_sync.get(), 0);
    assert_eq!(metrics.archive_sync_failures.get(), 0);
    // Grouped: fewer rounds of fsyncs than records, each counted.
    assert!(archive.syncs > 0);
    assert!(
        archive.syncs < archive.events,
        "no grouping: {} rounds for {} events",
        archive.syncs,
        archive.events
    );
    assert_eq!(metrics.archive_syncs.get(), archive.syncs);
    assert_eq!(
        metrics.archive_sync_group.get_sample_sum() as u64,
        archive.synced
    );
    // Each ticket was handed over to the OS once, before its round.
    assert_eq!(
        metrics.archive_handover_group.get_sample_sum() as u64,
        archive.events
    );
    let text = metrics.render();
    assert!(text.contains("trawl_archive_syncs_total "), "{text}");
    assert!(text.contains("trawl_archive_sync_group_size_bucket"));
    crate::common::warcio_check(&crate::common::warc_files(&config));
}

#[test]
fn without_sync_writes_nothing_is_fsynced_per_page() {
    let (web, server) = start_web(5, 10, 8);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), false);
    let (archive, metrics) = crawl_with_metrics(config.clone(), web.seeds(server.addr().port()));
    assert!(archive.events >= 50, "{archive:?}");
    assert_eq!((archive.syncs, archive.synced), (0, 0));
    assert_eq!(metrics.archive_syncs.get(), 0);
    assert_eq!(metrics.archive_sync_group.get_sample_count(), 0);
}

/// A URL leaving the crawl is completed only once its `removed` event is
/// durable: the partitions' audit covers the removal's ticket too.
#[test]
fn with_sync_writes_a_removal_completes_after_its_event_is_synced() {
    let spec = ChangingSpec::default();
    let web = SyntheticWeb::new(WebSpec {
        hosts: 1,
        pages_per_host: 2,
        seed: 9,
        behaviours: false,
    });
    let options = ServerOptions {
        changing: spec,
        ..ServerOptions::default()
    };
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start_with(web, listen, 1, options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = crate::common::config_with(
        dir.path(),
        50,
        4,
        "[storage]\nsync_writes = true\n\
         [recrawl]\nmin_interval = \"2s\"\ndefault_interval = \"2s\"\nmax_interval = \"8s\"\n\
         [robots]\ncache_ttl = \"2s\"\n[politeness]\ndelay_factor = 0.0\n",
    );
    let seed = format!("http://{}:{}/", changing::HOST, server.addr().port());
    let metrics = Arc::new(Metrics::new());
    let events_path = config.events_file();
    let node_metrics = metrics.clone();
    let node_config = config.clone();
    let (removals, archive) = actix_rt::System::new().block_on(async move {
        let node = Node::start(node_config, node_metrics).expect("node starts");
        node.send(Seed { urls: vec![seed] }).await.unwrap().unwrap();
        // Polls the events file (the crawl's output) for the removals of
        // /gone404 and /gone410, which come a few seconds in.
        let removals_written = || {
            let written = trawl::events::read_all(&events_path).unwrap_or_default();
            written
                .iter()
                .filter(|e| e.kind == EventKind::Removed && e.url.contains("/gone4"))
                .count()
        };
        let removals = eventually_async(Duration::from_secs(90), || async {
            Some(removals_written()).filter(|n| *n >= 2)
        })
        .await
        .unwrap_or_else(removals_written);
        let archive = node.send(Shutdown).await.unwrap().unwrap();
        (removals, archive)
    });
    assert_eq!(removals, 2, "the two gone pages were not removed in time");
    assert_eq!(metrics.completions_ahead_of_sync.get(), 0);
    assert_eq!(archive.synced, archive.events, "{archive:?}");
    let gone = metrics.removed.with_label_values(&["gone"]).get();
    assert!(gone >= 2, "{gone} removals counted");
}

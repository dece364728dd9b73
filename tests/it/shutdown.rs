//! A graceful stop is bounded by `[crawl] shutdown_timeout`, not by the
//! fetch timeout: a server that never answers does not hold the stop, the
//! abandoned request stays queued (it was never completed, so nothing is
//! lost), and the run marker stays, so the next run waits out every host's
//! delay as after a crash (the abandoned request may still be served).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use trawl::actors::{Node, Seed, Shutdown};
use trawl::metrics::Metrics;
use trawl::store::PartitionStore;

/// A server that answers robots.txt with 404 and never answers `/hang`;
/// it reports on `started` when a `/hang` request has arrived.
fn hanging_server(started: mpsc::Sender<()>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut line = String::new();
            let _ = BufReader::new(&conn).read_line(&mut line);
            if line.contains("/hang") {
                let _ = started.send(());
                held.push(conn); // never answered, never closed
            } else {
                let _ = conn.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        }
    });
    port
}

#[test]
fn a_stop_abandons_a_request_that_never_ends_and_keeps_it_queued() {
    let (started_tx, started_rx) = mpsc::channel();
    let port = hanging_server(started_tx);
    let data = tempfile::tempdir().unwrap();
    // The fetch timeout alone would hold the stop for an hour.
    let config = config_with(
        data.path(),
        0,
        2,
        "[crawl]\nshutdown_timeout = \"200ms\"\n[sitemap]\nenabled = false\n\
         [fetch]\ntimeout = \"1h\"\nfirst_byte_timeout = \"1h\"\n",
    );
    let hang = format!("http://hang.test:{port}/hang");
    let (done_tx, done_rx) = mpsc::channel();
    let node_config = config.clone();
    let seed = hang.clone();
    std::thread::spawn(move || {
        let stopped = actix_rt::System::new().block_on(async move {
            let node = Node::start(node_config, Arc::new(Metrics::new())).expect("node starts");
            node.send(Seed { urls: vec![seed] }).await.unwrap().unwrap();
            // The request is on the wire before the stop is asked for.
            tokio::task::spawn_blocking(move || started_rx.recv())
                .await
                .unwrap()
                .expect("the hanging request arrives");
            node.send(Shutdown).await.unwrap()
        });
        let _ = done_tx.send(stopped.is_ok());
    });
    // A liveness guard, far below the hour the fetch timeout would take.
    let stopped = done_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the stop returned without waiting for the request");
    assert!(stopped, "the archive closed cleanly");

    let queued: Vec<String> = (0..2)
        .flat_map(|id| {
            PartitionStore::open_read_only(&config.storage.data_dir, id)
                .unwrap()
                .queued_urls()
                .unwrap()
        })
        .collect();
    assert_eq!(queued, [hang], "the abandoned URL stays queued");
    assert!(
        data.path().join("RUNNING").exists(),
        "an abandoned request makes the stop count as a crash"
    );
}

//! Per-IP politeness: with `max_in_flight_per_ip = 1`, hosts that share an
//! address (every synthetic host is 127.0.0.1) never overlap, and the crawl
//! is still complete.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::*;
use trawl::config::Config;
use trawl::testweb::audit;

#[test]
fn hosts_sharing_an_address_take_turns() {
    let (web, server) = start_web(10, 8, 5);
    let port = server.addr().port();
    let data = tempfile::tempdir().unwrap();
    let config = Config::from_layers(&[
        ("test".into(), config_toml(data.path(), 5, 4)),
        (
            "per-ip".into(),
            "[politeness]\nmax_in_flight_per_ip = 1\n".into(),
        ),
    ])
    .unwrap();
    assert_eq!(config.politeness.max_in_flight_per_ip, 1);
    crawl_in_process(config, web.seeds(port));
    let mut log = server.log().records();
    server.stop();

    let fetched: BTreeSet<String> = page_requests(&log, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
    // All requests as one "host": the address.
    for r in &mut log {
        r.host = "127.0.0.1".into();
    }
    let report = audit(&log, 1, Duration::ZERO);
    assert_eq!(report.max_concurrent, 1, "{:?}", report.violations.first());
}

//! HTTPS: the synthetic web served over TLS by a test CA is crawled
//! completely over HTTP/2 when the CA is trusted through
//! `[fetch] extra_root_certificates`; a self-signed host is fetched only
//! because its certificate is listed there too; a host whose certificate
//! names someone else is refused with a `tls` error and never served a
//! request.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use crate::common::*;
use trawl::config::Config;
use trawl::testweb::tls::{TestPki, BAD_CERT_HOST, SELF_SIGNED_HOST};
use trawl::testweb::{
    request_kind, RequestKind, ServerOptions, SyntheticWeb, TestWebServer, WebSpec,
};

/// `url` (as the generator writes it, `http://`) over HTTPS.
fn https(url: &str) -> String {
    url.replacen("http://", "https://", 1)
}

#[test]
fn https_web_is_crawled_over_h2_and_bad_certificates_are_refused() {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 6,
        pages_per_host: 15,
        seed: 21,
        behaviours: false,
    });
    let names: Vec<String> = (0..6).map(SyntheticWeb::host_name).collect();
    let pki = TestPki::generate(&names).unwrap();
    let options = ServerOptions {
        tls: Some(pki.clone()),
        ..Default::default()
    };
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start_with(web.clone(), listen, 2, options).unwrap();
    let port = server.tls_addr().expect("TLS listener").port();

    let data = tempfile::tempdir().unwrap();
    let trusted = pki.write_trust(data.path()).unwrap();
    let tls_layer = format!(
        "[fetch]\nextra_root_certificates = {:?}\n",
        trusted
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
    );
    let config = Config::from_layers(&[
        (
            "test".into(),
            config_toml(&data.path().join("crawl"), 20, 2),
        ),
        ("tls".into(), tls_layer),
    ])
    .unwrap();
    let mut seeds: Vec<String> = web.seeds(port).iter().map(|s| https(s)).collect();
    seeds.push(format!("https://{SELF_SIGNED_HOST}:{port}/"));
    seeds.push(format!("https://{BAD_CERT_HOST}:{port}/"));
    let (_, metrics) = crawl_with_metrics(config.clone(), seeds);
    let log = server.log().records();
    server.stop();

    // Every page of the web, over HTTPS, each once, all over HTTP/2.
    let site_requests: Vec<_> = log.iter().filter(|r| names.contains(&r.host)).collect();
    let fetched: BTreeSet<String> = site_requests
        .iter()
        .filter(|r| request_kind(&r.path) == RequestKind::Page)
        .map(|r| format!("https://{}:{port}{}", r.host, r.path))
        .collect();
    let truth: BTreeSet<String> = web.ground_truth(port).iter().map(|u| https(u)).collect();
    assert_same_urls(&fetched, &truth);
    assert!(
        site_requests.iter().all(|r| r.version == "HTTP/2.0"),
        "versions: {:?}",
        site_requests
            .iter()
            .map(|r| &r.version)
            .collect::<BTreeSet<_>>()
    );
    let events = page_events(&config);
    assert!(events.iter().all(|e| e.url.starts_with("https://")));

    // The self-signed host was reached (it serves a 404 page).
    assert!(log.iter().any(|r| r.host == SELF_SIGNED_HOST));
    // The host with someone else's certificate was never served anything,
    // and the failure is a TLS one.
    assert!(!log.iter().any(|r| r.host == BAD_CERT_HOST));
    assert!(!events.iter().any(|e| e.url.contains(BAD_CERT_HOST)));
    assert!(metrics.fetch_errors.with_label_values(&["tls"]).get() >= 1);
    warcio_check(&warc_files(&config));
}

#[test]
fn the_self_signed_host_is_refused_when_not_trusted() {
    let web = SyntheticWeb::new(WebSpec {
        hosts: 1,
        pages_per_host: 3,
        seed: 1,
        behaviours: false,
    });
    let pki = TestPki::generate(&[SyntheticWeb::host_name(0)]).unwrap();
    let options = ServerOptions {
        tls: Some(pki),
        ..Default::default()
    };
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = TestWebServer::start_with(web, listen, 1, options).unwrap();
    let port = server.tls_addr().unwrap().port();
    let data = tempfile::tempdir().unwrap();
    // Nothing extra trusted: neither the test CA nor the self-signed host.
    let config = config(data.path(), 20, 1);
    let seeds = vec![
        format!("https://{SELF_SIGNED_HOST}:{port}/"),
        format!("https://{}:{port}/", SyntheticWeb::host_name(0)),
    ];
    let (_, metrics) = crawl_with_metrics(config.clone(), seeds);
    let log = server.log().records();
    server.stop();
    assert!(log.is_empty(), "served without trust: {log:?}");
    assert!(metrics.fetch_errors.with_label_values(&["tls"]).get() >= 2);
    assert!(page_events(&config).is_empty());
}

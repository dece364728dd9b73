//! The egress proxy (`[fetch] proxy`): the hosts it carries are reached
//! through CONNECT tunnels to their addresses, the others directly; the
//! SSRF guard decides before the proxy is asked (a denied address is never
//! named to it); a proxy that refuses, stalls or closes fails requests
//! with a typed kind, and the URLs are fetched once it works again.
//!
//! The proxy here is the test's own: a CONNECT tunnel on 127.0.0.4 whose
//! outgoing connections leave from 127.0.0.5, so the synthetic web's
//! request log tells a proxied request (client 127.0.0.5) from a direct
//! one (127.0.0.1).

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::common::*;

/// The address the proxy's tunnels leave from.
const EGRESS: &str = "127.0.0.5";
/// What the crawler must send in `Proxy-Authorization` (base64 of
/// `crawler:s3cret`).
const CREDENTIALS: &str = "Basic Y3Jhd2xlcjpzM2NyZXQ=";

/// How the test proxy answers the CONNECTs it is sent, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    /// `502 Bad Gateway`.
    Refuse,
    /// Nothing for this long, then a tunnel (a proxy under load).
    Stall(Duration),
    /// Closes the connection without a word.
    Close,
}

/// What the proxy was asked.
#[derive(Debug, Default)]
struct ProxyLog {
    /// Each CONNECT's target, in arrival order.
    targets: Vec<String>,
    /// CONNECTs without the expected credentials (answered 407).
    unauthorized: usize,
}

/// A CONNECT proxy on loopback, on a thread of its own.
struct TestProxy {
    addr: SocketAddr,
    log: Arc<Mutex<ProxyLog>>,
}

impl TestProxy {
    /// Starts a proxy that answers its first CONNECTs as `script` says and
    /// tunnels every later one.
    fn start(script: Vec<Answer>) -> TestProxy {
        let std_listener = std::net::TcpListener::bind("127.0.0.4:0").expect("bind 127.0.0.4");
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(ProxyLog::default()));
        let shared = log.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                let script = Arc::new(Mutex::new(script.into_iter()));
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    let (log, script) = (shared.clone(), script.clone());
                    tokio::spawn(async move {
                        let _ = serve(client, log, script).await;
                    });
                }
            });
        });
        TestProxy { addr, log }
    }

    fn url(&self) -> String {
        format!("http://crawler:s3cret@{}", self.addr)
    }

    fn targets(&self) -> Vec<String> {
        self.log.lock().unwrap().targets.clone()
    }
}

/// One client of the proxy: its CONNECT, then the tunnel.
async fn serve(
    mut client: TcpStream,
    log: Arc<Mutex<ProxyLog>>,
    script: Arc<Mutex<std::vec::IntoIter<Answer>>>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        if client.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let target = head
        .strip_prefix("CONNECT ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("")
        .to_owned();
    if !head.contains(&format!("\r\nProxy-Authorization: {CREDENTIALS}\r\n")) {
        log.lock().unwrap().unauthorized += 1;
        client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
            .await?;
        return Ok(());
    }
    log.lock().unwrap().targets.push(target.clone());
    let answer = script.lock().unwrap().next();
    match answer {
        Some(Answer::Refuse) => {
            client
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
                .await?;
            return Ok(());
        }
        Some(Answer::Close) => return Ok(()),
        Some(Answer::Stall(pause)) => tokio::time::sleep(pause).await,
        None => {}
    }
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(EGRESS.parse().unwrap(), 0))?;
    let mut site = socket.connect(target.parse().unwrap()).await?;
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut site).await?;
    Ok(())
}

/// The hosts the proxy carries in these tests: two of the web's.
fn proxied_hosts(seeds: &[String]) -> Vec<String> {
    seeds
        .iter()
        .take(2)
        .map(|s| url::Url::parse(s).unwrap().host_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_hosts_the_proxy_carries_go_through_it_and_a_denied_address_is_never_named() {
    let canary = std::net::TcpListener::bind("127.0.0.3:0").expect("bind the canary");
    canary.set_nonblocking(true).unwrap();
    let (web, server, port) = start_plain_web(5, 8, 31);
    let proxy = TestProxy::start(Vec::new());
    let data = tempfile::tempdir().unwrap();
    let seeds = web.seeds(port);
    let via_proxy = proxied_hosts(&seeds);
    // The canary's name resolves to 127.0.0.3, which the guard denies
    // (only 127.0.0.1 is allowed): the proxy carries it, and must never
    // be asked for it.
    let canary_host = "canary.proxy.test";
    let patterns: Vec<String> = via_proxy
        .iter()
        .cloned()
        .chain(["*.proxy.test".to_owned()])
        .collect();
    let extra = format!(
        "[fetch]\nallow_addresses = [\"127.0.0.1/32\"]\nproxy = {:?}\nproxy_hosts = {patterns:?}\n\
         [dns.overrides]\n{canary_host:?} = \"127.0.0.3\"\n",
        proxy.url()
    );
    let config = config_with(data.path(), 20, 2, &extra);
    let mut all_seeds = seeds.clone();
    all_seeds.push(format!(
        "http://{canary_host}:{}/",
        canary.local_addr().unwrap().port()
    ));
    let (_, metrics) = crawl_with_metrics(config.clone(), all_seeds);
    let log = server.log().records();
    server.stop();

    // Every page of the web, once.
    let fetched: BTreeSet<String> = page_requests(&log, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
    // The carried hosts' requests (robots.txt too) came out of the
    // proxy's tunnels, the others' straight from the crawler.
    let egress: IpAddr = EGRESS.parse().unwrap();
    for record in &log {
        let proxied = via_proxy.contains(&record.host);
        assert_eq!(
            record.client == Some(egress),
            proxied,
            "{} {}: from {:?}",
            record.host,
            record.path,
            record.client
        );
    }
    // Each tunnel named the site's address, never a name; with the
    // crawler's credentials.
    let targets = proxy.targets();
    assert!(!targets.is_empty());
    let site = format!("127.0.0.1:{port}");
    assert!(targets.iter().all(|t| *t == site), "{targets:?}");
    assert_eq!(proxy.log.lock().unwrap().unauthorized, 0);
    // The denied name was refused here: not asked of the proxy, not
    // connected to.
    assert!(
        matches!(canary.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the canary was connected to"
    );
    let errors = |kind: &str| metrics.fetch_errors.with_label_values(&[kind]).get();
    assert!(errors("ssrf_denied") > 0);
    assert_eq!(errors("proxy"), 0);
    // WARC-IP-Address is the site's, not the proxy's.
    let proxied_event = page_events(&config)
        .into_iter()
        .find(|e| via_proxy.iter().any(|h| e.url.contains(h.as_str())))
        .expect("a page of a carried host was archived");
    let record = record_at(&config, &proxied_event);
    assert!(
        record.contains("WARC-IP-Address: 127.0.0.1\r\n"),
        "{record}"
    );
}

#[test]
fn a_proxy_that_refuses_stalls_or_closes_loses_no_url() {
    let (web, server, port) = start_plain_web(2, 6, 32);
    // The first tunnels: refused, closed, and one held for 3 s (longer
    // than the connect timeout) while the host's request waits on it.
    let stall = Duration::from_secs(3);
    let proxy = TestProxy::start(vec![
        Answer::Refuse,
        Answer::Close,
        Answer::Stall(stall),
        Answer::Refuse,
    ]);
    let data = tempfile::tempdir().unwrap();
    // A timed-out tunnel may have reached the site, so its host waits out
    // `timeout` (2 s) before its next request; robots.txt that fails is
    // asked again, never given up on here.
    let extra = format!(
        "[fetch]\nproxy = {:?}\nconnect_timeout = \"1s\"\ntimeout = \"2s\"\n\
         first_byte_timeout = \"2s\"\nmax_attempts = 6\n[robots]\ngive_up_after = \"1h\"\n",
        proxy.url()
    );
    let config = config_with(data.path(), 20, 2, &extra);
    let (_, metrics) = crawl_with_metrics(config, web.seeds(port));
    let log = server.log().records();
    server.stop();

    let fetched: BTreeSet<String> = page_requests(&log, port).into_keys().collect();
    assert_same_urls(&fetched, &web.ground_truth(port));
    let egress: IpAddr = EGRESS.parse().unwrap();
    assert!(log.iter().all(|r| r.client == Some(egress)));
    let errors = |kind: &str| metrics.fetch_errors.with_label_values(&[kind]).get();
    // Refused twice and closed once: the proxy's kind; the stall is a
    // connect timeout.
    assert_eq!(errors("proxy"), 3);
    assert_eq!(errors("timeout"), 1);
    assert!(proxy.targets().len() >= 5, "{:?}", proxy.targets());
}

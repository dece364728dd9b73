//! The HTTP client: awc with rustls, our resolver, and hard limits.
//!
//! The client fetches and never decides what to fetch: redirects are not
//! followed (a 3xx is a response like any other; its target re-enters the
//! crawl through the SeenSet so robots.txt and politeness apply to it), and
//! no per-host limit is kept here (the HostActor's permit is the limit).
//!
//! Bodies are read as a stream and cut at `max_body_bytes`; a cut body is
//! kept and marked truncated (archived with `WARC-Truncated: length`).
//! Requests ask for compressed bodies (`[fetch] accept_encoding`, by
//! default `gzip, br, zstd`, as browsers and other crawlers do: HTML is a
//! third to a fifth of its size on the wire). awc's decompression is
//! compiled out: the body is kept and archived as received, its
//! Content-Encoding with it (the WARC payload digest is over the entity as
//! transferred, as Heritrix and warcio compute it), and decoded by the
//! bounded decoders of [`decode`] where it is read (links, text, robots.txt,
//! sitemaps).

pub mod body;
pub mod decode;
pub mod dns_backend;
pub mod dns_cache;
pub mod gate;
pub mod guard;
pub mod inflight;
pub mod pipeline;
pub mod proxy;
mod resolver;
pub mod tls;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use url::Url;

use body::BodyBuffer;

pub use guard::{AddressPolicy, SsrfDenied};
pub use resolver::{DnsLog, DnsOverrides, OverrideResolver, Resolved};

use crate::config::Config;

/// Why a fetch produced no response. The kind is a bounded label for
/// metrics and logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// Name resolution failed.
    #[error("dns: {0}")]
    Dns(String),
    /// TCP or TLS connection failed.
    #[error("connect: {0}")]
    Connect(String),
    /// A deadline passed.
    #[error("timeout")]
    Timeout,
    /// The connection broke after the request was sent.
    #[error("connection reset: {0}")]
    Reset(String),
    /// The server broke the protocol or the connection.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The URL cannot be requested (bad scheme, no host).
    #[error("bad url: {0}")]
    BadUrl(String),
    /// The SSRF guard refused every address.
    #[error("{0}")]
    SsrfDenied(String),
    /// The TLS handshake failed: certificate not trusted or not for this
    /// name, no common protocol.
    #[error("tls: {0}")]
    Tls(String),
    /// The response head exceeded `fetch.max_header_bytes`.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The request was never sent: its host is gone, or its partition's
    /// lease ended while it waited for a fetch slot. Nothing the server
    /// did; the host (if alive) asks again later.
    #[error("not sent: {0}")]
    NotSent(String),
    /// The egress proxy (`[fetch] proxy`) gave no tunnel: it refused,
    /// answered something else than HTTP, or closed. Nothing reached the
    /// site.
    #[error("{0}")]
    Proxy(String),
}

impl FetchError {
    /// Whether the request may have reached the server, which then may
    /// still be working on it after the crawl gave up: a timeout (of the
    /// connect, too: a slow accept is not told apart), a reset or broken
    /// response, an oversized head. No address, a refused or failed
    /// connection, a denied address, a bad URL or a request never sent
    /// left nothing behind at the server.
    pub fn may_have_reached_server(&self) -> bool {
        matches!(
            self,
            FetchError::Timeout
                | FetchError::Reset(_)
                | FetchError::Protocol(_)
                | FetchError::TooLarge(_)
        )
    }

    /// Whether trying again later may succeed. A denied address, a bad URL,
    /// a certificate the crawler does not trust or an oversized head will
    /// be the same next time, so the URL is given up at once.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            FetchError::Dns(_)
                | FetchError::Connect(_)
                | FetchError::Timeout
                | FetchError::Reset(_)
                | FetchError::Protocol(_)
                | FetchError::NotSent(_)
                | FetchError::Proxy(_)
        )
    }

    /// Every [`FetchError::kind`] label: the error counter exports each
    /// from the start (at 0), so a dashboard's error rate reads 0 rather
    /// than "no data" until the first error.
    pub const KINDS: [&'static str; 11] = [
        "dns",
        "connect",
        "timeout",
        "reset",
        "protocol",
        "bad_url",
        "ssrf_denied",
        "tls",
        "too_large",
        "not_sent",
        "proxy",
    ];

    /// The metric label of the error.
    pub fn kind(&self) -> &'static str {
        match self {
            FetchError::Dns(_) => "dns",
            FetchError::Connect(_) => "connect",
            FetchError::Timeout => "timeout",
            FetchError::Reset(_) => "reset",
            FetchError::Protocol(_) => "protocol",
            FetchError::BadUrl(_) => "bad_url",
            FetchError::SsrfDenied(_) => "ssrf_denied",
            FetchError::Tls(_) => "tls",
            FetchError::TooLarge(_) => "too_large",
            FetchError::NotSent(_) => "not_sent",
            FetchError::Proxy(_) => "proxy",
        }
    }
}

/// A response as the crawl keeps it.
#[derive(Debug, Clone)]
pub struct FetchResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response headers, names lower-case, in received order.
    pub headers: Vec<(String, String)>,
    /// The response head as archived: status line, headers, blank line.
    pub head: Vec<u8>,
    /// The request head as sent.
    pub request_head: Vec<u8>,
    /// The body (transfer coding removed, content coding kept).
    pub body: Bytes,
    /// The body was cut at the size cap.
    pub truncated: bool,
    /// Address the name resolved to (first candidate), if known.
    pub ip: Option<IpAddr>,
    /// Wall-clock start of the request.
    pub started_at: SystemTime,
    /// Time from request start to the last body byte.
    pub elapsed: Duration,
    /// A page's place in the node's pipeline, given back when the last
    /// copy of the response is dropped ([`pipeline`]); `None` for requests
    /// that take none (robots.txt).
    pub pipeline: Option<Arc<pipeline::PipelinePermit>>,
}

impl FetchResponse {
    /// A response as if received (unit tests of what responses mean):
    /// `status`, `headers` (names lower-case) and `body`, started at the
    /// epoch, no time on the wire.
    #[cfg(test)]
    pub(crate) fn synthetic(status: u16, headers: &[(&str, &str)], body: &str) -> Self {
        FetchResponse {
            status,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            head: Vec::new(),
            request_head: Vec::new(),
            body: Bytes::copy_from_slice(body.as_bytes()),
            truncated: false,
            ip: None,
            started_at: SystemTime::UNIX_EPOCH,
            elapsed: Duration::ZERO,
            pipeline: None,
        }
    }

    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name` (lower-case), in received order.
    pub fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the body is HTML by its Content-Type (missing counts as HTML,
    /// as browsers sniff it so).
    pub fn is_html(&self) -> bool {
        self.header("content-type").is_none_or(|ct| {
            let ct = ct.to_ascii_lowercase();
            ct.starts_with("text/html") || ct.starts_with("application/xhtml")
        })
    }
}

/// Limits of one fetch.
#[derive(Debug, Clone)]
pub struct FetchLimits {
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// TLS handshake timeout.
    pub handshake_timeout: Duration,
    /// From the request's start (connecting included) to the response
    /// head.
    pub first_byte_timeout: Duration,
    /// Largest response head (status line and headers), in bytes.
    pub max_header_bytes: usize,
    /// Whole-request deadline.
    pub timeout: Duration,
    /// Longest silence between body chunks.
    pub idle_timeout: Duration,
    /// Body cap in bytes.
    pub max_body_bytes: usize,
}

/// Installs rustls' ring crypto provider once per process; awc's rustls
/// connector panics without one.
pub fn install_crypto_provider() {
    // Err means one is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP client bound to the current arbiter (awc clients are `!Send`).
pub struct HttpClient {
    client: awc::Client,
    resolver: OverrideResolver,
    guard: AddressPolicy,
    limits: FetchLimits,
    user_agent: String,
    /// `[fetch] accept_encoding`; `None` sends no Accept-Encoding.
    accept_encoding: Option<String>,
}

impl HttpClient {
    /// Builds the client from the config with the TLS setup `tls` (see
    /// [`tls::client_config`]) and the egress proxy `proxy` (see
    /// [`proxy`]); DNS lookups are counted in `metrics`, their answers
    /// expire on `clock` and each answer obtained is told to `dns_log`.
    pub fn new(
        config: &Config,
        tls: Arc<rustls::ClientConfig>,
        proxy: Option<proxy::ProxySettings>,
        dns_log: Option<DnsLog>,
        metrics: std::sync::Arc<crate::metrics::Metrics>,
        clock: crate::clock::SharedClock,
    ) -> Self {
        let guard = AddressPolicy::new(&config.fetch.deny_addresses, &config.fetch.allow_addresses);
        let cache = dns_cache::DnsCacheSettings {
            min_ttl: config.dns.min_ttl,
            max_ttl: config.dns.max_ttl,
            negative_ttl: config.dns.negative_ttl,
            max_entries: config.dns.max_entries.max(1),
        };
        let resolver = OverrideResolver::new(
            DnsOverrides::new(&config.dns.overrides),
            guard.clone(),
            cache,
            metrics,
            dns_backend::backend(config.dns.resolver, &config.dns.nameservers),
            clock,
        )
        .with_log(dns_log);
        let limits = FetchLimits {
            connect_timeout: config.fetch.connect_timeout,
            handshake_timeout: config.fetch.handshake_timeout,
            first_byte_timeout: config.fetch.first_byte_timeout,
            max_header_bytes: config.fetch.max_header_bytes,
            timeout: config.fetch.timeout,
            idle_timeout: config.fetch.idle_timeout,
            max_body_bytes: config.fetch.max_body_bytes,
        };
        let direct = actix_tls::connect::Connector::new(actix_tls::connect::Resolver::custom(
            resolver.clone(),
        ))
        .service();
        let tcp = proxy::ProxyConnector::new(direct, proxy, resolver.clone());
        let connector = awc::Connector::new()
            .connector(tcp)
            .rustls_0_23(tls)
            .timeout(limits.connect_timeout)
            .handshake_timeout(limits.handshake_timeout)
            .limit(inflight::max_in_flight(&config.fetch))
            .conn_keep_alive(Duration::from_secs(30));
        let client = awc::ClientBuilder::new()
            .connector(connector)
            .disable_redirects()
            .timeout(limits.timeout)
            .no_default_headers()
            .finish();
        HttpClient {
            client,
            resolver,
            guard,
            limits,
            user_agent: config.crawl.user_agent.clone(),
            accept_encoding: Some(config.fetch.accept_encoding.trim())
                .filter(|codings| !codings.is_empty())
                .map(str::to_owned),
        }
    }

    /// GETs `url`, reading the body up to the cap within the deadline.
    pub async fn get(&self, url: &Url) -> Result<FetchResponse, FetchError> {
        self.get_with(url, &Validators::default()).await
    }

    /// GETs `url`, conditionally on `validators` (RFC 9110 §13): a server
    /// whose copy still matches answers 304 with no body.
    pub async fn get_with(
        &self,
        url: &Url,
        validators: &Validators,
    ) -> Result<FetchResponse, FetchError> {
        self.get_within(url, validators, None).await
    }

    /// [`HttpClient::get_with`], given up at `deadline` at the latest (a
    /// host's request carries the deadline its hold was written with, so
    /// it never outlives the hold, however long it waited for a slot).
    pub async fn get_within(
        &self,
        url: &Url,
        validators: &Validators,
        deadline: Option<Instant>,
    ) -> Result<FetchResponse, FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::BadUrl(format!("scheme {}", url.scheme())));
        }
        let host = url
            .host_str()
            .ok_or_else(|| FetchError::BadUrl(url.to_string()))?
            .to_owned();
        // IP literals never reach the resolver: check them here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal {
            self.guard
                .check(ip)
                .map_err(|e| FetchError::SsrfDenied(e.to_string()))?;
        }
        let started = Instant::now();
        let started_at = SystemTime::now();
        let deadline = match deadline {
            Some(at) => at.min(started + self.limits.timeout),
            None => started + self.limits.timeout,
        };
        let headers = request_headers(
            &self.user_agent,
            self.accept_encoding.as_deref(),
            validators,
        );
        let request_head = request_head(url, &headers);
        let mut request = self.client.get(url.as_str());
        for &(name, value) in &headers {
            request = request.insert_header((name, value));
        }
        let first_byte = deadline.min(started + self.limits.first_byte_timeout);
        let mut response = tokio::time::timeout_at(first_byte.into(), request.send())
            .await
            .map_err(|_| FetchError::Timeout)?
            .map_err(classify_send_error)?;
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let head = response_head(response.version(), response.status(), &headers);
        if head.len() > self.limits.max_header_bytes {
            return Err(FetchError::TooLarge(format!(
                "response head of {} bytes (limit {})",
                head.len(),
                self.limits.max_header_bytes
            )));
        }
        let (body, truncated) = read_body(&mut response, &self.limits, deadline).await?;
        // A connection closed before Content-Length bytes arrived is a
        // broken response, not a short page.
        let declared = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.trim().parse::<usize>().ok());
        if let Some(declared) = declared.filter(|&d| !truncated && body.len() < d) {
            return Err(FetchError::Reset(format!(
                "body ended after {} of {declared} bytes",
                body.len()
            )));
        }
        Ok(FetchResponse {
            status,
            headers,
            head,
            request_head,
            body,
            truncated,
            ip: host
                .parse::<IpAddr>()
                .ok()
                .or_else(|| self.resolver.last_address(&host)),
            started_at,
            elapsed: started.elapsed(),
            pipeline: None,
        })
    }
}

/// Reads the body stream up to the size cap, failing on the deadline or on
/// a silence between chunks longer than the idle timeout.
async fn read_body(
    response: &mut awc::ClientResponse<
        impl futures_util::Stream<Item = Result<Bytes, awc::error::PayloadError>> + Unpin,
    >,
    limits: &FetchLimits,
    deadline: Instant,
) -> Result<(Bytes, bool), FetchError> {
    let cap = limits.max_body_bytes;
    let hint = response
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<usize>().ok())
        .unwrap_or(0)
        .min(cap);
    let mut body = BodyBuffer::with_hint(hint);
    loop {
        let until = deadline.min(Instant::now() + limits.idle_timeout);
        let next = tokio::time::timeout_at(tokio::time::Instant::from_std(until), response.next())
            .await
            .map_err(|_| FetchError::Timeout)?;
        match next {
            None => return Ok((body.finish(), false)),
            Some(Err(awc::error::PayloadError::Incomplete(e))) => {
                let reason = e.map_or_else(|| "body ended early".to_owned(), |e| e.to_string());
                return Err(FetchError::Reset(reason));
            }
            Some(Err(e)) => return Err(FetchError::Protocol(e.to_string())),
            Some(Ok(chunk)) => {
                let room = cap - body.len();
                if chunk.len() > room {
                    body.push(chunk.slice(..room));
                    return Ok((body.finish(), true));
                }
                body.push(chunk);
            }
        }
    }
}

/// Whether an I/O error means the peer broke an established connection.
fn is_reset(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
    )
}

/// Whether an I/O error carries a TLS failure (tokio-rustls wraps
/// rustls' errors in `io::Error`).
fn is_tls(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

fn classify_send_error(err: awc::error::SendRequestError) -> FetchError {
    use awc::error::{ConnectError, SendRequestError as E};
    match err {
        E::Timeout => FetchError::Timeout,
        E::Connect(ConnectError::Timeout) => FetchError::Timeout,
        E::Connect(ConnectError::Resolver(e)) => match e.downcast_ref::<SsrfDenied>() {
            Some(denied) => FetchError::SsrfDenied(denied.to_string()),
            None => FetchError::Dns(e.to_string()),
        },
        E::Connect(ConnectError::Unresolved) => FetchError::Dns("unresolved".into()),
        E::Connect(ConnectError::Disconnected) => FetchError::Reset("disconnected".into()),
        E::Connect(ConnectError::Io(e)) if proxy::proxy_error(&e).is_some() => {
            FetchError::Proxy(e.to_string())
        }
        E::Connect(ConnectError::Io(e)) if is_tls(&e) => FetchError::Tls(e.to_string()),
        E::Connect(ConnectError::Io(e)) if is_reset(&e) => FetchError::Reset(e.to_string()),
        E::Connect(e) => FetchError::Connect(e.to_string()),
        E::Send(e) => FetchError::Reset(e.to_string()),
        E::Response(actix_web::error::ParseError::TooLarge) => {
            FetchError::TooLarge("response head over the parser's limit".into())
        }
        E::Url(e) => FetchError::BadUrl(e.to_string()),
        other => FetchError::Protocol(other.to_string()),
    }
}

/// The request head as sent (awc writes these headers and `Host`).
/// The headers a request sends besides Host, in order. The archived
/// request head is written from the same list, so it is what was sent.
fn request_headers<'a>(
    user_agent: &'a str,
    accept_encoding: Option<&'a str>,
    validators: &'a Validators,
) -> Vec<(&'static str, &'a str)> {
    let mut headers = vec![
        ("User-Agent", user_agent),
        ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
    ];
    headers.extend(accept_encoding.map(|codings| ("Accept-Encoding", codings)));
    headers.extend(validators.headers());
    headers
}

fn request_head(url: &Url, headers: &[(&str, &str)]) -> Vec<u8> {
    let target = match url.query() {
        Some(q) => format!("{}?{}", url.path(), q),
        None => url.path().to_owned(),
    };
    let host = match url.port() {
        Some(port) => format!("{}:{}", url.host_str().unwrap_or(""), port),
        None => url.host_str().unwrap_or("").to_owned(),
    };
    let mut head = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// The validators of the copy on record, sent back on a refetch as
/// `If-None-Match` and `If-Modified-Since`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// The copy's `ETag`.
    pub etag: Option<String>,
    /// The copy's `Last-Modified`.
    pub last_modified: Option<String>,
}

impl Validators {
    /// The longest validator sent back: a server's header of any length
    /// is not echoed.
    const MAX_LEN: usize = 512;

    /// The conditional headers to send: values as the server sent them,
    /// if they are visible ASCII of a sane length (anything else cannot be
    /// a valid validator, and must not break the request).
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let sane = |v: &&String| {
            !v.is_empty()
                && v.len() <= Self::MAX_LEN
                && v.bytes().all(|b| (0x20..0x7f).contains(&b))
        };
        let etag = self
            .etag
            .as_ref()
            .filter(sane)
            .map(|v| ("If-None-Match", v.as_str()));
        let date = self
            .last_modified
            .as_ref()
            .filter(sane)
            .map(|v| ("If-Modified-Since", v.as_str()));
        etag.into_iter().chain(date)
    }

    /// Whether any header would be sent.
    pub fn is_empty(&self) -> bool {
        self.headers().next().is_none()
    }
}

/// The response head for the archive. `Transfer-Encoding` is left out: the
/// archived body has its transfer coding removed, and a reader that saw the
/// header would try to de-chunk it again.
fn response_head(
    version: awc::http::Version,
    status: awc::http::StatusCode,
    headers: &[(String, String)],
) -> Vec<u8> {
    let version = match version {
        awc::http::Version::HTTP_10 => "HTTP/1.0",
        awc::http::Version::HTTP_2 => "HTTP/2",
        _ => "HTTP/1.1",
    };
    let mut head = format!(
        "{version} {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for (name, value) in headers {
        if name == "transfer-encoding" {
            continue;
        }
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_kind_is_listed() {
        let s = String::new;
        let all = [
            FetchError::Dns(s()),
            FetchError::Connect(s()),
            FetchError::Timeout,
            FetchError::Reset(s()),
            FetchError::Protocol(s()),
            FetchError::BadUrl(s()),
            FetchError::SsrfDenied(s()),
            FetchError::Tls(s()),
            FetchError::TooLarge(s()),
            FetchError::NotSent(s()),
            FetchError::Proxy(s()),
        ];
        let kinds: Vec<&str> = all.iter().map(FetchError::kind).collect();
        assert_eq!(kinds, FetchError::KINDS);
    }

    #[test]
    fn heads_are_well_formed() {
        let url = Url::parse("http://a.test:8080/x?y=1").unwrap();
        let plain = Validators::default();
        let head = |codings, validators| {
            let headers = request_headers("trawl/0.1", codings, validators);
            String::from_utf8(request_head(&url, &headers)).unwrap()
        };
        let req = head(None, &plain);
        assert!(req.starts_with("GET /x?y=1 HTTP/1.1\r\nHost: a.test:8080\r\n"));
        assert!(req.ends_with("\r\n\r\n"));
        assert!(!req.contains("If-"));
        assert!(!req.contains("Accept-Encoding"));
        let req = head(Some("gzip, br, zstd"), &plain);
        assert!(
            req.contains("\r\nAccept-Encoding: gzip, br, zstd\r\n"),
            "{req}"
        );
        let conditional = Validators {
            etag: Some("\"v1\"".into()),
            last_modified: Some("Tue, 15 Nov 1994 12:45:26 GMT".into()),
        };
        let req = head(None, &conditional);
        assert!(req.contains("\r\nIf-None-Match: \"v1\"\r\n"), "{req}");
        assert!(req.contains("\r\nIf-Modified-Since: Tue, 15 Nov 1994 12:45:26 GMT\r\n"));
        assert!(req.ends_with("GMT\r\n\r\n"));
        let head = response_head(
            awc::http::Version::HTTP_11,
            awc::http::StatusCode::NOT_FOUND,
            &[
                ("content-type".into(), "text/html".into()),
                ("transfer-encoding".into(), "chunked".into()),
            ],
        );
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\n\r\n"
        );
    }

    #[test]
    fn hostile_validators_are_not_sent_back() {
        let v = Validators {
            etag: Some("\"a\"\r\nX-Injected: 1".into()),
            last_modified: Some("x".repeat(10_000)),
        };
        assert!(v.is_empty());
        let ok = Validators {
            etag: Some("W/\"weak\"".into()),
            last_modified: Some(String::new()),
        };
        assert_eq!(
            ok.headers().collect::<Vec<_>>(),
            [("If-None-Match", "W/\"weak\"")]
        );
    }

    #[test]
    fn error_kinds_are_bounded_labels() {
        assert_eq!(FetchError::Timeout.kind(), "timeout");
        assert_eq!(FetchError::Dns("x".into()).kind(), "dns");
    }
}

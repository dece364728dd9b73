//! The synthetic web's HTTP server: every host on one loopback listener,
//! told apart by the Host header, with a log of every request.
//!
//! With a [`TestPki`] it also listens for HTTPS (HTTP/1.1 and HTTP/2 by
//! ALPN) and serves the same web there. The generator writes absolute links
//! as `http://siteNNNN.test:PORT`; over TLS they are rewritten to `https` and
//! the TLS port, so a crawl seeded over HTTPS stays on it.
//!
//! With a [`LinkGraph`] it also serves the graph's hosts, told apart the
//! same way (`trawl testweb --graph`).

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use actix_web::http::header;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};

use super::audit::RequestRecord;
use super::changing::{ChangingSpec, Timeline};
use super::generator::{Resource, SitemapFile, SyntheticWeb};
use super::graph::LinkGraph;
use super::profile::{RobotsMode, Throttle, RETRY_AFTER_SECS, THROTTLED_PAGE};
use super::tls::TestPki;

/// Every request the server answered, in completion order.
#[derive(Default)]
pub struct RequestLog {
    records: Mutex<Vec<RequestRecord>>,
    grew: Condvar,
    /// Requests being worked on now, by the address they came from
    /// (logged once finished).
    in_progress: Mutex<HashMap<Option<std::net::IpAddr>, usize>>,
}

impl RequestLog {
    fn push(&self, record: RequestRecord) {
        self.records.lock().expect("log lock").push(record);
        self.grew.notify_all();
    }

    /// Requests the server is working on now (including those whose
    /// client gave up): a test waits on this to act while requests are
    /// in flight.
    pub fn in_progress(&self) -> usize {
        self.in_progress.lock().expect("log lock").values().sum()
    }

    /// Requests from `client` the server is working on now.
    pub fn in_progress_from(&self, client: std::net::IpAddr) -> usize {
        let working = self.in_progress.lock().expect("log lock");
        working.get(&Some(client)).copied().unwrap_or(0)
    }

    fn working(&self, client: Option<std::net::IpAddr>, by: isize) {
        let mut working = self.in_progress.lock().expect("log lock");
        let n = working.entry(client).or_default();
        *n = n.saturating_add_signed(by);
    }

    /// A copy of the log.
    pub fn records(&self) -> Vec<RequestRecord> {
        self.records.lock().expect("log lock").clone()
    }

    /// Requests answered so far.
    pub fn len(&self) -> usize {
        self.records.lock().expect("log lock").len()
    }

    /// Whether nothing was answered yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Blocks until at least `n` requests were answered or `timeout`
    /// passes; returns whether `n` was reached.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> bool {
        let guard = self.records.lock().expect("log lock");
        let (guard, _) = self
            .grew
            .wait_timeout_while(guard, timeout, |r| r.len() < n)
            .expect("log lock");
        guard.len() >= n
    }
}

struct ServerState {
    web: SyntheticWeb,
    log: Arc<RequestLog>,
    /// Requests seen per (host name, path), for behaviours that change
    /// with repetition (flaky robots.txt, one-time throttling,
    /// `changing.test`'s `/always`).
    hits: Mutex<HashMap<(String, String), u32>>,
    /// Where `hostile.test` points its bait.
    hostile: super::hostile::Targets,
    /// When `changing.test` changes what.
    changing: ChangingSpec,
    /// The clock `changing.test` changes by, started with the server.
    timeline: Timeline,
    /// See [`ServerOptions::compress`].
    compress: bool,
    /// See [`ServerOptions::slow_pages`].
    slow_pages: SlowPages,
    /// See [`ServerOptions::graph`].
    graph: Option<Arc<LinkGraph>>,
}

impl ServerState {
    /// How many times `path` of `host` was requested before this request.
    fn attempt(&self, host: &str, path: &str) -> u32 {
        let mut hits = self.hits.lock().expect("hits lock");
        let n = hits.entry((host.to_owned(), path.to_owned())).or_insert(0);
        *n += 1;
        *n - 1
    }
}

/// What a server serves besides the synthetic hosts.
#[derive(Clone, Default)]
pub struct ServerOptions {
    /// Where `hostile.test` points its bait.
    pub hostile: super::hostile::Targets,
    /// Serve HTTPS too, on a second port, with these certificates.
    pub tls: Option<TestPki>,
    /// When `changing.test` changes what.
    pub changing: ChangingSpec,
    /// Compress the synthetic hosts' 200 answers (pages, robots.txt,
    /// sitemaps) when the request's Accept-Encoding allows: host N uses
    /// gzip, br or zstd by N mod 3 if asked, else the first coding asked
    /// of those three ([`compressed`]).
    pub compress: bool,
    /// Pages that answer late ([`SlowPages`]).
    pub slow_pages: SlowPages,
    /// A link graph served beside the synthetic hosts: each of its hosts
    /// answers with its pages, links as `<a href>`, and a robots.txt that
    /// allows everything (`trawl testweb --graph`, the ordering bench).
    pub graph: Option<Arc<LinkGraph>>,
}

/// Pages of every synthetic host that answer only after a while, by page
/// id (0 is a host's seed page, `/`): a web with requests in flight for
/// seconds, slower than the crawler's timeouts if asked. The server works
/// on such a request to its end even when the client gave up (as a real
/// server does) and logs it then, marked `abandoned`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlowPages(pub std::collections::BTreeMap<u32, Duration>);

impl SlowPages {
    /// How long page `id` takes, if it is slow.
    pub fn of(&self, id: u32) -> Option<Duration> {
        self.0.get(&id).copied()
    }
}

impl std::str::FromStr for SlowPages {
    type Err = String;

    /// `ID=DURATION[,ID=DURATION...]`, e.g. `0=15s,3=12s`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut pages = std::collections::BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, wait) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected ID=DURATION"))?;
            let id: u32 = id
                .trim()
                .parse()
                .map_err(|e| format!("{part:?}: page id: {e}"))?;
            let wait = humantime::parse_duration(wait.trim())
                .map_err(|e| format!("{part:?}: duration: {e}"))?;
            pages.insert(id, wait);
        }
        Ok(SlowPages(pages))
    }
}

/// A running synthetic web server (on its own thread and actix system).
pub struct TestWebServer {
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    log: Arc<RequestLog>,
    timeline: Timeline,
    handle: actix_web::dev::ServerHandle,
    thread: Option<JoinHandle<()>>,
}

impl TestWebServer {
    /// Binds `listen` (port 0 picks a free one) and serves `web` with
    /// `workers` threads.
    pub fn start(web: SyntheticWeb, listen: SocketAddr, workers: usize) -> std::io::Result<Self> {
        Self::start_hostile(web, listen, workers, Default::default())
    }

    /// Like [`TestWebServer::start`]; `hostile.test` also links and
    /// redirects to the `hostile` targets (see [`super::hostile`]).
    pub fn start_hostile(
        web: SyntheticWeb,
        listen: SocketAddr,
        workers: usize,
        hostile: super::hostile::Targets,
    ) -> std::io::Result<Self> {
        let options = ServerOptions {
            hostile,
            ..Default::default()
        };
        Self::start_with(web, listen, workers, options)
    }

    /// Like [`TestWebServer::start`], with `options`; the HTTPS listener
    /// (if any) binds another port of `listen`'s address.
    pub fn start_with(
        web: SyntheticWeb,
        listen: SocketAddr,
        workers: usize,
        options: ServerOptions,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let tls = match &options.tls {
            Some(pki) => {
                let config = pki.server_config().map_err(std::io::Error::other)?;
                let tls_listener = TcpListener::bind(SocketAddr::new(listen.ip(), 0))?;
                Some((tls_listener, config))
            }
            None => None,
        };
        let tls_addr = match &tls {
            Some((l, _)) => Some(l.local_addr()?),
            None => None,
        };
        let log = Arc::new(RequestLog::default());
        let timeline = Timeline::start();
        let state = web::Data::new(ServerState {
            web,
            log: log.clone(),
            hits: Mutex::default(),
            hostile: options.hostile,
            changing: options.changing,
            timeline,
            compress: options.compress,
            slow_pages: options.slow_pages,
            graph: options.graph,
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("testweb".into())
            .spawn(move || {
                let system = actix_rt::System::new();
                let ready = tx.clone();
                let result = system.block_on(async move {
                    let mut server = HttpServer::new(move || {
                        App::new()
                            .app_data(state.clone())
                            .default_service(web::to(serve))
                    })
                    .on_connect(PeerSocket::keep)
                    .workers(workers.max(1))
                    .disable_signals()
                    .backlog(4096)
                    .listen(listener)?;
                    if let Some((tls_listener, config)) = tls {
                        server = server.listen_rustls_0_23(tls_listener, config)?;
                    }
                    let server = server.run();
                    let _ = ready.send(Ok(server.handle()));
                    server.await
                });
                if let Err(err) = result {
                    let _ = tx.send(Err(err));
                }
            })?;
        let handle = rx
            .recv()
            .map_err(|_| std::io::Error::other("testweb server thread died"))??;
        Ok(TestWebServer {
            addr,
            tls_addr,
            log,
            timeline,
            handle,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound HTTPS address, if the server serves TLS.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The request log.
    pub fn log(&self) -> &Arc<RequestLog> {
        &self.log
    }

    /// The clock `changing.test` changes by: maps a logged request's
    /// `start` to the moment the server answered it at (see
    /// [`super::changing::expected`]).
    pub fn changing_timeline(&self) -> Timeline {
        self.timeline
    }

    /// Stops the server and waits for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(thread) = self.thread.take() {
            let handle = self.handle.clone();
            // The handle's future completes on the server's own thread.
            let stopper = std::thread::spawn(move || {
                actix_rt::System::new().block_on(handle.stop(false));
            });
            let _ = stopper.join();
            let _ = thread.join();
        }
    }
}

impl Drop for TestWebServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Serves `req` in a task of its own, so a request whose client stopped
/// waiting is still worked on to its end and logged then (a real server
/// does not learn that a client gave up; the audit counts the request in
/// flight until the server finished it).
async fn serve(req: HttpRequest, state: web::Data<ServerState>) -> HttpResponse {
    let mut gone = GoneOnDrop::default();
    let work = actix_rt::spawn(answer(req, state, gone.flag.clone()));
    let response = work.await;
    gone.answered = true;
    response.unwrap_or_else(|_| HttpResponse::InternalServerError().finish())
}

/// A copy of a plain connection's socket, kept with the connection so a
/// request can tell, when the server finishes it, whether the client has
/// closed the connection meanwhile (it gave up, or was killed): the
/// handler itself is not told.
struct PeerSocket(std::net::TcpStream);

impl PeerSocket {
    /// Keeps a copy of the connection's socket, if it is plain TCP.
    fn keep(conn: &dyn std::any::Any, data: &mut actix_web::dev::Extensions) {
        use std::os::fd::AsFd;
        let Some(stream) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() else {
            return;
        };
        let Ok(fd) = stream.as_fd().try_clone_to_owned() else {
            return;
        };
        let socket = std::net::TcpStream::from(fd);
        if socket.set_nonblocking(true).is_ok() {
            data.insert(std::rc::Rc::new(PeerSocket(socket)));
        }
    }

    /// Whether the client closed its side (an end of stream is waiting;
    /// a client still waiting for its answer sends nothing).
    fn closed(&self) -> bool {
        let mut byte = [0u8; 1];
        match self.0.peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }
}

/// Sets its flag when dropped before the answer: the handler's future was
/// dropped, so the client went away.
#[derive(Default)]
struct GoneOnDrop {
    flag: std::rc::Rc<std::cell::Cell<bool>>,
    answered: bool,
}

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        if !self.answered {
            self.flag.set(true);
        }
    }
}

async fn answer(
    req: HttpRequest,
    state: web::Data<ServerState>,
    gone: std::rc::Rc<std::cell::Cell<bool>>,
) -> HttpResponse {
    let start = Instant::now();
    let _working = Working::new(&state.log, req.peer_addr().map(|a| a.ip()));
    let peer = req.conn_data::<std::rc::Rc<PeerSocket>>().cloned();
    // The Host header, or HTTP/2's :authority.
    let authority = req.connection_info().host().to_owned();
    let host_name = authority
        .split(':')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let host = state.web.host_index(&host_name);
    if let Some(slow) = host.and_then(|h| state.web.profile(h).slow) {
        actix_rt::time::sleep(slow).await;
    }
    let path = req.uri().path();
    let slow_page = host.and_then(|h| match state.web.resolve(h, path) {
        Some(Resource::Page(id)) => state.slow_pages.of(id),
        _ => None,
    });
    if let Some(wait) = slow_page {
        actix_rt::time::sleep(wait).await;
    }
    let origin = Origin {
        secure: req.app_config().secure(),
        port: req.app_config().local_addr().port(),
    };
    let if_none_match = header_list(&req, header::IF_NONE_MATCH);
    let if_modified_since = header_list(&req, header::IF_MODIFIED_SINCE);
    let (response, not_before) = match host {
        Some(host) => respond(&state, host, path, origin),
        None if host_name == super::hostile::HOST => {
            (super::hostile::respond(path, state.hostile), None)
        }
        None if super::dupes::serves(&host_name) => {
            let target = req.uri().path_and_query().map_or(path, |pq| pq.as_str());
            (super::dupes::respond(&host_name, target, origin.port), None)
        }
        None if super::changing::serves(&host_name) => {
            let request = super::changing::Request {
                path,
                port: origin.port,
                secure: origin.secure,
                if_none_match: if_none_match.as_deref(),
                if_modified_since: if_modified_since.as_deref(),
            };
            (changing(&state, &request, start), None)
        }
        None => match graph_host(&state, &host_name) {
            Some((graph, host)) => {
                let target = req.uri().path_and_query().map_or(path, |pq| pq.as_str());
                (graph_page(graph, host, target, origin), None)
            }
            None => (not_found(), None),
        },
    };
    let response = match host {
        Some(host) if state.compress => {
            compressed(response, host, header_list(&req, header::ACCEPT_ENCODING)).await
        }
        _ => response,
    };
    let end = Instant::now();
    let etag = response
        .headers()
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    state.log.push(RequestRecord {
        host: host_name,
        path: req
            .uri()
            .path_and_query()
            .map_or_else(|| path.to_owned(), |pq| pq.as_str().to_owned()),
        status: response.status().as_u16(),
        version: format!("{:?}", req.version()),
        start,
        end,
        not_before,
        if_none_match,
        if_modified_since,
        etag,
        client: req.peer_addr().map(|a| a.ip()),
        abandoned: gone.get() || peer.is_some_and(|p| p.closed()),
    });
    response
}

/// Counts a request from a client in progress while it lives.
struct Working<'a>(&'a RequestLog, Option<std::net::IpAddr>);

impl<'a> Working<'a> {
    fn new(log: &'a RequestLog, client: Option<std::net::IpAddr>) -> Self {
        log.working(client, 1);
        Working(log, client)
    }
}

impl Drop for Working<'_> {
    fn drop(&mut self) {
        self.0.working(self.1, -1);
    }
}

/// The codings the synthetic web can send, host N preferring the N mod 3rd.
const CODINGS: [&str; 3] = ["gzip", "br", "zstd"];

/// `response` compressed with a coding `accept` (the request's
/// Accept-Encoding) allows, host `host`'s if it does; as it is when it is
/// not a 200 or nothing is allowed.
async fn compressed(response: HttpResponse, host: u32, accept: Option<String>) -> HttpResponse {
    let asked: Vec<String> = accept
        .unwrap_or_default()
        .split(',')
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    let preferred = CODINGS[host as usize % CODINGS.len()];
    let coding = std::iter::once(preferred)
        .chain(CODINGS)
        .find(|c| asked.iter().any(|a| a == c));
    let Some(coding) = coding.filter(|_| response.status() == actix_web::http::StatusCode::OK)
    else {
        return response;
    };
    let (mut head, body) = response.into_parts();
    let Ok(bytes) = actix_web::body::to_bytes(body).await else {
        return HttpResponse::InternalServerError().finish();
    };
    let encoded = encode(coding, &bytes);
    let headers = head.headers_mut();
    headers.insert(
        header::CONTENT_ENCODING,
        header::HeaderValue::from_static(coding),
    );
    headers.insert(
        header::VARY,
        header::HeaderValue::from_static("Accept-Encoding"),
    );
    head.set_body(actix_web::body::BoxBody::new(encoded))
}

/// `bytes` in `coding` (one of [`CODINGS`]).
fn encode(coding: &str, bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match coding {
        "gzip" => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(bytes).expect("writing to memory");
            gz.finish().expect("writing to memory")
        }
        "br" => {
            let mut out = Vec::new();
            let mut br = brotli::CompressorWriter::new(&mut out, 4096, 4, 22);
            br.write_all(bytes).expect("writing to memory");
            drop(br);
            out
        }
        _ => zstd::bulk::compress(bytes, 3).expect("zstd in memory"),
    }
}

/// `changing.test`'s answer to `request`, which reached the handler at
/// `start`.
fn changing(
    state: &ServerState,
    request: &super::changing::Request,
    start: Instant,
) -> HttpResponse {
    let hits = state.attempt(super::changing::HOST, request.path);
    let moment = state.timeline.moment(start, hits);
    super::changing::respond(request, &moment, &state.changing).into_response()
}

/// Every `name` field of `req`, joined with `, ` as a list field may be
/// (`None` when there is none, or one is not visible ASCII).
fn header_list(req: &HttpRequest, name: header::HeaderName) -> Option<String> {
    let values: Option<Vec<&str>> = req
        .headers()
        .get_all(name)
        .map(|v| v.to_str().ok())
        .collect();
    values.filter(|v| !v.is_empty()).map(|v| v.join(", "))
}

/// The 404 every synthetic host answers for what it does not have.
pub(super) fn not_found() -> HttpResponse {
    HttpResponse::NotFound()
        .content_type("text/html; charset=utf-8")
        .body("<html><body><h1>not found</h1></body></html>")
}

/// The served link graph and the number of its host `name`, if it has
/// that host.
fn graph_host<'a>(state: &'a ServerState, name: &str) -> Option<(&'a LinkGraph, u32)> {
    let graph = state.graph.as_deref()?;
    Some((graph, graph.host_of_name(name)?))
}

/// A link graph's answer for `path` (with its query) of its host `host`:
/// robots.txt allows all, a page of the graph is its HTML, anything else
/// is a 404.
fn graph_page(graph: &LinkGraph, host: u32, path: &str, origin: Origin) -> HttpResponse {
    if path == "/robots.txt" {
        return HttpResponse::Ok()
            .content_type("text/plain")
            .body("User-agent: *\nDisallow:\n");
    }
    match graph.page(host, path) {
        Some(page) => {
            let scheme = if origin.secure { "https" } else { "http" };
            HttpResponse::Ok()
                .content_type("text/html; charset=utf-8")
                .body(graph.render(page, scheme, origin.port))
        }
        None => not_found(),
    }
}

/// The listener a request came through.
#[derive(Debug, Clone, Copy)]
struct Origin {
    secure: bool,
    port: u16,
}

impl Origin {
    /// `body` with its absolute synthetic-web links moved to this
    /// listener's scheme (the generator writes `http`).
    fn rewrite(self, body: impl Into<String>) -> String {
        let body = body.into();
        if self.secure {
            body.replace("http://site", "https://site")
        } else {
            body
        }
    }
}

/// The response, and the earliest next request a Retry-After in it asks
/// for.
fn respond(
    state: &ServerState,
    host: u32,
    path: &str,
    origin: Origin,
) -> (HttpResponse, Option<Instant>) {
    let web = &state.web;
    let profile = web.profile(host);
    let port = origin.port;
    let base = format!("http://{}:{port}", SyntheticWeb::host_name(host));
    let response = match web.resolve(host, path) {
        Some(Resource::Robots(hop)) => {
            let attempt = state.attempt(&SyntheticWeb::host_name(host), path);
            match profile.robots {
                RobotsMode::Missing => not_found(),
                RobotsMode::Forbidden => HttpResponse::Forbidden().finish(),
                RobotsMode::ServerError => HttpResponse::InternalServerError().finish(),
                RobotsMode::FlakyThenStar { failures } if attempt < failures => {
                    HttpResponse::ServiceUnavailable().finish()
                }
                RobotsMode::Redirects { hops } if hop < hops => HttpResponse::MovedPermanently()
                    .insert_header(("Location", format!("/robots-{}.txt", hop + 1)))
                    .finish(),
                _ => HttpResponse::Ok()
                    .content_type("text/plain")
                    .body(origin.rewrite(profile.robots_body(host, &base))),
            }
        }
        Some(Resource::Sitemap(file)) => {
            let content_type = match file {
                SitemapFile::GzipPart => "application/gzip",
                SitemapFile::TextPart => "text/plain",
                SitemapFile::Main | SitemapFile::Index => "application/xml",
            };
            let body = web.sitemap_body(host, file, port);
            let body = match (origin.secure, file) {
                // Compressed: served as made (its URLs stay http).
                (true, SitemapFile::GzipPart) | (false, _) => body,
                (true, _) => origin.rewrite(String::from_utf8_lossy(&body)).into_bytes(),
            };
            HttpResponse::Ok().content_type(content_type).body(body)
        }
        Some(Resource::Page(id)) => {
            if id == THROTTLED_PAGE
                && profile.throttle != Throttle::None
                && state.attempt(&SyntheticWeb::host_name(host), path) == 0
            {
                return throttle(profile.throttle);
            }
            HttpResponse::Ok()
                .content_type("text/html; charset=utf-8")
                .body(origin.rewrite(web.render(host, id, port)))
        }
        Some(Resource::Missing(_)) | None => not_found(),
    };
    (response, None)
}

/// A 429 or 503 with Retry-After, and the earliest next request it asks
/// for. Both are measured from the moment the response is made, not from
/// when the server finishes sending it: a crawler counts the wait from its
/// receipt (seconds form) or against the wall clock (date form), and a busy
/// server may log the end of a response late.
fn throttle(kind: Throttle) -> (HttpResponse, Option<Instant>) {
    let made = Instant::now();
    if kind == Throttle::TooManyRequests {
        let wait = Duration::from_secs(RETRY_AFTER_SECS);
        let response = HttpResponse::TooManyRequests()
            .insert_header(("Retry-After", RETRY_AFTER_SECS.to_string()))
            .finish();
        return (response, Some(made + wait));
    }
    // HTTP-dates have whole seconds: the date is 1-2 s away. The wait is
    // measured against the date as sent, less 2 ms for the two clocks the
    // server and the crawler read it with.
    let now = SystemTime::now();
    let date = httpdate::fmt_http_date(now + Duration::from_secs(2));
    let at = httpdate::parse_http_date(&date).expect("formatted just now");
    let wait = at
        .duration_since(now)
        .unwrap_or_default()
        .saturating_sub(Duration::from_millis(2));
    let response = HttpResponse::ServiceUnavailable()
        .insert_header(("Retry-After", date))
        .finish();
    (response, Some(made + wait))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_pages_read_id_duration_pairs_and_name_what_is_wrong() {
        let pages: SlowPages = "0=25s, 3=12s,".parse().unwrap();
        assert_eq!(pages.of(0), Some(Duration::from_secs(25)));
        assert_eq!(pages.of(3), Some(Duration::from_secs(12)));
        assert_eq!(pages.of(1), None);
        assert_eq!("".parse::<SlowPages>().unwrap(), SlowPages::default());
        let err = "0:25s".parse::<SlowPages>().unwrap_err();
        assert!(err.contains("expected ID=DURATION"), "{err}");
        let err = "x=1s".parse::<SlowPages>().unwrap_err();
        assert!(err.contains("page id"), "{err}");
        let err = "1=soon".parse::<SlowPages>().unwrap_err();
        assert!(err.contains("duration"), "{err}");
    }

    /// The status line and body of a GET of `path` from host `host`.
    fn get(addr: SocketAddr, host: &str, path: &str) -> (String, String) {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}:{}\r\nConnection: close\r\n\r\n",
            addr.port()
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (head.lines().next().unwrap().to_owned(), body.to_owned())
    }

    #[test]
    fn a_link_graph_is_served_by_host_with_its_links_and_an_open_robots_txt() {
        let graph =
            LinkGraph::parse("seed a.test\na.test b.test/x?y=1\nb.test/x?y=1 a.test\n").unwrap();
        let web = SyntheticWeb::new(super::super::WebSpec {
            hosts: 0,
            pages_per_host: 1,
            seed: 0,
            behaviours: false,
        });
        let options = ServerOptions {
            graph: Some(Arc::new(graph)),
            ..Default::default()
        };
        let server =
            TestWebServer::start_with(web, "127.0.0.1:0".parse().unwrap(), 1, options).unwrap();
        let addr = server.addr();
        let port = addr.port();
        let (status, body) = get(addr, "a.test", "/");
        assert!(status.contains("200"), "{status}");
        assert!(
            body.contains(&format!("href=\"http://b.test:{port}/x?y=1\"")),
            "{body}"
        );
        let (status, body) = get(addr, "b.test", "/x?y=1");
        assert!(status.contains("200"), "{status}");
        assert!(
            body.contains(&format!("href=\"http://a.test:{port}/\"")),
            "{body}"
        );
        let (status, body) = get(addr, "b.test", "/robots.txt");
        assert!(status.contains("200"), "{status}");
        assert_eq!(body, "User-agent: *\nDisallow:\n");
        for (host, path) in [("b.test", "/"), ("b.test", "/x"), ("c.test", "/")] {
            let (status, _) = get(addr, host, path);
            assert!(status.contains("404"), "{host}{path}: {status}");
        }
        // Logged as every request is, for the politeness audit.
        let records = server.log().records();
        assert_eq!(records.len(), 6);
        assert_eq!(
            (records[1].host.as_str(), records[1].path.as_str()),
            ("b.test", "/x?y=1")
        );
        server.stop();
    }
}

//! The synthetic web's HTTP server: every host on one loopback listener,
//! told apart by the Host header, with a log of every request.

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};

use super::audit::RequestRecord;
use super::generator::{Resource, SyntheticWeb};

/// Every request the server answered, in completion order.
#[derive(Default)]
pub struct RequestLog {
    records: Mutex<Vec<RequestRecord>>,
    grew: Condvar,
}

impl RequestLog {
    fn push(&self, record: RequestRecord) {
        self.records.lock().expect("log lock").push(record);
        self.grew.notify_all();
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
    port: u16,
    log: Arc<RequestLog>,
}

/// A running synthetic web server (on its own thread and actix system).
pub struct TestWebServer {
    addr: SocketAddr,
    log: Arc<RequestLog>,
    handle: actix_web::dev::ServerHandle,
    thread: Option<JoinHandle<()>>,
}

impl TestWebServer {
    /// Binds `listen` (port 0 picks a free one) and serves `web` with
    /// `workers` threads.
    pub fn start(web: SyntheticWeb, listen: SocketAddr, workers: usize) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let log = Arc::new(RequestLog::default());
        let state = web::Data::new(ServerState {
            web,
            port: addr.port(),
            log: log.clone(),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("testweb".into())
            .spawn(move || {
                let system = actix_rt::System::new();
                let ready = tx.clone();
                let result = system.block_on(async move {
                    let server = HttpServer::new(move || {
                        App::new()
                            .app_data(state.clone())
                            .default_service(web::to(serve))
                    })
                    .workers(workers.max(1))
                    .disable_signals()
                    .backlog(4096)
                    .listen(listener)?
                    .run();
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
            log,
            handle,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The request log.
    pub fn log(&self) -> &Arc<RequestLog> {
        &self.log
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

async fn serve(req: HttpRequest, state: web::Data<ServerState>) -> HttpResponse {
    let start = Instant::now();
    let host_header = req
        .headers()
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let host_name = host_header
        .split(':')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let path = req.uri().path();
    let response = respond(&state, &host_name, path);
    let status = response.status().as_u16();
    state.log.push(RequestRecord {
        host: host_name,
        path: req
            .uri()
            .path_and_query()
            .map_or_else(|| path.to_owned(), |pq| pq.as_str().to_owned()),
        status,
        start,
        end: Instant::now(),
    });
    response
}

fn respond(state: &ServerState, host_name: &str, path: &str) -> HttpResponse {
    let not_found = || {
        HttpResponse::NotFound()
            .content_type("text/html; charset=utf-8")
            .body("<html><body><h1>not found</h1></body></html>")
    };
    let Some(host) = state.web.host_index(host_name) else {
        return not_found();
    };
    match state.web.resolve(host, path) {
        Some(Resource::Robots) => match state.web.robots_txt(host) {
            Some(body) => HttpResponse::Ok().content_type("text/plain").body(body),
            None => not_found(),
        },
        Some(Resource::Page(id)) => HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .body(state.web.render(host, id, state.port)),
        Some(Resource::Missing(_)) | None => not_found(),
    }
}

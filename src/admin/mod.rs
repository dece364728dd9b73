//! The admin HTTP API (actix-web), an edge of the system: it holds the
//! node's handle, the node does not know it exists.
//!
//! Read-only:
//! - `GET /metrics`: Prometheus text exposition;
//! - `GET /api/v1/status`: the node's status as JSON;
//! - `GET /api/v1/cluster`: a cluster node's view of the cluster;
//! - `GET /api/v1/report?format=json|text`: the node's crawl report
//!   (`src/report`);
//! - `GET /api/v1/hosts/{host}`: one host's robots.txt, politeness state
//!   and queue sizes; on a cluster node, a host of a partition another
//!   node holds is asked of that node's admin API;
//! - `GET /api/v1/hosts?state=&sort=&limit=&offset=`: the hosts being
//!   attended to (on a cluster, gathered from every node), busiest,
//!   slowest, failing or stuck first;
//! - `GET /api/v1/hosts/{host}/queue`: its queued URLs and refreshes;
//! - `GET /api/v1/crawl`: the runtime controls;
//! - `GET /api/v1/openapi.json`: the OpenAPI 3 document of all this,
//!   generated from the handlers' types ([`api::ApiDoc`]).
//!
//! Mutating (bearer token, see [`auth`]):
//! - `POST /api/v1/crawl/pause`, `POST /api/v1/crawl/resume`: no new
//!   request starts while paused; kept across restarts. On a cluster the
//!   node asked sets every other node too;
//! - `PUT /api/v1/crawl/rate`: the request rate of each node;
//! - `PUT`/`DELETE /api/v1/hosts/{host}/politeness`: slows a host down
//!   (never faster than configuration and robots.txt allow);
//! - `POST /api/v1/seeds`: admits seeds, answering each URL's outcome;
//! - `PUT`/`DELETE /api/v1/hosts/{host}/block` and
//!   `/api/v1/domains/{domain}/block`: blocks at once and durably (on a
//!   cluster, asked of the node holding the name's partition).
//!
//! Every error is a JSON body with a stable code ([`error::ApiError`]):
//! malformed JSON, wrong types, unknown fields, bodies over 1 MiB, a
//! missing content type, unknown paths and methods all get a 4xx.
//!
//! With `[admin] tls = true` the API is served over HTTPS ([`tls`]).

pub mod api;
pub mod auth;
pub mod crawl;
pub mod error;
pub mod forward;
pub mod hosts;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use actix::Addr;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};

use crate::actors::Node;
use crate::metrics::Metrics;
pub use auth::{Access, AccessError};
use error::ApiError;

/// The largest request body accepted.
const MAX_BODY: usize = 1 << 20;

/// What every handler is given.
pub struct AdminState {
    node: Addr<Node>,
    metrics: Arc<Metrics>,
    access: Access,
    /// The API's TLS, if it serves HTTPS: forwarding to other nodes then
    /// uses HTTPS too.
    tls: Option<tls::AdminTls>,
}

/// A running admin server.
pub struct AdminServer {
    /// Stops the server.
    pub handle: actix_web::dev::ServerHandle,
    /// The bound address.
    pub addr: SocketAddr,
}

/// Binds `listen` and serves the API on the current actix system, open to
/// anyone who can reach it (tests and the demo, on loopback).
pub fn start(
    listen: &str,
    node: Addr<Node>,
    metrics: Arc<Metrics>,
) -> std::io::Result<AdminServer> {
    start_with(listen, Access::open(), node, metrics)
}

/// Serves the API on `listener`, bound by the caller, with `access`
/// rules. A test that must know the port before the node starts (to put
/// it in the node's config) keeps the socket it found the port with,
/// instead of closing it and binding again: in between, an outgoing
/// connection may be given that port.
pub fn start_on(
    listener: std::net::TcpListener,
    access: Access,
    node: Addr<Node>,
    metrics: Arc<Metrics>,
) -> std::io::Result<AdminServer> {
    serve(Listen::Socket(listener), access, None, node, metrics)
}

/// [`start_on`], serving HTTPS with `tls` if given (`[admin] tls`).
pub fn start_secured_on(
    listener: std::net::TcpListener,
    access: Access,
    tls: Option<tls::AdminTls>,
    node: Addr<Node>,
    metrics: Arc<Metrics>,
) -> std::io::Result<AdminServer> {
    serve(Listen::Socket(listener), access, tls, node, metrics)
}

/// Binds `listen` and serves the API with `access` rules.
pub fn start_with(
    listen: &str,
    access: Access,
    node: Addr<Node>,
    metrics: Arc<Metrics>,
) -> std::io::Result<AdminServer> {
    serve(Listen::Addr(listen), access, None, node, metrics)
}

/// Where the server listens.
enum Listen<'a> {
    /// An address to bind (names may resolve to several).
    Addr(&'a str),
    /// A socket already bound.
    Socket(std::net::TcpListener),
}

fn serve(
    listen: Listen<'_>,
    access: Access,
    tls: Option<tls::AdminTls>,
    node: Addr<Node>,
    metrics: Arc<Metrics>,
) -> std::io::Result<AdminServer> {
    let server_tls = tls.as_ref().map(|t| (*t.server).clone());
    let state = web::Data::new(AdminState {
        node,
        metrics,
        access,
        tls,
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(
                web::JsonConfig::default()
                    .limit(MAX_BODY)
                    .error_handler(|err, _| error::json_error(err).into()),
            )
            .app_data(
                web::PathConfig::default().error_handler(|err, _| error::path_error(err).into()),
            )
            .app_data(
                web::QueryConfig::default().error_handler(|err, _| error::query_error(err).into()),
            )
            .service(resource("/metrics").route(web::get().to(metrics_text)))
            .service(resource("/api/v1/status").route(web::get().to(api::status)))
            .service(resource("/api/v1/cluster").route(web::get().to(api::cluster)))
            .service(resource("/api/v1/report").route(web::get().to(api::report)))
            .service(resource("/api/v1/hosts").route(web::get().to(hosts::hosts)))
            .service(resource("/api/v1/hosts/{host}").route(web::get().to(hosts::host)))
            .service(resource("/api/v1/hosts/{host}/queue").route(web::get().to(hosts::queue)))
            .service(
                resource("/api/v1/hosts/{host}/politeness")
                    .route(web::put().to(hosts::slow_down))
                    .route(web::delete().to(hosts::lift_slowdown)),
            )
            .service(
                resource("/api/v1/hosts/{host}/block")
                    .route(web::put().to(hosts::block_host))
                    .route(web::delete().to(hosts::unblock_host)),
            )
            .service(
                resource("/api/v1/domains/{domain}/block")
                    .route(web::put().to(hosts::block_domain))
                    .route(web::delete().to(hosts::unblock_domain)),
            )
            .service(resource("/api/v1/crawl").route(web::get().to(crawl::controls)))
            .service(resource("/api/v1/crawl/pause").route(web::post().to(crawl::pause)))
            .service(resource("/api/v1/crawl/resume").route(web::post().to(crawl::resume)))
            .service(resource("/api/v1/crawl/rate").route(web::put().to(crawl::set_rate)))
            .service(resource("/api/v1/seeds").route(web::post().to(crawl::seeds)))
            .service(resource("/api/v1/openapi.json").route(web::get().to(api::openapi_json)))
            .default_service(web::to(not_found))
    })
    .workers(1)
    .disable_signals();
    let server = match (listen, server_tls) {
        (Listen::Addr(addr), None) => server.bind(addr)?,
        (Listen::Addr(addr), Some(tls)) => server.bind_rustls_0_23(addr, tls)?,
        (Listen::Socket(listener), None) => server.listen(listener)?,
        (Listen::Socket(listener), Some(tls)) => server.listen_rustls_0_23(listener, tls)?,
    };
    let addr = server
        .addrs()
        .first()
        .copied()
        .ok_or_else(|| std::io::Error::other("admin server bound no address"))?;
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    Ok(AdminServer { handle, addr })
}

async fn metrics_text(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render()))
}

/// A resource whose other methods answer 405 with a JSON error.
fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::not_found(format!(
        "no endpoint {} {}",
        req.method(),
        req.path()
    )))
}

async fn method_not_allowed(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::method_not_allowed(format!(
        "{} is not served on {}",
        req.method(),
        req.path()
    )))
}

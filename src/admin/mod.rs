//! The admin HTTP API (actix-web), an edge of the system: it holds the
//! node's handle, the node does not know it exists.
//!
//! - `GET /metrics`: Prometheus text exposition;
//! - `GET /api/v1/status`: the node's status as JSON;
//! - `GET /api/v1/cluster`: a cluster node's view of the cluster;
//! - `GET /api/v1/hosts/{host}`: one host's robots.txt state (per origin:
//!   status, fetch time, rule count, Crawl-delay, sitemaps), politeness
//!   state (in flight, next allowed, failures, parked) and queue sizes by
//!   priority, whether its actor is active or not. On a cluster node, a
//!   host of a partition another node holds is asked of that node's admin
//!   API (once: a forwarded question is not forwarded again).
//!
//! Unknown paths answer 404 with a JSON error body.

use std::net::SocketAddr;
use std::sync::Arc;

use actix::Addr;
use actix_web::{web, App, HttpResponse, HttpServer};

use crate::actors::{GetCluster, GetStatus, HostInfo, Node};
use crate::metrics::Metrics;

struct AdminState {
    node: Addr<Node>,
    metrics: Arc<Metrics>,
}

/// A running admin server.
pub struct AdminServer {
    /// Stops the server.
    pub handle: actix_web::dev::ServerHandle,
    /// The bound address.
    pub addr: SocketAddr,
}

/// Binds `listen` and serves the API on the current actix system.
pub fn start(
    listen: &str,
    node: Addr<Node>,
    metrics: Arc<Metrics>,
) -> std::io::Result<AdminServer> {
    let state = web::Data::new(AdminState { node, metrics });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route("/metrics", web::get().to(metrics_text))
            .route("/api/v1/status", web::get().to(status))
            .route("/api/v1/cluster", web::get().to(cluster))
            .route("/api/v1/hosts/{host}", web::get().to(host_info))
            .default_service(web::to(not_found))
    })
    .workers(1)
    .disable_signals()
    .bind(listen)?;
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

async fn metrics_text(state: web::Data<AdminState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render())
}

async fn status(state: web::Data<AdminState>) -> HttpResponse {
    match state.node.send(GetStatus).await {
        Ok(status) => HttpResponse::Ok().json(status),
        Err(err) => HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "error": format!("node unavailable: {err}") })),
    }
}

async fn cluster(state: web::Data<AdminState>) -> HttpResponse {
    match state.node.send(GetCluster).await {
        Ok(Some(view)) => HttpResponse::Ok().json(view),
        Ok(None) => HttpResponse::NotFound()
            .json(serde_json::json!({ "error": "not a cluster node ([cluster] enabled = false)" })),
        Err(err) => HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "error": format!("node unavailable: {err}") })),
    }
}

async fn host_info(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    req: actix_web::HttpRequest,
) -> HttpResponse {
    let host = host.into_inner();
    if host.is_empty() || host.len() > 253 || host.contains(['/', ' ']) {
        return HttpResponse::BadRequest()
            .json(serde_json::json!({ "error": "invalid host name" }));
    }
    let forwarded = req.query_string().split('&').any(|kv| kv == "forwarded=1");
    match state.node.send(HostInfo { host: host.clone() }).await {
        Ok(Ok(snapshot)) => HttpResponse::Ok().json(snapshot),
        Ok(Err(crate::error::Failure::Peer(reason))) if !forwarded => {
            match ask_owner(&state, &host).await {
                Some(answer) => answer,
                None => HttpResponse::ServiceUnavailable().json(serde_json::json!({
                    "error": format!("{reason}, and its admin API cannot be reached")
                })),
            }
        }
        Ok(Err(err)) => HttpResponse::InternalServerError()
            .json(serde_json::json!({ "error": err.to_string() })),
        Err(err) => HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "error": format!("node unavailable: {err}") })),
    }
}

/// Asks the admin API of the node that holds `host`'s partition.
async fn ask_owner(state: &AdminState, host: &str) -> Option<HttpResponse> {
    let view = state.node.send(GetCluster).await.ok()??;
    let partition = crate::url::partition_of(host, view.owners.len() as u16);
    let owner = view.owners.get(usize::from(partition))?.as_ref()?;
    let admin = view
        .members
        .iter()
        .find(|m| &m.node == owner && m.live)?
        .admin?;
    let url = format!("http://{admin}/api/v1/hosts/{host}?forwarded=1");
    let mut answer = awc::Client::new()
        .get(url)
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let body = answer.body().limit(1 << 20).await.ok()?;
    Some(
        HttpResponse::build(answer.status())
            .content_type("application/json")
            .body(body),
    )
}

async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().json(serde_json::json!({ "error": "no such endpoint" }))
}

//! The admin API's endpoints and the types they take and give, from which
//! the OpenAPI document is generated ([`ApiDoc`], served at
//! `GET /api/v1/openapi.json`).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::AdminState;
use crate::actors::messages::{GetControls, SetBlock, SetControls, UrlOutcome};
use crate::actors::node::SeedEach;
use crate::actors::{GetCluster, GetStatus, HostInfo};
use crate::control::Controls;
use crate::frontier::blocks::BlockTarget;

/// The most URLs one `POST /api/v1/seeds` takes.
pub const MAX_SEEDS: usize = 10_000;

/// The API's OpenAPI 3 document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "trawl admin API",
        version = "1",
        description = "Control and inspect a trawl node. Mutating endpoints need `Authorization: Bearer <token>` when the node has a token; every error is a JSON body with a stable `code`."
    ),
    paths(
        status,
        cluster,
        host,
        controls,
        pause,
        resume,
        set_rate,
        seeds,
        block_host,
        unblock_host,
        block_domain,
        unblock_domain,
        openapi_json
    ),
    components(schemas(
        Controls,
        RateRequest,
        SeedRequest,
        SeedResponse,
        SeedResult,
        BlockResponse,
        ErrorBody
    )),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// `PUT /api/v1/crawl/rate`'s body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateRequest {
    /// Requests started per second, node-wide: 0 = no limit, else 0.001 to
    /// 1,000,000.
    pub max_requests_per_second: f64,
}

/// `POST /api/v1/seeds`' body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SeedRequest {
    /// URLs to admit as seeds (at most 10,000).
    pub urls: Vec<String>,
}

/// What became of one seed.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeedResult {
    /// The URL as given.
    pub url: String,
    /// `admitted` (queued), `seen` (known before), `filtered` (not
    /// admitted: see `reason`) or `forwarded` (to the node owning its
    /// partition, which admits it or has seen it).
    pub outcome: &'static str,
    /// Why it was filtered (`invalid`, `depth`, a scope or trap rule).
    pub reason: Option<&'static str>,
}

/// `POST /api/v1/seeds`' answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeedResponse {
    /// Each URL's outcome, in the order given.
    pub results: Vec<SeedResult>,
}

fn node_json<T: Serialize>(value: &T) -> HttpResponse {
    HttpResponse::Ok().json(value)
}

/// The node's status: queue, hosts, partitions, archive, controls.
#[utoipa::path(get, path = "/api/v1/status", tag = "read",
    responses((status = 200, description = "The node's status", body = Object),
              (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn status(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    Ok(node_json(&state.node.send(GetStatus).await?))
}

/// A cluster node's view of the cluster: members, partition map, handoffs.
#[utoipa::path(get, path = "/api/v1/cluster", tag = "read",
    responses((status = 200, description = "The cluster as this node sees it", body = Object),
              (status = 404, description = "Not a cluster node", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn cluster(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    match state.node.send(GetCluster).await? {
        Some(view) => Ok(node_json(&view)),
        None => Err(ApiError::not_a_cluster()),
    }
}

/// Whether a path segment can be a host name.
fn check_host(host: &str) -> Result<(), ApiError> {
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'[' | b']')
        });
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request("invalid host name"))
    }
}

/// One host: robots.txt, politeness state, queue sizes. On a cluster, a
/// host of another node's partition is asked of that node.
#[utoipa::path(get, path = "/api/v1/hosts/{host}", tag = "read",
    params(("host" = String, Path, description = "Host name")),
    responses((status = 200, description = "The host", body = Object),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn host(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    let host = host.into_inner();
    check_host(&host)?;
    match state.node.send(HostInfo { host: host.clone() }).await? {
        Ok(snapshot) => Ok(node_json(&snapshot)),
        Err(failure) => elsewhere(&state, &host, &req, failure).await,
    }
}

/// A request the node could not answer because another node holds the
/// name's partition: asked of that node (once), else the failure.
async fn elsewhere(
    state: &AdminState,
    name: &str,
    req: &HttpRequest,
    failure: crate::error::Failure,
) -> Result<HttpResponse, ApiError> {
    match failure {
        crate::error::Failure::Peer(reason) if !super::forward::is_forwarded(req) => {
            super::forward::to_owner(state, name, req)
                .await
                .ok_or_else(|| {
                    ApiError::unavailable(format!("{reason}, and its admin API cannot be reached"))
                })
        }
        failure => Err(failure.into()),
    }
}

/// What a block or unblock did.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockResponse {
    /// The host or registrable domain, as blocked (lower case; a domain
    /// given as a host name is its registrable domain).
    pub target: String,
    /// `host` or `domain`.
    pub kind: &'static str,
    /// Blocked now.
    pub blocked: bool,
    /// Queued URLs dropped (each with a `removed` event, reason
    /// `blocked`).
    pub dropped: usize,
}

async fn block(
    state: &AdminState,
    req: &HttpRequest,
    target: Result<BlockTarget, crate::frontier::blocks::BadName>,
    blocked: bool,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(req)?;
    let target = target.map_err(|e| ApiError::bad_request(e.to_string()))?;
    let kind = match target {
        BlockTarget::Host(_) => "host",
        BlockTarget::Domain(_) => "domain",
    };
    let name = target.name().to_owned();
    let set = SetBlock { target, blocked };
    match state.node.send(set).await? {
        Ok(outcome) => Ok(node_json(&BlockResponse {
            target: name,
            kind,
            blocked,
            dropped: outcome.dropped,
        })),
        Err(failure) => elsewhere(state, &name, req, failure).await,
    }
}

/// Blocks a host at once: the request in flight finishes, its queued URLs
/// are dropped (`removed` events, reason `blocked`), no link to it is
/// admitted, its refreshes wait. Kept across restarts.
#[utoipa::path(put, path = "/api/v1/hosts/{host}/block", tag = "control",
    security(("bearer" = [])),
    params(("host" = String, Path, description = "Host name")),
    responses((status = 200, body = BlockResponse), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn block_host(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    block(&state, &req, BlockTarget::host(&host), true).await
}

/// Unblocks a host: links and seeds are admitted again, refreshes due.
#[utoipa::path(delete, path = "/api/v1/hosts/{host}/block", tag = "control",
    security(("bearer" = [])),
    params(("host" = String, Path, description = "Host name")),
    responses((status = 200, body = BlockResponse), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn unblock_host(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    block(&state, &req, BlockTarget::host(&host), false).await
}

/// Blocks every host of a registrable domain, as a host block does.
#[utoipa::path(put, path = "/api/v1/domains/{domain}/block", tag = "control",
    security(("bearer" = [])),
    params(("domain" = String, Path, description = "Registrable domain (a host name is taken to its domain)")),
    responses((status = 200, body = BlockResponse), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn block_domain(
    state: web::Data<AdminState>,
    domain: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    block(&state, &req, BlockTarget::domain(&domain), true).await
}

/// Unblocks a registrable domain.
#[utoipa::path(delete, path = "/api/v1/domains/{domain}/block", tag = "control",
    security(("bearer" = [])),
    params(("domain" = String, Path, description = "Registrable domain")),
    responses((status = 200, body = BlockResponse), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn unblock_domain(
    state: web::Data<AdminState>,
    domain: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    block(&state, &req, BlockTarget::domain(&domain), false).await
}

/// The node's runtime controls.
#[utoipa::path(get, path = "/api/v1/crawl", tag = "read",
    responses((status = 200, body = Controls), (status = 401, body = ErrorBody)))]
pub async fn controls(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    Ok(node_json(&state.node.send(GetControls).await?))
}

async fn set(state: &AdminState, msg: SetControls) -> Result<HttpResponse, ApiError> {
    let controls = state.node.send(msg).await??;
    Ok(node_json(&controls))
}

/// Pauses the node: no new request starts (those in flight finish). Kept
/// across restarts.
#[utoipa::path(post, path = "/api/v1/crawl/pause", tag = "control",
    security(("bearer" = [])),
    responses((status = 200, body = Controls), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody)))]
pub async fn pause(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    set(
        &state,
        SetControls {
            paused: Some(true),
            ..Default::default()
        },
    )
    .await
}

/// Resumes a paused node.
#[utoipa::path(post, path = "/api/v1/crawl/resume", tag = "control",
    security(("bearer" = [])),
    responses((status = 200, body = Controls), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody)))]
pub async fn resume(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    set(
        &state,
        SetControls {
            paused: Some(false),
            ..Default::default()
        },
    )
    .await
}

/// Sets the node-wide request rate (0 = no limit). Kept across restarts.
#[utoipa::path(put, path = "/api/v1/crawl/rate", tag = "control",
    security(("bearer" = [])),
    request_body = RateRequest,
    responses((status = 200, body = Controls), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn set_rate(
    state: web::Data<AdminState>,
    req: HttpRequest,
    body: web::Json<RateRequest>,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    let rate = body.max_requests_per_second;
    crate::control::check_rate(rate).map_err(|e| ApiError::bad_request(e.to_string()))?;
    set(
        &state,
        SetControls {
            max_requests_per_second: Some(rate),
            ..Default::default()
        },
    )
    .await
}

/// Admits URLs as seeds; answers what became of each. On a cluster, seeds
/// of another node's partitions are sent to it.
#[utoipa::path(post, path = "/api/v1/seeds", tag = "control",
    security(("bearer" = [])),
    request_body = SeedRequest,
    responses((status = 200, body = SeedResponse), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn seeds(
    state: web::Data<AdminState>,
    req: HttpRequest,
    body: web::Json<SeedRequest>,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    let urls = body.into_inner().urls;
    if urls.len() > MAX_SEEDS {
        return Err(ApiError::payload_too_large(format!(
            "at most {MAX_SEEDS} URLs per request, got {}",
            urls.len()
        )));
    }
    let outcomes = state.node.send(SeedEach { urls: urls.clone() }).await??;
    let results = urls
        .into_iter()
        .zip(outcomes)
        .map(|(url, outcome)| {
            let (outcome, reason) = match outcome {
                UrlOutcome::Admitted => ("admitted", None),
                UrlOutcome::Seen => ("seen", None),
                UrlOutcome::Filtered(reason) => ("filtered", Some(reason)),
                UrlOutcome::Forwarded => ("forwarded", None),
            };
            SeedResult {
                url,
                outcome,
                reason,
            }
        })
        .collect();
    Ok(node_json(&SeedResponse { results }))
}

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "read",
    responses((status = 200, description = "The OpenAPI 3 document", body = Object)))]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}

//! The admin API's crawl endpoints: the runtime controls (pause, resume,
//! request rate) and seeds. On a cluster, a control set on one node is
//! sent to every other node too (the answer lists what each said), so
//! pausing the cluster is one request; seeds of other nodes' partitions
//! go to their owners over the bridge.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::api::node_json;
use super::error::{ApiError, ErrorBody};
use super::forward::{self, PeerOutcome};
use super::AdminState;
use crate::actors::messages::{GetControls, SetControls, UrlOutcome};
use crate::actors::node::SeedEach;
use crate::control::Controls;

/// The most URLs one `POST /api/v1/seeds` takes.
pub const MAX_SEEDS: usize = 10_000;

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
    /// Offer them as changed now: a URL removed from the crawl comes back
    /// even if it was given as a seed before, a fetched one is due at
    /// once. Without it only a URL never given as a seed comes back.
    #[serde(default)]
    pub reseed: bool,
}

/// What became of one seed.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeedResult {
    /// The URL as given.
    pub url: String,
    /// `admitted` (queued, or a removed URL brought back), `seen` (known
    /// before; a URL removed from the crawl and given as a seed before
    /// stays out unless `reseed`), `filtered` (not admitted: see
    /// `reason`) or `forwarded` (to the node owning its partition, which
    /// admits it or has seen it).
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

/// What setting a control answers: this node's controls after, and on a
/// cluster what every other node answered (a node that did not answer
/// keeps its controls: ask it again when it is back).
#[derive(Debug, Serialize, ToSchema)]
pub struct ControlsResponse {
    /// No new request starts while paused (those in flight finish).
    pub paused: bool,
    /// Requests started per second on this node; 0 means no limit.
    pub max_requests_per_second: f64,
    /// The other nodes of the cluster and what they answered.
    pub nodes: Vec<PeerOutcome>,
}

/// Sets controls here, then on every other node of a cluster (the same
/// method, path and body, marked forwarded).
async fn set(
    state: &AdminState,
    req: &HttpRequest,
    msg: SetControls,
    body: Option<serde_json::Value>,
) -> Result<HttpResponse, ApiError> {
    let controls = state.node.send(msg).await??;
    let peers = forward::to_peers(state, req, req.path(), body.as_ref()).await;
    for peer in &peers {
        if let Some(error) = peer.outcome().error {
            tracing::warn!(
                node = peer.node,
                error,
                path = req.path(),
                "a node did not take the control"
            );
        }
    }
    Ok(node_json(&ControlsResponse {
        paused: controls.paused,
        max_requests_per_second: controls.max_requests_per_second,
        nodes: peers.iter().map(|p| p.outcome()).collect(),
    }))
}

/// Pauses the node (on a cluster, every node): no new request starts
/// (those in flight finish). Kept across restarts.
#[utoipa::path(post, path = "/api/v1/crawl/pause", tag = "control",
    security(("bearer" = [])),
    responses((status = 200, body = ControlsResponse), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody)))]
pub async fn pause(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    let pause = SetControls {
        paused: Some(true),
        ..Default::default()
    };
    set(&state, &req, pause, None).await
}

/// Resumes a paused node (on a cluster, every node).
#[utoipa::path(post, path = "/api/v1/crawl/resume", tag = "control",
    security(("bearer" = [])),
    responses((status = 200, body = ControlsResponse), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody)))]
pub async fn resume(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    let resume = SetControls {
        paused: Some(false),
        ..Default::default()
    };
    set(&state, &req, resume, None).await
}

/// Sets the request rate of the node (on a cluster, of each node; 0 = no
/// limit). Kept across restarts.
#[utoipa::path(put, path = "/api/v1/crawl/rate", tag = "control",
    security(("bearer" = [])),
    request_body = RateRequest,
    responses((status = 200, body = ControlsResponse), (status = 400, body = ErrorBody),
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
    let set_rate = SetControls {
        max_requests_per_second: Some(rate),
        ..Default::default()
    };
    let body = serde_json::json!({ "max_requests_per_second": rate });
    set(&state, &req, set_rate, Some(body)).await
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
    let SeedRequest { urls, reseed } = body.into_inner();
    if urls.len() > MAX_SEEDS {
        return Err(ApiError::payload_too_large(format!(
            "at most {MAX_SEEDS} URLs per request, got {}",
            urls.len()
        )));
    }
    let outcomes = state
        .node
        .send(SeedEach {
            urls: urls.clone(),
            reseed,
        })
        .await??;
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

//! The admin API's host endpoints: one host's state and queue, listings,
//! slow-downs and blocks. On a cluster, a host of a partition another
//! node holds is asked of that node, and a listing gathers every node's.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::api::{elsewhere, node_json};
use super::error::{ApiError, ErrorBody};
use super::forward::{self, PeerOutcome};
use super::AdminState;
use crate::actors::messages::{AskHost, HostAnswer, HostAsk, ListHosts, SetBlock};
use crate::frontier::blocks::BlockTarget;
use crate::frontier::host::HostSnapshot;
use crate::frontier::listing::{self, Condition, HostPage, HostRow, ListQuery, SortKey};
use crate::politeness::slowdown::Slowdown;
use crate::store::QueuedUrl;

/// The most entries of each kind `GET /api/v1/hosts/{host}/queue` gives.
pub const MAX_QUEUE_LIMIT: usize = 1_000;

/// A host name from the path, checked and lower-cased.
fn host_name(host: &str) -> Result<String, ApiError> {
    crate::url::host_name(host).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Asks the node about `host`; on a cluster, the node holding it.
/// The answer, or that of the node holding it (asked with the same query
/// and `body`).
async fn ask(
    state: &AdminState,
    req: &HttpRequest,
    host: &str,
    ask: HostAsk,
    body: Option<&serde_json::Value>,
) -> Result<Result<HostAnswer, HttpResponse>, ApiError> {
    let msg = AskHost {
        host: host.to_owned(),
        ask,
    };
    match state.node.send(msg).await? {
        Ok(answer) => Ok(Ok(answer)),
        Err(failure) => Ok(Err(elsewhere(state, host, req, body, failure).await?)),
    }
}

/// One host: robots.txt, politeness (with any slow-down), queue sizes and
/// what it did since its actor started.
#[utoipa::path(get, path = "/api/v1/hosts/{host}", tag = "hosts",
    params(("host" = String, Path, description = "Host name")),
    responses((status = 200, body = HostSnapshot),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn host(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    let host = host_name(&host)?;
    match ask(&state, &req, &host, HostAsk::Snapshot, None).await? {
        Ok(HostAnswer::Snapshot(snapshot)) => Ok(node_json(&snapshot)),
        Ok(_) => Err(ApiError::internal("unexpected answer")),
        Err(forwarded) => Ok(forwarded),
    }
}

/// `GET /api/v1/hosts`' query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HostsParams {
    /// Only hosts that are `active` (a request in flight or due now),
    /// `waiting` (politeness delay, backoff or next refresh), `parked`
    /// (after repeated failures) or `blocked`.
    #[param(value_type = Option<String>)]
    pub state: Option<Condition>,
    /// `queued` (busiest first, the default), `response_time` (slowest),
    /// `failures` (failing), `wait` (stuck: longest wait), `fetched` or
    /// `host`.
    #[param(value_type = Option<String>)]
    pub sort: Option<SortKey>,
    /// Rows (1 to 1,000; default 50).
    pub limit: Option<usize>,
    /// Rows skipped (default 0).
    pub offset: Option<usize>,
    /// Set by a node that forwarded the request (answer for this node only).
    pub forwarded: Option<u8>,
}

impl HostsParams {
    /// The listing asked for, or why the parameters are refused.
    pub fn query(&self) -> Result<ListQuery, ApiError> {
        let limit = self.limit.unwrap_or(ListQuery::default().limit);
        if limit == 0 || limit > listing::MAX_LIMIT {
            return Err(ApiError::bad_request(format!(
                "limit must be 1 to {}, got {limit}",
                listing::MAX_LIMIT
            )));
        }
        let offset = self.offset.unwrap_or(0);
        if offset > 1_000_000 {
            return Err(ApiError::bad_request("offset must be at most 1000000"));
        }
        Ok(ListQuery {
            state: self.state,
            sort: self.sort.unwrap_or_default(),
            offset,
            limit,
        })
    }
}

/// `GET /api/v1/hosts`' answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct HostsResponse {
    /// Hosts matching, over every node asked.
    pub total: usize,
    /// The page.
    pub hosts: Vec<HostRow>,
    /// Other nodes asked (on a cluster) and what they answered; a node
    /// that did not answer is missing from `hosts` and `total`.
    pub nodes: Vec<PeerOutcome>,
}

/// The hosts the node (on a cluster: every node) is attending to, those
/// with an actor, waiting for their due time or blocked, filtered,
/// sorted and paged. Hosts with nothing queued or scheduled are not
/// listed.
#[utoipa::path(get, path = "/api/v1/hosts", tag = "hosts",
    params(HostsParams),
    responses((status = 200, body = HostsResponse),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn hosts(
    state: web::Data<AdminState>,
    params: web::Query<HostsParams>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    let query = params.query()?;
    let mine = state.node.send(ListHosts(query.for_holders())).await?;
    let path = peer_listing_path(&query.for_holders());
    let peers = forward::to_peers(&state, &req, &path, None).await;
    let mut pages = vec![mine];
    for peer in &peers {
        if let Ok((status, body)) = &peer.answer {
            if status.is_success() {
                match serde_json::from_slice::<HostPage>(body) {
                    Ok(page) => pages.push(page),
                    Err(err) => tracing::warn!(node = peer.node, %err, "unreadable host listing"),
                }
            }
        }
    }
    let page = listing::merge(pages, &query);
    Ok(node_json(&HostsResponse {
        total: page.total,
        hosts: page.hosts,
        nodes: peers.iter().map(|p| p.outcome()).collect(),
    }))
}

/// The path asking another node for its part of a listing: its first
/// `offset + limit` rows, capped at [`listing::MAX_LIMIT`] (what its API
/// takes), so on a cluster pages past row 1,000 may miss rows of other
/// nodes.
pub fn peer_listing_path(query: &ListQuery) -> String {
    let mut path = format!(
        "/api/v1/hosts?offset={}&limit={}",
        query.offset,
        query.limit.min(listing::MAX_LIMIT)
    );
    path.push_str(&format!("&sort={}", word(&query.sort)));
    if let Some(state) = query.state {
        path.push_str(&format!("&state={}", word(&state)));
    }
    path
}

/// The query-string word of a listing parameter: its serde name.
fn word<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `GET /api/v1/hosts/{host}/queue`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueueParams {
    /// Entries of each kind (1 to 1,000; default 100).
    pub limit: Option<usize>,
    /// Set by a node that forwarded the request.
    pub forwarded: Option<u8>,
}

/// `GET /api/v1/hosts/{host}/queue`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueResponse {
    /// The host.
    pub host: String,
    /// Milliseconds until its next request may start: when the first
    /// queued URL is due (queued URLs go one by one, by priority, as
    /// politeness allows).
    pub next_request_in_ms: u64,
    /// Queued URLs by priority, then arrival.
    pub queued: Vec<QueuedUrl>,
    /// Scheduled refreshes by due time.
    pub refreshes: Vec<QueuedUrl>,
}

/// A host's queued URLs (priority, depth, kind) and scheduled refreshes
/// (due time).
#[utoipa::path(get, path = "/api/v1/hosts/{host}/queue", tag = "hosts",
    params(("host" = String, Path, description = "Host name"), QueueParams),
    responses((status = 200, body = QueueResponse),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn queue(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    params: web::Query<QueueParams>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    let host = host_name(&host)?;
    let limit = params.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_QUEUE_LIMIT {
        return Err(ApiError::bad_request(format!(
            "limit must be 1 to {MAX_QUEUE_LIMIT}, got {limit}"
        )));
    }
    match ask(&state, &req, &host, HostAsk::Queue { limit }, None).await? {
        Ok(HostAnswer::Queue(queue, snapshot)) => Ok(node_json(&QueueResponse {
            host,
            next_request_in_ms: snapshot.politeness.next_allowed_in_ms,
            queued: queue.queued,
            refreshes: queue.refreshes,
        })),
        Ok(_) => Err(ApiError::internal("unexpected answer")),
        Err(forwarded) => Ok(forwarded),
    }
}

/// `PUT /api/v1/hosts/{host}/politeness`' body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowdownRequest {
    /// Floor between a response and the next request, ms (at most a
    /// day). Only ever raises the configured one.
    pub min_delay_ms: Option<u64>,
    /// Requests in flight at once (1 to 1,000). Only ever lowers the
    /// configured one.
    pub max_in_flight: Option<u32>,
}

/// Slows a host down, at once and durably: a larger minimum delay, a
/// lower in-flight limit, or both. Never faster than the configuration
/// or robots.txt (Crawl-delay) allows.
#[utoipa::path(put, path = "/api/v1/hosts/{host}/politeness", tag = "hosts",
    security(("bearer" = [])),
    params(("host" = String, Path, description = "Host name")),
    request_body = SlowdownRequest,
    responses((status = 200, body = HostSnapshot), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn slow_down(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    body: web::Json<SlowdownRequest>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    let host = host_name(&host)?;
    let slowdown = Slowdown {
        min_delay_ms: body.min_delay_ms,
        max_in_flight: body.max_in_flight,
    };
    slowdown
        .check()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let body = serde_json::json!({
        "min_delay_ms": slowdown.min_delay_ms,
        "max_in_flight": slowdown.max_in_flight,
    });
    set_slowdown(&state, &req, &host, Some(slowdown), Some(&body)).await
}

/// Lifts a host's slow-down: the configured politeness applies again
/// from its next response.
#[utoipa::path(delete, path = "/api/v1/hosts/{host}/politeness", tag = "hosts",
    security(("bearer" = [])),
    params(("host" = String, Path, description = "Host name")),
    responses((status = 200, body = HostSnapshot), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn lift_slowdown(
    state: web::Data<AdminState>,
    host: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.mutate(&req)?;
    let host = host_name(&host)?;
    set_slowdown(&state, &req, &host, None, None).await
}

async fn set_slowdown(
    state: &AdminState,
    req: &HttpRequest,
    host: &str,
    slowdown: Option<Slowdown>,
    body: Option<&serde_json::Value>,
) -> Result<HttpResponse, ApiError> {
    match ask(state, req, host, HostAsk::SlowDown(slowdown), body).await? {
        Ok(HostAnswer::Snapshot(snapshot)) => Ok(node_json(&snapshot)),
        Ok(_) => Err(ApiError::internal("unexpected answer")),
        Err(forwarded) => Ok(forwarded),
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
        Err(failure) => elsewhere(state, &name, req, None, failure).await,
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

//! The admin API's document ([`ApiDoc`], served at
//! `GET /api/v1/openapi.json`, generated from the handlers' types) and the
//! node-wide read endpoints; hosts are in [`super::hosts`], controls and
//! seeds in [`super::crawl`].

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::OpenApi;

use super::crawl::{self, ControlsResponse, RateRequest, SeedRequest, SeedResponse, SeedResult};
use super::error::{ApiError, ErrorBody};
use super::forward::PeerOutcome;
use super::hosts::{self, BlockResponse, HostsResponse, QueueResponse, SlowdownRequest};
use super::AdminState;
use crate::actors::messages::GetReport;
use crate::actors::{ClusterStatus, GetCluster, GetStatus, NodeStatus};
use crate::control::Controls;
use crate::report::CrawlReport;

/// The API reference operators read (`docs/api.md`): each endpoint of
/// `doc` with its method and summary, generated from the document (a unit
/// test keeps the file equal to it).
pub fn reference_markdown(doc: &utoipa::openapi::OpenApi) -> String {
    let mut out = String::from(
        "# Admin API\n\n\
         <!-- Generated from src/admin/api.rs by its unit test \
         (TRAWL_BLESS=1 cargo test --release --lib admin::api): do not edit. -->\n\n\
         Every endpoint of a node's admin API. A running node serves the whole \
         OpenAPI document (bodies, parameters, errors) at \
         `GET /api/v1/openapi.json`; what each is for, and the access rules, \
         are in [operations.md](operations.md#admin-api-and-metrics).\n\n\
         | method | path | what it does |\n\
         |---|---|---|\n",
    );
    for (path, item) in &doc.paths.paths {
        let operations = [
            ("GET", &item.get),
            ("PUT", &item.put),
            ("POST", &item.post),
            ("DELETE", &item.delete),
            ("PATCH", &item.patch),
        ];
        for (method, op) in operations {
            let Some(op) = op else { continue };
            let summary = op.summary.as_deref().unwrap_or("");
            let summary = summary.replace('\n', " ").replace('|', "\\|");
            out.push_str(&format!("| `{method}` | `{path}` | {summary} |\n"));
        }
    }
    out
}

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
        report,
        hosts::host,
        hosts::hosts,
        hosts::queue,
        hosts::slow_down,
        hosts::lift_slowdown,
        hosts::block_host,
        hosts::unblock_host,
        hosts::block_domain,
        hosts::unblock_domain,
        crawl::controls,
        crawl::pause,
        crawl::resume,
        crawl::set_rate,
        crawl::seeds,
        openapi_json
    ),
    components(schemas(
        Controls,
        ControlsResponse,
        ReportResponse,
        PeerOutcome,
        RateRequest,
        SeedRequest,
        SeedResponse,
        SeedResult,
        BlockResponse,
        HostsResponse,
        QueueResponse,
        SlowdownRequest,
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

/// A 200 with `value` as JSON.
pub(super) fn node_json<T: Serialize>(value: &T) -> HttpResponse {
    HttpResponse::Ok().json(value)
}

/// The node's status: queue, hosts, partitions, archive, controls.
#[utoipa::path(get, path = "/api/v1/status", tag = "read",
    responses((status = 200, description = "The node's status", body = NodeStatus),
              (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn status(
    state: web::Data<AdminState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    Ok(node_json(&state.node.send(GetStatus).await?))
}

/// How `GET /api/v1/report` answers.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// `json` (the default) or `text` (the plain-text report).
    pub format: Option<String>,
}

/// The crawl report with the other nodes' answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportResponse {
    /// The report (on a cluster, every node's that answered, merged).
    #[serde(flatten)]
    pub report: CrawlReport,
    /// Each other node asked for its report, and how it answered.
    pub nodes: Vec<PeerOutcome>,
}

/// The crawl report: hosts, MIME types, status codes, seeds and what each
/// led to, and the frontier by host (`src/report`). What the node archived
/// since it started; on a cluster, every node's report merged (each
/// node's part is in `nodes`).
#[utoipa::path(get, path = "/api/v1/report", tag = "read", params(ReportQuery),
    responses((status = 200, description = "The crawl report (JSON, or text/plain with format=text)", body = ReportResponse),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn report(
    state: web::Data<AdminState>,
    query: web::Query<ReportQuery>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.access.read(&req)?;
    let text = match query.format.as_deref() {
        None | Some("json") => false,
        Some("text") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "format must be json or text, not {other:?}"
            )))
        }
    };
    let mut report = state.node.send(GetReport).await?;
    let peers = super::forward::to_peers(&state, &req, "/api/v1/report", None).await;
    let mut nodes = Vec::with_capacity(peers.len());
    for peer in &peers {
        let mut outcome = peer.outcome();
        if let Ok((status, body)) = &peer.answer {
            if status.is_success() {
                match serde_json::from_slice::<CrawlReport>(body) {
                    Ok(theirs) => report.merge(&theirs),
                    Err(err) => outcome.error = Some(format!("unreadable report: {err}")),
                }
            }
        }
        nodes.push(outcome);
    }
    Ok(match text {
        true => HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body(report.to_string()),
        false => node_json(&ReportResponse { report, nodes }),
    })
}

/// A cluster node's view of the cluster: members, partition map, handoffs.
#[utoipa::path(get, path = "/api/v1/cluster", tag = "read",
    responses((status = 200, description = "The cluster as this node sees it", body = ClusterStatus),
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

/// A request the node could not answer because another node holds the
/// name's partition: asked of that node (once, with the same query and
/// `body`), else the failure.
pub(super) async fn elsewhere(
    state: &AdminState,
    name: &str,
    req: &HttpRequest,
    body: Option<&serde_json::Value>,
    failure: crate::error::Failure,
) -> Result<HttpResponse, ApiError> {
    match failure {
        not_held @ crate::error::Failure::NotHeld { .. } if !super::forward::is_forwarded(req) => {
            super::forward::to_owner(state, name, req, body)
                .await
                .ok_or_else(|| {
                    ApiError::unavailable(format!(
                        "{not_held}, and its admin API cannot be reached"
                    ))
                })
        }
        failure => Err(failure.into()),
    }
}

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "read",
    responses((status = 200, description = "The OpenAPI 3 document", body = Object)))]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/api.md` lists what this document holds: every endpoint with
    /// its method and summary (`TRAWL_BLESS=1` rewrites it).
    #[test]
    fn the_api_reference_is_generated_from_the_document() {
        let doc = ApiDoc::openapi();
        let generated = reference_markdown(&doc);
        assert!(generated.matches("\n| `").count() >= 10, "{generated}");
        assert!(
            generated.contains("| `POST` | `/api/v1/seeds` |"),
            "{generated}"
        );
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api.md");
        if std::env::var("TRAWL_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &generated).unwrap();
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == generated,
            "docs/api.md is out of date: TRAWL_BLESS=1 cargo test --release --lib admin::api"
        );
    }
}

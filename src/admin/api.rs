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
use crate::actors::{ClusterStatus, GetCluster, GetStatus, NodeStatus};
use crate::control::Controls;

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

    /// Every path of the API (its one source: this document) is described
    /// where operators read.
    #[test]
    fn every_path_is_documented_in_the_operations_guide() {
        let guide = include_str!("../../docs/operations.md");
        let doc = ApiDoc::openapi();
        let paths: Vec<&String> = doc.paths.paths.keys().collect();
        assert!(paths.len() >= 10, "{paths:?}");
        let missing: Vec<_> = paths
            .into_iter()
            .filter(|p| !guide.contains(p.as_str()))
            .collect();
        assert!(missing.is_empty(), "not in docs/operations.md: {missing:?}");
    }
}

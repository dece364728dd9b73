//! Requests a cluster node answers by asking another node's admin API:
//! the owner of the partition a host or domain belongs to (its admin
//! address is published in gossip). A forwarded request carries
//! `forwarded=1` and is never forwarded again, and the caller's
//! authorization goes with it (nodes of a cluster share a token).

use actix_web::http::{header, Method};
use actix_web::{HttpRequest, HttpResponse};

use super::AdminState;
use crate::actors::GetCluster;

/// Whether `req` was forwarded by another node already.
pub fn is_forwarded(req: &HttpRequest) -> bool {
    req.query_string().split('&').any(|kv| kv == "forwarded=1")
}

/// Sends `req`'s method and path to the admin API of the node holding the
/// partition `name` belongs to; its answer, or `None` if it cannot be
/// asked.
pub async fn to_owner(state: &AdminState, name: &str, req: &HttpRequest) -> Option<HttpResponse> {
    let view = state.node.send(GetCluster).await.ok()??;
    let partition = crate::url::partition_of(name, view.owners.len() as u16);
    let owner = view.owners.get(usize::from(partition))?.as_ref()?;
    let admin = view
        .members
        .iter()
        .find(|m| &m.node == owner && m.live)?
        .admin?;
    let url = format!("http://{admin}{}?forwarded=1", req.path());
    let method = Method::from_bytes(req.method().as_str().as_bytes()).ok()?;
    let mut request = awc::Client::new()
        .request(method, url)
        .timeout(std::time::Duration::from_secs(5));
    if let Some(auth) = req.headers().get(header::AUTHORIZATION) {
        request = request.insert_header((header::AUTHORIZATION, auth.clone()));
    }
    let mut answer = request.send().await.ok()?;
    let body = answer.body().limit(1 << 20).await.ok()?;
    Some(
        HttpResponse::build(answer.status())
            .content_type("application/json")
            .body(body),
    )
}

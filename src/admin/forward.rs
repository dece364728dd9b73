//! Questions a cluster node answers by asking another node's admin API:
//! the owner of a host's partition (published in gossip). A forwarded
//! question carries `forwarded=1` and is never forwarded again, and the
//! caller's authorization goes with it (nodes of a cluster share a token).

use actix_web::{HttpRequest, HttpResponse};

use super::AdminState;
use crate::actors::GetCluster;

/// Asks the admin API of the node holding `host`'s partition about it.
pub async fn host(state: &AdminState, host: &str, req: &HttpRequest) -> Option<HttpResponse> {
    let view = state.node.send(GetCluster).await.ok()??;
    let partition = crate::url::partition_of(host, view.owners.len() as u16);
    let owner = view.owners.get(usize::from(partition))?.as_ref()?;
    let admin = view
        .members
        .iter()
        .find(|m| &m.node == owner && m.live)?
        .admin?;
    let url = format!("http://{admin}/api/v1/hosts/{host}?forwarded=1");
    let mut request = awc::Client::new()
        .get(url)
        .timeout(std::time::Duration::from_secs(5));
    if let Some(auth) = req.headers().get(actix_web::http::header::AUTHORIZATION) {
        request = request.insert_header((actix_web::http::header::AUTHORIZATION, auth.clone()));
    }
    let mut answer = request.send().await.ok()?;
    let body = answer.body().limit(1 << 20).await.ok()?;
    Some(
        HttpResponse::build(answer.status())
            .content_type("application/json")
            .body(body),
    )
}

//! Requests a cluster node answers by asking other nodes' admin APIs: the
//! owner of the partition a host or domain belongs to, or every other
//! live member (controls, listings). Admin addresses are published in
//! gossip. A forwarded request carries `forwarded=1` and is never
//! forwarded again, and the caller's authorization goes with it (nodes of
//! a cluster share a token).

use actix_web::http::{header, Method, StatusCode};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::AdminState;
use crate::actors::GetCluster;

/// How long another node's admin API is given to answer.
const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `req` was forwarded by another node already.
pub fn is_forwarded(req: &HttpRequest) -> bool {
    query_is_forwarded(req.query_string())
}

/// Whether a query string marks its request forwarded: a `forwarded`
/// parameter whose value, decoded as the query extractor decodes it, is
/// `1` (so `forwarded=%31` is one too).
pub fn query_is_forwarded(query: &str) -> bool {
    form_urlencoded::parse(query.as_bytes()).any(|(key, value)| key == "forwarded" && value == "1")
}

/// `path_and_query` as sent to another node: every `forwarded` parameter
/// the caller gave dropped (a repeated parameter would make the other
/// node refuse the query), then `forwarded=1`. The other parameters are
/// kept as they were written, in their order.
pub fn mark_forwarded(path_and_query: &str) -> String {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let mut pairs: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.is_empty() && !names_forwarded(pair))
        .collect();
    pairs.push("forwarded=1");
    format!("{path}?{}", pairs.join("&"))
}

/// Whether one `key=value` pair of a query sets `forwarded`.
fn names_forwarded(pair: &str) -> bool {
    form_urlencoded::parse(pair.as_bytes())
        .next()
        .is_some_and(|(key, _)| key == "forwarded")
}

/// Sends `req`'s method, path and query (with `body` as JSON, if any) to
/// the admin API of the node holding the partition `name` belongs to; its
/// answer, or `None` if it cannot be asked.
pub async fn to_owner(
    state: &AdminState,
    name: &str,
    req: &HttpRequest,
    body: Option<&serde_json::Value>,
) -> Option<HttpResponse> {
    let view = state.node.send(GetCluster).await.ok()??;
    let partition = crate::url::partition_of(name, view.owners.len() as u16);
    let owner = view.owners.get(usize::from(partition))?.as_ref()?;
    let admin = view
        .members
        .iter()
        .find(|m| &m.node == owner && m.live)?
        .admin?;
    let peer = Peer { node: owner, admin };
    let path = match req.query_string() {
        "" => req.path().to_owned(),
        query => format!("{}?{query}", req.path()),
    };
    let (status, answer) = send(state, peer, req, &path, body).await.ok()?;
    Some(
        HttpResponse::build(status)
            .content_type("application/json")
            .body(answer),
    )
}

/// What another node answered to a request sent to every node.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PeerOutcome {
    /// The node.
    pub node: String,
    /// Its HTTP status, if it answered.
    pub status: Option<u16>,
    /// Why it did not answer, or its error.
    pub error: Option<String>,
}

/// An answer of another node: its status and body, or why there is none.
pub struct PeerAnswer {
    /// The node.
    pub node: String,
    /// Status and body, or the transport error.
    pub answer: Result<(StatusCode, Bytes), String>,
}

impl PeerAnswer {
    /// The outcome as reported to the caller.
    pub fn outcome(&self) -> PeerOutcome {
        let (status, error) = match &self.answer {
            Ok((status, _)) if status.is_success() => (Some(status.as_u16()), None),
            Ok((status, body)) => (
                Some(status.as_u16()),
                Some(String::from_utf8_lossy(body).chars().take(200).collect()),
            ),
            Err(err) => (None, Some(err.clone())),
        };
        PeerOutcome {
            node: self.node.clone(),
            status,
            error,
        }
    }
}

/// Sends `req`'s method to `path_and_query` (with `body` as JSON, if any)
/// on every other member of the cluster, live or not (a member gossip
/// says is dead is reported unreached, not skipped silently). Empty when
/// the node is not in a cluster or `req` was forwarded already.
pub async fn to_peers(
    state: &AdminState,
    req: &HttpRequest,
    path_and_query: &str,
    body: Option<&serde_json::Value>,
) -> Vec<PeerAnswer> {
    if is_forwarded(req) {
        return Vec::new();
    }
    let Ok(Some(view)) = state.node.send(GetCluster).await else {
        return Vec::new();
    };
    let asks = view
        .members
        .iter()
        .filter(|m| m.node != view.node)
        .map(|m| async move {
            let answer = match (m.live, m.admin) {
                (true, Some(admin)) => {
                    let peer = Peer {
                        node: &m.node,
                        admin,
                    };
                    send(state, peer, req, path_and_query, body).await
                }
                (true, None) => Err("it publishes no admin address".to_owned()),
                (false, _) => Err("not live".to_owned()),
            };
            PeerAnswer {
                node: m.node.clone(),
                answer,
            }
        });
    futures_util::future::join_all(asks).await
}

/// Another node's admin API.
#[derive(Clone, Copy)]
struct Peer<'a> {
    /// Its node id.
    node: &'a str,
    /// Where its API listens.
    admin: std::net::SocketAddr,
}

/// The client and base URL for `peer`: HTTPS when this node's API serves
/// HTTPS (a cluster's nodes share `[admin] tls`), trusting the cluster CA
/// alone and checking the certificate names `peer`.
fn client_for(state: &AdminState, peer: Peer<'_>) -> Result<(awc::Client, String), String> {
    let Some(tls) = &state.tls else {
        return Ok((awc::Client::new(), format!("http://{}", peer.admin)));
    };
    let ca = tls
        .peers_ca
        .as_ref()
        .ok_or("[admin] tls is on and [cluster] tls_ca is not set: cannot check the peer")?;
    let name = crate::cluster::tls::node_name(peer.node);
    let config = super::tls::client_config(ca, Some(&name)).map_err(|e| e.to_string())?;
    let connector = awc::Connector::new().rustls_0_23(config);
    let client = awc::Client::builder().connector(connector).finish();
    Ok((client, format!("https://{}", peer.admin)))
}

/// Sends `req`'s method and authorization to `peer`'s API at
/// `path_and_query`, marked forwarded.
async fn send(
    state: &AdminState,
    peer: Peer<'_>,
    req: &HttpRequest,
    path_and_query: &str,
    body: Option<&serde_json::Value>,
) -> Result<(StatusCode, Bytes), String> {
    let (client, base) = client_for(state, peer)?;
    let url = format!("{base}{}", mark_forwarded(path_and_query));
    let method = Method::from_bytes(req.method().as_str().as_bytes()).map_err(|e| e.to_string())?;
    let mut request = client.request(method, url).timeout(PEER_TIMEOUT);
    if let Some(auth) = req.headers().get(header::AUTHORIZATION) {
        request = request.insert_header((header::AUTHORIZATION, auth.clone()));
    }
    let sent = match body {
        Some(body) => request.send_json(body).await,
        None => request.send().await,
    };
    let mut answer = sent.map_err(|e| e.to_string())?;
    let body = answer
        .body()
        .limit(16 << 20)
        .await
        .map_err(|e| e.to_string())?;
    Ok((answer.status(), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_query_is_recognised_as_the_extractor_decodes_it() {
        assert!(query_is_forwarded("forwarded=1"));
        assert!(query_is_forwarded("limit=5&forwarded=%31"));
        assert!(!query_is_forwarded("forwarded=0"));
        assert!(!query_is_forwarded("xforwarded=1&forwarded=11"));
        assert!(!query_is_forwarded(""));
    }

    #[test]
    fn marking_replaces_the_callers_forwarded_parameters() {
        assert_eq!(mark_forwarded("/api/v1/hosts"), "/api/v1/hosts?forwarded=1");
        assert_eq!(
            mark_forwarded("/api/v1/hosts?limit=5&forwarded=0&&sort=host&forwarde%64=x"),
            "/api/v1/hosts?limit=5&sort=host&forwarded=1"
        );
        let marked = mark_forwarded("/a?b=%2F+c");
        assert_eq!(marked, "/a?b=%2F+c&forwarded=1", "others kept as written");
        assert_eq!(mark_forwarded(&marked), marked);
    }
}

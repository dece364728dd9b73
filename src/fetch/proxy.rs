//! `[fetch] proxy`: one egress proxy, reached with HTTP CONNECT, for the
//! hosts that must be reached through it (`[fetch] proxy_hosts`; every
//! host when that is empty).
//!
//! One proxy, never a rotation: a crawler that spreads its requests over
//! proxies to hide from a site's limits is evading the site's politeness,
//! not keeping it.
//!
//! What stays as it is through the proxy:
//! - **Names are resolved here**, by the node's resolver, and the proxy is
//!   asked to `CONNECT` to the *address*: the SSRF guard
//!   (`deny_addresses`) decides before anything is sent (a denied name is
//!   never named to the proxy), DNS answers are cached and counted as for
//!   a direct connection, and `WARC-IP-Address` is the site's address,
//!   not the proxy's. A site whose name only the proxy can resolve is
//!   given an address with `[dns] overrides`.
//! - **TLS is end to end**: the tunnel carries the site's TLS, verified
//!   against the site's name, so the proxy sees neither the requests nor
//!   the pages. Plain `http://` sites are tunnelled too (most proxies
//!   allow `CONNECT` to port 80 when told to; the request-target stays the
//!   site's own), so every request has one path.
//! - The proxy's own address is the operator's: it is not checked against
//!   `deny_addresses` (a proxy on a private network is the usual setup).
//!
//! A proxy that refuses a tunnel, answers something else than HTTP, or
//! closes fails the request with the `proxy` kind (`trawl_fetch_errors_total
//! {kind="proxy"}`); it is transient, so the URL is tried again under
//! `[fetch] max_attempts`, never lost. The proxy's answer to `CONNECT` is
//! read up to [`MAX_PROXY_HEAD`] bytes and parsed with `httparse`.

use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll};

use actix_tls::connect::{ConnectError, ConnectInfo, Connection, Resolve};
use actix_web::dev::Service;
use awc::http::Uri;
use futures_util::future::LocalBoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::resolver::{suffix_matches, OverrideResolver};

/// The longest answer to `CONNECT` read from the proxy (status line and
/// headers).
pub const MAX_PROXY_HEAD: usize = 16 * 1024;

/// A configured proxy: where it is and whom it carries.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxySettings {
    /// `host:port` of the proxy.
    pub authority: String,
    /// `Proxy-Authorization` value (`Basic …`) from the URL's user
    /// information, if it has one.
    pub authorization: Option<String>,
    /// Host patterns sent through it (exact names and `*.suffix`); empty:
    /// every host.
    pub hosts: Vec<String>,
}

impl std::fmt::Debug for ProxySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credentials are never shown.
        f.debug_struct("ProxySettings")
            .field("authority", &self.authority)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// A `[fetch] proxy` or `proxy_hosts` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fetch.{setting} {value:?}: {why}")]
pub struct ProxyConfigError {
    setting: &'static str,
    value: String,
    why: &'static str,
}

impl ProxySettings {
    /// The proxy of `url` (`http://[user:password@]host:port`, empty: none)
    /// for the hosts of `hosts`.
    pub fn parse(url: &str, hosts: &[String]) -> Result<Option<Self>, ProxyConfigError> {
        let url = url.trim();
        if url.is_empty() {
            return Ok(None);
        }
        // An error names the URL, never its password.
        let shown = crate::config::ProxyUrl(url.to_owned()).redacted().0;
        let error = |why| ProxyConfigError {
            setting: "proxy",
            value: shown.clone(),
            why,
        };
        let parsed = url::Url::parse(url).map_err(|_| error("not a URL"))?;
        if parsed.scheme() != "http" {
            return Err(error(
                "only http:// proxies are supported (the tunnel carries the site's own TLS)",
            ));
        }
        if parsed.path() != "/" || parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(error("a proxy URL has no path, query or fragment"));
        }
        let host = parsed.host_str().ok_or_else(|| error("no host"))?;
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| error("no port"))?;
        let authorization = (!parsed.username().is_empty()).then(|| {
            let user = percent_decoded(parsed.username());
            let password = percent_decoded(parsed.password().unwrap_or(""));
            let pair = format!("{user}:{password}");
            format!("Basic {}", data_encoding::BASE64.encode(pair.as_bytes()))
        });
        Ok(Some(ProxySettings {
            authority: format!("{host}:{port}"),
            authorization,
            hosts: hosts
                .iter()
                .map(|h| host_pattern(h))
                .collect::<Result<_, _>>()?,
        }))
    }

    /// Whether requests to `host` go through the proxy.
    pub fn carries(&self, host: &str) -> bool {
        if self.hosts.is_empty() {
            return true;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts
            .iter()
            .any(|pattern| match pattern.strip_prefix("*.") {
                Some(suffix) => suffix_matches(&host, suffix),
                None => *pattern == host,
            })
    }

    /// The `CONNECT` request for a tunnel to `target`.
    pub fn connect_request(&self, target: SocketAddr) -> Vec<u8> {
        let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(auth) = &self.authorization {
            head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// A `proxy_hosts` entry, lower-case: a host name or `*.` and a suffix.
fn host_pattern(pattern: &str) -> Result<String, ProxyConfigError> {
    let pattern = pattern.trim_end_matches('.');
    let name = pattern.strip_prefix("*.").unwrap_or(pattern);
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    match valid {
        true => Ok(pattern.to_ascii_lowercase()),
        false => Err(ProxyConfigError {
            setting: "proxy_hosts",
            value: pattern.to_owned(),
            why: "not a host name or *.suffix",
        }),
    }
}

/// The user information of a URL as written, percent-decoded.
fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Why a proxy gave no tunnel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// It answered `CONNECT` with another status than 2xx.
    #[error("proxy refused the tunnel to {target}: {status} {reason}")]
    Refused {
        target: SocketAddr,
        status: u16,
        reason: String,
    },
    /// Its answer was not an HTTP response head within [`MAX_PROXY_HEAD`]
    /// bytes, or had bytes after the head before the tunnel was used.
    #[error("proxy answered CONNECT with no valid HTTP head: {0}")]
    Malformed(&'static str),
    /// It closed the connection before answering.
    #[error("proxy closed the connection before answering CONNECT")]
    Closed,
    /// It could not be connected to.
    #[error("proxy unreachable: {0}")]
    Unreachable(String),
}

/// What a proxy's answer to `CONNECT` says, from the bytes read so far:
/// `None` while the head is incomplete.
pub fn read_answer(target: SocketAddr, bytes: &[u8]) -> Option<Result<(), ProxyError>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(bytes) {
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_PROXY_HEAD => {
            Some(Err(ProxyError::Malformed("head too long")))
        }
        Ok(httparse::Status::Partial) => None,
        Err(_) => Some(Err(ProxyError::Malformed("not an HTTP response"))),
        Ok(httparse::Status::Complete(len)) => {
            let status = response.code.unwrap_or(0);
            Some(if !(200..300).contains(&status) {
                Err(ProxyError::Refused {
                    target,
                    status,
                    reason: response.reason.unwrap_or("").chars().take(200).collect(),
                })
            } else if len != bytes.len() {
                // Whatever follows is the site's, and no site speaks before
                // the client: a proxy that sends more is not tunnelling.
                Err(ProxyError::Malformed("bytes after the head"))
            } else {
                Ok(())
            })
        }
    }
}

/// Asks the proxy on `stream` for a tunnel to `target`.
async fn open_tunnel(
    stream: &mut TcpStream,
    settings: &ProxySettings,
    target: SocketAddr,
) -> Result<(), std::io::Error> {
    stream.write_all(&settings.connect_request(target)).await?;
    let mut answer = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    loop {
        // Read no further than the head can be: the tunnel's first bytes
        // (the site's) must stay in the socket.
        let room = (MAX_PROXY_HEAD - answer.len()).min(chunk.len());
        let n = stream.read(&mut chunk[..room]).await?;
        if n == 0 {
            return Err(std::io::Error::other(ProxyError::Closed));
        }
        answer.extend_from_slice(&chunk[..n]);
        if let Some(result) = read_answer(target, &answer) {
            return result.map_err(std::io::Error::other);
        }
    }
}

/// awc's TCP connector with the proxy in front: hosts the proxy carries are
/// resolved (and guarded) here and tunnelled; the others go to `direct`.
#[derive(Clone)]
pub struct ProxyConnector<S> {
    direct: S,
    proxy: Option<Rc<ProxySettings>>,
    resolver: OverrideResolver,
}

impl<S> ProxyConnector<S> {
    /// Sends hosts `proxy` carries through it, the others to `direct`.
    pub fn new(direct: S, proxy: Option<ProxySettings>, resolver: OverrideResolver) -> Self {
        ProxyConnector {
            direct,
            proxy: proxy.map(Rc::new),
            resolver,
        }
    }
}

impl<S> Service<ConnectInfo<Uri>> for ProxyConnector<S>
where
    S: Service<ConnectInfo<Uri>, Response = Connection<Uri, TcpStream>, Error = ConnectError>,
    S::Future: 'static,
{
    type Response = Connection<Uri, TcpStream>;
    type Error = ConnectError;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.direct.poll_ready(cx)
    }

    fn call(&self, req: ConnectInfo<Uri>) -> Self::Future {
        let proxy = match &self.proxy {
            Some(proxy) if proxy.carries(req.hostname()) => proxy.clone(),
            _ => return Box::pin(self.direct.call(req)),
        };
        let resolver = self.resolver.clone();
        Box::pin(async move {
            let (host, port) = (req.hostname().to_owned(), req.port());
            let target = match host.parse::<std::net::IpAddr>() {
                // IP literals were checked by the client before it asked.
                Ok(ip) => SocketAddr::new(ip, port),
                Err(_) => {
                    let addrs = resolver
                        .lookup(&host, port)
                        .await
                        .map_err(ConnectError::Resolver)?;
                    *addrs.first().ok_or(ConnectError::NoRecords)?
                }
            };
            let unreachable = |e: std::io::Error| {
                ConnectError::Io(std::io::Error::other(ProxyError::Unreachable(
                    e.to_string(),
                )))
            };
            let mut stream = TcpStream::connect(proxy.authority.as_str())
                .await
                .map_err(unreachable)?;
            // As awc's own connector does: requests are small and written
            // whole; no Nagle delay on the tunnel.
            let _ = stream.set_nodelay(true);
            if let Err(err) = open_tunnel(&mut stream, &proxy, target).await {
                if matches!(
                    proxy_error(&err),
                    Some(ProxyError::Refused { status: 407, .. })
                ) {
                    tracing::warn!(proxy = %proxy.authority, "the proxy wants other credentials (407): check [fetch] proxy; its hosts' URLs wait");
                }
                return Err(ConnectError::Io(err));
            }
            Ok(Connection::new(req.request().clone(), stream))
        })
    }
}

/// The [`ProxyError`] an awc connect error carries, if any.
pub fn proxy_error(err: &std::io::Error) -> Option<&ProxyError> {
    err.get_ref()?.downcast_ref::<ProxyError>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str, hosts: &[&str]) -> ProxySettings {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        ProxySettings::parse(url, &hosts).unwrap().unwrap()
    }

    #[test]
    fn a_proxy_url_is_http_with_a_port_and_optional_credentials() {
        assert_eq!(ProxySettings::parse("", &[]).unwrap(), None);
        let plain = settings("http://127.0.0.1:3128", &[]);
        assert_eq!(plain.authority, "127.0.0.1:3128");
        assert_eq!(plain.authorization, None);
        assert_eq!(settings("http://proxy.lan", &[]).authority, "proxy.lan:80");
        let auth = settings("http://crawler:s%3Acret@127.0.0.1:8080/", &[]);
        // base64("crawler:s:cret")
        assert_eq!(
            auth.authorization.as_deref(),
            Some("Basic Y3Jhd2xlcjpzOmNyZXQ=")
        );
        for bad in [
            "https://127.0.0.1:3128",
            "socks5://127.0.0.1:1080",
            "http://127.0.0.1:3128/path",
            "127.0.0.1:3128",
        ] {
            let err = ProxySettings::parse(bad, &[]).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
        let err = ProxySettings::parse("https://u:hunter2@127.0.0.1:3128", &[]).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(
            err.to_string()
                .contains("https://<redacted>@127.0.0.1:3128"),
            "{err}"
        );
    }

    #[test]
    fn only_the_hosts_named_go_through_the_proxy() {
        let all = settings("http://127.0.0.1:3128", &[]);
        assert!(all.carries("anything.example"));
        let some = settings("http://127.0.0.1:3128", &["intranet.test", "*.corp.test"]);
        assert!(some.carries("Intranet.Test."));
        assert!(some.carries("a.corp.test") && some.carries("corp.test"));
        assert!(!some.carries("notcorp.test"));
        assert!(!some.carries("example.com"));
        for bad in ["", "*.", "a.*.test", "host name", "*"] {
            let err = ProxySettings::parse("http://127.0.0.1:3128", &[bad.to_owned()]).unwrap_err();
            assert!(err.to_string().contains("proxy_hosts"), "{err}");
        }
    }

    #[test]
    fn the_connect_request_names_the_address_and_carries_the_credentials() {
        let target: SocketAddr = "[::1]:443".parse().unwrap();
        let request = settings("http://u:p@127.0.0.1:3128", &[]).connect_request(target);
        assert_eq!(
            String::from_utf8(request).unwrap(),
            "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\
             Proxy-Authorization: Basic dTpw\r\n\r\n"
        );
    }

    #[test]
    fn the_answer_to_connect_opens_the_tunnel_only_on_2xx_and_a_clean_head() {
        let target: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
        // Byte by byte: incomplete until the blank line.
        for end in 1..ok.len() {
            assert_eq!(read_answer(target, &ok[..end]), None, "{end}");
        }
        assert_eq!(read_answer(target, ok), Some(Ok(())));
        assert_eq!(
            read_answer(target, b"HTTP/1.0 403 Forbidden\r\nVia: x\r\n\r\n"),
            Some(Err(ProxyError::Refused {
                target,
                status: 403,
                reason: "Forbidden".into()
            }))
        );
        assert!(matches!(
            read_answer(target, b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 200"),
            Some(Err(ProxyError::Malformed(_)))
        ));
        assert!(matches!(
            read_answer(target, b"SSH-2.0-OpenSSH\r\n\r\n"),
            Some(Err(ProxyError::Malformed(_)))
        ));
        let endless = [
            b"HTTP/1.1 200 OK\r\nX: ".as_slice(),
            &[b'a'; MAX_PROXY_HEAD],
        ]
        .concat();
        assert!(matches!(
            read_answer(target, &endless),
            Some(Err(ProxyError::Malformed(_)))
        ));
    }
}

//! Where names are looked up when no `[dns] overrides` entry applies.
//!
//! The default is hickory's stub resolver, because it reports each
//! answer's TTL (the system resolver does not), so the [`DnsCache`] keeps
//! answers as long as their owners allow, within `[dns] min_ttl..=max_ttl`.
//! Its name servers come from `[dns] nameservers`, or from the system's
//! configuration (`/etc/resolv.conf`) when that list is empty. When the
//! system configuration cannot be read, or `[dns] resolver = "system"`,
//! lookups go through getaddrinfo and answers live `min_ttl`.
//!
//! hickory keeps a small cache of its own; ours in front of it is the one
//! that counts (bounded, negative entries, metrics).
//!
//! [`DnsCache`]: super::dns_cache::DnsCache

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::dns_cache::Answer;
pub use crate::config::ResolverKind;
use futures_util::future::{FutureExt, LocalBoxFuture};
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::TokioResolver;

/// One lookup's result: the answer and, when the source reports it, how
/// long the answer may be kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// Addresses, or why there are none.
    pub answer: Answer,
    /// Remaining life of the answer, if known.
    pub ttl: Option<Duration>,
}

/// A lookup function: host name in, [`Lookup`] out.
pub type Backend = Rc<dyn Fn(String) -> LocalBoxFuture<'static, Lookup>>;

/// The backend `kind` names, with `nameservers` for hickory (empty: the
/// system's). Falls back to the system resolver, with a warning, when
/// hickory cannot be configured.
pub fn backend(kind: ResolverKind, nameservers: &[SocketAddr]) -> Backend {
    match kind {
        ResolverKind::System => system_backend(),
        ResolverKind::Hickory => match hickory_resolver(nameservers) {
            Ok(resolver) => hickory_backend(resolver),
            Err(e) => {
                tracing::warn!(error = %e, "cannot configure the hickory resolver; using the system resolver");
                system_backend()
            }
        },
    }
}

/// The system resolver (getaddrinfo): answers without a TTL.
pub fn system_backend() -> Backend {
    Rc::new(|host: String| {
        async move {
            let answer = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map(|addrs| addrs.map(|a| a.ip()).collect())
                .map_err(|e| e.to_string());
            Lookup { answer, ttl: None }
        }
        .boxed_local()
    })
}

/// A hickory resolver asking `nameservers` (UDP, then TCP for truncated
/// answers), or the system's name servers when the list is empty.
pub fn hickory_resolver(
    nameservers: &[SocketAddr],
) -> Result<TokioResolver, hickory_resolver::ResolveError> {
    let mut builder = if nameservers.is_empty() {
        TokioResolver::builder_tokio()?
    } else {
        let servers: Vec<NameServerConfig> = nameservers
            .iter()
            .flat_map(|&addr| {
                [
                    NameServerConfig::new(addr, Protocol::Udp),
                    NameServerConfig::new(addr, Protocol::Tcp),
                ]
            })
            .collect();
        TokioResolver::builder_with_config(
            ResolverConfig::from_parts(None, vec![], servers),
            TokioConnectionProvider::default(),
        )
    };
    // Our cache is the one that counts; hickory's stays small.
    builder.options_mut().cache_size = 64;
    Ok(builder.build())
}

/// `resolver` as a [`Backend`]: every answer carries the time its records
/// may still be cached.
pub fn hickory_backend(resolver: TokioResolver) -> Backend {
    Rc::new(move |host: String| {
        let resolver = resolver.clone();
        async move {
            match resolver.lookup_ip(host.as_str()).await {
                Ok(found) => Lookup {
                    ttl: Some(
                        found
                            .valid_until()
                            .saturating_duration_since(Instant::now()),
                    ),
                    answer: Ok(found.iter().collect()),
                },
                Err(e) => Lookup {
                    answer: Err(e.to_string()),
                    ttl: None,
                },
            }
        }
        .boxed_local()
    })
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, UdpSocket};
    use std::str::FromStr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use hickory_resolver::proto::op::{Message, MessageType, ResponseCode};
    use hickory_resolver::proto::rr::{rdata::A, Name, RData, Record, RecordType};

    use super::*;

    /// A one-name DNS server on loopback: `ttl.example` is 127.0.0.9 with
    /// a TTL of 120 s; every other name does not exist.
    fn dns_server() -> (SocketAddr, Arc<AtomicUsize>) {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let queries = Arc::new(AtomicUsize::new(0));
        let seen = queries.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = socket.recv_from(&mut buf) {
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                seen.fetch_add(1, Ordering::SeqCst);
                let mut reply = Message::new();
                reply
                    .set_id(query.id())
                    .set_message_type(MessageType::Response)
                    .set_recursion_desired(query.recursion_desired())
                    .set_recursion_available(true)
                    .add_queries(query.queries().to_vec());
                let q = &query.queries()[0];
                if q.name() == &Name::from_str("ttl.example.").unwrap() {
                    if q.query_type() == RecordType::A {
                        let a = RData::A(A(Ipv4Addr::new(127, 0, 0, 9)));
                        reply.add_answer(Record::from_rdata(q.name().clone(), 120, a));
                    }
                } else {
                    reply.set_response_code(ResponseCode::NXDomain);
                }
                let _ = socket.send_to(&reply.to_vec().unwrap(), from);
            }
        });
        (addr, queries)
    }

    #[test]
    fn hickory_answers_carry_their_ttl_and_failures_are_errors() {
        let (server, queries) = dns_server();
        let lookup = backend(ResolverKind::Hickory, &[server]);
        actix_rt::System::new().block_on(async {
            let found = lookup("ttl.example".to_owned()).await;
            assert_eq!(found.answer, Ok(vec!["127.0.0.9".parse().unwrap()]));
            let ttl = found.ttl.expect("hickory reports the TTL");
            assert!(ttl <= Duration::from_secs(120) && ttl > Duration::from_secs(100));
            let missing = lookup("nx.example".to_owned()).await;
            assert!(missing.answer.is_err(), "{missing:?}");
            assert_eq!(missing.ttl, None);
        });
        assert!(queries.load(Ordering::SeqCst) >= 2, "the server was asked");
    }

    #[test]
    fn the_system_backend_reports_no_ttl() {
        actix_rt::System::new().block_on(async {
            let found = system_backend()("127.0.0.1".to_owned()).await;
            assert_eq!(found.answer, Ok(vec!["127.0.0.1".parse().unwrap()]));
            assert_eq!(found.ttl, None);
        });
    }
}

//! `[admin] tls`: the admin API over HTTPS, so its bearer token and what
//! it answers do not cross the network in the clear.
//!
//! The certificate served is `[admin] tls_cert` / `tls_key`, or, when
//! those are empty, the node's own cluster certificate (`[cluster]
//! tls_cert` / `tls_key`, which names `<node_id>.node.trawl`). Clients
//! authenticate with the token as before: no client certificates are asked
//! for, so Prometheus and `curl` need only the CA.
//!
//! Who checks what:
//! - `trawl ctl --ca FILE` trusts that CA alone (no public roots) and
//!   checks the certificate names the address's host, or with `--node ID`
//!   names that node (a cluster certificate names the node, not its IP).
//! - A cluster node forwarding a request to another's admin API
//!   ([`super::forward`]) uses HTTPS when its own API does (a cluster's
//!   nodes share `[admin] tls`), trusting `[cluster] tls_ca` and checking
//!   the peer's certificate names the peer it meant: an `[admin]
//!   tls_cert` of a cluster node must come from the cluster CA and name
//!   `<node_id>.node.trawl`, as its cluster certificate does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::cluster::tls::{read_certs, read_key, TlsError};
use crate::config::Config;

/// Why the admin API's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AdminTlsError {
    /// `[admin] tls` is on and no certificate is configured for it.
    #[error("[admin] tls = true needs a certificate: set [admin] tls_cert and tls_key, or [cluster] tls_cert and tls_key")]
    NoCertificate,
    /// A PEM file cannot be read or holds nothing usable.
    #[error("admin tls: {0}")]
    Files(#[from] TlsError),
    /// rustls refused the certificate, the key or the setup.
    #[error("admin tls: {0}")]
    Rustls(#[from] rustls::Error),
    /// A name to check a certificate for is not a DNS name or address.
    #[error("admin tls: {0:?} is not a server name")]
    Name(String),
}

/// The admin API's TLS as configured: what it serves, and how it checks
/// the other nodes' APIs when it forwards to them.
#[derive(Clone)]
pub struct AdminTls {
    /// The server side.
    pub server: Arc<ServerConfig>,
    /// The cluster CA, if the node is in a cluster with one: forwarded
    /// requests trust it alone.
    pub peers_ca: Option<PathBuf>,
}

impl std::fmt::Debug for AdminTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminTls")
            .field("peers_ca", &self.peers_ca)
            .finish_non_exhaustive()
    }
}

impl AdminTls {
    /// What `config` asks for: `None` with `[admin] tls = false`.
    pub fn from_config(config: &Config) -> Result<Option<Self>, AdminTlsError> {
        if !config.admin.tls {
            return Ok(None);
        }
        let (cert, key) = certificate_files(config).ok_or(AdminTlsError::NoCertificate)?;
        let cluster_ca = &config.cluster.tls_ca;
        Ok(Some(AdminTls {
            server: server_config(cert, key)?,
            peers_ca: (config.cluster.enabled && !cluster_ca.as_os_str().is_empty())
                .then(|| cluster_ca.clone()),
        }))
    }
}

/// The certificate and key the admin API serves: its own, else the
/// node's cluster certificate; `None` if neither is set.
fn certificate_files(config: &Config) -> Option<(&Path, &Path)> {
    let set =
        |cert: &PathBuf, key: &PathBuf| !cert.as_os_str().is_empty() && !key.as_os_str().is_empty();
    let admin = &config.admin;
    let cluster = &config.cluster;
    if set(&admin.tls_cert, &admin.tls_key) {
        Some((&admin.tls_cert, &admin.tls_key))
    } else if set(&cluster.tls_cert, &cluster.tls_key) {
        Some((&cluster.tls_cert, &cluster.tls_key))
    } else {
        None
    }
}

/// The server side: the chain of `cert` and its `key` (PEM), TLS 1.2 and
/// 1.3, no client certificates, HTTP/1.1 (the API's clients are `curl`,
/// Prometheus and `trawl ctl`).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, AdminTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(read_certs(cert)?, read_key(key)?)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client that trusts the CA of `ca` alone and, with `name`, accepts a
/// certificate for that name whatever address it was reached at (a node's
/// certificate names the node, `<id>.node.trawl`; its API is reached at
/// an address).
pub fn client_config(ca: &Path, name: Option<&str>) -> Result<Arc<ClientConfig>, AdminTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let config = match name {
        None => builder.with_root_certificates(roots_of(ca)?),
        Some(name) => builder
            .dangerous()
            .with_custom_certificate_verifier(NamedVerifier::new(ca, name)?),
    }
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The certificates of the PEM file `ca`, as the only roots.
fn roots_of(ca: &Path) -> Result<RootCertStore, AdminTlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(ca)? {
        roots.add(cert)?;
    }
    Ok(roots)
}

/// rustls' own verifier, asked about `name` instead of the name the
/// connection was opened with (an address): the chain, validity and
/// signatures are checked exactly as for any server.
#[derive(Debug)]
struct NamedVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl NamedVerifier {
    /// Checks chains against the CA of `ca` alone, for `name`.
    fn new(ca: &Path, name: &str) -> Result<Arc<Self>, AdminTlsError> {
        let server_name = ServerName::try_from(name.to_owned())
            .map_err(|_| AdminTlsError::Name(name.to_owned()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots_of(ca)?),
            provider,
        )
        .build()
        .map_err(|e| rustls::Error::General(e.to_string()))?;
        Ok(Arc::new(NamedVerifier {
            inner,
            name: server_name,
        }))
    }
}

impl ServerCertVerifier for NamedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _dialled: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::tls::CertsDir;

    /// A cluster CA and certificates for `nodes` in a new directory.
    fn make_certs(nodes: &[&str]) -> (tempfile::TempDir, CertsDir) {
        let dir = tempfile::tempdir().unwrap();
        let certs = CertsDir::new(dir.path());
        let ids: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        certs.make("test-cluster", &ids).unwrap();
        (dir, certs)
    }

    fn config_with(extra: &str) -> Config {
        Config::from_layers(&[("test".into(), extra.to_owned())]).unwrap()
    }

    #[test]
    fn tls_serves_the_admin_certificate_else_the_nodes_and_refuses_neither() {
        let (_dir, certs) = make_certs(&["n1"]);
        assert!(AdminTls::from_config(&config_with("")).unwrap().is_none());
        let none = AdminTls::from_config(&config_with("[admin]\ntls = true\n")).unwrap_err();
        assert!(matches!(none, AdminTlsError::NoCertificate), "{none}");
        let node = format!(
            "[admin]\ntls = true\n[cluster]\ntls_cert = {:?}\ntls_key = {:?}\n",
            certs.cert("n1"),
            certs.key("n1")
        );
        let tls = AdminTls::from_config(&config_with(&node)).unwrap().unwrap();
        assert_eq!(tls.peers_ca, None, "not in a cluster");
        let missing = "[admin]\ntls = true\ntls_cert = \"/nonexistent/c.pem\"\ntls_key = \"/nonexistent/k.pem\"\n";
        let err = AdminTls::from_config(&config_with(missing)).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/c.pem"), "{err}");
    }

    #[test]
    fn a_named_client_checks_the_chain_and_the_name_it_was_given() {
        let (_dir, certs) = make_certs(&["n1", "n2"]);
        let chain = read_certs(&certs.cert("n1")).unwrap();
        let now = UnixTime::now();
        // The address it was reached at, which the certificate does not
        // name.
        let dialled = ServerName::try_from("127.0.0.1").unwrap();
        let verify = |ca: &Path, name: &str| {
            NamedVerifier::new(ca, name)
                .unwrap()
                .verify_server_cert(&chain[0], &chain[1..], &dialled, &[], now)
                .map(|_| ())
        };
        assert!(verify(&certs.ca(), "n1.node.trawl").is_ok());
        assert!(
            verify(&certs.ca(), "n2.node.trawl").is_err(),
            "another node's name"
        );
        let (_other_dir, other) = make_certs(&["n1"]);
        assert!(
            verify(&other.ca(), "n1.node.trawl").is_err(),
            "a CA that did not issue it"
        );
        assert!(client_config(&certs.ca(), Some("not a name")).is_err());
    }
}

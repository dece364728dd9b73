//! Mutual TLS for the bridge: who may open one.
//!
//! A bridge connection carries links a node will crawl and answers about
//! payload digests it will trust, so both ends must know who is on the
//! other side. With `[cluster] tls_ca`, `tls_cert` and `tls_key` set,
//! every connection is TLS 1.3 and both sides present a certificate:
//!
//! - **Issued by the cluster's CA.** Each side checks the other's chain
//!   against the CA (and nothing else: no public roots), so a process
//!   without a certificate from that CA cannot open a bridge at all.
//! - **For the node it claims to be.** A node's certificate names it as
//!   the DNS name [`node_name`] (`<node_id>.node.trawl`). The dialler
//!   asks for the peer's name (rustls checks the server's certificate
//!   against it); the acceptor, once the peer's hello names it, checks the
//!   client certificate names that node ([`certificate_names`]). A node
//!   holding a valid certificate cannot pass for another node.
//!
//! [`ClusterPki`] makes the CA and node certificates for a start (`trawl
//! cluster certs`); operators with their own PKI issue certificates with
//! the same names instead. The keys are ECDSA P-256.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// The DNS suffix of node names in certificates.
pub const NAME_SUFFIX: &str = ".node.trawl";

/// The name a certificate gives node `id`: `<id>.node.trawl`.
pub fn node_name(id: &str) -> String {
    format!("{id}{NAME_SUFFIX}")
}

/// Why TLS for the bridge could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A PEM file holds nothing usable.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A node id cannot be a certificate name (a DNS label is at most 63
    /// bytes).
    #[error("node id {0:?} cannot be named in a certificate")]
    Name(String),
    /// The node's own certificate does not name it: the wrong file, or
    /// another node's.
    #[error("{path} is not a certificate for node {node:?} (it must name {})", node_name(.node))]
    NotOurs {
        /// The certificate file.
        path: PathBuf,
        /// This node's id.
        node: String,
    },
    /// rustls refused a certificate, a key or the protocol setup.
    #[error("tls setup: {0}")]
    Rustls(#[from] rustls::Error),
    /// The CA cannot verify client certificates.
    #[error("tls setup: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// Key or certificate generation failed.
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
}

/// A node's TLS identity and the cluster's trust: the two rustls
/// configurations of its bridge.
#[derive(Clone)]
pub struct NodeTls {
    node: String,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTls")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl NodeTls {
    /// Reads the CA certificate, this node's certificate chain and its key
    /// (PEM files) and checks the certificate names node `node`.
    pub fn load(ca: &Path, cert: &Path, key: &Path, node: &str) -> Result<Self, TlsError> {
        let roots = read_certs(ca)?;
        let chain = read_certs(cert)?;
        let key_der = read_key(key)?;
        if !certificate_names(&chain[0], node) {
            return Err(TlsError::NotOurs {
                path: cert.to_owned(),
                node: node.to_owned(),
            });
        }
        Self::from_parts(roots, chain, key_der, node)
    }

    fn from_parts(
        roots: Vec<CertificateDer<'static>>,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        node: &str,
    ) -> Result<Self, TlsError> {
        let mut store = RootCertStore::empty();
        for root in roots {
            store.add(root)?;
        }
        let store = Arc::new(store);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            store.clone(),
            provider.clone(),
        )
        .build()?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(store)
            .with_client_auth_cert(chain, key)?;
        Ok(NodeTls {
            node: node.to_owned(),
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// This node's id.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The side of a connection this node accepted.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.server.clone())
    }

    /// The side of a connection this node dials.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(self.client.clone())
    }
}

/// The name to ask for when dialling node `id`.
pub fn server_name(id: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(node_name(id)).map_err(|_| TlsError::Name(id.to_owned()))
}

/// Whether `cert` (an end-entity certificate whose chain was verified
/// already) names node `id`.
pub fn certificate_names(cert: &CertificateDer<'_>, id: &str) -> bool {
    let Ok(name) = server_name(id) else {
        return false;
    };
    webpki::EndEntityCert::try_from(cert)
        .is_ok_and(|cert| cert.verify_is_valid_for_subject_name(&name).is_ok())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The private key of a PEM file.
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::Pem {
        path: path.to_owned(),
        reason: format!("no private key: {e}"),
    })
}

/// The certificates of a PEM file (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            reason: "no certificate".into(),
        });
    }
    Ok(certs)
}

/// A cluster CA: makes node certificates for `trawl cluster certs`.
pub struct ClusterPki {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate (PEM): every node's `tls_ca`.
    pub ca_pem: String,
    /// The CA's private key (PEM): keep it off the nodes.
    pub ca_key_pem: String,
}

/// A node's certificate and key, as PEM.
pub struct NodeCertificate {
    /// The certificate (`tls_cert`).
    pub cert_pem: String,
    /// Its private key (`tls_key`).
    pub key_pem: String,
}

impl ClusterPki {
    /// A new CA for cluster `cluster_id`.
    pub fn generate(cluster_id: &str) -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params
            .distinguished_name
            .push(DnType::CommonName, format!("trawl cluster {cluster_id} CA"));
        let cert = params.self_signed(&key)?;
        Ok(ClusterPki {
            ca_pem: cert.pem(),
            ca_key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA of an earlier [`ClusterPki::generate`] (to add nodes).
    pub fn from_pem(ca_pem: &str, ca_key_pem: &str) -> Result<Self, TlsError> {
        let issuer = Issuer::from_ca_cert_pem(ca_pem, KeyPair::from_pem(ca_key_pem)?)?;
        Ok(ClusterPki {
            issuer,
            ca_pem: ca_pem.to_owned(),
            ca_key_pem: ca_key_pem.to_owned(),
        })
    }

    /// A certificate for node `id`, for both ends of a bridge connection.
    pub fn issue(&self, id: &str) -> Result<NodeCertificate, TlsError> {
        if !crate::cluster::valid_node_id(id) || server_name(id).is_err() {
            return Err(TlsError::Name(id.to_owned()));
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![node_name(id)])?;
        params.distinguished_name.push(DnType::CommonName, id);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(NodeCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The files of a cluster's credentials in one directory, as `trawl
/// cluster certs` writes them: `ca.pem` and `ca.key` (the CA: keep its key
/// off the nodes), `<node>.pem` and `<node>.key` per node, `gossip.key`.
#[derive(Debug, Clone)]
pub struct CertsDir {
    dir: PathBuf,
}

impl CertsDir {
    /// The credentials in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CertsDir { dir: dir.into() }
    }

    /// The CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The CA's key.
    pub fn ca_key(&self) -> PathBuf {
        self.dir.join("ca.key")
    }

    /// Node `id`'s certificate.
    pub fn cert(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.pem"))
    }

    /// Node `id`'s key.
    pub fn key(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.key"))
    }

    /// The gossip key.
    pub fn gossip_key(&self) -> PathBuf {
        self.dir.join("gossip.key")
    }

    /// Makes what is missing: the CA (or reuses the one there, to add
    /// nodes to a cluster), a certificate and key for each of `nodes`
    /// that has none, and the gossip key. Existing files are never
    /// overwritten; keys are written readable by their owner only.
    /// Returns the files written.
    pub fn make(&self, cluster_id: &str, nodes: &[String]) -> Result<Vec<PathBuf>, TlsError> {
        for id in nodes {
            if !crate::cluster::valid_node_id(id) || server_name(id).is_err() {
                return Err(TlsError::Name(id.clone()));
            }
        }
        std::fs::create_dir_all(&self.dir).map_err(|source| TlsError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let mut written = Vec::new();
        let pki = if self.ca().exists() {
            let text = |path: PathBuf| {
                std::fs::read_to_string(&path).map_err(|source| TlsError::Io { path, source })
            };
            ClusterPki::from_pem(&text(self.ca())?, &text(self.ca_key())?)?
        } else {
            let pki = ClusterPki::generate(cluster_id)?;
            write_new(&self.ca_key(), &pki.ca_key_pem, &mut written)?;
            write_new(&self.ca(), &pki.ca_pem, &mut written)?;
            pki
        };
        for id in nodes {
            if self.cert(id).exists() {
                continue;
            }
            let node = pki.issue(id)?;
            write_new(&self.key(id), &node.key_pem, &mut written)?;
            write_new(&self.cert(id), &node.cert_pem, &mut written)?;
        }
        if !self.gossip_key().exists() {
            let key = crate::cluster::gossip_auth::GossipKey::generate_hex();
            write_new(&self.gossip_key(), &format!("{key}\n"), &mut written)?;
        }
        Ok(written)
    }

    /// The `[cluster]` settings of node `id` using these files.
    pub fn toml(&self, id: &str) -> String {
        let quoted = |path: PathBuf| toml::Value::String(path.to_string_lossy().into_owned());
        format!(
            "tls_ca = {}\ntls_cert = {}\ntls_key = {}\ngossip_key = {}\n",
            quoted(self.ca()),
            quoted(self.cert(id)),
            quoted(self.key(id)),
            quoted(self.gossip_key()),
        )
    }
}

/// Writes `text` to a new file at `path` (owner-only if it is a key),
/// failing if one exists.
fn write_new(path: &Path, text: &str, written: &mut Vec<PathBuf>) -> Result<(), TlsError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let secret = path.extension().is_some_and(|e| e == "key");
    let io = |source| TlsError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(path)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    written.push(path.to_owned());
    Ok(())
}

#[cfg(test)]
mod tests;

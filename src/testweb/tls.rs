//! TLS for the synthetic web: a throw-away certificate authority and the
//! certificates of its HTTPS hosts, made fresh at every start.
//!
//! The TLS listener picks a certificate by SNI:
//! - [`SELF_SIGNED_HOST`] shows a self-signed certificate (a crawl trusts
//!   it only when it is listed in `[fetch] extra_root_certificates`);
//! - every other name gets the certificate the test CA issued for the
//!   synthetic hosts (`siteNNNN.test`); [`BAD_CERT_HOST`] is not among its
//!   names, so a client that checks names refuses it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The host whose certificate is self-signed.
pub const SELF_SIGNED_HOST: &str = "selfsigned.test";

/// A host served a certificate for other names.
pub const BAD_CERT_HOST: &str = "badcert.test";

/// Why the test PKI could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Key or certificate generation failed.
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused a key or the protocol setup.
    #[error("tls setup: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The test CA and the server side of the synthetic web's TLS.
#[derive(Clone)]
pub struct TestPki {
    /// PEM of the CA certificate: trust it to crawl the HTTPS hosts.
    pub ca_pem: String,
    /// PEM of [`SELF_SIGNED_HOST`]'s certificate.
    pub self_signed_pem: String,
    resolver: Arc<SniResolver>,
}

impl TestPki {
    /// A CA, a certificate it issues for `hosts`, and a self-signed one
    /// for [`SELF_SIGNED_HOST`].
    pub fn generate(hosts: &[String]) -> Result<Self, PkiError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "trawl synthetic web test CA");
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let site_key = KeyPair::generate()?;
        let site_cert = CertificateParams::new(hosts.to_vec())?.signed_by(&site_key, &issuer)?;

        let own_key = KeyPair::generate()?;
        let own_cert =
            CertificateParams::new(vec![SELF_SIGNED_HOST.to_owned()])?.self_signed(&own_key)?;

        let resolver = SniResolver {
            sites: certified(site_cert.der().clone(), &site_key)?,
            self_signed: certified(own_cert.der().clone(), &own_key)?,
        };
        Ok(TestPki {
            ca_pem: ca_cert.pem(),
            self_signed_pem: own_cert.pem(),
            resolver: Arc::new(resolver),
        })
    }

    /// The rustls server configuration (ALPN is added by the server).
    pub fn server_config(&self) -> Result<rustls::ServerConfig, PkiError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.resolver.clone()))
    }

    /// Writes the CA and the self-signed certificate as PEM files into
    /// `dir` and returns their paths (for `[fetch] extra_root_certificates`).
    pub fn write_trust(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let ca = dir.join("test-ca.pem");
        let own = dir.join("self-signed.pem");
        std::fs::write(&ca, &self.ca_pem)?;
        std::fs::write(&own, &self.self_signed_pem)?;
        Ok(vec![ca, own])
    }
}

fn certified(cert: CertificateDer<'static>, key: &KeyPair) -> Result<Arc<CertifiedKey>, PkiError> {
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signing = rustls::crypto::ring::sign::any_supported_type(&der)?;
    Ok(Arc::new(CertifiedKey::new(vec![cert], signing)))
}

/// Picks the certificate by the name the client asked for.
#[derive(Debug)]
struct SniResolver {
    sites: Arc<CertifiedKey>,
    self_signed: Arc<CertifiedKey>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match hello.server_name() {
            Some(name) if name.eq_ignore_ascii_case(SELF_SIGNED_HOST) => {
                Some(self.self_signed.clone())
            }
            _ => Some(self.sites.clone()),
        }
    }
}

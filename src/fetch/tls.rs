//! The client's TLS setup: the Mozilla root store (webpki-roots) plus the
//! certificates listed in `[fetch] extra_root_certificates` (a private CA,
//! or a self-signed host the operator chose to trust), and ALPN offering
//! HTTP/2 before HTTP/1.1.
//!
//! A certificate file that cannot be read or holds no certificate stops
//! the crawl at start with the path named, rather than failing every HTTPS
//! fetch later.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// Why the client's trust store could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A listed file is not readable PEM.
    #[error("fetch.extra_root_certificates: {path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A listed file holds no certificate.
    #[error("fetch.extra_root_certificates: {0}: no certificate in the file")]
    Empty(PathBuf),
    /// rustls refused a certificate as a trust anchor.
    #[error("fetch.extra_root_certificates: {path}: {source}")]
    Rejected {
        /// The file.
        path: PathBuf,
        /// rustls' reason.
        source: rustls::Error,
    },
}

/// The client configuration trusting the public roots and `extra_roots`.
pub fn client_config(extra_roots: &[PathBuf]) -> Result<Arc<rustls::ClientConfig>, TlsSetupError> {
    super::install_crypto_provider();
    let mut roots = actix_tls::connect::rustls_0_23::webpki_roots_cert_store();
    for path in extra_roots {
        for cert in read_certificates(path)? {
            roots.add(cert).map_err(|source| TlsSetupError::Rejected {
                path: path.clone(),
                source,
            })?;
        }
    }
    let mut tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(tls))
}

/// Every certificate in the PEM file at `path`.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let pem_error = |e: rustls::pki_types::pem::Error| TlsSetupError::Pem {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error)?;
    if certs.is_empty() {
        return Err(TlsSetupError::Empty(path.to_owned()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_empty_and_garbage_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = client_config(std::slice::from_ref(&missing)).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no pem here\n").unwrap();
        let err = client_config(std::slice::from_ref(&empty)).unwrap_err();
        assert!(matches!(err, TlsSetupError::Empty(_)), "{err}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert!(client_config(&[garbage]).is_err());
    }

    #[test]
    fn a_generated_ca_is_accepted_and_alpn_offers_h2_first() {
        let pki = crate::testweb::tls::TestPki::generate(&["site0000.test".into()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let files = pki.write_trust(dir.path()).unwrap();
        let config = client_config(&files).unwrap();
        assert_eq!(config.alpn_protocols[0], b"h2");
    }
}

//! Who may use the admin API: mutating endpoints need
//! `Authorization: Bearer <token>` when a token is configured
//! (`[admin] token_file`, or `TRAWL_ADMIN_TOKEN`, which wins); read-only
//! endpoints and `/metrics` too if `[admin] protect_reads`.
//!
//! Without a token, mutations are served only on a loopback address (any
//! local user can then use them): a server that would take mutations from
//! the network without a token refuses to start. Tokens are compared in
//! constant time (their SHA-256s, so not even the length leaks), and a
//! refusal says only that a valid token is required.

use std::net::ToSocketAddrs;
use std::path::PathBuf;

use actix_web::http::header::{HeaderValue, AUTHORIZATION};
use actix_web::HttpRequest;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use crate::config::AdminConfig;

/// The environment variable holding the token (it overrides the file).
pub const TOKEN_ENV: &str = "TRAWL_ADMIN_TOKEN";

/// The admin server could not be set up safely.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The token file cannot be read.
    #[error("admin token file {path}: {source}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token file or variable holds nothing.
    #[error("the admin token ({0}) is empty")]
    EmptyToken(String),
    /// Mutations on a non-loopback address with no token.
    #[error("the admin API would take mutations on {0}, which is not a loopback address, without a token: set [admin] token_file (or {TOKEN_ENV}), or [admin] mutations = false")]
    Unprotected(String),
}

/// The access rules of one server.
#[derive(Clone)]
pub struct Access {
    /// SHA-256 of the token, if there is one.
    token: Option<[u8; 32]>,
    mutations: bool,
    protect_reads: bool,
}

impl Access {
    /// The rules `config` asks for, with the token from the environment
    /// or the token file; refuses what would be unsafe.
    pub fn from_config(config: &AdminConfig) -> Result<Self, AccessError> {
        let token = match std::env::var(TOKEN_ENV) {
            Ok(value) => Some(non_empty(value, TOKEN_ENV)?),
            Err(_) => match &config.token_file {
                Some(path) => {
                    let text =
                        std::fs::read_to_string(path).map_err(|source| AccessError::TokenFile {
                            path: path.clone(),
                            source,
                        })?;
                    Some(non_empty(text, &path.display().to_string())?)
                }
                None => None,
            },
        };
        if config.mutations && token.is_none() && !is_loopback(&config.listen) {
            return Err(AccessError::Unprotected(config.listen.clone()));
        }
        Ok(Access {
            token: token.map(|t| hash(&t)),
            mutations: config.mutations,
            protect_reads: config.protect_reads,
        })
    }

    /// Everything open (tests, the demo: loopback only).
    pub fn open() -> Self {
        Access {
            token: None,
            mutations: true,
            protect_reads: false,
        }
    }

    /// Requires `token` for mutations (and reads if `protect_reads`).
    pub fn with_token(token: &str, protect_reads: bool) -> Self {
        Access {
            token: Some(hash(token)),
            mutations: true,
            protect_reads,
        }
    }

    /// Whether `req` may read.
    pub fn read(&self, req: &HttpRequest) -> Result<(), ApiError> {
        if self.protect_reads {
            self.authenticate(req)?;
        }
        Ok(())
    }

    /// Whether `req` may change something.
    pub fn mutate(&self, req: &HttpRequest) -> Result<(), ApiError> {
        if !self.mutations {
            return Err(ApiError::mutations_disabled());
        }
        self.authenticate(req)
    }

    fn authenticate(&self, req: &HttpRequest) -> Result<(), ApiError> {
        if self.accepts(req.headers().get(AUTHORIZATION)) {
            Ok(())
        } else {
            Err(ApiError::unauthorized())
        }
    }

    /// Whether a request with this `Authorization` header value is let in
    /// where a token is asked for: always without a token, else only
    /// `Bearer <token>` (spaces around the token allowed). A value that is
    /// not visible ASCII (`HeaderValue::to_str` refuses it) is refused.
    pub fn accepts(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        let given = authorization
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| hash(t.trim()));
        given.is_some_and(|given| bool::from(given.ct_eq(expected)))
    }
}

fn non_empty(token: String, source: &str) -> Result<String, AccessError> {
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(AccessError::EmptyToken(source.to_owned()));
    }
    Ok(token)
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether every address `listen` names is a loopback address (an address
/// that does not resolve is not).
fn is_loopback(listen: &str) -> bool {
    match listen.to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn config(listen: &str, token_file: Option<PathBuf>, mutations: bool) -> AdminConfig {
        AdminConfig {
            listen: listen.into(),
            enabled: true,
            token_file,
            mutations,
            protect_reads: false,
            tls: false,
            tls_cert: PathBuf::new(),
            tls_key: PathBuf::new(),
        }
    }

    #[test]
    fn mutations_off_loopback_need_a_token() {
        assert!(Access::from_config(&config("127.0.0.1:9090", None, true)).is_ok());
        assert!(matches!(
            Access::from_config(&config("0.0.0.0:9090", None, true)),
            Err(AccessError::Unprotected(_))
        ));
        assert!(Access::from_config(&config("0.0.0.0:9090", None, false)).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cret\n").unwrap();
        assert!(Access::from_config(&config("0.0.0.0:9090", Some(file.clone()), true)).is_ok());
        std::fs::write(&file, "  \n").unwrap();
        assert!(matches!(
            Access::from_config(&config("0.0.0.0:9090", Some(file), true)),
            Err(AccessError::EmptyToken(_))
        ));
        let missing = dir.path().join("missing");
        assert!(matches!(
            Access::from_config(&config("127.0.0.1:1", Some(missing), true)),
            Err(AccessError::TokenFile { .. })
        ));
    }

    #[test]
    fn a_wrong_or_missing_token_is_refused_alike() {
        let access = Access::with_token("s3cret", false);
        let with = |auth: Option<&str>| {
            let mut req = TestRequest::default();
            if let Some(a) = auth {
                req = req.insert_header(("Authorization", a));
            }
            req.to_http_request()
        };
        assert!(access.mutate(&with(Some("Bearer s3cret"))).is_ok());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("s3cret"),
            Some("Basic s3cret"),
        ] {
            let err = access.mutate(&with(bad)).unwrap_err();
            assert_eq!(err.code(), "unauthorized", "{bad:?}");
            assert_eq!(err.to_string(), "a valid bearer token is required");
        }
        assert!(access.read(&with(None)).is_ok(), "reads are open");
        let value = |v: &[u8]| HeaderValue::from_bytes(v).unwrap();
        assert!(access.accepts(Some(&value(b"Bearer \t s3cret  "))));
        assert!(
            !access.accepts(Some(&value(b"Bearer s3cret\xff"))),
            "not visible ASCII"
        );
        assert!(!access.accepts(Some(&value(b"bearer s3cret"))));
        assert!(Access::open().accepts(None));
        assert!(Access::with_token("s3cret", true)
            .read(&with(None))
            .is_err());
    }
}

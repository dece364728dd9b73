//! The admin API's errors: every one is a JSON body
//! `{"code": "...", "error": "..."}` with a stable machine-readable `code`
//! (the contract clients match on) and a human-readable `error` (which may
//! change). Nothing the API answers is ever a bare 5xx without a body.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

/// An error body.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Stable code: `bad_request`, `bad_json`, `payload_too_large`,
    /// `unsupported_media_type`, `unauthorized`, `mutations_disabled`,
    /// `not_found`, `method_not_allowed`, `not_a_cluster`, `unavailable`, `internal`.
    pub code: &'static str,
    /// What went wrong, for people.
    pub error: String,
}

/// An error answered by the API.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// A request that is not valid (a field out of range, a bad host name).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// A body that is not the JSON the endpoint takes.
    pub fn bad_json(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_json", message)
    }

    /// A body over the limit.
    pub fn payload_too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    /// A body that is not `application/json`.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            message,
        )
    }

    /// No token, or the wrong one. Says nothing about which.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required",
        )
    }

    /// `[admin] mutations = false`.
    pub fn mutations_disabled() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "mutations_disabled",
            "this node's admin API serves no mutations ([admin] mutations = false)",
        )
    }

    /// No such endpoint or resource.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// The path exists, not with this method.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }

    /// A cluster endpoint on a single node.
    pub fn not_a_cluster() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_a_cluster",
            "not a cluster node ([cluster] enabled = false)",
        )
    }

    /// The node (or the node that owns the answer) cannot answer now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// The node failed to do what was asked (a store write).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// Its stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(ErrorBody {
            code: self.code,
            error: self.message.clone(),
        })
    }
}

impl From<actix::MailboxError> for ApiError {
    fn from(e: actix::MailboxError) -> Self {
        ApiError::unavailable(format!("node unavailable: {e}"))
    }
}

impl From<crate::error::Failure> for ApiError {
    fn from(f: crate::error::Failure) -> Self {
        match f {
            crate::error::Failure::Invalid(m) => ApiError::bad_request(m),
            crate::error::Failure::Peer(m) | crate::error::Failure::Mailbox(m) => {
                ApiError::unavailable(m)
            }
            not_held @ crate::error::Failure::NotHeld { .. } => {
                ApiError::unavailable(not_held.to_string())
            }
            other => ApiError::internal(other.to_string()),
        }
    }
}

/// The JSON extractor's errors as API errors (malformed JSON, wrong
/// types, too large, wrong content type).
pub fn json_error(err: actix_web::error::JsonPayloadError) -> ApiError {
    use actix_web::error::JsonPayloadError as E;
    match err {
        E::OverflowKnownLength { .. } | E::Overflow { .. } => {
            ApiError::payload_too_large(err.to_string())
        }
        E::ContentType => ApiError::unsupported_media_type("the body must be application/json"),
        E::Deserialize(e) => ApiError::bad_json(e.to_string()),
        other => ApiError::bad_json(other.to_string()),
    }
}

/// The path and query extractors' errors as API errors.
pub fn path_error(err: actix_web::error::PathError) -> ApiError {
    ApiError::bad_request(err.to_string())
}

/// The query extractor's errors as API errors.
pub fn query_error(err: actix_web::error::QueryPayloadError) -> ApiError {
    ApiError::bad_request(err.to_string())
}

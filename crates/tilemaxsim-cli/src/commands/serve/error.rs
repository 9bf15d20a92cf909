//! The server's one error type: every failure a request can meet, each with its HTTP status,
//! answered as `{"error": "<message>"}` so a client can show the reason.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed JSON, a wrong dimension, NaN/Inf, k out of range, an empty query, ...
    #[error("{0}")]
    BadRequest(String),
    /// The body is larger than `--max-body-mb`.
    #[error("{0}")]
    TooLarge(String),
    /// The bounded queue holds `--max-queue` requests already.
    #[error("the queue is full ({0} requests waiting); retry later")]
    QueueFull(usize),
    /// No answer within `--request-timeout-ms`.
    #[error(
        "no answer within {0} ms (queued or scoring); retry later or raise --request-timeout-ms"
    )]
    Timeout(u64),
    /// The corpus is still loading, or the server is shutting down.
    #[error("{0}")]
    Unavailable(String),
    /// No such endpoint.
    #[error("{0}")]
    NotFound(String),
    /// An endpoint asked with a method it does not take (`GET /v1/search`).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The engine failed on a batch (e.g. out of memory on the device).
    #[error("the engine failed: {0}")]
    Engine(String),
    /// A write that names the index as it was (document numbers of an older generation).
    #[error("{0}")]
    Conflict(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::QueueFull(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        (self.status(), Json(body)).into_response()
    }
}

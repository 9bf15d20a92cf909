//! The HTTP surface: `POST /v1/search`, `GET /v1/info`, `/healthz`, `/readyz`, `/metrics`, and
//! for an index served live `POST /v1/index/add`, `/v1/index/delete` and `/v1/index/compact`
//! (`writes.rs`).
//! Handlers parse and check, hand the work to the queue, and wait for their answer with a
//! deadline; a request whose client disconnects is cancelled here, which closes its answer
//! channel so the queue drops it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio::sync::oneshot;

use super::api::{self, HitOut, QueryResult, SearchResponse, Timing};
use super::error::ApiError;
use super::metrics::Metrics;
use super::queue::{Job, Queue};
use super::ready::Ready;
use super::writes::{AddResponse, CompactResponse, DeleteResponse, Writer};
use tilemaxsim::index::Stamp;

/// The per-request limits the router enforces (the queue enforces its own).
#[derive(Clone, Copy, Debug)]
pub struct RequestLimits {
    pub max_k: usize,
    pub max_queries: usize,
    pub max_tokens: usize,
    pub max_body_bytes: usize,
    pub timeout: Duration,
}

#[derive(Clone)]
pub struct AppState {
    pub queue: Arc<Queue>,
    pub metrics: Arc<Metrics>,
    pub ready: Arc<Ready>,
    pub limits: RequestLimits,
    /// Writes to the index served (`None`: a corpus is served, which takes none).
    pub writer: Option<Arc<Writer>>,
}

pub fn router(state: AppState) -> Router {
    let body_limit = state.limits.max_body_bytes;
    Router::new()
        .route("/v1/search", post(search))
        .route("/v1/index/add", post(add))
        .route("/v1/index/delete", post(delete))
        .route("/v1/index/compact", post(compact))
        .route("/v1/info", get(info))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), count))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

/// Count every answered request by endpoint and status; time the searches.
async fn count(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let endpoint = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "other".to_string(), |p| p.as_str().to_string());
    let started = Instant::now();
    let response = next.run(req).await;
    s.metrics
        .requests
        .with_label_values(&[endpoint.as_str(), response.status().as_str()])
        .inc();
    if endpoint == "/v1/search" {
        s.metrics
            .request_seconds
            .observe(started.elapsed().as_secs_f64());
    }
    response
}

/// The body of a request, or why it cannot be read (413 beyond `--max-body-mb`).
fn read_body(s: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(format!(
                "the request body is larger than the limit of {} bytes (--max-body-mb)",
                s.limits.max_body_bytes
            ))
        } else {
            ApiError::BadRequest(format!("cannot read the request body: {}", r.body_text()))
        }
    })
}

async fn search(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SearchResponse>, ApiError> {
    let body = read_body(&s, body)?;
    let loaded = s.ready.get().ok_or_else(|| {
        ApiError::Unavailable(
            "the corpus is still loading; GET /readyz says when it is ready".into(),
        )
    })?;
    let checked = api::parse(
        &body,
        &api::Limits {
            dim: loaded.dim,
            documents: loaded.documents,
            max_k: s.limits.max_k,
            max_queries: s.limits.max_queries,
            max_tokens: s.limits.max_tokens,
            index: loaded.generation.is_some(),
        },
    )?;
    drop(body);
    let ids: Vec<String> = checked.queries.iter().map(|q| q.id.clone()).collect();
    let (reply, answer) = oneshot::channel();
    s.queue.push(Job {
        queries: checked.queries,
        k: checked.k,
        subset: checked.subset,
        tokens: checked.tokens,
        enqueued: Instant::now(),
        reply,
    })?;
    // Dropping `answer` (timeout here, or this future cancelled by a disconnect) closes the
    // channel; the queue then drops the request from its batch.
    let answer = match tokio::time::timeout(s.limits.timeout, answer).await {
        Err(_) => return Err(ApiError::Timeout(s.limits.timeout.as_millis() as u64)),
        Ok(Err(_)) => return Err(ApiError::Unavailable("the engine has stopped".into())),
        Ok(Ok(a)) => a?,
    };
    // Named by what served the batch (an index served live: its updates may have come since
    // the request was checked, and a compaction numbers the documents again), else by what
    // is loaded now.
    let loaded = answer
        .loaded
        .clone()
        .or_else(|| s.ready.get())
        .unwrap_or(loaded);
    let results = ids
        .into_iter()
        .zip(answer.hits)
        .map(|(id, hits)| QueryResult {
            id,
            hits: hits
                .into_iter()
                .map(|h| HitOut {
                    doc: loaded.names.doc(h.doc),
                    index: h.doc,
                    score: h.score,
                })
                .collect(),
        })
        .collect();
    Ok(Json(SearchResponse {
        results,
        generation: loaded.generation,
        timing: Timing {
            queue_us: answer.queue.as_micros() as u64,
            compute_us: answer.compute.as_micros() as u64,
            batch_queries: answer.batch_queries,
        },
    }))
}

/// Run a write on a blocking thread (it encodes and waits for the disk), then wake the engine
/// and answer once it serves with the write. A write that started is finished, past the
/// deadline if need be, so its answer tells what is on disk.
async fn write<T: Send + 'static>(
    s: &AppState,
    body: Result<Bytes, BytesRejection>,
    f: impl FnOnce(&Writer, &[u8]) -> Result<(T, Stamp), ApiError> + Send + 'static,
) -> Result<Json<T>, ApiError> {
    let writer = s.writer.clone().ok_or_else(|| {
        ApiError::NotFound(
            "this server serves a corpus, which takes no updates; serve an index (--index) to \
             add and delete documents"
                .into(),
        )
    })?;
    let body = read_body(s, body)?;
    let (answer, stamp) = match tokio::task::spawn_blocking(move || f(&writer, &body)).await {
        Ok(r) => r?,
        Err(_) => return Err(ApiError::Engine("the write stopped unexpectedly".into())),
    };
    s.queue.wake();
    // Past the deadline (an engine that stopped), the write still stands: it is on disk.
    let _ = tokio::time::timeout(s.limits.timeout, s.ready.applied(stamp)).await;
    Ok(Json(answer))
}

async fn add(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<AddResponse>, ApiError> {
    write(&s, body, |w, b| w.add(b)).await
}

async fn delete(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<DeleteResponse>, ApiError> {
    write(&s, body, |w, b| w.delete(b)).await
}

async fn compact(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CompactResponse>, ApiError> {
    write(&s, body, |w, b| w.compact(b)).await
}

async fn info(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let l = s.ready.get().ok_or_else(|| {
        ApiError::Unavailable(
            "the corpus is still loading; GET /readyz says when it is ready".into(),
        )
    })?;
    Ok(Json(serde_json::json!({
        "dim": l.dim,
        "documents": l.documents,
        "tokens": l.tokens,
        "dtype": l.dtype,
        "engine": l.engine,
        "devices": l.devices,
        "doc_ids": l.names.has_ids(),
        "updates": s.writer.is_some(),
        "generation": l.generation,
        "max_k": s.limits.max_k.min(l.documents),
        "max_batch_queries": s.limits.max_queries,
        "max_batch_tokens": s.limits.max_tokens,
        "max_body_bytes": s.limits.max_body_bytes,
        "version": env!("CARGO_PKG_VERSION"),
    })))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn readyz(State(s): State<AppState>) -> Response {
    if s.ready.get().is_some() {
        Json(serde_json::json!({ "ready": true })).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "ready": false, "error": "the corpus is still loading" })),
        )
            .into_response()
    }
}

async fn metrics(State(s): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
        .into_response()
}

const ENDPOINTS: &str = "POST /v1/search, /v1/index/add, /v1/index/delete, /v1/index/compact; GET /v1/info, /healthz, \
     /readyz, /metrics";

async fn method_not_allowed(req: Request) -> ApiError {
    let path = req.uri().path();
    let allowed = if path.starts_with("/v1/search") || path.starts_with("/v1/index/") {
        "POST"
    } else {
        "GET"
    };
    ApiError::MethodNotAllowed(format!(
        "{} {path}: this endpoint takes {allowed} ({ENDPOINTS})",
        req.method()
    ))
}

async fn not_found(req: Request) -> ApiError {
    ApiError::NotFound(format!(
        "no endpoint {} {}: {ENDPOINTS}",
        req.method(),
        req.uri().path()
    ))
}

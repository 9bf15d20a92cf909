//! The server's Prometheus metrics (text format at `GET /metrics`): requests by endpoint and
//! status, end-to-end, queue and compute latency, batch sizes, queue depth, engine occupancy,
//! and the clients that left before their answer.

use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// Latency buckets in seconds: 100 µs to 60 s.
const LATENCY_BUCKETS: [f64; 18] = [
    1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0,
];

pub struct Metrics {
    registry: Registry,
    /// Requests answered, by endpoint and HTTP status.
    pub requests: IntCounterVec,
    /// `POST /v1/search`: from the request's arrival to its answer (any status).
    pub request_seconds: Histogram,
    /// Time a request waited in the queue before its batch started.
    pub queue_seconds: Histogram,
    /// Time the engine took for one batch.
    pub compute_seconds: Histogram,
    /// Queries per batch the engine scored.
    pub batch_queries: Histogram,
    /// Requests per batch the engine scored.
    pub batch_requests: Histogram,
    /// Requests waiting in the queue now.
    pub queue_depth: IntGauge,
    /// Queries in the batch the engine is scoring now (0 when idle).
    pub engine_queries: IntGauge,
    /// Queries scored since the start.
    pub queries: IntCounter,
    /// Requests whose client left (timed out or disconnected) while they waited in the queue:
    /// dropped from their batch, never scored.
    pub dropped_queued: IntCounter,
    /// Requests whose client left while their batch was being scored (the answer is discarded).
    pub dropped_scoring: IntCounter,
    /// 1 once the corpus is loaded and the engine ready.
    pub ready: IntGauge,
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    // Names and buckets are constants of this file: a failure is a bug here, not input.
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("valid histogram options")
}

impl Metrics {
    pub fn new() -> Self {
        let lat = || LATENCY_BUCKETS.to_vec();
        let sizes: Vec<f64> = (0..11).map(|i| f64::from(1u32 << i)).collect();
        let m = Metrics {
            registry: Registry::new(),
            requests: IntCounterVec::new(
                Opts::new(
                    "tilemaxsim_requests_total",
                    "HTTP requests answered, by endpoint and status",
                ),
                &["endpoint", "status"],
            )
            .expect("valid counter options"),
            request_seconds: histogram(
                "tilemaxsim_request_duration_seconds",
                "POST /v1/search: arrival to answer, any status",
                lat(),
            ),
            queue_seconds: histogram(
                "tilemaxsim_queue_duration_seconds",
                "Time a request waited in the queue before its batch started",
                lat(),
            ),
            compute_seconds: histogram(
                "tilemaxsim_compute_duration_seconds",
                "Time the engine took to score one batch",
                lat(),
            ),
            batch_queries: histogram(
                "tilemaxsim_batch_queries",
                "Queries per batch scored",
                sizes.clone(),
            ),
            batch_requests: histogram(
                "tilemaxsim_batch_requests",
                "Requests per batch scored",
                sizes,
            ),
            queue_depth: IntGauge::new("tilemaxsim_queue_depth", "Requests waiting in the queue")
                .expect("valid gauge options"),
            engine_queries: IntGauge::new(
                "tilemaxsim_engine_queries",
                "Queries in the batch being scored now (0: the engine is idle)",
            )
            .expect("valid gauge options"),
            queries: IntCounter::new("tilemaxsim_queries_total", "Queries scored")
                .expect("valid counter options"),
            dropped_queued: IntCounter::new(
                "tilemaxsim_dropped_queued_total",
                "Requests dropped from their batch because the client had left while they waited",
            )
            .expect("valid counter options"),
            dropped_scoring: IntCounter::new(
                "tilemaxsim_dropped_scoring_total",
                "Answers discarded because the client left while its batch was scored",
            )
            .expect("valid counter options"),
            ready: IntGauge::new("tilemaxsim_ready", "1 once the corpus is loaded")
                .expect("valid gauge options"),
        };
        let r = &m.registry;
        // Each metric has its own name, so registering cannot collide.
        let register = |c: Box<dyn prometheus::core::Collector>| {
            r.register(c).expect("unique metric names");
        };
        register(Box::new(m.requests.clone()));
        register(Box::new(m.request_seconds.clone()));
        register(Box::new(m.queue_seconds.clone()));
        register(Box::new(m.compute_seconds.clone()));
        register(Box::new(m.batch_queries.clone()));
        register(Box::new(m.batch_requests.clone()));
        register(Box::new(m.queue_depth.clone()));
        register(Box::new(m.engine_queries.clone()));
        register(Box::new(m.queries.clone()));
        register(Box::new(m.dropped_queued.clone()));
        register(Box::new(m.dropped_scoring.clone()));
        register(Box::new(m.ready.clone()));
        m
    }

    /// Every metric in Prometheus's text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&self.registry.gather(), &mut out) {
            out = format!("# metrics encoding failed: {e}\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_metric() {
        let m = Metrics::new();
        m.requests.with_label_values(&["/v1/search", "200"]).inc();
        m.batch_queries.observe(3.0);
        let text = m.render();
        for name in [
            "tilemaxsim_requests_total{endpoint=\"/v1/search\",status=\"200\"} 1",
            "tilemaxsim_batch_queries_bucket{le=\"4\"} 1",
            "tilemaxsim_queue_depth 0",
            "tilemaxsim_dropped_queued_total 0",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
    }
}

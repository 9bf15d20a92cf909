//! The engine worker: a thread of its own (scoring never runs on the async runtime) that
//! loads the corpus, prepares the searcher (CPU, one GPU, or shards over several), then scores
//! batch after batch from the queue in one multi-query pass each, and hands every request its
//! own hits.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::Result;
use tilemaxsim::Matrix;

use super::error::ApiError;
use super::metrics::Metrics;
use super::queue::{Answer, Queue};
use crate::args::{CorpusArgs, Opened};

/// What `/v1/info` reports and requests are checked against, known once the corpus is loaded.
pub struct Loaded {
    pub dim: usize,
    pub documents: usize,
    pub tokens: usize,
    pub dtype: String,
    pub engine: String,
    pub devices: Vec<String>,
    /// Document ids (from the file or `--doc-ids`); `None`: hits name documents by index.
    pub doc_ids: Option<Arc<[String]>>,
}

impl Loaded {
    pub fn doc(&self, index: usize) -> String {
        self.doc_ids
            .as_ref()
            .map_or_else(|| index.to_string(), |ids| ids[index].clone())
    }
}

/// Prepare the search of `opened` (opened and checked before the server listened: exact or
/// compressed, with its second stage), announce readiness through `ready`, then serve batches
/// until the queue is closed and empty. An error here (the GPU runs out of memory) ends the
/// server.
pub fn run(
    args: &CorpusArgs,
    opened: Opened,
    queue: &Queue,
    metrics: &Metrics,
    ready: &OnceLock<Loaded>,
) -> Result<()> {
    let (device, options) = args.search_setup()?;
    let options = args.with_rerank(options, &opened, None);
    let corpus = opened.corpus.as_ref();
    let (searcher, notice) = tilemaxsim::searcher_for(device, corpus, &options)?;
    for n in notice.into_iter().chain(args.cpu_notice(&searcher.name())) {
        eprintln!("notice: {n}");
    }
    let devices = if options.devices.is_empty() {
        vec![device.to_string()]
    } else {
        options
            .devices
            .iter()
            .map(|d| format!("cuda:{d}"))
            .collect()
    };
    let loaded = Loaded {
        dim: corpus.dim(),
        documents: corpus.len(),
        tokens: corpus.num_tokens(),
        dtype: corpus.storage_name(),
        engine: searcher.name(),
        devices,
        doc_ids: corpus.doc_ids().map(Arc::from),
    };
    eprintln!(
        "tilemaxsim serve: ready: {} documents ({} tokens, d = {}, {}) on {}",
        loaded.documents, loaded.tokens, loaded.dim, loaded.dtype, loaded.engine
    );
    // Set once, here; a second set cannot happen.
    let _ = ready.set(loaded);
    metrics.ready.set(1);

    while let Some(batch) = queue.next_batch() {
        let started = Instant::now();
        let queries: Vec<Matrix<'_>> = batch
            .iter()
            .flat_map(|j| j.queries.iter().map(|q| q.matrix()))
            .collect();
        // One pass at the largest k; each request's hits are the prefix of its own k (the
        // ranking order is total, so a top-k is a prefix of any larger top-k).
        let k = batch.iter().map(|j| j.k).max().unwrap_or(1);
        metrics.engine_queries.set(queries.len() as i64);
        let result = searcher.search(&queries, k);
        let compute = started.elapsed();
        let n = queries.len();
        drop(queries);
        metrics.engine_queries.set(0);
        metrics.compute_seconds.observe(compute.as_secs_f64());
        metrics.batch_queries.observe(n as f64);
        metrics.batch_requests.observe(batch.len() as f64);
        match result {
            Ok(hits) => {
                metrics.queries.inc_by(n as u64);
                let mut hits = hits.into_iter();
                for job in batch {
                    let mine: Vec<_> = hits
                        .by_ref()
                        .take(job.queries.len())
                        .map(|mut h| {
                            h.truncate(job.k);
                            h
                        })
                        .collect();
                    let queue_wait = started.saturating_duration_since(job.enqueued);
                    metrics.queue_seconds.observe(queue_wait.as_secs_f64());
                    let answer = Answer {
                        hits: mine,
                        queue: queue_wait,
                        compute,
                        batch_queries: n,
                    };
                    if job.reply.send(Ok(answer)).is_err() {
                        metrics.dropped_scoring.inc();
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                eprintln!("error: a batch of {n} queries failed: {msg}");
                for job in batch {
                    if job.reply.send(Err(ApiError::Engine(msg.clone()))).is_err() {
                        metrics.dropped_scoring.inc();
                    }
                }
            }
        }
    }
    Ok(())
}

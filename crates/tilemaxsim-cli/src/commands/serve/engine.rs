//! The engine worker: a thread of its own (scoring never runs on the async runtime) that
//! loads the corpus, prepares the searcher (CPU, one GPU, or shards over several), then scores
//! batch after batch from the queue in one multi-query pass each, and hands every request its
//! own hits. What it publishes to the router (`ready.rs`) is shared with the engine of an index
//! served live (`live.rs`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use tilemaxsim::{Device, Matrix, SearchOptions, Searcher};

use super::error::ApiError;
use super::metrics::Metrics;
use super::queue::{Answer, Job, Queue};
use super::ready::{Loaded, Names, Ready};
use tilemaxsim::Hit;

/// Run `f` on the server's background rayon pool (made at the first call): the work a server
/// does beside its searches (writes, compactions, preparing the searcher of an update). The
/// searches' own parallel steps use rayon's global pool, where they would wait behind every
/// task queued before them.
pub(super) fn in_background<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("tilemaxsim-background-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// A batch that takes longer is reported on stderr.
const SLOW_BATCH: std::time::Duration = std::time::Duration::from_millis(250);

/// The requests the queue hands the engine at once.
type Batch = Vec<Job>;
use crate::args::{CorpusArgs, Opened};

/// Prepare the search of `opened` (opened and checked before the server listened: exact or
/// compressed, with its second stage), announce readiness through `ready`, then serve batches
/// until the queue is closed and empty. An error here (the GPU runs out of memory) ends the
/// server.
pub fn run(
    args: &CorpusArgs,
    opened: Opened,
    queue: &Queue,
    metrics: &Metrics,
    ready: &Ready,
) -> Result<()> {
    let (device, options) = args.search_setup()?;
    let options = args.with_rerank(options, &opened, None);
    let corpus = opened.corpus.as_ref();
    let (searcher, notice) = tilemaxsim::searcher_for(device, corpus, &options)?;
    for n in notice.into_iter().chain(args.cpu_notice(&searcher.name())) {
        eprintln!("notice: {n}");
    }
    let devices = device_names(device, &options);
    let loaded = Loaded {
        dim: corpus.dim(),
        documents: corpus.len(),
        tokens: corpus.num_tokens(),
        dtype: corpus.storage_name(),
        engine: searcher.name(),
        devices,
        names: Names {
            ids: corpus.doc_ids().map(Arc::from),
            first: corpus.len(),
            added: Vec::new(),
        },
        generation: None,
    };
    eprintln!(
        "tilemaxsim serve: ready: {} documents ({} tokens, d = {}, {}) on {}",
        loaded.documents, loaded.tokens, loaded.dim, loaded.dtype, loaded.engine
    );
    ready.set(loaded);
    metrics.ready.set(1);
    while let Some(batch) = queue.next_batch() {
        if !batch.is_empty() {
            serve_batch(searcher.as_ref(), None, batch, metrics, None);
        }
    }
    Ok(())
}

/// The devices `/v1/info` names: the GPUs of `--devices`, else the one device.
pub(super) fn device_names(device: Device, options: &SearchOptions<'_>) -> Vec<String> {
    if options.devices.is_empty() {
        vec![device.to_string()]
    } else {
        options
            .devices
            .iter()
            .map(|d| format!("cuda:{d}"))
            .collect()
    }
}

/// A search within given documents: queries, each one's document numbers, and k (an index
/// served live: `Index::search_within`).
pub(super) type Within<'a> =
    dyn Fn(&[Matrix<'_>], &[Vec<usize>], usize) -> tilemaxsim::Result<Vec<Vec<Hit>>> + 'a;

/// Score one batch and answer each of its requests: the requests without a subset in one
/// pass, each with one through `within` (its own documents only; none without an index).
/// `loaded`, where given, names the documents its hits number (an index served live: the
/// state the searcher serves).
pub(super) fn serve_batch(
    searcher: &dyn Searcher,
    within: Option<&Within<'_>>,
    batch: Batch,
    metrics: &Metrics,
    loaded: Option<&Arc<Loaded>>,
) {
    let started = Instant::now();
    let (plain, within_jobs): (Batch, Batch) = batch.into_iter().partition(|j| j.subset.is_none());
    let queries: Vec<Matrix<'_>> = plain
        .iter()
        .flat_map(|j| j.queries.iter().map(|q| q.matrix()))
        .collect();
    let n = queries.len() + within_jobs.iter().map(|j| j.queries.len()).sum::<usize>();
    metrics.engine_queries.set(n as i64);
    // One pass at the largest k; each request's hits are the prefix of its own k (the
    // ranking order is total, so a top-k is a prefix of any larger top-k).
    let k = plain.iter().map(|j| j.k).max().unwrap_or(1);
    let result = if queries.is_empty() {
        Ok(Vec::new())
    } else {
        searcher.search(&queries, k)
    };
    drop(queries);
    // Each subset request on its own: a bad number fails its request only.
    let within_results: Vec<Result<Vec<Vec<Hit>>, ApiError>> = within_jobs
        .iter()
        .map(|job| {
            let Some(within) = within else {
                return Err(ApiError::BadRequest(
                    "\"subset\" needs an index (tilemaxsim serve --index DIR)".into(),
                ));
            };
            let queries: Vec<Matrix<'_>> = job.queries.iter().map(|q| q.matrix()).collect();
            let lists = job.subset.as_deref().unwrap_or_default();
            within(&queries, lists, job.k).map_err(|e| match e {
                tilemaxsim::Error::Argument(m) => ApiError::BadRequest(m),
                e => ApiError::Engine(e.to_string()),
            })
        })
        .collect();
    let compute = started.elapsed();
    if compute > SLOW_BATCH {
        eprintln!(
            "tilemaxsim serve: a batch of {n} queries took {:.0} ms",
            compute.as_secs_f64() * 1e3
        );
    }
    metrics.engine_queries.set(0);
    metrics.compute_seconds.observe(compute.as_secs_f64());
    metrics.batch_queries.observe(n as f64);
    metrics
        .batch_requests
        .observe((plain.len() + within_jobs.len()) as f64);
    let answer = |job: &Job, hits: Vec<Vec<Hit>>| {
        let queue_wait = started.saturating_duration_since(job.enqueued);
        metrics.queue_seconds.observe(queue_wait.as_secs_f64());
        metrics.queries.inc_by(job.queries.len() as u64);
        Answer {
            hits,
            queue: queue_wait,
            compute,
            batch_queries: n,
            loaded: loaded.cloned(),
        }
    };
    let mut replies: Vec<(Job, Result<Answer, ApiError>)> = Vec::new();
    match result {
        Ok(hits) => {
            let mut hits = hits.into_iter();
            for job in plain {
                let mine: Vec<_> = hits
                    .by_ref()
                    .take(job.queries.len())
                    .map(|mut h| {
                        h.truncate(job.k);
                        h
                    })
                    .collect();
                let a = answer(&job, mine);
                replies.push((job, Ok(a)));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            eprintln!("error: a batch of {n} queries failed: {msg}");
            replies.extend(
                plain
                    .into_iter()
                    .map(|job| (job, Err(ApiError::Engine(msg.clone())))),
            );
        }
    }
    for (job, r) in within_jobs.into_iter().zip(within_results) {
        let r = r.map(|hits| answer(&job, hits));
        replies.push((job, r));
    }
    for (job, r) in replies {
        if job.reply.send(r).is_err() {
            metrics.dropped_scoring.inc();
        }
    }
}

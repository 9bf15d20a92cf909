//! `tilemaxsim serve`: a corpus (or an index directory, `--index`, taking its updates live)
//! loaded once and searched over HTTP, with continuous batching.
//! Three parts, as text-embeddings-inference has them: the router (`router.rs`: HTTP, checks,
//! deadlines), the queue that forms batches whenever the engine is free (`queue.rs`), and the
//! engine worker on its own thread (`engine.rs`; an index served live: `live.rs`). `api.rs` is the wire format, `metrics.rs`
//! the Prometheus metrics, `error.rs` the statuses, `writes.rs` an index's add and delete. SIGTERM or Ctrl-C: stop accepting, finish
//! the requests in flight, exit 0.

mod api;
mod engine;
mod error;
mod live;
mod metrics;
mod queue;
mod ready;
mod router;
mod writes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::args::CorpusArgs;
use metrics::Metrics;
use queue::{BatchLimits, Queue};
use router::{AppState, RequestLimits};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Serve an index directory (`tilemaxsim index build`) instead of a --corpus: IVF search (or
    /// --exhaustive) with its exact stage. Documents are added and deleted while it serves,
    /// through `POST /v1/index/add` and `/v1/index/delete` or by other processes (`tilemaxsim
    /// index add` / `delete`); each update is taken before the next batch.
    #[arg(long, conflicts_with_all = ["corpus", "rerank", "doc_ids", "residency", "chunk_mb"])]
    index: Option<PathBuf>,
    /// With --index: IVF probes per query token. [default: the index's]
    #[arg(long, requires = "index", conflicts_with = "exhaustive")]
    nprobe: Option<usize>,
    /// With --index: candidates rescored on their codes. [default: the index's]
    #[arg(long, requires = "index", conflicts_with = "exhaustive")]
    ndocs: Option<usize>,
    /// With --index: score every document on its codes instead of probing the IVF.
    #[arg(long, requires = "index")]
    exhaustive: bool,
    /// Address to listen on (port 0: any free port; the address is printed on stderr).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Most queries scored in one batch (a request may not hold more).
    #[arg(long, default_value_t = 32)]
    max_batch_queries: usize,
    /// Most query tokens scored in one batch (a request may not hold more).
    #[arg(long, default_value_t = 16384)]
    max_batch_tokens: usize,
    /// Requests that may wait for the engine; beyond it requests are refused with 429.
    #[arg(long, default_value_t = 1024)]
    max_queue: usize,
    /// Wait up to this long after the first waiting request for a batch to fill (default: no
    /// timer; the engine takes what waits whenever it is free).
    #[arg(long)]
    max_queue_delay_us: Option<u64>,
    /// Answer 504 when a request has had no answer for this long (queued plus scoring).
    #[arg(long, default_value_t = 30_000)]
    request_timeout_ms: u64,
    /// Largest request body in MiB (413 beyond it).
    #[arg(long, default_value_t = 64)]
    max_body_mb: usize,
    /// Largest k a request may ask for.
    #[arg(long, default_value_t = 1000)]
    max_k: usize,
}

pub fn run(a: ServeArgs) -> Result<()> {
    if a.max_batch_queries == 0 || a.max_batch_tokens == 0 || a.max_queue == 0 {
        bail!("--max-batch-queries, --max-batch-tokens and --max-queue must be at least 1");
    }
    if a.request_timeout_ms == 0 || a.max_body_mb == 0 || a.max_k == 0 {
        bail!("--request-timeout-ms, --max-body-mb and --max-k must be at least 1");
    }
    // Refuse what cannot be served before binding the port: bad device flags, a missing GPU,
    // a file that is not an exact corpus, or values that fail the check. Preparing the search
    // (the upload to GPUs) happens after, while /healthz already answers.
    let (device, _) = a.corpus.search_setup()?;
    if let tilemaxsim::Device::Cuda(n) = device {
        tilemaxsim::cuda::check_available(n)?;
    }
    let source = match &a.index {
        Some(dir) => {
            if !dir.join(tilemaxsim::index::MANIFEST).is_file() {
                bail!("{}: no index here (no index.json)", dir.display());
            }
            Source::Index(dir.clone())
        }
        None => {
            if a.nprobe.is_some() || a.ndocs.is_some() || a.exhaustive {
                bail!("--nprobe, --ndocs and --exhaustive need --index");
            }
            let corpus = a.corpus.open()?;
            if let tilemaxsim::Device::Cuda(_) = device {
                // A GPU that cannot score this codec: refused now, not after listening.
                tilemaxsim::scorer_for(device, corpus.corpus.codec_kind())?;
            }
            Source::Corpus(corpus)
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(a, source))
}

/// What is served: a corpus opened before listening, or an index directory.
enum Source {
    Corpus(crate::args::Opened),
    Index(PathBuf),
}

async fn serve(a: ServeArgs, source: Source) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(a.addr)
        .await
        .with_context(|| format!("cannot listen on {}", a.addr))?;
    let addr = listener.local_addr()?;
    eprintln!("tilemaxsim serve: listening on http://{addr}");

    let metrics = Arc::new(Metrics::new());
    let queue = Arc::new(Queue::new(
        BatchLimits {
            max_queue: a.max_queue,
            max_queries: a.max_batch_queries,
            max_tokens: a.max_batch_tokens,
            max_delay: a.max_queue_delay_us.map(Duration::from_micros),
        },
        Arc::clone(&metrics),
    ));
    let ready = Arc::new(ready::Ready::default());
    let index_dir = match &source {
        Source::Index(dir) => Some(dir.clone()),
        Source::Corpus(_) => None,
    };

    // The engine loads the corpus while the server already answers /healthz and /readyz.
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<()>();
    let engine = {
        let (queue, metrics, ready) =
            (Arc::clone(&queue), Arc::clone(&metrics), Arc::clone(&ready));
        let args = a.corpus.clone();
        let how = tilemaxsim::index::IndexSearch {
            exhaustive: a.exhaustive,
            nprobe: a.nprobe,
            ndocs: a.ndocs,
            rerank_k: a.corpus.rerank_k,
        };
        std::thread::Builder::new()
            .name("tilemaxsim-engine".into())
            .spawn(move || {
                let r = match source {
                    Source::Corpus(corpus) => engine::run(&args, corpus, &queue, &metrics, &ready),
                    Source::Index(dir) => args.search_setup().and_then(|(device, options)| {
                        let setup = live::IndexSetup {
                            device,
                            how,
                            options,
                        };
                        live::run_index(&dir, &setup, &queue, &metrics, &ready)
                    }),
                };
                if r.is_err() {
                    let _ = failed_tx.send(());
                }
                r
            })
            .context("cannot start the engine thread")?
    };

    let state = AppState {
        writer: index_dir.map(|d| Arc::new(writes::Writer::new(d))),
        queue: Arc::clone(&queue),
        metrics,
        ready,
        limits: RequestLimits {
            max_k: a.max_k,
            max_queries: a.max_batch_queries,
            max_tokens: a.max_batch_tokens,
            max_body_bytes: a.max_body_mb << 20,
            timeout: Duration::from_millis(a.request_timeout_ms),
        },
    };
    let shutdown = async move {
        tokio::select! {
            () = terminate() => eprintln!("tilemaxsim serve: shutting down; finishing the requests in flight"),
            // The engine failed (its error is reported below) or stopped.
            _ = failed_rx => {}
        }
    };
    axum::serve(listener, router::router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .context("the server failed")?;
    // Every connection has closed, so nothing waits; let the engine finish and stop.
    queue.close();
    match engine.join() {
        Ok(r) => r.context("the engine failed")?,
        Err(_) => bail!("the engine thread panicked"),
    }
    eprintln!("tilemaxsim serve: stopped");
    Ok(())
}

/// SIGTERM or Ctrl-C (SIGINT).
async fn terminate() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

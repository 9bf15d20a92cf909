//! The engine of an index served live (`serve --index`). The build's searcher is prepared once
//! and kept (on a GPU: its codes, IVF and exact tokens, uploaded once). The updates appended to
//! the index's log (the server's own `POST /v1/index/add` / `delete`, or other processes'
//! `tilemaxsim index add` / `delete`) are taken on a thread of their own: when the log has
//! grown (the engine looks before each batch, and every 50 ms while idle), that thread reads the new records into a second opening of the index and prepares
//! the searcher of its added documents, while batches go on being served by the current one;
//! the prepared one then replaces it before the next batch. The engine never stops serving
//! for an update (on a GPU the new searcher's uploads share the device with the searches), and
//! a write is answered once the searcher that serves it is in place (`Ready::applied`).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use tilemaxsim::index::{BaseSearcher, Index, IndexSearch};
use tilemaxsim::{Device, SearchOptions, Searcher};

use super::engine::{Loaded, Names, Ready, device_names, serve_batch};
use super::metrics::Metrics;
use super::queue::Queue;

/// How often an idle engine looks at the log for other processes' updates.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// What an index search is prepared with (`serve --index`).
pub struct IndexSetup {
    pub device: Device,
    pub how: IndexSearch,
    pub options: SearchOptions<'static>,
}

/// Serve the index in `dir` until the queue is closed and empty, taking its updates as they
/// come (see the module's text).
pub fn run_index(
    dir: &Path,
    setup: &IndexSetup,
    queue: &Queue,
    metrics: &Metrics,
    ready: &Ready,
) -> Result<()> {
    let log = dir.join(tilemaxsim::index::LOG);
    let log_len = || std::fs::metadata(&log).map_or(0, |m| m.len());
    // The log's length is taken before each read of it, so what was read covers at least
    // that much: an update appended in between is taken at the next look, never missed.
    let mut seen = log_len();
    let build = Index::open(dir).context("cannot open the index")?;
    let (base, notice) = build.base_searcher(setup.device, &setup.how, &setup.options)?;
    if let Some(n) = notice {
        eprintln!("notice: {n}");
    }
    let names = Names {
        ids: build.codes().doc_ids().map(Arc::from),
        first: build.codes().len(),
        added: Vec::new(),
    };
    let publish = |live: &Live<'_>, applied: u64| {
        ready.set(live.loaded(setup, &names));
        ready.applied.send_replace(applied);
        metrics.ready.set(1);
    };
    let mut serving = Live::open(dir, &base, setup)?;
    publish(&serving, seen);
    // The opening the updates are read into next; the one that served before, once replaced.
    let mut spare: Option<Live<'_>> = None;
    std::thread::scope(|s| -> Result<()> {
        let mut preparing = None;
        loop {
            if let Some((applied, handle)) = preparing.take_if(
                |(_, h): &mut (u64, std::thread::ScopedJoinHandle<'_, Result<Live<'_>>>)| {
                    h.is_finished()
                },
            ) {
                let next = handle
                    .join()
                    .map_err(|_| anyhow!("the thread taking the index's updates panicked"))?
                    .context("cannot take the index's new updates")?;
                spare = Some(std::mem::replace(&mut serving, next));
                publish(&serving, applied);
            }
            if preparing.is_none() && log_len() != seen {
                seen = log_len();
                let (old, base) = (spare.take(), &base);
                let handle = s.spawn(move || {
                    let next = match old {
                        Some(live) => live.update(base, setup),
                        None => Live::open(dir, base, setup),
                    };
                    // The engine may wait for requests: it puts the new searcher in place now.
                    queue.wake();
                    next
                });
                preparing = Some((seen, handle));
            }
            let Some(batch) = queue.next_batch_idle(Some(LOOK_EVERY)) else {
                return Ok(());
            };
            if !batch.is_empty() {
                serve_batch(serving.searcher.as_ref(), batch, metrics);
            }
        }
    })
}

/// An opening of the index, at one state of its updates, and the searcher over it (around the
/// build's searcher).
struct Live<'b> {
    /// Borrows `index` (declared first: dropped before it).
    searcher: Box<dyn Searcher + 'b>,
    index: Box<Index>,
}

impl<'b> Live<'b> {
    fn open(dir: &Path, base: &'b BaseSearcher<'_>, setup: &'b IndexSetup) -> Result<Self> {
        let index = Index::open(dir).context("cannot open the index")?;
        Self::with(Box::new(index), base, setup)
    }

    /// The same opening with the updates appended since it last read the log.
    fn update(self, base: &'b BaseSearcher<'_>, setup: &'b IndexSetup) -> Result<Self> {
        let Live {
            searcher,
            mut index,
        } = self;
        drop(searcher);
        index.refresh()?;
        Self::with(index, base, setup)
    }

    fn with(index: Box<Index>, base: &'b BaseSearcher<'_>, setup: &'b IndexSetup) -> Result<Self> {
        // SAFETY: the searcher borrows the index at its heap address, which the box keeps
        // fixed while the box moves; the index is neither moved out of the box nor changed
        // while the searcher lives (`update` drops it first), and the searcher is dropped
        // before the box (field order), and never handed out for longer than `&self`.
        let at: &'b Index = unsafe { &*(index.as_ref() as *const Index) };
        let searcher = at.live_searcher(base, setup.device, &setup.how, &setup.options)?;
        Ok(Live { searcher, index })
    }

    /// What `/v1/info` reports and requests are checked against, for this state.
    fn loaded(&self, setup: &IndexSetup, build: &Names) -> Loaded {
        let index = &self.index;
        let live = index.len() - index.deleted();
        let loaded = Loaded {
            dim: index.codes().dim(),
            documents: live,
            tokens: index.codes().num_tokens() + index.added().map_or(0, |a| a.0.num_tokens()),
            dtype: format!("residual codes, {}", index.codes().codec().name()),
            engine: self.searcher.name(),
            devices: device_names(setup.device, &setup.options),
            names: Names {
                ids: build.ids.clone(),
                first: build.first,
                added: (build.first..index.len())
                    .map(|j| index.doc_id(j))
                    .collect(),
            },
        };
        eprintln!(
            "tilemaxsim serve: ready: index {} ({live} live documents, d = {}) on {}",
            index.dir().display(),
            loaded.dim,
            loaded.engine
        );
        loaded
    }
}

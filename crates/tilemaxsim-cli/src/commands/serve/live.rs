//! The engine of an index served live (`serve --index`). Each generation's build searcher is
//! prepared once and kept (on a GPU: its codes, IVF and exact tokens, uploaded once). The
//! updates appended to the index's log (the server's own `POST /v1/index/add` / `delete`, or
//! other processes' `tilemaxsim index add` / `delete`) are taken on a thread of their own: when
//! the directory's state has moved (the engine looks before each batch, and every 50 ms while
//! idle), that thread reads the new records into a second opening of the index and prepares
//! the searcher of its added documents, while batches go on being served by the current one;
//! the prepared one then replaces it before the next batch. A compaction in place (the
//! server's own `POST /v1/index/compact`, or `tilemaxsim index compact --in-place`) makes a
//! new generation: its build searcher is prepared the same way, beside the one serving, and
//! replaces it (where both do not fit, the old one is let go first and searches wait for the
//! new one). The engine never stops serving for an update (on a GPU the new searcher's uploads
//! share the device with the searches), and a write is answered once the searcher that serves
//! it is in place (`Ready::applied`).

use std::mem::ManuallyDrop;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use tilemaxsim::index::{BaseSearcher, Index, IndexSearch, Stamp, StampWatch};
use tilemaxsim::{Device, Matrix, SearchOptions, Searcher};

use super::engine::{device_names, in_background, serve_batch};
use super::metrics::Metrics;
use super::queue::Queue;
use super::ready::{Loaded, Names, Ready};

/// How often an idle engine looks at the log for other processes' updates.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// What an index search is prepared with (`serve --index`).
pub struct IndexSetup {
    pub device: Device,
    pub how: IndexSearch,
    pub options: SearchOptions<'static>,
}

/// Serve the index in `dir` until the queue is closed and empty, taking its updates and new
/// generations as they come (see the module's text).
pub fn run_index(
    dir: &Path,
    setup: &IndexSetup,
    queue: &Queue,
    metrics: &Metrics,
    ready: &Ready,
) -> Result<()> {
    // The threads letting old generations go, joined before this returns (they hold openings
    // made with `setup`).
    let mut retiring = Retiring(Vec::new());
    let (first, mut opening) = Generation::open(dir, setup)?;
    let mut generation = Held::new(first);
    loop {
        let (next, lives) =
            serve_generation(dir, generation.get(), opening, setup, queue, metrics, ready)?;
        // SAFETY: the openings borrow `generation`'s build searcher (and `setup`); `Retired`
        // drops them before the generation, whose memory stays where it is (held through a raw
        // pointer), and its thread is joined before `setup` goes.
        let lives: Vec<Live<'static>> = unsafe { std::mem::transmute(lives) };
        match next {
            Next::Closed => return Ok(()),
            Next::Prepared(next, next_opening) => {
                // Let the old generation go off the engine's thread: its GPU memory (and its
                // openings' GPU contexts) and its files' pages (removed from the directory:
                // their last mapping frees them) take a while to free, and searches wait for
                // nothing meanwhile.
                let old = Retired {
                    lives,
                    generation: std::mem::replace(&mut generation, Held::new(next)),
                };
                retiring.0.retain(|h| !h.is_finished());
                retiring.let_go(old);
                opening = next_opening;
            }
            Next::Reopen => {
                drop(lives);
                drop(generation);
                // The new generation is opened alone (it did not fit beside the old one): every
                // old one's memory is freed first.
                retiring.join();
                let (first, next_opening) = Generation::open(dir, setup)?;
                (generation, opening) = (Held::new(first), next_opening);
            }
        }
    }
}

/// A generation on the heap, held through a raw pointer: the openings that borrow its build
/// searcher may then be let go with it (`Retired`), where a `Box`, asserted unique whenever it
/// moves, could not be moved while they borrow it.
struct Held(NonNull<Generation>);

// SAFETY: it owns a `Generation` (Send, asserted below); nothing else reaches the pointer.
unsafe impl Send for Held {}

const _: () = {
    const fn send<T: Send>() {}
    send::<Generation>()
};

impl Held {
    fn new(generation: Box<Generation>) -> Held {
        Held(NonNull::from(Box::leak(generation)))
    }

    fn get(&self) -> &Generation {
        // SAFETY: valid until `drop`.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, freed once, here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A generation let go, with the openings that borrowed it: they drop first (fields drop in
/// order), then the generation.
#[allow(dead_code)] // held only to be dropped, in this order
struct Retired {
    lives: Vec<Live<'static>>,
    generation: Held,
}

/// Threads letting generations go, joined when dropped.
struct Retiring(Vec<std::thread::JoinHandle<()>>);

impl Retiring {
    /// Let `old` go on a thread of its own (where no thread can be made, the failed `spawn`
    /// drops it here).
    fn let_go(&mut self, old: Retired) {
        let spawned = std::thread::Builder::new()
            .name("tilemaxsim-retiring".into())
            .spawn(move || drop(old));
        match spawned {
            Ok(h) => self.0.push(h),
            Err(e) => eprintln!("notice: cannot start a thread to let a generation go ({e})"),
        }
    }

    fn join(&mut self) {
        for h in self.0.drain(..) {
            if h.join().is_err() {
                eprintln!("notice: letting an old generation go panicked");
            }
        }
    }
}

impl Drop for Retiring {
    fn drop(&mut self) {
        self.join();
    }
}

/// What ends the serving of one generation.
enum Next {
    /// The queue was closed.
    Closed,
    /// A newer generation, prepared while this one served, with its first opening; and when
    /// the engine stopped serving the old one.
    Prepared(Box<Generation>, Opening),
    /// A newer generation that could not be prepared beside this one: open it once this one
    /// is let go.
    Reopen,
}

/// An opening of a generation's directory made beside its build searcher (off the engine's
/// thread: reading an index's files takes a while), for its first [`Live`]; and the
/// directory's state read before it was made.
struct Opening {
    index: Box<Index>,
    seen: Stamp,
    /// When the engine stopped serving the generation before (for the log).
    switch: Option<std::time::Instant>,
}

/// One generation of the index (its build's, or a compaction's): its build searcher, with the
/// opening it borrows, and the names of its build's documents.
struct Generation {
    base: Borrowing<BaseSearcher<'static>>,
    names: Names,
}

/// An opening of the index on the heap, held through a raw pointer, and a value that borrows
/// it: the value is dropped first, then the opening. (A reference into a `Box` is invalidated,
/// by Rust's aliasing rules, when the `Box` moves; a raw pointer is not.)
struct Borrowing<V> {
    value: ManuallyDrop<V>,
    index: NonNull<Index>,
}

// SAFETY: it owns an `Index` (Send) and a `V`; nothing else reaches the pointer.
unsafe impl<V: Send> Send for Borrowing<V> {}

impl<V> Borrowing<V> {
    /// The value `make` makes of the opening, which it may borrow for any lifetime `'a` the
    /// value does not outlive: the caller's `V` names it.
    fn new<'a, E>(
        index: Box<Index>,
        make: impl FnOnce(&'a Index) -> Result<V, E>,
    ) -> Result<Self, E>
    where
        V: 'a,
    {
        let index = NonNull::from(Box::leak(index));
        // SAFETY: the opening lives, unchanged, until this struct drops it after the value
        // (the only borrower); on an error it is freed here, `make`'s borrows gone with it.
        match make(unsafe { index.as_ref() }) {
            Ok(value) => Ok(Borrowing {
                value: ManuallyDrop::new(value),
                index,
            }),
            Err(e) => {
                drop(unsafe { Box::from_raw(index.as_ptr()) });
                Err(e)
            }
        }
    }

    fn index(&self) -> &Index {
        // SAFETY: valid until `drop` (see `new`).
        unsafe { self.index.as_ref() }
    }

    fn value(&self) -> &V {
        &self.value
    }

    /// The opening back, once the value is dropped.
    fn into_index(self) -> Box<Index> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the value, the only borrower, goes first; `Drop` does not run for `this`.
        unsafe {
            ManuallyDrop::drop(&mut this.value);
            Box::from_raw(this.index.as_ptr())
        }
    }
}

impl<V> Drop for Borrowing<V> {
    fn drop(&mut self) {
        // SAFETY: the value, the only borrower, goes first, then the opening (see `new`).
        unsafe {
            ManuallyDrop::drop(&mut self.value);
            drop(Box::from_raw(self.index.as_ptr()));
        }
    }
}

impl Generation {
    fn open(dir: &Path, setup: &IndexSetup) -> Result<(Box<Self>, Opening)> {
        let t = std::time::Instant::now();
        let index = Box::new(Index::open(dir).context("cannot open the index")?);
        let opened = t.elapsed().as_secs_f64();
        let base = Borrowing::new(index, |at: &'static Index| {
            let (base, notice) = at.base_searcher(setup.device, &setup.how, &setup.options)?;
            if let Some(n) = notice {
                eprintln!("notice: {n}");
            }
            anyhow::Ok(base)
        })?;
        let index = base.index();
        let prepared = t.elapsed().as_secs_f64();
        // One search before it serves, so what a searcher makes at its first search (on a GPU:
        // uploads, buffers) is not made while requests wait for it.
        let zeros = vec![0f32; index.codes().dim()];
        let query = Matrix::new(&zeros[..], zeros.len())?;
        base.value().searcher().search(&[query], 1)?;
        let names = Names {
            ids: index.codes().doc_ids().map(Arc::from),
            first: index.codes().len(),
            added: Vec::new(),
        };
        let warmed = t.elapsed().as_secs_f64();
        let seen = Stamp::on_disk(dir)?;
        let opening = Opening {
            index: Box::new(Index::open(dir).context("cannot open the index")?),
            seen,
            switch: None,
        };
        eprintln!(
            "tilemaxsim serve: generation {} prepared in {:.2} s (opened {opened:.2} s, searcher \
             {:.2} s, first search {:.2} s, second opening {:.2} s)",
            index.generation(),
            t.elapsed().as_secs_f64(),
            prepared - opened,
            warmed - prepared,
            t.elapsed().as_secs_f64() - warmed
        );
        Ok((Box::new(Generation { base, names }), opening))
    }
}

/// Serve `generation` until the queue closes or a newer generation replaces it; what ended it,
/// and the openings that served it (for the caller to let go).
fn serve_generation<'g>(
    dir: &Path,
    generation: &'g Generation,
    opening: Opening,
    setup: &'g IndexSetup,
    queue: &Queue,
    metrics: &Metrics,
    ready: &Ready,
) -> Result<(Next, Vec<Live<'g>>)> {
    let (base, names) = (generation.base.value(), &generation.names);
    let publish = |live: &Live<'_>| -> Arc<Loaded> {
        let loaded = ready.set(live.loaded(setup, names));
        ready.applied.send_replace(live.index().stamp());
        metrics.ready.set(1);
        loaded
    };
    // The directory's state is read before each opening, so what an opening read covers at
    // least that much: an update made in between is taken at the next look, never missed.
    let mut seen = opening.seen;
    let made = std::time::Instant::now();
    let Some(mut serving) = Live::with(opening.index, base, setup)? else {
        return Ok((Next::Reopen, Vec::new()));
    };
    let made = made.elapsed().as_secs_f64() * 1e3;
    let mut loaded = publish(&serving);
    if let Some(t) = opening.switch {
        eprintln!(
            "tilemaxsim serve: generation {} serves; searches waited {:.1} ms for the switch \
             (its live searcher made in {made:.1} ms)",
            generation.base.index().generation(),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    // The opening the updates are read into next; the one that served before, once replaced.
    let mut spare: Option<Live<'_>> = None;
    let mut watch = StampWatch::new(dir);
    let next = std::thread::scope(|s| -> Result<Next> {
        let mut preparing = None;
        let mut next_generation = None;
        loop {
            if let Some(handle) = preparing.take_if(
                |h: &mut std::thread::ScopedJoinHandle<'_, Result<Option<Live<'_>>>>| {
                    h.is_finished()
                },
            ) {
                let next = handle
                    .join()
                    .map_err(|_| anyhow!("the thread taking the index's updates panicked"))?
                    .context("cannot take the index's new updates")?;
                // `None`: the directory moved to a newer generation meanwhile.
                if let Some(next) = next {
                    spare = Some(std::mem::replace(&mut serving, next));
                    loaded = publish(&serving);
                }
            }
            if let Some(handle) = next_generation.take_if(
                |h: &mut std::thread::ScopedJoinHandle<'_, Result<(Box<Generation>, Opening)>>| {
                    h.is_finished()
                },
            ) {
                return Ok(match handle.join() {
                    Ok(Ok((next, mut opening))) => {
                        opening.switch = Some(std::time::Instant::now());
                        Next::Prepared(next, opening)
                    }
                    Ok(Err(e)) => {
                        eprintln!(
                            "notice: the index's new generation could not be prepared beside \
                             the one serving ({e:#}); searches wait while it is opened alone"
                        );
                        Next::Reopen
                    }
                    Err(_) => return Err(anyhow!("the thread opening the index panicked")),
                });
            }
            if preparing.is_none() && next_generation.is_none() {
                let now = watch.look()?;
                if now.generation != generation.base.index().generation() {
                    next_generation = Some(s.spawn(move || {
                        let next = in_background(|| Generation::open(dir, setup));
                        queue.wake();
                        next
                    }));
                } else if now != seen {
                    seen = now;
                    let old = spare.take();
                    preparing = Some(s.spawn(move || {
                        let next = in_background(|| match old {
                            Some(live) => live.update(base, setup),
                            None => Live::open(dir, base, setup),
                        });
                        // The engine may wait for requests: it puts the new searcher in place now.
                        queue.wake();
                        next
                    }));
                }
            }
            let Some(batch) = queue.next_batch_idle(Some(LOOK_EVERY)) else {
                return Ok(Next::Closed);
            };
            if !batch.is_empty() {
                let index = serving.index();
                let within = |q: &[Matrix<'_>], lists: &[Vec<usize>], k| {
                    index.search_within(q, lists, k, &setup.how, setup.device)
                };
                serve_batch(
                    serving.searcher.value().as_ref(),
                    Some(&within),
                    batch,
                    metrics,
                    Some(&loaded),
                );
            }
        }
    })?;
    Ok((next, [Some(serving), spare].into_iter().flatten().collect()))
}

/// An opening of the index, at one state of its updates, and the searcher over it (around the
/// build's searcher).
struct Live<'b> {
    searcher: Borrowing<Box<dyn Searcher + 'b>>,
}

impl<'b> Live<'b> {
    /// An opening of `dir` around `base`; `None` when the directory holds a newer generation
    /// than `base`'s.
    fn open(dir: &Path, base: &'b BaseSearcher<'_>, setup: &'b IndexSetup) -> Result<Option<Self>> {
        let index = Index::open(dir).context("cannot open the index")?;
        Self::with(Box::new(index), base, setup)
    }

    /// The same opening with the updates appended since it last read the log (`None`, as
    /// for [`Live::open`]).
    fn update(self, base: &'b BaseSearcher<'_>, setup: &'b IndexSetup) -> Result<Option<Self>> {
        let mut index = self.searcher.into_index();
        index.refresh()?;
        Self::with(index, base, setup)
    }

    fn with(
        index: Box<Index>,
        base: &'b BaseSearcher<'_>,
        setup: &'b IndexSetup,
    ) -> Result<Option<Self>> {
        if index.generation() != base.generation() {
            return Ok(None);
        }
        let searcher = Borrowing::new(index, |at: &'b Index| {
            at.live_searcher(base, setup.device, &setup.how, &setup.options)
        })?;
        Ok(Some(Live { searcher }))
    }

    fn index(&self) -> &Index {
        self.searcher.index()
    }

    /// What `/v1/info` reports and requests are checked against, for this state.
    fn loaded(&self, setup: &IndexSetup, build: &Names) -> Loaded {
        let index = self.index();
        let live = index.len() - index.deleted();
        let loaded = Loaded {
            dim: index.codes().dim(),
            documents: live,
            tokens: index.codes().num_tokens() + index.added().map_or(0, |a| a.0.num_tokens()),
            dtype: format!("residual codes, {}", index.codes().codec().name()),
            engine: self.searcher.value().name(),
            devices: device_names(setup.device, &setup.options),
            names: Names {
                ids: build.ids.clone(),
                first: build.first,
                added: (build.first..index.len())
                    .map(|j| index.doc_id(j))
                    .collect(),
            },
            generation: Some(index.generation()),
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

//! `_native.Index`: an index directory (`tilemaxsim::index`: residual codes, their IVF, the
//! exact tokens) opened, or built from a `Corpus`, searched by IVF or exhaustively, and
//! updated live (documents added and deleted, here or by other processes: `refresh`). The
//! searcher of the last settings is kept for the next search with the same ones, and dropped
//! by an update.

use std::sync::Mutex;

use pyo3::prelude::*;
use tilemaxsim::codec::ResidualOptions;
use tilemaxsim::index::{BuildOptions, Defaults, IndexSearch, Probe, Source, Stamp, build};
use tilemaxsim::{CorpusKind, Device, Residency, SearchOptions, Searcher};

use crate::corpus::{Corpus, search_queries};
use crate::errors::to_py;

/// A searcher and the settings it was made for.
type Kept = Option<(
    (
        bool,
        Option<usize>,
        Option<usize>,
        Option<usize>,
        String,
        Residency,
    ),
    Box<dyn Searcher + 'static>,
)>;

/// The index and the searcher kept over it, behind one lock: an update drops the searcher
/// before it changes the index.
struct State {
    // Declared before the index, so dropped first: it borrows it.
    searcher: Kept,
    inner: Box<tilemaxsim::index::Index>,
    /// The directory's generation and log length when `inner` last read it (taken before the
    /// read).
    seen: Stamp,
}

/// The generation and update log length of the index in `dir` (a default for a directory
/// whose manifest cannot be read: the next refresh reads it again).
fn on_disk(dir: &std::path::Path) -> Stamp {
    Stamp::on_disk(dir).unwrap_or_default()
}

#[pyclass(frozen, module = "tilemaxsim._native")]
pub struct Index {
    state: Mutex<State>,
}

impl Index {
    fn of(inner: tilemaxsim::index::Index, seen: Stamp) -> Self {
        Index {
            state: Mutex::new(State {
                searcher: None,
                inner: Box::new(inner),
                seen,
            }),
        }
    }

    /// The state, locked (a poisoned lock only means a panic in another call; the state is
    /// intact: updates change it only through calls that return errors, not panics).
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Index {
    /// Open the index directory at `path` (its files checked, the codes memory-mapped).
    #[staticmethod]
    fn open(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let seen = on_disk(&path);
        let inner = py
            .detach(|| tilemaxsim::index::Index::open(&path))
            .map_err(to_py)?;
        Ok(Self::of(inner, seen))
    }

    /// Build an index of `corpus` (exact: compressed on `device`; or residual codes) in `path`
    /// (new or empty), keeping the exact tokens of an exact corpus unless `keep_exact` is off.
    #[staticmethod]
    #[pyo3(signature = (corpus, path, *, nbits=2, centroids=None, kmeans_iters=4, buckets="lloyd-max", seed=0, device="auto", keep_exact=true, nprobe=None, ndocs=None, rerank_k=None))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        py: Python<'_>,
        corpus: &Corpus,
        path: std::path::PathBuf,
        nbits: u32,
        centroids: Option<usize>,
        kmeans_iters: usize,
        buckets: &str,
        seed: u64,
        device: &str,
        keep_exact: bool,
        nprobe: Option<usize>,
        ndocs: Option<usize>,
        rerank_k: Option<usize>,
    ) -> PyResult<Self> {
        let device: Device = device.parse().map_err(to_py)?;
        let base = Defaults::default();
        let options = BuildOptions {
            residual: ResidualOptions {
                nbits,
                centroids,
                kmeans_iters,
                buckets: buckets.parse().map_err(to_py)?,
                ..Default::default()
            },
            seed,
            device,
            keep_exact,
            defaults: Defaults {
                probe: Probe {
                    nprobe: nprobe.unwrap_or(base.probe.nprobe),
                    ndocs: ndocs.unwrap_or(base.probe.ndocs),
                },
                rerank_k: rerank_k.unwrap_or(base.rerank_k),
            },
        };
        let source = match corpus.held().kind() {
            CorpusKind::Exact(c) => Source::Exact(c),
            CorpusKind::Compressed(c) => Source::Compressed(c),
        };
        let inner = py
            .detach(|| {
                build(source, None, &path, &options, &|_, _, _| {})?;
                tilemaxsim::index::Index::open(&path)
            })
            .map_err(to_py)?;
        Ok(Self::of(inner, Stamp::default()))
    }

    /// The `k` best documents of each query (`[A, Lq, d]` host memory, query i its first
    /// `query_lengths[i]` rows): flat scores and indices, `A × min(k, N)` each (NaN and -1
    /// past a query's hits: IVF may find fewer than k).
    #[pyo3(signature = (queries, query_lengths, k, *, nprobe=None, ndocs=None, rerank_k=None, exhaustive=false, device="cpu", residency="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        queries: &Bound<'_, PyAny>,
        query_lengths: Vec<usize>,
        k: usize,
        nprobe: Option<usize>,
        ndocs: Option<usize>,
        rerank_k: Option<usize>,
        exhaustive: bool,
        device: &str,
        residency: &str,
    ) -> PyResult<(Vec<f32>, Vec<i64>)> {
        let parsed: Device = device.parse().map_err(to_py)?;
        let residency: Residency = residency.parse().map_err(to_py)?;
        let key = (
            exhaustive,
            nprobe,
            ndocs,
            rerank_k,
            device.to_string(),
            residency,
        );
        let how = IndexSearch {
            exhaustive,
            nprobe,
            ndocs,
            rerank_k,
        };
        let n = self.state().inner.len();
        search_queries(py, queries, query_lengths, k, n, |matrices, kk| {
            let mut st = self.state();
            let st = &mut *st;
            if st.searcher.as_ref().is_none_or(|(k, _)| *k != key) {
                st.searcher = None;
                // SAFETY: the searcher borrows the index at its heap address, which the box
                // keeps fixed; the index is never moved out of the box, it is changed (by an
                // update) only after the searcher is dropped, under the same lock, and the
                // searcher is dropped before it (field order, and here before a new one).
                let index: &'static tilemaxsim::index::Index =
                    unsafe { &*(st.inner.as_ref() as *const tilemaxsim::index::Index) };
                let options = SearchOptions {
                    residency,
                    ..SearchOptions::default()
                };
                let (s, _) = index.searcher(parsed, &how, &options)?;
                st.searcher = Some((key, s));
            }
            match st.searcher.as_ref() {
                Some((_, s)) => s.search(matrices, kk),
                None => Ok(Vec::new()),
            }
        })
    }

    /// The best `k` of query i among `lists[i]` (document numbers): every listed document
    /// scored on its codes, then the best `rerank_k` exactly (`tilemaxsim::index::Index::
    /// search_within`); scores and numbers as `search`'s.
    #[pyo3(signature = (queries, query_lengths, k, lists, rerank_k=None, device="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn search_within(
        &self,
        py: Python<'_>,
        queries: &Bound<'_, PyAny>,
        query_lengths: Vec<usize>,
        k: usize,
        lists: Vec<Vec<usize>>,
        rerank_k: Option<usize>,
        device: &str,
    ) -> PyResult<(Vec<f32>, Vec<i64>)> {
        let parsed: Device = device.parse().map_err(to_py)?;
        let how = IndexSearch {
            rerank_k,
            ..Default::default()
        };
        let n = self.state().inner.len();
        search_queries(py, queries, query_lengths, k, n, |matrices, kk| {
            self.state()
                .inner
                .search_within(matrices, &lists, kk, &how, parsed)
        })
    }

    /// Add `corpus`'s documents (exact, unit-norm tokens): their numbers `(first, end)`, on
    /// disk when this returns.
    fn add(&self, py: Python<'_>, corpus: &Corpus) -> PyResult<(usize, usize)> {
        let CorpusKind::Exact(docs) = corpus.held().kind() else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "add: the documents must be exact tokens, not codes",
            ));
        };
        py.detach(|| {
            let mut st = self.state();
            st.searcher = None;
            st.inner.add(docs).map(|r| (r.start, r.end))
        })
        .map_err(to_py)
    }

    /// Read the updates other processes appended to the log since this one last read it:
    /// whether there were any (the kept searcher is then made again at the next search).
    fn refresh(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| {
            let mut st = self.state();
            let now = on_disk(st.inner.dir());
            if now == st.seen {
                return Ok(false);
            }
            st.searcher = None;
            st.inner.refresh()?;
            st.seen = now;
            Ok(true)
        })
        .map_err(to_py)
    }

    /// Delete documents by number; how many were newly deleted. On disk when this returns.
    fn delete(&self, py: Python<'_>, docs: Vec<usize>) -> PyResult<usize> {
        py.detach(|| {
            let mut st = self.state();
            st.searcher = None;
            st.inner.delete(&docs)
        })
        .map_err(to_py)
    }

    /// Write the live documents as a new index in `path` (new or empty): deleted ones left
    /// out, added ones merged into the build, numbered from 0 again under their ids, the codes
    /// copied. `(documents, removed, tokens)` of the new index.
    fn compact(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<(usize, usize, usize)> {
        py.detach(|| {
            let mut st = self.state();
            st.searcher = None;
            st.inner
                .compact(&path)
                .map(|r| (r.documents, r.removed, r.tokens))
        })
        .map_err(to_py)
    }

    /// Compact the index in place: its next generation (the live documents numbered from 0
    /// again under their ids, the codes copied), then opened. `(documents, removed, tokens)`.
    fn compact_in_place(&self, py: Python<'_>) -> PyResult<(usize, usize, usize)> {
        py.detach(|| {
            let mut st = self.state();
            st.searcher = None;
            let r = st.inner.compact_in_place()?;
            // The new generation's log was empty at the switch: anything since is for the
            // next refresh to read.
            st.seen = Stamp {
                generation: st.inner.generation(),
                log_bytes: 0,
            };
            Ok((r.documents, r.removed, r.tokens))
        })
        .map_err(to_py)
    }

    /// The generation opened: 0 for the build's, one more for each compaction in place.
    #[getter]
    fn generation(&self) -> u64 {
        self.state().inner.generation()
    }

    /// Documents deleted since the build.
    #[getter]
    fn deleted(&self) -> usize {
        self.state().inner.deleted()
    }

    /// The numbers of the deleted documents, ascending.
    #[getter]
    fn deleted_numbers(&self) -> Vec<usize> {
        let st = self.state();
        (0..st.inner.len())
            .filter(|&j| st.inner.is_deleted(j))
            .collect()
    }

    /// The id of every document number (the build's ids, or numbers; then the added ones').
    #[getter]
    fn all_ids(&self) -> Vec<String> {
        let st = self.state();
        (0..st.inner.len()).map(|j| st.inner.doc_id(j)).collect()
    }

    /// The ids of document numbers `start..end` (clamped to the numbers there are).
    fn ids(&self, start: usize, end: usize) -> Vec<String> {
        let st = self.state();
        let end = end.min(st.inner.len());
        (start.min(end)..end).map(|j| st.inner.doc_id(j)).collect()
    }

    /// Documents numbered: the build's and the added ones, deleted ones included.
    fn __len__(&self) -> usize {
        self.state().inner.len()
    }

    #[getter]
    fn dim(&self) -> usize {
        self.state().inner.codes().dim()
    }

    #[getter]
    fn num_tokens(&self) -> usize {
        self.state().inner.codes().num_tokens()
    }

    #[getter]
    fn doc_ids(&self) -> Option<Vec<String>> {
        self.state().inner.codes().doc_ids().map(<[String]>::to_vec)
    }

    #[getter]
    fn has_exact(&self) -> bool {
        self.state().inner.exact().is_some()
    }

    #[getter]
    fn path(&self) -> std::path::PathBuf {
        self.state().inner.dir().to_path_buf()
    }

    /// The search defaults recorded in the index: (nprobe, ndocs, rerank_k).
    #[getter]
    fn defaults(&self) -> (usize, usize, usize) {
        let d = self.state().inner.defaults();
        (d.probe.nprobe, d.probe.ndocs, d.rerank_k)
    }

    /// The name of the searcher of the last search (e.g. `IVF (nprobe 8, ...) ... reranked ...`).
    #[getter]
    fn searcher(&self) -> Option<String> {
        self.state().searcher.as_ref().map(|(_, s)| s.name())
    }
}

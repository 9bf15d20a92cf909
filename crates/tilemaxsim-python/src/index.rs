//! `_native.Index`: an index directory (`tilemaxsim::index`: residual codes, their IVF, the
//! exact tokens) opened, or built from a `Corpus`, and searched by IVF or exhaustively. The
//! searcher of the last settings is kept for the next search with the same ones.

use std::sync::Mutex;

use pyo3::prelude::*;
use tilemaxsim::codec::ResidualOptions;
use tilemaxsim::index::{BuildOptions, Defaults, IndexSearch, Probe, Source, build};
use tilemaxsim::{CorpusKind, Device, SearchOptions, Searcher};

use crate::corpus::{Corpus, search_queries};
use crate::errors::to_py;

/// A searcher and the settings it was made for.
type Kept = Option<(
    (bool, Option<usize>, Option<usize>, Option<usize>, String),
    Box<dyn Searcher + 'static>,
)>;

#[pyclass(frozen, module = "tilemaxsim._native")]
pub struct Index {
    // Declared before the index, so dropped first: it borrows it.
    searcher: Mutex<Kept>,
    inner: Box<tilemaxsim::index::Index>,
}

impl Index {
    fn of(inner: tilemaxsim::index::Index) -> Self {
        Index {
            searcher: Mutex::new(None),
            inner: Box::new(inner),
        }
    }
}

#[pymethods]
impl Index {
    /// Open the index directory at `path` (its files checked, the codes memory-mapped).
    #[staticmethod]
    fn open(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let inner = py
            .detach(|| tilemaxsim::index::Index::open(&path))
            .map_err(to_py)?;
        Ok(Self::of(inner))
    }

    /// Build an index of `corpus` (exact: compressed on `device`; or residual codes) in `path`
    /// (new or empty), keeping the exact tokens of an exact corpus unless `keep_exact` is off.
    #[staticmethod]
    #[pyo3(signature = (corpus, path, *, nbits=2, centroids=None, kmeans_iters=4, seed=0, device="auto", keep_exact=true, nprobe=None, ndocs=None, rerank_k=None))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        py: Python<'_>,
        corpus: &Corpus,
        path: std::path::PathBuf,
        nbits: u32,
        centroids: Option<usize>,
        kmeans_iters: usize,
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
        Ok(Self::of(inner))
    }

    /// The `k` best documents of each query (`[A, Lq, d]` host memory, query i its first
    /// `query_lengths[i]` rows): flat scores and indices, `A × min(k, N)` each (NaN and -1
    /// past a query's hits: IVF may find fewer than k).
    #[pyo3(signature = (queries, query_lengths, k, *, nprobe=None, ndocs=None, rerank_k=None, exhaustive=false, device="cpu"))]
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
    ) -> PyResult<(Vec<f32>, Vec<i64>)> {
        let parsed: Device = device.parse().map_err(to_py)?;
        let key = (exhaustive, nprobe, ndocs, rerank_k, device.to_string());
        let how = IndexSearch {
            exhaustive,
            nprobe,
            ndocs,
            rerank_k,
        };
        let n = self.inner.codes().len();
        search_queries(py, queries, query_lengths, k, n, |matrices, kk| {
            // A poisoned lock only means a panic in another search; the kept searcher is intact.
            let mut kept = self.searcher.lock().unwrap_or_else(|e| e.into_inner());
            if kept.as_ref().is_none_or(|(k, _)| *k != key) {
                *kept = None;
                // SAFETY: the searcher borrows the index at its heap address, which the box
                // keeps fixed; the index is never moved out of the box or changed, and the
                // searcher is dropped before it (field order, and here before a new one).
                let index: &'static tilemaxsim::index::Index =
                    unsafe { &*(self.inner.as_ref() as *const tilemaxsim::index::Index) };
                let (s, _) = index.searcher(parsed, &how, &SearchOptions::default())?;
                *kept = Some((key, s));
            }
            match kept.as_ref() {
                Some((_, s)) => s.search(matrices, kk),
                None => Ok(Vec::new()),
            }
        })
    }

    fn __len__(&self) -> usize {
        self.inner.codes().len()
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.codes().dim()
    }

    #[getter]
    fn num_tokens(&self) -> usize {
        self.inner.codes().num_tokens()
    }

    #[getter]
    fn doc_ids(&self) -> Option<Vec<String>> {
        self.inner.codes().doc_ids().map(<[String]>::to_vec)
    }

    #[getter]
    fn has_exact(&self) -> bool {
        self.inner.exact().is_some()
    }

    #[getter]
    fn path(&self) -> std::path::PathBuf {
        self.inner.dir().to_path_buf()
    }

    /// The search defaults recorded in the index: (nprobe, ndocs, rerank_k).
    #[getter]
    fn defaults(&self) -> (usize, usize, usize) {
        let d = self.inner.defaults();
        (d.probe.nprobe, d.probe.ndocs, d.rerank_k)
    }

    /// The name of the searcher of the last search (e.g. `IVF (nprobe 8, ...) ... reranked ...`).
    #[getter]
    fn searcher(&self) -> Option<String> {
        let kept = self.searcher.lock().unwrap_or_else(|e| e.into_inner());
        kept.as_ref().map(|(_, s)| s.name())
    }
}

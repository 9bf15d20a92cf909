//! `_native.Corpus`: a corpus file or in-memory corpus with the searcher of its device (CPU, one
//! GPU resident or streamed, or sharded over several), kept for many searches.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tilemaxsim::corpus::OpenOptions;
use tilemaxsim::{Device, Residency, SearchOptions, Searcher, searcher_for};

use crate::errors::to_py;
use crate::tensor::{Place, Tensor, matrices};

#[pyclass(frozen, module = "tilemaxsim._native")]
pub struct Corpus {
    // Declared before `corpus`, so dropped first: it borrows the boxed corpus.
    searcher: Mutex<Box<dyn Searcher + 'static>>,
    corpus: Box<tilemaxsim::Corpus>,
    device: String,
    notice: Option<String>,
}

impl Corpus {
    fn with_searcher(
        corpus: tilemaxsim::Corpus,
        device: &str,
        devices: Option<Vec<usize>>,
        residency: &str,
    ) -> PyResult<Self> {
        let device: Device = device.parse().map_err(to_py)?;
        let residency: Residency = residency.parse().map_err(to_py)?;
        let options = SearchOptions {
            devices: devices.unwrap_or_default(),
            residency,
            ..SearchOptions::default()
        };
        let corpus = Box::new(corpus);
        // SAFETY: the searcher borrows the corpus at its heap address, which the box keeps
        // fixed; the corpus is never moved out of the box or changed, and the searcher is
        // dropped before it (field order).
        let borrowed: &'static tilemaxsim::Corpus =
            unsafe { &*(corpus.as_ref() as *const tilemaxsim::Corpus) };
        let (searcher, notice) = searcher_for(device, borrowed, &options).map_err(to_py)?;
        Ok(Corpus {
            device: searcher.name(),
            searcher: Mutex::new(searcher),
            corpus,
            notice,
        })
    }
}

#[pymethods]
impl Corpus {
    /// Open a corpus file (memory-mapped) for search on `device`; `documents=(start, end)`
    /// opens only those documents (a shard), indexed from 0.
    #[staticmethod]
    #[pyo3(signature = (path, device="auto", *, devices=None, residency="auto", check_finite=true, documents=None))]
    fn load(
        py: Python<'_>,
        path: std::path::PathBuf,
        device: &str,
        devices: Option<Vec<usize>>,
        residency: &str,
        check_finite: bool,
        documents: Option<(usize, usize)>,
    ) -> PyResult<Self> {
        let mut options = OpenOptions::new().check_finite(check_finite);
        if let Some((start, end)) = documents {
            options = options.documents(start..end);
        }
        let corpus = py.detach(|| options.open(&path)).map_err(to_py)?;
        Self::with_searcher(corpus, device, devices, residency)
    }

    /// A corpus from host token rows `[T, d]` (float32/16/bf16) and `B + 1` offsets.
    #[staticmethod]
    #[pyo3(signature = (embeddings, offsets, doc_ids=None, device="auto", *, devices=None, residency="auto"))]
    fn from_arrays(
        embeddings: &Bound<'_, PyAny>,
        offsets: Vec<usize>,
        doc_ids: Option<Vec<String>>,
        device: &str,
        devices: Option<Vec<usize>>,
        residency: &str,
    ) -> PyResult<Self> {
        let t = Tensor::import(embeddings, "embeddings")?;
        t.expect_ndim(&[2], "embeddings as [T, d]")?;
        if t.place != Place::Cpu {
            return Err(PyValueError::new_err("embeddings: expected host memory"));
        }
        t.float()?;
        let (rows, dim) = (t.shape[0], t.shape[1]);
        if !t.rows_contiguous() {
            return Err(PyValueError::new_err("embeddings: rows must be contiguous"));
        }
        let owned = t.gather(&[(0, t.strides[0], rows)], dim)?;
        let mut corpus = tilemaxsim::Corpus::new(owned, dim, offsets).map_err(to_py)?;
        corpus.check_finite().map_err(to_py)?;
        if let Some(ids) = doc_ids {
            corpus = corpus.with_doc_ids(ids).map_err(to_py)?;
        }
        Self::with_searcher(corpus, device, devices, residency)
    }

    /// The `k` best documents of each query of `queries` (`[A, Lq, d]` host memory, query i its
    /// first `query_lengths[i]` rows): flat scores and indices, `A × min(k, N)` each.
    fn search(
        &self,
        py: Python<'_>,
        queries: &Bound<'_, PyAny>,
        query_lengths: Vec<usize>,
        k: usize,
    ) -> PyResult<(Vec<f32>, Vec<i64>)> {
        let q = Tensor::import(queries, "queries")?;
        q.expect_ndim(&[3], "queries as [A, Lq, d]")?;
        if q.place != Place::Cpu || !q.rows_contiguous() {
            return Err(PyValueError::new_err(
                "queries: expected host memory with contiguous rows",
            ));
        }
        q.float()?;
        if query_lengths.len() != q.shape[0]
            || query_lengths.iter().any(|&l| l == 0 || l > q.shape[1])
        {
            return Err(PyValueError::new_err(
                "query_lengths: one length per query, each 1 to Lq",
            ));
        }
        let dim = q.shape[2];
        let owned = q.host_queries(&query_lengths)?;
        let matrices = matrices(&owned, dim)?;
        if k == 0 {
            return Err(PyValueError::new_err("k must be at least 1"));
        }
        let kk = k.min(self.corpus.len());
        let hits = py
            .detach(|| {
                // A poisoned lock only means a panic in another search; the searcher is intact.
                let s = self.searcher.lock().unwrap_or_else(|e| e.into_inner());
                s.search(&matrices, kk)
            })
            .map_err(to_py)?;
        let mut scores = Vec::with_capacity(hits.len() * kk);
        let mut index = Vec::with_capacity(hits.len() * kk);
        for row in &hits {
            for h in row.iter().take(kk) {
                scores.push(h.score);
                index.push(h.doc as i64);
            }
            for _ in row.len()..kk {
                scores.push(f32::NAN);
                index.push(-1);
            }
        }
        Ok((scores, index))
    }

    /// Write the corpus to a safetensors file.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| self.corpus.save(&path)).map_err(to_py)
    }

    fn __len__(&self) -> usize {
        self.corpus.len()
    }

    #[getter]
    fn dim(&self) -> usize {
        self.corpus.dim()
    }

    #[getter]
    fn dtype(&self) -> String {
        self.corpus.dtype().to_string()
    }

    #[getter]
    fn num_tokens(&self) -> usize {
        self.corpus.num_tokens()
    }

    /// The `N + 1` document offsets into the token rows.
    #[getter]
    fn offsets(&self) -> Vec<usize> {
        self.corpus.offsets().to_vec()
    }

    #[getter]
    fn doc_ids(&self) -> Option<Vec<String>> {
        self.corpus.doc_ids().map(|d| d.to_vec())
    }

    /// The searcher in use, e.g. `cpu-avx512` or `cuda:0 resident`.
    #[getter]
    fn device(&self) -> String {
        self.device.clone()
    }

    /// Why `device="auto"` fell back to the CPU, if it did.
    #[getter]
    fn notice(&self) -> Option<String> {
        self.notice.clone()
    }
}

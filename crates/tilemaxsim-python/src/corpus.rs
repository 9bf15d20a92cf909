//! `_native.Corpus`: a corpus file or in-memory corpus with the searcher of its device (CPU, one
//! GPU resident or streamed, or sharded over several), kept for many searches. A compressed
//! corpus (residual/PLAID, PQ, int8, fp8) is held the same way, searched on its codes and
//! optionally reranked exactly against an exact corpus.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tilemaxsim::codec::{
    Codec, CodecSpec, CompressedCorpus, PqOptions, ResidualCodec, ResidualOptions,
};
use tilemaxsim::corpus::{CorpusKind, OpenOptions};
use tilemaxsim::{AnyCorpus, Device, Rerank, Residency, SearchOptions, Searcher, searcher_for};

use crate::errors::to_py;
use crate::tensor::{Place, Tensor, matrices};

/// The rerank depth k' when neither the call nor the file gives one.
const DEFAULT_RERANK_K: usize = 100;

#[pyclass(frozen, module = "tilemaxsim._native")]
pub struct Corpus {
    // Declared before the corpora, so dropped first: it borrows them.
    searcher: Mutex<Box<dyn Searcher + 'static>>,
    /// The documents: exact or codes.
    held: Box<dyn AnyCorpus>,
    /// Only kept alive: the exact second stage the searcher borrows.
    _rerank: Option<Box<tilemaxsim::Corpus>>,
    device: String,
    notice: Option<String>,
    /// The device asked for (a corpus compressed from this one is searched there too).
    asked: String,
}

/// Where and how to search.
struct Setup<'a> {
    device: &'a str,
    devices: Option<Vec<usize>>,
    residency: &'a str,
    rerank_k: usize,
}

impl Corpus {
    /// `held` (any codec) with the searcher of `setup`, reranked exactly against `rerank`
    /// when given: one path, `tilemaxsim::searcher_for`.
    fn new(
        held: Box<dyn AnyCorpus>,
        rerank: Option<tilemaxsim::Corpus>,
        setup: Setup<'_>,
    ) -> PyResult<Self> {
        let device: Device = setup.device.parse().map_err(to_py)?;
        let residency: Residency = setup.residency.parse().map_err(to_py)?;
        let rerank = rerank.map(Box::new);
        // SAFETY: the searcher borrows the corpora at their heap addresses, which the boxes
        // keep fixed; they are never moved out of the boxes or changed, and the searcher is
        // dropped before them (field order).
        let corpus: &'static dyn AnyCorpus = unsafe { &*(held.as_ref() as *const dyn AnyCorpus) };
        let exact: Option<&'static tilemaxsim::Corpus> = rerank
            .as_ref()
            .map(|e| unsafe { &*(e.as_ref() as *const tilemaxsim::Corpus) });
        let options = SearchOptions {
            devices: setup.devices.unwrap_or_default(),
            residency,
            rerank: exact.map(|exact| Rerank {
                exact,
                candidates: setup.rerank_k,
            }),
            ..SearchOptions::default()
        };
        let (searcher, notice) = searcher_for(device, corpus, &options).map_err(to_py)?;
        Ok(Corpus {
            device: searcher.name(),
            searcher: Mutex::new(searcher),
            held,
            _rerank: rerank,
            notice,
            asked: device.to_string(),
        })
    }

    fn exact_setup(device: &str) -> Setup<'_> {
        Setup {
            device,
            devices: None,
            residency: "auto",
            rerank_k: DEFAULT_RERANK_K,
        }
    }

    fn len(&self) -> usize {
        self.held.len()
    }

    /// The documents (exact or codes).
    pub(crate) fn held(&self) -> &dyn AnyCorpus {
        self.held.as_ref()
    }
}

#[pymethods]
impl Corpus {
    /// Open a corpus file (memory-mapped) for search on `device`; `documents=(start, end)`
    /// opens only those documents (a shard), indexed from 0.
    #[staticmethod]
    #[pyo3(signature = (path, device="auto", *, devices=None, residency="auto", check_finite=true, documents=None, rerank=None, rerank_k=None))]
    #[allow(clippy::too_many_arguments)]
    fn load(
        py: Python<'_>,
        path: std::path::PathBuf,
        device: &str,
        devices: Option<Vec<usize>>,
        residency: &str,
        check_finite: bool,
        documents: Option<(usize, usize)>,
        rerank: Option<std::path::PathBuf>,
        rerank_k: Option<usize>,
    ) -> PyResult<Self> {
        let options = OpenOptions::new().check_finite(check_finite);
        let shard = match documents {
            Some((start, end)) => options.documents(start..end),
            None => options,
        };
        let held = py.detach(|| shard.open_any(&path)).map_err(to_py)?;
        let exact = match rerank {
            None => None,
            Some(_) if held.as_exact().is_some() => {
                return Err(PyValueError::new_err(
                    "rerank: only a compressed corpus is reranked (this file is exact)",
                ));
            }
            Some(p) => Some(py.detach(|| options.open(&p)).map_err(to_py)?),
        };
        let recorded = match held.kind() {
            CorpusKind::Compressed(c) => c.rerank_k(),
            CorpusKind::Exact(_) => None,
        };
        let setup = Setup {
            device,
            devices,
            residency,
            rerank_k: rerank_k.or(recorded).unwrap_or(DEFAULT_RERANK_K),
        };
        Self::new(held, exact, setup)
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
        let setup = Setup {
            device,
            devices,
            residency,
            rerank_k: DEFAULT_RERANK_K,
        };
        Self::new(Box::new(corpus), None, setup)
    }

    /// A residual (ColBERTv2/PLAID) corpus from an index's tensors as they lie on disk, without
    /// re-encoding: `codes` the centroid id of each of the T tokens (u32 little-endian bytes),
    /// `residuals` `[T, ceil(d * nbits / 8)]` packed bucket codes (colbert-ai's and fast-plaid's
    /// bit order), `offsets` the `N + 1` document offsets, `centroids` `[K, d]` as f16
    /// little-endian bytes, `bucket_weights` the `2^nbits` bucket values. Searched on `device`.
    #[staticmethod]
    #[pyo3(signature = (codes, residuals, offsets, centroids, bucket_weights, nbits, dim, device="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn from_plaid(
        codes: &Bound<'_, PyBytes>,
        residuals: &Bound<'_, PyBytes>,
        offsets: Vec<usize>,
        centroids: &Bound<'_, PyBytes>,
        bucket_weights: Vec<f32>,
        nbits: u32,
        dim: usize,
        device: &str,
    ) -> PyResult<Self> {
        let whole = |b: &[u8], what: &str, size: usize| {
            if b.len().is_multiple_of(size) {
                Ok(())
            } else {
                Err(PyValueError::new_err(format!(
                    "{what}: {} bytes are not whole {size}-byte values",
                    b.len()
                )))
            }
        };
        let (codes, centroids) = (codes.as_bytes(), centroids.as_bytes());
        whole(codes, "codes", 4)?;
        whole(centroids, "centroids", 2)?;
        let ids: Vec<u32> = codes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let cents: Vec<half::f16> = centroids
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]))
            .collect();
        // Bucket cutoffs only encode; a corpus built here is scored, never re-encoded.
        let cutoffs = vec![0.0; bucket_weights.len().saturating_sub(1)];
        let codec =
            ResidualCodec::new(nbits, dim, cents, cutoffs, bucket_weights).map_err(to_py)?;
        let corpus = CompressedCorpus::new(
            Codec::Residual(codec),
            dim,
            offsets,
            residuals.as_bytes().to_vec(),
            Some(ids),
        )
        .map_err(to_py)?;
        Self::new(Box::new(corpus), None, Self::exact_setup(device))
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
        search_queries(py, queries, query_lengths, k, self.len(), |matrices, kk| {
            // A poisoned lock only means a panic in another search; the searcher is intact.
            let s = self.searcher.lock().unwrap_or_else(|e| e.into_inner());
            s.search(matrices, kk)
        })
    }

    /// This (exact) corpus compressed with `codec` (`residual`, `pq`, `int8`, `fp8`): a new
    /// corpus searched on its codes, reranked exactly against this one when `rerank_k` is given.
    /// Trained and encoded on `device` (default: this corpus's device, so a corpus on a GPU
    /// compresses there).
    #[pyo3(signature = (codec, *, nbits=2, centroids=None, m=16, kmeans_iters=None, buckets="lloyd-max", seed=0, rerank_k=None, normalize=false, device=None))]
    #[allow(clippy::too_many_arguments)]
    fn compress(
        &self,
        py: Python<'_>,
        codec: &str,
        nbits: u32,
        centroids: Option<usize>,
        m: usize,
        kmeans_iters: Option<usize>,
        buckets: &str,
        seed: u64,
        rerank_k: Option<usize>,
        normalize: bool,
        device: Option<&str>,
    ) -> PyResult<Self> {
        let on: Device = device.unwrap_or(&self.asked).parse().map_err(to_py)?;
        let CorpusKind::Exact(exact) = self.held.kind() else {
            return Err(PyValueError::new_err(
                "compress: this corpus is already compressed",
            ));
        };
        let spec = match codec {
            "residual" => CodecSpec::Residual(ResidualOptions {
                nbits,
                centroids,
                kmeans_iters: kmeans_iters.unwrap_or(4),
                buckets: buckets.parse().map_err(to_py)?,
                ..Default::default()
            }),
            "pq" => CodecSpec::Pq(PqOptions {
                m,
                kmeans_iters: kmeans_iters.unwrap_or(10),
                ..Default::default()
            }),
            "int8" => CodecSpec::Int8,
            "fp8" => CodecSpec::Fp8,
            other => {
                return Err(PyValueError::new_err(format!(
                    "codec {other:?}: expected residual, pq, int8 or fp8"
                )));
            }
        };
        let codes = py
            .detach(|| -> tilemaxsim::Result<_> {
                let normalized = if normalize {
                    Some(exact.normalized()?)
                } else {
                    None
                };
                let source = normalized.as_ref().unwrap_or(exact);
                let (codes, _) = tilemaxsim::compress_on(on, source, &spec, seed, &|_, _, _| {})?;
                match rerank_k {
                    Some(k) => codes.with_rerank_k(k),
                    None => Ok(codes),
                }
            })
            .map_err(to_py)?;
        let rerank = rerank_k.map(|_| exact.clone());
        let setup = Setup {
            rerank_k: rerank_k.unwrap_or(DEFAULT_RERANK_K),
            ..Self::exact_setup(&self.asked)
        };
        Self::new(Box::new(codes), rerank, setup)
    }

    /// Write the corpus (exact or compressed) to a safetensors file.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| match self.held.kind() {
            CorpusKind::Exact(c) => c.save(&path),
            CorpusKind::Compressed(c) => c.save(&path),
        })
        .map_err(to_py)
    }

    fn __len__(&self) -> usize {
        self.len()
    }

    #[getter]
    fn dim(&self) -> usize {
        self.held.dim()
    }

    /// The element type (`f32`, `f16`, `bf16`), or the codec of a compressed corpus.
    #[getter]
    fn dtype(&self) -> String {
        self.held.storage_name()
    }

    /// A description of the codec (`None` for an exact corpus).
    #[getter]
    fn codec(&self) -> Option<String> {
        match self.held.kind() {
            CorpusKind::Exact(_) => None,
            CorpusKind::Compressed(c) => Some(c.codec().describe()),
        }
    }

    /// Bytes stored per token.
    #[getter]
    fn bytes_per_token(&self) -> usize {
        self.held.bytes_per_token()
    }

    #[getter]
    fn num_tokens(&self) -> usize {
        self.held.num_tokens()
    }

    /// The `N + 1` document offsets into the token rows.
    #[getter]
    fn offsets(&self) -> Vec<usize> {
        self.held.offsets().to_vec()
    }

    #[getter]
    fn doc_ids(&self) -> Option<Vec<String>> {
        self.held.doc_ids().map(<[String]>::to_vec)
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

/// A search of `queries` (`[A, Lq, d]` host memory, query i its first `query_lengths[i]`
/// rows) for the `k` best of `n` documents by `search` (called with the GIL released): flat
/// scores and indices, `A × min(k, n)` each, padded with NaN and -1 where a query has fewer.
pub(crate) fn search_queries(
    py: Python<'_>,
    queries: &Bound<'_, PyAny>,
    query_lengths: Vec<usize>,
    k: usize,
    n: usize,
    search: impl FnOnce(
        &[tilemaxsim::Matrix<'_>],
        usize,
    ) -> tilemaxsim::Result<Vec<Vec<tilemaxsim::Hit>>>
    + Send,
) -> PyResult<(Vec<f32>, Vec<i64>)> {
    let q = Tensor::import(queries, "queries")?;
    q.expect_ndim(&[3], "queries as [A, Lq, d]")?;
    if q.place != Place::Cpu || !q.rows_contiguous() {
        return Err(PyValueError::new_err(
            "queries: expected host memory with contiguous rows",
        ));
    }
    q.float()?;
    if query_lengths.len() != q.shape[0] || query_lengths.iter().any(|&l| l == 0 || l > q.shape[1])
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
    let kk = k.min(n);
    let hits = py.detach(|| search(&matrices, kk)).map_err(to_py)?;
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

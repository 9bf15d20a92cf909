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
use tilemaxsim::corpus::OpenOptions;
use tilemaxsim::{
    CompressedSearch, Device, Rerank, Residency, SearchOptions, Searcher, compressed_scorer_for,
    scorer_for, searcher_for,
};

use crate::errors::to_py;
use crate::tensor::{Place, Tensor, matrices};

/// The rerank depth k' when neither the call nor the file gives one.
const DEFAULT_RERANK_K: usize = 100;

/// What a `Corpus` holds: exact documents, or codes (with the exact corpus of its rerank).
enum Held {
    Exact(Box<tilemaxsim::Corpus>),
    Compressed {
        codes: Box<CompressedCorpus>,
        /// Only kept alive: the searcher's rerank stage borrows it.
        _rerank: Option<Box<tilemaxsim::Corpus>>,
    },
}

#[pyclass(frozen, module = "tilemaxsim._native")]
pub struct Corpus {
    // Declared before `held`, so dropped first: it borrows the boxed corpora.
    searcher: Mutex<Box<dyn Searcher + 'static>>,
    held: Held,
    device: String,
    notice: Option<String>,
    /// The device asked for (a corpus compressed from this one is searched there too).
    asked: String,
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
            held: Held::Exact(corpus),
            notice,
            asked: device.to_string(),
        })
    }

    /// A compressed corpus searched on `device` (the CPU until the GPU kernels exist), its
    /// top `rerank_k` reranked exactly against `rerank` when given.
    fn compressed(
        codes: CompressedCorpus,
        device: &str,
        rerank: Option<tilemaxsim::Corpus>,
        rerank_k: usize,
    ) -> PyResult<Self> {
        let dev: Device = device.parse().map_err(to_py)?;
        let codes = Box::new(codes);
        let rerank = rerank.map(Box::new);
        // SAFETY: as in `with_searcher`: both boxes keep their heap addresses, are never
        // changed, and outlive the searcher (field order).
        let c: &'static CompressedCorpus = unsafe { &*(codes.as_ref() as *const CompressedCorpus) };
        let exact: Option<&'static tilemaxsim::Corpus> = rerank
            .as_ref()
            .map(|e| unsafe { &*(e.as_ref() as *const tilemaxsim::Corpus) });
        let (scorer, mut notice) = compressed_scorer_for(dev).map_err(to_py)?;
        let second = match exact {
            Some(e) => {
                let (s, n) = scorer_for(dev).map_err(to_py)?;
                notice = notice.or(n);
                Some(Rerank {
                    exact: e,
                    candidates: rerank_k,
                    scorer: s,
                })
            }
            None => None,
        };
        let searcher: Box<dyn Searcher + 'static> =
            Box::new(CompressedSearch::new(scorer, c, second).map_err(to_py)?);
        Ok(Corpus {
            device: searcher.name(),
            searcher: Mutex::new(searcher),
            held: Held::Compressed {
                codes,
                _rerank: rerank,
            },
            notice,
            asked: device.to_string(),
        })
    }

    fn len(&self) -> usize {
        match &self.held {
            Held::Exact(c) => c.len(),
            Held::Compressed { codes, .. } => codes.len(),
        }
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
        if tilemaxsim::codec::is_compressed_file(&path) {
            if documents.is_some() {
                return Err(PyValueError::new_err(
                    "documents: shards are opened from exact corpus files (this one is compressed)",
                ));
            }
            let codes = py
                .detach(|| options.open_compressed(&path))
                .map_err(to_py)?;
            let exact = match rerank {
                Some(p) => Some(py.detach(|| options.open(&p)).map_err(to_py)?),
                None => None,
            };
            let depth = rerank_k.or(codes.rerank_k()).unwrap_or(DEFAULT_RERANK_K);
            return Self::compressed(codes, device, exact, depth);
        }
        if rerank.is_some() {
            return Err(PyValueError::new_err(
                "rerank: only a compressed corpus is reranked (this file is exact)",
            ));
        }
        let options = match documents {
            Some((start, end)) => options.documents(start..end),
            None => options,
        };
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
        Self::compressed(corpus, device, None, DEFAULT_RERANK_K)
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
        let kk = k.min(self.len());
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

    /// This (exact) corpus compressed with `codec` (`residual`, `pq`, `int8`, `fp8`): a new
    /// corpus searched on its codes, reranked exactly against this one when `rerank_k` is given.
    #[pyo3(signature = (codec, *, nbits=2, centroids=None, m=16, kmeans_iters=None, seed=0, rerank_k=None, normalize=false))]
    #[allow(clippy::too_many_arguments)]
    fn compress(
        &self,
        py: Python<'_>,
        codec: &str,
        nbits: u32,
        centroids: Option<usize>,
        m: usize,
        kmeans_iters: Option<usize>,
        seed: u64,
        rerank_k: Option<usize>,
        normalize: bool,
    ) -> PyResult<Self> {
        let Held::Exact(exact) = &self.held else {
            return Err(PyValueError::new_err(
                "compress: this corpus is already compressed",
            ));
        };
        let spec = match codec {
            "residual" => CodecSpec::Residual(ResidualOptions {
                nbits,
                centroids,
                kmeans_iters: kmeans_iters.unwrap_or(4),
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
                let source = normalized.as_ref().unwrap_or(exact.as_ref());
                let codes = tilemaxsim::codec::compress(source, &spec, seed, &|_, _, _| {})?;
                match rerank_k {
                    Some(k) => codes.with_rerank_k(k),
                    None => Ok(codes),
                }
            })
            .map_err(to_py)?;
        let rerank = rerank_k.map(|_| exact.as_ref().clone());
        Self::compressed(
            codes,
            &self.asked,
            rerank,
            rerank_k.unwrap_or(DEFAULT_RERANK_K),
        )
    }

    /// Write the corpus (exact or compressed) to a safetensors file.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| match &self.held {
            Held::Exact(c) => c.save(&path),
            Held::Compressed { codes, .. } => codes.save(&path),
        })
        .map_err(to_py)
    }

    fn __len__(&self) -> usize {
        self.len()
    }

    #[getter]
    fn dim(&self) -> usize {
        match &self.held {
            Held::Exact(c) => c.dim(),
            Held::Compressed { codes, .. } => codes.dim(),
        }
    }

    /// The element type (`f32`, `f16`, `bf16`), or the codec of a compressed corpus.
    #[getter]
    fn dtype(&self) -> String {
        match &self.held {
            Held::Exact(c) => c.dtype().to_string(),
            Held::Compressed { codes, .. } => codes.codec().name().to_string(),
        }
    }

    /// A description of the codec (`None` for an exact corpus).
    #[getter]
    fn codec(&self) -> Option<String> {
        match &self.held {
            Held::Exact(_) => None,
            Held::Compressed { codes, .. } => Some(codes.codec().describe()),
        }
    }

    /// Bytes stored per token.
    #[getter]
    fn bytes_per_token(&self) -> usize {
        match &self.held {
            Held::Exact(c) => c.dim() * c.dtype().size(),
            Held::Compressed { codes, .. } => codes.codec().bytes_per_token(codes.dim()),
        }
    }

    #[getter]
    fn num_tokens(&self) -> usize {
        match &self.held {
            Held::Exact(c) => c.num_tokens(),
            Held::Compressed { codes, .. } => codes.num_tokens(),
        }
    }

    /// The `N + 1` document offsets into the token rows.
    #[getter]
    fn offsets(&self) -> Vec<usize> {
        match &self.held {
            Held::Exact(c) => c.offsets().to_vec(),
            Held::Compressed { codes, .. } => codes.offsets().to_vec(),
        }
    }

    #[getter]
    fn doc_ids(&self) -> Option<Vec<String>> {
        match &self.held {
            Held::Exact(c) => c.doc_ids().map(|d| d.to_vec()),
            Held::Compressed { codes, .. } => codes.doc_ids().map(|d| d.to_vec()),
        }
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

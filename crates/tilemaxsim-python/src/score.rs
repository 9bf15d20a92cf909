//! `_native.score`: MaxSim of query batches against document batches given as tensors, on
//! the engine of the tensors' device. CPU tensors (and numpy arrays) are copied into the CPU
//! engine's packed layout and scored by its SIMD kernels; CUDA tensors are scored in place by
//! `CudaScorer::score_raw` on the caller's stream, with no copy and no host wait.

use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tilemaxsim::cuda::{CudaScorer, RawArgs, RawDocs, RawLayout, RawQueries};
use tilemaxsim::{CpuScorer, DType, Matrix};

use crate::errors::to_py;
use crate::tensor::{Elem, Place, Tensor, matrices};

/// One `CudaScorer` per device, opened at first use (kernels compiled or read from the cache)
/// and kept for the process.
type Scorers = Mutex<Vec<(usize, Arc<CudaScorer>)>>;

pub(crate) fn cuda_scorer(ordinal: usize) -> PyResult<Arc<CudaScorer>> {
    static SCORERS: OnceLock<Scorers> = OnceLock::new();
    let table = SCORERS.get_or_init(|| Mutex::new(Vec::new()));
    // A poisoned lock only means a panic elsewhere; the table is still valid.
    let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = table.iter().find(|(n, _)| *n == ordinal) {
        return Ok(s.clone());
    }
    let scorer = Arc::new(CudaScorer::new(ordinal).map_err(to_py)?);
    table.push((ordinal, scorer.clone()));
    Ok(scorer)
}

/// The CPU engine, shared.
fn cpu_scorer() -> &'static CpuScorer {
    static CPU: OnceLock<CpuScorer> = OnceLock::new();
    CPU.get_or_init(CpuScorer::new)
}

/// How the documents lie.
enum Layout {
    /// `[T, d]` rows, document i rows `offsets[i] .. offsets[i + 1]`.
    Packed(Tensor),
    /// `[B, L, d]`, document i its first `lengths[i]` rows (all L without lengths).
    Padded(Option<Tensor>),
}

/// The checked arguments of one call.
struct Call {
    queries: Tensor,
    query_lengths: Vec<usize>,
    docs: Tensor,
    layout: Layout,
    out: Tensor,
    /// CUDA only: score documents `candidates[i]` (int64 on the device) instead of all.
    candidates: Option<Tensor>,
    pairs: bool,
    /// f32 documents whose rows the caller checked are in the tensor cores' split range
    /// (`RawDocs::split_ok`; the Python layer checks each tensor once, `_split.py`).
    split_checked: bool,
    dim: usize,
    place: Place,
}

fn err<T>(msg: String) -> PyResult<T> {
    Err(PyValueError::new_err(msg))
}

impl Call {
    fn check(self) -> PyResult<Self> {
        let q = &self.queries;
        q.expect_ndim(&[3], "queries as [A, Lq, d]")?;
        q.float()?;
        self.docs.float()?;
        let (a, lq, dim) = (q.shape[0], q.shape[1], q.shape[2]);
        if a == 0 || lq == 0 || dim == 0 {
            return err(format!("queries: empty (shape {:?})", q.shape));
        }
        if self.query_lengths.len() != a {
            return err(format!(
                "query_lengths: {} lengths for {a} queries",
                self.query_lengths.len()
            ));
        }
        if let Some(i) = self.query_lengths.iter().position(|&l| l == 0 || l > lq) {
            return err(format!(
                "query {i} has {} tokens; every query needs 1 to {lq}",
                self.query_lengths[i]
            ));
        }
        let d = &self.docs;
        let (b, d_dim) = match &self.layout {
            Layout::Packed(off) => {
                d.expect_ndim(&[2], "packed documents as [T, d]")?;
                off.expect_ndim(&[1], "cu_seqlens as [B + 1]")?;
                (off.shape[0].saturating_sub(1), d.shape[1])
            }
            Layout::Padded(lengths) => {
                d.expect_ndim(&[3], "padded documents as [B, Ld, d]")?;
                if d.shape[1] == 0 {
                    return err("documents: Ld = 0 (every document needs a token)".into());
                }
                if let Some(l) = lengths {
                    l.expect_ndim(&[1], "doc_lengths as [B]")?;
                    if l.shape[0] != d.shape[0] {
                        return err(format!(
                            "doc_lengths: {} lengths for {} documents",
                            l.shape[0], d.shape[0]
                        ));
                    }
                }
                (d.shape[0], d.shape[2])
            }
        };
        if b == 0 {
            return err("documents: empty (no document given)".into());
        }
        if d_dim != dim {
            return err(format!(
                "dimension mismatch: queries have d = {dim}, documents d = {d_dim}"
            ));
        }
        if !q.rows_contiguous() || !d.rows_contiguous() {
            return err(
                "each token row must be contiguous (stride 1 along d); call .contiguous()".into(),
            );
        }
        let b = match &self.candidates {
            Some(c) => {
                c.expect_ndim(&[1], "candidates as [n]")?;
                if self.pairs || q.place == Place::Cpu {
                    return err("candidates: for CUDA tensors and full score matrices only".into());
                }
                c.shape[0]
            }
            None => b,
        };
        let want = if self.pairs {
            if a != b {
                return err(format!("pairs: {a} queries for {b} documents"));
            }
            a
        } else {
            a * b
        };
        let o = &self.out;
        if o.elem != Elem::Float(DType::F32) || o.numel() != want || !contiguous(o) {
            return err(format!(
                "out: needs {want} contiguous float32 values, got shape {:?}",
                o.shape
            ));
        }
        for t in [Some(o), Some(d), self.candidates.as_ref()]
            .into_iter()
            .chain([match &self.layout {
                Layout::Packed(t) => Some(t),
                Layout::Padded(t) => t.as_ref(),
            }])
            .flatten()
        {
            if t.place != q.place {
                return err(format!(
                    "tensors on different devices: queries on {}, {} on {}",
                    q.place, t.name, t.place
                ));
            }
        }
        let place = q.place;
        Ok(Call { dim, place, ..self })
    }
}

/// Whether a tensor is dense row-major.
pub(crate) fn contiguous(t: &Tensor) -> bool {
    let mut want = 1;
    for (&n, &s) in t.shape.iter().zip(&t.strides).rev() {
        if n > 1 && s != want {
            return false;
        }
        want *= n;
    }
    true
}

/// The CPU engine on host tensors, with the rules of the CUDA kernels at the edges: a query or
/// document holding NaN (or ±Inf, which the engine refuses) scores NaN, and a document of no
/// tokens scores -inf. The documents are scored where they lie (`CpuScorer::score_rows`) when
/// their rows allow it and every value is finite; otherwise they are copied and their
/// non-finite values cleared for the engine. The NaN and -inf scores are written afterwards.
fn score_cpu(c: &Call) -> PyResult<&'static str> {
    let (q, d, dim) = (&c.queries, &c.docs, c.dim);
    let mut owned = q.host_queries(&c.query_lengths)?;
    let bad_query: Vec<bool> = owned
        .iter_mut()
        .map(|o| {
            let n = o.as_elements().len();
            o.zero_non_finite(0..n)
        })
        .collect();
    let matrices = matrices(&owned, dim)?;
    let (spans, lengths): (Vec<_>, Vec<usize>) = match &c.layout {
        Layout::Packed(off) => {
            let o = off.host_ints()?;
            let rows = d.shape[0] as i64;
            if o.windows(2).any(|w| w[1] < w[0]) || o[0] < 0 || o[o.len() - 1] > rows {
                return err(format!(
                    "cu_seqlens: must be non-decreasing within 0..={rows}"
                ));
            }
            o.windows(2)
                .map(|w| {
                    let len = (w[1] - w[0]) as usize;
                    ((w[0] as usize * d.strides[0], d.strides[0], len), len)
                })
                .unzip()
        }
        Layout::Padded(lengths) => {
            let (b, ld) = (d.shape[0], d.shape[1]);
            let lens = match lengths {
                Some(l) => l.host_ints()?,
                None => vec![ld as i64; b],
            };
            lens.iter()
                .enumerate()
                .map(|(i, &l)| {
                    let len = l.clamp(0, ld as i64) as usize;
                    ((i * d.strides[0], d.strides[1], len), len)
                })
                .unzip()
        }
    };
    // The engine's corpus holds the documents that have tokens; `kept[i]` is document i's
    // index there.
    let kept: Vec<Option<usize>> = lengths
        .iter()
        .scan(0, |n, &l| {
            Some((l > 0).then(|| {
                *n += 1;
                *n - 1
            }))
        })
        .collect();
    let nonempty: Vec<usize> = lengths.iter().copied().filter(|&l| l > 0).collect();
    // SAFETY: `out` was checked to be `want` contiguous f32 in host memory, alive for the call.
    let out = unsafe { std::slice::from_raw_parts_mut(c.out.ptr as *mut f32, c.out.numel()) };
    let b = lengths.len();
    let mut bad_doc = vec![false; nonempty.len()];
    if !nonempty.is_empty() {
        let kept_spans: Vec<_> = spans
            .iter()
            .zip(&lengths)
            .filter(|&(_, &l)| l > 0)
            .map(|(s, _)| *s)
            .collect();
        let scorer = cpu_scorer();
        // The rows where they lie when the tensor allows it and every value is finite (the
        // common case: no copy); otherwise a copy with the non-finite values cleared.
        let borrowed = d
            .borrowed_rows(&kept_spans, dim)?
            .filter(|(tokens, ranges)| all_finite(tokens, ranges));
        if let Some((tokens, ranges)) = borrowed {
            score_rows_into(scorer, &matrices, tokens, &ranges, c.pairs, &kept, b, out)?;
        } else {
            let mut tokens = d.gather(&kept_spans, dim)?;
            let mut row = 0;
            let mut ranges = Vec::with_capacity(nonempty.len());
            for (flag, &l) in bad_doc.iter_mut().zip(&nonempty) {
                *flag = tokens.zero_non_finite(row * dim..(row + l) * dim);
                ranges.push(row..row + l);
                row += l;
            }
            let tokens = Matrix::new(tokens.as_elements(), dim).map_err(to_py)?;
            score_rows_into(scorer, &matrices, tokens, &ranges, c.pairs, &kept, b, out)?;
        }
    }
    let cols = if c.pairs { 1 } else { b };
    for (a, row) in out.chunks_mut(cols).enumerate() {
        for (i, o) in row.iter_mut().enumerate() {
            let doc = if c.pairs { a } else { i };
            *o = match kept[doc] {
                _ if bad_query[a] => f32::NAN,
                None => f32::NEG_INFINITY,
                Some(j) if bad_doc[j] => f32::NAN,
                Some(_) => *o,
            };
        }
    }
    Ok("cpu")
}

/// Whether every value of the documents' rows is finite (one scan, in parallel over documents).
fn all_finite(tokens: &Matrix<'_>, ranges: &[std::ops::Range<usize>]) -> bool {
    use rayon::prelude::*;
    ranges
        .par_iter()
        .all(|r| tokens.rows_range(r.clone()).elements().all_finite())
}

/// The CPU engine's scores of the kept (non-empty) documents, rows `ranges` of `tokens`, into
/// `out` (`[A, b]`, or `[A]` for pairs), document i of the call at kept index `kept[i]`.
#[allow(clippy::too_many_arguments)]
fn score_rows_into(
    scorer: &CpuScorer,
    queries: &[Matrix<'_>],
    tokens: Matrix<'_>,
    ranges: &[std::ops::Range<usize>],
    pairs: bool,
    kept: &[Option<usize>],
    b: usize,
    out: &mut [f32],
) -> PyResult<()> {
    if pairs {
        for (i, (m, o)) in queries.iter().zip(out.iter_mut()).enumerate() {
            if let Some(j) = kept[i] {
                let (one, docs) = (std::slice::from_ref(m), std::slice::from_ref(&ranges[j]));
                scorer
                    .score_rows(one, tokens, docs, std::slice::from_mut(o))
                    .map_err(to_py)?;
            }
        }
        return Ok(());
    }
    let mut scores = vec![0f32; queries.len() * ranges.len()];
    scorer
        .score_rows(queries, tokens, ranges, &mut scores)
        .map_err(to_py)?;
    for (row, got) in out.chunks_mut(b).zip(scores.chunks(ranges.len())) {
        for (o, k) in row.iter_mut().zip(kept) {
            if let Some(j) = *k {
                *o = got[j];
            }
        }
    }
    Ok(())
}

fn int64_on_device(t: &Tensor) -> PyResult<()> {
    if t.elem != Elem::I64 || !contiguous(t) {
        return err(format!("{}: needs a contiguous int64 tensor", t.name));
    }
    Ok(())
}

fn score_cuda(c: &Call, ordinal: usize, stream: usize) -> PyResult<&'static str> {
    let scorer = cuda_scorer(ordinal)?;
    let (q, d) = (&c.queries, &c.docs);
    let spans: Vec<(usize, usize)> = c
        .query_lengths
        .iter()
        .enumerate()
        .map(|(i, &l)| (i * q.strides[0], l))
        .collect();
    let queries = |spans| RawQueries {
        tokens: q.ptr,
        dtype: q.float().unwrap_or(DType::F32),
        dim: c.dim,
        row_stride: q.strides[1],
        spans,
    };
    let dtype = d.float()?;
    let docs = match &c.layout {
        Layout::Packed(off) => {
            int64_on_device(off)?;
            RawDocs {
                tokens: d.ptr,
                dtype,
                dim: c.dim,
                row_stride: d.strides[0],
                layout: RawLayout::Packed {
                    offsets: off.ptr,
                    docs: off.shape[0] - 1,
                    rows: d.shape[0],
                },
                split_ok: c.split_checked,
            }
        }
        Layout::Padded(lengths) => {
            if let Some(l) = lengths {
                int64_on_device(l)?;
            }
            RawDocs {
                tokens: d.ptr,
                dtype,
                dim: c.dim,
                row_stride: d.strides[1],
                layout: RawLayout::Padded {
                    docs: d.shape[0],
                    max_len: d.shape[1],
                    batch_stride: d.strides[0],
                    lengths: lengths.as_ref().map_or(0, |l| l.ptr),
                },
                split_ok: c.split_checked,
            }
        }
    };
    let stream = stream as cudarc::driver::sys::CUstream;
    let kernel = if c.pairs {
        // Pair i: query i against a one-document view of document i.
        let mut kernel = tilemaxsim::cuda::Kernel::Tiled;
        for (i, span) in spans.iter().enumerate() {
            let one = match docs.layout {
                RawLayout::Packed { offsets, rows, .. } => RawDocs {
                    layout: RawLayout::Packed {
                        offsets: offsets + 8 * i as u64,
                        docs: 1,
                        rows,
                    },
                    ..docs
                },
                RawLayout::Padded {
                    max_len,
                    batch_stride,
                    lengths,
                    ..
                } => RawDocs {
                    tokens: docs.tokens + (i * batch_stride * dtype.size()) as u64,
                    layout: RawLayout::Padded {
                        docs: 1,
                        max_len,
                        batch_stride,
                        lengths: if lengths == 0 {
                            0
                        } else {
                            lengths + 8 * i as u64
                        },
                    },
                    ..docs
                },
            };
            let args = RawArgs {
                queries: queries(std::slice::from_ref(span)),
                docs: one,
                candidates: None,
                out: c.out.ptr + 4 * i as u64,
            };
            // SAFETY: every pointer comes from a DLPack tensor on this device, alive for the
            // call (held by `c`), of the shapes checked in `Call::check`; the stream is the
            // caller's current stream of this device (torch's, in the primary context).
            kernel = unsafe { scorer.score_raw(Some(stream), args) }.map_err(to_py)?;
        }
        kernel
    } else {
        let candidates = match &c.candidates {
            Some(t) => {
                int64_on_device(t)?;
                Some((t.ptr, t.shape[0]))
            }
            None => None,
        };
        let args = RawArgs {
            queries: queries(&spans),
            docs,
            candidates,
            out: c.out.ptr,
        };
        // SAFETY: as above.
        unsafe { scorer.score_raw(Some(stream), args) }.map_err(to_py)?
    };
    Ok(kernel.name())
}

/// MaxSim of each query against each document (or, with `pairs`, query i against document
/// i) into `out`; returns the kernel that ran (`"cpu"` on the CPU). See `python/tilemaxsim`.
#[pyfunction]
#[pyo3(signature = (queries, query_lengths, docs, out, *, cu_seqlens=None, doc_lengths=None, candidates=None, pairs=false, split_checked=false, stream=0))]
#[allow(clippy::too_many_arguments)]
pub fn score(
    py: Python<'_>,
    queries: &Bound<'_, PyAny>,
    query_lengths: Option<Vec<usize>>,
    docs: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    cu_seqlens: Option<&Bound<'_, PyAny>>,
    doc_lengths: Option<&Bound<'_, PyAny>>,
    candidates: Option<&Bound<'_, PyAny>>,
    pairs: bool,
    split_checked: bool,
    stream: usize,
) -> PyResult<&'static str> {
    if cu_seqlens.is_some() && doc_lengths.is_some() {
        return err("give cu_seqlens (packed) or doc_lengths (padded), not both".into());
    }
    let layout = match (cu_seqlens, doc_lengths) {
        (Some(o), _) => Layout::Packed(Tensor::import(o, "cu_seqlens")?),
        (None, Some(l)) => Layout::Padded(Some(Tensor::import(l, "doc_lengths")?)),
        (None, None) => Layout::Padded(None),
    };
    let mut queries = Tensor::import(queries, "queries")?;
    if queries.shape.len() == 2 {
        // One query [Lq, d]: a batch of one (no view made in Python).
        queries.shape.insert(0, 1);
        queries.strides.insert(0, 0);
    }
    // No lengths: every query is all of its Lq rows (no list made in Python).
    let query_lengths = match (query_lengths, &queries.shape[..]) {
        (Some(l), _) => l,
        (None, [a, lq, _]) => vec![*lq; *a],
        (None, _) => Vec::new(),
    };
    let call = Call {
        queries,
        query_lengths,
        docs: Tensor::import(docs, "documents")?,
        layout,
        out: Tensor::import(out, "out")?,
        candidates: candidates
            .map(|c| Tensor::import(c, "candidates"))
            .transpose()?,
        pairs,
        split_checked,
        dim: 0,
        place: Place::Cpu,
    }
    .check()?;
    // The tensors stay alive (held by `call`) while the GIL is released; no Python object is
    // touched inside.
    let call = SendCall(call);
    py.detach(move || {
        let c = &call.0;
        match c.place {
            Place::Cpu => score_cpu(c),
            Place::Cuda(n) => score_cuda(c, n, stream),
        }
    })
}

/// The call handed to the thread that runs without the GIL.
struct SendCall(Call);
// SAFETY: a `Call` holds plain metadata and DLPack owners whose deleters may run on any thread
// (DLPack requires deleters to be thread-safe); nothing in it touches Python state.
unsafe impl Send for SendCall {}

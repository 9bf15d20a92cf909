//! `_native.score_residual`: MaxSim of queries against a PLAID residual corpus given as CUDA
//! tensors (late-interaction-kernels' `maxsim_residual_varlen` layout), scored in place by
//! `CudaScorer::score_residual_raw` on the caller's stream: no copy, no host wait. The Python
//! side (`python/tilemaxsim/_residual.py`) normalizes the queries, converts dtypes and checks
//! values; here every tensor's device, dtype, shape and layout is checked.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tilemaxsim::DType;
use tilemaxsim::cuda::{RawQueries, RawResidual};

use crate::errors::to_py;
use crate::score::{contiguous, cuda_scorer};
use crate::tensor::{Elem, Place, Tensor};

fn err<T>(msg: String) -> PyResult<T> {
    Err(PyValueError::new_err(msg))
}

/// `t` is a dense tensor of `elem` (named `what`) with these sizes (`None`: any).
fn expect(t: &Tensor, elem: Elem, what: &str, shape: &[Option<usize>]) -> PyResult<()> {
    let fits = t.shape.len() == shape.len()
        && t.shape
            .iter()
            .zip(shape)
            .all(|(&n, s)| s.is_none_or(|s| s == n));
    if t.elem != elem || !fits || !contiguous(t) {
        let want: Vec<String> = shape
            .iter()
            .map(|s| s.map_or("_".into(), |n| n.to_string()))
            .collect();
        return err(format!(
            "{}: expected a contiguous {what} tensor of shape [{}], got {:?} of shape {:?}",
            t.name,
            want.join(", "),
            t.elem,
            t.shape
        ));
    }
    Ok(())
}

/// Scores into `out` `[Nq, Nd]` (f32, contiguous) of `queries` `[Nq, Lq, d]` (f32, unit rows)
/// against the residual corpus (`residuals` `[T, d·nbits/8]` uint8, `ids` `[T]` int32,
/// `offsets` `[Nd + 1]` int64, `centroids` `[K, d]` float16, `bucket_weights` `[2^nbits]`
/// float32), every tensor on one CUDA device, enqueued on `stream` (0: the legacy stream).
#[pyfunction]
#[pyo3(signature = (queries, residuals, ids, offsets, centroids, bucket_weights, nbits, out, *, stream=0))]
#[allow(clippy::too_many_arguments)]
pub fn score_residual(
    queries: &Bound<'_, PyAny>,
    residuals: &Bound<'_, PyAny>,
    ids: &Bound<'_, PyAny>,
    offsets: &Bound<'_, PyAny>,
    centroids: &Bound<'_, PyAny>,
    bucket_weights: &Bound<'_, PyAny>,
    nbits: u32,
    out: &Bound<'_, PyAny>,
    stream: usize,
) -> PyResult<()> {
    let q = Tensor::import(queries, "Q")?;
    let r = Tensor::import(residuals, "residuals_flat")?;
    let i = Tensor::import(ids, "codes_flat")?;
    let o = Tensor::import(offsets, "cu_seqlens_d")?;
    let c = Tensor::import(centroids, "centroids")?;
    let w = Tensor::import(bucket_weights, "bucket_weights")?;
    let out = Tensor::import(out, "out")?;
    let Place::Cuda(ordinal) = q.place else {
        return err("Q: expected a CUDA tensor".into());
    };
    for t in [&r, &i, &o, &c, &w, &out] {
        if t.place != q.place {
            return err(format!("{}: on {}, Q on {}", t.name, t.place, q.place));
        }
    }
    q.expect_ndim(&[3], "[Nq, Lq, d]")?;
    let (nq, lq, dim) = (q.shape[0], q.shape[1], q.shape[2]);
    expect(
        &q,
        Elem::Float(DType::F32),
        "float32",
        &[None, None, Some(dim)],
    )?;
    if !(1..=4).contains(&nbits) || nbits == 3 {
        return err(format!("nbits = {nbits}: expected 1, 2 or 4"));
    }
    let tokens = i.shape.first().copied().unwrap_or(0);
    expect(&i, Elem::I32, "int32", &[Some(tokens)])?;
    expect(
        &r,
        Elem::U8,
        "uint8",
        &[Some(tokens), Some(dim * nbits as usize / 8)],
    )?;
    expect(&o, Elem::I64, "int64", &[None])?;
    let docs = o.shape[0].saturating_sub(1);
    expect(&c, Elem::Float(DType::F16), "float16", &[None, Some(dim)])?;
    expect(&w, Elem::Float(DType::F32), "float32", &[Some(1 << nbits)])?;
    expect(
        &out,
        Elem::Float(DType::F32),
        "float32",
        &[Some(nq), Some(docs)],
    )?;
    let spans: Vec<(usize, usize)> = (0..nq).map(|k| (k * lq * dim, lq)).collect();
    let scorer = cuda_scorer(ordinal)?;
    let args = RawResidual {
        queries: RawQueries {
            tokens: q.ptr,
            dtype: DType::F32,
            dim,
            row_stride: dim,
            spans: &spans,
        },
        nbits,
        residuals: r.ptr,
        ids: i.ptr,
        offsets: o.ptr,
        docs,
        tokens,
        centroids: c.ptr,
        num_centroids: c.shape[0],
        bucket_weights: w.ptr,
        out: out.ptr,
    };
    let stream = stream as cudarc::driver::sys::CUstream;
    // SAFETY: every pointer comes from a DLPack tensor on this device, alive for the call (the
    // `Tensor`s are held until it returns), of the dtypes and shapes checked above; ids below
    // K and offsets within T are the Python side's to check. The stream is the caller's current
    // stream of this device. Only the enqueue runs here, so the GIL is kept (no waiting).
    unsafe { scorer.score_residual_raw(Some(stream), args) }.map_err(to_py)
}

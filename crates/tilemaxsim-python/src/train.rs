//! `_native.train_forward` and `_native.train_backward`: the training kernels on CUDA tensors
//! (`CudaScorer::train_forward` / `train_backward`), for `python/tilemaxsim/_autograd.py`. The
//! forward pass writes the scores and each query token's argmax (int32); the backward pass
//! turns the scores' gradient into the queries' and documents' gradients through it. Both run
//! on the caller's stream, in place, with no host wait.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tilemaxsim::DType;
use tilemaxsim::cuda::{RawDocs, RawLayout, TrainArgs, TrainQueries};

use crate::errors::to_py;
use crate::score::{contiguous, cuda_scorer};
use crate::tensor::{Elem, Place, Tensor};

fn err<T>(msg: String) -> PyResult<T> {
    Err(PyValueError::new_err(msg))
}

/// The checked inputs of a call: queries `[A, Lq, d]`, documents padded `[B, Ld, d]` (with
/// optional int64 lengths) or packed `[T, d]` (with int64 `cu_seqlens`), all on one GPU.
struct Inputs {
    args: TrainArgs,
    ordinal: usize,
    _held: Vec<Tensor>,
}

fn inputs(
    queries: &Bound<'_, PyAny>,
    docs: &Bound<'_, PyAny>,
    cu_seqlens: Option<&Bound<'_, PyAny>>,
    doc_lengths: Option<&Bound<'_, PyAny>>,
    group: usize,
    split_checked: bool,
) -> PyResult<Inputs> {
    let q = Tensor::import(queries, "queries")?;
    let d = Tensor::import(docs, "documents")?;
    q.expect_ndim(&[3], "queries as [A, Lq, d]")?;
    let ordinal = match q.place {
        Place::Cuda(n) => n,
        Place::Cpu => return err("queries: the training kernels take CUDA tensors".into()),
    };
    let (qt, dt) = (q.float()?, d.float()?);
    if !q.rows_contiguous() || !d.rows_contiguous() {
        return err("each token row must be contiguous (stride 1 along d)".into());
    }
    let mut held = Vec::new();
    let (layout, dim, row_stride) = match (cu_seqlens, doc_lengths) {
        (Some(_), Some(_)) => return err("give cu_seqlens or doc_lengths, not both".into()),
        (Some(o), None) => {
            d.expect_ndim(&[2], "packed documents as [T, d]")?;
            let o = Tensor::import(o, "cu_seqlens")?;
            int64_1d(&o)?;
            let layout = RawLayout::Packed {
                offsets: o.ptr,
                docs: o.shape[0].saturating_sub(1),
                rows: d.shape[0],
            };
            held.push(o);
            (layout, d.shape[1], d.strides[0])
        }
        (None, l) => {
            d.expect_ndim(&[3], "padded documents as [B, Ld, d]")?;
            let lengths = match l {
                Some(l) => {
                    let l = Tensor::import(l, "doc_lengths")?;
                    int64_1d(&l)?;
                    if l.shape[0] != d.shape[0] {
                        return err(format!(
                            "doc_lengths: {} for {} documents",
                            l.shape[0], d.shape[0]
                        ));
                    }
                    let ptr = l.ptr;
                    held.push(l);
                    ptr
                }
                None => 0,
            };
            let layout = RawLayout::Padded {
                docs: d.shape[0],
                max_len: d.shape[1],
                batch_stride: d.strides[0],
                lengths,
            };
            (layout, d.shape[2], d.strides[1])
        }
    };
    if dim != q.shape[2] {
        return err(format!(
            "dimension mismatch: queries have d = {}, documents d = {dim}",
            q.shape[2]
        ));
    }
    let args = TrainArgs {
        queries: TrainQueries {
            tokens: q.ptr,
            dtype: qt,
            dim,
            num: q.shape[0],
            len: q.shape[1],
            batch_stride: q.strides[0],
            row_stride: q.strides[1],
        },
        docs: RawDocs {
            tokens: d.ptr,
            dtype: dt,
            dim,
            row_stride,
            layout,
            split_ok: split_checked,
        },
        group,
    };
    if let Some(why) = tilemaxsim::cuda::train_supported(&args) {
        return err(format!(
            "the training kernels do not take these tensors: {why}"
        ));
    }
    held.push(q);
    held.push(d);
    for t in &held {
        if t.place != Place::Cuda(ordinal) {
            return err(format!(
                "{}: on {}, the queries on cuda:{ordinal}",
                t.name, t.place
            ));
        }
    }
    Ok(Inputs {
        args,
        ordinal,
        _held: held,
    })
}

fn int64_1d(t: &Tensor) -> PyResult<()> {
    t.expect_ndim(&[1], "a 1-D int64 tensor")?;
    if t.elem != Elem::I64 || !contiguous(t) {
        return err(format!("{}: needs a contiguous int64 tensor", t.name));
    }
    Ok(())
}

/// `t`, checked to be `n` contiguous values of `elem` on GPU `ordinal`.
fn output(
    obj: &Bound<'_, PyAny>,
    name: &'static str,
    elem: Elem,
    n: usize,
    ordinal: usize,
) -> PyResult<Tensor> {
    let t = Tensor::import(obj, name)?;
    if t.elem != elem || t.numel() != n || !contiguous(&t) || t.place != Place::Cuda(ordinal) {
        return err(format!(
            "{name}: needs {n} contiguous values of {elem:?} on cuda:{ordinal}, got shape {:?} on {}",
            t.shape, t.place
        ));
    }
    Ok(t)
}

/// Scores into `out` (float32, `[A, B]`, or `[B]` with `group`) and, given `argmax` (int32,
/// `[A, B, Lq]` or `[B, Lq]`), each query token's best document token. With `group` = K > 0
/// document b is scored against query b // K only. Queries past 32 tokens add into `out`,
/// which must then hold zeros. float32 tensors need `split_checked`: the caller has checked
/// that the documents lie in the split range (`_split.split_checked`).
#[pyfunction]
#[pyo3(signature = (queries, docs, out, argmax=None, *, cu_seqlens=None, doc_lengths=None, group=0, split_checked=false, stream=0))]
#[allow(clippy::too_many_arguments)]
pub fn train_forward(
    py: Python<'_>,
    queries: &Bound<'_, PyAny>,
    docs: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    argmax: Option<&Bound<'_, PyAny>>,
    cu_seqlens: Option<&Bound<'_, PyAny>>,
    doc_lengths: Option<&Bound<'_, PyAny>>,
    group: usize,
    split_checked: bool,
    stream: usize,
) -> PyResult<()> {
    let inp = inputs(queries, docs, cu_seqlens, doc_lengths, group, split_checked)?;
    let pairs = inp.args.pairs();
    let out = output(out, "out", Elem::Float(DType::F32), pairs, inp.ordinal)?;
    let argmax = argmax
        .map(|a| {
            output(
                a,
                "argmax",
                Elem::I32,
                pairs * inp.args.queries.len,
                inp.ordinal,
            )
        })
        .transpose()?;
    let scorer = cuda_scorer(inp.ordinal)?;
    let call = Send2((inp, out, argmax));
    py.detach(move || {
        let (inp, out, argmax) = &call.0;
        // SAFETY: every pointer comes from a DLPack tensor on this device, held alive by `call`
        // for the call, of the shapes checked above; the stream is the caller's current stream.
        unsafe {
            scorer.train_forward(
                Some(stream as cudarc::driver::sys::CUstream),
                &inp.args,
                out.ptr,
                argmax.as_ref().map_or(0, |a| a.ptr),
            )
        }
        .map_err(to_py)
    })
}

/// The queries' and documents' gradients (`dq`: `[A, Lq, d]` of the queries' dtype; `dd`: the
/// documents' shape and dtype, contiguous; either may be None) from the scores' gradient
/// `grad` (float32, shaped as the scores) and `train_forward`'s `argmax`. A padded `dd` is
/// written whole (zeros past each length); a packed one only at its documents' rows.
#[pyfunction]
#[pyo3(signature = (queries, docs, argmax, grad, dq=None, dd=None, *, cu_seqlens=None, doc_lengths=None, group=0, split_checked=false, stream=0))]
#[allow(clippy::too_many_arguments)]
pub fn train_backward(
    py: Python<'_>,
    queries: &Bound<'_, PyAny>,
    docs: &Bound<'_, PyAny>,
    argmax: &Bound<'_, PyAny>,
    grad: &Bound<'_, PyAny>,
    dq: Option<&Bound<'_, PyAny>>,
    dd: Option<&Bound<'_, PyAny>>,
    cu_seqlens: Option<&Bound<'_, PyAny>>,
    doc_lengths: Option<&Bound<'_, PyAny>>,
    group: usize,
    split_checked: bool,
    stream: usize,
) -> PyResult<()> {
    let inp = inputs(queries, docs, cu_seqlens, doc_lengths, group, split_checked)?;
    let (pairs, q, d) = (inp.args.pairs(), inp.args.queries, inp.args.docs);
    let argmax = output(argmax, "argmax", Elem::I32, pairs * q.len, inp.ordinal)?;
    let grad = output(grad, "grad", Elem::Float(DType::F32), pairs, inp.ordinal)?;
    let dq = dq
        .map(|t| {
            output(
                t,
                "dq",
                Elem::Float(q.dtype),
                q.num * q.len * q.dim,
                inp.ordinal,
            )
        })
        .transpose()?;
    let d_rows = match d.layout {
        RawLayout::Packed { rows, .. } => rows,
        RawLayout::Padded { docs, max_len, .. } => docs * max_len,
    };
    let dd = dd
        .map(|t| output(t, "dd", Elem::Float(d.dtype), d_rows * d.dim, inp.ordinal))
        .transpose()?;
    let scorer = cuda_scorer(inp.ordinal)?;
    let call = Send2((inp, argmax, grad, dq, dd));
    py.detach(move || {
        let (inp, argmax, grad, dq, dd) = &call.0;
        let ptr = |t: &Option<Tensor>| t.as_ref().map_or(0, |t| t.ptr);
        // SAFETY: as in `train_forward`.
        unsafe {
            scorer.train_backward(
                Some(stream as cudarc::driver::sys::CUstream),
                &inp.args,
                argmax.ptr,
                grad.ptr,
                ptr(dq),
                ptr(dd),
            )
        }
        .map_err(to_py)
    })
}

/// A call's tensors handed to the thread that runs without the GIL.
struct Send2<T>(T);
// SAFETY: plain metadata and DLPack owners, whose deleters may run on any thread (DLPack
// requires it); nothing touches Python state.
unsafe impl<T> Send for Send2<T> {}

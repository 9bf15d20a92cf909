//! The padded pitch on the device: an uploaded corpus's rows re-laid at the plan's wider width
//! (`pad_corpus`, after `DeviceCorpus::upload`; `plan::stored_dim` decides, through
//! `CudaScorer::stored_width`), a streamed chunk's as it is copied in (`launch_repitch`, from
//! the index's staging), and queries
//! re-pitched to a padded corpus's width (`queries_at`) at their first call against it, kept
//! beside them. The padding is zeros on both sides, so every product, and so every score, is
//! the unpadded one.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, PushKernelArg};

use super::context::GpuContext;
use super::device::drv;
use super::launch::stride_grid;
use super::memory::{DeviceBlocks, DeviceCorpus, DeviceQueries, Mem, RepitchedRows};
use crate::error::{Error, Result};

/// Enqueue on `stream` the copy of `rows` rows of `from` 16-bit units at `src` into rows of `to`
/// ≥ `from` units at `dst`, zeros past `from` (`repitch_rows`).
///
/// # Safety
/// `src` must hold `rows` × `from` units and `dst` `rows` × `to`, device memory of this context
/// usable on `stream`, until the work enqueued on it has run.
pub(super) unsafe fn launch_repitch(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    src: u64,
    dst: u64,
    rows: usize,
    from: usize,
    to: usize,
) -> Result<()> {
    let (rows_arg, from_arg, to_arg) = (rows as i64, from as i32, to as i32);
    let mut b = stream.launch_builder(&gpu.kernels.repitch_rows);
    b.arg(&src)
        .arg(&dst)
        .arg(&rows_arg)
        .arg(&from_arg)
        .arg(&to_arg);
    let cfg = stride_grid(gpu, (rows * to) as u64, 256);
    // SAFETY: the arguments match `repitch_rows` in kernels/utility.cu; the buffers are the
    // caller's (this function's contract).
    unsafe { b.launch(cfg) }.map_err(drv("repitch launch"))?;
    Ok(())
}

/// [`launch_repitch`] on the context's stream into a new buffer; `None` where the device has
/// no room for it.
fn repitch(
    gpu: &GpuContext,
    src: u64,
    rows: usize,
    from: usize,
    to: usize,
) -> Result<Option<CudaSlice<u16>>> {
    let units = rows * to;
    if !gpu.fits(2 * units)? {
        return Ok(None);
    }
    let stream = &gpu.stream;
    // SAFETY: `repitch_rows` writes every unit (grid-stride over rows × to).
    let Ok(dst) = (unsafe { stream.alloc::<u16>(units.max(1)) }) else {
        return Ok(None);
    };
    let dst_ptr = dst.device_ptr(stream).0;
    // SAFETY: `src` holds `rows` × `from` units (the caller's buffer, alive while its work runs),
    // `dst` `rows` × `to`, both on the context's stream.
    unsafe { launch_repitch(gpu, stream, src, dst_ptr, rows, from, to) }?;
    Ok(Some(dst))
}

/// Re-lay an uploaded corpus's rows at width `pitch` (`CudaScorer::stored_width`) where that
/// is past theirs (where the device has no room for the padded copy beside the rows, the corpus
/// stays as it is: correct, on the d's own kernel).
pub(super) fn pad_corpus(gpu: &GpuContext, corpus: &mut DeviceCorpus, pitch: usize) -> Result<()> {
    if pitch <= corpus.width || corpus.bytes == 0 {
        return Ok(());
    }
    let unit = corpus.dtype.size() / 2;
    let rows = corpus.bytes / (corpus.width * corpus.dtype.size());
    let src = corpus.tokens.device_ptr(&gpu.stream).0;
    let Some(padded) = repitch(gpu, src, rows, corpus.width * unit, pitch * unit)? else {
        return Ok(());
    };
    // The copy is done before the unpadded rows are freed, and before other streams (a
    // searcher's) score the corpus.
    gpu.synchronize()?;
    let bytes = padded.len() * 2;
    // SAFETY: a u16 buffer read as its bytes, owned by the corpus from here on.
    let padded = unsafe { gpu.stream.upgrade_device_ptr::<u8>(padded.leak(), bytes) };
    corpus.tokens = Mem::owned(padded);
    corpus.width = pitch;
    corpus.bytes = bytes;
    Ok(())
}

/// `queries` as a corpus stored at width `dim` (past theirs) reads them: a view of their rows
/// and blocks re-pitched to `dim`, made at the first call at that width (on the context's
/// stream, waited for) and kept beside the queries. The view borrows: it must not outlive
/// `queries`, and neither may the work enqueued with it.
pub(super) fn queries_at(
    gpu: &GpuContext,
    queries: &DeviceQueries,
    dim: usize,
) -> Result<DeviceQueries> {
    let from = queries.dim;
    if dim < from {
        return Err(Error::Argument(format!(
            "queries of d = {from} against rows stored {dim} wide"
        )));
    }
    let stream = &gpu.stream;
    let mut made = queries
        .repitched
        .0
        .lock()
        .map_err(|_| Error::Argument("the queries' re-pitched rows were poisoned".into()))?;
    if !made.iter().any(|r| r.dim == dim) {
        let oom = || Error::OutOfMemory(format!("queries re-pitched to d = {dim} on the device"));
        let tokens = match &queries.tokens {
            Some(t) => {
                let rows = t.len() / from.max(1);
                let src = t.device_ptr(stream).0;
                let u = repitch(gpu, src, rows, 2 * from, 2 * dim)?.ok_or_else(oom)?;
                // SAFETY: a u16 buffer of 2 × rows × dim units read as its f32s.
                Some(unsafe { stream.upgrade_device_ptr::<f32>(u.leak(), rows * dim) })
            }
            None => None,
        };
        let blocks = match &queries.mma {
            Some(b) => {
                let rows = b.tokens.len() / from.max(1);
                let src = b.tokens.device_ptr(stream).0;
                Some(repitch(gpu, src, rows, from, dim)?.ok_or_else(oom)?)
            }
            None => None,
        };
        gpu.synchronize()?;
        made.push(RepitchedRows {
            dim,
            tokens,
            blocks,
        });
    }
    let rows = made
        .iter()
        .find(|r| r.dim == dim)
        .ok_or_else(|| Error::Argument("re-pitched queries missing".into()))?;
    // SAFETY (every view): buffers of `queries` or of its `repitched` (never removed), alive
    // while the queries are, which the view and its work must not outlive (this function's
    // contract).
    let mma = match (&queries.mma, &rows.blocks) {
        (Some(b), Some(t)) => Some(DeviceBlocks {
            dtype: b.dtype,
            blocks: b.blocks,
            tokens: unsafe { view(stream, t) },
            rows: unsafe { view(stream, &b.rows) },
            start: unsafe { view(stream, &b.start) },
        }),
        _ => None,
    };
    Ok(DeviceQueries {
        tokens: rows.tokens.as_ref().map(|t| unsafe { view(stream, t) }),
        offsets: unsafe { view(stream, &queries.offsets) },
        len: queries.len,
        dim,
        dtype: queries.dtype,
        repitched: Default::default(),
        longest: queries.longest,
        mma,
        _meta: None,
    })
}

/// A borrowed view of `s` (not freed on drop).
///
/// # Safety
/// `s` must outlive the view and the work enqueued with it.
unsafe fn view<T>(stream: &Arc<CudaStream>, s: &CudaSlice<T>) -> Mem<T> {
    // SAFETY: `s` holds `s.len()` elements in this context (the caller's contract for how long).
    unsafe { Mem::borrowed(stream, s.device_ptr(stream).0, s.len()) }
}

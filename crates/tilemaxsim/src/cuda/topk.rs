//! Top-k on the device: the two selection kernels of `kernels/topk.cu` launched per row of
//! scores, their scratch buffers, and the hits they give, best first with ties to the lower index.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut, LaunchConfig, PushKernelArg};

use super::context::GpuContext;
use super::device::drv;
use super::memory::grow;
use crate::error::{Error, Result};
use crate::topk::{Hit, rank_order};

/// Threads per block and scores per segment of the top-k kernels (kernels/topk.cu).
pub(super) const TOPK_THREADS: u32 = 1024;
pub(super) const TOPK_SEGMENT: usize = 8192;

/// The `k` best of each of the `rows` rows of `n` scores in `scores` (row-major), selected on
/// the device (kernels/topk.cu) and returned best first, ties to the lower index. Document
/// indices are offset by `first_doc`. Synchronizes the stream.
pub(super) fn select(
    gpu: &GpuContext,
    scratch: &Mutex<TopKBuffers>,
    scores: &CudaSlice<f32>,
    rows: usize,
    n: usize,
    k: usize,
    first_doc: usize,
) -> Result<Vec<Vec<Hit>>> {
    let k = k.min(n);
    if rows == 0 || k == 0 {
        return Ok(vec![Vec::new(); rows]);
    }
    let stream = &gpu.stream;
    // SAFETY: enqueue writes all rows × k entries.
    let mut index = unsafe { stream.alloc::<i32>(rows * k) }.map_err(drv("top-k buffer"))?;
    let mut best = unsafe { stream.alloc::<f32>(rows * k) }.map_err(drv("top-k buffer"))?;
    enqueue(
        gpu,
        scratch,
        scores,
        rows,
        n,
        k,
        &mut index.slice_mut(..),
        &mut best.slice_mut(..),
    )?;
    let index = stream.clone_dtoh(&index).map_err(drv("top-k download"))?;
    let best = stream.clone_dtoh(&best).map_err(drv("top-k download"))?;
    gpu.synchronize()?;
    Ok(hits_from(&index, &best, k, first_doc))
}

/// Enqueue the top-k selection of each of the `rows` rows of `n` scores: `rows × k` (index,
/// score) pairs, unsorted within a row, into `index` and `best`. Needs `1 <= k <= n`.
/// Asynchronous. Rows longer than one segment are split over many blocks (`topk_segments`)
/// and their candidates merged (`topk_merge`) through `scratch`, kept from call to call.
#[allow(clippy::too_many_arguments)]
pub(super) fn enqueue(
    gpu: &GpuContext,
    scratch: &Mutex<TopKBuffers>,
    scores: &CudaSlice<f32>,
    rows: usize,
    n: usize,
    k: usize,
    index: &mut CudaViewMut<'_, i32>,
    best: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let segments = n.div_ceil(TOPK_SEGMENT);
    if k == 0
        || k > n
        || scores.len() < rows * n
        || index.len() < rows * k
        || best.len() < rows * k
        || n > i32::MAX as usize
        || rows > i32::MAX as usize
        || segments > 65_535
    {
        return Err(Error::Argument(format!(
            "top-{k} over {rows} × {n} scores does not fit the buffers or the launch"
        )));
    }
    let launch = |rows: usize, segments: usize| LaunchConfig {
        grid_dim: (rows as u32, segments as u32, 1),
        block_dim: (TOPK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (n32, k32) = (n as i32, k as i32);
    if segments == 1 {
        let mut b = gpu.stream.launch_builder(&gpu.kernels.topk_segments);
        b.arg(scores)
            .arg(&n32)
            .arg(&n32)
            .arg(&k32)
            .arg(index)
            .arg(best);
        // SAFETY: matches `topk_segments` (kernels/topk.cu) with one segment of n <=
        // TOPK_SEGMENT scores per row: reads rows × n, writes rows × min(k, n) = rows × k.
        return unsafe { b.launch(launch(rows, 1)) }
            .map(|_| ())
            .map_err(drv("topk_segments launch"));
    }
    let kk = k.min(TOPK_SEGMENT);
    let m = segments * kk;
    // A poisoned lock only means another selection panicked; the buffers are rewritten.
    let mut scratch = scratch.lock().unwrap_or_else(|e| e.into_inner());
    let (ci, cs) = scratch.reserve(&gpu.stream, rows * m)?;
    let (seg32, m32) = (TOPK_SEGMENT as i32, m as i32);
    let mut b = gpu.stream.launch_builder(&gpu.kernels.topk_segments);
    b.arg(scores)
        .arg(&n32)
        .arg(&seg32)
        .arg(&k32)
        .arg(&mut *ci)
        .arg(&mut *cs);
    // SAFETY: matches `topk_segments`: rows × segments blocks, each writing min(k, SEGMENT)
    // candidates, rows × m in all, which the scratch holds.
    unsafe { b.launch(launch(rows, segments)) }.map_err(drv("topk_segments launch"))?;
    let mut b = gpu.stream.launch_builder(&gpu.kernels.topk_merge);
    b.arg(&*ci)
        .arg(&*cs)
        .arg(&m32)
        .arg(&k32)
        .arg(index)
        .arg(best);
    // SAFETY: matches `topk_merge`: reads rows × m candidates, at least k real per row
    // (k <= n), writes rows × k.
    unsafe { b.launch(launch(rows, 1)) }
        .map(|_| ())
        .map_err(drv("topk_merge launch"))
}

/// Device (index, score) buffers of top-k results or candidates, grown as needed and reused.
#[derive(Default)]
pub(crate) struct TopKBuffers {
    index: Option<CudaSlice<i32>>,
    score: Option<CudaSlice<f32>>,
}

impl TopKBuffers {
    /// At least `len` (index, score) pairs, uninitialized.
    pub(crate) fn reserve(
        &mut self,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<(&mut CudaSlice<i32>, &mut CudaSlice<f32>)> {
        let index = grow(stream, &mut self.index, len)?;
        let score = grow(stream, &mut self.score, len)?;
        Ok((index, score))
    }

    /// The first `len` pairs, copied to the host (the caller synchronizes the stream before
    /// reading them).
    pub(crate) fn download(
        &self,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<(Vec<i32>, Vec<f32>)> {
        let (Some(index), Some(score)) = (&self.index, &self.score) else {
            return Err(Error::DeviceUnavailable("top-k buffers missing".into()));
        };
        let mut ix = vec![0i32; len];
        let mut sc = vec![0f32; len];
        stream
            .memcpy_dtoh(&index.slice(..len), &mut ix)
            .map_err(drv("top-k download"))?;
        stream
            .memcpy_dtoh(&score.slice(..len), &mut sc)
            .map_err(drv("top-k download"))?;
        Ok((ix, sc))
    }
}

/// The hits of each row of `k` (index, score) pairs from the top-k kernels, best first, with
/// document indices offset by `first_doc`.
pub fn hits_from(index: &[i32], score: &[f32], k: usize, first_doc: usize) -> Vec<Vec<Hit>> {
    index
        .chunks(k.max(1))
        .zip(score.chunks(k.max(1)))
        .map(|(ix, sc)| {
            let mut hits: Vec<Hit> = ix
                .iter()
                .zip(sc)
                .map(|(&doc, &score)| Hit {
                    doc: first_doc + doc.max(0) as usize,
                    score,
                })
                .collect();
            hits.sort_unstable_by(rank_order);
            hits
        })
        .collect()
}

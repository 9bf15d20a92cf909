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
/// Candidates a block of `topk_merge_groups` merges at least (and 8·k where that is more, so
/// every group but a row's last has more than k real candidates).
const MERGE_GROUP: usize = 65_536;

/// The candidates of a row at each step of the merge, as (m, real): `m` candidates, the first
/// `real` of them real and padding after. First the segments' (`topk_segments` pads only its
/// last segment), then, while more than two groups' worth are left, each group's top k
/// (`topk_merge_groups`: its last group alone may pad). Needs `1 <= k <= n`. Returns the group
/// size and the steps, the segments' first.
fn merge_levels(n: usize, k: usize) -> (usize, Vec<(usize, usize)>) {
    let segments = n.div_ceil(TOPK_SEGMENT);
    let kk = k.min(TOPK_SEGMENT);
    let mut m = segments * kk;
    let mut real = (segments - 1) * kk + k.min(n - (segments - 1) * TOPK_SEGMENT);
    let group = MERGE_GROUP.max(8 * k);
    let mut steps = vec![(m, real)];
    while m > 2 * group {
        let groups = m.div_ceil(group);
        real = (groups - 1) * k + k.min(real.saturating_sub((groups - 1) * group));
        m = groups * k;
        steps.push((m, real));
    }
    (group, steps)
}

/// The `k` best of each of the `rows` rows of `n` scores in `scores` (row-major), selected on
/// the device (kernels/topk.cu) and returned best first, ties to the lower index. Document
/// indices are offset by `first_doc`. Synchronizes the stream.
pub(super) fn select(
    gpu: &GpuContext,
    scratch: &Mutex<TopKScratch>,
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
    scratch: &Mutex<TopKScratch>,
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
    let (group, steps) = merge_levels(n, k);
    let (m, _) = steps[0];
    // A poisoned lock only means another selection panicked; the buffers are rewritten.
    let mut scratch = scratch.lock().unwrap_or_else(|e| e.into_inner());
    let TopKScratch { candidates, merged } = &mut *scratch;
    let (mut ci, mut cs) = candidates.reserve(&gpu.stream, rows * m)?;
    let seg32 = TOPK_SEGMENT as i32;
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
    // Many candidates: each group's top k first, step by step, the two buffers taking turns
    // (the first group step writes the most the second buffer holds; later ones write less).
    if let Some(&(m1, _)) = steps.get(1) {
        let (mut ni, mut ns) = merged.reserve(&gpu.stream, rows * m1)?;
        for w in steps.windows(2) {
            let ((m, real), (next_m, _)) = (w[0], w[1]);
            let (m32, real32, group32) = (m as i32, real as i32, group as i32);
            let mut b = gpu.stream.launch_builder(&gpu.kernels.topk_merge_groups);
            b.arg(&*ci)
                .arg(&*cs)
                .arg(&m32)
                .arg(&real32)
                .arg(&group32)
                .arg(&k32)
                .arg(&mut *ni)
                .arg(&mut *ns);
            // SAFETY: matches `topk_merge_groups`: reads rows × m candidates (each row's first
            // `real` real, padding after), writes rows × (next_m / k groups) × k = rows ×
            // next_m, which the other buffer holds (reserved for the largest, the first).
            unsafe { b.launch(launch(rows, next_m / k)) }
                .map_err(drv("topk_merge_groups launch"))?;
            std::mem::swap(&mut ci, &mut ni);
            std::mem::swap(&mut cs, &mut ns);
        }
    }
    let (m, real) = steps[steps.len() - 1];
    debug_assert!(real >= k);
    let m32 = m as i32;
    let mut b = gpu.stream.launch_builder(&gpu.kernels.topk_merge);
    b.arg(&*ci)
        .arg(&*cs)
        .arg(&m32)
        .arg(&k32)
        .arg(index)
        .arg(best);
    // SAFETY: matches `topk_merge`: reads rows × m candidates, at least k real per row
    // (k <= n, and each level keeps k real of its first group), writes rows × k.
    unsafe { b.launch(launch(rows, 1)) }
        .map(|_| ())
        .map_err(drv("topk_merge launch"))
}

/// The scratch of a top-k selection: the segments' candidates and, where they are many, the
/// groups' merged ones (the two take turns level by level).
#[derive(Default)]
pub(crate) struct TopKScratch {
    candidates: TopKBuffers,
    merged: TopKBuffers,
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// kernels/topk.cu's 64-bit key of a candidate: the score's order-preserving key (NaN
    /// lowest, -0 == +0), then the index inverted (ties to the lower index); padding is 0.
    fn key(index: i32, score: f32) -> u64 {
        let mut b = score.to_bits();
        let k32 = if (b & 0x7fff_ffff) > 0x7f80_0000 {
            0
        } else {
            if b == 0x8000_0000 {
                b = 0;
            }
            if b & 0x8000_0000 != 0 {
                !b
            } else {
                b | 0x8000_0000
            }
        };
        ((k32 as u64) << 32) | (!index) as u32 as u64
    }
    const PAD: (i32, f32) = (-1, f32::NAN);
    fn top(c: &[(i32, f32)], k: usize) -> Vec<(i32, f32)> {
        let mut v = c.to_vec();
        v.sort_by_key(|&(i, s)| std::cmp::Reverse(key(i, s)));
        v.truncate(k);
        v
    }

    /// The kernels' steps modelled on the host as `enqueue` plans them (`merge_levels`): every
    /// segment's top min(k, len) padded to min(k, SEGMENT), each group step over the real
    /// candidates only, then the last merge over all. Its set is the row's top k, for rows and
    /// k where the groups take zero, one and two steps and the last segment and group pad.
    #[test]
    fn group_steps_keep_the_row_top_k() {
        let mut r = StdRng::seed_from_u64(5);
        for (n, k) in [
            (20_000, 1000),
            (300_000, 9000),
            (1_200_007, 1000),
            (1_200_007, 4096),
            (4_500_001, 4096),
            (9_000_000, 4096),
            (70_000, 3),
        ] {
            let row: Vec<f32> = (0..n)
                .map(|i| match i % 7 {
                    0 => r.random_range(0..5) as f32,
                    1 if i % 91 == 0 => [0.0, -0.0, f32::NAN, f32::NEG_INFINITY][i % 4],
                    _ => r.random_range(-1.0f32..1.0),
                })
                .collect();
            let (group, steps) = merge_levels(n, k);
            let kk = k.min(TOPK_SEGMENT);
            let mut cand: Vec<(i32, f32)> = Vec::new();
            for (s, seg) in row.chunks(TOPK_SEGMENT).enumerate() {
                let items: Vec<(i32, f32)> = seg
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| ((s * TOPK_SEGMENT + i) as i32, v))
                    .collect();
                let mut t = top(&items, k.min(seg.len()));
                t.resize(kk, PAD);
                cand.extend(t);
            }
            assert_eq!(
                (cand.len(), cand.iter().filter(|c| c.0 >= 0).count()),
                steps[0]
            );
            for w in steps.windows(2) {
                let ((m, real), (next_m, next_real)) = (w[0], w[1]);
                assert_eq!(cand.len(), m);
                assert!(
                    cand[..real].iter().all(|c| c.0 >= 0) && cand[real..].iter().all(|c| c.0 < 0)
                );
                let mut next = Vec::new();
                for first in (0..m).step_by(group) {
                    let len = real.saturating_sub(first).min(group);
                    let mut t = top(&cand[first..first + len], k);
                    t.resize(k, PAD);
                    next.extend(t);
                }
                assert_eq!(
                    (next.len(), next.iter().filter(|c| c.0 >= 0).count()),
                    (next_m, next_real)
                );
                cand = next;
            }
            let (m, real) = steps[steps.len() - 1];
            assert!(m <= 2 * group && real >= k, "n {n} k {k}: {steps:?}");
            let got: Vec<u64> = top(&cand, k).iter().map(|&(i, s)| key(i, s)).collect();
            let items: Vec<(i32, f32)> = row
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as i32, v))
                .collect();
            let want: Vec<u64> = top(&items, k).iter().map(|&(i, s)| key(i, s)).collect();
            assert_eq!(got, want, "n {n} k {k}: {} steps", steps.len() - 1);
        }
        // Steps at the IVF's shape: 8.8M documents, the top 4,096 (4.4M candidates).
        let (_, steps) = merge_levels(8_800_000, 4096);
        assert_eq!(
            steps.iter().map(|s| s.0).collect::<Vec<_>>(),
            [4_403_200, 278_528, 20_480]
        );
    }
}

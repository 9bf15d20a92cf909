//! [`GpuIvfSearch`]: IVF search over one index segment's residual codes, every stage on one GPU
//! (kernels/ivf.cu), for a batch of queries at once:
//! 1. every centroid's score against every query row: the residual kernels' per-call table
//!    (`codec_centroid_scores`, rounded to f16 as those kernels use it);
//! 2. each row's `nprobe` best centroids (`ivf_probe`, `ivf_probe_merge`);
//! 3. the union of their IVF lists, a bitmap of candidates per query (`ivf_mark`);
//! 4. each candidate's centroid-interaction score `Σ_i max_t cs[id_t][i]` (`ivf_interaction`);
//! 5. the `ndocs` best by that score (the top-k kernels), rescored on their codes by the fused
//!    residual kernel; the best `k` are the hits.
//!
//! The codes are held on the GPU (resident) or streamed: only the first stages' arrays stay
//! there and each batch's candidates are uploaded to be rescored (`ivf_codes.rs`).
//!
//! These are PLAID's stages and the CPU's (`index::probe`), which use f32 centroid scores: near
//! ties may probe or keep other candidates there. With `nprobe` ≥ K every document is a
//! candidate (stages 2–3 are skipped), and with `ndocs` ≥ N every one is rescored: the hits are
//! exhaustive search's.

use std::borrow::Cow;
use std::ops::Range;

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::codes::CodecQueries;
use super::context::GpuContext;
use super::device::drv;
use super::functions::IVF_PROBE_LISTS;
use super::ivf_codes::HeldCodes;
use super::launch::codec as codec_launch;
use super::scorer::CudaScorer;
use crate::codec::{Codec, CompressedCorpus};
use crate::error::{Error, Result};
use crate::index::{Ivf, Probe};
use crate::matrix::Matrix;
use crate::scorer::{Scorer, check_queries};
use crate::search::{Residency, Searcher};
use crate::topk::Hit;

/// The most centroids a query row probes on the GPU below K (`IVF_MAX_PROBE` of the kernels);
/// from K on, every document is a candidate.
pub const MAX_GPU_NPROBE: usize = 64;
/// The approximate scores one pass holds (`queries × documents` floats); larger batches are
/// taken in groups.
const APPROX_PER_PASS: usize = 1 << 26;
/// A launch grid's y extent: query blocks (`ivf_probe`) and queries (`ivf_interaction`).
const MAX_GRID_Y: usize = 65_535;
/// The bytes of centroid scores and probe lists one pass holds at most (`block_bytes` a query
/// block).
const SCORES_PER_PASS: usize = 1 << 30;
/// The most 32-entry steps a warp of `ivf_mark` takes through the longest IVF list (lists are
/// skewed: one warp a list left the longest one's warp working alone).
const MARK_STEPS: usize = 16;
/// The most warps a list is marked by.
const MAX_MARK_SPLIT: usize = 64;
/// Centroids an `ivf_probe` warp scans at least (and 32 · nprobe where that is more, so that
/// its lists stay under a fourth of the centroid scores' bytes).
const PROBE_CHUNK: usize = 256;
/// Lists an `ivf_probe_merge` lane merges into one at each step.
const PROBE_FAN: usize = 32;

/// The first stages' results for a batch of queries (for checks against a reference).
#[derive(Clone, Debug, PartialEq)]
pub struct FirstStages {
    /// Per query, per row: the probed centroids, best first (empty when every centroid is).
    pub probed: Vec<Vec<Vec<u32>>>,
    /// Per query, per document: the centroid-interaction score, -inf where not a candidate.
    pub approx: Vec<Vec<f32>>,
}

/// The IVF stages of one index segment on a GPU (see the module's text).
pub struct GpuIvfSearch<'a> {
    /// The segment's codes (a shard's own slice of them in `ShardedIvfSearch`).
    codes: Cow<'a, CompressedCorpus>,
    probe: Probe,
    num_centroids: usize,
    scorer: CudaScorer,
    held: HeldCodes,
    /// The IVF as compressed rows: `[K + 1]` offsets, the lists' documents.
    ivf_offsets: CudaSlice<i64>,
    ivf_docs: CudaSlice<u32>,
    /// Warps a probed centroid's list is marked by (`ivf_mark`): the longest list in steps of
    /// at most `MARK_STEPS` a warp.
    mark_split: usize,
}

/// What a batch's first stages leave on the device.
struct Staged {
    approx: CudaSlice<f32>,
    probed: Option<CudaSlice<i32>>,
    /// The centroid scores, `[blocks][K][32]` (the rescoring reads them again).
    cs: CudaSlice<u16>,
    /// Each query's first block, and the blocks' end.
    qblocks: Vec<i32>,
}

impl<'a> GpuIvfSearch<'a> {
    /// Upload `codes` (residual, with `ivf`'s centroids; held as `residency` says) and `ivf`
    /// to GPU `ordinal`. Fails with an argument error where the GPU stages do not apply
    /// (`nprobe` in `MAX_GPU_NPROBE + 1 .. K`, or a d no fused residual kernel reads), so the
    /// caller can run them on the CPU.
    pub fn new(
        codes: &'a CompressedCorpus,
        ivf: &Ivf,
        probe: Probe,
        ordinal: usize,
        residency: Residency,
    ) -> Result<Self> {
        Self::with_codes(Cow::Borrowed(codes), ivf, probe, ordinal, residency)
    }

    /// [`GpuIvfSearch::new`] of codes it may own (a shard's slice).
    pub(super) fn with_codes(
        codes: Cow<'a, CompressedCorpus>,
        ivf: &Ivf,
        probe: Probe,
        ordinal: usize,
        residency: Residency,
    ) -> Result<Self> {
        let Codec::Residual(r) = codes.codec() else {
            return Err(Error::Argument(
                "IVF search needs a residual (PLAID) corpus".into(),
            ));
        };
        let k = r.num_centroids();
        if ivf.num_centroids() != k || codes.aux().is_none() {
            return Err(Error::Argument(format!(
                "the IVF has {} centroids, the codes {k}",
                ivf.num_centroids()
            )));
        }
        if probe.nprobe == 0 || probe.ndocs == 0 {
            return Err(Error::Argument(
                "nprobe and ndocs must be at least 1".into(),
            ));
        }
        if probe.nprobe > MAX_GPU_NPROBE && probe.nprobe < k {
            return Err(Error::Argument(format!(
                "nprobe {} is over the GPU's {MAX_GPU_NPROBE} (and below K = {k})",
                probe.nprobe
            )));
        }
        // (the kernels index a bitmap word's 32 documents in i32)
        if codes.len() > i32::MAX as usize - 64 {
            return Err(Error::Argument(format!(
                "{} documents in one segment is over the GPU stages' 2^31",
                codes.len()
            )));
        }
        let scorer = CudaScorer::new(ordinal)?;
        // A pass's approximate scores and candidate bitmaps, centroid scores and probe lists.
        let pass_bytes = APPROX_PER_PASS * 4
            + APPROX_PER_PASS / 8
            + max_blocks(k, probe.nprobe) * block_bytes(k, probe.nprobe);
        let held = HeldCodes::new(&scorer, &codes, r, residency, pass_bytes)?;
        let stream = &scorer.gpu().stream;
        let (offsets, docs) = ivf.csr();
        let longest = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let mark_split = longest.div_ceil(32 * MARK_STEPS).clamp(1, MAX_MARK_SPLIT);
        let offsets: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
        let ivf_offsets = stream.clone_htod(&offsets).map_err(drv("IVF upload"))?;
        let ivf_docs = if docs.is_empty() {
            stream.alloc_zeros::<u32>(1)
        } else {
            stream.clone_htod(docs)
        }
        .map_err(drv("IVF upload"))?;
        Ok(GpuIvfSearch {
            codes,
            probe,
            num_centroids: k,
            scorer,
            held,
            ivf_offsets,
            ivf_docs,
            mark_split,
        })
    }

    /// The GPU it runs on, by name.
    pub fn gpu_name(&self) -> String {
        self.scorer.name()
    }

    /// Whether the codes are streamed per batch (else resident).
    pub fn streamed(&self) -> bool {
        self.held.streamed_codes()
    }

    /// The queries and the 32-row query blocks one pass takes (a segment with documents):
    /// their approximate scores within `APPROX_PER_PASS`, their centroid scores and probe lists
    /// within `SCORES_PER_PASS`.
    fn pass_limits(&self) -> (usize, usize) {
        (
            (APPROX_PER_PASS / self.codes.len().max(1)).clamp(1, MAX_GRID_Y),
            max_blocks(self.num_centroids, self.probe.nprobe),
        )
    }

    fn all_probed(&self) -> bool {
        self.probe.nprobe >= self.num_centroids
    }

    /// Stages 1–4 for `queries` (checked), on the device: the approximate scores `[Q][N]`.
    /// `poison`: fill the outputs with NaN and `i32::MIN` first (checks: an element no kernel
    /// wrote shows).
    fn stage(&self, queries: &[Matrix<'_>], cq: &CodecQueries, poison: bool) -> Result<Staged> {
        let gpu = self.scorer.gpu();
        let stream = &gpu.stream;
        let view = self.held.view(stream);
        // SAFETY: the upload's centroids; queries uploaded for these codes.
        let cs = unsafe { codec_launch::centroid_scores(gpu, stream, cq, &view) }?;
        let mut qblocks = vec![0i32];
        let mut block_query = Vec::new();
        for (q, m) in queries.iter().enumerate() {
            let nb = m.rows().div_ceil(32);
            block_query.extend(std::iter::repeat_n(q as i32, nb));
            qblocks.push(qblocks[q] + nb as i32);
        }
        let blocks = block_query.len();
        let (n, nq) = (self.codes.len(), queries.len());
        let words = n.div_ceil(32);
        let up = || drv("IVF search buffers");
        let mut bitmap = stream
            .alloc_zeros::<u32>((nq * words).max(1))
            .map_err(up())?;
        let probed = if self.all_probed() {
            None
        } else {
            let shape = (blocks, self.num_centroids, self.probe.nprobe);
            let probed = probe(gpu, &cs, cq, shape, poison)?;
            let entries = blocks * 32 * self.probe.nprobe;
            let block_query = stream.clone_htod(&block_query).map_err(up())?;
            let warps = entries * self.mark_split;
            let cfg = LaunchConfig {
                grid_dim: (
                    // (a grid's x extent is at most 2^31 - 1)
                    i32::try_from(warps.div_ceil(4))
                        .map_err(|_| Error::Argument("too many probed lists to mark".into()))?
                        as u32,
                    1,
                    1,
                ),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let (e32, per, split32, w32) = (
                entries as i32,
                (32 * self.probe.nprobe) as i32,
                self.mark_split as i32,
                words as i32,
            );
            let mut b = stream.launch_builder(&gpu.kernels.ivf.mark);
            b.arg(&probed)
                .arg(&e32)
                .arg(&per)
                .arg(&split32)
                .arg(&block_query)
                .arg(&self.ivf_offsets)
                .arg(&self.ivf_docs)
                .arg(&w32)
                .arg(&mut bitmap);
            // SAFETY: `probed` holds `entries` ids below K or -1 (`mark_split` warps each),
            // `block_query` one query per block, the IVF's documents are below N (checked
            // when it was built or opened), and the bitmap holds Q × words words.
            unsafe { b.launch(cfg) }.map_err(drv("ivf_mark launch"))?;
            Some(probed)
        };
        let mut approx = if poison {
            stream.clone_htod(&vec![f32::NAN; (nq * n).max(1)])
        } else {
            // SAFETY: every element is written by `ivf_interaction`.
            unsafe { stream.alloc::<f32>((nq * n).max(1)) }
        }
        .map_err(up())?;
        let qb = stream.clone_htod(&qblocks).map_err(up())?;
        // A warp two bitmap words. Tried and measured no faster at 8.8M documents (b9488cb,
        // bench/results/h200/2026-11-29g/call2.log): a half warp a candidate with 8 or 16 rows
        // in flight a lane and the next 16 centroids read ahead.
        let cfg = LaunchConfig {
            grid_dim: (words.div_ceil(8) as u32, nq as u32, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let (k32, all, w32, n32) = (
            self.num_centroids as i32,
            self.all_probed() as i32,
            words as i32,
            n as i32,
        );
        let (ids, offsets) = self.held.ids();
        let mut b = stream.launch_builder(&gpu.kernels.ivf.interaction);
        b.arg(&cs)
            .arg(&k32)
            .arg(&qb)
            .arg(&bitmap)
            .arg(&all)
            .arg(&w32)
            .arg(ids)
            .arg(offsets)
            .arg(&n32)
            .arg(&mut approx);
        // SAFETY: `cs` holds blocks × K × 32 scores, `qb` Q + 1 block offsets, the bitmap Q ×
        // words, aux one centroid id below K per token, offsets N + 1, approx Q × N floats.
        unsafe { b.launch(cfg) }.map_err(drv("ivf_interaction launch"))?;
        Ok(Staged {
            approx,
            probed,
            cs,
            qblocks,
        })
    }

    /// Stages 1–4 for `queries`, downloaded: what each row probed and each document's
    /// approximate score. One pass (`search` takes larger batches in groups): an argument
    /// error past its queries or query blocks, or on no documents.
    pub fn first_stages(&self, queries: &[Matrix<'_>]) -> Result<FirstStages> {
        check_queries(queries, self.codes.dim())?;
        if self.codes.is_empty() {
            return Err(Error::Argument("the first stages of no documents".into()));
        }
        let blocks: usize = queries.iter().map(|q| q.rows().div_ceil(32)).sum();
        let (per_pass, most) = self.pass_limits();
        if queries.len() > per_pass || blocks > most {
            return Err(Error::Argument(format!(
                "the first stages take one pass: at most {per_pass} queries and {most} blocks of \
                 32 rows here ({} queries, {blocks} blocks given)",
                queries.len()
            )));
        }
        let cq = self.held.upload_queries(&self.scorer, queries)?;
        let s = self.stage(queries, &cq, true)?;
        let stream = &self.scorer.gpu().stream;
        let approx = stream.clone_dtoh(&s.approx).map_err(drv("IVF download"))?;
        let n = self.codes.len();
        let nprobe = self.probe.nprobe;
        let probed = match &s.probed {
            None => queries.iter().map(|q| vec![Vec::new(); q.rows()]).collect(),
            Some(p) => {
                let p = stream.clone_dtoh(p).map_err(drv("IVF download"))?;
                let mut out = Vec::new();
                for (q, m) in queries.iter().enumerate() {
                    let mut rows = vec![Vec::new(); m.rows()];
                    for b in s.qblocks[q]..s.qblocks[q + 1] {
                        let first = (b - s.qblocks[q]) as usize * 32;
                        for pos in 0..32 {
                            let row = first + position_row(pos);
                            let at = (b as usize * 32 + pos) * nprobe;
                            if let Some(r) = rows.get_mut(row) {
                                *r = p[at..at + nprobe].iter().map(|&c| c as u32).collect();
                            }
                        }
                    }
                    out.push(rows);
                }
                out
            }
        };
        self.scorer.synchronize()?;
        Ok(FirstStages {
            probed,
            approx: approx
                .chunks(n.max(1))
                .take(queries.len())
                .map(<[f32]>::to_vec)
                .collect(),
        })
    }

    /// One group of queries: stages 1–4, the `ndocs` best candidates of each, rescored.
    fn search_group(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        let n = self.codes.len();
        let cq = self.held.upload_queries(&self.scorer, queries)?;
        let s = self.stage(queries, &cq, false)?;
        let keep = self.probe.ndocs.max(k).min(n);
        let stream = &self.scorer.gpu().stream;
        let up = || drv("IVF search buffers");
        // SAFETY: the top-k enqueue writes Q × keep entries.
        let mut index = unsafe { stream.alloc::<i32>(queries.len() * keep) }.map_err(up())?;
        let mut best = unsafe { stream.alloc::<f32>(queries.len() * keep) }.map_err(up())?;
        self.scorer.top_k_enqueue(
            &s.approx,
            queries.len(),
            n,
            keep,
            &mut index.slice_mut(..),
            &mut best.slice_mut(..),
        )?;
        let index = stream.clone_dtoh(&index).map_err(drv("IVF download"))?;
        let best = stream.clone_dtoh(&best).map_err(drv("IVF download"))?;
        self.scorer.synchronize()?;
        // Each query's candidates (ascending), all rescored in one pass of launches and
        // downloaded once.
        let lists: Vec<Vec<i64>> = (0..queries.len())
            .map(|q| {
                let row = q * keep..(q + 1) * keep;
                let mut docs: Vec<i64> = index[row.clone()]
                    .iter()
                    .zip(&best[row])
                    .filter(|&(_, &s)| s > f32::NEG_INFINITY)
                    .map(|(&i, _)| i as i64)
                    .collect();
                docs.sort_unstable();
                docs
            })
            .collect();
        self.held.rescore(
            &self.scorer,
            &self.codes,
            queries,
            &lists,
            k,
            Some((&s.cs, &s.qblocks)),
        )
    }
}

/// Stage 2: each position's `nprobe` best centroids, `[blocks][32][nprobe]` (-1 past a query's
/// rows): each warp's best in a chunk of centroids (`ivf_probe_pP`), then their lists merged
/// `PROBE_FAN` into one until one is left (`ivf_probe_merge_pP`).
/// `shape`: (query blocks, K, nprobe); `poison` as `GpuIvfSearch::stage`'s.
fn probe(
    gpu: &GpuContext,
    cs: &CudaSlice<u16>,
    cq: &CodecQueries,
    shape: (usize, usize, usize),
    poison: bool,
) -> Result<CudaSlice<i32>> {
    let (blocks, num_centroids, nprobe) = shape;
    let stream = &gpu.stream;
    let list = IVF_PROBE_LISTS
        .iter()
        .position(|&p| p >= nprobe)
        .ok_or_else(|| Error::Argument(format!("nprobe {nprobe} is over {MAX_GPU_NPROBE}")))?;
    let per = PROBE_CHUNK.max(32 * nprobe);
    let chunks = num_centroids.div_ceil(per);
    let up = || drv("IVF probe buffers");
    let lists = |n: usize| blocks * n * 32 * nprobe;
    // SAFETY: `ivf_probe` writes every entry of every (block, chunk, lane), each merge step
    // every entry of its groups' lists, and the last one every entry of `probed`.
    let mut part = unsafe { stream.alloc::<u64>(lists(chunks)) }.map_err(up())?;
    let mut next =
        unsafe { stream.alloc::<u64>(lists(chunks.div_ceil(PROBE_FAN)).max(1)) }.map_err(up())?;
    let mut probed = if poison {
        stream.clone_htod(&vec![i32::MIN; blocks * 32 * nprobe])
    } else {
        unsafe { stream.alloc::<i32>(blocks * 32 * nprobe) }
    }
    .map_err(up())?;
    let grid = |warps: usize| LaunchConfig {
        grid_dim: (warps.div_ceil(4) as u32, blocks as u32, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let (k32, np32, per32, c32) = (
        num_centroids as i32,
        nprobe as i32,
        per as i32,
        chunks as i32,
    );
    let mut b = stream.launch_builder(&gpu.kernels.ivf.probe[list]);
    b.arg(cs)
        .arg(&cq.rows)
        .arg(&k32)
        .arg(&np32)
        .arg(&per32)
        .arg(&c32)
        .arg(&mut part);
    // SAFETY: `cs` holds blocks × K × 32 scores, `rows` one count per block, `part` blocks ×
    // chunks × 32 × nprobe keys; nprobe ≤ the list's size.
    unsafe { b.launch(grid(chunks)) }.map_err(drv("ivf_probe launch"))?;
    let (mut lists_in, fan32) = (chunks, PROBE_FAN as i32);
    loop {
        let groups = lists_in.div_ceil(PROBE_FAN);
        let n32 = lists_in as i32;
        let mut b = stream.launch_builder(&gpu.kernels.ivf.probe_merge[list]);
        b.arg(&part)
            .arg(&np32)
            .arg(&n32)
            .arg(&fan32)
            .arg(&mut next)
            .arg(&mut probed);
        // SAFETY: `part` holds blocks × lists_in lists of 32 × nprobe keys; a step of more
        // than one group writes blocks × groups lists to `next` (which holds the first step's,
        // the most), the last one blocks × 32 × nprobe ids to `probed`.
        unsafe { b.launch(grid(groups)) }.map_err(drv("ivf_probe_merge launch"))?;
        if groups == 1 {
            return Ok(probed);
        }
        std::mem::swap(&mut part, &mut next);
        lists_in = groups;
    }
}

/// Consecutive groups of queries (of `rows` rows each) of at most `per_pass` queries and
/// `max_blocks` 32-row blocks (the approximate scores' budget and the launches' grid limits).
fn groups(rows: &[usize], per_pass: usize, max_blocks: usize) -> Result<Vec<Range<usize>>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let (mut end, mut blocks) = (start, 0);
        while end < rows.len() && end - start < per_pass {
            let b = rows[end].div_ceil(32);
            if end > start && blocks + b > max_blocks {
                break;
            }
            blocks += b;
            end += 1;
        }
        if blocks > max_blocks {
            return Err(Error::Argument(format!(
                "query {start} has {} rows; IVF search on the GPU takes at most {} a query",
                rows[start],
                max_blocks * 32
            )));
        }
        out.push(start..end);
        start = end;
    }
    Ok(out)
}

/// The query blocks of 32 rows one pass takes at K centroids: their centroid scores and probe
/// lists within `SCORES_PER_PASS`, and at most a grid's y extent.
fn max_blocks(num_centroids: usize, nprobe: usize) -> usize {
    (SCORES_PER_PASS / block_bytes(num_centroids, nprobe).max(1)).clamp(1, MAX_GRID_Y)
}

/// The bytes a query block holds in a pass at K centroids: its centroid scores (`[K][32]`
/// f16) and the probe's lists at `nprobe` (`probe`'s `part`, `next` and `probed`).
fn block_bytes(num_centroids: usize, nprobe: usize) -> usize {
    let nprobe = nprobe.min(MAX_GPU_NPROBE);
    let chunks = num_centroids.div_ceil(PROBE_CHUNK.max(32 * nprobe));
    let lists = |n: usize| n * 32 * nprobe;
    num_centroids * 64
        + (lists(chunks) + lists(chunks.div_ceil(PROBE_FAN).max(1))) * 8
        + lists(1) * 4
}

/// The query row a block's position holds (`codec_centroid_scores`' order; `ivf_row`).
fn position_row(p: usize) -> usize {
    let (cq, mt, j) = (p / 8, (p / 4) % 2, p % 4);
    mt * 16 + 2 * cq + (j & 1) + 8 * (j >> 1)
}

impl Searcher for GpuIvfSearch<'_> {
    fn name(&self) -> String {
        let held = if self.streamed() {
            ", codes streamed per batch"
        } else {
            ""
        };
        self.probe
            .searcher_name(&format!("with every stage on {}{held}", self.scorer.name()))
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        check_queries(queries, self.codes.dim())?;
        if self.codes.is_empty() {
            return Ok(vec![Vec::new(); queries.len()]);
        }
        let (per_pass, most) = self.pass_limits();
        let rows: Vec<usize> = queries.iter().map(|q| q.rows()).collect();
        let mut out = Vec::with_capacity(queries.len());
        for group in groups(&rows, per_pass, most)? {
            out.extend(self.search_group(&queries[group], k)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_GRID_Y, PROBE_CHUNK, block_bytes, groups, max_blocks, position_row};

    #[test]
    fn a_pass_holds_at_most_a_gigabyte_of_centroid_scores_and_probe_lists() {
        // MS MARCO's K = 262,144: 56 blocks (1,792 query rows) a pass from nprobe 8 on (2 MiB
        // of lists a block), 62 at nprobe 1.
        for nprobe in [8, 9, 64] {
            assert_eq!(max_blocks(262_144, nprobe), 56, "nprobe {nprobe}");
        }
        assert_eq!(max_blocks(262_144, 1), 62);
        // K = 262,144, nprobe 8: 16 MiB of scores, 1,024 lists of 256 keys and 32 of them.
        assert_eq!(
            block_bytes(262_144, 8),
            (1 << 24) + (1024 + 32) * 256 * 8 + 256 * 4
        );
        // K below one chunk: one list, with nprobe as large as the GPU takes.
        assert_eq!(block_bytes(64, 63), 64 * 64 + 2 * 2016 * 8 + 2016 * 4);
        for (k, nprobe) in [(64, 63), (100, 1), (8500, 40), (262_144, 64), (1 << 24, 8)] {
            let most = max_blocks(k, nprobe);
            assert!(most * block_bytes(k, nprobe) <= 1 << 30 || most == 1);
            assert!(most == MAX_GRID_Y || (most + 1) * block_bytes(k, nprobe) > 1 << 30);
            assert!(block_bytes(k, nprobe) >= k * 64 + PROBE_CHUNK.min(k));
        }
        assert_eq!(max_blocks(1 << 30, 8), 1);
        assert_eq!(max_blocks(0, 8), MAX_GRID_Y);
    }

    #[test]
    fn groups_keep_to_both_limits_and_cover_every_query_once() {
        // Queries of 1..=100 rows: at most 3 queries and 4 blocks a group.
        let rows: Vec<usize> = (0..40).map(|i| 1 + (i * 37) % 100).collect();
        let g = groups(&rows, 3, 4).unwrap();
        assert_eq!(g.first().map(|r| r.start), Some(0));
        assert_eq!(g.last().map(|r| r.end), Some(rows.len()));
        for w in g.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        for r in &g {
            assert!(!r.is_empty() && r.len() <= 3);
            assert!(
                rows[r.clone()]
                    .iter()
                    .map(|n| n.div_ceil(32))
                    .sum::<usize>()
                    <= 4
            );
        }
        assert!(groups(&[], 3, 4).unwrap().is_empty());
        // One query over the block limit is an error, not a launch that fails.
        assert!(groups(&[10, 32 * 5], 3, 4).is_err());
    }

    #[test]
    fn positions_cover_the_block_rows_once() {
        let mut rows: Vec<usize> = (0..32).map(position_row).collect();
        rows.sort_unstable();
        assert_eq!(rows, (0..32).collect::<Vec<_>>());
    }
}

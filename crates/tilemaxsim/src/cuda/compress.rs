//! Compression on the GPU ([`compress`]): the codecs of `codec/` trained and encoded with the
//! kernels of kernels/compress.cu, the same files as the CPU's `codec::compress` writes. Tokens
//! go through the GPU a chunk of at most `CHUNK_BYTES` at a time (a corpus larger than GPU
//! memory works) and their codes come back per chunk.
//! - residual: PLAID's sample (`TrainingPlan`, as on the CPU), k-means on the GPU (the
//!   assignment a tensor-core product with a running argmax; exact integer sums, so a seed gives
//!   the same centroids on every run), the held-out tokens' buckets, then every token assigned
//!   (largest dot product, as PLAID) and encoded;
//! - PQ: the codebooks train on the CPU (a sample of at most 65K tokens), the tokens encode here;
//! - int8, fp8: encoded here, bit-identical to the CPU's codes.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut, LaunchConfig, PushKernelArg};
use half::f16;
use rayon::prelude::*;

use super::compress_stage::{Rows, Stager};
use super::context::GpuContext;
use super::device::drv;
use super::launch::stride_grid;
use super::plan::{KernelShape, TILE_META, WG_BN};
use crate::codec::kmeans::{LLOYD, half_neg_norms, random_start};
use crate::codec::residual::TrainingPlan;
use crate::codec::{
    Codec, CodecSpec, CodesSink, CompressedCorpus, PqCodec, Progress, ResidualCodec, not_unit,
};
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;

/// Input bytes per chunk of tokens sent to the GPU by [`compress`].
pub const CHUNK_BYTES: usize = 256 << 20;
/// The progress stage of the encoding pass.
const ENCODE: &str = "encode";

/// Compress `corpus` with `spec` on GPU `ordinal` (seeded: the same corpus, spec, seed and
/// GPU model give the same file). The residual codec needs L2-normalized tokens, as on the CPU.
pub fn compress(
    ordinal: usize,
    corpus: &Corpus,
    spec: &CodecSpec,
    seed: u64,
    progress: Progress<'_>,
) -> Result<CompressedCorpus> {
    compress_in_chunks(ordinal, corpus, spec, seed, CHUNK_BYTES, progress, None)
}

/// [`compress`], the tokens sent in chunks of at most `chunk_bytes` of input (at least 32 rows):
/// the codes do not depend on it. `sink`, if any, is handed the residual codec's codes too,
/// chunk by chunk as they come back from the GPU (the other codecs do not use it).
pub fn compress_in_chunks(
    ordinal: usize,
    corpus: &Corpus,
    spec: &CodecSpec,
    seed: u64,
    chunk_bytes: usize,
    progress: Progress<'_>,
    sink: Option<&dyn CodesSink>,
) -> Result<CompressedCorpus> {
    let d = corpus.dim();
    spec.check(d)?;
    if corpus.num_tokens() == 0 {
        return Err(Error::Argument(
            "compress: the corpus has no tokens to train a codec on".into(),
        ));
    }
    let t = corpus.num_tokens();
    progress("check values", 0, t);
    corpus.check_finite()?;
    progress("open the GPU", 0, 1);
    let gpu = GpuContext::open(ordinal)?;
    let job = Job {
        gpu: &gpu,
        stream: &gpu.stream,
        tokens: corpus.tokens(),
        dim: d,
        chunk_bytes,
    };
    let (codec, codes, aux) = match spec {
        CodecSpec::Residual(opts) => {
            let (codec, codes, ids) = job.residual(opts, seed, progress, corpus, sink)?;
            return CompressedCorpus::of(corpus, codec, codes, Some(ids));
        }
        CodecSpec::Pq(opts) => {
            let idx = PqCodec::training_sample(corpus.num_tokens(), opts, seed);
            let sample = job.tokens.gather_f32(&idx);
            let pq = PqCodec::train_on_sample(&sample, d, opts, seed, progress)?;
            let codes = job.pq(&pq, progress)?;
            (Codec::Pq(pq), codes, None)
        }
        CodecSpec::Int8 | CodecSpec::Fp8 => {
            let fp8 = matches!(spec, CodecSpec::Fp8);
            let (codes, scales) = job.scaled(fp8, progress)?;
            (
                if fp8 { Codec::Fp8 } else { Codec::Int8 },
                codes,
                Some(scales),
            )
        }
    };
    CompressedCorpus::of(corpus, codec, codes, aux)
}

/// One compression: the GPU and the tokens.
struct Job<'a> {
    gpu: &'a GpuContext,
    stream: &'a Arc<CudaStream>,
    tokens: Matrix<'a>,
    dim: usize,
    chunk_bytes: usize,
}

/// Centroids on the device, as the assignment kernels read them: f32 rows (`kmeans_assign_simple`),
/// f16 rows (`kmeans_assign_wgmma`), the bounds {0, K} of them as one document, and two bias
/// vectors padded with -inf to a multiple of `WG_BN`: -|c|²/2 (nearest) and zeros (largest dot).
struct Centroids {
    k: usize,
    f32: CudaSlice<f32>,
    f16: CudaSlice<u16>,
    bounds: CudaSlice<i64>,
    nearest: CudaSlice<f32>,
    dot: CudaSlice<f32>,
}

impl Job<'_> {
    fn bytes_per_row(&self) -> usize {
        self.dim * self.tokens.dtype().size()
    }

    /// The tokens' bytes, rows of `bytes_per_row`.
    fn input(&self) -> &[u8] {
        self.tokens.elements().as_bytes()
    }

    /// Rows per chunk: at most `chunk_bytes` of input, a multiple of 32 (at least 32).
    fn chunk_rows(&self) -> usize {
        (self.chunk_bytes / self.bytes_per_row().max(1) / 32).max(1) * 32
    }

    /// Row ranges of the tokens, `chunk_rows` each.
    fn chunks(&self) -> Vec<std::ops::Range<usize>> {
        let t = self.tokens.rows();
        let step = self.chunk_rows();
        (0..t.div_ceil(step))
            .map(|i| i * step..((i + 1) * step).min(t))
            .collect()
    }

    /// A stager for chunks of up to `rows` rows.
    fn stager(&self, rows: usize) -> Result<Stager> {
        let bytes = rows.min(self.chunk_rows()).max(1) * self.bytes_per_row();
        Stager::new(self.gpu, bytes)
    }

    /// Every chunk of tokens through the GPU: `enqueue(rows, raw)` enqueues a chunk's kernels
    /// on the job's stream (its input `raw`: the rows in the corpus's dtype) and returns its
    /// outputs on the device; `collect(rows, outputs, stream)` downloads them on `stream` (the
    /// stager's copy stream, after the chunk's kernels). While the GPU works on chunk i, the
    /// host downloads chunk i - 1's outputs and stages chunk i + 1, whose copy to the device
    /// runs beside chunk i's kernels.
    fn encode_chunks<O>(
        &self,
        progress: Progress<'_>,
        mut enqueue: impl FnMut(&std::ops::Range<usize>, &CudaSlice<u8>) -> Result<O>,
        mut collect: impl FnMut(&std::ops::Range<usize>, O, &Arc<CudaStream>) -> Result<()>,
    ) -> Result<()> {
        let t = self.tokens.rows();
        let rb = self.bytes_per_row();
        let mut stager = self.stager(t)?;
        let mut pending = None;
        progress(ENCODE, 0, t);
        for range in self.chunks() {
            let raw = stager.send(self.stream, self.input(), rb, Rows::Range(range.clone()))?;
            let out = enqueue(&range, raw)?;
            let done = stager.used(self.stream)?;
            if let Some((r, out, done)) = pending.take() {
                stager.after(&done)?;
                collect(&r, out, stager.copy())?;
                progress(ENCODE, r.end, t);
            }
            pending = Some((range, out, done));
        }
        if let Some((r, out, done)) = pending {
            stager.after(&done)?;
            collect(&r, out, stager.copy())?;
            progress(ENCODE, r.end, t);
        }
        // Every download done before the caller reads what they wrote (into pageable memory a
        // copy may return before it is done: CUDA does not promise otherwise).
        stager.copy().synchronize().map_err(drv("codes download"))
    }

    /// The input bytes of rows `idx` (in that order).
    fn gather_bytes(&self, idx: &[usize]) -> Vec<u8> {
        let rb = self.bytes_per_row();
        let all = self.tokens.elements().as_bytes();
        let mut out = vec![0u8; idx.len() * rb];
        out.par_chunks_mut(rb.max(1))
            .zip(idx.par_iter())
            .for_each(|(dst, &i)| dst.copy_from_slice(&all[i * rb..(i + 1) * rb]));
        out
    }

    /// Input bytes (rows of the corpus's dtype) on the device.
    fn upload(&self, bytes: &[u8]) -> Result<CudaSlice<u8>> {
        if bytes.is_empty() {
            return self
                .stream
                .alloc_zeros::<u8>(16)
                .map_err(drv("token upload"));
        }
        self.stream.clone_htod(bytes).map_err(drv("token upload"))
    }

    /// `rows` rows of input bytes on the device as f16 rows in whole 32-row blocks.
    fn to_f16(&self, raw: &CudaSlice<u8>, rows: usize) -> Result<CudaSlice<u16>> {
        let padded = rows.div_ceil(32).max(1) * 32 * self.dim;
        // SAFETY: every element is written by `to_f16_into`.
        let mut out = unsafe { self.stream.alloc::<u16>(padded) }.map_err(drv("f16 rows"))?;
        self.to_f16_into(raw, rows, &mut out.slice_mut(..))?;
        Ok(out)
    }

    /// `rows` rows of input bytes as f16 rows into `dst`, zeros after them to the end of their
    /// last 32-row block (`dst` holds at least that).
    fn to_f16_into(
        &self,
        raw: &CudaSlice<u8>,
        rows: usize,
        dst: &mut CudaViewMut<'_, u16>,
    ) -> Result<()> {
        let values = (rows * self.dim) as i64;
        let padded = (rows.div_ceil(32).max(1) * 32 * self.dim) as i64;
        if dst.len() < padded as usize {
            return Err(Error::Shape("f16 rows: destination too small".into()));
        }
        let func = self
            .gpu
            .kernels
            .compress
            .by_dtype(&self.gpu.kernels.compress.to_f16, self.tokens.dtype())?;
        let mut b = self.stream.launch_builder(func);
        b.arg(raw).arg(&values).arg(&padded).arg(dst);
        // SAFETY: `raw` holds `values` elements of the corpus's dtype; `dst` at least `padded`.
        unsafe { b.launch(stride_grid(self.gpu, padded as u64, 256)) }
            .map_err(drv("rows_to_f16 launch"))?;
        Ok(())
    }

    /// Centroids `rows` (`[K, d]` f32) on the device, with their f16 rows and biases.
    fn centroids(&self, rows: &[f32]) -> Result<Centroids> {
        let d = self.dim;
        let k = rows.len() / d;
        let kpad = k.div_ceil(WG_BN) * WG_BN;
        let s = self.stream;
        let mut h16 = vec![0u16; kpad * d];
        for (h, &x) in h16.iter_mut().zip(rows) {
            *h = f16::from_f32(x).to_bits();
        }
        let pad = |v: Vec<f32>| -> Vec<f32> {
            let mut v = v;
            v.resize(kpad, f32::NEG_INFINITY);
            v
        };
        let up = drv("centroid upload");
        Ok(Centroids {
            k,
            f32: s.clone_htod(rows).map_err(&up)?,
            f16: s.clone_htod(&h16).map_err(&up)?,
            bounds: s.clone_htod(&[0i64, k as i64]).map_err(&up)?,
            nearest: s.clone_htod(&pad(half_neg_norms(rows, d))).map_err(&up)?,
            dot: s.clone_htod(&pad(vec![0.0; k])).map_err(&up)?,
        })
    }

    /// out[p] = argmax_c ⟨x_p, c⟩ + bias[c] for the `n` points `pts` (f16 rows in 32-row blocks).
    fn assign(
        &self,
        pts: &CudaSlice<u16>,
        n: usize,
        cents: &Centroids,
        nearest: bool,
        out: &mut CudaSlice<u32>,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let kern = &self.gpu.kernels.compress;
        let bias = if nearest { &cents.nearest } else { &cents.dot };
        let n64 = n as i64;
        if let Some(func) = kern.assign_wgmma(self.dim) {
            let stages =
                KernelShape::parse(std::env::var("TILEMAXSIM_KERNEL_DEFINES").ok().as_deref())?
                    .wg_stages;
            let smem = stages * (WG_BN * self.dim * 2 + TILE_META + 16) + 1024;
            let tasks = n.div_ceil(32 * 8) as u64;
            let threads = super::plan::Kernel::Wgmma.threads();
            let cfg = self.gpu.persistent_grid(func, threads, smem, tasks)?;
            let mut b = self.stream.launch_builder(func);
            b.arg(pts)
                .arg(&n64)
                .arg(&cents.f16)
                .arg(&cents.bounds)
                .arg(bias)
                .arg(out);
            // SAFETY: `pts` holds ⌈n/32⌉·32 rows of d halves, `cents.f16` K rows (K = bounds[1]),
            // `bias` K values padded to a multiple of WG_BN, `out` n slots; `smem` as the
            // kernel lays out its ring (the maxsim_wgmma layout).
            unsafe { b.launch(cfg) }.map_err(drv("kmeans_assign_wgmma launch"))?;
        } else {
            let dim = self.dim as i32;
            let k = cents.k as i32;
            let cfg = LaunchConfig {
                grid_dim: (n.div_ceil(64) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = self.stream.launch_builder(&kern.assign_simple);
            b.arg(pts)
                .arg(&n64)
                .arg(&dim)
                .arg(&cents.f32)
                .arg(&k)
                .arg(bias)
                .arg(out);
            // SAFETY: `pts` n rows of d halves, `cents.f32` K rows of d floats, `bias` K values,
            // `out` n slots; a block per 64 points.
            unsafe { b.launch(cfg) }.map_err(drv("kmeans_assign_simple launch"))?;
        }
        Ok(())
    }

    /// The residual codec trained and every token encoded: the codec, the codes, the ids. `sink`
    /// is handed each chunk's codes and ids as they come back.
    fn residual(
        &self,
        opts: &crate::codec::ResidualOptions,
        seed: u64,
        progress: Progress<'_>,
        corpus: &Corpus,
        sink: Option<&dyn CodesSink>,
    ) -> Result<(Codec, Vec<u8>, Vec<u32>)> {
        let d = self.dim;
        let t = self.tokens.rows();
        let plan = TrainingPlan::new(corpus.offsets(), opts, seed)?;
        let raw = self.kmeans(&plan, opts.kmeans_iters, seed, progress)?;
        let placeholder = ResidualCodec::placeholder(opts.nbits, d, &raw)?;
        let normalized: Vec<f32> = placeholder.centroids().iter().map(|x| x.to_f32()).collect();
        let cents = self.centroids(&normalized)?;
        // The held-out tokens' buckets.
        progress("bucket statistics", 0, plan.heldout.len());
        let held_raw = self.upload(&self.gather_bytes(&plan.heldout))?;
        let held16 = self.to_f16(&held_raw, plan.heldout.len())?;
        let mut held_ids = self
            .stream
            .alloc_zeros::<u32>(plan.heldout.len().max(1))
            .map_err(drv("ids"))?;
        self.assign(&held16, plan.heldout.len(), &cents, false, &mut held_ids)?;
        let mut ids_h = self
            .stream
            .clone_dtoh(&held_ids)
            .map_err(drv("ids download"))?;
        ids_h.truncate(plan.heldout.len());
        let codec = placeholder.with_buckets(
            &self.tokens.gather_f32(&plan.heldout),
            &ids_h,
            opts.buckets,
        )?;
        // Every token.
        let rb = codec.row_bytes();
        let cutoffs = self
            .stream
            .clone_htod(codec.bucket_cutoffs())
            .map_err(drv("codec upload"))?;
        let trained = Codec::Residual(codec);
        if let Some(sink) = sink {
            sink.begin(&trained)?;
        }
        let mut first_bad = self
            .stream
            .clone_htod(&[u64::MAX])
            .map_err(drv("codec upload"))?;
        let mut codes = vec![0u8; t * rb];
        let mut ids = vec![0u32; t];
        let func = self
            .gpu
            .kernels
            .compress
            .by_dtype(&self.gpu.kernels.compress.residual, self.tokens.dtype())?;
        self.encode_chunks(
            progress,
            |range, raw| {
                let n = range.len();
                let pts = self.to_f16(raw, n)?;
                let mut dev_ids = self.stream.alloc_zeros::<u32>(n).map_err(drv("ids"))?;
                self.assign(&pts, n, &cents, false, &mut dev_ids)?;
                // SAFETY: every byte is written by `residual_encode_*`.
                let mut dev_codes =
                    unsafe { self.stream.alloc::<u8>(n * rb) }.map_err(drv("codes"))?;
                let (n64, dim, nbits, row0) =
                    (n as i64, d as i32, opts.nbits as i32, range.start as i64);
                let mut b = self.stream.launch_builder(func);
                b.arg(raw)
                    .arg(&n64)
                    .arg(&dim)
                    .arg(&dev_ids)
                    .arg(&cents.f16)
                    .arg(&cutoffs)
                    .arg(&nbits)
                    .arg(&row0)
                    .arg(&mut dev_codes)
                    .arg(&mut first_bad);
                // SAFETY: `raw` n rows of d elements, ids < K rows of `cents.f16`, 2^nbits − 1
                // cutoffs, `dev_codes` n rows of rb bytes, `first_bad` one word.
                unsafe { b.launch(stride_grid(self.gpu, n as u64 * 32, 256)) }
                    .map_err(drv("residual_encode launch"))?;
                Ok((dev_codes, dev_ids))
            },
            |range, (dev_codes, dev_ids), copy| {
                let (codes, ids) = (
                    &mut codes[range.start * rb..range.end * rb],
                    &mut ids[range.clone()],
                );
                copy.memcpy_dtoh(&dev_codes, codes)
                    .map_err(drv("codes download"))?;
                copy.memcpy_dtoh(&dev_ids, ids)
                    .map_err(drv("ids download"))?;
                // Into pageable memory the copies may well be done already, but CUDA does not
                // promise it: the host reads these bytes next (the sink, or the caller).
                copy.synchronize().map_err(drv("codes download"))?;
                match sink {
                    Some(sink) => sink.codes(range.start, codes, ids),
                    None => Ok(()),
                }
            },
        )?;
        let bad = self
            .stream
            .clone_dtoh(&first_bad)
            .map_err(drv("codes download"))?[0];
        if bad != u64::MAX {
            let row = bad as usize;
            let x = self.tokens.gather_f32(&[row]);
            let norm = x.iter().map(|v| v * v).sum::<f32>().sqrt();
            return Err(not_unit(corpus, row, norm));
        }
        Ok((trained, codes, ids))
    }

    /// PLAID's k-means on the GPU over the plan's sample: `plan.centroids` rows `[K, d]` f32.
    /// Seeded as the CPU's (the same sample rows start it), then `iters` Lloyd iterations, each
    /// an assignment to the nearest centroid and the exact mean of each centroid's points (a
    /// centroid without points keeps its place).
    fn kmeans(
        &self,
        plan: &TrainingPlan,
        iters: usize,
        seed: u64,
        progress: Progress<'_>,
    ) -> Result<Vec<f32>> {
        let d = self.dim;
        let n = plan.sample.len();
        let k = plan.centroids;
        let start: Vec<usize> = random_start(n, k, seed)
            .into_iter()
            .map(|i| plan.sample.get(i).copied().unwrap_or(0))
            .collect();
        progress("k-means sample", 0, n);
        let mut cents = self.centroids(&self.tokens.gather_f32(&start))?;
        if n == 0 {
            return self
                .stream
                .clone_dtoh(&cents.f32)
                .map_err(drv("centroids download"));
        }
        // The sample as f16 rows, sent a chunk of rows at a time.
        // SAFETY: every element is written by `to_f16_into` (the rows, then the last block's zeros).
        let mut pts = unsafe { self.stream.alloc::<u16>(n.div_ceil(32) * 32 * d) }
            .map_err(drv("k-means sample"))?;
        let mut stager = self.stager(n)?;
        let (step, rb) = (self.chunk_rows(), self.bytes_per_row());
        for (i, part) in plan.sample.chunks(step).enumerate() {
            let raw = stager.send(self.stream, self.input(), rb, Rows::List(part))?;
            let at = i * step * d;
            self.to_f16_into(raw, part.len(), &mut pts.slice_mut(at..))?;
            stager.used(self.stream)?;
        }
        self.stream.synchronize().map_err(drv("k-means sample"))?;
        drop(stager);
        progress(LLOYD, 0, iters);
        let mut ids = self.stream.alloc_zeros::<u32>(n).map_err(drv("ids"))?;
        let mut sums = self
            .stream
            .alloc_zeros::<u64>(k * d)
            .map_err(drv("k-means sums"))?;
        let mut counts = self
            .stream
            .alloc_zeros::<u32>(k)
            .map_err(drv("k-means counts"))?;
        let kern = &self.gpu.kernels.compress;
        let (n64, dim) = (n as i64, d as i32);
        for it in 0..iters {
            self.assign(&pts, n, &cents, true, &mut ids)?;
            let mut b = self.stream.launch_builder(&kern.accumulate);
            b.arg(&pts)
                .arg(&ids)
                .arg(&n64)
                .arg(&dim)
                .arg(&mut sums)
                .arg(&mut counts);
            // SAFETY: `pts` n rows of d halves, ids < K, `sums` K·d and `counts` K slots.
            unsafe { b.launch(stride_grid(self.gpu, (n * d) as u64, 256)) }
                .map_err(drv("kmeans_accumulate launch"))?;
            let cfg = LaunchConfig {
                grid_dim: (k as u32, 1, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = self.stream.launch_builder(&kern.finish);
            b.arg(&mut sums)
                .arg(&mut counts)
                .arg(&dim)
                .arg(&mut cents.f32)
                .arg(&mut cents.f16)
                .arg(&mut cents.nearest);
            // SAFETY: a block per centroid over K·d sums, K counts, K·d floats and halves, and
            // the first K of the padded biases.
            unsafe { b.launch(cfg) }.map_err(drv("kmeans_finish launch"))?;
            self.gpu.synchronize()?;
            progress(LLOYD, it + 1, iters);
        }
        self.stream
            .clone_dtoh(&cents.f32)
            .map_err(drv("centroids download"))
    }

    /// Product-quantization codes of every token under `pq`.
    fn pq(&self, pq: &PqCodec, progress: Progress<'_>) -> Result<Vec<u8>> {
        let (d, m) = (self.dim, pq.m());
        let sub = d / m;
        let t = self.tokens.rows();
        let smem = (256 * (sub + 1) + 256) * 4;
        let kern = &self.gpu.kernels.compress;
        let func = kern.by_dtype(&kern.pq, self.tokens.dtype())?;
        if smem > self.gpu.info.smem_per_block {
            return Err(Error::Argument(format!(
                "product quantization on the GPU: sub-spaces of {sub} dimensions need {smem} bytes of shared memory; use more sub-spaces or the CPU"
            )));
        }
        self.gpu.blocks_per_sm(func, 256, smem)?;
        let half_neg: Vec<f32> = pq
            .codebooks()
            .chunks_exact(256 * sub)
            .flat_map(|book| half_neg_norms(book, sub))
            .collect();
        let books = self
            .stream
            .clone_htod(pq.codebooks())
            .map_err(drv("codebook upload"))?;
        let bias = self
            .stream
            .clone_htod(&half_neg)
            .map_err(drv("codebook upload"))?;
        let mut codes = vec![0u8; t * m];
        self.encode_chunks(
            progress,
            |range, raw| {
                let n = range.len();
                // SAFETY: every byte is written by `pq_encode_*`.
                let mut out = unsafe { self.stream.alloc::<u8>(n * m) }.map_err(drv("codes"))?;
                let mut cfg = stride_grid(self.gpu, n as u64 * 32, 256);
                cfg.grid_dim.1 = m as u32;
                cfg.shared_mem_bytes = smem as u32;
                let (n64, dim, m32) = (n as i64, d as i32, m as i32);
                let mut b = self.stream.launch_builder(func);
                b.arg(raw)
                    .arg(&n64)
                    .arg(&dim)
                    .arg(&m32)
                    .arg(&books)
                    .arg(&bias)
                    .arg(&mut out);
                // SAFETY: `raw` n rows of d elements, M·256·sub codebook values and M·256
                // biases, `out` n·M bytes; `smem` the book and biases of one sub-space.
                unsafe { b.launch(cfg) }.map_err(drv("pq_encode launch"))?;
                Ok(out)
            },
            |range, out, copy| {
                copy.memcpy_dtoh(&out, &mut codes[range.start * m..range.end * m])
                    .map_err(drv("codes download"))
            },
        )?;
        Ok(codes)
    }

    /// int8 or fp8 codes of every token and their scales (f32 bits).
    fn scaled(&self, fp8: bool, progress: Progress<'_>) -> Result<(Vec<u8>, Vec<u32>)> {
        let d = self.dim;
        let t = self.tokens.rows();
        let kern = &self.gpu.kernels.compress;
        let func = kern.by_dtype(
            if fp8 { &kern.fp8 } else { &kern.int8 },
            self.tokens.dtype(),
        )?;
        let mut codes = vec![0u8; t * d];
        let mut scales = vec![0f32; t];
        self.encode_chunks(
            progress,
            |range, raw| {
                let n = range.len();
                // SAFETY: every element is written by `int8_encode_*` / `fp8_encode_*`.
                let mut out = unsafe { self.stream.alloc::<u8>(n * d) }.map_err(drv("codes"))?;
                let mut sc = unsafe { self.stream.alloc::<f32>(n) }.map_err(drv("scales"))?;
                let (n64, dim) = (n as i64, d as i32);
                let mut b = self.stream.launch_builder(func);
                b.arg(raw).arg(&n64).arg(&dim).arg(&mut out).arg(&mut sc);
                // SAFETY: `raw` n rows of d elements; `out` n·d bytes, `sc` n floats.
                unsafe { b.launch(stride_grid(self.gpu, n as u64 * 32, 256)) }
                    .map_err(drv("scaled encode launch"))?;
                Ok((out, sc))
            },
            |range, (out, sc), copy| {
                copy.memcpy_dtoh(&out, &mut codes[range.start * d..range.end * d])
                    .map_err(drv("codes download"))?;
                copy.memcpy_dtoh(&sc, &mut scales[range.clone()])
                    .map_err(drv("scales download"))
            },
        )?;
        Ok((codes, scales.into_iter().map(f32::to_bits).collect()))
    }
}

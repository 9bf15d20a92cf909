//! The residual codec of ColBERTv2 / PLAID: each token is the id of its nearest coarse
//! centroid plus its residual (token − centroid) quantized to `nbits` bits per dimension
//! (bucket `b` = how many bucket cutoffs lie strictly below the value; decoded as bucket
//! weight `b`). The reconstruction `centroid + weights[bucket]` is L2-normalized, as PLAID
//! scores it.
//!
//! Bits are packed exactly as colbert-ai (`np.packbits`) and fast-plaid (`packbits`) pack
//! them, so an index of theirs is imported by copying bytes: dimension `k`'s bucket has its
//! bits at positions `k·nbits + b` (b = 0 the least significant bit of the bucket) of the
//! token's bit stream, and stream bit `s` is bit `7 − s mod 8` of byte `s / 8` (most
//! significant bit first). A token's row is `⌈d·nbits / 8⌉` bytes (PLAID needs d·nbits to be
//! a multiple of 8; ours pads the last byte with zero bits otherwise).
//!
//! Training follows colbert-ai (`TrainingPlan`, `ResidualCodec::train`), except that by default
//! the bucket cutoffs and weights colbert-ai takes from quantiles are refined into the
//! least-squares quantizer of the residuals ([`Buckets`]); [`compress`] trains and encodes a
//! corpus on the CPU a chunk of tokens at a time.

use std::sync::Arc;

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use super::kmeans::{self, sample_indices};
use crate::corpus::Corpus;
use crate::error::{Error, Result};

/// The parameters of a residual codec: `K` coarse centroids (f16, L2-normalized when trained
/// here), `2^nbits − 1` bucket cutoffs and `2^nbits` bucket weights.
#[derive(Clone, Debug, PartialEq)]
pub struct ResidualCodec {
    nbits: u32,
    dim: usize,
    /// Shared: a codec is cloned with every slice or gather of its corpus.
    centroids: Arc<[f16]>,
    cutoffs: Vec<f32>,
    weights: Vec<f32>,
    /// Per packed byte value, the bucket weight of each of its `8 / nbits` dimensions.
    table: Vec<f32>,
}

/// Settings for training a residual codec.
#[derive(Clone, Copy, Debug)]
pub struct ResidualOptions {
    /// Bits per dimension: 1, 2 or 4.
    pub nbits: u32,
    /// Coarse centroids; `None`: PLAID's choice, `2^⌊log2(16·√T)⌋`.
    pub centroids: Option<usize>,
    /// Lloyd iterations (colbert-ai and fast-plaid default to 4).
    pub kmeans_iters: usize,
    /// k-means trains on at most this many points per centroid (sampled, seeded).
    pub max_points_per_centroid: usize,
    /// How the bucket cutoffs and weights are fitted to the held-out residuals.
    pub buckets: Buckets,
}

/// How a residual codec's bucket cutoffs and weights are fitted to the residuals of its
/// held-out tokens (every dimension's pooled, as PLAID pools them). Either way the codec is
/// PLAID's format: `2^nbits − 1` cutoffs and `2^nbits` weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Buckets {
    /// colbert-ai's and fast-plaid's: cutoffs at the quantiles `i / 2^nbits`, weights at
    /// `(i + ½) / 2^nbits`.
    Quantiles,
    /// The quantiles refined by Lloyd–Max iterations until they settle: each weight the mean
    /// of the residuals in its bucket, each cutoff midway between two weights. That is the
    /// scalar quantizer of least squared error; on clustered unit-norm tokens at nbits = 2 its
    /// reconstruction error is about a fifth below the quantiles'.
    #[default]
    LloydMax,
}

impl std::str::FromStr for Buckets {
    type Err = Error;

    /// `lloyd-max` or `quantiles`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "lloyd-max" => Ok(Buckets::LloydMax),
            "quantiles" => Ok(Buckets::Quantiles),
            _ => Err(Error::Argument(format!(
                "bucket fit {s:?}: expected lloyd-max or quantiles"
            ))),
        }
    }
}

impl Default for ResidualOptions {
    fn default() -> Self {
        ResidualOptions {
            nbits: 2,
            centroids: None,
            kmeans_iters: 4,
            max_points_per_centroid: 256,
            buckets: Buckets::default(),
        }
    }
}

/// PLAID's number of centroids for `tokens` tokens: `2^⌊log2(16·√T)⌋`.
pub fn plaid_num_centroids(tokens: usize) -> usize {
    let e = (16.0 * (tokens as f64).sqrt()).log2().floor().max(0.0);
    1usize << (e as u32)
}

impl ResidualCodec {
    /// A codec from its parts: `centroids` `[K, dim]`, `cutoffs` `[2^nbits − 1]`, `weights`
    /// `[2^nbits]`, all finite.
    pub fn new(
        nbits: u32,
        dim: usize,
        centroids: Vec<f16>,
        cutoffs: Vec<f32>,
        weights: Vec<f32>,
    ) -> Result<Self> {
        if !matches!(nbits, 1 | 2 | 4) {
            return Err(Error::Argument(format!(
                "residual codec: nbits must be 1, 2 or 4, got {nbits}"
            )));
        }
        if dim == 0 || centroids.is_empty() || !centroids.len().is_multiple_of(dim) {
            return Err(Error::Shape(format!(
                "residual codec: {} centroid values are not a whole number of d = {dim} rows",
                centroids.len()
            )));
        }
        if centroids.len() / dim > u32::MAX as usize {
            return Err(Error::Shape("residual codec: too many centroids".into()));
        }
        let buckets = 1usize << nbits;
        if cutoffs.len() != buckets - 1 || weights.len() != buckets {
            return Err(Error::Shape(format!(
                "residual codec with nbits = {nbits} needs {} cutoffs and {buckets} weights, got {} and {}",
                buckets - 1,
                cutoffs.len(),
                weights.len()
            )));
        }
        if let Some(i) = centroids.iter().position(|c| !c.is_finite()) {
            return Err(Error::NonFinite {
                what: "residual codec centroids".into(),
                row: i / dim,
                col: i % dim,
                value: centroids[i].to_f32(),
            });
        }
        for (what, v) in [("bucket cutoffs", &cutoffs), ("bucket weights", &weights)] {
            if let Some(i) = v.iter().position(|c| !c.is_finite()) {
                return Err(Error::NonFinite {
                    what: format!("residual codec {what}"),
                    row: 0,
                    col: i,
                    value: v[i],
                });
            }
        }
        let per = 8 / nbits as usize;
        let mut table = Vec::with_capacity(256 * per);
        for byte in 0..256u32 {
            for slot in 0..per {
                table.push(weights[bucket_of(byte, slot, nbits)]);
            }
        }
        Ok(ResidualCodec {
            nbits,
            dim,
            centroids: centroids.into(),
            cutoffs,
            weights,
            table,
        })
    }

    pub fn nbits(&self) -> u32 {
        self.nbits
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn num_centroids(&self) -> usize {
        self.centroids.len() / self.dim
    }
    /// `[K, d]` row-major.
    pub fn centroids(&self) -> &[f16] {
        &self.centroids
    }
    pub fn bucket_cutoffs(&self) -> &[f32] {
        &self.cutoffs
    }
    pub fn bucket_weights(&self) -> &[f32] {
        &self.weights
    }

    /// Bytes of packed residual per token: `⌈d·nbits / 8⌉`.
    pub fn row_bytes(&self) -> usize {
        (self.dim * self.nbits as usize).div_ceil(8)
    }

    /// Decode one token: `normalize(centroid[id] + weights[buckets])` into `out` (`d` values).
    /// `id` must be below [`Self::num_centroids`] (checked when a corpus is built or opened).
    #[inline]
    pub(crate) fn decode_token(&self, id: u32, packed: &[u8], out: &mut [f32]) {
        let d = self.dim;
        // The centroid widened in one pass (half's slice conversion: F16C where the CPU has
        // it, 8 values an instruction), then each packed byte's `per` bucket weights added.
        self.centroids[id as usize * d..(id as usize + 1) * d].convert_to_f32_slice(out);
        let per = 8 / self.nbits as usize;
        for (o, &byte) in out.chunks_mut(per).zip(packed) {
            let w = &self.table[byte as usize * per..][..o.len()];
            o.iter_mut().zip(w).for_each(|(x, w)| *x += w);
        }
        // f32 sums, as colbert-ai's CPU decompression normalizes in f32; F.normalize's eps.
        let norm = sum_of_squares(out).sqrt().max(1e-12);
        for x in out.iter_mut() {
            *x /= norm;
        }
    }

    /// The nearest centroid of each token by largest dot product, as PLAID assigns them.
    pub(crate) fn assign(&self, tokens: &[f32]) -> Vec<u32> {
        let c: Vec<f32> = self.centroids.iter().map(|x| x.to_f32()).collect();
        let zeros = vec![0.0f32; self.num_centroids()];
        kmeans::assign(tokens, &c, &zeros, self.dim)
    }

    /// The packed residual of one token (`d` values) against centroid `id` (`row_bytes` bytes):
    /// its bucket per dimension, as [`crate::codec::compress`] writes them.
    pub fn encode_token(&self, token: &[f32], id: u32) -> Result<Vec<u8>> {
        if token.len() != self.dim || id as usize >= self.num_centroids() {
            return Err(Error::Shape(format!(
                "residual codec: a token of {} values and centroid {id}; the codec has d = {} and {} centroids",
                token.len(),
                self.dim,
                self.num_centroids()
            )));
        }
        let mut out = vec![0u8; self.row_bytes()];
        self.encode_residual(token, id, &mut out);
        Ok(out)
    }

    /// Pack the residual `token − centroid[id]` of one token into `out` (`row_bytes` bytes).
    pub(crate) fn encode_residual(&self, token: &[f32], id: u32, out: &mut [u8]) {
        let d = self.dim;
        let c = &self.centroids[id as usize * d..(id as usize + 1) * d];
        out.fill(0);
        let nb = self.nbits as usize;
        for k in 0..d {
            let r = token[k] - c[k].to_f32();
            // torch.bucketize(right=False): the number of cutoffs strictly below r.
            let b = self.cutoffs.iter().filter(|&&x| x < r).count();
            for bit in 0..nb {
                if (b >> bit) & 1 == 1 {
                    let s = k * nb + bit;
                    out[s / 8] |= 0x80 >> (s % 8);
                }
            }
        }
    }

    /// Train a codec on the tokens of the documents at `offsets` (L2-normalized rows of `dim`,
    /// which `rows` gives as f32 for a list of row numbers: only the sampled ones are read) as
    /// colbert-ai does: k-means on a sample, centroids L2-normalized and stored in f16, then the
    /// bucket cutoffs and weights fitted to the residuals of a held-out sample as `opts.buckets`
    /// says.
    pub(crate) fn train(
        rows: &dyn Fn(&[usize]) -> Vec<f32>,
        offsets: &[usize],
        dim: usize,
        opts: &ResidualOptions,
        seed: u64,
        progress: super::Progress<'_>,
    ) -> Result<Self> {
        let plan = TrainingPlan::new(offsets, opts, seed)?;
        let sample = rows(&plan.sample);
        let raw = kmeans::kmeans(
            &sample,
            dim,
            plan.centroids,
            opts.kmeans_iters,
            seed,
            kmeans::Seeding::Random,
            progress,
        );
        let placeholder = Self::placeholder(opts.nbits, dim, &raw)?;
        let held = rows(&plan.heldout);
        let ids = placeholder.assign(&held);
        placeholder.with_buckets(&held, &ids, opts.buckets)
    }

    /// A codec with the trained centroids (`raw`, `[K, d]` f32: L2-normalized here and stored
    /// in f16) and no buckets yet: what the held-out tokens are assigned against.
    pub(crate) fn placeholder(nbits: u32, dim: usize, raw: &[f32]) -> Result<Self> {
        let mut centroids = Vec::with_capacity(raw.len());
        for c in raw.chunks_exact(dim) {
            let n = c.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            centroids.extend(c.iter().map(|x| f16::from_f32(x / n)));
        }
        let buckets = 1usize << nbits;
        ResidualCodec::new(
            nbits,
            dim,
            centroids,
            vec![0.0; buckets - 1],
            vec![0.0; buckets],
        )
    }

    /// This codec's centroids with the bucket cutoffs and weights fitted (`fit`) to the
    /// residuals of the held-out tokens `held` (`[H, d]` f32), each assigned to centroid
    /// `ids[i]`.
    pub(crate) fn with_buckets(self, held: &[f32], ids: &[u32], fit: Buckets) -> Result<Self> {
        let dim = self.dim;
        let mut residuals: Vec<f32> = held
            .par_chunks_exact(dim)
            .zip(ids.par_iter())
            .flat_map_iter(|(x, &id)| {
                let c = &self.centroids[id as usize * dim..(id as usize + 1) * dim];
                x.iter()
                    .zip(c)
                    .map(|(a, b)| a - b.to_f32())
                    .collect::<Vec<_>>()
            })
            .collect();
        residuals.par_sort_unstable_by(f32::total_cmp);
        let (cutoffs, weights) = fit_buckets(&residuals, 1 << self.nbits, fit);
        ResidualCodec::new(self.nbits, dim, self.centroids.to_vec(), cutoffs, weights)
    }
}

/// Lloyd–Max iterations at most (each is one binary search a bucket over the sorted residuals).
const LLOYD_MAX_ITERS: usize = 500;

/// The `buckets − 1` cutoffs and `buckets` weights of `sorted` residuals, as `fit` says.
fn fit_buckets(sorted: &[f32], buckets: usize, fit: Buckets) -> (Vec<f32>, Vec<f32>) {
    let mut cutoffs: Vec<f32> = (1..buckets)
        .map(|i| quantile(sorted, i as f64 / buckets as f64))
        .collect();
    let mut weights: Vec<f32> = (0..buckets)
        .map(|i| quantile(sorted, (i as f64 + 0.5) / buckets as f64))
        .collect();
    if fit == Buckets::LloydMax && !sorted.is_empty() {
        // Sums of the first i values, so a bucket's mean is two lookups.
        let mut prefix = Vec::with_capacity(sorted.len() + 1);
        prefix.push(0f64);
        for &v in sorted {
            prefix.push(prefix[prefix.len() - 1] + f64::from(v));
        }
        for _ in 0..LLOYD_MAX_ITERS {
            bucket_means(sorted, &prefix, &cutoffs, &mut weights);
            let next: Vec<f32> = weights.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect();
            if next == cutoffs {
                break;
            }
            cutoffs = next;
        }
        bucket_means(sorted, &prefix, &cutoffs, &mut weights);
    }
    (cutoffs, weights)
}

/// Each bucket's mean into `weights` (an empty bucket keeps its weight). Value `v` is in bucket
/// `b` when `b` cutoffs lie strictly below it, as the encoder buckets it.
fn bucket_means(sorted: &[f32], prefix: &[f64], cutoffs: &[f32], weights: &mut [f32]) {
    let mut lo = 0;
    for (b, w) in weights.iter_mut().enumerate() {
        let hi = cutoffs
            .get(b)
            .map_or(sorted.len(), |&c| sorted.partition_point(|&v| v <= c));
        if hi > lo {
            *w = ((prefix[hi] - prefix[lo]) / (hi - lo) as f64) as f32;
        }
        lo = lo.max(hi);
    }
}

/// Tokens per chunk of the CPU's compression (read, checked, assigned and encoded together).
const ASSIGN_CHUNK: usize = 1 << 16;

/// The residual codec trained and every token encoded on the CPU, `ASSIGN_CHUNK` tokens at a
/// time: no f32 copy of the corpus is made (k-means reads its sample's rows), so a memory-mapped
/// corpus larger than RAM is read through, as on the GPU. Returns the codec, the codes and each
/// token's centroid.
pub(crate) fn compress(
    corpus: &Corpus,
    opts: &ResidualOptions,
    seed: u64,
    progress: super::Progress<'_>,
) -> Result<(ResidualCodec, Vec<u8>, Vec<u32>)> {
    let (d, t) = (corpus.dim(), corpus.num_tokens());
    let m = corpus.tokens();
    let chunks = || {
        (0..t)
            .step_by(ASSIGN_CHUNK)
            .map(move |s| s..(s + ASSIGN_CHUNK).min(t))
    };
    progress("check norms", 0, t);
    for range in chunks() {
        let x = m.rows_range(range.clone()).to_f32_vec();
        super::check_unit_from(corpus, &x, range.start)?;
        progress("check norms", range.end, t);
    }
    let rows = |idx: &[usize]| m.gather_f32(idx);
    let r = ResidualCodec::train(&rows, corpus.offsets(), d, opts, seed, progress)?;
    let rb = r.row_bytes();
    let mut ids = Vec::with_capacity(t);
    let mut codes = vec![0u8; t * rb];
    progress("encode", 0, t);
    for range in chunks() {
        let x = m.rows_range(range.clone()).to_f32_vec();
        let part = r.assign(&x);
        codes[range.start * rb..range.end * rb]
            .par_chunks_mut(rb)
            .zip(x.par_chunks_exact(d))
            .zip(part.par_iter())
            .for_each(|((row, tok), &id)| r.encode_residual(tok, id, row));
        ids.extend(part);
        progress("encode", range.end, t);
    }
    Ok((r, codes, ids))
}

/// Documents whose tokens k-means may draw from, of `n`: `1 + 16·sqrt(120·n)` at most, as
/// colbert-ai's `sample_pids` and fast-plaid's `n_samples_kmeans`.
fn plaid_sample_docs(n: usize) -> usize {
    (1 + (16.0 * (120.0 * n as f64).sqrt()) as usize).min(n)
}

/// Which tokens train a residual codec, as colbert-ai and fast-plaid pick them (seeded): 5% of
/// the `T` tokens, at most 50K, held out for the bucket statistics; k-means on the other tokens
/// of `1 + 16·sqrt(120·N)` documents drawn from the `N` (every document up to 30,720 of them),
/// at most `K · max_points_per_centroid` of those tokens. (Before 2026-11-27 every document's
/// tokens were drawn from: at 1M documents of 80 tokens, 33.5M training tokens against PLAID's
/// 14M, and k-means took 11 of the GPU build's 29 s.)
pub(crate) struct TrainingPlan {
    pub(crate) centroids: usize,
    pub(crate) heldout: Vec<usize>,
    pub(crate) sample: Vec<usize>,
}

impl TrainingPlan {
    /// The plan for the documents at `offsets` (`N + 1` of them, the last the token count).
    pub(crate) fn new(offsets: &[usize], opts: &ResidualOptions, seed: u64) -> Result<Self> {
        let t = offsets.last().copied().unwrap_or(0);
        if !matches!(opts.nbits, 1 | 2 | 4) {
            return Err(Error::Argument(format!(
                "residual codec: nbits must be 1, 2 or 4, got {}",
                opts.nbits
            )));
        }
        let k = opts.centroids.unwrap_or_else(|| plaid_num_centroids(t));
        if k == 0 || k > u32::MAX as usize {
            return Err(Error::Argument(format!(
                "residual codec: {k} centroids is not a valid count"
            )));
        }
        let heldout_n = ((t as f64 * 0.05) as usize).clamp(1, 50_000).min(t);
        let heldout = sample_indices(t, heldout_n, seed ^ 0x5eed_0001);
        let mut is_held = vec![false; t];
        for &i in &heldout {
            is_held[i] = true;
        }
        let n = offsets.len().saturating_sub(1);
        let docs = plaid_sample_docs(n);
        let every_token = || -> Vec<usize> { (0..t).filter(|&i| !is_held[i]).collect() };
        let train_pool: Vec<usize> = if heldout_n >= t {
            (0..t).collect()
        } else if docs >= n {
            every_token()
        } else {
            let pool: Vec<usize> = sample_indices(n, docs, seed ^ 0x5eed_0003)
                .into_iter()
                .flat_map(|j| offsets[j]..offsets[j + 1])
                .filter(|&i| !is_held[i])
                .collect();
            // (Empty only if every sampled token were held out: then every document's.)
            if pool.is_empty() { every_token() } else { pool }
        };
        let cap = k.saturating_mul(opts.max_points_per_centroid.max(1));
        let sample = sample_indices(train_pool.len(), cap, seed ^ 0x5eed_0002)
            .into_iter()
            .map(|p| train_pool[p])
            .collect();
        Ok(TrainingPlan {
            centroids: k,
            heldout,
            sample,
        })
    }
}

/// The bucket of dimension slot `slot` (0 = first) of a packed byte.
fn bucket_of(byte: u32, slot: usize, nbits: u32) -> usize {
    let mut b = 0usize;
    for bit in 0..nbits as usize {
        let s = slot * nbits as usize + bit;
        b |= (((byte >> (7 - s)) & 1) as usize) << bit;
    }
    b
}

/// `torch.quantile` of sorted values (linear interpolation between the two nearest ranks).
fn quantile(sorted: &[f32], q: f64) -> f32 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let w = pos - lo as f64;
    (f64::from(sorted[lo]) + (f64::from(sorted[hi]) - f64::from(sorted[lo])) * w) as f32
}

/// Σ x², in eight running sums over the elements by position mod 8, then added pairwise: a
/// fixed order (the same on every machine) the compiler turns into vector instructions, where
/// one running sum waits four cycles an element (decode was 3-4× the scoring at one query).
fn sum_of_squares(x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let rest: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v * v;
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + rest
}

#[cfg(test)]
mod tests;

//! Product quantization (the paper's compressed format): the `d` dimensions are split into `M`
//! equal sub-spaces of `d / M` dimensions; each token stores, per sub-space, the index (one
//! byte) of its nearest of `K = 256` sub-space centroids, trained by k-means on that
//! sub-space. A token decodes to the concatenation of its `M` sub-space centroids (not
//! normalized: the paper scores the concatenation through per-sub-space lookup tables).

use rayon::prelude::*;

use super::kmeans::{self, sample_indices};
use crate::error::{Error, Result};

/// Centroids per sub-space (one byte per code).
pub const PQ_CENTROIDS: usize = 256;

/// A product quantizer: `M` codebooks of 256 centroids of `d / M` dimensions, f32.
#[derive(Clone, Debug, PartialEq)]
pub struct PqCodec {
    m: usize,
    dim: usize,
    /// `[M, 256, d / M]` row-major.
    codebooks: Vec<f32>,
}

/// Settings for training a product quantizer.
#[derive(Clone, Copy, Debug)]
pub struct PqOptions {
    /// Sub-spaces M (must divide d).
    pub m: usize,
    pub kmeans_iters: usize,
    /// Training points per sub-space are capped at this many per centroid (× 256).
    pub max_points_per_centroid: usize,
}

impl Default for PqOptions {
    fn default() -> Self {
        PqOptions {
            m: 16,
            kmeans_iters: 10,
            max_points_per_centroid: 256,
        }
    }
}

impl PqCodec {
    /// A quantizer from `M` and its codebooks `[M, 256, d / M]` (finite values).
    pub fn new(m: usize, dim: usize, codebooks: Vec<f32>) -> Result<Self> {
        if m == 0 || dim == 0 || !dim.is_multiple_of(m) {
            return Err(Error::Argument(format!(
                "product quantization: M = {m} must divide d = {dim}"
            )));
        }
        if codebooks.len() != PQ_CENTROIDS * dim {
            return Err(Error::Shape(format!(
                "product quantization: codebooks need M × 256 × d/M = {} values, got {}",
                PQ_CENTROIDS * dim,
                codebooks.len()
            )));
        }
        let sub = dim / m;
        if let Some(i) = codebooks.iter().position(|x| !x.is_finite()) {
            return Err(Error::NonFinite {
                what: format!("PQ codebook {}", i / (PQ_CENTROIDS * sub)),
                row: (i / sub) % PQ_CENTROIDS,
                col: i % sub,
                value: codebooks[i],
            });
        }
        Ok(PqCodec { m, dim, codebooks })
    }

    pub fn m(&self) -> usize {
        self.m
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// `[M, 256, d / M]` row-major.
    pub fn codebooks(&self) -> &[f32] {
        &self.codebooks
    }

    fn sub(&self) -> usize {
        self.dim / self.m
    }

    /// Decode one token (`M` codes) into `out` (`d` values).
    #[inline]
    pub(crate) fn decode_token(&self, codes: &[u8], out: &mut [f32]) {
        let sub = self.sub();
        for (s, (&c, dst)) in codes.iter().zip(out.chunks_exact_mut(sub)).enumerate() {
            let at = (s * PQ_CENTROIDS + c as usize) * sub;
            dst.copy_from_slice(&self.codebooks[at..at + sub]);
        }
    }

    /// Codes (`[T, M]`) of `tokens` (`[T, d]`): the nearest centroid per sub-space.
    pub(crate) fn encode(&self, tokens: &[f32]) -> Vec<u8> {
        let (m, sub, d) = (self.m, self.sub(), self.dim);
        let t = tokens.len() / d;
        let mut codes = vec![0u8; t * m];
        for s in 0..m {
            let book = &self.codebooks[s * PQ_CENTROIDS * sub..(s + 1) * PQ_CENTROIDS * sub];
            let part: Vec<f32> = tokens
                .chunks_exact(d)
                .flat_map(|x| x[s * sub..(s + 1) * sub].iter().copied())
                .collect();
            let ids = kmeans::assign(&part, book, &kmeans::half_neg_norms(book, sub), sub);
            for (row, id) in codes.chunks_exact_mut(m).zip(ids) {
                row[s] = id as u8;
            }
        }
        codes
    }

    /// Train `M` codebooks on `tokens` (`[T, d]`), k-means++ then Lloyd per sub-space, on the
    /// seeded sample [`Self::training_sample`] picks.
    pub(crate) fn train(
        tokens: &[f32],
        dim: usize,
        opts: &PqOptions,
        seed: u64,
        progress: super::Progress<'_>,
    ) -> Result<Self> {
        let t = tokens.len() / dim.max(1);
        let mut sample = Vec::new();
        for i in Self::training_sample(t, opts, seed) {
            sample.extend_from_slice(&tokens[i * dim..(i + 1) * dim]);
        }
        Self::train_on_sample(&sample, dim, opts, seed, progress)
    }

    /// The tokens (of `t`) the codebooks train on: at most 256 · max_points_per_centroid, seeded.
    pub(crate) fn training_sample(t: usize, opts: &PqOptions, seed: u64) -> Vec<usize> {
        let cap = PQ_CENTROIDS * opts.max_points_per_centroid.max(1);
        sample_indices(t, cap, seed ^ 0x09_0001)
    }

    /// Train `M` codebooks on the sampled rows `sample` (`[S, d]` f32).
    pub(crate) fn train_on_sample(
        sample: &[f32],
        dim: usize,
        opts: &PqOptions,
        seed: u64,
        progress: super::Progress<'_>,
    ) -> Result<Self> {
        let m = opts.m;
        if m == 0 || dim == 0 || !dim.is_multiple_of(m) {
            return Err(Error::Argument(format!(
                "product quantization: M = {m} must divide d = {dim}"
            )));
        }
        let sub = dim / m;
        let books: Vec<Vec<f32>> = (0..m)
            .into_par_iter()
            .map(|s| {
                let part: Vec<f32> = sample
                    .chunks_exact(dim)
                    .flat_map(|row| row[s * sub..(s + 1) * sub].iter().copied())
                    .collect();
                let book = kmeans::kmeans(
                    &part,
                    sub,
                    PQ_CENTROIDS,
                    opts.kmeans_iters,
                    seed.wrapping_add(s as u64),
                    kmeans::Seeding::PlusPlus,
                    &|_, _, _| {},
                );
                progress("k-means per sub-space", s + 1, m);
                book
            })
            .collect();
        PqCodec::new(m, dim, books.concat())
    }
}

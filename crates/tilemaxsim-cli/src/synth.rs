//! Seeded synthetic data for `bench`: L2-normalized Gaussian token embeddings (what encoders
//! produce), fixed or uniform document lengths. Generated in parallel, deterministic per seed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;
use tilemaxsim::{Corpus, DType, OwnedElements};

/// Document lengths: every document `Fixed(n)` tokens, or uniform in `lo..=hi`.
#[derive(Clone, Copy, Debug)]
pub enum Lengths {
    Fixed(usize),
    Uniform(usize, usize),
}

impl std::str::FromStr for Lengths {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parse = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad length {t:?}"))
        };
        let l = match s.split_once(':') {
            Some((lo, hi)) => Lengths::Uniform(parse(lo)?, parse(hi)?),
            None => Lengths::Fixed(parse(s)?),
        };
        match l {
            Lengths::Fixed(0) | Lengths::Uniform(0, _) => {
                Err("documents need at least 1 token".into())
            }
            Lengths::Uniform(lo, hi) if lo > hi => Err(format!("empty range {lo}:{hi}")),
            l => Ok(l),
        }
    }
}

impl std::fmt::Display for Lengths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lengths::Fixed(n) => write!(f, "{n}"),
            Lengths::Uniform(lo, hi) => write!(f, "U[{lo},{hi}]"),
        }
    }
}

impl Lengths {
    pub fn sample(&self, n: usize, seed: u64) -> Vec<usize> {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
        (0..n)
            .map(|_| match *self {
                Lengths::Fixed(len) => len,
                Lengths::Uniform(lo, hi) => rng.random_range(lo..=hi),
            })
            .collect()
    }
}

/// `rows × dim` unit-norm Gaussian rows, as f32, deterministic for `seed`.
pub fn unit_rows(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    const CHUNK: usize = 4096;
    let mut v = vec![0.0f32; rows * dim];
    v.par_chunks_mut(CHUNK * dim)
        .enumerate()
        .for_each(|(c, part)| {
            let mut rng =
                StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(c as u64));
            for row in part.chunks_exact_mut(dim) {
                let mut norm = 0.0f32;
                for x in row.iter_mut() {
                    *x = rng.sample(StandardNormal);
                    norm += *x * *x;
                }
                let inv = 1.0 / norm.sqrt().max(1e-12);
                row.iter_mut().for_each(|x| *x *= inv);
            }
        });
    v
}

pub fn corpus(
    docs: usize,
    lengths: Lengths,
    dim: usize,
    dtype: DType,
    seed: u64,
) -> anyhow::Result<Corpus> {
    let lens = lengths.sample(docs, seed);
    let total: usize = lens.iter().sum();
    let v = unit_rows(total, dim, seed);
    Ok(Corpus::from_lengths(
        OwnedElements::from_f32(&v, dtype),
        dim,
        &lens,
    )?)
}

/// What `bench --codec` scores: a codec and its parameters (the codes are random, which costs
/// the kernels what real codes do).
#[derive(Clone, Copy, Debug)]
pub enum SynthCodec {
    Residual { nbits: u32, centroids: usize },
    Pq { m: usize },
    Int8,
    Fp8,
}

/// A compressed corpus of `docs` documents with random codes: residual centroids unit-norm
/// rows (f16) with bucket weights at the quantiles of N(0, 0.05²), pq codebooks Gaussian of
/// a unit token's scale, int8/fp8 scales of unit-norm tokens. Deterministic for `seed`.
pub fn codes(
    docs: usize,
    lengths: Lengths,
    dim: usize,
    codec: SynthCodec,
    seed: u64,
) -> anyhow::Result<tilemaxsim::codec::CompressedCorpus> {
    use tilemaxsim::codec::{Codec, CompressedCorpus, PqCodec, ResidualCodec};
    let lens = lengths.sample(docs, seed);
    let total: usize = lens.iter().sum();
    let mut offsets = vec![0usize];
    for &l in &lens {
        offsets.push(offsets.last().copied().unwrap_or(0) + l);
    }
    let random_bytes = |n: usize, salt: u64| -> Vec<u8> {
        let mut v = vec![0u8; n];
        v.par_chunks_mut(1 << 20).enumerate().for_each(|(c, part)| {
            let mut rng = StdRng::seed_from_u64(seed ^ salt ^ (c as u64).wrapping_mul(0x9e37_79b9));
            rng.fill(part);
        });
        v
    };
    let (codec, row, aux): (Codec, usize, Option<Vec<u32>>) = match codec {
        SynthCodec::Residual { nbits, centroids } => {
            let cent: Vec<half::f16> = unit_rows(centroids, dim, seed ^ 0xc3)
                .into_iter()
                .map(half::f16::from_f32)
                .collect();
            let b = 1usize << nbits;
            // Quantiles of N(0, 0.05²) at (i + 0.5) / b, cutoffs at i / b (probit by bisection).
            let probit = |p: f64| {
                let (mut lo, mut hi) = (-10.0f64, 10.0f64);
                for _ in 0..100 {
                    let mid = 0.5 * (lo + hi);
                    if 0.5 * (1.0 + erf(mid / std::f64::consts::SQRT_2)) < p {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                (0.05 * 0.5 * (lo + hi)) as f32
            };
            let cutoffs = (1..b).map(|i| probit(i as f64 / b as f64)).collect();
            let weights = (0..b)
                .map(|i| probit((i as f64 + 0.5) / b as f64))
                .collect();
            let r = ResidualCodec::new(nbits, dim, cent, cutoffs, weights)?;
            let mut rng = StdRng::seed_from_u64(seed ^ 0x1d);
            let ids = (0..total)
                .map(|_| rng.random_range(0..centroids as u32))
                .collect();
            let row = r.row_bytes();
            (Codec::Residual(r), row, Some(ids))
        }
        SynthCodec::Pq { m } => {
            let sub = dim / m;
            let scale = 1.0 / (dim as f32).sqrt();
            let mut rng = StdRng::seed_from_u64(seed ^ 0x9a);
            let books = (0..m * 256 * sub)
                .map(|_| rng.sample::<f32, _>(StandardNormal) * scale)
                .collect();
            (Codec::Pq(PqCodec::new(m, dim, books)?), m, None)
        }
        SynthCodec::Int8 | SynthCodec::Fp8 => {
            let fp8 = matches!(codec, SynthCodec::Fp8);
            // The scale of a unit-norm Gaussian token's largest magnitude (≈ 3 / √d).
            let amax = 3.0 / (dim as f32).sqrt();
            let scale = amax / if fp8 { 448.0 } else { 127.0 };
            let c = if fp8 { Codec::Fp8 } else { Codec::Int8 };
            (c, dim, Some(vec![scale.to_bits(); total]))
        }
    };
    let mut bytes = random_bytes(total * row, 0x5eed);
    if matches!(codec, Codec::Fp8) {
        // No NaN codes (0x7f, 0xff): those become the largest finite values.
        bytes
            .iter_mut()
            .filter(|b| **b & 0x7f == 0x7f)
            .for_each(|b| *b -= 1);
    }
    Ok(CompressedCorpus::new(codec, dim, offsets, bytes, aux)?)
}

/// The error function (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-x * x).exp();
    if x < 0.0 { -y } else { y }
}

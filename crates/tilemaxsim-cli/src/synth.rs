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

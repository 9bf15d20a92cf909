//! Compression on the device (bench/gpu_check.sh runs it there): `cuda::compress` against the
//! CPU's `codec::compress` and the float64 truth, on uneven documents (1-token and long ones),
//! every input dtype, d with and without the tensor-core assignment (64/128 and others),
//! centroid counts that are not a multiple of a tile, and many small chunks against one.
//! - residual: the GPU's k-means is deterministic (the same seed gives the same file twice);
//!   every token's centroid is the largest dot product (up to its f16 rounding); its codes are
//!   the CPU encoder's for that centroid; the reconstruction error is the CPU codec's or better
//!   (within 10%).
//! - int8 / fp8: codes and scales bit-identical to the CPU's.
//! - PQ: the codebooks are the CPU's (trained there); the codes are the nearest sub-space
//!   centroids (up to rounding of near ties).
//! - a sink (an index build's codes file) is handed every token's residual codes once, a
//!   chunk at a time as they come back (and nothing by int8, which makes its codes at once);
//! - errors: a token that is not unit-norm, the CPU's message.
//!
//! Without a usable GPU every test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use rand::Rng;
use tilemaxsim::codec::{
    Codec, CodecSpec, CodesSink, CompressedCorpus, PqOptions, ResidualOptions, compress,
};
use tilemaxsim::cuda::compress_in_chunks;
use tilemaxsim::{Corpus, DType};

fn on_gpu(corpus: &Corpus, spec: &CodecSpec, seed: u64, chunk: usize) -> CompressedCorpus {
    compress_in_chunks(0, corpus, spec, seed, chunk, &|_, _, _| {}, None).expect("GPU compress")
}

/// Document lengths with 1-token and long documents, `total` tokens or so.
fn lengths(seed: u64, total: usize) -> Vec<usize> {
    let mut r = rng(seed);
    let mut v = vec![1, 317];
    let mut n = 318;
    while n < total {
        let l = match r.random_range(0..10) {
            0 => 1,
            1 => r.random_range(150..400),
            _ => r.random_range(2..90),
        };
        v.push(l);
        n += l;
    }
    v
}

fn tokens_f32(c: &Corpus) -> Vec<f32> {
    c.tokens().to_f32_vec()
}

/// Mean squared error of the decoded corpus against the original tokens.
fn mse(original: &[f32], c: &CompressedCorpus) -> f64 {
    let dec = c.decode().expect("decode").tokens().to_f32_vec();
    original
        .iter()
        .zip(&dec)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum::<f64>()
        / original.len() as f64
}

#[test]
fn residual_on_the_gpu_is_deterministic_and_encodes_as_the_cpu() {
    if gpu().is_none() {
        return;
    }
    let cases = [
        (128, DType::F16, 2, 200, 4000),
        (128, DType::BF16, 4, 130, 3000),
        (64, DType::F32, 1, 300, 5000),
        (96, DType::F16, 2, 77, 2500),
        (48, DType::F32, 4, 40, 1500),
        // Two centroids: many tokens have a negative product with both, so a padding column
        // (K is padded to 128 on the tensor-core path) must never win.
        (128, DType::F16, 2, 2, 1000),
    ];
    for (i, &(dim, dtype, nbits, k, total)) in cases.iter().enumerate() {
        let label = format!("d = {dim} {dtype} nbits = {nbits} K = {k}");
        let corpus = unit_corpus(100 + i as u64, &lengths(i as u64, total), dim, dtype);
        let spec = CodecSpec::Residual(ResidualOptions {
            nbits,
            centroids: Some(k),
            kmeans_iters: 4,
            ..Default::default()
        });
        let a = on_gpu(&corpus, &spec, 7, usize::MAX);
        let b = on_gpu(&corpus, &spec, 7, 4096);
        assert_eq!(
            a.codec(),
            b.codec(),
            "{label}: a second run (in chunks) trains another codec"
        );
        assert_eq!(
            a.codes(),
            b.codes(),
            "{label}: a second run (in chunks) gives other codes"
        );
        assert_eq!(
            a.aux(),
            b.aux(),
            "{label}: a second run (in chunks) gives other ids"
        );
        let other = on_gpu(&corpus, &spec, 8, usize::MAX);
        assert_ne!(
            a.codec(),
            other.codec(),
            "{label}: another seed, the same codec"
        );

        let Codec::Residual(r) = a.codec() else {
            panic!("{label}: not residual")
        };
        let x = tokens_f32(&corpus);
        let cents: Vec<f64> = r
            .centroids()
            .iter()
            .map(|c| f64::from(c.to_f32()))
            .collect();
        let ids = a.aux().expect("ids");
        let rb = r.row_bytes();
        for (t, tok) in x.chunks_exact(dim).enumerate() {
            let dot = |c: usize| -> f64 {
                tok.iter()
                    .zip(&cents[c * dim..(c + 1) * dim])
                    .map(|(a, b)| f64::from(*a) * b)
                    .sum()
            };
            let best = (0..k).map(dot).fold(f64::NEG_INFINITY, f64::max);
            let chosen = dot(ids[t] as usize);
            // The GPU multiplies the token rounded to f16: |Δ⟨x, c⟩| ≤ 2^-11 per unit vector.
            assert!(
                best - chosen <= 2e-3,
                "{label}: token {t} went to centroid {} ({chosen}), the best scores {best}",
                ids[t]
            );
            let want = r.encode_token(tok, ids[t]).expect("encode");
            assert_eq!(
                &a.codes()[t * rb..(t + 1) * rb],
                &want[..],
                "{label}: token {t}'s codes"
            );
        }
        let cpu = compress(&corpus, &spec, 7, &|_, _, _| {}).expect("CPU compress");
        let (eg, ec) = (mse(&x, &a), mse(&x, &cpu));
        assert!(
            eg <= 1.1 * ec,
            "{label}: reconstruction error {eg} on the GPU, {ec} on the CPU"
        );
    }
}

/// A run handed to a sink: its first token, codes and words.
type Run = (usize, Vec<u8>, Vec<u32>);

/// A sink that keeps what it is handed: the codec, then every run of codes.
#[derive(Default)]
struct Kept {
    codec: std::sync::Mutex<Option<Codec>>,
    runs: std::sync::Mutex<Vec<Run>>,
}

impl CodesSink for Kept {
    fn begin(&self, codec: &Codec) -> tilemaxsim::Result<()> {
        let mut kept = self.codec.lock().unwrap();
        assert!(kept.is_none(), "begin came twice");
        assert!(
            self.runs.lock().unwrap().is_empty(),
            "codes came before begin"
        );
        *kept = Some(codec.clone());
        Ok(())
    }
    fn codes(&self, first: usize, codes: &[u8], aux: &[u32]) -> tilemaxsim::Result<()> {
        assert!(
            self.codec.lock().unwrap().is_some(),
            "codes came before begin"
        );
        self.runs
            .lock()
            .unwrap()
            .push((first, codes.to_vec(), aux.to_vec()));
        Ok(())
    }
}

#[test]
fn a_sink_is_handed_every_token_once_as_the_chunks_come_back() {
    if gpu().is_none() {
        return;
    }
    let (dim, dtype) = (128, DType::F16);
    let corpus = unit_corpus(7, &lengths(7, 3000), dim, dtype);
    let t = corpus.num_tokens();
    let residual = CodecSpec::Residual(ResidualOptions {
        centroids: Some(64),
        ..Default::default()
    });
    // int8 makes its codes at once: no sink is called.
    let kept = Kept::default();
    compress_in_chunks(
        0,
        &corpus,
        &CodecSpec::Int8,
        7,
        4096,
        &|_, _, _| {},
        Some(&kept),
    )
    .expect("GPU compress");
    assert!(kept.codec.lock().unwrap().is_none() && kept.runs.lock().unwrap().is_empty());
    // Residual: a run a chunk, as each comes back; in one chunk, one run.
    for (chunk, runs_at_least) in [(4096, 2), (usize::MAX, 1)] {
        let label = format!("chunks of {chunk} bytes");
        let kept = Kept::default();
        let z = compress_in_chunks(0, &corpus, &residual, 7, chunk, &|_, _, _| {}, Some(&kept))
            .expect("GPU compress");
        assert_eq!(
            kept.codec.lock().unwrap().as_ref(),
            Some(z.codec()),
            "{label}"
        );
        let mut runs = kept.runs.into_inner().unwrap();
        assert!(runs.len() >= runs_at_least, "{label}: {} runs", runs.len());
        runs.sort_by_key(|r| r.0);
        let rb = z.codec().row_bytes(dim);
        let mut next = 0;
        for (first, codes, aux) in &runs {
            assert_eq!(*first, next, "{label}: runs overlap or leave a gap");
            assert_eq!(codes.len() % rb, 0);
            let n = codes.len() / rb;
            assert_eq!(aux.len(), n, "{label}: a word a token");
            assert_eq!(
                codes[..],
                z.codes()[first * rb..(first + n) * rb],
                "{label}"
            );
            assert_eq!(aux[..], z.aux().unwrap()[*first..first + n], "{label}");
            next += n;
        }
        assert_eq!(next, t, "{label}: every token");
    }
}

#[test]
fn int8_and_fp8_on_the_gpu_are_the_cpu_codes() {
    if gpu().is_none() {
        return;
    }
    for (i, dtype) in [DType::F32, DType::F16, DType::BF16]
        .into_iter()
        .enumerate()
    {
        for dim in [128, 77, 1] {
            let mut r = rng(300 + i as u64);
            let lens = lengths(i as u64 + dim as u64, 1200);
            let total: usize = lens.iter().sum();
            let mut v = random_values(&mut r, total, dim, 3.0);
            v[dim..2 * dim].fill(0.0); // a zero token: zero codes, scale 0
            v[3 * dim..4 * dim].iter_mut().for_each(|x| *x *= 1e-30); // a tiny one (0 in f16)
            let corpus =
                Corpus::from_lengths(tilemaxsim::OwnedElements::from_f32(&v, dtype), dim, &lens)
                    .unwrap();
            for spec in [CodecSpec::Int8, CodecSpec::Fp8] {
                let label = format!("{spec:?} d = {dim} {dtype}");
                let g = on_gpu(&corpus, &spec, 0, 8192);
                let c = compress(&corpus, &spec, 0, &|_, _, _| {}).unwrap();
                assert_eq!(g.aux(), c.aux(), "{label}: scales");
                if let Some(t) = g.codes().iter().zip(c.codes()).position(|(a, b)| a != b) {
                    panic!(
                        "{label}: code {t} (token {}, value {}) is {:#04x} on the GPU, {:#04x} on the CPU",
                        t / dim,
                        corpus.tokens().elements().get_f32(t),
                        g.codes()[t],
                        c.codes()[t]
                    );
                }
            }
        }
    }
}

#[test]
fn pq_on_the_gpu_picks_the_nearest_sub_space_centroids() {
    if gpu().is_none() {
        return;
    }
    for (i, (dim, m, dtype)) in [
        (128, 16, DType::F16),
        (64, 8, DType::F32),
        (96, 32, DType::BF16),
    ]
    .into_iter()
    .enumerate()
    {
        let label = format!("d = {dim} M = {m} {dtype}");
        let corpus = unit_corpus(400 + i as u64, &lengths(i as u64, 3000), dim, dtype);
        let spec = CodecSpec::Pq(PqOptions {
            m,
            kmeans_iters: 4,
            ..Default::default()
        });
        let g = on_gpu(&corpus, &spec, 3, 16384);
        let c = compress(&corpus, &spec, 3, &|_, _, _| {}).unwrap();
        assert_eq!(
            g.codec(),
            c.codec(),
            "{label}: the codebooks train on the CPU either way"
        );
        let Codec::Pq(p) = g.codec() else { panic!() };
        let sub = dim / m;
        let x = tokens_f32(&corpus);
        for (t, tok) in x.chunks_exact(dim).enumerate() {
            for s in 0..m {
                let part = &tok[s * sub..(s + 1) * sub];
                let dist = |code: u8| -> f64 {
                    let at = (s * 256 + code as usize) * sub;
                    part.iter()
                        .zip(&p.codebooks()[at..at + sub])
                        .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
                        .sum()
                };
                let best = (0..=255u8).map(dist).fold(f64::INFINITY, f64::min);
                let got = dist(g.codes()[t * m + s]);
                assert!(
                    got - best <= 1e-5,
                    "{label}: token {t} sub-space {s}: {got} against {best}"
                );
            }
        }
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    if gpu().is_none() {
        return;
    }
    let spec = CodecSpec::Residual(ResidualOptions {
        centroids: Some(16),
        ..Default::default()
    });
    let mut v = vec![0f32; 10 * 64];
    let mut r = rng(9);
    for t in v.chunks_exact_mut(64) {
        t[r.random_range(0..64)] = 1.0;
    }
    v[7 * 64..8 * 64].fill(0.5); // token 2 of document 1: norm 4
    let corpus = Corpus::from_lengths(
        tilemaxsim::OwnedElements::from_f32(&v, DType::F16),
        64,
        &[5, 5],
    )
    .unwrap();
    let gpu_err = compress_in_chunks(0, &corpus, &spec, 0, 64 * 2 * 32, &|_, _, _| {}, None)
        .unwrap_err()
        .to_string();
    let cpu_err = compress(&corpus, &spec, 0, &|_, _, _| {})
        .unwrap_err()
        .to_string();
    assert_eq!(gpu_err, cpu_err);
    assert!(
        gpu_err.contains("token 2 of document 1 has norm 4"),
        "{gpu_err}"
    );
}

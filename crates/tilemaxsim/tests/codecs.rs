//! Compressed corpora: every codec's CPU scorer against decoding plus the float64 reference,
//! on random shapes (odd d, odd token counts, 1-token and long documents, f32 and f16
//! sources), outputs poisoned first; each codec's decoding error within its bound; files
//! written and read back unchanged; compression seeded and deterministic.

mod common;

use common::*;
use half::f16;
use tilemaxsim::codec::{
    Codec, CodecSpec, CompressedCorpus, PqOptions, ResidualCodec, ResidualOptions, compress,
};
use tilemaxsim::{Corpus, CpuScorer, DType, Docs, Matrix, OwnedElements, ReferenceScorer, Scorer};

fn specs(dim: usize) -> Vec<CodecSpec> {
    let mut v = Vec::new();
    for nbits in [1, 2, 4] {
        v.push(CodecSpec::Residual(ResidualOptions {
            nbits,
            centroids: Some(8),
            kmeans_iters: 3,
            ..Default::default()
        }));
    }
    // The largest M ≤ 8 dividing d.
    let m = (1..=8.min(dim))
        .rev()
        .find(|m| dim.is_multiple_of(*m))
        .unwrap();
    v.push(CodecSpec::Pq(PqOptions {
        m,
        kmeans_iters: 3,
        ..Default::default()
    }));
    v.push(CodecSpec::Int8);
    v.push(CodecSpec::Fp8);
    v
}

/// The CPU scorer's compressed scores equal decoding then the f64 reference (within f32
/// rounding), for all documents, a range and a candidate list; the reference scorer's
/// compressed path equals the reference on the decoded corpus.
fn check_scores(label: &str, c: &CompressedCorpus, queries: &[Matrix<'_>]) {
    let decoded = c.decode().unwrap();
    let n = c.len();
    let cpu = CpuScorer::new();
    let mut out = vec![f32::NAN; queries.len() * n];
    cpu.score_into(queries, c, Docs::All, &mut out).unwrap();
    let all: Vec<usize> = (0..n).collect();
    for (q, query) in queries.iter().enumerate() {
        assert_close(label, *query, &decoded, &all, &out[q * n..(q + 1) * n]);
    }
    // The same kernel on the decoded corpus gives the same bits.
    let exact = cpu.score_batch(queries, &decoded).unwrap();
    assert_eq!(
        out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        exact.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        "{label}: compressed and decoded scores differ"
    );
    let list: Vec<usize> = (0..n).rev().step_by(2).chain([0, 0]).collect();
    let mut sub = vec![f32::NAN; list.len()];
    cpu.score_into(&queries[..1], c, Docs::List(&list), &mut sub)
        .unwrap();
    assert_close(label, queries[0], &decoded, &list, &sub);
    let reference = ReferenceScorer.score_batch(queries, c).unwrap();
    assert_eq!(
        reference,
        ReferenceScorer.score_batch(queries, &decoded).unwrap()
    );
    let k = 3.min(n);
    let hits = cpu.top_k_batch(queries, c, k).unwrap();
    assert_eq!(
        hits,
        cpu.top_k_batch(queries, &decoded, k).unwrap(),
        "{label}: top-k"
    );
}

#[test]
fn every_codec_scores_like_its_decoding() {
    let shapes: &[(usize, &[usize])] = &[
        (1, &[1, 2, 3]),
        (3, &[1]),
        (7, &[5, 1, 9, 3]),
        (16, &[1, 33, 2, 7, 300]),
        (33, &[2, 1, 17]),
        (128, &[31, 1, 180, 64, 5]),
    ];
    for (s, &(dim, lens)) in shapes.iter().enumerate() {
        for dtype in [DType::F32, DType::F16] {
            let corpus = unit_corpus(100 + s as u64, lens, dim, dtype);
            let mut r = rng(200 + s as u64);
            let qs: Vec<OwnedElements> = [1usize, 3, 32]
                .iter()
                .map(|&nq| random_query(&mut r, nq, dim, DType::F32, 1.0))
                .collect();
            let queries = matrices(&qs, dim);
            for spec in specs(dim) {
                let c = compress(&corpus, &spec, 7, &|_, _, _| {}).unwrap();
                let label = format!("d={dim} {dtype} lens={lens:?} {}", c.codec().describe());
                assert_eq!(c.len(), lens.len());
                assert_eq!(c.num_tokens(), lens.iter().sum::<usize>());
                check_scores(&label, &c, &queries);
            }
        }
    }
}

#[test]
fn int8_and_fp8_errors_stay_within_their_bounds() {
    let corpus = unit_corpus(5, &[40, 1, 77], 37, DType::F32);
    let x = corpus.tokens().to_f32_vec();
    for spec in [CodecSpec::Int8, CodecSpec::Fp8] {
        let c = compress(&corpus, &spec, 1, &|_, _, _| {}).unwrap();
        let y = c.decode().unwrap().tokens().to_f32_vec();
        let scales = c.aux().unwrap();
        let mut worst = 0f32;
        for (t, (xs, ys)) in x.chunks_exact(37).zip(y.chunks_exact(37)).enumerate() {
            let scale = f32::from_bits(scales[t]);
            for (&a, &b) in xs.iter().zip(ys) {
                let err = (a - b).abs();
                let bound = match spec {
                    // Half a step, plus the rounding of the division and product.
                    CodecSpec::Int8 => scale * 0.5 * (1.0 + 1e-5),
                    // 3 mantissa bits: half an ulp is 1/16 of the value; subnormals 2^-10·scale.
                    _ => (a.abs() / 16.0).max(scale * 2f32.powi(-10)) * (1.0 + 1e-5),
                };
                assert!(
                    err <= bound,
                    "{spec:?} token {t}: {a} → {b}, error {err} > {bound}"
                );
                worst = worst.max(err);
            }
        }
        assert!(worst > 0.0, "{spec:?}: lossless is implausible");
    }
}

#[test]
fn residual_reconstruction_is_the_normalized_centroid_plus_bucket_weights() {
    let corpus = unit_corpus(9, &[20, 3, 50], 32, DType::F16);
    let spec = CodecSpec::Residual(ResidualOptions {
        nbits: 2,
        centroids: Some(16),
        kmeans_iters: 4,
        ..Default::default()
    });
    let c = compress(&corpus, &spec, 3, &|_, _, _| {}).unwrap();
    let Codec::Residual(r) = c.codec() else {
        panic!("not residual")
    };
    assert_eq!(r.num_centroids(), 16);
    // Cutoffs ascend and weights sit between them, as quantiles do.
    let (cut, w) = (r.bucket_cutoffs(), r.bucket_weights());
    assert!(cut.windows(2).all(|p| p[0] <= p[1]) && w.windows(2).all(|p| p[0] <= p[1]));
    for (i, &x) in cut.iter().enumerate() {
        assert!(w[i] <= x && x <= w[i + 1]);
    }
    let ids = c.aux().unwrap();
    let x = corpus.tokens().to_f32_vec();
    let y = c.decode().unwrap().tokens().to_f32_vec();
    let cents: Vec<f32> = r.centroids().iter().map(|v| v.to_f32()).collect();
    for t in 0..c.num_tokens() {
        let xt = &x[t * 32..(t + 1) * 32];
        let id = ids[t] as usize;
        // The id is the centroid with the largest dot product (PLAID's assignment).
        let dot = |k: usize| -> f32 { xt.iter().zip(&cents[k * 32..]).map(|(a, b)| a * b).sum() };
        assert!(
            (0..16).all(|k| dot(k) <= dot(id)),
            "token {t}: not the best centroid"
        );
        // Each dimension's bucket is the count of cutoffs below its residual.
        let raw: Vec<f32> = (0..32)
            .map(|k| {
                let res = xt[k] - cents[id * 32 + k];
                cents[id * 32 + k] + w[cut.iter().filter(|&&c| c < res).count()]
            })
            .collect();
        let n = raw.iter().map(|v| v * v).sum::<f32>().sqrt();
        for k in 0..32 {
            assert!(
                (y[t * 32 + k] - raw[k] / n).abs() < 1e-6,
                "token {t} dim {k}"
            );
        }
        let norm: f32 = y[t * 32..(t + 1) * 32]
            .iter()
            .map(|v| v * v)
            .sum::<f32>()
            .sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
}

#[test]
fn pq_codes_pick_the_nearest_subspace_centroid() {
    let corpus = unit_corpus(13, &[300, 1, 211], 24, DType::F32);
    let spec = CodecSpec::Pq(PqOptions {
        m: 6,
        kmeans_iters: 4,
        ..Default::default()
    });
    let c = compress(&corpus, &spec, 2, &|_, _, _| {}).unwrap();
    let Codec::Pq(p) = c.codec() else {
        panic!("not pq")
    };
    let books = p.codebooks();
    let x = corpus.tokens().to_f32_vec();
    let dist = |s: usize, k: usize, xs: &[f32]| -> f32 {
        (0..4)
            .map(|i| (xs[s * 4 + i] - books[(s * 256 + k) * 4 + i]).powi(2))
            .sum()
    };
    for (t, codes) in c.codes().chunks_exact(6).enumerate() {
        let xt = &x[t * 24..(t + 1) * 24];
        for (s, &code) in codes.iter().enumerate() {
            let best = (0..256)
                .map(|k| dist(s, k, xt))
                .fold(f32::INFINITY, f32::min);
            assert!(dist(s, code as usize, xt) <= best * (1.0 + 1e-4) + 1e-7);
        }
    }
    // 512 tokens → 256 real centroids per sub-space, so PQ here is close: bounded distortion.
    let y = c.decode().unwrap().tokens().to_f32_vec();
    let mse: f32 = x.iter().zip(&y).map(|(a, b)| (a - b).powi(2)).sum::<f32>() / x.len() as f32;
    assert!(mse < 0.01, "PQ mean squared error {mse}");
}

#[test]
fn files_round_trip_and_compression_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = unit_corpus(21, &[5, 1, 12, 3], 16, DType::F16)
        .with_doc_ids(["a", "b", "c", "d"].map(String::from).to_vec())
        .unwrap();
    for spec in specs(16) {
        let a = compress(&corpus, &spec, 42, &|_, _, _| {}).unwrap();
        let b = compress(&corpus, &spec, 42, &|_, _, _| {}).unwrap();
        assert_eq!(a.codes(), b.codes());
        assert_eq!(a.codec(), b.codec());
        let path = dir.path().join(format!("{}.safetensors", a.codec().name()));
        a.save(&path).unwrap();
        assert!(tilemaxsim::codec::is_compressed_file(&path));
        let back = CompressedCorpus::open(&path).unwrap();
        assert!(back.is_mapped());
        assert_eq!(back.codec(), a.codec());
        assert_eq!(back.codes(), a.codes());
        assert_eq!(back.aux(), a.aux());
        assert_eq!(back.offsets(), a.offsets());
        assert_eq!(back.doc_ids(), corpus.doc_ids());
        assert_eq!(
            back.size_bytes(),
            a.num_tokens() * a.codec().bytes_per_token(16)
        );
        // An exact corpus is not a compressed one, and the other way round.
        assert!(Corpus::open(&path).is_err());
    }
    let exact = dir.path().join("exact.safetensors");
    corpus.save(&exact).unwrap();
    assert!(!tilemaxsim::codec::is_compressed_file(&exact));
    let e = CompressedCorpus::open(&exact).unwrap_err().to_string();
    assert!(e.contains("not a compressed corpus"), "{e}");
}

#[test]
fn bad_inputs_are_errors() {
    // The residual codec reconstructs unit vectors: a corpus that is not normalized is refused.
    let mut r = rng(3);
    let loud = random_corpus(&mut r, &[3, 2], 8, DType::F32, 5.0);
    let e = compress(
        &loud,
        &CodecSpec::Residual(ResidualOptions::default()),
        1,
        &|_, _, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("normalize"), "{e}");
    // PQ's M must divide d.
    let c = unit_corpus(3, &[3, 2], 9, DType::F32);
    let e = compress(
        &c,
        &CodecSpec::Pq(PqOptions {
            m: 4,
            ..Default::default()
        }),
        1,
        &|_, _, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("divide"), "{e}");
    // One packed token against a centroid past K, or of the wrong length: an error.
    let r = ResidualCodec::new(
        2,
        4,
        vec![f16::from_f32(0.5); 8],
        vec![0.0; 3],
        vec![0.0; 4],
    )
    .unwrap();
    assert_eq!(r.encode_token(&[0.1, -0.1, 0.6, 0.0], 1).unwrap().len(), 1);
    assert!(r.encode_token(&[0.1, -0.1, 0.6, 0.0], 2).is_err());
    assert!(r.encode_token(&[0.1, -0.1], 0).is_err());
    // A centroid id past K, a NaN scale, an fp8 NaN code, wrong lengths.
    let codec = Codec::Residual(
        ResidualCodec::new(
            1,
            8,
            vec![f16::from_f32(0.5); 16],
            vec![0.0],
            vec![-0.1, 0.1],
        )
        .unwrap(),
    );
    let e = CompressedCorpus::new(codec.clone(), 8, vec![0, 2], vec![0; 2], Some(vec![0, 2]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("out of range"), "{e}");
    assert!(
        CompressedCorpus::new(codec.clone(), 8, vec![0, 2], vec![0; 3], Some(vec![0, 1])).is_err()
    );
    assert!(CompressedCorpus::new(codec, 8, vec![0, 2], vec![0; 2], None).is_err());
    let e = CompressedCorpus::new(
        Codec::Int8,
        2,
        vec![0, 1],
        vec![1, 2],
        Some(vec![f32::NAN.to_bits()]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("scale"), "{e}");
    let e = CompressedCorpus::new(
        Codec::Fp8,
        2,
        vec![0, 1],
        vec![1, 0x7F],
        Some(vec![1f32.to_bits()]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("NaN"), "{e}");
    // Queries of the wrong d, and an empty list of queries.
    let c = compress(
        &unit_corpus(1, &[2], 4, DType::F32),
        &CodecSpec::Int8,
        0,
        &|_, _, _| {},
    )
    .unwrap();
    let q = [1.0f32; 6];
    let q = Matrix::new(&q[..], 3).unwrap();
    assert!(CpuScorer::new().score_batch(&[q], &c).is_err());
    assert!(CpuScorer::new().score_batch(&[], &c).is_err());
}

/// The residual codec on the CPU reads the corpus a chunk of 65,536 tokens at a time: tokens on
/// both sides of a chunk boundary, and at the end, take their nearest centroid (largest dot
/// product) and decode close to themselves; a token that is not unit past the first chunk is
/// named by its own document and position.
#[test]
fn residual_codec_reads_the_corpus_in_chunks() {
    let (dim, lens) = (5, [70_000usize, 1, 70_003]);
    let corpus = unit_corpus(31, &lens, dim, DType::F16);
    let spec = CodecSpec::Residual(ResidualOptions {
        nbits: 4,
        centroids: Some(8),
        kmeans_iters: 2,
        ..Default::default()
    });
    let c = compress(&corpus, &spec, 5, &|_, _, _| {}).unwrap();
    let Codec::Residual(r) = c.codec() else {
        panic!("residual")
    };
    let cents: Vec<f32> = r.centroids().iter().map(|x| x.to_f32()).collect();
    let x = corpus.tokens().to_f32_vec();
    let y = c.decode().unwrap().tokens().to_f32_vec();
    let ids = c.aux().unwrap();
    assert_eq!(ids.len(), 140_004);
    for t in (0..140_004).filter(|t| t % 997 == 0 || (65_530..65_545).contains(t) || *t > 139_990) {
        let tok = &x[t * dim..(t + 1) * dim];
        let dot = |k: usize| -> f32 {
            tok.iter()
                .zip(&cents[k * dim..(k + 1) * dim])
                .map(|(a, b)| a * b)
                .sum()
        };
        let best = (0..8).map(dot).fold(f32::NEG_INFINITY, f32::max);
        assert!(
            dot(ids[t] as usize) >= best - 1e-3,
            "token {t}: centroid {}",
            ids[t]
        );
        let cos: f32 = tok
            .iter()
            .zip(&y[t * dim..(t + 1) * dim])
            .map(|(a, b)| a * b)
            .sum();
        assert!(cos > 0.9, "token {t} decodes to cosine {cos}");
    }
    // Token 70,003 (document 2, position 2) scaled by 3: in the second chunk.
    let mut v = x.clone();
    v[70_003 * dim..70_004 * dim]
        .iter_mut()
        .for_each(|a| *a *= 3.0);
    let loud = Corpus::from_lengths(OwnedElements::from_f32(&v, DType::F32), dim, &lens).unwrap();
    let e = compress(&loud, &spec, 5, &|_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("token 2 of document 2 has norm 3"), "{e}");
}

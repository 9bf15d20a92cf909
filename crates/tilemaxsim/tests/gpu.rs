//! The CUDA engine against the float64 reference, on the device (bench/gpu_check.sh runs it
//! there). Without a usable GPU every test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use cudarc::driver::DevicePtr;
use rand::Rng;
use tilemaxsim::cuda::{CudaScorer, RawArgs};
use tilemaxsim::{Corpus, DType, Docs, Matrix, OwnedElements, Scorer};

fn gpu() -> Option<CudaScorer> {
    match CudaScorer::new(0) {
        Ok(s) => Some(s),
        Err(e) => {
            assert!(
                std::env::var_os("TILEMAXSIM_REQUIRE_GPU").is_none(),
                "TILEMAXSIM_REQUIRE_GPU is set but: {e}"
            );
            eprintln!("NOTICE: no usable GPU ({e}); GPU test skipped");
            None
        }
    }
}

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Random cases per test: `default`, or fewer from TILEMAXSIM_GPU_CASES (compute-sanitizer slows
/// kernels by 10-100x).
fn gpu_cases(default: usize) -> usize {
    std::env::var("TILEMAXSIM_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Score through `score_into` with a NaN-poisoned output, then check against the reference.
fn check(gpu: &CudaScorer, label: &str, queries: &[Matrix<'_>], corpus: &Corpus, docs: Docs<'_>) {
    let n = docs.count(corpus);
    let mut out = vec![f32::NAN; queries.len() * n];
    gpu.score_into(queries, corpus, docs.clone(), &mut out)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let idx: Vec<usize> = (0..n).map(|i| docs.index(i)).collect();
    for (qi, q) in queries.iter().enumerate() {
        assert_close(
            &format!("{label} q{qi}"),
            *q,
            corpus,
            &idx,
            &out[qi * n..(qi + 1) * n],
        );
    }
}

/// `check` over every document, then over the candidate list `list`.
fn check_all_and_list(
    gpu: &CudaScorer,
    label: &str,
    queries: &[Matrix<'_>],
    corpus: &Corpus,
    list: &[usize],
) {
    check(gpu, label, queries, corpus, Docs::All);
    let candidates = format!("{label} (candidates)");
    check(gpu, &candidates, queries, corpus, Docs::List(list));
}

#[test]
fn random_shapes_match_the_reference() {
    let Some(gpu) = gpu() else { return };
    let mut r = rng(7);
    let dims = [1usize, 3, 64, 96, 127, 128, 129, 768, 1024];
    let cases = gpu_cases(60);
    for case in 0..cases {
        let dim = dims[case % dims.len()];
        let dtype = DTYPES[case % 3];
        let qdtype = DTYPES[(case / 3) % 3];
        let n_docs = r.random_range(1..40);
        let max_len = if case % 7 == 0 { 2048 } else { 200 };
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| {
                if i == 0 {
                    1
                } else {
                    r.random_range(1..=max_len)
                }
            })
            .collect();
        let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        let nq_choices = [1usize, 2, 31, 32, 33, 100];
        let qs: Vec<OwnedElements> = (0..r.random_range(1..4))
            .map(|_| {
                let nq = if case % 11 == 5 {
                    1100
                } else {
                    nq_choices[r.random_range(0..nq_choices.len())]
                };
                random_query(&mut r, nq, dim, qdtype, 1.0)
            })
            .collect();
        let queries = matrices(&qs, dim);
        let label = format!(
            "case {case}: d={dim} {dtype} docs, {qdtype} queries, lens {:?}",
            &lens[..lens.len().min(4)]
        );
        let list: Vec<usize> = (0..n_docs * 2).map(|_| r.random_range(0..n_docs)).collect();
        check_all_and_list(&gpu, &label, &queries, &corpus, &list);
        check(
            &gpu,
            &format!("{label} (range)"),
            &queries,
            &corpus,
            Docs::Range(n_docs / 2..n_docs),
        );
    }
}

#[test]
fn fp32_inputs_stay_exact() {
    let Some(gpu) = gpu() else { return };
    let mut r = rng(11);
    let lens: Vec<usize> = (0..500).map(|_| 128).collect();
    let corpus = random_corpus(&mut r, &lens, 128, DType::F32, 1.0);
    let q = random_query(&mut r, 32, 128, DType::F32, 1.0);
    let qm = Matrix::new(q.as_elements(), 128).unwrap();
    let dq = gpu.upload_queries(&[qm], 128).unwrap();
    let dc = gpu.upload(&corpus).unwrap();
    // On the tensor cores (the split) where the device's shared memory holds the ring kernel.
    if gpu.info().smem_per_block >= 100 << 10 {
        assert_eq!(gpu.kernel_for(&dq, &dc), tilemaxsim::cuda::Kernel::Ring);
    }
    let got = gpu.score(qm, &corpus).unwrap();
    for (j, s) in got.iter().enumerate() {
        let want = tilemaxsim::reference::maxsim_f64(qm, corpus.doc(j));
        let rel = (*s as f64 - want).abs() / want.abs().max(1e-30);
        assert!(
            rel <= 1e-5,
            "doc {j}: {s} vs {want} (relative error {rel:e})"
        );
    }
}

/// f32 on the tensor cores (`maxsim_ring`'s split into f16 high and low parts): within the f32
/// bound of the float64 reference (as every f32 path; `fp32_inputs_stay_exact` checks 1e-5
/// relative on the benchmark shape) at every d it takes, in both directions through the dims on
/// one scorer (its shared-memory allowance per kernel), at magnitudes from 1e-3 to 3e4, with
/// 1-token and long documents, batches of queries, candidate lists, NaN-poisoned outputs; out of
/// the split's range (past 32768, or rows of tiny values) it falls back to the CUDA-core kernel.
#[test]
fn fp32_split_on_tensor_cores_stays_exact() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    let mut r = rng(13);
    let cases = gpu_cases(18);
    for case in 0..cases {
        let dim = [32usize, 1024, 64, 768, 96, 384, 128, 256][case % 8];
        let scale = [1.0f32, 1e-3, 3e4][(case / 2) % 3];
        let n_docs = r.random_range(1..120);
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| match i % 4 {
                0 => 1,
                1 if case % 3 == 0 => r.random_range(1000..3000),
                _ => r.random_range(1..200),
            })
            .collect();
        let corpus = random_corpus(&mut r, &lens, dim, DType::F32, scale);
        let qs: Vec<OwnedElements> = (0..[1usize, 3, 9][case % 3])
            .map(|_| {
                let nq = r.random_range(1..=32);
                random_query(&mut r, nq, dim, DType::F32, scale)
            })
            .collect();
        let queries = matrices(&qs, dim);
        let dq = gpu.upload_queries(&queries, dim).unwrap();
        let dc = gpu.upload(&corpus).unwrap();
        // Every d fits the ring kernel's block in an H100's shared memory; smaller parts may
        // send the widest f32 queries to the CUDA-core kernel.
        let chosen = gpu.kernel_for(&dq, &dc);
        let roomy = gpu.info().smem_per_block >= 200 << 10;
        assert!(
            chosen == Kernel::Ring || (!roomy && chosen == Kernel::Tiled),
            "case {case}: d={dim} took {chosen:?}"
        );
        let list: Vec<usize> = (0..n_docs + 3).map(|_| r.random_range(0..n_docs)).collect();
        let label = format!(
            "case {case}: d={dim} f32 x{scale}, {n_docs} docs, {} queries",
            queries.len()
        );
        check_all_and_list(&gpu, &label, &queries, &corpus, &list);
    }
    // Past the split's range (|x| > 32768, or a row of values all below 2^-12) the exact
    // CUDA-core kernel scores instead.
    for (label, big) in [
        ("a value past 32768", true),
        ("a row of tiny values", false),
    ] {
        let mut v = vec![0.01f32; 3 * 64];
        if big {
            v[5] = 40_000.0;
        } else {
            v[64..128].iter_mut().for_each(|x| *x = 1e-6);
        }
        let corpus =
            Corpus::from_lengths(OwnedElements::from_f32(&v, DType::F32), 64, &[1, 2]).unwrap();
        let q = random_query(&mut r, 4, 64, DType::F32, 1.0);
        let qm = Matrix::new(q.as_elements(), 64).unwrap();
        let dq = gpu.upload_queries(&[qm], 64).unwrap();
        let dc = gpu.upload(&corpus).unwrap();
        assert_eq!(gpu.kernel_for(&dq, &dc), Kernel::Tiled, "{label}");
        check(
            &gpu,
            &format!("f32 with {label}"),
            &[qm],
            &corpus,
            Docs::All,
        );
    }
}

#[test]
fn raw_device_pointers_on_a_caller_stream() {
    let Some(gpu) = gpu() else { return };
    let mut r = rng(3);
    let corpus = random_corpus(&mut r, &[5, 1, 17], 64, DType::F16, 1.0);
    let q = random_query(&mut r, 9, 64, DType::F32, 1.0);
    let qm = Matrix::new(q.as_elements(), 64).unwrap();
    let dc = gpu.upload(&corpus).unwrap();
    let dq = gpu.upload_queries(&[qm], 64).unwrap();
    // Owned elsewhere: allocate with cudarc directly and hand over raw pointers.
    let stream = gpu.stream().context().new_stream().unwrap();
    let qt: Vec<f32> = qm.to_f32_vec();
    let q_dev = stream.clone_htod(&qt).unwrap();
    let q_off = stream.clone_htod(&[0i64, 9]).unwrap();
    let d_bytes = stream
        .clone_htod(corpus.tokens().elements().as_bytes())
        .unwrap();
    let offs: Vec<i64> = corpus.offsets().iter().map(|&o| o as i64).collect();
    let d_off = stream.clone_htod(&offs).unwrap();
    let out = stream.alloc_zeros::<f32>(3).unwrap();
    stream.synchronize().unwrap();
    let p = |s: &cudarc::driver::CudaSlice<u8>| s.device_ptr(&stream).0;
    let args = RawArgs {
        q_tokens: q_dev.device_ptr(&stream).0,
        q_offsets: q_off.device_ptr(&stream).0,
        num_queries: 1,
        d_tokens: p(&d_bytes),
        d_offsets: d_off.device_ptr(&stream).0,
        doc_index: 0,
        num_docs: 3,
        dim: 64,
        dtype: DType::F16,
        out: out.device_ptr(&stream).0,
    };
    // SAFETY: all pointers are live allocations of the sizes RawArgs describes.
    unsafe { gpu.score_raw(Some(stream.cu_stream()), args) }.unwrap();
    let got = stream.clone_dtoh(&out).unwrap();
    assert_close("raw", qm, &corpus, &[0, 1, 2], &got);
    drop((dc, dq));
}

#[test]
fn errors_not_panics() {
    let Some(gpu) = gpu() else { return };
    let c = Corpus::from_lengths(vec![0.5f32; 8], 4, &[2]).unwrap();
    let q3 = [0.1f32; 3];
    assert!(gpu.score(Matrix::new(&q3[..], 3).unwrap(), &c).is_err());
    let empty: [f32; 0] = [];
    assert!(gpu.score(Matrix::new(&empty[..], 4).unwrap(), &c).is_err());
    let q = [0.1f32; 4];
    assert!(
        gpu.score_subset(Matrix::new(&q[..], 4).unwrap(), &c, &[1])
            .is_err()
    );
}

#[test]
fn tensor_core_path_matches_the_reference() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    // Each tensor-core kernel forced on the same cases, where it applies (bulk: sm_90+; wgmma:
    // sm_90a, d = 64 and 128; mma and bulk: queries of ≤ 32 tokens), beside the engine's own
    // choice; bulk also with one stage and runs of three tasks per block, and with three
    // stages and runs of two (its own choice on these small corpora is one task per block).
    let forced = |k| CudaScorer::new(0).expect("GPU").force_kernel(Some(k));
    let shaped = |stages, group| forced(Kernel::Bulk).bulk_shape(stages, group).unwrap();
    let kernels = [
        (Kernel::Mma, "", forced(Kernel::Mma)),
        (Kernel::Bulk, "", forced(Kernel::Bulk)),
        (Kernel::Bulk, " (1 stage, 3 per block)", shaped(1, 3)),
        (Kernel::Bulk, " (3 stages, 2 per block)", shaped(3, 2)),
        (Kernel::Gemm, "", forced(Kernel::Gemm)),
        (Kernel::Wgmma, "", forced(Kernel::Wgmma)),
        (Kernel::Ring, "", forced(Kernel::Ring)),
    ];
    let mut r = rng(21);
    let cases = gpu_cases(40);
    for case in 0..cases {
        // maxsim_mma / bulk / gemm / ring dims, then the wide ones (ring, dimension-tiled).
        let dim = [32usize, 64, 96, 128, 256, 768][case % 6];
        let dtype = [DType::F16, DType::BF16][(case / 4) % 2];
        let n_docs = r.random_range(1..300);
        let long_docs = case % 6 == 0 || case % 12 == 3;
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| match i % 5 {
                0 => 1,
                1 => r.random_range(1..9),
                2 => r.random_range(30..40),
                3 if long_docs => r.random_range(1000..8193),
                _ => r.random_range(1..300),
            })
            .collect();
        let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        // Small batches, batches past the many-query threshold, and long (ColPali-like) queries;
        // not both with the very long documents (the float64 reference is on the CPU).
        let n_queries = if case % 3 == 1 {
            r.random_range(8..14)
        } else {
            r.random_range(1..5)
        };
        let qs: Vec<OwnedElements> = (0..n_queries)
            .map(|i| {
                let nq = if case % 5 == 2 && !long_docs && dim <= 128 && i % 2 == 0 {
                    r.random_range(33..400)
                } else {
                    r.random_range(1..=32)
                };
                random_query(&mut r, nq, dim, dtype, 1.0)
            })
            .collect();
        let queries = matrices(&qs, dim);
        let dq = gpu.upload_queries(&queries, dim).unwrap();
        let dc = gpu.upload(&corpus).unwrap();
        let chosen = gpu.kernel_for(&dq, &dc);
        assert!(
            matches!(
                chosen,
                Kernel::Mma | Kernel::Bulk | Kernel::Gemm | Kernel::Wgmma | Kernel::Ring
            ),
            "case {case} should take a tensor-core path, took {chosen:?}"
        );
        let list: Vec<usize> = (0..n_docs + 5).map(|_| r.random_range(0..n_docs)).collect();
        let mut scorers = vec![(chosen.name().to_string(), &gpu)];
        for (k, shape, scorer) in &kernels {
            if scorer.kernel_for(&dq, &dc) == *k && (*k != chosen || !shape.is_empty()) {
                scorers.push((format!("{}{shape}", k.name()), scorer));
            }
        }
        for (name, scorer) in scorers {
            let label =
                format!("{name} case {case}: d={dim} {dtype} {n_docs} docs, {n_queries} queries");
            check_all_and_list(scorer, &label, &queries, &corpus, &list);
        }
    }
}

#[test]
fn every_task_of_a_large_uneven_batch_is_scored_once() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    // 200,005 (query, document) tasks of uneven length: more than 16 per resident warp, where
    // maxsim_mma takes its tasks from a counter instead of striding, and enough for
    // maxsim_bulk to give each block runs of several tasks (its own choice, then fixed shapes
    // whose runs straddle two queries: 40,001 documents is no multiple of 3, 4 or 7). Every
    // task must be scored exactly once: the outputs are NaN-poisoned, so a skipped task fails.
    let mut r = rng(33);
    let (dim, n_docs) = (32, 40_001);
    let lens: Vec<usize> = (0..n_docs)
        .map(|i| match i % 97 {
            0 => 1,
            1 => r.random_range(129..400),
            _ => r.random_range(1..25),
        })
        .collect();
    let corpus = random_corpus(&mut r, &lens, dim, DType::F16, 1.0);
    let qs: Vec<OwnedElements> = (0..5)
        .map(|_| {
            let nq = r.random_range(1..=32);
            random_query(&mut r, nq, dim, DType::F16, 1.0)
        })
        .collect();
    let queries = matrices(&qs, dim);
    let want = Expected::new(&queries, &corpus);
    let dq = gpu.upload_queries(&queries, dim).unwrap();
    let dc = gpu.upload(&corpus).unwrap();
    let forced = |k| CudaScorer::new(0).expect("GPU").force_kernel(Some(k));
    let mut scorers = vec![("mma".to_string(), forced(Kernel::Mma))];
    for shape in [None, Some((1, 3)), Some((2, 4)), Some((3, 7))] {
        let s = forced(Kernel::Bulk);
        let s = match shape {
            Some((stages, group)) => s.bulk_shape(stages, group).unwrap(),
            None => s,
        };
        scorers.push((format!("bulk {shape:?}"), s));
    }
    for (name, scorer) in &scorers {
        if scorer.kernel_for(&dq, &dc) == Kernel::Mma && name.starts_with("bulk") {
            continue; // bulk needs sm_90
        }
        for round in 0..2 {
            // Twice: mma's counter is zeroed before every launch.
            let mut out = poisoned(queries.len() * n_docs);
            scorer
                .score_into(&queries, &corpus, Docs::All, &mut out)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let all: Vec<usize> = (0..n_docs).collect();
            for q in 0..queries.len() {
                want.assert_close(
                    &format!("{name} round {round}"),
                    q,
                    &all,
                    &out[q * n_docs..(q + 1) * n_docs],
                );
            }
        }
    }
}

#[test]
fn ablation_kernels_match_the_reference() {
    let Some(_) = gpu() else { return };
    let mut r = rng(31);
    for kernel in [
        tilemaxsim::cuda::Kernel::V1,
        tilemaxsim::cuda::Kernel::V2,
        tilemaxsim::cuda::Kernel::Tiled,
    ] {
        let gpu = CudaScorer::new(0).unwrap().force_kernel(Some(kernel));
        for case in 0..12 {
            let dim = [1usize, 3, 64, 127, 128, 200][case % 6];
            let dtype = DTYPES[case % 3];
            let n_docs = r.random_range(1..20);
            let lens: Vec<usize> = (0..n_docs)
                .map(|i| if i == 0 { 1 } else { r.random_range(1..100) })
                .collect();
            let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
            let nq = [1usize, 7, 33, 130][case % 4];
            let q = random_query(&mut r, nq, dim, dtype, 1.0);
            let qm = Matrix::new(q.as_elements(), dim).unwrap();
            let dq = gpu.upload_queries(&[qm], dim).unwrap();
            let dc = gpu.upload(&corpus).unwrap();
            assert_eq!(gpu.kernel_for(&dq, &dc), kernel);
            check(
                &gpu,
                &format!("{} case {case}: d={dim} {dtype} nq={nq}", kernel.name()),
                &[qm],
                &corpus,
                Docs::All,
            );
        }
    }
}

/// The device top-k selects exactly what the host selection does on the same scores: random
/// scores, heavy ties, signed zeros, NaN, k of 1, 1000, n and more than n.
#[test]
fn device_top_k_matches_the_host_selection() {
    let Some(gpu) = gpu() else { return };
    let mut r = rng(11);
    // Smaller rows under compute-sanitizer (still several segments of the two-kernel path).
    let largest = if std::env::var_os("TILEMAXSIM_SANITIZER").is_some() {
        20_000
    } else {
        usize::MAX
    };
    let sizes = [
        1usize, 2, 5, 1000, 1023, 1025, 8191, 8192, 8193, 20_000, 100_003, 300_000,
    ];
    for (case, &n) in sizes.iter().filter(|&&n| n <= largest).enumerate() {
        let rows = 1 + case % 3;
        let scores: Vec<f32> = (0..rows * n)
            .map(|i| match (case + i) % 4 {
                // Few distinct values: long runs of ties across the whole row.
                0 => r.random_range(0..8) as f32 * 0.25,
                1 if i % 97 == 0 => {
                    [0.0f32, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY][i % 5]
                }
                _ => r.random_range(-1.0f32..1.0),
            })
            .collect();
        let dev = gpu.stream().clone_htod(&scores).expect("upload scores");
        let want = |q: usize, k: usize| {
            tilemaxsim::topk::top_k_of(
                scores[q * n..(q + 1) * n]
                    .iter()
                    .enumerate()
                    .map(|(doc, &score)| tilemaxsim::Hit {
                        doc: doc + 17,
                        score,
                    }),
                k,
            )
        };
        let key = |h: &[tilemaxsim::Hit]| -> Vec<(usize, u32)> {
            h.iter().map(|h| (h.doc, h.score.to_bits())).collect()
        };
        for k in [1usize, 7, 100, 1000, 9000, n] {
            let k = k.min(n);
            // Outputs poisoned: an unwritten entry is a document far out of range.
            let mut index = gpu
                .stream()
                .clone_htod(&vec![i32::MAX; rows * k])
                .expect("poisoned index");
            let mut best = gpu
                .stream()
                .clone_htod(&vec![f32::NAN; rows * k])
                .expect("poisoned scores");
            gpu.top_k_enqueue(
                &dev,
                rows,
                n,
                k,
                &mut index.slice_mut(..),
                &mut best.slice_mut(..),
            )
            .unwrap_or_else(|e| panic!("n {n} k {k}: {e}"));
            let ix = gpu.stream().clone_dtoh(&index).expect("download");
            let sc = gpu.stream().clone_dtoh(&best).expect("download");
            gpu.synchronize().expect("sync");
            let got = tilemaxsim::cuda::hits_from(&ix, &sc, k, 17);
            assert_eq!(got.len(), rows);
            for (q, hits) in got.iter().enumerate() {
                assert_eq!(key(hits), key(&want(q, k)), "n {n} k {k} row {q}");
            }
        }
        // k past n gives all n, through the allocating entry point.
        let got = gpu.top_k_device(&dev, rows, n, n + 5, 17).expect("k > n");
        for (q, hits) in got.iter().enumerate() {
            assert_eq!(key(hits), key(&want(q, n)), "n {n} k {} row {q}", n + 5);
        }
    }
}

/// Search through `GpuIndex` gives the same hits resident, streamed in many small chunks (one
/// document larger than a chunk), and sharded over the same GPU twice or three times; and the
/// hits are a valid top-k of the float64 reference.
#[test]
fn gpu_index_resident_streamed_and_sharded_agree() {
    use tilemaxsim::cuda::GpuIndex;
    use tilemaxsim::{Residency, SearchOptions, Searcher};
    if gpu().is_none() {
        return;
    }
    let mut r = rng(12);
    for (dim, dtype) in [(128usize, DType::F16), (96, DType::BF16), (33, DType::F32)] {
        // Fewer documents under compute-sanitizer.
        let n_docs = if std::env::var_os("TILEMAXSIM_SANITIZER").is_some() {
            300
        } else {
            2500
        };
        let mut lens: Vec<usize> = (0..n_docs).map(|_| r.random_range(1..300)).collect();
        lens[n_docs / 2] = 4000;
        let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        let qs: Vec<OwnedElements> = [1usize, 8, 32, 17]
            .iter()
            .map(|&nq| random_query(&mut r, nq, dim, dtype, 1.0))
            .collect();
        let queries: Vec<Matrix<'_>> = qs
            .iter()
            .map(|q| Matrix::new(q.as_elements(), dim).expect("query"))
            .collect();
        let k = 50;
        let row = dim * dtype.size();
        let modes = [
            ("resident", vec![0usize], Residency::Resident, true),
            (
                "streamed, pinned in place",
                vec![0],
                Residency::Stream,
                true,
            ),
            ("streamed, staged", vec![0], Residency::Stream, false),
            ("two shards", vec![0, 0], Residency::Resident, true),
            (
                "three streamed shards",
                vec![0, 0, 0],
                Residency::Stream,
                true,
            ),
            ("two staged shards", vec![0, 0], Residency::Stream, false),
        ];
        let mut first: Option<Vec<Vec<tilemaxsim::Hit>>> = None;
        for (name, devices, residency, pin_corpus) in modes {
            let options = SearchOptions {
                devices,
                residency,
                chunk_bytes: 1000 * row,
                pin_corpus,
            };
            let index = GpuIndex::new(&corpus, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
            let streamed = index.shards().iter().filter(|s| s.2).count();
            let pinned = index.pinned_in_place();
            assert_eq!(
                pinned,
                pin_corpus && streamed > 0,
                "{name}: corpus pinned in place {pinned}"
            );
            let got = index
                .search(&queries, k)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            match &first {
                None => first = Some(got),
                Some(f) => assert_eq!(&got, f, "d {dim} {dtype}: {name} differs from resident"),
            }
        }
        let got = first.expect("results");
        let exp = Expected::new(&queries, &corpus);
        for (q, hits) in got.iter().enumerate() {
            assert_eq!(hits.len(), k);
            let docs: Vec<usize> = hits.iter().map(|h| h.doc).collect();
            let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
            exp.assert_close(&format!("d {dim} {dtype} q{q}"), q, &docs, &scores);
            let worst_in = docs
                .iter()
                .map(|&j| exp.want(q, j))
                .fold(f64::INFINITY, f64::min);
            let best_out = (0..corpus.len())
                .filter(|j| !docs.contains(j))
                .map(|j| exp.want(q, j))
                .fold(f64::NEG_INFINITY, f64::max);
            assert!(
                best_out <= worst_in + 1e-3,
                "d {dim} {dtype} q{q}: a document outside the top-k scores {best_out} > {worst_in}"
            );
        }
    }
}

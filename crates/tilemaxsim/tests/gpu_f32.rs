//! f32 on the tensor cores against the float64 reference, on the device (bench/gpu_check.sh runs
//! it there): f32 corpora (at d ≤ 128 on sm_90 `maxsim_bulk_planes` on the planes an upload
//! splits them into, bit for bit equal to `maxsim_bulk_split`'s in-kernel split, which is checked
//! too; `maxsim_ring` at wide d), f32 queries against 16-bit corpora, and documents of tied and
//! nearly tied tokens. Without a usable GPU every test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::gpu_check::*;
use common::*;
use rand::Rng;
use tilemaxsim::cuda::CudaScorer;
use tilemaxsim::{Corpus, DType, Matrix, OwnedElements, Scorer};

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
    // On the tensor cores (the split): the bulk-copy kernel from sm_90, else the ring kernel
    // where the device's shared memory holds it.
    if gpu.info().compute_capability.0 >= 9 {
        assert_eq!(gpu.kernel_for(&dq, &dc), tilemaxsim::cuda::Kernel::Bulk);
        assert!(
            dc.has_f32_planes(),
            "the upload split the f32 corpus into planes"
        );
    } else if gpu.info().smem_per_block >= 100 << 10 {
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

/// f32 on the tensor cores (the split into f16 high and low parts: `maxsim_bulk_split` at d ≤ 128
/// on sm_90, `maxsim_ring` at wide d and by name): within the f32 bound of the float64 reference
/// (as every f32 path; `fp32_inputs_stay_exact` checks 1e-5 relative on the benchmark shape) at
/// every d they take, in both directions through the dims on one scorer (its shared-memory
/// allowance per kernel), at magnitudes from 1e-3 to 3e4, with 1-token and long documents,
/// batches of queries, candidate lists, NaN-poisoned outputs, the bulk kernel also with one stage
/// and runs of three documents a block; documents out of the split's range (past 32768, or rows
/// of tiny values) fall back to the CUDA-core kernel, queries out of it do not (sm_90: the bulk
/// kernel scales each query by a power of two).
#[test]
fn fp32_split_on_tensor_cores_stays_exact() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    let forced = |k| CudaScorer::new(0).expect("GPU").force_kernel(Some(k));
    let others = [
        (Kernel::Ring, "", forced(Kernel::Ring)),
        (
            Kernel::Bulk,
            " (split in the kernel)",
            CudaScorer::new(0).expect("GPU").f32_planes(false),
        ),
        (
            Kernel::Bulk,
            " (1 stage, 3 per block)",
            forced(Kernel::Bulk).bulk_shape(1, 3).unwrap(),
        ),
        (
            Kernel::Bulk,
            " (2 per block, a wave of one-task blocks last)",
            forced(Kernel::Bulk)
                .bulk_shape(2, 2)
                .unwrap()
                .bulk_tail(Some(1)),
        ),
        (
            Kernel::Bulk,
            " (resident grid, 2 stages, 2 per block)",
            forced(Kernel::Bulk)
                .bulk_shape(2, 2)
                .unwrap()
                .bulk_grid_resident(Some(true)),
        ),
    ];
    let in_kernel_split = CudaScorer::new(0).expect("GPU").f32_planes(false);
    let sm90 = gpu.info().compute_capability.0 >= 9;
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
        let want = if sm90 && dim <= 128 {
            Kernel::Bulk
        } else {
            Kernel::Ring
        };
        assert!(
            chosen == want || (!roomy && chosen == Kernel::Tiled),
            "case {case}: d={dim} took {chosen:?}"
        );
        let list: Vec<usize> = (0..n_docs + 3).map(|_| r.random_range(0..n_docs)).collect();
        let label = format!(
            "case {case}: d={dim} f32 x{scale}, {n_docs} docs, {} queries",
            queries.len()
        );
        let exp = Expected::new(&queries, &corpus);
        check_all_and_list(
            &gpu,
            &format!("{} {label}", chosen.name()),
            &queries,
            &corpus,
            &list,
            &exp,
        );
        // The planes multiply the same fragments as the in-kernel split: the same bits.
        if dc.has_f32_planes() {
            same_bits(&gpu, &in_kernel_split, &label, &queries, &corpus);
        }
        for (k, shape, scorer) in &others {
            if scorer.kernel_for(&dq, &dc) == *k && (*k != chosen || !shape.is_empty()) {
                let label = format!("{}{shape} {label}", k.name());
                check_all_and_list(scorer, &label, &queries, &corpus, &list, &exp);
            }
        }
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
        check_one_query(
            &gpu,
            &format!("f32 with {label}"),
            &q,
            &corpus,
            Kernel::Tiled,
        );
    }
    let corpus = random_corpus(&mut r, &[1, 40, 7], 64, DType::F32, 1.0);
    let split = if sm90 { Kernel::Bulk } else { Kernel::Tiled };
    for (label, scale) in [("values of 1e9", 1e9f32), ("values of 1e-7", 1e-7)] {
        let q = random_query(&mut r, 4, 64, DType::F32, scale);
        check_one_query(&gpu, &format!("f32 query of {label}"), &q, &corpus, split);
    }
}

/// `a` and `b` score `queries` against every document of `corpus` bit for bit alike.
fn same_bits(a: &CudaScorer, b: &CudaScorer, label: &str, queries: &[Matrix<'_>], corpus: &Corpus) {
    let scores = |s: &CudaScorer| {
        let mut out = vec![f32::NAN; queries.len() * corpus.len()];
        s.score_into(queries, corpus, tilemaxsim::Docs::All, &mut out)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        out.iter().map(|x| x.to_bits()).collect::<Vec<u32>>()
    };
    assert_eq!(
        scores(a),
        scores(b),
        "{label}: planes and the in-kernel split differ"
    );
}

/// f32 queries against f16 and bf16 corpora on the tensor cores (`maxsim_bulk_split`, sm_90, d
/// ≤ 128: the query split into two f16 parts of itself scaled by a power of two, or three bf16
/// parts, each multiplied by the stored token): within the f32 bound of the float64 reference,
/// corpora at magnitudes from 1e-3 to 100 and queries from 1e-8 to 3e5 (past f16's range and
/// below its normal range), with 1-token and long documents, batches, candidate lists, one
/// stage and runs of three a block; queries past 32 tokens take the CUDA-core kernel (exact as
/// well).
#[test]
fn f32_queries_on_16_bit_corpora_stay_exact() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    let sm90 = gpu.info().compute_capability.0 >= 9;
    let shaped = CudaScorer::new(0)
        .expect("GPU")
        .force_kernel(Some(Kernel::Bulk))
        .bulk_shape(1, 3)
        .unwrap();
    let mut r = rng(17);
    let cases = gpu_cases(16);
    for case in 0..cases {
        let dim = [32usize, 64, 96, 128][case % 4];
        let dtype = [DType::F16, DType::BF16][(case / 4) % 2];
        let scale = [1.0f32, 1e-3, 100.0][case % 3];
        let qscale = scale * [1.0f32, 1e-5, 3e3][(case / 3) % 3];
        let n_docs = r.random_range(1..150);
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| match i % 4 {
                0 => 1,
                1 if case % 3 == 0 => r.random_range(500..2500),
                _ => r.random_range(1..300),
            })
            .collect();
        let corpus = random_corpus(&mut r, &lens, dim, dtype, scale);
        let qs: Vec<OwnedElements> = (0..[1usize, 4, 9][case % 3])
            .map(|_| {
                let nq = r.random_range(1..=32);
                random_query(&mut r, nq, dim, DType::F32, qscale)
            })
            .collect();
        let queries = matrices(&qs, dim);
        let dq = gpu.upload_queries(&queries, dim).unwrap();
        let dc = gpu.upload(&corpus).unwrap();
        let chosen = gpu.kernel_for(&dq, &dc);
        let want = if sm90 { Kernel::Bulk } else { Kernel::Tiled };
        assert_eq!(chosen, want, "case {case}: d={dim} {dtype}");
        let list: Vec<usize> = (0..n_docs + 3).map(|_| r.random_range(0..n_docs)).collect();
        let label = format!(
            "{} case {case}: d={dim} {dtype} x{scale}, queries x{qscale}, {n_docs} docs, {} f32 queries",
            chosen.name(),
            queries.len()
        );
        let exp = Expected::new(&queries, &corpus);
        check_all_and_list(&gpu, &label, &queries, &corpus, &list, &exp);
        if sm90 {
            check_all_and_list(
                &shaped,
                &format!("{label} (1 stage, 3 per block)"),
                &queries,
                &corpus,
                &list,
                &exp,
            );
        }
    }
    // A 33-token f32 query (the CUDA-core kernel), and (f16 corpus) one past f16's range beside
    // values 2^-30 of it, and an all-zero one: the tensor cores on sm_90.
    let corpus = random_corpus(&mut r, &[1, 40, 7], 64, DType::F16, 1.0);
    let long = random_query(&mut r, 33, 64, DType::F32, 1.0);
    let small = random_query(&mut r, 3, 64, DType::F32, 1.0);
    let mut big = Matrix::new(small.as_elements(), 64).unwrap().to_f32_vec();
    big[7] = 1e9;
    let big = OwnedElements::from_f32(&big, DType::F32);
    let zero = OwnedElements::from_f32(&[0.0; 2 * 64], DType::F32);
    let split = if sm90 { Kernel::Bulk } else { Kernel::Tiled };
    for (label, q, want) in [
        ("33 tokens", &long, Kernel::Tiled),
        ("a value of 1e9", &big, split),
        ("all zeros", &zero, split),
    ] {
        check_one_query(&gpu, &format!("f32 query with {label}"), q, &corpus, want);
    }
}

/// f32 corpora whose tokens tie or nearly tie, where a kernel that prunes pairs by a cheaper
/// product is most likely to pick the wrong maximum (as the kernel of
/// bench/results/h200/2026-11-30/f32_candidates.patch did: one f16 product, exact dots for the
/// pairs it cannot rule out): documents of one token repeated, of two tokens alternating, and of
/// one token with a 1-ulp change in one dimension a token, at d 32 to 128, magnitudes 1 and 3e4,
/// with queries of 1, 5 and 32 rows, beside random documents.
#[test]
fn fp32_tied_tokens_stay_exact() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    let in_kernel_split = CudaScorer::new(0).expect("GPU").f32_planes(false);
    let sm90 = gpu.info().compute_capability.0 >= 9;
    let mut r = rng(17);
    for dim in [32usize, 64, 96, 128] {
        for scale in [1.0f32, 3e4] {
            let base = random_values(&mut r, 2, dim, scale);
            let lens = [1usize, 16, 17, 64, 65, 200, 3, 130, 40];
            let mut v = Vec::new();
            for (i, &n) in lens.iter().enumerate() {
                let random = random_values(&mut r, n, dim, scale);
                for t in 0..n {
                    let mut row = match i % 4 {
                        0 => base[..dim].to_vec(),
                        1 => base[(t % 2) * dim..(t % 2 + 1) * dim].to_vec(),
                        2 => random[t * dim..(t + 1) * dim].to_vec(),
                        _ => base[..dim].to_vec(),
                    };
                    if i % 4 == 3 {
                        let x = &mut row[t % dim];
                        *x = f32::from_bits(x.to_bits() + 1);
                    }
                    v.extend(row);
                }
            }
            let corpus = Corpus::from_lengths(OwnedElements::from_f32(&v, DType::F32), dim, &lens)
                .expect("valid corpus");
            let qs: Vec<OwnedElements> = [1usize, 5, 32]
                .iter()
                .map(|&nq| random_query(&mut r, nq, dim, DType::F32, scale))
                .collect();
            let queries = matrices(&qs, dim);
            let label = format!("tied tokens, d={dim} f32 x{scale}");
            let dq = gpu.upload_queries(&queries, dim).unwrap();
            let dc = gpu.upload(&corpus).unwrap();
            if sm90 {
                assert_eq!(gpu.kernel_for(&dq, &dc), Kernel::Bulk, "{label}");
                assert!(dc.has_f32_planes(), "{label}: planes");
            }
            let list: Vec<usize> = (0..lens.len()).rev().collect();
            let exp = Expected::new(&queries, &corpus);
            check_all_and_list(&gpu, &label, &queries, &corpus, &list, &exp);
            let in_kernel = format!("{label} (split in the kernel)");
            check_all_and_list(&in_kernel_split, &in_kernel, &queries, &corpus, &list, &exp);
            if sm90 {
                same_bits(&gpu, &in_kernel_split, &label, &queries, &corpus);
            }
        }
    }
}

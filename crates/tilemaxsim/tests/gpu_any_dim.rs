//! The spanning kernel at d ≤ 256 that no `maxsim_bulk` instantiation takes
//! (`maxsim_span_any`), against the float64 reference on the device: every alignment its rows
//! can have (d % 8 = 0, d % 4 = 0, even, odd), a last 32-wide chunk of d with at most 16
//! dimensions and with more, one to eight chunks, both 16-bit dtypes, at its own shape and at
//! forced stages, runs and kernels (`maxsim_bulk_any` past 128 where it also applies), on
//! 1-token, chunk-crossing and very long documents, outputs poisoned before each run. Without a
//! usable GPU the test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use rand::Rng;
use tilemaxsim::cuda::{CudaScorer, Kernel};
use tilemaxsim::{DType, Docs, OwnedElements, Scorer};

/// The GPU's scorer where it has the bulk copies `maxsim_span_any` needs (sm_90+); else a
/// notice, and the test passes.
fn sm90() -> Option<CudaScorer> {
    let gpu = gpu()?;
    if gpu.info().compute_capability.0 < 9 {
        eprintln!("NOTICE: maxsim_span_any needs sm_90; test skipped");
        return None;
    }
    Some(gpu)
}

#[test]
fn spanning_kernel_at_every_row_alignment_matches_the_reference() {
    let Some(gpu) = sm90() else { return };
    let forced = || {
        CudaScorer::new(0)
            .expect("GPU")
            .force_kernel(Some(Kernel::Bulk))
    };
    let shaped = |stages, group| forced().bulk_shape(stages, group).unwrap();
    // Past 128, stages of 128 d-wide rows: at most three fit an SM's shared memory.
    let narrow = [
        ("own shape", gpu),
        ("1 stage, 3 per block", shaped(1, 3)),
        ("6 stages, 5 per block", shaped(6, 5)),
        ("4 stages, 64 per block", shaped(4, 64)),
    ];
    let wide = [
        ("own shape", CudaScorer::new(0).expect("GPU")),
        ("1 stage, 3 per block", shaped(1, 3)),
        ("3 stages, 5 per block", shaped(3, 5)),
        (
            "spanning, 2 stages, 64 per block",
            shaped(2, 64).bulk_spans(Some(true)),
        ),
        (
            "maxsim_bulk_any where it applies",
            forced().bulk_spans(Some(false)),
        ),
    ];
    let mut r = rng(127);
    // d % 8 = 0 (16, 48, 80, 112, 136, 144, 160, 200, 224, 248), d % 4 = 0 (12, 100), even (6,
    // 18, 126), odd (1, 3, 17, 33, 77, 113, 127, 129, 255; and 202, 250 past 128, read as
    // halves). One k16 product in the last chunk (1 to 16, 33, 48, 77, 80, 136, 144, 200) and two
    // (the rest). Past 128 the rows of 16 bytes also go to `maxsim_bulk_any` when forced, or by
    // default where two spanning blocks do not fit an SM (248).
    let dims = [
        1usize, 3, 6, 12, 16, 17, 18, 33, 48, 77, 80, 100, 112, 113, 126, 127, 129, 136, 144, 160,
        200, 202, 224, 248, 250, 255,
    ];
    for (case, &dim) in dims.iter().enumerate() {
        let dtype = [DType::F16, DType::BF16][case % 2];
        let n_docs = r.random_range(40..120);
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| match i % 6 {
                0 => 1,
                1 => r.random_range(2..9),
                2 => r.random_range(30..40),
                3 if i == 3 => r.random_range(2000..4000),
                _ => r.random_range(1..300),
            })
            .collect();
        let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        let qs: Vec<OwnedElements> = (0..3)
            .map(|i| random_query(&mut r, [1, 17, 32][i], dim, dtype, 1.0))
            .collect();
        let queries = matrices(&qs, dim);
        let exp = Expected::new(&queries, &corpus);
        let all: Vec<usize> = (0..corpus.len()).collect();
        let scorers = if dim > 128 { &wide[..] } else { &narrow[..] };
        for (name, scorer) in scorers {
            let label = format!("{name}: d={dim} {dtype} {n_docs} docs");
            let dq = scorer.upload_queries(&queries, dim).unwrap();
            let dc = scorer.upload(&corpus).unwrap();
            assert_eq!(scorer.kernel_for(&dq, &dc), Kernel::Bulk, "{label}");
            let mut out = poisoned(queries.len() * corpus.len());
            scorer
                .score_into(&queries, &corpus, Docs::All, &mut out)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            for (qi, row) in out.chunks(corpus.len()).enumerate() {
                exp.assert_close(&label, qi, &all, row);
            }
        }
    }
}

/// Stages too many for a spanning block past 128: a multiple of 8 runs on `maxsim_bulk_any`
/// (its tiles are 32 tokens), another d is refused with an error that names the shape.
#[test]
fn stages_only_the_bulk_tiles_fit_fall_back_or_are_refused() {
    let Some(gpu) = sm90() else { return };
    let six = gpu
        .force_kernel(Some(Kernel::Bulk))
        .bulk_shape(6, 5)
        .unwrap();
    let mut r = rng(152);
    for (dim, runs) in [(152usize, true), (202, false)] {
        let lens: Vec<usize> = (0..50).map(|_| r.random_range(1..300)).collect();
        let corpus = random_corpus(&mut r, &lens, dim, DType::F16, 1.0);
        let qs = [random_query(&mut r, 20, dim, DType::F16, 1.0)];
        let queries = matrices(&qs, dim);
        let mut out = poisoned(corpus.len());
        let got = six.score_into(&queries, &corpus, Docs::All, &mut out);
        if runs {
            got.unwrap_or_else(|e| panic!("d = {dim}: {e}"));
            let all: Vec<usize> = (0..corpus.len()).collect();
            Expected::new(&queries, &corpus).assert_close(&format!("d = {dim}"), 0, &all, &out);
        } else {
            let e = got
                .expect_err("six spanning stages at d = 202 do not fit")
                .to_string();
            assert!(
                e.contains("stages of the spanning kernel"),
                "d = {dim}: {e}"
            );
        }
    }
}

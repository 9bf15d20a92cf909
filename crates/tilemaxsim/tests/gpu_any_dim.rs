//! The spanning kernel at d ≤ 256 that no `maxsim_bulk` instantiation takes
//! (`maxsim_span_any`), against the float64 reference on the device: every alignment its rows
//! can have (d % 8 = 0, d % 4 = 0, even, odd), a last 32-wide chunk of d with at most 16
//! dimensions and with more, one to eight chunks, both 16-bit dtypes, at its own shape and at
//! forced stages, runs and kernels (`maxsim_bulk_any` past 128 where it also applies), on
//! 1-token, chunk-crossing and very long documents, outputs poisoned before each run; and
//! `maxsim_bulk_rows` (d past 128 with the warps splitting rows and tokens) the same way. Without
//! a usable GPU the test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use rand::Rng;
use tilemaxsim::cuda::{CudaScorer, Kernel};
use tilemaxsim::{Corpus, DType, Docs, OwnedElements, Scorer};

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

/// One case of the any-d tests: 40-120 documents of 1 token, 2-8, `mid` tokens, one of
/// 2000-4000 and the rest 1-299 (d wide, `dtype`), and three queries of 1, 17 and 32 tokens.
fn random_case(
    r: &mut rand::rngs::StdRng,
    dim: usize,
    dtype: DType,
    mid: std::ops::Range<usize>,
) -> (Corpus, Vec<OwnedElements>) {
    let n_docs = r.random_range(40..120);
    let lens: Vec<usize> = (0..n_docs)
        .map(|i| match i % 6 {
            0 => 1,
            1 => r.random_range(2..9),
            2 => r.random_range(mid.clone()),
            3 if i == 3 => r.random_range(2000..4000),
            _ => r.random_range(1..300),
        })
        .collect();
    let corpus = random_corpus(r, &lens, dim, dtype, 1.0);
    let qs: Vec<OwnedElements> = (0..3)
        .map(|i| random_query(r, [1, 17, 32][i], dim, dtype, 1.0))
        .collect();
    (corpus, qs)
}

#[test]
fn spanning_kernel_at_every_row_alignment_matches_the_reference() {
    let Some(gpu) = sm90() else { return };
    // The rows unpadded: the kernels at the d itself (`padded_rows_match_the_reference` below
    // checks the padded uploads).
    let forced = || {
        CudaScorer::new(0)
            .expect("GPU")
            .force_kernel(Some(Kernel::Bulk))
            .pad_rows(false)
    };
    let shaped = |stages, group| forced().bulk_shape(stages, group).unwrap();
    // Past 128, stages of 128 d-wide rows: at most three fit an SM's shared memory.
    // At d ≤ 64 of 16-byte rows the own shape streams the documents (`maxsim_stream`); the
    // spanning tiles are forced beside it (one warp a block by default; two and four forced).
    let narrow = [
        ("own shape", gpu.pad_rows(false)),
        ("1 stage, 3 per block", shaped(1, 3)),
        ("6 stages, 5 per block", shaped(6, 5)),
        ("4 stages, 64 per block", shaped(4, 64)),
        ("1 per block", shaped(2, 1)),
        (
            "streamed, four warps a block",
            forced().bulk_stream_warps(Some(4)).unwrap(),
        ),
        (
            "streamed, two warps a block, 7 per block",
            shaped(2, 7).bulk_stream_warps(Some(2)).unwrap(),
        ),
        (
            "spanning tiles, not streamed",
            forced().bulk_stream(Some(false)),
        ),
        (
            "spanning tiles, 64 per block",
            shaped(2, 64).bulk_stream(Some(false)),
        ),
    ];
    let wide = [
        (
            "own shape",
            CudaScorer::new(0).expect("GPU").pad_rows(false),
        ),
        ("1 stage, 3 per block", shaped(1, 3)),
        ("3 stages, 5 per block", shaped(3, 5)),
        (
            "spanning, 2 stages, 64 per block",
            shaped(2, 64).bulk_spans(Some(true)),
        ),
        (
            "maxsim_bulk_any where it applies",
            forced().bulk_spans(Some(false)).bulk_rows(Some(0)).unwrap(),
        ),
    ];
    let mut r = rng(127);
    // d % 8 = 0 (8, 16, 24, 40, 48, 56, 80, 112, 136, 144, 160, 200, 224, 248; 8 to 56 streamed
    // by default), d % 4 = 0 (12, 100), even (6, 18, 126), odd (1, 3, 17, 33, 77, 113, 127, 129,
    // 255; and 202, 250 past 128, read as halves). One k16 product in the last chunk (1 to 16,
    // 33, 40, 48, 77, 80, 136, 144, 200) and two (the rest). Past 128 the rows of 16 bytes also go to `maxsim_bulk_any` when forced, or by
    // default where two spanning blocks do not fit an SM (248), and always past 256: 264, 320,
    // 392 and 648 on its half-chunk kernels (a warp's slice ends in 16 dimensions), 328 and
    // 1016 on the whole-chunk ones. By default 248-328 go to `maxsim_bulk_rows`, tested
    // below; here `maxsim_bulk_any` is forced beside it.
    let dims = [
        1usize, 3, 6, 8, 12, 16, 17, 18, 24, 33, 40, 48, 56, 77, 80, 100, 112, 113, 126, 127, 129,
        136, 144, 160, 200, 202, 224, 248, 250, 255, 264, 320, 328, 392, 648, 1016,
    ];
    // The sanitizers take every k-th d (TILEMAXSIM_GPU_CASES of them, spread over the list:
    // racecheck of all 36 ran past 300 s on the H200).
    let step = dims
        .len()
        .div_ceil(common::gpu_check::gpu_cases(dims.len()).max(1));
    for (case, &dim) in dims.iter().enumerate().step_by(step) {
        let dtype = [DType::F16, DType::BF16][case % 2];
        let (corpus, qs) = random_case(&mut r, dim, dtype, 30..40);
        let queries = matrices(&qs, dim);
        let exp = Expected::new(&queries, &corpus);
        let n_docs = corpus.len();
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

/// `maxsim_bulk_rows` (the warps split the query's rows and the tile's tokens, d a multiple
/// of 8 from 136 to 384) at both tiles, forced stages and runs: every count of 32-wide chunks
/// (5 to 12), a last chunk of 8, 16, 24 and 32 dimensions, the built widths 256 and 384, d = 224
/// (seven whole chunks, where the engine takes 64-token tiles by default), both
/// 16-bit dtypes, 1-token and very long documents, every document and a candidate list with
/// repeats, outputs poisoned.
#[test]
fn rows_kernel_matches_the_reference() {
    let Some(_gpu) = sm90() else { return };
    let rows = |tile, shape: Option<(usize, usize)>| {
        let s = CudaScorer::new(0)
            .expect("GPU")
            .force_kernel(Some(Kernel::Bulk))
            .bulk_rows(Some(tile))
            .unwrap();
        match shape {
            Some((stages, group)) => s.bulk_shape(stages, group).unwrap(),
            None => s,
        }
    };
    let scorers = [
        ("32-token tiles", rows(32, None)),
        ("64-token tiles", rows(64, None)),
        (
            "32-token tiles, 1 stage, 3 per block",
            rows(32, Some((1, 3))),
        ),
        (
            "64-token tiles, 3 stages, 64 per block",
            rows(64, Some((3, 64))),
        ),
        (
            "64-token tiles, 2 stages, 1 per block",
            rows(64, Some((2, 1))),
        ),
        (
            "32-token tiles, 2 per block, a wave of one-task blocks last",
            rows(32, Some((2, 2))).bulk_tail(Some(1)),
        ),
    ];
    let mut r = rng(211);
    // The sanitizers run the first few (TILEMAXSIM_GPU_CASES): the last chunk 8 dimensions
    // wide, twelve chunks with a last of 24 (two blocks an SM), and 264.
    let dims = [
        136usize, 376, 264, 144, 168, 200, 216, 248, 256, 296, 320, 360, 384, 224,
    ];
    for (case, &dim) in dims
        .iter()
        .enumerate()
        .take(common::gpu_check::gpu_cases(dims.len()))
    {
        let dtype = [DType::F16, DType::BF16][case % 2];
        let (corpus, qs) = random_case(&mut r, dim, dtype, 30..70);
        let queries = matrices(&qs, dim);
        let exp = Expected::new(&queries, &corpus);
        let n_docs = corpus.len();
        let all: Vec<usize> = (0..corpus.len()).collect();
        let list: Vec<usize> = (0..2 * n_docs).map(|i| (i * 7 + 3) % n_docs).collect();
        for (name, scorer) in &scorers {
            for docs in [&all, &list] {
                let label = format!("{name}: d={dim} {dtype} {} of {n_docs} docs", docs.len());
                let selected = if docs.len() == n_docs {
                    Docs::All
                } else {
                    Docs::List(docs)
                };
                let mut out = poisoned(queries.len() * docs.len());
                scorer
                    .score_into(&queries, &corpus, selected, &mut out)
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                for (qi, row) in out.chunks(docs.len()).enumerate() {
                    exp.assert_close(&label, qi, docs, row);
                }
            }
        }
    }
}

/// Corpora whose rows the upload pads to a wider width (`plan::stored_dim`: 16-bit d not a
/// multiple of 4 from 8 to 256 and not a multiple of 8 past 256, f32 off the tensor-core d),
/// with their queries re-pitched at the call: the stored width each gets, the kernel, and the
/// scores against float64 for every document and for a candidate list with repeats (outputs
/// poisoned), through the host entry and through `score_device` with one upload of the
/// queries scored against the padded corpus and the same corpus unpadded; f32 queries on a
/// padded f16 corpus; and queries of the padded width refused against the narrower corpus.
#[test]
fn padded_rows_match_the_reference() {
    use tilemaxsim::Matrix;
    let Some(gpu) = sm90() else { return };
    let plain = CudaScorer::new(0).expect("GPU").pad_rows(false);
    let mut r = rng(331);
    // (d, corpus dtype, query dtype, the width stored): 16-bit at every alignment the rule
    // pads (odd, 2 mod 4) up to 256 and past it, d = 100 left as it is; f32 in the split's range.
    let (f16, bf16, f32) = (DType::F16, DType::BF16, DType::F32);
    // The sanitizers run the first four (TILEMAXSIM_GPU_CASES): odd d under 128 and past 256,
    // f32, and f32 queries on a padded f16 corpus.
    let cases = [
        (77usize, bf16, bf16, 80usize),
        (333, bf16, bf16, 336),
        (127, f32, f32, 128),
        (127, f16, f32, 128),
        (9, f16, f16, 16),
        (15, bf16, bf16, 16),
        (18, f16, f16, 24),
        (33, bf16, bf16, 40),
        (47, f16, f16, 48),
        (100, f16, f16, 100),
        (126, bf16, bf16, 128),
        (127, f16, f16, 128),
        (129, bf16, bf16, 136),
        (199, f16, f16, 200),
        (255, bf16, bf16, 256),
        (257, f16, f16, 264),
        (511, f16, f16, 512),
        (767, bf16, bf16, 768),
        (1017, f16, f16, 1024),
        (27, f32, f32, 32),
        (77, f32, f32, 96),
        (77, bf16, f32, 80),
    ];
    for &(dim, dtype, qtype, stored) in cases.iter().take(common::gpu_check::gpu_cases(cases.len()))
    {
        let (corpus, _) = random_case(&mut r, dim, dtype, 30..70);
        let qs: Vec<OwnedElements> = [1, 17, 32]
            .iter()
            .map(|&n| random_query(&mut r, n, dim, qtype, 1.0))
            .collect();
        let queries = matrices(&qs, dim);
        let exp = Expected::new(&queries, &corpus);
        let n_docs = corpus.len();
        let all: Vec<usize> = (0..n_docs).collect();
        let list: Vec<usize> = (0..2 * n_docs).map(|i| (i * 7 + 3) % n_docs).collect();
        let label = format!("d={dim} {dtype} corpus, {qtype} queries, {n_docs} docs");
        let dc = gpu.upload(&corpus).unwrap();
        assert_eq!((dc.dim(), dc.stored_dim()), (dim, stored), "{label}");
        let dq = gpu.upload_queries(&queries, dim).unwrap();
        if dtype == qtype {
            assert_eq!(gpu.kernel_for(&dq, &dc), Kernel::Bulk, "{label}");
        }
        for docs in [&all, &list] {
            let what = format!("{label}, {} of them", docs.len());
            let selected = if docs.len() == n_docs {
                Docs::All
            } else {
                Docs::List(docs)
            };
            let mut out = poisoned(queries.len() * docs.len());
            gpu.score_into(&queries, &corpus, selected, &mut out)
                .unwrap_or_else(|e| panic!("host entry, {what}: {e}"));
            for (qi, row) in out.chunks(docs.len()).enumerate() {
                exp.assert_close(&format!("host entry, {what}"), qi, docs, row);
            }
        }
        // One upload of the queries against the padded corpus, then the same corpus unpadded.
        let unpadded = plain.upload(&corpus).unwrap();
        assert_eq!(unpadded.stored_dim(), dim, "{label}");
        for (name, corpus_on_device) in [("padded", &dc), ("unpadded", &unpadded)] {
            for docs in [&all, &list] {
                let what = format!("device entry, {name}: {label}, {} of them", docs.len());
                let stream = gpu.stream();
                let mut out = stream
                    .clone_htod(&poisoned(queries.len() * docs.len()))
                    .unwrap();
                let idx: Vec<i64> = docs.iter().map(|&j| j as i64).collect();
                let idx = stream.clone_htod(&idx).unwrap();
                let list = (docs.len() != n_docs).then_some(&idx);
                gpu.score_device(&dq, corpus_on_device, list, &mut out)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let mut host = vec![0f32; out.len()];
                gpu.download(&out, &mut host).unwrap();
                for (qi, row) in host.chunks(docs.len()).enumerate() {
                    exp.assert_close(&what, qi, docs, row);
                }
            }
        }
        // Queries as wide as the stored rows are not the corpus's d.
        if stored != dim {
            let wide: Vec<f32> = vec![0.1; 3 * stored];
            let wide = Matrix::new(&wide[..], stored).unwrap();
            let dq = gpu.upload_queries(&[wide], stored).unwrap();
            let mut out = gpu.alloc_scores(n_docs).unwrap();
            let err = gpu.score_device(&dq, &dc, None, &mut out).unwrap_err();
            assert!(err.to_string().contains(&dim.to_string()), "{label}: {err}");
        }
    }
}

/// Raw packed documents may be empty (repeated offsets): they score the sum of nothing found,
/// -inf, in the streaming kernel and in the spanning one alike, and the documents around them
/// match the reference (first, last and runs of empty documents; outputs poisoned).
#[test]
fn empty_raw_documents_score_minus_infinity() {
    use cudarc::driver::DevicePtr;
    use tilemaxsim::cuda::{RawArgs, RawDocs, RawLayout, RawQueries};
    let Some(gpu) = sm90() else { return };
    let stream = gpu.stream().context().new_stream().unwrap();
    let mut r = rng(161);
    let scorers = [
        ("streamed", gpu.bulk_stream(Some(true))),
        (
            "spanning tiles",
            CudaScorer::new(0).expect("GPU").bulk_stream(Some(false)),
        ),
        (
            "streamed, 2 per block",
            CudaScorer::new(0)
                .expect("GPU")
                .bulk_shape(2, 2)
                .unwrap()
                .bulk_stream(Some(true)),
        ),
        (
            "streamed, four warps a block",
            CudaScorer::new(0)
                .expect("GPU")
                .bulk_stream(Some(true))
                .bulk_stream_warps(Some(4))
                .unwrap(),
        ),
    ];
    for (case, &dim) in [16usize, 24, 48, 56, 77].iter().enumerate() {
        let dtype = [DType::F16, DType::BF16][case % 2];
        let lens: Vec<usize> = (0..60).map(|_| r.random_range(1..200)).collect();
        let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        // The documents in order, with empty ones first, last, alone and in runs between them.
        let mut order: Vec<Option<usize>> = vec![None, None];
        for j in 0..corpus.len() {
            order.push(Some(j));
            if j % 7 == 3 {
                order.extend([None; 3].iter().take(1 + j % 3));
            }
        }
        order.push(None);
        let mut offsets = vec![0i64];
        for d in &order {
            let len = d.map_or(0, |j| corpus.doc_len(j)) as i64;
            offsets.push(offsets.last().unwrap() + len);
        }
        let qs: Vec<OwnedElements> = [1usize, 32]
            .iter()
            .map(|&nq| random_query(&mut r, nq, dim, dtype, 1.0))
            .collect();
        let queries = matrices(&qs, dim);
        let mut qbytes = Vec::new();
        let mut spans = Vec::new();
        for q in &qs {
            // (the first element, rows)
            spans.push((qbytes.len() / dtype.size(), q.as_elements().len() / dim));
            qbytes.extend_from_slice(q.as_elements().as_bytes());
        }
        let q_dev = stream.clone_htod(&qbytes).unwrap();
        let d_dev = stream
            .clone_htod(corpus.tokens().elements().as_bytes())
            .unwrap();
        let off_dev = stream.clone_htod(&offsets).unwrap();
        let exp = Expected::new(&queries, &corpus);
        for (name, scorer) in &scorers {
            let label = format!("{name}: d={dim} {dtype}");
            let n = order.len();
            let out = stream.clone_htod(&poisoned(qs.len() * n)).unwrap();
            let args = RawArgs {
                queries: RawQueries {
                    tokens: q_dev.device_ptr(&stream).0,
                    dtype,
                    dim,
                    row_stride: dim,
                    spans: &spans,
                },
                docs: RawDocs {
                    tokens: d_dev.device_ptr(&stream).0,
                    dtype,
                    dim,
                    row_stride: dim,
                    layout: RawLayout::Packed {
                        offsets: off_dev.device_ptr(&stream).0,
                        docs: n,
                        rows: corpus.offsets()[corpus.len()],
                    },
                    split_ok: false,
                },
                candidates: None,
                out: out.device_ptr(&stream).0,
            };
            // SAFETY: every pointer is a live allocation of the size `args` describes.
            let kernel = unsafe { scorer.score_raw(Some(stream.cu_stream()), args) }
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(kernel, Kernel::Bulk, "{label}");
            let got = stream.clone_dtoh(&out).unwrap();
            for (qi, row) in got.chunks(n).enumerate() {
                let (mut docs, mut scores) = (Vec::new(), Vec::new());
                for (i, d) in order.iter().enumerate() {
                    match d {
                        Some(j) => {
                            docs.push(*j);
                            scores.push(row[i]);
                        }
                        None => assert_eq!(
                            row[i],
                            f32::NEG_INFINITY,
                            "{label}: query {qi} empty document {i}"
                        ),
                    }
                }
                exp.assert_close(&label, qi, &docs, &scores);
            }
        }
    }
}

/// Stages too many for a spanning block past 128: a multiple of 8 runs on `maxsim_bulk_any`
/// (its tiles are 32 tokens), another d is refused with an error that names the shape, unless
/// the upload padded it to a multiple of 8 (d = 202 to 208, the default), which then runs.
#[test]
fn stages_only_the_bulk_tiles_fit_fall_back_or_are_refused() {
    let Some(_gpu) = sm90() else { return };
    let six = |pad| {
        CudaScorer::new(0)
            .expect("GPU")
            .force_kernel(Some(Kernel::Bulk))
            .bulk_shape(6, 5)
            .unwrap()
            .pad_rows(pad)
    };
    let mut r = rng(152);
    for (dim, pad, runs) in [
        (152usize, false, true),
        (202, false, false),
        (202, true, true),
    ] {
        let lens: Vec<usize> = (0..50).map(|_| r.random_range(1..300)).collect();
        let corpus = random_corpus(&mut r, &lens, dim, DType::F16, 1.0);
        let qs = [random_query(&mut r, 20, dim, DType::F16, 1.0)];
        let queries = matrices(&qs, dim);
        let mut out = poisoned(corpus.len());
        let got = six(pad).score_into(&queries, &corpus, Docs::All, &mut out);
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

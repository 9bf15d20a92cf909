//! The CUDA engine's exact scoring against the float64 reference, on the device
//! (bench/gpu_check.sh runs it there): every kernel family on random shapes, raw device memory,
//! errors, NaN. f32 on the tensor cores is in gpu_f32.rs, the device top-k and `GpuIndex` in
//! gpu_search.rs. Without a usable GPU every test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::gpu_check::*;
use common::*;
use cudarc::driver::DevicePtr;
use rand::Rng;
use tilemaxsim::cuda::{CudaScorer, RawArgs};
use tilemaxsim::{Corpus, DType, Docs, Matrix, OwnedElements, Scorer};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

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
        let exp = Expected::new(&queries, &corpus);
        check_all_and_list(&gpu, &label, &queries, &corpus, &list, &exp);
        check(
            &gpu,
            &format!("{label} (range)"),
            &queries,
            &corpus,
            Docs::Range(n_docs / 2..n_docs),
            &exp,
        );
    }
}

/// `len` bytes of junk (0xFF: NaN in every dtype), with `rows` (destination byte, bytes)
/// copied in: a kernel that reads past a row's d elements, or past a document's or query's
/// rows, turns a score into NaN.
fn lay_out<'a>(len: usize, rows: impl IntoIterator<Item = (usize, &'a [u8])>) -> Vec<u8> {
    let mut buf = vec![0xffu8; len];
    for (at, row) in rows {
        buf[at..at + row.len()].copy_from_slice(row);
    }
    buf
}

/// Whether every f32 row of `c` is in the tensor cores' split range: what a caller checks
/// before vouching with `RawDocs::split_ok`.
fn in_split_range(c: &Corpus) -> bool {
    let v = Matrix::new(c.tokens().elements(), c.dim())
        .unwrap()
        .to_f32_vec();
    tilemaxsim::cuda::split_rows_ok(&v, c.dim())
}

#[test]
fn raw_device_memory_in_every_layout() {
    use tilemaxsim::cuda::{Kernel, RawDocs, RawLayout, RawQueries};
    let Some(gpu) = gpu() else { return };
    let mut r = rng(31);
    // Memory the engine does not own, on a stream it does not own (cudarc directly).
    let stream = gpu.stream().context().new_stream().unwrap();
    let ptr = |s: &cudarc::driver::CudaSlice<u8>| s.device_ptr(&stream).0;
    let dims = [1usize, 37, 64, 128, 129, 256, 768];
    for case in 0..gpu_cases(42) {
        let dim = dims[case % dims.len()];
        let dtype = DTYPES[(case / dims.len()) % 3];
        let qdtype = if case % 5 == 4 {
            DTYPES[(case + 1) % 3]
        } else {
            dtype
        };
        let (size, qsize) = (dtype.size(), qdtype.size());
        let n_docs = r.random_range(1..30);
        let long = if case % 6 == 0 { 3000 } else { 150 };
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| if i == 0 { 1 } else { r.random_range(1..=long) })
            .collect();
        let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        let dense_len = [1usize, 7, 128, 300][case % 4];
        let dense = random_corpus(&mut r, &vec![dense_len; n_docs], dim, dtype, 1.0);
        // Every third case: queries as a contiguous [Q, Lq, d] tensor of whole 32-row blocks,
        // which score_raw reads in place where a tensor-core kernel scores them.
        let contiguous = case % 3 == 1;
        let whole = [32usize, 64][r.random_range(0..2)];
        let qs: Vec<OwnedElements> = (0..r.random_range(1..4))
            .map(|_| {
                let nq = if contiguous {
                    whole
                } else {
                    [1usize, 5, 32, 33, 70][r.random_range(0..5)]
                };
                random_query(&mut r, nq, dim, qdtype, 1.0)
            })
            .collect();
        let queries = matrices(&qs, dim);
        // Otherwise as a padded [Q, Lq, d + 3] tensor, junk past each one's rows and d.
        let qrow = if contiguous { dim } else { dim + 3 };
        let lq = queries.iter().map(|q| q.rows()).max().unwrap();
        // Half the contiguous cases start a block of junk rows into the tensor (as one pair of
        // `maxsim_pairs` does): read in place from there.
        let lead = if contiguous && case % 2 == 0 {
            32 * dim
        } else {
            0
        };
        let spans: Vec<(usize, usize)> = (0..queries.len())
            .map(|i| (lead + i * lq * qrow, queries[i].rows()))
            .collect();
        let qbuf = lay_out(
            (lead + queries.len() * lq * qrow) * qsize,
            queries.iter().zip(&spans).flat_map(|(q, &(first, rows))| {
                let b = q.elements().as_bytes();
                (0..rows).map(move |t| {
                    (
                        (first + t * qrow) * qsize,
                        &b[t * dim * qsize..][..dim * qsize],
                    )
                })
            }),
        );
        let q_dev = stream.clone_htod(&qbuf).unwrap();
        let rq = RawQueries {
            tokens: ptr(&q_dev),
            dtype: qdtype,
            dim,
            row_stride: qrow,
            spans: &spans,
        };
        // maxsim_bulk / mma / gemm / wgmma at d = 64, 128 (any query length), bulk / ring at
        // wide d (queries of ≤ 32 tokens), f16/bf16 queries of the documents' dtype.
        let short = queries.iter().all(|q| q.rows() <= 32);
        let sm90 = gpu.info().compute_capability.0 >= 9;
        let f32_vouched = dtype == DType::F32
            && case % 2 == 0
            && in_split_range(&corpus)
            && in_split_range(&dense);
        let tensor_cores = (dtype == qdtype
            && dtype != DType::F32
            && ([64, 128].contains(&dim) || ([256, 768].contains(&dim) && short)))
            // f32 queries against f16 and bf16 (maxsim_bulk_split), and against f32 documents
            // the caller vouches are in the split's range (every other f32 case).
            || (qdtype == DType::F32
                && (dtype != DType::F32 || f32_vouched)
                && [64, 128].contains(&dim)
                && short
                && sm90);
        // Other d < 256: maxsim_span_any (sm_90+) over every document, not a candidate list.
        let any_d = dtype == qdtype
            && dtype != DType::F32
            && short
            && dim < 256
            && ![32, 64, 96, 128].contains(&dim)
            && sm90;
        let doc_row = |c: &'_ Corpus, j: usize, t: usize| -> Vec<u8> {
            let o = c.offsets()[j] + t;
            c.tokens().elements().as_bytes()[o * dim * size..(o + 1) * dim * size].to_vec()
        };
        let offsets = |c: &Corpus| {
            let o: Vec<i64> = c.offsets().iter().map(|&x| x as i64).collect();
            stream.clone_htod(&o).unwrap()
        };
        for layout in 0..5 {
            let (c, label) = match layout {
                0 => (&corpus, "packed"),
                1 => (&corpus, "packed, rows d + 5 apart"),
                2 => (&corpus, "padded with lengths"),
                3 => (&dense, "dense batch"),
                _ => (&corpus, "packed, one element past an aligned address"),
            };
            let label = format!("case {case} {label}: d={dim} {dtype} docs, {qdtype} queries");
            let max_len = c.offsets().windows(2).map(|w| w[1] - w[0]).max().unwrap();
            let (row_stride, batch_stride) = match layout {
                1 => (dim + 5, 0),
                2 => (dim, max_len * dim + 7),
                _ => (dim, max_len * dim),
            };
            // The rows where each layout puts them, junk elsewhere.
            // Layout 4: packed, the tensor starting one element into its allocation.
            let lead = usize::from(layout == 4);
            let first_row = |j: usize| match layout {
                2 | 3 => j * batch_stride,
                _ => lead + c.offsets()[j] * row_stride,
            };
            let total = match layout {
                2 | 3 => c.len() * batch_stride,
                _ => lead + c.offsets()[c.len()] * row_stride,
            };
            let rows: Vec<(usize, Vec<u8>)> = (0..c.len())
                .flat_map(|j| (0..c.doc(j).rows()).map(move |t| (j, t)))
                .map(|(j, t)| ((first_row(j) + t * row_stride) * size, doc_row(c, j, t)))
                .collect();
            let d_dev = stream
                .clone_htod(&lay_out(
                    total * size,
                    rows.iter().map(|(a, b)| (*a, &b[..])),
                ))
                .unwrap();
            let off = offsets(c);
            let doc_lens: Vec<i64> = (0..c.len()).map(|j| c.doc(j).rows() as i64).collect();
            let len_dev = stream.clone_htod(&doc_lens).unwrap();
            let raw_layout = match layout {
                0 | 1 | 4 => RawLayout::Packed {
                    offsets: off.device_ptr(&stream).0,
                    docs: c.len(),
                    rows: c.offsets()[c.len()],
                },
                2 => RawLayout::Padded {
                    docs: c.len(),
                    max_len,
                    batch_stride,
                    lengths: len_dev.device_ptr(&stream).0,
                },
                _ => RawLayout::Padded {
                    docs: c.len(),
                    max_len,
                    batch_stride,
                    lengths: 0,
                },
            };
            let docs = RawDocs {
                tokens: ptr(&d_dev) + (lead * size) as u64,
                dtype,
                dim,
                row_stride,
                layout: raw_layout,
                split_ok: f32_vouched,
            };
            // Every document, then a candidate list with repeats.
            let list: Vec<usize> = (0..c.len() + 3)
                .map(|_| r.random_range(0..c.len()))
                .collect();
            let list_i64: Vec<i64> = list.iter().map(|&x| x as i64).collect();
            let list_dev = stream.clone_htod(&list_i64).unwrap();
            let all: Vec<usize> = (0..c.len()).collect();
            for (idx, candidates) in [
                (&all, None),
                (&list, Some((list_dev.device_ptr(&stream).0, list.len()))),
            ] {
                let n = idx.len();
                let out = stream
                    .clone_htod(&vec![f32::NAN; queries.len() * n])
                    .unwrap();
                let args = RawArgs {
                    queries: rq,
                    docs,
                    candidates,
                    out: out.device_ptr(&stream).0,
                };
                // The scorer's own stream on some cases: the inputs must be there first.
                let own = case % 4 == 3;
                if own {
                    stream.synchronize().unwrap();
                }
                let on = (!own).then(|| stream.cu_stream());
                // SAFETY: every pointer is a live allocation of the size `args` describes.
                let kernel =
                    unsafe { gpu.score_raw(on, args) }.unwrap_or_else(|e| panic!("{label}: {e}"));
                if own {
                    gpu.synchronize().unwrap();
                }
                let in_place = layout == 0 || layout == 3;
                assert_eq!(
                    kernel != Kernel::Tiled,
                    in_place && (tensor_cores || (any_d && candidates.is_none())),
                    "{label}: {kernel:?}"
                );
                let got = stream.clone_dtoh(&out).unwrap();
                for (qi, q) in queries.iter().enumerate() {
                    let what = format!("{label} [{kernel:?}] q{qi} ({} candidates)", n);
                    assert_close(&what, *q, c, idx, &got[qi * n..(qi + 1) * n]);
                }
            }
        }
    }
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
    // Raw calls: every shape error is caught before anything is read or launched.
    use tilemaxsim::cuda::{RawDocs, RawLayout, RawQueries};
    let docs = RawDocs {
        tokens: 256,
        dtype: DType::F16,
        dim: 4,
        row_stride: 4,
        layout: RawLayout::Packed {
            offsets: 512,
            docs: 1,
            rows: 2,
        },
        split_ok: false,
    };
    let queries = RawQueries {
        tokens: 1024,
        dtype: DType::F16,
        dim: 4,
        row_stride: 4,
        spans: &[(0, 2)],
    };
    let call = |queries: RawQueries<'_>, docs: RawDocs, out: u64| {
        let args = RawArgs {
            queries,
            docs,
            candidates: None,
            out,
        };
        // SAFETY: every one of these calls is refused before any pointer is used.
        unsafe { gpu.score_raw(None, args) }
    };
    let spans = [(0, 2), (8, 0)];
    let bad = [
        call(RawQueries { dim: 3, ..queries }, docs, 2048),
        call(
            RawQueries {
                spans: &spans,
                ..queries
            },
            docs,
            2048,
        ),
        call(
            RawQueries {
                tokens: 0,
                ..queries
            },
            docs,
            2048,
        ),
        call(queries, RawDocs { tokens: 0, ..docs }, 2048),
        call(queries, docs, 0),
        call(
            queries,
            RawDocs {
                layout: RawLayout::Packed {
                    offsets: 0,
                    docs: 1,
                    rows: 2,
                },
                ..docs
            },
            2048,
        ),
        call(
            queries,
            RawDocs {
                layout: RawLayout::Padded {
                    docs: 1,
                    max_len: 0,
                    batch_stride: 4,
                    lengths: 0,
                },
                ..docs
            },
            2048,
        ),
    ];
    for (i, r) in bad.iter().enumerate() {
        assert!(r.is_err(), "raw case {i} was accepted");
    }
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
        (
            Kernel::Bulk,
            " (spanning tiles)",
            forced(Kernel::Bulk).bulk_spans(Some(true)),
        ),
        (
            Kernel::Bulk,
            " (spanning, 1 stage, 3 per block)",
            shaped(1, 3).bulk_spans(Some(true)),
        ),
        (
            Kernel::Bulk,
            " (spanning tiles, not streamed)",
            forced(Kernel::Bulk)
                .bulk_spans(Some(true))
                .bulk_stream(Some(false)),
        ),
        (
            Kernel::Bulk,
            " (document tiles)",
            forced(Kernel::Bulk).bulk_spans(Some(false)),
        ),
        (
            Kernel::Bulk,
            " (document tiles, 3 per block, two waves of one-task blocks last)",
            shaped(2, 3).bulk_spans(Some(false)).bulk_tail(Some(2)),
        ),
        (
            Kernel::Bulk,
            " (document tiles, resident grid, 1 stage, 2 per block)",
            shaped(1, 2)
                .bulk_spans(Some(false))
                .bulk_grid_resident(Some(true)),
        ),
        (Kernel::Gemm, "", forced(Kernel::Gemm)),
        (Kernel::Wgmma, "", forced(Kernel::Wgmma)),
        (Kernel::Ring, "", forced(Kernel::Ring)),
    ];
    let mut r = rng(21);
    let cases = gpu_cases(52);
    for case in 0..cases {
        // maxsim_mma / bulk / gemm / ring dims, then the wide ones (bulk and ring).
        // d = 77, 80, 1 and 126 (no multiple of 32): maxsim_span_any (16-byte rows at 80, a
        // half at a time else); 77 among the first cases, which the sanitizers run.
        // d = 200, 1016, 136: multiples of 8 past 128 (maxsim_bulk_any, zeros past d).
        let dim = [
            32usize, 77, 96, 128, 256, 768, 80, 64, 1, 126, 200, 1016, 136,
        ][case % 13];
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
                let nq = if case % 5 == 2
                    && !long_docs
                    && dim <= 128
                    && dim.is_multiple_of(32)
                    && i % 2 == 0
                {
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
        // The float64 reference once for every scorer of the case (on all cores).
        let exp = Expected::new(&queries, &corpus);
        for (name, scorer) in scorers {
            let label =
                format!("{name} case {case}: d={dim} {dtype} {n_docs} docs, {n_queries} queries");
            check_all_and_list(scorer, &label, &queries, &corpus, &list, &exp);
        }
    }
}

/// A document holding NaN scores NaN for every query, in every kernel family (their maxima are
/// PTX `max.NaN`), and the other documents are untouched: the rule the CPU engine keeps too.
#[test]
fn nan_in_a_document_scores_nan_in_every_kernel() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    let forced = |k| CudaScorer::new(0).expect("GPU").force_kernel(Some(k));
    let families = [
        Kernel::Mma,
        Kernel::Bulk,
        Kernel::Gemm,
        Kernel::Wgmma,
        Kernel::Ring,
        Kernel::Tiled,
        Kernel::V1,
        Kernel::V2,
    ];
    let mut r = rng(33);
    for (case, (dim, dtype)) in [
        (128, DType::F16),
        (77, DType::BF16),
        (64, DType::F32),
        (768, DType::F16),
        (48, DType::F16),
    ]
    .into_iter()
    .enumerate()
    .take((gpu_cases(50) / 10).max(1))
    {
        let lens: Vec<usize> = (0..120).map(|i| [1, 7, 33, 180, 400][i % 5]).collect();
        let clean = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        let mut v = clean.tokens().to_f32_vec();
        let poisoned = [3usize, 64, 119];
        for &j in &poisoned {
            let row = clean.offsets()[j] + lens[j] / 2;
            v[row * dim + dim / 3] = f32::NAN;
        }
        let corpus = Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), dim, &lens).unwrap();
        for nq in [5usize, 32, 200] {
            let qs: Vec<OwnedElements> = (0..3)
                .map(|_| random_query(&mut r, nq, dim, dtype, 1.0))
                .collect();
            let queries = matrices(&qs, dim);
            let dq = gpu.upload_queries(&queries, dim).unwrap();
            let dc = gpu.upload(&corpus).unwrap();
            let mut scorers = vec![("auto".to_string(), &gpu)];
            let forced: Vec<(Kernel, CudaScorer)> =
                families.iter().map(|&k| (k, forced(k))).collect();
            for (k, s) in &forced {
                if s.kernel_for(&dq, &dc) == *k {
                    scorers.push((k.name().to_string(), s));
                }
            }
            let want: Vec<f64> = queries
                .iter()
                .flat_map(|q| {
                    (0..corpus.len()).map(|j| tilemaxsim::reference::maxsim_f64(*q, clean.doc(j)))
                })
                .collect();
            for (name, scorer) in scorers {
                let label = format!("{name} case {case}: d={dim} {dtype}, {nq}-token queries");
                let mut out = vec![0f32; want.len()];
                scorer
                    .score_into(&queries, &corpus, Docs::All, &mut out)
                    .unwrap();
                for (i, (&s, &w)) in out.iter().zip(&want).enumerate() {
                    let (qi, j) = (i / corpus.len(), i % corpus.len());
                    if poisoned.contains(&j) {
                        assert!(s.is_nan(), "{label}: q{qi} doc {j} scored {s}, not NaN");
                    } else {
                        assert!(
                            (f64::from(s) - w).abs() <= 1e-3 * w.abs().max(1.0),
                            "{label}: q{qi} doc {j} scored {s}, reference {w}"
                        );
                    }
                }
            }
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
    for spans in [false, true] {
        for shape in [None, Some((1, 3)), Some((2, 4)), Some((3, 7))] {
            let s = forced(Kernel::Bulk).bulk_spans(Some(spans));
            let s = match shape {
                Some((stages, group)) => s.bulk_shape(stages, group).unwrap(),
                None => s,
            };
            scorers.push((format!("bulk {shape:?} spanning {spans}"), s));
        }
    }
    // Whole-document tiles on a resident grid: each block walks runs strided by the grid,
    // across queries.
    for (stages, group) in [(1, 1), (2, 3), (3, 7)] {
        let s = forced(Kernel::Bulk)
            .bulk_spans(Some(false))
            .bulk_shape(stages, group)
            .unwrap()
            .bulk_grid_resident(Some(true));
        scorers.push((format!("bulk ({stages}, {group}) resident grid"), s));
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
fn resident_grids_step_across_queries() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    if gpu.info().compute_capability.0 < 9 {
        return; // the bulk-copy kernels need sm_90
    }
    // Few documents and many queries: each block's stride (the resident blocks times the run)
    // spans whole queries, so stepping to its next run adds a quotient of queries and a
    // remainder of documents (BulkWalk), and a block changes query at every run. f16 and bf16
    // queries take maxsim_bulk, f32 queries on an f16 corpus maxsim_bulk_split (its query parts
    // reloaded into shared memory mid-ring). Outputs NaN-poisoned; all documents and a list.
    let mut r = rng(35);
    for (case, (n_docs, n_queries, dtype, qdtype, group)) in [
        (1usize, 3000usize, DType::F16, DType::F16, 1usize),
        (3, 2000, DType::BF16, DType::BF16, 1),
        (7, 900, DType::F16, DType::F16, 2),
        (2, 1500, DType::F16, DType::F32, 1),
        (5, 700, DType::F16, DType::F32, 3),
    ]
    .into_iter()
    .enumerate()
    {
        let dim = [32usize, 64, 128][case % 3];
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| if i == 0 { 1 } else { r.random_range(1..300) })
            .collect();
        let corpus = random_corpus(&mut r, &lens, dim, dtype, 1.0);
        let qs: Vec<OwnedElements> = (0..n_queries)
            .map(|_| {
                let nq = r.random_range(1..=32);
                random_query(&mut r, nq, dim, qdtype, 1.0)
            })
            .collect();
        let queries = matrices(&qs, dim);
        let scorer = CudaScorer::new(0)
            .expect("GPU")
            .force_kernel(Some(Kernel::Bulk))
            .bulk_spans(Some(false))
            .bulk_shape(2, group)
            .unwrap()
            .bulk_grid_resident(Some(true));
        let dq = scorer.upload_queries(&queries, dim).unwrap();
        let dc = scorer.upload(&corpus).unwrap();
        assert_eq!(scorer.kernel_for(&dq, &dc), Kernel::Bulk, "case {case}");
        let list: Vec<usize> = (0..n_docs + 2).map(|_| r.random_range(0..n_docs)).collect();
        let label = format!(
            "resident grid case {case}: d={dim} {dtype} corpus, {n_queries} {qdtype} queries, \
             {n_docs} docs, runs of {group}"
        );
        let exp = Expected::new(&queries, &corpus);
        check_all_and_list(&scorer, &label, &queries, &corpus, &list, &exp);
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
                &Expected::new(&[qm], &corpus),
            );
        }
    }
}

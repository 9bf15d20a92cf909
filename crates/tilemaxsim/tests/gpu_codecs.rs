//! Compressed corpora on the device (bench/gpu_check.sh runs it there): every codec's fused
//! kernel, and the decode-then-exact path of the d no fused kernel is built for, against the
//! float64 reference of the decoded corpus and against the CPU twin, on random shapes (odd
//! token counts, 1-token and long documents, queries of one to several 32-row blocks, every
//! document, ranges and candidate lists with repeats), outputs poisoned first. Without a
//! usable GPU every test prints a notice and passes.
//!
//! The kernels multiply f16 queries by codes decoded to f16 (exactly for int8 and fp8), so the
//! reference takes the queries rounded to f16 and codecs whose parameters are f16 values (the
//! residual's bucket weights, the pq codebooks); what remains is f32 accumulation, plus for the
//! residual codec the centroid scores ⟨q, centroid⟩ rounded to f16 once.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use half::f16;
use rand::Rng;
use tilemaxsim::codec::{
    Codec, CodecSpec, CompressedCorpus, PqCodec, PqOptions, ResidualCodec, ResidualOptions,
    compress,
};
use tilemaxsim::cuda::CudaScorer;
use tilemaxsim::{CpuScorer, DType, Docs, Matrix, OwnedElements, Scorer};

fn cases(default: usize) -> usize {
    std::env::var("TILEMAXSIM_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn round16(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| f16::from_f32(x).to_f32()).collect()
}

/// The same codes under a codec whose parameters are f16 values (what the kernels read).
fn f16_exact(c: &CompressedCorpus) -> CompressedCorpus {
    let codec = match c.codec() {
        Codec::Residual(r) => Codec::Residual(
            ResidualCodec::new(
                r.nbits(),
                r.dim(),
                r.centroids().to_vec(),
                r.bucket_cutoffs().to_vec(),
                round16(r.bucket_weights()),
            )
            .unwrap(),
        ),
        Codec::Pq(p) => Codec::Pq(PqCodec::new(p.m(), p.dim(), round16(p.codebooks())).unwrap()),
        other => other.clone(),
    };
    CompressedCorpus::new(
        codec,
        c.dim(),
        c.offsets().to_vec(),
        c.codes().to_vec(),
        c.aux().map(|a| a.to_vec()),
    )
    .unwrap()
}

fn specs(m: usize) -> Vec<CodecSpec> {
    let mut v: Vec<CodecSpec> = [1, 2, 4]
        .map(|nbits| {
            CodecSpec::Residual(ResidualOptions {
                nbits,
                centroids: Some(16),
                kmeans_iters: 2,
                ..Default::default()
            })
        })
        .into();
    v.push(CodecSpec::Pq(PqOptions {
        m,
        kmeans_iters: 2,
        ..Default::default()
    }));
    v.push(CodecSpec::Int8);
    v.push(CodecSpec::Fp8);
    v
}

/// Queries of `rows` tokens each (f32, from `seed`).
fn unit_queries(seed: u64, rows: &[usize], dim: usize) -> Vec<OwnedElements> {
    let mut r = rng(seed);
    rows.iter()
        .map(|&nq| random_query(&mut r, nq, dim, DType::F32, 1.0))
        .collect()
}

/// GPU scores of `docs` (poisoned output) against the float64 reference of the decoded corpus
/// with f16-rounded queries, and against the CPU twin.
fn check(
    gpu: &CudaScorer,
    label: &str,
    c: &CompressedCorpus,
    queries: &[Matrix<'_>],
    docs: Docs<'_>,
) {
    let n = docs.count(c);
    let mut out = vec![f32::NAN; queries.len() * n];
    gpu.score_into(queries, c, docs.clone(), &mut out)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let decoded = c.decode().unwrap();
    let idx: Vec<usize> = (0..n).map(|i| docs.index(i)).collect();
    let mut twin = vec![f32::NAN; out.len()];
    CpuScorer::new()
        .score_into(queries, c, docs.clone(), &mut twin)
        .unwrap();
    for (qi, q) in queries.iter().enumerate() {
        let q16v = round16(&q.to_f32_vec());
        let q16 = Matrix::new(&q16v[..], q.dim()).unwrap();
        let norms: f64 = q
            .to_f32_vec()
            .chunks_exact(q.dim())
            .map(|r| {
                r.iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum::<f64>()
                    .sqrt()
            })
            .sum();
        // The centroid scores rounded to f16 (and taken with f32 queries): 2^-11 + 2^-12 of
        // |⟨q, c⟩| / |c + r| ≤ 2 |q| for unit-norm data.
        let centroid = if matches!(c.codec(), Codec::Residual(_)) {
            2.0 * 1.5 * norms / 2048.0
        } else {
            0.0
        };
        for (i, &j) in idx.iter().enumerate() {
            let doc = decoded.doc(j);
            // The fused kernels take the queries rounded to f16; where none is built, the
            // decoded tokens are scored by the exact kernels with the queries as given.
            let want = tilemaxsim::reference::maxsim_f64(q16, doc);
            let want32 = tilemaxsim::reference::maxsim_f64(*q, doc);
            let tol = tolerance(q16, doc) + centroid;
            let got = out[qi * n + i];
            let off = (f64::from(got) - want)
                .abs()
                .min((f64::from(got) - want32).abs());
            assert!(
                got.is_finite() && off <= tol,
                "{label} q{qi}: score[{i}] (doc {j}, {} tokens) = {got}, reference {want} \
                 (f32 queries {want32}), tolerance {tol:e}",
                doc.rows()
            );
            // The CPU twin scores f32 queries: the two differ by the queries' f16 rounding.
            let cpu = twin[qi * n + i];
            let abs = tilemaxsim::reference::maxsim_abs_f64(*q, doc);
            assert!(
                (f64::from(got) - f64::from(cpu)).abs() <= tol + abs / 1024.0,
                "{label} q{qi}: score[{i}] = {got}, CPU twin {cpu}"
            );
        }
    }
}

#[test]
fn every_codec_on_the_gpu_matches_its_decoding() {
    let Some(gpu) = gpu() else { return };
    // d with fused kernels (32, 64, 96, 128) and without (48, 40: decoded at upload).
    let shapes: &[(usize, usize, &[usize])] = &[
        (128, 16, &[31, 1, 180, 64, 5, 9, 600, 2, 1, 128, 127, 129]),
        (128, 8, &[1, 1, 7, 300]),
        (128, 64, &[17, 33]),
        (96, 16, &[3, 1, 50, 8]),
        (64, 32, &[65, 1, 2, 40]),
        (32, 8, &[1, 7, 9, 16, 31]),
        (48, 8, &[5, 1, 70]),
        (40, 4, &[9, 3]),
    ];
    let limit = cases(shapes.len());
    for (s, &(dim, m, lens)) in shapes.iter().take(limit).enumerate() {
        let corpus = unit_corpus(300 + s as u64, lens, dim, DType::F32);
        let qs = unit_queries(400 + s as u64, &[1usize, 5, 32, 33, 70], dim);
        let queries = matrices(&qs, dim);
        for spec in specs(m) {
            let c = f16_exact(&compress(&corpus, &spec, 7, &|_, _, _| {}).unwrap());
            let label = format!("d={dim} lens={lens:?} {}", c.codec().describe());
            check(&gpu, &label, &c, &queries, Docs::All);
            check(&gpu, &label, &c, &queries[..2], Docs::Range(1..c.len()));
            let list: Vec<usize> = (0..c.len()).rev().step_by(2).chain([0, 0]).collect();
            check(&gpu, &label, &c, &queries, Docs::List(&list));
            // One query block alone (1 and 32 tokens), as a batch-1 search launches them.
            check(&gpu, &label, &c, &queries[..1], Docs::All);
            check(&gpu, &label, &c, &queries[2..3], Docs::List(&list));
        }
    }
}

#[test]
fn batched_bulk_and_one_warp_kernels_all_match() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    let open = |k| CudaScorer::new(0).unwrap().force_kernel(Some(k));
    // Kernel::Wgmma: the batched kernel (kernels/codec_wgmma.cu) where it is loaded (sm_90a,
    // d 64 and 128), else the one-warp one; Kernel::Bulk: the bulk-copy kernel of int8, fp8
    // and the residual where a token's codes are a multiple of 16 bytes (kernels/codec_bulk.cu,
    // sm_90a, d 64 and 128; 128-token tiles multiplied 64 tokens at a time), else the one-warp
    // one; Kernel::Mma: the one-warp kernel.
    let (batched, bulk, warp) = (open(Kernel::Wgmma), open(Kernel::Bulk), open(Kernel::Mma));
    drop(gpu);
    // Documents of 1 token, across the 64- and 128-token tiles (63-65, 127-129) and over three;
    // queries of 1 to 7 blocks, 14 in all: two query tiles of the batched kernel, the second
    // part-empty.
    let shapes: &[(usize, usize, &[usize])] = &[
        (128, 16, &[1, 129, 3, 300, 128, 127, 64, 1, 385, 40]),
        (128, 32, &[5, 1, 131]),
        (64, 16, &[257, 1, 63, 128, 9, 65]),
        (64, 8, &[2, 130]),
    ];
    for (s, &(dim, m, lens)) in shapes.iter().take(cases(shapes.len())).enumerate() {
        let corpus = unit_corpus(700 + s as u64, lens, dim, DType::F32);
        let qs = unit_queries(800 + s as u64, &[1usize, 45, 32, 70, 200, 33], dim);
        let queries = matrices(&qs, dim);
        for spec in specs(m) {
            let c = f16_exact(&compress(&corpus, &spec, 3, &|_, _, _| {}).unwrap());
            let label = format!("d={dim} lens={lens:?} {}", c.codec().describe());
            let list: Vec<usize> = (0..c.len()).rev().chain([1, 1]).collect();
            for (kernel, g) in [("batched", &batched), ("bulk", &bulk), ("one-warp", &warp)] {
                let label = format!("{label} [{kernel}]");
                check(g, &label, &c, &queries, Docs::All);
                check(g, &label, &c, &queries[1..], Docs::List(&list));
            }
        }
    }
}

#[test]
fn quad_kernel_scores_every_document_in_its_grouped_order() {
    use tilemaxsim::cuda::Kernel;
    let Some(plain) = gpu() else { return };
    let plain = plain.codec_quad(None); // the default, whatever TILEMAXSIM_QUAD says
    // The four-documents-a-warpgroup kernel (kernels/codec_quad.cu, sm_90a): the residual at
    // nbits 1 and 2, d 64 and 128, over every document, when asked for (`codec_quad`; not by
    // default: slower there). 2,003 documents of 1 to 300 tokens (16-token tiles
    // from 1 to 19, groups of four across the tile boundaries, a last group of three) and a
    // 1-token corpus; queries of one to three 32-row blocks (1, 31 and 70 tokens; 1 and 33
    // together), checked against the float64 reference and the one-warp kernel's scores.
    let sm90a = plain.info().compute_capability == (9, 0);
    let gpu = CudaScorer::new(0).unwrap().codec_quad(Some(true));
    assert_eq!(
        plain
            .compressed_kernel(
                &f16_exact(
                    &compress(
                        &unit_corpus(999, &[20, 3], 128, DType::F32),
                        &specs(16)[1],
                        1,
                        &|_, _, _| {}
                    )
                    .unwrap()
                ),
                1
            )
            .map(|n| n.contains("_q4_")),
        Some(false),
        "off by default"
    );
    drop(plain);
    let warp = CudaScorer::new(0)
        .unwrap()
        .force_kernel(Some(Kernel::Mma))
        .codec_quad(Some(false));
    let lens: Vec<usize> = (0..2003).map(|i| 1 + (i * 37 + i / 7) % 300).collect();
    for (s, (dim, lens)) in [(128, &lens[..]), (64, &lens[..601]), (128, &[1][..])]
        .into_iter()
        .enumerate()
    {
        let corpus = unit_corpus(1000 + s as u64, lens, dim, DType::F32);
        let qs = unit_queries(1100 + s as u64, &[1usize, 31, 70, 33], dim);
        let queries = matrices(&qs, dim);
        for spec in specs(16).into_iter().take(cases(2)) {
            let c = f16_exact(&compress(&corpus, &spec, 9, &|_, _, _| {}).unwrap());
            let label = format!("d={dim} {} documents {}", c.len(), c.codec().describe());
            if sm90a {
                let want = format!(
                    "maxsim_codec_q4_{}_d{dim}",
                    match c.codec() {
                        Codec::Residual(r) => format!("residual{}", r.nbits()),
                        _ => unreachable!(),
                    }
                );
                for nq in [1, 70] {
                    assert_eq!(
                        gpu.compressed_kernel(&c, nq).as_deref(),
                        Some(&want[..]),
                        "{label}"
                    );
                }
                assert_eq!(
                    warp.compressed_kernel(&c, 1).map(|n| n.contains("_q4_")),
                    Some(false)
                );
            }
            for q in [
                &queries[..1],
                &queries[1..2],
                &queries[2..3],
                &[queries[0], queries[3]][..],
            ] {
                check(&gpu, &label, &c, q, Docs::All);
                let mut ours = vec![f32::NAN; q.len() * c.len()];
                let mut theirs = vec![f32::NAN; q.len() * c.len()];
                gpu.score_into(q, &c, Docs::All, &mut ours).unwrap();
                warp.score_into(q, &c, Docs::All, &mut theirs).unwrap();
                for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                        "{label}: score {i} {a} against the one-warp kernel's {b}"
                    );
                }
            }
        }
    }
}

#[test]
fn quad_kernel_walks_many_groups_a_warpgroup() {
    let Some(plain) = gpu() else { return };
    if plain.info().compute_capability != (9, 0) {
        return; // the kernel is sm_90a's
    }
    drop(plain);
    // Past one group of four documents a warpgroup (528 warpgroups on a 132-SM H200 at one query
    // block), a warpgroup walks many groups, each tile's operands loaded ahead across documents
    // and groups: 12,011 documents of 1 to 80 tokens (about 6 groups a warpgroup at one query
    // block, 17 at three), queries of one and three blocks in one call, against the float64
    // reference. Not against the one-warp kernel at 1e-4 as above: on 30,011 such documents
    // the two differed by 1.1e-3 on a 1-token document scoring -1.458, both inside the
    // reference's tolerance for f16 queries and centroid scores (the quad kernel the nearer:
    // -1.45819 against -1.45705, the reference -1.45811).
    let gpu = CudaScorer::new(0).unwrap().codec_quad(Some(true));
    let lens: Vec<usize> = (0..12_011).map(|i| 1 + (i * 13 + i / 5) % 80).collect();
    let dim = 128;
    let corpus = unit_corpus(1200, &lens, dim, DType::F32);
    let qs = unit_queries(1201, &[32usize, 70], dim);
    let queries = matrices(&qs, dim);
    for spec in specs(16).into_iter().take(cases(2)) {
        let c = f16_exact(&compress(&corpus, &spec, 9, &|_, _, _| {}).unwrap());
        let label = format!("{} documents {}", c.len(), c.codec().describe());
        assert_eq!(
            gpu.compressed_kernel(&c, 70).map(|n| n.contains("_q4_")),
            Some(true),
            "{label}"
        );
        check(&gpu, &label, &c, &queries, Docs::All);
    }
}

#[test]
fn one_warp_kernels_claim_runs_of_many_documents() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    drop(gpu);
    // Past 16 tasks a resident warp (about 25,000 on a 132-SM part), the one-warp kernels take
    // their tasks from a counter in runs (CODEC_CLAIM); below it, every nwarps-th task. 40,001
    // documents of 1 to 23 tokens (so the last run crosses the end of the tasks), every codec at
    // d = 64, all of them and a list in reverse. TILEMAXSIM_GPU_CASES=3 (the sanitizers): the
    // residual's three nbits only (with all six codecs, and one more check since taken out,
    // memcheck ran past its 300 s on the H200).
    let warp = CudaScorer::new(0).unwrap().force_kernel(Some(Kernel::Mma));
    let lens: Vec<usize> = (0..40_001).map(|i| 1 + (i * 7) % 23).collect();
    let dim = 64;
    let corpus = unit_corpus(900, &lens, dim, DType::F32);
    let qs = unit_queries(901, &[1usize, 33], dim);
    let queries = matrices(&qs, dim);
    let list: Vec<usize> = (0..corpus.len()).rev().step_by(3).collect();
    for spec in specs(16).into_iter().take(cases(6)) {
        let c = f16_exact(&compress(&corpus, &spec, 5, &|_, _, _| {}).unwrap());
        let label = format!("40,001 documents {}", c.codec().describe());
        check(&warp, &label, &c, &queries, Docs::All);
        check(&warp, &label, &c, &queries, Docs::List(&list));
    }
}

#[test]
fn batched_kernel_packs_documents_into_runs() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    drop(gpu);
    // Runs of 1 (a document's own tiles) to 128 documents cut into 128-token tiles across their
    // boundaries (RunWalk, maxsim_codec_wgp_*), and 0 (maxsim_codec_wg_*, every document in tiles
    // of its own): 128 one-token documents in a row (a tile where 128 end), documents
    // ending on and beside the 64-column halves and the tiles, a 385-token one across four tiles,
    // and a run's last tile part-empty; every document, a range (which starts mid-run) and a
    // candidate list (runs of one document). TILEMAXSIM_GPU_CASES=1 (the sanitizers): d = 128 and
    // runs of 128.
    let mut lens: Vec<usize> = vec![1; 128];
    lens.extend([64, 64, 63, 65, 127, 1, 129, 385, 2, 3, 62, 66, 128]);
    let mut r = rng(901);
    lens.extend((0..150).map(|_| r.random_range(1..=90usize)));
    lens.extend([1; 7]);
    for (s, dim) in [128usize, 64].into_iter().take(cases(2)).enumerate() {
        let corpus = unit_corpus(910 + s as u64, &lens, dim, DType::F32);
        let qs: Vec<OwnedElements> = [1usize, 45, 32, 70, 200, 33]
            .iter()
            .map(|&nq| random_query(&mut r, nq, dim, DType::F32, 1.0))
            .collect();
        let queries = matrices(&qs, dim);
        for spec in specs(16) {
            let c = f16_exact(&compress(&corpus, &spec, 5, &|_, _, _| {}).unwrap());
            let list: Vec<usize> = (0..c.len()).rev().step_by(3).chain([0, 0]).collect();
            // Every run length scores every document bit for bit alike (the two kernels sum a
            // block's rows in one order), so resident, streamed and in-place searches agree.
            let mut first: Option<Vec<f32>> = None;
            for run in [128, 1, 2, 3, 64, 0].into_iter().take(cases(6)) {
                let g = CudaScorer::new(0)
                    .unwrap()
                    .force_kernel(Some(Kernel::Wgmma))
                    .pack_documents(Some(run))
                    .unwrap();
                let label = format!("d={dim} {} [runs of {run}]", c.codec().describe());
                check(&g, &label, &c, &queries, Docs::All);
                let mut all = vec![f32::NAN; queries.len() * c.len()];
                g.score_into(&queries, &c, Docs::All, &mut all).unwrap();
                match &first {
                    None => first = Some(all),
                    Some(f) => {
                        for (i, (a, b)) in all.iter().zip(f).enumerate() {
                            assert_eq!(
                                a.to_bits(),
                                b.to_bits(),
                                "{label}: score {i}: {a} against {b}"
                            );
                        }
                    }
                }
                check(&g, &label, &c, &queries[1..], Docs::Range(5..c.len() - 3));
                check(&g, &label, &c, &queries[1..], Docs::List(&list));
            }
        }
    }
    // Out of range is refused.
    assert!(
        CudaScorer::new(0)
            .unwrap()
            .pack_documents(Some(129))
            .is_err()
    );
}

#[test]
fn lookup_table_kernel_matches_on_pq() {
    use tilemaxsim::cuda::Kernel;
    let Some(gpu) = gpu() else { return };
    drop(gpu);
    // The paper's lookup-table kernel (kernels/codec_lut.cu), forced: every pq shape the fused
    // kernels are built for, documents of 1 to 300 tokens, queries of 1 to 3 blocks (groups of
    // G = 128 / M rows, the last part-empty), every document and a list with repeats.
    let lut = CudaScorer::new(0).unwrap().force_kernel(Some(Kernel::Lut));
    let shapes: &[(usize, usize)] = &[
        (128, 16),
        (128, 32),
        (128, 64),
        (128, 8),
        (64, 16),
        (64, 32),
        (96, 8),
        (32, 16),
    ];
    for (s, &(dim, m)) in shapes.iter().take(cases(shapes.len())).enumerate() {
        let corpus = unit_corpus(
            900 + s as u64,
            &[1, 129, 3, 300, 40, 1, 77],
            dim,
            DType::F32,
        );
        let qs = unit_queries(950 + s as u64, &[1usize, 45, 32, 70, 9], dim);
        let queries = matrices(&qs, dim);
        let spec = CodecSpec::Pq(PqOptions {
            m,
            kmeans_iters: 2,
            ..Default::default()
        });
        let c = f16_exact(&compress(&corpus, &spec, 3, &|_, _, _| {}).unwrap());
        let label = format!("d={dim} {} [lut]", c.codec().describe());
        let list: Vec<usize> = (0..c.len()).rev().chain([1, 1]).collect();
        check(&lut, &label, &c, &queries, Docs::All);
        check(&lut, &label, &c, &queries[1..], Docs::List(&list));
    }
}

#[test]
fn bf16_and_f16_queries_score_compressed_corpora() {
    let Some(gpu) = gpu() else { return };
    let corpus = unit_corpus(9, &[40, 1, 77], 128, DType::F32);
    let c = f16_exact(&compress(&corpus, &CodecSpec::Int8, 1, &|_, _, _| {}).unwrap());
    let mut r = rng(10);
    for dtype in [DType::F16, DType::BF16] {
        let qs = [random_query(&mut r, 32, 128, dtype, 1.0)];
        check(
            &gpu,
            &format!("int8, {dtype} queries"),
            &c,
            &matrices(&qs, 128),
            Docs::All,
        );
    }
}

#[test]
fn compressed_top_k_on_the_gpu_matches_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let lens: Vec<usize> = (0..3000).map(|i| 1 + (i * 37) % 200).collect();
    let corpus = unit_corpus(11, &lens, 128, DType::F32);
    let spec = CodecSpec::Residual(ResidualOptions {
        nbits: 2,
        centroids: Some(64),
        kmeans_iters: 2,
        ..Default::default()
    });
    let c = compress(&corpus, &spec, 3, &|_, _, _| {}).unwrap();
    let mut r = rng(12);
    let qs: Vec<OwnedElements> = (0..4)
        .map(|_| random_query(&mut r, 32, 128, DType::F32, 1.0))
        .collect();
    let queries = matrices(&qs, 128);
    let got = gpu.top_k_batch(&queries, &c, 10).unwrap();
    let cpu = CpuScorer::new().score_batch(&queries, &c).unwrap();
    for (q, hits) in got.iter().enumerate() {
        assert_eq!(hits.len(), 10);
        let row = &cpu[q * c.len()..(q + 1) * c.len()];
        // Each GPU hit's CPU score is within rounding of the CPU's own 10th best.
        let mut sorted: Vec<f32> = row.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        for h in hits {
            assert!(
                row[h.doc] >= sorted[9] - 0.02,
                "q{q}: doc {} not near the top 10",
                h.doc
            );
        }
    }
}

/// A compressed corpus searched with its codes resident, streamed in chunks (small enough that
/// a long document is a chunk of its own), and sharded over the same GPU (resident and
/// streamed) gives the same hits; and they are the top-k of the CPU twin's scores.
#[test]
fn compressed_search_resident_streamed_and_sharded_agree() {
    use tilemaxsim::cuda::GpuCodesIndex;
    use tilemaxsim::{Residency, SearchOptions, Searcher};
    if gpu().is_none() {
        return;
    }
    let n_docs = if std::env::var_os("TILEMAXSIM_SANITIZER").is_some() {
        300
    } else {
        2000
    };
    let mut lens: Vec<usize> = (0..n_docs).map(|i| 1 + (i * 53) % 240).collect();
    lens[n_docs / 3] = 3000;
    let corpus = unit_corpus(21, &lens, 128, DType::F16);
    let specs = [
        CodecSpec::Residual(ResidualOptions {
            nbits: 2,
            centroids: Some(256),
            kmeans_iters: 2,
            ..Default::default()
        }),
        CodecSpec::Pq(PqOptions {
            m: 16,
            kmeans_iters: 2,
            ..Default::default()
        }),
        CodecSpec::Int8,
        CodecSpec::Fp8,
    ];
    let qs = unit_queries(22, &[1usize, 32, 45], 128);
    let queries = matrices(&qs, 128);
    let k = 40;
    for spec in specs {
        let c = compress(&corpus, &spec, 5, &|_, _, _| {}).unwrap();
        let name = c.codec().name();
        let row = c.codec().bytes_per_token(128);
        let modes = [
            ("resident", vec![0usize], Residency::Resident),
            ("streamed", vec![0], Residency::Stream),
            ("two shards", vec![0, 0], Residency::Resident),
            ("three streamed shards", vec![0, 0, 0], Residency::Stream),
        ];
        let mut first: Option<Vec<Vec<tilemaxsim::Hit>>> = None;
        for (mode, devices, residency) in modes {
            let options = SearchOptions {
                devices,
                residency,
                chunk_bytes: 900 * row,
                ..Default::default()
            };
            let index =
                GpuCodesIndex::new(&c, &options).unwrap_or_else(|e| panic!("{name} {mode}: {e}"));
            let streamed = index.shards().iter().filter(|s| !s.2).count();
            assert_eq!(
                streamed > 0,
                residency == Residency::Stream,
                "{name} {mode}: {streamed} streamed shards"
            );
            let got = index
                .search(&queries, k)
                .unwrap_or_else(|e| panic!("{name} {mode}: {e}"));
            match &first {
                None => first = Some(got),
                Some(f) => assert_eq!(&got, f, "{name}: {mode} differs from resident"),
            }
        }
        let got = first.expect("results");
        let cpu = CpuScorer::new().score_batch(&queries, &c).unwrap();
        for (q, hits) in got.iter().enumerate() {
            assert_eq!(hits.len(), k, "{name} q{q}");
            let row = &cpu[q * c.len()..(q + 1) * c.len()];
            let mut sorted = row.to_vec();
            sorted.sort_by(|a, b| b.total_cmp(a));
            for h in hits {
                // f16 queries and tables on the GPU against f32 on the CPU.
                assert!(
                    (row[h.doc] - h.score).abs() <= 0.02 && row[h.doc] >= sorted[k - 1] - 0.02,
                    "{name} q{q}: doc {} scores {} (CPU {}), the CPU's k-th is {}",
                    h.doc,
                    h.score,
                    row[h.doc],
                    sorted[k - 1]
                );
            }
        }
    }
}

/// `score_residual_raw`: a residual corpus's tensors in device memory the engine does not own
/// (as `maxsim_residual` hands over CUDA tensors), on a stream it does not own, scored in
/// place: equal to the same corpus uploaded and scored by the engine (bit for bit through the
/// fused kernels; within f32 rounding at a d none is built for, decoded then scored exactly),
/// outputs poisoned first; and bad shapes are errors before anything is enqueued.
#[test]
fn residual_tensors_scored_in_place() {
    use cudarc::driver::DevicePtr;
    use tilemaxsim::cuda::{RawQueries, RawResidual};
    let Some(gpu) = gpu() else { return };
    let stream = gpu.stream().context().new_stream().unwrap();
    let mut r = rng(41);
    let cases = [
        (128usize, 2u32),
        (128, 1),
        (128, 4),
        (64, 2),
        (96, 4),
        (32, 1),
        (48, 2),
        (40, 1),
    ];
    for (case, &(dim, nbits)) in cases.iter().enumerate() {
        let n_docs = 1 + (case * 97) % 400;
        let lens: Vec<usize> = (0..n_docs)
            .map(|i| if i == 0 { 1 } else { 1 + (i * 31 + case) % 300 })
            .collect();
        let corpus = unit_corpus(50 + case as u64, &lens, dim, DType::F16);
        let spec = CodecSpec::Residual(ResidualOptions {
            nbits,
            centroids: Some(16 + case * 40),
            kmeans_iters: 2,
            ..Default::default()
        });
        let c = f16_exact(&compress(&corpus, &spec, 9, &|_, _, _| {}).unwrap());
        let Codec::Residual(codec) = c.codec() else {
            unreachable!()
        };
        // Unit f32 query rows, queries of 1, 31, 32 and 45 rows in one buffer [T, d].
        let qlens = [1usize, 31, 32, 45];
        let qs: Vec<OwnedElements> = qlens
            .iter()
            .map(|&n| {
                let mut v = random_values(&mut r, n, dim, 1.0);
                for t in v.chunks_exact_mut(dim) {
                    let s = t.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                    t.iter_mut().for_each(|x| *x /= s);
                }
                OwnedElements::from_f32(&v, DType::F32)
            })
            .collect();
        let queries = matrices(&qs, dim);
        let want = gpu.score_batch(&queries, &c).unwrap();
        let flat: Vec<f32> = queries.iter().flat_map(|q| q.to_f32_vec()).collect();
        let mut spans = Vec::new();
        let mut at = 0;
        for &n in &qlens {
            spans.push((at * dim, n));
            at += n;
        }
        let up_u8 = |v: &[u8]| stream.clone_htod(v).unwrap();
        let q_dev = stream.clone_htod(&flat).unwrap();
        let res = up_u8(c.codes());
        let ids = stream.clone_htod(c.aux().unwrap()).unwrap();
        let offs: Vec<i64> = c.offsets().iter().map(|&o| o as i64).collect();
        let offs = stream.clone_htod(&offs).unwrap();
        let cents: Vec<u16> = codec.centroids().iter().map(|x| x.to_bits()).collect();
        let cents = stream.clone_htod(&cents).unwrap();
        let weights = stream.clone_htod(codec.bucket_weights()).unwrap();
        let out = stream
            .clone_htod(&vec![f32::NAN; qlens.len() * c.len()])
            .unwrap();
        let args = RawResidual {
            queries: RawQueries {
                tokens: q_dev.device_ptr(&stream).0,
                dtype: DType::F32,
                dim,
                row_stride: dim,
                spans: &spans,
            },
            nbits,
            residuals: res.device_ptr(&stream).0,
            ids: ids.device_ptr(&stream).0,
            offsets: offs.device_ptr(&stream).0,
            docs: c.len(),
            tokens: c.num_tokens(),
            centroids: cents.device_ptr(&stream).0,
            num_centroids: codec.num_centroids(),
            bucket_weights: weights.device_ptr(&stream).0,
            out: out.device_ptr(&stream).0,
        };
        let label = format!("d {dim} nbits {nbits}, {} docs", c.len());
        // SAFETY: every pointer is a live allocation of the size `args` describes.
        unsafe { gpu.score_residual_raw(Some(stream.cu_stream()), args) }
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let got = stream.clone_dtoh(&out).unwrap();
        let fused = [32, 64, 96, 128].contains(&dim);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let ok = if fused {
                g.to_bits() == w.to_bits()
            } else {
                (g - w).abs() <= 1e-5 * (1.0 + w.abs())
            };
            assert!(ok, "{label}: score {i}: {g} in place, {w} uploaded");
        }
        // Bad shapes are refused before anything runs.
        let empty = [(0usize, 0usize)];
        for (what, bad) in [
            ("nbits", RawResidual { nbits: 3, ..args }),
            ("documents", RawResidual { docs: 0, ..args }),
            (
                "centroids",
                RawResidual {
                    num_centroids: 0,
                    ..args
                },
            ),
            ("null", RawResidual { ids: 0, ..args }),
            (
                "token",
                RawResidual {
                    queries: RawQueries {
                        spans: &empty,
                        ..args.queries
                    },
                    ..args
                },
            ),
        ] {
            // SAFETY: refused by the shape checks before any pointer is read.
            let e = unsafe { gpu.score_residual_raw(Some(stream.cu_stream()), bad) }
                .expect_err(what)
                .to_string();
            assert!(e.contains(what), "{label}: {what}: {e}");
        }
    }
}

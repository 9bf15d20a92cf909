//! IVF search with every stage on the GPU (`cuda::GpuIvfSearch`; bench/gpu_check.sh runs it on
//! the device), on index directories built here:
//! - the first stages against a float64 reference: each row's probed centroids are its best
//!   (up to the f16 rounding of the centroid scores), a document is a candidate exactly when
//!   one of its tokens lies in a probed centroid, and each candidate's centroid-interaction
//!   score matches; outputs poisoned first;
//! - every centroid probed and every candidate rescored equals exhaustive search on the GPU,
//!   with and without the exact stage;
//! - fewer probes agree with the CPU's IVF stages;
//! - codes streamed per batch give the resident codes' hits, on one GPU and sharded;
//! - queries of one to three 32-row blocks in one batch, 1-token and 300-token documents, bad
//!   input, and an nprobe over the GPU's limit (the CPU stages, with a notice).
//!
//! Without a usable GPU every test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use tilemaxsim::codec::{Codec, ResidualOptions};
use tilemaxsim::cuda::{GpuIvfSearch, MAX_GPU_NPROBE, ShardedIvfSearch};
use tilemaxsim::index::{BuildOptions, Index, IndexSearch, Probe, Source, build};
use tilemaxsim::{DType, Device, Hit, Matrix, OwnedElements, Residency, SearchOptions, Searcher};

/// An index of `docs` documents (1 to 60 tokens, one of 300) at d with K centroids, in `dir`.
fn index(dir: &std::path::Path, docs: usize, dim: usize, centroids: usize) -> Index {
    let mut r = rng(7);
    let mut lengths: Vec<usize> = (0..docs)
        .map(|_| 1 + rand::Rng::random_range(&mut r, 0..60usize))
        .collect();
    lengths[0] = 1;
    lengths[docs / 2] = 300;
    let corpus = unit_corpus(11, &lengths, dim, DType::F16);
    let options = BuildOptions {
        residual: ResidualOptions {
            nbits: 2,
            centroids: Some(centroids),
            kmeans_iters: 3,
            ..Default::default()
        },
        device: Device::Cpu,
        ..Default::default()
    };
    build(
        Source::Exact(&corpus),
        None,
        dir.join("idx"),
        &options,
        &|_, _, _| {},
    )
    .unwrap();
    Index::open(dir.join("idx")).unwrap()
}

/// Queries of 1, 5, 32, 33 and 70 rows.
fn queries(seed: u64, dim: usize) -> Vec<OwnedElements> {
    let mut r = rng(seed);
    [1usize, 5, 32, 33, 70]
        .iter()
        .map(|&nq| random_query(&mut r, nq, dim, DType::F32, 1.0))
        .collect()
}

/// ⟨q_i, centroid c⟩ in float64, `[rows][K]`.
fn centroid_scores(q: Matrix<'_>, centroids: &[half::f16], dim: usize) -> Vec<Vec<f64>> {
    let q = q.to_f32_vec();
    q.chunks(dim)
        .map(|row| {
            centroids
                .chunks(dim)
                .map(|c| row.iter().zip(c).map(|(&a, b)| a as f64 * b.to_f64()).sum())
                .collect()
        })
        .collect()
}

/// What rounding a centroid score `v` to f16 (and f32 sums) may move it by.
fn slack(v: f64) -> f64 {
    (v.abs() + 1.0) * 2f64.powi(-10)
}

fn ivf_gpu<'a>(index: &'a Index, nprobe: usize, ndocs: usize) -> GpuIvfSearch<'a> {
    let probe = Probe { nprobe, ndocs };
    GpuIvfSearch::new(index.codes(), index.ivf(), probe, 0, Residency::Resident).unwrap()
}

#[test]
fn first_stages_match_the_float64_reference() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let k = 64;
    check_first_stages(
        &index(dir.path(), 400, 128, k),
        &[1, 3, 8, MAX_GPU_NPROBE.min(k - 1), k],
    );
}

/// Many centroids: the probe's lists merged in two steps (nprobe ≤ 8: 34 chunks of 256), and
/// every size of its register lists (nprobe 16, 32, 64).
#[test]
fn many_centroids_probe_as_the_float64_reference() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    check_first_stages(
        &index(dir.path(), 700, 128, 8500),
        &[1, 8, 9, 16, 32, 40, 64],
    );
}

/// `first_stages` at each of `nprobes` against the float64 reference: each row's probed
/// centroids and each document's centroid-interaction score.
fn check_first_stages(index: &Index, nprobes: &[usize]) {
    let (docs, dim) = (index.codes().len(), index.codes().dim());
    let Codec::Residual(r) = index.codes().codec() else {
        panic!("an index holds residual codes")
    };
    let ids = index.codes().aux().unwrap();
    let offsets = index.codes().offsets();
    let k = r.num_centroids();
    let owned = queries(3, dim);
    let qs = matrices(&owned, dim);
    for &nprobe in nprobes {
        let s = ivf_gpu(index, nprobe, 50).first_stages(&qs).unwrap();
        assert_eq!(s.approx.len(), qs.len());
        for (qi, q) in qs.iter().enumerate() {
            let cs = centroid_scores(*q, r.centroids(), dim);
            // Probes: nprobe distinct centroids a row, none worse than the nprobe-th best and
            // every clearly better one among them.
            let mut probed = vec![false; k];
            for (i, row) in cs.iter().enumerate() {
                let got = &s.probed[qi][i];
                if nprobe >= k {
                    assert!(got.is_empty());
                    probed.fill(true);
                    continue;
                }
                assert_eq!(got.len(), nprobe, "query {qi} row {i}");
                let mut sorted = row.clone();
                sorted.sort_by(|a, b| b.total_cmp(a));
                let nth = sorted[nprobe - 1];
                let mut seen = got.clone();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len(), nprobe, "query {qi} row {i}: repeats in {got:?}");
                for &c in got {
                    let c = c as usize;
                    assert!(c < k, "query {qi} row {i}: centroid {c}");
                    assert!(row[c] >= nth - 2.0 * slack(nth), "query {qi} row {i}: {c}");
                    probed[c] = true;
                }
                for (c, &v) in row.iter().enumerate() {
                    if v > nth + 2.0 * slack(nth) {
                        assert!(got.contains(&(c as u32)), "query {qi} row {i}: {c} missed");
                    }
                }
            }
            // Candidates and their centroid-interaction scores.
            for j in 0..docs {
                let tokens = &ids[offsets[j]..offsets[j + 1]];
                let got = s.approx[qi][j];
                if !tokens.iter().any(|&c| probed[c as usize]) {
                    assert_eq!(
                        got,
                        f32::NEG_INFINITY,
                        "query {qi} doc {j}: not a candidate"
                    );
                    continue;
                }
                let (mut want, mut tol) = (0.0, 1e-4);
                for row in &cs {
                    let best = tokens
                        .iter()
                        .map(|&c| row[c as usize])
                        .fold(f64::NEG_INFINITY, f64::max);
                    want += best;
                    tol += slack(best);
                }
                assert!(
                    (got as f64 - want).abs() <= tol,
                    "nprobe {nprobe} query {qi} doc {j}: {got} against {want} (±{tol})"
                );
            }
        }
    }
}

fn search(
    index: &Index,
    device: Device,
    how: IndexSearch,
    qs: &[Matrix<'_>],
    k: usize,
) -> Vec<Vec<Hit>> {
    let (s, notice) = index
        .searcher(device, &how, &SearchOptions::default())
        .unwrap();
    if device != Device::Cpu && !how.exhaustive {
        assert!(notice.is_none(), "{notice:?}");
        assert!(s.name().contains("every stage on"), "{}", s.name());
    }
    s.search(qs, k).unwrap()
}

/// The same scores, best first (ties may order documents differently), within what the fused
/// kernels' f16 centroid scores allow: one query against a candidate list and a batch against
/// every document run different kernels, which round ⟨q_i, centroid⟩ (at most ‖q_i‖, the
/// centroids being unit vectors) to f16 at different places.
fn assert_same_scores(label: &str, qs: &[Matrix<'_>], a: &[Vec<Hit>], b: &[Vec<Hit>]) {
    assert_eq!(a.len(), b.len());
    for (q, (a, b)) in a.iter().zip(b).enumerate() {
        let v = qs[q].to_f32_vec();
        let norms: f64 = v
            .chunks(qs[q].dim())
            .map(|r| r.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt())
            .sum();
        assert_eq!(a.len(), b.len(), "{label}, query {q}");
        for (x, y) in a.iter().zip(b) {
            let tol = norms * 2f64.powi(-10) + 1e-4 * y.score.abs() as f64;
            assert!(
                ((x.score - y.score).abs() as f64) <= tol,
                "{label}, query {q}: {x:?} against {y:?} (±{tol})"
            );
        }
    }
}

#[test]
fn every_centroid_probed_equals_exhaustive_search() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (docs, dim, k) = (300, 128, 32);
    let index = index(dir.path(), docs, dim, k);
    let owned = queries(5, dim);
    let qs = matrices(&owned, dim);
    for rerank in [Some(0), Some(40)] {
        let all = IndexSearch {
            nprobe: Some(k),
            ndocs: Some(docs),
            rerank_k: rerank,
            ..Default::default()
        };
        let exhaustive = IndexSearch {
            exhaustive: true,
            rerank_k: rerank,
            ..Default::default()
        };
        for top in [1, 10, docs] {
            let a = search(&index, Device::Cuda(0), all, &qs, top);
            let b = search(&index, Device::Cuda(0), exhaustive, &qs, top);
            assert_same_scores(&format!("rerank {rerank:?}, k = {top}"), &qs, &a, &b);
            if top == docs {
                for (x, y) in a.iter().zip(&b) {
                    let mut dx: Vec<usize> = x.iter().map(|h| h.doc).collect();
                    let mut dy: Vec<usize> = y.iter().map(|h| h.doc).collect();
                    dx.sort_unstable();
                    dy.sort_unstable();
                    assert_eq!(dx, dy);
                }
            }
        }
    }
}

#[test]
fn fewer_probes_agree_with_the_cpu_stages() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (docs, dim) = (500, 64);
    let index = index(dir.path(), docs, dim, 64);
    let owned = queries(9, dim);
    let qs = matrices(&owned, dim);
    let how = IndexSearch {
        nprobe: Some(4),
        ndocs: Some(60),
        rerank_k: Some(0),
        ..Default::default()
    };
    let (gpu, cpu) = (
        search(&index, Device::Cuda(0), how, &qs, 10),
        search(&index, Device::Cpu, how, &qs, 10),
    );
    let (mut shared, mut total) = (0, 0);
    for (g, c) in gpu.iter().zip(&cpu) {
        assert_eq!(g.len(), c.len());
        assert!(g.windows(2).all(|w| w[0].score >= w[1].score));
        for h in g {
            total += 1;
            if let Some(x) = c.iter().find(|x| x.doc == h.doc) {
                shared += 1;
                assert!(
                    (x.score - h.score).abs() <= 2e-2 * (1.0 + x.score.abs()),
                    "{h:?} {x:?}"
                );
            }
        }
    }
    assert!(
        shared * 10 >= total * 9,
        "{shared} of {total} hits shared with the CPU's"
    );
}

#[test]
fn bad_input_and_probes_over_the_limit() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (docs, dim, k) = (200, 32, 128);
    let index = index(dir.path(), docs, dim, k);
    let owned = queries(2, dim);
    let qs = matrices(&owned, dim);
    let s = ivf_gpu(&index, 4, 20);
    use tilemaxsim::Searcher;
    assert!(s.search(&qs, 0).is_err());
    let wrong = queries(2, dim + 1);
    assert!(s.search(&matrices(&wrong, dim + 1), 10).is_err());
    assert!(s.search(&[], 10).is_err());
    let nan = OwnedElements::from_f32(&vec![f32::NAN; dim], DType::F32);
    assert!(
        s.search(&matrices(std::slice::from_ref(&nan), dim), 10)
            .is_err()
    );
    let hits = s.search(&qs, docs + 5).unwrap();
    assert!(hits.iter().all(|h| !h.is_empty() && h.len() <= docs));
    assert!(
        GpuIvfSearch::new(
            index.codes(),
            index.ivf(),
            Probe {
                nprobe: 0,
                ndocs: 5
            },
            0,
            Residency::Auto
        )
        .is_err()
    );
    // Over the GPU's limit and below K: the CPU stages, with a notice.
    let how = IndexSearch {
        nprobe: Some(MAX_GPU_NPROBE + 1),
        ndocs: Some(20),
        rerank_k: Some(0),
        ..Default::default()
    };
    let (s, notice) = index
        .searcher(Device::Cuda(0), &how, &SearchOptions::default())
        .unwrap();
    assert!(notice.is_some_and(|n| n.contains("CPU")));
    assert_eq!(s.search(&qs, 5).unwrap().len(), qs.len());
}

#[test]
fn the_exact_stage_on_the_gpu_scores_as_the_float64_reference() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (docs, dim) = (400, 128);
    let index = index(dir.path(), docs, dim, 32);
    let exact = index.exact().expect("the index keeps the exact tokens");
    let owned = queries(13, dim);
    let qs = matrices(&owned, dim);
    for exhaustive in [false, true] {
        let how = IndexSearch {
            exhaustive,
            nprobe: (!exhaustive).then_some(4),
            ndocs: (!exhaustive).then_some(120),
            rerank_k: Some(50),
        };
        let (s, _) = index
            .searcher(Device::Cuda(0), &how, &SearchOptions::default())
            .unwrap();
        assert!(s.name().contains("exact tokens resident"), "{}", s.name());
        for (q, hits) in qs.iter().zip(s.search(&qs, 10).unwrap()) {
            assert_eq!(hits.len(), 10);
            assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
            for h in &hits {
                let want = tilemaxsim::reference::maxsim_f64(*q, exact.doc(h.doc));
                let tol = tolerance(*q, exact.doc(h.doc)) + 1e-5 * want.abs();
                assert!(
                    (h.score as f64 - want).abs() <= tol,
                    "exhaustive {exhaustive}, doc {}: {} against {want}",
                    h.doc,
                    h.score
                );
            }
        }
    }
}

#[test]
fn documents_sharded_over_gpus_score_as_one_gpu() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (docs, dim, k) = (500, 128, 32);
    let index = index(dir.path(), docs, dim, k);
    let owned = queries(17, dim);
    let qs = matrices(&owned, dim);
    // Shards on one GPU named twice or thrice, and on every GPU when there are several.
    let gpus = tilemaxsim::cuda::devices().map_or(1, |d| d.len());
    let mut layouts = vec![vec![0, 0], vec![0, 0, 0]];
    if gpus > 1 {
        layouts.push((0..gpus).collect());
    }
    // Every document's score on its codes, by one GPU: what any shard must give it.
    let all = GpuIvfSearch::new(
        index.codes(),
        index.ivf(),
        Probe {
            nprobe: k,
            ndocs: docs,
        },
        0,
        Residency::Resident,
    )
    .unwrap()
    .search(&qs, docs)
    .unwrap();
    for (nprobe, ndocs) in [(k, docs), (3, 120), (1, 30)] {
        let probe = Probe { nprobe, ndocs };
        let one = GpuIvfSearch::new(index.codes(), index.ivf(), probe, 0, Residency::Resident)
            .unwrap()
            .search(&qs, 10)
            .unwrap();
        for devices in &layouts {
            let label = format!("nprobe {nprobe}, ndocs {ndocs}, devices {devices:?}");
            let s = ShardedIvfSearch::new(index.codes(), probe, devices, Residency::Auto).unwrap();
            assert_eq!(s.shards().len(), devices.len(), "{label}");
            assert!(s.name().contains("documents sharded"), "{}", s.name());
            let got = s.search(&qs, 10).unwrap();
            if nprobe == k {
                // Every document rescored: exhaustive search's hits, as one GPU's.
                assert_same_scores(&label, &qs, &got, &one);
                continue;
            }
            let (mut shared, mut total) = (0, 0);
            for (q, (g, o)) in got.iter().zip(&one).enumerate() {
                assert!(g.windows(2).all(|w| w[0].score >= w[1].score), "{label}");
                // Each hit carries its own document's score on its codes.
                for h in g {
                    let want = all[q].iter().find(|x| x.doc == h.doc).expect("a document");
                    assert_same_scores(&label, &qs[q..=q], &[vec![*h]], &[vec![*want]]);
                }
                shared += g
                    .iter()
                    .filter(|h| o.iter().any(|x| x.doc == h.doc))
                    .count();
                total += o.len();
            }
            // Candidates shared out over the shards find most of what one GPU finds.
            assert!(
                shared * 10 >= total * 6,
                "{label}: {shared} of one GPU's {total} hits"
            );
        }
    }
    // Through the index: --devices shards the IVF search; bad input is refused.
    let how = IndexSearch {
        nprobe: Some(4),
        ndocs: Some(60),
        rerank_k: Some(0),
        ..Default::default()
    };
    let options = SearchOptions {
        devices: vec![0, 0],
        ..Default::default()
    };
    let (s, notice) = index.searcher(Device::Cuda(0), &how, &options).unwrap();
    assert!(notice.is_none(), "{notice:?}");
    assert!(s.name().contains("documents sharded"), "{}", s.name());
    assert!(s.search(&qs, 0).is_err());
    let wrong = OwnedElements::from_f32(&vec![0.1; dim + 1], DType::F32);
    assert!(
        s.search(&matrices(std::slice::from_ref(&wrong), dim + 1), 5)
            .is_err()
    );
    assert!(
        ShardedIvfSearch::new(
            index.codes(),
            Probe {
                nprobe: 4,
                ndocs: 10
            },
            &[],
            Residency::Auto
        )
        .is_err()
    );
}

#[test]
fn streamed_codes_give_the_resident_hits() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (docs, dim, k) = (500, 128, 32);
    let index = index(dir.path(), docs, dim, k);
    let owned = queries(23, dim);
    let qs = matrices(&owned, dim);
    let open = |probe, residency| {
        GpuIvfSearch::new(index.codes(), index.ivf(), probe, 0, residency).unwrap()
    };
    // Every document's score on its codes (resident): what a streamed search must give it.
    let every = Probe {
        nprobe: k,
        ndocs: docs,
    };
    let all = open(every, Residency::Resident).search(&qs, docs).unwrap();
    for (nprobe, ndocs) in [(k, docs), (3, 120), (1, 30), (2, 1)] {
        let probe = Probe { nprobe, ndocs };
        let label = format!("nprobe {nprobe}, ndocs {ndocs}");
        let resident = open(probe, Residency::Resident);
        let streamed = open(probe, Residency::Stream);
        assert!(!resident.streamed() && streamed.streamed(), "{label}");
        assert!(streamed.name().contains("streamed"), "{}", streamed.name());
        // The first stages read the same centroid ids either way.
        assert_eq!(
            streamed.first_stages(&qs).unwrap(),
            resident.first_stages(&qs).unwrap(),
            "{label}"
        );
        for top in [1, 10] {
            let (a, b) = (
                streamed.search(&qs, top).unwrap(),
                resident.search(&qs, top).unwrap(),
            );
            assert_same_scores(&format!("{label}, k = {top}"), &qs, &a, &b);
            for (q, hits) in a.iter().enumerate() {
                for h in hits {
                    let want = all[q].iter().find(|x| x.doc == h.doc).expect("a document");
                    assert_same_scores(&label, &qs[q..=q], &[vec![*h]], &[vec![*want]]);
                }
            }
        }
    }
    // Sharded, each shard streamed (over every GPU when there are several, else one GPU named
    // twice): every centroid probed gives one resident GPU's hits.
    let gpus = tilemaxsim::cuda::devices().map_or(1, |d| d.len());
    let devices: Vec<usize> = if gpus > 1 {
        (0..gpus).collect()
    } else {
        vec![0, 0]
    };
    let sharded = ShardedIvfSearch::new(index.codes(), every, &devices, Residency::Stream).unwrap();
    let one = open(every, Residency::Resident).search(&qs, 10).unwrap();
    assert_same_scores(
        "sharded, streamed",
        &qs,
        &sharded.search(&qs, 10).unwrap(),
        &one,
    );
    // Through the index, with the exact stage.
    let how = IndexSearch {
        nprobe: Some(4),
        ndocs: Some(60),
        rerank_k: Some(20),
        ..Default::default()
    };
    let searcher = |residency| {
        let options = SearchOptions {
            residency,
            ..Default::default()
        };
        let (s, notice) = index.searcher(Device::Cuda(0), &how, &options).unwrap();
        assert!(notice.is_none(), "{notice:?}");
        s
    };
    let (st, re) = (searcher(Residency::Stream), searcher(Residency::Resident));
    assert!(st.name().contains("streamed"), "{}", st.name());
    assert!(!re.name().contains("streamed"), "{}", re.name());
    assert_same_scores(
        "through the index",
        &qs,
        &st.search(&qs, 10).unwrap(),
        &re.search(&qs, 10).unwrap(),
    );
}

//! The GPU's search side on the device (bench/gpu_check.sh runs it there): the device top-k
//! against the host selection, and `GpuIndex` resident, streamed and sharded against itself and
//! the float64 reference. Without a usable GPU every test prints a notice and passes.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use rand::Rng;
use tilemaxsim::{DType, Matrix, OwnedElements};

/// The device top-k selects exactly what the host selection does on the same scores: random
/// scores, heavy ties, signed zeros, NaN, k of 1, 1000, n and more than n; rows long enough
/// (1.2M and 4.5M) that the candidates are merged by groups first, in one step and in two.
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
        1usize, 2, 5, 1000, 1023, 1025, 8191, 8192, 8193, 20_000, 100_003, 300_000, 1_200_007,
        4_500_001,
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
        for k in [1usize, 7, 100, 1000, 4096, 9000, n] {
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
    // f32 at d = 64: resident shards on the planes an upload makes (sm_90), streamed chunks split
    // in the kernel; both give the same bits. d = 77 and f32 at 33 are stored padded (to 80 and
    // 64) on sm_90: resident shards by the upload, streamed chunks as they are copied in.
    let cases = [
        (128usize, DType::F16),
        (96, DType::BF16),
        (77, DType::F16),
        (33, DType::F32),
        (64, DType::F32),
    ];
    for (dim, dtype) in cases {
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
                rerank: None,
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

//! k-means on the CPU, as PLAID trains it: centroids seeded with distinct points drawn from the
//! sample, then Lloyd iterations; seeded and deterministic (the same points, k, seed and
//! iteration count give the same centroids on any thread count).
//! Distances come from blocked SGEMM (`matrixmultiply`) spread over rayon; the residual
//! codec's coarse centroids and product quantization's sub-space codebooks both use it.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::Progress;

/// Rows of points scored against the centroids per SGEMM call (a `BLOCK × k` f32 block).
const BLOCK: usize = 256;

/// `out[i] = Σ_k a[i,k] b[j,k]` for `a` `[m, d]` and `b` `[n, d]` row-major: `out` `[m, n]`.
pub(crate) fn dots(a: &[f32], b: &[f32], d: usize, out: &mut [f32]) {
    let (m, n) = (a.len() / d, b.len() / d);
    debug_assert_eq!(out.len(), m * n);
    // SAFETY: the pointers and strides describe `a` (m × d, row stride d), `b` read as its
    // transpose (d × n: element (k, j) at j·d + k) and `out` (m × n, row stride n), all in
    // bounds; `out` does not alias the inputs (it is a distinct &mut).
    unsafe {
        matrixmultiply::sgemm(
            m,
            d,
            n,
            1.0,
            a.as_ptr(),
            d as isize,
            1,
            b.as_ptr(),
            1,
            d as isize,
            0.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// For each point, the index of the centroid maximizing `⟨x, c⟩ + bias[c]` (ties to the lower
/// index). With `bias = -|c|²/2` that is the nearest centroid; with zeros, the largest dot
/// product (PLAID's assignment).
pub(crate) fn assign(points: &[f32], centroids: &[f32], bias: &[f32], d: usize) -> Vec<u32> {
    let k = centroids.len() / d;
    let mut out = vec![0u32; points.len() / d];
    out.par_chunks_mut(BLOCK)
        .zip(points.par_chunks(BLOCK * d))
        .for_each_init(Vec::new, |buf: &mut Vec<f32>, (ids, block)| {
            buf.resize(ids.len() * k, 0.0);
            dots(block, centroids, d, buf);
            for (id, row) in ids.iter_mut().zip(buf.chunks_exact(k)) {
                let mut best = (f32::NEG_INFINITY, 0usize);
                for (c, (&s, &b)) in row.iter().zip(bias).enumerate() {
                    let v = s + b;
                    if v > best.0 {
                        best = (v, c);
                    }
                }
                *id = best.1 as u32;
            }
        });
    out
}

/// Squared distance, in 8 independent lanes so the compiler vectorizes it.
fn sq_dist(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            let t = x[i] - y[i];
            acc[i] += t * t;
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| (x - y) * (x - y)).sum();
    acc.iter().sum::<f32>() + tail
}

/// `-|c|²/2` per centroid: the bias that turns a dot product into a nearest-centroid rule.
pub(crate) fn half_neg_norms(centroids: &[f32], d: usize) -> Vec<f32> {
    centroids
        .chunks_exact(d)
        .map(|c| -0.5 * c.iter().map(|x| x * x).sum::<f32>())
        .collect()
}

/// Points per block of the k-means++ passes: partial sums per fixed block keep the draw
/// independent of the thread count.
const SEED_BLOCK: usize = 4096;

/// k-means++ seeding: the first centroid uniformly at random, each next one with probability
/// proportional to its squared distance to the nearest centroid chosen so far. Each step is
/// one parallel pass (distances updated, block sums in f64) and a walk over the block sums;
/// `progress(SEEDING, chosen, k)` follows the steps (k passes: the long part for large k).
fn kmeans_pp(
    points: &[f32],
    d: usize,
    k: usize,
    rng: &mut StdRng,
    progress: Progress<'_>,
) -> Vec<f32> {
    let n = points.len() / d;
    let mut centroids = Vec::with_capacity(k * d);
    let first = rng.random_range(0..n);
    centroids.extend_from_slice(&points[first * d..(first + 1) * d]);
    let mut dist = vec![f32::INFINITY; n];
    let mut sums = vec![0f64; n.div_ceil(SEED_BLOCK)];
    let mut newest = centroids.clone();
    progress(SEEDING, 1, k);
    while {
        dist.par_chunks_mut(SEED_BLOCK)
            .zip(points.par_chunks(SEED_BLOCK * d))
            .zip(sums.par_iter_mut())
            .for_each(|((m, p), s)| {
                let mut t = 0f64;
                for (m, p) in m.iter_mut().zip(p.chunks_exact(d)) {
                    *m = m.min(sq_dist(p, &newest));
                    t += f64::from(*m);
                }
                *s = t;
            });
        centroids.len() < k * d
    } {
        let total: f64 = sums.iter().sum();
        let pick = if total > 0.0 {
            let mut target = rng.random::<f64>() * total;
            let mut pick = n - 1;
            'find: for (b, &s) in sums.iter().enumerate() {
                if target < s {
                    let end = ((b + 1) * SEED_BLOCK).min(n);
                    // The last point of the block unless rounding left the walk short of it.
                    pick = end - 1;
                    for (i, &x) in dist[b * SEED_BLOCK..end].iter().enumerate() {
                        target -= f64::from(x);
                        if target < 0.0 {
                            pick = b * SEED_BLOCK + i;
                            break;
                        }
                    }
                    break 'find;
                }
                target -= s;
            }
            pick
        } else {
            // Every point coincides with a centroid: any point will do.
            rng.random_range(0..n)
        };
        newest = points[pick * d..(pick + 1) * d].to_vec();
        centroids.extend_from_slice(&newest);
        progress(SEEDING, centroids.len() / d, k);
    }
    centroids
}

/// PLAID's seeding (faiss's and fastkmeans' default, which colbert-ai and fast-plaid train
/// with): `k` distinct points drawn uniformly from the sample, seeded. One draw, no pass over the
/// points: k-means++ (a pass per centroid) took 100 s of Cranfield's 130 s residual compression
/// at K = 4096 on two cores.
fn random_init(points: &[f32], d: usize, k: usize, rng: &mut StdRng) -> Vec<f32> {
    let n = points.len() / d;
    let mut centroids = Vec::with_capacity(k * d);
    for i in random_rows(n, k, rng) {
        centroids.extend_from_slice(&points[i * d..(i + 1) * d]);
    }
    centroids
}

/// The `k.min(n)` distinct rows of `n` that [`Seeding::Random`] takes, in draw order.
fn random_rows(n: usize, k: usize, rng: &mut StdRng) -> Vec<usize> {
    rand::seq::index::sample(rng, n, k.min(n)).into_vec()
}

/// The sample rows `kmeans(…, k, …, seed, Seeding::Random, …)` starts from (the GPU's k-means
/// starts from the same ones): `k` centroids, the rows drawn, then row 0 for each centroid past
/// the `n` points.
#[cfg(feature = "cuda")]
pub(crate) fn random_start(n: usize, k: usize, seed: u64) -> Vec<usize> {
    let mut rows = random_rows(n, k, &mut StdRng::seed_from_u64(seed));
    rows.resize(k, 0);
    rows
}

/// The stage names `kmeans` reports.
pub(crate) const SEEDING: &str = "k-means++ seeding";
pub(crate) const LLOYD: &str = "k-means iterations";

/// How `kmeans` seeds its centroids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seeding {
    /// `k` distinct points drawn at random: PLAID's (colbert-ai's faiss, fast-plaid's
    /// fastkmeans), one draw; what the residual codec's thousands of centroids need.
    Random,
    /// k-means++: a pass over the points per centroid, better placed; cheap for PQ's 256
    /// centroids of a few dimensions each.
    PlusPlus,
}

/// `k` centroids (`[k, d]` row-major) of `points` (`[n, d]`, `n ≥ 1`): seeded as `seeding` says,
/// then `iters` Lloyd iterations. When `k > n` the extra centroids repeat point 0. A cluster left
/// empty keeps its previous centroid. `progress` follows the seeding steps (k-means++), then the
/// iterations.
pub(crate) fn kmeans(
    points: &[f32],
    d: usize,
    k: usize,
    iters: usize,
    seed: u64,
    seeding: Seeding,
    progress: Progress<'_>,
) -> Vec<f32> {
    let n = points.len() / d;
    let mut rng = StdRng::seed_from_u64(seed);
    let seeded = k.min(n);
    let mut centroids = match seeding {
        Seeding::Random => random_init(points, d, seeded, &mut rng),
        Seeding::PlusPlus => kmeans_pp(points, d, seeded, &mut rng, progress),
    };
    for _ in seeded..k {
        centroids.extend_from_slice(&points[..d]);
    }
    progress(LLOYD, 0, iters);
    for it in 0..iters {
        let bias = half_neg_norms(&centroids, d);
        let ids = assign(points, &centroids, &bias, d);
        // Sums per cluster in f64, in point order (deterministic).
        let mut sums = vec![0f64; k * d];
        let mut counts = vec![0usize; k];
        for (p, &c) in points.chunks_exact(d).zip(&ids) {
            let c = c as usize;
            counts[c] += 1;
            for (s, &x) in sums[c * d..(c + 1) * d].iter_mut().zip(p) {
                *s += f64::from(x);
            }
        }
        for c in 0..k {
            if counts[c] > 0 {
                for (dst, &s) in centroids[c * d..(c + 1) * d]
                    .iter_mut()
                    .zip(&sums[c * d..(c + 1) * d])
                {
                    *dst = (s / counts[c] as f64) as f32;
                }
            }
        }
        progress(LLOYD, it + 1, iters);
    }
    centroids
}

/// A seeded sample of `count` distinct indices of `0..n` (all of them, in order, when
/// `count >= n`), sorted.
pub(crate) fn sample_indices(n: usize, count: usize, seed: u64) -> Vec<usize> {
    if count >= n {
        return (0..n).collect();
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut picked = rand::seq::index::sample(&mut rng, n, count).into_vec();
    picked.sort_unstable();
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lloyd_reaches_a_fixed_point_and_is_deterministic() {
        // Points around three centers in d = 3; the seeding draws 6 of them.
        let centers = [[5.0f32, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]];
        let mut pts = Vec::new();
        for i in 0..90 {
            let c = centers[i % 3];
            let jitter = (i as f32 * 0.37).sin() * 0.1;
            pts.extend([c[0] + jitter, c[1] - jitter, c[2] + jitter * 0.5]);
        }
        let a = kmeans(&pts, 3, 6, 20, 7, Seeding::Random, &|_, _, _| {});
        let b = kmeans(&pts, 3, 6, 20, 7, Seeding::Random, &|_, _, _| {});
        assert_eq!(a, b);
        assert_ne!(
            a,
            kmeans(&pts, 3, 6, 20, 8, Seeding::Random, &|_, _, _| {}),
            "another seed, another draw"
        );
        // Every centroid is the mean of the points nearest it (Lloyd's fixed point).
        let ids = assign(&pts, &a, &half_neg_norms(&a, 3), 3);
        for (c, centroid) in a.chunks_exact(3).enumerate() {
            let members: Vec<&[f32]> = pts
                .chunks_exact(3)
                .zip(&ids)
                .filter(|(_, i)| **i as usize == c)
                .map(|(p, _)| p)
                .collect();
            for k in 0..3 {
                if !members.is_empty() {
                    let mean = members.iter().map(|p| p[k]).sum::<f32>() / members.len() as f32;
                    assert!(
                        (mean - centroid[k]).abs() < 1e-4,
                        "centroid {c}: {centroid:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn plus_plus_separates_clear_clusters() {
        let centers = [[5.0f32, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]];
        let mut pts = Vec::new();
        for i in 0..90 {
            let c = centers[i % 3];
            let jitter = (i as f32 * 0.37).sin() * 0.1;
            pts.extend([c[0] + jitter, c[1] - jitter, c[2] + jitter * 0.5]);
        }
        let a = kmeans(&pts, 3, 3, 10, 7, Seeding::PlusPlus, &|_, _, _| {});
        assert_eq!(
            a,
            kmeans(&pts, 3, 3, 10, 7, Seeding::PlusPlus, &|_, _, _| {})
        );
        for c in centers {
            let near = a.chunks_exact(3).any(|x| sq_dist(x, &c) < 0.05);
            assert!(near, "no centroid near {c:?}: {a:?}");
        }
    }

    #[test]
    fn progress_follows_the_iterations() {
        let pts: Vec<f32> = (0..200).map(|i| (i as f32 * 0.7).sin()).collect();
        let seen = std::sync::Mutex::new(Vec::new());
        kmeans(&pts, 2, 9, 3, 0, Seeding::Random, &|stage, done, total| {
            seen.lock().unwrap().push((stage.to_string(), done, total));
        });
        let seen = seen.into_inner().unwrap();
        let want: Vec<_> = (0..=3).map(|i| (LLOYD.to_string(), i, 3)).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn more_centroids_than_points() {
        let pts = [1.0f32, 2.0, 3.0, 4.0];
        let c = kmeans(&pts, 2, 5, 3, 1, Seeding::Random, &|_, _, _| {});
        assert_eq!(c.len(), 10);
        let ids = assign(&pts, &c, &half_neg_norms(&c, 2), 2);
        assert_eq!(ids.len(), 2);
        assert_ne!(ids[0], ids[1]);
    }
}

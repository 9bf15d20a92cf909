//! Tests of the residual codec (`residual.rs`): buckets, training samples, encoding.

use super::*;

/// `n` standard normal values (Box–Muller, seeded), sorted.
fn normal_sorted(n: usize, seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
        })
        .collect();
    v.sort_unstable_by(f32::total_cmp);
    v
}

/// Mean squared error of quantizing `values` with (cutoffs, weights), in float64.
fn mse(values: &[f32], cutoffs: &[f32], weights: &[f32]) -> f64 {
    let err: f64 = values
        .iter()
        .map(|&v| {
            let b = cutoffs.iter().filter(|&&c| c < v).count();
            (f64::from(v) - f64::from(weights[b])).powi(2)
        })
        .sum();
    err / values.len() as f64
}

#[test]
fn quantile_buckets_are_torch_quantiles() {
    let v: Vec<f32> = (0..10).map(|i| i as f32).collect();
    let (c, w) = fit_buckets(&v, 4, Buckets::Quantiles);
    assert_eq!(c, vec![2.25, 4.5, 6.75]);
    assert_eq!(w, vec![1.125, 3.375, 5.625, 7.875]);
}

#[test]
fn lloyd_max_buckets_are_their_means_and_cut_midway() {
    for buckets in [2usize, 4, 16] {
        let v = normal_sorted(200_000, buckets as u64);
        let (c, w) = fit_buckets(&v, buckets, Buckets::LloydMax);
        // The fixed point: each weight the float64 mean of its bucket's values (a value in
        // bucket b when b cutoffs lie strictly below it), each cutoff midway.
        for (b, &wb) in w.iter().enumerate() {
            let members: Vec<f64> = v
                .iter()
                .filter(|&&x| c.iter().filter(|&&k| k < x).count() == b)
                .map(|&x| f64::from(x))
                .collect();
            assert!(
                !members.is_empty(),
                "{buckets} buckets: bucket {b} is empty"
            );
            let mean = members.iter().sum::<f64>() / members.len() as f64;
            assert!(
                (f64::from(wb) - mean).abs() < 1e-4,
                "{buckets}: {wb} vs {mean}"
            );
        }
        for (i, &ci) in c.iter().enumerate() {
            let mid = (w[i] + w[i + 1]) / 2.0;
            assert!((ci - mid).abs() < 1e-4, "{buckets}: cutoff {ci} vs {mid}");
            assert!(
                w[i] < ci && ci < w[i + 1],
                "{buckets}: not ordered: {c:?} {w:?}"
            );
        }
        let (qc, qw) = fit_buckets(&v, buckets, Buckets::Quantiles);
        let (lm, q) = (mse(&v, &c, &w), mse(&v, &qc, &qw));
        assert!(
            lm < q,
            "{buckets} buckets: Lloyd-Max {lm} not below quantiles {q}"
        );
        if buckets == 4 {
            // Max's 4-level quantizer of a unit normal: cutoffs 0, ±0.9816; levels ±0.4528,
            // ±1.510; error 0.1175 (the quantiles': 0.147).
            let want = [-1.510f32, -0.4528, 0.4528, 1.510];
            for (got, want) in w.iter().zip(want) {
                assert!((got - want).abs() < 0.02, "{w:?}");
            }
            assert!((c[2] - 0.9816).abs() < 0.02 && c[1].abs() < 0.02, "{c:?}");
            assert!(
                (lm - 0.1175).abs() < 0.003 && (q - 0.147).abs() < 0.005,
                "{lm} {q}"
            );
        }
    }
}

#[test]
fn lloyd_max_of_equal_residuals_stays_finite() {
    for v in [vec![0f32; 1000], vec![0.25f32; 3], vec![-1.0, -1.0, 2.0]] {
        let (c, w) = fit_buckets(&v, 4, Buckets::LloydMax);
        assert!(c.iter().chain(&w).all(|x| x.is_finite()), "{c:?} {w:?}");
        assert!(c.windows(2).all(|p| p[0] <= p[1]), "{c:?}");
    }
}

#[test]
fn bucket_bits_follow_packbits_order() {
    // nbits = 2: dimension 0's bucket 0b01 puts bit 0 (=1) at stream bit 0, the MSB.
    assert_eq!(bucket_of(0b1000_0000, 0, 2), 1);
    assert_eq!(bucket_of(0b0100_0000, 0, 2), 2);
    assert_eq!(bucket_of(0b0000_0010, 3, 2), 1);
    assert_eq!(bucket_of(0b0001_0000, 0, 4), 8);
    assert_eq!(bucket_of(0b0000_0001, 7, 1), 1);
}

#[test]
fn encode_then_decode_picks_the_bucket_weights() {
    let c = vec![f16::from_f32(0.0); 3];
    let codec =
        ResidualCodec::new(2, 3, c, vec![-0.1, 0.0, 0.1], vec![-0.2, -0.05, 0.05, 0.2]).unwrap();
    let mut packed = [0u8; 1];
    codec.encode_residual(&[0.5, -0.5, 0.01], 0, &mut packed);
    let mut out = [0f32; 3];
    codec.decode_token(0, &packed, &mut out);
    let raw = [0.2f32, -0.2, 0.05];
    let n = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
    for (o, r) in out.iter().zip(raw) {
        assert!((o - r / n).abs() < 1e-7, "{out:?}");
    }
}

#[test]
fn sums_of_squares_match_f64_at_every_length() {
    for n in [0usize, 1, 3, 7, 8, 9, 16, 77, 128, 129] {
        let x: Vec<f32> = (0..n).map(|i| ((i * 37 % 19) as f32 - 9.0) / 7.0).collect();
        let exact: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
        let got = sum_of_squares(&x) as f64;
        assert!(
            (got - exact).abs() <= 1e-6 * exact.max(1.0),
            "n = {n}: {got} vs {exact}"
        );
    }
}

#[test]
fn plaid_centroid_count() {
    // 16·√217823 ≈ 7467 → 4096.
    assert_eq!(plaid_num_centroids(217_823), 4096);
    assert_eq!(plaid_num_centroids(1), 16);
}

#[test]
fn k_means_draws_from_plaids_sample_of_documents() {
    // colbert-ai / fast-plaid: 1 + 16·√(120·N) documents; all of them up to 30,720.
    assert_eq!(plaid_sample_docs(30_720), 30_720);
    assert_eq!(plaid_sample_docs(30_721), 30_721);
    assert_eq!(plaid_sample_docs(1_000_000), 175_272);
    let opts = ResidualOptions {
        centroids: Some(64),
        max_points_per_centroid: 1 << 20,
        ..ResidualOptions::default()
    };
    let doc_of = |offsets: &[usize], i: usize| offsets.partition_point(|&o| o <= i) - 1;
    // 100,000 documents of 3 tokens: k-means draws from 55,426 of them.
    let big: Vec<usize> = (0..=100_000).map(|j| 3 * j).collect();
    let plan = TrainingPlan::new(&big, &opts, 7).unwrap();
    let docs: std::collections::BTreeSet<usize> =
        plan.sample.iter().map(|&i| doc_of(&big, i)).collect();
    // (A sampled document whose three tokens are all held out adds none.)
    assert_eq!(plaid_sample_docs(100_000), 55_426);
    assert!((55_300..=55_426).contains(&docs.len()), "{}", docs.len());
    let held: std::collections::HashSet<usize> = plan.heldout.iter().copied().collect();
    assert!(plan.sample.iter().all(|i| !held.contains(i)));
    assert_eq!(plan.heldout.len(), 15_000, "5% of the 300,000 tokens");
    // Same seed, same plan; a small corpus draws from every document, as before.
    assert_eq!(
        TrainingPlan::new(&big, &opts, 7).unwrap().sample,
        plan.sample
    );
    let small: Vec<usize> = (0..=1_000).map(|j| 5 * j).collect();
    let plan = TrainingPlan::new(&small, &opts, 7).unwrap();
    assert_eq!(plan.sample.len() + plan.heldout.len(), 5_000);
}

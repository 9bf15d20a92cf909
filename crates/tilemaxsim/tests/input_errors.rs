//! Bad scorer input is a clear error for every scorer, never a panic and never a silent
//! wrong answer.

mod common;

use common::all_scorers;
use tilemaxsim::{Corpus, Docs, Error, Matrix};

#[test]
fn every_scorer_rejects_bad_input() {
    let corpus = Corpus::from_lengths(vec![0.5f32; 4 * 3], 4, &[1, 2]).unwrap();
    let q4 = [0.1f32; 8];
    let q3 = [0.1f32; 6];
    let empty: [f32; 0] = [];
    let mut nan = [0.1f32; 8];
    nan[6] = f32::NAN;
    let mut inf = [0.1f32; 8];
    inf[1] = f32::INFINITY;
    let good = Matrix::new(&q4[..], 4).unwrap();
    for s in all_scorers() {
        let name = s.name();
        assert!(
            matches!(
                s.score(Matrix::new(&q3[..], 3).unwrap(), &corpus),
                Err(Error::DimMismatch {
                    expected: 4,
                    got: 3,
                    ..
                })
            ),
            "{name}"
        );
        assert!(
            matches!(
                s.score(Matrix::new(&empty[..], 4).unwrap(), &corpus),
                Err(Error::EmptyQuery { index: 0 })
            ),
            "{name}"
        );
        assert!(
            matches!(
                s.score_batch(&[good, Matrix::new(&empty[..], 4).unwrap()], &corpus),
                Err(Error::EmptyQuery { index: 1 })
            ),
            "{name}"
        );
        assert!(
            matches!(s.score_batch(&[], &corpus), Err(Error::Argument(_))),
            "{name}"
        );
        assert!(
            matches!(
                s.score(Matrix::new(&nan[..], 4).unwrap(), &corpus),
                Err(Error::NonFinite { row: 1, col: 2, .. })
            ),
            "{name}"
        );
        assert!(
            matches!(
                s.score(Matrix::new(&inf[..], 4).unwrap(), &corpus),
                Err(Error::NonFinite { row: 0, col: 1, .. })
            ),
            "{name}"
        );
        assert!(
            matches!(
                s.score_subset(good, &corpus, &[0, 2]),
                Err(Error::DocIndex { index: 2, len: 2 })
            ),
            "{name}"
        );
        assert!(
            matches!(s.top_k(good, &corpus, 0), Err(Error::Argument(_))),
            "{name}"
        );
        assert!(
            matches!(
                s.top_k_subset(good, &corpus, &[5], 1),
                Err(Error::DocIndex { .. })
            ),
            "{name}"
        );
        let mut out = vec![0.0f32; 3];
        assert!(
            matches!(
                s.score_into(&[good], &corpus, Docs::All, &mut out),
                Err(Error::Argument(_))
            ),
            "{name}: wrong output length"
        );
        let mut out = vec![0.0f32; 1];
        assert!(
            matches!(
                s.score_into(&[good], &corpus, Docs::Range(1..3), &mut out),
                Err(Error::DocIndex { .. })
            ),
            "{name}"
        );
        // The good query still works after all that, and k beyond N returns all N.
        assert_eq!(s.top_k(good, &corpus, 10).unwrap().len(), 2, "{name}");
        assert!(
            s.score_subset(good, &corpus, &[]).unwrap().is_empty(),
            "{name}: empty candidate list"
        );
    }
}

#[test]
fn matrix_shapes() {
    let v = [0.0f32; 6];
    assert!(matches!(Matrix::new(&v[..], 0), Err(Error::Shape(_))));
    assert!(matches!(Matrix::new(&v[..], 4), Err(Error::Shape(_))));
    assert_eq!(Matrix::new(&v[..], 3).unwrap().rows(), 2);
    assert!("f64".parse::<tilemaxsim::DType>().is_err());
    assert!("cuda:x".parse::<tilemaxsim::Device>().is_err());
    assert_eq!(
        "cuda:1".parse::<tilemaxsim::Device>().unwrap(),
        tilemaxsim::Device::Cuda(1)
    );
}

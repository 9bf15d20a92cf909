mod common;
use common::*;
use tilemaxsim::{CpuScorer, DType, Isa, Matrix, Scorer};

#[test]
fn quick_all_isas() {
    let mut r = rng(1);
    for isa in Isa::available() {
        for &dim in &[1usize, 3, 17, 128] {
            for &nq in &[1usize, 5, 16, 33] {
                let lens: Vec<usize> = (0..23).map(|i| 1 + (i * 7) % 30).collect();
                for dtype in [DType::F32, DType::F16, DType::BF16] {
                    let c = random_corpus(&mut r, &lens, dim, dtype, 1.0);
                    let q = random_query(&mut r, nq, dim, dtype, 1.0);
                    let qm = Matrix::new(q.as_elements(), dim).unwrap();
                    let s = CpuScorer::with_isa(isa).unwrap().score(qm, &c).unwrap();
                    let docs: Vec<usize> = (0..c.len()).collect();
                    assert_close(&format!("{isa} d={dim} nq={nq} {dtype}"), qm, &c, &docs, &s);
                }
            }
        }
    }
}

//! The float64 oracle: the plainest possible MaxSim, every product and sum in f64. Every fast
//! path is tested against it; it is also a `Scorer`, so the CLI can run it (`--device reference`).

use rayon::prelude::*;

use crate::codec::CodecKind;
use crate::corpus::{AnyCorpus, CorpusKind};
use crate::error::Result;
use crate::matrix::{Elements, Matrix};
use crate::scorer::{Docs, Scorer};

/// `Σ_i max_j ⟨q_i, d_j⟩` in f64.
pub fn maxsim_f64(query: Matrix<'_>, doc: Matrix<'_>) -> f64 {
    maxsim_with(query, doc, |a, b| a * b)
}

/// `Σ_i max_j Σ_k |q_ik · d_jk|` in f64: the magnitude that bounds the rounding error of any
/// f32 evaluation of the score (see the tests' tolerance).
pub fn maxsim_abs_f64(query: Matrix<'_>, doc: Matrix<'_>) -> f64 {
    maxsim_with(query, doc, |a, b| (a * b).abs())
}

fn maxsim_with(query: Matrix<'_>, doc: Matrix<'_>, mul: impl Fn(f64, f64) -> f64) -> f64 {
    let d = query.dim();
    let q: Vec<f64> = query.to_f32_vec().into_iter().map(f64::from).collect();
    let x: Vec<f64> = doc.to_f32_vec().into_iter().map(f64::from).collect();
    q.chunks_exact(d)
        .map(|qi| {
            x.chunks_exact(d)
                .map(|dj| qi.iter().zip(dj).map(|(&a, &b)| mul(a, b)).sum::<f64>())
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .sum()
}

/// The float64 reference as a `Scorer` (scores rounded to f32 at the end).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceScorer;

impl Scorer for ReferenceScorer {
    fn name(&self) -> String {
        "reference-f64".into()
    }

    /// Every codec: a compressed document is decoded, then scored in f64 (the twin of every
    /// compressed path).
    fn supports(&self, _codec: CodecKind) -> bool {
        true
    }

    fn score_into(
        &self,
        queries: &[Matrix<'_>],
        corpus: &dyn AnyCorpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        self.check(queries, corpus, &docs, out.len())?;
        let n = docs.count(corpus);
        if n == 0 {
            return Ok(());
        }
        let d = corpus.dim();
        let kind = corpus.kind();
        out.par_chunks_mut(n)
            .zip(queries.par_iter())
            .for_each(|(row, q)| {
                row.par_iter_mut()
                    .enumerate()
                    .for_each_init(Vec::new, |buf, (i, s)| {
                        let j = docs.index(i);
                        *s = match kind {
                            CorpusKind::Exact(c) => maxsim_f64(*q, c.doc(j)),
                            CorpusKind::Compressed(c) => {
                                c.decode_doc_into(j, buf);
                                let doc = Matrix::new(Elements::F32(buf), d)
                                    .expect("decoded rows are whole");
                                maxsim_f64(*q, doc)
                            }
                        } as f32;
                    });
            });
        Ok(())
    }
}

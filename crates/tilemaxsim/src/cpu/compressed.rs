//! The CPU twin of compressed scoring: each document is decoded (once, into a per-thread f32
//! buffer that stays in L1/L2) and scored by the same SIMD micro-kernel as an exact f32
//! document, for every query block. Decoded vectors never leave the worker's buffer.

use rayon::prelude::*;

use super::kernel::{PreparedQuery, Scratch};
use super::{CpuScorer, query_blocks, to_query_major};
use crate::codec::CompressedCorpus;
use crate::error::Result;
use crate::matrix::{Elements, Matrix};
use crate::scorer::{Docs, alloc_scores};

impl CpuScorer {
    pub(super) fn run_compressed(
        &self,
        queries: &[Matrix<'_>],
        corpus: &CompressedCorpus,
        docs: Docs<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        let n = docs.count_of(corpus.len());
        let nq = queries.len();
        if n == 0 {
            return Ok(());
        }
        let kernel = self.isa.kernel();
        let dim = corpus.dim();
        let prepared: Vec<PreparedQuery> = queries
            .iter()
            .map(|q| PreparedQuery::new(*q, self.isa.lanes()))
            .collect();
        let blocks = query_blocks(&prepared);
        let chunk = (n / (self.num_threads() * 16)).clamp(1, 64);
        let mut doc_major = if nq == 1 {
            Vec::new()
        } else {
            alloc_scores(n * nq)?
        };
        let target: &mut [f32] = if nq == 1 { out } else { &mut doc_major };
        self.install(|| {
            target.par_chunks_mut(chunk * nq).enumerate().for_each_init(
                || (Scratch::default(), Vec::<f32>::new()),
                |(scratch, buf), (c, part)| {
                    for (t, row) in part.chunks_exact_mut(nq).enumerate() {
                        corpus.decode_doc_into(docs.index(c * chunk + t), buf);
                        for block in &blocks {
                            // SAFETY: `kernel` belongs to a flavour this CPU supports (checked
                            // when the scorer was made); the decoded document has ≥ 1 whole row
                            // of d values (corpus invariant); every query was prepared for this
                            // flavour's lanes and has the corpus's d (checked by the caller).
                            unsafe {
                                kernel(
                                    &prepared[block.clone()],
                                    Elements::F32(buf),
                                    &[],
                                    dim,
                                    scratch,
                                    &mut row[block.clone()],
                                )
                            };
                        }
                    }
                },
            );
        });
        if nq > 1 {
            to_query_major(&doc_major, nq, n, out);
        }
        Ok(())
    }
}

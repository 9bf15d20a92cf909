//! [`CudaScorer`] as a [`Scorer`] of corpora held on the host, exact or compressed: each call
//! uploads the corpus and the queries, scores into a NaN-poisoned buffer, and downloads.

use super::*;

impl Scorer for CudaScorer {
    fn name(&self) -> String {
        let info = &self.gpu.info;
        format!(
            "cuda:{}-{}",
            info.ordinal,
            arch_name(info.compute_capability.0, info.compute_capability.1)
        )
    }

    /// Every codec: exact corpora, and compressed ones through the fused kernels of
    /// kernels/codec.cu (or, at a d none is built for, decoded on the device at upload).
    fn supports(&self, _codec: CodecKind) -> bool {
        true
    }

    /// Each call uploads the corpus it is given.
    fn scores_in_place(&self) -> bool {
        false
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
        let stream = &self.gpu.stream;
        let di = match docs {
            Docs::All => None,
            _ => {
                let index: Vec<i64> = (0..n).map(|i| docs.index(i) as i64).collect();
                Some(stream.clone_htod(&index).map_err(drv("candidate upload"))?)
            }
        };
        let mut scores = self.alloc_scores(out.len())?;
        // Poisoned with NaN (all bits set) first: a score the kernel fails to write cannot pass
        // for a result left in recycled memory by an earlier call (the tests rely on it; the
        // cost is one write of Q × N floats beside the corpus upload this path makes anyway).
        {
            let (p, _g) = scores.device_ptr(stream);
            // SAFETY: `p` holds at least out.len() f32 on this scorer's stream.
            unsafe {
                cudarc::driver::result::memset_d8_async(p, 0xff, out.len() * 4, stream.cu_stream())
            }
            .map_err(drv("poisoning the score buffer"))?;
        }
        match corpus.kind() {
            CorpusKind::Exact(corpus) => {
                let dc = self.upload(corpus)?;
                let dq = self.upload_queries(queries, corpus.dim())?;
                self.score_device(&dq, &dc, di.as_ref(), &mut scores)?;
            }
            CorpusKind::Compressed(corpus) => {
                let dc = self.upload_codes(corpus, 0..corpus.len())?;
                let dq = self.upload_codec_queries(queries, &dc)?;
                self.score_codes_device(&dq, &dc, di.as_ref(), &mut scores)?;
            }
        }
        self.download(&scores, out)
    }
}

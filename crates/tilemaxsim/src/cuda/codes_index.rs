//! [`GpuCodesIndex`]: search over a compressed corpus held on one or more GPUs: the documents
//! split into contiguous shards of about equal tokens, one per GPU, each shard's codes
//! resident in its GPU's memory and scored by the fused kernels; each shard's top-k selected
//! on its device, the shards' merged on the host. Streaming codes from host memory is not
//! built: a compressed corpus that does not fit is an error that says so.

use std::ops::Range;
use std::sync::Mutex;

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use super::codes::DeviceCodes;
use super::index::{spawn_shards, split_by_tokens};
use super::memory::grow;
use super::scorer::CudaScorer;
use crate::codec::CompressedCorpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::{Scorer, check_queries};
use crate::search::{Residency, SearchOptions, Searcher};
use crate::topk::{Hit, merge_top_k};

/// Largest number of scores one pass over a shard holds (queries are taken in groups).
const SCORES_PER_PASS: usize = 1 << 26;

/// A compressed corpus resident on one or more GPUs.
pub struct GpuCodesIndex<'c> {
    corpus: &'c CompressedCorpus,
    shards: Vec<Shard>,
}

struct Shard {
    scorer: CudaScorer,
    docs: Range<usize>,
    codes: Option<DeviceCodes>,
    scores: Mutex<Option<CudaSlice<f32>>>,
}

impl<'c> GpuCodesIndex<'c> {
    /// Shard `corpus` over `options.devices` and upload each shard's codes.
    pub fn new(corpus: &'c CompressedCorpus, options: &SearchOptions) -> Result<Self> {
        if options.devices.is_empty() {
            return Err(Error::Argument("no GPUs given to shard over".into()));
        }
        if options.residency == Residency::Stream {
            return Err(Error::Argument(
                "compressed corpora are searched resident on the GPU; streaming their codes \
                 from host memory is not built yet (use --residency auto or resident)"
                    .into(),
            ));
        }
        let ranges = split_by_tokens(corpus.offsets(), options.devices.len());
        let shards = spawn_shards(&options.devices, ranges, |ordinal, docs| {
            Shard::new(corpus, ordinal, docs)
        })?;
        Ok(GpuCodesIndex { corpus, shards })
    }

    pub fn corpus(&self) -> &'c CompressedCorpus {
        self.corpus
    }

    /// `(device ordinal, documents)` of each shard.
    pub fn shards(&self) -> Vec<(usize, Range<usize>)> {
        self.shards
            .iter()
            .map(|s| (s.scorer.info().ordinal, s.docs.clone()))
            .collect()
    }
}

impl Shard {
    fn new(corpus: &CompressedCorpus, ordinal: usize, docs: Range<usize>) -> Result<Self> {
        let scorer = CudaScorer::new(ordinal)?;
        let codes =
            if docs.is_empty() {
                None
            } else {
                Some(scorer.upload_codes(corpus, docs.clone()).map_err(|e| match e {
                Error::OutOfMemory(m) => Error::OutOfMemory(format!(
                    "{m}: the compressed corpus does not fit on cuda:{ordinal} (streaming \
                     compressed corpora is not built yet; shard it over more GPUs)"
                )),
                e => e,
            })?)
            };
        Ok(Shard {
            scorer,
            docs,
            codes,
            scores: Mutex::new(None),
        })
    }

    /// This shard's top-k per query, with corpus-wide document indices.
    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        let Some(codes) = &self.codes else {
            return Ok(vec![Vec::new(); queries.len()]);
        };
        let n = self.docs.len();
        let per_pass = (SCORES_PER_PASS / n).max(1);
        let mut slot = self.scores.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(queries.len());
        for block in queries.chunks(per_pass) {
            let dq = self.scorer.upload_codec_queries(block, codes)?;
            let scores = grow(self.scorer.stream(), &mut slot, block.len() * n)?;
            self.scorer.score_codes_device(&dq, codes, None, scores)?;
            out.extend(
                self.scorer
                    .top_k_device(scores, block.len(), n, k, self.docs.start)?,
            );
        }
        Ok(out)
    }
}

impl Searcher for GpuCodesIndex<'_> {
    fn name(&self) -> String {
        let shards: Vec<String> = self.shards.iter().map(|s| s.scorer.name()).collect();
        format!(
            "{} on {} codes",
            shards.join(" + "),
            self.corpus.codec().name()
        )
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        check_queries(queries, self.corpus.dim())?;
        let per_shard: Vec<Vec<Vec<Hit>>> = if self.shards.len() == 1 {
            vec![self.shards[0].search(queries, k)?]
        } else {
            self.shards
                .par_iter()
                .map(|shard| shard.search(queries, k))
                .collect::<Result<_>>()?
        };
        let mut out = vec![Vec::new(); queries.len()];
        for shard in per_shard {
            for (best, hits) in out.iter_mut().zip(shard) {
                merge_top_k(best, hits, k);
            }
        }
        Ok(out)
    }
}

//! [`GpuCodesIndex`]: search over a compressed corpus held on one or more GPUs: the documents
//! split into contiguous shards of about equal tokens, one per GPU. A shard's codes are either
//! resident in its GPU's memory, or streamed from host memory in chunks (a compressed corpus
//! larger than the GPU): each chunk uploaded, its inverse norms computed, then scored for every
//! query by the fused kernels. Chunks are copied and scored in turn, not overlapped: codes are
//! 4-30× smaller than f16 rows, so the copy over PCIe takes about ten times the scoring of the
//! same chunk and overlap would save at most a tenth. Each shard's (and chunk's) top-k is
//! selected on its device, the lists merged on the host; results are the same whichever way a
//! shard is held.

use std::ops::Range;
use std::sync::Mutex;

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use super::codes::{CodecQueries, DeviceCodes};
use super::index::{plan_chunks, spawn_shards, split_by_tokens};
use super::memory::grow;
use super::scorer::CudaScorer;
use crate::codec::CompressedCorpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::{Scorer, check_queries};
use crate::search::{Residency, SearchOptions, Searcher};
use crate::topk::{Hit, merge_top_k};

/// Largest number of scores one pass over a shard holds (queries are taken in groups): 1 GiB,
/// so 8.8M documents take 24 queries a pass.
const SCORES_PER_PASS: usize = 1 << 28;
/// Queries a pass takes in multiples of, where it takes that many: the batched codec kernels
/// decode the codes once for each 256-row query tile (8 queries of up to 32 tokens), so a
/// part-filled tile costs a whole decode. At 8.8M documents 2^26 scores a pass took 32 queries
/// in passes of 7, 7, 7, 7 and 4: five decodes where four do.
const PASS_QUERIES: usize = 8;

/// A compressed corpus on one or more GPUs.
pub struct GpuCodesIndex<'c> {
    corpus: &'c CompressedCorpus,
    shards: Vec<Shard>,
}

struct Shard {
    scorer: CudaScorer,
    docs: Range<usize>,
    /// The shard's codes in device memory, or `None` when it is streamed (or empty).
    resident: Option<DeviceCodes>,
    /// Streamed shards: the chunks (document ranges) they are copied in.
    chunks: Vec<Range<usize>>,
    scores: Mutex<Option<CudaSlice<f32>>>,
}

impl<'c> GpuCodesIndex<'c> {
    /// Shard `corpus` over `options.devices`; each shard's codes are uploaded, or streamed per
    /// search as `options.residency` says (`Auto`: streamed when they do not fit).
    pub fn new(corpus: &'c CompressedCorpus, options: &SearchOptions) -> Result<Self> {
        if options.devices.is_empty() {
            return Err(Error::Argument("no GPUs given to shard over".into()));
        }
        let ranges = split_by_tokens(corpus.offsets(), options.devices.len());
        let shards = spawn_shards(&options.devices, ranges, |ordinal, docs| {
            Shard::new(corpus, ordinal, docs, options)
        })?;
        Ok(GpuCodesIndex { corpus, shards })
    }

    pub fn corpus(&self) -> &'c CompressedCorpus {
        self.corpus
    }

    /// `(device ordinal, documents, resident)` of each shard.
    pub fn shards(&self) -> Vec<(usize, Range<usize>, bool)> {
        self.shards
            .iter()
            .map(|s| {
                let resident = s.resident.is_some() || s.docs.is_empty();
                (s.scorer.info().ordinal, s.docs.clone(), resident)
            })
            .collect()
    }
}

impl Shard {
    fn new(
        corpus: &CompressedCorpus,
        ordinal: usize,
        docs: Range<usize>,
        o: &SearchOptions,
    ) -> Result<Self> {
        let scorer = CudaScorer::new(ordinal)?;
        let row = corpus.codec().bytes_per_token(corpus.dim());
        let offsets = corpus.offsets();
        // Codes, the residual's inverse norms, offsets.
        let bytes = (offsets[docs.end] - offsets[docs.start]) * (row + 4) + docs.len() * 8;
        let fits = || {
            let pass = SCORES_PER_PASS.min(docs.len() * 64) * 4;
            scorer.gpu().fits(bytes + pass)
        };
        let upload = || {
            scorer
                .upload_codes(corpus, docs.clone())
                .map_err(|e| match e {
                    Error::OutOfMemory(m) => Error::OutOfMemory(format!(
                        "{m}: the compressed corpus does not fit on cuda:{ordinal} (search \
                         it with --residency stream, or shard it over more GPUs)"
                    )),
                    e => e,
                })
        };
        let resident = match o.residency {
            _ if docs.is_empty() => None,
            Residency::Stream => None,
            Residency::Resident => Some(upload()?),
            Residency::Auto if !fits()? => None,
            Residency::Auto => match upload() {
                Ok(d) => Some(d),
                Err(Error::OutOfMemory(_)) => None,
                Err(e) => return Err(e),
            },
        };
        let chunks = if resident.is_none() {
            plan_chunks(offsets, row, docs.clone(), o.chunk_bytes)
        } else {
            Vec::new()
        };
        Ok(Shard {
            scorer,
            docs,
            resident,
            chunks,
            scores: Mutex::new(None),
        })
    }

    /// This shard's top-k per query, with corpus-wide document indices.
    fn search(
        &self,
        corpus: &CompressedCorpus,
        queries: &[Matrix<'_>],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>> {
        let mut out = vec![Vec::new(); queries.len()];
        if let Some(codes) = &self.resident {
            self.score_into(queries, codes, self.docs.start, None, k, &mut out)?;
            return Ok(out);
        }
        // Streamed: each chunk copied once, scored for every query; the queries uploaded once.
        let mut uploaded = None;
        for chunk in &self.chunks {
            let codes = self.scorer.upload_codes(corpus, chunk.clone())?;
            self.score_into(
                queries,
                &codes,
                chunk.start,
                Some(&mut uploaded),
                k,
                &mut out,
            )?;
        }
        Ok(out)
    }

    /// Score `codes` (documents from `first` on) for every query, merging each query's top-k
    /// into `out`. `uploaded`: queries already on the device, kept for the next chunk.
    fn score_into(
        &self,
        queries: &[Matrix<'_>],
        codes: &DeviceCodes,
        first: usize,
        uploaded: Option<&mut Option<Vec<CodecQueries>>>,
        k: usize,
        out: &mut [Vec<Hit>],
    ) -> Result<()> {
        let n = codes.len();
        let per_pass = (SCORES_PER_PASS / n.max(1)).max(1);
        let per_pass = if per_pass >= PASS_QUERIES {
            per_pass - per_pass % PASS_QUERIES
        } else {
            per_pass
        };
        let mut fresh = None;
        let blocks = match uploaded {
            Some(slot) => slot,
            None => &mut fresh,
        };
        if blocks.is_none() {
            *blocks = Some(
                queries
                    .chunks(per_pass)
                    .map(|b| self.scorer.upload_codec_queries(b, codes))
                    .collect::<Result<_>>()?,
            );
        }
        let mut slot = self.scores.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = 0;
        for dq in blocks.iter().flatten() {
            let scores = grow(self.scorer.stream(), &mut slot, dq.len() * n)?;
            self.scorer.score_codes_device(dq, codes, None, scores)?;
            let hits = self.scorer.top_k_device(scores, dq.len(), n, k, first)?;
            for (best, h) in out[at..at + dq.len()].iter_mut().zip(hits) {
                merge_top_k(best, h, k);
            }
            at += dq.len();
        }
        Ok(())
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
            vec![self.shards[0].search(self.corpus, queries, k)?]
        } else {
            self.shards
                .par_iter()
                .map(|shard| shard.search(self.corpus, queries, k))
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

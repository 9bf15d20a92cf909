//! Where [`super::GpuIvfSearch`] holds a segment's codes on its GPU:
//! - **resident**: every code uploaded once (the first stages read the upload's centroid ids
//!   and offsets);
//! - **streamed**: only what the first stages read stays on the GPU (each token's centroid id,
//!   the documents' offsets, the centroids: 4 bytes a token, against 36 for the codes at
//!   d = 128, nbits = 2). Each batch's candidates are gathered on the host from the (mapped)
//!   codes and uploaded, then rescored by the same fused kernel.
//!
//! `Residency::Auto` keeps the codes resident where they fit in the GPU's free memory, else
//! streams them.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::codec_kernels::fused_kernel;
use super::codes::{CodecQueries, CodecTables, CodesView, DeviceCodes, upload_words};
use super::rerank::rescore_lists;
use super::scorer::CudaScorer;
use crate::codec::{CompressedCorpus, ResidualCodec};
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::search::Residency;
use crate::topk::Hit;

/// A segment's codes on the GPU (see the module's text).
pub(super) enum HeldCodes {
    Resident(Box<DeviceCodes>),
    Streamed(FirstStageArrays),
}

/// What the first stages read of a streamed segment.
pub(super) struct FirstStageArrays {
    /// Each token's centroid id (four zero words past the last, as `DeviceCodes`' aux).
    aux: CudaSlice<u32>,
    /// The documents' token offsets.
    offsets: CudaSlice<i64>,
    /// The codec's tables (the centroids among them), shared with each batch's upload.
    tables: Arc<CodecTables>,
    num_centroids: usize,
    dim: usize,
    tokens: usize,
    docs: usize,
}

impl HeldCodes {
    /// `codes` (of residual codec `r`, with centroid ids) held on `scorer`'s GPU as `residency`
    /// says, given that a pass of the first stages holds `pass_bytes` of buffers. An argument
    /// error where no fused residual kernel reads the codes (the caller runs the stages on the
    /// CPU).
    pub(super) fn new(
        scorer: &CudaScorer,
        codes: &CompressedCorpus,
        r: &ResidualCodec,
        residency: Residency,
        pass_bytes: usize,
    ) -> Result<Self> {
        if fused_kernel(codes.codec(), codes.dim()).is_none() {
            return Err(Error::Argument(format!(
                "no fused residual kernel reads d = {} at {} bits",
                codes.dim(),
                r.nbits()
            )));
        }
        let ordinal = scorer.info().ordinal;
        let fits = || {
            // Codes, ids, inverse norms, offsets.
            let row = codes.codec().row_bytes(codes.dim()) + 8;
            let bytes = codes.num_tokens() * row + codes.len() * 8;
            scorer.gpu().fits(bytes + pass_bytes)
        };
        let resident = || {
            scorer
                .upload_codes(codes, 0..codes.len())
                .map(|d| HeldCodes::Resident(Box::new(d)))
                .map_err(|e| match e {
                    Error::OutOfMemory(m) => Error::OutOfMemory(format!(
                        "{m}: the segment's codes do not fit on cuda:{ordinal} (IVF search \
                         streams them with --residency stream or auto)"
                    )),
                    e => e,
                })
        };
        match residency {
            Residency::Resident => resident(),
            Residency::Stream => Self::streamed(scorer, codes, r),
            Residency::Auto if !fits()? => Self::streamed(scorer, codes, r),
            Residency::Auto => match resident() {
                Err(Error::OutOfMemory(_)) => Self::streamed(scorer, codes, r),
                held => held,
            },
        }
    }

    /// The first stages' arrays of `codes` (of residual codec `r`) uploaded.
    fn streamed(scorer: &CudaScorer, codes: &CompressedCorpus, r: &ResidualCodec) -> Result<Self> {
        let ordinal = scorer.info().ordinal;
        let stream = &scorer.gpu().stream;
        let (aux, offsets) = upload_words(stream, codes, 0..codes.len()).map_err(|e| match e {
            Error::OutOfMemory(m) => Error::OutOfMemory(format!(
                "{m}: streamed IVF search holds each token's centroid id on cuda:{ordinal}, and \
                 they do not fit (shard the index over more GPUs, or search with --device cpu)"
            )),
            e => e,
        })?;
        Ok(HeldCodes::Streamed(FirstStageArrays {
            aux,
            offsets,
            tables: CodecTables::upload(stream, codes.codec())?,
            num_centroids: r.num_centroids(),
            dim: codes.dim(),
            tokens: codes.num_tokens(),
            docs: codes.len(),
        }))
    }

    /// Whether the codes are streamed.
    pub(super) fn streamed_codes(&self) -> bool {
        matches!(self, HeldCodes::Streamed(_))
    }

    /// Each token's centroid id and the documents' offsets (`ivf_interaction`'s).
    pub(super) fn ids(&self) -> (&CudaSlice<u32>, &CudaSlice<i64>) {
        match self {
            HeldCodes::Resident(d) => (&d.aux, &d.offsets),
            HeldCodes::Streamed(s) => (&s.aux, &s.offsets),
        }
    }

    /// What `codec_centroid_scores` reads (the centroids, K, d) on `stream`.
    pub(super) fn view(&self, stream: &Arc<CudaStream>) -> CodesView {
        match self {
            HeldCodes::Resident(d) => d.view(stream),
            HeldCodes::Streamed(s) => CodesView {
                tag: 0,
                param: 0,
                num_centroids: s.num_centroids,
                dim: s.dim,
                tokens: s.tokens,
                docs: s.docs,
                codes: 0,
                aux: s.aux.device_ptr(stream).0,
                offsets: s.offsets.device_ptr(stream).0,
                order: 0,
                inv_norm: 0,
                centroids: s
                    .tables
                    .centroids
                    .as_ref()
                    .map_or(0, |c| c.device_ptr(stream).0),
                table: 0,
                values: 0,
            },
        }
    }

    /// `queries` uploaded as the fused residual kernels and the centroid scores read them.
    pub(super) fn upload_queries(
        &self,
        scorer: &CudaScorer,
        queries: &[Matrix<'_>],
    ) -> Result<CodecQueries> {
        match self {
            HeldCodes::Resident(d) => scorer.upload_codec_queries(queries, d),
            HeldCodes::Streamed(s) => {
                CodecQueries::upload(&scorer.gpu().stream, queries, s.dim, true)
            }
        }
    }

    /// Each query's candidates `lists[q]` (documents of `codes`, ascending) rescored on their
    /// codes; the best `k` of each. Streamed codes: the union of the lists gathered on the host
    /// and uploaded first. `table`: the queries' centroid scores already made (`[blocks][K][32]`,
    /// query q's blocks `qblocks[q] .. qblocks[q + 1]`), read again instead of made per query.
    pub(super) fn rescore(
        &self,
        scorer: &CudaScorer,
        codes: &CompressedCorpus,
        queries: &[Matrix<'_>],
        lists: &[Vec<i64>],
        k: usize,
        table: Option<(&CudaSlice<u16>, &[i32])>,
    ) -> Result<Vec<Vec<Hit>>> {
        let on = |device: &DeviceCodes, lists: &[Vec<i64>]| {
            rescore_lists(scorer, lists, k, |q, docs, out| {
                let one = scorer.upload_codec_queries(&queries[q..=q], device)?;
                let part = table.map(|(cs, qblocks)| {
                    let per = cs.len() / (qblocks[qblocks.len() - 1].max(1) as usize);
                    cs.slice(qblocks[q] as usize * per..qblocks[q + 1] as usize * per)
                });
                scorer.score_codes_views_with(&one, device, docs, out, part.as_ref())?;
                Ok(one)
            })
        };
        match self {
            HeldCodes::Resident(d) => on(d, lists),
            HeldCodes::Streamed(s) => {
                let mut union: Vec<usize> = lists.iter().flatten().map(|&j| j as usize).collect();
                union.sort_unstable();
                union.dedup();
                if union.is_empty() {
                    return Ok(vec![Vec::new(); lists.len()]);
                }
                let part = codes.gather(&union)?;
                let device = scorer.upload_codes_with(&part, 0..part.len(), Some(&s.tables))?;
                let local: Vec<Vec<i64>> = lists
                    .iter()
                    .map(|l| {
                        l.iter()
                            .map(|&j| union.partition_point(|&u| u < j as usize) as i64)
                            .collect()
                    })
                    .collect();
                let mut hits = on(&device, &local)?;
                for h in hits.iter_mut().flatten() {
                    h.doc = union[h.doc];
                }
                Ok(hits)
            }
        }
    }
}

//! [`GpuRerank`]: the exact second stage with the exact corpus resident on one GPU: a first
//! stage's top k' of each query (compressed or IVF search) rescored there, every query's
//! candidates in one pass of launches into one buffer, downloaded once; the best k kept. The
//! host-side stage (`search::Reranked`) gathers each query's candidate rows and uploads them
//! per call instead; this one uploads the corpus once.

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use super::device::drv;
use super::memory::DeviceCorpus;
use super::scorer::CudaScorer;
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::{Scorer, check_queries};
use crate::search::Searcher;
use crate::topk::{Hit, top_k_of};

/// An exact corpus resident on one GPU, for [`GpuExact::rerank`].
pub struct GpuExact {
    scorer: CudaScorer,
    exact: DeviceCorpus,
    len: usize,
    dim: usize,
}

impl GpuExact {
    /// `exact` uploaded to GPU `ordinal`; an out-of-memory error when it does not fit (the
    /// caller may rerank on the host instead).
    pub fn new(exact: &Corpus, ordinal: usize) -> Result<Self> {
        let scorer = CudaScorer::new(ordinal)?;
        let uploaded = scorer.upload(exact)?;
        Ok(GpuExact {
            scorer,
            exact: uploaded,
            len: exact.len(),
            dim: exact.dim(),
        })
    }

    /// `first` (a search of the same documents) followed by this exact stage on its top
    /// `candidates`.
    pub fn rerank<'c>(
        self,
        first: Box<dyn Searcher + 'c>,
        candidates: usize,
    ) -> Result<GpuRerank<'c>> {
        if candidates == 0 {
            return Err(Error::Argument(
                "rerank candidates k' must be at least 1".into(),
            ));
        }
        Ok(GpuRerank {
            first,
            candidates,
            gpu: self,
        })
    }
}

/// A first stage followed by exact rescoring on a GPU (see the module's text).
pub struct GpuRerank<'c> {
    first: Box<dyn Searcher + 'c>,
    candidates: usize,
    gpu: GpuExact,
}

impl Searcher for GpuRerank<'_> {
    fn name(&self) -> String {
        format!(
            "{}, top-{} reranked exactly by {} (exact tokens resident)",
            self.first.name(),
            self.candidates,
            self.gpu.scorer.name()
        )
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        let g = &self.gpu;
        check_queries(queries, g.dim)?;
        let first = self.first.search(queries, self.candidates.max(k))?;
        let lists: Vec<Vec<i64>> = first
            .iter()
            .map(|hits| hits.iter().map(|h| h.doc as i64).collect())
            .collect();
        if let Some(&bad) = lists.iter().flatten().find(|&&j| j as usize >= g.len) {
            return Err(Error::Argument(format!(
                "the first stage returned document {bad} of {}",
                g.len
            )));
        }
        rescore_lists(&g.scorer, &lists, k, |q, docs, out| {
            let dq = g.scorer.upload_queries(&queries[q..=q], g.dim)?;
            g.scorer.score_device_views(&dq, &g.exact, docs, out)?;
            Ok(dq)
        })
    }
}

/// Each query's candidate list (`lists[q]`) scored on the device and its best `k` kept:
/// the lists uploaded as one buffer, `launch(q, docs, out)` enqueued for every query with
/// candidates (its part of the lists and of one score buffer; what it returns is kept alive
/// until the scores are back), the scores downloaded once.
pub(super) fn rescore_lists<T>(
    scorer: &CudaScorer,
    lists: &[Vec<i64>],
    k: usize,
    mut launch: impl FnMut(usize, &CudaView<'_, i64>, &mut CudaViewMut<'_, f32>) -> Result<T>,
) -> Result<Vec<Vec<Hit>>> {
    let mut at = vec![0usize];
    for l in lists {
        at.push(at[at.len() - 1] + l.len());
    }
    let total = at[lists.len()];
    if total == 0 {
        return Ok(vec![Vec::new(); lists.len()]);
    }
    let stream = &scorer.gpu().stream;
    let up = || drv("rescoring buffers");
    let all: Vec<i64> = lists.concat();
    let all_dev = stream.clone_htod(&all).map_err(up())?;
    // SAFETY: every query's launch writes its own part; empty parts are not launched.
    let mut scores: CudaSlice<f32> = unsafe { stream.alloc::<f32>(total) }.map_err(up())?;
    let mut keep = Vec::with_capacity(lists.len());
    for q in 0..lists.len() {
        let part = at[q]..at[q + 1];
        if !part.is_empty() {
            keep.push(launch(
                q,
                &all_dev.slice(part.clone()),
                &mut scores.slice_mut(part),
            )?);
        }
    }
    let scores = stream
        .clone_dtoh(&scores)
        .map_err(drv("rescoring download"))?;
    scorer.synchronize()?;
    drop(keep);
    Ok((0..lists.len())
        .map(|q| {
            let part = at[q]..at[q + 1];
            top_k_of(
                scores[part.clone()]
                    .iter()
                    .zip(&all[part])
                    .map(|(&score, &doc)| Hit {
                        doc: doc as usize,
                        score,
                    }),
                k,
            )
        })
        .collect())
}

//! Search on GPUs: the corpus split into contiguous shards of equal token counts, one per GPU.
//! Each shard is either resident (uploaded once, scored many times) or streamed: copied from
//! host memory chunk by chunk through two pinned buffers, the host staging chunk i + 1 while
//! the copy engine moves chunk i on its own stream and the scoring stream waits only for the
//! chunk it scores. Every shard's top-k is selected on its GPU (kernels/topk.cu); the host
//! merges the shards' and chunks' lists. Results are the same whichever way a shard is held.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};
use rayon::prelude::*;

use super::{CudaScorer, DeviceCorpus, drv};
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::{Scorer, check_queries};
use crate::search::{Residency, SearchOptions, Searcher};
use crate::topk::{Hit, merge_top_k};

/// Scores held at once per shard and pass: queries are scored in blocks of at most this many
/// `Q × docs` floats.
const SCORES_PER_PASS: usize = 1 << 26;
/// Device memory left free beside a resident shard.
const HEADROOM: usize = 1 << 30;

/// A corpus ready for repeated top-k search on one or more GPUs.
pub struct GpuIndex<'c> {
    corpus: &'c Corpus,
    shards: Vec<Shard>,
}

struct Shard {
    scorer: CudaScorer,
    docs: Range<usize>,
    resident: Option<DeviceCorpus>,
    /// Streamed shards: the chunks (document ranges) and, once a search has run, the buffers.
    chunks: Vec<Range<usize>>,
    staging: Mutex<Option<Staging>>,
}

/// Double-buffered streaming state of one shard.
struct Staging {
    copy: Arc<CudaStream>,
    slots: [Slot; 2],
}

struct Slot {
    tokens: PinnedHostSlice<u8>,
    offsets: PinnedHostSlice<i64>,
    device: DeviceCorpus,
    copied: CudaEvent,
}

impl<'c> GpuIndex<'c> {
    /// Shard `corpus` over `options.devices` and upload (or plan the streaming of) each shard.
    pub fn new(corpus: &'c Corpus, options: &SearchOptions) -> Result<Self> {
        if options.devices.is_empty() {
            return Err(Error::Argument("no GPUs given to shard over".into()));
        }
        if options.chunk_bytes == 0 {
            return Err(Error::Argument(
                "the chunk size must be at least 1 byte".into(),
            ));
        }
        let ranges = split_by_tokens(corpus, options.devices.len());
        let shards = std::thread::scope(|s| {
            let handles: Vec<_> = options
                .devices
                .iter()
                .zip(ranges)
                .map(|(&ordinal, docs)| s.spawn(move || Shard::new(corpus, ordinal, docs, options)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::DeviceUnavailable("a shard's thread panicked".into()))
                    })
                })
                .collect::<Result<Vec<_>>>()
        })?;
        Ok(GpuIndex { corpus, shards })
    }

    pub fn corpus(&self) -> &'c Corpus {
        self.corpus
    }

    /// `(device ordinal, documents, streamed)` of each shard.
    pub fn shards(&self) -> Vec<(usize, Range<usize>, bool)> {
        self.shards
            .iter()
            .map(|s| {
                (
                    s.scorer.info().ordinal,
                    s.docs.clone(),
                    s.resident.is_none(),
                )
            })
            .collect()
    }
}

impl Searcher for GpuIndex<'_> {
    fn name(&self) -> String {
        let shards: Vec<String> = self
            .shards
            .iter()
            .map(|s| {
                let held = if s.resident.is_some() {
                    ""
                } else {
                    " streamed"
                };
                format!("{}{held}", s.scorer.name())
            })
            .collect();
        shards.join(" + ")
    }

    /// The `k` best documents of the corpus for each query, best first, ties to the lower
    /// document index.
    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        check_queries(queries, self.corpus)?;
        let per_shard: Vec<Vec<Vec<Hit>>> = if self.shards.len() == 1 {
            vec![self.shards[0].search(self.corpus, queries, k)?]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = self
                    .shards
                    .iter()
                    .map(|shard| s.spawn(move || shard.search(self.corpus, queries, k)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(Error::DeviceUnavailable("a shard's thread panicked".into()))
                        })
                    })
                    .collect::<Result<Vec<_>>>()
            })?
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

/// Split the documents into `parts` contiguous ranges of about equal token counts.
fn split_by_tokens(corpus: &Corpus, parts: usize) -> Vec<Range<usize>> {
    let offsets = corpus.offsets();
    let total = offsets[corpus.len()];
    let mut start = 0;
    (1..=parts)
        .map(|p| {
            let end = if p == parts {
                corpus.len()
            } else {
                let target = total * p / parts;
                offsets
                    .partition_point(|&o| o < target)
                    .clamp(start, corpus.len())
            };
            let r = start..end;
            start = end;
            r
        })
        .collect()
}

/// Consecutive document ranges of at most `bytes` token bytes each (at least one document).
fn plan_chunks(corpus: &Corpus, docs: Range<usize>, bytes: usize) -> Vec<Range<usize>> {
    let offsets = corpus.offsets();
    let row = corpus.dim() * corpus.dtype().size();
    let mut chunks = Vec::new();
    let mut start = docs.start;
    while start < docs.end {
        let limit = offsets[start] + (bytes / row).max(1);
        let end = offsets[start + 1..=docs.end]
            .partition_point(|&o| o <= limit)
            .max(1)
            + start;
        chunks.push(start..end);
        start = end;
    }
    chunks
}

impl Shard {
    fn new(corpus: &Corpus, ordinal: usize, docs: Range<usize>, o: &SearchOptions) -> Result<Self> {
        let scorer = CudaScorer::new(ordinal)?;
        let row = corpus.dim() * corpus.dtype().size();
        let offsets = corpus.offsets();
        let bytes = (offsets[docs.end] - offsets[docs.start]) * row;
        let fits = || -> Result<bool> {
            let (free, _) = scorer.ctx.mem_get_info().map_err(drv("memory info"))?;
            Ok(
                bytes + docs.len() * 8 + SCORES_PER_PASS.min(docs.len() * 64) * 4 + HEADROOM
                    <= free,
            )
        };
        let resident = match o.residency {
            _ if docs.is_empty() => None,
            Residency::Stream => None,
            Residency::Resident => Some(scorer.upload_range(corpus, docs.clone())?),
            Residency::Auto if !fits()? => None,
            Residency::Auto => match scorer.upload_range(corpus, docs.clone()) {
                Ok(d) => Some(d),
                Err(Error::OutOfMemory(_)) => None,
                Err(e) => return Err(e),
            },
        };
        let chunks = if resident.is_none() {
            plan_chunks(corpus, docs.clone(), o.chunk_bytes)
        } else {
            Vec::new()
        };
        Ok(Shard {
            scorer,
            docs,
            resident,
            chunks,
            staging: Mutex::new(None),
        })
    }

    /// This shard's top-k per query, with corpus-wide document indices.
    fn search(&self, corpus: &Corpus, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        let n = self.docs.len();
        if n == 0 {
            return Ok(vec![Vec::new(); queries.len()]);
        }
        let largest = match &self.resident {
            Some(_) => n,
            None => self.chunks.iter().map(|c| c.len()).max().unwrap_or(1),
        };
        let per_pass = (SCORES_PER_PASS / largest).max(1);
        let mut out = Vec::with_capacity(queries.len());
        for block in queries.chunks(per_pass) {
            let dq = self.scorer.upload_queries(block, corpus.dim())?;
            match &self.resident {
                Some(dc) => {
                    let mut scores = self.scorer.alloc_scores(block.len() * n)?;
                    self.scorer.score_device(&dq, dc, None, &mut scores)?;
                    out.extend(self.scorer.top_k_device(
                        &scores,
                        block.len(),
                        n,
                        k,
                        self.docs.start,
                    )?);
                }
                None => out.extend(self.search_streamed(corpus, &dq, block.len(), k)?),
            }
        }
        Ok(out)
    }

    fn search_streamed(
        &self,
        corpus: &Corpus,
        dq: &super::DeviceQueries,
        nq: usize,
        k: usize,
    ) -> Result<Vec<Vec<Hit>>> {
        let mut guard = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(Staging::new(&self.scorer, corpus, &self.chunks)?);
        }
        let Some(st) = guard.as_mut() else {
            return Err(Error::DeviceUnavailable("streaming buffers missing".into()));
        };
        let largest = self.chunks.iter().map(|c| c.len()).max().unwrap_or(1);
        let mut scores = [
            self.scorer.alloc_scores(nq * largest)?,
            self.scorer.alloc_scores(nq * largest)?,
        ];
        let mut best = vec![Vec::new(); nq];
        let mut pending: Option<(usize, Range<usize>)> = None;
        for (i, chunk) in self.chunks.iter().enumerate() {
            let slot = i % 2;
            // The slot's last chunk (i - 2) was scored and harvested before chunk i - 1 was
            // scored, so its pinned and device buffers are free again.
            st.stage(slot, corpus, chunk.clone())?;
            // Harvest chunk i - 1 while chunk i is on the copy engine.
            if let Some((ps, pc)) = pending.take() {
                self.harvest(&scores[ps], nq, pc, k, &mut best)?;
            }
            self.scorer
                .stream
                .wait(&st.slots[slot].copied)
                .map_err(drv("stream wait"))?;
            self.scorer
                .score_device(dq, &st.slots[slot].device, None, &mut scores[slot])?;
            pending = Some((slot, chunk.clone()));
        }
        if let Some((ps, pc)) = pending {
            self.harvest(&scores[ps], nq, pc, k, &mut best)?;
        }
        Ok(best)
    }

    fn harvest(
        &self,
        scores: &CudaSlice<f32>,
        nq: usize,
        chunk: Range<usize>,
        k: usize,
        best: &mut [Vec<Hit>],
    ) -> Result<()> {
        let hits = self
            .scorer
            .top_k_device(scores, nq, chunk.len(), k, chunk.start)?;
        for (b, h) in best.iter_mut().zip(hits) {
            merge_top_k(b, h, k);
        }
        Ok(())
    }
}

impl Staging {
    fn new(scorer: &CudaScorer, corpus: &Corpus, chunks: &[Range<usize>]) -> Result<Self> {
        let offsets = corpus.offsets();
        let row = corpus.dim() * corpus.dtype().size();
        let max_docs = chunks.iter().map(|c| c.len()).max().unwrap_or(1);
        let max_bytes = chunks
            .iter()
            .map(|c| (offsets[c.end] - offsets[c.start]) * row)
            .max()
            .unwrap_or(row)
            .max(1);
        let copy = scorer.ctx.new_stream().map_err(drv("copy stream"))?;
        let slot = || -> Result<Slot> {
            // SAFETY (both): staged bytes are written by `stage` before a copy reads them.
            let tokens = unsafe { scorer.ctx.alloc_pinned::<u8>(max_bytes) }
                .map_err(drv("pinned staging buffer"))?;
            let offsets = unsafe { scorer.ctx.alloc_pinned::<i64>(max_docs + 1) }
                .map_err(drv("pinned staging buffer"))?;
            let device = DeviceCorpus {
                // SAFETY: each chunk's bytes are copied in before it is scored.
                tokens: unsafe { scorer.stream.alloc::<u8>(max_bytes) }
                    .map_err(drv("chunk buffer"))?,
                offsets: unsafe { scorer.stream.alloc::<i64>(max_docs + 1) }
                    .map_err(drv("chunk buffer"))?,
                dtype: corpus.dtype(),
                dim: corpus.dim(),
                len: 0,
                bytes: 0,
            };
            let copied = scorer.ctx.new_event(None).map_err(drv("event"))?;
            Ok(Slot {
                tokens,
                offsets,
                device,
                copied,
            })
        };
        let slots = [slot()?, slot()?];
        // The device buffers were allocated on the scoring stream; the copy stream must not
        // write them before that allocation is done.
        scorer.synchronize()?;
        Ok(Staging { copy, slots })
    }

    /// Copy chunk `docs` into the slot's pinned buffers (all cores), then enqueue its copy to
    /// the device on the copy stream, recorded by the slot's `copied` event.
    fn stage(&mut self, slot: usize, corpus: &Corpus, docs: Range<usize>) -> Result<()> {
        let s = &mut self.slots[slot];
        // Make sure the slot's previous copy has finished reading the pinned buffers.
        s.copied.synchronize().map_err(drv("event"))?;
        let offsets = corpus.offsets();
        let row = corpus.dim() * corpus.dtype().size();
        let (first, last) = (offsets[docs.start], offsets[docs.end]);
        let src = &corpus.tokens().elements().as_bytes()[first * row..last * row];
        let pinned = s.tokens.as_mut_slice().map_err(drv("pinned buffer"))?;
        let dst = &mut pinned[..src.len()];
        const PIECE: usize = 4 << 20;
        dst.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
        let off = s.offsets.as_mut_slice().map_err(drv("pinned buffer"))?;
        for (d, &o) in off.iter_mut().zip(&offsets[docs.start..=docs.end]) {
            *d = (o - first) as i64;
        }
        s.device.len = docs.len();
        s.device.bytes = src.len();
        let copy = &self.copy;
        let (dt, _g1) = s.device.tokens.device_ptr(copy);
        let (dof, _g2) = s.device.offsets.device_ptr(copy);
        let pinned = s.tokens.as_slice().map_err(drv("pinned buffer"))?;
        let off = s.offsets.as_slice().map_err(drv("pinned buffer"))?;
        // SAFETY: the destinations hold at least as many bytes as copied (sized for the largest
        // chunk); the sources are page-locked and stay untouched until `copied` is reached.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(dt, &pinned[..src.len()], copy.cu_stream())
                .map_err(drv("chunk copy"))?;
            cudarc::driver::result::memcpy_htod_async(
                dof,
                &off[..docs.len() + 1],
                copy.cu_stream(),
            )
            .map_err(drv("chunk copy"))?;
        }
        s.copied.record(copy).map_err(drv("event"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(lens: &[usize]) -> Corpus {
        let total: usize = lens.iter().sum();
        Corpus::from_lengths(vec![0.5f32; total * 2], 2, lens).expect("corpus")
    }

    #[test]
    fn shards_cover_every_document_once_with_even_tokens() {
        let c = corpus(&[5, 1, 1, 1, 9, 2, 2, 3]);
        for parts in 1..=10 {
            let s = split_by_tokens(&c, parts);
            assert_eq!(s.len(), parts);
            assert_eq!(s[0].start, 0);
            assert_eq!(s[parts - 1].end, c.len());
            for w in s.windows(2) {
                assert_eq!(w[0].end, w[1].start, "{parts} parts: {s:?}");
            }
        }
        // 24 tokens: the first document boundary at or past 12 tokens.
        assert_eq!(split_by_tokens(&c, 2), vec![0..5, 5..8]);
    }

    #[test]
    fn chunks_respect_the_byte_budget_and_take_oversized_documents_alone() {
        let c = corpus(&[5, 1, 1, 1, 9, 2, 2, 3]);
        let row = 2 * 4;
        let chunks = plan_chunks(&c, 1..8, 4 * row);
        assert_eq!(chunks, vec![1..4, 4..5, 5..7, 7..8]);
        for ch in &chunks {
            let tokens = c.offsets()[ch.end] - c.offsets()[ch.start];
            assert!(tokens <= 4 || ch.len() == 1, "{ch:?}: {tokens} tokens");
        }
        assert_eq!(plan_chunks(&c, 0..8, usize::MAX), vec![0..8]);
        assert_eq!(plan_chunks(&c, 3..3, 100), Vec::<Range<usize>>::new());
        assert_eq!(plan_chunks(&c, 0..8, 1).len(), 8);
    }
}

//! Search on GPUs: the corpus split into contiguous shards of equal token counts, one per GPU.
//! Each shard is either resident (uploaded once, scored many times) or streamed: copied from
//! host memory chunk by chunk through two pinned buffers, the host staging chunk i + 1 while
//! the copy engine moves chunk i on its own stream and the scoring stream waits only for the
//! chunk it scores. Every shard's top-k is selected on its GPU (kernels/topk.cu); the host
//! merges the shards' and chunks' lists. Results are the same whichever way a shard is held.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};
use rayon::prelude::*;

use super::context::GpuContext;
use super::device::drv;
use super::memory::{ChunkLayout, DeviceCorpus, grow};
use super::pitch::launch_repitch;
use super::scorer::CudaScorer;
use super::topk::{TopKBuffers, hits_from};
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::{Scorer, check_queries};
use crate::search::{Residency, SearchOptions, Searcher};
use crate::topk::{Hit, merge_top_k};

/// Scores held at once per shard and pass: queries are scored in blocks of at most this many
/// `Q × docs` floats.
const SCORES_PER_PASS: usize = 1 << 26;

/// A corpus ready for repeated top-k search on one or more GPUs.
pub struct GpuIndex<'c> {
    corpus: &'c Corpus,
    shards: Vec<Shard>,
    /// The corpus's token memory page-locked in place, when shards stream from it.
    pinned: Option<PinnedInPlace>,
}

/// Host memory page-locked for every context (`cuMemHostRegister`, portable, read-only) until
/// dropped, so the copy engine reads it directly.
struct PinnedInPlace {
    ptr: *mut std::ffi::c_void,
    ctx: Arc<CudaContext>,
}

// SAFETY: the pointer is only handed back to the driver (unregister), from any thread.
unsafe impl Send for PinnedInPlace {}
unsafe impl Sync for PinnedInPlace {}

impl PinnedInPlace {
    /// Page-lock the pages holding `bytes`; `None` when the device cannot register read-only
    /// memory or the driver refuses (not enough memory to lock, for instance).
    fn new(ctx: &Arc<CudaContext>, bytes: &[u8]) -> Option<Self> {
        use cudarc::driver::sys;
        let read_only =
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED;
        if bytes.is_empty() || ctx.attribute(read_only).ok()? == 0 {
            return None;
        }
        ctx.bind_to_thread().ok()?;
        const PAGE: usize = 4096;
        let start = bytes.as_ptr() as usize / PAGE * PAGE;
        let end = (bytes.as_ptr() as usize + bytes.len()).div_ceil(PAGE) * PAGE;
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_READ_ONLY;
        let ptr = start as *mut std::ffi::c_void;
        // SAFETY: [start, end) covers only pages that hold part of `bytes`, which stay mapped
        // and unchanged while the index (which borrows the corpus) lives; read-only registration
        // never writes them.
        let r = unsafe { sys::cuMemHostRegister_v2(ptr, end - start, flags) };
        (r == sys::CUresult::CUDA_SUCCESS).then(|| PinnedInPlace {
            ptr,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for PinnedInPlace {
    fn drop(&mut self) {
        // Searches synchronize before they return, so no copy reads these pages any more.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` was registered by `new` and is unregistered once.
            unsafe { cudarc::driver::sys::cuMemHostUnregister(self.ptr) };
        }
    }
}

struct Shard {
    scorer: CudaScorer,
    docs: Range<usize>,
    resident: Option<DeviceCorpus>,
    /// Streamed shards: the chunks (document ranges) they are copied in, and how those lie on
    /// the device.
    chunks: Vec<Range<usize>>,
    layout: Option<ChunkLayout>,
    /// Device buffers kept from one search to the next.
    work: Mutex<Work>,
}

/// A shard's reusable buffers: scores, top-k results and (streamed shards, once a search has
/// run) the staging slots.
#[derive(Default)]
struct Work {
    scores: Option<CudaSlice<f32>>,
    hits: TopKBuffers,
    staging: Option<Staging>,
}

/// Double-buffered streaming state of one shard.
struct Staging {
    copy: Arc<CudaStream>,
    slots: [Slot; 2],
}

/// One chunk's buffers: page-locked host memory it is staged in, device memory it is copied
/// to, and the events that order their reuse: `copied` (on the copy stream: the pinned buffer is
/// free again, the device buffer ready) and `scored` (on the scoring stream: the device buffer
/// is free again).
struct Slot {
    tokens: PinnedHostSlice<u8>,
    offsets: PinnedHostSlice<i64>,
    device: DeviceCorpus,
    /// Where `device` stores rows wider than the corpus's d (`CudaScorer::stored_width`): the
    /// chunk's rows at their own d, copied here and re-pitched into `device` on the copy stream.
    narrow: Option<CudaSlice<u8>>,
    copied: CudaEvent,
    scored: CudaEvent,
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
        let ranges = split_by_tokens(corpus.offsets(), options.devices.len());
        let shards = spawn_shards(&options.devices, ranges, |ordinal, docs| {
            Shard::new(corpus, ordinal, docs, options)
        })?;
        let pinned = match shards
            .iter()
            .find(|s| s.resident.is_none() && !s.docs.is_empty())
        {
            Some(s) if options.pin_corpus => {
                PinnedInPlace::new(&s.scorer.gpu().ctx, corpus.tokens().elements().as_bytes())
            }
            _ => None,
        };
        Ok(GpuIndex {
            corpus,
            shards,
            pinned,
        })
    }

    /// Whether streamed shards copy straight from the corpus's page-locked memory (else they
    /// stage chunks through pinned buffers).
    pub fn pinned_in_place(&self) -> bool {
        self.pinned.is_some()
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
        check_queries(queries, self.corpus.dim())?;
        let pinned = self.pinned.is_some();
        let per_shard: Vec<Vec<Vec<Hit>>> = if self.shards.len() == 1 {
            vec![self.shards[0].search(self.corpus, queries, k, pinned)?]
        } else {
            self.shards
                .par_iter()
                .map(|shard| shard.search(self.corpus, queries, k, pinned))
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

/// One shard per device, built on its own thread (uploads to several GPUs overlap): `make`
/// gets the device's ordinal and its documents.
pub(super) fn spawn_shards<S: Send>(
    devices: &[usize],
    ranges: Vec<Range<usize>>,
    make: impl Fn(usize, Range<usize>) -> Result<S> + Sync,
) -> Result<Vec<S>> {
    let make = &make;
    std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .zip(ranges)
            .map(|(&ordinal, docs)| s.spawn(move || make(ordinal, docs)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::DeviceUnavailable("a shard's thread panicked".into()))
                })
            })
            .collect()
    })
}

/// Split the documents under `offsets` (N + 1) into `parts` contiguous ranges of about equal
/// token counts.
pub(super) fn split_by_tokens(offsets: &[usize], parts: usize) -> Vec<Range<usize>> {
    let len = offsets.len() - 1;
    let total = offsets[len];
    let mut start = 0;
    (1..=parts)
        .map(|p| {
            let end = if p == parts {
                len
            } else {
                let target = total * p / parts;
                offsets.partition_point(|&o| o < target).clamp(start, len)
            };
            let r = start..end;
            start = end;
            r
        })
        .collect()
}

/// Consecutive ranges of `docs` (token offsets `offsets`, `row` bytes a token) of at most
/// `bytes` token bytes each (at least one document).
pub(super) fn plan_chunks(
    offsets: &[usize],
    row: usize,
    docs: Range<usize>,
    bytes: usize,
) -> Vec<Range<usize>> {
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
        let fits = || {
            let pass = SCORES_PER_PASS.min(docs.len() * 64) * 4;
            scorer.gpu().fits(bytes + docs.len() * 8 + pass)
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
        let (chunks, layout) = match resident {
            None if !docs.is_empty() => {
                let layout = ChunkLayout::of(corpus, |split_ok| {
                    scorer.stored_width(corpus.dtype(), corpus.dim(), split_ok)
                });
                let token = layout.token_bytes(corpus);
                let chunks = plan_chunks(corpus.offsets(), token, docs.clone(), o.chunk_bytes);
                (chunks, Some(layout))
            }
            _ => (Vec::new(), None),
        };
        Ok(Shard {
            scorer,
            docs,
            resident,
            chunks,
            layout,
            work: Mutex::new(Work::default()),
        })
    }

    /// This shard's top-k per query, with corpus-wide document indices. `pinned`: the corpus's
    /// memory is page-locked in place (streamed chunks need no staging).
    fn search(
        &self,
        corpus: &Corpus,
        queries: &[Matrix<'_>],
        k: usize,
        pinned: bool,
    ) -> Result<Vec<Vec<Hit>>> {
        let n = self.docs.len();
        if n == 0 {
            return Ok(vec![Vec::new(); queries.len()]);
        }
        let largest = match &self.resident {
            Some(_) => n,
            None => self.chunks.iter().map(|c| c.len()).max().unwrap_or(1),
        };
        let per_pass = (SCORES_PER_PASS / largest).max(1);
        let mut work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(queries.len());
        for block in queries.chunks(per_pass) {
            let dq = self.scorer.upload_queries(block, corpus.dim())?;
            let nq = block.len();
            let chunks = match &self.resident {
                Some(dc) => {
                    let Work { scores, hits, .. } = &mut *work;
                    let scores = grow(self.scorer.stream(), scores, nq * n)?;
                    self.scorer.score_device(&dq, dc, None, scores)?;
                    self.select(scores, hits, nq, std::slice::from_ref(&self.docs), 0, k)?;
                    std::slice::from_ref(&self.docs)
                }
                None => {
                    self.score_streamed(&mut work, corpus, &dq, nq, k, pinned)?;
                    &self.chunks[..]
                }
            };
            out.extend(self.collect(&work.hits, nq, chunks, k)?);
        }
        Ok(out)
    }

    /// Enqueue the top-k of `nq` rows of scores over the documents `chunks[i]` into the result
    /// buffers, at chunk `i`'s place (`nq × min(k, largest chunk)` entries per chunk).
    fn select(
        &self,
        scores: &CudaSlice<f32>,
        hits: &mut TopKBuffers,
        nq: usize,
        chunks: &[Range<usize>],
        i: usize,
        k: usize,
    ) -> Result<()> {
        let stride = nq * k.min(chunks.iter().map(|c| c.len()).max().unwrap_or(1));
        let (index, score) = hits.reserve(self.scorer.stream(), chunks.len() * stride)?;
        let (n, kc) = (chunks[i].len(), k.min(chunks[i].len()));
        let at = i * stride..i * stride + nq * kc;
        self.scorer.top_k_enqueue(
            scores,
            nq,
            n,
            kc,
            &mut index.slice_mut(at.clone()),
            &mut score.slice_mut(at),
        )
    }

    /// Wait for the selections of every chunk, download them and merge them per query.
    fn collect(
        &self,
        hits: &TopKBuffers,
        nq: usize,
        chunks: &[Range<usize>],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>> {
        let stride = nq * k.min(chunks.iter().map(|c| c.len()).max().unwrap_or(1));
        let (ix, sc) = hits.download(self.scorer.stream(), chunks.len() * stride)?;
        self.scorer.synchronize()?;
        let mut best = vec![Vec::new(); nq];
        for (i, chunk) in chunks.iter().enumerate() {
            let kc = k.min(chunk.len());
            let at = i * stride..i * stride + nq * kc;
            let hits = hits_from(&ix[at.clone()], &sc[at], kc, chunk.start);
            for (b, h) in best.iter_mut().zip(hits) {
                merge_top_k(b, h, k);
            }
        }
        Ok(best)
    }

    /// Stream the shard's chunks through the two staging slots and enqueue the scoring and
    /// top-k of each. The host blocks only to reuse a pinned buffer (its copy two chunks back
    /// has finished); the copy stream waits on the GPU for the scoring that last read a slot's
    /// device buffer, and the scoring stream for its chunk's copy. So host staging, copies and
    /// scoring of consecutive chunks overlap.
    fn score_streamed(
        &self,
        work: &mut Work,
        corpus: &Corpus,
        dq: &super::DeviceQueries,
        nq: usize,
        k: usize,
        pinned: bool,
    ) -> Result<()> {
        let Work {
            scores,
            hits,
            staging,
        } = work;
        if staging.is_none() {
            let layout = self.layout.ok_or_else(|| {
                Error::DeviceUnavailable("streamed shard without a layout".into())
            })?;
            *staging = Some(Staging::new(
                &self.scorer,
                corpus,
                &self.chunks,
                layout,
                pinned,
            )?);
        }
        let Some(st) = staging.as_mut() else {
            return Err(Error::DeviceUnavailable("streaming buffers missing".into()));
        };
        let largest = self.chunks.iter().map(|c| c.len()).max().unwrap_or(1);
        let stream = self.scorer.stream();
        let scores = grow(stream, scores, nq * largest)?;
        for (i, chunk) in self.chunks.iter().enumerate() {
            let slot = &mut st.slots[i % 2];
            slot.stage(self.scorer.gpu(), &st.copy, corpus, chunk.clone(), pinned)?;
            stream.wait(&slot.copied).map_err(drv("stream wait"))?;
            self.scorer.score_device(dq, &slot.device, None, scores)?;
            slot.scored.record(stream).map_err(drv("event"))?;
            self.select(scores, hits, nq, &self.chunks, i, k)?;
        }
        Ok(())
    }
}

impl Staging {
    /// Buffers for the largest chunk; the pinned token buffers only when chunks are staged
    /// (the corpus is not `pinned` in place).
    fn new(
        scorer: &CudaScorer,
        corpus: &Corpus,
        chunks: &[Range<usize>],
        layout: ChunkLayout,
        pinned: bool,
    ) -> Result<Self> {
        let offsets = corpus.offsets();
        let row = corpus.dim() * corpus.dtype().size();
        let max_docs = chunks.iter().map(|c| c.len()).max().unwrap_or(1);
        let max_tokens = chunks
            .iter()
            .map(|c| offsets[c.end] - offsets[c.start])
            .max()
            .unwrap_or(1)
            .max(1);
        let max_bytes = max_tokens * row;
        let copy = scorer.gpu().ctx.new_stream().map_err(drv("copy stream"))?;
        let slot = || -> Result<Slot> {
            // SAFETY (both): staged bytes are written by `stage` before a copy reads them.
            let staged = if pinned { 1 } else { max_bytes };
            let tokens = unsafe { scorer.gpu().ctx.alloc_pinned::<u8>(staged) }
                .map_err(drv("pinned staging buffer"))?;
            let offsets = unsafe { scorer.gpu().ctx.alloc_pinned::<i64>(max_docs + 1) }
                .map_err(drv("pinned staging buffer"))?;
            let stream = scorer.stream();
            let device = DeviceCorpus::chunk_room(stream, corpus, layout, max_docs, max_tokens)?;
            let narrow = match layout.padded(corpus) {
                // SAFETY: each chunk's bytes are copied in before they are re-pitched.
                true => {
                    Some(unsafe { stream.alloc::<u8>(max_bytes) }.map_err(drv("chunk buffer"))?)
                }
                false => None,
            };
            Ok(Slot {
                tokens,
                offsets,
                device,
                narrow,
                copied: scorer.gpu().ctx.new_event(None).map_err(drv("event"))?,
                scored: scorer.gpu().ctx.new_event(None).map_err(drv("event"))?,
            })
        };
        let slots = [slot()?, slot()?];
        // The device buffers were allocated on the scoring stream; the copy stream must not
        // write them before that allocation is done.
        scorer.synchronize()?;
        Ok(Staging { copy, slots })
    }
}

impl Slot {
    /// Enqueue on the copy stream, after the scoring that last read the device buffer, the copy
    /// of chunk `docs` to the device, recorded by `copied`: straight from the corpus when its
    /// memory is `pinned` in place, else staged into the slot's pinned buffer first (all cores).
    fn stage(
        &mut self,
        gpu: &GpuContext,
        copy: &Arc<CudaStream>,
        corpus: &Corpus,
        docs: Range<usize>,
        pinned: bool,
    ) -> Result<()> {
        // The slot's previous copy must have finished reading the pinned buffers.
        self.copied.synchronize().map_err(drv("event"))?;
        let offsets = corpus.offsets();
        let row = corpus.dim() * corpus.dtype().size();
        let (first, last) = (offsets[docs.start], offsets[docs.end]);
        let src = &corpus.tokens().elements().as_bytes()[first * row..last * row];
        if !pinned {
            let buf = self.tokens.as_mut_slice().map_err(drv("pinned buffer"))?;
            const PIECE: usize = 4 << 20;
            buf[..src.len()]
                .par_chunks_mut(PIECE)
                .zip(src.par_chunks(PIECE))
                .for_each(|(d, s)| d.copy_from_slice(s));
        }
        let off = self.offsets.as_mut_slice().map_err(drv("pinned buffer"))?;
        for (d, &o) in off.iter_mut().zip(&offsets[docs.start..=docs.end]) {
            *d = (o - first) as i64;
        }
        let rows = last - first;
        self.device
            .hold(docs.len(), rows * self.device.width * corpus.dtype().size());
        copy.wait(&self.scored).map_err(drv("stream wait"))?;
        let (wide, _g0) = self.device.tokens.device_ptr(copy);
        let (dt, _g1) = match &self.narrow {
            Some(n) => n.device_ptr(copy),
            None => self.device.tokens.device_ptr(copy),
        };
        let (dof, _g2) = self.device.offsets.device_ptr(copy);
        let staged = self.tokens.as_slice().map_err(drv("pinned buffer"))?;
        let from = if pinned { src } else { &staged[..src.len()] };
        let off = self.offsets.as_slice().map_err(drv("pinned buffer"))?;
        // SAFETY: the destinations hold at least as many bytes as copied (sized for the largest
        // chunk) and no kernel reads them until `copied`; the sources are page-locked (the
        // corpus in place, or the staging buffer) and stay untouched until `copied` is reached.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(dt, from, copy.cu_stream())
                .map_err(drv("chunk copy"))?;
            cudarc::driver::result::memcpy_htod_async(
                dof,
                &off[..docs.len() + 1],
                copy.cu_stream(),
            )
            .map_err(drv("chunk copy"))?;
        }
        if self.narrow.is_some() {
            let unit = corpus.dtype().size() / 2;
            let (from, to) = (corpus.dim() * unit, self.device.width * unit);
            // SAFETY: the narrow buffer holds the chunk's `rows` rows of d (copied just before,
            // on this stream), the room `rows` rows of its width (sized for the largest chunk);
            // both stay untouched until `copied`, as above.
            unsafe { launch_repitch(gpu, copy, dt, wide, rows, from, to) }?;
        }
        self.copied.record(copy).map_err(drv("event"))
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
            let s = split_by_tokens(c.offsets(), parts);
            assert_eq!(s.len(), parts);
            assert_eq!(s[0].start, 0);
            assert_eq!(s[parts - 1].end, c.len());
            for w in s.windows(2) {
                assert_eq!(w[0].end, w[1].start, "{parts} parts: {s:?}");
            }
        }
        // 24 tokens: the first document boundary at or past 12 tokens.
        assert_eq!(split_by_tokens(c.offsets(), 2), vec![0..5, 5..8]);
    }

    #[test]
    fn chunks_respect_the_byte_budget_and_take_oversized_documents_alone() {
        let c = corpus(&[5, 1, 1, 1, 9, 2, 2, 3]);
        let row = 2 * 4;
        let chunks = plan_chunks(c.offsets(), row, 1..8, 4 * row);
        assert_eq!(chunks, vec![1..4, 4..5, 5..7, 7..8]);
        for ch in &chunks {
            let tokens = c.offsets()[ch.end] - c.offsets()[ch.start];
            assert!(tokens <= 4 || ch.len() == 1, "{ch:?}: {tokens} tokens");
        }
        assert_eq!(plan_chunks(c.offsets(), row, 0..8, usize::MAX), vec![0..8]);
        assert_eq!(
            plan_chunks(c.offsets(), row, 3..3, 100),
            Vec::<Range<usize>>::new()
        );
        assert_eq!(plan_chunks(c.offsets(), row, 0..8, 1).len(), 8);
    }

    #[test]
    fn a_padded_chunk_counts_its_stored_row_and_its_row_at_d() {
        let lens = [3usize, 4, 5];
        let d = 77;
        let v = vec![half::f16::ONE; 12 * d];
        let c = Corpus::from_lengths(v, d, &lens).expect("corpus");
        let padded = ChunkLayout::of(&c, |_| 80);
        assert!(padded.padded(&c));
        assert_eq!(padded.token_bytes(&c), (80 + 77) * 2);
        let plain = ChunkLayout::of(&c, |_| d);
        assert!(!plain.padded(&c));
        assert_eq!(plain.token_bytes(&c), 77 * 2);
        // One budget, 8 rows at d: 8 tokens a chunk unpadded, 3 padded (each chunk's device
        // bytes within it, or one document alone).
        let budget = 8 * 77 * 2;
        let at_d = plan_chunks(c.offsets(), plain.token_bytes(&c), 0..3, budget);
        assert_eq!(at_d, vec![0..2, 2..3]);
        let chunks = plan_chunks(c.offsets(), padded.token_bytes(&c), 0..3, budget);
        assert_eq!(chunks, vec![0..1, 1..2, 2..3]);
        let longer = plan_chunks(c.offsets(), padded.token_bytes(&c), 0..3, 7 * 157 * 2);
        assert_eq!(longer, vec![0..2, 2..3]);
        // A width under d is never taken.
        assert_eq!(ChunkLayout::of(&c, |_| 8).width, d);
    }
}

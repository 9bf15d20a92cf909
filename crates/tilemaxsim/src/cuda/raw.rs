//! Device memory the engine does not own, made ready for `CudaScorer::score_raw` (which
//! chooses and enqueues): tensors as PyTorch hands them over (data pointer, dtype, shape,
//! strides in elements), on the caller's stream, in the device's primary context. Nothing is
//! copied to the host and nothing waits.
//!
//! - Queries (small, their token counts known on the host) are gathered on the device by
//!   `pack_queries_*` (kernels/utility.cu) into the engine's own layout: contiguous f32 rows
//!   and, where the tensor cores can take them (f16/bf16 of the documents' dtype, d
//!   instantiated), 32-row blocks.
//! - Documents are scored in place. Packed rows `[T, d]` and dense batches `[N, L, d]` with
//!   contiguous rows go to the kernel the engine picks for the shape (`maxsim_bulk` on the
//!   H100, as for a corpus it uploaded itself); any other strides, and padded batches with
//!   per-document lengths, go to the general kernel, which reads `DocRows`.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

use super::context::GpuContext;
use super::device::drv;
use super::launch::DocRows;
use super::memory::{DeviceBlocks, DeviceCorpus, DeviceQueries, Mem, block_layout, blocks_dim_ok};
use super::plan::{DocLengths, QBLOCK, queries_dim_ok};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// Query token rows in device memory. Query `i` is `spans[i].1` rows, the first at element
/// `spans[i].0` of `tokens`, each `row_stride` elements after the one before, its `dim`
/// elements contiguous: `[Q, L, d]` padded queries are spans `(i × stride(0), len_i)`, packed
/// `[T, d]` ones `(first_row_i × row_stride, len_i)`.
#[derive(Clone, Copy, Debug)]
pub struct RawQueries<'a> {
    pub tokens: u64,
    pub dtype: DType,
    pub dim: usize,
    pub row_stride: usize,
    pub spans: &'a [(usize, usize)],
}

/// How the documents' rows lie in device memory.
#[derive(Clone, Copy, Debug)]
pub enum RawLayout {
    /// Packed rows `[rows, d]`: document i is rows `offsets[i] .. offsets[i + 1]` (`offsets`:
    /// `docs + 1` non-decreasing i64 within `0..=rows`, on the device).
    Packed {
        offsets: u64,
        docs: usize,
        rows: usize,
    },
    /// A padded batch `[docs, max_len, d]`: document i starts at element `i × batch_stride`
    /// and has `lengths[i]` rows (`lengths`: `docs` i64 on the device, clamped to
    /// `0 ..= max_len`; 0 for "every document has `max_len` rows").
    Padded {
        docs: usize,
        max_len: usize,
        batch_stride: usize,
        lengths: u64,
    },
}

/// Document token rows in device memory: `dim` contiguous elements per row, rows
/// `row_stride` elements apart, laid out as `layout` says.
#[derive(Clone, Copy, Debug)]
pub struct RawDocs {
    pub tokens: u64,
    pub dtype: DType,
    pub dim: usize,
    pub row_stride: usize,
    pub layout: RawLayout,
    /// f32 documents whose every row the caller has checked is in the tensor cores' split
    /// range (as `split_rows_ok` does on the host: |x| ≤ 32768, and each row all zeros or
    /// with a largest |x| ≥ 2^-12): `maxsim_bulk_split` may score them. Otherwise (and for
    /// any row out of range) the exact CUDA-core kernel does. Ignored for 16-bit documents.
    pub split_ok: bool,
}

impl RawDocs {
    /// Documents described.
    pub fn len(&self) -> usize {
        match self.layout {
            RawLayout::Packed { docs, .. } | RawLayout::Padded { docs, .. } => docs,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements from `tokens` to one past the last one any document reaches.
    fn extent(&self) -> usize {
        let span = |rows: usize| rows.saturating_sub(1) * self.row_stride + self.dim;
        match self.layout {
            RawLayout::Packed { rows, .. } => span(rows),
            RawLayout::Padded {
                docs,
                max_len,
                batch_stride,
                ..
            } => docs.saturating_sub(1) * batch_stride + span(max_len),
        }
    }
}

/// One raw scoring call: `out[q × n + i]` (f32, contiguous) is the score of query q against
/// document `candidates[i]` (`candidates`: a device pointer to `n` i64 indices below
/// `docs.len()`), or document i with no candidate list (n = `docs.len()`).
#[derive(Clone, Copy, Debug)]
pub struct RawArgs<'a> {
    pub queries: RawQueries<'a>,
    pub docs: RawDocs,
    pub candidates: Option<(u64, usize)>,
    pub out: u64,
}

/// What the gather and the kernels need to know of the query spans, uploaded once per shape
/// (`RawCache::meta`) or for this call: offsets (Q + 1 i64), block rows (one i32 per block) and
/// each query's first block (Q + 1 i32), with the gather's source starts (Q i64).
struct SpanMeta {
    /// The upload of this call (`None`: a cached one); the `DeviceQueries` keeps it.
    up: Option<CudaSlice<u8>>,
    base: u64,
    src: usize,
    offsets: usize,
    rows_at: usize,
    start_at: usize,
    blocks: usize,
}

impl SpanMeta {
    fn upload(
        gpu: &GpuContext,
        cache: &RawCache,
        stream: &Arc<CudaStream>,
        q: &RawQueries<'_>,
    ) -> Result<Self> {
        // One upload, 8-byte sections: source starts (i64, Q), offsets (i64, Q + 1), block rows
        // (i32, one per block), each query's first block (i32, Q + 1).
        let mut meta = Meta::default();
        let src = meta.i64s(q.spans.iter().map(|s| s.0 as i64));
        let offsets = meta.i64s(std::iter::once(0).chain(q.spans.iter().scan(0i64, |t, s| {
            *t += s.1 as i64;
            Some(*t)
        })));
        let (rows, start) =
            block_layout(q.spans.iter().map(|s| s.1)).ok_or_else(|| too_many("query blocks"))?;
        let rows_at = meta.i32s(&rows);
        // Query q's first block is start[q]: the gather's `dst_block`.
        let start_at = meta.i32s(&start);
        // The same spans (a repeated shape) reuse their upload; others upload for this call.
        let (up, base) = match cache.meta(gpu, &meta.bytes)? {
            Some(base) => (None, base),
            None => {
                let up = stream
                    .clone_htod(&meta.bytes)
                    .map_err(drv("query upload"))?;
                let base = up.device_ptr(stream).0;
                (Some(up), base)
            }
        };
        Ok(SpanMeta {
            up,
            base,
            src,
            offsets,
            rows_at,
            start_at,
            blocks: rows.len(),
        })
    }

    /// The device address of the section at byte `at`.
    fn at(&self, at: usize) -> u64 {
        self.base + at as u64
    }

    /// The queries over `tokens` (f32 rows or none) and `blocks` (32-row blocks or none).
    fn queries(
        self,
        stream: &Arc<CudaStream>,
        q: &RawQueries<'_>,
        tokens: Option<Mem<f32>>,
        blocks: Option<Mem<u16>>,
    ) -> DeviceQueries {
        let count = q.spans.len();
        let mma = blocks.map(|tokens| DeviceBlocks {
            dtype: q.dtype,
            blocks: self.blocks,
            tokens,
            // SAFETY: sections of the upload (one i32 per block, Q + 1 block starts), kept
            // alive by the DeviceQueries (`_meta`) or the cache.
            rows: unsafe { Mem::borrowed(stream, self.at(self.rows_at), self.blocks) },
            start: unsafe { Mem::borrowed(stream, self.at(self.start_at), count + 1) },
        });
        DeviceQueries {
            tokens,
            // SAFETY: a section of the upload (Q + 1 i64), kept alive as above.
            offsets: unsafe { Mem::borrowed(stream, self.at(self.offsets), count + 1) },
            len: count,
            dim: q.dim,
            dtype: q.dtype,
            repitched: Default::default(),
            longest: q.spans.iter().map(|s| s.1).max().unwrap_or(0),
            mma,
            _meta: self.up,
        }
    }
}

/// The queries of `q` read where they lie, as the tensor-core kernels' 32-row blocks, when
/// they already are that layout: 16-bit of the documents' dtype at a d with blocks, rows
/// contiguous, every query a whole number of blocks (Lq a multiple of 32) and each right after
/// the one before, from a first row at an address the engine's own buffers would have
/// (256-byte aligned; it need not be `q.tokens`: one pair of `maxsim_pairs` is query i of a
/// larger tensor). Nothing is gathered or allocated; the result has no f32 rows, so only the
/// kernels that read the blocks may score it (`None`: the layout is not that one).
///
/// # Safety
/// Every span's rows must be live device memory of `q.dtype` in this context.
pub(super) unsafe fn queries_in_place(
    gpu: &GpuContext,
    cache: &RawCache,
    stream: &Arc<CudaStream>,
    q: &RawQueries<'_>,
    doc_dtype: DType,
) -> Result<Option<DeviceQueries>> {
    let Some(first) = blocks_in_place(q, doc_dtype) else {
        return Ok(None);
    };
    let meta = SpanMeta::upload(gpu, cache, stream, q)?;
    let rows: usize = q.spans.iter().map(|s| s.1).sum();
    // SAFETY: the caller's rows (this function's contract): `rows` contiguous rows of d
    // elements from `first`, block b at rows b·32 ..
    let blocks = unsafe { Mem::borrowed(stream, first, rows * q.dim) };
    Ok(Some(meta.queries(stream, q, None, Some(blocks))))
}

/// The device address of the first query's first row when `q` already is the tensor-core
/// kernels' 32-row blocks against documents of `doc_dtype` (see `queries_in_place`).
fn blocks_in_place(q: &RawQueries<'_>, doc_dtype: DType) -> Option<u64> {
    let (dim, start) = (q.dim, q.spans.first()?.0);
    let mut row = 0;
    let mut whole_blocks = q.spans.iter().map(|s| {
        let ok = s.1.is_multiple_of(QBLOCK) && s.0 == start + row * dim;
        row += s.1;
        ok
    });
    let first = q.tokens + (start * q.dtype.size()) as u64;
    (q.dtype == doc_dtype
        && q.dtype != DType::F32
        && blocks_dim_ok(q.dtype, dim)
        && q.row_stride == dim
        && first.is_multiple_of(256)
        && whole_blocks.all(|b| b))
    .then_some(first)
}

/// The queries of `q` gathered on `stream` into the engine's layout (`pack_queries_*`):
/// f32 rows, and 32-row blocks where the tensor cores can take them against `doc_dtype`.
/// What the gather and the kernels need to know of the spans goes up in one copy.
///
/// # Safety
/// Every span's rows must be live device memory of `q.dtype` in this context.
pub(super) unsafe fn gather_queries(
    gpu: &GpuContext,
    cache: &RawCache,
    stream: &Arc<CudaStream>,
    q: &RawQueries<'_>,
    doc_dtype: DType,
) -> Result<DeviceQueries> {
    let (dim, count) = (q.dim, q.spans.len());
    let blocks_ok = q.dtype == doc_dtype && q.dtype != DType::F32 && blocks_dim_ok(q.dtype, dim);
    let meta = SpanMeta::upload(gpu, cache, stream, q)?;
    let tokens_total: usize = q.spans.iter().map(|s| s.1).sum();
    // SAFETY: `pack_queries_*` writes every one of the tokens_total × d floats and, with
    // blocks, every element of every query's blocks.
    let tokens =
        unsafe { stream.alloc::<f32>((tokens_total * dim).max(1)) }.map_err(drv("query buffer"))?;
    let blocks = if blocks_ok {
        // SAFETY: as `tokens`.
        let b = unsafe { stream.alloc::<u16>((meta.blocks * QBLOCK * dim).max(1)) }
            .map_err(drv("query buffer"))?;
        Some(Mem::owned(b))
    } else {
        None
    };
    let func = gpu
        .kernels
        .pack_queries
        .iter()
        .find(|(t, _)| *t == q.dtype)
        .map(|(_, f)| f)
        .ok_or_else(|| Error::Argument(format!("no query gather for {}", q.dtype)))?;
    let longest = q
        .spans
        .iter()
        .map(|s| s.1.div_ceil(QBLOCK) * QBLOCK)
        .max()
        .unwrap_or(1);
    let cfg = LaunchConfig {
        grid_dim: (count as u32, longest.min(65_535) as u32, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let (row_stride, d) = (q.row_stride as i64, dim as i32);
    let (tp, bp) = (
        tokens.device_ptr(stream).0,
        blocks.as_ref().map_or(0, |b| b.device_ptr(stream).0),
    );
    let (sp, op, fp) = (
        meta.at(meta.src),
        meta.at(meta.offsets),
        meta.at(meta.start_at),
    );
    let mut b = stream.launch_builder(func);
    b.arg(&q.tokens)
        .arg(&sp)
        .arg(&row_stride)
        .arg(&op)
        .arg(&fp)
        .arg(&d)
        .arg(&tp)
        .arg(&bp);
    // SAFETY: the arguments match `pack_queries_*` in kernels/utility.cu: one source start
    // per query, Q + 1 offsets and Q + 1 first blocks (sections of the upload), `tp` holds the
    // offsets' total rows of d floats, `bp` null or every query's blocks of 32 × d; the source
    // rows are the caller's (this function's contract).
    unsafe { b.launch(cfg) }.map_err(drv("query gather launch"))?;
    Ok(meta.queries(stream, q, Some(Mem::owned(tokens)), blocks))
}

/// The documents as a `DeviceCorpus` over the caller's memory, when the packed-corpus
/// kernels can read them in place: contiguous rows, packed by offsets or a dense batch
/// (every document `max_len` rows, given offsets `i × max_len` made here). `None`: only the
/// general kernel can (other strides, or per-document lengths of a padded batch).
pub(super) fn borrow_corpus(
    gpu: &GpuContext,
    cache: &RawCache,
    stream: &Arc<CudaStream>,
    docs: &RawDocs,
) -> Result<Option<DeviceCorpus>> {
    if docs.row_stride != docs.dim {
        return Ok(None);
    }
    let count = docs.len();
    let bytes = docs.extent() * docs.dtype.size();
    let (offsets, lengths) = match docs.layout {
        RawLayout::Packed { offsets, rows, .. } => (
            // SAFETY: the caller's `docs + 1` offsets (score_raw's contract).
            unsafe { Mem::borrowed(stream, offsets, count + 1) },
            DocLengths::mean(count, rows),
        ),
        RawLayout::Padded {
            max_len,
            batch_stride,
            lengths: 0,
            ..
        } if batch_stride == max_len * docs.dim => (
            match cache.dense(gpu, count, max_len)? {
                // SAFETY: a cached `count + 1` offsets, alive as long as the scorer.
                Some(ptr) => unsafe { Mem::borrowed(stream, ptr, count + 1) },
                None => Mem::owned(dense_offsets(gpu, stream, count, max_len)?),
            },
            DocLengths::dense(count, max_len),
        ),
        RawLayout::Padded { .. } => return Ok(None),
    };
    Ok(Some(DeviceCorpus {
        // SAFETY: the caller's rows (score_raw's contract), `bytes` of them.
        tokens: unsafe { Mem::borrowed(stream, docs.tokens, bytes) },
        offsets,
        dtype: docs.dtype,
        width: docs.dim,
        dim: docs.dim,
        len: count,
        bytes,
        // f32 documents only where the caller checked the split's range.
        split_ok: docs.split_ok && docs.dtype == DType::F32,
        planes: None,
        lengths,
    }))
}

/// `0, step, 2 step, …, count × step` on the device (`iota_offsets`), on `stream`.
fn dense_offsets(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    count: usize,
    step: usize,
) -> Result<CudaSlice<i64>> {
    // SAFETY: `iota_offsets` writes all count + 1 of them.
    let out = unsafe { stream.alloc::<i64>(count + 1) }.map_err(drv("offsets buffer"))?;
    let cfg = LaunchConfig {
        grid_dim: ((count + 1).div_ceil(256).min(4096) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let (p, c, s) = (out.device_ptr(stream).0, count as i64, step as i64);
    let mut b = stream.launch_builder(&gpu.kernels.iota_offsets);
    b.arg(&p).arg(&c).arg(&s);
    // SAFETY: `iota_offsets(out, count, step)` writes count + 1 i64 into `out`, which holds them.
    unsafe { b.launch(cfg) }.map_err(drv("offsets launch"))?;
    Ok(out)
}

/// Uploads that repeat across `score_raw` calls of one shape, kept for the scorer's life: the
/// query metadata of given spans (the same bytes) and a dense batch's offsets per (documents,
/// rows). Each is made on the scorer's own stream, which is then synchronized, so a call on any
/// stream may read it; entries are never freed while the scorer lives (a kernel on a caller's
/// stream may still read one), so the tables are bounded and a shape past them uploads per call.
#[derive(Default)]
pub(super) struct RawCache {
    meta: Mutex<Vec<(Vec<u8>, CudaSlice<u8>)>>,
    /// Keyed by (documents, rows each).
    dense: Mutex<Vec<DenseOffsets>>,
}

type DenseOffsets = ((usize, usize), CudaSlice<i64>);

/// Entries per table, and the largest dense batch whose offsets are kept.
const CACHED_SHAPES: usize = 64;
const CACHED_DENSE_DOCS: usize = 1 << 20;

impl RawCache {
    /// The device address of `bytes`, uploaded once; `None` when the table is full.
    fn meta(&self, gpu: &GpuContext, bytes: &[u8]) -> Result<Option<u64>> {
        // A poisoned lock only means a panic elsewhere; the table stays valid.
        let mut table = self.meta.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, buf)) = table.iter().find(|(k, _)| k == bytes) {
            return Ok(Some(buf.device_ptr(&gpu.stream).0));
        }
        if table.len() >= CACHED_SHAPES {
            return Ok(None);
        }
        let buf = gpu.stream.clone_htod(bytes).map_err(drv("query upload"))?;
        gpu.synchronize()?;
        let ptr = buf.device_ptr(&gpu.stream).0;
        table.push((bytes.to_vec(), buf));
        Ok(Some(ptr))
    }

    /// `0, step, …, count × step` on the device, made once; `None` past the table's bounds.
    fn dense(&self, gpu: &GpuContext, count: usize, step: usize) -> Result<Option<u64>> {
        let mut table = self.dense.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, buf)) = table.iter().find(|(k, _)| *k == (count, step)) {
            return Ok(Some(buf.device_ptr(&gpu.stream).0));
        }
        if table.len() >= CACHED_SHAPES || count > CACHED_DENSE_DOCS {
            return Ok(None);
        }
        let buf = dense_offsets(gpu, &gpu.stream, count, step)?;
        gpu.synchronize()?;
        let ptr = buf.device_ptr(&gpu.stream).0;
        table.push(((count, step), buf));
        Ok(Some(ptr))
    }
}

/// The general kernel's view of documents as they lie.
pub(super) fn doc_rows(docs: &RawDocs) -> DocRows {
    let (offsets, lengths, batch_stride, max_len) = match docs.layout {
        RawLayout::Packed { offsets, .. } => (offsets, 0, 0, 0),
        RawLayout::Padded {
            max_len,
            batch_stride,
            lengths,
            ..
        } => (0, lengths, batch_stride as i64, max_len as i64),
    };
    DocRows {
        tokens: docs.tokens,
        offsets,
        lengths,
        row_stride: docs.row_stride as i64,
        batch_stride,
        max_len,
    }
}

/// Host bytes of several arrays laid out for one upload, each at an 8-byte boundary.
#[derive(Default)]
struct Meta {
    bytes: Vec<u8>,
}

impl Meta {
    /// Append i64s; returns where they start.
    fn i64s(&mut self, v: impl Iterator<Item = i64>) -> usize {
        let at = self.bytes.len();
        v.for_each(|x| self.bytes.extend_from_slice(&x.to_ne_bytes()));
        at
    }

    /// Append i32s (then pad to 8 bytes); returns where they start.
    fn i32s(&mut self, v: &[i32]) -> usize {
        let at = self.bytes.len();
        v.iter()
            .for_each(|x| self.bytes.extend_from_slice(&x.to_ne_bytes()));
        self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
        at
    }
}

fn too_many(what: &str) -> Error {
    Error::Argument(format!("too many {what} for one launch"))
}

/// The checks the host can make of a raw call.
pub(super) fn check(
    q: &RawQueries<'_>,
    docs: &RawDocs,
    candidates: Option<(u64, usize)>,
    out: u64,
) -> Result<()> {
    queries_dim_ok(q.dim, docs.dim)?;
    if docs.dim == 0 {
        return Err(Error::Argument("embeddings of dimension 0".into()));
    }
    if let Some(i) = q.spans.iter().position(|s| s.1 == 0) {
        return Err(Error::EmptyQuery { index: i });
    }
    let n = candidates.map_or(docs.len(), |c| c.1);
    let null = |what: &str| Error::Argument(format!("{what} is a null device pointer"));
    if !q.spans.is_empty() && q.tokens == 0 {
        return Err(null("the query tokens"));
    }
    if n > 0 && !q.spans.is_empty() {
        if docs.tokens == 0 {
            return Err(null("the document tokens"));
        }
        if out == 0 {
            return Err(null("the output"));
        }
        if let RawLayout::Packed { offsets: 0, .. } = docs.layout {
            return Err(null("the document offsets"));
        }
        if let Some((0, _)) = candidates {
            return Err(null("the candidate list"));
        }
    }
    if let RawLayout::Padded {
        max_len: 0,
        docs: d,
        ..
    } = docs.layout
        && d > 0
    {
        return Err(Error::EmptyDocument { index: 0 });
    }
    if docs.len() > i32::MAX as usize || n > i32::MAX as usize || q.spans.len() > i32::MAX as usize
    {
        return Err(too_many("documents or queries"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_sections_sit_on_8_byte_boundaries() {
        let mut m = Meta::default();
        assert_eq!(m.i64s([1i64, 2, 3].into_iter()), 0);
        assert_eq!(m.i32s(&[7, 8, 9]), 24);
        assert_eq!(m.i32s(&[10]), 40);
        assert_eq!(m.i64s(std::iter::once(-1)), 48);
        assert_eq!(m.bytes.len(), 56);
        let i32_at = |at: usize| i32::from_ne_bytes(m.bytes[at..at + 4].try_into().unwrap());
        assert_eq!((i32_at(24), i32_at(32), i32_at(40)), (7, 9, 10));
    }

    #[test]
    fn only_whole_contiguous_blocks_are_read_in_place() {
        let q = RawQueries {
            tokens: 1 << 20,
            dtype: DType::F16,
            dim: 128,
            row_stride: 128,
            spans: &[(0, 32), (32 * 128, 64), (96 * 128, 32)],
        };
        assert_eq!(blocks_in_place(&q, DType::F16), Some(1 << 20));
        assert!(
            blocks_in_place(
                &RawQueries {
                    dim: 77,
                    row_stride: 77,
                    spans: &[(0, 32)],
                    ..q
                },
                DType::F16
            )
            .is_some()
        );
        // One query of a larger tensor (a pair of `maxsim_pairs`): read from its own first row.
        let pair = RawQueries {
            spans: &[(3 * 32 * 128, 32)],
            ..q
        };
        assert_eq!(
            blocks_in_place(&pair, DType::F16),
            Some((1 << 20) + 3 * 32 * 128 * 2)
        );
        // Another dtype than the documents', f32, rows apart, an unaligned start (of the tensor
        // or of its first query), a query that ends inside a block, a gap or a reordering
        // between queries, none at all.
        assert!(blocks_in_place(&q, DType::BF16).is_none());
        let f32 = RawQueries {
            dtype: DType::F32,
            ..q
        };
        assert!(blocks_in_place(&f32, DType::F32).is_none());
        assert!(
            blocks_in_place(
                &RawQueries {
                    row_stride: 136,
                    ..q
                },
                DType::F16
            )
            .is_none()
        );
        assert!(
            blocks_in_place(
                &RawQueries {
                    tokens: (1 << 20) + 128,
                    ..q
                },
                DType::F16
            )
            .is_none()
        );
        let odd = RawQueries {
            dim: 77,
            row_stride: 77,
            spans: &[(77, 32)],
            ..q
        };
        assert!(blocks_in_place(&odd, DType::F16).is_none());
        for spans in [
            &[(0, 32), (32 * 128, 33)][..],
            &[(0, 31)],
            &[(0, 32), (40 * 128, 32)],
            &[(32 * 128, 32), (0, 32)],
            &[],
        ] {
            assert!(
                blocks_in_place(&RawQueries { spans, ..q }, DType::F16).is_none(),
                "{spans:?}"
            );
        }
    }

    #[test]
    fn raw_calls_are_checked_on_the_host() {
        let docs = RawDocs {
            tokens: 256,
            dtype: DType::F16,
            dim: 8,
            row_stride: 8,
            layout: RawLayout::Padded {
                docs: 3,
                max_len: 4,
                batch_stride: 40,
                lengths: 0,
            },
            split_ok: false,
        };
        assert_eq!(docs.len(), 3);
        // Two strides of 40 to the last document, three rows of 8 into it, then its 8 elements.
        assert_eq!(docs.extent(), 2 * 40 + 3 * 8 + 8);
        let q = RawQueries {
            tokens: 512,
            dtype: DType::F16,
            dim: 8,
            row_stride: 8,
            spans: &[(0, 3)],
        };
        assert!(check(&q, &docs, None, 1024).is_ok());
        assert!(check(&q, &docs, Some((0, 2)), 1024).is_err());
        assert!(check(&RawQueries { dim: 7, ..q }, &docs, None, 1024).is_err());
        assert!(matches!(
            check(
                &RawQueries {
                    spans: &[(0, 3), (9, 0)],
                    ..q
                },
                &docs,
                None,
                1024
            ),
            Err(Error::EmptyQuery { index: 1 })
        ));
        // Nothing to score: no pointer is needed.
        let none = RawQueries {
            spans: &[],
            tokens: 0,
            ..q
        };
        assert!(check(&none, &docs, None, 0).is_ok());
    }
}

//! Device memory: buffers the engine owns or borrows ([`Mem`]), a corpus and queries on the device
//! ([`DeviceCorpus`], [`DeviceQueries`] with their 32-row blocks for the tensor cores), their
//! uploads and downloads, and the f32 split (an f32 as f16 high and low parts) `maxsim_ring` scores;
//! an f32 corpus's split planes (`DeviceCorpus::planes`) are made by `launch::add_planes`.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};

use super::device::drv;
use super::plan::{DocLengths, QBLOCK, SPAN_ANY_MAX_DIM, WIDE_DIMS, ring_instance, wide_any_bound};
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::{DType, Matrix};
use crate::scorer::Docs;

/// A device buffer the engine owns (freed on drop) or borrows (device memory of the caller's,
/// `score_raw`: left alone on drop).
pub(super) struct Mem<T> {
    pub(super) slice: std::mem::ManuallyDrop<CudaSlice<T>>,
    pub(super) owned: bool,
}

impl<T> Mem<T> {
    pub(super) fn owned(slice: CudaSlice<T>) -> Self {
        Mem {
            slice: std::mem::ManuallyDrop::new(slice),
            owned: true,
        }
    }
    /// `len` elements at `ptr`, not freed on drop.
    ///
    /// # Safety
    /// `ptr` must hold `len` elements of `T` in `stream`'s context for as long as the `Mem` lives.
    pub(super) unsafe fn borrowed(stream: &Arc<CudaStream>, ptr: u64, len: usize) -> Self {
        // SAFETY: forwarded to the caller; event tracking is off, so nothing else is attached.
        let slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
        Mem {
            slice: std::mem::ManuallyDrop::new(slice),
            owned: false,
        }
    }
}

impl<T> std::ops::Deref for Mem<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> std::ops::DerefMut for Mem<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

impl<T> Drop for Mem<T> {
    fn drop(&mut self) {
        // SAFETY: `slice` is taken once, here, and not used after.
        let slice = unsafe { std::mem::ManuallyDrop::take(&mut self.slice) };
        if self.owned {
            drop(slice);
        } else {
            slice.leak();
        }
    }
}

/// A corpus in GPU memory: the packed tokens (as stored: f32, f16 or bf16) and the offsets.
pub struct DeviceCorpus {
    pub(super) tokens: Mem<u8>,
    pub(super) offsets: Mem<i64>,
    pub(super) dtype: DType,
    /// The width `tokens`' rows are stored at, which the kernels read as their d: `dim`, or past
    /// it, zeros in the padding, where the upload padded them (`plan::stored_dim`, `pitch.rs`).
    pub(super) width: usize,
    /// The corpus's own d (what its queries must have).
    pub(super) dim: usize,
    pub(super) len: usize,
    pub(super) bytes: usize,
    /// f32 tokens all in the split's range (`split_rows_ok`): `maxsim_ring` can score them
    /// exactly as f16 high and low parts.
    pub(super) split_ok: bool,
    /// The f32 tokens split once into f16 planes (`maxsim_bulk_planes`; `split_f32_planes` in
    /// kernels/bulk_split.cu), beside `tokens`, where the scorer made them at upload
    /// (`CudaScorer::upload_range`).
    pub(super) planes: Option<Mem<u8>>,
    /// What the kernel choice needs of its documents' lengths.
    pub(super) lengths: DocLengths,
}

impl DeviceCorpus {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// The width the rows are stored at on the device: `dim()`, or more where the upload padded
    /// them (zeros past `dim()`) for a faster kernel.
    pub fn stored_dim(&self) -> usize {
        self.width
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Whether the upload split the f32 tokens into f16 planes (`CudaScorer::f32_planes`).
    pub fn has_f32_planes(&self) -> bool {
        self.planes.is_some()
    }
    /// Bytes of token embeddings on the device (with the f32 split's planes, where made).
    pub fn size_bytes(&self) -> usize {
        self.bytes * if self.planes.is_some() { 2 } else { 1 }
    }
}

/// Queries in GPU memory: f32 tokens (widened exactly from any input dtype) and offsets, plus,
/// when every query can take the tensor-core path, their raw 16-bit tokens in 32-row blocks.
pub struct DeviceQueries {
    /// `None`: the queries are the caller's own blocks, read in place (`score_raw`), and only
    /// the tensor-core kernels, which read the blocks, may score them.
    pub(super) tokens: Option<Mem<f32>>,
    pub(super) offsets: Mem<i64>,
    pub(super) len: usize,
    pub(super) dim: usize,
    /// The queries' own dtype (`tokens` holds them widened to f32).
    pub(super) dtype: DType,
    /// Their rows re-pitched to padded corpora, made at the first call against each pitch
    /// (`pitch::queries_at`) and kept while the queries live.
    pub(super) repitched: Repitched,
    /// Rows of the longest query.
    pub(super) longest: usize,
    pub(super) mma: Option<DeviceBlocks>,
    /// Where `offsets` and the blocks' `rows` and `start` are views into one upload
    /// (`score_raw`'s queries): that upload.
    pub(super) _meta: Option<CudaSlice<u8>>,
}

/// Queries' rows re-pitched to padded corpora (`pitch::queries_at`): per pitch, their f32 rows
/// and 32-row blocks at that width, zeros past their d; entries are added, never replaced, so a
/// launch that reads one stays valid while the queries live.
#[derive(Default)]
pub(super) struct Repitched(pub(super) std::sync::Mutex<Vec<RepitchedRows>>);

/// One pitch's rows of [`Repitched`].
pub(super) struct RepitchedRows {
    pub(super) dim: usize,
    pub(super) tokens: Option<CudaSlice<f32>>,
    pub(super) blocks: Option<CudaSlice<u16>>,
}

/// Queries as blocks of 32 rows for the tensor-core kernels (see `QueryBlocks`), on the device.
pub(super) struct DeviceBlocks {
    pub(super) dtype: DType,
    pub(super) tokens: Mem<u16>,
    pub(super) rows: Mem<i32>,
    pub(super) start: Mem<i32>,
    pub(super) blocks: usize,
}

/// Queries as blocks of 32 rows of 16-bit tokens, `[blocks][32][d]`: query `q` takes blocks
/// `start[q] .. start[q + 1]` (ceil(Nq / 32) of them, rows past its end zero), block `b` has
/// `rows[b]` real rows. With every Nq ≤ 32, block q is query q (the layout `maxsim_mma` reads).
/// f32 queries (for `maxsim_ring` only, Nq ≤ 32) take `[blocks][2][32][d]`: the f16 high parts,
/// then the low parts scaled by 2^11 (`split_f32`).
pub(super) struct QueryBlocks {
    pub(super) dtype: DType,
    pub(super) tokens: Vec<u16>,
    pub(super) rows: Vec<i32>,
    pub(super) start: Vec<i32>,
}

/// The rows `maxsim_ring` splits into f16 high and low parts: the largest magnitude of a row
/// must stay below f16's overflow (65504, with room for rounding) and, unless the row is all
/// zeros, above SPLIT_MIN. The low part is exact to 2^-36 in absolute terms (f16's subnormal
/// spacing over the 2^11 scale), which is f32's precision only for rows of that scale or more;
/// other rows go to the CUDA-core kernel.
pub(super) const SPLIT_MAX: f32 = 32768.0;
pub(super) const SPLIT_MIN: f32 = 1.0 / 4096.0;
/// Scale of the low part of a split f32 (SPLIT_SCALE in kernels/ring.cu).
pub(super) const SPLIT_SCALE: f32 = 2048.0;

/// Whether every row of `dim` f32 values is in the split's range (`SPLIT_MIN`, `SPLIT_MAX`):
/// what a caller of `score_raw` checks before vouching for f32 documents (`RawDocs::split_ok`).
/// A search's queries are checked on the calling thread: rayon's pool may be busy with other
/// work, which its tasks would wait behind.
pub fn split_rows_ok(values: &[f32], dim: usize) -> bool {
    use rayon::prelude::*;
    let ok = |row: &[f32]| {
        let m = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        // (`<=` is false for NaN, which `max` would skip.)
        row.iter().all(|x| x.abs() <= SPLIT_MAX) && (m == 0.0 || m >= SPLIT_MIN)
    };
    if values.len() < 1 << 18 {
        values.chunks(dim.max(1)).all(ok)
    } else {
        values.par_chunks(dim.max(1)).all(ok)
    }
}

/// Whether tokens `tokens` of the corpus are f32 rows the split takes (`split_rows_ok`).
pub(super) fn split_ok(corpus: &Corpus, tokens: std::ops::Range<usize>) -> bool {
    let dim = corpus.dim();
    match corpus.tokens().elements() {
        crate::matrix::Elements::F32(v) => {
            split_rows_ok(&v[tokens.start * dim..tokens.end * dim], dim)
        }
        _ => false,
    }
}

/// An f32 as its f16 high part and its f16 low part scaled by 2^11 (as bits), the split
/// `maxsim_ring` applies to f32 documents in the kernel.
pub(super) fn split_f32(x: f32) -> (u16, u16) {
    let hi = half::f16::from_f32(x);
    let lo = half::f16::from_f32((x - hi.to_f32()) * SPLIT_SCALE);
    (hi.to_bits(), lo.to_bits())
}

/// The 32-row blocks of queries of `lens` tokens (`QueryBlocks`): each block's real rows, and
/// each query's first block (Q + 1 entries, the last the number of blocks); `None` past i32.
pub(super) fn block_layout(lens: impl Iterator<Item = usize>) -> Option<(Vec<i32>, Vec<i32>)> {
    let mut start = vec![0i32];
    let mut rows = Vec::new();
    for len in lens {
        rows.extend((0..len.div_ceil(QBLOCK)).map(|b| (len - b * QBLOCK).min(QBLOCK) as i32));
        start.push(i32::try_from(rows.len()).ok()?);
    }
    Some((rows, start))
}

/// The widest d of the tensor-core kernels.
const WIDE_MAX_DIM: usize = WIDE_DIMS[WIDE_DIMS.len() - 1];

/// Whether queries of `dtype` at `dim` go into 32-row blocks: d instantiated for the tensor-core
/// kernels (`ring_instance`), or, 16-bit, any d up to SPAN_ANY_MAX_DIM (`maxsim_span_any`) and
/// multiples of 8 up to 1024 (`maxsim_bulk_any`).
pub(super) fn blocks_dim_ok(dtype: DType, dim: usize) -> bool {
    ring_instance(dim).is_some()
        || (dtype != DType::F32 && (dim <= SPAN_ANY_MAX_DIM || wide_any_bound(dim).is_some()))
}

/// The queries' 16-bit tokens in 32-row blocks, when the tensor-core kernels can take them
/// exactly: all f16 or all bf16 (so the products are exact) and d instantiated.
pub(super) fn query_blocks(queries: &[Matrix<'_>], dim: usize) -> Option<QueryBlocks> {
    use crate::matrix::Elements;
    let dtype = queries.first()?.dtype();
    // Any 16-bit d up to 1024 besides: a corpus padded to a multiple of 8 (`plan::stored_dim`)
    // takes them re-pitched (`pitch::queries_at`).
    if !blocks_dim_ok(dtype, dim) && (dtype == DType::F32 || dim > WIDE_MAX_DIM) {
        return None;
    }
    // f32: only for maxsim_ring (one block per query), and only in the range the split holds.
    let f32 = dtype == DType::F32;
    let copies = if f32 { 2 } else { 1 };
    if queries
        .iter()
        .any(|q| q.dtype() != dtype || (f32 && q.rows() > QBLOCK))
    {
        return None;
    }
    let (rows, start) = block_layout(queries.iter().map(|q| q.rows()))?;
    let mut tokens = vec![0u16; rows.len() * copies * QBLOCK * dim];
    for (q, &first) in queries.iter().zip(&start) {
        let block = &mut tokens[first as usize * copies * QBLOCK * dim..];
        let out = &mut block[..q.rows() * dim];
        match q.elements() {
            Elements::F16(v) => out.iter_mut().zip(v).for_each(|(o, x)| *o = x.to_bits()),
            Elements::BF16(v) => out.iter_mut().zip(v).for_each(|(o, x)| *o = x.to_bits()),
            Elements::F32(v) => {
                if !split_rows_ok(v, dim) {
                    return None;
                }
                let (hi, lo) = block.split_at_mut(QBLOCK * dim);
                for ((h, l), &x) in hi.iter_mut().zip(lo.iter_mut()).zip(v) {
                    (*h, *l) = split_f32(x);
                }
            }
        }
    }
    Some(QueryBlocks {
        dtype,
        tokens,
        rows,
        start,
    })
}

impl DeviceQueries {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the f32 rows, which the CUDA-core and split kernels read; an
    /// error for queries read in place (the kernel choice keeps them from those kernels).
    pub(super) fn f32_rows(&self, stream: &Arc<CudaStream>) -> Result<u64> {
        self.tokens
            .as_ref()
            .map(|t| t.device_ptr(stream).0)
            .ok_or_else(|| Error::Argument("queries read in place have no f32 rows".into()))
    }
}

impl DeviceCorpus {
    /// Copy documents `docs` of a corpus to the GPU (as a corpus of `docs.len()` documents).
    pub(super) fn upload(
        stream: &Arc<CudaStream>,
        corpus: &Corpus,
        docs: Range<usize>,
    ) -> Result<Self> {
        Docs::Range(docs.clone()).check_len(corpus.len())?;
        let offsets = corpus.offsets();
        let row = corpus.dim() * corpus.dtype().size();
        let (first, last) = (offsets[docs.start], offsets[docs.end]);
        let bytes = &corpus.tokens().elements().as_bytes()[first * row..last * row];
        let split_ok = split_ok(corpus, first..last);
        let lengths = DocLengths::of(&offsets[docs.start..=docs.end]);
        let rel: Vec<i64> = offsets[docs.start..=docs.end]
            .iter()
            .map(|&o| (o - first) as i64)
            .collect();
        Ok(DeviceCorpus {
            tokens: Mem::owned(stream.clone_htod(bytes).map_err(drv("corpus upload"))?),
            offsets: Mem::owned(stream.clone_htod(&rel).map_err(drv("corpus upload"))?),
            dtype: corpus.dtype(),
            width: corpus.dim(),
            dim: corpus.dim(),
            len: docs.len(),
            bytes: bytes.len(),
            split_ok,
            planes: None,
            lengths,
        })
    }

    /// Room for a streamed chunk of `corpus`: up to `max_docs` documents of `max_tokens` tokens,
    /// stored as `layout` says (the chunk's rows are re-pitched as they are copied in where its
    /// width is past d), holding no document until a chunk is copied in
    /// ([`DeviceCorpus::hold`]). What the kernel choice needs of the lengths is taken from the
    /// whole corpus.
    pub(super) fn chunk_room(
        stream: &Arc<CudaStream>,
        corpus: &Corpus,
        layout: ChunkLayout,
        max_docs: usize,
        max_tokens: usize,
    ) -> Result<Self> {
        let room = max_tokens.max(1) * layout.width * corpus.dtype().size();
        Ok(DeviceCorpus {
            // SAFETY: each chunk's bytes are copied in before it is scored.
            tokens: Mem::owned(unsafe { stream.alloc::<u8>(room) }.map_err(drv("chunk buffer"))?),
            offsets: Mem::owned(
                unsafe { stream.alloc::<i64>(max_docs + 1) }.map_err(drv("chunk buffer"))?,
            ),
            dtype: corpus.dtype(),
            width: layout.width,
            dim: corpus.dim(),
            len: 0,
            bytes: 0,
            split_ok: layout.split_ok,
            planes: None,
            lengths: DocLengths::of(corpus.offsets()),
        })
    }

    /// Mark the chunk copied into this room: `docs` documents, `bytes` bytes of tokens (as
    /// stored, at the room's width).
    pub(super) fn hold(&mut self, docs: usize, bytes: usize) {
        self.len = docs;
        self.bytes = bytes;
    }
}

/// How a streamed corpus's chunks lie on the device: whether its f32 rows take the split
/// (`split_ok`, over the whole corpus) and the width they are stored at (the scorer's
/// `stored_width`).
#[derive(Clone, Copy, Debug)]
pub(super) struct ChunkLayout {
    pub(super) split_ok: bool,
    pub(super) width: usize,
}

impl ChunkLayout {
    /// `corpus`'s layout, its width `width(split_ok)` (never under d).
    pub(super) fn of(corpus: &Corpus, width: impl Fn(bool) -> usize) -> Self {
        let split_ok = split_ok(corpus, 0..corpus.offsets()[corpus.len()]);
        ChunkLayout {
            split_ok,
            width: width(split_ok).max(corpus.dim()),
        }
    }

    /// Whether the rows are stored wider than d (and so copied in at d first, then re-pitched).
    pub(super) fn padded(&self, corpus: &Corpus) -> bool {
        self.width > corpus.dim()
    }

    /// Device bytes a token of a chunk takes: its row as stored, and where that is padded, its
    /// row at d too (the copy it is re-pitched from). A streamed chunk's budget is counted in
    /// these.
    pub(super) fn token_bytes(&self, corpus: &Corpus) -> usize {
        let size = corpus.dtype().size();
        let narrow = if self.padded(corpus) { corpus.dim() } else { 0 };
        (self.width + narrow) * size
    }
}

impl DeviceQueries {
    /// Copy queries to the GPU (as f32, and in 32-row blocks where the tensor cores take them).
    /// Checks them like every scorer does.
    pub(super) fn upload(
        stream: &Arc<CudaStream>,
        queries: &[Matrix<'_>],
        dim: usize,
    ) -> Result<Self> {
        let mut tokens = Vec::new();
        let mut offsets = vec![0i64];
        for (i, q) in queries.iter().enumerate() {
            if q.rows() == 0 {
                return Err(Error::EmptyQuery { index: i });
            }
            if q.dim() != dim {
                return Err(Error::DimMismatch {
                    what: format!("query {i}"),
                    expected: dim,
                    got: q.dim(),
                });
            }
            q.check_finite(&format!("query {i}"), 0)?;
            tokens.extend(q.to_f32_vec());
            offsets.push((tokens.len() / dim) as i64);
        }
        let up = |what| drv(what);
        let mma = match query_blocks(queries, dim) {
            Some(b) => Some(DeviceBlocks {
                dtype: b.dtype,
                blocks: b.rows.len(),
                tokens: Mem::owned(stream.clone_htod(&b.tokens).map_err(up("query upload"))?),
                rows: Mem::owned(stream.clone_htod(&b.rows).map_err(up("query upload"))?),
                start: Mem::owned(stream.clone_htod(&b.start).map_err(up("query upload"))?),
            }),
            None => None,
        };
        Ok(DeviceQueries {
            mma,
            _meta: None,
            dtype: queries.first().map_or(DType::F32, |q| q.dtype()),
            longest: queries.iter().map(|q| q.rows()).max().unwrap_or(0),
            tokens: Some(Mem::owned(
                stream.clone_htod(&tokens).map_err(up("query upload"))?,
            )),
            repitched: Repitched::default(),
            offsets: Mem::owned(stream.clone_htod(&offsets).map_err(up("query upload"))?),
            len: queries.len(),
            dim,
        })
    }
}

/// `len` f32 on the device (for scores), uninitialized.
pub(super) fn alloc_scores(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<f32>> {
    // SAFETY: every element is written by a scoring launch before it is read.
    unsafe { stream.alloc::<f32>(len.max(1)) }.map_err(drv("score buffer"))
}

/// Copy the first `out.len()` scores back to the host, waiting for the stream.
pub(super) fn download(
    stream: &Arc<CudaStream>,
    scores: &CudaSlice<f32>,
    out: &mut [f32],
) -> Result<()> {
    let view = scores.slice(0..out.len());
    stream
        .memcpy_dtoh(&view, out)
        .map_err(drv("score download"))?;
    stream.synchronize().map_err(drv("synchronize"))
}

/// A device buffer of at least `len` elements held in `slot`, reallocated (uninitialized) when
/// it is smaller.
pub(crate) fn grow<'a, T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    slot: &'a mut Option<CudaSlice<T>>,
    len: usize,
) -> Result<&'a mut CudaSlice<T>> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = None;
        // SAFETY: callers write every element they later read.
        *slot = Some(unsafe { stream.alloc::<T>(len.max(1)) }.map_err(drv("device buffer"))?);
    }
    slot.as_mut()
        .ok_or_else(|| Error::DeviceUnavailable("device buffer missing".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn queries_pack_into_32_row_blocks() {
        let dim = 32;
        let lens = [1usize, 32, 33, 100];
        let data: Vec<Vec<f16>> = lens
            .iter()
            .enumerate()
            .map(|(q, &n)| {
                (0..n * dim)
                    .map(|i| f16::from_f32((q * 1000 + i) as f32 / 4096.0))
                    .collect()
            })
            .collect();
        let queries: Vec<Matrix<'_>> = data
            .iter()
            .map(|v| Matrix::new(&v[..], dim).unwrap())
            .collect();
        let b = query_blocks(&queries, dim).expect("f16 at d = 32 takes the tensor cores");
        assert_eq!(b.dtype, DType::F16);
        assert_eq!(b.rows, [1, 32, 32, 1, 32, 32, 32, 4]);
        assert_eq!(b.start, [0, 1, 2, 4, 8]);
        assert_eq!(b.tokens.len(), 8 * QBLOCK * dim);
        for (q, v) in data.iter().enumerate() {
            let first = b.start[q] as usize * QBLOCK * dim;
            let blocks = (b.start[q + 1] - b.start[q]) as usize;
            let region = &b.tokens[first..first + blocks * QBLOCK * dim];
            let bits: Vec<u16> = v.iter().map(|x| x.to_bits()).collect();
            assert_eq!(&region[..bits.len()], &bits[..], "query {q} rows in order");
            assert!(
                region[bits.len()..].iter().all(|&x| x == 0),
                "query {q} padding is zero"
            );
        }
        // Not on the tensor cores: mixed dtypes, a d no kernel is built for (f32 is packed for
        // maxsim_ring: f32_queries_split_into_high_and_low_halves).
        let f = vec![0.5f32; dim];
        assert!(query_blocks(&[queries[0], Matrix::new(&f[..], dim).unwrap()], dim).is_none());
        let past = vec![f16::ONE; 1025];
        assert!(query_blocks(&[Matrix::new(&past[..], 1025).unwrap()], 1025).is_none());
        // 16-bit d up to 1024 that no kernel takes packs too: a corpus padded to a multiple of
        // 8 (plan::stored_dim) reads them re-pitched.
        let odd = vec![f16::ONE; 258];
        assert!(query_blocks(&[Matrix::new(&odd[..], 258).unwrap()], 258).is_some());
        // Any d up to 256 (maxsim_span_any) packs.
        let any = vec![f16::ONE; 202];
        assert!(query_blocks(&[Matrix::new(&any[..], 202).unwrap()], 202).is_some());
        // A multiple of 8 past 128 (maxsim_bulk_any) packs; past 1024 it does not.
        let wide = vec![f16::ONE; 200];
        assert!(query_blocks(&[Matrix::new(&wide[..], 200).unwrap()], 200).is_some());
        let wider = vec![f16::ONE; 1032];
        assert!(query_blocks(&[Matrix::new(&wider[..], 1032).unwrap()], 1032).is_none());
        assert!(query_blocks(&[], dim).is_none());
    }

    #[test]
    fn f32_queries_split_into_high_and_low_halves() {
        let dim = 64;
        let v: Vec<f32> = (0..3 * dim)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 77.0)
            .collect();
        let q = Matrix::new(&v[..], dim).unwrap();
        let b = query_blocks(&[q], dim).expect("f32 at d = 64 takes the ring kernel");
        assert_eq!(
            (b.dtype, &b.rows[..], &b.start[..]),
            (DType::F32, &[3][..], &[0, 1][..])
        );
        assert_eq!(b.tokens.len(), 2 * QBLOCK * dim);
        for (i, &x) in v.iter().enumerate() {
            let hi = f16::from_bits(b.tokens[i]).to_f64();
            let lo = f16::from_bits(b.tokens[QBLOCK * dim + i]).to_f64() / SPLIT_SCALE as f64;
            // hi to 2^-12 of x, lo to 2^-11 of the rest: the pair to 2^-23 of x.
            assert!(
                (hi + lo - x as f64).abs() <= 2.4e-7 * (x.abs() as f64).max(1e-3),
                "{i}"
            );
        }
        assert!(b.tokens[3 * dim..QBLOCK * dim].iter().all(|&x| x == 0));
        // Out of the split's range, or longer than one block: not on the tensor cores.
        let big = vec![40000.0f32; dim];
        assert!(query_blocks(&[Matrix::new(&big[..], dim).unwrap()], dim).is_none());
        let long = vec![0.1f32; 33 * dim];
        assert!(query_blocks(&[Matrix::new(&long[..], dim).unwrap()], dim).is_none());
    }

    #[test]
    fn split_takes_rows_of_f32_scale_only() {
        assert!(
            split_rows_ok(&[0.5, 1e-9, 0.0, 0.0], 2),
            "a tiny value in a row of scale"
        );
        assert!(split_rows_ok(&[0.0, 0.0, 32768.0, 1.0], 2));
        assert!(
            !split_rows_ok(&[0.5, 0.5, 1e-5, -1e-5], 2),
            "a row of tiny values"
        );
        assert!(!split_rows_ok(&[40000.0, 0.0], 2), "past f16's range");
        assert!(!split_rows_ok(&[f32::NAN, 1.0], 2));
    }
}

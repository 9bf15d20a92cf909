//! Compressed corpora in device memory ([`DeviceCodes`]: the codes, the per-token words, the
//! offsets and the codec's tables as the kernels of kernels/codec.cu read them) and queries
//! as those kernels take them ([`CodecQueries`]: f16 rows in 32-row blocks, plus f32 rows for
//! the residual codec's centroid scores). Uploads only; the scorer sequences the kernels that
//! complete a residual upload (inverse norms) or decode codes no fused kernel reads.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use half::f16;

use super::codec_kernels::{codec_tag, pack_pays, quad_kernel_of, quad_order, whole_blocks};
use super::device::drv;
use super::memory::{DeviceCorpus, DeviceQueries, block_layout};
use crate::codec::{Codec, CodecKind, CompressedCorpus};
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::Docs;

/// A compressed corpus (or a range of its documents) in GPU memory.
pub struct DeviceCodes {
    pub(super) codec: Codec,
    /// Every document fills the bulk-copy kernel's 64-token blocks ([`whole_blocks`]).
    pub(super) whole_blocks: bool,
    /// The batched kernel's runs of documents pay here ([`pack_pays`]).
    pub(super) pack_pays: bool,
    pub(super) dim: usize,
    pub(super) len: usize,
    pub(super) tokens: usize,
    pub(super) codes: CudaSlice<u8>,
    /// Centroid ids (residual) or f32 scale bits (int8, fp8); one word for PQ (unused).
    pub(super) aux: CudaSlice<u32>,
    pub(super) offsets: CudaSlice<i64>,
    /// The documents grouped by their 16-token tiles ([`quad_order`]), where a
    /// four-documents-a-warpgroup kernel reads this codec at this d and the scorer asked for it
    /// (`add_quad_order`); `None` otherwise.
    pub(super) quad_order: Option<CudaSlice<i64>>,
    /// Residual: each token's inverse reconstruction norm (filled by `residual_inv_norms`).
    pub(super) inv_norm: Option<CudaSlice<f32>>,
    pub(super) tables: Arc<CodecTables>,
    /// Where no fused kernel reads this codec at this d: the tokens decoded to f32 once at
    /// upload, scored by the exact kernels.
    pub(super) decoded: Option<DeviceCorpus>,
    pub(super) bytes: usize,
}

/// A codec's parameters on the device, shared by every upload of one corpus's documents (a
/// streamed IVF search uploads each batch's candidates with the tables it holds).
pub(super) struct CodecTables {
    /// Residual: the centroids, f16 `[K][d]`.
    pub(super) centroids: Option<CudaSlice<u16>>,
    /// The fused kernel's table: the residual's f16 pairs by 2·nbits code bits, the pq
    /// codebooks as f16 `[M][256][d / M]` (pairs in words); one word otherwise.
    table: CudaSlice<u32>,
    /// The decoder's values: the residual's bucket weights or the pq codebooks (f32).
    values: CudaSlice<f32>,
}

impl CodecTables {
    /// `codec`'s tables uploaded on `stream`.
    pub(super) fn upload(stream: &Arc<CudaStream>, codec: &Codec) -> Result<Arc<Self>> {
        let up = drv("codec upload");
        let (table, values, centroids) = match codec {
            Codec::Residual(r) => {
                let cent: Vec<u16> = r.centroids().iter().map(|x| x.to_bits()).collect();
                (
                    residual_pair_table(r.nbits(), r.bucket_weights()),
                    r.bucket_weights().to_vec(),
                    Some(stream.clone_htod(&cent).map_err(&up)?),
                )
            }
            Codec::Pq(p) => (pq_table(p.codebooks()), p.codebooks().to_vec(), None),
            Codec::Int8 | Codec::Fp8 => (vec![0u32], vec![0f32], None),
        };
        Ok(Arc::new(CodecTables {
            centroids,
            table: stream.clone_htod(&table).map_err(&up)?,
            values: stream.clone_htod(&values).map_err(&up)?,
        }))
    }
}

/// What the codec kernels read of a compressed corpus in device memory, as addresses: a
/// [`DeviceCodes`] upload, or tensors a caller owns (`CudaScorer::score_residual_raw`).
#[derive(Clone, Copy, Debug)]
pub(super) struct CodesView {
    /// `codec_tag`: the kernels' codec tag and its parameter (nbits, M).
    pub tag: i32,
    pub param: i32,
    /// The residual codec's K (0 otherwise).
    pub num_centroids: usize,
    pub dim: usize,
    pub tokens: usize,
    /// Documents (their offsets: `docs + 1`).
    pub docs: usize,
    /// `[tokens][row bytes]` u8; one u32 per token (centroid id, scale bits; PQ: unused);
    /// each document's i64 offsets from 0.
    pub codes: u64,
    pub aux: u64,
    pub offsets: u64,
    /// The upload's grouped order of its documents (`DeviceCodes::quad_order`); 0 if none.
    pub order: u64,
    /// Residual: f32 inverse norms (`tokens`), f16 centroids `[K][d]`; 0 otherwise.
    pub inv_norm: u64,
    pub centroids: u64,
    /// The fused kernel's table and the decoder's values (as `DeviceCodes`).
    pub table: u64,
    pub values: u64,
}

impl DeviceCodes {
    /// The upload's addresses on `stream`.
    pub(super) fn view(&self, stream: &Arc<CudaStream>) -> CodesView {
        let (tag, param) = codec_tag(&self.codec);
        let opt = |s: Option<u64>| s.unwrap_or(0);
        CodesView {
            tag,
            param,
            num_centroids: match &self.codec {
                Codec::Residual(r) => r.num_centroids(),
                _ => 0,
            },
            dim: self.dim,
            tokens: self.tokens,
            docs: self.len,
            codes: self.codes.device_ptr(stream).0,
            aux: self.aux.device_ptr(stream).0,
            offsets: self.offsets.device_ptr(stream).0,
            order: opt(self.quad_order.as_ref().map(|o| o.device_ptr(stream).0)),
            inv_norm: opt(self.inv_norm.as_ref().map(|c| c.device_ptr(stream).0)),
            centroids: opt(self
                .tables
                .centroids
                .as_ref()
                .map(|c| c.device_ptr(stream).0)),
            table: self.tables.table.device_ptr(stream).0,
            values: self.tables.values.device_ptr(stream).0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn codec_kind(&self) -> CodecKind {
        self.codec.kind()
    }
    /// Bytes held on the device for the codes and per-token words (tables not counted).
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }
    /// Whether the codes are read by a fused kernel (else they were decoded at upload).
    pub fn fused(&self) -> bool {
        self.decoded.is_none()
    }

    /// Copy documents `docs` of a compressed corpus to the GPU, with the codec's `tables`
    /// (`None`: uploaded here; else the caller's upload of this corpus's codec). The residual
    /// codec's inverse norms and a decoded copy (no fused kernel) are the scorer's to fill.
    pub(super) fn upload(
        stream: &Arc<CudaStream>,
        corpus: &CompressedCorpus,
        docs: Range<usize>,
        tables: Option<&Arc<CodecTables>>,
    ) -> Result<Self> {
        Docs::Range(docs.clone()).check_len(corpus.len())?;
        let codec = corpus.codec().clone();
        let dim = corpus.dim();
        let offsets = corpus.offsets();
        let (first, last) = (offsets[docs.start], offsets[docs.end]);
        let row = codec.row_bytes(dim);
        let up = |what: &'static str| drv(what);
        let code_bytes = &corpus.codes()[first * row..last * row];
        let codes = stream
            .clone_htod(if code_bytes.is_empty() {
                &[0u8][..]
            } else {
                code_bytes
            })
            .map_err(up("code upload"))?;
        let (aux, offsets) = upload_words(stream, corpus, docs.clone())?;
        // Filled by residual_inv_norms; four more (zeros) for the bulk-copy kernels'
        // rounded-up copies, as the words above.
        let inv_norm = match &codec {
            Codec::Residual(_) => Some(
                stream
                    .alloc_zeros::<f32>(last - first + 4)
                    .map_err(up("codec upload"))?,
            ),
            _ => None,
        };
        let tables = match tables {
            Some(t) => Arc::clone(t),
            None => CodecTables::upload(stream, &codec)?,
        };
        Ok(DeviceCodes {
            quad_order: None,
            whole_blocks: whole_blocks(&corpus.offsets()[docs.start..=docs.end]),
            pack_pays: pack_pays(&corpus.offsets()[docs.start..=docs.end]),
            dim,
            len: docs.len(),
            tokens: last - first,
            codes,
            aux,
            offsets,
            inv_norm,
            tables,
            decoded: None,
            bytes: code_bytes.len()
                + if codec.has_aux() {
                    (last - first) * 4
                } else {
                    0
                },
            codec,
        })
    }

    /// The grouped order of documents `docs` of `corpus` (this upload's), uploaded where a
    /// four-documents-a-warpgroup kernel reads its codec at its d and it has documents.
    pub(super) fn add_quad_order(
        &mut self,
        stream: &Arc<CudaStream>,
        corpus: &CompressedCorpus,
        docs: Range<usize>,
    ) -> Result<()> {
        let (tag, param) = codec_tag(&self.codec);
        if quad_kernel_of(tag, param, self.dim).is_some() && !docs.is_empty() {
            let order = quad_order(&corpus.offsets()[docs.start..=docs.end]);
            self.quad_order = Some(stream.clone_htod(&order).map_err(drv("code upload"))?);
        }
        Ok(())
    }
}

/// Documents `docs` of `corpus`: their per-token words (centroid ids, scales) and their
/// offsets from 0, as the codec kernels read them. Four zero words follow the last: the
/// bulk-copy kernels copy scales from 16-byte boundaries (kernels/codec_bulk.cu), so a tile's
/// rounded-up end may reach three words past it. The words go straight into the zeroed, longer
/// buffer (no padded copy on the host).
pub(super) fn upload_words(
    stream: &Arc<CudaStream>,
    corpus: &CompressedCorpus,
    docs: Range<usize>,
) -> Result<(CudaSlice<u32>, CudaSlice<i64>)> {
    let offsets = corpus.offsets();
    let (first, last) = (offsets[docs.start], offsets[docs.end]);
    let up = drv("code upload");
    let words = match corpus.aux() {
        Some(a) if last > first => stream
            .alloc_zeros::<u32>(last - first + 4)
            .and_then(|mut d| {
                stream.memcpy_htod(&a[first..last], &mut d)?;
                Ok(d)
            }),
        _ => stream.alloc_zeros::<u32>(4),
    }
    .map_err(&up)?;
    let rel: Vec<i64> = offsets[docs.start..=docs.end]
        .iter()
        .map(|&o| (o - first) as i64)
        .collect();
    Ok((words, stream.clone_htod(&rel).map_err(&up)?))
}

/// The residual kernels' table: for each value of 2·nbits code bits (a pair of dimensions,
/// the first in the higher bits, PLAID's packbits order) the pair's bucket weights as f16.
pub(super) fn residual_pair_table(nbits: u32, weights: &[f32]) -> Vec<u32> {
    let bits = 2 * nbits;
    (0..1u32 << bits)
        .map(|key| {
            let byte = key << (8 - bits);
            let bucket = |slot: u32| {
                (0..nbits).fold(0usize, |b, bit| {
                    let s = slot * nbits + bit;
                    b | ((((byte >> (7 - s)) & 1) as usize) << bit)
                })
            };
            let lo = f16::from_f32(weights[bucket(0)]).to_bits() as u32;
            let hi = f16::from_f32(weights[bucket(1)]).to_bits() as u32;
            lo | (hi << 16)
        })
        .collect()
}

/// The pq codebooks (f32 `[M][256][d / M]`) as f16 pairs in words.
pub(super) fn pq_table(codebooks: &[f32]) -> Vec<u32> {
    codebooks
        .chunks(2)
        .map(|p| {
            let lo = f16::from_f32(p[0]).to_bits() as u32;
            let hi = f16::from_f32(*p.get(1).unwrap_or(&0.0)).to_bits() as u32;
            lo | (hi << 16)
        })
        .collect()
}

/// Queries as the fused codec kernels read them: f16 rows in 32-row blocks `[blocks][32][d]`
/// (rows past a query's end zero), each block's real rows, each query's first block; f32
/// rows in the same blocks for the residual codec's centroid scores.
pub struct CodecQueries {
    pub(super) len: usize,
    pub(super) dim: usize,
    pub(super) blocks: usize,
    pub(super) f16: CudaSlice<u16>,
    pub(super) f32: Option<CudaSlice<f32>>,
    pub(super) rows: CudaSlice<i32>,
    pub(super) start: CudaSlice<i32>,
    /// For a corpus decoded at upload (no fused kernel): the queries as the exact kernels take
    /// them (the scorer's to fill).
    pub(super) exact: Option<DeviceQueries>,
}

impl CodecQueries {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copy queries (checked: non-empty, `dim` wide, finite, within f16's range) to the GPU.
    pub(super) fn upload(
        stream: &Arc<CudaStream>,
        queries: &[Matrix<'_>],
        dim: usize,
        with_f32: bool,
    ) -> Result<Self> {
        crate::scorer::check_queries(queries, dim)?;
        let (rows, start) = block_layout(queries.iter().map(|q| q.rows())).ok_or_else(|| {
            Error::Argument("too many query tokens for one call (over 2^31 blocks)".into())
        })?;
        let blocks = rows.len();
        let mut h16 = vec![0u16; blocks * 32 * dim];
        let mut h32 = if with_f32 {
            vec![0f32; blocks * 32 * dim]
        } else {
            Vec::new()
        };
        for (i, (q, &first)) in queries.iter().zip(&start).enumerate() {
            let v = q.to_f32_vec();
            let at = first as usize * 32 * dim;
            for (j, &x) in v.iter().enumerate() {
                if x.abs() > 65504.0 {
                    return Err(Error::Argument(format!(
                        "query {i} holds {x}, beyond f16's range (65504), which the GPU's \
                         compressed-corpus kernels multiply in"
                    )));
                }
                h16[at + j] = f16::from_f32(x).to_bits();
            }
            if with_f32 {
                h32[at..at + v.len()].copy_from_slice(&v);
            }
        }
        let up = |what: &'static str| drv(what);
        Ok(CodecQueries {
            len: queries.len(),
            dim,
            blocks,
            f16: stream.clone_htod(&h16).map_err(up("query upload"))?,
            f32: if with_f32 {
                Some(stream.clone_htod(&h32).map_err(up("query upload"))?)
            } else {
                None
            },
            rows: stream.clone_htod(&rows).map_err(up("query upload"))?,
            start: stream.clone_htod(&start).map_err(up("query upload"))?,
            exact: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_pairs_follow_packbits_order() {
        let w = [-0.25f32, -0.125, 0.125, 0.25];
        let t = residual_pair_table(2, &w);
        assert_eq!(t.len(), 16);
        // key 0b10_01: first dimension bits (1, 0) → bucket 1 (bit 0 first), second (0, 1) → 2.
        let v = t[0b1001];
        assert_eq!(f16::from_bits(v as u16).to_f32(), w[1]);
        assert_eq!(f16::from_bits((v >> 16) as u16).to_f32(), w[2]);
        let t4 = residual_pair_table(4, &(0..16).map(|i| i as f32).collect::<Vec<_>>());
        // byte 0b1000_0001: first dimension bucket 1, second bucket 8.
        assert_eq!(f16::from_bits(t4[0x81] as u16).to_f32(), 1.0);
        assert_eq!(f16::from_bits((t4[0x81] >> 16) as u16).to_f32(), 8.0);
        let t1 = residual_pair_table(1, &[-1.0, 1.0]);
        assert_eq!(t1.len(), 4);
        assert_eq!(f16::from_bits((t1[0b01] >> 16) as u16).to_f32(), 1.0);
        assert_eq!(f16::from_bits(t1[0b01] as u16).to_f32(), -1.0);
    }
}

//! Compressed corpora in device memory ([`DeviceCodes`]: the codes, the per-token words, the
//! offsets and the codec's tables as the kernels of kernels/codec.cu read them) and queries
//! as those kernels take them ([`CodecQueries`]: f16 rows in 32-row blocks, plus f32 rows for
//! the residual codec's centroid scores). Uploads only; the scorer sequences the kernels that
//! complete a residual upload (inverse norms) or decode codes no fused kernel reads.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use half::f16;

use super::device::drv;
use super::memory::{DeviceCorpus, DeviceQueries, block_layout};
use super::plan::{Kernel, WG_BN, WG_DIMS};
use crate::codec::{Codec, CodecKind, CompressedCorpus};
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::Docs;

/// The fused kernels built (kernels/codec.cu): residual, int8 and fp8 at these d; pq at these
/// (d, M) (sub-spaces of an even width, M a multiple of 4).
pub(super) const CODEC_DIMS: [usize; 4] = [32, 64, 96, 128];
pub(super) const PQ_SHAPES: [(usize, usize); 11] = [
    (32, 8),
    (32, 16),
    (64, 8),
    (64, 16),
    (64, 32),
    (96, 8),
    (96, 16),
    (128, 8),
    (128, 16),
    (128, 32),
    (128, 64),
];

/// The fused kernel for a codec at d, if one is built: its name in kernels/codec.cu.
pub(super) fn fused_kernel(codec: &Codec, dim: usize) -> Option<String> {
    let (tag, param) = codec_tag(codec);
    fused_kernel_of(tag, param, dim)
}

/// `fused_kernel` by codec tag and parameter (`codec_tag`).
pub(super) fn fused_kernel_of(tag: i32, param: i32, dim: usize) -> Option<String> {
    match tag {
        0 if CODEC_DIMS.contains(&dim) => Some(format!("maxsim_codec_residual{param}_d{dim}")),
        1 if PQ_SHAPES.contains(&(dim, param as usize)) => {
            Some(format!("maxsim_codec_pq{param}_d{dim}"))
        }
        2 if CODEC_DIMS.contains(&dim) => Some(format!("maxsim_codec_int8_d{dim}")),
        3 if CODEC_DIMS.contains(&dim) => Some(format!("maxsim_codec_fp8_d{dim}")),
        _ => None,
    }
}

/// Every fused kernel's name (for loading the program's functions).
pub(super) fn fused_kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    for d in CODEC_DIMS {
        for n in [1, 2, 4] {
            names.push(format!("maxsim_codec_residual{n}_d{d}"));
        }
        names.push(format!("maxsim_codec_int8_d{d}"));
        names.push(format!("maxsim_codec_fp8_d{d}"));
    }
    for (d, m) in PQ_SHAPES {
        names.push(format!("maxsim_codec_pq{m}_d{d}"));
    }
    names
}

/// The batched twin of a fused kernel (kernels/codec_wgmma.cu, sm_90a: a tile decoded once
/// into shared memory and multiplied against a query tile of 256 rows), where one is built:
/// d ∈ `WG_DIMS` and every codec the fused kernels read there.
pub(super) fn batched_kernel_of(tag: i32, param: i32, dim: usize) -> Option<String> {
    if !WG_DIMS.contains(&dim) {
        return None;
    }
    fused_kernel_of(tag, param, dim).map(|n| n.replacen("maxsim_codec_", "maxsim_codec_wg_", 1))
}

/// Every lookup-table kernel's name (kernels/codec_lut.cu): one per M of `PQ_SHAPES`.
pub(super) fn lut_kernel_names() -> Vec<String> {
    let mut ms: Vec<usize> = PQ_SHAPES.iter().map(|&(_, m)| m).collect();
    ms.sort_unstable();
    ms.dedup();
    ms.into_iter()
        .map(|m| format!("maxsim_pq_lut_m{m}"))
        .collect()
}

/// The twin of batched kernel `name` that takes runs of documents (`maxsim_codec_wgp_*`).
pub(super) fn runs_kernel_of(name: &str) -> String {
    name.replacen("maxsim_codec_wg_", "maxsim_codec_wgp_", 1)
}

/// Every batched kernel's name (each twice: `runs_kernel_of`), and the bulk-copy kernels'
/// (`bulk_kernel_of`): all are built for sm_90a only.
pub(super) fn batched_kernel_names() -> Vec<String> {
    let batched = fused_kernel_names()
        .into_iter()
        .filter(|n| WG_DIMS.iter().any(|d| n.ends_with(&format!("_d{d}"))))
        .map(|n| n.replacen("maxsim_codec_", "maxsim_codec_wg_", 1))
        .flat_map(|n| [runs_kernel_of(&n), n]);
    let bulk = WG_DIMS
        .into_iter()
        .flat_map(|d| BULK_CODECS.map(|(tag, param)| bulk_kernel_of(tag, param, d)))
        .flatten();
    batched.chain(bulk).collect()
}

/// The codecs with a bulk-copy kernel (tag, nbits): int8, fp8, and the residual where a token's
/// codes are a multiple of 16 bytes (`bulk_kernel_of`).
const BULK_CODECS: [(i32, i32); 5] = [(2, 0), (3, 0), (0, 1), (0, 2), (0, 4)];

/// The bulk-copy kernel of a codec at d ∈ `WG_DIMS` (kernels/codec_bulk.cu, sm_90a: one query's
/// tiles brought in by the copy engine, the tokens decoded into wgmma's A registers): int8,
/// fp8, and the residual where a row of codes (d · nbits / 8 bytes) is a multiple of 16 bytes.
pub(super) fn bulk_kernel_of(tag: i32, param: i32, dim: usize) -> Option<String> {
    let codec = match (tag, param) {
        (2, _) => "int8".to_string(),
        (3, _) => "fp8".to_string(),
        (0, 1 | 2 | 4) if (dim * param as usize / 8).is_multiple_of(16) => {
            format!("residual{param}")
        }
        _ => return None,
    };
    WG_DIMS
        .contains(&dim)
        .then(|| format!("maxsim_codec_bk_{codec}_d{dim}"))
}

/// Query blocks from which the batched kernel scores a call (it multiplies whole 256-row query
/// tiles, so below this the one-warp kernel wastes less). Measured on the H200 (BENCHMARKS.md,
/// "the batched codec kernels"): at 4 blocks the batched kernel is 1.5-1.6x the one-warp one on
/// int8, fp8 and every residual nbits (181.5 against 123.5 M pairs/s at nbits 2) and level on pq;
/// at 8 blocks it is ahead on every codec.
pub(super) const BATCHED_MIN_BLOCKS: usize = 4;

/// The compressed-corpus kernel of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum CodecKernel {
    /// `maxsim_codec_*` (kernels/codec.cu): a warp per (query block, document).
    Warp(String),
    /// `maxsim_codec_wg_*` (kernels/codec_wgmma.cu).
    Batched(String),
    /// `maxsim_codec_bk_*` (kernels/codec_bulk.cu): below `BATCHED_MIN_BLOCKS`.
    Bulk(String),
    /// `maxsim_pq_lut_m*` (kernels/codec_lut.cu): the paper's lookup-table kernel, pq only,
    /// when forced (`Kernel::Lut`), for the ablation.
    Lut(String),
}

/// The kernel for `blocks` query blocks of a codec at d: the batched one where it is loaded
/// (`batched_ok`: the sm_90a kernels) and the call has `BATCHED_MIN_BLOCKS` blocks, or when
/// forced (`Kernel::Wgmma` or `Kernel::Gemm`); below that, the bulk-copy kernel where it is
/// built and loaded and the corpus's per-token words are padded for its copies (`padded`: our
/// uploads, not borrowed tensors), forced by `Kernel::Bulk`, and by default where it pays
/// (`bulk_by_default`, which asks the residual and int8 for documents that fill its 64-token
/// blocks: `whole_blocks`, [`whole_blocks`]); the lookup-table kernel for pq when forced (`Kernel::Lut`); the one-warp
/// kernel otherwise (forced by the others). `None`: no fused kernel at this d (the tokens are
/// decoded and scored by the exact kernels).
pub(super) fn codec_kernel(
    (tag, param, dim): (i32, i32, usize),
    blocks: usize,
    batched_ok: bool,
    (padded, whole_blocks): (bool, bool),
    force: Option<Kernel>,
) -> Option<CodecKernel> {
    let warp = fused_kernel_of(tag, param, dim)?;
    if force == Some(Kernel::Lut) && tag == 1 {
        return Some(CodecKernel::Lut(format!("maxsim_pq_lut_m{param}")));
    }
    let batched = batched_kernel_of(tag, param, dim).filter(|_| batched_ok);
    let bulk = bulk_kernel_of(tag, param, dim).filter(|_| batched_ok && padded);
    let want = match force {
        Some(Kernel::Wgmma | Kernel::Gemm) => true,
        Some(_) => false,
        None => blocks >= BATCHED_MIN_BLOCKS,
    };
    let want_bulk = match force {
        Some(k) => k == Kernel::Bulk,
        None => !want && bulk_by_default(tag, param, dim, whole_blocks),
    };
    Some(match (batched, bulk) {
        (Some(name), _) if want => CodecKernel::Batched(name),
        (_, Some(name)) if want_bulk => CodecKernel::Bulk(name),
        _ => CodecKernel::Warp(warp),
    })
}

/// Whether documents of these `offsets` fill the bulk-copy kernel's blocks of 64 tokens: every
/// one a multiple of 64 tokens, and at least 128. Elsewhere, for the residual and int8, its
/// last, partly empty block costs more than the one-warp kernel's whole document (H100, B =
/// 200K, M docs/s bulk against one-warp; residual nbits 2: Nd = 128 156.2 / 134.3, 192 103.8 /
/// 94.5, 256 88.2 / 73.8, but 64 214.8 / 226.6, 80 63.6 / 192.7, 112 135.0 / 148.8, 144 58.2 /
/// 120.9, U[32,256] 78.9 / 117.9, U[8,180] 81.2 / 164.7; int8: 128 181.8 / 164.2, but 80 195.8
/// / 253.5, U[32,256] 135.4 / 142.0, U[8,180] 196.0 / 211.7. fp8 keeps the bulk-copy kernel:
/// U[32,256] 147.5 / 124.9, U[8,180] 201.6 / 185.2, 80 210.5 / 221.3. BENCHMARKS.md, "The
/// bulk-copy codec kernel at other document lengths").
pub(super) fn whole_blocks(offsets: &[usize]) -> bool {
    offsets.windows(2).all(|w| {
        let n = w[1] - w[0];
        n >= 128 && n.is_multiple_of(64)
    })
}

/// Whether the batched kernel's runs of documents (`maxsim_codec_wgp_*`, cut into 128-token
/// tiles across their boundaries) pay for documents of these `offsets`: each in tiles of its
/// own they take at least 1.3 times the tiles they fill back to back. A tile of runs costs
/// about 1.2 times one of a document's own (the H200, Nd = 128, 32 queries, M pairs/s: residual
/// nbits 2 258 against 310, int8 359 against 443, pq M = 16 406 against 448); documents of
/// U[8,124] tokens (mean 66, as MS MARCO passages) take 1.94 times, and ran 1.42 times faster
/// on runs (443 against 313; BENCHMARKS.md, "Runs of documents in the batched codec kernels").
pub(super) fn pack_pays(offsets: &[usize]) -> bool {
    let tokens = offsets.last().unwrap_or(&0) - offsets.first().unwrap_or(&0);
    let own: usize = offsets
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(WG_BN).max(1))
        .sum();
    own > 0 && own * 10 >= tokens.div_ceil(WG_BN) * 13
}

/// Where the bulk-copy kernel is ahead of the one-warp one at one query (the H200, B = 100K ×
/// 128 tokens, BENCHMARKS.md "The bulk-copy codec kernels"): the residual at nbits 1 and 2
/// (144.5 against 123.2 M docs/s at nbits 2, d = 128; 185.6 against 171.8 at d = 64), int8 and
/// fp8 at d = 128 (180.8 / 193.0 against 175.0 / 152.1). Not at nbits 4, whose 32 KB pair table
/// halves the blocks per SM (97.4 against 119.6), nor int8 and fp8 at d = 64 (270.6 / 284.6
/// against 307.7 / 289.7); the residual and int8 only where the documents fill its 64-token
/// blocks (`whole_blocks`). Elsewhere it runs when forced (`Kernel::Bulk`).
fn bulk_by_default(tag: i32, param: i32, dim: usize, whole_blocks: bool) -> bool {
    match tag {
        0 => param <= 2 && whole_blocks,
        2 => dim == 128 && whole_blocks,
        3 => dim == 128,
        _ => false,
    }
}

/// The codec tag of kernels/codec.cu (`CodecTag`) and its parameter (nbits, M).
pub(super) fn codec_tag(codec: &Codec) -> (i32, i32) {
    match codec {
        Codec::Residual(r) => (0, r.nbits() as i32),
        Codec::Pq(p) => (1, p.m() as i32),
        Codec::Int8 => (2, 0),
        Codec::Fp8 => (3, 0),
    }
}

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

    #[test]
    fn runs_pay_where_documents_leave_their_own_tiles_part_empty() {
        let offsets = |lens: &[usize]| {
            let mut o = vec![0];
            for l in lens {
                o.push(o.last().unwrap() + l);
            }
            o
        };
        // Full tiles: no gain. 66-token documents: each its own tile, two to a tile in runs.
        assert!(!pack_pays(&offsets(&[128; 10])));
        assert!(!pack_pays(&offsets(&[256, 384, 128])));
        assert!(pack_pays(&offsets(&[66; 100])));
        assert!(pack_pays(&offsets(&[1; 300])));
        // 100 tokens: 100 tiles against 79, under 1.3 times.
        assert!(!pack_pays(&offsets(&[100; 100])));
        assert!(!pack_pays(&offsets(&[])));
        assert_eq!(
            runs_kernel_of("maxsim_codec_wg_residual2_d128"),
            "maxsim_codec_wgp_residual2_d128"
        );
    }

    #[test]
    fn every_fused_kernel_has_a_name() {
        let names = fused_kernel_names();
        assert_eq!(names.len(), CODEC_DIMS.len() * 5 + PQ_SHAPES.len());
        for (d, m) in PQ_SHAPES {
            assert!((d / m) % 2 == 0 && m % 4 == 0 && d % m == 0, "({d}, {m})");
        }
        // The batched kernels: every codec at d 64 and 128, each instantiated in the source twice
        // (a document's own tiles, runs); then the bulk-copy kernels (int8 and fp8 at d 64 and
        // 128; the residual at nbits 2, 4 at d 64 and 1, 2, 4 at d 128).
        let names = batched_kernel_names();
        assert_eq!(names.len(), 2 * (2 * 5 + 7) + 4 + 5);
        let (batched, bulk) = names.split_at(2 * (2 * 5 + 7));
        let bulk_src = include_str!("../../kernels/codec_bulk.cu");
        for name in bulk {
            assert!(
                bulk_src.contains(&format!("INSTANTIATE_CODEC_BULK({name},")),
                "{name}"
            );
        }
        let src = include_str!("../../kernels/codec_wgmma.cu");
        for name in batched {
            let suffix = name
                .strip_prefix("maxsim_codec_wgp_")
                .or_else(|| name.strip_prefix("maxsim_codec_wg_"))
                .unwrap();
            let (stem, d) = suffix.rsplit_once("_d").unwrap();
            let per_d = format!("INSTANTIATE_CODEC_WG_DIMS({stem},");
            let one = format!("INSTANTIATE_CODEC_WG({suffix},");
            assert!(
                src.contains(&one) || (src.contains(&per_d) && ["64", "128"].contains(&d)),
                "{name}"
            );
        }
        assert_eq!(
            batched
                .iter()
                .filter(|n| n.starts_with("maxsim_codec_wgp_"))
                .count(),
            2 * 5 + 7
        );
    }

    #[test]
    fn whole_blocks_are_multiples_of_64_tokens_from_128() {
        assert!(whole_blocks(&[0, 128, 320, 576]));
        assert!(whole_blocks(&[0]), "no documents");
        assert!(!whole_blocks(&[0, 64]), "one block");
        assert!(!whole_blocks(&[0, 128, 208]), "80 tokens");
        assert!(!whole_blocks(&[0, 128, 128]), "an empty document");
        assert!(!whole_blocks(&[0, 144]));
    }

    #[test]
    fn batched_kernel_from_enough_blocks_or_when_forced() {
        let r2 = (0, 2, 128);
        let pick = |shape, blocks, force| codec_kernel(shape, blocks, true, (true, true), force);
        let warp = || Some(CodecKernel::Warp("maxsim_codec_residual2_d128".into()));
        let bulk = || Some(CodecKernel::Bulk("maxsim_codec_bk_residual2_d128".into()));
        let batched = || {
            Some(CodecKernel::Batched(
                "maxsim_codec_wg_residual2_d128".into(),
            ))
        };
        // Below the batched kernel's blocks: the bulk-copy kernel where loaded and the words
        // are padded (our uploads), else the one-warp kernel.
        assert_eq!(pick(r2, 1, None), bulk());
        assert_eq!(pick(r2, 3, None), bulk());
        // Documents that leave its 64-token blocks partly empty: the one-warp kernel, unless
        // forced.
        let partial = |force| codec_kernel(r2, 1, true, (true, false), force);
        assert_eq!(partial(None), warp());
        assert_eq!(partial(Some(Kernel::Bulk)), bulk());
        assert_eq!(codec_kernel(r2, 4, true, (true, false), None), batched());
        let partly = |tag| codec_kernel((tag, 0, 128), 1, true, (true, false), None);
        assert!(matches!(partly(2), Some(CodecKernel::Warp(_))), "int8");
        assert!(matches!(partly(3), Some(CodecKernel::Bulk(_))), "fp8");
        assert_eq!(codec_kernel(r2, 1, true, (false, true), None), warp());
        assert_eq!(codec_kernel(r2, 1, false, (true, true), None), warp());
        assert_eq!(pick(r2, 4, None), batched());
        assert_eq!(codec_kernel(r2, 4, true, (false, true), None), batched());
        assert!(matches!(
            pick((2, 0, 128), 4, None),
            Some(CodecKernel::Batched(_))
        ));
        assert_eq!(codec_kernel(r2, 32, false, (true, true), None), warp());
        for (tag, name) in [(2, "int8"), (3, "fp8")] {
            assert_eq!(
                pick((tag, 0, 128), 3, None),
                Some(CodecKernel::Bulk(format!("maxsim_codec_bk_{name}_d128")))
            );
        }
        // The residual's bulk kernels: rows of codes a multiple of 16 bytes, d 64 and 128; by
        // default at nbits 1 and 2 only, int8 and fp8's at d = 128 only.
        assert!(matches!(
            pick((0, 1, 128), 1, None),
            Some(CodecKernel::Bulk(_))
        ));
        assert!(matches!(
            pick((0, 2, 64), 1, None),
            Some(CodecKernel::Bulk(_))
        ));
        assert!(matches!(
            pick((0, 4, 64), 1, None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            pick((0, 4, 128), 1, None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            pick((0, 4, 64), 1, Some(Kernel::Bulk)),
            Some(CodecKernel::Bulk(_))
        ));
        assert!(matches!(
            pick((2, 0, 64), 1, None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            pick((0, 1, 64), 1, None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            pick((0, 2, 96), 1, None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            pick((1, 16, 128), 1, None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            codec_kernel((3, 0, 64), 1, false, (true, true), None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            pick((3, 0, 96), 1, None),
            Some(CodecKernel::Warp(_))
        ));
        assert!(matches!(
            pick((2, 0, 64), 9, Some(Kernel::Bulk)),
            Some(CodecKernel::Bulk(_))
        ));
        assert!(matches!(
            pick((2, 0, 64), 1, Some(Kernel::Mma)),
            Some(CodecKernel::Warp(_))
        ));
        assert_eq!(pick(r2, 9, Some(Kernel::Bulk)), bulk());
        assert_eq!(
            codec_kernel(r2, 1, true, (false, true), Some(Kernel::Bulk)),
            warp()
        );
        assert_eq!(pick(r2, 1, Some(Kernel::Wgmma)), batched());
        assert_eq!(pick(r2, 32, Some(Kernel::Mma)), warp());
        // The lookup-table kernel: pq only, when forced.
        assert_eq!(
            pick((1, 16, 128), 1, Some(Kernel::Lut)),
            Some(CodecKernel::Lut("maxsim_pq_lut_m16".into()))
        );
        assert_eq!(pick(r2, 1, Some(Kernel::Lut)), warp());
        assert!(lut_kernel_names().contains(&"maxsim_pq_lut_m64".to_string()));
        // d = 96: the one-warp kernel only; d = 48: none (decoded at upload).
        assert!(matches!(
            pick((3, 0, 96), 32, None),
            Some(CodecKernel::Warp(_))
        ));
        assert_eq!(pick((0, 2, 48), 32, None), None);
        assert_eq!(
            batched_kernel_of(1, 16, 128).as_deref(),
            Some("maxsim_codec_wg_pq16_d128")
        );
    }
}

//! The compiled program's functions, by family and (dtype, d): `Kernels`, loaded once per
//! context; the compression kernels apart (`CompressKernels`).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};

use super::codec_kernels::{batched_kernel_names, fused_kernel_names, lut_kernel_names};
use super::device::drv;
use super::plan::{
    BULK_ROWS_MAX_DIM, Kernel, MMA_DIMS, STREAM_DIMS, WG_DIMS, WIDE_DIMS, bulk_rows_chunks,
    span_any_instances,
};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// `maxsim_span_any`'s key: dtype, then `span_any_key`'s chunks, alignment and HALF.
pub(super) type SpanAnyKey = (DType, usize, usize, bool);

/// The functions of one compiled program, per family; the tables are keyed by what selects
/// an instantiation (dtype, and d where the family is instantiated per d).
pub(super) struct Kernels {
    /// (kernel, dtype) → function, for the kernels with the f32-query signature.
    pub(super) general: Vec<((Kernel, DType), CudaFunction)>,
    pub(super) read_ceiling: CudaFunction,
    /// The copy engine's read ceiling (sm_90+).
    pub(super) read_ceiling_bulk: Option<CudaFunction>,
    pub(super) topk_segments: CudaFunction,
    pub(super) topk_merge: CudaFunction,
    pub(super) topk_merge_groups: CudaFunction,
    /// (dtype, d) → the tensor-core kernel and its resident blocks per SM.
    pub(super) mma: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, d) → the bulk-copy tensor-core kernel, d ≤ 128 and wide (empty below sm_90).
    pub(super) bulk: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, dimensions a warp) → `maxsim_bulk_any`, d a multiple of 8 in 129..=1024
    /// (`bulk_any_slice`; sm_90+).
    pub(super) bulk_any: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, 32·KCH: the instantiation's bound) → `maxsim_bulk_rows` at 32- and 64-token
    /// tiles, d a multiple of 8 in 129..=`BULK_ROWS_MAX_DIM` (sm_90+).
    pub(super) bulk_rows: Vec<((DType, usize), [CudaFunction; 2])>,
    /// (corpus dtype, d) → `maxsim_bulk_split`, f32 queries split into 16-bit parts, d ≤ 128
    /// (sm_90+), and `maxsim_split_parts`, which splits them for it once a call.
    pub(super) bulk_split: Vec<((DType, usize), (CudaFunction, CudaFunction))>,
    /// d → `maxsim_bulk_planes`, `maxsim_bulk_split` on an f32 corpus split once at upload,
    /// and `split_f32_planes`, which splits it (d ≤ 128, sm_90+).
    pub(super) bulk_planes: Vec<((DType, usize), (CudaFunction, CudaFunction))>,
    /// (dtype, d) → `maxsim_span`, bulk copies of tiles that span documents, d ≤ 128 (sm_90+).
    pub(super) span: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, then `span_any_key`: 32-wide chunks of d, the rows' alignment in halves, one k16
    /// product in the last chunk) → `maxsim_span_any`, any d ≤ 256 (sm_90+).
    pub(super) span_any: Vec<(SpanAnyKey, CudaFunction)>,
    /// (dtype, d of `STREAM_DIMS`) → `maxsim_stream`, documents streamed through registers
    /// (sm_90+, beside `maxsim_span`).
    pub(super) stream: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, d) → the many-query tensor-core kernel.
    pub(super) gemm: Vec<((DType, usize), CudaFunction)>,
    /// (dtype, d) → its warpgroup-MMA twin (empty but on sm_90a).
    pub(super) wgmma: Vec<((DType, usize), CudaFunction)>,
    pub(super) sum_qblocks: CudaFunction,
    /// dtype → the query gather of `score_raw`; `iota_offsets` (its dense batches' offsets).
    pub(super) pack_queries: Vec<(DType, CudaFunction)>,
    pub(super) iota_offsets: CudaFunction,
    /// Rows copied to a wider pitch, zeros past their end (padded corpora and their queries).
    pub(super) repitch_rows: CudaFunction,
    /// (dtype, d of the instantiation: `ring_instance`) → the ring kernel.
    pub(super) ring: Vec<((DType, usize), CudaFunction)>,
    /// name → the fused compressed-corpus kernels (kernels/codec.cu, `codec_kernels::fused_kernel`).
    pub(super) codec: Vec<(String, CudaFunction)>,
    /// name → the batched ones (kernels/codec_wgmma.cu; empty but on sm_90a).
    pub(super) codec_wg: Vec<(String, CudaFunction)>,
    /// name → the lookup-table pq kernels (kernels/codec_lut.cu), their tables and group sums.
    pub(super) codec_lut: Vec<(String, CudaFunction)>,
    pub(super) pq_lut_table: CudaFunction,
    pub(super) pq_lut_sum: CudaFunction,
    pub(super) codec_centroid_scores: CudaFunction,
    pub(super) residual_inv_norms: CudaFunction,
    pub(super) codec_decode_f32: CudaFunction,
    /// Borrowed residual tensors (`score_residual_raw`): the pair table, the query blocks.
    pub(super) residual_pair_table: CudaFunction,
    pub(super) codec_pack_queries: CudaFunction,
    /// kernels/compress.cu: k-means and the encoders.
    pub(super) compress: CompressKernels,
    /// (dtype, 32-wide chunks of d) → `maxsim_train_fwd` (kernels/train.cu).
    pub(super) train_fwd: Vec<((DType, usize), CudaFunction)>,
    /// dtype → `maxsim_train_dq` and `maxsim_train_dd`.
    pub(super) train_bwd: Vec<(DType, CudaFunction, CudaFunction)>,
    /// `maxsim_train_split`: f32 documents as the f32 forward's f16 planes.
    pub(super) train_split: CudaFunction,
    /// kernels/ivf.cu: IVF search's probe, candidates and centroid interaction.
    pub(super) ivf: IvfKernels,
}

/// The sizes of the probe kernels' register lists (kernels/ivf.cu `ivf_probe_pP`): a row's
/// `nprobe` best are kept in the first size at least `nprobe`.
pub(super) const IVF_PROBE_LISTS: [usize; 4] = [8, 16, 32, 64];

/// The IVF search stages' functions (kernels/ivf.cu).
pub(super) struct IvfKernels {
    /// `ivf_probe_pP` and `ivf_probe_merge_pP` for P = 8, 16, 32, 64 (`IVF_PROBE_LISTS`).
    pub(super) probe: Vec<CudaFunction>,
    pub(super) probe_merge: Vec<CudaFunction>,
    pub(super) mark: CudaFunction,
    pub(super) interaction: CudaFunction,
}

impl Kernels {
    /// Every function of the program compiled for `arch` (`compile::arch_name`): the bulk-copy
    /// kernels from sm_90 on, the warpgroup-MMA ones on sm_90a (elsewhere they are empty).
    pub(super) fn load(module: &Arc<CudaModule>, arch: &str) -> Result<Self> {
        let f = |name: &str| module.load_function(name).map_err(drv("kernel lookup"));
        let mut mma = Vec::new();
        for dtype in [DType::F16, DType::BF16] {
            for dim in MMA_DIMS {
                mma.push(((dtype, dim), f(&format!("maxsim_mma_{dtype}_d{dim}"))?));
            }
        }
        let (mut bulk, mut span, mut span_any) = (Vec::new(), Vec::new(), Vec::new());
        let mut stream = Vec::new();
        let (mut bulk_split, mut bulk_any, mut bulk_planes) = (Vec::new(), Vec::new(), Vec::new());
        let mut bulk_rows = Vec::new();
        if !arch.starts_with("sm_8") {
            for dtype in [DType::F16, DType::BF16] {
                // 32·KQ dimensions a warp, or 32·KQ − 16 (the half-chunk instantiation, _h).
                for kq in 2..=8 {
                    let name = format!("maxsim_bulk_any_{dtype}_k{kq}");
                    bulk_any.push(((dtype, 32 * kq), f(&name)?));
                    bulk_any.push(((dtype, 32 * kq - 16), f(&format!("{name}h"))?));
                }
                for kch in bulk_rows_chunks(129)..=bulk_rows_chunks(BULK_ROWS_MAX_DIM) {
                    let name = format!("maxsim_bulk_rows_{dtype}_k{kch}");
                    let tiles = [f(&format!("{name}_t32"))?, f(&format!("{name}_t64"))?];
                    bulk_rows.push(((dtype, 32 * kch), tiles));
                }
            }
            for dtype in [DType::F32, DType::F16, DType::BF16] {
                for dim in MMA_DIMS {
                    let name = format!("maxsim_bulk_split_{dtype}_d{dim}");
                    let parts = format!("maxsim_split_parts_{dtype}_d{dim}");
                    bulk_split.push(((dtype, dim), (f(&name)?, f(&parts)?)));
                }
            }
            for dim in MMA_DIMS {
                let (name, split) = (
                    format!("maxsim_bulk_planes_d{dim}"),
                    format!("split_f32_planes_d{dim}"),
                );
                bulk_planes.push(((DType::F32, dim), (f(&name)?, f(&split)?)));
            }
            for dtype in [DType::F16, DType::BF16] {
                for dim in MMA_DIMS {
                    span.push(((dtype, dim), f(&format!("maxsim_span_{dtype}_d{dim}"))?));
                }
                for (chunks, align, half) in span_any_instances() {
                    let tag = match align {
                        8 => 'a',
                        4 => 'd',
                        2 => 'w',
                        _ => 'u',
                    };
                    let h = if half { "h" } else { "" };
                    let name = format!("maxsim_span_any_{dtype}_k{chunks}{tag}{h}");
                    span_any.push(((dtype, chunks, align, half), f(&name)?));
                }
                for dim in STREAM_DIMS {
                    stream.push(((dtype, dim), f(&format!("maxsim_stream_{dtype}_d{dim}"))?));
                }
                for dim in MMA_DIMS.into_iter().chain(WIDE_DIMS) {
                    bulk.push(((dtype, dim), f(&format!("maxsim_bulk_{dtype}_d{dim}"))?));
                }
            }
        }
        let mut gemm = Vec::new();
        for dtype in [DType::F16, DType::BF16] {
            for dim in MMA_DIMS {
                gemm.push(((dtype, dim), f(&format!("maxsim_gemm_{dtype}_d{dim}"))?));
            }
        }
        let mut wgmma = Vec::new();
        if arch == "sm_90a" {
            for dtype in [DType::F16, DType::BF16] {
                for dim in WG_DIMS {
                    wgmma.push(((dtype, dim), f(&format!("maxsim_wgmma_{dtype}_d{dim}"))?));
                }
            }
        }
        Ok(Kernels {
            general: [Kernel::Tiled, Kernel::V1, Kernel::V2]
                .into_iter()
                .flat_map(|k| [DType::F32, DType::F16, DType::BF16].map(|d| (k, d)))
                .map(|(k, d)| Ok(((k, d), f(&format!("{}_{d}", k.name()))?)))
                .collect::<Result<_>>()?,
            read_ceiling: f("read_ceiling")?,
            read_ceiling_bulk: if arch.starts_with("sm_8") {
                None
            } else {
                Some(f("read_ceiling_bulk")?)
            },
            topk_segments: f("topk_segments")?,
            topk_merge: f("topk_merge")?,
            topk_merge_groups: f("topk_merge_groups")?,
            mma,
            bulk,
            bulk_split,
            bulk_planes,
            bulk_any,
            bulk_rows,
            span,
            span_any,
            stream,
            gemm,
            wgmma,
            sum_qblocks: f("sum_qblocks")?,
            pack_queries: [DType::F32, DType::F16, DType::BF16]
                .into_iter()
                .map(|d| Ok((d, f(&format!("pack_queries_{d}"))?)))
                .collect::<Result<_>>()?,
            iota_offsets: f("iota_offsets")?,
            repitch_rows: f("repitch_rows")?,
            ring: [DType::F16, DType::BF16, DType::F32]
                .into_iter()
                .flat_map(|t| MMA_DIMS.map(|d| (t, d)))
                .map(|(t, d)| Ok(((t, d), f(&format!("maxsim_ring_{t}_d{d}"))?)))
                .collect::<Result<_>>()?,
            codec: fused_kernel_names()
                .into_iter()
                .map(|n| Ok((n.clone(), f(&n)?)))
                .collect::<Result<_>>()?,
            codec_wg: if arch == "sm_90a" {
                batched_kernel_names()
                    .into_iter()
                    .map(|n| Ok((n.clone(), f(&n)?)))
                    .collect::<Result<_>>()?
            } else {
                Vec::new()
            },
            codec_lut: lut_kernel_names()
                .into_iter()
                .map(|n| Ok((n.clone(), f(&n)?)))
                .collect::<Result<_>>()?,
            pq_lut_table: f("pq_lut_table")?,
            pq_lut_sum: f("pq_lut_sum")?,
            codec_centroid_scores: f("codec_centroid_scores")?,
            residual_inv_norms: f("residual_inv_norms")?,
            codec_decode_f32: f("codec_decode_f32")?,
            residual_pair_table: f("residual_pair_table")?,
            codec_pack_queries: f("codec_pack_queries")?,
            compress: CompressKernels::load(&f, arch)?,
            train_fwd: [DType::F16, DType::BF16, DType::F32]
                .into_iter()
                .flat_map(|t| (1..=MMA_DIMS.len()).map(move |k| (t, k)))
                .map(|(t, k)| Ok(((t, k), f(&format!("maxsim_train_fwd_{t}_k{k}"))?)))
                .collect::<Result<_>>()?,
            train_bwd: [DType::F16, DType::BF16, DType::F32]
                .into_iter()
                .map(|t| {
                    let dq = f(&format!("maxsim_train_dq_{t}"))?;
                    Ok((t, dq, f(&format!("maxsim_train_dd_{t}"))?))
                })
                .collect::<Result<_>>()?,
            train_split: f("maxsim_train_split")?,
            ivf: IvfKernels {
                probe: IVF_PROBE_LISTS
                    .iter()
                    .map(|p| f(&format!("ivf_probe_p{p}")))
                    .collect::<Result<_>>()?,
                probe_merge: IVF_PROBE_LISTS
                    .iter()
                    .map(|p| f(&format!("ivf_probe_merge_p{p}")))
                    .collect::<Result<_>>()?,
                mark: f("ivf_mark")?,
                interaction: f("ivf_interaction")?,
            },
        })
    }
}

/// The function for `key` in one of the per-(dtype, d) kernel tables (`what`: for the error).
pub(super) fn kernel_in<'a, F>(
    table: &'a [((DType, usize), F)],
    key: (DType, usize),
    what: &str,
) -> Result<&'a F> {
    table
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, f)| f)
        .ok_or_else(|| Error::Argument(format!("no {what} kernel for {} d = {}", key.0, key.1)))
}

/// The functions of kernels/compress.cu.
pub(super) struct CompressKernels {
    pub(super) to_f16: Vec<(DType, CudaFunction)>,
    /// d → `kmeans_assign_wgmma_d*` (sm_90a only: elsewhere empty).
    pub(super) assign_wgmma: Vec<(usize, CudaFunction)>,
    pub(super) assign_simple: CudaFunction,
    pub(super) accumulate: CudaFunction,
    pub(super) finish: CudaFunction,
    pub(super) residual: Vec<(DType, CudaFunction)>,
    pub(super) pq: Vec<(DType, CudaFunction)>,
    pub(super) int8: Vec<(DType, CudaFunction)>,
    pub(super) fp8: Vec<(DType, CudaFunction)>,
}

impl CompressKernels {
    pub(super) fn load(f: &dyn Fn(&str) -> Result<CudaFunction>, arch: &str) -> Result<Self> {
        let per_dtype = |prefix: &str| -> Result<Vec<(DType, CudaFunction)>> {
            [DType::F32, DType::F16, DType::BF16]
                .into_iter()
                .map(|t| Ok((t, f(&format!("{prefix}_{t}"))?)))
                .collect()
        };
        let assign_wgmma = if arch == "sm_90a" {
            [64, 128]
                .into_iter()
                .map(|d| Ok((d, f(&format!("kmeans_assign_wgmma_d{d}"))?)))
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        Ok(CompressKernels {
            to_f16: per_dtype("rows_to_f16")?,
            assign_wgmma,
            assign_simple: f("kmeans_assign_simple")?,
            accumulate: f("kmeans_accumulate")?,
            finish: f("kmeans_finish")?,
            residual: per_dtype("residual_encode")?,
            pq: per_dtype("pq_encode")?,
            int8: per_dtype("int8_encode")?,
            fp8: per_dtype("fp8_encode")?,
        })
    }

    pub(super) fn by_dtype<'k>(
        &self,
        table: &'k [(DType, CudaFunction)],
        dtype: DType,
    ) -> Result<&'k CudaFunction> {
        table
            .iter()
            .find(|(t, _)| *t == dtype)
            .map(|(_, f)| f)
            .ok_or_else(|| Error::Argument(format!("no compression kernel for {dtype}")))
    }

    pub(super) fn assign_wgmma(&self, dim: usize) -> Option<&CudaFunction> {
        self.assign_wgmma
            .iter()
            .find(|(d, _)| *d == dim)
            .map(|(_, f)| f)
    }
}

//! The CUDA-core kernels of the general signature (kernels/ablation.cu): `maxsim_tiled`, which
//! takes any shape (f32 queries, documents as [`DocRows`]: packed, or padded with strides and
//! lengths), and the paper's V1 and V2.

use cudarc::driver::{DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};

use super::{Launch, Target};
use crate::cuda::context::GpuContext;
use crate::cuda::device::drv;
use crate::cuda::memory::{DeviceCorpus, DeviceQueries};
use crate::cuda::plan::{Kernel, MAX_QUERIES_PER_LAUNCH};
use crate::error::{Error, Result};
use crate::matrix::DType;

/// One of the general kernels: `Tiled`, `V1` or `V2`.
pub(in crate::cuda) struct General {
    pub(in crate::cuda) kernel: Kernel,
}

/// The general kernels' documents (kernels/ablation.cu: DocRows, passed by value): packed by
/// `offsets`, or a padded batch (`offsets` 0) of `max_len` rows per document, `batch_stride`
/// elements apart, `lengths` rows each (0: all `max_len`); rows `row_stride` elements apart.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::cuda) struct DocRows {
    pub(in crate::cuda) tokens: u64,
    pub(in crate::cuda) offsets: u64,
    pub(in crate::cuda) lengths: u64,
    pub(in crate::cuda) row_stride: i64,
    pub(in crate::cuda) batch_stride: i64,
    pub(in crate::cuda) max_len: i64,
}

// SAFETY: #[repr(C)] plain data, laid out as `DocRows` in kernels/ablation.cu (three 8-byte
// pointers, three i64).
unsafe impl DeviceRepr for DocRows {}

impl DocRows {
    pub(in crate::cuda) fn packed(tokens: u64, offsets: u64, dim: usize) -> Self {
        DocRows {
            tokens,
            offsets,
            lengths: 0,
            row_stride: dim as i64,
            batch_stride: 0,
            max_len: 0,
        }
    }
}

/// Arguments of a general-kernel launch besides its `Target` (device pointers as `u64`):
/// contiguous f32 query rows with `num_queries + 1` i64 offsets, and the documents.
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct GeneralArgs {
    pub(in crate::cuda) q_tokens: u64,
    pub(in crate::cuda) q_offsets: u64,
    pub(in crate::cuda) num_queries: usize,
    pub(in crate::cuda) docs: DocRows,
    pub(in crate::cuda) dim: usize,
    pub(in crate::cuda) dtype: DType,
}

impl Launch for General {
    unsafe fn launch(
        &self,
        gpu: &GpuContext,
        queries: &DeviceQueries,
        corpus: &DeviceCorpus,
        t: Target<'_>,
    ) -> Result<()> {
        let args = GeneralArgs {
            q_tokens: queries.f32_rows(t.stream)?,
            q_offsets: queries.offsets.device_ptr(t.stream).0,
            num_queries: queries.len,
            docs: DocRows::packed(
                corpus.tokens.device_ptr(t.stream).0,
                corpus.offsets.device_ptr(t.stream).0,
                corpus.width,
            ),
            dim: corpus.width,
            dtype: corpus.dtype,
        };
        // SAFETY: the pointers are live device allocations of the sizes the kernel reads
        // (queries.len + 1 offsets, corpus.len + 1 offsets, the target's candidates and outputs
        // per this function's contract).
        unsafe { self.launch_args(gpu, t, args) }
    }
}

impl General {
    /// Launch with arguments as given (`score_raw`'s documents lie as the caller has them).
    ///
    /// # Safety
    /// The pointers of `a` and of `t` must be live device memory of the sizes they describe,
    /// usable on `t.stream`; every query has at least one token.
    pub(in crate::cuda) unsafe fn launch_args(
        &self,
        gpu: &GpuContext,
        t: Target<'_>,
        a: GeneralArgs,
    ) -> Result<()> {
        if t.n == 0 || a.num_queries == 0 {
            return Ok(());
        }
        if t.n > i32::MAX as usize || a.dim > i32::MAX as usize {
            return Err(Error::Argument(format!(
                "{} documents per launch is over the limit",
                t.n
            )));
        }
        let Some((_, func)) = gpu
            .kernels
            .general
            .iter()
            .find(|(k, _)| *k == (self.kernel, a.dtype))
        else {
            return Err(Error::Argument(format!(
                "{} has no variant for the general signature",
                self.kernel.name()
            )));
        };
        let (num_docs, dim) = (t.n as i32, a.dim as i32);
        let mut start = 0;
        while start < a.num_queries {
            let count = (a.num_queries - start).min(MAX_QUERIES_PER_LAUNCH);
            let q_offsets = a.q_offsets + (start * 8) as u64;
            let out = t.out + (start * t.n * 4) as u64;
            let cfg = LaunchConfig {
                grid_dim: (t.n as u32, count as u32, 1),
                block_dim: (self.kernel.threads(), 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = t.stream.launch_builder(func);
            b.arg(&a.q_tokens)
                .arg(&q_offsets)
                .arg(&a.docs)
                .arg(&t.doc_index)
                .arg(&num_docs)
                .arg(&dim)
                .arg(&out);
            // SAFETY: the argument list matches `maxsim_tiled_*` / `maxsim_v1_*` /
            // `maxsim_v2_*` in kernels/ablation.cu (DocRows by value, its #[repr(C)] twin); the
            // pointers are valid per this function's contract.
            unsafe { b.launch(cfg) }.map_err(drv("maxsim launch"))?;
            start += count;
        }
        Ok(())
    }
}

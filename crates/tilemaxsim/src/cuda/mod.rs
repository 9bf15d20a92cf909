//! The CUDA engine: the same [`Scorer`](crate::Scorer) trait over device memory. Kernels are
//! `.cu` files in `kernels/`, one per family, compiled by NVRTC at first use and cached on disk
//! (`compile.rs`). The driver and NVRTC are loaded at run time, so one binary runs on machines
//! with no CUDA at all: there, [`devices`] is empty and asking for a GPU is a clear error.
//!
//! Three levels of use: [`CudaScorer`] as a [`Scorer`](crate::Scorer) on host data (uploads per
//! call); a [`DeviceCorpus`] uploaded once and scored many times; and [`CudaScorer::score_raw`]
//! on device memory the caller owns (raw pointers and a stream, as PyTorch hands them over), in
//! the device's primary context.
//!
//! One job a file, and the edges between them run one way (scorer → launch, topk, memory,
//! timing, raw → context → device; index → scorer), which `tests/module_graph.rs` checks:
//! - `device.rs`: the GPUs, whether one can be used, the driver's errors;
//! - `compile.rs`: NVRTC and the on-disk cache; `functions.rs`: the program's functions by family;
//! - `context.rs`: [`GpuContext`], one GPU's context, stream, kernels and occupancy;
//! - `plan.rs`: which kernel runs which shape (pure functions), tile constants; `plan/span.rs` the
//!   spanning kernel's sizes, `plan/pitch.rs` the padded width of uploads, `plan/tests.rs` their
//!   tests;
//! - `memory.rs`: device buffers, the corpus and queries on the device, uploads, the f32 split;
//! - `pitch.rs`: corpora stored padded to a faster width, and their queries re-pitched to it;
//! - `codes.rs`: compressed corpora and the queries of their fused kernels on the device;
//! - `launch/`: one small type per kernel family, each a `Launch`;
//! - `topk.rs`: top-k selection on the device; `timing.rs`: CUDA-event timing and ceilings;
//! - `raw.rs`: device memory the engine borrows, made ready for `score_raw`;
//! - `raw_residual.rs`: a PLAID residual corpus the engine borrows, scored in place
//!   ([`CudaScorer::score_residual_raw`]);
//! - `scorer.rs`: [`CudaScorer`]: the kernel choice and the sequence of a call, and its
//!   `Scorer` impl;
//! - `index.rs`: [`GpuIndex`], search over resident, streamed or sharded corpora;
//! - `codes_index.rs`: [`GpuCodesIndex`], search over compressed corpora on GPUs (resident or streamed);
//! - `ivf.rs`: [`GpuIvfSearch`], an index segment's IVF search with every stage on one GPU;
//! - `ivf_shards.rs`: [`ShardedIvfSearch`], the same with the segment's documents split over GPUs;
//! - `rerank.rs`: [`GpuRerank`], the exact second stage with the exact corpus resident on a GPU;
//! - `compress.rs`: [`compress`], codecs trained and corpora encoded on a GPU;
//! - `train.rs`: the training kernels' forward (scores and argmax) and backward passes on
//!   borrowed tensors ([`CudaScorer::train_forward`], [`CudaScorer::train_backward`]).

mod codec_kernels;
mod codes;
mod codes_index;
mod compile;
mod compress;
mod compress_stage;
mod context;
mod device;
mod functions;
mod index;
mod ivf;
mod ivf_codes;
mod ivf_shards;
mod launch;
mod memory;
mod pitch;
mod plan;
mod raw;
mod raw_residual;
mod rerank;
mod scorer;
mod timing;
mod topk;
mod train;

pub use codes::{CodecQueries, DeviceCodes};
pub use codes_index::GpuCodesIndex;
pub use compile::{
    Compiled, arch_name, compile as compile_cached, compile_uncached, nvrtc_available,
    nvrtc_version, source,
};
pub use compress::{CHUNK_BYTES, compress, compress_in_chunks};
pub use context::GpuContext;
pub use device::{GpuInfo, check_available, devices, driver_available};
pub use index::GpuIndex;
pub use ivf::{FirstStages, GpuIvfSearch, MAX_GPU_NPROBE};
pub use ivf_shards::ShardedIvfSearch;
pub use memory::{DeviceCorpus, DeviceQueries, split_rows_ok};
pub use plan::Kernel;
pub use raw::{RawArgs, RawDocs, RawLayout, RawQueries};
pub use raw_residual::RawResidual;
pub use rerank::{GpuExact, GpuRerank};
pub use scorer::CudaScorer;
pub use timing::{COPY_SHAPES, CopyRate, ReadCeilings, median};
pub use topk::hits_from;
pub use train::{TrainArgs, TrainQueries, train_supported};

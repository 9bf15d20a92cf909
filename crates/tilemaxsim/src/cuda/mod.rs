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
//! One job a file:
//! - `device.rs`: the GPUs, whether one can be used, the driver's errors;
//! - `memory.rs`: device buffers, the corpus and queries on the device, uploads, the f32 split;
//! - `plan.rs`: which kernel runs which shape (pure functions and their tests), tile constants;
//! - `functions.rs`: the compiled program's functions by family;
//! - `launch.rs`: one launch per kernel family, arguments as structs;
//! - `topk.rs`: top-k selection on the device;
//! - `timing.rs`: CUDA-event timing, the read ceiling, the host-to-device rate;
//! - `scorer.rs`: [`CudaScorer`] and its `Scorer` impl;
//! - `raw.rs`: [`CudaScorer::score_raw`], device memory the engine borrows;
//! - `index.rs`: [`GpuIndex`], search over resident, streamed or sharded corpora;
//! - `compile.rs`: NVRTC and the on-disk cache.

mod compile;
mod device;
mod functions;
mod index;
mod launch;
mod memory;
mod plan;
mod raw;
mod scorer;
mod timing;
mod topk;

pub use compile::{arch_name, compile_uncached, nvrtc_available, nvrtc_version, source};
pub use device::{GpuInfo, check_available, devices, driver_available};
pub use index::GpuIndex;
pub use memory::{DeviceCorpus, DeviceQueries};
pub use plan::Kernel;
pub use raw::{RawArgs, RawDocs, RawLayout, RawQueries};
pub use scorer::CudaScorer;
pub use timing::median;
pub use topk::hits_from;

// What the sibling modules share (raw.rs and index.rs name them through `super::`).
use device::drv;
use launch::{DocRows, GeneralArgs, Target};
use memory::{DeviceBlocks, Mem, block_layout, blocks_dim_ok, grow, split_ok};
use plan::{DocLengths, QBLOCK, queries_dim_ok};
use topk::TopKBuffers;

//! [`GpuContext`]: one GPU's primary context, its stream, the compiled program and its
//! functions, and what every launch family shares: the occupancy the driver reports (grids
//! sized to what is resident) and `maxsim_mma`'s task counter. The launch families, the memory
//! helpers, top-k and timing take a `&GpuContext`; only the scorer holds one.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
};

use super::compile::{self, arch_name};
use super::device::{GpuInfo, check_available, drv, info};
use super::functions::Kernels;
use super::plan::Tuning;
use crate::error::{Error, Result};

/// One GPU, ready to launch the engine's kernels.
pub struct GpuContext {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    pub(super) kernels: Kernels,
    pub(super) info: GpuInfo,
    /// The launch shapes tuned for this device (`Tuning::for_device`).
    pub(super) tuning: Tuning,
    /// Whether the kernels came from the on-disk cache (no NVRTC compile at this start).
    pub(super) cache_hit: bool,
    /// The tensor-core kernel's task counter (zeroed before each launch, on the stream).
    task_counter: Mutex<CudaSlice<u64>>,
    /// Resident blocks per SM and dynamic shared memory allowed, per kernel: `blocks_per_sm`.
    occupancy: Mutex<Occupancy>,
}

/// What `blocks_per_sm` has asked the driver: per (kernel handle, threads, dynamic shared
/// bytes) the resident blocks per SM; per kernel handle the dynamic shared memory it is allowed.
#[derive(Default)]
struct Occupancy {
    per_sm: Vec<((usize, u32, usize), u32)>,
    allowed: Vec<(usize, usize)>,
}

/// `maxsim_mma`'s task counter for one launch (`GpuContext::task_counter`), held, not read:
/// the context's locked until the launch is enqueued, a launch's own until freed after it.
#[allow(dead_code)]
pub(super) enum TaskCounter<'a> {
    None,
    Shared(MutexGuard<'a, CudaSlice<u64>>),
    Own(CudaSlice<u64>),
}

/// Device memory left free beside what a searcher holds resident.
const HEADROOM: usize = 1 << 30;

impl GpuContext {
    /// Open GPU `ordinal` (its primary context) and load the kernels (compiled, or from the
    /// cache).
    pub(super) fn open(ordinal: usize) -> Result<Self> {
        check_available(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(drv("context"))?;
        // One stream, ordered by us: cudarc's per-buffer event tracking is not needed.
        // SAFETY: every buffer of this context is used on `stream` only, or on a stream the
        // caller orders (score_raw, the streamed index's copy stream, with events).
        unsafe { ctx.disable_event_tracking() };
        let info = info(&ctx)?;
        let (major, minor) = info.compute_capability;
        if major < 8 {
            return Err(Error::DeviceUnavailable(format!(
                "cuda:{ordinal} is sm_{major}{minor}; tilemaxsim needs sm_80 or newer"
            )));
        }
        let (ptx, cache_hit) = compile::compile(arch_name(major, minor))?;
        let module = ctx.load_module(ptx).map_err(drv("loading the kernels"))?;
        let kernels = Kernels::load(&module, arch_name(major, minor))?;
        // A non-blocking stream of the scorer's own, not the context's legacy default stream,
        // which every scorer of the process shared: a search queued there behind another
        // scorer's work (a new generation's multi-GB upload held a served search for its whole
        // length).
        let stream = ctx.new_stream().map_err(drv("stream"))?;
        let task_counter = Mutex::new(stream.alloc_zeros::<u64>(1).map_err(drv("task counter"))?);
        // Zeroed before any caller's stream can use the context.
        stream.synchronize().map_err(drv("synchronize"))?;
        Ok(GpuContext {
            ctx,
            stream,
            _module: module,
            kernels,
            tuning: Tuning::for_device(&info.name),
            info,
            cache_hit,
            task_counter,
            occupancy: Mutex::new(Occupancy::default()),
        })
    }

    /// Whether `bytes` more fit in the GPU's free memory with `HEADROOM` to spare (the test a
    /// searcher makes before holding a corpus resident).
    pub(super) fn fits(&self, bytes: usize) -> Result<bool> {
        let (free, _) = self.ctx.mem_get_info().map_err(drv("memory info"))?;
        Ok(bytes + HEADROOM <= free)
    }

    pub(super) fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv("synchronize"))
    }

    /// Allow `func` `smem` bytes of dynamic shared memory and return how many of its blocks of
    /// `threads` are resident per SM (at least 1). Asked of the driver once per (kernel,
    /// threads, shared bytes), then remembered: two driver calls per launch are a few µs.
    pub(super) fn blocks_per_sm(
        &self,
        func: &CudaFunction,
        threads: u32,
        smem: usize,
    ) -> Result<u32> {
        let f = func.cu_function() as usize;
        // A poisoned lock only means another launch panicked; the tables stay valid.
        let mut known = self.occupancy.lock().unwrap_or_else(|e| e.into_inner());
        // The allowance is the function's own attribute, one for all its launches (until
        // raised, 48 KB less the function's static shared memory): raised to the largest size
        // asked for, never lowered, so a smaller launch after a larger one still fits.
        let allowed = match known.allowed.iter().find(|(k, _)| *k == f) {
            Some(a) => a.1,
            None => {
                let fixed = func
                    .shared_size_bytes()
                    .map_err(drv("kernel shared memory"))?;
                (48usize << 10).saturating_sub(fixed.max(0) as usize)
            }
        };
        if allowed < smem {
            func.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .map_err(drv("kernel shared memory"))?;
            known.allowed.retain(|(k, _)| *k != f);
            known.allowed.push((f, smem));
        }
        let key = (f, threads, smem);
        if let Some(&(_, per_sm)) = known.per_sm.iter().find(|(k, _)| *k == key) {
            return Ok(per_sm);
        }
        let per_sm = func
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem, None)
            .map_err(drv("occupancy"))?
            .max(1);
        known.per_sm.push((key, per_sm));
        Ok(per_sm)
    }

    /// Blocks of `func` (`threads` each, `smem` dynamic shared bytes) resident on the whole
    /// device at once.
    pub(super) fn resident_blocks(
        &self,
        func: &CudaFunction,
        threads: u32,
        smem: usize,
    ) -> Result<u64> {
        let per_sm = self.blocks_per_sm(func, threads, smem)?;
        Ok(self.info.multiprocessors.max(1) as u64 * per_sm as u64)
    }

    /// A persistent grid of `func`: as many blocks of `threads` threads and `smem` dynamic
    /// shared bytes as are resident at once, at most `work` blocks.
    pub(super) fn persistent_grid(
        &self,
        func: &CudaFunction,
        threads: u32,
        smem: usize,
        work: u64,
    ) -> Result<LaunchConfig> {
        let blocks = self.resident_blocks(func, threads, smem)?.min(work).max(1) as u32;
        Ok(LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem as u32,
        })
    }

    /// The task counter of `maxsim_mma` launched as `cfg`, zeroed on the stream, when each
    /// warp has many of the `tasks` (dynamic scheduling pays on uneven documents and tails;
    /// with few tasks per warp the reset and the claims cost more than they save); else a null
    /// pointer (a static schedule: each warp strides over the tasks). On the context's stream
    /// the context's counter, locked until the launch is enqueued (so no other launch zeroes or
    /// takes it in between); on a caller's stream (`score_raw`) a counter of the launch's own,
    /// freed in stream order after it.
    pub(super) fn task_counter(
        &self,
        tasks: u64,
        cfg: &LaunchConfig,
        stream: &Arc<CudaStream>,
    ) -> Result<(TaskCounter<'_>, u64)> {
        let resident_warps = cfg.grid_dim.0 as u64 * (cfg.block_dim.0 as u64 / 32);
        if tasks <= 16 * resident_warps {
            return Ok((TaskCounter::None, 0));
        }
        if !Arc::ptr_eq(stream, &self.stream) {
            let own = stream.alloc_zeros::<u64>(1).map_err(drv("task counter"))?;
            let ptr = own.device_ptr(stream).0;
            return Ok((TaskCounter::Own(own), ptr));
        }
        // A poisoned lock only means another launch panicked; the counter is re-zeroed anyway.
        let mut counter = self.task_counter.lock().unwrap_or_else(|e| e.into_inner());
        self.stream
            .memset_zeros(&mut *counter)
            .map_err(drv("task counter"))?;
        let ptr = counter.device_ptr(&self.stream).0;
        Ok((TaskCounter::Shared(counter), ptr))
    }
}

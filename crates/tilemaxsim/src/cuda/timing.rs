//! Timing and ceilings: CUDA-event timing of enqueued work (calls back to back, or isolated), the
//! device's streaming read ceiling and the host-to-device copy rate, and the median of timings.

use cudarc::driver::{CudaEvent, DevicePtr, LaunchConfig, PushKernelArg};

use super::context::GpuContext;
use super::device::drv;
use crate::error::Result;

/// The device's streaming read ceiling in GB/s, median of `reps` timed runs after a warm-up over
/// `bytes` bytes (use several times the L2 size): the fastest of a 16-byte-load kernel and
/// (sm_90+) the copy engine's bulk copies into shared memory at each of [`COPY_SHAPES`]
/// (`read_ceiling_bulk`, as the bulk kernels read), so that no kernel passes 100% of it.
pub(super) fn read_ceiling(gpu: &GpuContext, bytes: usize, reps: usize) -> Result<f64> {
    Ok(read_ceilings(gpu, bytes, reps)?.best())
}

/// The read ceilings of one measurement, in GB/s.
#[derive(Clone, Debug)]
pub struct ReadCeilings {
    /// The bytes each kernel read a call.
    pub bytes: usize,
    /// 16-byte loads, grid-stride (`read_ceiling`).
    pub loads: f64,
    /// Bulk copies (`read_ceiling_bulk`, sm_90+; empty before) at each of [`COPY_SHAPES`].
    pub copies: Vec<CopyRate>,
}

/// `read_ceiling_bulk`'s rate at one shape: copies of `bytes` into `stages` stages.
#[derive(Clone, Copy, Debug)]
pub struct CopyRate {
    pub bytes: usize,
    pub stages: usize,
    pub gbps: f64,
}

impl ReadCeilings {
    /// The fastest bulk-copy shape's rate (`None` before sm_90).
    pub fn copies_best(&self) -> Option<f64> {
        self.copies.iter().map(|c| c.gbps).reduce(f64::max)
    }

    /// The ceiling: the fastest of every kernel measured.
    pub fn best(&self) -> f64 {
        self.copies_best().map_or(self.loads, |c| c.max(self.loads))
    }
}

/// Every ceiling kernel's rate over one buffer of `bytes` (rounded down to a multiple of the
/// largest copy, at least one copy).
pub(super) fn read_ceilings(gpu: &GpuContext, bytes: usize, reps: usize) -> Result<ReadCeilings> {
    // One buffer (a multiple of every kernel's unit) and one sink for all of them.
    let unit = COPY_SHAPES.iter().map(|s| s.0).max().unwrap_or(16);
    let bytes = (bytes / unit).max(1) * unit;
    let buf = gpu
        .stream
        .alloc_zeros::<u8>(bytes)
        .map_err(drv("ceiling buffer"))?;
    let sink = gpu
        .stream
        .alloc_zeros::<u32>(1)
        .map_err(drv("ceiling buffer"))?;
    let (p, _g) = buf.device_ptr(&gpu.stream);
    let (s, _g2) = sink.device_ptr(&gpu.stream);
    let loads = read_ceiling_loads(gpu, p, bytes, s, reps)?;
    let mut copies = Vec::new();
    if let Some(f) = &gpu.kernels.read_ceiling_bulk {
        for &(chunk, stages) in COPY_SHAPES {
            let gbps = read_ceiling_copies(gpu, f, (p, bytes), (chunk, stages), s, reps)?;
            copies.push(CopyRate {
                bytes: chunk,
                stages,
                gbps,
            });
        }
    }
    Ok(ReadCeilings {
        bytes,
        loads,
        copies,
    })
}

/// `read_ceiling_bulk`'s shapes, `(copy bytes, stages)`: the bulk kernels' own (32 KB, two
/// stages, three blocks a SM), more copies in flight in smaller pieces, and larger copies at one
/// block a SM. The ceiling takes the fastest.
pub const COPY_SHAPES: &[(usize, usize)] = &[(32 << 10, 2), (16 << 10, 4), (64 << 10, 3)];

/// `read_ceiling_bulk`'s rate in GB/s over `buf` (device address, bytes: a multiple of
/// `shape`'s copy) at `shape` (copy bytes, stages); `s`: a u32 sink.
fn read_ceiling_copies(
    gpu: &GpuContext,
    func: &cudarc::driver::CudaFunction,
    (p, bytes): (u64, usize),
    (chunk, stages): (usize, usize),
    s: u64,
    reps: usize,
) -> Result<f64> {
    let chunks = bytes / chunk;
    let smem = stages * chunk + stages * 8;
    let resident = gpu.resident_blocks(func, 32, smem)?;
    let (n, chunk_arg, stages_arg) = (chunks as i64, chunk as i32, stages as i32);
    let times = time_ms(gpu, reps, || {
        let cfg = LaunchConfig {
            grid_dim: (resident.clamp(1, u32::MAX as u64) as u32, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let mut b = gpu.stream.launch_builder(func);
        b.arg(&p).arg(&n).arg(&chunk_arg).arg(&stages_arg).arg(&s);
        // SAFETY: `p` holds `chunks` copies of `chunk` bytes, `s` one u32; `smem` bytes hold the
        // stages and their mbarriers (allowed by resident_blocks).
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(drv("bulk read ceiling"))
    })?;
    Ok((chunks * chunk) as f64 / median(&times) / 1e6)
}

/// The 16-byte-load kernel's rate in GB/s over the `bytes` (a multiple of 16) at device
/// address `p`; `s`: a u32 sink.
fn read_ceiling_loads(gpu: &GpuContext, p: u64, bytes: usize, s: u64, reps: usize) -> Result<f64> {
    let n16 = bytes / 16;
    let n = n16 as i64;
    let blocks = (gpu.info.multiprocessors.max(1) as u32) * 32;
    let times = time_ms(gpu, reps, || {
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = gpu.stream.launch_builder(&gpu.kernels.read_ceiling);
        b.arg(&p).arg(&n).arg(&s);
        // SAFETY: `p` holds n16 16-byte vectors, `s` one u32.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(drv("read ceiling"))
    })?;
    Ok((n16 * 16) as f64 / median(&times) / 1e6)
}

/// The host→device copy rate in GB/s from page-locked memory: `bytes` copied `reps` times
/// after a warm-up, timed with CUDA events, median.
pub(super) fn h2d(gpu: &GpuContext, bytes: usize, reps: usize) -> Result<f64> {
    // SAFETY: the copied bytes are never interpreted.
    let host = unsafe { gpu.ctx.alloc_pinned::<u8>(bytes.max(1)) }.map_err(drv("pinned buffer"))?;
    let mut dev = unsafe { gpu.stream.alloc::<u8>(bytes.max(1)) }.map_err(drv("copy buffer"))?;
    let times = time_ms(gpu, reps, || {
        gpu.stream
            .memcpy_htod(&host, &mut dev)
            .map_err(drv("host to device copy"))
    })?;
    Ok(bytes as f64 / median(&times) / 1e6)
}

/// Time `work` (enqueued on the scorer's stream) with CUDA events, calls back to back:
/// warm-up calls (`warm_up`), then `reps` calls, each between its own pair of events, with no
/// host wait between them (the stream is drained once, at the end); milliseconds per call.
/// This is how `triton.testing.do_bench` times the peers (bench/peers_gpu.py): a call's
/// figure is the device's time for it in a stream of calls, its launch overlapped with the
/// call before. Where the host cannot enqueue a call as fast as the device runs it, the
/// events see the device waiting for the host, and the figure says so (launch-bound).
pub(super) fn time_ms(
    gpu: &GpuContext,
    reps: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    warm_up(gpu, &mut work)?;
    let events = event_pairs(gpu, reps)?;
    for (start, end) in &events {
        start.record(&gpu.stream).map_err(drv("event"))?;
        work()?;
        end.record(&gpu.stream).map_err(drv("event"))?;
    }
    gpu.synchronize()?;
    events
        .iter()
        .map(|(s, e)| Ok(s.elapsed_ms(e).map_err(drv("event"))? as f64))
        .collect()
}

/// Warm-up calls of `work` for at least 100 ms of wall time (and three calls), waiting for
/// the device every fourth call so the queue stays short. With three warm-up calls, in
/// `bench/gpu_check.sh`'s suite the case right after an f32 ring case ran 17% slow in its
/// back-to-back figure while its isolated figure, taken next, was normal
/// (bench/results/gpu_check.log, 2026-11-24 03:35; earlier suites had the same outlier);
/// two suites with this warm-up had none (bench/results/suite_warmup.log), which does not
/// prove the cause.
fn warm_up(gpu: &GpuContext, work: &mut impl FnMut() -> Result<()>) -> Result<()> {
    let start = std::time::Instant::now();
    let mut calls = 0;
    while calls < 3 || start.elapsed() < std::time::Duration::from_millis(100) {
        work()?;
        calls += 1;
        if calls % 4 == 0 {
            gpu.synchronize()?;
        }
    }
    gpu.synchronize()
}

/// Time `work` as one isolated call: the host waits for each call before it enqueues the
/// next, so each figure includes the launch's latency (the host's call, the driver, the
/// device picking it up). One warm-up, then `reps` calls; milliseconds per call.
pub(super) fn time_ms_isolated(
    gpu: &GpuContext,
    reps: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    work()?;
    gpu.synchronize()?;
    let events = event_pairs(gpu, reps)?;
    let mut out = Vec::with_capacity(reps);
    for (start, end) in &events {
        start.record(&gpu.stream).map_err(drv("event"))?;
        work()?;
        end.record(&gpu.stream).map_err(drv("event"))?;
        end.synchronize().map_err(drv("event"))?;
        out.push(start.elapsed_ms(end).map_err(drv("event"))? as f64);
    }
    Ok(out)
}

/// `n` pairs of timing events, made before the timed calls so making them costs no call.
fn event_pairs(gpu: &GpuContext, n: usize) -> Result<Vec<(CudaEvent, CudaEvent)>> {
    let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    (0..n)
        .map(|_| {
            Ok((
                gpu.ctx.new_event(flags).map_err(drv("event"))?,
                gpu.ctx.new_event(flags).map_err(drv("event"))?,
            ))
        })
        .collect()
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

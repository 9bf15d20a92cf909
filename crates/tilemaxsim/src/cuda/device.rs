//! Devices: whether CUDA is here ([`driver_available`]), the GPUs ([`devices`], [`GpuInfo`]),
//! whether one can be used ([`check_available`]), and the driver's errors as the crate's (`drv`).

use cudarc::driver::{CudaContext, DriverError};

use super::compile::nvrtc_available;
use crate::error::{Error, Result};

pub(super) fn drv(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| {
        if format!("{e:?}").contains("OUT_OF_MEMORY") {
            Error::OutOfMemory(format!("GPU: {what}"))
        } else {
            Error::DeviceUnavailable(format!("CUDA error in {what}: {e:?}"))
        }
    }
}

/// Whether the CUDA driver library can be loaded on this machine.
pub fn driver_available() -> bool {
    // SAFETY: only tries to open the shared library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// One GPU as the driver describes it.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    pub multiprocessors: i32,
    /// Shared memory one block may opt in to (bytes).
    pub smem_per_block: usize,
}

impl std::fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (sm_{}{}, {} SMs, {:.1} GiB)",
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64
        )
    }
}

pub(super) fn info(ctx: &CudaContext) -> Result<GpuInfo> {
    use cudarc::driver::sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    };
    Ok(GpuInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(drv("device name"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(drv("compute capability"))?,
        total_memory: ctx.total_mem().map_err(drv("memory size"))?,
        multiprocessors: ctx
            .attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(drv("SM count"))?,
        smem_per_block: ctx
            .attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(drv("shared memory size"))? as usize,
    })
}

/// The GPUs this machine has (empty when there is no CUDA driver or no device).
pub fn devices() -> Result<Vec<GpuInfo>> {
    if !driver_available() {
        return Ok(Vec::new());
    }
    let n = match CudaContext::device_count() {
        Ok(n) => n as usize,
        Err(_) => return Ok(Vec::new()), // e.g. a driver without a device
    };
    (0..n)
        .map(|i| info(&*CudaContext::new(i).map_err(drv("context"))?))
        .collect()
}

/// Why GPU `ordinal` cannot be used, or `Ok` when it can.
pub fn check_available(ordinal: usize) -> Result<()> {
    if !driver_available() {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal}: no CUDA driver (libcuda) on this machine"
        )));
    }
    let n = CudaContext::device_count().map_err(drv("device count"))? as usize;
    if ordinal >= n {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal}: this machine has {n} CUDA device(s)"
        )));
    }
    if !nvrtc_available() {
        return Err(Error::DeviceUnavailable(format!(
            "cuda:{ordinal}: libnvrtc not found (needed to compile the kernels)"
        )));
    }
    Ok(())
}

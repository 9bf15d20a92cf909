//! The CUDA engine's place: it implements the same [`crate::Scorer`] trait over device memory
//! (kernels as `.cu` files compiled by NVRTC). It is not built yet; until it is, asking for a
//! CUDA device is a clear error and `auto` falls back to the CPU.

use crate::error::{Error, Result};

/// GPUs this build can use. None yet: the CUDA engine is not part of this build.
pub fn devices() -> Vec<String> {
    Vec::new()
}

/// Why CUDA cannot be used by this build.
pub fn unavailable(ordinal: usize) -> Error {
    Error::DeviceUnavailable(format!(
        "cuda:{ordinal} requested, but this build of tilemaxsim has no CUDA engine yet; use --device cpu"
    ))
}

pub(crate) fn check_available(ordinal: usize) -> Result<()> {
    Err(unavailable(ordinal))
}

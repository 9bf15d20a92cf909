//! `tilemaxsim._native`: the engine for Python. Thin on purpose: tensors come in through DLPack
//! (`tensor.rs`), scoring runs on the tensors' device (`score.rs`; PLAID residual tensors on a
//! GPU in place: `residual.rs`; the training kernels' passes: `train.rs`), corpora load, search and
//! save (`corpus.rs`), index directories build and search (`index.rs`), and errors become Python exceptions (`errors.rs`). The Python API, its
//! shape handling, autograd and the drop-ins live in `python/tilemaxsim/`.

use pyo3::prelude::*;

mod corpus;
mod errors;
mod index;
mod residual;
mod score;
mod tensor;
mod train;

/// Whether a CUDA GPU the engine can use is present (driver, device and NVRTC).
#[pyfunction]
fn cuda_available() -> bool {
    tilemaxsim::cuda::check_available(0).is_ok()
}

/// The GPUs the engine sees, one line each.
#[pyfunction]
fn cuda_devices() -> Vec<String> {
    tilemaxsim::cuda::devices()
        .map(|d| d.iter().map(|g| g.to_string()).collect())
        .unwrap_or_default()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(score::score, m)?)?;
    m.add_function(wrap_pyfunction!(residual::score_residual, m)?)?;
    m.add_function(wrap_pyfunction!(train::train_forward, m)?)?;
    m.add_function(wrap_pyfunction!(train::train_backward, m)?)?;
    m.add_class::<corpus::Corpus>()?;
    m.add_class::<index::Index>()?;
    m.add_function(wrap_pyfunction!(cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_devices, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

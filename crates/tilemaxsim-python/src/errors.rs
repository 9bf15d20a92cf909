//! The engine's errors as Python exceptions: bad shapes and values as `ValueError`, dtypes as
//! `TypeError`, files as `OSError`, memory as `MemoryError`, devices as `RuntimeError`.

use pyo3::PyErr;
use pyo3::exceptions::{PyMemoryError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use tilemaxsim::Error;

pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::DType { .. } => PyTypeError::new_err(msg),
        Error::Io { .. } | Error::Format { .. } | Error::Parse { .. } => PyOSError::new_err(msg),
        Error::OutOfMemory(_) => PyMemoryError::new_err(msg),
        Error::DeviceUnavailable(_) => PyRuntimeError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

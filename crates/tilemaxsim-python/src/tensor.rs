//! Tensors from Python through DLPack (the `dlpark` crate): a torch tensor or numpy array seen
//! as its device, element type, shape, strides and address, held for one call (the producer's
//! memory stays alive until the `Tensor` drops). No stream is negotiated: the work goes on the
//! caller's current stream, after whatever the caller enqueued there, as any torch operation's
//! does (negotiating the same stream through torch's `__dlpack__(stream=...)` cost 15 µs a
//! tensor on the H200's host, for no ordering gained).

use dlpark::ffi::{DLDataTypeCode, DLDeviceType};
use dlpark::python::{ImportedDlpack, from_dlpack};
use half::{bf16, f16};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use tilemaxsim::{DType, Elements, Matrix, OwnedElements};

use crate::errors::to_py;

/// Where a tensor's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Cpu,
    Cuda(usize),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Cpu => write!(f, "cpu"),
            Place::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// The element types the bindings read: the three float types scored, the integers of
/// offsets and lengths, and the bytes of codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    Float(DType),
    I64,
    I32,
    U8,
    Other,
}

/// One imported tensor. Strides are in elements and never negative.
pub struct Tensor {
    pub name: &'static str,
    pub place: Place,
    pub elem: Elem,
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
    /// The address of element 0 (data pointer plus byte offset).
    pub ptr: u64,
    _owner: ImportedDlpack,
}

impl Tensor {
    /// Import `obj` (anything with `__dlpack__`: torch tensors, numpy arrays, ...) as argument
    /// `name`.
    pub fn import(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Self> {
        let imported = from_dlpack(obj.as_borrowed(), None, None).map_err(|e| {
            PyTypeError::new_err(format!(
                "{name}: not a tensor or array this library can read through DLPack ({e})"
            ))
        })?;
        let view = imported
            .validate()
            .map_err(|e| PyValueError::new_err(format!("{name}: invalid DLPack tensor ({e})")))?;
        let device = view.device();
        let place = match device.device_type {
            DLDeviceType::CPU | DLDeviceType::CUDAHOST => Place::Cpu,
            DLDeviceType::CUDA => Place::Cuda(usize::try_from(device.device_id).map_err(|_| {
                PyValueError::new_err(format!("{name}: CUDA device {}", device.device_id))
            })?),
            other => {
                return Err(PyValueError::new_err(format!(
                    "{name}: tensors on DLPack device type {} are not supported (CPU and CUDA are)",
                    other.0
                )));
            }
        };
        let dtype = view.dtype();
        let elem = match (dtype.code, dtype.bits, dtype.lanes) {
            (DLDataTypeCode::FLOAT, 32, 1) => Elem::Float(DType::F32),
            (DLDataTypeCode::FLOAT, 16, 1) => Elem::Float(DType::F16),
            (DLDataTypeCode::BFLOAT, 16, 1) => Elem::Float(DType::BF16),
            (DLDataTypeCode::INT, 64, 1) => Elem::I64,
            (DLDataTypeCode::INT, 32, 1) => Elem::I32,
            (DLDataTypeCode::UINT, 8, 1) => Elem::U8,
            _ => Elem::Other,
        };
        let shape: Vec<usize> = view
            .shape()
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<_, _>>()
            .map_err(|_| PyValueError::new_err(format!("{name}: negative size in its shape")))?;
        let strides = view
            .strides_or_compact()
            .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                PyValueError::new_err(format!(
                    "{name}: negative strides are not supported (call .contiguous() first)"
                ))
            })?;
        let ptr = view.data_ptr() as u64 + view.byte_offset();
        Ok(Tensor {
            name,
            place,
            elem,
            shape,
            strides,
            ptr,
            _owner: imported,
        })
    }

    /// The float dtype, or a `TypeError` naming what is supported.
    pub fn float(&self) -> PyResult<DType> {
        match self.elem {
            Elem::Float(d) => Ok(d),
            _ => Err(PyTypeError::new_err(format!(
                "{}: unsupported dtype; float32, float16 and bfloat16 are supported",
                self.name
            ))),
        }
    }

    /// The element count.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// `ndim` dimensions, or a `ValueError` saying what was expected.
    pub fn expect_ndim(&self, ndim: &[usize], what: &str) -> PyResult<()> {
        if ndim.contains(&self.shape.len()) {
            Ok(())
        } else {
            Err(PyValueError::new_err(format!(
                "{}: expected {what}, got shape {:?}",
                self.name, self.shape
            )))
        }
    }

    /// Whether the last dimension is contiguous (stride 1 or size 1).
    pub fn rows_contiguous(&self) -> bool {
        self.shape.last().is_none_or(|&n| n <= 1) || self.strides.last() == Some(&1)
    }

    /// A 1-D integer tensor's values, read on the host (CPU tensors only).
    pub fn host_ints(&self) -> PyResult<Vec<i64>> {
        self.expect_ndim(&[1], "a 1-D integer tensor")?;
        if self.place != Place::Cpu {
            return Err(PyValueError::new_err(format!(
                "{}: expected a CPU tensor here",
                self.name
            )));
        }
        let (n, s) = (self.shape[0], self.strides[0]);
        // SAFETY: DLPack describes `n` elements `s` apart at `ptr`, host memory (checked
        // above), kept alive by `_owner`; read_unaligned tolerates any address.
        let read = |i: usize| unsafe {
            match self.elem {
                Elem::I64 => Ok((self.ptr as *const i64).add(i * s).read_unaligned()),
                Elem::I32 => Ok((self.ptr as *const i32).add(i * s).read_unaligned() as i64),
                _ => Err(PyTypeError::new_err(format!(
                    "{}: expected int64 or int32",
                    self.name
                ))),
            }
        };
        (0..n).map(read).collect()
    }

    /// Append to `out` the raw bytes of rows `rows` of a host tensor: row `r` is `dim`
    /// contiguous elements starting `base + r × row_stride` elements in (values as stored).
    pub fn host_rows(
        &self,
        base: usize,
        row_stride: usize,
        rows: std::ops::Range<usize>,
        dim: usize,
        out: &mut Vec<u8>,
    ) {
        let size = match self.elem {
            Elem::Float(d) => d.size(),
            _ => 4,
        };
        for r in rows {
            let start = (base + r * row_stride) * size;
            // SAFETY: the caller passes rows inside the tensor's extent (its shape and
            // strides), host memory kept alive by `_owner`.
            let bytes = unsafe {
                std::slice::from_raw_parts((self.ptr as *const u8).add(start), dim * size)
            };
            out.extend_from_slice(bytes);
        }
    }

    /// Spans of rows `(base, row_stride, rows)` of a host float tensor copied into one packed
    /// buffer of its dtype (any alignment).
    pub fn gather(&self, spans: &[(usize, usize, usize)], dim: usize) -> PyResult<OwnedElements> {
        let dtype = self.float()?;
        let mut bytes = Vec::new();
        for &(base, stride, rows) in spans {
            self.host_rows(base, stride, 0..rows, dim, &mut bytes);
        }
        Ok(match dtype {
            DType::F32 => OwnedElements::F32(bytemuck::pod_collect_to_vec(&bytes)),
            DType::F16 => OwnedElements::F16(bytemuck::pod_collect_to_vec(&bytes)),
            DType::BF16 => OwnedElements::BF16(bytemuck::pod_collect_to_vec(&bytes)),
        })
    }

    /// Spans of rows `(base, row_stride, rows)` of a host float tensor (as for `gather`) as row
    /// ranges of one matrix over the tensor's own memory, without a copy, where they can be:
    /// each span's rows `dim` elements apart from a row boundary, the data aligned for its
    /// dtype. `None` otherwise (then `gather` them).
    #[allow(clippy::type_complexity)]
    pub fn borrowed_rows(
        &self,
        spans: &[(usize, usize, usize)],
        dim: usize,
    ) -> PyResult<Option<(Matrix<'_>, Vec<std::ops::Range<usize>>)>> {
        let dtype = self.float()?;
        let aligned = (self.ptr as usize).is_multiple_of(dtype.size());
        let rows_ok = spans
            .iter()
            .all(|&(base, stride, rows)| base.is_multiple_of(dim) && (rows <= 1 || stride == dim));
        if self.place != Place::Cpu || dim == 0 || !aligned || !rows_ok {
            return Ok(None);
        }
        let extent = spans
            .iter()
            .map(|&(b, _, r)| b + r * dim)
            .max()
            .unwrap_or(0);
        let ranges = spans
            .iter()
            .map(|&(b, _, r)| b / dim..b / dim + r)
            .collect();
        let p = self.ptr as usize;
        // SAFETY: the spans lie inside the tensor (its shape and strides), so its first
        // `extent` elements from element 0 lie in one allocation of host memory (a strided view
        // lies inside its storage), kept alive by `_owner` as long as `self`; the address is
        // aligned for the dtype (checked above). Only the spans' rows are read.
        let elems = unsafe {
            match dtype {
                DType::F32 => Elements::F32(std::slice::from_raw_parts(p as *const f32, extent)),
                DType::F16 => Elements::F16(std::slice::from_raw_parts(p as *const f16, extent)),
                DType::BF16 => Elements::BF16(std::slice::from_raw_parts(p as *const bf16, extent)),
            }
        };
        Ok(Some((Matrix::new(elems, dim).map_err(to_py)?, ranges)))
    }

    /// Host queries `[A, Lq, d]`, query i its first `lengths[i]` rows, copied one buffer each.
    pub fn host_queries(&self, lengths: &[usize]) -> PyResult<Vec<OwnedElements>> {
        let dim = self.shape[2];
        lengths
            .iter()
            .enumerate()
            .map(|(i, &l)| self.gather(&[(i * self.strides[0], self.strides[1], l)], dim))
            .collect()
    }
}

/// Matrices over owned query buffers of `dim` columns.
pub fn matrices(owned: &[OwnedElements], dim: usize) -> PyResult<Vec<Matrix<'_>>> {
    owned
        .iter()
        .map(|o| Matrix::new(o.as_elements(), dim))
        .collect::<tilemaxsim::Result<Vec<_>>>()
        .map_err(to_py)
}

//! Borrowed token matrices: the element types we store (f32, f16, bf16) and a row-major
//! `rows × d` view over them. Queries are matrices; a corpus is one matrix plus offsets.

use half::{bf16, f16};

use crate::error::{Error, Result};

/// Element type of stored embeddings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// The lower-case name used on the command line and in reports (`f32`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(DType::F32),
            "f16" | "fp16" | "float16" | "half" => Ok(DType::F16),
            "bf16" | "bfloat16" => Ok(DType::BF16),
            other => Err(Error::DType {
                what: "element type".into(),
                got: other.into(),
                supported: "f32, f16, bf16".into(),
            }),
        }
    }
}

/// A borrowed flat slice of elements of one dtype.
#[derive(Clone, Copy, Debug)]
pub enum Elements<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
}

impl<'a> Elements<'a> {
    pub fn len(&self) -> usize {
        match self {
            Elements::F32(s) => s.len(),
            Elements::F16(s) => s.len(),
            Elements::BF16(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> DType {
        match self {
            Elements::F32(_) => DType::F32,
            Elements::F16(_) => DType::F16,
            Elements::BF16(_) => DType::BF16,
        }
    }

    /// Element `i` widened to f32 (exact for every dtype).
    #[inline]
    pub fn get_f32(&self, i: usize) -> f32 {
        match self {
            Elements::F32(s) => s[i],
            Elements::F16(s) => s[i].to_f32(),
            Elements::BF16(s) => s[i].to_f32(),
        }
    }

    /// The sub-slice `range`, same dtype.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Elements<'a> {
        match *self {
            Elements::F32(s) => Elements::F32(&s[range]),
            Elements::F16(s) => Elements::F16(&s[range]),
            Elements::BF16(s) => Elements::BF16(&s[range]),
        }
    }

    /// The raw little-endian bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        match *self {
            Elements::F32(s) => bytemuck::cast_slice(s),
            Elements::F16(s) => bytemuck::cast_slice(s),
            Elements::BF16(s) => bytemuck::cast_slice(s),
        }
    }

    /// Whether every element is finite. Tests the exponent bits without branching, so the loop
    /// vectorizes (a scan over a large corpus runs at memory speed); [`Self::first_non_finite`]
    /// then finds where, on the rare slice that fails.
    pub fn all_finite(&self) -> bool {
        // A value is NaN or infinite exactly when all its exponent bits are set.
        fn all<T: Copy, B: Copy + std::ops::BitAnd<Output = B> + PartialEq>(
            s: &[T],
            bits: impl Fn(T) -> B,
            exponent: B,
        ) -> bool {
            s.chunks(4096).all(|c| {
                !c.iter()
                    .fold(false, |bad, &x| bad | (bits(x) & exponent == exponent))
            })
        }
        match *self {
            Elements::F32(s) => all(s, f32::to_bits, 0x7f80_0000u32),
            Elements::F16(s) => all(s, f16::to_bits, 0x7c00u16),
            Elements::BF16(s) => all(s, bf16::to_bits, 0x7f80u16),
        }
    }

    /// Index of the first NaN or infinite element, if any.
    pub fn first_non_finite(&self) -> Option<(usize, f32)> {
        fn find<T: Copy>(
            s: &[T],
            is_finite: impl Fn(T) -> bool,
            f: impl Fn(T) -> f32,
        ) -> Option<(usize, f32)> {
            s.iter().position(|&x| !is_finite(x)).map(|i| (i, f(s[i])))
        }
        match *self {
            Elements::F32(s) => find(s, f32::is_finite, |x| x),
            Elements::F16(s) => find(s, |x: f16| x.is_finite(), f16::to_f32),
            Elements::BF16(s) => find(s, |x: bf16| x.is_finite(), bf16::to_f32),
        }
    }
}

impl<'a> From<&'a [f32]> for Elements<'a> {
    fn from(s: &'a [f32]) -> Self {
        Elements::F32(s)
    }
}
impl<'a> From<&'a [f16]> for Elements<'a> {
    fn from(s: &'a [f16]) -> Self {
        Elements::F16(s)
    }
}
impl<'a> From<&'a [bf16]> for Elements<'a> {
    fn from(s: &'a [bf16]) -> Self {
        Elements::BF16(s)
    }
}

/// Owned elements of one dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum OwnedElements {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
}

impl OwnedElements {
    /// Replace the NaN and infinite values among elements `range` by zero; whether there were
    /// any. (Scorers that give NaN for non-finite input score the cleared values, then write
    /// NaN where they were.)
    pub fn zero_non_finite(&mut self, range: std::ops::Range<usize>) -> bool {
        fn clear<T: Copy>(s: &mut [T], finite: impl Fn(T) -> bool, zero: T) -> bool {
            let mut any = false;
            for x in s.iter_mut().filter(|x| !finite(**x)) {
                *x = zero;
                any = true;
            }
            any
        }
        match self {
            OwnedElements::F32(v) => clear(&mut v[range], f32::is_finite, 0.0),
            OwnedElements::F16(v) => clear(&mut v[range], |x: f16| x.is_finite(), f16::ZERO),
            OwnedElements::BF16(v) => clear(&mut v[range], |x: bf16| x.is_finite(), bf16::ZERO),
        }
    }

    pub fn as_elements(&self) -> Elements<'_> {
        match self {
            OwnedElements::F32(v) => Elements::F32(v),
            OwnedElements::F16(v) => Elements::F16(v),
            OwnedElements::BF16(v) => Elements::BF16(v),
        }
    }

    /// Round f32 values to `dtype` (round to nearest even).
    pub fn from_f32(values: &[f32], dtype: DType) -> Self {
        match dtype {
            DType::F32 => OwnedElements::F32(values.to_vec()),
            DType::F16 => OwnedElements::F16(values.iter().map(|&x| f16::from_f32(x)).collect()),
            DType::BF16 => OwnedElements::BF16(values.iter().map(|&x| bf16::from_f32(x)).collect()),
        }
    }

    /// Copy borrowed elements.
    pub fn from_elements(e: Elements<'_>) -> Self {
        match e {
            Elements::F32(s) => OwnedElements::F32(s.to_vec()),
            Elements::F16(s) => OwnedElements::F16(s.to_vec()),
            Elements::BF16(s) => OwnedElements::BF16(s.to_vec()),
        }
    }
}

impl From<Vec<f32>> for OwnedElements {
    fn from(v: Vec<f32>) -> Self {
        OwnedElements::F32(v)
    }
}
impl From<Vec<f16>> for OwnedElements {
    fn from(v: Vec<f16>) -> Self {
        OwnedElements::F16(v)
    }
}
impl From<Vec<bf16>> for OwnedElements {
    fn from(v: Vec<bf16>) -> Self {
        OwnedElements::BF16(v)
    }
}

/// A borrowed row-major matrix of token embeddings, `rows × dim`: one query (`Nq × d`),
/// one document (`Nd × d`), or a corpus's packed tokens (`T × d`).
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    elems: Elements<'a>,
    rows: usize,
    dim: usize,
}

impl<'a> Matrix<'a> {
    /// A `rows × dim` view of `elems`, where `rows = elems.len() / dim`. Fails when `dim` is 0
    /// or does not divide the length. Zero rows are allowed here; scorers reject empty queries.
    pub fn new(elems: impl Into<Elements<'a>>, dim: usize) -> Result<Self> {
        let elems = elems.into();
        if dim == 0 {
            return Err(Error::Shape(
                "embedding dimension d must be at least 1".into(),
            ));
        }
        if elems.len() % dim != 0 {
            return Err(Error::Shape(format!(
                "{} elements are not a whole number of rows of d = {dim}",
                elems.len()
            )));
        }
        Ok(Matrix {
            rows: elems.len() / dim,
            elems,
            dim,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn dtype(&self) -> DType {
        self.elems.dtype()
    }

    pub fn elements(&self) -> Elements<'a> {
        self.elems
    }

    /// Rows `range` as a matrix of the same width.
    pub fn rows_range(&self, range: std::ops::Range<usize>) -> Matrix<'a> {
        Matrix {
            elems: self
                .elems
                .slice(range.start * self.dim..range.end * self.dim),
            rows: range.len(),
            dim: self.dim,
        }
    }

    /// All elements widened to f32, row-major.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        (0..self.elems.len())
            .map(|i| self.elems.get_f32(i))
            .collect()
    }

    /// Rows `idx` (in that order) widened to f32, row-major.
    pub fn gather_f32(&self, idx: &[usize]) -> Vec<f32> {
        use rayon::prelude::*;
        let d = self.dim;
        let mut out = vec![0f32; idx.len() * d];
        out.par_chunks_mut(d.max(1))
            .zip(idx.par_iter())
            .for_each(|(dst, &i)| {
                for (k, v) in dst.iter_mut().enumerate() {
                    *v = self.elems.get_f32(i * d + k);
                }
            });
        out
    }

    /// Error with the (row, column) of the first NaN or infinite value, if there is one.
    /// `row_offset` is added to the row in the message (for views into a larger matrix).
    pub fn check_finite(&self, what: &str, row_offset: usize) -> Result<()> {
        match self.elems.first_non_finite() {
            None => Ok(()),
            Some((i, value)) => Err(Error::NonFinite {
                what: what.to_string(),
                row: row_offset + i / self.dim,
                col: i % self.dim,
                value,
            }),
        }
    }
}

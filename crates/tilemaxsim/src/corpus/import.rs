//! Building a corpus from files other tools write:
//! - `.npy`: one packed `[T, d]` matrix plus a `[N]` lengths vector, or one `[Nd, d]` file per
//!   document (ids from the file names);
//! - safetensors written by Python (`safetensors.torch.save_file` / `numpy.save_file`): an
//!   embeddings tensor, packed `[T, d]` with offsets or lengths or padded `[B, L, d]` with
//!   lengths or a mask (PyLate's layout), under configurable names, or one 2-D tensor per
//!   document (ids from the tensor names).
//!
//! f64 inputs become f32; `dtype` converts to the stored type (round to nearest even).

use std::path::{Path, PathBuf};

use half::f16;
use npyz::NpyFile;
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype as StDtype, TensorView};

use super::format::{copy_elements, from_st_dtype, map_file, parse, read_ints, to_offsets};
use super::{Corpus, offsets_from_lengths};
use crate::error::{Error, Result};
use crate::matrix::{DType, Matrix, OwnedElements};

/// An npy array's elements as one of our float types (f64 narrowed to f32).
pub(crate) fn npy_floats(path: &Path, npy: NpyFile<&[u8]>) -> Result<OwnedElements> {
    let bad = |e: std::io::Error| {
        Error::format(path, format!("cannot read array data: {e} (truncated?)"))
    };
    let ty = npy_type(path, &npy)?;
    Ok(match ty.as_str() {
        "<f4" | ">f4" => OwnedElements::F32(npy.into_vec::<f32>().map_err(bad)?),
        "<f2" | ">f2" => OwnedElements::F16(npy.into_vec::<f16>().map_err(bad)?),
        "<f8" | ">f8" => OwnedElements::F32(
            npy.into_vec::<f64>()
                .map_err(bad)?
                .into_iter()
                .map(|x| x as f32)
                .collect(),
        ),
        other => {
            return Err(Error::DType {
                what: format!("{}", path.display()),
                got: other.into(),
                supported: "float32, float16, float64 (.npy); for bfloat16 use safetensors".into(),
            });
        }
    })
}

fn npy_type(path: &Path, npy: &NpyFile<&[u8]>) -> Result<String> {
    match npy.dtype() {
        npyz::DType::Plain(ts) => Ok(ts.to_string()),
        _ => Err(Error::format(
            path,
            "structured arrays are not supported; save a plain numeric array",
        )),
    }
}

/// Check the shape in a `.npy` header before npyz reads it: npyz multiplies the dimensions
/// unchecked (a panic under overflow checks, a wrong element count without), so a corrupt
/// header must not reach it. Every partial product must fit in 64 bits, and the array cannot
/// hold more elements than the file has bytes.
fn check_npy_shape(path: &Path, bytes: &[u8]) -> Result<()> {
    let bad = |why: &str| Error::format(path, format!("not a valid .npy file: {why}"));
    if bytes.get(..6) != Some(&b"\x93NUMPY"[..]) {
        return Err(bad("no .npy magic string (truncated or not an .npy file?)"));
    }
    let (len, start) = match bytes.get(6) {
        Some(1) => (
            bytes
                .get(8..10)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize),
            10usize,
        ),
        Some(2 | 3) => (
            bytes
                .get(8..12)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize),
            12,
        ),
        _ => (None, 0),
    };
    let header = len
        .and_then(|len| bytes.get(start..start.checked_add(len)?))
        .ok_or_else(|| bad("the header is cut short or of an unknown version"))?;
    let header = String::from_utf8_lossy(header);
    let shape = ["'shape'", "\"shape\""]
        .iter()
        .find_map(|key| header.find(key).map(|i| &header[i + key.len()..]))
        .and_then(|rest| rest.trim_start().strip_prefix(':'))
        .and_then(|rest| rest.trim_start().strip_prefix('('))
        .and_then(|rest| rest.split_once(')'))
        .map(|(dims, _)| dims)
        .ok_or_else(|| bad("no shape in the header"))?;
    let mut nonzero = 1u64;
    let mut product = 1u64;
    for dim in shape.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let n: u64 = dim
            .trim_end_matches('L')
            .parse()
            .map_err(|_| bad(&format!("shape ({shape}) is not a list of sizes")))?;
        nonzero = nonzero
            .checked_mul(n.max(1))
            .ok_or_else(|| bad(&format!("shape ({shape}) overflows")))?;
        product = product.saturating_mul(n);
    }
    if product > (bytes.len() - start) as u64 {
        return Err(bad(&format!(
            "shape ({shape}) needs more data than the file's {} bytes (truncated?)",
            bytes.len()
        )));
    }
    Ok(())
}

pub(crate) fn open_npy<'a>(path: &Path, bytes: &'a [u8]) -> Result<NpyFile<&'a [u8]>> {
    check_npy_shape(path, bytes)?;
    let npy = NpyFile::new(bytes)
        .map_err(|e| Error::format(path, format!("not a valid .npy file: {e}")))?;
    if npy.order() == npyz::Order::Fortran && npy.shape().len() > 1 {
        return Err(Error::format(
            path,
            "Fortran-ordered array; save it C-contiguous (np.ascontiguousarray)",
        ));
    }
    Ok(npy)
}

fn npy_matrix_shape(path: &Path, npy: &NpyFile<&[u8]>) -> Result<(usize, usize)> {
    match npy.shape() {
        &[rows, dim] if dim > 0 => Ok((rows as usize, dim as usize)),
        shape => Err(Error::format(
            path,
            format!("expected a 2-D [tokens, d] array with d ≥ 1, found shape {shape:?}"),
        )),
    }
}

pub(crate) fn npy_ints(path: &Path, bytes: &[u8]) -> Result<Vec<i128>> {
    let npy = open_npy(path, bytes)?;
    if npy.shape().len() != 1 {
        return Err(Error::format(
            path,
            format!("expected a 1-D array, found shape {:?}", npy.shape()),
        ));
    }
    let bad = |e: std::io::Error| {
        Error::format(path, format!("cannot read array data: {e} (truncated?)"))
    };
    let ty = npy_type(path, &npy)?;
    macro_rules! ints {
        ($t:ty) => {
            npy.into_vec::<$t>()
                .map_err(bad)?
                .into_iter()
                .map(|x| x as i128)
                .collect()
        };
    }
    Ok(match &ty[1..] {
        "i8" => ints!(i64),
        "i4" => ints!(i32),
        "i2" => ints!(i16),
        "i1" => ints!(i8),
        "u8" => ints!(u64),
        "u4" => ints!(u32),
        "u2" => ints!(u16),
        "u1" => ints!(u8),
        _ => {
            return Err(Error::format(
                path,
                format!("expected an integer array, found dtype {ty}"),
            ));
        }
    })
}

fn to_lengths(path: &Path, ints: Vec<i128>) -> Result<Vec<usize>> {
    ints.into_iter()
        .enumerate()
        .map(|(i, v)| match usize::try_from(v) {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Error::format(
                path,
                format!("length of document {i} is {v}; every document needs ≥ 1 token"),
            )),
        })
        .collect()
}

fn convert(e: OwnedElements, dtype: Option<DType>) -> OwnedElements {
    match (dtype, &e) {
        (None, _) => e,
        (Some(t), _) if t == e.as_elements().dtype() => e,
        (Some(t), _) => {
            let m = e.as_elements();
            let v: Vec<f32> = (0..m.len()).map(|i| m.get_f32(i)).collect();
            OwnedElements::from_f32(&v, t)
        }
    }
}

/// A corpus from a packed `[T, d]` `.npy` matrix and a `[N]` `.npy` vector of document lengths.
pub fn from_npy_packed(embeddings: &Path, lengths: &Path, dtype: Option<DType>) -> Result<Corpus> {
    let map = map_file(embeddings)?;
    let npy = open_npy(embeddings, &map)?;
    let (rows, dim) = npy_matrix_shape(embeddings, &npy)?;
    let elems = npy_floats(embeddings, npy)?;
    let lmap = map_file(lengths)?;
    let lens = to_lengths(lengths, npy_ints(lengths, &lmap)?)?;
    let offsets = offsets_from_lengths(&lens)?;
    if offsets.last() != Some(&rows) {
        return Err(Error::format(
            lengths,
            format!(
                "the lengths add up to {} tokens but {} has {rows}",
                offsets.last().unwrap_or(&0),
                embeddings.display()
            ),
        ));
    }
    Corpus::new(convert(elems, dtype), dim, offsets)
}

/// A corpus with one `[Nd, d]` `.npy` file per document, in the given order; each document's
/// id is its file name without the extension.
pub fn from_npy_files(files: &[PathBuf], dtype: Option<DType>) -> Result<Corpus> {
    let mut docs = Vec::with_capacity(files.len());
    let mut ids = Vec::with_capacity(files.len());
    for path in files {
        let map = map_file(path)?;
        let npy = open_npy(path, &map)?;
        let (rows, dim) = npy_matrix_shape(path, &npy)?;
        if rows == 0 {
            return Err(Error::format(path, "document has 0 tokens"));
        }
        docs.push((convert(npy_floats(path, npy)?, dtype), dim));
        ids.push(
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
    }
    let first_dtype = docs.first().map(|(e, _)| e.as_elements().dtype());
    let docs = docs
        .iter()
        .zip(files)
        .map(|((e, dim), path)| {
            if Some(e.as_elements().dtype()) != first_dtype {
                return Err(Error::format(
                    path,
                    "documents have different dtypes; pass a target dtype to convert them",
                ));
            }
            Matrix::new(e.as_elements(), *dim)
        })
        .collect::<Result<Vec<_>>>()?;
    Corpus::from_docs(&docs)?.with_doc_ids(ids)
}

/// Tensor names to look for in a safetensors file written by another tool.
#[derive(Clone, Debug)]
pub struct SafetensorsKeys {
    /// The embeddings (default `embeddings`): packed `[T, d]`, or padded `[B, L, d]`.
    pub embeddings: String,
    /// `[N + 1]` offsets of packed embeddings (default `offsets`); used when present.
    pub offsets: String,
    /// `[N]` lengths (default `lengths`): of packed documents when there are no offsets, or
    /// the number of leading rows of each padded document that are tokens.
    pub lengths: String,
    /// `[B, L]` mask of padded embeddings (default `mask`; nonzero: a token, holes allowed);
    /// used when there are no lengths.
    pub mask: String,
}

impl Default for SafetensorsKeys {
    fn default() -> Self {
        SafetensorsKeys {
            embeddings: "embeddings".into(),
            offsets: "offsets".into(),
            lengths: "lengths".into(),
            mask: "mask".into(),
        }
    }
}

/// The tensors of a file, for error messages: `emb F32 [10, 128], lens I32 [3]`.
fn listing(st: &SafeTensors<'_>) -> String {
    let mut names: Vec<&str> = st.names();
    names.sort_unstable();
    names
        .iter()
        .filter_map(|n| {
            st.tensor(n)
                .ok()
                .map(|t| format!("`{n}` {:?} {:?}", t.dtype(), t.shape()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a mask value marks a token (any nonzero value of an integer, bool or float mask).
fn mask_values(path: &Path, name: &str, t: &TensorView<'_>) -> Result<Vec<bool>> {
    let data = t.data();
    Ok(match t.dtype() {
        StDtype::BOOL | StDtype::U8 | StDtype::I8 => data.iter().map(|&b| b != 0).collect(),
        StDtype::F32 => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("chunk size")) != 0.0)
            .collect(),
        StDtype::F64 => data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("chunk size")) != 0.0)
            .collect(),
        StDtype::F16 | StDtype::BF16 => data
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7fff != 0)
            .collect(),
        _ => read_ints(path, name, t)?
            .into_iter()
            .map(|v| v != 0)
            .collect(),
    })
}

/// A corpus from a safetensors file: packed embeddings `[T, d]` plus offsets or lengths;
/// padded embeddings `[B, L, d]` plus lengths or a mask (PyLate's layout; masked rows are
/// dropped, holes included); or, when there is no embeddings tensor, one 2-D tensor per
/// document (ordered by name, numbers compared as numbers; ids are the names). Errors list the
/// tensors the file holds and the flags that name them.
pub fn from_safetensors(
    path: &Path,
    keys: &SafetensorsKeys,
    dtype: Option<DType>,
) -> Result<Corpus> {
    let map = map_file(path)?;
    let st = parse(path, &map)?;
    let found = || {
        format!(
            "the file holds {}; name yours with --embeddings-key, --offsets-key, --lengths-key or --mask-key",
            listing(&st)
        )
    };
    let floats = |name: &str| -> Result<(OwnedElements, Vec<usize>)> {
        let t = st
            .tensor(name)
            .map_err(|e| Error::format(path, e.to_string()))?;
        let e = match (from_st_dtype(t.dtype()), t.dtype()) {
            (Some(d), _) => copy_elements(t.data(), d),
            (None, StDtype::F64) => OwnedElements::F32(
                t.data()
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("chunk size")) as f32)
                    .collect(),
            ),
            (None, other) => {
                return Err(Error::format(
                    path,
                    format!(
                        "tensor `{name}` has dtype {other:?}; expected F32, F16, BF16 or F64 embeddings ({})",
                        found()
                    ),
                ));
            }
        };
        Ok((convert(e, dtype), t.shape().to_vec()))
    };
    let names = st.names();
    if names.iter().any(|n| **n == keys.embeddings) {
        let (elems, shape) = floats(&keys.embeddings)?;
        if shape.last() == Some(&0) {
            return Err(Error::format(
                path,
                format!("`{}` has d = 0", keys.embeddings),
            ));
        }
        return match shape[..] {
            [rows, dim] => packed(path, &st, keys, elems, rows, dim, &found),
            [b, l, dim] => padded(path, &st, keys, elems, [b, l, dim], &found),
            _ => Err(Error::format(
                path,
                format!(
                    "`{}` must be packed [T, d] or padded [B, L, d], has shape {shape:?}",
                    keys.embeddings
                ),
            )),
        };
    }
    // One tensor per document.
    let mut doc_names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    if doc_names.is_empty() {
        return Err(Error::format(path, "the file holds no tensors"));
    }
    doc_names.sort_by(|a, b| natural_cmp(a, b));
    let not_documents = || {
        Error::format(
            path,
            format!(
                "no `{}` tensor, and not one 2-D float tensor per document: {}",
                keys.embeddings,
                found()
            ),
        )
    };
    let docs = doc_names
        .iter()
        .map(|n| floats(n).map_err(|_| not_documents()))
        .collect::<Result<Vec<_>>>()?;
    let mut dtype0 = None;
    let mats = docs
        .iter()
        .zip(&doc_names)
        .map(|((e, shape), name)| {
            let [rows, dim] = shape[..] else {
                return Err(not_documents());
            };
            if rows == 0 || dim == 0 {
                return Err(Error::format(
                    path,
                    format!("document `{name}` has shape {shape:?}"),
                ));
            }
            if *dtype0.get_or_insert(e.as_elements().dtype()) != e.as_elements().dtype() {
                return Err(Error::format(
                    path,
                    "documents have different dtypes; pass a target dtype to convert them",
                ));
            }
            Matrix::new(e.as_elements(), dim)
        })
        .collect::<Result<Vec<_>>>()?;
    Corpus::from_docs(&mats)?.with_doc_ids(doc_names)
}

/// Packed `[rows, dim]` embeddings split by offsets or lengths.
fn packed(
    path: &Path,
    st: &SafeTensors<'_>,
    keys: &SafetensorsKeys,
    elems: OwnedElements,
    rows: usize,
    dim: usize,
    found: &dyn Fn() -> String,
) -> Result<Corpus> {
    let offsets = if let Ok(t) = st.tensor(&keys.offsets) {
        to_offsets(path, &keys.offsets, read_ints(path, &keys.offsets, &t)?)?
    } else if let Ok(t) = st.tensor(&keys.lengths) {
        offsets_from_lengths(&to_lengths(path, read_ints(path, &keys.lengths, &t)?)?)?
    } else {
        return Err(Error::format(
            path,
            format!(
                "found packed `{}` [{rows}, {dim}] but neither `{}` nor `{}` to split it into documents; {}",
                keys.embeddings,
                keys.offsets,
                keys.lengths,
                found()
            ),
        ));
    };
    if offsets.last() != Some(&rows) {
        return Err(Error::format(
            path,
            format!(
                "offsets end at {:?} but `{}` has {rows} rows",
                offsets.last(),
                keys.embeddings
            ),
        ));
    }
    Corpus::new(elems, dim, offsets)
}

/// Padded `[b, l, dim]` embeddings: each document's first `lengths[i]` rows, or its rows
/// where the mask is nonzero (in order).
fn padded(
    path: &Path,
    st: &SafeTensors<'_>,
    keys: &SafetensorsKeys,
    elems: OwnedElements,
    [b, l, dim]: [usize; 3],
    found: &dyn Fn() -> String,
) -> Result<Corpus> {
    let keep: Vec<bool> = if let Ok(t) = st.tensor(&keys.lengths) {
        let lens = to_lengths(path, read_ints(path, &keys.lengths, &t)?)?;
        if lens.len() != b {
            return Err(Error::format(
                path,
                format!(
                    "`{}` has {} lengths for {b} padded documents",
                    keys.lengths,
                    lens.len()
                ),
            ));
        }
        if let Some((i, n)) = lens.iter().enumerate().find(|(_, n)| **n > l) {
            return Err(Error::format(
                path,
                format!(
                    "`{}`[{i}] = {n} exceeds the padded length {l}",
                    keys.lengths
                ),
            ));
        }
        lens.iter()
            .flat_map(|&n| (0..l).map(move |r| r < n))
            .collect()
    } else if let Ok(t) = st.tensor(&keys.mask) {
        if t.shape() != [b, l] {
            return Err(Error::format(
                path,
                format!(
                    "`{}` has shape {:?}; the padded embeddings need [{b}, {l}]",
                    keys.mask,
                    t.shape()
                ),
            ));
        }
        mask_values(path, &keys.mask, &t)?
    } else {
        return Err(Error::format(
            path,
            format!(
                "found padded `{}` [{b}, {l}, {dim}] but neither `{}` ([{b}]) nor `{}` ([{b}, {l}]) to tell tokens from padding; {}",
                keys.embeddings,
                keys.lengths,
                keys.mask,
                found()
            ),
        ));
    };
    let lengths: Vec<usize> = keep
        .chunks(l.max(1))
        .map(|r| r.iter().filter(|&&k| k).count())
        .collect();
    if let Some(i) = lengths.iter().position(|&n| n == 0) {
        return Err(Error::EmptyDocument { index: i });
    }
    let e = elems.as_elements();
    let rows: Vec<usize> = keep
        .iter()
        .enumerate()
        .filter(|(_, k)| **k)
        .map(|(r, _)| r)
        .collect();
    let v: Vec<f32> = rows
        .iter()
        .flat_map(|&r| (r * dim..(r + 1) * dim).map(|i| e.get_f32(i)))
        .collect();
    Corpus::from_lengths(OwnedElements::from_f32(&v, e.dtype()), dim, &lengths)
}

/// Compare names with embedded numbers by value: `doc2` < `doc10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[start].is_ascii_digit() {
                out.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for ((da, sa), (db, sb)) in pa.iter().zip(&pb) {
        let ord = if *da && *db {
            let (ta, tb) = (sa.trim_start_matches('0'), sb.trim_start_matches('0'));
            ta.len().cmp(&tb.len()).then(ta.cmp(tb))
        } else {
            sa.cmp(sb)
        };
        if ord.is_ne() {
            return ord;
        }
    }
    pa.len().cmp(&pb.len()).then(a.cmp(b))
}

/// Read one id per line (blank lines are errors, surrounding whitespace is trimmed).
pub fn read_ids(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let id = l.trim();
            if id.is_empty() {
                Err(Error::format(path, format!("line {} is empty", i + 1)))
            } else {
                Ok(id.to_string())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::natural_cmp;

    #[test]
    fn natural_order() {
        let mut v = vec!["doc10", "doc2", "doc1", "a", "doc02x"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["a", "doc1", "doc2", "doc02x", "doc10"]);
    }
}

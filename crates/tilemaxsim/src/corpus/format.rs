//! The corpus file: a safetensors file with
//! - `embeddings` `[T, d]` F32, F16 or BF16: the packed token matrix;
//! - `offsets` `[N + 1]` I64: document `j` is rows `offsets[j]..offsets[j+1]`;
//! - `doc_ids` `[bytes]` U8, optional: the ids, UTF-8, one per line;
//! - metadata `format` = `tilemaxsim.corpus`, `version` = `1`, and `values` = `finite` when the
//!   values were scanned before they were written (opening such a file skips the scan).
//!
//! Loading memory-maps the file and borrows the token matrix from the map (copying only a
//! tensor whose start is misaligned for its dtype), so opening a large corpus costs no reads
//! until it is scored. Saving writes a temporary file beside the target and renames it, so a
//! failed save never leaves a half-written corpus behind.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype as StDtype, TensorView};

pub(crate) use super::write::{
    Durable, Filling, Parts, le_words, write_atomically, write_parts_atomically,
};
use super::{Corpus, FiniteCheck, FiniteState, Storage, check_ids, check_offsets};
use crate::error::{Error, Result};
use crate::matrix::{DType, OwnedElements};

pub(crate) const EMBEDDINGS: &str = "embeddings";
pub(crate) const OFFSETS: &str = "offsets";
pub(crate) const DOC_IDS: &str = "doc_ids";
/// Metadata of the files we write; the `values` flag is trusted only with exactly these.
const FORMAT: (&str, &str) = ("format", "tilemaxsim.corpus");
const VERSION: (&str, &str) = ("version", "1");
/// Metadata recording that every value was scanned and found finite before the file was written.
const VALUES_FINITE: (&str, &str) = ("values", "finite");

/// How to open a corpus file. The default checks every value for NaN and infinities (unless
/// the file records that it was checked when written); turn that off only for a file that
/// was checked by other means.
///
/// ```no_run
/// use tilemaxsim::corpus::OpenOptions;
/// let corpus = OpenOptions::new().check_finite(false).open("corpus.safetensors")?;
/// # Ok::<(), tilemaxsim::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct OpenOptions {
    check_finite: bool,
    /// Only these documents (start, end), as [`Corpus::slice`] takes them.
    documents: Option<(usize, usize)>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            check_finite: true,
            documents: None,
        }
    }
}

impl OpenOptions {
    /// The defaults: values checked.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to scan the values for NaN and infinities on open (default: yes). A file whose
    /// metadata records a scan at write time is not scanned again either way.
    pub fn check_finite(mut self, yes: bool) -> Self {
        self.check_finite = yes;
        self
    }

    /// Open only documents `range` of the file (a shard), indexed from 0, as
    /// [`Corpus::slice`] makes them: the whole file is mapped and checked for structure, and
    /// only the range's values are read (scanned, when the check is on).
    pub fn documents(mut self, range: std::ops::Range<usize>) -> Self {
        self.documents = Some((range.start, range.end));
        self
    }

    /// Whether values are scanned on open.
    pub(crate) fn checks_finite(&self) -> bool {
        self.check_finite
    }

    /// The documents asked for, if only a shard is opened.
    pub(crate) fn shard(&self) -> Option<(usize, usize)> {
        self.documents
    }

    /// Open a corpus file with these options, memory-mapped.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Corpus> {
        let path = path.as_ref();
        let mut corpus = open_structure(path)?;
        let mut first_doc = 0;
        if let Some((start, end)) = self.documents {
            corpus = corpus.slice(start..end).map_err(|e| match e {
                Error::Argument(m) => Error::Argument(format!("{}: {m}", path.display())),
                e => e,
            })?;
            first_doc = start;
        }
        if self.check_finite && corpus.finite_check() == FiniteCheck::NotChecked {
            corpus.check_finite_in(Some(path), first_doc)?;
        }
        Ok(corpus)
    }
}

pub(crate) fn to_st_dtype(d: DType) -> StDtype {
    match d {
        DType::F32 => StDtype::F32,
        DType::F16 => StDtype::F16,
        DType::BF16 => StDtype::BF16,
    }
}

pub(crate) fn from_st_dtype(d: StDtype) -> Option<DType> {
    match d {
        StDtype::F32 => Some(DType::F32),
        StDtype::F16 => Some(DType::F16),
        StDtype::BF16 => Some(DType::BF16),
        _ => None,
    }
}

/// Memory-map a file read-only.
pub(crate) fn map_file(path: &Path) -> Result<Mmap> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and every byte of it is treated as untrusted input
    // (parsed and bounds-checked). As with any mmap, another process truncating the file
    // while it is mapped is outside what we can guard against; we document it.
    unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

/// Parse a safetensors buffer, turning its errors into ours with the path.
pub(crate) fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<SafeTensors<'a>> {
    SafeTensors::deserialize(bytes).map_err(|e| {
        Error::format(
            path,
            format!("not a valid safetensors file ({e}); truncated or corrupt?"),
        )
    })
}

/// Integers of an integer tensor widened to i128 (so no source value can overflow).
pub(crate) fn read_ints(path: &Path, name: &str, t: &TensorView<'_>) -> Result<Vec<i128>> {
    let data = t.data();
    macro_rules! ints {
        ($ty:ty) => {
            data.chunks_exact(std::mem::size_of::<$ty>())
                .map(|c| <$ty>::from_le_bytes(c.try_into().expect("chunk size")) as i128)
                .collect()
        };
    }
    Ok(match t.dtype() {
        StDtype::I64 => ints!(i64),
        StDtype::I32 => ints!(i32),
        StDtype::U64 => ints!(u64),
        StDtype::U32 => ints!(u32),
        StDtype::I16 => ints!(i16),
        StDtype::U16 => ints!(u16),
        other => {
            return Err(Error::format(
                path,
                format!("tensor `{name}` has dtype {other:?}, expected an integer type (I64)"),
            ));
        }
    })
}

/// Offsets as usize, rejecting negative values.
pub(crate) fn to_offsets(path: &Path, name: &str, ints: Vec<i128>) -> Result<Vec<usize>> {
    ints.into_iter()
        .enumerate()
        .map(|(i, v)| {
            usize::try_from(v).map_err(|_| {
                Error::format(path, format!("`{name}`[{i}] = {v} is not a valid offset"))
            })
        })
        .collect()
}

pub(crate) fn parse_ids(path: &Path, bytes: &[u8]) -> Result<Vec<String>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::format(path, format!("`doc_ids` is not UTF-8: {e}")))?;
    Ok(text.lines().map(str::to_owned).collect())
}

impl Corpus {
    /// Open a corpus file, memory-mapped. Checks the structure (tensors, shapes, dtypes,
    /// offsets, ids) and the values: a NaN or infinity is an error naming the document and
    /// token, unless the file records that its values were checked when written. The scan
    /// reads the whole file once; [`OpenOptions`] turns it off.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        OpenOptions::new().open(path)
    }

    /// Write the corpus to `path` (atomically: a temporary file renamed into place). The file
    /// records that its values are finite only when this corpus scanned them
    /// ([`FiniteCheck::Scanned`]: opened with the check, or [`Corpus::check_finite`] passed).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        save(self, path.as_ref(), Durable::No)
    }

    /// [`Corpus::save`], on disk (fsync) when this returns.
    pub(crate) fn save_durably(&self, path: &Path) -> Result<()> {
        save(self, path, Durable::Yes)
    }
}

/// What every corpus file holds besides its tokens or codes, read and checked the same way for
/// both formats (the exact reader below, the compressed one in `codec/format.rs`): the `N + 1`
/// offsets (1-D, non-negative), the ids (UTF-8, one per document) and the metadata.
pub(crate) struct Layout {
    pub offsets: Vec<usize>,
    pub doc_ids: Option<Vec<String>>,
    pub meta: HashMap<String, String>,
}

/// The [`Layout`] of the file mapped at `map`; the caller checks the offsets against its own
/// rows.
pub(crate) fn read_layout(path: &Path, map: &[u8]) -> Result<Layout> {
    let st = parse(path, map)?;
    let off = st
        .tensor(OFFSETS)
        .map_err(|_| Error::format(path, "tensor `offsets` [N+1] is missing"))?;
    if off.shape().len() != 1 {
        return Err(Error::format(
            path,
            format!("`offsets` must be 1-D [N+1], has shape {:?}", off.shape()),
        ));
    }
    let offsets = to_offsets(path, OFFSETS, read_ints(path, OFFSETS, &off)?)?;
    let doc_ids = match st.tensor(DOC_IDS) {
        Ok(t) => {
            let ids = parse_ids(path, t.data())?;
            check_ids(&ids, offsets.len().saturating_sub(1))
                .map_err(|e| Error::format(path, format!("`doc_ids`: {e}")))?;
            Some(ids)
        }
        Err(_) => None,
    };
    // The header again, for its metadata (SafeTensors keeps it private); already validated.
    let (_, header) = SafeTensors::read_metadata(map)
        .map_err(|e| Error::format(path, format!("not a valid safetensors file ({e})")))?;
    Ok(Layout {
        offsets,
        doc_ids,
        meta: header.metadata().clone().unwrap_or_default(),
    })
}

/// Open a corpus file, checking everything but the values.
fn open_structure(path: &Path) -> Result<Corpus> {
    let map = Arc::new(map_file(path)?);
    let st = parse(path, &map)?;
    let names = st.names();
    if st.tensor(EMBEDDINGS).is_err() || st.tensor(OFFSETS).is_err() {
        let mut found: Vec<_> = names.iter().map(|s| s.to_string()).collect();
        found.sort();
        return Err(Error::format(
            path,
            format!(
                "expected tensors `embeddings` [T, d] and `offsets` [N+1], found {found:?}; \
                 `tilemaxsim corpus import` converts other layouts"
            ),
        ));
    }
    let emb = st
        .tensor(EMBEDDINGS)
        .map_err(|e| Error::format(path, e.to_string()))?;
    let dtype = from_st_dtype(emb.dtype()).ok_or_else(|| {
        Error::format(
            path,
            format!(
                "`embeddings` has dtype {:?}; supported: F32, F16, BF16",
                emb.dtype()
            ),
        )
    })?;
    let [rows, dim] = emb.shape()[..] else {
        return Err(Error::format(
            path,
            format!(
                "`embeddings` must be 2-D [T, d], has shape {:?}",
                emb.shape()
            ),
        ));
    };
    if dim == 0 {
        return Err(Error::format(path, "`embeddings` has d = 0"));
    }
    let Layout {
        offsets,
        doc_ids,
        meta,
    } = read_layout(path, &map)?;
    check_offsets(&offsets, rows).map_err(|e| Error::format(path, e.to_string()))?;
    let recorded = [FORMAT, VERSION, VALUES_FINITE]
        .iter()
        .all(|(k, v)| meta.get(*k).map(String::as_str) == Some(*v));
    let data = emb.data();
    let start = data.as_ptr() as usize - map.as_ptr() as usize;
    let aligned = (data.as_ptr() as usize).is_multiple_of(dtype.size());
    let storage = if aligned {
        Storage::Mapped {
            map: Arc::clone(&map),
            start,
            len: rows * dim,
            dtype,
        }
    } else {
        Storage::Owned(copy_elements(data, dtype))
    };
    Ok(Corpus {
        storage,
        dim,
        offsets,
        doc_ids,
        finite: FiniteState::new(if recorded {
            FiniteCheck::Recorded
        } else {
            FiniteCheck::NotChecked
        }),
    })
}

fn save(c: &Corpus, path: &Path, durable: Durable) -> Result<()> {
    let file = ExactParts {
        dtype: c.dtype(),
        dim: c.dim,
        offsets: &c.offsets,
        doc_ids: c.doc_ids.as_deref(),
        scanned: c.finite_check() == FiniteCheck::Scanned,
        tokens: vec![c.tokens().elements().as_bytes()],
    };
    write_exact_parts(&file, path, durable)
}

/// What an exact corpus file holds, its tokens (rows of the dtype, little-endian) in parts, one
/// after another: a corpus in memory, or the live documents of an index's files (a compaction).
pub(crate) struct ExactParts<'a> {
    pub dtype: DType,
    pub dim: usize,
    pub offsets: &'a [usize],
    pub doc_ids: Option<&'a [String]>,
    /// The values were scanned and are finite (recorded in the file).
    pub scanned: bool,
    pub tokens: Vec<&'a [u8]>,
}

/// Write `file` at `path` (atomically) in the format [`Corpus::open`] reads.
pub(crate) fn write_exact_parts(
    file: &ExactParts<'_>,
    path: &Path,
    durable: Durable,
) -> Result<()> {
    let rows = *file.offsets.last().unwrap_or(&0);
    let off_bytes: Vec<u8> = file
        .offsets
        .iter()
        .flat_map(|&o| (o as i64).to_le_bytes())
        .collect();
    let ids_bytes = file.doc_ids.map(|ids| ids.join("\n").into_bytes());
    let mut tensors = vec![
        (
            EMBEDDINGS.to_string(),
            Parts {
                dtype: to_st_dtype(file.dtype),
                shape: vec![rows, file.dim],
                parts: file.tokens.clone(),
            },
        ),
        (
            OFFSETS.to_string(),
            Parts {
                dtype: StDtype::I64,
                shape: vec![file.offsets.len()],
                parts: vec![&off_bytes],
            },
        ),
    ];
    if let Some(ids) = &ids_bytes {
        tensors.push((
            DOC_IDS.to_string(),
            Parts {
                dtype: StDtype::U8,
                shape: vec![ids.len()],
                parts: vec![ids],
            },
        ));
    }
    let mut metadata: HashMap<String, String> = [FORMAT, VERSION]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Only a scan of these very values may be recorded: not a flag read from another file.
    if file.scanned {
        metadata.insert(VALUES_FINITE.0.to_string(), VALUES_FINITE.1.to_string());
    }
    write_parts_atomically(path, tensors, metadata, durable)
}

/// Copy little-endian bytes into an owned, aligned vector of `dtype`.
pub(crate) fn copy_elements(bytes: &[u8], dtype: DType) -> OwnedElements {
    match dtype {
        DType::F32 => OwnedElements::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("chunk size")))
                .collect(),
        ),
        DType::F16 => OwnedElements::F16(
            bytes
                .chunks_exact(2)
                .map(|c| {
                    half::f16::from_bits(u16::from_le_bytes(c.try_into().expect("chunk size")))
                })
                .collect(),
        ),
        DType::BF16 => OwnedElements::BF16(
            bytes
                .chunks_exact(2)
                .map(|c| {
                    half::bf16::from_bits(u16::from_le_bytes(c.try_into().expect("chunk size")))
                })
                .collect(),
        ),
    }
}

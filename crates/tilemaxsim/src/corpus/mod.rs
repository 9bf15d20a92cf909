//! A corpus: variable-length documents packed into one `T × d` token matrix plus `N + 1`
//! offsets, never padded. Document `j` is token rows `offsets[j]..offsets[j + 1]`.
//! A batch of queries uses the same type (each "document" is one query).
//!
//! `format` reads and writes the corpus file (safetensors, memory-mapped on load);
//! `import` builds one from `.npy` files or from safetensors written by other tools.

mod format;
pub mod import;

use std::sync::Arc;

use half::{bf16, f16};
use memmap2::Mmap;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::matrix::{DType, Elements, Matrix, OwnedElements};

/// Where the token matrix lives: in memory we own, or in a memory-mapped file.
#[derive(Clone, Debug)]
enum Storage {
    Owned(OwnedElements),
    /// `len` elements of `dtype` at byte `start` of `map`. Invariant: the start is aligned for
    /// the dtype (checked when the file is opened; misaligned tensors are copied instead).
    Mapped {
        map: Arc<Mmap>,
        start: usize,
        len: usize,
        dtype: DType,
    },
}

impl Storage {
    fn elements(&self) -> Elements<'_> {
        match self {
            Storage::Owned(o) => o.as_elements(),
            Storage::Mapped {
                map,
                start,
                len,
                dtype,
            } => {
                let bytes = &map[*start..*start + len * dtype.size()];
                // The alignment was checked in `format::open`, so these casts cannot fail.
                match dtype {
                    DType::F32 => Elements::F32(bytemuck::cast_slice::<u8, f32>(bytes)),
                    DType::F16 => Elements::F16(bytemuck::cast_slice::<u8, f16>(bytes)),
                    DType::BF16 => Elements::BF16(bytemuck::cast_slice::<u8, bf16>(bytes)),
                }
            }
        }
    }
}

/// Packed variable-length multi-vector documents (or queries).
#[derive(Clone, Debug)]
pub struct Corpus {
    storage: Storage,
    dim: usize,
    offsets: Vec<usize>,
    doc_ids: Option<Vec<String>>,
}

/// Check that `offsets` pack `rows` token rows into documents of at least one token each.
pub(crate) fn check_offsets(offsets: &[usize], rows: usize) -> Result<()> {
    let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
        return Err(Error::Offsets(
            "offsets are empty; they need N + 1 entries starting at 0".into(),
        ));
    };
    if offsets.len() < 2 {
        return Err(Error::Offsets(
            "a corpus needs at least one document (offsets has 1 entry)".into(),
        ));
    }
    if first != 0 {
        return Err(Error::Offsets(format!(
            "the first offset must be 0, found {first}"
        )));
    }
    for (j, w) in offsets.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(Error::Offsets(format!(
                "offsets decrease at document {j}: {} then {}",
                w[0], w[1]
            )));
        }
        if w[1] == w[0] {
            return Err(Error::EmptyDocument { index: j });
        }
    }
    if last != rows {
        return Err(Error::Offsets(format!(
            "the last offset is {last} but the token matrix has {rows} rows"
        )));
    }
    Ok(())
}

impl Corpus {
    /// A corpus from a flat row-major `T × dim` token matrix and `N + 1` offsets.
    pub fn new(
        embeddings: impl Into<OwnedElements>,
        dim: usize,
        offsets: Vec<usize>,
    ) -> Result<Self> {
        let owned = embeddings.into();
        let rows = Matrix::new(owned.as_elements(), dim)?.rows();
        check_offsets(&offsets, rows)?;
        Ok(Corpus {
            storage: Storage::Owned(owned),
            dim,
            offsets,
            doc_ids: None,
        })
    }

    /// A corpus from a flat token matrix and the number of tokens of each document.
    pub fn from_lengths(
        embeddings: impl Into<OwnedElements>,
        dim: usize,
        lengths: &[usize],
    ) -> Result<Self> {
        Self::new(embeddings, dim, offsets_from_lengths(lengths)?)
    }

    /// A corpus that copies the given documents (all of one dtype and one d) into one packing.
    pub fn from_docs(docs: &[Matrix<'_>]) -> Result<Self> {
        let first = docs
            .first()
            .ok_or_else(|| Error::Offsets("no documents given".into()))?;
        let (dtype, dim) = (first.dtype(), first.dim());
        let mut lengths = Vec::with_capacity(docs.len());
        for (i, d) in docs.iter().enumerate() {
            if d.dim() != dim {
                return Err(Error::DimMismatch {
                    what: format!("document {i}"),
                    expected: dim,
                    got: d.dim(),
                });
            }
            if d.dtype() != dtype {
                return Err(Error::DType {
                    what: format!("document {i}"),
                    got: d.dtype().to_string(),
                    supported: format!("{dtype} (the dtype of document 0)"),
                });
            }
            lengths.push(d.rows());
        }
        let owned = match dtype {
            DType::F32 => OwnedElements::F32(concat(docs, |e| match e {
                Elements::F32(s) => s,
                _ => &[],
            })),
            DType::F16 => OwnedElements::F16(concat(docs, |e| match e {
                Elements::F16(s) => s,
                _ => &[],
            })),
            DType::BF16 => OwnedElements::BF16(concat(docs, |e| match e {
                Elements::BF16(s) => s,
                _ => &[],
            })),
        };
        Self::from_lengths(owned, dim, &lengths)
    }

    /// Attach one id per document (used in run files). Ids must be non-empty, contain no
    /// whitespace (TREC run files are whitespace-separated), and be unique.
    pub fn with_doc_ids(mut self, ids: Vec<String>) -> Result<Self> {
        check_ids(&ids, self.len())?;
        self.doc_ids = Some(ids);
        Ok(self)
    }

    /// Number of documents N.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Never true: a corpus holds at least one document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Embedding dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn dtype(&self) -> DType {
        match &self.storage {
            Storage::Owned(o) => o.as_elements().dtype(),
            Storage::Mapped { dtype, .. } => *dtype,
        }
    }

    /// Total number of tokens T.
    pub fn num_tokens(&self) -> usize {
        *self.offsets.last().unwrap_or(&0)
    }

    /// The `N + 1` document offsets into the token matrix.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Number of tokens of document `j` (panics if `j >= len()`, like slice indexing).
    pub fn doc_len(&self, j: usize) -> usize {
        self.offsets[j + 1] - self.offsets[j]
    }

    /// The longest document's token count.
    pub fn max_doc_len(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    /// Bytes of the token matrix.
    pub fn size_bytes(&self) -> usize {
        self.num_tokens() * self.dim * self.dtype().size()
    }

    /// The packed `T × d` token matrix.
    pub fn tokens(&self) -> Matrix<'_> {
        // The shape was checked at construction.
        Matrix::new(self.storage.elements(), self.dim)
            .expect("corpus shape checked at construction")
    }

    /// Document `j` as an `Nd × d` matrix, or `None` when out of range.
    pub fn get(&self, j: usize) -> Option<Matrix<'_>> {
        if j >= self.len() {
            return None;
        }
        Some(
            self.tokens()
                .rows_range(self.offsets[j]..self.offsets[j + 1]),
        )
    }

    /// Document `j` (panics if `j >= len()`, like slice indexing; use [`Corpus::get`] otherwise).
    pub fn doc(&self, j: usize) -> Matrix<'_> {
        self.tokens()
            .rows_range(self.offsets[j]..self.offsets[j + 1])
    }

    /// Every document, in order.
    pub fn docs(&self) -> impl ExactSizeIterator<Item = Matrix<'_>> + '_ {
        let tokens = self.tokens();
        self.offsets
            .windows(2)
            .map(move |w| tokens.rows_range(w[0]..w[1]))
    }

    /// The document ids, when the corpus has them.
    pub fn doc_ids(&self) -> Option<&[String]> {
        self.doc_ids.as_deref()
    }

    /// Whether the token matrix is memory-mapped from a file (rather than owned in memory).
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped { .. })
    }

    /// Error naming the document, token and column of the first NaN or infinite value.
    /// Scans the whole token matrix in parallel.
    pub fn check_finite(&self) -> Result<()> {
        let first_bad = (0..self.len())
            .into_par_iter()
            .with_min_len(64)
            .find_first(|&j| self.doc(j).elements().first_non_finite().is_some());
        match first_bad {
            None => Ok(()),
            Some(j) => {
                let Err(Error::NonFinite {
                    row, col, value, ..
                }) = self.doc(j).check_finite("", 0)
                else {
                    return Ok(());
                };
                Err(Error::NonFinite {
                    what: format!("document {j}"),
                    row,
                    col,
                    value,
                })
            }
        }
    }
}

fn concat<'a, T: Copy + 'a>(docs: &[Matrix<'a>], pick: impl Fn(Elements<'a>) -> &'a [T]) -> Vec<T> {
    let mut out = Vec::with_capacity(docs.iter().map(|d| d.rows() * d.dim()).sum());
    for d in docs {
        out.extend_from_slice(pick(d.elements()));
    }
    out
}

/// `N + 1` offsets from `N` document lengths; every length must be at least 1.
pub fn offsets_from_lengths(lengths: &[usize]) -> Result<Vec<usize>> {
    let mut offsets = Vec::with_capacity(lengths.len() + 1);
    let mut total = 0usize;
    offsets.push(0);
    for (j, &n) in lengths.iter().enumerate() {
        if n == 0 {
            return Err(Error::EmptyDocument { index: j });
        }
        total = total
            .checked_add(n)
            .ok_or_else(|| Error::Offsets("document lengths overflow".into()))?;
        offsets.push(total);
    }
    Ok(offsets)
}

pub(crate) fn check_ids(ids: &[String], n: usize) -> Result<()> {
    if ids.len() != n {
        return Err(Error::Argument(format!(
            "{} ids given for {n} documents",
            ids.len()
        )));
    }
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    for (j, id) in ids.iter().enumerate() {
        if id.is_empty() || id.chars().any(char::is_whitespace) {
            return Err(Error::Argument(format!(
                "id {j} ({id:?}) is empty or contains whitespace"
            )));
        }
        if !seen.insert(id.as_str()) {
            return Err(Error::Argument(format!("id {id:?} appears more than once")));
        }
    }
    Ok(())
}

//! A corpus: variable-length documents packed into one `T × d` token matrix plus `N + 1`
//! offsets, never padded. Document `j` is token rows `offsets[j]..offsets[j + 1]`.
//! A batch of queries uses the same type (each "document" is one query).
//!
//! `format` reads and writes the corpus file (safetensors, memory-mapped on load);
//! `import` builds one from `.npy` files or from safetensors written by other tools.
//!
//! Values are checked for NaN and infinities when a corpus file is opened (see [`OpenOptions`]):
//! a NaN token would otherwise drop out of its document's max without a trace.

mod any;
pub(crate) mod format;
pub mod import;
mod write;

pub use any::{AnyCorpus, CorpusKind, open};
pub use format::OpenOptions;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

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

/// How a corpus's values are known to be finite (no NaN, no infinity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FiniteCheck {
    /// Not known: built in memory, or opened with the check off, and not scanned since.
    NotChecked,
    /// Every value was scanned and found finite: when the file was opened, or by
    /// [`Corpus::check_finite`].
    Scanned,
    /// Not scanned: the file's metadata records that its values were scanned when it was
    /// written (by [`Corpus::save`] after a scan, as `tilemaxsim corpus import` does). The flag
    /// is trusted; a file edited by other means afterwards could carry a stale one, which
    /// [`Corpus::check_finite`] (always a real scan) would catch.
    Recorded,
}

/// [`FiniteCheck`] behind a shared reference: [`Corpus::check_finite`] takes `&self` and
/// records a successful scan. The values of a corpus never change, so the record stays true.
#[derive(Debug)]
struct FiniteState(AtomicU8);

impl FiniteState {
    fn new(c: FiniteCheck) -> Self {
        FiniteState(AtomicU8::new(c as u8))
    }
    fn get(&self) -> FiniteCheck {
        match self.0.load(Ordering::Relaxed) {
            1 => FiniteCheck::Scanned,
            2 => FiniteCheck::Recorded,
            _ => FiniteCheck::NotChecked,
        }
    }
    fn set(&self, c: FiniteCheck) {
        self.0.store(c as u8, Ordering::Relaxed);
    }
}

impl Clone for FiniteState {
    fn clone(&self) -> Self {
        FiniteState::new(self.get())
    }
}

/// Packed variable-length multi-vector documents (or queries).
#[derive(Clone, Debug)]
pub struct Corpus {
    storage: Storage,
    dim: usize,
    offsets: Vec<usize>,
    doc_ids: Option<Vec<String>>,
    finite: FiniteState,
}

/// The tokens of documents appended to a corpus (of either kind) at `offsets`, which start at
/// 0; a corpus with document ids takes no appends (the new documents would have none).
pub(crate) fn check_appended(has_ids: bool, offsets: &[usize]) -> Result<usize> {
    if has_ids {
        return Err(Error::Argument(
            "appending to a corpus with document ids".into(),
        ));
    }
    if offsets.first() != Some(&0) {
        return Err(Error::Offsets(
            "the appended offsets must start at 0".into(),
        ));
    }
    let t = *offsets.last().unwrap_or(&0);
    check_offsets(offsets, t)?;
    Ok(t)
}

/// Check that `range` is a non-empty range of documents within `len` (a shard of a corpus of
/// either kind).
pub(crate) fn check_shard(range: &std::ops::Range<usize>, len: usize) -> Result<()> {
    if range.start >= range.end || range.end > len {
        return Err(Error::Argument(format!(
            "documents {}..{}: not a non-empty range within the corpus's {len} documents",
            range.start, range.end
        )));
    }
    Ok(())
}

/// The offsets of documents `range` (checked by `check_shard`) as a corpus of their own, from 0.
pub(crate) fn shard_offsets(offsets: &[usize], range: std::ops::Range<usize>) -> Vec<usize> {
    let first = offsets[range.start];
    offsets[range.start..=range.end]
        .iter()
        .map(|&o| o - first)
        .collect()
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
            finite: FiniteState::new(FiniteCheck::NotChecked),
        })
    }

    /// Append documents: `offsets` (from 0) over `bytes`, the new tokens row-major as
    /// native-endian values of the corpus's dtype. Checked first: an error changes nothing. A
    /// memory-mapped corpus is copied into memory at the first append; later appends grow it in
    /// place, so a run of appends costs time linear in what they add. Values are not checked
    /// (the corpus's finite record is reset), and a corpus with document ids refuses.
    pub(crate) fn append(&mut self, offsets: &[usize], bytes: &[u8]) -> Result<()> {
        fn grow<T: bytemuck::Pod>(v: &mut Vec<T>, bytes: &[u8]) {
            let at = v.len();
            v.resize(at + bytes.len() / size_of::<T>(), T::zeroed());
            bytemuck::cast_slice_mut::<T, u8>(&mut v[at..]).copy_from_slice(bytes);
        }
        let t = check_appended(self.doc_ids.is_some(), offsets)?;
        let want = t * self.dim * self.dtype().size();
        if bytes.len() != want {
            return Err(Error::Shape(format!(
                "{} bytes for {t} tokens of d = {} in {} ({want} bytes)",
                bytes.len(),
                self.dim,
                self.dtype()
            )));
        }
        if let Storage::Mapped { .. } = self.storage {
            self.storage = Storage::Owned(match self.storage.elements() {
                Elements::F32(v) => OwnedElements::F32(v.to_vec()),
                Elements::F16(v) => OwnedElements::F16(v.to_vec()),
                Elements::BF16(v) => OwnedElements::BF16(v.to_vec()),
            });
        }
        let Storage::Owned(owned) = &mut self.storage else {
            unreachable!("made owned above")
        };
        match owned {
            OwnedElements::F32(v) => grow(v, bytes),
            OwnedElements::F16(v) => grow(v, bytes),
            OwnedElements::BF16(v) => grow(v, bytes),
        }
        let base = self.offsets[self.offsets.len() - 1];
        self.offsets.extend(offsets[1..].iter().map(|&o| base + o));
        self.finite.set(FiniteCheck::NotChecked);
        Ok(())
    }

    /// Keep the first `docs` documents (a rollback of [`append`](Self::append)).
    pub(crate) fn truncate_docs(&mut self, docs: usize) {
        if docs >= self.len() {
            return;
        }
        let elems = self.offsets[docs] * self.dim;
        match &mut self.storage {
            Storage::Owned(OwnedElements::F32(v)) => v.truncate(elems),
            Storage::Owned(OwnedElements::F16(v)) => v.truncate(elems),
            Storage::Owned(OwnedElements::BF16(v)) => v.truncate(elems),
            Storage::Mapped { len, .. } => *len = elems,
        }
        self.offsets.truncate(docs + 1);
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

    /// Documents `range` as a corpus of their own, indexed from 0 (a shard of this one), with
    /// their ids and what is known of their values. A memory-mapped corpus shares its map (no
    /// copy: processes that open shards of one file share the page cache); an owned one is
    /// copied. An empty range or one past the last document is an error.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<Corpus> {
        check_shard(&range, self.len())?;
        let (first, last) = (self.offsets[range.start], self.offsets[range.end]);
        let storage = match &self.storage {
            Storage::Owned(o) => Storage::Owned(OwnedElements::from_elements(
                o.as_elements().slice(first * self.dim..last * self.dim),
            )),
            Storage::Mapped {
                map, start, dtype, ..
            } => Storage::Mapped {
                map: Arc::clone(map),
                // Still aligned: a whole number of elements past an aligned start.
                start: start + first * self.dim * dtype.size(),
                len: (last - first) * self.dim,
                dtype: *dtype,
            },
        };
        Ok(Corpus {
            storage,
            dim: self.dim,
            offsets: shard_offsets(&self.offsets, range.clone()),
            doc_ids: self.doc_ids.as_ref().map(|ids| ids[range].to_vec()),
            finite: self.finite.clone(),
        })
    }

    /// This corpus with every token scaled to unit L2 norm (in f32, then rounded to this
    /// corpus's dtype), as ColBERT's encoders output and the residual codec needs; a token of
    /// norm 0 stays 0. Ids are kept; values must be finite.
    pub fn normalized(&self) -> Result<Corpus> {
        self.check_finite()?;
        let d = self.dim;
        let mut v = self.tokens().to_f32_vec();
        v.par_chunks_exact_mut(d).for_each(|row| {
            let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if n > 0.0 {
                row.iter_mut().for_each(|x| *x /= n);
            }
        });
        let mut c = Corpus::new(
            OwnedElements::from_f32(&v, self.dtype()),
            d,
            self.offsets.clone(),
        )?;
        c.doc_ids = self.doc_ids.clone();
        Ok(c)
    }

    /// Whether the token matrix is memory-mapped from a file (rather than owned in memory).
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped { .. })
    }

    /// Error naming the document (and its id), token and column of the first NaN or infinite
    /// value. Scans the whole token matrix in parallel, at memory speed, unless this corpus was
    /// already scanned (a corpus's values never change); a flag recorded in the file
    /// ([`FiniteCheck::Recorded`]) is not enough here: this always looks at the values.
    pub fn check_finite(&self) -> Result<()> {
        self.check_finite_in(None, 0)
    }

    /// How this corpus's values are known to be finite: scanned, recorded in its file, or not.
    pub fn finite_check(&self) -> FiniteCheck {
        self.finite.get()
    }

    /// [`Corpus::check_finite`], naming `file` in the error when the corpus came from one, and
    /// the document by its index in the file (`first_doc` + its index here, for a slice).
    pub(crate) fn check_finite_in(&self, file: Option<&Path>, first_doc: usize) -> Result<()> {
        if self.finite.get() == FiniteCheck::Scanned {
            return Ok(());
        }
        // Blocks of whole rows, about 64K elements each: large enough that the parallel
        // overhead vanishes, small enough that both cores share the work at any corpus size.
        let elems = self.storage.elements();
        let rows = self.num_tokens();
        let block_rows = (65536 / self.dim).max(1);
        let first_bad = (0..rows.div_ceil(block_rows))
            .into_par_iter()
            .find_first(|&b| {
                let rows = b * block_rows..((b + 1) * block_rows).min(rows);
                !elems
                    .slice(rows.start * self.dim..rows.end * self.dim)
                    .all_finite()
            });
        let Some(b) = first_bad else {
            self.finite.set(FiniteCheck::Scanned);
            return Ok(());
        };
        let start = b * block_rows * self.dim;
        let end = ((b + 1) * block_rows).min(rows) * self.dim;
        let Some((i, value)) = elems.slice(start..end).first_non_finite() else {
            // all_finite and first_non_finite test the same bits; unreachable, but not a panic.
            return Ok(());
        };
        let row = (start + i) / self.dim;
        let col = (start + i) % self.dim;
        // The document holding token row `row`: the last offset at or below it.
        let j = self.offsets.partition_point(|&o| o <= row) - 1;
        let mut what = format!("document {}", first_doc + j);
        if let Some(ids) = &self.doc_ids {
            what.push_str(&format!(" (id {:?})", ids[j]));
        }
        if let Some(file) = file {
            what.push_str(&format!(" of {}", file.display()));
        }
        Err(Error::NonFinite {
            what,
            row: row - self.offsets[j],
            col,
            value,
        })
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

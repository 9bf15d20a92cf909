//! The inverted file of an index: for each residual centroid, the documents holding a token
//! assigned to it, ascending and each once (PLAID's IVF), as CSR arrays; and its file,
//! `ivf.safetensors`: `offsets` `[K + 1]` I64 and `docs` `[nnz]` U32, metadata `format` =
//! `tilemaxsim.ivf`, `version` = `1`. Opening checks everything a search relies on (offsets
//! from 0, non-decreasing, ending at nnz; document numbers in range and strictly ascending in
//! each list), so a corrupt file is an error, never a wrong answer or a panic.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;
use safetensors::tensor::{Dtype as StDtype, TensorView};

use crate::corpus::format::{
    Durable, le_words, map_file, parse, read_ints, to_offsets, write_atomically,
};
use crate::error::{Error, Result};

const FORMAT: (&str, &str) = ("format", "tilemaxsim.ivf");
const VERSION: (&str, &str) = ("version", "1");

/// Centroid → documents, in CSR form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ivf {
    offsets: Vec<usize>,
    docs: Vec<u32>,
}

impl Ivf {
    /// The IVF of a residual corpus: `ids` holds each token's centroid (below `num_centroids`),
    /// `doc_offsets` each document's first token (`N + 1` entries, ending at `ids.len()`).
    pub fn build(ids: &[u32], doc_offsets: &[usize], num_centroids: usize) -> Result<Self> {
        let mut ivf = Ivf::empty(num_centroids);
        ivf.append(ids, doc_offsets, 0)?;
        Ok(ivf)
    }

    /// The IVF of no documents.
    pub fn empty(num_centroids: usize) -> Self {
        Ivf {
            offsets: vec![0; num_centroids + 1],
            docs: Vec::new(),
        }
    }

    /// Add documents numbered from `first_doc` on (past every document listed so far): `ids`
    /// and `doc_offsets` as [`Ivf::build`] takes them. Each list grows at its end, in place;
    /// an error (checked before anything changes) leaves the IVF as it was.
    pub fn append(&mut self, ids: &[u32], doc_offsets: &[usize], first_doc: usize) -> Result<()> {
        let num_centroids = self.num_centroids();
        let n = doc_offsets.len().saturating_sub(1);
        let last_doc = first_doc.saturating_add(n);
        if doc_offsets.first().is_some_and(|&o| o != 0)
            || doc_offsets.windows(2).any(|w| w[0] > w[1])
            || doc_offsets.last().copied().unwrap_or(0) != ids.len()
            || u32::try_from(last_doc).is_err()
        {
            return Err(Error::Argument(format!(
                "IVF: {} document offsets for {} tokens ({n} documents from {first_doc}; at \
                 most 2^32 in all)",
                doc_offsets.len(),
                ids.len()
            )));
        }
        if let Some(&bad) = ids.iter().find(|&&c| c as usize >= num_centroids) {
            return Err(Error::Argument(format!(
                "IVF: centroid id {bad} out of range (K = {num_centroids})"
            )));
        }
        if let Some(c) = (0..num_centroids).find(|&c| {
            self.list(c)
                .last()
                .is_some_and(|&d| d as usize >= first_doc)
        }) {
            return Err(Error::Argument(format!(
                "IVF: centroid {c} already lists document {first_doc} or later"
            )));
        }
        // The new documents in contiguous parts, a part to a core: each document's distinct
        // centroids (flattened) and the part's count of each centroid; then every part places
        // its entries where the parts before it end, so each list stays ascending.
        let parts = part_ranges(n, num_centroids);
        let found: Vec<Part> = parts
            .par_iter()
            .map(|r| Part::of(ids, doc_offsets, r.clone(), num_centroids))
            .collect();
        let mut counts = vec![0usize; num_centroids];
        for part in &found {
            for (total, &c) in counts.iter_mut().zip(&part.counts) {
                *total += c as usize;
            }
        }
        let added: usize = counts.iter().sum();
        if added == 0 {
            return Ok(());
        }
        // Move each list to its new start, the last first (lists only move towards the end),
        // leaving room for its new entries; `next[c]`: where centroid c's next entry goes.
        let old = self.offsets.clone();
        self.docs.resize(old[num_centroids] + added, 0);
        let mut shift = added;
        let mut next = vec![0usize; num_centroids];
        for c in (0..num_centroids).rev() {
            self.offsets[c + 1] = old[c + 1] + shift;
            shift -= counts[c];
            self.docs.copy_within(old[c]..old[c + 1], old[c] + shift);
            next[c] = old[c + 1] + shift;
        }
        // Where each part's entries of each centroid start.
        let mut starts = Vec::with_capacity(found.len());
        for part in &found {
            starts.push(next.clone());
            for (n, &c) in next.iter_mut().zip(&part.counts) {
                *n += c as usize;
            }
        }
        let out = SharedDocs(self.docs.as_mut_ptr());
        parts
            .par_iter()
            .zip(&found)
            .zip(starts)
            .for_each(|((r, part), mut at)| {
                let mut s = 0;
                for (k, j) in r.clone().enumerate() {
                    let e = part.ends[k];
                    for &c in &part.flat[s..e] {
                        // SAFETY: part i writes centroid c's entries at starts[i][c] onwards,
                        // counts_i[c] of them: ranges disjoint between parts and centroids, all
                        // inside `docs` (resized to hold every new entry above). The document
                        // number is in range of u32 (checked above).
                        unsafe { out.write(at[c as usize], (first_doc + j) as u32) };
                        at[c as usize] += 1;
                    }
                    s = e;
                }
            });
        Ok(())
    }

    /// Centroids K.
    pub fn num_centroids(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The documents of centroid `c`, ascending.
    pub fn list(&self, c: usize) -> &[u32] {
        &self.docs[self.offsets[c]..self.offsets[c + 1]]
    }

    /// The lists as compressed rows: list c is `docs[offsets[c]..offsets[c + 1]]`.
    pub fn csr(&self) -> (&[usize], &[u32]) {
        (&self.offsets, &self.docs)
    }

    /// Entries of all lists together (document–centroid pairs).
    pub fn entries(&self) -> usize {
        self.docs.len()
    }

    /// Bytes of the two arrays as stored.
    pub fn size_bytes(&self) -> usize {
        self.offsets.len() * 8 + self.docs.len() * 4
    }

    /// Write the IVF to `path` (atomically).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.save_as(path.as_ref(), Durable::No)
    }

    /// [`Ivf::save`], on disk (fsync) when this returns.
    pub(crate) fn save_durably(&self, path: &Path) -> Result<()> {
        self.save_as(path, Durable::Yes)
    }

    fn save_as(&self, path: &Path, durable: Durable) -> Result<()> {
        let offsets: Vec<u8> = self
            .offsets
            .iter()
            .flat_map(|&o| (o as i64).to_le_bytes())
            .collect();
        let docs = le_words(&self.docs);
        fn view<'d>(
            path: &Path,
            dtype: StDtype,
            data: &'d [u8],
            n: usize,
        ) -> Result<TensorView<'d>> {
            TensorView::new(dtype, vec![n], data)
                .map_err(|e| Error::format(path, format!("cannot write: {e}")))
        }
        let tensors = vec![
            (
                "offsets".to_string(),
                view(path, StDtype::I64, &offsets, self.offsets.len())?,
            ),
            (
                "docs".to_string(),
                view(path, StDtype::U32, &docs, self.docs.len())?,
            ),
        ];
        let metadata = HashMap::from([
            (FORMAT.0.to_string(), FORMAT.1.to_string()),
            (VERSION.0.to_string(), VERSION.1.to_string()),
        ]);
        write_atomically(path, tensors, metadata, durable)
    }

    /// Read and check the IVF at `path` of an index with `num_centroids` centroids and
    /// `num_docs` documents.
    pub fn open(path: impl AsRef<Path>, num_centroids: usize, num_docs: usize) -> Result<Self> {
        let path = path.as_ref();
        let map = map_file(path)?;
        let st = parse(path, &map)?;
        let bad = |m: String| Error::format(path, m);
        let (_, meta) = safetensors::SafeTensors::read_metadata(&map)
            .map_err(|e| bad(format!("not a valid safetensors file ({e})")))?;
        let meta = meta.metadata().clone().unwrap_or_default();
        for (key, want) in [FORMAT, VERSION] {
            if meta.get(key).map(String::as_str) != Some(want) {
                return Err(bad(format!(
                    "not a tilemaxsim IVF file (metadata {key} = {:?}, expected {want:?})",
                    meta.get(key)
                )));
            }
        }
        let tensor = |name: &str| {
            st.tensor(name)
                .map_err(|_| bad(format!("no tensor `{name}`")))
        };
        let offsets_t = tensor("offsets")?;
        let offsets = to_offsets(path, "offsets", read_ints(path, "offsets", &offsets_t)?)?;
        let docs_t = tensor("docs")?;
        if docs_t.dtype() != StDtype::U32 || docs_t.shape().len() != 1 {
            return Err(bad(format!(
                "`docs` is {:?} of shape {:?}, expected U32 of one dimension",
                docs_t.dtype(),
                docs_t.shape()
            )));
        }
        let docs: Vec<u32> = docs_t
            .data()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("chunk of 4")))
            .collect();
        if offsets.len() != num_centroids + 1 {
            return Err(bad(format!(
                "`offsets` has {} entries, the index has {num_centroids} centroids (K + 1 expected)",
                offsets.len()
            )));
        }
        if offsets[0] != 0
            || offsets.windows(2).any(|w| w[0] > w[1])
            || offsets[num_centroids] != docs.len()
        {
            return Err(bad(format!(
                "`offsets` must rise from 0 to the {} entries of `docs`",
                docs.len()
            )));
        }
        for c in 0..num_centroids {
            let list = &docs[offsets[c]..offsets[c + 1]];
            if let Some(&d) = list.iter().find(|&&d| d as usize >= num_docs) {
                return Err(bad(format!(
                    "centroid {c} lists document {d}; the index has {num_docs}"
                )));
            }
            if list.windows(2).any(|w| w[0] >= w[1]) {
                return Err(bad(format!(
                    "centroid {c}'s documents are not strictly ascending"
                )));
            }
        }
        Ok(Ivf { offsets, docs })
    }
}

/// One part of the documents being added: each document's distinct centroids, ascending,
/// flattened (document k's end at `ends[k]`), and how many of its documents hold each centroid.
struct Part {
    flat: Vec<u32>,
    ends: Vec<usize>,
    counts: Vec<u32>,
}

impl Part {
    fn of(ids: &[u32], doc_offsets: &[usize], docs: std::ops::Range<usize>, k: usize) -> Self {
        let mut flat = Vec::new();
        let mut ends = Vec::with_capacity(docs.len());
        let mut counts = vec![0u32; k];
        for j in docs {
            let start = flat.len();
            flat.extend_from_slice(&ids[doc_offsets[j]..doc_offsets[j + 1]]);
            flat[start..].sort_unstable();
            let mut w = start;
            for i in start..flat.len() {
                if w == start || flat[i] != flat[w - 1] {
                    flat[w] = flat[i];
                    counts[flat[i] as usize] += 1;
                    w += 1;
                }
            }
            flat.truncate(w);
            ends.push(w);
        }
        Part { flat, ends, counts }
    }
}

/// Contiguous parts of `n` documents: a few a core, fewer where K is large (each part counts
/// every centroid: at most 2^26 counts in all).
fn part_ranges(n: usize, k: usize) -> Vec<std::ops::Range<usize>> {
    let parts = (rayon::current_num_threads() * 4)
        .min((1usize << 26) / k.max(1))
        .min(n)
        .max(1);
    (0..parts)
        .map(|p| n * p / parts..n * (p + 1) / parts)
        .collect()
}

/// The IVF's document array, written by several parts at once (each at places of its own).
struct SharedDocs(*mut u32);

// SAFETY: the parts write disjoint elements (see `append`), and the array outlives them.
unsafe impl Send for SharedDocs {}
unsafe impl Sync for SharedDocs {}

impl SharedDocs {
    /// # Safety
    /// `i` must be in bounds and written by no other thread.
    unsafe fn write(&self, i: usize, v: u32) {
        // SAFETY: this function's contract.
        unsafe { *self.0.add(i) = v };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_hold_each_document_once_per_centroid() {
        // Three documents: centroids {1, 0, 1}, {2}, {0, 0}.
        let ids = [1, 0, 1, 2, 0, 0];
        let ivf = Ivf::build(&ids, &[0, 3, 4, 6], 4).unwrap();
        assert_eq!(ivf.num_centroids(), 4);
        assert_eq!(ivf.list(0), &[0, 2]);
        assert_eq!(ivf.list(1), &[0]);
        assert_eq!(ivf.list(2), &[1]);
        assert_eq!(ivf.list(3), &[] as &[u32]);
        assert_eq!(ivf.entries(), 4);
        assert!(Ivf::build(&ids, &[0, 3, 4, 6], 2).is_err(), "id 2 of K = 2");
        assert!(
            Ivf::build(&ids, &[0, 3, 4], 4).is_err(),
            "offsets short of the tokens"
        );
    }

    #[test]
    fn parts_place_every_list_as_a_naive_build() {
        // 3,000 documents of 1 to 12 tokens over K = 37 (many parts on any machine), against a
        // set per centroid.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut offsets = vec![0usize];
        let mut ids = Vec::new();
        for _ in 0..3000 {
            let len = rng.random_range(1..=12);
            ids.extend((0..len).map(|_| rng.random_range(0..37u32)));
            offsets.push(ids.len());
        }
        let ivf = Ivf::build(&ids, &offsets, 37).unwrap();
        let mut want = vec![std::collections::BTreeSet::new(); 37];
        for j in 0..3000 {
            for &c in &ids[offsets[j]..offsets[j + 1]] {
                want[c as usize].insert(j as u32);
            }
        }
        for (c, set) in want.iter().enumerate() {
            assert_eq!(
                ivf.list(c),
                set.iter().copied().collect::<Vec<_>>(),
                "centroid {c}"
            );
        }
    }

    #[test]
    fn appended_in_pieces_as_built_at_once() {
        // Documents of 1 to 4 tokens over K = 5, added in pieces of 1 to 3 documents.
        let lengths = [2usize, 1, 4, 3, 1, 2, 4, 1, 3];
        let offsets: Vec<usize> = std::iter::once(0)
            .chain(lengths.iter().scan(0, |t, &l| {
                *t += l;
                Some(*t)
            }))
            .collect();
        let ids: Vec<u32> = (0..offsets[lengths.len()] as u32)
            .map(|i| (i * 7 + i / 3) % 5)
            .collect();
        let whole = Ivf::build(&ids, &offsets, 5).unwrap();
        let mut ivf = Ivf::empty(5);
        let mut first = 0;
        for piece in [1usize, 3, 2, 1, 2] {
            let o = &offsets[first..=first + piece];
            let local: Vec<usize> = o.iter().map(|&x| x - o[0]).collect();
            ivf.append(&ids[o[0]..o[piece]], &local, first).unwrap();
            first += piece;
        }
        assert_eq!(ivf, whole);
        // Refused, and nothing changed: a document already listed, an id past K.
        assert!(ivf.append(&[0], &[0, 1], 3).is_err());
        assert!(ivf.append(&[5], &[0, 1], 9).is_err());
        assert_eq!(ivf, whole);
    }

    #[test]
    fn saved_and_opened_alike_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ivf.safetensors");
        let ivf = Ivf::build(&[3, 1, 1, 0, 2, 3], &[0, 2, 3, 6], 4).unwrap();
        ivf.save(&path).unwrap();
        assert_eq!(Ivf::open(&path, 4, 3).unwrap(), ivf);
        for (k, n) in [(3, 3), (5, 3), (4, 2)] {
            let e = Ivf::open(&path, k, n).unwrap_err().to_string();
            assert!(e.contains("ivf.safetensors"), "{e}");
        }
        std::fs::write(&path, b"not safetensors").unwrap();
        assert!(Ivf::open(&path, 4, 3).is_err());
        assert!(Ivf::open(dir.path().join("missing"), 4, 3).is_err());
    }
}

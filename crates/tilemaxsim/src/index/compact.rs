//! Compacting an index into a new directory: the documents that are not deleted (the build's,
//! then the added ones, in number order) written as the build of a new index, numbered from 0.
//! Where the index has ids (the build's, or an add's), each document keeps the id it had (one
//! that had none keeps its old number as its id), so hits name the same documents before and
//! after; an index without any ids stays without, its documents named by their new numbers
//! (old numbers as ids would collide with the numbers of later adds).
//!
//! The codec and centroids are kept and the codes copied, never re-encoded: every document
//! scores exactly as before. The codes and exact tokens are written from where they lie (the
//! build's memory-mapped files, the added segment in memory), runs of consecutive live
//! documents at a time, each file on disk before the manifest names it; only the centroid ids
//! (4 bytes a token, for the IVF, built afresh) and the offsets are gathered. The new index has
//! no log, so its searches no longer skip deleted documents or search the added ones as a
//! segment of their own.
//!
//! The writer's lock is held throughout: the new index holds every update acknowledged before
//! the compaction started, and no other; readers go on meanwhile.

use std::collections::HashMap;
use std::path::Path;

use super::build::{finish, prepare_dir};
use super::ivf::Ivf;
use super::{CODES, EXACT, IVF, Index, Manifest, updates};
use crate::codec::CompressedCorpus;
use crate::codec::format::{FileParts, write_parts};
use crate::corpus::Corpus;
use crate::corpus::format::{Durable, ExactParts, le_words, write_exact_parts};
use crate::error::{Error, Result};

/// What a compaction wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactReport {
    /// Documents of the new index (the live ones).
    pub documents: usize,
    /// Deleted documents left out.
    pub removed: usize,
    /// Tokens of the new index.
    pub tokens: usize,
}

impl Index {
    /// Write the live documents of this index (every update on disk before the call
    /// included) as a new index in `out` (a new or empty directory), as the module's text
    /// says. Refused, with nothing written, when every document is deleted or when two live
    /// documents carry the same id.
    pub fn compact(&mut self, out: impl AsRef<Path>) -> Result<CompactReport> {
        let mut w = updates::Writer::lock(&self.dir)?;
        self.catch_up(Some(&mut w))?;
        let live: Vec<usize> = (0..self.len()).filter(|&j| !self.is_deleted(j)).collect();
        if live.is_empty() {
            return Err(Error::Argument(format!(
                "every document of {} is deleted; an index needs at least one",
                self.dir.display()
            )));
        }
        // Ids where the index has any (see the module's text).
        let names: Option<Vec<String>> = (self.codes.doc_ids().is_some() || self.updates.any_ids)
            .then(|| live.iter().map(|&j| self.doc_id(j)).collect());
        let mut seen = HashMap::with_capacity(live.len());
        for (name, &j) in names.iter().flatten().zip(&live) {
            if let Some(first) = seen.insert(name.as_str(), j) {
                return Err(Error::Argument(format!(
                    "documents {first} and {j} both carry the id {name:?}; delete one of them \
                     before compacting"
                )));
            }
        }
        let r = super::residual(&self.codes)?;
        // The live documents as runs of consecutive ones in each segment (the build's, then
        // the added one), written from where their rows lie.
        let added = self.updates.added.as_ref();
        let n = self.codes.len();
        let segments: Vec<(&CompressedCorpus, Option<&Corpus>)> =
            std::iter::once((&self.codes, self.exact.as_ref()))
                .chain(added.map(|a| (&a.codes, a.exact.as_ref())))
                .collect();
        let runs = runs(&live, n);
        let (d, rb) = (self.codes.dim(), r.row_bytes());
        let mut offsets = vec![0usize];
        let (mut code_parts, mut ids) = (Vec::with_capacity(runs.len()), Vec::new());
        for &(seg, ref docs) in &runs {
            let c = segments[seg].0;
            let o = c.offsets();
            for j in docs.clone() {
                offsets.push(offsets[offsets.len() - 1] + c.doc_len(j));
            }
            let rows = o[docs.start]..o[docs.end];
            code_parts.push(&c.codes()[rows.start * rb..rows.end * rb]);
            ids.extend_from_slice(&c.aux().unwrap_or_default()[rows]);
        }
        let mut exact_parts = Vec::new();
        let exact_dtype = self.exact.as_ref().map(Corpus::dtype);
        if let Some(dtype) = exact_dtype {
            let row = d * dtype.size();
            for &(seg, ref docs) in &runs {
                let e = segments[seg]
                    .1
                    .filter(|e| e.dtype() == dtype && e.dim() == d)
                    .ok_or_else(|| {
                        Error::Argument(
                            "the added documents have no exact tokens, or of another dtype".into(),
                        )
                    })?;
                let o = e.offsets();
                exact_parts.push(
                    &e.tokens().elements().as_bytes()[o[docs.start] * row..o[docs.end] * row],
                );
            }
        }
        let tokens = ids.len();
        let id_bytes = le_words(&ids);
        let out = out.as_ref();
        prepare_dir(out)?;
        let codes_file = FileParts {
            codec: self.codes.codec(),
            dim: d,
            offsets: &offsets,
            doc_ids: names.as_deref(),
            rerank_k: None,
            fp8_scanned: false,
            codes: code_parts,
            aux: vec![&id_bytes],
        };
        let exact_file = exact_dtype.map(|dtype| ExactParts {
            dtype,
            dim: d,
            offsets: &offsets,
            doc_ids: names.as_deref(),
            scanned: false,
            tokens: exact_parts,
        });
        // The three files at once (the IVF built meanwhile), each on disk before the manifest.
        let (written, ivf) = std::thread::scope(|s| {
            let writer = s.spawn(|| -> Result<()> {
                write_parts(&codes_file, &out.join(CODES), Durable::Yes)?;
                if let Some(e) = &exact_file {
                    write_exact_parts(e, &out.join(EXACT), Durable::Yes)?;
                }
                Ok(())
            });
            let ivf = Ivf::build(&ids, &offsets, r.num_centroids())
                .and_then(|ivf| ivf.save_durably(&out.join(IVF)));
            let written = writer
                .join()
                .unwrap_or_else(|_| Err(Error::Argument("writing the index files failed".into())));
            (written, ivf)
        });
        written?;
        ivf?;
        let manifest = Manifest {
            documents: live.len(),
            tokens,
            dim: d,
            nbits: r.nbits(),
            centroids: r.num_centroids(),
            codes: CODES.into(),
            ivf: IVF.into(),
            exact: exact_dtype.map(|_| EXACT.into()),
            defaults: self.defaults,
        };
        finish(out, &manifest)?;
        Ok(CompactReport {
            documents: live.len(),
            removed: self.len() - live.len(),
            tokens,
        })
    }
}

/// The live documents (ascending numbers; the build's are below `n`, the added ones numbered
/// from `n`) as runs of consecutive documents: (segment: 0 the build's, 1 the added one, their
/// numbers in it).
fn runs(live: &[usize], n: usize) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
    for &j in live {
        let (seg, k) = if j < n { (0, j) } else { (1, j - n) };
        match out.last_mut() {
            Some((s, r)) if *s == seg && r.end == k => r.end += 1,
            _ => out.push((seg, k..k + 1)),
        }
    }
    out
}

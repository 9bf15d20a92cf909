//! Compacting an index: the documents that are not deleted (the build's, then the added ones,
//! in number order) written as the build of an index numbered from 0, into a new directory
//! ([`Index::compact`]) or as the next generation of the same one
//! ([`Index::compact_in_place`]). Where the index has ids (the build's, or an add's), each
//! document keeps the id it had (one that had none keeps its old number as its id), so hits
//! name the same documents before and after; an index without any ids stays without, its
//! documents named by their new numbers (old numbers as ids would collide with the numbers of
//! later adds).
//!
//! The codec and centroids are kept and the codes copied, never re-encoded: every document
//! scores exactly as before. The codes and exact tokens are written from where they lie (the
//! build's memory-mapped files, the added segment in memory), runs of consecutive live
//! documents at a time, each file on disk before the manifest names it; only the centroid ids
//! (4 bytes a token, for the IVF, built afresh) and the offsets are gathered. The new index (or
//! generation) has an empty log, so its searches no longer skip deleted documents or search
//! the added ones as a segment of their own.
//!
//! The writer's lock is held throughout: the result holds every update acknowledged before
//! the compaction started, and no other; readers go on meanwhile. In place, the new
//! manifest's rename is the moment the new generation replaces the old: a crash before it
//! leaves the old generation whole (and files of the new one, removed by the next
//! compaction), a crash after it the new one (and the old one's files, likewise).

use std::collections::HashMap;
use std::path::Path;

use super::build::{finish, prepare_dir, sync_dir};
use super::ivf::Ivf;
use super::{CODES, EXACT, IVF, Index, LOG, MANIFEST, Manifest, Stale};
use crate::codec::CompressedCorpus;
use crate::codec::format::{FileParts, write_parts};
use crate::corpus::format::{Durable, ExactParts, le_words, write_exact_parts};
use crate::corpus::{Corpus, FiniteCheck};
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

/// The file names of generation `g` of an index directory.
struct FileNames {
    codes: String,
    ivf: String,
    exact: String,
    log: String,
}

impl FileNames {
    fn of(generation: u64) -> Self {
        if generation == 0 {
            return FileNames {
                codes: CODES.into(),
                ivf: IVF.into(),
                exact: EXACT.into(),
                log: LOG.into(),
            };
        }
        let g = generation;
        FileNames {
            codes: format!("codes.{g}.safetensors"),
            ivf: format!("ivf.{g}.safetensors"),
            exact: format!("exact.{g}.safetensors"),
            log: format!("updates.{g}.log"),
        }
    }
}

/// Whether `name` is one of the files an index's generations are made of, or a temporary file
/// of one (or of the manifest) being written.
fn is_generation_file(name: &str) -> bool {
    if name.starts_with(&format!(".{MANIFEST}.tmp")) {
        return true;
    }
    // A temporary file of one being written is `.{name}.tmp{pid}`.
    let name = match name.strip_prefix('.') {
        Some(n) => n.split_once(".tmp").map_or(n, |(n, _)| n),
        None => name,
    };
    let numbered = |stem: &str, ext: &str| match name
        .strip_prefix(stem)
        .and_then(|rest| rest.strip_suffix(ext))
    {
        Some("") => true,
        Some(g) => g
            .strip_prefix('.')
            .is_some_and(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    };
    numbered("codes", ".safetensors")
        || numbered("ivf", ".safetensors")
        || numbered("exact", ".safetensors")
        || numbered("updates", ".log")
}

impl Index {
    /// Write the live documents of this index (every update on disk before the call
    /// included) as a new index in `out` (a new or empty directory), as the module's text
    /// says. Refused, with nothing written, when every document is deleted or when two live
    /// documents carry the same id.
    pub fn compact(&mut self, out: impl AsRef<Path>) -> Result<CompactReport> {
        let _lock = self.lock(Stale::Reopen)?;
        let live = self.live_documents()?;
        prepare_dir(out.as_ref())?;
        self.write_live(&live, out.as_ref(), 0)
    }

    /// Compact this index into the next generation of its own directory (see the module's
    /// text), then open it: the documents numbered from 0 again, the old generation's files
    /// removed. Other openings of the directory go on reading the old generation until their
    /// next [`Index::refresh`]; their deletes by number are refused until then. Refused, with
    /// nothing changed, as [`Index::compact`] is.
    pub fn compact_in_place(&mut self) -> Result<CompactReport> {
        let lock = self.lock(Stale::Reopen)?;
        let live = self.live_documents()?;
        let dir = self.dir.clone();
        let generation = self.generation + 1;
        let report = self.write_live(&live, &dir, generation)?;
        // The new generation is in place: every other file of ours is the old generation's
        // or a failed attempt's, or a killed writer's temporary file (the old log, locked, may
        // go too: a waiting writer sees the new manifest once it has the lock, and takes the
        // new log's).
        let f = FileNames::of(generation);
        let kept = [f.codes, f.ivf, f.exact, f.log];
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name != MANIFEST && is_generation_file(name) && !kept.iter().any(|k| k == name) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        sync_dir(&dir)?;
        drop(lock);
        *self = Index::open(&dir)?;
        Ok(report)
    }

    /// The numbers of the documents not deleted, after checking that there is one and that
    /// no two carry the same id.
    fn live_documents(&self) -> Result<Vec<usize>> {
        let live: Vec<usize> = (0..self.len()).filter(|&j| !self.is_deleted(j)).collect();
        if live.is_empty() {
            return Err(Error::Argument(format!(
                "every document of {} is deleted; an index needs at least one",
                self.dir.display()
            )));
        }
        if self.has_ids() {
            let mut seen = HashMap::with_capacity(live.len());
            for &j in &live {
                if let Some(first) = seen.insert(self.doc_id(j), j) {
                    return Err(Error::Argument(format!(
                        "documents {first} and {j} both carry the id {:?}; delete one of them \
                         before compacting",
                        self.doc_id(j)
                    )));
                }
            }
        }
        Ok(live)
    }

    /// Write the documents `live` as generation `generation` of an index in `out` (its files,
    /// then its manifest).
    fn write_live(&self, live: &[usize], out: &Path, generation: u64) -> Result<CompactReport> {
        let names: Option<Vec<String>> = self
            .has_ids()
            .then(|| live.iter().map(|&j| self.doc_id(j)).collect());
        let files = FileNames::of(generation);
        let r = super::residual(&self.codes)?;
        // The live documents as runs of consecutive ones in each segment (the build's, then
        // the added one), written from where their rows lie.
        let added = self.updates.added.as_ref();
        let n = self.codes.len();
        let segments: Vec<(&CompressedCorpus, Option<&Corpus>)> =
            std::iter::once((&self.codes, self.exact.as_ref()))
                .chain(added.map(|a| (&a.codes, a.exact.as_ref())))
                .collect();
        let runs = runs(live, n);
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
        // The exact tokens are all finite (the build's were checked when the index was opened,
        // the added ones here: a log record is checked by its CRC, not for NaN), which the new
        // file records, so opening it skips the scan.
        let scanned = match &self.exact {
            Some(e) if e.finite_check() != FiniteCheck::NotChecked => {
                match added.and_then(|a| a.exact.as_ref()) {
                    Some(a) => a.check_finite().is_ok(),
                    None => true,
                }
            }
            _ => false,
        };
        let exact_file = exact_dtype.map(|dtype| ExactParts {
            dtype,
            dim: d,
            offsets: &offsets,
            doc_ids: names.as_deref(),
            scanned,
            tokens: exact_parts,
        });
        // The three files at once (the IVF built meanwhile), each on disk before the manifest.
        let (written, ivf) = std::thread::scope(|s| {
            let writer = s.spawn(|| -> Result<()> {
                write_parts(&codes_file, &out.join(&files.codes), Durable::Yes)?;
                if let Some(e) = &exact_file {
                    write_exact_parts(e, &out.join(&files.exact), Durable::Yes)?;
                }
                Ok(())
            });
            let ivf = Ivf::build(&ids, &offsets, r.num_centroids())
                .and_then(|ivf| ivf.save_durably(&out.join(&files.ivf)));
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
            codes: files.codes,
            ivf: files.ivf,
            exact: exact_dtype.map(|_| files.exact),
            defaults: self.defaults,
            generation,
            log: files.log,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_files_are_told_from_others() {
        for ours in [
            "codes.safetensors",
            "codes.3.safetensors",
            "ivf.12.safetensors",
            "exact.safetensors",
            "updates.log",
            "updates.7.log",
            ".codes.2.safetensors.tmp4242",
            ".index.json.tmp1",
        ] {
            assert!(is_generation_file(ours), "{ours}");
        }
        for other in [
            "index.json",
            "codes.x.safetensors",
            "codes..safetensors",
            "notes.log",
            "updates.log.bak",
            "my-codes.safetensors",
            "index.json.tmp1",
        ] {
            assert!(!is_generation_file(other), "{other}");
        }
        let g = FileNames::of(4);
        assert!(
            [g.codes, g.ivf, g.exact, g.log]
                .iter()
                .all(|n| is_generation_file(n))
        );
    }
}

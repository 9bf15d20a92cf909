//! Compacting an index into a new directory: the documents that are not deleted (the build's,
//! then the added ones, in number order) written as the build of a new index, numbered from 0.
//! Where the index has ids (the build's, or an add's), each document keeps the id it had (one
//! that had none keeps its old number as its id), so hits name the same documents before and
//! after; an index without any ids stays without, its documents named by their new numbers
//! (old numbers as ids would collide with the numbers of later adds). The codec and centroids are kept and the codes
//! copied, never re-encoded: every document scores exactly as before. The IVF is built afresh
//! and the new index has no log, so its searches no longer skip deleted documents or search
//! the added ones as a segment of their own.
//!
//! The writer's lock is held throughout: the new index holds every update acknowledged before
//! the compaction started, and no other; readers go on meanwhile.

use std::collections::HashMap;
use std::path::Path;

use super::build::{BuildOptions, Source, build};
use super::{Index, updates};
use crate::Device;
use crate::codec::CompressedCorpus;
use crate::codec::subset::gather_rows;
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::{Elements, OwnedElements};

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
        let n = self.codes.len();
        let split = live.partition_point(|&j| j < n);
        let (base_live, added_live): (&[usize], Vec<usize>) = (
            &live[..split],
            live[split..].iter().map(|&j| j - n).collect(),
        );
        let added = self.updates.added.as_ref();
        let mut parts = Vec::new();
        if !base_live.is_empty() {
            parts.push(self.codes.gather(base_live)?);
        }
        if let Some(a) = added.filter(|_| !added_live.is_empty()) {
            parts.push(a.codes.gather(&added_live)?);
        }
        let mut codes = concat_codes(&parts)?;
        if let Some(ids) = &names {
            codes = codes.with_doc_ids(ids.clone())?;
        }
        let exact = match &self.exact {
            None => None,
            Some(base) => {
                let mut pieces = vec![(base, base_live)];
                if !added_live.is_empty() {
                    let e = added.and_then(|a| a.exact.as_ref()).ok_or_else(|| {
                        Error::Argument("the added documents have no exact tokens".into())
                    })?;
                    pieces.push((e, &added_live));
                }
                let e = gather_exact(&pieces)?;
                Some(match names {
                    Some(ids) => e.with_doc_ids(ids)?,
                    None => e,
                })
            }
        };
        let options = BuildOptions {
            device: Device::Cpu,
            keep_exact: exact.is_some(),
            defaults: self.defaults,
            ..BuildOptions::default()
        };
        build(
            Source::Compressed(&codes),
            exact.as_ref(),
            out,
            &options,
            &|_, _, _| {},
        )?;
        Ok(CompactReport {
            documents: live.len(),
            removed: self.len() - live.len(),
            tokens: codes.num_tokens(),
        })
    }
}

/// Compressed corpora of one codec, one after another.
fn concat_codes(parts: &[CompressedCorpus]) -> Result<CompressedCorpus> {
    let first = parts
        .first()
        .ok_or_else(|| Error::Argument("no documents to compact".into()))?;
    let mut offsets = vec![0usize];
    let (mut codes, mut aux) = (Vec::new(), Vec::new());
    for p in parts {
        let base = offsets[offsets.len() - 1];
        offsets.extend(p.offsets()[1..].iter().map(|&o| base + o));
        codes.extend_from_slice(p.codes());
        aux.extend_from_slice(p.aux().unwrap_or_default());
    }
    let aux = first.aux().map(|_| aux);
    CompressedCorpus::new(first.codec().clone(), first.dim(), offsets, codes, aux)
}

/// Documents of exact corpora (each with the numbers of its documents to take), one after
/// another, in the first one's dtype (an index's exact tokens share one).
fn gather_exact(pieces: &[(&Corpus, &[usize])]) -> Result<Corpus> {
    let (first, _) = pieces
        .first()
        .ok_or_else(|| Error::Argument("no documents to compact".into()))?;
    let dim = first.dim();
    let mut lengths = Vec::new();
    for (c, docs) in pieces {
        if c.dim() != dim || c.dtype() != first.dtype() {
            return Err(Error::Argument(
                "the exact tokens of the build and of the added documents differ in d or dtype"
                    .into(),
            ));
        }
        lengths.extend(docs.iter().map(|&j| c.doc_len(j)));
    }
    fn rows<T: Copy + Default + Send + Sync>(
        pieces: &[(&Corpus, &[usize])],
        dim: usize,
        slice: impl Fn(Elements<'_>) -> Option<&[T]>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for (c, docs) in pieces {
            let src = slice(c.tokens().elements())
                .ok_or_else(|| Error::Argument("exact tokens of another dtype".into()))?;
            let mut to = vec![0usize];
            for &j in docs.iter() {
                to.push(to[to.len() - 1] + c.doc_len(j));
            }
            out.extend(gather_rows(src, dim, c.offsets(), docs, &to));
        }
        Ok(out)
    }
    let owned = match first.tokens().elements() {
        Elements::F32(_) => OwnedElements::F32(rows(pieces, dim, |e| match e {
            Elements::F32(v) => Some(v),
            _ => None,
        })?),
        Elements::F16(_) => OwnedElements::F16(rows(pieces, dim, |e| match e {
            Elements::F16(v) => Some(v),
            _ => None,
        })?),
        Elements::BF16(_) => OwnedElements::BF16(rows(pieces, dim, |e| match e {
            Elements::BF16(v) => Some(v),
            _ => None,
        })?),
    };
    Corpus::from_lengths(owned, dim, &lengths)
}

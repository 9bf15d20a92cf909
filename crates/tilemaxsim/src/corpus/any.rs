//! One handle over a corpus of any codec. Exact token matrices ([`Corpus`]) and codes
//! ([`CompressedCorpus`]) are two codecs of one thing: packed documents under `N + 1` offsets.
//! [`AnyCorpus`] is what the scoring and search API takes (`&dyn AnyCorpus`: either type
//! coerces to it at a call), and [`OpenOptions::open_any`] reads either file format. A
//! backend asks [`AnyCorpus::kind`] for the concrete type it scores.

use std::path::Path;

use super::{Corpus, FiniteCheck, OpenOptions};
use crate::codec::{CodecKind, CompressedCorpus, is_compressed_file};
use crate::error::{Error, Result};

/// The concrete corpus behind an [`AnyCorpus`].
#[derive(Clone, Copy, Debug)]
pub enum CorpusKind<'a> {
    Exact(&'a Corpus),
    Compressed(&'a CompressedCorpus),
}

/// A corpus of any codec: what every scorer and searcher takes.
pub trait AnyCorpus: Send + Sync + std::fmt::Debug {
    /// The concrete corpus.
    fn kind(&self) -> CorpusKind<'_>;

    /// The codec its documents are stored with ([`CodecKind::Exact`] for token matrices).
    fn codec_kind(&self) -> CodecKind {
        match self.kind() {
            CorpusKind::Exact(_) => CodecKind::Exact,
            CorpusKind::Compressed(c) => c.codec().kind(),
        }
    }

    /// The `N + 1` document offsets into the token rows.
    fn offsets(&self) -> &[usize];

    /// Embedding dimension d.
    fn dim(&self) -> usize;

    /// Document ids, when the corpus has them.
    fn doc_ids(&self) -> Option<&[String]>;

    /// Bytes stored per token (d × the element size, or the codec's codes).
    fn bytes_per_token(&self) -> usize;

    /// A short name of what a token is stored as: `f16`, `bf16`, `f32`, or the codec's name.
    fn storage_name(&self) -> String;

    /// Number of documents.
    fn len(&self) -> usize {
        self.offsets().len() - 1
    }

    /// Whether it holds no document (never true of a valid corpus).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of token rows.
    fn num_tokens(&self) -> usize {
        *self.offsets().last().unwrap_or(&0)
    }

    /// Tokens of document `j`.
    fn doc_len(&self, j: usize) -> usize {
        let o = self.offsets();
        o[j + 1] - o[j]
    }

    /// The same corpus with these document ids (one per document).
    fn with_ids(self: Box<Self>, ids: Vec<String>) -> Result<Box<dyn AnyCorpus>>;

    /// Scan the values a score reads for NaN and infinities (exact tokens; fp8 codes; other
    /// codes are checked on open), unless they were scanned already or the file records that
    /// they were when it was written. An error names the document.
    fn ensure_finite(&self) -> Result<()>;

    /// The exact corpus, if this is one.
    fn as_exact(&self) -> Option<&Corpus> {
        match self.kind() {
            CorpusKind::Exact(c) => Some(c),
            CorpusKind::Compressed(_) => None,
        }
    }
}

impl AnyCorpus for Corpus {
    fn kind(&self) -> CorpusKind<'_> {
        CorpusKind::Exact(self)
    }
    fn offsets(&self) -> &[usize] {
        Corpus::offsets(self)
    }
    fn dim(&self) -> usize {
        Corpus::dim(self)
    }
    fn doc_ids(&self) -> Option<&[String]> {
        Corpus::doc_ids(self)
    }
    fn bytes_per_token(&self) -> usize {
        Corpus::dim(self) * self.dtype().size()
    }
    fn storage_name(&self) -> String {
        self.dtype().to_string()
    }
    fn with_ids(self: Box<Self>, ids: Vec<String>) -> Result<Box<dyn AnyCorpus>> {
        Ok(Box::new(self.with_doc_ids(ids)?))
    }
    fn ensure_finite(&self) -> Result<()> {
        match self.finite_check() {
            FiniteCheck::NotChecked => self.check_finite(),
            FiniteCheck::Scanned | FiniteCheck::Recorded => Ok(()),
        }
    }
}

impl AnyCorpus for CompressedCorpus {
    fn kind(&self) -> CorpusKind<'_> {
        CorpusKind::Compressed(self)
    }
    fn offsets(&self) -> &[usize] {
        CompressedCorpus::offsets(self)
    }
    fn dim(&self) -> usize {
        CompressedCorpus::dim(self)
    }
    fn doc_ids(&self) -> Option<&[String]> {
        CompressedCorpus::doc_ids(self)
    }
    fn bytes_per_token(&self) -> usize {
        self.codec().bytes_per_token(CompressedCorpus::dim(self))
    }
    fn storage_name(&self) -> String {
        self.codec().name().to_string()
    }
    fn with_ids(self: Box<Self>, ids: Vec<String>) -> Result<Box<dyn AnyCorpus>> {
        Ok(Box::new(self.with_doc_ids(ids)?))
    }
    fn ensure_finite(&self) -> Result<()> {
        match self.finite_check() {
            FiniteCheck::NotChecked if self.codec().kind() == CodecKind::Fp8 => self.check_finite(),
            _ => Ok(()),
        }
    }
}

impl OpenOptions {
    /// Open a corpus file of either format (exact or compressed: its metadata says which),
    /// memory-mapped, with these options (a shard, `documents`, of either).
    pub fn open_any(&self, path: impl AsRef<Path>) -> Result<Box<dyn AnyCorpus>> {
        let path = path.as_ref();
        if is_compressed_file(path) {
            let codes = self.open_compressed(path)?;
            match self.shard() {
                Some((start, end)) => {
                    Ok(Box::new(codes.slice(start..end).map_err(|e| match e {
                        Error::Argument(m) => Error::Argument(format!("{}: {m}", path.display())),
                        e => e,
                    })?))
                }
                None => Ok(Box::new(codes)),
            }
        } else {
            Ok(Box::new(self.open(path)?))
        }
    }
}

/// Open a corpus file of either format with the default checks ([`OpenOptions::open_any`]).
pub fn open(path: impl AsRef<Path>) -> Result<Box<dyn AnyCorpus>> {
    OpenOptions::new().open_any(path)
}

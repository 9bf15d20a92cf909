//! Compressed corpora: the same packed documents as [`Corpus`] (`N + 1` offsets over `T`
//! tokens), but each token stored as codes of a codec instead of `d` floats:
//! - `residual`: ColBERTv2/PLAID's centroid id + `nbits`-per-dimension residual buckets
//!   (`residual.rs`; imported from colbert-ai and fast-plaid indexes by `plaid.rs`);
//! - `pq`: product quantization, `M` one-byte codes (`pq.rs`);
//! - `int8` and `fp8` (e4m3): `d` one-byte codes and one f32 scale per token (`int8.rs`, `fp8.rs`).
//!
//! In memory (and in the file, `format.rs`) every codec keeps the same two per-token arrays,
//! token-major like the exact corpus, so a GPU kernel reads a document's codes as one
//! contiguous run: `codes` `[T, row_bytes]` u8 and, for residual/int8/fp8, one 32-bit word per
//! token (`aux`: the centroid id as u32, or the scale as f32 bits), each a vector of ours or a
//! memory-mapped range (`storage.rs`). Encoding (`compress`) trains what the codec needs
//! (k-means on the CPU, seeded), scoring decodes a document at a time (`decode_doc_into`) for
//! the CPU engine and the float64 reference.

#[cfg(test)]
mod append_tests;
pub(crate) mod format;
mod fp8;
mod int8;
pub(crate) mod kmeans;
pub mod plaid;
pub(crate) mod pq;
pub(crate) mod residual;
mod sink;
mod storage;
mod subset;
mod torch_pt;

pub use format::is_compressed_file;
pub use pq::{PQ_CENTROIDS, PqCodec, PqOptions};
pub use residual::{Buckets, ResidualCodec, ResidualOptions, plaid_num_centroids};
pub use sink::CodesSink;
pub(crate) use storage::{Bytes, Words};

use std::sync::Arc;

use rayon::prelude::*;

use crate::corpus::{Corpus, FiniteCheck, check_appended, check_ids, check_offsets};
use crate::error::{Error, Result};
use crate::matrix::OwnedElements;

/// A codec and its trained parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Codec {
    Residual(ResidualCodec),
    Pq(PqCodec),
    Int8,
    Fp8,
}

/// Which codec a corpus is stored with, without its parameters: what a backend is asked
/// whether it scores ([`crate::Scorer::supports`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodecKind {
    /// Token matrices (f32, f16, bf16): [`crate::Corpus`].
    Exact,
    Residual,
    Pq,
    Int8,
    Fp8,
}

impl CodecKind {
    /// `exact`, `residual`, `pq`, `int8` or `fp8`.
    pub fn name(self) -> &'static str {
        match self {
            CodecKind::Exact => "exact",
            CodecKind::Residual => "residual",
            CodecKind::Pq => "pq",
            CodecKind::Int8 => "int8",
            CodecKind::Fp8 => "fp8",
        }
    }
}

impl std::fmt::Display for CodecKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What to compress with, and how to train it.
#[derive(Clone, Copy, Debug)]
pub enum CodecSpec {
    Residual(ResidualOptions),
    Pq(PqOptions),
    Int8,
    Fp8,
}

impl Codec {
    /// Which codec this is.
    pub fn kind(&self) -> CodecKind {
        match self {
            Codec::Residual(_) => CodecKind::Residual,
            Codec::Pq(_) => CodecKind::Pq,
            Codec::Int8 => CodecKind::Int8,
            Codec::Fp8 => CodecKind::Fp8,
        }
    }

    /// `residual`, `pq`, `int8` or `fp8`.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Bytes of `codes` per token.
    pub fn row_bytes(&self, dim: usize) -> usize {
        match self {
            Codec::Residual(r) => r.row_bytes(),
            Codec::Pq(p) => p.m(),
            Codec::Int8 | Codec::Fp8 => dim,
        }
    }

    /// Whether tokens carry a 32-bit word besides their codes (centroid id or scale).
    pub fn has_aux(&self) -> bool {
        !matches!(self, Codec::Pq(_))
    }

    /// Bytes stored per token (codes plus the per-token word).
    pub fn bytes_per_token(&self, dim: usize) -> usize {
        self.row_bytes(dim) + if self.has_aux() { 4 } else { 0 }
    }

    /// A one-line description (`residual nbits=2 K=4096`).
    pub fn describe(&self) -> String {
        match self {
            Codec::Residual(r) => format!(
                "residual nbits={} K={} (PLAID: centroid id + residual buckets, unit-norm reconstruction)",
                r.nbits(),
                r.num_centroids()
            ),
            Codec::Pq(p) => format!(
                "pq M={} K={PQ_CENTROIDS} (sub-spaces of {})",
                p.m(),
                p.dim() / p.m()
            ),
            Codec::Int8 => "int8 (per-token symmetric scale)".into(),
            Codec::Fp8 => "fp8 e4m3 (per-token scale)".into(),
        }
    }
}

/// Packed variable-length documents stored as codes of one [`Codec`].
#[derive(Clone, Debug)]
pub struct CompressedCorpus {
    codec: Codec,
    dim: usize,
    offsets: Vec<usize>,
    doc_ids: Option<Vec<String>>,
    codes: Bytes,
    aux: Option<Words>,
    /// fp8 only: whether the codes were scanned for NaN encodings.
    finite: FiniteCheck,
    fp8_table: Option<Arc<[f32; 256]>>,
    /// The rerank depth k' chosen when the corpus was compressed (metadata `rerank_k`), the
    /// default of a search that reranks it exactly.
    rerank_k: Option<usize>,
}

/// Progress of [`compress`]: the stage and `done` of `total` steps.
pub type Progress<'a> = &'a (dyn Fn(&str, usize, usize) + Sync);

impl CompressedCorpus {
    /// A compressed corpus from its parts: `codes` `[T · row_bytes]`, `aux` `[T]` (centroid ids
    /// or f32 scale bits; `None` for PQ). Checks the shapes, the ids (below K), the scales
    /// (finite, ≥ 0) and, for fp8, that no code is NaN.
    pub fn new(
        codec: Codec,
        dim: usize,
        offsets: Vec<usize>,
        codes: Vec<u8>,
        aux: Option<Vec<u32>>,
    ) -> Result<Self> {
        let mut c = Self::from_parts(
            codec,
            dim,
            offsets,
            Bytes::Owned(codes),
            aux.map(Words::Owned),
        )?;
        c.check_codes(None, true)?;
        if matches!(c.codec, Codec::Fp8) {
            c.finite = FiniteCheck::Scanned;
        }
        Ok(c)
    }

    /// The codes of `corpus` (its documents and ids) under `codec`: what [`compress`] returns,
    /// on any device.
    pub(crate) fn of(
        corpus: &Corpus,
        codec: Codec,
        codes: Vec<u8>,
        aux: Option<Vec<u32>>,
    ) -> Result<Self> {
        let c = Self::new(codec, corpus.dim(), corpus.offsets().to_vec(), codes, aux)?;
        match corpus.doc_ids() {
            Some(ids) => c.with_doc_ids(ids.to_vec()),
            None => Ok(c),
        }
    }

    /// Shapes only (used by `new` and the file reader, which then checks values).
    pub(crate) fn from_parts(
        codec: Codec,
        dim: usize,
        offsets: Vec<usize>,
        codes: Bytes,
        aux: Option<Words>,
    ) -> Result<Self> {
        if dim == 0 {
            return Err(Error::Shape("d = 0".into()));
        }
        let codec_dim = match &codec {
            Codec::Residual(r) => r.dim(),
            Codec::Pq(p) => p.dim(),
            _ => dim,
        };
        if codec_dim != dim {
            return Err(Error::DimMismatch {
                what: format!("the {} codec", codec.name()),
                expected: dim,
                got: codec_dim,
            });
        }
        let t = *offsets.last().unwrap_or(&0);
        check_offsets(&offsets, t)?;
        let rb = codec.row_bytes(dim);
        let got = codes.get().len();
        if got != t * rb {
            return Err(Error::Shape(format!(
                "codes hold {got} bytes; {t} tokens of {rb} bytes need {}",
                t * rb
            )));
        }
        match (&aux, codec.has_aux()) {
            (Some(a), true) if a.get().len() == t => {}
            (Some(a), true) => {
                return Err(Error::Shape(format!(
                    "{} per-token words for {t} tokens",
                    a.get().len()
                )));
            }
            (None, true) => {
                return Err(Error::Shape(format!(
                    "the {} codec needs one word per token (ids or scales)",
                    codec.name()
                )));
            }
            (Some(_), false) => {
                return Err(Error::Shape(format!(
                    "the {} codec has no per-token words",
                    codec.name()
                )));
            }
            (None, false) => {}
        }
        let fp8_table = matches!(codec, Codec::Fp8).then(|| Arc::new(fp8::table()));
        Ok(CompressedCorpus {
            codec,
            dim,
            offsets,
            doc_ids: None,
            codes,
            aux,
            finite: FiniteCheck::NotChecked,
            fp8_table,
            rerank_k: None,
        })
    }

    /// Check the values a decode relies on: ids below K and scales finite and ≥ 0 (always),
    /// and with `scan_fp8` the fp8 codes for NaN. Errors name the document (and `file`).
    pub(crate) fn check_codes(&self, file: Option<&std::path::Path>, scan_fp8: bool) -> Result<()> {
        self.check_codes_from(0, file, scan_fp8)
    }

    /// `check_codes` of the tokens from row `first` on.
    fn check_codes_from(
        &self,
        first: usize,
        file: Option<&std::path::Path>,
        scan_fp8: bool,
    ) -> Result<()> {
        let where_ = |row: usize| {
            let j = self.offsets.partition_point(|&o| o <= row) - 1;
            let mut w = format!("document {j}");
            if let Some(ids) = &self.doc_ids {
                w.push_str(&format!(" (id {:?})", ids[j]));
            }
            if let Some(f) = file {
                w.push_str(&format!(" of {}", f.display()));
            }
            (w, row - self.offsets[j])
        };
        let all = self.aux.as_ref().map(Words::get).unwrap_or(&[]);
        let aux = all.get(first..).unwrap_or(&[]);
        match &self.codec {
            Codec::Residual(r) => {
                let k = r.num_centroids();
                if let Some(row) = aux.par_iter().position_first(|&id| id as usize >= k) {
                    let row = first + row;
                    let (w, tok) = where_(row);
                    return Err(Error::Argument(format!(
                        "{w}, token {tok}: centroid id {} is out of range (K = {k})",
                        all[row]
                    )));
                }
            }
            Codec::Int8 | Codec::Fp8 => {
                if let Some(row) = aux.par_iter().position_first(|&s| {
                    let s = f32::from_bits(s);
                    !s.is_finite() || s < 0.0
                }) {
                    let row = first + row;
                    let (w, tok) = where_(row);
                    return Err(Error::NonFinite {
                        what: format!("{w}: the token's scale (must be finite and ≥ 0)"),
                        row: tok,
                        col: 0,
                        value: f32::from_bits(all[row]),
                    });
                }
                if matches!(self.codec, Codec::Fp8) && scan_fp8 {
                    let codes = &self.codes.get()[first * self.dim..];
                    if let Some(i) = codes.par_iter().position_first(|&c| fp8::is_nan(c)) {
                        let i = first * self.dim + i;
                        let (w, tok) = where_(i / self.dim);
                        return Err(Error::NonFinite {
                            what: format!("{w} (an fp8 NaN code)"),
                            row: tok,
                            col: i % self.dim,
                            value: f32::NAN,
                        });
                    }
                }
            }
            Codec::Pq(_) => {}
        }
        Ok(())
    }

    /// Append documents: `offsets` (from 0) over the new tokens' `codes` and `aux`, as
    /// [`new`](Self::new) takes them, checked the same way. An error leaves the corpus as it
    /// was. Memory-mapped codes are copied into memory at the first append; later ones grow
    /// them in place, so a run of appends costs time linear in what they add. A corpus with
    /// document ids refuses (the new documents would have none).
    pub(crate) fn append(
        &mut self,
        offsets: &[usize],
        codes: &[u8],
        aux: Option<&[u32]>,
    ) -> Result<()> {
        let t = check_appended(self.doc_ids.is_some(), offsets)?;
        let rb = self.codec.row_bytes(self.dim);
        if codes.len() != t * rb {
            return Err(Error::Shape(format!(
                "codes hold {} bytes; {t} tokens of {rb} bytes need {}",
                codes.len(),
                t * rb
            )));
        }
        match (aux, self.codec.has_aux()) {
            (Some(a), true) if a.len() == t => {}
            (None, false) => {}
            (a, _) => {
                return Err(Error::Shape(format!(
                    "{} per-token words for {t} tokens of a {} corpus",
                    a.map_or(0, <[u32]>::len),
                    self.codec.name()
                )));
            }
        }
        let (base, docs) = (self.num_tokens(), self.offsets.len());
        self.codes.owned().extend_from_slice(codes);
        if let (Some(w), Some(a)) = (&mut self.aux, aux) {
            w.owned().extend_from_slice(a);
        }
        self.offsets.extend(offsets[1..].iter().map(|&o| base + o));
        if let Err(e) = self.check_codes_from(base, None, true) {
            self.truncate_docs(docs - 1);
            return Err(e);
        }
        Ok(())
    }

    /// Keep the first `docs` documents (a rollback of [`append`](Self::append)).
    pub(crate) fn truncate_docs(&mut self, docs: usize) {
        if docs >= self.len() {
            return;
        }
        let rows = self.offsets[docs];
        let rb = self.codec.row_bytes(self.dim);
        self.codes.owned().truncate(rows * rb);
        if let Some(w) = &mut self.aux {
            w.owned().truncate(rows);
        }
        self.offsets.truncate(docs + 1);
    }

    /// Attach one id per document (non-empty, no whitespace, unique).
    pub fn with_doc_ids(mut self, ids: Vec<String>) -> Result<Self> {
        check_ids(&ids, self.len())?;
        self.doc_ids = Some(ids);
        Ok(self)
    }

    /// Scan every value a decode reads (ids, scales and, for fp8, each code for NaN), even when
    /// the file records that its codes were scanned when written.
    pub fn check_finite(&self) -> Result<()> {
        self.check_codes(None, true)
    }

    /// Record the depth `k'` of exact reranking for this corpus (kept in its file).
    pub fn with_rerank_k(mut self, k: usize) -> Result<Self> {
        if k == 0 {
            return Err(Error::Argument("rerank k' must be at least 1".into()));
        }
        self.rerank_k = Some(k);
        Ok(self)
    }

    /// The rerank depth `k'` recorded with this corpus, if any.
    pub fn rerank_k(&self) -> Option<usize> {
        self.rerank_k
    }

    pub fn codec(&self) -> &Codec {
        &self.codec
    }
    /// Number of documents N.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    /// Never true: a corpus holds at least one document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Total number of tokens T.
    pub fn num_tokens(&self) -> usize {
        *self.offsets.last().unwrap_or(&0)
    }
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }
    /// Number of tokens of document `j` (panics if `j >= len()`).
    pub fn doc_len(&self, j: usize) -> usize {
        self.offsets[j + 1] - self.offsets[j]
    }
    pub fn max_doc_len(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }
    pub fn doc_ids(&self) -> Option<&[String]> {
        self.doc_ids.as_deref()
    }
    /// Whether the codes are memory-mapped from a file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.codes, Bytes::Mapped { .. })
    }
    /// The per-token codes, `[T, row_bytes]` row-major (for a GPU upload).
    pub fn codes(&self) -> &[u8] {
        self.codes.get()
    }
    /// The per-token words (`[T]`: centroid ids, or f32 scale bits), `None` for PQ.
    pub fn aux(&self) -> Option<&[u32]> {
        self.aux.as_ref().map(Words::get)
    }
    /// Bytes of codes and per-token words (the codec's parameters aside).
    pub fn size_bytes(&self) -> usize {
        self.num_tokens() * self.codec.bytes_per_token(self.dim)
    }

    /// Decode document `j` (panics if `j >= len()`) into `out`, resized to `Nd × d` f32.
    pub fn decode_doc_into(&self, j: usize, out: &mut Vec<f32>) {
        let rows = self.offsets[j]..self.offsets[j + 1];
        self.decode_rows(rows, out);
    }

    /// Decode token rows `rows` into `out` (resized to `rows.len() × d`).
    pub(crate) fn decode_rows(&self, rows: std::ops::Range<usize>, out: &mut Vec<f32>) {
        let d = self.dim;
        let rb = self.codec.row_bytes(d);
        out.resize(rows.len() * d, 0.0);
        let codes = &self.codes.get()[rows.start * rb..rows.end * rb];
        let aux = self.aux.as_ref().map(|a| &a.get()[rows.clone()]);
        let tokens = out.chunks_exact_mut(d).zip(codes.chunks_exact(rb));
        match &self.codec {
            Codec::Residual(r) => {
                for (i, (o, c)) in tokens.enumerate() {
                    r.decode_token(aux.map_or(0, |a| a[i]), c, o);
                }
            }
            Codec::Pq(p) => tokens.for_each(|(o, c)| p.decode_token(c, o)),
            Codec::Int8 => {
                for (i, (o, c)) in tokens.enumerate() {
                    int8::decode_token(c, f32::from_bits(aux.map_or(0, |a| a[i])), o);
                }
            }
            Codec::Fp8 => {
                let table = self.fp8_table.as_deref().unwrap_or(&[0.0; 256]);
                for (i, (o, c)) in tokens.enumerate() {
                    fp8::decode_token(c, f32::from_bits(aux.map_or(0, |a| a[i])), o, table);
                }
            }
        }
    }

    /// Every token decoded, as an f32 exact corpus (with the same ids): the decoding
    /// reference compressed scoring is tested against.
    pub fn decode(&self) -> Result<Corpus> {
        let d = self.dim;
        let t = self.num_tokens();
        let mut all = Vec::new();
        all.try_reserve_exact(t * d).map_err(|_| {
            Error::OutOfMemory(format!("{} MB of decoded tokens", t * d * 4 / 1_000_000))
        })?;
        all.resize(t * d, 0.0f32);
        all.par_chunks_mut(4096 * d)
            .enumerate()
            .for_each_init(Vec::new, |buf, (b, dst)| {
                let start = b * 4096;
                self.decode_rows(start..start + dst.len() / d, buf);
                dst.copy_from_slice(buf);
            });
        let c = Corpus::new(OwnedElements::F32(all), d, self.offsets.clone())?;
        match &self.doc_ids {
            Some(ids) => c.with_doc_ids(ids.clone()),
            None => Ok(c),
        }
    }
}

impl CodecSpec {
    /// Check the options against the corpus's `dim`, before any work.
    pub fn check(&self, dim: usize) -> Result<()> {
        match self {
            CodecSpec::Residual(o) if !matches!(o.nbits, 1 | 2 | 4) => Err(Error::Argument(
                format!("residual codec: nbits must be 1, 2 or 4, got {}", o.nbits),
            )),
            CodecSpec::Residual(o) if o.centroids == Some(0) => Err(Error::Argument(
                "residual codec: centroids must be at least 1".into(),
            )),
            CodecSpec::Pq(o) if o.m == 0 || !dim.is_multiple_of(o.m) => Err(Error::Argument(
                format!("product quantization: M = {} must divide d = {dim}", o.m),
            )),
            _ => Ok(()),
        }
    }
}

/// An error naming the first token of `corpus` (its tokens widened to f32: `tokens`) whose
/// norm is not 1 (within 0.02): the residual codec reconstructs unit vectors only.
pub(crate) fn check_unit(corpus: &Corpus, tokens: &[f32]) -> Result<()> {
    check_unit_from(corpus, tokens, 0)
}

/// [`check_unit`] of rows `first..` of the corpus's tokens, given as `tokens`.
pub(crate) fn check_unit_from(corpus: &Corpus, tokens: &[f32], first: usize) -> Result<()> {
    match tokens
        .par_chunks_exact(corpus.dim())
        .map(|x| x.iter().map(|v| v * v).sum::<f32>().sqrt())
        .enumerate()
        .find_first(|(_, n)| (n - 1.0).abs() > 0.02)
    {
        Some((row, norm)) => Err(not_unit(corpus, first + row, norm)),
        None => Ok(()),
    }
}

/// The error of a token (`row` of the corpus's tokens) that the residual codec cannot take:
/// its norm is not 1.
pub(crate) fn not_unit(corpus: &Corpus, row: usize, norm: f32) -> Error {
    let j = corpus.offsets().partition_point(|&o| o <= row) - 1;
    Error::Argument(format!(
        "the residual codec (PLAID) reconstructs unit vectors, but token {} of document {j} has norm {norm}; normalize the tokens first (`corpus compress --normalize`, `compress(..., normalize=True)` in Python)",
        row - corpus.offsets()[j]
    ))
}

/// Compress an exact corpus with `spec`, training the codec on its tokens (seeded: the same
/// corpus, spec and seed give the same file). The residual codec needs L2-normalized tokens
/// (it reconstructs unit vectors, as PLAID does). `progress` is told each stage's advance.
pub fn compress(
    corpus: &Corpus,
    spec: &CodecSpec,
    seed: u64,
    progress: Progress<'_>,
) -> Result<CompressedCorpus> {
    let d = corpus.dim();
    let t = corpus.num_tokens();
    spec.check(d)?;
    if corpus.num_tokens() == 0 {
        return Err(Error::Argument(
            "compress: the corpus has no tokens to train a codec on".into(),
        ));
    }
    corpus.check_finite()?;
    // PQ, int8 and fp8 take the corpus as f32 rows in memory; the residual codec reads through.
    let (codec, codes, aux) = match spec {
        CodecSpec::Residual(opts) => {
            let (r, codes, ids) = residual::compress(corpus, opts, seed, progress)?;
            (Codec::Residual(r), codes, Some(ids))
        }
        CodecSpec::Pq(opts) => {
            let tokens = corpus.tokens().to_f32_vec();
            let p = PqCodec::train(&tokens, d, opts, seed, progress)?;
            progress("encode", 0, t);
            let codes = p.encode(&tokens);
            progress("encode", t, t);
            (Codec::Pq(p), codes, None)
        }
        CodecSpec::Int8 | CodecSpec::Fp8 => {
            let tokens = corpus.tokens().to_f32_vec();
            let fp = matches!(spec, CodecSpec::Fp8);
            let mut codes = vec![0u8; t * d];
            let mut scales = vec![0u32; t];
            codes
                .par_chunks_mut(d)
                .zip(scales.par_iter_mut())
                .zip(tokens.par_chunks_exact(d))
                .for_each(|((c, s), x)| {
                    let scale = if fp {
                        fp8::encode_token(x, c)
                    } else {
                        int8::encode_token(x, c)
                    };
                    *s = scale.to_bits();
                });
            progress("encode", t, t);
            (
                if fp { Codec::Fp8 } else { Codec::Int8 },
                codes,
                Some(scales),
            )
        }
    };
    CompressedCorpus::of(corpus, codec, codes, aux)
}

//! The compressed corpus file: a safetensors file like the exact corpus's (`offsets` `[N + 1]`
//! I64, optional `doc_ids` U8), with metadata `format` = `tilemaxsim.compressed`, `version` =
//! `1`, `codec` and `dim`, and per codec:
//! - `residual` (metadata `nbits`): `centroids` `[K, d]` F16, `bucket_cutoffs` `[2^nbits − 1]`
//!   F32, `bucket_weights` `[2^nbits]` F32, `codes` `[T]` I32 (centroid ids), `residuals`
//!   `[T, ⌈d·nbits/8⌉]` U8 (PLAID's names and bit packing);
//! - `pq` (metadata `m`): `pq_codebooks` `[M, 256, d/M]` F32, `codes` `[T, M]` U8;
//! - `int8`: `codes` `[T, d]` I8, `scales` `[T]` F32;
//! - `fp8`: `codes` `[T, d]` F8_E4M3, `scales` `[T]` F32 (`values` = `finite` when the codes
//!   were scanned for NaN before writing).
//!
//! Optional metadata `rerank_k`: the depth of exact reranking chosen at compression, the
//! default of searches that rerank the file.
//!
//! Opening memory-maps the file; the per-token arrays stay in the map (ids and scales are
//! copied only when misaligned). Every shape is checked against the others and the metadata,
//! centroid ids against K and scales for finiteness, always (a bad id would index out of
//! bounds); fp8 NaN codes are scanned unless [`OpenOptions`] turns value checks off. Saving
//! writes a temporary file and renames it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use half::f16;
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype as StDtype, TensorView};

use super::{Bytes, Codec, CompressedCorpus, PqCodec, ResidualCodec, Words};
use crate::corpus::format::{
    DOC_IDS, Durable, Filling, Layout, OFFSETS, Parts, le_words, map_file, parse, read_layout,
    write_parts_atomically,
};
use crate::corpus::{FiniteCheck, OpenOptions};
use crate::error::{Error, Result};

const FORMAT: (&str, &str) = ("format", "tilemaxsim.compressed");
const VERSION: (&str, &str) = ("version", "1");
const VALUES_FINITE: (&str, &str) = ("values", "finite");
/// Optional metadata: the rerank depth k' chosen at compression.
const RERANK_K: &str = "rerank_k";

/// Whether `path` is a compressed corpus file (its safetensors metadata says so). False for
/// anything unreadable: the exact reader then gives the error.
pub fn is_compressed_file(path: impl AsRef<Path>) -> bool {
    let Ok(map) = map_file(path.as_ref()) else {
        return false;
    };
    SafeTensors::read_metadata(&map).is_ok_and(|(_, h)| {
        h.metadata()
            .as_ref()
            .is_some_and(|m| m.get(FORMAT.0).map(String::as_str) == Some(FORMAT.1))
    })
}

impl OpenOptions {
    /// Open a compressed corpus file with these options, memory-mapped.
    pub fn open_compressed(&self, path: impl AsRef<Path>) -> Result<CompressedCorpus> {
        let path = path.as_ref();
        let mut c = open_structure(path)?;
        // Only the fp8 NaN scan is optional (and skipped when the file records one); ids and
        // scales are always checked, since a bad one would index out of bounds or poison scores.
        let scan = self.checks_finite()
            && matches!(c.codec, Codec::Fp8)
            && c.finite == FiniteCheck::NotChecked;
        c.check_codes(Some(path), scan)
            .map_err(|e| Error::format(path, e.to_string()))?;
        if scan {
            c.finite = FiniteCheck::Scanned;
        }
        Ok(c)
    }
}

impl CompressedCorpus {
    /// Open a compressed corpus file, memory-mapped, checking its structure and values.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        OpenOptions::new().open_compressed(path)
    }

    /// Write to `path` (atomically: a temporary file renamed into place).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        save(self, path.as_ref(), Durable::No)
    }

    /// [`CompressedCorpus::save`], on disk (fsync) when this returns.
    pub(crate) fn save_durably(&self, path: &Path) -> Result<()> {
        save(self, path, Durable::Yes)
    }

    /// How the fp8 codes are known to hold no NaN (other codecs: `NotChecked`).
    pub fn finite_check(&self) -> FiniteCheck {
        self.finite
    }
}

fn tensor<'a>(
    path: &Path,
    st: &'a SafeTensors<'a>,
    name: &str,
    codec: &str,
) -> Result<TensorView<'a>> {
    st.tensor(name).map_err(|_| {
        Error::format(
            path,
            format!("the {codec} codec needs tensor `{name}`; it is missing (truncated or written by another tool?)"),
        )
    })
}

fn expect(
    path: &Path,
    t: &TensorView<'_>,
    name: &str,
    dtype: StDtype,
    shape: &[usize],
) -> Result<()> {
    if t.dtype() != dtype || t.shape() != shape {
        return Err(Error::format(
            path,
            format!(
                "`{name}` is {:?} {:?}, expected {dtype:?} {shape:?}",
                t.dtype(),
                t.shape()
            ),
        ));
    }
    Ok(())
}

fn meta_usize(path: &Path, meta: &HashMap<String, String>, key: &str) -> Result<usize> {
    let v = meta
        .get(key)
        .ok_or_else(|| Error::format(path, format!("metadata `{key}` is missing")))?;
    v.parse()
        .map_err(|_| Error::format(path, format!("metadata `{key}` = {v:?} is not a count")))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("chunk of 4")))
        .collect()
}

/// The tensor's bytes as 32-bit words: borrowed from the map when 4-byte aligned.
fn words(map: &Arc<memmap2::Mmap>, data: &[u8]) -> Words {
    let start = data.as_ptr() as usize - map.as_ptr() as usize;
    if (data.as_ptr() as usize).is_multiple_of(4) {
        Words::Mapped {
            map: map.clone(),
            start,
            len: data.len() / 4,
        }
    } else {
        Words::Owned(
            data.chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("chunk of 4")))
                .collect(),
        )
    }
}

fn open_structure(path: &Path) -> Result<CompressedCorpus> {
    let map = Arc::new(map_file(path)?);
    let st = parse(path, &map)?;
    let Layout {
        offsets,
        doc_ids,
        meta,
    } = read_layout(path, &map)?;
    if meta.get(FORMAT.0).map(String::as_str) != Some(FORMAT.1) {
        return Err(Error::format(
            path,
            "not a compressed corpus (metadata `format` is not `tilemaxsim.compressed`); \
             `tilemaxsim corpus compress` writes one",
        ));
    }
    if meta.get(VERSION.0).map(String::as_str) != Some(VERSION.1) {
        return Err(Error::format(
            path,
            format!(
                "compressed corpus version {:?}; this build reads version 1",
                meta.get(VERSION.0)
            ),
        ));
    }
    let codec_name = meta
        .get("codec")
        .ok_or_else(|| Error::format(path, "metadata `codec` is missing"))?
        .clone();
    let dim = meta_usize(path, &meta, "dim")?;
    if dim == 0 {
        return Err(Error::format(path, "metadata `dim` is 0"));
    }
    let t = *offsets.last().unwrap_or(&0);
    let codes_t = tensor(path, &st, "codes", &codec_name)?;
    let codes_bytes = |data: &[u8]| Bytes::Mapped {
        map: map.clone(),
        start: data.as_ptr() as usize - map.as_ptr() as usize,
        len: data.len(),
    };
    let (codec, codes, aux) = match codec_name.as_str() {
        "residual" => {
            let nbits = meta_usize(path, &meta, "nbits")?;
            if !matches!(nbits, 1 | 2 | 4) {
                return Err(Error::format(
                    path,
                    format!("metadata `nbits` = {nbits}; expected 1, 2 or 4"),
                ));
            }
            let buckets = 1usize << nbits;
            let cen = tensor(path, &st, "centroids", &codec_name)?;
            let k = match cen.shape() {
                [k, dd] if *dd == dim && *k > 0 => *k,
                s => {
                    return Err(Error::format(
                        path,
                        format!("`centroids` has shape {s:?}, expected [K, {dim}]"),
                    ));
                }
            };
            expect(path, &cen, "centroids", StDtype::F16, &[k, dim])?;
            let cut = tensor(path, &st, "bucket_cutoffs", &codec_name)?;
            expect(path, &cut, "bucket_cutoffs", StDtype::F32, &[buckets - 1])?;
            let wts = tensor(path, &st, "bucket_weights", &codec_name)?;
            expect(path, &wts, "bucket_weights", StDtype::F32, &[buckets])?;
            let res = tensor(path, &st, "residuals", &codec_name)?;
            let rb = (dim * nbits).div_ceil(8);
            expect(path, &res, "residuals", StDtype::U8, &[t, rb])?;
            expect(path, &codes_t, "codes", StDtype::I32, &[t])?;
            let centroids = cen
                .data()
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes(c.try_into().expect("chunk of 2")))
                .collect();
            let r = ResidualCodec::new(
                nbits as u32,
                dim,
                centroids,
                f32s(cut.data()),
                f32s(wts.data()),
            )
            .map_err(|e| Error::format(path, e.to_string()))?;
            (
                Codec::Residual(r),
                codes_bytes(res.data()),
                Some(words(&map, codes_t.data())),
            )
        }
        "pq" => {
            let m = meta_usize(path, &meta, "m")?;
            if m == 0 || !dim.is_multiple_of(m) {
                return Err(Error::format(
                    path,
                    format!("metadata `m` = {m} does not divide d = {dim}"),
                ));
            }
            let books = tensor(path, &st, "pq_codebooks", &codec_name)?;
            expect(
                path,
                &books,
                "pq_codebooks",
                StDtype::F32,
                &[m, super::PQ_CENTROIDS, dim / m],
            )?;
            expect(path, &codes_t, "codes", StDtype::U8, &[t, m])?;
            let p = PqCodec::new(m, dim, f32s(books.data()))
                .map_err(|e| Error::format(path, e.to_string()))?;
            (Codec::Pq(p), codes_bytes(codes_t.data()), None)
        }
        "int8" | "fp8" => {
            let (codec, dt) = if codec_name == "int8" {
                (Codec::Int8, StDtype::I8)
            } else {
                (Codec::Fp8, StDtype::F8_E4M3)
            };
            expect(path, &codes_t, "codes", dt, &[t, dim])?;
            let sc = tensor(path, &st, "scales", &codec_name)?;
            expect(path, &sc, "scales", StDtype::F32, &[t])?;
            (
                codec,
                codes_bytes(codes_t.data()),
                Some(words(&map, sc.data())),
            )
        }
        other => {
            return Err(Error::format(
                path,
                format!("unknown codec {other:?} (this build reads residual, pq, int8, fp8)"),
            ));
        }
    };
    let mut c = CompressedCorpus::from_parts(codec, dim, offsets, codes, aux)
        .map_err(|e| Error::format(path, e.to_string()))?;
    c.doc_ids = doc_ids;
    if let Some(v) = meta.get(RERANK_K) {
        match v.parse::<usize>() {
            Ok(k) if k > 0 => c.rerank_k = Some(k),
            _ => {
                return Err(Error::format(
                    path,
                    format!("metadata `{RERANK_K}` = {v:?} is not a positive count"),
                ));
            }
        }
    }
    let recorded = [VALUES_FINITE]
        .iter()
        .all(|(k, v)| meta.get(*k).map(String::as_str) == Some(*v));
    if recorded && matches!(c.codec, Codec::Fp8) {
        c.finite = FiniteCheck::Recorded;
    }
    Ok(c)
}

fn le_bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn save(c: &CompressedCorpus, path: &Path, durable: Durable) -> Result<()> {
    // The per-token words (a word a token: the largest array after the codes).
    let aux_bytes = le_words(c.aux().unwrap_or_default());
    let file = FileParts {
        codec: &c.codec,
        dim: c.dim,
        offsets: &c.offsets,
        doc_ids: c.doc_ids.as_deref(),
        rerank_k: c.rerank_k,
        fp8_scanned: c.finite == FiniteCheck::Scanned,
        codes: vec![c.codes()],
        aux: vec![&aux_bytes],
    };
    write_parts(&file, path, durable)
}

/// What a compressed corpus file holds, its codes and per-token words (little-endian) in parts,
/// one after another: a corpus in memory, or the live documents of an index's files (a
/// compaction, which writes them from where they lie).
pub(crate) struct FileParts<'a> {
    pub codec: &'a Codec,
    pub dim: usize,
    pub offsets: &'a [usize],
    pub doc_ids: Option<&'a [String]>,
    pub rerank_k: Option<usize>,
    /// fp8: the codes were scanned for NaN encodings.
    pub fp8_scanned: bool,
    pub codes: Vec<&'a [u8]>,
    pub aux: Vec<&'a [u8]>,
}

/// Write `file` at `path` (atomically) in the format [`CompressedCorpus::open`] reads.
pub(crate) fn write_parts(file: &FileParts<'_>, path: &Path, durable: Durable) -> Result<()> {
    with_tensors(file, |tensors, meta| {
        write_parts_atomically(path, tensors, meta, durable)
    })
}

/// The names of a codec's two per-token tensors: the codes and, but for PQ, the words.
fn per_token_names(codec: &Codec) -> (&'static str, Option<&'static str>) {
    match codec {
        Codec::Residual(_) => ("residuals", Some("codes")),
        Codec::Pq(_) => ("codes", None),
        Codec::Int8 | Codec::Fp8 => ("codes", Some("scales")),
    }
}

/// A compressed corpus file written as its codes are made: laid out at `create` (header, offsets,
/// codec, doc ids), its codes and per-token words filled by `write` (a [`CodesSink`] of an
/// index build calls it per run of tokens), on disk and in place at `finish`. Its bytes are
/// those [`CompressedCorpus::save`] writes for the same corpus, but that fp8 codes are not
/// recorded as scanned for NaN (opening scans them); dropped unfinished, it leaves nothing at
/// its path.
///
/// [`CodesSink`]: super::CodesSink
pub(crate) struct CodesFile {
    filling: Filling,
    names: (&'static str, Option<&'static str>),
    row_bytes: usize,
}

impl CodesFile {
    /// Lay out at `path` the file of `corpus`'s documents compressed with `codec`.
    pub(crate) fn create(
        corpus: &crate::corpus::Corpus,
        codec: &Codec,
        path: &Path,
        durable: Durable,
    ) -> Result<Self> {
        let file = FileParts {
            codec,
            dim: corpus.dim(),
            offsets: corpus.offsets(),
            doc_ids: corpus.doc_ids(),
            rerank_k: None,
            fp8_scanned: false,
            codes: Vec::new(),
            aux: Vec::new(),
        };
        let names = per_token_names(codec);
        let later: Vec<&str> = [Some(names.0), names.1].into_iter().flatten().collect();
        let filling = with_tensors(&file, |tensors, meta| {
            Filling::create(path, tensors, &later, meta, durable)
        })?;
        Ok(CodesFile {
            filling,
            names,
            row_bytes: codec.row_bytes(corpus.dim()),
        })
    }

    /// The codes (rows of the codec's row bytes) and words of tokens `first..`.
    pub(crate) fn write(&self, first: usize, codes: &[u8], aux: &[u32]) -> Result<()> {
        self.filling
            .fill(self.names.0, first * self.row_bytes, codes)?;
        if let Some(words) = self.names.1 {
            self.filling.fill(words, first * 4, &le_words(aux))?;
        }
        Ok(())
    }

    /// Every token written: the file on disk (where durable) and renamed into place.
    pub(crate) fn finish(self) -> Result<()> {
        self.filling.finish()
    }
}

/// `f` given `file`'s tensors (in parts) and metadata, as [`CompressedCorpus::open`] reads them.
fn with_tensors<R>(
    file: &FileParts<'_>,
    f: impl FnOnce(Vec<(String, Parts<'_>)>, HashMap<String, String>) -> R,
) -> R {
    let (c, d) = (file, file.dim);
    let t = *c.offsets.last().unwrap_or(&0);
    let whole = |dtype, shape, bytes| Parts {
        dtype,
        shape,
        parts: vec![bytes],
    };
    let off: Vec<u8> = c
        .offsets
        .iter()
        .flat_map(|&o| (o as i64).to_le_bytes())
        .collect();
    let ids = c.doc_ids.map(|ids| ids.join("\n").into_bytes());
    let mut meta: HashMap<String, String> = [FORMAT, VERSION]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    meta.insert("codec".into(), c.codec.name().into());
    meta.insert("dim".into(), d.to_string());
    let params: Vec<(String, StDtype, Vec<usize>, Vec<u8>)> = match c.codec {
        Codec::Residual(r) => {
            meta.insert("nbits".into(), r.nbits().to_string());
            vec![
                (
                    "centroids".into(),
                    StDtype::F16,
                    vec![r.num_centroids(), d],
                    le_bytes(r.centroids(), |x| x.to_le_bytes().to_vec()),
                ),
                (
                    "bucket_cutoffs".into(),
                    StDtype::F32,
                    vec![r.bucket_cutoffs().len()],
                    le_bytes(r.bucket_cutoffs(), |x| x.to_le_bytes().to_vec()),
                ),
                (
                    "bucket_weights".into(),
                    StDtype::F32,
                    vec![r.bucket_weights().len()],
                    le_bytes(r.bucket_weights(), |x| x.to_le_bytes().to_vec()),
                ),
            ]
        }
        Codec::Pq(p) => {
            meta.insert("m".into(), p.m().to_string());
            vec![(
                "pq_codebooks".into(),
                StDtype::F32,
                vec![p.m(), super::PQ_CENTROIDS, d / p.m()],
                le_bytes(p.codebooks(), |x| x.to_le_bytes().to_vec()),
            )]
        }
        Codec::Int8 | Codec::Fp8 => Vec::new(),
    };
    if let Some(k) = c.rerank_k {
        meta.insert(RERANK_K.into(), k.to_string());
    }
    if matches!(c.codec, Codec::Fp8) && c.fp8_scanned {
        meta.insert(VALUES_FINITE.0.into(), VALUES_FINITE.1.into());
    }
    let rb = c.codec.row_bytes(d);
    let codes = |dtype, shape| Parts {
        dtype,
        shape,
        parts: c.codes.clone(),
    };
    let aux = |dtype| Parts {
        dtype,
        shape: vec![t],
        parts: c.aux.clone(),
    };
    let mut tensors = vec![(
        OFFSETS.to_string(),
        whole(StDtype::I64, vec![c.offsets.len()], &off),
    )];
    for (name, dt, shape, bytes) in &params {
        tensors.push((name.clone(), whole(*dt, shape.clone(), bytes)));
    }
    let (codes_name, words_name) = per_token_names(c.codec);
    let (codes_dtype, words_dtype) = match c.codec {
        Codec::Residual(_) | Codec::Pq(_) => (StDtype::U8, StDtype::I32),
        Codec::Int8 => (StDtype::I8, StDtype::F32),
        Codec::Fp8 => (StDtype::F8_E4M3, StDtype::F32),
    };
    tensors.push((codes_name.into(), codes(codes_dtype, vec![t, rb])));
    if let Some(name) = words_name {
        tensors.push((name.into(), aux(words_dtype)));
    }
    if let Some(ids) = &ids {
        tensors.push((
            DOC_IDS.to_string(),
            whole(StDtype::U8, vec![ids.len()], ids),
        ));
    }
    f(tensors, meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{CodecSpec, PqOptions, ResidualOptions, compress};
    use crate::corpus::Corpus;

    /// A corpus of unit-norm tokens, documents of 1 to 9 tokens, with ids.
    fn corpus(d: usize) -> Corpus {
        let lengths: Vec<usize> = (0..40).map(|i| 1 + i * 7 % 9).collect();
        let t: usize = lengths.iter().sum();
        let mut x: Vec<f32> = (0..t * d)
            .map(|i| ((i * 2_654_435_761) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        for row in x.chunks_mut(d) {
            let n = row.iter().map(|v| v * v).sum::<f32>().sqrt();
            row.iter_mut().for_each(|v| *v /= n);
        }
        let ids = (0..lengths.len()).map(|i| format!("doc-{i}")).collect();
        Corpus::from_lengths(x, d, &lengths)
            .unwrap()
            .with_doc_ids(ids)
            .unwrap()
    }

    #[test]
    fn a_codes_file_written_in_runs_is_the_saved_file() {
        let d = 16;
        let c = corpus(d);
        let residual = ResidualOptions {
            centroids: Some(8),
            ..ResidualOptions::default()
        };
        let pq = PqOptions {
            m: 4,
            ..PqOptions::default()
        };
        let specs = [
            CodecSpec::Residual(residual),
            CodecSpec::Pq(pq),
            CodecSpec::Int8,
            CodecSpec::Fp8,
        ];
        let dir = tempfile::tempdir().unwrap();
        for spec in &specs {
            let z = compress(&c, spec, 3, &|_, _, _| {}).unwrap();
            let name = z.codec().name();
            let saved = dir.path().join(format!("{name}.saved"));
            z.save(&saved).unwrap();
            let streamed = dir.path().join(format!("{name}.streamed"));
            let file = CodesFile::create(&c, z.codec(), &streamed, Durable::Yes).unwrap();
            // Runs of uneven length, the last first.
            let (rb, t) = (z.codec().row_bytes(d), c.num_tokens());
            let aux = z.aux().unwrap_or_default();
            let words = |r: std::ops::Range<usize>| if aux.is_empty() { &[][..] } else { &aux[r] };
            let cuts = [0, 1, 30, 31, t];
            for w in cuts.windows(2).rev() {
                let r = w[0]..w[1];
                file.write(
                    r.start,
                    &z.codes()[r.start * rb..r.end * rb],
                    words(r.clone()),
                )
                .unwrap();
            }
            file.finish().unwrap();
            let (a, b) = (
                std::fs::read(&saved).unwrap(),
                std::fs::read(&streamed).unwrap(),
            );
            let opened = CompressedCorpus::open(&streamed).unwrap();
            if matches!(spec, CodecSpec::Fp8) {
                // The one difference: fp8 codes are not recorded scanned (opening scans them).
                assert_ne!(a, b);
                assert_eq!(opened.codes(), z.codes());
                assert_eq!(opened.aux(), z.aux());
                assert_eq!(opened.offsets(), z.offsets());
                assert_eq!(opened.doc_ids(), z.doc_ids());
            } else {
                assert!(
                    a == b,
                    "{name}: the streamed file differs from the saved one"
                );
            }
        }
    }
}

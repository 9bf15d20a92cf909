//! Import an existing PLAID index without re-encoding it: the residual codec's parameters and
//! every token's centroid id and packed residual are copied as they are (the bit packing is
//! the same), and the documents' lengths come from `doclens.{chunk}.json`.
//!
//! A fast-plaid index directory holds `metadata.json` (`num_chunks`, `nbits`), `centroids.npy`
//! `[K, d]` f16, `bucket_cutoffs.npy`, `bucket_weights.npy` f32, and per chunk
//! `{chunk}.codes.npy` `[n]` int64, `{chunk}.residuals.npy` `[n, d·nbits/8]` uint8 and
//! `doclens.{chunk}.json`. A colbert-ai index holds the same arrays as PyTorch pickles
//! (`centroids.pt`, `buckets.pt`, `{chunk}.codes.pt`, `{chunk}.residuals.pt`); those are read
//! through `torch_pt.rs`.

use std::path::{Path, PathBuf};

use half::f16;

use super::{Codec, CompressedCorpus, ResidualCodec};
use crate::corpus::format::map_file;
use crate::corpus::import::{npy_floats, npy_ints, open_npy};
use crate::corpus::offsets_from_lengths;
use crate::error::{Error, Result};
use crate::matrix::OwnedElements;

/// Which PLAID implementation wrote an index directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaidKind {
    FastPlaid,
    ColbertAi,
}

/// Recognize an index directory by its centroid file.
pub fn detect(dir: &Path) -> Result<PlaidKind> {
    if dir.join("centroids.npy").is_file() {
        Ok(PlaidKind::FastPlaid)
    } else if dir.join("centroids.pt").is_file() {
        Ok(PlaidKind::ColbertAi)
    } else {
        Err(Error::format(
            dir,
            "not a PLAID index: neither centroids.npy (fast-plaid) nor centroids.pt (colbert-ai) is there",
        ))
    }
}

fn read(path: &Path) -> Result<memmap2::Mmap> {
    if !path.is_file() {
        return Err(Error::format(path, "missing from the index directory"));
    }
    map_file(path)
}

fn json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::format(path, format!("not valid JSON: {e}")))
}

fn doclens(path: &Path) -> Result<Vec<usize>> {
    let v = json(path)?;
    let arr = v
        .as_array()
        .ok_or_else(|| Error::format(path, "expected a JSON list of document lengths"))?;
    arr.iter()
        .enumerate()
        .map(|(i, x)| match x.as_u64() {
            Some(n) if n > 0 => Ok(n as usize),
            _ => Err(Error::format(
                path,
                format!("document {i}'s length is {x}; every document needs ≥ 1 token"),
            )),
        })
        .collect()
}

/// The number of chunks: `metadata.json`'s `num_chunks`, else the `doclens.*.json` count.
fn num_chunks(dir: &Path) -> Result<usize> {
    let meta = dir.join("metadata.json");
    if meta.is_file()
        && let Some(n) = json(&meta)?.get("num_chunks").and_then(|x| x.as_u64())
    {
        return Ok(n as usize);
    }
    let mut n = 0;
    while dir.join(format!("doclens.{n}.json")).is_file() {
        n += 1;
    }
    if n == 0 {
        return Err(Error::format(
            dir,
            "no doclens.0.json: not a complete PLAID index",
        ));
    }
    Ok(n)
}

/// `nbits` from `metadata.json` (fast-plaid: top level; colbert-ai: under `config`) or `plan.json`.
fn nbits_of(dir: &Path) -> Result<u32> {
    for name in ["metadata.json", "plan.json"] {
        let p = dir.join(name);
        if p.is_file() {
            let v = json(&p)?;
            let n = v
                .get("nbits")
                .or_else(|| v.get("config").and_then(|c| c.get("nbits")))
                .and_then(|x| x.as_u64());
            if let Some(n) = n {
                return Ok(n as u32);
            }
        }
    }
    Err(Error::format(
        dir,
        "nbits not found in metadata.json or plan.json",
    ))
}

/// Import a PLAID index directory (fast-plaid or colbert-ai) as a residual-coded corpus.
pub fn import_plaid(dir: impl AsRef<Path>) -> Result<CompressedCorpus> {
    let dir = dir.as_ref();
    let kind = detect(dir)?;
    let nbits = nbits_of(dir)?;
    let chunks = num_chunks(dir)?;
    let (centroids, dim, cutoffs, weights) = match kind {
        PlaidKind::FastPlaid => {
            let p = dir.join("centroids.npy");
            let m = read(&p)?;
            let npy = open_npy(&p, &m)?;
            let dim = match npy.shape() {
                &[_, d] if d > 0 => d as usize,
                s => {
                    return Err(Error::format(
                        &p,
                        format!("expected [K, d], found shape {s:?}"),
                    ));
                }
            };
            let centroids = match npy_floats(&p, npy)? {
                OwnedElements::F16(v) => v,
                other => {
                    let e = other.as_elements();
                    (0..e.len()).map(|i| f16::from_f32(e.get_f32(i))).collect()
                }
            };
            let vec1 = |name: &str| -> Result<Vec<f32>> {
                let p = dir.join(name);
                let m = read(&p)?;
                let e = npy_floats(&p, open_npy(&p, &m)?)?;
                let e = e.as_elements();
                Ok((0..e.len()).map(|i| e.get_f32(i)).collect())
            };
            (
                centroids,
                dim,
                vec1("bucket_cutoffs.npy")?,
                vec1("bucket_weights.npy")?,
            )
        }
        PlaidKind::ColbertAi => super::torch_pt::colbert_codec(dir)?,
    };
    let codec = ResidualCodec::new(nbits, dim, centroids, cutoffs, weights)
        .map_err(|e| Error::format(dir, e.to_string()))?;
    let rb = codec.row_bytes();
    if !(dim * nbits as usize).is_multiple_of(8) {
        return Err(Error::format(
            dir,
            format!("d = {dim} × nbits = {nbits} is not a whole number of bytes"),
        ));
    }
    let mut lengths = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    let mut codes: Vec<u8> = Vec::new();
    for c in 0..chunks {
        let lens = doclens(&dir.join(format!("doclens.{c}.json")))?;
        let n: usize = lens.iter().sum();
        let (chunk_ids, chunk_res, cp, rp): (Vec<i128>, Vec<u8>, PathBuf, PathBuf) = match kind {
            PlaidKind::FastPlaid => {
                let cp = dir.join(format!("{c}.codes.npy"));
                let rp = dir.join(format!("{c}.residuals.npy"));
                let ids = npy_ints(&cp, &read(&cp)?)?;
                let rm = read(&rp)?;
                let npy = open_npy(&rp, &rm)?;
                if npy.shape() != [n as u64, rb as u64] {
                    return Err(Error::format(
                        &rp,
                        format!(
                            "shape {:?}, expected [{n}, {rb}] (doclens.{c}.json sums to {n} tokens)",
                            npy.shape()
                        ),
                    ));
                }
                let res = npy.into_vec::<u8>().map_err(|e| {
                    Error::format(&rp, format!("cannot read array data: {e} (truncated?)"))
                })?;
                (ids, res, cp, rp)
            }
            PlaidKind::ColbertAi => {
                let (ids, res, cp, rp) = super::torch_pt::colbert_chunk(dir, c)?;
                (ids, res, cp, rp)
            }
        };
        if chunk_ids.len() != n {
            return Err(Error::format(
                &cp,
                format!(
                    "{} codes, but doclens.{c}.json sums to {n} tokens",
                    chunk_ids.len()
                ),
            ));
        }
        if chunk_res.len() != n * rb {
            return Err(Error::format(
                &rp,
                format!("{} bytes, expected {n} × {rb}", chunk_res.len()),
            ));
        }
        let k = codec.num_centroids();
        for (i, &id) in chunk_ids.iter().enumerate() {
            if id < 0 || id as usize >= k {
                return Err(Error::format(
                    &cp,
                    format!("code {i} is {id}, outside 0..{k}"),
                ));
            }
            ids.push(id as u32);
        }
        codes.extend_from_slice(&chunk_res);
        lengths.extend(lens);
    }
    let offsets = offsets_from_lengths(&lengths).map_err(|e| Error::format(dir, e.to_string()))?;
    CompressedCorpus::new(Codec::Residual(codec), dim, offsets, codes, Some(ids))
        .map_err(|e| Error::format(dir, e.to_string()))
}

//! Some documents of a compressed corpus as a corpus of their own, indexed from 0: a range
//! ([`CompressedCorpus::slice`], a GPU's shard) or a list ([`CompressedCorpus::gather`], the
//! candidates a streamed IVF search uploads to rescore).

use std::sync::Arc;

use rayon::prelude::*;

use super::{Bytes, CompressedCorpus, Words};
use crate::error::{Error, Result};

impl CompressedCorpus {
    /// Documents `range` as a compressed corpus of their own, indexed from 0 (a shard, as
    /// [`Corpus::slice`] makes one of an exact corpus): the codec, ids and what is known of the
    /// values kept; a memory-mapped corpus shares its map (no copy), an owned one is copied.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<Self> {
        crate::corpus::check_shard(&range, self.len())?;
        let (first, last) = (self.offsets[range.start], self.offsets[range.end]);
        let rb = self.codec.row_bytes(self.dim);
        let codes = match &self.codes {
            Bytes::Owned(v) => Bytes::Owned(v[first * rb..last * rb].to_vec()),
            Bytes::Mapped { map, start, .. } => Bytes::Mapped {
                map: Arc::clone(map),
                start: start + first * rb,
                len: (last - first) * rb,
            },
        };
        let aux = self.aux.as_ref().map(|a| match a {
            Words::Owned(v) => Words::Owned(v[first..last].to_vec()),
            // Still 4-byte aligned: whole words past an aligned start.
            Words::Mapped { map, start, .. } => Words::Mapped {
                map: Arc::clone(map),
                start: start + first * 4,
                len: last - first,
            },
        });
        Ok(CompressedCorpus {
            codec: self.codec.clone(),
            dim: self.dim,
            offsets: crate::corpus::shard_offsets(&self.offsets, range.clone()),
            doc_ids: self.doc_ids.as_ref().map(|ids| ids[range].to_vec()),
            codes,
            aux,
            finite: self.finite,
            fp8_table: self.fp8_table.clone(),
            rerank_k: self.rerank_k,
        })
    }

    /// Documents `docs` (in that order; each below `len()`, repeats allowed) copied into a
    /// compressed corpus of their own: document `i` of the result is document `docs[i]`. The
    /// codec, ids and what is known of the values are kept. The copy runs on every core.
    pub fn gather(&self, docs: &[usize]) -> Result<Self> {
        if docs.is_empty() {
            return Err(Error::Argument(
                "a corpus needs at least one document; none to gather".into(),
            ));
        }
        if let Some(&bad) = docs.iter().find(|&&j| j >= self.len()) {
            return Err(Error::Argument(format!(
                "document {bad} of a corpus of {}",
                self.len()
            )));
        }
        let mut offsets = Vec::with_capacity(docs.len() + 1);
        offsets.push(0);
        for &j in docs {
            offsets.push(offsets[offsets.len() - 1] + self.doc_len(j));
        }
        let rb = self.codec.row_bytes(self.dim);
        let codes = gather_rows(self.codes.get(), rb, &self.offsets, docs, &offsets);
        let aux = self
            .aux
            .as_ref()
            .map(|a| Words::Owned(gather_rows(a.get(), 1, &self.offsets, docs, &offsets)));
        Ok(CompressedCorpus {
            codec: self.codec.clone(),
            dim: self.dim,
            doc_ids: self
                .doc_ids
                .as_ref()
                .map(|ids| docs.iter().map(|&j| ids[j].clone()).collect()),
            offsets,
            codes: Bytes::Owned(codes),
            aux,
            finite: self.finite,
            fp8_table: self.fp8_table.clone(),
            rerank_k: self.rerank_k,
        })
    }
}

/// The rows (`width` elements a token) of documents `docs` of `src` (token offsets `from`),
/// one after another (`to`: the result's offsets), copied in parallel.
fn gather_rows<T: Copy + Default + Send + Sync>(
    src: &[T],
    width: usize,
    from: &[usize],
    docs: &[usize],
    to: &[usize],
) -> Vec<T> {
    let mut out = vec![T::default(); to[docs.len()] * width];
    let mut parts = Vec::with_capacity(docs.len());
    let mut rest = out.as_mut_slice();
    for i in 0..docs.len() {
        let (part, tail) = rest.split_at_mut((to[i + 1] - to[i]) * width);
        parts.push(part);
        rest = tail;
    }
    parts.into_par_iter().zip(docs).for_each(|(part, &j)| {
        part.copy_from_slice(&src[from[j] * width..from[j + 1] * width]);
    });
    out
}

#[cfg(test)]
mod tests {
    use crate::codec::{Codec, CompressedCorpus};

    /// int8 codes of documents of `lengths` tokens (d = 4), each token's bytes its document
    /// and position, its scale the token's number.
    fn corpus(lengths: &[usize]) -> CompressedCorpus {
        let mut offsets = vec![0];
        let (mut codes, mut aux) = (Vec::new(), Vec::new());
        for (j, &l) in lengths.iter().enumerate() {
            for t in 0..l {
                codes.extend([j as u8, t as u8, 7, 9]);
                aux.push((aux.len() as f32).to_bits());
            }
            offsets.push(offsets[j] + l);
        }
        let c = CompressedCorpus::new(Codec::Int8, 4, offsets, codes, Some(aux)).unwrap();
        let ids = (0..lengths.len()).map(|j| format!("d{j}")).collect();
        c.with_doc_ids(ids).unwrap()
    }

    #[test]
    fn gather_copies_each_listed_document_in_order() {
        let c = corpus(&[3, 1, 4, 5, 2]);
        let g = c.gather(&[3, 0, 2, 3, 4]).unwrap();
        assert_eq!(g.len(), 5);
        assert_eq!(g.offsets(), &[0, 5, 8, 12, 17, 19]);
        for (i, &j) in [3, 0, 2, 3, 4].iter().enumerate() {
            let (a, b) = (g.offsets()[i], g.offsets()[i + 1]);
            let (x, y) = (c.offsets()[j], c.offsets()[j + 1]);
            assert_eq!(&g.codes()[a * 4..b * 4], &c.codes()[x * 4..y * 4]);
            assert_eq!(&g.aux().unwrap()[a..b], &c.aux().unwrap()[x..y]);
            assert_eq!(g.doc_ids().unwrap()[i], format!("d{j}"));
        }
        assert!(c.gather(&[]).is_err());
        assert!(c.gather(&[1, 5]).is_err());
    }

    #[test]
    fn gather_of_a_range_equals_its_slice() {
        let c = corpus(&[2, 4, 1, 3]);
        let (g, s) = (c.gather(&[1, 2, 3]).unwrap(), c.slice(1..4).unwrap());
        assert_eq!(g.offsets(), s.offsets());
        assert_eq!(g.codes(), s.codes());
        assert_eq!(g.aux(), s.aux());
        assert_eq!(g.doc_ids(), s.doc_ids());
    }
}

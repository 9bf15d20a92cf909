//! Shared helpers of the index tests (`index_updates.rs`, `index_compact.rs`): a small seeded
//! index built on the CPU, its surviving documents, queries, and searches of it.

use super::*;
use tilemaxsim::codec::ResidualOptions;
use tilemaxsim::index::{BuildOptions, Index, IndexSearch, Source, build};
use tilemaxsim::{
    CompressedCorpus, Corpus, DType, Device, Hit, Matrix, OwnedElements, SearchOptions,
};

pub const DIM: usize = 40;
pub const K: usize = 8;

pub fn build_index(dir: &std::path::Path, docs: usize, seed: u64) -> Corpus {
    let mut r = rng(seed);
    let lengths: Vec<usize> = (0..docs)
        .map(|_| 1 + rand::Rng::random_range(&mut r, 0..30usize))
        .collect();
    let corpus = unit_corpus(seed, &lengths, DIM, DType::F16);
    let options = BuildOptions {
        residual: ResidualOptions {
            nbits: 2,
            centroids: Some(K),
            kmeans_iters: 2,
            ..Default::default()
        },
        device: Device::Cpu,
        ..Default::default()
    };
    build(Source::Exact(&corpus), None, dir, &options, &|_, _, _| {}).unwrap();
    corpus
}

/// Document `j` of `c` as a corpus of one document.
pub fn one(c: &Corpus, j: usize) -> Vec<f32> {
    let o = c.offsets();
    c.tokens().rows_range(o[j]..o[j + 1]).to_f32_vec()
}

/// The surviving documents' codes and exact tokens (in number order), and their numbers.
pub fn survivors(index: &Index) -> (CompressedCorpus, Corpus, Vec<usize>) {
    let live: Vec<usize> = (0..index.len()).filter(|&j| !index.is_deleted(j)).collect();
    let base = index.codes();
    let added = index.added();
    let rb = base.codec().row_bytes(DIM);
    let (mut codes, mut ids, mut exact, mut lengths) = (vec![], vec![], vec![], vec![]);
    for &j in &live {
        let (c, e, jj) = if j < base.len() {
            (base, index.exact().unwrap(), j)
        } else {
            let (c, e) = added.unwrap();
            (c, e.unwrap(), j - base.len())
        };
        let o = c.offsets();
        codes.extend_from_slice(&c.codes()[o[jj] * rb..o[jj + 1] * rb]);
        ids.extend_from_slice(&c.aux().unwrap()[o[jj]..o[jj + 1]]);
        exact.extend(one(e, jj));
        lengths.push(o[jj + 1] - o[jj]);
    }
    let offsets: Vec<usize> = std::iter::once(0)
        .chain(lengths.iter().scan(0, |t, &l| {
            *t += l;
            Some(*t)
        }))
        .collect();
    let c = CompressedCorpus::new(base.codec().clone(), DIM, offsets.clone(), codes, Some(ids))
        .unwrap();
    let e = Corpus::new(OwnedElements::from_f32(&exact, DType::F16), DIM, offsets).unwrap();
    (c, e, live)
}

/// f32 queries of `sizes` tokens (d = DIM).
pub fn queries(r: &mut rand::rngs::StdRng, sizes: &[usize]) -> Vec<OwnedElements> {
    sizes
        .iter()
        .map(|&nq| random_query(r, nq, DIM, DType::F32, 1.0))
        .collect()
}

pub fn views(owned: &[OwnedElements]) -> Vec<Matrix<'_>> {
    owned
        .iter()
        .map(|q| Matrix::new(q.as_elements(), DIM).unwrap())
        .collect()
}

/// Hits of an index whose document i is document `live[i]` of another, renumbered.
pub fn renumbered(hits: Vec<Vec<Hit>>, live: &[usize]) -> Vec<Vec<Hit>> {
    hits.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|h| Hit {
                    doc: live[h.doc],
                    ..h
                })
                .collect()
        })
        .collect()
}

pub fn search(index: &Index, how: IndexSearch, qs: &[Matrix<'_>], k: usize) -> Vec<Vec<Hit>> {
    let (s, _) = index
        .searcher(Device::Cpu, &how, &SearchOptions::default())
        .unwrap();
    s.search(qs, k).unwrap()
}

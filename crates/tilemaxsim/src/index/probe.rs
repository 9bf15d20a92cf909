//! IVF search over an index's residual codes, PLAID's stages on the CPU: per query, the
//! scores of every centroid against every query token (one matrix product); each token's
//! `nprobe` best centroids; the union of their IVF lists as candidates; each candidate's
//! centroid-interaction score `Σ_i max_t ⟨q_i, centroid(t)⟩` from those scores alone; then the
//! `ndocs` best candidates scored on their codes by a [`Scorer`] (the same scores exhaustive
//! search gives them), keeping the best `k`. With `nprobe` = K and `ndocs` ≥ N every document
//! is a candidate and rescored, so the hits are exhaustive search's.
//!
//! An index with added documents is searched as one: its segments (the build's codes and IVF,
//! then the added documents', encoded against the same centroids) give their candidates to one
//! centroid-interaction ranking, and only the `ndocs` best of all are rescored; deleted
//! documents are never candidates. So the hits are those of the live documents compacted into
//! one segment.

use rayon::prelude::*;

use super::ivf::Ivf;
use crate::codec::{Codec, CompressedCorpus};
use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::scorer::{Scorer, check_queries};
use crate::search::Searcher;
use crate::topk::{Hit, top_k_of};

/// The IVF stages' settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Centroids probed per query token (clamped to K).
    pub nprobe: usize,
    /// Candidates rescored on their codes, by their centroid-interaction scores (at least k).
    pub ndocs: usize,
}

impl Probe {
    /// The name of an IVF searcher with these settings, `how` it runs (`by cpu-avx512`).
    pub fn searcher_name(&self, how: &str) -> String {
        format!(
            "IVF (nprobe {}, top {} rescored) on residual codes {how}",
            self.nprobe, self.ndocs
        )
    }
}

/// One segment of an index: its residual codes and their IVF.
pub(crate) struct Segment<'a> {
    pub codes: &'a CompressedCorpus,
    pub ivf: &'a Ivf,
}

/// The IVF searcher of an index (see the module's text).
pub(crate) struct IvfSearch<'a> {
    /// The segments in order; their documents are numbered one after the other.
    segments: Vec<Segment<'a>>,
    /// Each segment's first document number, then the number of documents in all.
    starts: Vec<usize>,
    /// The deleted documents (numbered across the segments; past its end, none).
    deleted: &'a [bool],
    dim: usize,
    /// The residual centroids as f32, `[K][d]`.
    centroids: &'a [f32],
    probe: Probe,
    scorer: Box<dyn Scorer>,
}

impl<'a> IvfSearch<'a> {
    /// Each segment's codes must be residual with its IVF's centroids, all of them
    /// `centroids` (as f32); `scorer` scores residual codes in place. The documents `deleted`
    /// marks are left out.
    pub(crate) fn new(
        segments: Vec<Segment<'a>>,
        deleted: &'a [bool],
        centroids: &'a [f32],
        probe: Probe,
        scorer: Box<dyn Scorer>,
    ) -> Result<Self> {
        let Some(dim) = segments.first().map(|s| s.codes.dim()) else {
            return Err(Error::Argument("IVF search needs a segment".into()));
        };
        for Segment { codes, ivf } in &segments {
            let Codec::Residual(r) = codes.codec() else {
                return Err(Error::Argument(
                    "IVF search needs a residual (PLAID) corpus".into(),
                ));
            };
            if r.num_centroids() != ivf.num_centroids()
                || codes.aux().is_none()
                || codes.dim() != dim
                || centroids.len() != r.num_centroids() * dim
            {
                return Err(Error::Argument(format!(
                    "the IVF has {} centroids, the codes {} of d = {} ({} centroid values given)",
                    ivf.num_centroids(),
                    r.num_centroids(),
                    codes.dim(),
                    centroids.len()
                )));
            }
        }
        if probe.nprobe == 0 || probe.ndocs == 0 {
            return Err(Error::Argument(
                "nprobe and ndocs must be at least 1".into(),
            ));
        }
        if !scorer.scores_in_place() {
            return Err(Error::Argument(format!(
                "IVF search rescoring needs a scorer that reads codes in place, not {}",
                scorer.name()
            )));
        }
        let starts = crate::search::segment_starts(segments.iter().map(|s| s.codes.len()));
        Ok(IvfSearch {
            segments,
            starts,
            deleted,
            dim,
            centroids,
            probe,
            scorer,
        })
    }

    /// Every centroid's score against every query row: `[K][nq]`.
    fn centroid_scores(&self, q: &[f32], nq: usize) -> Vec<f32> {
        let d = self.dim;
        let k = self.centroids.len() / d;
        let mut cs = vec![0f32; k * nq];
        // Blocks of centroids in parallel; each a product [rows][d] x [d][nq].
        const ROWS: usize = 1024;
        cs.par_chunks_mut(ROWS * nq)
            .zip(self.centroids.par_chunks(ROWS * d))
            .for_each(|(out, cen)| {
                let m = cen.len() / d;
                // SAFETY: `cen` holds m x d floats (row stride d), `q` nq x d read as its
                // transpose d x nq (row stride 1, column stride d), `out` m x nq (row stride
                // nq); no overlap between the output and the inputs.
                unsafe {
                    matrixmultiply::sgemm(
                        m,
                        d,
                        nq,
                        1.0,
                        cen.as_ptr(),
                        d as isize,
                        1,
                        q.as_ptr(),
                        1,
                        d as isize,
                        0.0,
                        out.as_mut_ptr(),
                        nq as isize,
                        1,
                    );
                }
            });
        cs
    }

    /// Each row's `nprobe` best centroids.
    fn probed(&self, cs: &[f32], nq: usize) -> Vec<usize> {
        let k = self.centroids.len() / self.dim;
        let nprobe = self.probe.nprobe.min(k);
        (0..nq)
            .into_par_iter()
            .map(|i| {
                let mut col: Vec<(f32, usize)> = (0..k).map(|c| (cs[c * nq + i], c)).collect();
                // Best first; NaN last; ties to the lower centroid.
                let order = |a: &(f32, usize), b: &(f32, usize)| {
                    let key = |x: f32| if x.is_nan() { f32::NEG_INFINITY } else { x };
                    key(b.0).total_cmp(&key(a.0)).then(a.1.cmp(&b.1))
                };
                if nprobe < k {
                    col.select_nth_unstable_by(nprobe - 1, order);
                }
                col[..nprobe].iter().map(|&(_, c)| c).collect()
            })
            .collect::<Vec<Vec<usize>>>()
            .concat()
    }

    /// The candidates of one query in `segment`, ascending: the IVF lists of the `probed`
    /// centroids.
    fn candidates(segment: &Segment<'_>, probed: &[usize]) -> Vec<usize> {
        let n = segment.codes.len();
        let mut marks = vec![0u64; n.div_ceil(64)];
        for &c in probed {
            for &j in segment.ivf.list(c) {
                marks[j as usize / 64] |= 1 << (j % 64);
            }
        }
        marks
            .iter()
            .enumerate()
            .flat_map(|(w, &bits)| {
                (0..64)
                    .filter(move |b| bits >> b & 1 == 1)
                    .map(move |b| w * 64 + b)
            })
            .collect()
    }

    /// Each candidate's centroid-interaction score: `Σ_i max_t cs[id_t][i]`.
    fn interaction(codes: &CompressedCorpus, cs: &[f32], nq: usize, docs: &[usize]) -> Vec<f32> {
        let ids = codes.aux().unwrap_or_default();
        let offsets = codes.offsets();
        docs.par_iter()
            .map_init(
                || vec![f32::NEG_INFINITY; nq],
                |best, &j| {
                    best.fill(f32::NEG_INFINITY);
                    for &id in &ids[offsets[j]..offsets[j + 1]] {
                        let row = &cs[id as usize * nq..][..nq];
                        for (b, &s) in best.iter_mut().zip(row) {
                            *b = b.max(s);
                        }
                    }
                    best.iter().sum()
                },
            )
            .collect()
    }

    fn search_one(&self, query: Matrix<'_>, k: usize) -> Result<Vec<Hit>> {
        let nq = query.rows();
        let q = query.to_f32_vec();
        let cs = self.centroid_scores(&q, nq);
        let probed = self.probed(&cs, nq);
        // Every segment's candidates, numbered in the index, in one ranking.
        let mut approx = Vec::new();
        for (s, &first) in self.segments.iter().zip(&self.starts) {
            let mut docs = Self::candidates(s, &probed);
            docs.retain(|&j| !self.deleted.get(first + j).copied().unwrap_or(false));
            let scores = Self::interaction(s.codes, &cs, nq, &docs);
            approx.extend(scores.into_iter().zip(docs).map(|(score, j)| Hit {
                doc: first + j,
                score,
            }));
        }
        let keep = self.probe.ndocs.max(k);
        let mut best: Vec<usize> = top_k_of(approx, keep).into_iter().map(|h| h.doc).collect();
        best.sort_unstable();
        // The kept candidates rescored on their own segment's codes.
        let mut hits = Vec::with_capacity(best.len());
        for (s, w) in self.segments.iter().zip(self.starts.windows(2)) {
            let (lo, hi) = (
                best.partition_point(|&j| j < w[0]),
                best.partition_point(|&j| j < w[1]),
            );
            if lo == hi {
                continue;
            }
            let docs: Vec<usize> = best[lo..hi].iter().map(|&j| j - w[0]).collect();
            let scores = self.scorer.score_subset(query, s.codes, &docs)?;
            hits.extend(
                scores
                    .into_iter()
                    .zip(&best[lo..hi])
                    .map(|(score, &doc)| Hit { doc, score }),
            );
        }
        Ok(top_k_of(hits, k))
    }
}

impl Searcher for IvfSearch<'_> {
    fn name(&self) -> String {
        let segments = match self.segments.len() {
            1 => String::new(),
            n => format!("(the build's and the added documents, {n} segments as one) "),
        };
        self.probe
            .searcher_name(&format!("{segments}by {}", self.scorer.name()))
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        check_queries(queries, self.dim)?;
        queries.iter().map(|&q| self.search_one(q, k)).collect()
    }
}

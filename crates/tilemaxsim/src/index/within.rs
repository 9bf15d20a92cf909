//! Search within given documents (fast-plaid's and PyLate's `subset`): each query against its
//! own list of document numbers only, scored on their codes, then its best `rerank_k` exactly
//! where the index keeps the exact tokens. The work is the lists' (a filter's documents), not
//! the index's, so the codes are scored on the host; the exact stage runs on the device asked,
//! by a scorer made once a process for each device (a GPU scorer loads every kernel when
//! made: a search within, one request of a server, would pay that each time).

use super::*;
use crate::matrix::Matrix;
use crate::scorer::Scorer;
use crate::search::{reranked_by, segment_starts};
use crate::topk::{Hit, top_k_of};
use std::sync::{Arc, Mutex};

/// The first stage: each query's documents scored on their codes (`Docs::List` over each
/// segment), its best `k` kept.
struct Within<'a> {
    segments: Vec<&'a CompressedCorpus>,
    /// Each segment's first document number, then the number of documents in all.
    starts: Vec<usize>,
    /// Query i's documents: sorted, each once, none deleted.
    lists: Vec<Vec<usize>>,
    scorer: Arc<dyn Scorer>,
}

impl Searcher for Within<'_> {
    fn name(&self) -> String {
        format!(
            "{} on residual codes, within each query's documents",
            self.scorer.name()
        )
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if queries.len() != self.lists.len() {
            return Err(Error::Argument(format!(
                "{} queries for {} lists of documents",
                queries.len(),
                self.lists.len()
            )));
        }
        queries
            .iter()
            .zip(&self.lists)
            .map(|(q, docs)| {
                let mut hits = Vec::with_capacity(docs.len());
                for (codes, w) in self.segments.iter().zip(self.starts.windows(2)) {
                    // `docs` is sorted: each segment's documents are one slice of it.
                    let from = docs.partition_point(|&j| j < w[0]);
                    let to = docs.partition_point(|&j| j < w[1]);
                    if from == to {
                        continue;
                    }
                    let local: Vec<usize> = docs[from..to].iter().map(|&j| j - w[0]).collect();
                    let scores = self.scorer.score_subset(*q, *codes, &local)?;
                    hits.extend(
                        docs[from..to]
                            .iter()
                            .zip(scores)
                            .map(|(&doc, score)| Hit { doc, score }),
                    );
                }
                Ok(top_k_of(hits, k))
            })
            .collect()
    }
}

impl Index {
    /// The `k` best documents of query i among `lists[i]` (document numbers, as searches
    /// return them; repeats and deleted documents are ignored), best first: every listed
    /// document scored on its codes, then the best `how.rerank_k` (the index's default when
    /// `None`, 0: none) rescored exactly where the index keeps the exact tokens, on `device`.
    /// `how`'s IVF settings do not apply: nothing is left out of a list. Fewer than `k` hits
    /// where a list holds fewer live documents. A number past [`Index::len`] is an error.
    pub fn search_within(
        &self,
        queries: &[Matrix<'_>],
        lists: &[Vec<usize>],
        k: usize,
        how: &IndexSearch,
        device: Device,
    ) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        if lists.len() != queries.len() {
            return Err(Error::Argument(format!(
                "{} queries for {} lists of documents: give one list a query",
                queries.len(),
                lists.len()
            )));
        }
        crate::scorer::check_queries(queries, self.codes.dim())?;
        let lists = lists
            .iter()
            .map(|list| self.live_of(list))
            .collect::<Result<Vec<_>>>()?;
        let added = self.updates.added.as_ref();
        let mut segments = vec![&self.codes];
        segments.extend(added.map(|a| &a.codes));
        let scorer = shared_scorer(Device::Cpu, CodecKind::Residual)?;
        let first: Box<dyn Searcher + '_> = Box::new(Within {
            starts: segment_starts(segments.iter().map(|c| c.len())),
            segments,
            lists,
            scorer,
        });
        // The exact stage where every segment keeps its exact tokens.
        let options = self.stage_options(how, &SearchOptions::default());
        let exact = match options.rerank {
            Some(r) => self.exact_segments(r.exact)?.map(|e| (e, r.candidates)),
            None => None,
        };
        let searcher = match exact {
            Some((exact, candidates)) => reranked_by(
                first,
                exact,
                candidates,
                shared_scorer(device, CodecKind::Exact)?,
            ),
            None => first,
        };
        searcher.search(queries, k)
    }
}

/// The scorer of `codec` corpora on `device`, made at the first call and then shared by every
/// search within of the process.
fn shared_scorer(device: Device, codec: CodecKind) -> Result<Arc<dyn Scorer>> {
    type Made = Vec<((Device, CodecKind), Arc<dyn Scorer>)>;
    static MADE: Mutex<Made> = Mutex::new(Vec::new());
    // A poisoned lock only means a panic elsewhere; the list is still valid.
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = made.iter().find(|(key, _)| *key == (device, codec)) {
        return Ok(Arc::clone(s));
    }
    let scorer: Arc<dyn Scorer> = Arc::from(scorer_for(device, codec)?.0);
    made.push(((device, codec), Arc::clone(&scorer)));
    Ok(scorer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scorer_is_made_once_for_each_device_and_codec() {
        let a = shared_scorer(Device::Cpu, CodecKind::Exact).unwrap();
        let b = shared_scorer(Device::Cpu, CodecKind::Exact).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = shared_scorer(Device::Cpu, CodecKind::Residual).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        let r = shared_scorer(Device::Reference, CodecKind::Exact).unwrap();
        assert_eq!(r.name(), crate::ReferenceScorer.name());
        assert!(Arc::ptr_eq(
            &r,
            &shared_scorer(Device::Reference, CodecKind::Exact).unwrap()
        ));
    }
}

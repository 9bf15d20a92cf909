//! Search over an index with live updates: the build's documents and the added ones, each
//! searched as a segment of its own (IVF through its own lists, or exhaustively, then the exact
//! stage), deleted documents dropped, the two top-k merged. Each part is asked
//! for k plus its deleted documents, so the merged top-k is whole: a document of the global
//! top-k is among its part's best that many.

use crate::error::Result;
use crate::matrix::Matrix;
use crate::search::Searcher;
use crate::topk::{Hit, rank_order};

/// The build's searcher: the live searcher's own, or one a server keeps across updates.
pub(crate) enum Base<'a> {
    Owned(Box<dyn Searcher + 'a>),
    Shared(&'a dyn Searcher),
}

impl Base<'_> {
    fn get(&self) -> &dyn Searcher {
        match self {
            Base::Owned(s) => s.as_ref(),
            Base::Shared(s) => *s,
        }
    }
}

pub(crate) struct LiveSearch<'a> {
    pub base: Base<'a>,
    /// The added documents' searcher; their numbers start at `base_docs`.
    pub added: Option<Box<dyn Searcher + 'a>>,
    pub base_docs: usize,
    pub added_docs: usize,
    pub deleted: &'a [bool],
}

impl LiveSearch<'_> {
    fn deleted_in(&self, range: std::ops::Range<usize>) -> usize {
        self.deleted
            .get(range)
            .map_or(0, |d| d.iter().filter(|&&x| x).count())
    }
}

impl Searcher for LiveSearch<'_> {
    fn name(&self) -> String {
        match &self.added {
            Some(a) => format!(
                "{} + {} added documents ({})",
                self.base.get().name(),
                self.added_docs,
                a.name()
            ),
            None => self.base.get().name(),
        }
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        let live = |j: usize| !self.deleted.get(j).copied().unwrap_or(false);
        let base_k = (k + self.deleted_in(0..self.base_docs)).min(self.base_docs);
        let mut hits = if base_k > 0 {
            self.base.get().search(queries, base_k)?
        } else {
            vec![Vec::new(); queries.len()]
        };
        if let Some(added) = &self.added {
            let end = self.base_docs + self.added_docs;
            let added_k = (k + self.deleted_in(self.base_docs..end)).min(self.added_docs);
            for (all, more) in hits.iter_mut().zip(added.search(queries, added_k)?) {
                all.extend(more.into_iter().map(|h| Hit {
                    doc: h.doc + self.base_docs,
                    ..h
                }));
            }
        }
        for row in &mut hits {
            row.retain(|h| live(h.doc));
            row.sort_by(rank_order);
            row.truncate(k);
        }
        Ok(hits)
    }
}

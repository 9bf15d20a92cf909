//! Search over an index with live updates: the build's documents and the added ones, each
//! searched as a segment of its own (IVF through its own lists, or exhaustively, then the exact
//! stage), deleted documents dropped, the two top-k merged. (IVF search on the CPU does not
//! come here: `Index::joint_searcher` searches the segments as one, deleted documents never
//! candidates.) Each segment is asked for its k best
//! live documents: first for k grown by its share of deleted documents (and a margin), then for
//! four times as many while a query's hits hold fewer than k live ones though the segment gave
//! all that was asked. Exhaustively a segment's top-k' is the head of its whole ranking, so its
//! live top-k is exact once found; an IVF rescores max(ndocs, k') candidates, so a larger ask
//! can only add candidates. A document of the global top-k is in its segment's.

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

    fn is_deleted(&self, j: usize) -> bool {
        self.deleted.get(j).copied().unwrap_or(false)
    }

    /// The `k` best live documents of each query in the segment `s` (its documents numbered
    /// `first..first + n` in the index), as the module's text says.
    fn live_top(
        &self,
        s: &dyn Searcher,
        queries: &[Matrix<'_>],
        k: usize,
        first: usize,
        n: usize,
    ) -> Result<Vec<Vec<Hit>>> {
        let dead = self.deleted_in(first..first + n);
        let want = k.min(n - dead);
        if want == 0 {
            return Ok(vec![Vec::new(); queries.len()]);
        }
        let mut ask = if dead == 0 {
            want
        } else {
            let share = dead as f64 / n as f64;
            ((want as f64 / (1.0 - share) * 1.25).ceil() as usize + 8).min(n)
        };
        loop {
            let mut short = false;
            let rows = s
                .search(queries, ask)?
                .into_iter()
                .map(|row| {
                    let given = row.len();
                    let live: Vec<Hit> = row
                        .into_iter()
                        .map(|h| Hit {
                            doc: h.doc + first,
                            ..h
                        })
                        .filter(|h| !self.is_deleted(h.doc))
                        .collect();
                    short |= live.len() < want && given >= ask;
                    live
                })
                .collect();
            if !short || ask >= n {
                return Ok(rows);
            }
            ask = ask.saturating_mul(4).min(n);
        }
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
        let mut hits = self.live_top(self.base.get(), queries, k, 0, self.base_docs)?;
        if let Some(added) = &self.added {
            let more =
                self.live_top(added.as_ref(), queries, k, self.base_docs, self.added_docs)?;
            for (all, more) in hits.iter_mut().zip(more) {
                all.extend(more);
            }
        }
        for row in &mut hits {
            row.sort_by(rank_order);
            row.truncate(k);
        }
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A segment of `n` documents, document j scoring n − j for every query, that gives at most
    /// `cap` hits (as an IVF with a bounded number of candidates does) and records what it is
    /// asked for.
    struct Ranked {
        n: usize,
        cap: usize,
        asked: Mutex<Vec<usize>>,
    }

    impl Searcher for Ranked {
        fn name(&self) -> String {
            "ranked".into()
        }
        fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
            self.asked.lock().unwrap().push(k);
            let row: Vec<Hit> = (0..k.min(self.n).min(self.cap))
                .map(|j| Hit {
                    doc: j,
                    score: (self.n - j) as f32,
                })
                .collect();
            Ok(vec![row; queries.len()])
        }
    }

    fn search(n: usize, cap: usize, deleted: &[bool], k: usize) -> (Vec<usize>, Vec<usize>) {
        let base = Ranked {
            n,
            cap,
            asked: Mutex::new(Vec::new()),
        };
        let live = LiveSearch {
            base: Base::Shared(&base),
            added: None,
            base_docs: n,
            added_docs: 0,
            deleted,
        };
        let q = [1.0f32; 4];
        let m = Matrix::new(crate::Elements::F32(&q), 4).unwrap();
        let hits = live.search(&[m], k).unwrap();
        let docs = hits[0].iter().map(|h| h.doc).collect();
        drop(live);
        (docs, base.asked.into_inner().unwrap())
    }

    #[test]
    fn a_segment_is_asked_again_until_its_top_k_is_live() {
        // The best 50 of 100 deleted: the first ask (k grown by the deleted half) finds none
        // live, the next (four times as many) finds them.
        let deleted: Vec<bool> = (0..100).map(|j| j < 50).collect();
        let (docs, asked) = search(100, usize::MAX, &deleted, 5);
        assert_eq!(docs, vec![50, 51, 52, 53, 54]);
        assert_eq!(asked, vec![21, 84]);
        // Nothing deleted: asked for k alone.
        let (docs, asked) = search(100, usize::MAX, &[false; 100], 3);
        assert_eq!((docs, asked), (vec![0, 1, 2], vec![3]));
        // Every live one is wanted: asked for the whole segment once.
        let (docs, asked) = search(10, usize::MAX, &deleted[..10], 20);
        assert_eq!((docs, asked), (vec![], vec![]));
        let odd: Vec<bool> = (0..10).map(|j| j % 2 == 1).collect();
        let (docs, asked) = search(10, usize::MAX, &odd, 20);
        assert_eq!((docs, asked), (vec![0, 2, 4, 6, 8], vec![10]));
    }

    #[test]
    fn a_segment_that_gave_less_than_asked_is_not_asked_again() {
        // At most 10 hits (bounded candidates), the best 40 deleted: asked for 19, given 10,
        // none live; asking for more would give no more.
        let deleted: Vec<bool> = (0..100).map(|j| j < 40).collect();
        let (docs, asked) = search(100, 10, &deleted, 5);
        assert_eq!((docs, asked), (vec![], vec![19]));
        // At most 30: the first ask (19) was answered whole, so it is asked again (76), given
        // 30, none live, and left there.
        let (docs, asked) = search(100, 30, &deleted, 5);
        assert_eq!((docs, asked), (vec![], vec![19, 76]));
    }
}

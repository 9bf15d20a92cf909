//! Top-k selection with one deterministic order: score descending, then doc index ascending.
//! NaN scores (possible only from unvalidated corpora) sort after every number.

use std::cmp::Ordering;

/// One search result: a document's index in the corpus and its MaxSim score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub doc: usize,
    pub score: f32,
}

/// The ranking order: higher score first, ties to the lower document index, NaN last.
#[inline]
pub fn rank_order(a: &Hit, b: &Hit) -> Ordering {
    // `+ 0.0` folds -0.0 into +0.0 so the two zeros tie and fall back to the doc index.
    let key = |h: &Hit| {
        if h.score.is_nan() {
            f32::NEG_INFINITY
        } else {
            h.score + 0.0
        }
    };
    match (a.score.is_nan(), b.score.is_nan()) {
        (false, true) => return Ordering::Less,
        (true, false) => return Ordering::Greater,
        _ => {}
    }
    key(b).total_cmp(&key(a)).then(a.doc.cmp(&b.doc))
}

/// The `k` best of `hits`, sorted best first.
pub fn top_k_of(hits: impl IntoIterator<Item = Hit>, k: usize) -> Vec<Hit> {
    let mut out = Vec::new();
    merge_top_k(&mut out, hits, k);
    out
}

/// Merge `more` into the sorted top-k list `best`, keeping it the sorted top-k.
pub fn merge_top_k(best: &mut Vec<Hit>, more: impl IntoIterator<Item = Hit>, k: usize) {
    if k == 0 {
        best.clear();
        return;
    }
    shrink(best, k);
    // Candidates that cannot beat the current k-th are skipped; the rest are buffered up to
    // 2k and cut back to k, so the whole merge is linear in the number of candidates.
    let mut cutoff = (best.len() == k).then(|| best[k - 1]);
    let cap = k.max(16).saturating_mul(2);
    for h in more {
        if cutoff.is_some_and(|c| rank_order(&h, &c) != Ordering::Less) {
            continue;
        }
        best.push(h);
        if best.len() >= cap {
            shrink(best, k);
            cutoff = Some(best[k - 1]);
        }
    }
    shrink(best, k);
}

fn shrink(best: &mut Vec<Hit>, k: usize) {
    if best.len() > k {
        best.select_nth_unstable_by(k - 1, rank_order);
        best.truncate(k);
    }
    best.sort_unstable_by(rank_order);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(doc: usize, score: f32) -> Hit {
        Hit { doc, score }
    }

    #[test]
    fn ties_go_to_lower_index_and_nan_last() {
        let hits = vec![
            h(5, 1.0),
            h(2, 1.0),
            h(9, f32::NAN),
            h(7, 2.0),
            h(1, 1.0),
            h(3, -1.0),
        ];
        let top = top_k_of(hits.clone(), 4);
        let docs: Vec<_> = top.iter().map(|h| h.doc).collect();
        assert_eq!(docs, vec![7, 1, 2, 5]);
        let all = top_k_of(hits, 10);
        assert_eq!(all.last().map(|h| h.doc), Some(9));
        assert_eq!(all.len(), 6);
    }

    #[test]
    fn matches_full_sort_on_random_streams() {
        let mut state = 12345u64;
        for k in [1, 2, 7, 100] {
            let hits: Vec<Hit> = (0..1000)
                .map(|i| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    h(i, ((state >> 40) % 50) as f32)
                })
                .collect();
            let mut sorted = hits.clone();
            sorted.sort_by(rank_order);
            sorted.truncate(k);
            assert_eq!(top_k_of(hits.clone(), k), sorted);
            // Merging in pieces gives the same answer.
            let mut best = Vec::new();
            for chunk in hits.chunks(37) {
                merge_top_k(&mut best, chunk.iter().copied(), k);
            }
            assert_eq!(best, sorted);
        }
    }
}

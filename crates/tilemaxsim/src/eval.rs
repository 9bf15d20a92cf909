//! Retrieval quality of a TREC run against TREC qrels: nDCG@10, MRR@10, Recall@10/100/1000 and
//! MAP, with exactly the semantics of `trec_eval` (9.x, as `pytrec_eval` exposes it; the test
//! `tilemaxsim-cli/tests/eval.rs` compares every query with pytrec_eval to 1e-6).
//!
//! ```
//! use tilemaxsim::eval::{Qrels, Run, evaluate};
//!
//! let qrels = Qrels::parse("q1 0 a 2\nq1 0 b 0\n", "qrels.txt")?;
//! let run = Run::parse("q1 Q0 b 1 0.9 t\nq1 Q0 a 2 0.5 t\n", "run.trec")?;
//! let e = evaluate(&qrels, &run)?;
//! assert_eq!(e.per_query.len(), 1);
//! assert_eq!(e.mean.mrr_10, 0.5); // the relevant document `a` is second
//! # Ok::<(), tilemaxsim::Error>(())
//! ```
//!
//! What trec_eval does (`form_res_rels.c`, `m_ndcg_cut.c`, `m_recip_rank.c`, `m_recall.c`,
//! `m_map.c`), and so what this module does:
//!
//! - **Order.** The rank column is ignored. A query's documents are sorted by score, highest
//!   first; equal scores by document id, *descending* (byte order, `strcmp`). `-0` ties `0`.
//! - **Relevance.** Relevant means grade ≥ 1 (`relevance_level` 1). Grade 0 is judged
//!   non-relevant; a negative grade is trec_eval's "in the pool but unjudged": non-relevant, and
//!   left out of the ideal ranking. Documents without a qrels line are non-relevant.
//! - **nDCG@10** (`ndcg_cut_10`): gain = the grade itself (not 2^g − 1), discount log2(rank + 1);
//!   the ideal ranking holds all the query's positive grades in the qrels, retrieved or not.
//!   [`Metrics::ndcg_exp_10`] is the same with gain 2^g − 1, the convention of
//!   `shared/data/reference.py` (and of BENCHMARKS.md's Cranfield figure); trec_eval has no such
//!   measure.
//! - **MRR@10**: trec_eval's `recip_rank` on the run cut to its first 10 documents (in the order
//!   above): 1 / rank of the first relevant document within ranks 1..=10, else 0.
//! - **Recall@k** (`recall_k`): relevant documents in the first k / relevant documents in the
//!   qrels; 0 when the query has none.
//! - **MAP** (`map`): over the whole run, the sum of the precision at each relevant retrieved
//!   document, divided by the number of relevant documents in the qrels.
//! - **Queries.** A query is evaluated when it is in the run and has at least one qrels line, of
//!   any grade: this is the set of keys pytrec_eval returns. Run queries without qrels lines are
//!   skipped; judged queries missing from the run are ignored (trec_eval without `-c`). A query
//!   without relevant documents scores 0 on every measure and still counts. Means are plain
//!   means over the evaluated queries (trec_eval's `all` line; the mean of pytrec_eval's values).
//! - **Duplicates.** A document listed twice for one query in a run, or judged twice for one
//!   query, is an error, as in trec_eval (pytrec_eval takes dicts and never sees duplicates).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::Path;

use crate::{Error, Result};

/// Documents counted by the cut-off measures.
const CUTOFF: usize = 10;

/// Relevance judgments: the grade of each judged (query id, document id).
#[derive(Clone, Debug, Default)]
pub struct Qrels {
    grades: HashMap<String, HashMap<String, i64>>,
}

impl Qrels {
    /// Read a TREC qrels file: `qid iter docid grade` per line, whitespace separated, integer
    /// grades (negative allowed). Blank lines are skipped.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text, path)
    }

    /// Parse qrels text; `path` only names the input in errors.
    pub fn parse(text: &str, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let mut grades: HashMap<String, HashMap<String, i64>> = HashMap::new();
        for (line, fields) in records(text) {
            let err = |reason: String| Error::parse(path, line, reason);
            let [qid, _iter, doc, grade] = fields[..] else {
                return Err(err(format!(
                    "expected 4 fields `qid iter docid grade`, found {}",
                    fields.len()
                )));
            };
            let grade: i64 = grade
                .parse()
                .map_err(|_| err(format!("grade {grade:?} is not an integer")))?;
            let judged = grades.entry(qid.to_owned()).or_default();
            if judged.insert(doc.to_owned(), grade).is_some() {
                return Err(err(format!(
                    "document {doc} is judged twice for query {qid}"
                )));
            }
        }
        Ok(Qrels { grades })
    }

    /// Queries with at least one judgment.
    pub fn num_queries(&self) -> usize {
        self.grades.len()
    }

    /// The judgments of one query (document id → grade).
    pub fn query(&self, qid: &str) -> Option<&HashMap<String, i64>> {
        self.grades.get(qid)
    }
}

/// A run: each query's retrieved (document id, score), queries in file order.
#[derive(Clone, Debug, Default)]
pub struct Run {
    queries: Vec<(String, Vec<(String, f64)>)>,
}

impl Run {
    /// Read a TREC run file: `qid Q0 docid rank score tag` per line, whitespace separated.
    /// The `Q0`, rank and tag columns are not used; scores must be finite numbers.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text, path)
    }

    /// Parse run text; `path` only names the input in errors.
    pub fn parse(text: &str, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let mut queries: Vec<(String, Vec<(String, f64)>)> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut first_line: HashMap<(&str, &str), usize> = HashMap::new();
        for (line, fields) in records(text) {
            let err = |reason: String| Error::parse(path, line, reason);
            let [qid, _q0, doc, _rank, score, _tag] = fields[..] else {
                return Err(err(format!(
                    "expected 6 fields `qid Q0 docid rank score tag`, found {}",
                    fields.len()
                )));
            };
            let score: f64 = score
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite())
                .ok_or_else(|| err(format!("score {score:?} is not a finite number")))?;
            if let Some(first) = first_line.insert((qid, doc), line) {
                return Err(err(format!(
                    "document {doc} is listed twice for query {qid} (also on line {first})"
                )));
            }
            let i = *index.entry(qid).or_insert_with(|| {
                queries.push((qid.to_owned(), Vec::new()));
                queries.len() - 1
            });
            queries[i].1.push((doc.to_owned(), score));
        }
        Ok(Run { queries })
    }

    /// Each query id with its (document id, score) pairs as listed.
    pub fn queries(&self) -> &[(String, Vec<(String, f64)>)] {
        &self.queries
    }
}

/// The non-blank lines of `text`, numbered from 1, split on whitespace.
fn records(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split_whitespace().collect::<Vec<_>>()))
        .filter(|(_, fields)| !fields.is_empty())
}

/// The measures of one query, or their means.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Metrics {
    /// nDCG@10 with the grade as gain (trec_eval `ndcg_cut_10`).
    pub ndcg_10: f64,
    /// nDCG@10 with gain 2^grade − 1 (not a trec_eval measure; `reference.py`'s).
    pub ndcg_exp_10: f64,
    /// Reciprocal rank of the first relevant document in the top 10, else 0.
    pub mrr_10: f64,
    /// trec_eval `recall_10`.
    pub recall_10: f64,
    /// trec_eval `recall_100`.
    pub recall_100: f64,
    /// trec_eval `recall_1000`.
    pub recall_1000: f64,
    /// trec_eval `map` (average precision of one query).
    pub map: f64,
}

impl Metrics {
    /// (table label, JSON key, value) of every measure, in display order.
    pub fn named(&self) -> [(&'static str, &'static str, f64); 7] {
        [
            ("nDCG@10", "ndcg_10", self.ndcg_10),
            ("nDCGexp@10", "ndcg_exp_10", self.ndcg_exp_10),
            ("MRR@10", "mrr_10", self.mrr_10),
            ("R@10", "recall_10", self.recall_10),
            ("R@100", "recall_100", self.recall_100),
            ("R@1000", "recall_1000", self.recall_1000),
            ("MAP", "map", self.map),
        ]
    }

    /// The measures of one query: `docs` as listed in the run, `grades` its judgments.
    pub fn of_query(docs: &[(String, f64)], grades: &HashMap<String, i64>) -> Metrics {
        let mut ranked: Vec<&(String, f64)> = docs.iter().collect();
        ranked.sort_by(|a, b| {
            b.1.partial_cmp(&a.1)
                .unwrap_or(Ordering::Equal)
                .then_with(|| b.0.cmp(&a.0))
        });
        // The grade at each rank; unjudged and negative count as 0 (neither relevant nor gain).
        let got: Vec<i64> = ranked
            .iter()
            .map(|(doc, _)| grades.get(doc).copied().unwrap_or(0).max(0))
            .collect();
        let mut ideal: Vec<i64> = grades.values().copied().filter(|&g| g > 0).collect();
        ideal.sort_unstable_by(|a, b| b.cmp(a));
        let num_rel = ideal.len();

        let ndcg = |gain: fn(i64) -> f64| {
            let (dcg, idcg) = (dcg(&got, gain), dcg(&ideal, gain));
            if idcg > 0.0 { dcg / idcg } else { dcg }
        };
        let recall = |k: usize| match num_rel {
            0 => 0.0,
            n => got.iter().take(k).filter(|&&g| g > 0).count() as f64 / n as f64,
        };
        let mrr_10 = got
            .iter()
            .take(CUTOFF)
            .position(|&g| g > 0)
            .map_or(0.0, |i| 1.0 / (i + 1) as f64);
        let (mut hits, mut precision_sum) = (0usize, 0.0);
        for (i, _) in got.iter().enumerate().filter(|(_, g)| **g > 0) {
            hits += 1;
            precision_sum += hits as f64 / (i + 1) as f64;
        }
        Metrics {
            ndcg_10: ndcg(|g| g as f64),
            ndcg_exp_10: ndcg(|g| (g as f64).exp2() - 1.0),
            mrr_10,
            recall_10: recall(10),
            recall_100: recall(100),
            recall_1000: recall(1000),
            map: if hits > 0 {
                precision_sum / num_rel as f64
            } else {
                0.0
            },
        }
    }

    /// The mean of each measure over `all` (not empty).
    fn mean<'a>(all: impl Iterator<Item = &'a Metrics> + Clone) -> Metrics {
        let n = all.clone().count() as f64;
        let avg = |f: fn(&Metrics) -> f64| all.clone().map(f).sum::<f64>() / n;
        Metrics {
            ndcg_10: avg(|m| m.ndcg_10),
            ndcg_exp_10: avg(|m| m.ndcg_exp_10),
            mrr_10: avg(|m| m.mrr_10),
            recall_10: avg(|m| m.recall_10),
            recall_100: avg(|m| m.recall_100),
            recall_1000: avg(|m| m.recall_1000),
            map: avg(|m| m.map),
        }
    }
}

/// DCG of the first [`CUTOFF`] grades, discount log2(rank + 1), as trec_eval sums it.
fn dcg(grades: &[i64], gain: fn(i64) -> f64) -> f64 {
    let mut sum = 0.0;
    for (i, &g) in grades.iter().take(CUTOFF).enumerate() {
        if g > 0 {
            sum += gain(g) / ((i + 2) as f64).log2();
        }
    }
    sum
}

/// A run's evaluation.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Every evaluated query (in the run and in the qrels), in run order.
    pub per_query: Vec<(String, Metrics)>,
    /// The means over `per_query`.
    pub mean: Metrics,
    /// Run queries without any judgment: skipped.
    pub unjudged: Vec<String>,
    /// Judged queries that are not in the run: ignored, as by trec_eval without `-c`.
    pub missing: usize,
}

/// Evaluate `run` against `qrels`; an error when no run query is judged.
pub fn evaluate(qrels: &Qrels, run: &Run) -> Result<Evaluation> {
    let mut per_query = Vec::new();
    let mut unjudged = Vec::new();
    for (qid, docs) in run.queries() {
        match qrels.query(qid) {
            Some(grades) => per_query.push((qid.clone(), Metrics::of_query(docs, grades))),
            None => unjudged.push(qid.clone()),
        }
    }
    if per_query.is_empty() {
        return Err(Error::Argument(format!(
            "none of the run's {} queries has judgments in the qrels ({} queries): \
             do the query ids match?",
            run.queries().len(),
            qrels.num_queries()
        )));
    }
    let mean = Metrics::mean(per_query.iter().map(|(_, m)| m));
    let missing = qrels.num_queries() - per_query.len();
    Ok(Evaluation {
        per_query,
        mean,
        unjudged,
        missing,
    })
}

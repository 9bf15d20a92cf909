//! `index search --subset IDS` / `--subset-run RUN`: the documents each query is searched
//! within, read from a file of document ids (one a line: every query's) or from a TREC run
//! (`qid Q0 docid rank score tag`: each query's own, e.g. a first-stage run to rerank), and
//! turned into the index's document numbers. Ids are those the run files write (the build's
//! `--doc-ids`, else the numbers); an id the index does not hold is an error, naming it.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use tilemaxsim::index::Index;

/// Where each query's documents come from.
pub enum Subset {
    /// One list for every query.
    All(Vec<usize>),
    /// Each query id's own list; a query the run does not name has none (no hits).
    PerQuery(HashMap<String, Vec<usize>>),
}

impl Subset {
    /// The lists of a batch of queries, in their order.
    pub fn lists(&self, qids: &[String]) -> Vec<Vec<usize>> {
        match self {
            Subset::All(list) => vec![list.clone(); qids.len()],
            Subset::PerQuery(by) => qids
                .iter()
                .map(|q| by.get(q).cloned().unwrap_or_default())
                .collect(),
        }
    }

    /// A file of document ids, one a line (blank lines skipped).
    pub fn of_ids(path: &Path, index: &Index) -> Result<Self> {
        let text = read(path)?;
        let numbers = Numbers::of(index);
        let mut list = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let mut words = line.split_whitespace();
            let Some(id) = words.next() else { continue };
            if words.next().is_some() {
                bail!(
                    "{}, line {}: expected one document id, got {line:?} (a TREC run goes to --subset-run)",
                    path.display(),
                    i + 1
                );
            }
            list.push(numbers.get(id, path, i)?);
        }
        Ok(Subset::All(list))
    }

    /// A TREC run's documents for each query (its order and scores ignored).
    pub fn of_run(path: &Path, index: &Index) -> Result<Self> {
        let text = read(path)?;
        let numbers = Numbers::of(index);
        let mut by: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                [] => continue,
                [qid, _, doc, _, _, _] => {
                    let j = numbers.get(doc, path, i)?;
                    by.entry(qid.to_string()).or_default().push(j);
                }
                _ => bail!(
                    "{}, line {}: expected a TREC run line (qid Q0 docid rank score tag), got {line:?}",
                    path.display(),
                    i + 1
                ),
            }
        }
        Ok(Subset::PerQuery(by))
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Document id to number, every document the index numbers (deleted ones too: a search
/// within leaves them out).
struct Numbers(HashMap<String, usize>);

impl Numbers {
    fn of(index: &Index) -> Self {
        Numbers((0..index.len()).map(|j| (index.doc_id(j), j)).collect())
    }

    fn get(&self, id: &str, path: &Path, line: usize) -> Result<usize> {
        match self.0.get(id) {
            Some(&j) => Ok(j),
            None => bail!(
                "{}, line {}: no document {id:?} in the index",
                path.display(),
                line + 1
            ),
        }
    }
}

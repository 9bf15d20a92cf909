//! Loading a corpus or a query file for a command, with ids from the file or an id list.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tilemaxsim::corpus::import::read_ids;
use tilemaxsim::{Corpus, Matrix};

/// Open a corpus (or query) file, attach ids from `ids` when given, check values when asked.
pub fn open(path: &Path, ids: Option<&PathBuf>, check_finite: bool, what: &str) -> Result<Corpus> {
    let mut c = Corpus::open(path).with_context(|| format!("cannot open the {what} file"))?;
    if let Some(ids_path) = ids {
        let ids = read_ids(ids_path)?;
        c = c
            .with_doc_ids(ids)
            .with_context(|| format!("ids from {}", ids_path.display()))?;
    }
    if check_finite {
        c.check_finite()
            .with_context(|| format!("{} holds a non-finite value", path.display()))?;
    }
    Ok(c)
}

/// The id of item `i`: the stored id, or the 0-based index.
pub fn id(c: &Corpus, i: usize) -> String {
    c.doc_ids()
        .map_or_else(|| i.to_string(), |ids| ids[i].clone())
}

/// Every query of a query file as a matrix.
pub fn queries(q: &Corpus) -> Vec<Matrix<'_>> {
    q.docs().collect()
}

//! Loading a corpus or a query file for a command, with ids from the file or an id list.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tilemaxsim::Matrix;
use tilemaxsim::corpus::import::read_ids;
use tilemaxsim::corpus::{FiniteCheck, OpenOptions};
use tilemaxsim::{AnyCorpus, Corpus};

/// The value check of every command that scores or searches a corpus file.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct CheckArgs {
    /// Skip the scan of the corpus for NaN/Inf values (on by default; files written by
    /// `corpus import` record that they were checked and are not scanned again). Queries are
    /// always checked.
    #[arg(long)]
    pub no_check_finite: bool,
}

/// Open a corpus (or query) file, attach ids from `ids` when given, and check its values when
/// `check_finite` (after the ids, so the error names the document by the id the run uses).
fn open(path: &Path, ids: Option<&PathBuf>, check_finite: bool, what: &str) -> Result<Corpus> {
    let mut c = OpenOptions::new()
        .check_finite(false)
        .open(path)
        .map_err(|e| in_terms_of(e, what, path))
        .with_context(|| format!("cannot open the {what} file"))?;
    if let Some(ids_path) = ids {
        let ids = read_ids(ids_path)?;
        c = c
            .with_doc_ids(ids)
            .with_context(|| format!("ids from {}", ids_path.display()))?;
    }
    // A file that records it was checked when written is trusted, as `Corpus::open` does.
    if check_finite && c.finite_check() == FiniteCheck::NotChecked {
        c.check_finite().with_context(|| {
            format!(
                "{} holds a non-finite value (--no-check-finite skips this check)",
                path.display()
            )
        })?;
    }
    Ok(c)
}

/// A query file is a corpus file whose documents are queries: say so in its errors.
fn in_terms_of(e: tilemaxsim::Error, what: &str, path: &Path) -> anyhow::Error {
    let text = e.to_string();
    if what != "queries" {
        return e.into();
    }
    if text.contains("a corpus needs at least one document") {
        anyhow::anyhow!(
            "{}: holds no queries; a query file needs at least one",
            path.display()
        )
    } else if let Some(rest) = text
        .split("document ")
        .nth(1)
        .filter(|r| r.contains("is empty"))
    {
        let index = rest.split_whitespace().next().unwrap_or("?");
        anyhow::anyhow!(
            "{}: query {index} has no tokens; every query needs at least one",
            path.display()
        )
    } else {
        e.into()
    }
}

/// Open an exact corpus file (the second stage of a search, a corpus to compress).
pub fn corpus(path: &Path, ids: Option<&PathBuf>, check: CheckArgs) -> Result<Corpus> {
    open(path, ids, !check.no_check_finite, "corpus")
}

/// Open the corpus file of a scoring or search command: exact or compressed, through the one
/// reader of both formats; ids attached, then the values checked (as [`corpus`] does).
pub fn any(path: &Path, ids: Option<&PathBuf>, check: CheckArgs) -> Result<Box<dyn AnyCorpus>> {
    let mut c = OpenOptions::new()
        .check_finite(false)
        .open_any(path)
        .context("cannot open the corpus file")?;
    if let Some(ids_path) = ids {
        c = c
            .with_ids(read_ids(ids_path)?)
            .with_context(|| format!("ids from {}", ids_path.display()))?;
    }
    if !check.no_check_finite {
        c.ensure_finite().with_context(|| {
            format!(
                "{} holds a non-finite value (--no-check-finite skips this check)",
                path.display()
            )
        })?;
    }
    Ok(c)
}

/// Open a query file. Its values are not scanned here: every scorer checks each query it is
/// given, and names it as a query.
pub fn query_file(path: &Path, ids: Option<&PathBuf>) -> Result<Corpus> {
    open(path, ids, false, "queries")
}

/// The id of item `i`: the stored id, or the 0-based index.
pub fn id(c: &dyn AnyCorpus, i: usize) -> String {
    c.doc_ids()
        .map_or_else(|| i.to_string(), |ids| ids[i].clone())
}

/// Every query of a query file as a matrix.
pub fn queries(q: &Corpus) -> Vec<Matrix<'_>> {
    q.docs().collect()
}

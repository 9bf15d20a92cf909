//! `tilemaxsim index add|delete|compact`: live updates of an index directory. `add` encodes a
//! corpus's documents against the index's centroids and appends them; `delete` removes
//! documents by number. Each prints what it did once the update is on disk (acknowledged: it
//! survives a crash), and another process's searches see it at their next open. `compact`
//! writes the live documents as a new index directory (`-o`), or as the next generation of the
//! same one (`--in-place`; a server on it takes the new generation while it serves): numbered
//! from 0 again, ids kept, an empty log.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tilemaxsim::index::Index;

use crate::load;

#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// The index directory.
    #[arg(long)]
    index: PathBuf,
    /// The documents to add: an exact corpus of unit-norm tokens (its `doc_ids` become theirs).
    #[arg(long)]
    corpus: PathBuf,
    /// Document ids, one per line (instead of the corpus's own). Required (here or in the
    /// corpus) once the index's documents carry ids; none may be a live document's id.
    #[arg(long)]
    ids: Option<PathBuf>,
    #[command(flatten)]
    check: load::CheckArgs,
}

#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// The index directory.
    #[arg(long)]
    index: PathBuf,
    /// Document numbers to delete (as `index search` numbers them without ids: the build's
    /// 0..N, then the added ones in order).
    #[arg(long, value_delimiter = ',', required = true)]
    docs: Vec<usize>,
}

#[derive(clap::Args, Debug)]
pub struct CompactArgs {
    /// The index directory (left as it is with `-o`).
    #[arg(long)]
    index: PathBuf,
    /// The new index directory (new or empty).
    #[arg(
        short,
        long,
        required_unless_present = "in_place",
        conflicts_with = "in_place"
    )]
    out: Option<PathBuf>,
    /// Compact the index into the next generation of its own directory, which replaces the
    /// old one atomically (its files then removed).
    #[arg(long)]
    in_place: bool,
}

pub fn add(a: AddArgs) -> Result<()> {
    let docs = load::corpus(&a.corpus, a.ids.as_ref(), a.check)?;
    let mut index = Index::open(&a.index).context("cannot open the index")?;
    let added = index.add(&docs).context("cannot add the documents")?;
    println!(
        "added documents {}..{} ({} tokens); the index numbers {} documents, {} deleted",
        added.start,
        added.end,
        docs.num_tokens(),
        index.len(),
        index.deleted()
    );
    Ok(())
}

pub fn delete(a: DeleteArgs) -> Result<()> {
    if a.docs.is_empty() {
        bail!("--docs: give at least one document number");
    }
    let mut index = Index::open(&a.index).context("cannot open the index")?;
    let n = index.delete(&a.docs).context("cannot delete")?;
    println!(
        "deleted {n} documents ({} were deleted already); the index numbers {} documents, {} deleted",
        a.docs.len() - n,
        index.len(),
        index.deleted()
    );
    Ok(())
}

pub fn compact(a: CompactArgs) -> Result<()> {
    let mut index = Index::open(&a.index).context("cannot open the index")?;
    let started = std::time::Instant::now();
    let (r, into) = match &a.out {
        Some(out) => (index.compact(out), out.display().to_string()),
        None => (
            index.compact_in_place(),
            format!("place (generation {})", index.generation()),
        ),
    };
    let r = r.context("cannot compact the index")?;
    println!(
        "compacted {} in{}{into}: {} documents ({} tokens), {} deleted left out, in {:.2} s; \
         documents are numbered from 0 again (ids kept where the index has them)",
        a.index.display(),
        if a.out.is_some() { "to " } else { " " },
        r.documents,
        r.tokens,
        r.removed,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

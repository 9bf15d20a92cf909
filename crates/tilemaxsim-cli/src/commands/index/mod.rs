//! `tilemaxsim index build|search|add|delete|compact`: index directories (`tilemaxsim::index`):
//! a corpus as PLAID residual codes with its IVF and, optionally, its exact tokens; searched by
//! probing the IVF or exhaustively, reranked exactly when the index keeps the exact tokens;
//! updated live by adds and deletes, and compacted into a new directory.

mod build;
mod search;
mod subset;
mod update;

use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum IndexCommand {
    /// Build an index directory from a corpus (exact, compressed with the residual codec, or a
    /// PLAID index directory).
    Build(Box<build::BuildArgs>),
    /// Search an index: the top-k documents of every query as a TREC run file.
    Search(Box<search::IndexSearchArgs>),
    /// Add documents (encoded against the index's centroids), on disk when this returns.
    Add(Box<update::AddArgs>),
    /// Delete documents by number, on disk when this returns.
    Delete(Box<update::DeleteArgs>),
    /// Write the live documents as a new index directory: deleted ones left out, added ones
    /// merged into the build, numbered from 0 again, ids kept where the index has them (codes
    /// copied, not re-encoded: the same scores).
    Compact(Box<update::CompactArgs>),
}

pub fn run(cmd: IndexCommand) -> Result<()> {
    match cmd {
        IndexCommand::Build(a) => build::run(*a),
        IndexCommand::Search(a) => search::run(*a),
        IndexCommand::Add(a) => update::add(*a),
        IndexCommand::Delete(a) => update::delete(*a),
        IndexCommand::Compact(a) => update::compact(*a),
    }
}

//! `tilemaxsim index build|search`: index directories (`tilemaxsim::index`): a corpus as PLAID
//! residual codes with its IVF and, optionally, its exact tokens; searched by probing the IVF
//! or exhaustively, reranked exactly when the index keeps the exact tokens.

mod build;
mod search;

use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum IndexCommand {
    /// Build an index directory from a corpus (exact, compressed with the residual codec, or a
    /// PLAID index directory).
    Build(Box<build::BuildArgs>),
    /// Search an index: the top-k documents of every query as a TREC run file.
    Search(Box<search::IndexSearchArgs>),
}

pub fn run(cmd: IndexCommand) -> Result<()> {
    match cmd {
        IndexCommand::Build(a) => build::run(*a),
        IndexCommand::Search(a) => search::run(*a),
    }
}

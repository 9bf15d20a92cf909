//! One module per command of the `tilemaxsim` binary, named by its verb; `corpus/` holds one
//! file per `corpus` subcommand. Shared pieces (the corpus options, loading files, progress
//! bars, synthetic data) live beside this folder.

pub mod bench;
pub mod corpus;
pub mod eval;
pub mod index;
pub mod info;
pub mod score;
pub mod search;
pub mod serve;

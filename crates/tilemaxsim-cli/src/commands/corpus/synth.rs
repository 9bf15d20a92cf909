//! `tilemaxsim corpus synth`: the seeded synthetic corpus `bench` generates, written to a file.

use std::path::PathBuf;

use anyhow::{Result, bail};
use tilemaxsim::DType;

use super::show;
use crate::synth::{self, Lengths};

#[derive(clap::Args, Debug)]
pub struct SynthArgs {
    /// Documents (N).
    #[arg(long, default_value_t = 10_000)]
    docs: usize,
    /// Document lengths: N (every document) or LO:HI (uniform).
    #[arg(long, default_value = "128")]
    doc_len: Lengths,
    /// Embedding dimension d.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    #[arg(long, default_value = "f32")]
    dtype: DType,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The corpus file to write.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

pub fn run(a: SynthArgs) -> Result<()> {
    if a.docs == 0 || a.dim == 0 {
        bail!("--docs and --dim must be at least 1");
    }
    let spinner = crate::progress::spinner("generating");
    let corpus = synth::corpus(a.docs, a.doc_len, a.dim, a.dtype, a.seed)?;
    // Records in the file that its values were checked.
    corpus.check_finite()?;
    spinner.set_message(format!("writing {}", a.out.display()));
    corpus.save(&a.out)?;
    spinner.finish_and_clear();
    show::corpus(&a.out, &corpus, &show::Extra::default());
    Ok(())
}

//! `tilemaxsim corpus decode`: a compressed corpus decoded back to an exact one.

use std::path::PathBuf;

use anyhow::{Context, Result};
use tilemaxsim::{CompressedCorpus, DType, OwnedElements};

#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// The compressed corpus.
    #[arg(long)]
    corpus: PathBuf,
    /// Element type of the exact corpus written (f32, f16, bf16).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    #[arg(long, short = 'o')]
    out: PathBuf,
}

pub fn run(a: DecodeArgs) -> Result<()> {
    let c = CompressedCorpus::open(&a.corpus).context("cannot open the compressed corpus")?;
    let d = c.decode()?;
    let d = if a.dtype == DType::F32 {
        d
    } else {
        let v = d.tokens().to_f32_vec();
        let mut e = tilemaxsim::Corpus::new(
            OwnedElements::from_f32(&v, a.dtype),
            d.dim(),
            d.offsets().to_vec(),
        )?;
        if let Some(ids) = d.doc_ids() {
            e = e.with_doc_ids(ids.to_vec())?;
        }
        e
    };
    d.check_finite()?;
    d.save(&a.out)?;
    println!(
        "{}: {} documents, {} tokens decoded to {}",
        a.out.display(),
        d.len(),
        d.num_tokens(),
        a.dtype
    );
    Ok(())
}

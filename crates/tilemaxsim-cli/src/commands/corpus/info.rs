//! `tilemaxsim corpus info`: describe a corpus file of either format, optionally scanning
//! every value first.

use std::path::PathBuf;

use anyhow::Result;
use tilemaxsim::corpus::{CorpusKind, OpenOptions};

use super::show;

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    path: PathBuf,
    /// Scan every value, even of a file that records it was checked when written.
    #[arg(long)]
    check_finite: bool,
}

pub fn run(a: InfoArgs) -> Result<()> {
    let c = OpenOptions::new().check_finite(false).open_any(&a.path)?;
    if a.check_finite {
        match c.kind() {
            CorpusKind::Exact(e) => e.check_finite()?,
            CorpusKind::Compressed(z) => z.check_finite()?,
        }
    }
    let extra = show::Extra {
        scanned: a.check_finite,
        ..Default::default()
    };
    show::corpus(&a.path, c.as_ref(), &extra);
    Ok(())
}

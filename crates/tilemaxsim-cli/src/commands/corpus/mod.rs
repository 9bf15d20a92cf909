//! `tilemaxsim corpus import|synth|info|compress|decode`: one file per subcommand, and
//! `show.rs`, the description every one of them prints of the file it wrote or read.

pub(crate) mod compress;
mod decode;
mod import;
mod info;
mod show;
mod synth;

use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum CorpusCommand {
    /// Build a corpus (or query) file from .npy files, safetensors written by other tools, or a
    /// PLAID index.
    Import(Box<import::ImportArgs>),
    /// Write the seeded synthetic corpus `bench` generates for the same flags (unit-norm
    /// Gaussian tokens), e.g. to serve or search the very corpus `bench` timed.
    Synth(synth::SynthArgs),
    /// Compress an exact corpus with a codec (residual/PLAID, pq, int8, fp8).
    Compress(Box<compress::CompressArgs>),
    /// Decode a compressed corpus back to an exact one (what its scores are checked against).
    Decode(decode::DecodeArgs),
    /// Describe a corpus file (exact or compressed); --check-finite also scans every value (even
    /// of a file that records it was checked when written).
    Info(info::InfoArgs),
}

pub fn run(cmd: CorpusCommand) -> Result<()> {
    match cmd {
        CorpusCommand::Import(a) => import::run(*a),
        CorpusCommand::Synth(a) => synth::run(a),
        CorpusCommand::Compress(a) => compress::run(*a),
        CorpusCommand::Decode(a) => decode::run(a),
        CorpusCommand::Info(a) => info::run(a),
    }
}

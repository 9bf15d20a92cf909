//! The `tilemaxsim` command: bench, score, search, corpus import/info, info.

mod bench;
mod progress;
mod synth;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tilemaxsim",
    version,
    about = "Exact MaxSim scoring for late-interaction retrieval"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark scoring on seeded synthetic data.
    Bench(bench::BenchArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(a) => bench::run(a),
    }
}

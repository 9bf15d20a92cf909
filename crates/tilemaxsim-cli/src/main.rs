//! The `tilemaxsim` command: bench, bench-search, score, search, serve, eval, corpus
//! import/synth/info/compress/decode, index build/search, info. `commands/` holds one module per command.

mod args;
mod commands;
mod load;
mod progress;
mod synth;

use clap::{Parser, Subcommand};
use commands::{bench, corpus, eval, index, info, score, search, serve};

#[derive(Parser)]
#[command(
    name = "tilemaxsim",
    version,
    about = "Exact MaxSim scoring for late-interaction retrieval (ColBERT, ColPali)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark scoring on seeded synthetic data: a table of ms, docs/s, GB/s, GFLOP/s, % of ceiling.
    Bench(bench::BenchArgs),
    /// Benchmark end-to-end top-k search: latency per batch, streamed and multi-GPU throughput.
    BenchSearch(bench::search::SearchBenchArgs),
    /// Score queries against a corpus (all documents or a candidate list).
    Score(score::ScoreArgs),
    /// Top-k documents per query, written as a TREC run file.
    Search(search::SearchArgs),
    /// Serve top-k search over HTTP (POST /v1/search), batching concurrent requests.
    Serve(Box<serve::ServeArgs>),
    /// Evaluate a TREC run against qrels: nDCG@10, MRR@10, Recall@10/100/1000, MAP (trec_eval's rules).
    Eval(eval::EvalArgs),
    /// Build, describe, compress or decode corpus files.
    #[command(subcommand)]
    Corpus(corpus::CorpusCommand),
    /// Build and search index directories: residual codes, their IVF and the exact tokens.
    #[command(subcommand)]
    Index(index::IndexCommand),
    /// Devices and CPU features.
    Info,
}

fn main() {
    let cli = Cli::parse();
    // Output piped into a reader that stops early (`| head`) ends the command quietly, as
    // other Unix tools do, instead of `println!` panicking on the broken pipe. Not for
    // `serve`, whose writes to a closed client socket must fail, not end the server.
    if !matches!(cli.command, Command::Serve(_)) {
        quiet_on_broken_pipe();
    }
    let result = match cli.command {
        Command::Bench(a) => bench::run(a),
        Command::BenchSearch(a) => bench::search::run(a),
        Command::Score(a) => score::run(a),
        Command::Search(a) => search::run(a),
        Command::Serve(a) => serve::run(*a),
        Command::Eval(a) => eval::run(a),
        Command::Corpus(c) => corpus::run(c),
        Command::Index(c) => index::run(c),
        Command::Info => info::run(),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// SIGPIPE back to its default action (the Rust runtime ignores it, so a write to a closed
/// pipe returns an error, which `println!` turns into a panic): the process ends at the write.
#[cfg(unix)]
fn quiet_on_broken_pipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn quiet_on_broken_pipe() {}

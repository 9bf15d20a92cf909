//! The `tilemaxsim` command: bench, score, search, serve, eval, corpus
//! import/synth/info/compress/decode, info.

mod bench;
mod bench_search;
mod compress_cmd;
mod corpus_args;
mod corpus_cmd;
mod eval_cmd;
mod info;
mod load;
mod progress;
mod score;
mod search;
mod serve;
mod synth;

use clap::{Parser, Subcommand};

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
    BenchSearch(bench_search::SearchBenchArgs),
    /// Score queries against a corpus (all documents or a candidate list).
    Score(score::ScoreArgs),
    /// Top-k documents per query, written as a TREC run file.
    Search(search::SearchArgs),
    /// Serve top-k search over HTTP (POST /v1/search), batching concurrent requests.
    Serve(Box<serve::ServeArgs>),
    /// Evaluate a TREC run against qrels: nDCG@10, MRR@10, Recall@10/100/1000, MAP (trec_eval's rules).
    Eval(eval_cmd::EvalArgs),
    /// Build or describe corpus files.
    #[command(subcommand)]
    Corpus(corpus_cmd::CorpusCommand),
    /// Devices and CPU features.
    Info,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(a) => bench::run(a),
        Command::BenchSearch(a) => bench_search::run(a),
        Command::Score(a) => score::run(a),
        Command::Search(a) => search::run(a),
        Command::Serve(a) => serve::run(*a),
        Command::Eval(a) => eval_cmd::run(a),
        Command::Corpus(c) => corpus_cmd::run(c),
        Command::Info => info::run(),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

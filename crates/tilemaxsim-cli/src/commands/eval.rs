//! `tilemaxsim eval`: nDCG@10, MRR@10, Recall@10/100/1000 and MAP of a TREC run against TREC
//! qrels, with trec_eval's semantics (`tilemaxsim::eval` says exactly which).

use std::path::PathBuf;

use anyhow::Result;
use serde_json::{Map, Value, json};
use tilemaxsim::eval::{Metrics, Qrels, Run, evaluate};

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// TREC qrels file: `qid iter docid grade` per line (relevant: grade >= 1).
    #[arg(long)]
    qrels: PathBuf,
    /// TREC run file: `qid Q0 docid rank score tag` per line (ordered by score, not rank).
    #[arg(long)]
    run: PathBuf,
    /// Also print every query's measures.
    #[arg(long)]
    per_query: bool,
    /// Print JSON (full precision) instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: EvalArgs) -> Result<()> {
    let qrels = Qrels::read(&a.qrels)?;
    let run = Run::read(&a.run)?;
    let e = evaluate(&qrels, &run)?;
    if let Some(first) = e.unjudged.first() {
        eprintln!(
            "notice: {} run queries have no judgments and are skipped (first: {first})",
            e.unjudged.len()
        );
    }
    if e.missing > 0 {
        eprintln!(
            "notice: {} judged queries are not in the run and are not counted",
            e.missing
        );
    }

    if a.json {
        let mut out = json!({ "queries": e.per_query.len(), "mean": to_json(&e.mean) });
        if a.per_query {
            let per: Map<String, Value> = e
                .per_query
                .iter()
                .map(|(q, m)| (q.clone(), to_json(m)))
                .collect();
            out["per_query"] = Value::Object(per);
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }

    let width = e
        .per_query
        .iter()
        .filter(|_| a.per_query)
        .map(|(q, _)| q.len())
        .fold(5, usize::max);
    let mut header = format!("{:<width$}", "qid");
    for (label, _, _) in e.mean.named() {
        header += &format!(" {label:>10}");
    }
    println!("{header}");
    let row = |qid: &str, m: &Metrics| {
        let mut line = format!("{qid:<width$}");
        for (_, _, v) in m.named() {
            line += &format!(" {v:>10.4}");
        }
        println!("{line}");
    };
    if a.per_query {
        for (q, m) in &e.per_query {
            row(q, m);
        }
    }
    row("all", &e.mean);
    println!("{} queries evaluated", e.per_query.len());
    Ok(())
}

fn to_json(m: &Metrics) -> Value {
    Value::Object(
        m.named()
            .into_iter()
            .map(|(_, key, v)| (key.to_owned(), json!(v)))
            .collect(),
    )
}

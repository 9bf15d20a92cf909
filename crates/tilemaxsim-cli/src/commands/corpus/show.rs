//! The description every `corpus` subcommand prints of a file: its shape, what a token is
//! stored as and the size, the ids, what is known of the values, and for codes the codec, its
//! parameters and the recorded rerank depth. One function for either format.

use std::path::Path;

use tilemaxsim::corpus::{AnyCorpus, CorpusKind, FiniteCheck};
use tilemaxsim::{Codec, CompressedCorpus, Corpus};

/// What the caller knows beyond the file.
#[derive(Clone, Copy, Debug, Default)]
pub struct Extra {
    /// Bytes of the exact corpus the codes were made from (`corpus compress`).
    pub exact_bytes: Option<usize>,
    /// Whether the values were just scanned (`corpus info --check-finite`).
    pub scanned: bool,
}

pub fn corpus(path: &Path, c: &dyn AnyCorpus, extra: &Extra) {
    println!("{}", path.display());
    if let CorpusKind::Compressed(z) = c.kind() {
        println!("  codec      {}", z.codec().describe());
    }
    let n = c.len();
    let lens = (0..n).map(|j| c.doc_len(j));
    let (min, max) = lens.fold((usize::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
    println!("  documents  {n}");
    println!(
        "  tokens     {} (per document: min {}, mean {:.1}, max {max})",
        c.num_tokens(),
        if n == 0 { 0 } else { min },
        c.num_tokens() as f64 / n.max(1) as f64
    );
    println!("  d          {}", c.dim());
    match c.kind() {
        CorpusKind::Exact(e) => exact(e),
        CorpusKind::Compressed(z) => codes(z, extra),
    }
    println!(
        "  ids        {}",
        if c.doc_ids().is_some() {
            "yes"
        } else {
            "no (0-based indices are used)"
        }
    );
    println!("  values     {}", values(c, extra.scanned));
    if let CorpusKind::Compressed(z) = c.kind()
        && let Some(k) = z.rerank_k()
    {
        println!("  rerank     top {k} by default (recorded at compression)");
    }
}

fn exact(e: &Corpus) {
    println!("  dtype      {}", e.dtype());
    println!(
        "  size       {:.1} MB of embeddings",
        e.size_bytes() as f64 / 1e6
    );
}

fn codes(z: &CompressedCorpus, extra: &Extra) {
    let bpt = z.codec().bytes_per_token(z.dim());
    print!(
        "  size       {:.1} MB of codes, {bpt} bytes per token (f16: {})",
        z.size_bytes() as f64 / 1e6,
        2 * z.dim()
    );
    match extra.exact_bytes {
        Some(b) => println!(
            ", {:.1}× smaller than the exact corpus",
            b as f64 / z.size_bytes() as f64
        ),
        None => println!(),
    }
    let params = match z.codec() {
        Codec::Residual(r) => {
            (r.centroids().len() * 2 + (r.bucket_cutoffs().len() + r.bucket_weights().len()) * 4)
                as f64
        }
        Codec::Pq(p) => (p.codebooks().len() * 4) as f64,
        _ => 0.0,
    };
    if params > 0.0 {
        println!("  codebooks  {:.2} MB", params / 1e6);
    }
}

fn values(c: &dyn AnyCorpus, scanned: bool) -> &'static str {
    match c.kind() {
        CorpusKind::Exact(_) if scanned => "all finite (scanned now)",
        CorpusKind::Exact(e) => match e.finite_check() {
            FiniteCheck::Scanned => "all finite",
            FiniteCheck::Recorded => "all finite when written (recorded in the file)",
            FiniteCheck::NotChecked => "not checked (--check-finite)",
        },
        CorpusKind::Compressed(z) => match (z.codec(), z.finite_check()) {
            (Codec::Fp8, _) if scanned => "no NaN code (scanned now)",
            (Codec::Fp8, FiniteCheck::Scanned) => "no NaN code",
            (Codec::Fp8, FiniteCheck::Recorded) => {
                "no NaN code when written (recorded in the file)"
            }
            (Codec::Fp8, FiniteCheck::NotChecked) => "not checked (--check-finite)",
            // Ids, scales and codebooks are checked whenever a file is opened.
            _ => "every code decodes to finite values (checked on open)",
        },
    }
}

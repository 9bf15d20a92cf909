//! `tilemaxsim corpus import|synth|info|compress|decode`: build a corpus file from `.npy`,
//! foreign safetensors or a PLAID index, write the seeded synthetic corpus `bench` scores,
//! describe one (exact or compressed), compress or decode one.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tilemaxsim::corpus::import::{self, SafetensorsKeys};
use tilemaxsim::corpus::{FiniteCheck, OpenOptions};
use tilemaxsim::{Corpus, DType};

use crate::synth::{self, Lengths};

#[derive(clap::Subcommand, Debug)]
pub enum CorpusCommand {
    /// Build a corpus (or query) file from .npy files or from safetensors written by other tools.
    Import(Box<ImportArgs>),
    /// Write the seeded synthetic corpus `bench` generates for the same flags (unit-norm
    /// Gaussian tokens), e.g. to serve or search the very corpus `bench` timed.
    Synth(SynthArgs),
    /// Compress an exact corpus with a codec (residual/PLAID, pq, int8, fp8).
    Compress(Box<crate::compress_cmd::CompressArgs>),
    /// Decode a compressed corpus back to an exact one (what its scores are checked against).
    Decode(crate::compress_cmd::DecodeArgs),
    /// Describe a corpus file (exact or compressed); --check-finite also scans every value (even of a file that
    /// records it was checked when written).
    Info {
        path: PathBuf,
        #[arg(long)]
        check_finite: bool,
    },
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// A PLAID index directory (fast-plaid or colbert-ai), imported without re-encoding as a
    /// compressed (residual) corpus.
    #[arg(long, conflicts_with_all = ["npy", "npy_files", "npy_dir", "safetensors", "dtype"])]
    plaid: Option<PathBuf>,
    /// Packed token matrix [T, d] (.npy, float32/float16/float64); needs --lengths.
    #[arg(long, requires = "lengths", conflicts_with_all = ["npy_files", "npy_dir", "safetensors"])]
    npy: Option<PathBuf>,
    /// Document lengths [N] (.npy, integers) for --npy.
    #[arg(long)]
    lengths: Option<PathBuf>,
    /// One [Nd, d] .npy file per document, in this order (ids: the file names).
    #[arg(long, num_args = 1.., conflicts_with_all = ["npy_dir", "safetensors"])]
    npy_files: Vec<PathBuf>,
    /// A folder of one [Nd, d] .npy file per document (ordered by name, numbers by value).
    #[arg(long, conflicts_with = "safetensors")]
    npy_dir: Option<PathBuf>,
    /// A safetensors file: packed embeddings [T, d] with offsets or lengths, padded embeddings
    /// [B, L, d] with lengths or a mask (PyLate's layout), or one 2-D tensor per document.
    #[arg(long)]
    safetensors: Option<PathBuf>,
    /// The embeddings tensor of --safetensors.
    #[arg(long, default_value = "embeddings")]
    embeddings_key: String,
    /// The [N + 1] offsets of packed embeddings.
    #[arg(long, default_value = "offsets")]
    offsets_key: String,
    /// The [N] lengths of packed documents, or of the tokens leading each padded row.
    #[arg(long, default_value = "lengths")]
    lengths_key: String,
    /// The [B, L] mask of padded embeddings (nonzero: a token; holes allowed).
    #[arg(long, default_value = "mask")]
    mask_key: String,
    /// Scale every token to unit L2 norm (as ColBERT's encoders output; the residual codec
    /// needs it).
    #[arg(long)]
    normalize: bool,
    /// One id per line, one per document (replaces ids taken from file or tensor names).
    #[arg(long)]
    ids: Option<PathBuf>,
    /// Store as this element type (f32, f16, bf16); default: as read (f64 becomes f32).
    #[arg(long)]
    dtype: Option<DType>,
    /// Skip the scan for NaN/Inf values (the file then does not record that it was checked,
    /// and commands that score it scan it when they open it).
    #[arg(long, alias = "no-check-finite")]
    no_check: bool,
    /// The corpus file to write.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

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

pub fn run(cmd: CorpusCommand) -> Result<()> {
    match cmd {
        CorpusCommand::Import(a) => match &a.plaid {
            Some(dir) => crate::compress_cmd::import_plaid(dir, a.ids.as_ref(), &a.out),
            None => import_cmd(*a),
        },
        CorpusCommand::Compress(a) => crate::compress_cmd::compress_cmd(*a),
        CorpusCommand::Decode(a) => crate::compress_cmd::decode_cmd(a),
        CorpusCommand::Synth(a) => {
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
            describe(&a.out, &corpus);
            Ok(())
        }
        CorpusCommand::Info { path, check_finite }
            if tilemaxsim::codec::is_compressed_file(&path) =>
        {
            let c = tilemaxsim::CompressedCorpus::open(&path)?;
            if check_finite {
                c.check_finite()?;
            }
            crate::compress_cmd::describe(&path, &c, None, check_finite);
            Ok(())
        }
        CorpusCommand::Info { path, check_finite } => {
            let c = OpenOptions::new().check_finite(false).open(&path)?;
            if check_finite {
                c.check_finite()?;
            }
            describe(&path, &c);
            Ok(())
        }
    }
}

fn import_cmd(a: ImportArgs) -> Result<()> {
    let spinner = crate::progress::spinner("reading");
    let mut corpus = if let Some(npy) = &a.npy {
        let lengths = a.lengths.as_ref().context("--npy needs --lengths")?;
        import::from_npy_packed(npy, lengths, a.dtype)?
    } else if !a.npy_files.is_empty() {
        import::from_npy_files(&a.npy_files, a.dtype)?
    } else if let Some(dir) = &a.npy_dir {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read folder {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "npy"))
            .collect();
        if files.is_empty() {
            bail!("no .npy files in {}", dir.display());
        }
        files.sort_by(|x, y| import::natural_cmp(&x.to_string_lossy(), &y.to_string_lossy()));
        import::from_npy_files(&files, a.dtype)?
    } else if let Some(st) = &a.safetensors {
        let keys = SafetensorsKeys {
            embeddings: a.embeddings_key,
            offsets: a.offsets_key,
            lengths: a.lengths_key,
            mask: a.mask_key,
        };
        import::from_safetensors(st, &keys, a.dtype)?
    } else {
        bail!(
            "nothing to import: give --npy with --lengths, --npy-files, --npy-dir, --safetensors or --plaid"
        );
    };
    if let Some(ids) = &a.ids {
        corpus = corpus
            .with_doc_ids(import::read_ids(ids)?)
            .with_context(|| format!("ids from {}", ids.display()))?;
    }
    if !a.no_check || a.normalize {
        corpus
            .check_finite()
            .context("the input holds a non-finite value (use --no-check to import anyway)")?;
    }
    if a.normalize {
        corpus = corpus.normalized()?;
        corpus.check_finite()?;
    }
    spinner.set_message(format!("writing {}", a.out.display()));
    corpus.save(&a.out)?;
    spinner.finish_and_clear();
    describe(&a.out, &corpus);
    Ok(())
}

fn describe(path: &std::path::Path, c: &Corpus) {
    let min = (0..c.len()).map(|j| c.doc_len(j)).min().unwrap_or(0);
    println!("{}", path.display());
    print_shape(c.len(), c.num_tokens(), min, c.max_doc_len(), c.dim());
    println!("  dtype      {}", c.dtype());
    println!(
        "  size       {:.1} MB of embeddings",
        c.size_bytes() as f64 / 1e6
    );
    println!(
        "  ids        {}",
        if c.doc_ids().is_some() {
            "yes"
        } else {
            "no (0-based indices are used)"
        }
    );
    println!(
        "  values     {}",
        match c.finite_check() {
            FiniteCheck::Scanned => "all finite",
            FiniteCheck::Recorded => "all finite when written (recorded in the file)",
            _ => "not checked (--check-finite)",
        }
    );
}

/// The documents, tokens (with their spread per document) and d lines of `corpus info`.
pub fn print_shape(docs: usize, tokens: usize, min: usize, max: usize, dim: usize) {
    println!("  documents  {docs}");
    println!(
        "  tokens     {tokens} (per document: min {min}, mean {:.1}, max {max})",
        tokens as f64 / docs as f64
    );
    println!("  d          {dim}");
}

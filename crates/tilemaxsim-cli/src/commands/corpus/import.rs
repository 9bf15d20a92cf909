//! `tilemaxsim corpus import`: a corpus file from `.npy` files, safetensors written by other
//! tools (packed, padded with lengths or a mask, or one tensor per document), or a PLAID index
//! directory (fast-plaid or colbert-ai, imported as residual codes without re-encoding).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tilemaxsim::DType;
use tilemaxsim::corpus::import::{self, SafetensorsKeys};

use super::show;

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

pub fn run(a: ImportArgs) -> Result<()> {
    if let Some(dir) = &a.plaid {
        return plaid(dir, a.ids.as_ref(), &a.out);
    }
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
    show::corpus(&a.out, &corpus, &show::Extra::default());
    Ok(())
}

/// Import a PLAID index directory (fast-plaid or colbert-ai) without re-encoding.
fn plaid(dir: &Path, ids: Option<&PathBuf>, out: &Path) -> Result<()> {
    if !dir.is_dir() {
        bail!("--plaid {}: not a directory", dir.display());
    }
    let kind = tilemaxsim::codec::plaid::detect(dir)?;
    let spinner = crate::progress::spinner(&format!("reading the {kind:?} index"));
    let mut c = tilemaxsim::codec::plaid::import_plaid(dir)?;
    if let Some(ids) = ids {
        c = c
            .with_doc_ids(tilemaxsim::corpus::import::read_ids(ids)?)
            .with_context(|| format!("ids from {}", ids.display()))?;
    }
    spinner.set_message(format!("writing {}", out.display()));
    c.save(out)?;
    spinner.finish_and_clear();
    show::corpus(out, &c, &show::Extra::default());
    Ok(())
}

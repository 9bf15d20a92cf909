//! Building an index directory: the corpus compressed with PLAID's residual codec (on the
//! device asked for: k-means and encoding run on a GPU when there is one, and there the codes
//! are written to their file as the encoding hands them back), its IVF, the exact tokens when
//! asked (written beside the compression), and the manifest last. A directory that is not empty
//! is refused, so a build never overwrites anything; a build that fails midway leaves no
//! manifest, and [`super::Index::open`] refuses such a directory.

use std::borrow::Cow;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use super::manifest::{Manifest, write_manifest};
use super::{CODES, Defaults, EXACT, IVF, MANIFEST, ivf::Ivf};
use crate::codec::format::CodesFile;
use crate::codec::{Codec, CodecSpec, CodesSink, CompressedCorpus, Progress, ResidualOptions};
use crate::corpus::Corpus;
use crate::corpus::format::Durable;
use crate::error::{Error, Result};
use crate::{Device, compress_into};

/// What an index is built from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// Exact tokens, compressed by the build.
    Exact(&'a Corpus),
    /// A residual corpus compressed before (`corpus compress`, or a PLAID import).
    Compressed(&'a CompressedCorpus),
}

/// How to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// The residual codec of an exact source (ignored for a compressed one).
    pub residual: ResidualOptions,
    /// Seed of the k-means sampling and seeding.
    pub seed: u64,
    /// Where to compress: a GPU, the CPU, or `Auto`.
    pub device: Device,
    /// Keep these exact tokens in the index for reranking (the same documents as the source).
    pub keep_exact: bool,
    /// The search defaults to record.
    pub defaults: Defaults,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            residual: ResidualOptions::default(),
            seed: 0,
            device: Device::Auto,
            keep_exact: true,
            defaults: Defaults::default(),
        }
    }
}

/// What a build did.
#[derive(Clone, Debug)]
pub struct BuildReport {
    /// Where the corpus was compressed ("" for a compressed source).
    pub compressed_on: String,
    pub compress_s: f64,
    /// Building the IVF, while the codes are written.
    pub ivf_s: f64,
    /// From the end of the compression until every file is written and on disk (the IVF built
    /// meanwhile; the codes were written as they were encoded and the exact tokens from the
    /// start, beside the compression).
    pub write_s: f64,
    /// Bytes of the codes, the IVF and the exact tokens as written.
    pub codes_bytes: usize,
    pub ivf_bytes: usize,
    pub exact_bytes: usize,
}

/// Build an index of `source` in `dir` (created if missing; it must be empty). `exact`, when
/// `options.keep_exact`, is the exact corpus kept for reranking: the source itself when that is
/// exact, else one the caller gives (the same documents).
pub fn build(
    source: Source<'_>,
    exact: Option<&Corpus>,
    dir: impl AsRef<Path>,
    options: &BuildOptions,
    progress: Progress<'_>,
) -> Result<BuildReport> {
    let dir = dir.as_ref();
    // Everything that can be refused is refused before the directory is made or any work done.
    let d = options.defaults;
    if d.probe.nprobe == 0 || d.probe.ndocs == 0 || d.rerank_k == 0 {
        return Err(Error::Argument(
            "the search defaults nprobe, ndocs and rerank_k must be at least 1".into(),
        ));
    }
    let (len, dim) = match source {
        Source::Exact(c) => (c.len(), c.dim()),
        Source::Compressed(c) => (c.len(), c.dim()),
    };
    if let Source::Compressed(c) = source
        && !matches!(c.codec(), Codec::Residual(_))
    {
        return Err(Error::Argument(format!(
            "an index holds residual (PLAID) codes, not {}",
            c.codec().describe()
        )));
    }
    let exact = match (source, exact) {
        (_, Some(e)) => Some(e),
        (Source::Exact(c), None) => Some(c),
        (Source::Compressed(_), None) => None,
    }
    .filter(|_| options.keep_exact);
    if let Some(e) = exact
        && (e.len() != len || e.dim() != dim)
    {
        return Err(Error::Argument(format!(
            "the exact corpus has {} documents of d = {}, the source {len} of d = {dim}",
            e.len(),
            e.dim()
        )));
    }
    prepare_dir(dir)?;
    // The exact tokens do not depend on the codes: they are written while the corpus is
    // compressed. Their values are scanned first (free where the corpus was opened with the
    // check, or compressed: the compression scans them anyway), so the file records them finite.
    if let Some(e) = exact {
        e.check_finite()?;
    }
    let started = Instant::now();
    let (w, write_s) = std::thread::scope(|s| {
        let exact_saver =
            exact.map(|e| s.spawn(move || on_own_pool(|| e.save_durably(&dir.join(EXACT)))));
        let written = compress_then_write(source, dir, options, progress);
        let exact_saved = exact_saver.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(Error::Argument("writing the exact tokens failed".into())))
        });
        let written = written?;
        exact_saved.transpose()?;
        let write_s = started.elapsed().as_secs_f64() - written.compress_s;
        Ok::<_, Error>((written, write_s))
    })?;
    let manifest = Manifest {
        documents: w.codes.len(),
        tokens: w.codes.num_tokens(),
        dim: w.codes.dim(),
        nbits: w.nbits,
        centroids: w.ivf.num_centroids(),
        codes: CODES.into(),
        ivf: IVF.into(),
        exact: exact.map(|_| EXACT.into()),
        defaults: options.defaults,
        generation: 0,
        log: super::LOG.into(),
    };
    finish(dir, &manifest)?;
    Ok(BuildReport {
        compressed_on: w.compressed_on,
        compress_s: w.compress_s,
        ivf_s: w.ivf_s,
        write_s,
        codes_bytes: w.codes.size_bytes(),
        ivf_bytes: w.ivf.size_bytes(),
        exact_bytes: exact.map_or(0, |e| e.num_tokens() * e.dim() * e.dtype().size()),
    })
}

/// Run `f` (a file's write, bound by the disk) on a small rayon pool of its own: on rayon's
/// global pool its pieces, each waiting for the disk, held back the parallel steps beside it
/// (the exact tokens' write made the k-means sample's gather take 10 s instead of 0.5 s at 1M
/// documents; the codes' write slowed the IVF's build).
fn on_own_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match rayon::ThreadPoolBuilder::new()
        .num_threads(WRITERS)
        .thread_name(|i| format!("tilemaxsim-writer-{i}"))
        .build()
    {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

/// Threads writing one file beside other work.
const WRITERS: usize = 4;

/// The codes and IVF of a build, written.
struct Written<'a> {
    codes: Cow<'a, CompressedCorpus>,
    nbits: u32,
    /// Where the corpus was compressed ("" for a compressed source), and in how long.
    compressed_on: String,
    compress_s: f64,
    ivf: Ivf,
    /// Seconds from the end of the compression to the IVF built.
    ivf_s: f64,
}

/// `source` compressed (where it is exact), its codes written as the compression makes them,
/// then the IVF built from their centroid ids and written while the codes' file is flushed;
/// each file on disk (fsync) when this returns.
fn compress_then_write<'a>(
    source: Source<'a>,
    dir: &Path,
    options: &BuildOptions,
    progress: Progress<'_>,
) -> Result<Written<'a>> {
    let started = Instant::now();
    let path = dir.join(CODES);
    let (codes, compressed_on, file) = match source {
        Source::Exact(c) => {
            let (made, on, file) = compress_streamed(c, &path, options, progress)?;
            (Cow::Owned(made), on, file)
        }
        Source::Compressed(c) => (Cow::Borrowed(c), String::new(), None),
    };
    let compress_s = started.elapsed().as_secs_f64();
    let Codec::Residual(r) = codes.codec() else {
        return Err(Error::Argument(format!(
            "an index holds residual (PLAID) codes, not {}",
            codes.codec().describe()
        )));
    };
    let (nbits, k) = (r.nbits(), r.num_centroids());
    let t = Instant::now();
    let ids = codes.aux().unwrap_or_default();
    let codes_ref: &CompressedCorpus = &codes;
    let (saved, built) = std::thread::scope(|s| {
        let saver = s.spawn(|| {
            on_own_pool(|| match file {
                Some(file) => file.finish(),
                None => codes_ref.save_durably(&path),
            })
        });
        let built = Ivf::build(ids, codes_ref.offsets(), k).and_then(|ivf| {
            let ivf_s = t.elapsed().as_secs_f64();
            ivf.save_durably(&dir.join(IVF))?;
            Ok((ivf, ivf_s))
        });
        let saved = saver
            .join()
            .unwrap_or_else(|_| Err(Error::Argument("writing the index files failed".into())));
        (saved, built)
    });
    let (ivf, ivf_s) = built?;
    saved?;
    Ok(Written {
        codes,
        nbits,
        compressed_on,
        compress_s,
        ivf,
        ivf_s,
    })
}

/// `corpus` compressed with the build's residual codec, its codes written to (the temporary name
/// of) `path` as the compression hands them back (on a GPU), by a thread of their own, so that
/// the disk never holds back the encoding: the compressed corpus, where it ran, and its file
/// to finish (`None` where the compression made its codes at once: the CPU's).
fn compress_streamed(
    corpus: &Corpus,
    path: &Path,
    options: &BuildOptions,
    progress: Progress<'_>,
) -> Result<(CompressedCorpus, String, Option<CodesFile>)> {
    let spec = CodecSpec::Residual(options.residual);
    let file = OnceLock::new();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Run>(QUEUED_RUNS);
    std::thread::scope(|s| {
        let file = &file;
        let writer = s.spawn(move || on_own_pool(|| write_runs(file, rx)));
        let sink = Streamed {
            corpus,
            path,
            file,
            tx,
        };
        let (device, seed) = (options.device, options.seed);
        let compressed = compress_into(device, corpus, &spec, seed, progress, Some(&sink));
        // The queue closed: the writer ends once it has written every run.
        drop(sink);
        writer
            .join()
            .unwrap_or_else(|_| Err(Error::Argument("writing the codes failed".into())))?;
        compressed
    })
    .map(|(c, on)| (c, on, file.into_inner()))
}

/// A run of tokens' codes and ids, queued for the writer: the first token, the codes, the ids.
type Run = (usize, Vec<u8>, Vec<u32>);

/// Runs queued at most (a run is a GPU chunk's codes: 36 MB at d = 128, nbits = 2).
const QUEUED_RUNS: usize = 4;

/// The build's [`CodesSink`]: lays out the codes' file once the codec is trained, then queues
/// each run of codes for the writer thread ([`write_runs`]).
struct Streamed<'a> {
    corpus: &'a Corpus,
    path: &'a Path,
    file: &'a OnceLock<CodesFile>,
    tx: std::sync::mpsc::SyncSender<Run>,
}

impl CodesSink for Streamed<'_> {
    fn begin(&self, codec: &Codec) -> Result<()> {
        let file = CodesFile::create(self.corpus, codec, self.path, Durable::Yes)?;
        self.file
            .set(file)
            .map_err(|_| Error::Argument("the codes' file was laid out twice".into()))
    }

    fn codes(&self, first: usize, codes: &[u8], aux: &[u32]) -> Result<()> {
        // A writer that stopped (on an error it returns) closed the queue.
        self.tx
            .send((first, codes.to_vec(), aux.to_vec()))
            .map_err(|_| Error::Argument("the codes' writer stopped".into()))
    }
}

/// The writer thread: every queued run written into `file` (laid out before the first run is
/// queued), until the queue closes or a write fails.
fn write_runs(file: &OnceLock<CodesFile>, rx: std::sync::mpsc::Receiver<Run>) -> Result<()> {
    for (first, codes, aux) in rx {
        let Some(file) = file.get() else {
            return Err(Error::Argument("codes came before their codec".into()));
        };
        file.write(first, &codes, &aux)?;
    }
    Ok(())
}

/// The last step of writing an index in `dir`, its files written and on disk: their names on
/// disk, then the manifest that names them, then its name.
pub(super) fn finish(dir: &Path, manifest: &Manifest) -> Result<()> {
    sync_dir(dir)?;
    write_manifest(dir, manifest)?;
    sync_dir(dir)
}

/// Create `dir`, or check that it is an empty directory.
pub(super) fn prepare_dir(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                let what = if dir.join(MANIFEST).exists() {
                    "already holds an index"
                } else {
                    "is not empty"
                };
                return Err(Error::Argument(format!(
                    "{}: {what}; an index is built in a new or empty directory",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            // The new directory's own name on disk, as its files will be.
            match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(parent) => sync_dir(parent),
                None => sync_dir(Path::new(".")),
            }
        }
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// Flush the directory `dir` (its entries: the names of the files renamed into it) to disk,
/// where the file system can (some refuse to sync a directory: EINVAL, ENOTSUP).
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    match std::fs::File::open(dir).and_then(|f| f.sync_all()) {
        Err(e)
            if !matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported
            ) =>
        {
            return Err(Error::io(dir, e));
        }
        _ => {}
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

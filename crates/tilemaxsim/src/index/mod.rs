//! Indexes: a directory that holds a corpus as PLAID residual codes, its inverted file
//! (centroid → documents) and optionally the exact tokens, searched by probing the IVF or
//! exhaustively, with an optional exact second stage. The files:
//! - `index.json`: the manifest (`format` = `tilemaxsim.index`, `version` = 1, the shape, the
//!   file names, the search defaults), written last and atomically, so a directory without
//!   one holds no index and a build that died left none;
//! - `codes.safetensors`: the compressed corpus (the `corpus compress` format), memory-mapped;
//! - `ivf.safetensors`: the IVF ([`ivf`]);
//! - `exact.safetensors`, optional: the exact corpus, for reranking;
//! - `updates.log`, once documents are added or deleted ([`updates`]: an append-only log of
//!   checksummed records, each on disk before [`Index::add`] or [`Index::delete`] returns).
//!
//! A compaction in place ([`Index::compact_in_place`]) makes a new generation `g` of the same
//! directory: `codes.g.safetensors`, `ivf.g.safetensors`, `exact.g.safetensors` and the log
//! `updates.g.log`, named by a manifest of version 2 (which carries `generation` and `log`),
//! written over the old one atomically; the old generation's files are then removed (an
//! opening that maps them keeps reading them). Openings of an older generation see the new
//! one at their next [`Index::refresh`].
//!
//! [`build`] writes one (compressing on a GPU when asked), [`Index::open`] checks every file
//! against the manifest, and [`Index::searcher`] gives a [`Searcher`]: IVF (PLAID's candidate
//! generation and centroid interaction, then the best candidates scored on their codes: on a
//! GPU by `cuda::GpuIvfSearch`, on the CPU by [`probe`]) or exhaustive (every document scored
//! on its codes, on the CPU or GPUs), then the exact stage when the index keeps the exact
//! tokens; `searchers.rs` assembles it.

mod build;
mod compact;
pub mod ivf;
mod live;
mod manifest;
pub mod probe;
mod searchers;
mod updates;
mod within;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use build::{BuildOptions, BuildReport, Source, build};
pub use compact::CompactReport;
pub use ivf::Ivf;
pub use probe::Probe;
pub use updates::LOG;

pub use manifest::StampWatch;
use manifest::{Manifest, read_manifest};

use rayon::prelude::*;

use crate::codec::{Codec, CodecKind, CompressedCorpus, ResidualCodec, check_unit};
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::OwnedElements;
use crate::search::{Rerank, Residency, SearchOptions, Searcher, reranked, searcher_for};
use crate::{Device, scorer_for};

pub const MANIFEST: &str = "index.json";
pub const CODES: &str = "codes.safetensors";
pub const IVF: &str = "ivf.safetensors";
pub const EXACT: &str = "exact.safetensors";
/// Tries of an opening that meets a compaction in place removing the files it was opening.
const OPEN_TRIES: usize = 8;

/// The search defaults an index records (and a search overrides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defaults {
    pub probe: Probe,
    /// Candidates of the exact second stage, where the index keeps the exact tokens.
    pub rerank_k: usize,
}

impl Default for Defaults {
    /// Measured on Cranfield (BENCHMARKS.md, "Index search on the CPU"): with these, IVF search
    /// reranked exactly keeps recall@10 against exact search at 0.95 or above.
    fn default() -> Self {
        Defaults {
            probe: Probe {
                nprobe: 8,
                ndocs: 256,
            },
            rerank_k: 100,
        }
    }
}

/// An index directory, opened: its codes (memory-mapped), IVF and exact tokens, and the
/// documents added and deleted since the build.
pub struct Index {
    dir: PathBuf,
    /// The generation opened (0: the build's; each compaction in place adds one), and the
    /// name of its update log.
    generation: u64,
    log: String,
    codes: CompressedCorpus,
    ivf: Ivf,
    exact: Option<Corpus>,
    defaults: Defaults,
    /// The documents deleted, and those added: their codes, exact tokens and IVF, numbered
    /// after the build's.
    updates: updates::Updates,
    /// The residual centroids as f32 `[K][d]`, made at the first IVF search.
    centroids: OnceLock<Vec<f32>>,
}

/// The searcher of an index's build (its documents `0..docs`), from [`Index::base_searcher`].
pub struct BaseSearcher<'a> {
    searcher: Box<dyn Searcher + 'a>,
    dir: PathBuf,
    docs: usize,
    generation: u64,
}

impl BaseSearcher<'_> {
    pub fn name(&self) -> String {
        self.searcher.name()
    }
    /// The generation of the index it searches the build of.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// The searcher itself (to search the build's documents alone, or to warm it up).
    pub fn searcher(&self) -> &dyn Searcher {
        self.searcher.as_ref()
    }
}

/// How to search an index; `None` fields take the index's defaults.
#[derive(Clone, Copy, Debug, Default)]
pub struct IndexSearch {
    /// Score every document on its codes instead of probing the IVF.
    pub exhaustive: bool,
    pub nprobe: Option<usize>,
    pub ndocs: Option<usize>,
    /// Candidates of the exact second stage (`Some(0)`: none). Without exact tokens in the
    /// index (or an exact corpus given to [`Index::searcher`]) there is no second stage.
    pub rerank_k: Option<usize>,
}

/// What an opening of an index has read, or what its directory holds: the generation, then
/// the bytes of that generation's update log. Ordered: a later state compares greater.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    pub generation: u64,
    pub log_bytes: u64,
}

impl Stamp {
    /// What the index in `dir` holds now: the manifest's generation and its log's length.
    pub fn on_disk(dir: &Path) -> Result<Stamp> {
        let m = read_manifest(dir)?;
        let log_bytes = std::fs::metadata(dir.join(&m.log)).map_or(0, |f| f.len());
        Ok(Stamp {
            generation: m.generation,
            log_bytes,
        })
    }
}

/// What taking the writer's lock does with an opening of an older generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stale {
    Reopen,
    Refuse,
}

impl Index {
    /// Open the index at `dir`: the manifest, then each file it names, checked against it.
    /// An opening that meets a compaction in place (the manifest naming a newer generation once
    /// it is done, whether or not the files it read are gone: the old log may have gone before
    /// it was read) opens the newer one.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        for _ in 0..OPEN_TRIES {
            let m = read_manifest(dir)?;
            let generation = m.generation;
            let opened = Self::open_manifest(dir, m);
            // The new manifest is in place before the old generation's files are removed, so
            // an unchanged generation here means every file read was that generation's.
            if read_manifest(dir)?.generation == generation {
                return opened;
            }
        }
        Err(Error::Argument(format!(
            "{}: compacted in place {OPEN_TRIES} times while it was being opened; try again",
            dir.display()
        )))
    }

    fn open_manifest(dir: &Path, m: Manifest) -> Result<Self> {
        let dir = dir.to_path_buf();
        let path = dir.join(MANIFEST);
        let bad = |msg: String| Error::format(&path, msg);
        let codes_path = dir.join(&m.codes);
        let codes = CompressedCorpus::open(&codes_path)?;
        let Codec::Residual(r) = codes.codec() else {
            return Err(bad(format!(
                "{} holds {} codes; an index holds residual codes",
                m.codes,
                codes.codec().describe()
            )));
        };
        let shape = (codes.len(), codes.num_tokens(), codes.dim(), r.nbits());
        let k = r.num_centroids();
        if shape != (m.documents, m.tokens, m.dim, m.nbits) || k != m.centroids {
            return Err(bad(format!(
                "{} holds {} documents, {} tokens, d = {}, nbits = {}, K = {k}; the manifest \
                 says {}, {}, {}, {}, {}",
                m.codes,
                shape.0,
                shape.1,
                shape.2,
                shape.3,
                m.documents,
                m.tokens,
                m.dim,
                m.nbits,
                m.centroids
            )));
        }
        let ivf = Ivf::open(dir.join(&m.ivf), k, codes.len())?;
        let exact = match &m.exact {
            None => None,
            Some(name) => {
                let e = Corpus::open(dir.join(name))?;
                if e.len() != codes.len() || e.dim() != codes.dim() {
                    return Err(bad(format!(
                        "{name} holds {} documents of d = {}, the codes {} of d = {}",
                        e.len(),
                        e.dim(),
                        codes.len(),
                        codes.dim()
                    )));
                }
                Some(e)
            }
        };
        let mut index = Index {
            dir,
            generation: m.generation,
            log: m.log,
            codes,
            ivf,
            exact,
            defaults: m.defaults,
            updates: updates::Updates::default(),
            centroids: OnceLock::new(),
        };
        // Readers leave a torn tail alone: a writer may be finishing it.
        index.catch_up(None)?;
        Ok(index)
    }

    /// Apply the log's records past those applied; with the writer's lock, cut a torn tail.
    fn catch_up(&mut self, writer: Option<&mut updates::Writer>) -> Result<()> {
        let shape = updates::Shape {
            base_docs: self.codes.len(),
            dim: self.codes.dim(),
            codec: residual(&self.codes)?,
            exact: self.exact.as_ref().map(Corpus::dtype),
        };
        let torn = self.updates.replay(&self.log_path(), shape)?;
        if let Some(w) = writer.filter(|_| torn > 0) {
            w.truncate(self.updates.applied)?;
        }
        Ok(())
    }

    /// Documents numbered so far: the build's and every added one, deleted ones included
    /// (numbers are never reused).
    pub fn len(&self) -> usize {
        self.updates.total(self.codes.len())
    }

    /// Whether the index numbers no document (never true: a build needs one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of document `j` (below [`Index::len`]): the build's ids (its numbers when it had
    /// none), then each added document's (its number when it was added without one).
    pub fn doc_id(&self, j: usize) -> String {
        let n = self.codes.len();
        if j >= n {
            return self
                .updates
                .doc_ids
                .get(j - n)
                .cloned()
                .unwrap_or_else(|| j.to_string());
        }
        self.codes
            .doc_ids()
            .map_or_else(|| j.to_string(), |ids| ids[j].clone())
    }

    /// The added documents' codes and exact tokens (numbered from the build's count on).
    pub fn added(&self) -> Option<(&CompressedCorpus, Option<&Corpus>)> {
        self.updates
            .added
            .as_ref()
            .map(|a| (&a.codes, a.exact.as_ref()))
    }

    /// Documents deleted since the build.
    pub fn deleted(&self) -> usize {
        self.updates.deleted_count()
    }

    /// Whether document `j` was deleted.
    pub fn is_deleted(&self, j: usize) -> bool {
        self.updates.deleted.get(j).copied().unwrap_or(false)
    }

    /// The live documents of `docs` (numbers), sorted, each once; an error naming the first
    /// number past [`Index::len`].
    fn live_of(&self, docs: &[usize]) -> Result<Vec<usize>> {
        let total = self.len();
        if let Some(&bad) = docs.iter().find(|&&j| j >= total) {
            return Err(Error::Argument(format!(
                "document {bad} does not exist: the index numbers {total} documents"
            )));
        }
        let mut live: Vec<usize> = docs
            .iter()
            .copied()
            .filter(|&j| !self.is_deleted(j))
            .collect();
        live.sort_unstable();
        live.dedup();
        Ok(live)
    }

    /// Add `docs` (unit-norm tokens, as the build's): encoded against the index's centroids and
    /// appended to its log, on disk before this returns. Their numbers, after every document
    /// before them (another process's adds included). Where the index's documents carry ids
    /// ([`Index::has_ids`]), the added ones must too.
    pub fn add(&mut self, docs: &Corpus) -> Result<std::ops::Range<usize>> {
        // Checked again once the log is read whole, under the writer's lock.
        self.names_free(docs.doc_ids())?;
        let r = residual(&self.codes)?;
        let d = self.codes.dim();
        if docs.dim() != d {
            return Err(Error::Argument(format!(
                "the documents have d = {}, the index d = {d}",
                docs.dim()
            )));
        }
        docs.check_finite()?;
        let tokens = docs.tokens().to_f32_vec();
        check_unit(docs, &tokens)?;
        let ids = r.assign(&tokens);
        let rb = r.row_bytes();
        let mut codes = vec![0u8; ids.len() * rb];
        codes
            .par_chunks_mut(rb)
            .zip(tokens.par_chunks_exact(d).zip(ids.par_iter()))
            .for_each(|(out, (x, &c))| r.encode_residual(x, c, out));
        let exact = self
            .exact
            .as_ref()
            .map(|e| match (docs.tokens().elements(), e.dtype()) {
                (el, dt) if el.dtype() == dt => OwnedElements::from_elements(el),
                (_, dt) => OwnedElements::from_f32(&tokens, dt),
            });
        let lengths: Vec<usize> = (0..docs.len()).map(|j| docs.doc_len(j)).collect();
        if let Some(bad) = docs
            .doc_ids()
            .and_then(|ids| ids.iter().find(|i| i.contains('\n')))
        {
            return Err(Error::Argument(format!(
                "document id {bad:?} holds a line break"
            )));
        }
        let record = updates::add_record(&lengths, &ids, &codes, exact.as_ref(), docs.doc_ids());
        let mut w = self.lock(Stale::Reopen)?;
        self.names_free(docs.doc_ids())?;
        let first = self.len();
        w.append(self.updates.applied, &record)?;
        self.catch_up(Some(&mut w))?;
        Ok(first..first + docs.len())
    }

    /// Delete documents by number: gone from every search once this returns (on disk). Numbers
    /// deleted before are left as they are; returns how many were newly deleted. A number
    /// past [`Index::len`] is an error, and nothing is deleted.
    pub fn delete(&mut self, docs: &[usize]) -> Result<usize> {
        let mut w = self.lock(Stale::Refuse)?;
        let new = self.live_of(docs)?;
        if new.is_empty() {
            return Ok(0);
        }
        w.append(self.updates.applied, &updates::delete_record(&new))?;
        self.catch_up(Some(&mut w))?;
        Ok(new.len())
    }

    /// Apply what other processes appended to the log since this one last read it, or open
    /// the newer generation a compaction in place made: whether anything changed.
    pub fn refresh(&mut self) -> Result<bool> {
        let before = self.stamp();
        if read_manifest(&self.dir)?.generation != self.generation {
            *self = Index::open(&self.dir)?;
        } else {
            self.catch_up(None)?;
        }
        Ok(self.stamp() != before)
    }

    /// Where this opening stands: its generation and the bytes of its log applied. A later
    /// state of the directory compares greater ([`Stamp::on_disk`]).
    pub fn stamp(&self) -> Stamp {
        Stamp {
            generation: self.generation,
            log_bytes: self.updates.applied,
        }
    }

    /// The generation opened: 0 for the build's, one more for each compaction in place.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The update log of the generation opened (it may not exist yet).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(&self.log)
    }

    /// The writer's lock on the log of the newest generation, with every record of it
    /// applied. An opening of an older generation (a compaction in place ran since it was
    /// made) opens the newest first with `Stale::Reopen`, and is refused with
    /// `Stale::Refuse` (document numbers given against the old generation name other
    /// documents now).
    fn lock(&mut self, stale: Stale) -> Result<updates::Writer> {
        loop {
            let mut w = updates::Writer::lock(&self.dir, &self.log)?;
            if read_manifest(&self.dir)?.generation == self.generation {
                self.catch_up(Some(&mut w))?;
                return Ok(w);
            }
            drop(w);
            match stale {
                Stale::Reopen => *self = Index::open(&self.dir)?,
                Stale::Refuse => {
                    return Err(Error::Argument(format!(
                        "{} was compacted since this opening read it (generation {} now, {} \
                         here): its documents were numbered again; refresh, then name them \
                         again",
                        self.dir.display(),
                        read_manifest(&self.dir)?.generation,
                        self.generation
                    )));
                }
            }
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn codes(&self) -> &CompressedCorpus {
        &self.codes
    }
    pub fn ivf(&self) -> &Ivf {
        &self.ivf
    }
    /// The exact tokens, when the index keeps them.
    pub fn exact(&self) -> Option<&Corpus> {
        self.exact.as_ref()
    }
    pub fn defaults(&self) -> Defaults {
        self.defaults
    }
}

/// The residual codec of an index's codes (checked at open).
fn residual(codes: &CompressedCorpus) -> Result<&ResidualCodec> {
    match codes.codec() {
        Codec::Residual(r) => Ok(r),
        other => Err(Error::Argument(format!(
            "an index holds residual codes, not {}",
            other.describe()
        ))),
    }
}

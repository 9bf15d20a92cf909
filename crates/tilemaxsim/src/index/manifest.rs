//! An index's manifest, `index.json`: its fields ([`Manifest`]), read and checked
//! ([`read_manifest`]), and written atomically and on disk ([`write_manifest`]); and
//! [`StampWatch`], which reads it again only when it changed. Version 1 is a
//! build's; version 2 (a compaction in place) adds the `generation` and the `log`'s name.

use std::path::{Path, PathBuf};

use super::updates::LOG;
use super::{Defaults, MANIFEST, Probe, Stamp};
use crate::error::{Error, Result};

const FORMAT: &str = "tilemaxsim.index";
/// The manifest of a build (generation 0); a compaction in place writes version 2.
const VERSION: u64 = 1;
const VERSION_GENERATIONS: u64 = 2;
/// The manifest is small; a larger file is not one of ours.
const MANIFEST_MAX_BYTES: u64 = 1 << 20;

/// The manifest's fields.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Manifest {
    pub documents: usize,
    pub tokens: usize,
    pub dim: usize,
    pub nbits: u32,
    pub centroids: usize,
    pub codes: String,
    pub ivf: String,
    pub exact: Option<String>,
    pub defaults: Defaults,
    /// 0 for a build; a compaction in place writes the next (version 2 of the manifest).
    pub generation: u64,
    /// The update log's file name.
    pub log: String,
}

impl Manifest {
    pub(crate) fn to_json(&self) -> String {
        let mut v = serde_json::json!({
            "format": FORMAT,
            "version": VERSION,
            "documents": self.documents,
            "tokens": self.tokens,
            "dim": self.dim,
            "nbits": self.nbits,
            "centroids": self.centroids,
            "codes": self.codes,
            "ivf": self.ivf,
            "exact": self.exact,
            "search": {
                "nprobe": self.defaults.probe.nprobe,
                "ndocs": self.defaults.probe.ndocs,
                "rerank_k": self.defaults.rerank_k,
            },
        });
        // A build's manifest stays version 1 (readable by earlier releases).
        if self.generation > 0 {
            v["version"] = VERSION_GENERATIONS.into();
            v["generation"] = self.generation.into();
            v["log"] = self.log.clone().into();
        }
        serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
    }
}

/// Read and check `dir/index.json`.
pub(super) fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST);
    let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::format(
            &path,
            "no index here (no manifest: not built, or its build did not finish)",
        ),
        _ => Error::io(&path, e),
    })?;
    if meta.len() > MANIFEST_MAX_BYTES {
        return Err(Error::format(&path, "too large for an index manifest"));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let bad = |m: String| Error::format(&path, m);
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let version = v["version"].as_u64();
    if v["format"] != FORMAT || !matches!(version, Some(VERSION | VERSION_GENERATIONS)) {
        return Err(bad(format!(
            "not a tilemaxsim index manifest of version {VERSION} or {VERSION_GENERATIONS} \
             (format {}, version {})",
            v["format"], v["version"]
        )));
    }
    let int = |v: &serde_json::Value, key: &str| -> Result<usize> {
        v[key]
            .as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .ok_or_else(|| bad(format!("`{key}` is missing or not a whole number")))
    };
    // A file name of the directory, no path: the manifest never points outside it.
    let name = |key: &str, required: bool| -> Result<Option<String>> {
        match &v[key] {
            serde_json::Value::Null if !required => Ok(None),
            serde_json::Value::String(s)
                if !s.is_empty()
                    && !s.starts_with('.')
                    && !s.contains(['/', '\\'])
                    && s != ".." =>
            {
                Ok(Some(s.clone()))
            }
            other => Err(bad(format!(
                "`{key}` must be a file name in the index directory, not {other}"
            ))),
        }
    };
    let s = &v["search"];
    let defaults = Defaults {
        probe: Probe {
            nprobe: int(s, "nprobe")?,
            ndocs: int(s, "ndocs")?,
        },
        rerank_k: int(s, "rerank_k")?,
    };
    if defaults.probe.nprobe == 0 || defaults.probe.ndocs == 0 || defaults.rerank_k == 0 {
        return Err(bad("search defaults must be at least 1".into()));
    }
    let nbits = int(&v, "nbits")?;
    if ![1, 2, 4].contains(&nbits) {
        return Err(bad(format!("nbits = {nbits}; 1, 2 or 4 expected")));
    }
    Ok(Manifest {
        documents: int(&v, "documents")?,
        tokens: int(&v, "tokens")?,
        dim: int(&v, "dim")?,
        nbits: nbits as u32,
        centroids: int(&v, "centroids")?,
        codes: name("codes", true)?.unwrap_or_default(),
        ivf: name("ivf", true)?.unwrap_or_default(),
        exact: name("exact", false)?,
        defaults,
        generation: if version == Some(VERSION) {
            0
        } else {
            v["generation"]
                .as_u64()
                .ok_or_else(|| bad("`generation` is missing or not a whole number".into()))?
        },
        log: if version == Some(VERSION) {
            LOG.into()
        } else {
            name("log", true)?.unwrap_or_default()
        },
    })
}

/// Write the manifest to a temporary name, flush it to disk, and rename it into place.
pub(super) fn write_manifest(dir: &Path, m: &Manifest) -> Result<()> {
    use std::io::Write;
    let path = dir.join(MANIFEST);
    let tmp = dir.join(format!(".{MANIFEST}.tmp{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(m.to_json().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(&path, e)
    })
}

/// [`Stamp::on_disk`] for a caller that looks often (a server, before each batch): the manifest
/// is read again when its file is another (a compaction in place renames a new one over it) and
/// at least every [`StampWatch::REREAD`] (a file system that reuses inodes, or one over a
/// network that caches a file's attributes), else a look is one `stat` of the manifest and one
/// of the log.
#[derive(Debug)]
pub struct StampWatch {
    dir: PathBuf,
    /// The manifest file last read, when, and its generation and log's name.
    read: Option<(FileKey, std::time::Instant, u64, String)>,
}

/// What tells one manifest file from another: where supported its device, inode and change
/// time, and its length and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileKey {
    device: u64,
    inode: u64,
    changed: (i64, i64),
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileKey {
    fn of(meta: &std::fs::Metadata) -> FileKey {
        #[cfg(unix)]
        let (device, inode, changed) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino(), (meta.ctime(), meta.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let (device, inode, changed) = (0, 0, (0, 0));
        FileKey {
            device,
            inode,
            changed,
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

impl StampWatch {
    /// The longest a look trusts a manifest read before.
    pub const REREAD: std::time::Duration = std::time::Duration::from_secs(1);

    pub fn new(dir: impl AsRef<Path>) -> StampWatch {
        StampWatch {
            dir: dir.as_ref().to_path_buf(),
            read: None,
        }
    }

    /// What the index holds now, as [`Stamp::on_disk`].
    pub fn look(&mut self) -> Result<Stamp> {
        let path = self.dir.join(MANIFEST);
        let key = std::fs::metadata(&path).map(|m| FileKey::of(&m)).ok();
        let (generation, log) = match (&self.read, key) {
            (Some((was, at, generation, log)), Some(key))
                if *was == key && at.elapsed() < Self::REREAD =>
            {
                (*generation, log)
            }
            _ => {
                // Read after its key: a manifest replaced in between is read again next time.
                let at = std::time::Instant::now();
                let m = read_manifest(&self.dir)?;
                let read = self
                    .read
                    .insert((key.unwrap_or(NO_KEY), at, m.generation, m.log));
                (read.2, &read.3)
            }
        };
        let log_bytes = std::fs::metadata(self.dir.join(log)).map_or(0, |f| f.len());
        Ok(Stamp {
            generation,
            log_bytes,
        })
    }
}

/// The key of a manifest that could not be looked at (never equal to a real file's).
const NO_KEY: FileKey = FileKey {
    device: u64::MAX,
    inode: u64::MAX,
    changed: (i64::MAX, i64::MAX),
    len: u64::MAX,
    modified: None,
};

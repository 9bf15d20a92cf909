//! Writing a safetensors file (every file this crate saves: corpora, compressed corpora, IVFs)
//! to a temporary name beside its path, then renaming it into place, so a failed write leaves
//! whatever was at the path as it was. The bytes are those of `safetensors::serialize_to_file`
//! (its header, its order of tensors: dtype alignment descending, then name), but the tensors'
//! bytes are written by every core, pieces at their offsets, where safetensors writes them one
//! after the other from one thread: a 3 GB codes file or a 20 GB exact corpus is written at the
//! page cache's speed, not one core's copy speed. A tensor may also be given in parts, one after
//! another ([`write_parts_atomically`]: a compaction writes the live documents' rows straight
//! from the files they lie in, never gathered in memory), or filled later, as its bytes are made
//! ([`Filling`]). A durable write ([`Durable::Yes`], an index build's files) also starts each
//! piece's write-back to disk as soon as it is written and flushes the file (fsync) before the
//! rename, so the disk works while the rest is written.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;

use rayon::prelude::*;
use safetensors::tensor::{Dtype, Metadata, TensorInfo, TensorView};

use crate::error::{Error, Result};

/// Bytes a core writes at a time.
const PIECE: usize = 32 << 20;

/// Whether a write waits for its bytes to be on disk (see the module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durable {
    No,
    Yes,
}

/// A tensor to write: its dtype, shape and bytes, the concatenation of `parts`.
pub(crate) struct Parts<'a> {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub parts: Vec<&'a [u8]>,
}

impl Parts<'_> {
    fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
}

/// 32-bit words as a file holds them (little-endian): as they lie in memory where that is
/// little-endian (no copy), converted elsewhere.
pub(crate) fn le_words(words: &[u32]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice(words).into()
    } else {
        words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<u8>>()
            .into()
    }
}

/// Write `tensors` and `metadata` as a safetensors file at `path`, atomically (see the module).
pub(crate) fn write_atomically(
    path: &Path,
    tensors: Vec<(String, TensorView<'_>)>,
    metadata: HashMap<String, String>,
    durable: Durable,
) -> Result<()> {
    let tensors = tensors
        .iter()
        .map(|(name, t)| {
            let parts = Parts {
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
                parts: vec![t.data()],
            };
            (name.clone(), parts)
        })
        .collect();
    write_parts_atomically(path, tensors, metadata, durable)
}

/// [`write_atomically`] of tensors given in parts; each tensor's bytes must fill its shape.
pub(crate) fn write_parts_atomically(
    path: &Path,
    tensors: Vec<(String, Parts<'_>)>,
    metadata: HashMap<String, String>,
    durable: Durable,
) -> Result<()> {
    Filling::create(path, tensors, &[], metadata, durable)?.finish()
}

/// A file being written (under its temporary name): laid out whole, its header and the tensors
/// given at creation written, the tensors named `later` (created with no parts) filled by
/// [`Filling::fill`] as their bytes are made (an index build writes its codes while the rest
/// of the corpus is encoded), then [`Filling::finish`]ed: flushed where durable and renamed into
/// place. Dropped unfinished, it removes its temporary file.
pub(crate) struct Filling {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    file: Option<std::fs::File>,
    durable: Durable,
    /// The `later` tensors.
    later: Vec<Later>,
}

/// A tensor of a [`Filling`] filled after its creation.
struct Later {
    name: String,
    /// Its bytes in the file.
    bytes: Range<usize>,
    /// The ranges of them filled so far (from the tensor's start).
    filled: Mutex<Vec<Range<usize>>>,
}

impl Filling {
    /// Lay out `tensors` at `path`'s temporary name (see the type); each tensor's bytes must fill
    /// its shape, but those named in `later`, which must have none yet.
    pub(crate) fn create(
        path: &Path,
        tensors: Vec<(String, Parts<'_>)>,
        later: &[&str],
        metadata: HashMap<String, String>,
        durable: Durable,
    ) -> Result<Self> {
        for (name, t) in &tensors {
            let want = t.shape.iter().product::<usize>() * t.dtype.bitsize() / 8;
            let has = t.len();
            let ok = if later.contains(&name.as_str()) {
                has == 0
            } else {
                has == want
            };
            if !ok {
                return Err(Error::format(
                    path,
                    format!(
                        "cannot write: tensor `{name}` of shape {:?} {:?} needs {want} bytes, has {has}",
                        t.shape, t.dtype,
                    ),
                ));
            }
        }
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The process and a serial number: two files being written to one path in one process
        // (a build's codes stay open while the corpus is encoded) never share a temporary name.
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut filling = Filling {
            path: path.to_path_buf(),
            tmp: path.with_file_name(format!(".{file_name}.tmp{}-{serial}", std::process::id())),
            file: None,
            durable,
            later: Vec::new(),
        };
        filling
            .lay_out(tensors, later, metadata)
            .map_err(|e| Error::format(path, format!("cannot write: {e}")))?;
        Ok(filling)
    }

    /// The header and the given tensors' pieces, in parallel; the `later` tensors' ranges noted.
    fn lay_out(
        &mut self,
        mut tensors: Vec<(String, Parts<'_>)>,
        later: &[&str],
        metadata: HashMap<String, String>,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        // safetensors' `prepare`: the order, the offsets, the header padded to 8 bytes.
        tensors.sort_by(|(ln, l), (rn, r)| r.dtype.cmp(&l.dtype).then(ln.cmp(rn)));
        let mut infos = Vec::with_capacity(tensors.len());
        let mut end = 0usize;
        for (name, t) in &tensors {
            let n = t.shape.iter().product::<usize>() * t.dtype.bitsize() / 8;
            infos.push((
                name.clone(),
                TensorInfo {
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                    data_offsets: (end, end + n),
                },
            ));
            end += n;
        }
        let mut header = header_json(metadata, infos.clone())?.into_bytes();
        header.resize(header.len().next_multiple_of(8), b' ');
        let base = 8 + header.len();
        let file = std::fs::File::create(&self.tmp)?;
        file.set_len((base + end) as u64)?;
        self.file = Some(file);
        let len = (header.len() as u64).to_le_bytes();
        let mut pieces: Vec<(usize, &[u8])> = vec![(0, &len), (8, &header)];
        for ((name, t), (_, info)) in tensors.iter().zip(&infos) {
            let (from, to) = info.data_offsets;
            if later.contains(&name.as_str()) {
                self.later.push(Later {
                    name: name.clone(),
                    bytes: base + from..base + to,
                    filled: Mutex::new(Vec::new()),
                });
                continue;
            }
            let mut at = base + from;
            for piece in t.parts.iter().flat_map(|p| p.chunks(PIECE)) {
                pieces.push((at, piece));
                at += piece.len();
            }
        }
        pieces
            .par_iter()
            .try_for_each(|&(at, bytes)| self.write_piece(at, bytes))?;
        Ok(())
    }

    fn write_piece(&self, at: usize, bytes: &[u8]) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Err(std::io::ErrorKind::NotFound.into());
        };
        write_at(file, bytes, at as u64)?;
        if self.durable == Durable::Yes {
            start_writeback(file, at as u64, bytes.len() as u64);
        }
        Ok(())
    }

    /// Write `bytes` at byte `at` of the `later` tensor `name` (in pieces, in parallel). Each
    /// byte is to be filled once: [`Filling::finish`] checks that the ranges filled cover each
    /// tensor without overlap.
    pub(crate) fn fill(&self, name: &str, at: usize, bytes: &[u8]) -> Result<()> {
        let Some(Later {
            bytes: range,
            filled,
            ..
        }) = self.later.iter().find(|l| l.name == name)
        else {
            return Err(Error::format(
                &self.path,
                format!("cannot write: no tensor `{name}` is left to fill"),
            ));
        };
        if at + bytes.len() > range.len() {
            return Err(Error::format(
                &self.path,
                format!(
                    "cannot write: bytes {at}..{} of tensor `{name}`, which has {}",
                    at + bytes.len(),
                    range.len()
                ),
            ));
        }
        bytes
            .par_chunks(PIECE)
            .enumerate()
            .try_for_each(|(i, piece)| self.write_piece(range.start + at + i * PIECE, piece))
            .map_err(|e| Error::format(&self.path, format!("cannot write: {e}")))?;
        filled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(at..at + bytes.len());
        Ok(())
    }

    /// Every `later` tensor filled: flush the file (where durable) and rename it into place.
    pub(crate) fn finish(mut self) -> Result<()> {
        for Later {
            name,
            bytes: range,
            filled,
        } in &mut self.later
        {
            let filled = filled
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            filled.sort_by_key(|r| r.start);
            // The first byte not filled in order: a hole, an overlap, or the end.
            let mut next = 0;
            for r in filled.iter().filter(|r| !r.is_empty()) {
                if r.start != next {
                    break;
                }
                next = r.end;
            }
            if next != range.len() {
                return Err(Error::format(
                    &self.path,
                    format!(
                        "cannot write: tensor `{name}` of {} bytes is filled in order up to byte {next} only",
                        range.len()
                    ),
                ));
            }
        }
        if let Some(file) = self.file.take()
            && self.durable == Durable::Yes
        {
            file.sync_all()
                .map_err(|e| Error::format(&self.path, format!("cannot write: {e}")))?;
        }
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        // Renamed: nothing is left for `drop` to remove.
        self.tmp = std::path::PathBuf::new();
        Ok(())
    }
}

impl Drop for Filling {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// safetensors' header (`Metadata`'s serialization: `__metadata__` first, then the tensors in
/// file order), but the metadata's keys sorted, where safetensors writes them in a `HashMap`'s
/// random order: the same tensors and metadata give the same bytes every time.
fn header_json(
    metadata: HashMap<String, String>,
    infos: Vec<(String, TensorInfo)>,
) -> std::result::Result<String, Box<dyn std::error::Error>> {
    let tensors = serde_json::to_string(&Metadata::new(None, infos)?)?;
    let sorted: std::collections::BTreeMap<_, _> = metadata.into_iter().collect();
    let rest = tensors.strip_prefix('{').unwrap_or(&tensors);
    let comma = if rest == "}" { "" } else { "," };
    Ok(format!(
        "{{\"__metadata__\":{}{comma}{rest}",
        serde_json::to_string(&sorted)?
    ))
}

/// Ask the kernel to start writing `len` bytes at `at` of `file` to disk now, without waiting
/// (Linux; elsewhere the final fsync does it all). A failure is left to that fsync to report.
#[cfg(target_os = "linux")]
fn start_writeback(file: &std::fs::File, at: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on an open descriptor; it reads no memory of ours.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            at as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &std::fs::File, _at: u64, _len: u64) {}

#[cfg(unix)]
fn write_at(file: &std::fs::File, bytes: &[u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, at)
}

#[cfg(windows)]
fn write_at(file: &std::fs::File, mut bytes: &[u8], mut at: u64) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(file, bytes, at)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::Dtype;

    #[test]
    fn the_bytes_are_safetensors_own() {
        // Tensors of every alignment and odd sizes, one of them several pieces long, in an order
        // safetensors sorts: the file must equal `safetensors::serialize`'s bytes.
        let big: Vec<u8> = (0..PIECE * 2 + 7).map(|i| (i * 31 % 251) as u8).collect();
        let small: Vec<u8> = (0..24u8).collect();
        let odd = [1u8, 2, 3];
        let make = || {
            vec![
                (
                    "residuals".to_string(),
                    TensorView::new(Dtype::U8, vec![big.len()], &big).unwrap(),
                ),
                (
                    "offsets".to_string(),
                    TensorView::new(Dtype::I64, vec![3], &small).unwrap(),
                ),
                (
                    "a_f16".to_string(),
                    TensorView::new(Dtype::F16, vec![2, 6], &small).unwrap(),
                ),
                (
                    "codes".to_string(),
                    TensorView::new(Dtype::I32, vec![6], &small).unwrap(),
                ),
                (
                    "doc_ids".to_string(),
                    TensorView::new(Dtype::U8, vec![3], &odd).unwrap(),
                ),
            ]
        };
        let meta = HashMap::from([("format".to_string(), "test".to_string())]);
        let want = safetensors::serialize(make(), Some(meta.clone())).unwrap();
        // No tensors: the metadata alone, as safetensors writes it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.safetensors");
        write_atomically(&path, Vec::new(), meta.clone(), Durable::No).unwrap();
        let alone = safetensors::serialize(Vec::<(String, TensorView)>::new(), Some(meta.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), alone.unwrap());
        // Several keys: sorted, so the bytes are the same every time (a new map each time:
        // a new random order); safetensors reads them.
        let keys = || (0..12).map(|i| (format!("k{i}"), i.to_string())).collect();
        let bytes = |name: &str| {
            let path = dir.path().join(name);
            write_atomically(&path, make(), keys(), Durable::No).unwrap();
            std::fs::read(&path).unwrap()
        };
        let first = bytes("a.safetensors");
        assert_eq!(bytes("b.safetensors"), first);
        let (_, read) = safetensors::SafeTensors::read_metadata(&first).unwrap();
        assert_eq!(read.metadata().clone(), Some(keys()));
        // Durable or not: the same bytes, and nothing left beside them.
        for durable in [Durable::No, Durable::Yes] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.safetensors");
            write_atomically(&path, make(), meta.clone(), durable).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), want, "{durable:?}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
    }

    #[test]
    fn a_tensor_in_parts_is_the_tensor_whole() {
        let data: Vec<u8> = (0..PIECE + 1000).map(|i| (i % 253) as u8).collect();
        let whole = TensorView::new(Dtype::U8, vec![data.len()], &data).unwrap();
        let want =
            safetensors::serialize(vec![("x".to_string(), whole)], Some(HashMap::new())).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.safetensors");
        // Uneven parts, an empty one, one longer than a piece.
        let parts = vec![
            &data[..7],
            &data[7..7],
            &data[7..PIECE + 9],
            &data[PIECE + 9..],
        ];
        let t = Parts {
            dtype: Dtype::U8,
            shape: vec![data.len()],
            parts,
        };
        write_parts_atomically(&path, vec![("x".into(), t)], HashMap::new(), Durable::No).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), want);
        // Parts that do not fill the shape: refused, nothing written.
        let short = Parts {
            dtype: Dtype::F32,
            shape: vec![3],
            parts: vec![&data[..8]],
        };
        let other = dir.path().join("q.safetensors");
        let err = write_parts_atomically(
            &other,
            vec![("y".into(), short)],
            HashMap::new(),
            Durable::No,
        );
        assert!(
            err.unwrap_err()
                .to_string()
                .contains("needs 12 bytes, has 8")
        );
        assert!(!other.exists());
    }

    #[test]
    fn tensors_filled_later_in_any_order_are_the_tensors_whole() {
        let big: Vec<u8> = (0..PIECE + 4099).map(|i| (i * 7 % 249) as u8).collect();
        let words: Vec<u8> = (0..40u8).collect();
        let head = [9u8; 16];
        let views = || {
            vec![
                (
                    "big".to_string(),
                    TensorView::new(Dtype::U8, vec![big.len()], &big).unwrap(),
                ),
                (
                    "words".to_string(),
                    TensorView::new(Dtype::I32, vec![10], &words).unwrap(),
                ),
                (
                    "head".to_string(),
                    TensorView::new(Dtype::I64, vec![2], &head).unwrap(),
                ),
            ]
        };
        let want = safetensors::serialize(views(), Some(HashMap::new())).unwrap();
        let later = |dtype, shape| Parts {
            dtype,
            shape,
            parts: Vec::new(),
        };
        let lay_out = |path: &Path| {
            let tensors = vec![
                ("big".to_string(), later(Dtype::U8, vec![big.len()])),
                ("words".to_string(), later(Dtype::I32, vec![10])),
                (
                    "head".to_string(),
                    Parts {
                        dtype: Dtype::I64,
                        shape: vec![2],
                        parts: vec![&head],
                    },
                ),
            ];
            Filling::create(
                path,
                tensors,
                &["big", "words"],
                HashMap::new(),
                Durable::Yes,
            )
            .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.safetensors");
        let f = lay_out(&path);
        // Nothing at the path until it is finished.
        assert!(!path.exists());
        // Runs out of order, one longer than a piece.
        f.fill("words", 20, &words[20..]).unwrap();
        f.fill("big", 5000, &big[5000..]).unwrap();
        f.fill("words", 0, &words[..20]).unwrap();
        f.fill("big", 0, &big[..5000]).unwrap();
        // Past the end, or a tensor that was given whole: refused.
        let past = f.fill("words", 36, &words[..8]).unwrap_err().to_string();
        assert!(
            past.contains("bytes 36..44 of tensor `words`, which has 40"),
            "{past}"
        );
        assert!(f.fill("head", 0, &head).is_err());
        f.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), want);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Not every byte filled: refused at finish, and nothing left behind; nor after a drop.
        let other = dir.path().join("g.safetensors");
        let f = lay_out(&other);
        f.fill("big", 0, &big).unwrap();
        let short = f.finish().unwrap_err().to_string();
        assert!(
            short.contains("tensor `words` of 40 bytes is filled in order up to byte 0 only"),
            "{short}"
        );
        // Every byte counted, but one range twice and another never: refused too.
        let f = lay_out(&other);
        f.fill("big", 0, &big).unwrap();
        f.fill("words", 0, &words[..20]).unwrap();
        f.fill("words", 10, &words[10..30]).unwrap();
        let hole = f.finish().unwrap_err().to_string();
        assert!(hole.contains("up to byte 20 only"), "{hole}");
        drop(lay_out(&other));
        assert!(!other.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("t.safetensors");
        let data = [0u8; 8];
        let t = vec![(
            "x".to_string(),
            TensorView::new(Dtype::U8, vec![8], &data).unwrap(),
        )];
        assert!(write_atomically(&path, t, HashMap::new(), Durable::Yes).is_err());
        assert!(!path.exists());
    }
}

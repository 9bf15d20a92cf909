//! Live updates of an index: documents added (encoded against its centroids, never retrained)
//! and documents deleted, kept in `updates.log` beside the files the build wrote. The log is
//! append-only; each record is
//!
//! `"TMSU"` · kind (1 byte: 1 add, 2 delete) · 3 zero bytes · payload length (u64 LE) ·
//! CRC-32 of the kind, the length and the payload (u32 LE) · payload
//!
//! An add's payload: documents `n` (u64), tokens `T` (u64), the exact tokens' dtype (1 byte:
//! 0 none, 1 f32, 2 f16, 3 bf16), whether ids follow (1 byte) and 6 zero bytes, then `n`
//! lengths (u64), `T` centroid ids (u32), the `T` rows of residual codes, the exact tokens
//! `[T, d]` when the index keeps them, and the documents' ids (UTF-8, one per line) when given.
//! A delete's: `m` (u64) and `m` document numbers (u64).
//!
//! A record is acknowledged once it is on disk (`fsync`): it then survives a crash. Documents
//! are numbered in order of arrival (the build's `0..N`, then each add's), and a number is
//! never reused: a deleted document leaves a gap. A record cut short by a crash (the tail of
//! the file: too short for its header or its payload, or failing its CRC with nothing after
//! it, or zeros to the end) was never acknowledged; readers ignore it and the next writer cuts
//! it off. Damage
//! anywhere else is an error: acknowledged updates are never dropped silently.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::ivf::Ivf;
use crate::codec::{Codec, CompressedCorpus, ResidualCodec};
use crate::corpus::Corpus;
use crate::error::{Error, Result};
use crate::matrix::{DType, OwnedElements};

pub const LOG: &str = "updates.log";
const MAGIC: &[u8; 4] = b"TMSU";
const HEADER: usize = 20;
const ADD: u8 = 1;
const DELETE: u8 = 2;

/// What the log holds beyond the build: the added documents (as one segment, appended to
/// record by record) and the set of deleted document numbers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Updates {
    /// The added documents, the one copy of them in memory; `None` before the first add.
    pub added: Option<Added>,
    /// Each added document's id: the one given, or its number.
    pub doc_ids: Vec<String>,
    /// Whether some add gave its documents ids (the others are named by their numbers).
    pub any_ids: bool,
    /// Deleted document numbers (of the build's and the added ones), `deleted[j]`.
    pub deleted: Vec<bool>,
    /// Bytes of the log read and applied (the next record starts here).
    pub applied: u64,
}

/// The documents added since the build, as a segment of their own (numbered from 0 here, after
/// the build's in the index): their codes (with their centroid ids), their exact tokens where
/// the index keeps them, and their IVF.
#[derive(Clone, Debug)]
pub(crate) struct Added {
    pub codes: CompressedCorpus,
    pub exact: Option<Corpus>,
    pub ivf: Ivf,
}

/// An add's payload, parsed and checked against the index's shape (its arrays still in the
/// log's bytes where they can be).
struct AddPayload<'a> {
    lengths: Vec<usize>,
    ids: Vec<u32>,
    codes: &'a [u8],
    /// `[T, d]` in the index's exact dtype, little-endian.
    exact: Option<&'a [u8]>,
    doc_ids: Vec<String>,
    has_ids: bool,
}

/// The shape of the index the log belongs to, which every record must fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape<'a> {
    pub base_docs: usize,
    pub dim: usize,
    pub codec: &'a ResidualCodec,
    /// The exact tokens' dtype, where the index keeps them.
    pub exact: Option<DType>,
}

impl Updates {
    /// Documents in all: the build's and the added ones.
    pub fn total(&self, base_docs: usize) -> usize {
        base_docs + self.added_docs()
    }

    /// Documents added.
    pub fn added_docs(&self) -> usize {
        self.added.as_ref().map_or(0, |a| a.codes.len())
    }

    pub fn deleted_count(&self) -> usize {
        self.deleted.iter().filter(|&&d| d).count()
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_none() && !self.deleted.contains(&true)
    }

    /// Apply the records of the log at `path` from byte `self.applied` on. Returns the length
    /// of a torn tail left unapplied (0 when the log ends with a whole record).
    pub fn replay(&mut self, path: &Path, shape: Shape<'_>) -> Result<u64> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(Error::io(path, e)),
        };
        file.seek(SeekFrom::Start(self.applied))
            .map_err(|e| Error::io(path, e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| Error::io(path, e))?;
        let (base, mut at) = (self.applied, 0usize);
        while at < bytes.len() {
            let start = base + at as u64;
            // The tail from here, as read: a writer may be appending while this reads, so the
            // file's length from before the read is no bound on it.
            let torn = Ok((bytes.len() - at) as u64);
            let Some(head) = bytes.get(at..at + HEADER) else {
                return torn;
            };
            if &head[..4] != MAGIC || head[5..8] != [0, 0, 0] {
                if bytes[at..].iter().all(|&b| b == 0) {
                    return torn; // the file grew, its bytes never landed
                }
                return Err(Error::format(
                    path,
                    format!("the update record at byte {start} has a damaged header"),
                ));
            }
            let kind = head[4];
            let size = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
            let crc = u32::from_le_bytes(head[16..20].try_into().expect("4 bytes"));
            let end = (at as u64 + HEADER as u64).saturating_add(size);
            if end > bytes.len() as u64 {
                return torn; // cut short: never acknowledged
            }
            let payload = &bytes[at + HEADER..end as usize];
            if checksum(kind, size, payload) != crc {
                if end == bytes.len() as u64 {
                    return torn; // the last record, written in part
                }
                return Err(Error::format(
                    path,
                    format!("the update record at byte {start} fails its checksum"),
                ));
            }
            let bad =
                |m: String| Error::format(path, format!("update record at byte {start}: {m}"));
            match kind {
                ADD => self.apply_add(payload, shape).map_err(bad)?,
                DELETE => self.apply_delete(payload, shape).map_err(bad)?,
                k => return Err(bad(format!("unknown kind {k}"))),
            }
            at = end as usize;
            self.applied = base + end;
        }
        Ok(0)
    }

    /// Apply an add: its payload checked in full first, then its documents appended to the
    /// segment. An error leaves everything as it was.
    fn apply_add(&mut self, p: &[u8], shape: Shape<'_>) -> std::result::Result<(), String> {
        let add = self.parse_add(p, shape)?;
        let first = self.added_docs();
        let offsets: Vec<usize> = std::iter::once(0)
            .chain(add.lengths.iter().scan(0, |t, &l| {
                *t += l;
                Some(*t)
            }))
            .collect();
        match &mut self.added {
            // The segment grows in place (time linear in the add); a failed step rolls back
            // the ones before it.
            Some(a) => {
                let docs = a.codes.len();
                a.codes
                    .append(&offsets, add.codes, Some(&add.ids))
                    .map_err(|e| e.to_string())?;
                let grown = match (&mut a.exact, add.exact) {
                    (Some(exact), Some(bytes)) => exact.append(&offsets, bytes),
                    (None, None) => Ok(()),
                    _ => Err(Error::Argument(
                        "exact tokens added to a segment without them, or the reverse".into(),
                    )),
                }
                .and_then(|()| a.ivf.append(&add.ids, &offsets, first));
                if let Err(e) = grown {
                    a.codes.truncate_docs(docs);
                    if let Some(exact) = &mut a.exact {
                        exact.truncate_docs(docs);
                    }
                    return Err(e.to_string());
                }
            }
            None => {
                let codes = CompressedCorpus::new(
                    Codec::Residual(shape.codec.clone()),
                    shape.dim,
                    offsets.clone(),
                    add.codes.to_vec(),
                    Some(add.ids.clone()),
                )
                .map_err(|e| e.to_string())?;
                let exact = add
                    .exact
                    .map(|bytes| first_exact(shape, &offsets, bytes))
                    .transpose()
                    .map_err(|e| e.to_string())?;
                let mut ivf = Ivf::empty(shape.codec.num_centroids());
                ivf.append(&add.ids, &offsets, 0)
                    .map_err(|e| e.to_string())?;
                self.added = Some(Added { codes, exact, ivf });
            }
        }
        self.doc_ids.extend(add.doc_ids);
        self.any_ids |= add.has_ids;
        self.deleted.resize(self.total(shape.base_docs), false);
        Ok(())
    }

    /// An add's payload, parsed and checked; nothing changes.
    fn parse_add<'p>(
        &self,
        p: &'p [u8],
        shape: Shape<'_>,
    ) -> std::result::Result<AddPayload<'p>, String> {
        let mut r = Reader(p);
        let (n, t) = (r.count()?, r.count()?);
        let flags = r.take(8)?;
        let has_ids = match flags[1] {
            0 => false,
            1 => true,
            x => return Err(format!("bad ids flag {x}")),
        };
        let dtype = match flags[0] {
            0 => None,
            1 => Some(DType::F32),
            2 => Some(DType::F16),
            3 => Some(DType::BF16),
            x => return Err(format!("unknown exact dtype {x}")),
        };
        if dtype != shape.exact {
            return Err(format!(
                "exact tokens {dtype:?}, but the index keeps {:?}",
                shape.exact
            ));
        }
        let lengths = (0..n).map(|_| r.count()).collect::<Result<Vec<_>, _>>()?;
        let sum = lengths.iter().try_fold(0usize, |a, &l| a.checked_add(l));
        if n == 0 || lengths.contains(&0) || sum != Some(t) {
            return Err(format!(
                "{n} documents whose lengths do not sum to {t} tokens"
            ));
        }
        let k = shape.codec.num_centroids();
        let ids: Vec<u32> = r
            .take(t.checked_mul(4).ok_or("too many tokens")?)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        if let Some(bad) = ids.iter().find(|&&c| c as usize >= k) {
            return Err(format!("centroid id {bad} out of range (K = {k})"));
        }
        let rb = shape.codec.row_bytes();
        let codes = r.take(t.checked_mul(rb).ok_or("too many tokens")?)?;
        let exact = match dtype {
            None => None,
            Some(d) => {
                let size = t
                    .checked_mul(shape.dim)
                    .and_then(|x| x.checked_mul(d.size()))
                    .ok_or("too many tokens")?;
                Some(r.take(size)?)
            }
        };
        let first = self.total(shape.base_docs);
        let doc_ids: Vec<String> = if has_ids {
            let text = std::str::from_utf8(r.take(r.0.len())?).map_err(|e| format!("ids: {e}"))?;
            text.split('\n').map(str::to_owned).collect()
        } else {
            (first..first + n).map(|j| j.to_string()).collect()
        };
        if doc_ids.len() != n || !r.0.is_empty() {
            return Err(format!(
                "{} ids for {n} documents, or bytes past its end",
                doc_ids.len()
            ));
        }
        Ok(AddPayload {
            lengths,
            ids,
            codes,
            exact,
            doc_ids,
            has_ids,
        })
    }

    fn apply_delete(&mut self, p: &[u8], shape: Shape<'_>) -> std::result::Result<(), String> {
        let mut r = Reader(p);
        let m = r.count()?;
        let total = self.total(shape.base_docs);
        self.deleted.resize(total, false);
        let docs = (0..m).map(|_| r.count()).collect::<Result<Vec<_>, _>>()?;
        if !r.0.is_empty() {
            return Err(format!("{} bytes past its end", r.0.len()));
        }
        if let Some(bad) = docs.iter().find(|&&j| j >= total) {
            return Err(format!("document {bad} out of range ({total} documents)"));
        }
        for j in docs {
            self.deleted[j] = true;
        }
        Ok(())
    }
}

/// The added segment's first exact tokens: `bytes` (`[T, d]`, native-endian, in the index's
/// exact dtype) as a corpus of documents at `offsets`.
fn first_exact(shape: Shape<'_>, offsets: &[usize], bytes: &[u8]) -> Result<Corpus> {
    fn values<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
        let mut v = vec![T::zeroed(); bytes.len() / size_of::<T>()];
        bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
        v
    }
    let tokens = match shape.exact {
        Some(DType::F32) => OwnedElements::F32(values(bytes)),
        Some(DType::F16) => OwnedElements::F16(values(bytes)),
        Some(DType::BF16) => OwnedElements::BF16(values(bytes)),
        None => {
            return Err(Error::Argument(
                "exact tokens added to an index that keeps none".into(),
            ));
        }
    };
    Corpus::new(tokens, shape.dim, offsets.to_vec())
}

/// A bounds-checked cursor over a payload.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err("shorter than its counts say".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn count(&mut self) -> std::result::Result<usize, String> {
        let b = self.take(8)?;
        usize::try_from(u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .map_err(|_| "a count past this machine's address space".into())
    }
}

fn checksum(kind: u8, size: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(&size.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// An add's payload (see the module's text).
pub(crate) fn add_record(
    lengths: &[usize],
    ids: &[u32],
    codes: &[u8],
    exact: Option<&OwnedElements>,
    doc_ids: Option<&[String]>,
) -> Vec<u8> {
    let tag = match exact {
        None => 0u8,
        Some(OwnedElements::F32(_)) => 1,
        Some(OwnedElements::F16(_)) => 2,
        Some(OwnedElements::BF16(_)) => 3,
    };
    let mut p = Vec::with_capacity(24 + 8 * lengths.len() + 4 * ids.len() + codes.len());
    p.extend((lengths.len() as u64).to_le_bytes());
    p.extend((ids.len() as u64).to_le_bytes());
    p.extend([tag, u8::from(doc_ids.is_some()), 0, 0, 0, 0, 0, 0]);
    p.extend(lengths.iter().flat_map(|&l| (l as u64).to_le_bytes()));
    p.extend(ids.iter().flat_map(|c| c.to_le_bytes()));
    p.extend_from_slice(codes);
    match exact {
        None => {}
        Some(OwnedElements::F32(v)) => p.extend_from_slice(bytemuck::cast_slice(v)),
        Some(OwnedElements::F16(v)) => p.extend_from_slice(bytemuck::cast_slice(v)),
        Some(OwnedElements::BF16(v)) => p.extend_from_slice(bytemuck::cast_slice(v)),
    }
    if let Some(names) = doc_ids {
        p.extend_from_slice(names.join("\n").as_bytes());
    }
    record(ADD, p)
}

/// A delete's payload.
pub(crate) fn delete_record(docs: &[usize]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + 8 * docs.len());
    p.extend((docs.len() as u64).to_le_bytes());
    p.extend(docs.iter().flat_map(|&j| (j as u64).to_le_bytes()));
    record(DELETE, p)
}

fn record(kind: u8, payload: Vec<u8>) -> Vec<u8> {
    let size = payload.len() as u64;
    let mut r = Vec::with_capacity(HEADER + payload.len());
    r.extend_from_slice(MAGIC);
    r.extend([kind, 0, 0, 0]);
    r.extend(size.to_le_bytes());
    r.extend(checksum(kind, size, &payload).to_le_bytes());
    r.extend(payload);
    r
}

/// The log opened for writing, locked against other writers (in this process or another)
/// until dropped.
pub(crate) struct Writer {
    path: PathBuf,
    file: File,
}

impl Writer {
    /// Open (creating it) and lock the log `name` of the index in `dir`.
    pub fn lock(dir: &Path, name: &str) -> Result<Self> {
        let path = dir.join(name);
        let created = !path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        file.lock().map_err(|e| Error::io(&path, e))?;
        if created {
            // The new file's name must survive a crash too.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| Error::io(dir, e))?;
        }
        Ok(Writer { path, file })
    }

    /// Cut the log to `len` bytes (a torn tail that was never acknowledged).
    pub fn truncate(&mut self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .and_then(|()| self.file.sync_all())
            .map_err(|e| Error::io(&self.path, e))
    }

    /// Append `record` at byte `at` (the end of the whole records) and wait until it is on
    /// disk: from then on it is acknowledged.
    pub fn append(&mut self, at: u64, record: &[u8]) -> Result<()> {
        (|| {
            self.file.seek(SeekFrom::Start(at))?;
            self.file.write_all(record)?;
            self.file.sync_data()
        })()
        .map_err(|e| Error::io(&self.path, e))
    }
}

impl super::Index {
    /// Whether documents carry ids of their own (the build's or an add's); else each is named
    /// by its number.
    pub fn has_ids(&self) -> bool {
        self.codes.doc_ids().is_some() || self.updates.any_ids
    }

    /// Refuse an add's names (`ids`, or none) where another document goes by one already:
    /// - an id a live document carries (a deleted one's may be taken again: a compaction drops
    ///   the deleted document);
    /// - documents without ids go by their numbers (and keep them as ids through a compaction),
    ///   so ids given where the index has documents without ids may not be those numbers;
    /// - where its documents carry ids, an add without ids would name its documents by numbers
    ///   that may be ids.
    pub(super) fn names_free(&self, ids: Option<&[String]>) -> Result<()> {
        let Some(ids) = ids else {
            if self.has_ids() {
                return Err(Error::Argument(
                    "the index's documents carry ids: give every added document one".into(),
                ));
            }
            return Ok(());
        };
        if let Some((id, j)) = ids.iter().find_map(|id| {
            let j = id.parse::<usize>().ok()?;
            (j < self.len() && self.doc_id(j) == *id).then_some((id, j))
        }) {
            return Err(Error::Argument(format!(
                "the id {id:?} is document {j}'s name already (documents added without ids go \
                 by their numbers)"
            )));
        }
        match self.live_id_among(ids) {
            Some((j, id)) => Err(Error::Argument(format!(
                "the id {id:?} is live document {j}'s already (ids are unique; delete it first \
                 to give its id to a new document)"
            ))),
            None => Ok(()),
        }
    }

    /// The first live document carrying one of `ids` as its own id (the build's or an add's),
    /// and that id: every stored id looked up in a set of `ids`, on every core.
    fn live_id_among(&self, ids: &[String]) -> Option<(usize, &str)> {
        use rayon::prelude::*;
        let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        let n = self.codes.len();
        let found = |j: usize, id: &'_ String| {
            (!self.is_deleted(j) && wanted.contains(id.as_str())).then_some(j)
        };
        let base = self.codes.doc_ids().unwrap_or_default();
        let added = &self.updates.doc_ids;
        let j = base
            .par_iter()
            .enumerate()
            .find_map_first(|(j, id)| found(j, id))
            .or_else(|| {
                let at = |(i, id)| found(n + i, id);
                added.par_iter().enumerate().find_map_first(at)
            })?;
        Some((j, if j < n { &base[j] } else { &added[j - n] }))
    }
}

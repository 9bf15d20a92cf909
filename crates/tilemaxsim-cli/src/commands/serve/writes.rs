//! The write endpoints of an index served live: `POST /v1/index/add`, `/v1/index/delete` and
//! `/v1/index/compact` (the index compacted in place: its next generation, the documents
//! numbered from 0 again, ids kept).
//! A write runs on a blocking thread, through the server's own handle on the index (opened at
//! its first write, one writer at a time), and is answered once its record is on disk: it then
//! survives a crash, and the engine serves with it (the engine takes it before its next batch,
//! as it takes other processes' updates, and is woken for it when idle): a search or
//! `/v1/info` sent after the answer sees it. Searches never wait for the encoding or the disk.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tilemaxsim::index::{Index, Stamp};
use tilemaxsim::{Corpus, Matrix};

use super::api::{self, QueryIn};
use super::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddRequest {
    /// Each document: an `id` (optional; without one its number names it) and its tokens, in
    /// a query's forms (`embeddings` rows, or `embeddings_b64` with `dtype` and `shape`).
    pub documents: Vec<QueryIn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    /// Documents by id: every document that carries one of these ids.
    pub ids: Option<Vec<String>>,
    /// Documents by number (the `index` of a hit).
    pub indices: Option<Vec<usize>>,
    /// The generation the numbers are of (a search answer's `generation`): refused when the
    /// index was compacted since, as its numbers then name other documents.
    pub generation: Option<u64>,
}

#[derive(Serialize)]
pub struct Added {
    pub doc: String,
    pub index: usize,
}

#[derive(Serialize)]
pub struct AddResponse {
    pub added: Vec<Added>,
    /// Live documents after this write (another process's updates included).
    pub documents: usize,
}

#[derive(Serialize)]
pub struct CompactResponse {
    /// Live documents, now numbered `0..documents`.
    pub documents: usize,
    /// Deleted documents left out.
    pub removed: usize,
    pub tokens: usize,
    /// The index's generation now.
    pub generation: u64,
}

#[derive(Serialize)]
pub struct DeleteResponse {
    /// Documents newly deleted.
    pub deleted: usize,
    /// Documents named that were deleted already.
    pub already: usize,
    pub documents: usize,
}

/// The server's handle on the index it serves, for writes.
pub struct Writer {
    dir: PathBuf,
    state: Mutex<Option<Open>>,
}

/// The index opened for writing, and its ids' numbers (made at the first delete by id).
struct Open {
    index: Index,
    numbers: Option<Numbers>,
}

/// Document numbers by id, for the documents numbered `0..upto` in one generation.
struct Numbers {
    by_id: HashMap<String, Vec<usize>>,
    upto: usize,
    generation: u64,
}

impl Writer {
    pub fn new(dir: PathBuf) -> Self {
        Writer {
            dir,
            state: Mutex::new(None),
        }
    }

    /// Run `f` on the open index (opened now if this is the first write), on the server's
    /// background pool; with its answer, the state of the index it left.
    fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut Open) -> Result<T, ApiError> + Send,
    ) -> Result<(T, Stamp), ApiError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.is_none() {
            let index = Index::open(&self.dir)
                .map_err(|e| ApiError::Engine(format!("cannot open the index: {e}")))?;
            *state = Some(Open {
                index,
                numbers: None,
            });
        }
        match state.as_mut() {
            Some(open) => {
                let answer = super::engine::in_background(|| f(open))?;
                Ok((answer, open.index.stamp()))
            }
            None => Err(ApiError::Engine("the index is not open".into())),
        }
    }

    /// Compact the index in place (the body: empty or `{}`): its next generation, which the
    /// engine then serves. Refused when every document is deleted or two live ones share an id.
    pub fn compact(&self, body: &[u8]) -> Result<(CompactResponse, Stamp), ApiError> {
        if !body.iter().all(u8::is_ascii_whitespace) {
            let _: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)
                .ok()
                .filter(serde_json::Map::is_empty)
                .ok_or_else(|| {
                    ApiError::BadRequest(
                        "a compaction takes no parameters: send {} or nothing".into(),
                    )
                })?;
        }
        self.with(|open| {
            let r = open.index.compact_in_place().map_err(refused)?;
            open.numbers = None;
            Ok(CompactResponse {
                documents: r.documents,
                removed: r.removed,
                tokens: r.tokens,
                generation: open.index.generation(),
            })
        })
    }

    /// Add the documents of `body` (checked: each has tokens of the index's d, finite, unit
    /// norm; ids are given to all or none, unique, without whitespace). Nothing is added when
    /// any is refused.
    pub fn add(&self, body: &[u8]) -> Result<(AddResponse, Stamp), ApiError> {
        let req: AddRequest = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("malformed request: {e}")))?;
        if req.documents.is_empty() {
            return Err(ApiError::BadRequest(
                "no documents: \"documents\" is empty".into(),
            ));
        }
        let with_ids = req.documents.iter().filter(|d| d.id.is_some()).count();
        if with_ids != 0 && with_ids != req.documents.len() {
            return Err(ApiError::BadRequest(format!(
                "{with_ids} of {} documents have an \"id\": give every document one, or none",
                req.documents.len()
            )));
        }
        self.with(|open| {
            let dim = open.index.codes().dim();
            let docs = req
                .documents
                .into_iter()
                .enumerate()
                .map(|(i, d)| api::decode("document", i, d, dim))
                .collect::<Result<Vec<_>, _>>()?;
            let matrices: Vec<Matrix<'_>> = docs.iter().map(|d| d.matrix()).collect();
            // One packing needs one dtype: documents sent in different ones go as f32.
            let same = matrices.iter().all(|m| m.dtype() == matrices[0].dtype());
            let corpus = if same {
                Corpus::from_docs(&matrices)
            } else {
                let tokens: Vec<f32> = matrices.iter().flat_map(|m| m.to_f32_vec()).collect();
                let lengths: Vec<usize> = matrices.iter().map(|m| m.rows()).collect();
                Corpus::from_lengths(tokens, dim, &lengths)
            }
            .map_err(bad)?;
            let corpus = if with_ids > 0 {
                corpus
                    .with_doc_ids(docs.iter().map(|d| d.id.clone()).collect())
                    .map_err(bad)?
            } else {
                corpus
            };
            let range = open.index.add(&corpus).map_err(refused)?;
            let added = range
                .map(|j| Added {
                    doc: open.index.doc_id(j),
                    index: j,
                })
                .collect();
            Ok(AddResponse {
                added,
                documents: open.index.len() - open.index.deleted(),
            })
        })
    }

    /// Delete the documents `body` names (`ids` or `indices`). A name the index does not hold
    /// is refused, and then nothing is deleted.
    pub fn delete(&self, body: &[u8]) -> Result<(DeleteResponse, Stamp), ApiError> {
        let req: DeleteRequest = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("malformed request: {e}")))?;
        self.with(|open| {
            // Other processes' updates first: their documents can be named too.
            open.index.refresh().map_err(refused)?;
            let now = open.index.generation();
            if let Some(g) = req.generation.filter(|&g| g != now) {
                return Err(ApiError::Conflict(format!(
                    "the index was compacted since generation {g} (it is at generation {now}): \
                     its document numbers name other documents now; search again, or delete \
                     by id; nothing was deleted"
                )));
            }
            let numbers = match (req.ids, req.indices) {
                (Some(ids), None) => open.numbers_of(&ids)?,
                (None, Some(indices)) => indices,
                _ => {
                    return Err(ApiError::BadRequest(
                        "name the documents by \"ids\" or by \"indices\" (one of the two)".into(),
                    ));
                }
            };
            if numbers.is_empty() {
                return Err(ApiError::BadRequest("no documents named".into()));
            }
            let mut distinct = numbers.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let deleted = open.index.delete(&distinct).map_err(refused)?;
            Ok(DeleteResponse {
                deleted,
                already: distinct.len() - deleted,
                documents: open.index.len() - open.index.deleted(),
            })
        })
    }
}

impl Open {
    /// Every document number carrying one of `ids`; an id no document carries is refused.
    fn numbers_of(&mut self, ids: &[String]) -> Result<Vec<usize>, ApiError> {
        let total = self.index.len();
        let generation = self.index.generation();
        // Made again for a new generation (a compaction numbers the documents again).
        let numbers = self
            .numbers
            .take()
            .filter(|n| n.generation == generation)
            .unwrap_or_else(|| Numbers {
                by_id: HashMap::new(),
                upto: 0,
                generation,
            });
        let numbers = self.numbers.insert(numbers);
        for j in numbers.upto..total {
            numbers
                .by_id
                .entry(self.index.doc_id(j))
                .or_default()
                .push(j);
        }
        numbers.upto = total;
        let mut out = Vec::new();
        for id in ids {
            match numbers.by_id.get(id) {
                Some(js) => out.extend_from_slice(js),
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "no document has id {id:?}; nothing was deleted"
                    )));
                }
            }
        }
        Ok(out)
    }
}

fn bad(e: tilemaxsim::Error) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

/// A refused write: the caller's mistake (400) or the server's (500: the disk, the log).
fn refused(e: tilemaxsim::Error) -> ApiError {
    use tilemaxsim::Error as E;
    match e {
        E::Argument(_)
        | E::DimMismatch { .. }
        | E::NonFinite { .. }
        | E::EmptyDocument { .. }
        | E::Shape(_)
        | E::Offsets(_)
        | E::DType { .. }
        | E::DocIndex { .. } => ApiError::BadRequest(format!("{e}; nothing was written")),
        other => ApiError::Engine(other.to_string()),
    }
}

//! The wire format of `POST /v1/search` (and of the tokens `POST /v1/index/add` takes) and its checks: a request is parsed and every query
//! decoded (JSON rows, or base64 little-endian f32/f16/bf16 with a shape) and validated here,
//! before it reaches the queue, so the engine only ever sees queries it can score.

use base64::Engine as _;
use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use tilemaxsim::{DType, Matrix, OwnedElements};

use super::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    pub queries: Vec<QueryIn>,
    /// Documents per query; default 10 (or every document of a smaller corpus).
    pub k: Option<usize>,
    /// Search only within these document numbers (the hits' `index`; an index served with
    /// `--index` only): one list for every query, or one list a query (fast-plaid's `subset`).
    pub subset: Option<SubsetIn>,
}

/// `"subset"`: `[3, 7, ...]` for every query, or `[[3, 7], [1], ...]` one a query.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum SubsetIn {
    All(Vec<usize>),
    PerQuery(Vec<Vec<usize>>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryIn {
    /// Echoed back in the result; default: the query's position in the request.
    pub id: Option<String>,
    /// `Lq` rows of `d` numbers.
    pub embeddings: Option<Vec<Vec<f32>>>,
    /// `Lq × d` little-endian values of `dtype`, row-major, base64 (standard alphabet).
    pub embeddings_b64: Option<String>,
    pub dtype: Option<String>,
    pub shape: Option<Vec<usize>>,
}

#[derive(Serialize)]
pub struct SearchResponse {
    pub results: Vec<QueryResult>,
    pub timing: Timing,
    /// The generation of the index that numbered the hits (an index served live; absent for a
    /// corpus): a delete by number may name it, and is refused once the index was compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

#[derive(Serialize)]
pub struct QueryResult {
    pub id: String,
    pub hits: Vec<HitOut>,
}

#[derive(Serialize)]
pub struct HitOut {
    /// The document's id (from the corpus file or `--doc-ids`), else its index.
    pub doc: String,
    /// The document's 0-based row in the corpus.
    pub index: usize,
    pub score: f32,
}

#[derive(Serialize)]
pub struct Timing {
    pub queue_us: u64,
    pub compute_us: u64,
    /// Queries in the batch this request was scored in (its own and others').
    pub batch_queries: usize,
}

/// One decoded query: `rows × dim` values, finite, `rows ≥ 1`.
pub struct Query {
    pub id: String,
    elems: OwnedElements,
    dim: usize,
}

impl Query {
    pub fn rows(&self) -> usize {
        self.elems.as_elements().len() / self.dim
    }

    pub fn matrix(&self) -> Matrix<'_> {
        // `decode` made `elems` a whole number (≥ 1) of rows of `dim ≥ 1` values.
        Matrix::new(self.elems.as_elements(), self.dim).expect("a decoded query is rows × dim")
    }
}

/// The limits a request is checked against.
pub struct Limits {
    pub dim: usize,
    pub documents: usize,
    pub max_k: usize,
    pub max_queries: usize,
    pub max_tokens: usize,
    /// Whether an index is served (`subset` needs one).
    pub index: bool,
}

/// A checked request: its queries and k, and each query's documents where it gave a subset.
pub struct Checked {
    pub queries: Vec<Query>,
    pub k: usize,
    pub tokens: usize,
    pub subset: Option<Vec<Vec<usize>>>,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

/// Parse and check a request body.
pub fn parse(body: &[u8], limits: &Limits) -> Result<Checked, ApiError> {
    let req: SearchRequest =
        serde_json::from_slice(body).map_err(|e| bad(format!("malformed request: {e}")))?;
    // k beyond the corpus returns every document (the rule of the CLI, Python and Rust);
    // beyond --max-k it is refused (a limit of this server, not of the corpus).
    let k = match req.k {
        None => 10,
        Some(k) if (1..=limits.max_k).contains(&k) => k,
        Some(k) => {
            return Err(bad(format!(
                "k = {k} is out of range: 1 ≤ k ≤ {} (--max-k)",
                limits.max_k
            )));
        }
    }
    .min(limits.documents);
    if req.queries.is_empty() {
        return Err(bad("no queries: \"queries\" is empty"));
    }
    if req.queries.len() > limits.max_queries {
        return Err(bad(format!(
            "{} queries in one request; at most {} (--max-batch-queries): split the request",
            req.queries.len(),
            limits.max_queries
        )));
    }
    let queries = req
        .queries
        .into_iter()
        .enumerate()
        .map(|(i, q)| decode("query", i, q, limits.dim))
        .collect::<Result<Vec<_>, _>>()?;
    let tokens = queries.iter().map(Query::rows).sum();
    if tokens > limits.max_tokens {
        return Err(bad(format!(
            "{tokens} query tokens in one request; at most {} (--max-batch-tokens): split the request",
            limits.max_tokens
        )));
    }
    let subset = match req.subset {
        None => None,
        Some(_) if !limits.index => {
            return Err(bad(
                "\"subset\" needs an index (tilemaxsim serve --index DIR); this server serves a corpus",
            ));
        }
        Some(SubsetIn::All(list)) => Some(vec![list; queries.len()]),
        Some(SubsetIn::PerQuery(lists)) if lists.len() == queries.len() => Some(lists),
        Some(SubsetIn::PerQuery(lists)) => {
            return Err(bad(format!(
                "\"subset\" has {} lists for {} queries: give one list for every query, or one a query",
                lists.len(),
                queries.len()
            )));
        }
    };
    Ok(Checked {
        queries,
        k,
        tokens,
        subset,
    })
}

/// Decode `noun` `i` (a query, or a document added to an index) and check it: one form of
/// embeddings, at least one token, the corpus's d, finite values.
pub fn decode(noun: &str, i: usize, q: QueryIn, dim: usize) -> Result<Query, ApiError> {
    let id = q.id.unwrap_or_else(|| i.to_string());
    let what = format!("{noun} {i} ({id:?})");
    let elems = match (q.embeddings, q.embeddings_b64) {
        (Some(_), Some(_)) => {
            return Err(bad(format!(
                "{what} has both \"embeddings\" and \"embeddings_b64\"; send one"
            )));
        }
        (None, None) => {
            return Err(bad(format!(
                "{what} has no \"embeddings\" (rows of numbers) or \"embeddings_b64\""
            )));
        }
        (Some(rows), None) => {
            if q.dtype.is_some() || q.shape.is_some() {
                return Err(bad(format!(
                    "{what}: \"dtype\" and \"shape\" go with \"embeddings_b64\" only"
                )));
            }
            from_rows(&what, noun, rows, dim)?
        }
        (None, Some(b64)) => from_b64(
            &what,
            noun,
            &b64,
            q.dtype.as_deref(),
            q.shape.as_deref(),
            dim,
        )?,
    };
    let query = Query { id, elems, dim };
    query
        .matrix()
        .check_finite(&what, 0)
        .map_err(|e| bad(e.to_string()))?;
    Ok(query)
}

fn from_rows(
    what: &str,
    noun: &str,
    rows: Vec<Vec<f32>>,
    dim: usize,
) -> Result<OwnedElements, ApiError> {
    if rows.is_empty() {
        return Err(bad(format!(
            "{what} is empty (0 tokens); every {noun} needs at least one token"
        )));
    }
    let mut v = Vec::with_capacity(rows.len() * dim);
    for (r, row) in rows.iter().enumerate() {
        if row.len() != dim {
            return Err(bad(format!(
                "{what}: token {r} has {} values, but the corpus has d = {dim}",
                row.len()
            )));
        }
        v.extend_from_slice(row);
    }
    Ok(OwnedElements::F32(v))
}

fn from_b64(
    what: &str,
    noun: &str,
    b64: &str,
    dtype: Option<&str>,
    shape: Option<&[usize]>,
    dim: usize,
) -> Result<OwnedElements, ApiError> {
    let dtype: DType = dtype
        .ok_or_else(|| {
            bad(format!(
                "{what}: \"embeddings_b64\" needs \"dtype\" (f32, f16 or bf16)"
            ))
        })?
        .parse()
        .map_err(|e| bad(format!("{what}: {e}")))?;
    let (rows, d) = match shape {
        Some(&[rows, d]) => (rows, d),
        Some(s) => {
            return Err(bad(format!(
                "{what}: \"shape\" is {s:?}; expected [Lq, d], two numbers"
            )));
        }
        None => {
            return Err(bad(format!(
                "{what}: \"embeddings_b64\" needs \"shape\": [Lq, d]"
            )));
        }
    };
    if d != dim {
        return Err(bad(format!(
            "{what} has d = {d}, but the corpus has d = {dim}"
        )));
    }
    if rows == 0 {
        return Err(bad(format!(
            "{what} is empty (0 tokens); every {noun} needs at least one token"
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| bad(format!("{what}: \"embeddings_b64\" is not base64: {e}")))?;
    let want = rows
        .checked_mul(d)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| bad(format!("{what}: shape {rows} × {d} is too large")))?;
    if bytes.len() != want {
        return Err(bad(format!(
            "{what}: {} bytes of {dtype}, but shape [{rows}, {d}] needs {want}",
            bytes.len()
        )));
    }
    let words2 = || {
        bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
    };
    Ok(match dtype {
        DType::F32 => OwnedElements::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::F16 => OwnedElements::F16(words2().map(f16::from_bits).collect()),
        DType::BF16 => OwnedElements::BF16(words2().map(bf16::from_bits).collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            dim: 2,
            documents: 5,
            max_k: 100,
            max_queries: 4,
            max_tokens: 8,
            index: false,
        }
    }

    fn err(body: &str) -> String {
        match parse(body.as_bytes(), &limits()) {
            Err(ApiError::BadRequest(m)) => m,
            Err(e) => panic!("not a 400: {e}"),
            Ok(_) => panic!("accepted: {body}"),
        }
    }

    #[test]
    fn decodes_rows_and_every_b64_dtype_alike() {
        let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
        let vals = [0.5f32, -1.0, 2.0, 0.25];
        let f32s = b64(vals.iter().flat_map(|v| v.to_le_bytes()).collect());
        let f16s = b64(vals
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
            .collect());
        let bf16s = b64(vals
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
            .collect());
        let body = format!(
            r#"{{"queries": [{{"id": "a", "embeddings": [[0.5, -1.0], [2.0, 0.25]]}},
               {{"embeddings_b64": "{f32s}", "dtype": "f32", "shape": [2, 2]}},
               {{"embeddings_b64": "{f16s}", "dtype": "f16", "shape": [2, 2]}},
               {{"embeddings_b64": "{bf16s}", "dtype": "bf16", "shape": [2, 2]}}], "k": 3}}"#
        );
        let c = parse(body.as_bytes(), &limits()).unwrap();
        assert_eq!((c.k, c.tokens, c.queries.len()), (3, 8, 4));
        assert_eq!(c.queries[0].id, "a");
        assert_eq!(c.queries[1].id, "1");
        for q in &c.queries {
            assert_eq!(q.matrix().to_f32_vec(), vals);
        }
        assert_eq!(c.queries[2].matrix().dtype(), DType::F16);
    }

    #[test]
    fn a_subset_is_one_list_for_every_query_or_one_a_query_and_needs_an_index() {
        let index = Limits {
            index: true,
            ..limits()
        };
        let q = r#"{"embeddings": [[1, 2]]}"#;
        let body = format!(r#"{{"queries": [{q}, {q}], "subset": [4, 1]}}"#);
        let c = parse(body.as_bytes(), &index).unwrap();
        assert_eq!(c.subset, Some(vec![vec![4, 1], vec![4, 1]]));
        let body = format!(r#"{{"queries": [{q}, {q}], "subset": [[4], []]}}"#);
        let c = parse(body.as_bytes(), &index).unwrap();
        assert_eq!(c.subset, Some(vec![vec![4], vec![]]));
        let c = parse(format!(r#"{{"queries": [{q}]}}"#).as_bytes(), &index).unwrap();
        assert_eq!(c.subset, None);
        let bad = |body: String, limits: &Limits| match parse(body.as_bytes(), limits) {
            Err(ApiError::BadRequest(m)) => m,
            _ => panic!("not a 400: {body}"),
        };
        let m = bad(format!(r#"{{"queries": [{q}], "subset": [1]}}"#), &limits());
        assert!(m.contains("needs an index"), "{m}");
        let m = bad(
            format!(r#"{{"queries": [{q}], "subset": [[1], [2]]}}"#),
            &index,
        );
        assert!(m.contains("2 lists for 1 queries"), "{m}");
        let m = bad(format!(r#"{{"queries": [{q}], "subset": [-1]}}"#), &index);
        assert!(m.contains("malformed"), "{m}");
    }

    #[test]
    fn default_k_is_10_or_the_corpus() {
        let c = parse(br#"{"queries": [{"embeddings": [[1, 2]]}]}"#, &limits()).unwrap();
        assert_eq!(c.k, 5);
    }

    #[test]
    fn k_beyond_the_corpus_returns_every_document() {
        let c = parse(
            br#"{"queries": [{"embeddings": [[1, 2]]}], "k": 6}"#,
            &limits(),
        )
        .unwrap();
        assert_eq!(c.k, 5);
    }

    #[test]
    fn every_bad_input_is_a_400_naming_it() {
        let q = r#"{"embeddings": [[1, 2]]}"#;
        for (body, needle) in [
            ("{", "malformed"),
            (r#"{"queries": 3}"#, "malformed"),
            (r#"{"queries": [], "k": 1}"#, "no queries"),
            (&format!(r#"{{"queries": [{q}], "k": 0}}"#), "out of range"),
            (&format!(r#"{{"queries": [{q}], "k": 101}}"#), "--max-k"),
            (
                &format!(r#"{{"queries": [{q}], "kk": 6}}"#),
                "unknown field",
            ),
            (r#"{"queries": [{"embeddings": []}]}"#, "empty"),
            (r#"{"queries": [{"embeddings": [[1, 2, 3]]}]}"#, "d = 2"),
            (
                r#"{"queries": [{"embeddings": [[1, 2], [3]]}]}"#,
                "token 1 has 1",
            ),
            (
                r#"{"queries": [{"embeddings": [[1e300, 2]]}]}"#,
                "non-finite",
            ),
            (r#"{"queries": [{}]}"#, "no \"embeddings\""),
            (
                r#"{"queries": [{"embeddings_b64": "AAAA", "shape": [1, 2]}]}"#,
                "needs \"dtype\"",
            ),
            (
                r#"{"queries": [{"embeddings_b64": "AAAA", "dtype": "f8", "shape": [1, 2]}]}"#,
                "unsupported dtype",
            ),
            (
                r#"{"queries": [{"embeddings_b64": "AAAA", "dtype": "f16"}]}"#,
                "needs \"shape\"",
            ),
            (
                r#"{"queries": [{"embeddings_b64": "AAAA", "dtype": "f16", "shape": [1, 3]}]}"#,
                "d = 3",
            ),
            (
                r#"{"queries": [{"embeddings_b64": "AAAA", "dtype": "f32", "shape": [1, 2]}]}"#,
                "needs 8",
            ),
            (
                r#"{"queries": [{"embeddings_b64": "!!", "dtype": "f16", "shape": [1, 2]}]}"#,
                "not base64",
            ),
            // f16 0x7e00 is NaN.
            (
                r#"{"queries": [{"embeddings_b64": "AH4AAA==", "dtype": "f16", "shape": [1, 2]}]}"#,
                "non-finite",
            ),
            (
                &format!(r#"{{"queries": [{q},{q},{q},{q},{q}]}}"#),
                "at most 4",
            ),
            (
                r#"{"queries": [{"embeddings": [[1,2],[1,2],[1,2],[1,2],[1,2],[1,2],[1,2],[1,2],[1,2]]}]}"#,
                "at most 8",
            ),
        ] {
            let m = err(body);
            assert!(m.contains(needle), "{body}: {m:?} lacks {needle:?}");
        }
    }
}

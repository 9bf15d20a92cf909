//! [`ShardedIvfSearch`]: IVF search over one index segment whose documents are split over
//! several GPUs. Each GPU holds a contiguous range of the documents (about equal tokens: their
//! codes and an IVF of their own, over the same centroids) and runs every stage of
//! [`GpuIvfSearch`] for the whole batch on them; the GPUs run at once and their hits are merged.
//!
//! `ndocs` is shared out: a shard rescores its best `⌈ndocs · n_s / N⌉` candidates (`n_s` of
//! the segment's `N` documents), so the GPUs together rescore about as many as one would, each
//! a part. The candidates are then each shard's best rather than the segment's best `ndocs`:
//! where the best candidates crowd into one shard, some that one GPU would rescore are not
//! (bench/index_peers.py measures the recall). With every centroid probed and `ndocs ≥ N`,
//! every document is rescored and the hits are exhaustive search's.

use std::borrow::Cow;

use rayon::prelude::*;

use super::index::{spawn_shards, split_by_tokens};
use super::ivf::GpuIvfSearch;
use crate::codec::{Codec, CompressedCorpus};
use crate::error::{Error, Result};
use crate::index::{Ivf, Probe};
use crate::matrix::Matrix;
use crate::scorer::check_queries;
use crate::search::{Residency, Searcher};
use crate::topk::{Hit, merge_top_k};

pub struct ShardedIvfSearch<'a> {
    dim: usize,
    probe: Probe,
    /// Each shard's first document and its searcher.
    shards: Vec<(usize, GpuIvfSearch<'a>)>,
}

impl ShardedIvfSearch<'_> {
    /// Split `codes` (residual, with their centroid ids) over `devices` (one shard each; a
    /// device may be named twice), building each shard's IVF and uploading it on its own
    /// thread; each holds its codes as `residency` says. Errors as [`GpuIvfSearch::new`]'s.
    pub fn new(
        codes: &CompressedCorpus,
        probe: Probe,
        devices: &[usize],
        residency: Residency,
    ) -> Result<Self> {
        let Codec::Residual(r) = codes.codec() else {
            return Err(Error::Argument(
                "IVF search needs a residual (PLAID) corpus".into(),
            ));
        };
        if devices.is_empty() {
            return Err(Error::Argument(
                "no GPU to shard the IVF search over".into(),
            ));
        }
        let k = r.num_centroids();
        // No shard without documents: fewer shards than GPUs when documents are fewer.
        let ranges: Vec<_> = split_by_tokens(codes.offsets(), devices.len())
            .into_iter()
            .filter(|r| !r.is_empty())
            .collect();
        let devices = &devices[..ranges.len()];
        let n = codes.len();
        let shards = spawn_shards(devices, ranges, |ordinal, docs| {
            let first = docs.start;
            let probe = Probe {
                ndocs: (probe.ndocs.min(n) * docs.len()).div_ceil(n).max(1),
                ..probe
            };
            let part = codes.slice(docs)?;
            let ivf = Ivf::build(part.aux().unwrap_or_default(), part.offsets(), k)?;
            let search =
                GpuIvfSearch::with_codes(Cow::Owned(part), &ivf, probe, ordinal, residency)?;
            Ok((first, search))
        })?;
        Ok(ShardedIvfSearch {
            dim: codes.dim(),
            probe,
            shards,
        })
    }

    /// Each shard's first document and GPU searcher's name.
    pub fn shards(&self) -> Vec<(usize, String)> {
        self.shards
            .iter()
            .map(|(f, s)| (*f, s.gpu_name()))
            .collect()
    }
}

impl Searcher for ShardedIvfSearch<'_> {
    fn name(&self) -> String {
        let gpus: Vec<String> = self.shards.iter().map(|(_, s)| s.gpu_name()).collect();
        self.probe.searcher_name(&format!(
            "with every stage on {} (documents sharded)",
            gpus.join(" + ")
        ))
    }

    fn search(&self, queries: &[Matrix<'_>], k: usize) -> Result<Vec<Vec<Hit>>> {
        if k == 0 {
            return Err(Error::Argument("k must be at least 1".into()));
        }
        check_queries(queries, self.dim)?;
        let per_shard: Vec<Vec<Vec<Hit>>> = self
            .shards
            .par_iter()
            .map(|(first, s)| {
                let mut hits = s.search(queries, k)?;
                for h in hits.iter_mut().flatten() {
                    h.doc += first;
                }
                Ok(hits)
            })
            .collect::<Result<_>>()?;
        let mut out = vec![Vec::new(); queries.len()];
        for shard in per_shard {
            for (best, hits) in out.iter_mut().zip(shard) {
                merge_top_k(best, hits, k);
            }
        }
        Ok(out)
    }
}

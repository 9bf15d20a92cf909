//! Where a compression hands its codes as they are made ([`CodesSink`]): an index build writes
//! them to their file while the rest of the corpus is still being encoded on the GPU, instead of
//! writing the whole file once the compression is done.

use super::{Codec, CompressedCorpus};
use crate::error::Result;

/// Receives a compression's codes. `begin` comes once, with the trained codec, before any
/// codes; then every token's codes come exactly once, in runs of whole tokens (in order, but a
/// sink may not rely on it).
pub trait CodesSink {
    /// The codec is trained.
    fn begin(&self, codec: &Codec) -> Result<()>;
    /// The codes of tokens `first..first + n`: `codes` n rows of the codec's row bytes, `aux`
    /// their n per-token words (centroid ids or scale bits; empty for PQ).
    fn codes(&self, first: usize, codes: &[u8], aux: &[u32]) -> Result<()>;
}

/// `c` handed to `sink` whole (a compression that does not stream its codes).
pub(crate) fn hand_whole(sink: &dyn CodesSink, c: &CompressedCorpus) -> Result<()> {
    sink.begin(c.codec())?;
    sink.codes(0, c.codes(), c.aux().unwrap_or_default())
}

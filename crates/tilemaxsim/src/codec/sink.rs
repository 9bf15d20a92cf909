//! Where a compression hands its codes as they are made ([`CodesSink`]): an index build writes
//! them to their file while the rest of the corpus is still being encoded on the GPU, instead of
//! writing the whole file once the compression is done.

use super::Codec;
use crate::error::Result;

/// Receives the codes of a compression that makes them in runs: the residual codec on a GPU,
/// a chunk of tokens at a time. `begin` comes once, with the trained codec, before any codes;
/// then every token's codes come exactly once, in runs of whole tokens (in order, but a sink
/// may not rely on it). Other compressions never call a sink (not even `begin`): their result
/// is saved whole.
pub trait CodesSink {
    /// The codec is trained.
    fn begin(&self, codec: &Codec) -> Result<()>;
    /// The codes of tokens `first..first + n`: `codes` n rows of the codec's row bytes, `aux`
    /// their n per-token words (the centroid ids).
    fn codes(&self, first: usize, codes: &[u8], aux: &[u32]) -> Result<()>;
}

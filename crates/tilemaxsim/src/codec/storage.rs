//! A compressed corpus's per-token arrays as they are held: a vector of ours, or a range of a
//! memory-mapped file (`format.rs` maps them on open; a write copies a mapped range once).

use std::sync::Arc;

use memmap2::Mmap;

/// Elements of type `T` that are either ours or part of a memory-mapped file (`len` elements
/// from byte `start`, aligned to `T`: checked when the file is opened).
#[derive(Clone, Debug)]
pub(crate) enum Stored<T> {
    Owned(Vec<T>),
    Mapped {
        map: Arc<Mmap>,
        start: usize,
        len: usize,
    },
}

/// The codes (`[T, row_bytes]` u8).
pub(crate) type Bytes = Stored<u8>;
/// 32-bit words a token (centroid ids or f32 scale bits).
pub(crate) type Words = Stored<u32>;

impl<T: bytemuck::Pod> Stored<T> {
    /// The elements as a vector of ours (a mapped range copied once).
    pub(super) fn owned(&mut self) -> &mut Vec<T> {
        if let Stored::Mapped { .. } = self {
            *self = Stored::Owned(self.get().to_vec());
        }
        match self {
            Stored::Owned(v) => v,
            Stored::Mapped { .. } => unreachable!("made owned above"),
        }
    }

    pub(super) fn get(&self) -> &[T] {
        match self {
            Stored::Owned(v) => v,
            Stored::Mapped { map, start, len } => {
                bytemuck::cast_slice(&map[*start..*start + *len * std::mem::size_of::<T>()])
            }
        }
    }
}

//! Rows of a corpus on their way to the GPU for compression (`compress.rs`): two slots, each a
//! pinned host buffer and the device buffer its rows are copied to, and a copy stream of their
//! own. While the kernels work on chunk i (from one slot), the host fills the other slot with
//! chunk i + 1 (on every core) and the copy engine sends it; the kernels of chunk i + 1 wait
//! for that copy alone.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice};
use rayon::prelude::*;

use super::context::GpuContext;
use super::device::drv;
use crate::error::Result;

/// Rows to send: a range of the corpus's rows, or a list of them (in that order).
pub(super) enum Rows<'r> {
    Range(Range<usize>),
    List(&'r [usize]),
}

/// One slot: its buffers, and the events of the last copy into it and of the last kernels
/// that read it.
struct Slot {
    pinned: PinnedHostSlice<u8>,
    raw: CudaSlice<u8>,
    copied: CudaEvent,
    read: CudaEvent,
}

/// Two slots and the copy stream (see the module's text).
pub(super) struct Stager {
    copy: Arc<CudaStream>,
    slots: [Slot; 2],
    /// The slot the next `send` fills.
    next: usize,
}

impl Stager {
    /// Two slots of `bytes` each on `gpu`.
    pub(super) fn new(gpu: &GpuContext, bytes: usize) -> Result<Self> {
        let copy = gpu.ctx.new_stream().map_err(drv("copy stream"))?;
        let slot = || -> Result<Slot> {
            Ok(Slot {
                // SAFETY (both): read only where `send` wrote them first.
                pinned: unsafe { gpu.ctx.alloc_pinned::<u8>(bytes) }
                    .map_err(drv("pinned staging buffer"))?,
                raw: unsafe { gpu.stream.alloc::<u8>(bytes) }.map_err(drv("token buffer"))?,
                copied: gpu.ctx.new_event(None).map_err(drv("event"))?,
                read: gpu.ctx.new_event(None).map_err(drv("event"))?,
            })
        };
        let slots = [slot()?, slot()?];
        // The device buffers were allocated on the job's stream: the copy stream must not write
        // them before that allocation is done.
        gpu.synchronize()?;
        Ok(Stager {
            copy,
            slots,
            next: 0,
        })
    }

    /// The copy stream (the outputs' downloads run on it too, after their kernels: `after`).
    pub(super) fn copy(&self) -> &Arc<CudaStream> {
        &self.copy
    }

    /// `rows` of `all` (rows of `rb` bytes) into the next slot: once its last kernels and copy
    /// are done, the host copies the rows into its pinned buffer and the copy stream sends
    /// them; `stream` waits for that copy. Returns the slot's device buffer, for the kernels
    /// enqueued on `stream` next (then call `used`).
    pub(super) fn send(
        &mut self,
        stream: &Arc<CudaStream>,
        all: &[u8],
        rb: usize,
        rows: Rows<'_>,
    ) -> Result<&CudaSlice<u8>> {
        let at = self.next;
        self.next ^= 1;
        let slot = &mut self.slots[at];
        let n = match &rows {
            Rows::Range(r) => r.len(),
            Rows::List(idx) => idx.len(),
        };
        let bytes = n * rb;
        if bytes == 0 {
            return Ok(&self.slots[at].raw);
        }
        slot.read.synchronize().map_err(drv("event"))?;
        slot.copied.synchronize().map_err(drv("event"))?;
        let buf = &mut slot
            .pinned
            .as_mut_slice()
            .map_err(drv("pinned staging buffer"))?[..bytes];
        match rows {
            Rows::Range(r) => {
                const PIECE: usize = 1 << 20;
                buf.par_chunks_mut(PIECE)
                    .zip(all[r.start * rb..r.end * rb].par_chunks(PIECE))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            }
            Rows::List(idx) => buf
                .par_chunks_mut(rb)
                .zip(idx.par_iter())
                .for_each(|(d, &i)| d.copy_from_slice(&all[i * rb..(i + 1) * rb])),
        }
        // From pinned memory the copy is asynchronous: `copied` tells when the buffer may be
        // refilled, and the kernels on `stream` wait for it.
        self.copy
            .memcpy_htod(&*buf, &mut slot.raw.slice_mut(..bytes))
            .map_err(drv("token upload"))?;
        slot.copied.record(&self.copy).map_err(drv("event"))?;
        stream.wait(&slot.copied).map_err(drv("stream wait"))?;
        Ok(&self.slots[at].raw)
    }

    /// Record on `stream`, after the kernels enqueued since the last `send`, that they were
    /// its slot's readers; returns an event of them (for `after`).
    pub(super) fn used(&mut self, stream: &Arc<CudaStream>) -> Result<CudaEvent> {
        let last = self.next ^ 1;
        self.slots[last].read.record(stream).map_err(drv("event"))?;
        stream.record_event(None).map_err(drv("event"))
    }

    /// The copy stream waits for `done` (a chunk's kernels, from `used`) before the work
    /// enqueued on it next: that chunk's downloads.
    pub(super) fn after(&self, done: &CudaEvent) -> Result<()> {
        self.copy.wait(done).map_err(drv("stream wait"))
    }
}

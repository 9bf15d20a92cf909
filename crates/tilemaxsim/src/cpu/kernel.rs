//! The CPU micro-kernel, written once over a small SIMD trait and instantiated per ISA.
//!
//! The CPU twin of the paper's V2-MQ: a tile of `W` query vectors (`W × LANES` query tokens)
//! and `J` document tokens is held in `W × J` accumulator registers while the loop runs over
//! the embedding dimension; each step loads `W` query vectors (the query is packed
//! transposed, `qt[k][i]`, so one load covers `LANES` query tokens) and broadcasts `J`
//! document scalars. Each document token is read once per query tile, and the running maxima
//! of the query tokens live in a small L1 array between tiles. f16/bf16 documents are widened
//! to f32 one `J`-token tile at a time into an L1 scratch buffer; f32 documents are read in place.
//! Accumulation is f32 throughout; query lanes past `Nq` are zero padding and are left out of
//! the final sum.

use half::{bf16, f16};

use crate::matrix::{Elements, Matrix};

/// The handful of vector operations the kernel needs.
pub(crate) trait Simd {
    const LANES: usize;
    type V: Copy;
    unsafe fn zero() -> Self::V;
    /// Broadcast `*p` to every lane.
    unsafe fn splat(p: *const f32) -> Self::V;
    unsafe fn load(p: *const f32) -> Self::V;
    unsafe fn store(p: *mut f32, v: Self::V);
    /// `a * b + c`, one rounding where the ISA has FMA.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// Widen `src` into `dst` (same length).
    unsafe fn f16_to_f32(src: &[f16], dst: &mut [f32]);
    unsafe fn bf16_to_f32(src: &[bf16], dst: &mut [f32]);
    /// Hint that the cache line at `p` will be read soon (a no-op where there is no hint).
    unsafe fn prefetch(p: *const u8);
}

/// 64-byte aligned f32 storage (one cache line, one AVX-512 vector).
#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(64))]
struct Line([f32; 16]);

#[derive(Clone, Default)]
pub(crate) struct AlignedBuf(Vec<Line>);

impl AlignedBuf {
    fn with_len(len: usize) -> Self {
        AlignedBuf(vec![Line([0.0; 16]); len.div_ceil(16)])
    }
    fn ensure(&mut self, len: usize) {
        if self.0.len() * 16 < len {
            *self = Self::with_len(len);
        }
    }
    fn as_slice(&self) -> &[f32] {
        bytemuck::cast_slice(&self.0)
    }
    fn as_mut_slice(&mut self) -> &mut [f32] {
        bytemuck::cast_slice_mut(&mut self.0)
    }
}

/// A query packed for one ISA: transposed to `qt[k * nq_pad + i]`, f32, zero-padded to a
/// whole number of vectors.
pub(crate) struct PreparedQuery {
    nq: usize,
    nq_pad: usize,
    dim: usize,
    qt: AlignedBuf,
}

impl PreparedQuery {
    pub(crate) fn new(query: Matrix<'_>, lanes: usize) -> Self {
        let (nq, dim) = (query.rows(), query.dim());
        let nq_pad = nq.div_ceil(lanes) * lanes;
        let mut qt = AlignedBuf::with_len(nq_pad * dim);
        let e = query.elements();
        let t = qt.as_mut_slice();
        for i in 0..nq {
            for k in 0..dim {
                t[k * nq_pad + i] = e.get_f32(i * dim + k);
            }
        }
        PreparedQuery {
            nq,
            nq_pad,
            dim,
            qt,
        }
    }

    /// Bytes of the packed query (for cache blocking of query batches).
    pub(crate) fn bytes(&self) -> usize {
        self.nq_pad * self.dim * 4
    }
}

/// Per-thread working memory: one converted document tile and the running maxima.
#[derive(Default)]
pub(crate) struct Scratch {
    rows: AlignedBuf,
    runmax: AlignedBuf,
}

/// Cache lines to prefetch while a tile runs: `lines` lines from `base` (at most one per step
/// of the dimension loop, so `lines` ≤ d).
#[derive(Clone, Copy)]
struct Prefetch {
    base: *const u8,
    lines: usize,
}

impl Prefetch {
    const NONE: Prefetch = Prefetch {
        base: std::ptr::null(),
        lines: 0,
    };

    /// Lines covering `bytes`, capped at `dim` (one per dimension step).
    fn of(bytes: &[u8], dim: usize) -> Prefetch {
        Prefetch {
            base: bytes.as_ptr(),
            lines: bytes.len().div_ceil(64).min(dim),
        }
    }
}

/// One `W × J` register tile over the whole dimension, folded into the running maxima.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // constant indices keep the accumulators in registers
unsafe fn tile<S: Simd, const W: usize, const J: usize>(
    qt: *const f32,
    q_stride: usize,
    rows: *const f32,
    dim: usize,
    runmax: *mut f32,
    pf: Prefetch,
) {
    // SAFETY (whole function): the caller guarantees `qt` holds `dim` rows of `q_stride`
    // floats with `W * LANES` valid from the start, `rows` holds `J` rows of `dim` floats,
    // and `runmax` holds `W * LANES` floats.
    unsafe {
        let mut acc = [[S::zero(); J]; W];
        for k in 0..dim {
            // One prefetch per step spreads the next tile's cache-line requests over the tile
            // instead of bursting them (a burst overflows the miss buffers and gets dropped).
            if k < pf.lines {
                S::prefetch(pf.base.add(k * 64));
            }
            let q: [S::V; W] =
                std::array::from_fn(|w| S::load(qt.add(k * q_stride + w * S::LANES)));
            for j in 0..J {
                let b = S::splat(rows.add(j * dim + k));
                for w in 0..W {
                    acc[w][j] = S::fmadd(q[w], b, acc[w][j]);
                }
            }
        }
        for w in 0..W {
            let mut m = S::load(runmax.add(w * S::LANES));
            for a in &acc[w] {
                m = S::max(m, *a);
            }
            S::store(runmax.add(w * S::LANES), m);
        }
    }
}

/// `tile` for a run-time tile height `jn ≤ JMAX` (the last tile of a document).
#[inline(always)]
unsafe fn tile_n<S: Simd, const W: usize>(
    jn: usize,
    qt: *const f32,
    q_stride: usize,
    rows: *const f32,
    dim: usize,
    runmax: *mut f32,
    pf: Prefetch,
) {
    macro_rules! by_height {
        ($($j:literal)*) => {
            // SAFETY: forwarded from the caller; `jn` rows are valid.
            match jn { $($j => unsafe { tile::<S, W, $j>(qt, q_stride, rows, dim, runmax, pf) },)* _ => unreachable!("tile height {jn}") }
        };
    }
    by_height!(1 2 3 4 5 6 7 8 9 10 11 12)
}

/// Largest tile height any ISA uses (`tile_n` has an arm for each height up to it).
pub(crate) const JMAX: usize = 12;

/// Scores of one document against each of `queries`, written to `out[q]`.
///
/// # Safety
/// The ISA of `S` must be available on this CPU; `doc` holds whole rows of `dim`, at least one;
/// every query was prepared with `S::LANES` and has `dim` columns; `out.len() == queries.len()`.
#[inline(always)]
pub(crate) unsafe fn score_doc<S: Simd, const W: usize, const J: usize>(
    queries: &[PreparedQuery],
    doc: Elements<'_>,
    next_doc: &[u8],
    dim: usize,
    scratch: &mut Scratch,
    out: &mut [f32],
) {
    const { assert!(J >= 1 && J <= JMAX && W >= 1) };
    let nd = doc.len() / dim;
    let total: usize = queries.iter().map(|q| q.nq_pad).sum();
    scratch.runmax.ensure(total);
    scratch.runmax.as_mut_slice()[..total].fill(f32::NEG_INFINITY);
    scratch.rows.ensure(J * dim);
    let runmax = scratch.runmax.as_mut_slice().as_mut_ptr();
    let mut j0 = 0;
    while j0 < nd {
        let jn = J.min(nd - j0);
        let span = j0 * dim..(j0 + jn) * dim;
        // While this tile is scored, prefetch the next one (or the next document's first).
        let size = doc.dtype().size();
        let pf = if j0 + jn < nd {
            let next = (j0 + jn) * dim * size..(j0 + 2 * jn).min(nd) * dim * size;
            Prefetch::of(&doc.as_bytes()[next], dim)
        } else {
            Prefetch::of(&next_doc[..next_doc.len().min(J * dim * size)], dim)
        };
        let mut pf_once = pf;
        let rows: *const f32 = match doc {
            Elements::F32(s) => {
                // Copied to an L1 tile: the kernel then broadcasts from one contiguous block
                // instead of J rows strided through memory (measured faster, see BENCHMARKS.md).
                scratch.rows.as_mut_slice()[..span.len()].copy_from_slice(&s[span]);
                scratch.rows.as_slice().as_ptr()
            }
            Elements::F16(s) => {
                // SAFETY: `rows` holds at least `J * dim` floats (ensured above).
                unsafe {
                    S::f16_to_f32(
                        &s[span.clone()],
                        &mut scratch.rows.as_mut_slice()[..span.len()],
                    )
                };
                scratch.rows.as_slice().as_ptr()
            }
            Elements::BF16(s) => {
                // SAFETY: as above.
                unsafe {
                    S::bf16_to_f32(
                        &s[span.clone()],
                        &mut scratch.rows.as_mut_slice()[..span.len()],
                    )
                };
                scratch.rows.as_slice().as_ptr()
            }
        };
        let mut m0 = 0;
        for q in queries {
            let nvec = q.nq_pad / S::LANES;
            let qt = q.qt.as_slice().as_ptr();
            let mut v = 0;
            // SAFETY: `v + W ≤ nvec` (then `v < nvec`) vectors exist in `qt` and `runmax`,
            // `jn` rows of `dim` floats at `rows`; see `tile`.
            unsafe {
                while v + W <= nvec {
                    let m = runmax.add(m0 + v * S::LANES);
                    if jn == J {
                        tile::<S, W, J>(qt.add(v * S::LANES), q.nq_pad, rows, dim, m, pf_once);
                    } else {
                        tile_n::<S, W>(jn, qt.add(v * S::LANES), q.nq_pad, rows, dim, m, pf_once);
                    }
                    pf_once = Prefetch::NONE;
                    v += W;
                }
                while v < nvec {
                    let m = runmax.add(m0 + v * S::LANES);
                    tile_n::<S, 1>(jn, qt.add(v * S::LANES), q.nq_pad, rows, dim, m, pf_once);
                    pf_once = Prefetch::NONE;
                    v += 1;
                }
            }
            m0 += q.nq_pad;
        }
        j0 += jn;
    }
    let maxima = scratch.runmax.as_slice();
    let mut m0 = 0;
    for (o, q) in out.iter_mut().zip(queries) {
        *o = maxima[m0..m0 + q.nq].iter().sum();
        m0 += q.nq_pad;
    }
}

/// Peak FMA throughput loop: `CHAINS` independent accumulator chains, `iters` steps each.
/// Returns a value that depends on every FMA, so none can be optimized away.
#[inline(always)]
pub(crate) unsafe fn fma_loop<S: Simd>(iters: usize, seed: &[f32; 16]) -> f32 {
    const CHAINS: usize = 12;
    // SAFETY: `seed` holds 16 floats, at least `LANES`.
    unsafe {
        let a = S::load(seed.as_ptr());
        let b = S::splat(seed.as_ptr().add(1));
        let mut acc: [S::V; CHAINS] = std::array::from_fn(|_| S::load(seed.as_ptr()));
        for _ in 0..iters {
            for c in acc.iter_mut() {
                *c = S::fmadd(*c, a, b);
            }
        }
        let mut m = acc[0];
        for c in &acc[1..] {
            m = S::max(m, *c);
        }
        let mut out = [0.0f32; 16];
        S::store(out.as_mut_ptr(), m);
        out[0]
    }
}

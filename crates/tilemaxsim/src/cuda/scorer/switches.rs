//! The switches that fix [`CudaScorer`]'s kernel choice and launch shapes instead of the
//! engine's own, for experiments and tests: the builder methods, and the environment variables
//! `CudaScorer::new` reads for them (TILEMAXSIM_BULK, _PACK, _BULK_GRID, _SPAN, _STREAM,
//! _STREAM_WARPS, _ROWS, _TAIL, _F32_PLANES, _PAD, _QUAD).

use super::*;

/// The value `name`'s environment variable names among `values` (`None`: unset or another).
pub(super) fn env_choice<T: Copy>(name: &str, values: &[(&str, T)]) -> Option<T> {
    let v = std::env::var(name).ok()?;
    values.iter().find(|(k, _)| *k == v).map(|&(_, t)| t)
}

/// `TILEMAXSIM_PACK=N` (`CudaScorer::pack_documents`): a value that is not a run length in
/// 0..=PACK_MAX is an error, as TILEMAXSIM_KERNEL_DEFINES's are.
pub(super) fn pack_env() -> Result<Option<usize>> {
    let Ok(v) = std::env::var("TILEMAXSIM_PACK") else {
        return Ok(None);
    };
    match v.trim().parse::<usize>() {
        Ok(g) if g <= PACK_MAX => Ok(Some(g)),
        _ => Err(Error::Argument(format!(
            "TILEMAXSIM_PACK={v}: documents a run must be a number in 0..={PACK_MAX}"
        ))),
    }
}

impl CudaScorer {
    /// Use this kernel for every launch it can take (`None`: choose per shape). A forced
    /// tensor-core kernel falls back to the nearest one that applies (`Mma` and `Bulk` take
    /// queries of ≤ 32 tokens, else `Gemm`; f32 or other d: `Tiled`).
    pub fn force_kernel(mut self, kernel: Option<Kernel>) -> Self {
        self.force = kernel;
        self
    }

    /// Fix `maxsim_bulk`'s tiles in flight per block (`BULK_STAGES_RANGE`) and consecutive
    /// tasks per block (`BULK_GROUP_RANGE`) instead of the engine's choice: for experiments and
    /// tests. Also read from `TILEMAXSIM_BULK=stages,group` when the scorer opens.
    pub fn bulk_shape(mut self, stages: usize, group: usize) -> Result<Self> {
        if !BULK_STAGES_RANGE.contains(&stages) || !BULK_GROUP_RANGE.contains(&group) {
            return Err(Error::Argument(format!(
                "maxsim_bulk shape ({stages}, {group}): stages must be in {BULK_STAGES_RANGE:?}, \
                 tasks per block in {BULK_GROUP_RANGE:?}"
            )));
        }
        self.bulk = Some((stages, group));
        Ok(self)
    }

    /// Fix how many consecutive documents a block of the batched codec kernels takes as one
    /// run, cut into 128-token tiles across their boundaries (`maxsim_codec_wgp_*`, where the
    /// documents lie back to back; 0: never, each document in tiles of its own by
    /// `maxsim_codec_wg_*`; `None`: the engine's choice, `pack_pays` and `pack_run`). For
    /// experiments and tests; also TILEMAXSIM_PACK=N.
    pub fn pack_documents(mut self, run: Option<usize>) -> Result<Self> {
        if run.is_some_and(|g| g > PACK_MAX) {
            return Err(Error::Argument(format!(
                "documents a run must be at most {PACK_MAX}, got {run:?}"
            )));
        }
        self.pack = run;
        Ok(self)
    }

    /// Fix whether calls over every document of a residual upload (nbits 1 or 2, d 64 or 128)
    /// take the four-documents-a-warpgroup kernel (`maxsim_codec_q4_*`, sm_90a): `Some(true)` in
    /// place of the one-warp and bulk-copy kernels, even when another kernel is forced;
    /// `Some(false)` or `None` (the default) never: 0.84x the one-warp kernel on the H200. For
    /// experiments and tests; also TILEMAXSIM_QUAD=0/1.
    pub fn codec_quad(mut self, quad: Option<bool>) -> Self {
        self.quad = quad;
        self
    }

    /// Fix whether `maxsim_bulk`, scoring every document of a packed corpus, cuts its tiles
    /// across documents (`maxsim_span`; `None`: where documents leave tiles partly empty, see
    /// `DocLengths::spans_pay`). For experiments and tests; also TILEMAXSIM_SPAN=0/1.
    pub fn bulk_spans(mut self, span: Option<bool>) -> Self {
        self.span = span;
        self
    }

    /// Fix whether launches over every document at d ≤ 64 of 16-byte rows stream the
    /// documents through registers (`maxsim_stream`, `Some(true)`) or cut spanning tiles
    /// (`maxsim_span`, `Some(false)`); `None`: the engine's choice. For experiments and tests;
    /// also TILEMAXSIM_STREAM=0/1.
    pub fn bulk_stream(mut self, stream: Option<bool>) -> Self {
        self.stream = stream;
        self
    }

    /// Fix the warps a `maxsim_stream` block (1, 2 or 4; `None`: the engine's choice). For
    /// experiments and tests; also TILEMAXSIM_STREAM_WARPS=1/2/4.
    pub fn bulk_stream_warps(mut self, warps: Option<u32>) -> Result<Self> {
        if warps.is_some_and(|w| ![1, 2, 4].contains(&w)) {
            return Err(Error::Argument(format!(
                "maxsim_stream takes blocks of 1, 2 or 4 warps, got {warps:?}"
            )));
        }
        self.stream_warps = warps;
        Ok(self)
    }

    /// Fix `maxsim_bulk_rows`'s tile (32 or 64 tokens; 0: never take it) at the d it takes
    /// (multiples of 8 past 128 up to `BULK_ROWS_MAX_DIM`); `None`: the engine's choice. For
    /// experiments and tests; also TILEMAXSIM_ROWS=0/32/64.
    pub fn bulk_rows(mut self, tile: Option<usize>) -> Result<Self> {
        if tile.is_some_and(|t| ![0, 32, 64].contains(&t)) {
            return Err(Error::Argument(format!(
                "maxsim_bulk_rows takes tiles of 32 or 64 tokens (0: off), got {tile:?}"
            )));
        }
        self.rows = tile;
        Ok(self)
    }

    /// Fix how many waves of blocks at the end of a whole-document bulk grid (a block a run)
    /// take one task each (0: none); `None`: the engine's choice. For experiments and tests;
    /// also TILEMAXSIM_TAIL=N.
    pub fn bulk_tail(mut self, waves: Option<u64>) -> Self {
        self.tail = waves;
        self
    }

    /// Fix whether the whole-document bulk-copy kernels (`maxsim_bulk`, `_any`, `_split`) run
    /// on a grid of the blocks that fit at once, each block walking its runs strided by the
    /// grid (`Some(true)`), or a block a run (`Some(false)`); `None`: the engine's choice, a
    /// block a run when `bulk_shape` is fixed. For experiments and tests; also
    /// TILEMAXSIM_BULK_GRID=resident/runs.
    pub fn bulk_grid_resident(mut self, resident: Option<bool>) -> Self {
        self.bulk_resident = resident;
        self
    }

    /// Whether uploads split f32 corpora once into f16 planes beside their rows, which
    /// `maxsim_bulk_planes` reads without splitting each token in the kernel (on by default;
    /// for experiments and tests; also TILEMAXSIM_F32_PLANES=0).
    pub fn f32_planes(mut self, on: bool) -> Self {
        self.f32_planes = on;
        self
    }

    /// Whether uploads store a corpus's rows padded to a wider width where `plan::stored_dim`
    /// finds a faster kernel there (odd d, d past 256 not a multiple of 8, f32 off the
    /// tensor-core d; on by default; for experiments and tests; also TILEMAXSIM_PAD=0).
    pub fn pad_rows(mut self, on: bool) -> Self {
        self.pad = on;
        self
    }
}

//! [`CudaScorer`]'s entries for compressed corpora: the codes' upload (with their inverse
//! norms, or decoded rows where no fused kernel reads the codec), the queries' upload for them,
//! and the fused kernels' launch over all documents or a candidate list.

use super::*;

impl CudaScorer {
    /// Copy documents `docs` of a compressed corpus to the GPU: its codes for the fused
    /// kernels, or, for a codec and d no fused kernel reads, the tokens decoded to f32 rows
    /// (scored by the exact kernels).
    pub fn upload_codes(
        &self,
        corpus: &CompressedCorpus,
        docs: std::ops::Range<usize>,
    ) -> Result<DeviceCodes> {
        self.upload_codes_with(corpus, docs, None)
    }

    /// [`Self::upload_codes`] with the codec's tables already on this GPU (`None`: uploaded).
    pub(in crate::cuda) fn upload_codes_with(
        &self,
        corpus: &CompressedCorpus,
        docs: std::ops::Range<usize>,
        tables: Option<&std::sync::Arc<CodecTables>>,
    ) -> Result<DeviceCodes> {
        let stream = &self.gpu.stream;
        let codes = DeviceCodes::upload(stream, corpus, docs.clone(), tables)?;
        if let Some(inv) = &codes.inv_norm {
            let out = inv.device_ptr(stream).0;
            // SAFETY: the upload's own buffers (ids below K, checked when the corpus was built
            // or opened); `out` holds one float per token.
            unsafe { codec_launch::inv_norms(&self.gpu, stream, &codes.view(stream), out) }?;
        }
        let mut codes = codes;
        // Only a scorer asked for the four-documents-a-warpgroup kernel (`codec_quad`) pays for
        // its order (8 bytes a document on the device); without it a call takes the others.
        if self.quad == Some(true) {
            codes.add_quad_order(stream, corpus, docs.clone())?;
        }
        if fused_kernel(&codes.codec, codes.dim).is_none() {
            let offsets = &corpus.offsets()[docs.start..=docs.end];
            codes.decoded = Some(codec_launch::decode_f32(
                &self.gpu, stream, &codes, offsets,
            )?);
        }
        Ok(codes)
    }

    /// Copy queries to the GPU for scoring against `codes` (checked like every scorer does).
    pub fn upload_codec_queries(
        &self,
        queries: &[Matrix<'_>],
        codes: &DeviceCodes,
    ) -> Result<CodecQueries> {
        let stream = &self.gpu.stream;
        let residual = matches!(codes.codec, crate::codec::Codec::Residual(_));
        let mut q = CodecQueries::upload(stream, queries, codes.dim, residual && codes.fused())?;
        if !codes.fused() {
            q.exact = Some(self.upload_queries(queries, codes.dim)?);
        }
        Ok(q)
    }

    /// Enqueue scoring of compressed documents on the scorer's stream: `out[q * n + i]` for the
    /// `n` documents `docs` (`None`: all). Asynchronous; `out` must hold `queries.len() * n` floats.
    pub fn score_codes_device(
        &self,
        queries: &CodecQueries,
        codes: &DeviceCodes,
        docs: Option<&CudaSlice<i64>>,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        if let (Some(decoded), Some(exact)) = (&codes.decoded, &queries.exact) {
            return self.score_device(exact, decoded, docs, out);
        }
        let stream = &self.gpu.stream;
        let list = docs.map(|d| (d.device_ptr(stream).0, d.len()));
        let target = (out.device_ptr(stream).0, out.len());
        self.score_codes_at(queries, codes, list, target, None)
    }

    /// [`Self::score_codes_device`] on parts of larger buffers: the candidate list `docs` and
    /// the output `out` (`queries.len() × docs.len()` floats). For codes a fused kernel reads.
    pub fn score_codes_views(
        &self,
        queries: &CodecQueries,
        codes: &DeviceCodes,
        docs: &CudaView<'_, i64>,
        out: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        self.score_codes_views_with(queries, codes, docs, out, None)
    }

    /// [`Self::score_codes_views`] with the residual's centroid scores of these queries already
    /// on the device (`table`: `[blocks][K][32]` f16, as `codec_launch::centroid_scores` makes
    /// them; IVF search's first stages), so they are not computed again.
    pub(in crate::cuda) fn score_codes_views_with(
        &self,
        queries: &CodecQueries,
        codes: &DeviceCodes,
        docs: &CudaView<'_, i64>,
        out: &mut CudaViewMut<'_, f32>,
        table: Option<&CudaView<'_, u16>>,
    ) -> Result<()> {
        if !codes.fused() {
            return Err(Error::Argument(
                "candidate lists in views need codes a fused kernel reads".into(),
            ));
        }
        let stream = &self.gpu.stream;
        if let Some(t) = table {
            let k = codes.view(stream).num_centroids;
            if t.len() != queries.blocks * k * 32 {
                return Err(Error::Argument(format!(
                    "centroid scores of {} halves for {} query blocks and {k} centroids",
                    t.len(),
                    queries.blocks,
                )));
            }
        }
        let list = Some((docs.device_ptr(stream).0, docs.len()));
        let target = (out.device_ptr(stream).0, out.len());
        let table = table.map(|t| t.device_ptr(stream).0);
        self.score_codes_at(queries, codes, list, target, table)
    }

    /// The name of the kernel that scores every document of `corpus` uploaded to this GPU for
    /// one query of `query_tokens` tokens (`None`: no fused kernel reads this codec at this d;
    /// its tokens are decoded at upload and scored by the exact kernels).
    pub fn compressed_kernel(
        &self,
        corpus: &CompressedCorpus,
        query_tokens: usize,
    ) -> Option<String> {
        let (tag, param) = codec_tag(corpus.codec());
        let shape = (tag, param, corpus.dim());
        let all = !corpus.is_empty() && quad_kernel_of(tag, param, corpus.dim()).is_some();
        let blocks = query_tokens.div_ceil(32).max(1);
        Some(
            match self.codes_kernel(shape, blocks, whole_blocks(corpus.offsets()), all)? {
                CodecKernel::Warp(n)
                | CodecKernel::Batched(n)
                | CodecKernel::Bulk(n)
                | CodecKernel::Quad(n)
                | CodecKernel::Lut(n) => n,
            },
        )
    }

    /// The fused kernel of a call with `blocks` query blocks over an upload of this codec shape
    /// (`codec_kernel`), then `quad_or`'s where the call takes every document of an upload
    /// that holds the grouped order (`all`).
    fn codes_kernel(
        &self,
        shape: (i32, i32, usize),
        blocks: usize,
        whole_blocks: bool,
        all: bool,
    ) -> Option<CodecKernel> {
        let batched_ok = !self.gpu.kernels.codec_wg.is_empty();
        let kernel = codec_kernel(shape, blocks, batched_ok, (true, whole_blocks), self.force)?;
        Some(quad_or(kernel, shape, batched_ok && all, self.quad))
    }

    /// The fused kernels' launch for a candidate list `(address, length)` (`None`: every
    /// document) into `out` `(address, floats)`; `table`: the residual's centroid scores where
    /// the caller has them (else computed here where the kernel reads them).
    fn score_codes_at(
        &self,
        queries: &CodecQueries,
        codes: &DeviceCodes,
        docs: Option<(u64, usize)>,
        out: (u64, usize),
        table: Option<u64>,
    ) -> Result<()> {
        if queries.dim != codes.dim {
            return Err(Error::DimMismatch {
                what: "the queries".into(),
                expected: codes.dim,
                got: queries.dim,
            });
        }
        let n = docs.map_or(codes.len, |d| d.1);
        if out.1 < queries.len * n {
            return Err(Error::Argument(format!(
                "score buffer holds {} floats, needs {}",
                out.1,
                queries.len * n
            )));
        }
        if n == 0 || queries.len == 0 {
            return Ok(());
        }
        let (tag, param) = codec_tag(&codes.codec);
        let all = docs.is_none() && codes.quad_order.is_some();
        let kernel = self
            .codes_kernel(
                (tag, param, codes.dim),
                queries.blocks,
                codes.whole_blocks,
                all,
            )
            .ok_or_else(|| {
                Error::Argument(
                    "queries were uploaded for the fused kernels of another corpus".into(),
                )
            })?;
        let stream = &self.gpu.stream;
        let view = codes.view(stream);
        let reads_table = view.tag == 0
            && matches!(
                kernel,
                CodecKernel::Warp(_) | CodecKernel::Bulk(_) | CodecKernel::Quad(_)
            );
        // (`made` lives to the end of the function: its free is ordered on `stream` after the
        // kernel.)
        let made = if reads_table && table.is_none() {
            // SAFETY: the upload's centroids.
            Some(unsafe { codec_launch::centroid_scores(&self.gpu, stream, queries, &view) }?)
        } else {
            None
        };
        let cs = table
            .or_else(|| made.as_ref().map(|c| c.device_ptr(stream).0))
            .filter(|_| reads_table);
        let target = Target {
            stream,
            doc_index: docs.map_or(0, |d| d.0),
            n,
            out: out.0,
        };
        // SAFETY: the upload's buffers (inverse norms filled in `upload_codes`); the candidate
        // list holds `n` indices (checked < codes.len by the callers that build it) and `out`
        // room for Q × n floats (checked above), on this scorer's stream.
        unsafe {
            codec_launch::fused(
                &self.gpu,
                &kernel,
                queries,
                &view,
                cs,
                self.wg_shape(codes.pack_pays),
                target,
            )
        }
    }
}

//! How an index is searched: the searcher of [`Index::searcher`] for a device and settings,
//! assembled from its segments (the build's documents and the added ones): IVF stages on the
//! GPU or the CPU (both segments as one there: `joint_searcher`), or exhaustive search, then
//! the exact stage; and the server's split of it into a kept [`BaseSearcher`] and
//! [`Index::live_searcher`].

use super::*;

impl Index {
    /// A searcher over this index for `device`, plus a notice when part of it does not run
    /// there (IVF stages the GPU does not run: `nprobe` over `cuda::MAX_GPU_NPROBE` and below
    /// K; `Auto` without a GPU). `options` carries the
    /// GPUs and residency of exhaustive search, and an exact second stage of the caller's
    /// (`options.rerank`, which takes precedence over the index's own exact tokens).
    pub fn searcher<'a>(
        &'a self,
        device: Device,
        how: &IndexSearch,
        options: &SearchOptions<'a>,
    ) -> Result<(Box<dyn Searcher + 'a>, Option<String>)> {
        if let Some(joint) = self.joint_searcher(device, how, options)? {
            return Ok(joint);
        }
        let (base, notice) = self.base_searcher(device, how, options)?;
        if self.updates.is_empty() {
            return Ok((base.searcher, notice));
        }
        let added = self.added_searcher(device, how, options)?;
        Ok((
            Box::new(self.live(live::Base::Owned(base.searcher), added)),
            notice,
        ))
    }

    /// The searcher of the build's documents alone, plus the notice of [`Index::searcher`]. The
    /// build never changes, so a server keeps it (its GPU uploads included) while updates come,
    /// and wraps it with each state of the updates by [`Index::live_searcher`].
    pub fn base_searcher<'a>(
        &'a self,
        device: Device,
        how: &IndexSearch,
        options: &SearchOptions<'a>,
    ) -> Result<(BaseSearcher<'a>, Option<String>)> {
        let options = self.stage_options(how, options);
        let (searcher, notice) =
            self.segment_searcher(&self.codes, &self.ivf, device, how, &options)?;
        let base = BaseSearcher {
            searcher,
            dir: self.dir.clone(),
            docs: self.codes.len(),
            generation: self.generation,
        };
        Ok((base, notice))
    }

    /// A searcher over this index as its updates stand now, around `base` (the
    /// [`Index::base_searcher`] of an opening of the same directory, with the same settings):
    /// only the added documents' segment is prepared here.
    pub fn live_searcher<'a>(
        &'a self,
        base: &'a BaseSearcher<'_>,
        device: Device,
        how: &IndexSearch,
        options: &SearchOptions<'a>,
    ) -> Result<Box<dyn Searcher + 'a>> {
        if base.dir != self.dir
            || base.docs != self.codes.len()
            || base.generation != self.generation
        {
            return Err(Error::Argument(format!(
                "the base searcher is of {} ({} documents, generation {}), not of this index \
                 ({}, {} documents, generation {})",
                base.dir.display(),
                base.docs,
                base.generation,
                self.dir.display(),
                self.codes.len(),
                self.generation
            )));
        }
        if let Some((joint, _)) = self.joint_searcher(device, how, options)? {
            return Ok(joint);
        }
        let added = self.added_searcher(device, how, options)?;
        Ok(Box::new(
            self.live(live::Base::Shared(base.searcher.as_ref()), added),
        ))
    }

    /// IVF search of an index with updates on the CPU, its segments as one: the build's and the
    /// added documents' candidates (deleted ones left out) in one ranking, `ndocs` rescored in
    /// all, then the exact stage over both; the search of the live documents compacted. `None`
    /// where the segments are searched apart ([`live::LiveSearch`]): no updates, exhaustive
    /// search (each segment's top-k is exact there), IVF stages on a GPU, or exact tokens kept
    /// by one segment only.
    #[allow(clippy::type_complexity)]
    fn joint_searcher<'a>(
        &'a self,
        device: Device,
        how: &IndexSearch,
        options: &SearchOptions<'a>,
    ) -> Result<Option<(Box<dyn Searcher + 'a>, Option<String>)>> {
        let (on_cpu, notice) = match device {
            Device::Cpu | Device::Reference => (true, None),
            Device::Auto if options.devices.is_empty() && crate::gpu_count() == 0 => (
                true,
                Some("no usable GPU here; IVF search runs on the CPU".to_string()),
            ),
            _ => (false, None),
        };
        if self.updates.is_empty() || how.exhaustive || !on_cpu {
            return Ok(None);
        }
        let added = self.updates.added.as_ref();
        let options = self.stage_options(how, options);
        let exact = match options.rerank {
            None => None,
            Some(r) => match self.exact_segments(r.exact)? {
                Some(exact) => Some((exact, r.candidates)),
                None => return Ok(None),
            },
        };
        let (scorer, _) = scorer_for(Device::Cpu, CodecKind::Residual)?;
        let mut segments = vec![probe::Segment {
            codes: &self.codes,
            ivf: &self.ivf,
        }];
        segments.extend(added.map(|a| probe::Segment {
            codes: &a.codes,
            ivf: &a.ivf,
        }));
        let first: Box<dyn Searcher + 'a> = Box::new(probe::IvfSearch::new(
            segments,
            &self.updates.deleted,
            self.centroids_f32(),
            self.probe_of(how),
            scorer,
        )?);
        let (searcher, second) = match exact {
            Some((exact, candidates)) => {
                crate::search::reranked_on_host(first, exact, candidates, device)?
            }
            None => (first, None),
        };
        Ok(Some((searcher, notice.or(second))))
    }

    /// The exact tokens of every segment, the build's (`base`) first, each checked against its
    /// codes; `None` where documents were added without theirs (no exact stage over both).
    pub(super) fn exact_segments<'a>(
        &'a self,
        base: &'a Corpus,
    ) -> Result<Option<Vec<&'a Corpus>>> {
        crate::search::same_documents(base, &self.codes)?;
        match &self.updates.added {
            None => Ok(Some(vec![base])),
            Some(a) => match &a.exact {
                Some(e) => {
                    crate::search::same_documents(e, &a.codes)?;
                    Ok(Some(vec![base, e]))
                }
                None => Ok(None),
            },
        }
    }

    /// The IVF stages' settings of `how`, the index's defaults where it names none.
    fn probe_of(&self, how: &IndexSearch) -> Probe {
        Probe {
            nprobe: how.nprobe.unwrap_or(self.defaults.probe.nprobe),
            ndocs: how.ndocs.unwrap_or(self.defaults.probe.ndocs),
        }
    }

    /// The residual centroids as f32, made once.
    fn centroids_f32(&self) -> &[f32] {
        self.centroids.get_or_init(|| match self.codes.codec() {
            Codec::Residual(r) => r.centroids().iter().map(|x| x.to_f32()).collect(),
            _ => Vec::new(),
        })
    }

    /// The options of a segment's search: the exact stage of the caller's, else the index's
    /// own exact tokens, with the candidates of `how`, the caller's or the index's default.
    pub(super) fn stage_options<'a>(
        &'a self,
        how: &IndexSearch,
        options: &SearchOptions<'a>,
    ) -> SearchOptions<'a> {
        let exact = options.rerank.map(|r| r.exact).or(self.exact.as_ref());
        let candidates = how
            .rerank_k
            .or(options.rerank.map(|r| r.candidates))
            .unwrap_or(self.defaults.rerank_k);
        let rerank = exact
            .filter(|_| candidates > 0)
            .map(|exact| Rerank { exact, candidates });
        SearchOptions {
            rerank,
            ..options.clone()
        }
    }

    /// The added documents' searcher (none when no document was added), with the exact stage
    /// when the base segment has one and the added documents keep their exact tokens.
    fn added_searcher<'a>(
        &'a self,
        device: Device,
        how: &IndexSearch,
        options: &SearchOptions<'a>,
    ) -> Result<Option<Box<dyn Searcher + 'a>>> {
        let Some(a) = &self.updates.added else {
            return Ok(None);
        };
        let options = self.stage_options(how, options);
        let rerank = options.rerank.and_then(|r| {
            a.exact.as_ref().map(|exact| Rerank {
                exact,
                candidates: r.candidates,
            })
        });
        let o = SearchOptions {
            rerank,
            ..options.clone()
        };
        Ok(Some(
            self.segment_searcher(&a.codes, &a.ivf, device, how, &o)?.0,
        ))
    }

    /// The build's searcher and the added documents', deleted documents dropped.
    fn live<'a>(
        &'a self,
        base: live::Base<'a>,
        added: Option<Box<dyn Searcher + 'a>>,
    ) -> live::LiveSearch<'a> {
        live::LiveSearch {
            base,
            added,
            base_docs: self.codes.len(),
            added_docs: self.updates.added_docs(),
            deleted: &self.updates.deleted,
        }
    }

    /// The searcher of one segment of the index (the build's documents, or the added ones):
    /// its codes scored exhaustively, or probed through its IVF, then the exact stage of
    /// `options`.
    fn segment_searcher<'a>(
        &'a self,
        codes: &'a CompressedCorpus,
        ivf: &'a Ivf,
        device: Device,
        how: &IndexSearch,
        options: &SearchOptions<'a>,
    ) -> Result<(Box<dyn Searcher + 'a>, Option<String>)> {
        if how.exhaustive {
            return searcher_for(device, codes, options);
        }
        let probe = self.probe_of(how);
        let devices = match (device, options.devices.is_empty()) {
            (Device::Cuda(_) | Device::Auto, false) => options.devices.clone(),
            (Device::Cuda(n), true) => vec![n],
            (Device::Auto, true) => vec![0],
            (Device::Cpu | Device::Reference, _) => Vec::new(),
        };
        let mut notice = None;
        if !devices.is_empty() {
            match gpu_ivf(codes, ivf, probe, &devices, options.residency) {
                Ok(first) => {
                    let (searcher, second) = reranked(first, codes, options.rerank, device)?;
                    return Ok((searcher, second));
                }
                Err(e @ (Error::DeviceUnavailable(_) | Error::OutOfMemory(_)))
                    if device == Device::Auto =>
                {
                    notice = Some(format!("no usable GPU ({e}); IVF search runs on the CPU"));
                }
                Err(Error::Argument(m)) => {
                    notice = Some(format!("IVF search runs its stages on the CPU: {m}"));
                }
                Err(e) => return Err(e),
            }
        }
        let (scorer, _) = scorer_for(Device::Cpu, CodecKind::Residual)?;
        let segment = probe::Segment { codes, ivf };
        let first = Box::new(probe::IvfSearch::new(
            vec![segment],
            &[],
            self.centroids_f32(),
            probe,
            scorer,
        )?);
        let (searcher, second) = reranked(first, codes, options.rerank, device)?;
        Ok((searcher, notice.or(second)))
    }
}

/// The IVF stages of a segment on the GPUs `devices` (its documents split over them when there
/// are several), or an argument error where they do not apply there: the caller runs them on
/// the CPU.
#[cfg(feature = "cuda")]
fn gpu_ivf<'a>(
    codes: &'a CompressedCorpus,
    ivf: &Ivf,
    probe: Probe,
    devices: &[usize],
    residency: Residency,
) -> Result<Box<dyn Searcher + 'a>> {
    Ok(match devices {
        [ordinal] => Box::new(crate::cuda::GpuIvfSearch::new(
            codes, ivf, probe, *ordinal, residency,
        )?),
        _ => Box::new(crate::cuda::ShardedIvfSearch::new(
            codes, probe, devices, residency,
        )?),
    })
}

#[cfg(not(feature = "cuda"))]
fn gpu_ivf<'a>(
    _codes: &'a CompressedCorpus,
    _ivf: &Ivf,
    _probe: Probe,
    devices: &[usize],
    _residency: Residency,
) -> Result<Box<dyn Searcher + 'a>> {
    Err(Error::DeviceUnavailable(format!(
        "{devices:?}: this build has no CUDA engine (feature `cuda` off)"
    )))
}

//! Index directories (`tilemaxsim::index`): built from exact and compressed corpora, opened
//! and checked against their manifest; IVF search equals exhaustive search on the codes when
//! every centroid is probed and every candidate rescored, with and without the exact stage;
//! fewer probes give valid, sorted hits; a damaged directory (no manifest, bad JSON, counts
//! that disagree, a name outside the directory, a truncated IVF, codes of another codec) is a
//! clear error, never a panic.

mod common;

use common::*;
use tilemaxsim::codec::{CodecSpec, ResidualOptions, compress};
use tilemaxsim::index::{BuildOptions, Index, IndexSearch, Source, build};
use tilemaxsim::{Corpus, DType, Device, OwnedElements, SearchOptions};

/// A change made to a copy of an index directory.
type Edit<'a> = Box<dyn Fn(&std::path::Path) + 'a>;

fn options(centroids: usize) -> BuildOptions {
    BuildOptions {
        residual: ResidualOptions {
            nbits: 2,
            centroids: Some(centroids),
            kmeans_iters: 2,
            ..Default::default()
        },
        device: Device::Cpu,
        ..Default::default()
    }
}

fn lengths(n: usize, seed: u64) -> Vec<usize> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| 1 + (rand::Rng::random_range(&mut r, 0..40usize)))
        .collect()
}

fn queries(seed: u64, dim: usize) -> Vec<OwnedElements> {
    let mut r = rng(seed);
    [1usize, 5, 32, 33]
        .iter()
        .map(|&nq| random_query(&mut r, nq, dim, DType::F32, 1.0))
        .collect()
}

fn search(
    index: &Index,
    how: IndexSearch,
    qs: &[tilemaxsim::Matrix<'_>],
    k: usize,
) -> Vec<Vec<tilemaxsim::Hit>> {
    let (s, _) = index
        .searcher(Device::Cpu, &how, &SearchOptions::default())
        .unwrap();
    s.search(qs, k).unwrap()
}

#[test]
fn ivf_with_every_centroid_probed_equals_exhaustive() {
    let dim = 48;
    let corpus = unit_corpus(1, &lengths(300, 2), dim, DType::F16);
    let dir = tempfile::tempdir().unwrap();
    let report = build(
        Source::Exact(&corpus),
        None,
        dir.path().join("idx"),
        &options(16),
        &|_, _, _| {},
    )
    .unwrap();
    assert!(report.codes_bytes > 0 && report.ivf_bytes > 0 && report.exact_bytes > 0);
    let index = Index::open(dir.path().join("idx")).unwrap();
    assert_eq!(index.codes().len(), 300);
    assert!(index.exact().is_some());
    // Every document is in the list of each centroid its tokens hold, and only there.
    let ids = index.codes().aux().unwrap();
    let offsets = index.codes().offsets();
    for c in 0..16 {
        let want: Vec<u32> = (0..300u32)
            .filter(|&j| ids[offsets[j as usize]..offsets[j as usize + 1]].contains(&(c as u32)))
            .collect();
        assert_eq!(index.ivf().list(c), &want[..], "centroid {c}");
    }
    let owned = queries(3, dim);
    let qs = matrices(&owned, dim);
    for rerank in [Some(0), Some(40), None] {
        let all = IndexSearch {
            nprobe: Some(16),
            ndocs: Some(300),
            rerank_k: rerank,
            ..Default::default()
        };
        let exhaustive = IndexSearch {
            exhaustive: true,
            rerank_k: rerank,
            ..Default::default()
        };
        for k in [1, 10, 300, 500] {
            let a = search(&index, all, &qs, k);
            let b = search(&index, exhaustive, &qs, k);
            assert_eq!(a, b, "rerank {rerank:?}, k = {k}");
            assert_eq!(a[0].len(), k.min(300));
        }
    }
    // Fewer probes: at most k hits each, best first, distinct valid documents.
    let few = IndexSearch {
        nprobe: Some(1),
        ndocs: Some(20),
        ..Default::default()
    };
    for hits in search(&index, few, &qs, 10) {
        assert!(hits.len() <= 10 && !hits.is_empty());
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        let mut docs: Vec<usize> = hits.iter().map(|h| h.doc).collect();
        docs.sort_unstable();
        docs.dedup();
        assert_eq!(docs.len(), hits.len());
        assert!(docs.iter().all(|&j| j < 300));
    }
    // Queries of another d, and k = 0, are errors.
    let (s, _) = index
        .searcher(Device::Cpu, &few, &SearchOptions::default())
        .unwrap();
    let wrong = queries(4, dim + 1);
    assert!(s.search(&matrices(&wrong, dim + 1), 10).is_err());
    assert!(s.search(&qs, 0).is_err());
}

#[test]
fn built_from_a_compressed_corpus_without_exact_tokens() {
    let dim = 32;
    let corpus = unit_corpus(5, &lengths(120, 6), dim, DType::F32);
    let spec = CodecSpec::Residual(ResidualOptions {
        nbits: 4,
        centroids: Some(8),
        kmeans_iters: 2,
        ..Default::default()
    });
    let codes = compress(&corpus, &spec, 0, &|_, _, _| {}).unwrap();
    let dir = tempfile::tempdir().unwrap();
    build(
        Source::Compressed(&codes),
        None,
        dir.path(),
        &options(8),
        &|_, _, _| {},
    )
    .unwrap();
    let index = Index::open(dir.path()).unwrap();
    assert!(index.exact().is_none());
    assert_eq!(index.codes().codes(), codes.codes());
    // No exact tokens: no second stage, unless the caller gives the exact corpus.
    let owned = queries(7, dim);
    let qs = matrices(&owned, dim);
    let how = IndexSearch::default();
    let (s, _) = index
        .searcher(Device::Cpu, &how, &SearchOptions::default())
        .unwrap();
    assert!(!s.name().contains("reranked"), "{}", s.name());
    let with = SearchOptions {
        rerank: Some(tilemaxsim::Rerank {
            exact: &corpus,
            candidates: 30,
        }),
        ..Default::default()
    };
    let (s, _) = index.searcher(Device::Cpu, &how, &with).unwrap();
    assert!(s.name().contains("reranked"), "{}", s.name());
    assert_eq!(s.search(&qs, 5).unwrap().len(), qs.len());
    // Another corpus's exact tokens are refused.
    let other = unit_corpus(8, &[3, 4], dim, DType::F32);
    let wrong = SearchOptions {
        rerank: Some(tilemaxsim::Rerank {
            exact: &other,
            candidates: 30,
        }),
        ..Default::default()
    };
    assert!(index.searcher(Device::Cpu, &how, &wrong).is_err());
    // The build refuses a directory that is not empty; int8 codes are not an index.
    let e = build(
        Source::Compressed(&codes),
        None,
        dir.path(),
        &options(8),
        &|_, _, _| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("already holds an index"), "{e}");
    let int8 = compress(&corpus, &CodecSpec::Int8, 0, &|_, _, _| {}).unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    assert!(
        build(
            Source::Compressed(&int8),
            None,
            other_dir.path().join("i"),
            &options(8),
            &|_, _, _| {}
        )
        .is_err()
    );
}

#[test]
fn damaged_directories_are_errors() {
    let dim = 16;
    let corpus: Corpus = unit_corpus(9, &lengths(40, 10), dim, DType::F32);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    build(
        Source::Exact(&corpus),
        None,
        &src,
        &options(4),
        &|_, _, _| {},
    )
    .unwrap();
    let manifest = std::fs::read_to_string(src.join("index.json")).unwrap();
    let copy = |name: &str, edit: &dyn Fn(&std::path::Path)| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for f in std::fs::read_dir(&src).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
        }
        edit(&d);
        Index::open(&d).map(|_| ()).unwrap_err().to_string()
    };
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "no-manifest",
            Box::new(|d| std::fs::remove_file(d.join("index.json")).unwrap()),
            "no index here",
        ),
        (
            "bad-json",
            Box::new(|d| std::fs::write(d.join("index.json"), "{").unwrap()),
            "not valid JSON",
        ),
        (
            "wrong-count",
            Box::new(|d| {
                let m = manifest.replace("\"documents\": 40", "\"documents\": 41");
                std::fs::write(d.join("index.json"), m).unwrap()
            }),
            "the manifest says",
        ),
        (
            "outside",
            Box::new(|d| {
                let m = manifest.replace("\"ivf.safetensors\"", "\"../ivf.safetensors\"");
                std::fs::write(d.join("index.json"), m).unwrap()
            }),
            "file name in the index directory",
        ),
        (
            "truncated-ivf",
            Box::new(|d| {
                let p = d.join("ivf.safetensors");
                let b = std::fs::read(&p).unwrap();
                std::fs::write(&p, &b[..b.len() - 3]).unwrap()
            }),
            "ivf.safetensors",
        ),
        (
            "missing-exact",
            Box::new(|d| std::fs::remove_file(d.join("exact.safetensors")).unwrap()),
            "exact.safetensors",
        ),
        (
            "other-version",
            Box::new(|d| {
                let m = manifest.replace("\"version\": 1", "\"version\": 2");
                std::fs::write(d.join("index.json"), m).unwrap()
            }),
            "version",
        ),
    ];
    for (name, edit, want) in cases {
        let e = copy(name, &*edit);
        assert!(e.contains(want), "{name}: {e}");
    }
}

#[test]
fn exact_tokens_written_beside_the_compression_are_recorded_finite_and_nan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dim = 24;
    // A corpus made in memory (its values not scanned yet): the build scans them before it
    // writes the exact tokens beside the compression, so the file records them finite.
    let corpus = unit_corpus(8, &lengths(30, 8), dim, DType::F16);
    assert_eq!(
        corpus.finite_check(),
        tilemaxsim::corpus::FiniteCheck::NotChecked
    );
    let path = dir.path().join("idx");
    build(
        Source::Exact(&corpus),
        None,
        &path,
        &options(8),
        &|_, _, _| {},
    )
    .unwrap();
    let exact = Corpus::open(path.join("exact.safetensors")).unwrap();
    assert_eq!(
        exact.finite_check(),
        tilemaxsim::corpus::FiniteCheck::Recorded
    );
    assert_eq!(exact.tokens().to_f32_vec(), corpus.tokens().to_f32_vec());
    assert_eq!(Index::open(&path).unwrap().len(), 30);
    // A NaN is refused before anything is written: no manifest, no exact file.
    let mut v = corpus.tokens().to_f32_vec();
    v[dim * 3 + 1] = f32::NAN;
    let nan = Corpus::new(OwnedElements::F32(v), dim, corpus.offsets().to_vec()).unwrap();
    let bad = dir.path().join("bad");
    let err = build(Source::Exact(&nan), None, &bad, &options(8), &|_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("finite") || err.contains("NaN"), "{err}");
    assert!(Index::open(&bad).is_err());
    assert!(!bad.join("exact.safetensors").exists());
}

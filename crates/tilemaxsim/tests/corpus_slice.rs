//! Shards of a corpus: `Corpus::slice` and `OpenOptions::documents` give documents `a..b` as a
//! corpus of their own (bit-identical tokens, rebased offsets, sliced ids, scores equal to the
//! whole corpus's), a mapped file stays mapped, only the shard's values are checked, and a bad
//! range is an error, never a panic.

mod common;

use common::*;
use tilemaxsim::corpus::{FiniteCheck, OpenOptions};
use tilemaxsim::{Corpus, CpuScorer, DType, Error, OwnedElements, Scorer};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Assert `shard` is documents `range` of `whole`: tokens, ids, and every query's scores.
fn assert_is_shard(whole: &Corpus, shard: &Corpus, range: std::ops::Range<usize>, what: &str) {
    assert_eq!(shard.len(), range.len(), "{what}: length");
    assert_eq!(shard.dim(), whole.dim());
    assert_eq!(shard.dtype(), whole.dtype());
    assert_eq!(shard.offsets()[0], 0, "{what}: offsets rebased");
    for (j, g) in range.clone().enumerate() {
        assert_eq!(
            shard.doc(j).elements().as_bytes(),
            whole.doc(g).elements().as_bytes(),
            "{what}: document {j} = {g}"
        );
    }
    assert_eq!(
        shard.doc_ids(),
        whole.doc_ids().map(|ids| &ids[range.clone()]),
        "{what}: ids"
    );
    let mut r = rng(range.start as u64);
    let scorer = CpuScorer::new();
    let q = random_query(&mut r, 5, whole.dim(), whole.dtype(), 1.0);
    let q = matrices(std::slice::from_ref(&q), whole.dim())[0];
    let all = scorer.score(q, whole).unwrap();
    let part = scorer.score(q, shard).unwrap();
    // The same document scored by the same kernel: the very same bits.
    assert_eq!(part, all[range].to_vec(), "{what}: scores");
}

#[test]
fn a_slice_is_the_documents_of_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let lengths = [3, 1, 7, 2, 1, 40, 5, 1, 9];
    let n = lengths.len();
    let ids: Vec<String> = (0..n).map(|j| format!("doc-{j}")).collect();
    for (t, dtype) in DTYPES.into_iter().enumerate() {
        let owned = random_corpus(&mut rng(t as u64), &lengths, 13, dtype, 1.0)
            .with_doc_ids(ids.clone())
            .unwrap();
        let path = dir.path().join(format!("c-{dtype}.safetensors"));
        owned.save(&path).unwrap();
        let mapped = Corpus::open(&path).unwrap();
        assert!(mapped.is_mapped());
        for range in [0..n, 0..1, n - 1..n, 2..6, 5..6, 1..n] {
            let what = format!("{dtype} {range:?}");
            let s = owned.slice(range.clone()).unwrap();
            assert!(!s.is_mapped());
            assert_is_shard(&owned, &s, range.clone(), &format!("owned {what}"));
            let s = mapped.slice(range.clone()).unwrap();
            assert!(s.is_mapped(), "a slice of a map shares it");
            assert_is_shard(&owned, &s, range.clone(), &format!("mapped {what}"));
            let s = OpenOptions::new()
                .documents(range.clone())
                .open(&path)
                .unwrap();
            assert!(s.is_mapped());
            assert_is_shard(&owned, &s, range.clone(), &format!("opened {what}"));
            // A slice of a slice, and a shard saved and opened again.
            if range.len() > 2 {
                let inner = s.slice(1..range.len() - 1).unwrap();
                let g = range.start + 1..range.end - 1;
                assert_is_shard(&owned, &inner, g, &format!("nested {what}"));
            }
            let again = dir.path().join("shard.safetensors");
            s.save(&again).unwrap();
            assert_is_shard(&owned, &Corpus::open(&again).unwrap(), range, &what);
        }
    }
}

#[test]
fn a_bad_range_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = random_corpus(&mut rng(7), &[2, 3, 4], 8, DType::F32, 1.0);
    let path = dir.path().join("three.safetensors");
    c.save(&path).unwrap();
    #[allow(clippy::reversed_empty_ranges)]
    for range in [0..0, 2..2, 3..4, 0..4, 2..1, 9..12] {
        let e = c.slice(range.clone()).expect_err("bad range");
        let msg = e.to_string();
        assert!(
            matches!(e, Error::Argument(_))
                && msg.contains(&format!("{}..{}", range.start, range.end))
                && msg.contains("3 documents"),
            "{range:?}: {msg}"
        );
        let e = OpenOptions::new()
            .documents(range.clone())
            .open(&path)
            .expect_err("bad range");
        let msg = e.to_string();
        assert!(
            matches!(e, Error::Argument(_)) && msg.contains("three.safetensors"),
            "{range:?}: {msg}"
        );
    }
}

#[test]
fn only_the_shards_values_are_checked_and_named_by_file_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = vec![0.25f32; 4 * 8];
    v[4 * 4 + 2] = f32::NAN; // token row 4: document 2 (rows 3..6), its row 1, column 2
    let c = Corpus::from_lengths(OwnedElements::from_f32(&v, DType::F16), 4, &[2, 1, 3, 2])
        .unwrap()
        .with_doc_ids(vec!["a".into(), "b".into(), "c".into(), "d".into()])
        .unwrap();
    let path = dir.path().join("nan.safetensors");
    c.save(&path).unwrap();
    for clean in [0..2, 3..4] {
        let s = OpenOptions::new().documents(clean).open(&path).unwrap();
        assert_eq!(s.finite_check(), FiniteCheck::Scanned);
    }
    for bad in [2..3, 1..4, 0..4] {
        let e = OpenOptions::new()
            .documents(bad.clone())
            .open(&path)
            .expect_err("the NaN is in range");
        let msg = e.to_string();
        assert!(
            matches!(e, Error::NonFinite { row: 1, col: 2, .. })
                && msg.contains("document 2 (id \"c\")")
                && msg.contains("nan.safetensors"),
            "{bad:?}: {msg}"
        );
    }
    // Opened unchecked, the slice knows it was not checked, and its own check finds the NaN.
    let s = OpenOptions::new()
        .check_finite(false)
        .documents(1..4)
        .open(&path)
        .unwrap();
    assert_eq!(s.finite_check(), FiniteCheck::NotChecked);
    assert!(matches!(
        s.check_finite(),
        Err(Error::NonFinite { row: 1, col: 2, .. })
    ));
}

/// A shard of a compressed file (`OpenOptions::documents` through `open_any`, as
/// `tilemaxsim.ray` opens one per actor): the same codes, rebased offsets, sliced ids, and
/// scores equal to the whole file's, for every codec; mapped files stay mapped.
#[test]
fn compressed_files_open_as_shards_too() {
    use tilemaxsim::codec::{CodecSpec, PqOptions, ResidualOptions, compress};
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(41);
    let lens: Vec<usize> = (0..23).map(|i| [1, 5, 9, 30][i % 4]).collect();
    let exact = random_corpus(&mut r, &lens, 16, DType::F32, 1.0)
        .normalized()
        .unwrap()
        .with_doc_ids((0..23).map(|i| format!("d{i}")).collect())
        .unwrap();
    let specs = [
        CodecSpec::Residual(ResidualOptions {
            nbits: 2,
            centroids: Some(8),
            ..Default::default()
        }),
        CodecSpec::Pq(PqOptions {
            m: 4,
            ..Default::default()
        }),
        CodecSpec::Int8,
        CodecSpec::Fp8,
    ];
    let q = random_query(&mut r, 4, 16, DType::F32, 1.0);
    let q = matrices(std::slice::from_ref(&q), 16)[0];
    let scorer = CpuScorer::new();
    for (i, spec) in specs.iter().enumerate() {
        let path = dir.path().join(format!("c{i}.safetensors"));
        compress(&exact, spec, 3, &|_, _, _| {})
            .unwrap()
            .save(&path)
            .unwrap();
        let whole = OpenOptions::new().open_any(&path).unwrap();
        let shard = OpenOptions::new().documents(5..17).open_any(&path).unwrap();
        assert_eq!(shard.len(), 12);
        assert_eq!(shard.offsets()[0], 0);
        assert_eq!(shard.doc_ids(), whole.doc_ids().map(|ids| &ids[5..17]));
        let all = scorer.score(q, whole.as_ref()).unwrap();
        assert_eq!(
            scorer.score(q, shard.as_ref()).unwrap(),
            all[5..17].to_vec(),
            "codec {i}"
        );
        match shard.kind() {
            tilemaxsim::CorpusKind::Compressed(c) => {
                assert!(c.is_mapped(), "codec {i}: the shard shares the map")
            }
            tilemaxsim::CorpusKind::Exact(_) => panic!("codec {i}: opened as exact"),
        }
        let e = OpenOptions::new()
            .documents(20..30)
            .open_any(&path)
            .unwrap_err();
        assert!(matches!(e, Error::Argument(_)), "{e}");
    }
}

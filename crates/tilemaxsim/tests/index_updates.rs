//! Live updates of an index (`Index::add`, `Index::delete`, `updates.log`): random sequences
//! of adds and deletes, reopened, search as an index rebuilt from the surviving documents
//! (exhaustive and IVF at full probe, on the codes and with the exact stage); a torn last
//! record, cut at every length, is ignored by readers and cut off by the next writer, every
//! acknowledged update kept; a damaged record before the end, or a record that does not fit
//! the index, is an error; bad adds and deletes are refused and change nothing; a fuzzed log
//! (bytes flipped, cut, garbage appended, payload fields rewritten under a matching CRC) opens
//! to a whole state or fails with an error, never a panic. Compactions: `index_compact.rs`.

mod common;

use common::index::*;
use common::*;
use tilemaxsim::index::{Index, IndexSearch, LOG};
use tilemaxsim::{AnyCorpus, Corpus, CpuScorer, DType, Hit, Matrix, OwnedElements, Scorer};

/// The top-k of a rebuild: `corpus` scored exhaustively, its hits renumbered through `live`.
fn rebuilt(corpus: &dyn AnyCorpus, live: &[usize], qs: &[Matrix<'_>], k: usize) -> Vec<Vec<Hit>> {
    renumbered(CpuScorer::new().top_k_batch(qs, corpus, k).unwrap(), live)
}

#[test]
fn random_adds_and_deletes_search_as_a_rebuild() {
    for seed in 0..4u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        build_index(&path, 60, seed);
        let mut index = Index::open(&path).unwrap();
        let mut r = rng(100 + seed);
        let mut numbered = 60;
        for step in 0..8 {
            if rand::Rng::random_bool(&mut r, 0.5) {
                let n = 1 + rand::Rng::random_range(&mut r, 0..12usize);
                let lengths: Vec<usize> = (0..n)
                    .map(|i| {
                        if i == 0 {
                            1
                        } else {
                            1 + rand::Rng::random_range(&mut r, 0..45usize)
                        }
                    })
                    .collect();
                let dtype = [DType::F16, DType::F32, DType::BF16][step % 3];
                let docs = unit_corpus(1000 * seed + step as u64, &lengths, DIM, dtype);
                let got = index.add(&docs).unwrap();
                assert_eq!(got, numbered..numbered + n);
                numbered += n;
            } else {
                let m = 1 + rand::Rng::random_range(&mut r, 0..10usize);
                let docs: Vec<usize> = (0..m)
                    .map(|_| rand::Rng::random_range(&mut r, 0..numbered))
                    .collect();
                let fresh = docs
                    .iter()
                    .filter(|&&j| !index.is_deleted(j))
                    .collect::<std::collections::BTreeSet<_>>()
                    .len();
                assert_eq!(index.delete(&docs).unwrap(), fresh);
            }
            assert_eq!(index.len(), numbered);
        }
        // Reopened from disk: the same state, and every search a rebuild's.
        let reopened = Index::open(&path).unwrap();
        assert_eq!(
            (reopened.len(), reopened.deleted()),
            (index.len(), index.deleted())
        );
        let (codes, exact, live) = survivors(&reopened);
        let owned = queries(&mut r, &[1, 7, 32]);
        let qs = views(&owned);
        for k in [1, 10, live.len() + 5] {
            let on_codes = rebuilt(&codes, &live, &qs, k);
            let full = IndexSearch {
                nprobe: Some(K),
                ndocs: Some(index.len()),
                rerank_k: Some(0),
                ..Default::default()
            };
            assert_eq!(
                search(&reopened, full, &qs, k),
                on_codes,
                "seed {seed}, k {k}: IVF"
            );
            let exhaustive = IndexSearch {
                exhaustive: true,
                rerank_k: Some(0),
                ..Default::default()
            };
            assert_eq!(
                search(&reopened, exhaustive, &qs, k),
                on_codes,
                "seed {seed}, k {k}: exhaustive"
            );
            // The exact stage over every candidate: the exact top-k of the survivors.
            let reranked = IndexSearch {
                exhaustive: true,
                rerank_k: Some(index.len()),
                ..Default::default()
            };
            assert_eq!(
                search(&reopened, reranked, &qs, k),
                rebuilt(&exact, &live, &qs, k),
                "seed {seed}, k {k}: exact"
            );
        }
    }
}

#[test]
fn many_small_adds_grow_the_added_segment_as_one_add_would() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    build_index(&path, 15, 21);
    let mut index = Index::open(&path).unwrap();
    // A second handle that follows the log (refresh), and one that adds everything at once.
    let mut follower = Index::open(&path).unwrap();
    let mut r = rng(21);
    let mut all = Vec::new();
    for step in 0..120u64 {
        let n = 1 + rand::Rng::random_range(&mut r, 0..3usize);
        let lengths: Vec<usize> = (0..n)
            .map(|_| 1 + rand::Rng::random_range(&mut r, 0..20usize))
            .collect();
        let docs = unit_corpus(500 + step, &lengths, DIM, DType::F16);
        let first = index.len();
        assert_eq!(index.add(&docs).unwrap(), first..first + n);
        all.extend((0..n).map(|j| one(&docs, j)));
        if step % 7 == 3 {
            index.delete(&[first, 3]).unwrap();
        }
        if step % 5 == 0 {
            follower.refresh().unwrap();
            assert_eq!(follower.len(), index.len());
        }
    }
    follower.refresh().unwrap();
    let reopened = Index::open(&path).unwrap();
    let lengths: Vec<usize> = all.iter().map(|d| d.len() / DIM).collect();
    let once_dir = tempfile::tempdir().unwrap();
    let once_path = once_dir.path().join("idx");
    build_index(&once_path, 15, 21);
    let mut once = Index::open(&once_path).unwrap();
    let flat: Vec<f32> = all.concat();
    let corpus =
        Corpus::from_lengths(OwnedElements::from_f32(&flat, DType::F16), DIM, &lengths).unwrap();
    once.add(&corpus).unwrap();
    let (codes, exact, live) = survivors(&index);
    for other in [&follower, &reopened] {
        assert_eq!(
            (other.len(), other.deleted()),
            (index.len(), index.deleted())
        );
        let (c, e, l) = survivors(other);
        assert_eq!(
            (c.codes(), c.aux(), c.offsets()),
            (codes.codes(), codes.aux(), codes.offsets())
        );
        assert_eq!(e.tokens().to_f32_vec(), exact.tokens().to_f32_vec());
        assert_eq!(l, live);
    }
    let (a, b) = (index.added().unwrap().0, once.added().unwrap().0);
    assert_eq!(
        (a.codes(), a.aux(), a.offsets()),
        (b.codes(), b.aux(), b.offsets())
    );
    let q = random_query(&mut r, 5, DIM, DType::F32, 1.0);
    let qs = [Matrix::new(q.as_elements(), DIM).unwrap()];
    let full = IndexSearch {
        nprobe: Some(K),
        ndocs: Some(index.len()),
        rerank_k: Some(0),
        ..Default::default()
    };
    for k in [1, 10, live.len() + 5] {
        let want = rebuilt(&codes, &live, &qs, k);
        for i in [&index, &follower, &reopened] {
            assert_eq!(search(i, full, &qs, k), want, "k {k}");
        }
        // Default probes: the same answers, however the segment grew.
        let how = IndexSearch::default();
        assert_eq!(search(&index, how, &qs, k), search(&reopened, how, &qs, k));
    }
}

#[test]
fn a_torn_last_record_is_ignored_then_cut_and_acknowledged_updates_stay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let base = build_index(&path, 30, 7);
    let mut index = Index::open(&path).unwrap();
    index
        .add(&unit_corpus(8, &[3, 1, 9], DIM, DType::F16))
        .unwrap();
    index.delete(&[2, 31]).unwrap();
    let log = path.join(LOG);
    let whole = std::fs::read(&log).unwrap();
    index
        .add(&unit_corpus(9, &[4, 4], DIM, DType::F16))
        .unwrap();
    let with_last = std::fs::read(&log).unwrap();
    assert!(with_last.len() > whole.len());
    // Every cut of the last record, and the record's length of zeros past the whole ones.
    let mut cuts: Vec<Vec<u8>> = (whole.len()..with_last.len())
        .map(|n| with_last[..n].to_vec())
        .collect();
    let mut zeros = whole.clone();
    zeros.resize(with_last.len(), 0);
    cuts.push(zeros);
    for (i, cut) in cuts.iter().enumerate() {
        std::fs::write(&log, cut).unwrap();
        let mut reader = Index::open(&path).unwrap();
        assert_eq!((reader.len(), reader.deleted()), (33, 2), "cut {i}");
        assert!(reader.is_deleted(2) && reader.is_deleted(31) && !reader.is_deleted(32));
        assert_eq!(
            std::fs::read(&log).unwrap(),
            *cut,
            "cut {i}: a reader wrote"
        );
        // The next writer cuts the torn record off and appends after the whole ones.
        assert_eq!(
            reader.add(&unit_corpus(10, &[2], DIM, DType::F16)).unwrap(),
            33..34
        );
        let again = Index::open(&path).unwrap();
        assert_eq!((again.len(), again.deleted()), (34, 2), "cut {i}");
    }
    // A damaged record before the end is an error, not a silent loss.
    let mut damaged = with_last.clone();
    damaged[whole.len() - 3] ^= 0x40;
    std::fs::write(&log, &damaged).unwrap();
    let e = Index::open(&path)
        .err()
        .expect("a damaged record must fail")
        .to_string();
    assert!(e.contains("checksum") || e.contains("header"), "{e}");
    damaged = with_last.clone();
    damaged[1] = b'X';
    std::fs::write(&log, &damaged).unwrap();
    assert!(
        Index::open(&path)
            .err()
            .expect("a damaged header")
            .to_string()
            .contains("header")
    );
    drop(base);
}

#[test]
fn bad_adds_and_deletes_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    build_index(&path, 20, 3);
    let mut index = Index::open(&path).unwrap();
    let wrong_d = unit_corpus(1, &[3], DIM + 1, DType::F16);
    assert!(
        index
            .add(&wrong_d)
            .unwrap_err()
            .to_string()
            .contains("d = 41")
    );
    let mut v = vec![0.5f32; 2 * DIM];
    let not_unit = Corpus::new(OwnedElements::F32(v.clone()), DIM, vec![0, 2]).unwrap();
    assert!(
        index
            .add(&not_unit)
            .unwrap_err()
            .to_string()
            .contains("norm")
    );
    v[3] = f32::NAN;
    let nan = Corpus::new(OwnedElements::F32(v), DIM, vec![0, 2]).unwrap();
    assert!(index.add(&nan).is_err());
    assert!(
        index
            .delete(&[3, 20])
            .unwrap_err()
            .to_string()
            .contains("document 20")
    );
    assert_eq!((index.len(), index.deleted()), (20, 0));
    assert!(!path.join(LOG).exists() || std::fs::read(path.join(LOG)).unwrap().is_empty());
    // Deleting twice deletes once; every document deleted leaves searches empty, not failing.
    assert_eq!(index.delete(&[4, 4, 5]).unwrap(), 2);
    assert_eq!(index.delete(&[4]).unwrap(), 0);
    assert_eq!(index.delete(&(0..20).collect::<Vec<_>>()).unwrap(), 18);
    let q = random_query(&mut rng(1), 4, DIM, DType::F32, 1.0);
    let qs = [Matrix::new(q.as_elements(), DIM).unwrap()];
    for exhaustive in [false, true] {
        let how = IndexSearch {
            exhaustive,
            ..Default::default()
        };
        assert_eq!(search(&index, how, &qs, 5), vec![vec![]]);
    }
}

#[test]
fn an_add_never_names_a_document_by_a_name_another_goes_by() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    build_index(&path, 20, 4);
    let mut index = Index::open(&path).unwrap();
    // The build's documents go by their numbers: ids that are those numbers are refused,
    // others ("07" is not document 7's name) are taken.
    let two = |ids: [&str; 2]| {
        unit_corpus(40, &[2, 3], DIM, DType::F16)
            .with_doc_ids(ids.iter().map(|s| s.to_string()).collect())
            .unwrap()
    };
    for clash in [["x", "5"], ["19", "y"]] {
        let err = index.add(&two(clash)).unwrap_err().to_string();
        assert!(err.contains("name already"), "{err}");
    }
    assert_eq!(index.len(), 20);
    assert_eq!(index.add(&two(["x", "07"])).unwrap(), 20..22);
    assert_eq!(
        (index.doc_id(5), index.doc_id(20), index.doc_id(21)),
        ("5".into(), "x".into(), "07".into())
    );
    // Its documents carry ids now: an add without ids is refused.
    let err = index
        .add(&unit_corpus(41, &[2], DIM, DType::F16))
        .unwrap_err()
        .to_string();
    assert!(err.contains("carry ids"), "{err}");
    assert_eq!(Index::open(&path).unwrap().len(), 22);
    // An id a live document carries: refused, nothing written.
    for clash in [["z", "x"], ["07", "w"]] {
        let err = index.add(&two(clash)).unwrap_err().to_string();
        assert!(err.contains("is live document"), "{err}");
    }
    assert_eq!(Index::open(&path).unwrap().len(), 22);
    // Deleted, its id may be taken again; a compaction keeps the new document under it.
    index.delete(&[20]).unwrap();
    assert_eq!(index.add(&two(["x", "v"])).unwrap(), 22..24);
    let compacted = dir.path().join("compacted");
    index.compact(&compacted).unwrap();
    let mut c = Index::open(&compacted).unwrap();
    let ids: Vec<String> = (0..c.len()).map(|j| c.doc_id(j)).collect();
    assert_eq!(ids.iter().filter(|id| *id == "x").count(), 1);
    assert_eq!(ids.last().map(String::as_str), Some("v"));
    // The same for the ids the build's documents carry (the compacted index's).
    let err = c.add(&two(["q", "v"])).unwrap_err().to_string();
    assert!(err.contains("is live document"), "{err}");
    c.delete(&[ids.len() - 1]).unwrap();
    assert_eq!(c.add(&two(["q", "v"])).unwrap(), ids.len()..ids.len() + 2);
}

#[test]
fn a_fuzzed_log_opens_or_fails_with_an_error_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    build_index(&path, 20, 11);
    let mut index = Index::open(&path).unwrap();
    index
        .add(&unit_corpus(12, &[2, 5], DIM, DType::F16))
        .unwrap();
    index.delete(&[1, 21]).unwrap();
    index.add(&unit_corpus(13, &[1], DIM, DType::F16)).unwrap();
    let log = path.join(LOG);
    let good = std::fs::read(&log).unwrap();
    // The records: (start, payload size), read off their headers.
    let mut records = Vec::new();
    let mut at = 0;
    while at < good.len() {
        let size = u64::from_le_bytes(good[at + 8..at + 16].try_into().unwrap()) as usize;
        records.push((at, size));
        at += 20 + size;
    }
    assert_eq!(records.len(), 3);
    let q = random_query(&mut rng(2), 3, DIM, DType::F32, 1.0);
    let qs = [Matrix::new(q.as_elements(), DIM).unwrap()];
    let mut r = rng(99);
    for round in 0..400 {
        let mut bad = good.clone();
        match round % 4 {
            // Bytes flipped anywhere (headers, counts, CRCs, payloads).
            0 => {
                for _ in 0..1 + round % 3 {
                    let i = rand::Rng::random_range(&mut r, 0..bad.len());
                    bad[i] ^= 1 << rand::Rng::random_range(&mut r, 0..8u32);
                }
            }
            // Cut anywhere.
            1 => bad.truncate(rand::Rng::random_range(&mut r, 0..bad.len())),
            // Garbage appended.
            2 => bad.extend(
                (0..rand::Rng::random_range(&mut r, 1..64usize)).map(|i| (i * 37 + round) as u8),
            ),
            // A payload field rewritten (a count, a length, a centroid id, a flag, codes) and
            // its record's CRC made to match: the payload's own checks must catch it.
            _ => {
                let (start, size) = records[rand::Rng::random_range(&mut r, 0..records.len())];
                let at =
                    start + 20 + rand::Rng::random_range(&mut r, 0..size.saturating_sub(7).max(1));
                let value: u64 = match round % 3 {
                    0 => u64::MAX,
                    1 => rand::Rng::random_range(&mut r, 0..1u64 << 40),
                    _ => 0,
                };
                let end = (at + 8).min(start + 20 + size);
                bad[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
                let mut h = crc32fast::Hasher::new();
                h.update(&bad[start + 4..start + 5]);
                h.update(&bad[start + 8..start + 16]);
                h.update(&bad[start + 20..start + 20 + size]);
                bad[start + 16..start + 20].copy_from_slice(&h.finalize().to_le_bytes());
            }
        }
        std::fs::write(&log, &bad).unwrap();
        // Open refuses or gives a whole state; either way searching what opened works.
        if let Ok(opened) = Index::open(&path) {
            assert!(
                opened.len() >= 20 && opened.len() <= 28,
                "round {round}: {}",
                opened.len()
            );
            search(&opened, IndexSearch::default(), &qs, 5);
        }
    }
}

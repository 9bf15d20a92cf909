//! Live updates of an index (`Index::add`, `Index::delete`, `updates.log`): random sequences
//! of adds and deletes, reopened, search as an index rebuilt from the surviving documents
//! (exhaustive and IVF at full probe, on the codes and with the exact stage); a torn last
//! record, cut at every length, is ignored by readers and cut off by the next writer, every
//! acknowledged update kept; a damaged record before the end, or a record that does not fit
//! the index, is an error; bad adds and deletes are refused and change nothing; a fuzzed log
//! (bytes flipped, cut, garbage appended, payload fields rewritten under a matching CRC) opens
//! to a whole state or fails with an error, never a panic. A compaction (`Index::compact`, and
//! in place, `Index::compact_in_place`) keeps every live document, its id, codes, exact tokens
//! and scores, and refuses what it cannot write whole; openings made before one, or racing one,
//! see one whole generation.

mod common;

use common::*;
use tilemaxsim::codec::ResidualOptions;
use tilemaxsim::corpus::FiniteCheck;
use tilemaxsim::index::{BuildOptions, Index, IndexSearch, LOG, Source, build};
use tilemaxsim::{
    AnyCorpus, CompressedCorpus, Corpus, CpuScorer, DType, Device, Hit, Matrix, OwnedElements,
    Scorer, SearchOptions,
};

const DIM: usize = 40;
const K: usize = 8;

fn build_index(dir: &std::path::Path, docs: usize, seed: u64) -> Corpus {
    let mut r = rng(seed);
    let lengths: Vec<usize> = (0..docs)
        .map(|_| 1 + rand::Rng::random_range(&mut r, 0..30usize))
        .collect();
    let corpus = unit_corpus(seed, &lengths, DIM, DType::F16);
    let options = BuildOptions {
        residual: ResidualOptions {
            nbits: 2,
            centroids: Some(K),
            kmeans_iters: 2,
            ..Default::default()
        },
        device: Device::Cpu,
        ..Default::default()
    };
    build(Source::Exact(&corpus), None, dir, &options, &|_, _, _| {}).unwrap();
    corpus
}

/// Document `j` of `c` as a corpus of one document.
fn one(c: &Corpus, j: usize) -> Vec<f32> {
    let o = c.offsets();
    c.tokens().rows_range(o[j]..o[j + 1]).to_f32_vec()
}

/// The surviving documents' codes and exact tokens (in number order), and their numbers.
fn survivors(index: &Index) -> (CompressedCorpus, Corpus, Vec<usize>) {
    let live: Vec<usize> = (0..index.len()).filter(|&j| !index.is_deleted(j)).collect();
    let base = index.codes();
    let added = index.added();
    let rb = base.codec().row_bytes(DIM);
    let (mut codes, mut ids, mut exact, mut lengths) = (vec![], vec![], vec![], vec![]);
    for &j in &live {
        let (c, e, jj) = if j < base.len() {
            (base, index.exact().unwrap(), j)
        } else {
            let (c, e) = added.unwrap();
            (c, e.unwrap(), j - base.len())
        };
        let o = c.offsets();
        codes.extend_from_slice(&c.codes()[o[jj] * rb..o[jj + 1] * rb]);
        ids.extend_from_slice(&c.aux().unwrap()[o[jj]..o[jj + 1]]);
        exact.extend(one(e, jj));
        lengths.push(o[jj + 1] - o[jj]);
    }
    let offsets: Vec<usize> = std::iter::once(0)
        .chain(lengths.iter().scan(0, |t, &l| {
            *t += l;
            Some(*t)
        }))
        .collect();
    let c = CompressedCorpus::new(base.codec().clone(), DIM, offsets.clone(), codes, Some(ids))
        .unwrap();
    let e = Corpus::new(OwnedElements::from_f32(&exact, DType::F16), DIM, offsets).unwrap();
    (c, e, live)
}

/// f32 queries of `sizes` tokens (d = DIM).
fn queries(r: &mut rand::rngs::StdRng, sizes: &[usize]) -> Vec<OwnedElements> {
    sizes
        .iter()
        .map(|&nq| random_query(r, nq, DIM, DType::F32, 1.0))
        .collect()
}

fn views(owned: &[OwnedElements]) -> Vec<Matrix<'_>> {
    owned
        .iter()
        .map(|q| Matrix::new(q.as_elements(), DIM).unwrap())
        .collect()
}

/// The top-k of a rebuild: `corpus` scored exhaustively, its hits renumbered through `live`.
fn rebuilt(corpus: &dyn AnyCorpus, live: &[usize], qs: &[Matrix<'_>], k: usize) -> Vec<Vec<Hit>> {
    renumbered(CpuScorer::new().top_k_batch(qs, corpus, k).unwrap(), live)
}

/// Hits of an index whose document i is document `live[i]` of another, renumbered.
fn renumbered(hits: Vec<Vec<Hit>>, live: &[usize]) -> Vec<Vec<Hit>> {
    hits.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|h| Hit {
                    doc: live[h.doc],
                    ..h
                })
                .collect()
        })
        .collect()
}

fn search(index: &Index, how: IndexSearch, qs: &[Matrix<'_>], k: usize) -> Vec<Vec<Hit>> {
    let (s, _) = index
        .searcher(Device::Cpu, &how, &SearchOptions::default())
        .unwrap();
    s.search(qs, k).unwrap()
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
fn compaction_keeps_every_live_document_its_id_and_its_scores() {
    for seed in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        let corpus = build_index(&path, 50, seed);
        let mut index = Index::open(&path).unwrap();
        let mut r = rng(300 + seed);
        // Adds with and without ids, deletes of build and added documents.
        for step in 0..6u64 {
            let n = 1 + rand::Rng::random_range(&mut r, 0..6usize);
            let lengths: Vec<usize> = (0..n).map(|i| 1 + (i * 7 + step as usize) % 33).collect();
            let mut docs = unit_corpus(500 + 10 * seed + step, &lengths, DIM, DType::F16);
            if step % 2 == 1 {
                let ids = (0..n).map(|i| format!("new-{step}-{i}")).collect();
                docs = docs.with_doc_ids(ids).unwrap();
            }
            index.add(&docs).unwrap();
            let m = 1 + rand::Rng::random_range(&mut r, 0..5usize);
            let gone: Vec<usize> = (0..m)
                .map(|_| rand::Rng::random_range(&mut r, 0..index.len()))
                .collect();
            index.delete(&gone).unwrap();
        }
        let (codes, exact, live) = survivors(&index);
        let out = dir.path().join("compacted");
        let report = index.compact(&out).unwrap();
        assert_eq!(
            (report.documents, report.removed, report.tokens),
            (live.len(), index.len() - live.len(), codes.num_tokens())
        );
        let compacted = Index::open(&out).unwrap();
        assert_eq!((compacted.len(), compacted.deleted()), (live.len(), 0));
        assert!(compacted.added().is_none());
        assert_eq!(compacted.defaults(), index.defaults());
        // The same documents under the same ids, with the same codes and exact tokens.
        for (i, &j) in live.iter().enumerate() {
            assert_eq!(compacted.doc_id(i), index.doc_id(j), "seed {seed}: doc {i}");
        }
        assert_eq!(compacted.codes().codes(), codes.codes());
        assert_eq!(compacted.codes().aux(), codes.aux());
        assert_eq!(compacted.codes().offsets(), codes.offsets());
        let e = compacted.exact().unwrap();
        assert_eq!(e.tokens().to_f32_vec(), exact.tokens().to_f32_vec());
        assert_eq!(e.offsets(), exact.offsets());
        // Every search mode finds what the live index finds, scored alike.
        let owned = queries(&mut r, &[1, 9]);
        let qs = views(&owned);
        for k in [1, 10, live.len() + 3] {
            for how in [
                IndexSearch {
                    nprobe: Some(K),
                    ndocs: Some(index.len()),
                    rerank_k: Some(0),
                    ..Default::default()
                },
                IndexSearch {
                    exhaustive: true,
                    rerank_k: Some(0),
                    ..Default::default()
                },
                IndexSearch {
                    exhaustive: true,
                    rerank_k: Some(index.len()),
                    ..Default::default()
                },
            ] {
                assert_eq!(
                    renumbered(search(&compacted, how, &qs, k), &live),
                    search(&index, how, &qs, k),
                    "seed {seed}, k {k}, {how:?}"
                );
            }
        }
        // The compacted index takes updates of its own; the original is unchanged.
        let mut compacted = compacted;
        let one_doc = Corpus::from_lengths(
            OwnedElements::from_f32(&one(&corpus, 0), DType::F16),
            DIM,
            &[corpus.doc_len(0)],
        )
        .unwrap();
        assert_eq!(compacted.add(&one_doc).unwrap(), live.len()..live.len() + 1);
        assert_eq!(Index::open(&path).unwrap().len(), index.len());
    }
}

#[test]
fn compaction_of_an_index_without_ids_names_documents_by_their_new_numbers() {
    // No ids anywhere: the compacted index has none either (old numbers as ids would collide
    // with the numbers of later adds), and it compacts again after an add.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let corpus = build_index(&path, 20, 4);
    let mut index = Index::open(&path).unwrap();
    index.delete(&[0, 5]).unwrap();
    index.compact(dir.path().join("a")).unwrap();
    let mut a = Index::open(dir.path().join("a")).unwrap();
    assert!(a.codes().doc_ids().is_none());
    assert_eq!((a.doc_id(0), a.doc_id(17)), ("0".into(), "17".into()));
    let doc = Corpus::from_lengths(
        OwnedElements::from_f32(&one(&corpus, 3), DType::F16),
        DIM,
        &[corpus.doc_len(3)],
    )
    .unwrap();
    assert_eq!(a.add(&doc).unwrap(), 18..19);
    let report = a.compact(dir.path().join("b")).unwrap();
    assert_eq!((report.documents, report.removed), (19, 0));
    let b = Index::open(dir.path().join("b")).unwrap();
    assert_eq!(b.doc_id(18), "18");
}

/// The files of the index directory `dir`, sorted.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn compaction_in_place_makes_a_generation_that_other_openings_take() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let corpus = build_index(&path, 40, 21);
    let mut index = Index::open(&path).unwrap();
    let mut r = rng(77);
    for step in 0..4u64 {
        let lengths: Vec<usize> = (0..3).map(|i| 1 + (i * 5 + step as usize) % 29).collect();
        let ids = (0..3).map(|i| format!("in-{step}-{i}")).collect();
        let docs = unit_corpus(900 + step, &lengths, DIM, DType::F16)
            .with_doc_ids(ids)
            .unwrap();
        index.add(&docs).unwrap();
        index
            .delete(&[3 * step as usize, 40 + step as usize])
            .unwrap();
    }
    // Openings made before the compaction: a reader and a writer.
    let mut reader = Index::open(&path).unwrap();
    let mut stale = Index::open(&path).unwrap();
    let owned = queries(&mut r, &[1, 7]);
    let qs = views(&owned);
    let how = IndexSearch {
        exhaustive: true,
        rerank_k: Some(0),
        ..Default::default()
    };
    let before = search(&index, how, &qs, 12);
    let (codes, exact, live) = survivors(&index);
    // The same index compacted into a new directory, for the arrays to expect.
    Index::open(&path)
        .unwrap()
        .compact(dir.path().join("copy"))
        .unwrap();
    let copy = Index::open(dir.path().join("copy")).unwrap();
    // Leftovers of a failed attempt are removed; other files are left alone.
    std::fs::write(path.join("codes.9.safetensors"), b"x").unwrap();
    std::fs::write(path.join(".ivf.1.safetensors.tmp77"), b"x").unwrap();
    std::fs::write(path.join("notes.txt"), b"mine").unwrap();

    let report = index.compact_in_place().unwrap();
    assert_eq!((report.documents, report.removed), (live.len(), 8));
    assert_eq!(
        (index.generation(), index.len(), index.deleted()),
        (1, live.len(), 0)
    );
    assert!(index.added().is_none());
    assert_eq!(
        files(&path),
        [
            "codes.1.safetensors",
            "exact.1.safetensors",
            "index.json",
            "ivf.1.safetensors",
            "notes.txt"
        ]
    );
    assert_eq!(index.codes().codes(), codes.codes());
    assert_eq!(index.codes().codes(), copy.codes().codes());
    assert_eq!(index.codes().aux(), copy.codes().aux());
    assert_eq!(index.codes().offsets(), copy.codes().offsets());
    assert_eq!(
        index.exact().unwrap().tokens().to_f32_vec(),
        exact.tokens().to_f32_vec()
    );
    // Its exact tokens (the build's and the added ones, all checked) are recorded finite: an
    // opening does not scan them again.
    assert_eq!(index.exact().unwrap().finite_check(), FiniteCheck::Recorded);
    for i in 0..live.len() {
        assert_eq!(index.doc_id(i), copy.doc_id(i));
    }
    assert_eq!(renumbered(search(&index, how, &qs, 12), &live), before);

    // The reader goes on with the old generation (its files are gone from the directory, not
    // from its mappings) until it refreshes, then takes the new one.
    assert_eq!(search(&reader, how, &qs, 12), before);
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.generation(), 1);
    assert_eq!(renumbered(search(&reader, how, &qs, 12), &live), before);
    assert!(!reader.refresh().unwrap());

    // Deletes by the old numbers are refused; an add opens the new generation first.
    let err = stale.delete(&[0]).unwrap_err().to_string();
    assert!(err.contains("compacted"), "{err}");
    index.refresh().unwrap();
    assert_eq!(index.deleted(), 0);
    let doc = Corpus::from_lengths(
        OwnedElements::from_f32(&one(&corpus, 2), DType::F16),
        DIM,
        &[corpus.doc_len(2)],
    )
    .unwrap();
    assert_eq!(stale.add(&doc).unwrap(), live.len()..live.len() + 1);
    assert!(index.refresh().unwrap());
    assert_eq!(index.len(), live.len() + 1);
    assert!(path.join("updates.1.log").exists());

    // Again: generation 2, the first generation's files and log gone.
    index.delete(&[0]).unwrap();
    let report = index.compact_in_place().unwrap();
    assert_eq!((report.documents, report.removed), (live.len(), 1));
    let reopened = Index::open(&path).unwrap();
    assert_eq!((reopened.generation(), reopened.len()), (2, live.len()));
    assert_eq!(reopened.doc_id(0), copy.doc_id(1));
    assert_eq!(
        files(&path),
        [
            "codes.2.safetensors",
            "exact.2.safetensors",
            "index.json",
            "ivf.2.safetensors",
            "notes.txt"
        ]
    );
}

#[test]
fn openings_that_race_compactions_in_place_never_bring_a_deleted_document_back() {
    // One thread deletes a document, adds one, then compacts in place, over and over; others
    // open the directory meanwhile. Every opening is of one whole state: no document deleted
    // before it began is live in it (an opening that read an old generation's files after its
    // log was removed would bring the last deletes back). The race is caught by chance: with
    // the opening's re-check of the manifest taken out, about half the runs failed here.
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    build_index(&path, 30, 31);
    let mut index = Index::open(&path).unwrap();
    let gone: Arc<Mutex<HashSet<String>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (path, gone, done) = (path.clone(), gone.clone(), done.clone());
            std::thread::spawn(move || {
                let mut opened = 0;
                while !done.load(Ordering::Relaxed) {
                    let before: HashSet<String> = gone.lock().unwrap().clone();
                    let o = Index::open(&path).unwrap();
                    for j in (0..o.len()).filter(|&j| !o.is_deleted(j)) {
                        let id = o.doc_id(j);
                        assert!(!before.contains(&id), "{id} deleted, live again");
                    }
                    opened += 1;
                }
                opened
            })
        })
        .collect();
    for step in 0..120u64 {
        let victim = (0..index.len()).find(|&j| !index.is_deleted(j)).unwrap();
        let id = index.doc_id(victim);
        index.delete(&[victim]).unwrap();
        gone.lock().unwrap().insert(id);
        let doc = unit_corpus(700 + step, &[3], DIM, DType::F16)
            .with_doc_ids(vec![format!("race-{step}")])
            .unwrap();
        index.add(&doc).unwrap();
        index.compact_in_place().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let opened: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(opened > 0);
    assert_eq!(index.generation(), 120);
}

#[test]
fn compaction_refusals_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let corpus = build_index(&path, 12, 9);
    let mut index = Index::open(&path).unwrap();
    // Into a directory that is not empty.
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("x"), b"x").unwrap();
    assert!(index.compact(&busy).is_err());
    // Two live documents under one id: the build's document 3 (named by its number) and an
    // added one given the id "3".
    let doc = Corpus::from_lengths(
        OwnedElements::from_f32(&one(&corpus, 1), DType::F16),
        DIM,
        &[corpus.doc_len(1)],
    )
    .unwrap()
    .with_doc_ids(vec!["3".into()])
    .unwrap();
    index.add(&doc).unwrap();
    let err = index.compact(dir.path().join("a")).unwrap_err().to_string();
    assert!(err.contains("\"3\""), "{err}");
    assert!(!dir.path().join("a").exists());
    // Every document deleted.
    index.delete(&(0..index.len()).collect::<Vec<_>>()).unwrap();
    let err = index.compact(dir.path().join("b")).unwrap_err().to_string();
    assert!(err.contains("every document"), "{err}");
    assert!(!dir.path().join("b").exists());
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

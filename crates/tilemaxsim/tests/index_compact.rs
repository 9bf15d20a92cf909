//! Compacting an index (`Index::compact` into a new directory, `Index::compact_in_place` as
//! its next generation): every live document kept with its id, codes, exact tokens and scores;
//! what cannot be written whole refused with nothing written; openings made before a
//! compaction in place, or racing one, see one whole generation.

mod common;

use common::index::*;
use common::*;
use tilemaxsim::corpus::FiniteCheck;
use tilemaxsim::index::{Index, IndexSearch, LOG, Stamp, StampWatch};
use tilemaxsim::{Corpus, DType, OwnedElements};

#[test]
fn compaction_keeps_every_live_document_its_id_and_its_scores() {
    for seed in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        let corpus = build_index(&path, 50, seed);
        let mut index = Index::open(&path).unwrap();
        let mut r = rng(300 + seed);
        // Adds without ids, then with ids (after which every add must give ids), deletes of
        // build and added documents.
        for step in 0..6u64 {
            let n = 1 + rand::Rng::random_range(&mut r, 0..6usize);
            let lengths: Vec<usize> = (0..n).map(|i| 1 + (i * 7 + step as usize) % 33).collect();
            let mut docs = unit_corpus(500 + 10 * seed + step, &lengths, DIM, DType::F16);
            if step >= 3 {
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
        // Its documents carry ids (those added without one, their old numbers): an add
        // without ids is refused, as they could take ids other documents carry.
        let err = compacted.add(&one_doc).unwrap_err().to_string();
        assert!(err.contains("carry ids"), "{err}");
        let named = one_doc.with_doc_ids(vec!["again".into()]).unwrap();
        assert_eq!(compacted.add(&named).unwrap(), live.len()..live.len() + 1);
        assert_eq!(compacted.doc_id(live.len()), "again");
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
    let doc = doc.with_doc_ids(vec!["late".into()]).unwrap();
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
    // Two live documents under one id. An add may not take the name of the build's document
    // 3 (its number), nor a live document's id; a log written before adds refused those holds
    // them, as the add's record written twice does here.
    let doc = |id: &str| {
        Corpus::from_lengths(
            OwnedElements::from_f32(&one(&corpus, 1), DType::F16),
            DIM,
            &[corpus.doc_len(1)],
        )
        .unwrap()
        .with_doc_ids(vec![id.into()])
        .unwrap()
    };
    assert!(index.add(&doc("3")).is_err());
    let log = path.join(LOG);
    let before = std::fs::read(&log).map_or(0, |b| b.len());
    index.add(&doc("dup")).unwrap();
    let err = index.add(&doc("dup")).unwrap_err().to_string();
    assert!(err.contains("is live document"), "{err}");
    let record = std::fs::read(&log).unwrap()[before..].to_vec();
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut file, &record).unwrap();
    drop(file);
    let mut index = Index::open(&path).unwrap();
    let live_dups = (0..index.len())
        .filter(|&j| index.doc_id(j) == "dup")
        .count();
    assert_eq!(live_dups, 2);
    let err = index.compact(dir.path().join("a")).unwrap_err().to_string();
    assert!(err.contains("\"dup\""), "{err}");
    assert!(!dir.path().join("a").exists());
    // Every document deleted.
    index.delete(&(0..index.len()).collect::<Vec<_>>()).unwrap();
    let err = index.compact(dir.path().join("b")).unwrap_err().to_string();
    assert!(err.contains("every document"), "{err}");
    assert!(!dir.path().join("b").exists());
}

#[test]
fn a_stamp_watch_sees_every_update_and_generation_as_on_disk_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    build_index(&path, 20, 5);
    let mut index = Index::open(&path).unwrap();
    let mut watch = StampWatch::new(&path);
    let same = |watch: &mut StampWatch| {
        let (seen, disk) = (watch.look().unwrap(), Stamp::on_disk(&path).unwrap());
        assert_eq!(seen, disk);
        seen
    };
    let first = same(&mut watch);
    assert_eq!(first, index.stamp());
    assert_eq!(same(&mut watch), first);
    let mut last = first;
    // Updates move the log; each compaction in place a new manifest, two of them between
    // looks as well as one.
    for step in 0..6u64 {
        let docs = unit_corpus(300 + step, &[3, 1], DIM, DType::F16);
        index.add(&docs).unwrap();
        let now = same(&mut watch);
        assert!(
            now > last && now.generation == last.generation,
            "{now:?} {last:?}"
        );
        last = now;
        index.delete(&[step as usize]).unwrap();
        for _ in 0..=(step % 2) {
            index.compact_in_place().unwrap();
        }
        let now = same(&mut watch);
        assert_eq!(now.generation, last.generation + 1 + step % 2);
        assert_eq!(now, index.stamp());
        last = now;
    }
    // A directory without an index is an error, and the watch reads it again once it has one.
    std::fs::rename(path.join("index.json"), dir.path().join("away.json")).unwrap();
    assert!(watch.look().is_err());
    std::fs::rename(dir.path().join("away.json"), path.join("index.json")).unwrap();
    assert_eq!(same(&mut watch), last);
}

#[test]
fn a_live_index_searches_as_its_compaction_at_any_probe() {
    // On the CPU the segments are searched as one: one ranking of both segments' candidates
    // (deleted documents never among them), `ndocs` rescored in all, then one exact stage. So
    // a live index and its compaction (its live documents, the same codes under the same
    // centroids, in one segment, renumbered in order) give the same hits, at probes far below
    // every centroid, where each segment ranked apart would rescore `ndocs` of its own and
    // deleted documents would take candidates' places. Indexes with documents added, deleted,
    // or both.
    for seed in 0..4u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        build_index(&path, 60, 40 + seed);
        let mut index = Index::open(&path).unwrap();
        let mut r = rng(900 + seed);
        for step in 0..3u64 {
            if seed != 1 {
                let lengths: Vec<usize> =
                    (0..7).map(|i| 1 + (i * 5 + step as usize) % 29).collect();
                index
                    .add(&unit_corpus(
                        700 + 10 * seed + step,
                        &lengths,
                        DIM,
                        DType::F16,
                    ))
                    .unwrap();
            }
            if seed >= 1 {
                let gone: Vec<usize> = (0..4)
                    .map(|_| rand::Rng::random_range(&mut r, 0..index.len()))
                    .collect();
                index.delete(&gone).unwrap();
            }
        }
        let live: Vec<usize> = (0..index.len()).filter(|&j| !index.is_deleted(j)).collect();
        let out = dir.path().join("compacted");
        index.compact(&out).unwrap();
        let compacted = Index::open(&out).unwrap();
        assert_eq!(compacted.len(), live.len());
        let owned = queries(&mut r, &[1, 4, 9]);
        let qs = views(&owned);
        for (nprobe, ndocs) in [(1, 1), (1, 5), (2, 12), (3, 40)] {
            for rerank_k in [0, 6] {
                let how = IndexSearch {
                    nprobe: Some(nprobe),
                    ndocs: Some(ndocs),
                    rerank_k: Some(rerank_k),
                    ..Default::default()
                };
                for k in [1, 3, 10] {
                    let hits = search(&index, how, &qs, k);
                    assert!(hits.iter().flatten().all(|h| !index.is_deleted(h.doc)));
                    assert_eq!(
                        hits,
                        renumbered(search(&compacted, how, &qs, k), &live),
                        "seed {seed}, k {k}, {how:?}"
                    );
                }
            }
        }
    }
}

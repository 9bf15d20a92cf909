//! `CompressedCorpus::append` and `Corpus::append` (the index's added segment grows with them):
//! appending in parts equals building at once, in memory and memory-mapped, and a rejected
//! append changes nothing.

use half::f16;

use super::{Codec, CompressedCorpus};
use crate::corpus::Corpus;
use crate::matrix::OwnedElements;

const D: usize = 8;

/// An append's arguments: offsets, codes, per-token words.
type Part<'a> = (&'a [usize], &'a [u8], Option<&'a [u32]>);

/// int8 parts: `lengths` documents, their codes and per-token scales (f32 bits).
fn int8_part(lengths: &[usize], seed: u32) -> (Vec<usize>, Vec<u8>, Vec<u32>) {
    let offsets: Vec<usize> = std::iter::once(0)
        .chain(lengths.iter().scan(0, |t, &l| {
            *t += l;
            Some(*t)
        }))
        .collect();
    let t = *offsets.last().unwrap();
    let codes = (0..t * D).map(|i| (i as u32 * 31 + seed) as u8).collect();
    let scales = (0..t)
        .map(|i| (0.01 * (i as f32 + seed as f32 + 1.0)).to_bits())
        .collect();
    (offsets, codes, scales)
}

fn same(a: &CompressedCorpus, b: &CompressedCorpus) {
    assert_eq!(a.offsets(), b.offsets());
    assert_eq!(a.codes(), b.codes());
    assert_eq!(a.aux(), b.aux());
}

#[test]
fn compressed_parts_appended_equal_one_corpus_in_memory_and_mapped() {
    let (o1, c1, s1) = int8_part(&[3, 1, 5], 1);
    let (o2, c2, s2) = int8_part(&[2, 4], 7);
    let t1 = *o1.last().unwrap();
    let offsets: Vec<usize> = o1
        .iter()
        .copied()
        .chain(o2[1..].iter().map(|o| t1 + o))
        .collect();
    let whole = CompressedCorpus::new(
        Codec::Int8,
        D,
        offsets,
        [c1.clone(), c2.clone()].concat(),
        Some([s1.clone(), s2.clone()].concat()),
    )
    .unwrap();
    let mut grown =
        CompressedCorpus::new(Codec::Int8, D, o1.clone(), c1.clone(), Some(s1.clone())).unwrap();
    grown.append(&o2, &c2, Some(&s2)).unwrap();
    same(&grown, &whole);
    // Memory-mapped first: copied once, the file untouched.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("part.safetensors");
    CompressedCorpus::new(Codec::Int8, D, o1, c1, Some(s1))
        .unwrap()
        .save(&path)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let mut mapped = CompressedCorpus::open(&path).unwrap();
    mapped.append(&o2, &c2, Some(&s2)).unwrap();
    same(&mapped, &whole);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // And back.
    mapped.truncate_docs(3);
    assert_eq!(mapped.len(), 3);
    assert_eq!(mapped.codes().len(), 9 * D);
}

#[test]
fn a_rejected_compressed_append_changes_nothing() {
    let (o1, c1, s1) = int8_part(&[2, 3], 1);
    let mut c =
        CompressedCorpus::new(Codec::Int8, D, o1.clone(), c1.clone(), Some(s1.clone())).unwrap();
    let (o2, c2, mut s2) = int8_part(&[4], 2);
    s2[3] = f32::NAN.to_bits();
    let bad: [Part<'_>; 5] = [
        (&o2, &c2, Some(&s2)),      // a NaN scale (checked after the copy: rolled back)
        (&o2, &c2[1..], Some(&s2)), // codes too short
        (&o2, &c2, None),           // no scales
        (&[1, 4], &c2, Some(&s2)),  // offsets not from 0
        (&[0, 5, 4], &c2, Some(&s2)), // decreasing offsets
    ];
    for (i, (o, codes, aux)) in bad.into_iter().enumerate() {
        assert!(c.append(o, codes, aux).is_err(), "case {i}");
        assert_eq!(c.offsets(), &o1[..], "case {i}");
        assert_eq!(c.codes(), &c1[..], "case {i}");
        assert_eq!(c.aux(), Some(&s1[..]), "case {i}");
    }
}

#[test]
fn exact_parts_appended_equal_one_corpus_in_memory_and_mapped() {
    let values = |n: usize, k: f32| {
        (0..n * D)
            .map(|i| f16::from_f32(i as f32 * k))
            .collect::<Vec<_>>()
    };
    let (a, b) = (values(4, 0.5), values(6, -0.25));
    let whole = Corpus::new(
        OwnedElements::F16([a.clone(), b.clone()].concat()),
        D,
        vec![0, 1, 4, 6, 10],
    )
    .unwrap();
    let bytes: &[u8] = bytemuck::cast_slice(&b);
    let mut grown = Corpus::new(OwnedElements::F16(a.clone()), D, vec![0, 1, 4]).unwrap();
    grown.append(&[0, 2, 6], bytes).unwrap();
    assert_eq!(grown.offsets(), whole.offsets());
    assert_eq!(
        grown.tokens().elements().as_bytes(),
        whole.tokens().elements().as_bytes()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exact.safetensors");
    Corpus::new(OwnedElements::F16(a), D, vec![0, 1, 4])
        .unwrap()
        .save(&path)
        .unwrap();
    let mut mapped = Corpus::open(&path).unwrap();
    // Rejected: a wrong byte count, offsets not from 0; nothing changes.
    assert!(mapped.append(&[0, 2, 6], &bytes[2..]).is_err());
    assert!(mapped.append(&[1, 6], bytes).is_err());
    assert_eq!(mapped.offsets(), &[0, 1, 4]);
    mapped.append(&[0, 2, 6], bytes).unwrap();
    assert_eq!(mapped.offsets(), whole.offsets());
    assert_eq!(
        mapped.tokens().elements().as_bytes(),
        whole.tokens().elements().as_bytes()
    );
    mapped.truncate_docs(2);
    assert_eq!(mapped.offsets(), &[0, 1, 4]);
    assert_eq!(mapped.tokens().rows(), 4);
}

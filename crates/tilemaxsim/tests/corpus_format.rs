//! The corpus and its file: save/open round trips for every dtype (bit-identical values,
//! identical offsets and ids, memory-mapped on open), the packing rules of `Corpus::new`, and
//! every way a file can be wrong (truncated anywhere, garbage, empty,
//! missing or mistyped tensors, bad shapes, bad offsets, bad ids): each an error whose message
//! names the file and the problem, never a panic. The value check is in `corpus_values.rs`.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use common::*;
use half::{bf16, f16};
use rand::{Rng, RngCore};
use safetensors::Dtype;
use safetensors::tensor::TensorView;

use tilemaxsim::{Corpus, CpuScorer, DType, Error, Matrix, OwnedElements, Scorer};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Open `path`, which must fail without panicking; the message.
fn open_err(path: &Path) -> String {
    let r = catch_unwind(AssertUnwindSafe(|| Corpus::open(path)))
        .unwrap_or_else(|_| panic!("Corpus::open({}) panicked", path.display()));
    match r {
        Ok(c) => panic!(
            "{}: opened a bad file ({} documents)",
            path.display(),
            c.len()
        ),
        Err(e) => e.to_string(),
    }
}

/// Assert opening `path` fails with a message naming the file and containing `what`.
fn assert_open_fails(path: &Path, what: &str) {
    let msg = open_err(path);
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(
        msg.contains(&*name) && msg.contains(what),
        "{name}: expected the file name and {what:?} in: {msg}"
    );
}

fn err_text<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    r.expect_err("should fail").to_string()
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

/// Random values with the awkward ones mixed in: ±0, subnormals of every dtype, NaN (with a
/// payload), ±inf, the largest finite values.
fn awkward_values(r: &mut rand::rngs::StdRng, len: usize) -> Vec<f32> {
    let special = [
        0.0f32,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(0x0000_0300),
        1e-6, // an f16 subnormal
        f32::from_bits(0x7fc0_1234),
        f32::INFINITY,
        f32::NEG_INFINITY,
        65504.0,
        f32::MAX,
        -3.0e38,
    ];
    (0..len)
        .map(|i| {
            if i % 7 == 3 {
                special[r.random_range(0..special.len())]
            } else {
                r.random_range(-2.0f32..2.0)
            }
        })
        .collect()
}

#[test]
fn round_trip_every_dtype_with_and_without_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(1);
    for dtype in DTYPES {
        for dim in [1usize, 3, 128] {
            for ids in [false, true] {
                let lens = [3usize, 1, 7, 2048, 1, 2];
                let total: usize = lens.iter().sum();
                let v = awkward_values(&mut r, total * dim);
                let c =
                    Corpus::from_lengths(OwnedElements::from_f32(&v, dtype), dim, &lens).unwrap();
                let c = if ids {
                    let ids = ["a", "b-2", "doc/é", "文档", "x_y.z", "6"];
                    c.with_doc_ids(ids.iter().map(|s| s.to_string()).collect())
                        .unwrap()
                } else {
                    c
                };
                let label = format!("{dtype} d={dim} ids={ids}");
                let path = dir
                    .path()
                    .join(format!("c-{dtype}-{dim}-{ids}.safetensors"));
                c.save(&path).unwrap();
                assert!(
                    Corpus::open(&path).is_err(),
                    "{label}: NaN and inf are checked"
                );
                let back = open_unchecked(&path);
                assert!(
                    back.is_mapped(),
                    "{label}: an opened corpus is memory-mapped"
                );
                assert!(!c.is_mapped());
                assert_same_corpus(&label, &back, &c);
                // Saved again from the map and reopened: still the same corpus.
                let again = dir
                    .path()
                    .join(format!("again-{dtype}-{dim}-{ids}.safetensors"));
                back.save(&again).unwrap();
                assert_same_corpus(&format!("{label} twice"), &open_unchecked(&again), &c);
            }
        }
    }
    // Only the saved files are left: no temporary files beside them.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2 * 3 * 3 * 2, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.ends_with(".safetensors") && !n.starts_with('.')),
        "{names:?}"
    );
}

#[test]
fn an_opened_corpus_scores_like_the_one_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(2);
    for dtype in DTYPES {
        let c = random_corpus(&mut r, &[1, 40, 3, 17], 64, dtype, 1.0);
        let path = dir.path().join(format!("s-{dtype}.safetensors"));
        c.save(&path).unwrap();
        let back = Corpus::open(&path).unwrap();
        back.check_finite().unwrap();
        let q = random_query(&mut r, 9, 64, DType::F32, 1.0);
        let q = Matrix::new(q.as_elements(), 64).unwrap();
        let s = CpuScorer::new();
        let (a, b) = (s.score(q, &c).unwrap(), s.score(q, &back).unwrap());
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{dtype}"
        );
        assert_close(&format!("{dtype} opened"), q, &back, &[0, 1, 2, 3], &b);
    }
}

#[test]
fn saving_over_an_existing_file_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.safetensors");
    let first = Corpus::from_lengths(vec![1.0f32; 12], 3, &[4]).unwrap();
    let second = Corpus::from_lengths(vec![2.0f32; 6], 2, &[1, 2]).unwrap();
    first.save(&path).unwrap();
    second.save(&path).unwrap();
    assert_same_corpus("overwritten", &Corpus::open(&path).unwrap(), &second);
}

#[test]
fn saving_where_it_cannot_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = Corpus::from_lengths(vec![1.0f32; 4], 2, &[2]).unwrap();
    let path = dir.path().join("no-such-dir").join("c.safetensors");
    let e = err_text(c.save(&path));
    assert!(e.contains("c.safetensors"), "{e}");
    // A directory in the way.
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    assert!(c.save(dir.path().join("taken")).is_err());
}

/// A safetensors file written by hand: `tensors` as (name, dtype, shape, bytes), laid out in
/// the order given (so a tensor can start at any byte offset).
fn write_raw(path: &Path, tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) {
    let mut header = String::from("{");
    let mut data = Vec::new();
    for (i, (name, dtype, shape, bytes)) in tensors.iter().enumerate() {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{},{}]}}",
            data.len(),
            data.len() + bytes.len()
        ));
        data.extend_from_slice(bytes);
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    std::fs::write(path, file).unwrap();
}

#[test]
fn a_misaligned_tensor_is_copied_not_mapped() {
    // Embeddings that start one byte into the data (after a 1-byte tensor) cannot be viewed as
    // f32/f16/bf16 in place: the corpus copies them, with the same values.
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(3);
    for (dtype, st) in [
        (DType::F32, "F32"),
        (DType::F16, "F16"),
        (DType::BF16, "BF16"),
    ] {
        let c = random_corpus(&mut r, &[2, 1, 3], 5, dtype, 1.0);
        let bytes = c.tokens().elements().as_bytes().to_vec();
        let path = dir.path().join(format!("misaligned-{dtype}.safetensors"));
        write_raw(
            &path,
            &[
                ("pad", "U8", vec![1], vec![7]),
                ("embeddings", st, vec![6, 5], bytes),
                ("offsets", "I64", vec![4], i64s(&[0, 2, 3, 6])),
            ],
        );
        let back = Corpus::open(&path).unwrap();
        assert!(!back.is_mapped(), "{dtype}: misaligned data must be copied");
        assert_same_corpus(&format!("misaligned {dtype}"), &back, &c);
        // The same layout, aligned (2-byte pad for 16-bit types and 4 for f32), is mapped.
        let aligned = dir.path().join(format!("aligned-{dtype}.safetensors"));
        write_raw(
            &aligned,
            &[
                ("pad", "U8", vec![4], vec![7; 4]),
                (
                    "embeddings",
                    st,
                    vec![6, 5],
                    c.tokens().elements().as_bytes().to_vec(),
                ),
                ("offsets", "I64", vec![4], i64s(&[0, 2, 3, 6])),
            ],
        );
        let back = Corpus::open(&aligned).unwrap();
        assert!(back.is_mapped(), "{dtype}");
        assert_same_corpus(&format!("aligned {dtype}"), &back, &c);
    }
}

// ---------------------------------------------------------------------------------------------
// Packing rules
// ---------------------------------------------------------------------------------------------

#[test]
fn packing_errors() {
    let v = vec![0.5f32; 12]; // 4 rows of d = 3
    let offsets_err =
        |offsets: Vec<usize>, what: &str| match Corpus::new(v.clone(), 3, offsets.clone()) {
            Err(e @ Error::Offsets(_)) => assert!(e.to_string().contains(what), "{offsets:?}: {e}"),
            other => panic!("{offsets:?}: {other:?}"),
        };
    offsets_err(vec![1, 4], "first offset must be 0, found 1");
    offsets_err(vec![0, 3, 2, 4], "decrease");
    offsets_err(vec![0, 5, 4], "decrease");
    offsets_err(
        vec![0, 3],
        "last offset is 3 but the token matrix has 4 rows",
    );
    offsets_err(vec![0, 2, 5], "last offset is 5");
    offsets_err(vec![], "empty");
    offsets_err(vec![0], "at least one document");
    for (offsets, index) in [
        (vec![0, 2, 2, 4], 1),
        (vec![0, 0, 4], 0),
        (vec![0, 4, 4], 1),
    ] {
        match Corpus::new(v.clone(), 3, offsets.clone()) {
            Err(e @ Error::EmptyDocument { index: i }) if i == index => {
                assert!(
                    e.to_string()
                        .contains(&format!("document {index} is empty")),
                    "{e}"
                )
            }
            other => panic!("{offsets:?}: {other:?}"),
        }
    }
    assert!(matches!(
        Corpus::from_lengths(v.clone(), 3, &[4, 0]),
        Err(Error::EmptyDocument { index: 1 })
    ));
    assert!(matches!(
        Corpus::from_lengths(v.clone(), 3, &[]),
        Err(Error::Offsets(_))
    ));
    match Corpus::new(v.clone(), 0, vec![0, 1]) {
        Err(e @ Error::Shape(_)) => assert!(e.to_string().contains("at least 1"), "{e}"),
        other => panic!("d = 0: {other:?}"),
    }
    match Corpus::new(v.clone(), 5, vec![0, 1]) {
        Err(e @ Error::Shape(_)) => {
            assert!(e.to_string().contains("not a whole number of rows"), "{e}")
        }
        other => panic!("12 elements, d = 5: {other:?}"),
    }
    // Every dtype is held to the same rules.
    for dtype in DTYPES {
        let o = OwnedElements::from_f32(&v, dtype);
        assert!(Corpus::new(o.clone(), 3, vec![0, 1, 4]).is_ok());
        assert!(matches!(
            Corpus::new(o.clone(), 3, vec![0, 1, 1, 4]),
            Err(Error::EmptyDocument { index: 1 })
        ));
        assert!(matches!(
            Corpus::new(o, 7, vec![0, 1]),
            Err(Error::Shape(_))
        ));
    }
}

#[test]
fn from_docs_errors() {
    let a = [1.0f32; 6];
    let b = [1.0f32; 4];
    let h = OwnedElements::from_f32(&[1.0; 6], DType::F16);
    let empty: [f32; 0] = [];
    let ma = Matrix::new(&a[..], 3).unwrap();
    assert!(matches!(Corpus::from_docs(&[]), Err(Error::Offsets(_))));
    assert!(matches!(
        Corpus::from_docs(&[ma, Matrix::new(&b[..], 2).unwrap()]),
        Err(Error::DimMismatch {
            expected: 3,
            got: 2,
            ..
        })
    ));
    assert!(matches!(
        Corpus::from_docs(&[ma, Matrix::new(h.as_elements(), 3).unwrap()]),
        Err(Error::DType { .. })
    ));
    assert!(matches!(
        Corpus::from_docs(&[ma, Matrix::new(&empty[..], 3).unwrap()]),
        Err(Error::EmptyDocument { index: 1 })
    ));
    let c = Corpus::from_docs(&[ma, ma.rows_range(1..2)]).unwrap();
    assert_eq!(c.offsets(), &[0, 2, 3]);
}

#[test]
fn doc_id_errors() {
    let c = Corpus::from_lengths(vec![0.5f32; 12], 3, &[2, 2]).unwrap();
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (bad, what) in [
        (ids(&["a"]), "1 ids given for 2 documents"),
        (ids(&["a", "b", "c"]), "3 ids given for 2 documents"),
        (ids(&["a", "a"]), "more than once"),
        (ids(&["a b", "c"]), "whitespace"),
        (ids(&["a", "b\tc"]), "whitespace"),
        (ids(&["a\nb", "c"]), "whitespace"),
        (ids(&["", "c"]), "empty"),
    ] {
        match c.clone().with_doc_ids(bad.clone()) {
            Err(e @ Error::Argument(_)) => assert!(e.to_string().contains(what), "{bad:?}: {e}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(
        c.with_doc_ids(ids(&["x", "y"])).unwrap().doc_ids().unwrap(),
        &["x", "y"]
    );
}

// ---------------------------------------------------------------------------------------------
// check_finite
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Bad files
// ---------------------------------------------------------------------------------------------

fn write_st(path: &Path, tensors: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)>) {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// A file with `embeddings` [5, 4] F32 plus the given other tensors.
    fn with(&self, name: &str, others: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)>) -> PathBuf {
        let mut t = vec![("embeddings", Dtype::F32, vec![5, 4], vec![0u8; 80])];
        t.extend(others);
        let p = self.path(name);
        write_st(&p, t);
        p
    }
    fn with_offsets(&self, name: &str, offsets: &[i64]) -> PathBuf {
        self.with(
            name,
            vec![("offsets", Dtype::I64, vec![offsets.len()], i64s(offsets))],
        )
    }
}

#[test]
fn truncated_files_at_every_length() {
    let f = Files::new();
    let c = Corpus::from_lengths(vec![0.5f32; 4 * 5], 4, &[2, 3])
        .unwrap()
        .with_doc_ids(vec!["x".into(), "y".into()])
        .unwrap();
    let good = f.path("good.safetensors");
    c.save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let cut = f.path("cut.safetensors");
    // Every cut: in the length prefix, in the header, in each tensor's data.
    for len in 0..bytes.len() {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let msg = open_err(&cut);
        assert!(
            msg.contains("cut.safetensors") && msg.contains("truncated or corrupt"),
            "cut at {len} of {}: {msg}",
            bytes.len()
        );
    }
    // One byte too many is as wrong as one too few.
    let mut longer = bytes.clone();
    longer.push(0);
    std::fs::write(&cut, &longer).unwrap();
    assert_open_fails(&cut, "truncated or corrupt");
    assert_eq!(Corpus::open(&good).unwrap().len(), 2);
}

#[test]
fn empty_and_garbage_files() {
    let f = Files::new();
    let empty = f.path("empty.safetensors");
    std::fs::write(&empty, b"").unwrap();
    assert_open_fails(&empty, "truncated or corrupt");

    let mut r = rng(4);
    let junk = f.path("junk.safetensors");
    for i in 0..200 {
        let len = [1, 7, 8, 9, 64, 1000, 5000][i % 7];
        let mut bytes = vec![0u8; len];
        r.fill_bytes(&mut bytes);
        if i % 2 == 1 && len >= 8 {
            // A plausible header length, so the parser gets past the prefix.
            let n = r.random_range(0..len as u64);
            bytes[..8].copy_from_slice(&n.to_le_bytes());
        }
        std::fs::write(&junk, &bytes).unwrap();
        let msg = open_err(&junk);
        assert!(msg.contains("junk.safetensors"), "garbage {i}: {msg}");
    }
    for text in [
        &b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}"[..],
        b"\xff\xff\xff\xff\xff\xff\xff\xff{}",
        b"\x03\x00\x00\x00\x00\x00\x00\x00{}",
        b"\x08\x00\x00\x00\x00\x00\x00\x00[1,2,3]\n",
        b"\x10\x00\x00\x00\x00\x00\x00\x00\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0",
    ] {
        std::fs::write(&junk, text).unwrap();
        assert_open_fails(&junk, "truncated or corrupt");
    }
    // A well-formed safetensors file that holds no tensors at all.
    write_st(&f.path("none.safetensors"), vec![]);
    assert_open_fails(&f.path("none.safetensors"), "expected tensors `embeddings`");
}

#[test]
fn files_that_are_not_there() {
    let f = Files::new();
    match Corpus::open(f.path("absent.safetensors")) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().contains("absent.safetensors"), "{e}"),
        other => panic!("{other:?}"),
    }
    // A directory where a file should be.
    std::fs::create_dir(f.path("dir.safetensors")).unwrap();
    assert!(open_err(&f.path("dir.safetensors")).contains("dir.safetensors"));
}

#[test]
fn missing_tensors() {
    let f = Files::new();
    let p = f.with("no-offsets.safetensors", vec![]);
    assert_open_fails(&p, "`offsets`");
    assert_open_fails(&p, "corpus import");
    let p = f.path("no-embeddings.safetensors");
    write_st(&p, vec![("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5]))]);
    assert_open_fails(&p, "found [\"offsets\"]");
    // Other names for the same things are not guessed at.
    let p = f.path("renamed.safetensors");
    write_st(
        &p,
        vec![
            ("embedding", Dtype::F32, vec![5, 4], vec![0u8; 80]),
            ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5])),
        ],
    );
    assert_open_fails(&p, "\"embedding\"");
}

#[test]
fn embeddings_of_the_wrong_dtype_or_shape() {
    let f = Files::new();
    let off = || ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5]));
    for (dt, size) in [
        (Dtype::I32, 4),
        (Dtype::F64, 8),
        (Dtype::U8, 1),
        (Dtype::I64, 8),
        (Dtype::BOOL, 1),
    ] {
        let p = f.path(&format!("dtype-{dt:?}.safetensors"));
        write_st(
            &p,
            vec![("embeddings", dt, vec![5, 4], vec![0u8; 20 * size]), off()],
        );
        assert_open_fails(&p, "supported: F32, F16, BF16");
        assert_open_fails(&p, &format!("{dt:?}"));
    }
    for (shape, what) in [
        (vec![20usize], "2-D"),
        (vec![5, 2, 2], "2-D"),
        (vec![1, 5, 4], "2-D"),
        (vec![], "2-D"),
        (vec![5, 0], "d = 0"),
    ] {
        let numel: usize = shape.iter().product();
        let p = f.path("shape.safetensors");
        write_st(
            &p,
            vec![
                (
                    "embeddings",
                    Dtype::F32,
                    shape.clone(),
                    vec![0u8; numel * 4],
                ),
                off(),
            ],
        );
        let msg = open_err(&p);
        assert!(
            msg.contains(what) && msg.contains("shape.safetensors"),
            "{shape:?}: {msg}"
        );
    }
}

#[test]
fn offsets_that_do_not_describe_the_token_matrix() {
    let f = Files::new();
    for (offsets, what) in [
        (
            &[0i64, 2, 4][..],
            "last offset is 4 but the token matrix has 5 rows",
        ),
        (&[0, 2, 6], "last offset is 6"),
        (&[0, -2, 5], "`offsets`[1] = -2 is not a valid offset"),
        (&[-1, 5], "not a valid offset"),
        (&[i64::MIN, 5], "not a valid offset"),
        (&[1, 2, 5], "first offset must be 0"),
        (&[0, 3, 2, 5], "decrease"),
        (&[0, 2, 2, 5], "document 1 is empty"),
        (&[0, 0, 5], "document 0 is empty"),
        (&[0], "at least one document"),
        (&[], "empty"),
        (&[0, i64::MAX, 5], "decrease"),
        (&[0, 2, i64::MAX], "last offset is"),
    ] {
        let p = f.with_offsets("offsets.safetensors", offsets);
        let msg = open_err(&p);
        assert!(
            msg.contains(what) && msg.contains("offsets.safetensors"),
            "{offsets:?}: {msg}"
        );
    }
    // Not a list of integers.
    let p = f.with(
        "f32-offsets.safetensors",
        vec![("offsets", Dtype::F32, vec![3], vec![0u8; 12])],
    );
    assert_open_fails(&p, "integer");
    let p = f.with(
        "2d-offsets.safetensors",
        vec![("offsets", Dtype::I64, vec![3, 1], i64s(&[0, 2, 5]))],
    );
    assert_open_fails(&p, "1-D");
    // Other integer widths are read as the same offsets.
    for (dt, bytes) in [
        (
            Dtype::I32,
            [0i32, 2, 5]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>(),
        ),
        (
            Dtype::U32,
            [0u32, 2, 5].iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        (
            Dtype::U64,
            [0u64, 2, 5].iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        (
            Dtype::I16,
            [0i16, 2, 5].iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
    ] {
        let p = f.with(
            "int-offsets.safetensors",
            vec![("offsets", dt, vec![3], bytes)],
        );
        assert_eq!(Corpus::open(&p).unwrap().offsets(), &[0, 2, 5], "{dt:?}");
    }
    // A negative I32 offset is caught as well.
    let neg: Vec<u8> = [0i32, -1, 5].iter().flat_map(|x| x.to_le_bytes()).collect();
    let p = f.with(
        "neg32.safetensors",
        vec![("offsets", Dtype::I32, vec![3], neg)],
    );
    assert_open_fails(&p, "not a valid offset");
}

#[test]
fn bad_doc_ids_in_the_file() {
    let f = Files::new();
    let off = || ("offsets", Dtype::I64, vec![3], i64s(&[0, 2, 5]));
    for (ids, what) in [
        (&b"a\na"[..], "more than once"),
        (b"a b\nc", "whitespace"),
        (b"a\tb\nc", "whitespace"),
        (b"a\n\nb", "ids given for 2 documents"),
        (b"a", "1 ids given for 2 documents"),
        (b"a\nb\nc", "3 ids given"),
        (b"\nb", "empty"),
        (b"a\n\xff\xfe", "not UTF-8"),
        (b"", "0 ids given"),
    ] {
        let p = f.with(
            "ids.safetensors",
            vec![off(), ("doc_ids", Dtype::U8, vec![ids.len()], ids.to_vec())],
        );
        let msg = open_err(&p);
        assert!(
            msg.contains(what) && msg.contains("ids.safetensors") && msg.contains("doc_ids"),
            "{:?}: {msg}",
            String::from_utf8_lossy(ids)
        );
    }
    // A trailing newline is fine (as written by `echo`/most tools).
    let p = f.with(
        "ids-ok.safetensors",
        vec![off(), ("doc_ids", Dtype::U8, vec![4], b"a\nb\n".to_vec())],
    );
    assert_eq!(Corpus::open(&p).unwrap().doc_ids().unwrap(), &["a", "b"]);
}

#[test]
fn half_precision_bits_survive_exactly() {
    // Every f16 and bf16 bit pattern (NaNs and infinities included) round-trips unchanged.
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<u16> = (0..=u16::MAX).collect();
    for dtype in [DType::F16, DType::BF16] {
        let o = match dtype {
            DType::F16 => OwnedElements::F16(all.iter().map(|&b| f16::from_bits(b)).collect()),
            _ => OwnedElements::BF16(all.iter().map(|&b| bf16::from_bits(b)).collect()),
        };
        let c = Corpus::from_lengths(o, 16, &[4096]).unwrap();
        let p = dir.path().join(format!("bits-{dtype}.safetensors"));
        c.save(&p).unwrap();
        assert_same_corpus(&format!("{dtype} bits"), &open_unchecked(&p), &c);
    }
}

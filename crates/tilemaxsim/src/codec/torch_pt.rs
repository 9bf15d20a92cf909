//! Read the tensors of a PyTorch `torch.save` file (a zip archive of a pickle and raw storages)
//! without Python, for colbert-ai indexes: a small pickle machine that knows only the opcodes
//! `torch.save` emits for tensors and tuples of tensors, and rebuilds each tensor from its
//! storage (`torch._utils._rebuild_tensor_v2`). Anything else is a clear error, never a panic.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use half::{bf16, f16};

use crate::error::{Error, Result};

/// A tensor read from a `.pt` file: its element type (PyTorch storage name), shape, and the
/// little-endian bytes of its elements in row-major order.
#[derive(Clone, Debug)]
pub(crate) struct PtTensor {
    pub dtype: String,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

#[derive(Clone, Debug)]
enum V {
    None,
    Bool,
    Int(i64),
    Float,
    Str(String),
    Tuple(Vec<V>),
    List(Vec<V>),
    Dict,
    Global(String, String),
    Storage(String, String),
    Tensor(PtTensorRef),
    Mark,
}

#[derive(Clone, Debug)]
struct PtTensorRef {
    dtype: String,
    key: String,
    offset: usize,
    shape: Vec<usize>,
    stride: Vec<usize>,
}

fn elem_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "DoubleStorage" | "LongStorage" => 8,
        "FloatStorage" | "IntStorage" => 4,
        "HalfStorage" | "BFloat16Storage" | "ShortStorage" => 2,
        "ByteStorage" | "CharStorage" | "BoolStorage" => 1,
        _ => return None,
    })
}

/// Run the pickle in `data`, returning the top value (tensors, tuples, lists of them).
fn unpickle(path: &Path, data: &[u8]) -> Result<V> {
    let bad = |why: String| Error::format(path, format!("cannot read this PyTorch file: {why}"));
    let mut stack: Vec<V> = Vec::new();
    let mut memo: HashMap<u32, V> = HashMap::new();
    let mut i = 0usize;
    let take = |i: &mut usize, n: usize| -> Result<&[u8]> {
        let s = data
            .get(*i..*i + n)
            .ok_or_else(|| bad("the pickle ends early (truncated?)".into()))?;
        *i += n;
        Ok(s)
    };
    let pop_mark = |stack: &mut Vec<V>| -> Result<Vec<V>> {
        let at = stack
            .iter()
            .rposition(|v| matches!(v, V::Mark))
            .ok_or_else(|| bad("a MARK is missing".into()))?;
        let items = stack.split_off(at + 1);
        stack.pop();
        Ok(items)
    };
    loop {
        let op = *take(&mut i, 1)?.first().unwrap_or(&b'.');
        match op {
            0x80 => {
                take(&mut i, 1)?;
            }
            0x95 => {
                take(&mut i, 8)?;
            }
            b'c' => {
                let rest = &data[i..];
                let nl1 = rest
                    .iter()
                    .position(|&b| b == b'\n')
                    .ok_or_else(|| bad("bad GLOBAL".into()))?;
                let nl2 = rest[nl1 + 1..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .ok_or_else(|| bad("bad GLOBAL".into()))?;
                let module = String::from_utf8_lossy(&rest[..nl1]).into_owned();
                let name = String::from_utf8_lossy(&rest[nl1 + 1..nl1 + 1 + nl2]).into_owned();
                i += nl1 + nl2 + 2;
                stack.push(V::Global(module, name));
            }
            0x93 => {
                let name = stack.pop();
                let module = stack.pop();
                match (module, name) {
                    (Some(V::Str(m)), Some(V::Str(n))) => stack.push(V::Global(m, n)),
                    _ => return Err(bad("bad STACK_GLOBAL".into())),
                }
            }
            b'q' => {
                let k = take(&mut i, 1)?[0] as u32;
                memo.insert(
                    k,
                    stack
                        .last()
                        .cloned()
                        .ok_or_else(|| bad("BINPUT on an empty stack".into()))?,
                );
            }
            b'r' => {
                let k = u32::from_le_bytes(take(&mut i, 4)?.try_into().expect("4 bytes"));
                memo.insert(
                    k,
                    stack
                        .last()
                        .cloned()
                        .ok_or_else(|| bad("LONG_BINPUT on an empty stack".into()))?,
                );
            }
            0x94 => {
                let k = memo.len() as u32;
                memo.insert(
                    k,
                    stack
                        .last()
                        .cloned()
                        .ok_or_else(|| bad("MEMOIZE on an empty stack".into()))?,
                );
            }
            b'h' | b'j' => {
                let k = if op == b'h' {
                    take(&mut i, 1)?[0] as u32
                } else {
                    u32::from_le_bytes(take(&mut i, 4)?.try_into().expect("4 bytes"))
                };
                stack.push(
                    memo.get(&k)
                        .cloned()
                        .ok_or_else(|| bad(format!("memo {k} is unset")))?,
                );
            }
            b'(' => stack.push(V::Mark),
            b't' => {
                let items = pop_mark(&mut stack)?;
                stack.push(V::Tuple(items));
            }
            b')' => stack.push(V::Tuple(Vec::new())),
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if stack.len() < n {
                    return Err(bad("TUPLE on a short stack".into()));
                }
                let items = stack.split_off(stack.len() - n);
                stack.push(V::Tuple(items));
            }
            b'K' => stack.push(V::Int(take(&mut i, 1)?[0] as i64)),
            b'M' => stack.push(V::Int(
                u16::from_le_bytes(take(&mut i, 2)?.try_into().expect("2")) as i64,
            )),
            b'J' => stack.push(V::Int(
                i32::from_le_bytes(take(&mut i, 4)?.try_into().expect("4")) as i64,
            )),
            0x8a => {
                let n = take(&mut i, 1)?[0] as usize;
                let b = take(&mut i, n)?;
                if n > 8 {
                    return Err(bad("an integer wider than 64 bits".into()));
                }
                let mut v: i64 = 0;
                for (k, &x) in b.iter().enumerate() {
                    v |= (x as i64) << (8 * k);
                }
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                stack.push(V::Int(v));
            }
            b'G' => {
                take(&mut i, 8)?;
                stack.push(V::Float);
            }
            b'X' | 0x8c => {
                let n = if op == b'X' {
                    u32::from_le_bytes(take(&mut i, 4)?.try_into().expect("4")) as usize
                } else {
                    take(&mut i, 1)?[0] as usize
                };
                let s = String::from_utf8_lossy(take(&mut i, n)?).into_owned();
                stack.push(V::Str(s));
            }
            b'N' => stack.push(V::None),
            0x88 | 0x89 => stack.push(V::Bool),
            b'}' => stack.push(V::Dict),
            b']' => stack.push(V::List(Vec::new())),
            b'a' => {
                let x = stack
                    .pop()
                    .ok_or_else(|| bad("APPEND on an empty stack".into()))?;
                if let Some(V::List(l)) = stack.last_mut() {
                    l.push(x);
                }
            }
            b'e' => {
                let items = pop_mark(&mut stack)?;
                if let Some(V::List(l)) = stack.last_mut() {
                    l.extend(items);
                }
            }
            b's' => {
                stack.truncate(stack.len().saturating_sub(2));
            }
            b'u' => {
                pop_mark(&mut stack)?;
            }
            b'b' => {
                stack.pop();
            }
            b'Q' => {
                let pid = stack.pop();
                let Some(V::Tuple(t)) = pid else {
                    return Err(bad("a persistent id that is not a tuple".into()));
                };
                match t.as_slice() {
                    [V::Str(kind), V::Global(_, ty), V::Str(key), ..] if kind == "storage" => {
                        stack.push(V::Storage(ty.clone(), key.clone()))
                    }
                    _ => return Err(bad("a persistent id that is not a storage".into())),
                }
            }
            b'R' => {
                let args = stack.pop();
                let f = stack.pop();
                match (f, args) {
                    (Some(V::Global(m, n)), Some(V::Tuple(a)))
                        if m == "torch._utils" && n == "_rebuild_tensor_v2" =>
                    {
                        let ints = |v: &V| -> Option<Vec<usize>> {
                            match v {
                                V::Tuple(x) => x
                                    .iter()
                                    .map(|e| match e {
                                        V::Int(k) if *k >= 0 => Some(*k as usize),
                                        _ => None,
                                    })
                                    .collect(),
                                _ => None,
                            }
                        };
                        match (
                            a.first(),
                            a.get(1),
                            a.get(2).and_then(ints),
                            a.get(3).and_then(ints),
                        ) {
                            (
                                Some(V::Storage(ty, key)),
                                Some(V::Int(off)),
                                Some(shape),
                                Some(stride),
                            ) if *off >= 0 => stack.push(V::Tensor(PtTensorRef {
                                dtype: ty.clone(),
                                key: key.clone(),
                                offset: *off as usize,
                                shape,
                                stride,
                            })),
                            _ => return Err(bad("a tensor with unexpected arguments".into())),
                        }
                    }
                    (Some(V::Global(m, n)), _) if m == "collections" && n == "OrderedDict" => {
                        stack.push(V::Dict)
                    }
                    (Some(V::Global(m, n)), _) => {
                        return Err(bad(format!(
                            "it calls {m}.{n}, which is not a plain tensor"
                        )));
                    }
                    _ => return Err(bad("a REDUCE without a callable".into())),
                }
            }
            b'.' => return stack.pop().ok_or_else(|| bad("an empty pickle".into())),
            other => return Err(bad(format!("pickle opcode 0x{other:02x} is not supported"))),
        }
    }
}

/// The tensors of a `.pt` file, in the order they appear in its top value (one tensor, or a
/// tuple/list of tensors).
pub(crate) fn read_pt(path: &Path) -> Result<Vec<PtTensor>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| {
        Error::format(
            path,
            format!("not a PyTorch zip archive ({e}); truncated or an old-format file?"),
        )
    })?;
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    let pkl = names
        .iter()
        .find(|n| n.ends_with("/data.pkl") || *n == "data.pkl")
        .cloned()
        .ok_or_else(|| Error::format(path, "no data.pkl in the archive: not a torch.save file"))?;
    let prefix = pkl.trim_end_matches("data.pkl").to_owned();
    let mut read_entry = |name: &str| -> Result<Vec<u8>> {
        let mut f = zip
            .by_name(name)
            .map_err(|e| Error::format(path, format!("archive entry {name}: {e}")))?;
        let mut v = Vec::new();
        f.read_to_end(&mut v)
            .map_err(|e| Error::format(path, format!("archive entry {name}: {e} (truncated?)")))?;
        Ok(v)
    };
    let top = unpickle(path, &read_entry(&pkl)?)?;
    let refs: Vec<PtTensorRef> = match top {
        V::Tensor(t) => vec![t],
        V::Tuple(v) | V::List(v) => v
            .into_iter()
            .map(|x| match x {
                V::Tensor(t) => Ok(t),
                _ => Err(Error::format(
                    path,
                    "a tuple holding something other than tensors",
                )),
            })
            .collect::<Result<_>>()?,
        _ => return Err(Error::format(path, "the file holds no tensor")),
    };
    refs.into_iter()
        .map(|r| {
            let es = elem_size(&r.dtype).ok_or_else(|| {
                Error::format(path, format!("storage type {} is not supported", r.dtype))
            })?;
            // Only C-contiguous tensors (what colbert-ai saves).
            let mut want = 1usize;
            for (k, (&n, &s)) in r.shape.iter().zip(&r.stride).enumerate().rev() {
                if n > 1 && s != want {
                    return Err(Error::format(
                        path,
                        format!("tensor is not contiguous (dimension {k})"),
                    ));
                }
                want = want.saturating_mul(n);
            }
            let numel: usize = r.shape.iter().product();
            let storage = read_entry(&format!("{prefix}data/{}", r.key))?;
            let (a, b) = (r.offset * es, (r.offset + numel) * es);
            let bytes = storage
                .get(a..b)
                .ok_or_else(|| {
                    Error::format(
                        path,
                        format!("storage {} is shorter than its tensor (truncated?)", r.key),
                    )
                })?
                .to_vec();
            Ok(PtTensor {
                dtype: r.dtype,
                shape: r.shape,
                bytes,
            })
        })
        .collect()
}

impl PtTensor {
    /// The elements as f32 (float storages only).
    pub(crate) fn to_f32(&self, path: &Path) -> Result<Vec<f32>> {
        let b = &self.bytes;
        Ok(match self.dtype.as_str() {
            "FloatStorage" => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                .collect(),
            "HalfStorage" => b
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes(c.try_into().expect("2")).to_f32())
                .collect(),
            "BFloat16Storage" => b
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes(c.try_into().expect("2")).to_f32())
                .collect(),
            "DoubleStorage" => b
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8")) as f32)
                .collect(),
            other => {
                return Err(Error::format(
                    path,
                    format!("expected a float tensor, found {other}"),
                ));
            }
        })
    }

    /// The elements as integers (integer storages only).
    pub(crate) fn to_ints(&self, path: &Path) -> Result<Vec<i128>> {
        let b = &self.bytes;
        Ok(match self.dtype.as_str() {
            "LongStorage" => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8")) as i128)
                .collect(),
            "IntStorage" => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().expect("4")) as i128)
                .collect(),
            "ShortStorage" => b
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes(c.try_into().expect("2")) as i128)
                .collect(),
            "ByteStorage" => b.iter().map(|&x| x as i128).collect(),
            "CharStorage" => b.iter().map(|&x| x as i8 as i128).collect(),
            other => {
                return Err(Error::format(
                    path,
                    format!("expected an integer tensor, found {other}"),
                ));
            }
        })
    }
}

fn one(path: &Path) -> Result<PtTensor> {
    let mut v = read_pt(path)?;
    match v.len() {
        1 => Ok(v.remove(0)),
        n => Err(Error::format(
            path,
            format!("expected one tensor, found {n}"),
        )),
    }
}

/// A residual codec's parts as read from an index: centroids (f16), d, bucket cutoffs, weights.
pub(crate) type CodecParts = (Vec<f16>, usize, Vec<f32>, Vec<f32>);

/// A colbert-ai index's codec parts.
pub(crate) fn colbert_codec(dir: &Path) -> Result<CodecParts> {
    let cp = dir.join("centroids.pt");
    let c = one(&cp)?;
    let dim = match c.shape[..] {
        [_, d] if d > 0 => d,
        _ => {
            return Err(Error::format(
                &cp,
                format!("expected [K, d], found shape {:?}", c.shape),
            ));
        }
    };
    let centroids = c.to_f32(&cp)?.into_iter().map(f16::from_f32).collect();
    let bp = dir.join("buckets.pt");
    let b = read_pt(&bp)?;
    let [cut, wts] = &b[..] else {
        return Err(Error::format(
            &bp,
            format!("expected (cutoffs, weights), found {} tensors", b.len()),
        ));
    };
    Ok((centroids, dim, cut.to_f32(&bp)?, wts.to_f32(&bp)?))
}

/// One chunk of a colbert-ai index: centroid ids and packed residual bytes, with their paths.
pub(crate) fn colbert_chunk(
    dir: &Path,
    c: usize,
) -> Result<(Vec<i128>, Vec<u8>, PathBuf, PathBuf)> {
    let cp = dir.join(format!("{c}.codes.pt"));
    let rp = dir.join(format!("{c}.residuals.pt"));
    let ids = one(&cp)?.to_ints(&cp)?;
    let r = one(&rp)?;
    if r.dtype != "ByteStorage" {
        return Err(Error::format(
            &rp,
            format!("expected uint8 residuals, found {}", r.dtype),
        ));
    }
    Ok((ids, r.bytes, cp, rp))
}

//! Kernel sources (the `.cu` files under `kernels/`, embedded in the binary) compiled by NVRTC
//! for the device's architecture at first use, and cached on disk keyed by a hash of the
//! source, the architecture, the NVRTC version and the options, so a second start does not
//! recompile. The cache holds NVRTC's SASS (a cubin) where the device runs it as it is, so a
//! start loads it without the driver compiling PTX (about a second for this program); PTX
//! only for the parts that JIT it. Needs only libnvrtc at run time, no CUDA headers.

use std::path::PathBuf;

use cudarc::nvrtc::Ptx;

use crate::error::{Error, Result};

/// Every file of `kernels/`, embedded: the kernel families (`*.cu`), their shared helpers
/// (`*.cuh`), and `all.cu`, the program's root, which includes the families in order.
const FILES: [(&str, &str); 28] = [
    ("all.cu", include_str!("../../kernels/all.cu")),
    ("common.cuh", include_str!("../../kernels/common.cuh")),
    ("mma_frag.cuh", include_str!("../../kernels/mma_frag.cuh")),
    ("split.cuh", include_str!("../../kernels/split.cuh")),
    ("any_frag.cuh", include_str!("../../kernels/any_frag.cuh")),
    (
        "async_copy.cuh",
        include_str!("../../kernels/async_copy.cuh"),
    ),
    (
        "tile_producer.cuh",
        include_str!("../../kernels/tile_producer.cuh"),
    ),
    ("ablation.cu", include_str!("../../kernels/ablation.cu")),
    ("utility.cu", include_str!("../../kernels/utility.cu")),
    ("mma.cu", include_str!("../../kernels/mma.cu")),
    ("bulk.cu", include_str!("../../kernels/bulk.cu")),
    ("span.cu", include_str!("../../kernels/span.cu")),
    ("stream.cu", include_str!("../../kernels/stream.cu")),
    ("gemm.cu", include_str!("../../kernels/gemm.cu")),
    ("ring.cu", include_str!("../../kernels/ring.cu")),
    ("bulk_split.cu", include_str!("../../kernels/bulk_split.cu")),
    ("bulk_rows.cu", include_str!("../../kernels/bulk_rows.cu")),
    ("wgmma.cu", include_str!("../../kernels/wgmma.cu")),
    ("topk.cu", include_str!("../../kernels/topk.cu")),
    ("codec.cu", include_str!("../../kernels/codec.cu")),
    (
        "codec_tables.cu",
        include_str!("../../kernels/codec_tables.cu"),
    ),
    ("compress.cu", include_str!("../../kernels/compress.cu")),
    (
        "codec_wgmma.cu",
        include_str!("../../kernels/codec_wgmma.cu"),
    ),
    ("codec_lut.cu", include_str!("../../kernels/codec_lut.cu")),
    ("codec_bulk.cu", include_str!("../../kernels/codec_bulk.cu")),
    ("codec_quad.cu", include_str!("../../kernels/codec_quad.cu")),
    ("train.cu", include_str!("../../kernels/train.cu")),
    ("ivf.cu", include_str!("../../kernels/ivf.cu")),
];

/// The kernel translation unit (NVRTC gets one string): `all.cu` with every `#include "name"`
/// replaced by that file, each file once, where it is first included (`#pragma once` lines
/// dropped). bench/nvrtc_ptx.py assembles it the same way from the files on disk.
pub fn source() -> String {
    fn inline(name: &str, seen: &mut Vec<&'static str>, out: &mut String) {
        let Some(&(file, text)) = FILES.iter().find(|(f, _)| *f == name) else {
            // Every include names an embedded file (`every_include_is_embedded`).
            unreachable!("kernels/{name} is not embedded in compile.rs");
        };
        if seen.contains(&file) {
            return;
        }
        seen.push(file);
        for line in text.lines() {
            match included(line) {
                Some(next) => inline(next, seen, out),
                None if line.trim() == "#pragma once" => {}
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
    }
    let mut out = String::new();
    inline("all.cu", &mut Vec::new(), &mut out);
    out
}

/// The file a line `#include "name"` names.
fn included(line: &str) -> Option<&str> {
    line.trim().strip_prefix("#include \"")?.strip_suffix('"')
}

/// Whether libnvrtc can be loaded on this machine.
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to open the shared library; nothing is called through it.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// NVRTC's (major, minor) version.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    if !nvrtc_available() {
        return Err(Error::DeviceUnavailable("libnvrtc not found".into()));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; the two pointers are valid for writes.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::DeviceUnavailable(format!(
            "nvrtcVersion failed: {r:?}"
        )));
    }
    Ok((major, minor))
}

/// `sm_XY` for a compute capability (a static string, as NVRTC's options need).
pub fn arch_name(major: i32, minor: i32) -> &'static str {
    match (major, minor) {
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        // The "a" target: sm_90's own instructions (wgmma) besides the portable ones; the SASS
        // of every other kernel is the same as for sm_90 (ptxas 12.9, checked instruction by
        // instruction).
        (9, 0) => "sm_90a",
        (10, 0) => "sm_100",
        (12, 0) => "sm_120",
        // Newer parts run sm_90 PTX through the driver's JIT.
        _ if major >= 9 => "sm_90",
        _ => "sm_80",
    }
}

/// NVRTC's options for `arch`.
fn options(arch: &'static str) -> Vec<String> {
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "--fmad=true".to_string(),
        "--std=c++17".to_string(),
        "-default-device".to_string(),
    ];
    // Experiments only: comma-separated `NAME=VALUE` macro overrides (e.g. MMA_TILES=8).
    if let Ok(defines) = std::env::var("TILEMAXSIM_KERNEL_DEFINES") {
        options.extend(
            defines
                .split(',')
                .filter(|d| !d.trim().is_empty())
                .map(|d| format!("-D{}", d.trim())),
        );
    }
    options
}

/// Whether the device of `arch` runs NVRTC's SASS for it as it is: every `arch_name` but
/// `sm_90`, which newer parts take as PTX through the driver's JIT.
fn runs_sass(arch: &str) -> bool {
    arch != "sm_90"
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TILEMAXSIM_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tilemaxsim"))
}

/// FNV-1a: a stable hash (std's hasher is not stable across releases).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for &b in p.iter().chain(&[0xffu8]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// One NVRTC compilation of the program: its PTX, and its SASS (a cubin) for the real
/// architecture it was compiled for.
pub struct Compiled {
    pub ptx: Ptx,
    pub cubin: Vec<u8>,
}

/// Compile without the cache (what CI runs for each target architecture).
pub fn compile_uncached(arch: &'static str) -> Result<Compiled> {
    use cudarc::nvrtc::{result, sys};
    if !nvrtc_available() {
        return Err(Error::DeviceUnavailable(
            "libnvrtc not found; install the CUDA runtime or `pip install nvidia-cuda-nvrtc-cu12`"
                .into(),
        ));
    }
    let failed =
        |what: String| Error::DeviceUnavailable(format!("NVRTC failed for {arch}: {what}"));
    let src = std::ffi::CString::new(source()).map_err(|e| failed(e.to_string()))?;
    let prog = result::create_program(&src, None).map_err(|e| failed(e.to_string()))?;
    // SAFETY: `prog` is a live program (destroyed once, below); the buffers passed to NVRTC
    // are sized by its own size queries.
    unsafe {
        let compiled = result::compile_program(prog, &options(arch)).map_err(|e| {
            let log = result::get_program_log(prog)
                .map(|l| {
                    std::ffi::CStr::from_ptr(l.as_ptr())
                        .to_string_lossy()
                        .into_owned()
                })
                .unwrap_or_default();
            failed(format!("{e}\n{log}"))
        });
        let ptx = compiled.and_then(|()| {
            let image = result::get_ptx(prog).map_err(|e| failed(e.to_string()))?;
            let text = std::ffi::CStr::from_ptr(image.as_ptr()).to_string_lossy();
            Ok(Ptx::from_src(text.into_owned()))
        });
        let cubin = ptx.and_then(|ptx| {
            let mut size = 0usize;
            let mut cubin = Vec::new();
            let mut r = sys::nvrtcGetCUBINSize(prog, &mut size);
            if r == sys::nvrtcResult::NVRTC_SUCCESS {
                cubin = vec![0u8; size];
                r = sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast());
            }
            if r != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                return Err(failed(format!("no cubin ({r:?})")));
            }
            Ok(Compiled { ptx, cubin })
        });
        let _ = result::destroy_program(prog);
        cubin
    }
}

/// The compiled kernels for `arch`, from the disk cache when present: the SASS where the
/// device runs it as it is (`runs_sass`; the driver loads it without compiling), else the PTX.
/// The boolean says whether the cache was hit.
pub fn compile(arch: &'static str) -> Result<(Ptx, bool)> {
    let (major, minor) = nvrtc_version()?;
    let src = source();
    let key = fnv1a(&[
        src.as_bytes(),
        arch.as_bytes(),
        format!("{major}.{minor}").as_bytes(),
        format!("{:?}", options(arch)).as_bytes(),
    ]);
    let sass = runs_sass(arch);
    let ext = if sass { "cubin" } else { "ptx" };
    let path = cache_dir().map(|d| d.join(format!("kernels-{arch}-{key:016x}.{ext}")));
    if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok()) {
        if sass && bytes.starts_with(b"\x7fELF") {
            return Ok((Ptx::from_binary(bytes), true));
        }
        if !sass && String::from_utf8_lossy(&bytes).contains(".entry") {
            return Ok((
                Ptx::from_src(String::from_utf8_lossy(&bytes).into_owned()),
                true,
            ));
        }
    }
    let compiled = compile_uncached(arch)?;
    let bytes = if sass {
        compiled.cubin
    } else {
        compiled.ptx.to_src().into_bytes()
    };
    if let Some(p) = &path {
        // The cache is an optimization: failing to write it is not an error.
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // Unique per process and call: two threads may compile at once (one per GPU).
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = p.with_extension(format!("tmp{}-{seq}", std::process::id()));
        if std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, p).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    let image = if sass {
        Ptx::from_binary(bytes)
    } else {
        Ptx::from_src(String::from_utf8_lossy(&bytes).into_owned())
    };
    Ok((image, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_include_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(f, _)| f.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded, "kernels/ and compile.rs's FILES differ");
        for (file, text) in FILES {
            for name in text.lines().filter_map(included) {
                assert!(
                    FILES.iter().any(|(f, _)| *f == name),
                    "{file} includes {name}, which is not embedded"
                );
            }
        }
    }

    #[test]
    fn source_holds_each_file_once() {
        let src = source();
        assert!(!src.contains("#include"), "an include was left unresolved");
        assert!(!src.contains("#pragma once"));
        // Each file is inlined once: its first line (a comment saying what it holds) once.
        for (file, text) in FILES.iter().filter(|(f, _)| *f != "all.cu") {
            let first = text.lines().next().unwrap_or_default();
            assert_eq!(
                src.matches(first).count(),
                1,
                "{file} inlined other than once"
            );
        }
        assert_eq!(src.matches("struct DocRows {").count(), 1);
        assert_eq!(src.matches("typedef unsigned short u16;").count(), 1);
    }
}

//! Every kernel source compiles with NVRTC for every architecture we ship for. Runs wherever
//! libnvrtc can be loaded (CI installs it from PyPI and sets TILEMAXSIM_REQUIRE_NVRTC=1, so a
//! missing library fails there instead of skipping).
#![cfg(feature = "cuda")]

use tilemaxsim::cuda::{compile_uncached, nvrtc_available, nvrtc_version};

#[test]
fn kernels_compile_for_sm80_and_sm90() {
    // sm_90a is what an H100 or H200 gets (wgmma); sm_90 what newer parts JIT from.
    if !nvrtc_available() {
        assert!(
            std::env::var_os("TILEMAXSIM_REQUIRE_NVRTC").is_none(),
            "TILEMAXSIM_REQUIRE_NVRTC is set but libnvrtc cannot be loaded (LD_LIBRARY_PATH?)"
        );
        eprintln!("NOTICE: libnvrtc not found; CUDA kernel compile check skipped");
        return;
    }
    let (major, minor) = nvrtc_version().expect("NVRTC version");
    for arch in ["sm_80", "sm_90", "sm_90a"] {
        let compiled =
            compile_uncached(arch).unwrap_or_else(|e| panic!("NVRTC {major}.{minor}, {arch}: {e}"));
        // The SASS the cache keeps for the device: an ELF image.
        assert!(
            compiled.cubin.starts_with(b"\x7fELF") && compiled.cubin.len() > 1 << 20,
            "{arch}: no cubin ({} bytes)",
            compiled.cubin.len()
        );
        let text = compiled.ptx.to_src();
        for entry in [
            "maxsim_tiled_f32",
            "maxsim_tiled_f16",
            "maxsim_tiled_bf16",
            "read_ceiling",
            "topk_segments",
            "topk_merge",
            "topk_merge_groups",
            "maxsim_mma_f16_d128",
            "maxsim_bulk_f16_d128",
            "maxsim_bulk_bf16_d32",
            "maxsim_bulk_f16_d768",
            "maxsim_bulk_bf16_d1024",
            "maxsim_gemm_f16_d128",
            "maxsim_gemm_bf16_d96",
            "sum_qblocks",
            "maxsim_ring_f16_d128",
            "maxsim_ring_bf16_d32",
            "maxsim_ring_f32_d32",
            "maxsim_ring_f32_d96",
            "maxsim_ring_f32_d128",
            "maxsim_bulk_split_f32_d128",
            "maxsim_bulk_planes_d128",
            "split_f32_planes_d32",
            "maxsim_wgmma_f16_d128",
            "maxsim_wgmma_bf16_d64",
            "ivf_probe_p8",
            "ivf_probe_merge_p64",
            "ivf_mark",
            "ivf_interaction",
            "maxsim_codec_residual2_d128",
            "maxsim_stream_f16_d16",
            "maxsim_stream_bf16_d56",
        ] {
            assert!(
                text.contains(&format!(".entry {entry}")),
                "{arch}: no entry {entry} in the PTX"
            );
        }
        assert!(
            text.contains(&format!(".target {arch}\n")),
            "{arch}: PTX targets another arch"
        );
        // The warpgroup MMA is in the sm_90a build only (elsewhere its kernels are empty).
        assert_eq!(
            text.contains("wgmma.mma_async.sync.aligned.m64n64k16"),
            arch == "sm_90a",
            "{arch}: wgmma where it should not be, or missing"
        );
    }
}

//! The plan's unit tests: kernel choice per shape, launch sizes, tuning per device, the
//! spanning kernel's windows, stages and instances, the streaming kernel's instances, and the
//! defines an experiment may set.
use super::*;

fn shape(blocks: Option<usize>, queries: usize, dim: usize, bulk: bool) -> LaunchShape {
    LaunchShape {
        blocks,
        queries,
        dim,
        f32: false,
        mixed: false,
        bulk_available: bulk,
        wgmma_available: bulk,
        fills_tiles: false,
        ring_available: true,
    }
}

#[test]
fn kernels_are_chosen_per_shape() {
    use Kernel::*;
    let auto = |s| choose_kernel(None, s);
    // One short query, d ≤ 128: memory-bound kernels (bulk where the device has it).
    assert_eq!(auto(shape(Some(1), 1, 128, true)), Bulk);
    assert_eq!(auto(shape(Some(1), 1, 128, false)), Mma);
    assert_eq!(auto(shape(Some(7), 7, 64, false)), Mma);
    // Many queries, or one long query: the many-row kernel.
    assert_eq!(auto(shape(Some(8), 8, 128, true)), Gemm);
    assert_eq!(auto(shape(Some(32), 1, 128, true)), Gemm);
    // Wide embeddings, queries of ≤ 32 tokens: bulk (its warps split d) on sm_90, else the
    // dimension-tiled ring kernel where its block fits the device's shared memory.
    assert_eq!(auto(shape(Some(3), 3, 768, true)), Bulk);
    assert_eq!(auto(shape(Some(1), 1, 256, true)), Bulk);
    assert_eq!(auto(shape(Some(40), 40, 1024, false)), Ring);
    assert_eq!(
        choose_kernel(Some(Ring), shape(Some(3), 3, 768, true)),
        Ring
    );
    assert_eq!(
        choose_kernel(Some(Bulk), shape(Some(3), 3, 768, false)),
        Ring
    );
    assert_eq!(auto(shape(Some(2), 1, 768, false)), Tiled);
    let no_room = LaunchShape {
        ring_available: false,
        ..shape(Some(1), 1, 768, false)
    };
    assert_eq!(auto(no_room), Tiled);
    // f32 on the tensor cores: the ring kernel's split, one block per query, in range.
    let f32 = |blocks, queries, dim| LaunchShape {
        f32: true,
        ..shape(blocks, queries, dim, true)
    };
    // sm_90: the bulk-copy split at d ≤ 128, the ring kernel at wide d and by name.
    assert_eq!(auto(f32(Some(1), 1, 128)), Bulk);
    assert_eq!(auto(f32(Some(9), 9, 32)), Bulk);
    assert_eq!(auto(f32(Some(1), 1, 512)), Ring);
    assert_eq!(auto(f32(None, 1, 128)), Tiled);
    assert_eq!(choose_kernel(Some(Gemm), f32(Some(1), 1, 64)), Bulk);
    assert_eq!(choose_kernel(Some(Ring), f32(Some(1), 1, 64)), Ring);
    assert_eq!(choose_kernel(Some(Tiled), f32(Some(1), 1, 64)), Tiled);
    let f32_pre_hopper = |blocks, queries, dim| LaunchShape {
        f32: true,
        ..shape(blocks, queries, dim, false)
    };
    assert_eq!(auto(f32_pre_hopper(Some(1), 1, 128)), Ring);
    assert_eq!(
        choose_kernel(Some(Bulk), f32_pre_hopper(Some(1), 1, 128)),
        Ring
    );
    let f32_no_room = LaunchShape {
        ring_available: false,
        ..f32_pre_hopper(Some(1), 1, 128)
    };
    assert_eq!(auto(f32_no_room), Tiled);
    // f32 queries against a 16-bit corpus: only the bulk-copy split, d ≤ 128 instantiated.
    let mixed = |blocks, dim, bulk| LaunchShape {
        mixed: true,
        ..shape(blocks, 1, dim, bulk)
    };
    assert_eq!(auto(mixed(Some(1), 128, true)), Bulk);
    assert_eq!(choose_kernel(Some(Ring), mixed(Some(1), 64, true)), Bulk);
    assert_eq!(auto(mixed(Some(1), 128, false)), Tiled);
    assert_eq!(auto(mixed(Some(1), 768, true)), Tiled);
    assert_eq!(auto(mixed(Some(1), 77, true)), Tiled);
    assert_eq!(auto(mixed(None, 128, true)), Tiled);
    assert_eq!(choose_kernel(Some(V1), mixed(Some(1), 128, true)), V1);
    // Other dtypes / d: the general kernel.
    assert_eq!(auto(shape(None, 1, 128, true)), Tiled);
    assert_eq!(auto(shape(Some(1), 1, 200, true)), Bulk);
    assert_eq!(auto(shape(Some(1), 1, 200, false)), Tiled);
    // Any d up to 256: `maxsim_span_any` (every document) where `maxsim_bulk_any` cannot.
    assert_eq!(auto(shape(Some(1), 1, 202, true)), Bulk);
    assert_eq!(auto(shape(Some(1), 1, 255, true)), Bulk);
    assert_eq!(auto(shape(Some(1), 1, 258, true)), Tiled);
    assert_eq!(auto(shape(Some(2), 1, 200, true)), Tiled);
    assert_eq!(wide_any_bound(200), Some(256));
    assert_eq!(wide_any_bound(1016), Some(1024));
    assert_eq!(wide_any_bound(768), None);
    assert_eq!(wide_any_bound(120), None);
    assert_eq!(wide_any_bound(1032), None);
    // maxsim_bulk_any's dimensions a warp: whole k16 steps, the half-chunk kernel up to
    // 128·KQ − 64.
    for (dim, slice) in [
        (136, 48),
        (192, 48),
        (200, 64),
        (264, 80),
        (320, 80),
        (328, 96),
    ] {
        assert_eq!(bulk_any_slice(dim), slice, "d = {dim}");
    }
    for dim in (136..=1016)
        .step_by(8)
        .filter(|&d| wide_any_bound(d).is_some())
    {
        let (slice, kq) = (bulk_any_slice(dim), dim.div_ceil(128));
        assert!(
            slice == 32 * kq || slice == 32 * kq - 16,
            "d = {dim}: {slice}"
        );
        assert!(
            4 * slice >= dim && 4 * (slice - 16) < dim,
            "d = {dim}: {slice}"
        );
    }
    assert_eq!(auto(shape(Some(1), 1, 1152, true)), Tiled);
    // Forced kernels, and their fallbacks where they do not apply.
    let forced = |k, s| choose_kernel(Some(k), s);
    assert_eq!(forced(Mma, shape(Some(1), 1, 128, true)), Mma);
    assert_eq!(forced(Mma, shape(Some(9), 9, 128, true)), Mma);
    assert_eq!(forced(Mma, shape(Some(2), 1, 128, true)), Gemm);
    assert_eq!(forced(Bulk, shape(Some(1), 1, 128, false)), Mma);
    assert_eq!(forced(Gemm, shape(Some(1), 1, 32, true)), Gemm);
    assert_eq!(forced(Gemm, shape(Some(1), 1, 768, true)), Bulk);
    assert_eq!(forced(Gemm, shape(Some(1), 1, 768, false)), Ring);
    assert_eq!(forced(Ring, shape(Some(1), 1, 128, true)), Ring);
    // Warpgroup MMA: by name on sm_90a at d = 64 and 128 (else Gemm); chosen there on
    // documents that mostly fill their 128-token tiles.
    assert_eq!(forced(Wgmma, shape(Some(40), 8, 128, true)), Wgmma);
    assert_eq!(forced(Wgmma, shape(Some(1), 1, 64, true)), Wgmma);
    assert_eq!(forced(Wgmma, shape(Some(40), 8, 96, true)), Gemm);
    assert_eq!(forced(Wgmma, shape(Some(40), 8, 128, false)), Gemm);
    assert_eq!(forced(Wgmma, shape(Some(1), 1, 768, false)), Ring);
    assert_eq!(auto(shape(Some(40), 8, 128, true)), Gemm);
    let filled = |blocks, queries, dim, sm90a| LaunchShape {
        fills_tiles: true,
        ..shape(blocks, queries, dim, sm90a)
    };
    assert_eq!(auto(filled(Some(32), 1, 128, true)), Wgmma);
    assert_eq!(auto(filled(Some(32), 32, 128, true)), Wgmma);
    assert_eq!(auto(filled(Some(40), 8, 64, true)), Wgmma);
    assert_eq!(auto(filled(Some(32), 1, 128, false)), Gemm);
    assert_eq!(auto(filled(Some(32), 1, 96, true)), Gemm);
    assert_eq!(auto(filled(Some(1), 1, 128, true)), Bulk);
    assert_eq!(forced(Gemm, filled(Some(32), 1, 128, true)), Gemm);
    assert_eq!(forced(Ring, shape(Some(2), 1, 128, true)), Gemm);
    assert_eq!(forced(Tiled, shape(Some(1), 1, 128, true)), Tiled);
    assert_eq!(forced(V1, shape(Some(1), 1, 128, true)), V1);
    assert_eq!(forced(V2, shape(None, 1, 128, true)), V2);
}

#[test]
fn ring_blocks_fit_shared_memory() {
    const H100: usize = 227 * 1024;
    const RTX: usize = 99 * 1024;
    let k = KernelShape::DEFAULT;
    let wide = KernelShape {
        ring_warps: 12,
        ring_stages: 2,
        ..k
    };
    let lane_copies = KernelShape {
        ring_bulk: false,
        ..k
    };
    // An f32 stage of 4 KB and its 8-byte mbarrier (bulk copies, the default).
    const F32_STAGE: usize = 4096 + 8;
    let tiles = KernelShape { ring_tiles: 4, ..k };
    // (d, f32, shared memory per block, shape, (warps, bytes)).
    let cases = [
        // Up to eight warps' rings of 4 × 4 KB beside the query (f32: two copies of it).
        (128, false, H100, k, Some((8, 8192 + 8 * 16384))),
        (1024, false, H100, k, Some((8, 65536 + 8 * 16384))),
        (768, true, H100, k, Some((8, 98304 + 8 * 4 * F32_STAGE))),
        (1024, true, H100, k, Some((6, 131072 + 6 * 4 * F32_STAGE))),
        (1024, false, RTX, k, Some((2, 65536 + 2 * 16384))),
        (1024, true, RTX, k, None),
        // Stages of 32 bytes per dimension below d = 128.
        (32, true, H100, k, Some((8, 4096 + 8 * 4 * (1024 + 8)))),
        (160, false, H100, k, None),
        // The experiment knobs size the block too.
        (768, false, H100, wide, Some((12, 49152 + 12 * 8192))),
        // Per-lane copies need no mbarrier.
        (128, true, H100, lane_copies, Some((8, 16384 + 8 * 16384))),
        // Four tiles per f16 stage double it (8 KB); f32 stages stay one tile.
        (768, false, H100, tiles, Some((5, 49152 + 5 * 32768))),
        (128, true, H100, tiles, Some((8, 16384 + 8 * 4 * F32_STAGE))),
    ];
    for (dim, f32, smem, shape, want) in cases {
        assert_eq!(
            ring_layout(dim, f32, smem, shape),
            want,
            "d = {dim}, f32 {f32}, {smem} bytes, {shape:?}"
        );
    }
    assert_eq!(ring_instance(96), Some(96));
    assert_eq!(ring_instance(640), Some(128));
    assert_eq!(ring_instance(160), None);
}

#[test]
fn filled_tiles_pad_at_most_two_fifths() {
    let fills = |o: &[usize]| DocLengths::of(o).fills_tiles();
    assert!(fills(&[0, 128, 256]));
    assert!(fills(&[0, 1024, 2048]));
    assert!(fills(&[0, 1024, 1124]));
    // 256 tile tokens hold 183 document tokens (39.9% more), not 182 or 130.
    assert!(fills(&[0, 183]));
    assert!(!fills(&[0, 182]));
    assert!(!fills(&[0, 130]));
    // 64 + 224 tokens in 384: 33% more.
    assert!(fills(&[0, 64, 288]));
    assert!(!fills(&[0, 32, 96]));
    assert!(!fills(&[0]));
    assert!(!fills(&[0, 0]));
}

#[test]
fn bulk_runs_hold_about_eight_tiles() {
    let run = |o: &[usize]| DocLengths::of(o).bulk_run(128, &Tuning::DEFAULT);
    assert_eq!(run(&[0, 128, 256, 384]), 8, "one tile a document");
    assert_eq!(run(&[0, 5, 9]), 8, "short documents");
    assert_eq!(run(&[0, 256, 512]), 4, "two tiles a document");
    assert_eq!(run(&[0, 129, 160]), 5, "1.5 tiles a document");
    assert_eq!(run(&[0, 3000]), 1, "long documents");
    assert_eq!(run(&[0]), 8, "no documents");
    assert_eq!(run(&[0, 0, 0]), 8, "empty documents");
    // Wide d: about four 128 x 128 tiles' worth of bytes.
    // On the H200 (DEFAULT) at least four documents at 32-token tiles (d <= 512), two past.
    let wide = |o: &[usize], d| DocLengths::of(o).bulk_run(d, &Tuning::DEFAULT);
    assert_eq!(wide(&[0, 128, 256], 256), 4);
    assert_eq!(wide(&[0, 2000], 512), 4);
    assert_eq!(wide(&[0, 128, 256], 768), 2);
    assert_eq!(wide(&[0, 40, 80], 256), 4);
    assert_eq!(wide(&[0, 2000], 1024), 2);
    // Lengths known only by their mean (borrowed device memory).
    assert_eq!(DocLengths::mean(3, 384).bulk_run(128, &Tuning::DEFAULT), 8);
    assert_eq!(DocLengths::mean(2, 512).bulk_run(128, &Tuning::DEFAULT), 4);
    assert!(DocLengths::mean(2, 256).fills_tiles());
    assert_eq!(DocLengths::mean(0, 0).bulk_run(128, &Tuning::DEFAULT), 8);
    // f32 planes: about 512 KB of tokens a run (128 tokens of 4d bytes).
    assert_eq!(planes_run(100_000 * 128 * 512, 100_000), 8);
    assert_eq!(planes_run(100_000 * 128 * 256, 100_000), 16);
    assert_eq!(planes_run(100_000 * 128 * 128, 100_000), 32);
    assert_eq!(
        planes_run(10 * 4 * 128, 10),
        64,
        "at most BULK_GROUP_RANGE's"
    );
    assert_eq!(planes_run(3 << 20, 1), 1, "at least one");
    assert_eq!(planes_run(0, 0), 1);
    // Runs shrink where the grid would not fill the device's resident slots.
    assert_eq!(bulk_group(100_000, 396, 8), 8);
    assert_eq!(bulk_group(10_000, 396, 8), 4, "six waves");
    assert_eq!(bulk_group(1000, 396, 8), 4, "at least four");
    assert_eq!(bulk_group(1000, 396, 2), 2);
    assert_eq!(bulk_group(100, 396, 1), 1);
    assert_eq!(bulk_group(0, 0, 0), 1);
}

#[test]
fn one_k16_product_where_the_last_chunk_holds_at_most_16_dimensions() {
    let half = |d| span_any_key(d).2;
    let halves: Vec<usize> = (1..=128).filter(|&d| half(d)).collect();
    let expect: Vec<usize> = (1..=96).filter(|d| (1..=16).contains(&(d % 32))).collect();
    assert_eq!(halves, expect);
    assert!(half(16) && half(48) && half(77) && half(80));
    assert!(!half(17) && !half(100) && !half(127));
    // Past 128: 16-byte rows only (the only rows instantiated with HALF there).
    assert!(half(136) && half(144) && half(200) && half(240));
    assert!(!half(129) && !half(152) && !half(250));
    // Every d from 1 to 255 has its instantiation; odd alignments past 128 read halves.
    let all = span_any_instances();
    for d in 1..SPAN_ANY_MAX_DIM {
        assert!(all.contains(&span_any_key(d)), "d = {d}");
    }
    assert_eq!(span_any_key(100), (4, 4, false));
    assert_eq!(span_any_key(126), (4, 2, false));
    assert_eq!(span_any_key(200), (7, 8, true));
    assert_eq!(span_any_key(204), (7, 1, false));
    assert_eq!(all.len(), 4 * 4 + 3 * 4 + 4 * 3);
    // Windows a warp as kernels/span.cu's SPAN_WLOG_OF compiles them: 128 tokens at one
    // k16 product, 64 at one or two chunks and at d = 96, 32 past; SPAN_WLOG fixes them.
    let w = |d| span_window_log(d, None);
    assert_eq!(
        [w(1), w(16), w(17), w(32), w(33), w(48), w(64)],
        [2, 2, 1, 1, 1, 1, 1]
    );
    assert_eq!(
        [w(77), w(80), w(96), w(100), w(127), w(128), w(200)],
        [0, 0, 1, 0, 0, 0, 0]
    );
    assert_eq!(span_window_log(77, Some(3)), 3);
    assert_eq!(span_tile(2), 512);
    assert_eq!(span_stage_halves(32, 1), 256 * 32);
    assert_eq!(
        span_stage_halves(16, 2),
        (512 * 16 + 8 + 32usize).div_ceil(64) * 64
    );
    assert_eq!(
        KernelShape::parse(Some("SPAN_WLOG=2")).unwrap().span_wlog,
        Some(2)
    );
    assert!(KernelShape::parse(Some("SPAN_WLOG=4")).is_err());
    // The run's offsets fit the launch's bound on documents per run.
    assert_eq!(SPAN_RUN_MAX, 64);
    assert_eq!(
        span_smem(2, 16, 0) - span_smem(1, 16, 0),
        span_stage_halves(16, 0) * 2 + 8
    );
}

#[test]
fn the_streaming_kernel_takes_16_byte_rows_up_to_64() {
    assert_eq!(STREAM_DIMS, [8, 16, 24, 32, 40, 48, 56, 64]);
    // By default below 64 only: d = 64 keeps the spanning kernel (plan/span.rs).
    let by_default: Vec<usize> = (0..=1024).filter(|&d| stream_by_default(d)).collect();
    assert_eq!(by_default, [8, 16, 24, 32, 40, 48, 56]);
}

#[test]
fn the_h100_takes_its_own_runs_and_stages() {
    assert_eq!(Tuning::for_device("NVIDIA H100 80GB HBM3"), Tuning::H100);
    assert_eq!(Tuning::for_device("NVIDIA H200"), Tuning::DEFAULT);
    assert_eq!(Tuning::for_device("NVIDIA A100-SXM4-80GB"), Tuning::DEFAULT);
    let h100 = Tuning::H100;
    // d <= 128: four tiles a run; wide d: one document where it is four tiles' worth.
    assert_eq!(DocLengths::of(&[0, 128, 256]).bulk_run(128, &h100), 4);
    assert_eq!(DocLengths::of(&[0, 128, 256]).bulk_run(768, &h100), 1);
    assert_eq!(DocLengths::of(&[0, 128, 256]).bulk_run(256, &h100), 2);
    // Spanning runs of about three tiles at d = 128 only (two documents at U[32,256]).
    let u = DocLengths::mean(100_000, 14_400_000);
    assert_eq!(u.span_run(128, 0, &h100), 2);
    assert_eq!(u.span_run(64, 0, &h100), 8);
    // Three stages only at 16-token wide tiles where two blocks still fit.
    let fits = |n| move |_| Ok(n);
    assert_eq!(bulk_stages(768, &h100, fits(2)).unwrap(), 3);
    assert_eq!(bulk_stages(1024, &h100, fits(1)).unwrap(), BULK_STAGES);
    assert_eq!(bulk_stages(256, &h100, fits(3)).unwrap(), BULK_STAGES);
    assert_eq!(
        bulk_stages(768, &Tuning::DEFAULT, fits(2)).unwrap(),
        BULK_STAGES
    );
    assert_eq!(bulk_stages(128, &h100, fits(4)).unwrap(), BULK_STAGES);
}

#[test]
fn spans_pay_where_tiles_would_be_partly_empty() {
    assert!(!DocLengths::of(&[0, 128, 256]).spans_pay(), "whole tiles");
    assert!(!DocLengths::of(&[0, 256, 384]).spans_pay(), "whole tiles");
    assert!(
        DocLengths::of(&[0, 128, 200]).spans_pay(),
        "one partial tile"
    );
    assert!(
        DocLengths::mean(100_000, 14_400_000).spans_pay(),
        "U[32,256]"
    );
    assert!(!DocLengths::mean(0, 0).spans_pay());
    // About nine tiles of tokens per block, 1 to 64 documents; 36 at 33 ≤ d < 128 but the
    // 16-byte rows from d = 80 on.
    let u = DocLengths::mean(100_000, 14_400_000);
    assert_eq!(u.span_run(128, 0, &Tuning::DEFAULT), 8);
    assert_eq!(u.span_run(16, 2, &Tuning::DEFAULT), 32);
    assert_eq!(u.span_run(64, 1, &Tuning::DEFAULT), 64);
    assert_eq!(u.span_run(100, 0, &Tuning::DEFAULT), 32);
    assert_eq!(u.span_run(72, 0, &Tuning::DEFAULT), 32);
    assert_eq!(u.span_run(80, 0, &Tuning::DEFAULT), 8);
    assert_eq!(u.span_run(96, 1, &Tuning::DEFAULT), 16);
    assert_eq!(u.span_run(136, 0, &Tuning::DEFAULT), 8);
    assert_eq!(
        DocLengths::mean(10, 10).span_run(128, 0, &Tuning::DEFAULT),
        64
    );
    assert_eq!(
        DocLengths::mean(1, 5000).span_run(128, 0, &Tuning::DEFAULT),
        1
    );
    assert_eq!(DocLengths::mean(0, 0).span_run(128, 0, &Tuning::DEFAULT), 1);
}

#[test]
fn kernel_defines_are_checked_once() {
    assert_eq!(KernelShape::parse(None).unwrap(), KernelShape::DEFAULT);
    let k = KernelShape::parse(Some("RING_WARPS=12, GEMM_STAGES=4,MMA_TILES=8")).unwrap();
    assert_eq!((k.ring_warps, k.gemm_stages, k.ring_stages), (12, 4, 4));
    const { assert!(KernelShape::DEFAULT.ring_bulk) };
    let k = KernelShape::parse(Some("RING_TILES=4,RING_BULK=0")).unwrap();
    assert_eq!((k.ring_tiles, k.ring_bulk), (4, false));
    for bad in [
        "RING_STAGES=9",
        "RING_WARPS=0",
        "GEMM_STAGES=x",
        "RING_TILES=5",
        "RING_BULK=3",
        "RING_BULK",
    ] {
        let e = KernelShape::parse(Some(bad)).unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}

#[test]
fn wide_dims_and_launch_limits() {
    assert!(wide_dim(256) && wide_dim(768) && wide_dim(1024));
    assert!(!wide_dim(128) && !wide_dim(200) && !wide_dim(1152));
    assert!(launch_size_ok(10, 10).is_ok());
    assert!(launch_size_ok(i32::MAX as usize + 1, 1).is_err());
}

#[test]
fn resident_grids_for_even_documents_from_eight_tasks_a_block() {
    let even = |docs| DocLengths::dense(docs, 128);
    let grid = |tasks: u64, dim| bulk_resident_grid(tasks, 396, &even(tasks as usize), dim);
    assert!(grid(10_000, 128));
    assert!(grid(3168, 128), "eight a block");
    assert!(!grid(3167, 128));
    assert!(!grid(1000, 128), "B = 1K: 2.5 a block");
    assert!(grid(25_344, 128), "64 a block");
    assert!(!grid(65 * 396, 128));
    assert!(!grid(100_000, 128), "B = 100K: 252 a block at d = 128");
    assert!(grid(100_000, 768), "wide d");
    assert!(
        bulk_resident_grid(8, 0, &even(8), 128),
        "no resident count: one block"
    );
    // Uneven or unknown lengths keep a block a run (the hardware balances them).
    let uneven = DocLengths::of(&[0, 32, 288, 320, 352]);
    assert!(!uneven.even());
    assert!(!bulk_resident_grid(10_000, 396, &uneven, 768));
    let unknown = DocLengths::mean(10_000, 1_280_000);
    assert!(!unknown.even() && !bulk_resident_grid(10_000, 396, &unknown, 128));
    assert!(
        DocLengths::of(&[0, 75, 200]).even(),
        "longest 1.25x the mean"
    );
    assert!(!DocLengths::of(&[0, 74, 200]).even());
    assert!(DocLengths::of(&[0]).even(), "no documents");
}

#[test]
fn stream_runs_give_a_warp_the_share_it_has_at_four_warps() {
    // Four warps a block: the spanning kernel's runs.
    for (tasks, resident, run) in [
        (100_000, 792, 64),
        (10_000, 792, 64),
        (7, 792, 3),
        (1, 1, 1),
    ] {
        assert_eq!(
            stream_group(tasks, resident, run, 4),
            bulk_group(tasks, resident, run)
        );
    }
    // One warp a block, four times the blocks at once: a quarter of the run, at least one.
    assert_eq!(bulk_group(100_000, 792, 64), 21);
    assert_eq!(stream_group(100_000, 4 * 792, 64, 1), 6);
    assert_eq!(stream_group(100_000, 2 * 792, 64, 2), 11);
    assert_eq!(stream_group(10_000, 4 * 792, 64, 1), 1);
    assert_eq!(stream_group(1, 4 * 792, 1, 1), 1);
    assert_eq!(STREAM_WARPS, 1);
}

#[test]
fn bulk_tail_blocks_take_one_task_each() {
    // 10K tasks in runs of 4, 396 blocks at once: two waves of one-task blocks at the end.
    assert_eq!(BULK_TAIL_WAVES, 1);
    assert_eq!(bulk_rows_tile(320), Some(32));
    assert_eq!(bulk_rows_tile(376), Some(64));
    assert_eq!(bulk_rows_tile(384), None);
    assert_eq!(bulk_rows_tile(200), None);
    assert_eq!(bulk_rows_tile(216), None);
    assert_eq!(bulk_rows_tile(224), Some(64));
    let (blocks, code) = bulk_tail(10_000, 4, 396, 2);
    let tail = code >> 8;
    assert_eq!(code & 0xff, 4);
    assert_eq!((10_000 - tail) % 4, 0);
    assert!((792..792 + 4).contains(&tail), "{tail}");
    assert_eq!(blocks, (10_000 - tail) / 4 + tail);
    // No tail: runs of the group, the last one short, as before.
    assert_eq!(bulk_tail(10_001, 4, 396, 0), (2501, 4));
    assert_eq!(bulk_tail(10_001, 1, 396, 2), (10_001, 1));
    // Runs of fewer than four waves: no tail (B = 1K in runs of four: 250 blocks).
    assert_eq!(bulk_tail(1_000, 4, 396, 1), (250, 4));
    assert_eq!(bulk_tail(6_335, 4, 396, 1), (1584, 4));
    assert!(bulk_tail(6_336, 4, 396, 1).1 > 0xff);
    // Bulk grids of every d ≤ 64 documents a run fit the argument's 8 bits.
    assert!(*BULK_GROUP_RANGE.end() < 256);
}

#[test]
fn padded_widths_land_on_a_fast_kernel() {
    // 16-bit: d not a multiple of 4 from 8 to 256, and not of 8 past it, to the next multiple of 8.
    for (d, want) in [
        (9, 16),
        (15, 16),
        (18, 24),
        (33, 40),
        (77, 80),
        (126, 128),
        (127, 128),
        (129, 136),
        (255, 256),
        (257, 264),
        (333, 336),
        (1017, 1024),
        (1023, 1024),
    ] {
        assert_eq!(stored_dim(d, false, true), want, "d = {d}");
    }
    // Left as they are: d < 8, multiples of 4 up to 256 and of 8 past it (260 pads), past 1024.
    for d in [
        1, 3, 7, 8, 12, 100, 128, 252, 256, 264, 768, 1024, 1025, 1031,
    ] {
        assert_eq!(stored_dim(d, false, true), d, "d = {d}");
    }
    // Every padded 16-bit width is one a tensor-core kernel takes on sm_90.
    for d in 1..=1024 {
        let p = stored_dim(d, false, true);
        assert!(p >= d && p < d + 8, "d = {d}: {p}");
        if p != d {
            assert!(
                p.is_multiple_of(8)
                    && (p <= SPAN_ANY_MAX_DIM || bulk_dim(p) || wide_any_bound(p).is_some()),
                "d = {d}: {p}"
            );
        }
    }
    // f32 in the split's range: the next tensor-core d, from 17 to 127; not outside the range.
    for (d, want) in [
        (17, 32),
        (27, 32),
        (33, 64),
        (77, 96),
        (100, 128),
        (127, 128),
    ] {
        assert_eq!(stored_dim(d, true, true), want, "f32 d = {d}");
        assert_eq!(stored_dim(d, true, false), d, "f32 d = {d}, out of range");
    }
    for d in [8, 16, 32, 64, 96, 128, 129, 200, 333] {
        assert_eq!(stored_dim(d, true, true), d, "f32 d = {d}");
    }
}

"""CUDA only (skipped elsewhere): work goes on torch's current stream and stays ordered with it,
results stay on the device, CUDA tensors with row strides and offsets are read in place, and a
call inside CUDA graph capture either works or raises clearly."""

from typing import Any

import numpy as np
import pytest
import torch

import tilemaxsim
from conftest import normalized, reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_scores_follow_the_current_stream(rng):
    Q, D = normalized(rng, 4, 32, 128, dtype=torch.float16), normalized(rng, 3000, 128, 128, dtype=torch.float16)
    Q, D = Q.cuda(), D.cuda()
    want = reference(Q, D)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # Written on the side stream just before scoring: the call must see it.
        D2 = D * 1.0
        out = tilemaxsim.maxsim(Q, D2)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    assert out.is_cuda and out.device == Q.device
    np.testing.assert_allclose(out.cpu().numpy(), want, atol=1e-3)


def test_strided_views_and_offsets_are_read_in_place(rng):
    base = normalized(rng, 6, 40, 256, dtype=torch.bfloat16).cuda()
    D = base[1:5, 3:30, :128]  # row stride 256, batch stride 40 * 256, offset into the buffer
    Q = normalized(rng, 2, 9, 128, dtype=torch.bfloat16).cuda()
    np.testing.assert_allclose(tilemaxsim.maxsim(Q, D).cpu().numpy(), reference(Q, D), atol=1e-3)


@pytest.mark.parametrize("doc_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale", [1e-7, 1.0, 1e6])
def test_float32_queries_on_16_bit_documents_stay_exact(rng, doc_dtype, scale):
    # f32 query tensors against f16/bf16 document tensors: split into 16-bit parts on the
    # tensor cores, at any magnitude (past f16's range and below its normal range), exact to
    # f32's bound of the float64 reference; odd-length documents, 1- to 32-token queries.
    D = normalized(rng, 50, 77, 128, dtype=doc_dtype).cuda()
    for lq in (1, 17, 32):
        Q = (normalized(rng, 3, lq, 128) * scale).cuda()
        want, size = reference(Q, D), reference(Q.abs(), D.abs())
        got = tilemaxsim.maxsim(Q, D).cpu().numpy().astype(np.float64)
        assert got.shape == want.shape and np.isfinite(got).all()
        assert (np.abs(got - want) <= 2 * (128 + lq + 2) * 2.0**-24 * size).all()


def _kernel(Q, D):
    # The engine's own call as tilemaxsim.maxsim makes it, for the name of the kernel that ran.
    from tilemaxsim import _native
    from tilemaxsim._arrays import dlpack, stream_of
    from tilemaxsim._split import split_checked

    out = torch.full((Q.shape[0], D.shape[0]), float("nan"), device="cuda")
    kernel = _native.score(dlpack(Q), None, dlpack(D), dlpack(out), split_checked=split_checked(D), stream=stream_of(Q))
    return kernel, out


def test_float32_documents_on_the_tensor_cores_once_checked(rng):
    # float32 CUDA documents: checked once for the split's range, then on the tensor cores
    # (sm_90, d = 128, queries of <= 32 tokens); out of range, or changed in place to leave it,
    # on the exact CUDA-core kernel. Every score within f32's bound of the float64 reference.
    sm90 = torch.cuda.get_device_capability()[0] >= 9
    D = normalized(rng, 60, 33, 128).cuda()
    Q = normalized(rng, 2, 32, 128).cuda()

    def exact(got, lq=32):
        want, size = reference(Q, D), reference(Q.abs(), D.abs())
        got = got.cpu().numpy().astype(np.float64)
        assert np.isfinite(got).all()
        assert (np.abs(got - want) <= 2 * (128 + lq + 2) * 2.0**-24 * size).all()

    kernel, out = _kernel(Q, D)
    assert kernel == ("maxsim_bulk" if sm90 else "maxsim_tiled")
    exact(out)
    exact(tilemaxsim.maxsim(Q, D))
    D.mul_(1e5)  # past 32768: the version counter moves, the check runs again
    kernel, out = _kernel(Q, D)
    assert kernel == "maxsim_tiled"
    exact(out)
    exact(tilemaxsim.maxsim(Q, D))
    D.mul_(1e-5)
    D[7, 3] = 1e-6  # a row of tiny values
    D[7, 3, 0] = 0.0
    assert _kernel(Q, D)[0] == "maxsim_tiled"
    exact(tilemaxsim.maxsim(Q, D))
    # Through the general path too (lengths), on the tensor cores where checked.
    lengths = torch.full((60,), 33, device="cuda", dtype=torch.int64)
    D[7, 3] = 0.5
    exact(tilemaxsim.maxsim(Q, D, doc_lengths=lengths))
    # A write through `.data` (which has a version counter of its own) leaves D's unchanged:
    # check=True checks again, and the row past 32768 goes to the CUDA-core kernel.
    D.data.view(-1)[5] = 1e6
    exact(tilemaxsim.maxsim(Q, D, check=True))


# A call that refuses to be captured leaves the graph empty, and torch warns about that on leaving
# the capture: expected here, not a failure.
@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty:UserWarning")
def test_graph_capture_works_or_raises_clearly(rng):
    Q, D = (
        normalized(rng, 1, 32, 128, dtype=torch.float16).cuda(),
        normalized(rng, 512, 128, 128, dtype=torch.float16).cuda(),
    )
    tilemaxsim.maxsim(Q, D)  # warm up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            out = tilemaxsim.maxsim(Q, D)
    except Exception as e:  # must be a Python exception naming the problem, never a crash
        assert "captur" in str(e).lower() or "graph" in str(e).lower(), e
        torch.cuda.synchronize()
        return
    g.replay()
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), reference(Q, D), atol=1e-3)


def test_corpus_resident_and_streamed_on_the_gpu_agree_with_topk(rng):
    docs = [normalized(rng, int(n), 64, dtype=torch.float16).cpu() for n in rng.integers(1, 90, size=500)]
    Q = normalized(rng, 3, 20, 64, dtype=torch.float16).cpu()
    lens = torch.tensor([d.shape[0] for d in docs])
    packed = torch.cat(docs)
    cu = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
    want_s, want_i = tilemaxsim.topk(Q.cuda(), packed.cuda(), 10, cu_seqlens=cu.cuda())
    for residency in ("resident", "stream"):
        corpus = tilemaxsim.Corpus.from_tensors(docs, device="cuda", residency=residency)
        assert corpus.device.startswith("cuda")
        s, i = corpus.search(Q, 10)
        assert i.tolist() == want_i.cpu().tolist(), residency
        np.testing.assert_allclose(s.numpy(), want_s.cpu().numpy(), atol=1e-4)


def _residual_index(rng, n_docs, dim, nbits, K, device):
    """A random PLAID residual index's tensors (1-token and long documents, colbert bit order)."""
    lens = [1] + [int(x) for x in rng.integers(1, 90, n_docs - 1)]
    T = sum(lens)
    cu = torch.tensor(np.cumsum([0, *lens]), dtype=torch.int32)
    cents = torch.nn.functional.normalize(torch.from_numpy(rng.standard_normal((K, dim))).float(), dim=-1).half()
    codes = torch.from_numpy(rng.integers(0, K, T)).to(torch.int64)
    res = torch.from_numpy(rng.integers(0, 256, (T, dim * nbits // 8)).astype(np.uint8))
    w = torch.from_numpy(np.sort(rng.standard_normal(2**nbits) * 0.05)).float()
    return [t.to(device) for t in (codes, res, cu, cents, w)]


def _residual_reference(Q, codes, res, cu, cents, w, nbits):
    """float64 MaxSim against PLAID's reconstruction normalize(centroid + weights[buckets])."""
    bits = np.unpackbits(res.cpu().numpy(), axis=1).reshape(res.shape[0], -1, nbits)
    buckets = sum(bits[..., b].astype(np.int64) << b for b in range(nbits))
    tok = cents.cpu().double().numpy()[codes.cpu().numpy()] + w.cpu().double().numpy()[buckets]
    tok /= np.maximum(np.linalg.norm(tok, axis=1, keepdims=True), 1e-12)
    q = Q.cpu().double().numpy()
    q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-12)
    cu = cu.cpu().numpy()
    return np.array([[np.max(qi @ tok[cu[j] : cu[j + 1]].T, axis=1).sum() for j in range(len(cu) - 1)] for qi in q])


@pytest.mark.parametrize(("dim", "nbits", "lq"), [(128, 2, 32), (128, 4, 45), (64, 1, 1), (96, 2, 7), (48, 2, 33)])
def test_maxsim_residual_scores_cuda_tensors_in_place(rng, dim, nbits, lq):
    """CUDA tensors are scored where they lie, on the current stream (a side stream here): equal
    to the float64 reference of PLAID's reconstruction (f16 queries), to the same tensors scored
    through host memory on the GPU, and to the CPU; int32/int64 ids alike; the native entry
    writes every score of a poisoned output."""
    codes, res, cu, cents, w = _residual_index(rng, 300, dim, nbits, 61, "cuda")
    Q = torch.from_numpy(rng.standard_normal((3, lq, dim))).to(torch.bfloat16).cuda()
    want = _residual_reference(Q, codes, res, cu, cents, w, nbits)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = tilemaxsim.maxsim_residual(Q, codes, res, cu, cents, w, nbits)
        unchecked = tilemaxsim.maxsim_residual(Q, codes.int(), res, cu, cents, w, nbits, check=False)
    side.synchronize()
    assert got.is_cuda and got.shape == (3, 300) and got.dtype == torch.float32
    np.testing.assert_allclose(got.cpu().numpy(), want, atol=lq * 2e-3)
    assert torch.equal(got, unchecked)
    hc, hr, hu, hn, hw = (t.cpu() for t in (codes, res, cu, cents, w))
    through_host = tilemaxsim.maxsim_residual(Q.cpu(), hc, hr, hu, hn, hw, nbits, device="cuda")
    # The same kernels; the queries normalized by torch on the GPU here, by numpy on the host
    # there, whose last bits differ, and a last-bit difference can move an element's f16
    # rounding by one step (at most 2^-10 of it): at most 2^-10 a unit row against unit
    # reconstructions, so lq * 2^-10 a score. Seen: up to 1.6e-5 at lq = 32 (the data is drawn
    # afresh each run; the 1e-5 this test asked before failed on some draws).
    np.testing.assert_allclose(got.cpu().numpy(), through_host.numpy(), atol=lq * 2**-10)
    cpu = tilemaxsim.maxsim_residual(Q.cpu(), hc, hr, hu, hn, hw, nbits)
    np.testing.assert_allclose(got.cpu().numpy(), cpu.numpy(), atol=lq * 2e-3)
    # One query alone: the same scores to the reconstruction's f16 rounding. From 4 query blocks
    # of 32 rows on (here at lq = 45: 6 blocks for three queries, 2 for one) the batched kernel
    # scores, which rounds each reconstruction to f16 as PLAID does; the one-warp kernel keeps it
    # in f32.
    single = tilemaxsim.maxsim_residual(Q[1], codes, res, cu, cents, w, nbits)
    np.testing.assert_allclose(single.cpu().numpy(), got[1].cpu().numpy(), atol=lq * 1e-3)

    from tilemaxsim import _native

    q = torch.nn.functional.normalize(Q.float(), dim=-1)
    out = torch.full((3, 300), float("nan"), device="cuda")
    _native.score_residual(q, res, codes.int(), cu.long(), cents, w, nbits, out)
    assert torch.equal(out, got)


def test_maxsim_residual_on_cuda_refuses_bad_input(rng):
    codes, res, cu, cents, w = _residual_index(rng, 20, 64, 2, 9, "cuda")
    Q = torch.randn(2, 5, 64, device="cuda")
    ok: dict[str, Any] = dict(
        codes_flat=codes, residuals_flat=res, cu_seqlens_d=cu, centroids=cents, bucket_weights=w, nbits=2
    )
    bad_codes = codes.clone()
    bad_codes[3] = 9
    neg = codes.clone()
    neg[0] = -1
    empty = cu.clone()
    empty[2] = empty[1]
    for bad, what in [
        (dict(codes_flat=bad_codes), "9 or more"),
        (dict(codes_flat=neg), "non-negative"),
        (dict(cu_seqlens_d=empty), "empty"),
        (dict(cu_seqlens_d=cu[:-1]), "ends at"),
        (dict(residuals_flat=res[:, :8]), "residuals_flat"),
        (dict(centroids=cents[:, :32]), "centroids"),
        (dict(bucket_weights=torch.tensor([0.0, float("nan"), 0.1, 0.2], device="cuda")), "finite"),
        (dict(bucket_weights=w.cpu()), "one device"),
        (dict(nbits=3), "nbits"),
    ]:
        kw: dict[str, Any] = {**ok, **bad}
        with pytest.raises((ValueError, TypeError)) as e:
            tilemaxsim.maxsim_residual(Q, **kw)
        assert what.lower() in str(e.value).lower(), (what, str(e.value))
    assert torch.isfinite(tilemaxsim.maxsim_residual(Q, **ok)).all()


def test_maxsim_residual_matches_late_interaction_kernels_on_the_gpu(rng):
    """Beside late-interaction-kernels' Triton kernel on the same tensors (its bit order: each
    byte reversed), where it is installed."""
    plaid = pytest.importorskip("late_interaction_kernels.plaid")
    rev = torch.tensor([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=torch.uint8, device="cuda")
    for nbits in (2, 4):
        codes, res, cu, cents, w = _residual_index(rng, 500, 128, nbits, 300, "cuda")
        Q = torch.nn.functional.normalize(torch.randn(4, 32, 128, device="cuda"), dim=-1).half()
        ours = tilemaxsim.maxsim_residual(Q, codes, res, cu, cents, w, nbits)
        lens = cu[1:] - cu[:-1]
        theirs = plaid.maxsim_residual_varlen(
            Q, codes.int(), rev[res.long()], cu, cents, w, nbits, max_seqlen_d=int(lens.max())
        )
        np.testing.assert_allclose(ours.cpu().numpy(), theirs.float().cpu().numpy(), atol=0.05)

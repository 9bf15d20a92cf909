"""Gradients of maxsim and maxsim_pairs against torch's own autograd of the einsum reference,
with masks and lengths."""

import numpy as np
import pytest
import torch

import tilemaxsim
from conftest import DEVICE, normalized


def torch_maxsim(Q, D, q_mask=None, d_valid=None, pairs=False):
    sims = torch.einsum("bid,bjd->bij" if pairs else "aid,bjd->abij", Q.float(), D.float())
    if d_valid is not None:
        sims = sims.masked_fill(~(d_valid[:, None, :] if pairs else d_valid[None, :, None, :]), float("-inf"))
    best = sims.max(dim=-1).values
    if q_mask is not None:
        best = best * (q_mask.float() if pairs else q_mask.float()[:, None, :])
    return best.sum(dim=-1)


@pytest.mark.parametrize("pairs", [False, True])
def test_gradients_match_torch_autograd(rng, pairs):
    b = 5
    a = b if pairs else 3
    Q = normalized(rng, a, 7, 24).requires_grad_()
    D = normalized(rng, b, 11, 24).requires_grad_()
    lengths = torch.tensor([11, 1, 4, 9, 6], device=DEVICE)
    q_mask = torch.from_numpy(rng.random((a, 7)) < 0.8).to(DEVICE)
    f = tilemaxsim.maxsim_pairs if pairs else tilemaxsim.maxsim
    got = f(Q, D, q_mask=q_mask, doc_lengths=lengths)
    g = torch.from_numpy(rng.standard_normal(tuple(got.shape))).float().to(DEVICE)
    dQ, dD = torch.autograd.grad(got, (Q, D), g)
    valid = torch.arange(11, device=DEVICE)[None, :] < lengths[:, None]
    want = torch_maxsim(Q, D, q_mask, valid, pairs)
    wQ, wD = torch.autograd.grad(want, (Q, D), g)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(dQ.cpu().numpy(), wQ.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(dD.cpu().numpy(), wD.cpu().numpy(), atol=1e-5)


def test_no_grad_when_nothing_requires_it(rng):
    Q, D = normalized(rng, 2, 3, 8), normalized(rng, 2, 4, 8)
    assert not tilemaxsim.maxsim(Q, D).requires_grad


# Shapes for the training path (the engine's training kernels on CUDA f16/bf16, torch elsewhere):
# (A, Lq, B, Ld, d). Odd token counts, one-token queries and documents, queries past 32 tokens
# (the kernels' 32-row chunks), documents past 192 rows (dD's shared-memory chunks at d = 128),
# d from 8 to 128.
TRAIN_SHAPES = [
    (3, 7, 5, 11, 24),
    (4, 32, 6, 180, 128),
    (2, 1, 3, 1, 8),
    (3, 45, 4, 9, 64),
    (2, 70, 3, 300, 128),
    (5, 13, 7, 33, 40),
    (1, 31, 9, 17, 96),
]


@pytest.fixture
def poisoned(monkeypatch):
    """Outputs of the training kernels filled with NaN (and argmax with a wild index) first, so
    an element a kernel never wrote fails the comparison."""
    from tilemaxsim import _autograd

    def empty(shape, *, dtype, device):
        t = torch.empty(shape, dtype=dtype, device=device)
        return t.fill_(float("nan") if dtype.is_floating_point else 2**30)

    monkeypatch.setattr(_autograd, "_empty", empty)


def float64_grads(Q, D, g, valid, mode):
    """Scores and (dQ, dD) by torch autograd in float64 over the inputs' own values. mode:
    "all" ([A, B]), "pairs" ([B]) or "kd" (D [A, K, Ld, d], [A, K]); `valid`: D's token mask."""
    q = Q.detach().double().requires_grad_()
    d = D.detach().double().requires_grad_()
    if mode == "all":
        sims = torch.einsum("aid,bjd->abij", q, d).masked_fill(~valid[None, :, None, :], float("-inf"))
    elif mode == "pairs":
        sims = torch.einsum("bid,bjd->bij", q, d).masked_fill(~valid[:, None, :], float("-inf"))
    else:
        sims = torch.einsum("aid,akjd->akij", q, d).masked_fill(~valid[:, :, None, :], float("-inf"))
    s = sims.max(dim=-1).values.sum(dim=-1)
    dq, dd = torch.autograd.grad(s, (q, d), g.double())
    return s, dq, dd, nearest_tie(sims)


# Two document tokens closer than this in float64 similarity are a tie for the gradients: the
# engine's float32 sums may pick either (its gradient is then the other's, both right), where
# float64 autograd picks one. Seen once in 40,000 draws of (5, 13, 7, 33, 40) in float16: 2e-8.
TIE = 1e-6


def nearest_tie(sims):
    """The smallest gap, over every max of `sims` (last axis), between its best and second-best
    similarity (inf where a max has one candidate)."""
    if sims.shape[-1] < 2:
        return float("inf")
    top = sims.detach().topk(2, dim=-1).values
    return float((top[..., 0] - top[..., 1]).min())


def assert_close(got, want, what, rel):
    got, want = got.detach().double().cpu(), want.detach().cpu()
    assert torch.isfinite(got).all(), f"{what}: non-finite values (an unwritten element?)"
    scale = max(1.0, float(want.abs().max()))
    err = float((got - want).abs().max())
    assert err <= rel * scale, f"{what}: max |error| {err:.3g} against {rel * scale:.3g}"


# ids=str: "torch.bfloat16", so `-k bfloat16` picks them (bench/train_gpu.sh's sanitizer runs).
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", TRAIN_SHAPES)
@pytest.mark.parametrize("mode", ["all", "pairs", "kd", "packed", "packed_all", "holes"])
def test_training_gradients_match_float64_autograd(rng, poisoned, dtype, shape, mode):
    A, Lq, B, Ld, d = shape
    if mode in ("pairs", "packed"):
        B = A
    # Inputs are drawn again (a few times at most) while two document tokens tie for a max.
    for _ in range(8):
        lengths = torch.from_numpy(rng.integers(1, Ld + 1, size=B)).to(DEVICE)
        lengths[0] = Ld
        Q = normalized(rng, A, Lq, d, dtype=dtype).requires_grad_()
        if mode == "kd":
            K = max(1, B // A)
            D = normalized(rng, A, K, Ld, d, dtype=dtype).requires_grad_()
            got = tilemaxsim.maxsim(Q, D)
            valid = torch.ones((A, K, Ld), dtype=torch.bool, device=DEVICE)
            ref_mode, Dref = "kd", D
        elif mode in ("packed", "packed_all"):
            cu = torch.cat([torch.zeros(1, dtype=torch.int64, device=DEVICE), lengths.cumsum(0)])
            D = normalized(rng, int(cu[-1]), d, dtype=dtype).requires_grad_()
            f = tilemaxsim.maxsim_pairs if mode == "packed" else tilemaxsim.maxsim
            got = f(Q, D, cu_seqlens=cu)
            # The float64 twin: the same rows padded (autograd through the padding gather).
            rows = (cu[:-1, None] + torch.arange(Ld, device=DEVICE)[None, :]).clamp(max=int(cu[-1]) - 1)
            valid = torch.arange(Ld, device=DEVICE)[None, :] < lengths[:, None]
            ref_mode, Dref = "pairs", D
        else:
            D = normalized(rng, B, Ld, d, dtype=dtype).requires_grad_()
            valid = torch.arange(Ld, device=DEVICE)[None, :] < lengths[:, None]
            if mode == "holes":
                valid = torch.from_numpy(rng.random((B, Ld)) < 0.7).to(DEVICE)
                valid[:, 0] = True
                got = tilemaxsim.maxsim(Q, D, d_mask=valid)
                ref_mode = "all"
            else:
                f = tilemaxsim.maxsim_pairs if mode == "pairs" else tilemaxsim.maxsim
                got = f(Q, D, doc_lengths=lengths)
                ref_mode = mode
            Dref = D
        g = torch.from_numpy(rng.standard_normal(tuple(got.shape))).float().to(DEVICE)
        dQ, dD = torch.autograd.grad(got, (Q, D), g)
        if mode in ("packed", "packed_all"):
            q = Q.detach().double().requires_grad_()
            dp = D.detach().double().requires_grad_()
            padded = dp[rows]
            if mode == "packed":
                sims = torch.einsum("bid,bjd->bij", q, padded).masked_fill(~valid[:, None, :], float("-inf"))
            else:
                sims = torch.einsum("aid,bjd->abij", q, padded).masked_fill(~valid[None, :, None, :], float("-inf"))
            want = sims.max(dim=-1).values.sum(dim=-1)
            wQ, wD = torch.autograd.grad(want, (q, dp), g.double())
            tie = nearest_tie(sims)
        else:
            want, wQ, wD, tie = float64_grads(Q, Dref, g, valid, ref_mode)
        if tie > TIE:
            break
    assert tie > TIE, f"eight draws with a tie (gap {tie:.2g})"
    assert got.shape == want.shape and dQ.shape == Q.shape and dD.shape == D.shape
    assert dQ.dtype == Q.dtype and dD.dtype == D.dtype
    # Scores: exact products summed in float32. Gradients: float32 sums rounded to the inputs'
    # dtype once.
    assert_close(got, want, "scores", 1e-5 * Lq)
    rel = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 8e-3}[dtype]
    assert_close(dQ, wQ, "dQ", rel)
    assert_close(dD, wD, "dD", rel)


def test_training_gradients_reach_only_the_inputs_that_want_them(rng):
    Q = normalized(rng, 3, 5, 16, dtype=torch.bfloat16).requires_grad_()
    D = normalized(rng, 4, 9, 16, dtype=torch.bfloat16)
    s = tilemaxsim.maxsim(Q, D)
    (dQ,) = torch.autograd.grad(s.sum(), (Q,))
    want = float64_grads(Q, D, torch.ones_like(s), torch.ones((4, 9), dtype=torch.bool, device=DEVICE), "all")[1]
    assert_close(dQ, want, "dQ", 8e-3)
    assert D.grad is None


def test_distillation_layout_needs_one_query_per_row(rng):
    Q = normalized(rng, 2, 5, 16)
    D = normalized(rng, 3, 4, 9, 16)
    with pytest.raises(ValueError, match="queries for documents"):
        tilemaxsim.maxsim(Q, D)


@pytest.mark.parametrize("pairs", [False, True])
def test_float32_argmax_by_float16_parts_is_float64s(rng, pairs):
    """The float32 argmax through float16 parts (`_autograd._split_queries`, on CUDA by default;
    here on either device) picks float64's best token wherever the best two are apart by more
    than 2^-18 of |q| times the document's largest |d|, and its best similarities (the scores'
    terms) are float64's to 2^-19 of that: query rows scaled from 2^-140 to 2^40, document tokens from
    2^-10 to 2^10, lengths cut short. (A high part alone is off by about 2^-11.)"""
    from tilemaxsim import _autograd

    A, Lq, B, Ld, d = (5, 9, 5, 23, 40) if pairs else (3, 9, 6, 23, 40)
    scale = 2.0 ** rng.integers(-140, 41, size=(A, Lq, 1))  # down to float32's subnormals
    Q = (torch.from_numpy(normalized(rng, A, Lq, d).double().cpu().numpy() * scale)).float().to(DEVICE)
    D = normalized(rng, B, Ld, d) * torch.from_numpy(2.0 ** rng.integers(-10, 11, size=(B, Ld, 1))).float().to(DEVICE)
    lengths = torch.from_numpy(rng.integers(1, Ld + 1, size=B)).to(DEVICE)
    arg, best = _autograd._best(Q, D, lengths, pairs, split=True)
    q, dd = Q.double().cpu(), D.double().cpu()
    sims = torch.einsum("bid,bjd->bij" if pairs else "aid,bjd->abij", q, dd)
    valid = torch.arange(Ld)[None, :] < lengths.cpu()[:, None]
    sims = sims.masked_fill(~(valid[:, None, :] if pairs else valid[None, :, None, :]), float("-inf"))
    top = sims.topk(min(2, Ld), dim=-1)
    # Each max's natural scale: |q| times the document's largest |d| (Cauchy-Schwarz).
    qn, dn = q.norm(dim=-1), (dd.norm(dim=-1) * valid).amax(dim=-1)
    scale = qn * dn[:, None] if pairs else qn[:, None, :] * dn[None, :, None]
    # (a document of one token: its gap is inf, its argmax 0 either way)
    apart = (top.values[..., 0] - top.values[..., -1]) / scale > 2.0**-18  # [B, Lq] or [A, B, Lq]
    assert apart.float().mean() > 0.5  # (subnormal query rows tie often)
    assert torch.equal(arg.long().cpu()[apart], top.indices[..., 0][apart])
    # (maxima below float32's normal range are themselves rounded to fewer bits)
    err = ((best.double().cpu() - top.values[..., 0]).abs() / scale)[scale > 2.0**-100]
    assert float(err.max()) < 2.0**-19


def test_torch_path_in_chunks_of_one_document_is_the_same(rng, monkeypatch):
    """The torch path's argmax and gradients (float32: no training kernel) with every document a
    chunk of its own equal those of one chunk."""
    from tilemaxsim import _autograd

    Q = normalized(rng, 3, 7, 24).requires_grad_()
    D = normalized(rng, 5, 11, 24).requires_grad_()
    lengths = torch.tensor([11, 1, 4, 9, 6], device=DEVICE)
    g = torch.from_numpy(rng.standard_normal((3, 5))).float().to(DEVICE)
    whole = torch.autograd.grad(tilemaxsim.maxsim(Q, D, doc_lengths=lengths), (Q, D), g)
    monkeypatch.setattr(_autograd, "_BLOCK_BYTES", 1)
    chunked = torch.autograd.grad(tilemaxsim.maxsim(Q, D, doc_lengths=lengths), (Q, D), g)
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", ["all", "pairs"])
def test_float32_training_through_float16_parts_matches_float64_autograd(rng, monkeypatch, mode):
    """float32 scores and gradients with the argmax and scores from the float16 parts (CUDA's
    torch path for float32; forced here on either device) against float64 autograd."""
    from tilemaxsim import _autograd

    monkeypatch.setattr(_autograd, "_split_ok", lambda Q, D, check: True)
    A, Lq, B, Ld, d = (4, 13, 4, 33, 40) if mode == "pairs" else (3, 13, 6, 33, 40)
    for _ in range(8):
        Q = normalized(rng, A, Lq, d).requires_grad_()
        D = normalized(rng, B, Ld, d).requires_grad_()
        lengths = torch.from_numpy(rng.integers(1, Ld + 1, size=B)).to(DEVICE)
        f = tilemaxsim.maxsim_pairs if mode == "pairs" else tilemaxsim.maxsim
        got = f(Q, D, doc_lengths=lengths)
        g = torch.from_numpy(rng.standard_normal(tuple(got.shape))).float().to(DEVICE)
        dQ, dD = torch.autograd.grad(got, (Q, D), g)
        valid = torch.arange(Ld, device=DEVICE)[None, :] < lengths[:, None]
        want, wQ, wD, tie = float64_grads(Q, D, g, valid, mode)
        if tie > TIE:
            break
    assert tie > TIE, f"eight draws with a tie (gap {tie:.2g})"
    assert_close(got, want, "scores", 1e-5 * Lq)
    assert_close(dQ, wQ, "dQ", 1e-5)
    assert_close(dD, wD, "dD", 1e-5)


def powers_of_two(rng, shape, lo, hi):
    """float32 `shape` of powers of two 2^lo .. 2^hi on DEVICE."""
    return torch.from_numpy(2.0 ** rng.integers(lo, hi + 1, size=shape)).float().to(DEVICE)


@pytest.mark.skipif(DEVICE != "cuda", reason="the training kernels are CUDA's")
@pytest.mark.parametrize("mode", ["all", "pairs", "kd", "packed_all"])
def test_float32_training_kernels_with_rows_of_every_scale(rng, poisoned, monkeypatch, mode):
    """float32 on the training kernels (each query row scaled by its own power of two, then both
    sides split into float16 parts; never the torch path here) with query rows scaled 2^-120 to
    2^40 and document tokens 2^-8 to 2^10 (rows in the split range), against float64 autograd:
    the argmax of every row, tiny ones included, shows in dQ, whose rows are document tokens."""
    from tilemaxsim import _autograd

    def torch_path(*args):
        raise AssertionError("float32 took the torch path")

    monkeypatch.setattr(_autograd.MaxSim, "apply", torch_path)
    A, Lq, Ld, d = 3, 37, 45, 72
    B, K = (A, 1) if mode == "pairs" else (6, 2)
    shape = {"kd": (A, K, Ld, d), "packed_all": (B * Ld, d)}.get(mode, (B, Ld, d))
    ref_mode = {"packed_all": "all"}.get(mode, mode)
    for _ in range(8):
        Q = (normalized(rng, A, Lq, d) * powers_of_two(rng, (A, Lq, 1), -120, 40)).requires_grad_()
        D = (normalized(rng, *shape) * powers_of_two(rng, shape[:-1] + (1,), -8, 10)).requires_grad_()
        if mode == "packed_all":
            got = tilemaxsim.maxsim(Q, D, cu_seqlens=torch.arange(B + 1, device=DEVICE) * Ld)
        else:
            got = (tilemaxsim.maxsim_pairs if mode == "pairs" else tilemaxsim.maxsim)(Q, D)
        Dref = D.view(B, Ld, d) if mode == "packed_all" else D
        g = torch.from_numpy(rng.standard_normal(tuple(got.shape))).float().to(DEVICE)
        dQ, dD = torch.autograd.grad(got, (Q, D), g)
        valid = torch.ones(Dref.shape[:-1], dtype=torch.bool, device=DEVICE)
        want, wQ, wD, _ = float64_grads(Q, Dref, g, valid, ref_mode)
        # Ties relative to each max's own size (the rows' scales differ by 2^160).
        eq = {"all": "aid,bjd->abij", "pairs": "bid,bjd->bij", "kd": "aid,akjd->akij"}[ref_mode]
        top = torch.einsum(eq, Q.detach().double(), Dref.detach().double()).topk(2, dim=-1).values
        if float(((top[..., 0] - top[..., 1]) / top[..., 0].abs()).min()) > 1e-5:
            break
    else:
        pytest.fail("eight draws with a relative tie")
    assert dQ.dtype == torch.float32 and dD.dtype == torch.float32
    torch.testing.assert_close(got.detach().double(), want.detach(), rtol=1e-5, atol=0)
    torch.testing.assert_close(dQ.double(), wQ, rtol=1e-5, atol=1e-5 * float(wQ.abs().max()))
    torch.testing.assert_close(dD.double().view(wD.shape), wD, rtol=1e-5, atol=1e-5 * float(wD.abs().max()))


@pytest.mark.skipif(DEVICE != "cuda", reason="the training kernels are CUDA's")
@pytest.mark.parametrize("mode", ["pairs", "kd"])
def test_float32_gradient_free_pairs_take_the_training_forward(rng, monkeypatch, mode):
    """float32 pairs and the distillation layout with no gradient are scored by the training
    forward over float16 parts (`_api._by_group` -> `pair_scores`; the engine's pairs path
    patched to fail), to the split's precision against float64, with query rows scaled 2^-60 to
    2^30 and document tokens 2^-8 to 2^10."""
    from tilemaxsim import _api

    def engine(*args, **kwargs):
        raise AssertionError("float32 took the engine's pairs path")

    monkeypatch.setattr(_api, "_run", engine)
    A, K, Lq, Ld, d = 4, 3, 37, 45, 104
    Q = normalized(rng, A, Lq, d) * powers_of_two(rng, (A, Lq, 1), -60, 30)
    if mode == "pairs":
        D = normalized(rng, A, Ld, d) * powers_of_two(rng, (A, Ld, 1), -8, 10)
        got = tilemaxsim.maxsim_pairs(Q, D)
        sims = torch.einsum("bid,bjd->bij", Q.double(), D.double())
    else:
        D = normalized(rng, A, K, Ld, d) * powers_of_two(rng, (A, K, Ld, 1), -8, 10)
        got = tilemaxsim.maxsim(Q, D)
        sims = torch.einsum("aid,akjd->akij", Q.double(), D.double())
    want = sims.max(-1).values.sum(-1)
    assert got.dtype == torch.float32 and tuple(got.shape) == tuple(want.shape)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=0)


@pytest.mark.skipif(DEVICE != "cuda", reason="the float16 parts are CUDA's path")
def test_float32_cuda_training_takes_the_parts_and_check_looks_again(rng):
    """float32 CUDA tensors in the split's range take the training kernels' float16 parts;
    `check=True` checks the documents' range again, so a write the version counter misses
    (through `.data`) sends them back to the engine's exact path instead of overflowing
    float16."""
    from tilemaxsim import _autograd

    Q = normalized(rng, 3, 7, 32).requires_grad_()
    D = normalized(rng, 4, 9, 32).requires_grad_()
    assert _autograd._split_ok(Q, D, False)
    tilemaxsim.maxsim(Q, D)  # the range answer is kept for D
    D.data[1, 2, 3] = 1e6  # past float16's range; D._version does not move
    got = tilemaxsim.maxsim(Q, D, check=True)
    want = torch.einsum("aid,bjd->abij", Q.double(), D.double()).max(dim=-1).values.sum(dim=-1)
    torch.testing.assert_close(got.detach().double(), want.detach(), rtol=1e-6, atol=1e-4)

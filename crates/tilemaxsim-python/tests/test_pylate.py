"""The PyLate drop-in against PyLate's own functions (pylate 1.6.0, its torch path), on the test
device: shapes, dtypes (float64 too), masks with holes, empty inputs, strides, NaN, backend
resolution, gradients, and PyLate's loss modules (Contrastive, CachedContrastive,
Distillation) driven by a small stand-in model, patched against unpatched."""

import numpy as np
import pytest
import torch

from conftest import DEVICE, normalized
from tilemaxsim.integrations import pylate as dropin

pylate_scores = pytest.importorskip("pylate.scores")
TOL = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 3e-2, torch.bfloat16: 1e-1}


def _theirs(fn, *args, **kw):
    """PyLate's own function on its torch path (the reference the drop-in must follow)."""
    return getattr(pylate_scores, fn)(*args, backend="torch", **kw)


def _ours(fn, *args, **kw):
    return getattr(dropin, fn)(*args, **kw)


def _close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device
    np.testing.assert_allclose(
        got.double().cpu().numpy(), want.double().cpu().numpy(), atol=TOL[dtype], rtol=TOL[dtype]
    )


def _mask(rng, *shape, kind=torch.float32):
    m = torch.from_numpy(rng.random(shape) < 0.7).to(DEVICE)
    return m if kind == torch.bool else m.to(kind)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_colbert_scores_follow_pylate(rng, dtype):
    if DEVICE == "cpu" and dtype == torch.float16:
        pytest.skip("PyLate's einsum in float16 on the CPU is not in torch")
    A, B, Lq, Ld, d = 4, 6, int(rng.integers(1, 12)), int(rng.integers(1, 40)), int(rng.choice([7, 32, 77]))
    Q, D = normalized(rng, A, Lq, d, dtype=dtype), normalized(rng, B, Ld, d, dtype=dtype)
    for qm, dm in [(None, None), (_mask(rng, A, Lq), _mask(rng, B, Ld)), (None, _mask(rng, B, Ld, kind=torch.bool))]:
        if dm is not None:
            dm[0] = 0  # a fully masked document: every query token takes a similarity of 0
        _close(_ours("colbert_scores", Q, D, qm, dm), _theirs("colbert_scores", Q, D, qm, dm), dtype)


def test_kd_and_pairwise_follow_pylate(rng):
    Q, D = normalized(rng, 3, 5, 16), normalized(rng, 3, 4, 9, 16)
    qm, dm = _mask(rng, 3, 5), _mask(rng, 3, 4, 9)
    _close(_ours("colbert_kd_scores", Q, D, qm, dm), _theirs("colbert_kd_scores", Q, D, qm, dm), torch.float32)
    _close(_ours("colbert_kd_scores", Q, D), _theirs("colbert_kd_scores", Q, D), torch.float32)
    # Ragged lists, zipped to the shorter one, as PyLate does.
    qs = [normalized(rng, int(n), 16) for n in (3, 7, 1)]
    ds = [normalized(rng, int(n), 16) for n in (5, 1, 9, 2)]
    _close(_ours("colbert_scores_pairwise", qs, ds), _theirs("colbert_scores_pairwise", qs, ds), torch.float32)
    Qp, Dp = normalized(rng, 4, 6, 16), normalized(rng, 4, 8, 16)
    _close(_ours("colbert_scores_pairwise", Qp, Dp), _theirs("colbert_scores_pairwise", Qp, Dp), torch.float32)
    # numpy arrays and lists, as PyLate's convert_to_tensor takes them.
    Qn, Dn = Q.cpu().numpy(), D[:, 0].cpu().numpy()
    _close(_ours("colbert_scores", list(Qn), Dn), _theirs("colbert_scores", list(Qn), Dn), torch.float32)


def test_empty_inputs_follow_pylate(rng):
    Q, D = normalized(rng, 3, 4, 8), normalized(rng, 5, 6, 8)
    Dk = normalized(rng, 3, 2, 6, 8)
    cases = [
        ("colbert_scores", (Q[:0], D)),
        ("colbert_scores", (Q, D[:0])),
        ("colbert_scores", (Q[:, :0], D)),
        ("colbert_scores", (Q[:0], D[:0])),
        ("colbert_kd_scores", (Q[:0], Dk[:0])),
        ("colbert_kd_scores", (Q, Dk[:, :0])),
        ("colbert_kd_scores", (Q[:, :0], Dk)),
    ]
    for fn, args in cases:
        _close(_ours(fn, *args), _theirs(fn, *args), torch.float32)
    # No document tokens: PyLate's max over an empty axis raises, and so do we.
    for fn, args in [("colbert_scores", (Q, D[:, :0])), ("colbert_kd_scores", (Q, Dk[:, :, :0]))]:
        with pytest.raises((IndexError, RuntimeError)):
            _theirs(fn, *args)
        with pytest.raises(ValueError, match="no document tokens"):
            _ours(fn, *args)


def test_any_strides(rng):
    Q = normalized(rng, 3, 16, 5).transpose(1, 2)  # [3, 5, 16], stride 1 along Lq, not d
    D = normalized(rng, 16, 4, 7).permute(1, 2, 0)  # [4, 7, 16], stride along d = 28
    assert Q.stride(-1) != 1 and D.stride(-1) != 1
    dm = _mask(rng, 7, 4).t()  # a transposed mask; E * mask keeps E's strides
    _close(_ours("colbert_scores", Q, D, None, dm), _theirs("colbert_scores", Q, D, None, dm), torch.float32)
    Dk = normalized(rng, 16, 3, 2, 7).permute(1, 2, 3, 0)
    _close(_ours("colbert_kd_scores", Q, Dk), _theirs("colbert_kd_scores", Q, Dk), torch.float32)
    _close(_ours("colbert_scores_pairwise", Q, D[:3]), _theirs("colbert_scores_pairwise", Q, D[:3]), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nan_follows_pylate(rng, dtype):
    Q, D = normalized(rng, 4, 6, 16, dtype=dtype), normalized(rng, 5, 9, 16, dtype=dtype)
    qm, dm = _mask(rng, 4, 6), _mask(rng, 5, 9)
    Q[1, 2, 3] = float("nan")
    qm[2] = 1
    qm[2, 4] = 0
    Q[2, 4, 0] = float("nan")  # a masked query token: NaN × 0 is NaN in PyLate
    D[3, 8, 5] = float("nan")
    dm[3, 8] = 0  # a masked document token, NaN all the same
    want = _theirs("colbert_scores", Q, D, qm, dm)
    got = _ours("colbert_scores", Q, D, qm, dm)
    assert torch.equal(torch.isnan(got), torch.isnan(want)), (got, want)
    assert torch.isnan(want[1]).all() and torch.isnan(want[2]).all() and torch.isnan(want[:, 3]).all()
    finite = ~torch.isnan(want)
    np.testing.assert_allclose(
        got[finite].double().cpu().numpy(), want[finite].double().cpu().numpy(), atol=TOL[dtype], rtol=TOL[dtype]
    )


def test_backend_resolved_as_pylate(rng, monkeypatch):
    Q, D = normalized(rng, 2, 3, 8), normalized(rng, 3, 4, 8)
    for fn, args in [
        ("colbert_scores", (Q, D)),
        ("colbert_kd_scores", (Q, D[None].expand(2, -1, -1, -1))),
        ("colbert_scores_pairwise", (Q, D[:2])),
    ]:
        with pytest.raises(ValueError, match="backend must be one of"):
            _ours(fn, *args, backend="nope")
        monkeypatch.setenv("PYLATE_SCORES_BACKEND", "nope")
        with pytest.raises(ValueError, match="backend must be one of"):
            _ours(fn, *args)
        monkeypatch.setenv("PYLATE_SCORES_BACKEND", "TORCH")
        # An explicit backend is PyLate's own: the torch path, bit for bit.
        assert torch.equal(_ours(fn, *args), _theirs(fn, *args))
        monkeypatch.delenv("PYLATE_SCORES_BACKEND")
        if DEVICE == "cpu":
            for name, match in [("lik", "CUDA or MPS"), ("flash", "CUDA")]:
                with pytest.raises(RuntimeError, match=match):
                    _ours(fn, *args, backend=name)


def test_gradients_follow_pylate(rng):
    Q0, D0 = normalized(rng, 4, 6, 24), normalized(rng, 5, 11, 24)
    qm, dm = _mask(rng, 4, 6), _mask(rng, 5, 11)
    g = torch.from_numpy(rng.standard_normal((4, 5))).float().to(DEVICE)
    grads = []
    for fn in (_ours, _theirs):
        Q, D = Q0.clone().requires_grad_(), D0.clone().requires_grad_()
        grads.append(torch.autograd.grad(fn("colbert_scores", Q, D, qm, dm), (Q, D), g))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got.cpu().numpy(), want.cpu().numpy(), atol=1e-5)


def test_bf16_gradients_follow_the_forward(rng):
    """The argmax behind the gradient comes from float32-accumulated similarities, as the
    scores do: dQ of bf16 inputs against float64 autograd on the same (bf16-rounded) values."""
    Q = normalized(rng, 8, 32, 128, dtype=torch.bfloat16).requires_grad_()
    D = normalized(rng, 16, 60, 128, dtype=torch.bfloat16).requires_grad_()
    dQ, dD = torch.autograd.grad(_ours("colbert_scores", Q, D).sum(), (Q, D))
    Q64, D64 = Q.detach().double().requires_grad_(), D.detach().double().requires_grad_()
    wQ, wD = torch.autograd.grad(_theirs("colbert_scores", Q64, D64).sum(), (Q64, D64))
    for got, want in ((dQ, wQ), (dD, wD)):
        err = (got.double() - want).norm() / want.norm()
        assert err < 0.01, f"relative gradient error {err:.4f}"


def test_float64_gradcheck(rng):
    Q = normalized(rng, 2, 3, 5, dtype=torch.float64).requires_grad_()
    D = normalized(rng, 3, 4, 5, dtype=torch.float64).requires_grad_()
    qm, dm = _mask(rng, 2, 3), _mask(rng, 3, 4)
    assert torch.autograd.gradcheck(lambda q, d: dropin.colbert_scores(q, d, qm, dm), (Q, D))
    Dk = normalized(rng, 2, 2, 4, 5, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda q, d: dropin.colbert_kd_scores(q, d), (Q, Dk))


class StandIn(torch.nn.Module):
    """A small model with the interface PyLate's losses use: `model(features)` returns
    `token_embeddings` `[batch, tokens, dim]`, and it has `skiplist` and `do_query_expansion`."""

    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, 24)
        self.proj = torch.nn.Linear(24, dim)
        self.skiplist = [3, 7]
        self.do_query_expansion = False

    def forward(self, features):
        return {"token_embeddings": self.proj(torch.tanh(self.embed(features["input_ids"])))}


def _features(rng, batch, length):
    ids = torch.from_numpy(rng.integers(1, 50, (batch, length))).to(DEVICE)
    attention = torch.ones_like(ids)
    for i in range(batch):
        attention[i, int(rng.integers(1, length)) :] = 0  # padding at the end
    return {"input_ids": ids, "attention_mask": attention}


def _distillation_features(rng, batch, ways=3):
    """Query and document features for `losses.Distillation`, redrawn until each query's `ways`
    documents score at least 0.05 apart. Distillation min-max normalizes each query's scores,
    so documents that tie (a one-token query whose token is in every document: all score 1)
    make its gradient 1 / (max - min), near 1e7, and then float32 rounding alone, in any two
    summation orders, moves the parameters' gradients by 0.1 (seen in CI)."""
    from pylate.losses.contrastive import extract_skiplist_mask

    while True:
        features = [_features(rng, batch, 6), _features(rng, batch * ways, 10)]
        torch.manual_seed(0)
        model = StandIn().to(DEVICE)
        with torch.no_grad():
            q, d = (torch.nn.functional.normalize(model(f)["token_embeddings"], p=2, dim=-1) for f in features)
            masks = extract_skiplist_mask(sentence_features=features, skiplist=model.skiplist)
            scores = _theirs(
                "colbert_kd_scores",
                q,
                d.view(batch, ways, *d.shape[1:]),
                queries_mask=masks[0],
                documents_mask=masks[1].view(batch, ways, -1),
            )
        if bool((scores.amax(1) - scores.amin(1) >= 0.05).all()):
            return features


def _loss_and_grads(make_loss, features, labels, patched, monkeypatch):
    from pylate import losses  # noqa: F401 (imported before the patch, as a training script does)

    torch.manual_seed(0)
    model = StandIn().to(DEVICE)
    with monkeypatch.context() as env:
        if patched:
            dropin.patch()
        else:
            # PyLate's own scoring on its torch path (on CUDA its "auto" would take an installed
            # flash-maxsim or LIK instead).
            env.setenv("PYLATE_SCORES_BACKEND", "torch")
        try:
            loss_fn = make_loss(model)
            loss = loss_fn(features, labels)
            loss.backward()
        finally:
            dropin.unpatch()
    return loss.detach(), [_grad(p).detach().clone() for p in model.parameters()]


def _grad(p):
    assert p.grad is not None, "a parameter got no gradient"
    return p.grad


@pytest.mark.parametrize("name", ["Contrastive", "CachedContrastive", "Distillation"])
def test_pylate_losses_patched_match_unpatched(rng, name, monkeypatch):
    from pylate import losses

    batch = 4
    if name == "Distillation":
        features = _distillation_features(rng, batch)
        labels = torch.from_numpy(rng.standard_normal((batch, 3))).float().to(DEVICE)
        make = lambda m: losses.Distillation(model=m)  # noqa: E731
    else:
        features = [_features(rng, batch, 6), _features(rng, batch, 10), _features(rng, batch, 10)]
        labels = None
        kw = {"mini_batch_size": 2} if name == "CachedContrastive" else {}
        make = lambda m: getattr(losses, name)(model=m, **kw)  # noqa: E731
    want, want_grads = _loss_and_grads(make, features, labels, False, monkeypatch)
    got, got_grads = _loss_and_grads(make, features, labels, True, monkeypatch)
    np.testing.assert_allclose(got.cpu().numpy(), want.cpu().numpy(), rtol=1e-5, atol=1e-6)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g.cpu().numpy(), w.cpu().numpy(), rtol=1e-4, atol=1e-5)


def test_patch_routes_every_reference_and_unpatch_restores(rng):
    import pylate.losses.distillation as distillation
    import pylate.scores.colbert as colbert_module

    original = pylate_scores.colbert_scores
    dropin.patch()
    try:
        assert pylate_scores.colbert_scores is dropin.colbert_scores
        assert colbert_module.colbert_scores is dropin.colbert_scores
        assert dropin.colbert_kd_scores in (distillation.Distillation.__init__.__defaults__ or ())
        # PyLate's ColBERTScores (the contrastive losses' default) scores through the patch.
        Q, D = normalized(rng, 4, 6, 16), normalized(rng, 4, 2, 9, 16)
        got = pylate_scores.ColBERTScores()(Q, D)
    finally:
        dropin.unpatch()
    assert pylate_scores.colbert_scores is original
    assert dropin.colbert_kd_scores not in (distillation.Distillation.__init__.__defaults__ or ())
    _close(got, pylate_scores.ColBERTScores()(Q, D, backend="torch"), torch.float32)

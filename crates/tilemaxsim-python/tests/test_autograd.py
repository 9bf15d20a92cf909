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

"""Shared helpers of the Python tests: seeded inputs, the float64 reference, and the device the
tests run on (`TILEMAXSIM_TEST_DEVICE=cuda` on a GPU machine; the CPU otherwise)."""

import os

import numpy as np
import pytest
import torch

DEVICE = os.environ.get("TILEMAXSIM_TEST_DEVICE", "cpu")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Scores of L2-normalized tokens: sums of Lq dot products of magnitude <= 1.
TOL = {torch.float32: 1e-4, torch.float16: 1e-4, torch.bfloat16: 1e-4}


@pytest.fixture
def rng():
    return np.random.default_rng(int.from_bytes(os.urandom(4), "little"))


def normalized(rng, *shape, dtype=torch.float32):
    x = rng.standard_normal(shape)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return torch.from_numpy(x).to(dtype=dtype, device=DEVICE)


def reference(Q, D, q_valid=None, d_valid=None):
    """float64 MaxSim of the inputs as given (after their rounding to their dtype):
    [A, B]; `*_valid` exclude tokens."""
    q = Q.detach().double().cpu().numpy()
    d = D.detach().double().cpu().numpy()
    sims = np.einsum("aid,bjd->abij", q, d)
    if d_valid is not None:
        sims = np.where(np.asarray(d_valid.cpu())[None, :, None, :], sims, -np.inf)
    best = sims.max(axis=3)
    if q_valid is not None:
        best = np.where(np.asarray(q_valid.cpu())[:, None, :], best, 0.0)
    return best.sum(axis=2)

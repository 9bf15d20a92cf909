"""Shared helpers of the Python tests: seeded inputs, the float64 reference, and the device the
tests run on (`TILEMAXSIM_TEST_DEVICE=cuda` on a GPU machine; the CPU otherwise)."""

import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest
import torch

# colbert-ai compiles its C++ extensions at first use, under a lock file that torch waits on
# forever; a run killed mid-build leaves that lock in ~/.cache. Each session builds in its own
# directory instead, so no earlier run can hang this one.
if "TORCH_EXTENSIONS_DIR" not in os.environ:
    os.environ["TORCH_EXTENSIONS_DIR"] = tempfile.mkdtemp(prefix="tilemaxsim-torch-ext-")
    atexit.register(shutil.rmtree, os.environ["TORCH_EXTENSIONS_DIR"], True)

DEVICE = os.environ.get("TILEMAXSIM_TEST_DEVICE", "cpu")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Scores of L2-normalized tokens: sums of Lq dot products of magnitude <= 1.
TOL = {torch.float32: 1e-4, torch.float16: 1e-4, torch.bfloat16: 1e-4}


SEED = pytest.StashKey[int]()


@pytest.fixture
def rng(request):
    """A generator drawn afresh each run (TILEMAXSIM_TEST_SEED=N fixes it); a failing test's
    report names its seed."""
    fixed = os.environ.get("TILEMAXSIM_TEST_SEED")
    seed = int(fixed) if fixed else int.from_bytes(os.urandom(4), "little")
    request.node.stash[SEED] = seed
    return np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    seed = item.stash.get(SEED, None)
    if report.failed and seed is not None:
        report.sections.append(("rng seed", f"TILEMAXSIM_TEST_SEED={seed} draws this test's inputs again"))


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

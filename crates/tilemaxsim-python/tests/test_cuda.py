"""CUDA only (skipped elsewhere): work goes on torch's current stream and stays ordered with it,
results stay on the device, CUDA tensors with row strides and offsets are read in place, and a
call inside CUDA graph capture either works or raises clearly."""

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

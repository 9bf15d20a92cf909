"""tilemaxsim.maxsim / maxsim_pairs / topk against the float64 reference on random shapes:
odd d and token counts, one-token queries and documents, long documents, masks with holes,
padded and packed documents, f32 / f16 / bf16, numpy in and out."""

import numpy as np
import pytest
import torch

import tilemaxsim
from conftest import DEVICE, DTYPES, normalized, reference


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_shapes_match_the_reference(rng, dtype):
    for _ in range(8):
        a, b = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        lq, ld = int(rng.integers(1, 40)), int(rng.integers(1, 300))
        d = int(rng.choice([1, 7, 31, 32, 64, 80, 96, 128, 200, 256, 768]))
        Q, D = normalized(rng, a, lq, d, dtype=dtype), normalized(rng, b, ld, d, dtype=dtype)
        got = tilemaxsim.maxsim(Q, D)
        assert got.dtype == torch.float32 and got.device == Q.device and got.shape == (a, b)
        np.testing.assert_allclose(got.cpu().numpy(), reference(Q, D), atol=2e-5 * lq, rtol=0)


def test_one_query_gives_one_row_and_long_documents(rng):
    Q, D = normalized(rng, 1, 9, 128), normalized(rng, 2, 5000, 128)
    got = tilemaxsim.maxsim(Q[0], D)
    assert got.shape == (2,)
    np.testing.assert_allclose(got.cpu().numpy(), reference(Q, D)[0], atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masks_with_holes_exclude_tokens(rng, dtype):
    Q, D = normalized(rng, 3, 9, 48, dtype=dtype), normalized(rng, 5, 17, 48, dtype=dtype)
    q_mask = torch.from_numpy(rng.random((3, 9)) < 0.7).to(DEVICE)
    d_mask = torch.from_numpy(rng.random((5, 17)) < 0.6).to(DEVICE)
    q_mask[:, 0] = True
    d_mask[:, 3] = True  # a hole before it, at least one token after
    d_mask[:, 0] = False
    got = tilemaxsim.maxsim(Q, D, q_mask=q_mask, d_mask=d_mask)
    np.testing.assert_allclose(got.cpu().numpy(), reference(Q, D, q_mask, d_mask), atol=1e-4)


def test_lengths_packed_and_padded_agree(rng):
    lens = rng.integers(1, 60, size=11)
    Q, D = normalized(rng, 2, 13, 64, dtype=torch.float16), normalized(rng, 11, 60, 64, dtype=torch.float16)
    valid = torch.arange(60)[None, :] < torch.from_numpy(lens)[:, None]
    want = reference(Q, D, d_valid=valid)
    padded = tilemaxsim.maxsim(Q, D, doc_lengths=torch.from_numpy(lens))
    packed = torch.cat([D[i, : lens[i]] for i in range(11)])
    cu = torch.from_numpy(np.concatenate([[0], np.cumsum(lens)]))
    packed_scores = tilemaxsim.maxsim(Q, packed, cu_seqlens=cu)
    np.testing.assert_allclose(padded.cpu().numpy(), want, atol=1e-4)
    np.testing.assert_allclose(packed_scores.cpu().numpy(), want, atol=1e-4)


def test_pairs_score_query_i_against_document_i(rng):
    Q, D = normalized(rng, 6, 8, 32), normalized(rng, 6, 20, 32)
    got = tilemaxsim.maxsim_pairs(Q, D, doc_lengths=torch.tensor([20, 1, 5, 20, 7, 3]))
    full = tilemaxsim.maxsim(Q, D, doc_lengths=torch.tensor([20, 1, 5, 20, 7, 3]))
    np.testing.assert_allclose(got.cpu().numpy(), np.diag(full.cpu().numpy()), atol=1e-5)


def test_numpy_in_numpy_out(rng):
    Q = rng.standard_normal((2, 5, 33)).astype(np.float32)
    D = rng.standard_normal((4, 7, 33)).astype(np.float32)
    got = tilemaxsim.maxsim(Q, D)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_allclose(got, reference(torch.from_numpy(Q), torch.from_numpy(D)), rtol=1e-5, atol=1e-4)
    # float64 is converted to float32
    np.testing.assert_allclose(tilemaxsim.maxsim(Q.astype(np.float64), D), got, rtol=1e-6)


def test_topk_is_best_first_with_ties_to_the_lower_index(rng):
    Q, D = normalized(rng, 3, 6, 64), normalized(rng, 40, 9, 64)
    D[17] = D[5]  # an exact tie between documents 5 and 17
    D[33] = D[5]
    scores, idx = tilemaxsim.topk(Q, D, k=7, chunk=8)  # several chunks
    full = tilemaxsim.maxsim(Q, D).cpu().numpy()
    for a in range(3):
        order = sorted(range(40), key=lambda j: (-full[a, j], j))[:7]
        assert idx[a].tolist() == order
        np.testing.assert_array_equal(scores[a].cpu().numpy(), full[a, order])
    with pytest.raises(ValueError, match="k = 0"):
        tilemaxsim.topk(Q, D, k=0)
    s1, i1 = tilemaxsim.topk(Q[0], D, k=40)
    assert s1.shape == (40,) and sorted(i1.tolist()) == list(range(40))


def test_topk_orders_negative_and_positive_scores(rng):
    # One-token queries and documents: a score is one dot product, of either sign; a zero one.
    Q = torch.from_numpy(rng.standard_normal((2, 1, 16))).float().to(DEVICE)
    D = torch.from_numpy(rng.standard_normal((300, 1, 16))).float().to(DEVICE)
    D[7] = 0.0  # a score of exactly 0
    D[9] = -D[8]
    full = tilemaxsim.maxsim(Q, D).cpu().numpy()
    assert (full < 0).any() and (full > 0).any()
    scores, idx = tilemaxsim.topk(Q, D, k=300, chunk=64)
    for a in range(2):
        order = sorted(range(300), key=lambda j: (-full[a, j], j))
        assert idx[a].tolist() == order
    np_scores, np_idx = tilemaxsim.topk(Q.cpu().numpy(), D.cpu().numpy(), k=300, chunk=64)
    assert np_idx.tolist() == idx.cpu().tolist()

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


def test_native_entry_without_query_lengths_scores_every_row(rng):
    """The engine's entry with no query lengths (the CUDA fast path's call): each query is all
    of its rows, a batch [A, Lq, d] or one query [Lq, d]; outputs poisoned first."""
    from tilemaxsim import _native
    from tilemaxsim._arrays import stream_of

    Q, D = normalized(rng, 3, 7, 33), normalized(rng, 5, 11, 33)
    out = torch.full((3, 5), float("nan"), device=DEVICE)
    _native.score(Q, None, D, out, stream=stream_of(Q))
    np.testing.assert_allclose(out.cpu().numpy(), reference(Q, D), atol=1e-5, rtol=0)
    one = torch.full((5,), float("nan"), device=DEVICE)
    _native.score(Q[1], None, D, one, stream=stream_of(Q))
    np.testing.assert_allclose(one.cpu().numpy(), reference(Q, D)[1], atol=1e-5, rtol=0)


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


def test_k_larger_than_the_corpus_returns_every_document(rng):
    # One rule with Corpus.search, the CLI and the server: min(k, N) hits.
    Q, D = normalized(rng, 2, 3, 16), normalized(rng, 5, 4, 16)
    s, i = tilemaxsim.topk(Q, D, k=50)
    assert s.shape == (2, 5) and sorted(i[0].tolist()) == list(range(5))
    corpus = tilemaxsim.Corpus.from_tensors(D.float().cpu().reshape(20, 16), doc_lengths=[4] * 5, device="cpu")
    cs, ci = corpus.search(Q.cpu(), k=50)
    assert cs.shape == (2, 5)
    np.testing.assert_array_equal(ci.numpy(), i.cpu().numpy())


def test_any_strides(rng):
    Q = normalized(rng, 3, 24, 5).transpose(1, 2)  # stride along d is 5
    D = normalized(rng, 24, 4, 7).permute(1, 2, 0)
    assert Q.stride(-1) != 1 and D.stride(-1) != 1
    np.testing.assert_allclose(tilemaxsim.maxsim(Q, D).cpu().numpy(), reference(Q, D), atol=1e-5)
    np.testing.assert_allclose(tilemaxsim.maxsim_pairs(Q, D[:3]).cpu().numpy(), np.diag(reference(Q, D[:3])), atol=1e-5)
    Qn = np.asfortranarray(Q.cpu().numpy())[::-1]  # negative and non-unit strides in numpy
    np.testing.assert_allclose(tilemaxsim.maxsim(Qn, D.cpu().numpy()), reference(Q, D)[::-1], atol=1e-5)


def test_float64_is_scored_in_float64(rng):
    Q = normalized(rng, 2, 3, 9, dtype=torch.float64)
    D = normalized(rng, 4, 6, 9, dtype=torch.float64)
    lengths = torch.tensor([6, 1, 3, 5], device=DEVICE)
    valid = torch.arange(6, device=DEVICE)[None, :] < lengths[:, None]
    got = tilemaxsim.maxsim(Q, D, doc_lengths=lengths)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.cpu().numpy(), reference(Q, D, d_valid=valid), rtol=1e-13, atol=1e-13)
    packed = torch.cat([D[j, : lengths[j]] for j in range(4)])
    cu = torch.tensor([0, 6, 7, 10, 15], device=DEVICE)
    np.testing.assert_allclose(tilemaxsim.maxsim(Q, packed, cu_seqlens=cu).cpu().numpy(), got.cpu().numpy(), rtol=1e-13)
    np.testing.assert_allclose(tilemaxsim.maxsim(Q.cpu().numpy(), D.cpu().numpy()), reference(Q, D), rtol=1e-13)
    # torch differentiates it: gradcheck holds at its default tolerances.
    q, d = Q.clone().requires_grad_(), D.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: tilemaxsim.maxsim(a, b, doc_lengths=lengths), (q, d))
    assert torch.autograd.gradcheck(lambda a, b: tilemaxsim.maxsim_pairs(a, b), (q, d[:2]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_scores_nan_on_every_device(rng, dtype):
    Q, D = normalized(rng, 3, 5, 32, dtype=dtype), normalized(rng, 4, 9, 32, dtype=dtype)
    Q[1, 4, 7] = float("nan")
    D[2, 8, 0] = float("nan")
    got = tilemaxsim.maxsim(Q, D).cpu()
    want = np.full((3, 4), False)
    want[1, :] = want[:, 2] = True
    np.testing.assert_array_equal(torch.isnan(got).numpy(), want)
    np.testing.assert_allclose(got.numpy()[~want], reference(Q, D)[~want], atol=1e-4)
    pairs = tilemaxsim.maxsim_pairs(Q, D[:3]).cpu()
    np.testing.assert_array_equal(torch.isnan(pairs).numpy(), [False, True, True])
    # A NaN in a masked query token or past a document's length is not read.
    q_mask = torch.ones(3, 5, dtype=torch.bool, device=DEVICE)
    q_mask[1, 4] = False
    lengths = torch.tensor([9, 9, 8, 9], device=DEVICE)
    assert torch.isfinite(tilemaxsim.maxsim(Q, D, q_mask=q_mask, doc_lengths=lengths)).all()
    with pytest.raises(ValueError, match="queries hold NaN"):
        tilemaxsim.maxsim(Q, D, check=True)
    with pytest.raises(ValueError, match="documents hold NaN"):
        tilemaxsim.maxsim(Q, D, q_mask=q_mask, check=True)
    assert torch.isfinite(tilemaxsim.maxsim(Q, D, q_mask=q_mask, doc_lengths=lengths, check=True)).all()
    with pytest.raises(ValueError, match="documents hold NaN"):
        tilemaxsim.topk(Q[0], D, k=2, check=True)


def test_topk_over_no_documents_is_empty(rng):
    Q = normalized(rng, 2, 3, 8)
    s, i = tilemaxsim.topk(Q, Q[0, :0], k=5, cu_seqlens=torch.tensor([0], device=DEVICE))
    assert s.shape == (2, 0) and i.shape == (2, 0) and i.dtype == torch.int64
    s1, i1 = tilemaxsim.topk(Q[0], Q[0, :0], k=5, cu_seqlens=torch.tensor([0], device=DEVICE))
    assert s1.shape == (0,) and i1.shape == (0,)

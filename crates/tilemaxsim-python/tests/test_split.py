"""The float32 split-range check of CUDA documents (`tilemaxsim._split`), on whatever device:
the answer is kept per tensor until its version counter moves, `fresh` checks again, inference
tensors (no version counter) are checked on every call, and out-of-range, tiny, NaN and empty
tensors are refused."""

import torch

from tilemaxsim._split import split_checked


def test_the_answer_is_kept_until_the_tensor_changes():
    D = torch.full((3, 4, 8), 0.5)
    assert split_checked(D)
    D[1, 2, 3] = 4e4  # past 32768; the write moves the version counter
    assert not split_checked(D)
    D[1, 2, 3] = -32768.0
    assert split_checked(D)
    D[0, 1] = 1e-6  # a row of values below 2^-12
    assert not split_checked(D)
    D[0, 1] = 0.0  # an all-zero row is in range
    assert split_checked(D)
    D[2, 0, 0] = float("nan")
    assert not split_checked(D)
    D[2, 0, 0] = 0.5
    assert split_checked(D)
    # A write through .data leaves D's version counter as it was: the kept answer stands
    # until a call asks for a fresh check.
    D.data.view(-1)[0] = 1e6
    assert split_checked(D)
    assert not split_checked(D, fresh=True)


def test_views_are_checked_as_themselves():
    D = torch.full((4, 8), 0.5)
    D[3, 0] = 1e5
    assert split_checked(D[:3])
    assert not split_checked(D[1:])
    assert not split_checked(D)


def test_inference_tensors_are_checked_on_every_call():
    with torch.inference_mode():
        D = torch.full((2, 3, 8), 0.5)
        assert split_checked(D)
        D.mul_(1e5)
        assert not split_checked(D)


def test_empty_tensors_are_not_vouched_for():
    assert not split_checked(torch.empty(0, 4, 8))

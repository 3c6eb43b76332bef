"""The compiled SVD sweep of one small real train (tenalg.tt.linalg.smallsweep) against the
batched sweep it stands in for: the same ranks, norms and discarded weights, results
within roundoff, the eps bound; and which trains it serves."""

import contextlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tt_helpers import batched_sweep, long_train

from tenalg import tt
from tenalg.kernels import compiler
from tenalg.tt.linalg import smallsweep, sweeps


def _both(x, eps, max_rank=None):
    """(train, info) rounded by the compiled sweep (the batched sweep must not run) and by
    the batched one."""
    y = tt.TensorTrain(x.cores)
    with _no_batched_sweep():
        info = tt.round_(y, eps, max_rank)
    y0 = tt.TensorTrain(x.cores)
    with batched_sweep():
        info0 = tt.round_(y0, eps, max_rank)
    return (y, info), (y0, info0)


@contextlib.contextmanager
def _no_batched_sweep():
    with mock.patch.object(sweeps, "svd", side_effect=AssertionError("batched sweep ran")):
        yield


def _u(dtype):
    return float(np.finfo(dtype).eps)


def _dense(t):
    return t.astype(np.float64).to_dense()


@st.composite
def _trains(draw):
    """A real train as tt.round meets it: a sum of two trains, independent, equal (X + X),
    one a small perturbation of the other, or cancelling (X - X); with eps, a cap, and
    the gross magnitude of the sum (its noise is roundoff of that)."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    d = draw(st.integers(2, 7))
    dims = tuple(draw(st.lists(st.integers(1, 6), min_size=d, max_size=d)))
    ra, rb = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**20))
    a = tt.random(dims, ra, rng=seed, dtype=dtype)
    kind = draw(st.sampled_from(["independent", "redundant", "perturbed", "cancelling"]))
    if kind == "independent":
        x = a + tt.random(dims, rb, rng=seed + 1, dtype=dtype)
    elif kind == "redundant":
        x = a + a
    elif kind == "perturbed":
        c = tt.random(dims, rb, rng=seed + 1, dtype=dtype)
        x = a + (a + (10.0 ** draw(st.integers(-6, -1)) * tt.norm(a) / tt.norm(c)) * c)
    else:
        x = a + (-1.0) * a
    gross = float(2 * tt.norm(a) + tt.norm(x))
    eps = draw(st.sampled_from([0.0, 1e3 * _u(dtype), 1e-3, 0.1, 0.5]))
    max_rank = draw(st.sampled_from([None, None, 1, 3]))
    return x, eps, max_rank, kind, gross


@settings(max_examples=80, deadline=None)
@given(_trains())
def test_compiled_sweep_rounds_as_the_batched_sweep(case):
    x, eps, max_rank, kind, gross = case
    dtype = x.dtype
    (y, info), (y0, info0) = _both(x, eps, max_rank)
    want = _dense(x)
    scale = float(np.linalg.norm(want))
    assert y.dtype == dtype and y.ranks == y0.ranks == info.ranks_after
    assert info.ranks_before == info0.ranks_before == x.ranks
    assert info.method == info0.method == "svd"
    roundoff = 100 * x.ncores * _u(dtype)
    noise = roundoff * gross
    assert info.norm == pytest.approx(info0.norm, rel=roundoff, abs=noise)
    assert info.norm == pytest.approx(scale, rel=roundoff, abs=noise)
    error = np.linalg.norm(_dense(y) - want)
    if kind == "cancelling":  # both are noise of the terms that cancelled
        assert max(error, np.linalg.norm(_dense(y0) - want)) <= noise
        return
    assert info.discarded == pytest.approx(info0.discarded, abs=np.sqrt(roundoff))
    if max_rank is None:
        assert error <= (eps + roundoff) * scale
    # an SVD truncation's error is its discarded weight (plus the result's roundoff)
    assert error <= (info.discarded + roundoff) * scale + noise
    assert np.linalg.norm(_dense(y) - _dense(y0)) <= (
        np.sqrt(roundoff) if eps or max_rank else roundoff) * scale + noise


def test_ranks_are_capped_and_exact_ranks_kept():
    a, b = (tt.random((4, 5, 6, 5, 4), 3, rng=s) for s in (1, 2))
    (y, _), (y0, _) = _both(a + b + a, 0.0)
    assert y.ranks == y0.ranks == (1, 4, 6, 6, 4, 1)  # the exact ranks of the sum
    (y, info), _ = _both(a + b, 0.0, max_rank=2)
    assert y.ranks == (1, 2, 2, 2, 2, 1) and info.discarded > 0.1


def test_zero_and_cancelling_trains_round_to_rank_one():
    x = tt.random((3, 4, 3), 2, rng=0)
    for train, norm in ((0.0 * x, 0.0), (x + (-1.0) * x, 1e-14 * tt.norm(x))):
        (y, info), (y0, info0) = _both(train, 1e-8)
        assert y.ranks == y0.ranks == (1, 1, 1, 1)
        assert np.abs(y.to_dense()).max() <= 1e-14 * tt.norm(x)
        assert info.norm <= norm and info0.norm <= norm  # 0, or the noise that cancelled


@pytest.mark.parametrize("factor", [4.0, 0.25])
def test_long_trains_carry_their_scale(factor):
    """400 cores of entries around 4 (or 1/4): the norm 4^400 overflows any product of the
    cores, not the carried logarithm."""
    x, _ = long_train(400, 2, 2, factor)
    (y, info), (y0, info0) = _both(x + x, 1e-6)
    assert y.ranks == y0.ranks == x.ranks
    assert info.norm == pytest.approx(info0.norm, rel=1e-9)
    assert np.isfinite(info.norm) and info.norm > 0
    assert tt.norm(y - 2 * x) <= 1e-6 * tt.norm(2 * x)


def test_a_norm_past_float64_is_inf_not_an_error():
    """400 cores of 8: the norm 8^400 is past float64's range; the rounding is exact
    (each core stays a multiple of (1, 1)) and the norm it reports is inf, as from the
    batched sweep (math.exp raised OverflowError)."""
    x = tt.TensorTrain([np.full((1, 2, 1), 8.0)] * 400)
    with np.errstate(over="ignore"):
        (y, info), (_, info0) = _both(x, 1e-8)
    assert y.ranks == x.ranks and info.norm == info0.norm == np.inf
    assert all(np.ptp(c.array()) <= 1e-14 * np.abs(c.array()).max() for c in y.cores)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_sum_forms_the_sum_of_small_trains(dtype):
    """round_sum of one to three small trains with coefficients: the compiled sweep rounds
    the block-diagonal sum it forms as the batched sweep rounds the summands."""
    x, y, z = (tt.random((3, 4, 2, 3), r, rng=r, dtype=dtype) for r in (2, 1, 3))
    eps = 1e3 * _u(dtype)  # the floor the bound's property test uses
    for trains, coefficients in (([x], [-2.5]), ([x, y], [1, -1]), ([x, y, z], [0.5, 2, -3]),
                                 ([x, x], [1, -1])):
        want = sum(c * _dense(t) for c, t in zip(coefficients, trains, strict=True))
        gross = sum(abs(c) * tt.norm(t) for c, t in zip(coefficients, trains, strict=True))
        with _no_batched_sweep():
            got = tt.round_sum(trains, coefficients, eps=eps)
        with batched_sweep():
            ref = tt.round_sum(trains, coefficients, eps=eps)
        assert got.ranks == ref.ranks and got.dtype == dtype
        noise = 100 * _u(dtype) * gross
        assert np.linalg.norm(_dense(got) - want) <= eps * np.linalg.norm(want) + noise
        assert np.linalg.norm(_dense(got) - _dense(ref)) <= 2 * eps * np.linalg.norm(want) + noise


def test_which_trains_it_serves(monkeypatch):
    x = tt.random((4,) * 5, 3, rng=0)
    stack = [[c.array()[None] for c in (x + x).cores]]
    assert smallsweep.svd(stack, [1], 1e-8, None) is not None
    pair = [[np.concatenate([c, c]) for c in stack[0]]]
    assert smallsweep.svd(pair, [1], 1e-8, None) is None  # two trains (a pack's group)
    complex_ = [[c.astype(np.complex128) for c in stack[0]]]
    assert smallsweep.svd(complex_, [1], 1e-8, None) is None
    assert smallsweep.svd(stack, [1j], 1e-8, None) is None  # a complex multiple
    big = tt.random((64,) * 4, 24, rng=0)
    assert smallsweep.svd([[c.array()[None] for c in big.cores]], [1], 1e-8, None) is None
    one = [[stack[0][0][:, :, :, :1].sum(axis=3, keepdims=True)]]
    assert smallsweep.svd(one, [1], 1e-8, None) is None  # a single core: nothing to do
    nan = [list(stack[0])]
    nan[0][2] = nan[0][2].copy()
    nan[0][2][0, 1, 2, 3] = np.nan
    assert smallsweep.svd(nan, [1], 1e-8, None) is None  # the batched sweep's rules
    monkeypatch.setattr(compiler, "ready_for", lambda kernel, args, key: False)
    assert smallsweep.svd(stack, [1], 1e-8, None) is None  # compiling: the batched sweep


def test_a_result_not_finite_is_left_to_the_batched_sweep(monkeypatch):
    """The compiled sweep checks its own result (the caller skips the check of every
    core): one that holds inf (an overflow) makes it decline, and the batched sweep
    rounds the train as it would have."""
    x = tt.random((4,) * 5, 3, rng=0)
    stack = [[c.array()[None] for c in (x + x).cores]]
    compiled = smallsweep._sweep

    def overflowing(*args):
        result = compiled(*args)
        args[6][3] = np.inf  # (out)
        return result

    monkeypatch.setattr(smallsweep, "_sweep", overflowing)
    monkeypatch.setattr(compiler, "ready_for", lambda kernel, args, key: True)
    assert smallsweep.svd(stack, [1], 1e-8, None) is None
    y = tt.round(x + x, 1e-8)
    with batched_sweep():
        y0 = tt.round(x + x, 1e-8)
    assert y.ranks == y0.ranks == x.ranks
    assert all(np.array_equal(a.array(), b.array()) for a, b in zip(y.cores, y0.cores,
                                                                    strict=True))


def test_float32_near_redundant_sum():
    """The #31 row: a float32 a + (a + 1e-2 c) rounded at eps 1e-3 keeps a's and c's ranks
    with an error within eps, as the batched sweep does."""
    a = tt.random((16,) * 10, 10, rng=1, dtype=np.float32)
    c = tt.random((16,) * 10, 2, rng=2, dtype=np.float32)
    x = a + (a + (1e-2 * tt.norm(a) / tt.norm(c)) * c)
    (y, _), (y0, _) = _both(x, 1e-3)
    assert y.ranks == y0.ranks == (1,) + (12,) * 9 + (1,)
    assert tt.norm(y - x) <= 1e-3 * tt.norm(x)


def test_tt_round_takes_it_for_small_real_trains():
    for dtype in (np.float32, np.float64):
        x = tt.random((4,) * 6, 3, rng=0, dtype=dtype)
        with _no_batched_sweep():
            y = tt.round(x + x, 1e-6)
        assert y.ranks == x.ranks and y.dtype == dtype


def test_summands_of_two_dtypes_are_summed_in_the_wider():
    a = tt.random((3, 4, 3), 2, rng=1, dtype=np.float32)
    b = tt.random((3, 4, 3), 2, rng=2)
    summands = [[c.array()[None] for c in t.cores] for t in (a, b)]
    got = smallsweep.svd(summands, [1, 1], 1e-12, None)
    ref = sweeps.svd(summands, [1, 1], 1e-12, None)
    assert [c.dtype for c in got.cores] == [np.dtype(np.float64)] * 3
    assert got.ranks.tolist() == ref.ranks.tolist() == [[1, 3, 3, 1]]
    dense = [np.einsum("gaib,gbjc,gckd->ijk", *r.cores) for r in (got, ref)]
    np.testing.assert_allclose(dense[0], dense[1], atol=1e-12 * np.abs(dense[1]).max())

"""The rounding guarantee ||X - round(X)||_F <= eps ||X||_F, for every method, dtype and
eps from the method's floor up, through round, round_, round_sum and packs."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tt_helpers import DTYPES, batched_sweep

from tenalg import tt


def _u(dtype):
    return float(np.finfo(np.dtype(dtype).type(0).real.dtype).eps)


def _floor(method, dtype):
    """The smallest eps each method promises: Gram's documented floor; SVD and the full
    sketch resolve to roundoff (1000 u leaves room for the roundoff of the result)."""
    return tt.gram_floor(dtype) if method == "gram" else 1e3 * _u(dtype)


def _dense(t):
    """The tensor of ``t`` in double precision (errors measured without the data's roundoff)."""
    return t.astype(np.complex128 if t.dtype.kind == "c" else np.float64).to_dense()


def _error(y, want):
    return float(np.linalg.norm(_dense(y) - want) / np.linalg.norm(want))


def _allowance(dtype, d):
    """The roundoff of storing the rounded result itself (a few u per core)."""
    return 8 * d * _u(dtype)


@st.composite
def _sums(draw):
    """(summands, eps, method, dtype): two trains, independent, equal (X + X) or one a
    perturbation of the other of about eps (a component near the cut)."""
    dtype = draw(st.sampled_from(DTYPES))
    method = draw(st.sampled_from(tt.METHODS))
    d = draw(st.integers(2, 5))
    # extents of 1 leave cores of single numbers, whose products put unlike scales in
    # unlike cores of the two summands
    dims = tuple(draw(st.lists(st.integers(1, 4), min_size=d, max_size=d)))
    ra, rb = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**20))
    floor = _floor(method, dtype)
    # half the cases within 30x of the floor, where the tails are hardest to judge
    top = draw(st.sampled_from([min(30 * floor, 0.5), 0.5]))
    eps = float(np.exp(draw(st.floats(np.log(floor), np.log(top)))))
    a = tt.random(dims, ra, rng=seed, dtype=dtype)
    kind = draw(st.sampled_from(["independent", "redundant", "perturbed"]))
    if kind == "independent":
        b = tt.random(dims, rb, rng=seed + 1, dtype=dtype)
    elif kind == "redundant":
        b = a
    else:
        # a component near the cut, where a misjudged tail shows: 0.3 to 30 times eps
        c = tt.random(dims, rb, rng=seed + 1, dtype=dtype)
        small = eps * 10 ** draw(st.floats(-0.5, 1.5))
        b = a + (small * tt.norm(a) / tt.norm(c)) * c
    return [a, b], eps, method, dtype


def _check(summands, y, eps, dtype):
    want = sum(_dense(t) for t in summands)
    d = summands[0].ncores
    assert _error(y, want) <= eps + _allowance(dtype, d)
    assert y.dtype == np.dtype(dtype)


@pytest.mark.parametrize("compiled", [True, False])  # small real trains' compiled sweep
@settings(max_examples=60, deadline=None)
@given(_sums())
def test_round_and_round_in_place_keep_the_bound(compiled, case):
    (a, b), eps, method, dtype = case
    with contextlib.nullcontext() if compiled else batched_sweep():
        y = tt.round(a + b, eps, method=method, rng=0)
        x = a + b
        info = tt.round_(x, eps, method=method, rng=1)
    _check([a, b], y, eps, dtype)
    _check([a, b], x, eps, dtype)
    assert info.ranks_after == x.ranks and info.method in tt.METHODS


@settings(max_examples=30, deadline=None)
@given(_sums())
def test_round_sum_keeps_the_bound(case):
    (a, b), eps, method, dtype = case
    with batched_sweep():  # the compiled sweep: test_round_and_round_in_place_keep_the_bound
        y = tt.round_sum([a, b], [1, 1], eps=eps, method=method, rng=0)
    _check([a, b], y, eps, dtype)


@settings(max_examples=15, deadline=None)
@given(_sums(), st.integers(1, 3))
def test_pack_round_keeps_the_bound(case, copies):
    """Packs round sums of trains (LazySums) from their summands' stacks."""
    (a, b), eps, method, dtype = case
    p = tt.add(tt.TrainPack([a] * copies), tt.TrainPack([b] * copies))
    infos = p.round_(eps, method=method, rng=0)
    for k in range(copies):
        _check([a, b], p[0, k], eps, dtype)
        assert infos[0][k].ranks_after == p[0, k].ranks


def _issue_example():
    a = tt.random((4,) * 4, 1, rng=141, dtype=np.float32)
    b = tt.random((4,) * 4, 3, rng=1141, dtype=np.float32)
    return a, b


@pytest.mark.parametrize("method", tt.METHODS)
def test_float32_sum_keeps_a_component_above_the_floor(method):
    """Issue 31: a component of relative size 1e-3 at the last bond (the per-bond
    tolerance is 1e-3 / sqrt(3) = 5.8e-4) must be kept. Gram rounding used to mask it
    with the eigenvalues below 64 u of the largest (ranks (1, 4, 4, 3, 1), error 2.07e-3)."""
    a, b = _issue_example()
    want = _dense(a) + _dense(b)
    s = np.linalg.svd(want.reshape(64, 4), compute_uv=False)
    assert 5.8e-4 < s[-1] / np.linalg.norm(s) < 2e-3
    with batched_sweep():  # each method's own sweep, not the compiled one of small trains
        y = tt.round(a + b, 1e-3, method=method, rng=0)
        assert y.ranks == (1, 4, 4, 4, 1) and y.dtype == np.float32
        assert _error(y, want) < 1e-6
        z = tt.round_sum([a, b], [1, 1], eps=1e-3, method=method, rng=0)
        assert z.ranks == (1, 4, 4, 4, 1) and _error(z, want) < 1e-6
        x = a + b
        info = tt.round_(x, 1e-3, method=method, rng=0)
        assert info.method == method and info.ranks_after == (1, 4, 4, 4, 1)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("method", tt.METHODS)
def test_summands_of_unlike_scales_are_not_taken_for_cancellation(method, compiled):
    """X + (X + 0.1 Y) in float32 on dims (1, 1, 2, 5, 1): Y's large first core meets X's
    large later cores only through zeros of the block-diagonal sum. Every sweep read the
    product of their norms as the gross magnitude of cancelling terms (1e4 times the sum)
    and lost Y (error 4%) at eps 0, and the Gram sweep at eps 1e-3."""
    dims = (1, 1, 2, 5, 1)
    a = tt.random(dims, 1, rng=2605, dtype=np.float32)
    c = tt.random(dims, 1, rng=2606, dtype=np.float32)
    t = 0.1 * tt.norm(a) / tt.norm(c)
    want = 2 * _dense(a) + t * _dense(c)
    with contextlib.nullcontext() if compiled else batched_sweep():
        for eps in (0.0, 1e-3):
            y = tt.round(a + (a + t * c), eps, method=method, rng=0)
            z = tt.round_sum([a, a, c], [1, 1, t], eps=eps, method=method, rng=0)
            for r in (y, z):
                assert r.ranks == (1, 1, 1, 2, 1, 1) and _error(r, want) < 1e-6


@pytest.mark.parametrize("dtype, dims, rank, scale, seed", [
    (np.float32, (2, 2, 2), 2, 1e6, 4), (np.complex64, (2, 2, 2), 2, 1e6, 3),
    (np.float64, (2, 2), 1, 1e15, 0)])
def test_a_summand_gauged_on_its_first_bond_keeps_its_small_rows(dtype, dims, rank, scale,
                                                                 seed):
    """b's first core times s, its second over s: the same tensor, whose bond unfolding
    has rows 1/s of the others, which the first core multiplies by s. The rank-revealing
    LQ accepted dropping them because its residual was small in norm (a float32 sum lost
    21%, complex64 46%, float64 47% at eps 1e-3); Householder's QR is accurate row by
    row, and so must the residual be."""
    a = tt.random(dims, rank, rng=seed, dtype=dtype)
    cores = [c.array().copy() for c in tt.random(dims, rank, rng=seed + 100,
                                                 dtype=dtype).cores]
    cores[0], cores[1] = cores[0] * scale, cores[1] / scale
    b = tt.TensorTrain(cores)
    want = _dense(a) + _dense(b)
    with batched_sweep():
        assert _error(tt.round(a + b, 1e-3), want) <= 1e-3
        assert _error(tt.round_sum([a, b], eps=1e-3), want) <= 1e-3


@pytest.mark.parametrize("dims, ra, rb, seeds, dtype, eps", [
    ((4, 3, 1, 4, 3), 3, 1, (574452, 9283), np.float64, 1e-12),
    ((3, 3, 4, 1, 3, 3, 1), 2, 2, (850315, 863291), np.float32, 1e-3)])
def test_a_randomized_rounding_at_the_full_rank_oversamples(dims, ra, rb, seeds, dtype, eps):
    """Without max_rank the sketch had exactly the sum's rank: square Gaussian sketches,
    of condition 1e5-1e8 on dims with extents of 1, lost 5.6e-11 (float64, eps 1e-12) and
    7.2e-3 (float32, any eps)."""
    a, b = (tt.random(dims, r, rng=s, dtype=dtype) for r, s in zip((ra, rb), seeds, strict=True))
    want = _dense(a) + _dense(b)
    assert _error(tt.round(a + b, eps, method="randomized", rng=0), want) <= eps
    assert _error(tt.round_sum([a, b], eps=eps, method="randomized", rng=0), want) <= eps


def test_the_cholesky_lq_serves_only_where_it_is_accurate_enough():
    """A float64 sum of two random trains on dims with extents of 1: unfoldings of
    condition 4e5, whose Cholesky LQ (certified orthogonal) reconstructs M only to
    u cond(M). The batched sweep rounded it to 4.3e-12 at eps 1e-12 (Householder: 1e-14);
    now each LQ must be as accurate as the bond's tolerance."""
    dims = (2, 1, 1, 2, 1, 1, 1, 2)
    a, b = tt.random(dims, 2, rng=967352), tt.random(dims, 2, rng=881515)
    want = _dense(a) + _dense(b)
    with batched_sweep():
        for eps in (2.2e-13, 1e-12):
            assert _error(tt.round(a + b, eps), want) <= eps
            assert _error(tt.round_sum([a, b], eps=eps), want) <= eps
    pack = tt.add(tt.TrainPack([a, a]), tt.TrainPack([b, b]))
    pack.round_(1e-12)
    assert _error(pack[0, 1], want) <= 1e-12


def test_gram_falls_back_where_it_cannot_certify_a_cut():
    """Float64 components between the Gram floor (1.5e-8) and what Gram matrices resolve
    (about sqrt(n u)): the train goes to the SVD sweep (info.method), the bound holds."""
    a = tt.random((4,) * 5, 2, rng=2)
    c = tt.random((4,) * 5, 1, rng=1002)
    x = a + (7.9e-8 * tt.norm(a) / tt.norm(c)) * c
    want = _dense(x)
    info = tt.round_(x, 2e-8, method="gram")
    assert info.method == "svd" and _error(x, want) <= 2e-8
    assert info.ranks_after == (1, 3, 3, 3, 3, 1)

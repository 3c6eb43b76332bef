"""The compiled chains of one small train (dot, norm, vector contractions) against the
batched kernels, their twins, and against NumPy on the dense tensors."""

import contextlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tt_helpers import DTYPES, long_train, rand

from tenalg import tt
from tenalg.kernels import compiler
from tenalg.tt.linalg import batched, smallchain


@contextlib.contextmanager
def _compiled_only():
    """The batched kernels must not run."""
    with (mock.patch.object(batched, "dot", side_effect=AssertionError("batched dot ran")),
          mock.patch.object(batched, "norm", side_effect=AssertionError("batched norm ran"))):
        yield


@contextlib.contextmanager
def _batched_only():
    with mock.patch.object(compiler, "ready_for", lambda kernel, args, key=None: False):
        yield


def _all_three(a, b, vectors):
    return tt.dot(a, b), tt.norm(a), tt.contract_vectors(a, vectors), tt.sum(b)


def _dense(t):
    """The tensor of ``t`` in double precision (not the train's own rounding)."""
    return t.astype(np.complex128 if t.dtype.kind == "c" else np.float64).to_dense()


def _u(dtype):
    return float(np.finfo(np.dtype(dtype).type(0).real.dtype).eps)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=7), st.integers(1, 4),
       st.integers(1, 4), st.sampled_from(DTYPES), st.sampled_from(DTYPES),
       st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**20))
def test_compiled_chains_match_the_batched_kernels_and_numpy(dims, ra, rb, da, db, left,
                                                             right, seed):
    """Closed and open trains, every pair of dtypes (a mixed dot is computed in the
    promoted type), the same results on both paths and as NumPy's."""
    bonds = {"left_bond": left, "right_bond": right}
    a = rand(dims, ra, da, seed=seed, **bonds)
    b = rand(dims, rb, db, seed=seed + 1, **bonds)
    vectors = [np.random.default_rng(seed + k).standard_normal(n) for k, n in enumerate(dims)]
    with _compiled_only():
        fast = _all_three(a, b, vectors)
    with _batched_only():
        slow = _all_three(a, b, vectors)
    shape = (left, *dims, right)
    dense_a, dense_b = (_dense(t).reshape(shape) for t in (a, b))
    modes = tuple(range(1, len(dims) + 1))
    contracted = np.einsum(dense_a.astype(complex), [0, *modes, len(dims) + 1],
                           *[x for k, v in enumerate(vectors) for x in (v, [k + 1])],
                           [0, len(dims) + 1])
    norm_a, norm_b = np.linalg.norm(dense_a), np.linalg.norm(dense_b)
    want = [  # (NumPy's value, a bound on its modulus, the result's dtype)
        (np.vdot(dense_a, dense_b), norm_a * norm_b, np.result_type(a.dtype, b.dtype)),
        (norm_a, norm_a, np.dtype(a.dtype).type(0).real.dtype),
        (contracted, norm_a * np.prod([np.linalg.norm(v) for v in vectors]),
         np.result_type(a.dtype, np.float64)),
        (dense_b.sum(axis=modes), norm_b * np.sqrt(dense_b.size), b.dtype)]
    for got, twin, (exact, bound, dtype) in zip(fast, slow, want, strict=True):
        got, twin = np.asarray(got), np.asarray(twin)
        assert got.dtype == twin.dtype == dtype
        tol = 1e3 * _u(dtype) * len(dims)
        assert np.abs(got.ravel() - exact.ravel()).max() <= tol * bound
        assert np.abs(got.ravel() - twin.ravel()).max() <= tol * bound


def test_long_trains_scale_exactly_and_saturate():
    """Exponents carried as integers: a long train's norm and dot past float64's range
    are inf (as the batched kernels give them), its scaled copies finite and exact, an
    orthogonal pair's dot 0 (not 0 times inf)."""
    x, nu = long_train(600, 3, 2, 4.0)  # norm 4^599 nu = 2^1198 nu
    with _compiled_only():
        assert tt.norm(x) == np.inf and tt.dot(x, x) == np.inf
        small = x * 2.0 ** -1000
        np.testing.assert_allclose(tt.norm(small), 2.0**198 * nu, rtol=1e-12)
        np.testing.assert_allclose(tt.dot(small, small), 2.0**396 * nu**2, rtol=1e-12)
        tiny, _ = long_train(600, 3, 2, 0.25)
        assert tt.norm(tiny) == 0.0
        e0 = tt.TensorTrain([np.array([[[1.0], [0.0]]])] * 300)
        e1 = tt.TensorTrain([np.array([[[0.0], [1e300]]])] * 300)
        assert tt.dot(e0, e1) == 0.0 and tt.norm(e1) == np.inf
    with _batched_only():
        assert tt.norm(x) == np.inf


def test_the_twins_serve_fibers_large_cores_nan_and_while_compiling():
    x = rand((3, 4, 3), 2, seed=1)
    for train in (x.to_storage("fiber"), rand((2, 64, 2), 64, seed=2)):
        with mock.patch.object(smallchain, "_dot", side_effect=AssertionError("compiled")):
            assert np.isfinite(tt.dot(train, train))
    cores = [c.array().copy() for c in x.cores]
    cores[1][0, 0, 0] = np.nan
    assert smallchain.norm(cores) is None  # LAPACK refuses NaN: the batched norm runs
    assert np.isnan(tt.norm(tt.TensorTrain(cores)))
    with _batched_only():
        assert smallchain.dot(cores, cores) is None
        np.testing.assert_allclose(tt.norm(x), np.linalg.norm(x.to_dense()), rtol=1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_takes_one_array_of_ones(dtype):
    x = rand((3, 1, 4), 2, dtype, seed=3)
    with _compiled_only():
        total = tt.sum(x)
    assert np.asarray(total).dtype == np.dtype(dtype)
    np.testing.assert_allclose(total, _dense(x).sum(), rtol=1e3 * _u(dtype))


def test_a_zero_vector_entry_still_meets_nan_and_inf():
    """NaN times 0 is NaN, as in the batched twin and NumPy (zero entries were skipped)."""
    cores = [np.array([[[np.nan], [1.0]]]), np.ones((1, 2, 1))]
    x = tt.TensorTrain(cores)
    for value in (tt.contract_vectors(x, [np.array([0.0, 1.0]), np.ones(2)]), tt.sum(x)):
        assert np.isnan(value)


def test_an_open_result_keeps_entries_far_below_its_largest():
    """An open train's (r_0, r_d) result holds entries far below its largest: 2^1000 next
    to inf (the exponent is given back in steps, not clamped: 2^990 came back)."""
    big = np.full((1, 1, 1), 2.0**201)
    last = np.array([[[1.0, 2.0**-1010]]])
    x = tt.TensorTrain([big] * 10 + [last])
    for m in (tt.sum(x), tt.contract_vectors(x, [np.ones(1)] * 11)):
        assert m[0, 0] == np.inf and m[0, 1] == 2.0**1000

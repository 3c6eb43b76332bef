"""tenalg.linalg.svd against LAPACK's SVD (np.linalg.svd): the rank rule, the singular
values, orthonormal factors, the discarded weight, the path taken, and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenalg.errors import AxisError, DTypeError, IntegerTypeError, OperationError
from tenalg.linalg import svd, truncation

# the factors are certified to sqrt(u) of double precision (or are LAPACK's); float32
# data computes in float32 where LAPACK serves it
TOL = {np.float64: 1e-7, np.complex128: 1e-7, np.float32: 2e-3, np.complex64: 2e-3,
       np.int64: 1e-7}


def _random(rng, shape, dtype):
    if dtype is np.int64:
        return rng.integers(-5, 6, shape)
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _matrix(a, rows, cols):
    r = int(np.prod([a.shape[ax] for ax in rows]))
    return a.transpose(rows + cols).reshape(r, -1).astype(np.complex128)


def _check(a, rows, cols, max_rank, eps, tol):
    u, s, v, info = svd(a, rows, cols, max_rank=max_rank, eps=eps)
    m = _matrix(a, rows, cols)
    exact = np.linalg.svd(m, compute_uv=False)
    k, norm2 = info.rank, float(np.sum(exact ** 2))
    assert u.shape == tuple(a.shape[ax] for ax in rows) + (k,)
    assert v.shape == (k,) + tuple(a.shape[ax] for ax in cols)
    assert s.shape == (k,) and info.full_rank == min(m.shape)
    assert max_rank is None or k <= max_rank
    scale = np.sqrt(norm2) if norm2 else 1.0
    np.testing.assert_allclose(s, exact[:k], atol=tol * scale)
    uk, vk = u.reshape(m.shape[0], k), v.reshape(k, m.shape[1])
    np.testing.assert_allclose(uk.conj().T @ uk, np.eye(k), atol=tol)
    np.testing.assert_allclose(vk @ vk.conj().T, np.eye(k), atol=tol)
    residual = np.linalg.norm(m - (uk * s) @ vk) ** 2
    assert abs(residual - info.discarded_weight) <= tol * norm2
    assert abs(info.discarded_weight - np.sum(exact[k:] ** 2)) <= tol * norm2
    # the rank: the smallest within eps, unless roundoff decides (the cut sits at the
    # tolerance, or the values past it are rounding noise)
    tails = np.concatenate([np.cumsum(exact[::-1] ** 2)[::-1], [0.0]])
    delta2 = (eps ** 2) * norm2
    assert tails[k] <= delta2 + tol * norm2 or k == max_rank
    if k > 1 and (max_rank is None or k < max_rank):
        assert tails[k - 1] > delta2 - tol * norm2
    return u, s, v, info


@pytest.fixture
def lapack_calls(monkeypatch):
    """The LAPACK SVDs called (of the whole matrix, or of its Cholesky factor), by name."""
    calls = []

    def counting(name):
        run = getattr(truncation, name)
        return lambda *args: calls.append(name) or run(*args)

    for name in ("reference_svd", "_qr_svd"):
        monkeypatch.setattr(truncation, name, counting(name))
    return calls


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=5),
    data=st.data(),
    dtype=st.sampled_from([np.float64, np.float32, np.complex128, np.complex64, np.int64]),
    max_rank=st.none() | st.integers(1, 6),
    eps=st.sampled_from([0.0, 1e-3, 0.1, 0.5]),
    seed=st.integers(0, 2**16),
)
def test_matches_lapack(shape, data, dtype, max_rank, eps, seed):
    order = data.draw(st.permutations(range(len(shape))))
    split = data.draw(st.integers(0, len(shape)))
    rows, cols = tuple(order[:split]), tuple(order[split:])
    a = _random(np.random.default_rng(seed), shape, dtype)
    _check(a, rows, cols, max_rank, eps, TOL[dtype])


@pytest.mark.parametrize("shape, max_rank", [((32, 4, 4, 32), 16), ((4, 4, 32, 8), 12)])
def test_a_network_split_takes_the_gram_path(lapack_calls, shape, max_rank):
    a = np.random.default_rng(1).standard_normal(shape)
    _check(a, (0, 1), (2, 3), max_rank, 0.0, 1e-10)
    assert lapack_calls == []


def test_keeping_every_value_goes_straight_to_lapack(monkeypatch, lapack_calls):
    """The Gram path could keep every singular value only where the smallest is far
    above its error bound: a full SVD is LAPACK's, without a Gram matrix formed first."""
    monkeypatch.setattr(truncation, "_gram", None)  # would raise if called
    a = np.random.default_rng(5).standard_normal((12, 9))
    for max_rank in (None, 9, 20):
        _check(a, (0,), (1,), max_rank, 0.0, 1e-12)
    assert lapack_calls == ["reference_svd"] * 3


def test_an_eps_cut_inside_a_cluster_is_not_taken_from_the_gram_eigenvalues(lapack_calls):
    rng = np.random.default_rng(2)
    q1, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    q2, _ = np.linalg.qr(rng.standard_normal((30, 30)))
    values = np.r_[np.ones(5), 0.1 * (1 + 1e-14 * np.arange(10)), np.zeros(15)]
    a = (q1[:, :30] * values) @ q2.T
    eps = np.sqrt(0.055 / np.sum(values ** 2))  # keeps 10: a cut inside the 0.1s
    u, s, v, info = _check(a, (0,), (1,), None, eps, 1e-10)
    assert lapack_calls and info.rank == 10


def test_rank_deficient_and_wide_matrices():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 3)) @ rng.standard_normal((3, 50))  # rank 3, wide
    u, s, v, info = _check(a, (0,), (1,), None, 1e-12, 1e-7)
    assert info.rank == 3
    b = np.random.default_rng(4).standard_normal((5, 7, 3))[::-1, ::2, :]  # a strided view
    _check(b, (2, 0), (1,), None, 0.0, 1e-10)


def test_the_rank_rule_is_the_relative_frobenius_tail():
    a = np.diag([4.0, 3.0, 2.0, 1.0])
    norm = np.sqrt(30.0)
    assert svd(a, (0,), eps=np.int64(0))[3].rank == svd(a, (0,), eps=np.float32(0.0))[3].rank == 4
    assert svd(a, (0,), eps=1.01 / norm)[3].rank == 3  # a tail of 1 is within eps
    assert svd(a, (0,), eps=0.99 / norm)[3].rank == 4
    assert svd(a, (0,), eps=1.01 * np.sqrt(5.0) / norm)[3].rank == 2
    assert svd(a, (0,), eps=0.0, max_rank=1)[3].discarded_weight == pytest.approx(14.0)


def test_empty_and_zero_arrays_keep_nothing():
    u, s, v, info = svd(np.zeros((0, 3, 2)), (0, 1))
    assert (u.shape, s.shape, v.shape, info.rank, info.full_rank) == ((0, 3, 0), (0,),
                                                                      (0, 2), 0, 0)
    u, s, v, info = svd(np.zeros((3, 4)), (0,))
    assert (u.shape, s.shape, v.shape, info.rank, info.discarded_weight) == ((3, 0), (0,),
                                                                             (0, 4), 0, 0.0)


def test_a_vector_is_one_singular_value():
    x = np.array([3.0, 4.0])
    u, s, v, info = svd(x, (0,))
    assert s.tolist() == pytest.approx([5.0]) and v.shape == (1,) and info.full_rank == 1
    np.testing.assert_allclose(u[:, 0] * s[0] * v[0], x)


@pytest.mark.parametrize("dtype, factors, values", [
    (np.float32, np.float32, np.float32), (np.complex64, np.complex64, np.float32),
    (np.int32, np.float64, np.float64), (np.float16, np.float32, np.float32),
    (np.bool_, np.float64, np.float64), (np.complex128, np.complex128, np.float64)])
def test_dtypes_of_the_results(dtype, factors, values):
    u, s, v, _ = svd(np.eye(3, dtype=dtype), (0,))
    assert (u.dtype, s.dtype, v.dtype) == (factors, values, factors)
    np.testing.assert_allclose(s, [1, 1, 1], rtol=1e-6)


@pytest.mark.parametrize("args, kwargs, error", [
    (((0, 2),), {}, AxisError),
    (((0, -3),), {}, AxisError),
    (((0,), (0,)), {}, OperationError),
    (((0,), ()), {}, OperationError),
    (((0, 0), (1,)), {}, OperationError),
    (((0, 0),), {}, OperationError),  # no column axes given: a TypeError before
    (((0,),), {"max_rank": 0}, OperationError),
    (((0,),), {"max_rank": 1.5}, OperationError),
    (((0,),), {"eps": -1e-3}, OperationError),
    (((0,),), {"eps": float("nan")}, OperationError),
])
def test_bad_arguments_raise_before_any_work(args, kwargs, error):
    with pytest.raises(error):
        svd(np.ones((3, 4)), *args, **kwargs)


def test_bad_data_raises():
    with pytest.raises(OperationError, match="holds NaN or inf"):
        svd(np.array([[1.0, np.nan], [0.0, 1.0]]), (0,))
    with pytest.raises(DTypeError):
        svd(np.array([["a", "b"]]), (0,))


def test_a_cap_inside_a_dense_spectrum_takes_the_gram_path(lapack_calls):
    """A tensor-network split capped at D where the singular values at the cut are 0.3%
    apart: no gap to certify the kept subspace, but the factors are orthonormal and the
    truncation is the best one."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 4, 64)), rng.standard_normal((64, 4, 64))
    theta = np.einsum("aib,bjc->ajic", a, b)
    exact = np.linalg.svd(theta.reshape(256, 256), compute_uv=False)
    assert (exact[63] - exact[64]) / exact[0] < 4e-3
    _check(theta, (0, 1), (2, 3), 64, 0.0, 1e-10)
    assert lapack_calls == []


def test_an_axis_that_is_not_an_integer_is_refused_as_the_front_ends_refuse_it():
    with pytest.raises(IntegerTypeError):  # a TypeError, as NumPy's
        svd(np.ones((3, 4)), ("0",))
    with pytest.raises(AxisError):
        svd(np.ones((3, 4)), (2,))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
def test_singular_values_past_the_range_of_their_squares(scale, dtype):
    """Squares of 1e-200 underflow and of 1e200 overflow: the values were dropped (rank 0)
    or came back inf; the matrix is scaled by a power of two first."""
    a = (np.array([[3.0, 1.0, 0.2], [1.0, 2.0, 0.1], [0.5, 0.1, 1e-3], [1.0, 0.0, 0.0]])
         * scale).astype(dtype)
    want = np.linalg.svd(a.astype(np.complex128) / scale, compute_uv=False) * scale
    for m in (a, a.T):
        u, s, v, info = svd(m, (0,))
        np.testing.assert_allclose(s, want, rtol=1e-12)
        np.testing.assert_allclose((u * s) @ v, m, rtol=0, atol=1e-14 * scale)
        u, s, v, info = svd(m, (0,), eps=0.3)
        assert info.rank == 2 and s == pytest.approx(want[:2], rel=1e-12)
        weight = want[2] ** 2  # inf or 0 where it is past float64's range
        assert info.discarded_weight == pytest.approx(weight, rel=1e-9) or (
            weight in (0, np.inf) and info.discarded_weight == weight)

"""Front ends: sum, trace, partial_trace, diagonal, norm, inner_product, explain."""

import pickle
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta
from tenalg import api

from .strategies import COMPLEX, DTYPES, shapes, strided, tolerance, wide


@settings(max_examples=30, deadline=None)
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=4), dtype=st.sampled_from(DTYPES))
def test_sum_axis_forms(data, shape, dtype):
    a = data.draw(strided(shape, dtype))
    axes = data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), unique_by=lambda x: x % a.ndim,
                              max_size=a.ndim))
    axis = axes[0] if len(axes) == 1 and data.draw(st.booleans()) else tuple(axes)
    got = ta.sum(a, axis=axis)
    expected = np.sum(wide(a), axis=axis)
    np.testing.assert_allclose(wide(got), expected, rtol=4 * tolerance(dtype),
                               atol=4 * tolerance(dtype) * (np.abs(wide(a)).sum() + 1))


def test_sum_all_is_rank_0_and_host_is_python():
    a = np.arange(6.0).reshape(2, 3)
    assert ta.sum(a).shape == () and ta.sum_host(a) == 15.0
    assert isinstance(ta.sum_host(a), float)
    assert isinstance(ta.sum_host(a.astype(np.complex64)), complex)
    with pytest.raises(ta.OperationError, match="repeats"):
        ta.sum(a, axis=(0, -2))
    with pytest.raises(ta.DescriptorError, match="out of range"):
        ta.sum(a, axis=2)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_trace_matches_numpy(data, dtype):
    shape = data.draw(shapes(min_dims=2, max_dims=4))
    a = data.draw(strided(shape, dtype))
    axis1, axis2 = data.draw(st.permutations(range(a.ndim)))[:2]
    got = ta.trace(a, axis1, axis2)
    expected = np.trace(wide(a), axis1=axis1, axis2=axis2)
    np.testing.assert_allclose(wide(got), expected, rtol=4 * tolerance(dtype),
                               atol=4 * tolerance(dtype) * (np.abs(wide(a)).sum() + 1))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_partial_trace_matches_einsum(data, dtype):
    n, m, k = (data.draw(st.integers(0, 4)) for _ in range(3))
    a = data.draw(strided((n, m, k, n, m), dtype))
    got = ta.partial_trace(a, [(0, 3), (4, 1)])
    expected = np.einsum("ijkij->k", wide(a))
    np.testing.assert_allclose(wide(got), expected, rtol=4 * tolerance(dtype),
                               atol=4 * tolerance(dtype) * (np.abs(wide(a)).sum() + 1))


def test_trace_reads_a_view_not_a_copy():
    # A copy of this broadcast array would need 80 GB; a diagonal view reads 100 000 values.
    a = np.broadcast_to(np.float64(2.0), (100_000, 100_000))
    assert float(ta.trace(a)) == 200_000.0
    b = np.broadcast_to(np.float32(1.0), (3000, 7, 3000, 7))
    np.testing.assert_array_equal(ta.partial_trace(b, [(0, 2)]), np.full((7, 7), 3000.0))


def test_partial_trace_of_a_large_view_allocates_only_the_output():
    import tracemalloc

    big = np.ones((64, 32, 64, 32))[::-1, :, ::-1, :]  # a 32 MB negative-stride view
    ta.partial_trace(big, [(0, 2)])  # plan built and cached outside the measurement
    tracemalloc.start()
    result = ta.partial_trace(big, [(0, 2)])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.shape == (32, 32) and np.all(result == 64.0)
    assert peak < 4 * result.nbytes + 64 * 1024  # the 8 KB output and bookkeeping, no copy


def test_trace_of_a_matrix_is_rank_0_and_non_square_traces_the_square():
    a = np.arange(12.0).reshape(3, 4)
    assert ta.trace(a).shape == () and float(ta.trace(a)) == np.trace(a)
    assert float(ta.trace(a.T)) == np.trace(a.T)
    with pytest.raises(ta.DescriptorError, match="repeat"):
        ta.partial_trace(np.zeros((2, 2, 2)), [(0, 1), (1, 2)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_diagonal_sums_take_the_strided_kernel(dtype):
    """A trace and ``iij->j`` of C arrays with thousands of far-apart terms run on the
    threads of cpu.strided_sums (the plan says so) and agree with NumPy; a trace of a
    non-contiguous view, or of fewer terms than two threads want, keeps NumPy's diagonal
    sum."""
    rng = np.random.default_rng(0)
    small = rng.standard_normal((2000, 2000)).astype(dtype)
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(small, "ii"), out=dtype, out_modes=""))
    assert "numpy.add.reduce of A's diagonal" in plan.explain()
    np.testing.assert_allclose(ta.trace(small), np.trace(small, dtype=np.float64), rtol=1e-5)
    a = np.zeros((4200, 4200), dtype)
    np.fill_diagonal(a, rng.standard_normal(4200))
    b = rng.standard_normal((1100, 1100, 5)).astype(dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ii"), out=dtype, out_modes=""))
    assert "strided_sums" in plan.explain()
    np.testing.assert_allclose(ta.trace(a), np.trace(a, dtype=np.float64), rtol=rtol)
    np.testing.assert_allclose(ta.einsum("iij->j", b),
                               np.einsum("iij->j", b.astype(np.float64)), rtol=rtol)
    out = np.full(5, np.nan, dtype)
    ta.einsum("iij->j", b, out=out)
    np.testing.assert_allclose(out, np.einsum("iij->j", b.astype(np.float64)), rtol=rtol)
    c = rng.standard_normal((64, 32, 64, 32)).astype(dtype)
    np.testing.assert_allclose(ta.partial_trace(c, [(0, 2)]),
                               np.einsum("ijik->jk", c.astype(np.float64)), rtol=rtol,
                               atol=rtol * 10)
    out = np.full((32, 32), np.nan, dtype).T  # not C-contiguous: NumPy's einsum fills it
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(c, "ijik"), out_modes="jk",
                                          out=ta.TensorDescriptor.from_array(out)))
    assert "strided_sums" not in plan.explain()
    np.testing.assert_allclose(plan.execute_into(out, c), np.einsum("ijik->jk", c),
                               rtol=rtol, atol=rtol * 10)
    view = a[::-1]
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(view, "ii"), out=dtype, out_modes=""))
    assert "strided_sums" not in plan.explain()
    np.testing.assert_allclose(ta.trace(view), np.trace(view, dtype=np.float64), rtol=rtol)


def test_diagonal_views():
    a = np.arange(24.0).reshape(2, 3, 2, 2)
    d = ta.diagonal(a, 0, 2)
    np.testing.assert_array_equal(d, np.diagonal(a, axis1=0, axis2=2))
    assert np.shares_memory(d, a) and not d.flags.writeable
    dd = ta.diagonals(a, [(0, 2), (1, 3)])
    np.testing.assert_array_equal(dd, np.einsum("ijij->ij", a[:, :2, :, :]))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=shapes(min_dims=2, max_dims=5, max_side=4))
def test_diagonals_are_numpys_read_only_views(data, shape):
    """Diagonals of any strided layout (negative, zero strides), one pair or several:
    NumPy's values, extents and strides (the survivors, then a diagonal axis per pair,
    each as long as the shorter of its axes), read-only views of the array's memory."""
    a = data.draw(strided(shape, np.float64, allow_broadcast=True))
    axes = data.draw(st.permutations(range(a.ndim)))
    pairs = [tuple(axes[k:k + 2]) for k in range(0, data.draw(st.integers(1, a.ndim // 2)) * 2, 2)]
    expected = a
    for k, (i, j) in enumerate(pairs):  # axis indices of a, then the diagonals appended
        moved = [ax for ax in range(a.ndim) if ax not in sum(pairs[:k], ())]
        expected = np.diagonal(expected, axis1=moved.index(i), axis2=moved.index(j))
    got = ta.diagonals(a, pairs)
    assert got.shape == expected.shape and got.strides == expected.strides
    np.testing.assert_array_equal(got, expected)
    assert not got.flags.writeable and (a.size == 0 or np.shares_memory(got, a))
    i, j = pairs[0]
    for first, second in ((i, j), (np.int64(i), j), (i - a.ndim, j)):  # plain ints or not
        single = ta.diagonal(a, first, second)
        assert single.strides == np.diagonal(a, axis1=i, axis2=j).strides
        np.testing.assert_array_equal(single, np.diagonal(a, axis1=i, axis2=j))
        assert not single.flags.writeable


@pytest.mark.filterwarnings("error")  # overflows and underflows stay inside
def test_norm_scales_huge_and_tiny_values():
    for value in (1e300, 1e-300, 5e-324, 1e-160, 1e160):
        x = np.full(16, value)
        assert ta.norm_host(x) == pytest.approx(4 * value, rel=1e-12, abs=0)
    mixed = np.array([3e-161, 4e-161, 0.0])  # squares below float64's normals: scaled first
    # (pytest.approx's default absolute tolerance would pass any tiny value)
    assert ta.norm_host(mixed) == pytest.approx(5e-161, rel=1e-14, abs=0)
    huge = ta.norm_host(np.full(2, 3e200 + 4e200j))
    assert huge == pytest.approx(2 ** 0.5 * 5e200, rel=1e-14, abs=0)
    assert np.isnan(ta.norm_host(np.array([np.inf, np.nan])))
    nan_inf = complex(np.nan, np.inf)
    for values in ([complex(np.inf, np.nan), 1], [nan_inf, 1], [1, nan_inf], [np.nan, np.inf]):
        for dtype in (np.complex128, np.complex64):  # (the first had given inf: a NaN
            assert np.isnan(ta.norm_host(np.array(values, dtype)))  # ignored by max)
    assert ta.norm_host(np.array([np.inf, 1.0, -np.inf])) == np.inf
    for big in (np.full(4, 1e308), np.full(2, 1.7e308 + 1e308j), np.full(2, 3e38, np.float32),
                np.full(70000, 255, np.float16), np.full(4, 3e38, ta.bfloat16)):
        norm = ta.norm(big)  # past the dtype's range: inf, as NumPy's (math.ldexp had
        assert norm == np.inf and norm.dtype == big.real.dtype  # raised OverflowError)
    for within in (np.full(4, 1e20, np.float32), np.full(4, 1e4, np.float16)):
        assert ta.norm(within) == 2 * within[0] and ta.norm(within).dtype == within.dtype
    for dtype in (np.float16, ta.bfloat16, np.float32):  # just past the max, rounding to it
        top = float(ml_dtypes.finfo(dtype).max)
        near = np.array([top, top * 2.0**-12], dtype)
        assert ta.norm(near) == np.array(top, dtype)  # (it had given inf)


def test_norm_of_a_view_copies_at_most_once():
    """A view that fills its memory is read in place; any other is copied once (np.vdot
    had flattened both of its operands: twice the view's size)."""
    tracemalloc = pytest.importorskip("tracemalloc")
    base = np.arange(2.0**20).reshape(1024, 1024)
    single = base.astype(np.float32)  # 32-bit data: no float64 copy (it had cost a
    cases = ((base.T, 0), (base[:, ::2], 1), ((base + 1j).T, 0), (single[::-1, ::-1], 0),
             (single[:, ::2], 1), ((single + 1j).astype(np.complex64).T, 0))  # 60x NumPy's
    for view, copies in cases:                                               # time)
        expected = np.sqrt(np.sum(np.abs(view.astype(np.complex128)) ** 2))
        ta.norm(view)  # compiled first (the kernels are, while the test traces)
        tracemalloc.start()
        got = ta.norm_host(view)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert got == pytest.approx(expected, rel=1e-12 if view.real.dtype == np.float64 else 1e-6)
        assert peak < (copies + 0.25) * view.nbytes
    rng = np.random.default_rng(5)
    for dtype in (np.float64, np.float32, np.float16, ta.bfloat16, np.complex128,
                  np.complex64):
        x = (rng.standard_normal((300, 7)) * (1 + 1j if dtype in COMPLEX else 1)).astype(dtype)
        for view in (x, x.T, x[:, ::2]):  # contiguous (a kernel of squares) or not (a copy)
            exact = np.linalg.norm(view.astype(np.complex128).ravel())  # rounded to x's
            rel = 1e-13 if dtype in (np.float64, np.complex128) else float(  # precision
                ml_dtypes.finfo(ta.norm(view).dtype).eps)
            assert ta.norm_host(view) == pytest.approx(exact, rel=rel, abs=0)
    f = np.full(4, 1.5e38, np.float32)  # the squares overflow float32, the norm does not
    assert float(ta.norm(f)) == pytest.approx(3e38, rel=1e-6) and ta.norm(f).dtype == np.float32
    z = np.array([3 + 4j, 0], np.complex64)
    assert ta.norm(z).dtype == np.float32 and float(ta.norm(z)) == pytest.approx(5.0)
    assert ta.norm_host(np.zeros(3)) == 0.0
    assert np.isnan(ta.norm_host(np.array([1.0, np.nan])))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_inner_product_is_conjugate_linear_on_the_left(dtype):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(dtype)
    b = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(dtype)
    np.testing.assert_allclose(ta.inner_product(a, b), np.vdot(a, b), rtol=1e-5)
    assert ta.inner_product_host(a, b) == pytest.approx(complex(np.vdot(a, b)), rel=1e-5)
    # every layout pair: one BLAS dot where both share a dense layout, else the plan
    c = np.asfortranarray(b)
    for x, y in ((a.T, b.T), (a, c), (a[:, ::-1], b[:, ::-1]), (a[:, ::2], b[:, ::2]),
                 (a.real.astype(dtype), b)):
        got = ta.inner_product(x, y)
        assert got.dtype == np.result_type(x, y) and got.shape == ()
        np.testing.assert_allclose(got, np.vdot(x, y), rtol=1e-5)


def test_explain_shows_layout_and_kernel():
    a = np.zeros((64, 32, 64, 32))
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ijik"), out_modes="jk"))
    text = plan.explain()
    assert "reduction plan" in text and "loops after" in text and "kernel:" in text
    assert "65568" in text  # the diagonal of i: stride 65536 + 32 elements


def test_layout_fuses_contiguous_modes():
    a = np.zeros((4, 5, 6))
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ijk"), out_modes="ijk"))
    assert len(plan.loops) == 1 and plan.loops[0].extent == 120
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ijk"), out_modes="kij", order="C"))
    assert [loop.extent for loop in plan.loops] == [6, 20]


def test_to_host():
    a = np.arange(3.0)
    assert ta.to_host(a) is a


def test_cache_keys_only_on_exact_ints():
    from tenalg.calls import plain_ints as _ints

    for value in (None, 1, (), (1, 0), ((0, 2), (1, 3)), (1, (2, 3))):
        assert _ints(value), value
    for value in (True, 1.0, np.int64(1), [1], (True,), (1.0, 0), ((0, 2.0),), ((0, True),),
                  (np.int64(0),), ((0, 2), [1, 3])):
        assert not _ints(value), value


def test_cached_front_end_calls_still_check_their_arguments():
    """A call cached for good arguments never lets a bad one through on the same layout."""
    a = np.arange(12.0).reshape(3, 4)
    for _ in range(2):  # the second round runs from the cache
        assert ta.sum(a, 1).tolist() == [6.0, 22.0, 38.0]
        assert ta.permute(a, (1, 0), alpha=2).tolist() == (2 * a.T).tolist()
        assert float(ta.trace(a)) == 15.0
        with pytest.raises(ta.DescriptorError, match="integer"):
            ta.sum(a, True)
        with pytest.raises(ta.DescriptorError, match="not a permutation"):
            ta.permute(a, (0, 0))
        with pytest.raises(ta.DescriptorError, match="two axes"):
            ta.partial_trace(a, [(0, 1, 1)])
        with pytest.raises(ta.DescriptorError, match="pairs of axes"):
            ta.partial_trace(a, [0])
        assert ta.sum(a, 1, out=np.empty(3, np.float32)).dtype == np.float32
        with pytest.raises(ta.ExtentError, match="extents 3 and 4"):
            ta.sum(a, 1, out=np.empty(4))
        with pytest.raises(TypeError, match="numpy.ndarray"):  # as NumPy
            ta.sum(a, 1, out=[0.0] * 3)
        assert ta.elementwise_binary(a, "ij", a, "ij", "ij", beta=2).tolist() == (3 * a).tolist()
        assert ta.elementwise_binary(a, "ij", a.T, "ji", "ij").tolist() == (2 * a).tolist()
        for kwargs, error, words in [
                ({"op": "sub"}, ta.OperationError, "unknown Binary"),
                ({"alpha": True}, ta.DescriptorError, "alpha must be a number"),
                ({"unary_a": "bogus"}, ta.OperationError, "unknown Unary"),
                ({"out": np.empty((4, 3))}, ta.ExtentError, "incompatible extents"),
                ({"out": a}, ta.AliasError, "shares memory")]:
            before = a.copy()
            with pytest.raises(error, match=words):
                ta.elementwise_binary(a, "ij", a, "ij", "ij", **kwargs)
            assert np.array_equal(a, before)
        with pytest.raises(ta.ExtentError, match="incompatible extents"):
            ta.elementwise_binary(a, "ij", a, "ji", "ij")
        assert np.allclose(ta.contract(a, "ij", a, "kj", "ik"), a @ a.T)
        c = np.ones((3, 3))
        assert np.allclose(ta.contract(a, "ij", a, "kj", "ik", c=c, alpha=2, beta=0.5),
                           2 * a @ a.T + 0.5)
        with pytest.raises(ta.ExtentError, match="incompatible extents"):
            ta.contract(a, "ij", a, "jk", "ik")
        with pytest.raises(ta.ScalarCountError, match="no addend"):
            ta.contract(a, "ij", a, "kj", "ik", beta=1)
    # argument forms a cache does not key on (lists, NumPy integers) run checked, uncached
    assert ta.sum(a, [np.int64(0)]).tolist() == [12.0, 15.0, 18.0, 21.0]
    assert ta.permute(a, [1, 0]).tolist() == a.T.tolist()
    assert float(ta.trace(a[:, ::-1])) == float(np.trace(a[:, ::-1]))
    assert ta.partial_trace(np.ones((2, 3, 4)), ((0, 2),)).tolist() == [2.0, 2.0, 2.0]
    assert np.allclose(ta.contract(a, ["i", "j"], a, ["k", "j"], ["i", "k"]), a @ a.T)
    assert ta.elementwise_trinary(a, ["i", "j"], a, ("i", "j"), a, "ij", "ij", gamma=1.0,
                                  unary_c=ta.Unary.NEGATE).tolist() == a.tolist()


def test_norm_of_unpickled_arrays():
    """Found by CI (a Dask worker's KeyError): an array unpickled in another process has
    a dtype equal to NumPy's but another object; the norm type's cache then kept a
    float64 that was not NumPy's own, and the norm looked it up among the narrow types'
    largest values.  Every later norm in that process failed."""
    api._norm_type.cache_clear()  # the first norm of the process: an unpickled array's
    for dtype in (np.float64, np.float32, np.float16, ml_dtypes.bfloat16, np.complex128):
        shipped = pickle.loads(pickle.dumps(np.array([3, -4], dtype)))
        assert float(ta.norm(shipped)) == 5.0
        assert float(ta.norm(np.array([3, -4], dtype))) == 5.0
    huge = pickle.loads(pickle.dumps(np.array([60000, 60000], np.float16)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ta.norm(huge) == np.inf  # past float16's largest: inf, without a warning

"""Permutations and elementwise operations against NumPy on random strided layouts."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta
from tenalg.dtypes import compute_type

from .strategies import DTYPES, KERNELS, REAL, shapes, strided, tolerance, wide

UNARY = {
    "identity": lambda x: x, "negate": np.negative, "abs": np.abs, "sqrt": np.sqrt,
    "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "reciprocal": np.reciprocal, "conjugate": np.conjugate,
    "relu": lambda x: np.where(x.real > 0, x, 0),
}


def expected_in_compute(x, unary, alpha, compute, dtype):
    with np.errstate(all="ignore"):
        y = UNARY[unary](x.astype(compute))
        if alpha != 1:
            y = np.asarray(alpha, compute) * y
        return np.asarray(y).astype(dtype)


@pytest.mark.parametrize("kernels", KERNELS)
@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=shapes(max_dims=6, max_side=3), dtype=st.sampled_from(DTYPES),
       alpha=st.sampled_from([1, 2.0, -0.5]))
def test_permutation_matches_numpy_exactly(kernels, data, shape, dtype, alpha):
    a = data.draw(strided(shape, dtype, allow_broadcast=True))
    axes = data.draw(st.permutations(range(len(shape))))
    operation = ta.Operation.permutation(ta.Operand(a, range(a.ndim)), out_modes=axes,
                                         order="C")
    got = ta.Plan(operation, backend=kernels).execute(a, alpha=alpha)
    compute = compute_type([a.dtype])
    expected = expected_in_compute(a.transpose(axes), "identity", alpha, compute, a.dtype)
    assert got.flags.c_contiguous and got.dtype == a.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("unary", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, ml_dtypes.bfloat16])
def test_every_unary(kernels, unary, dtype):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.1, 2.0, (3, 5))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, (3, 5))
    x[0, 0] = -x[0, 0].real  # relu and abs see a negative value
    a = x.astype(dtype)
    operation = ta.Operation.permutation(ta.Operand(a, "ij", unary), out_modes="ji")
    got = ta.Plan(operation, backend=kernels).execute(a)
    compute = compute_type([a.dtype])
    expected = expected_in_compute(a.T, unary, 1, compute, a.dtype)
    np.testing.assert_allclose(wide(got), wide(expected), rtol=tolerance(dtype), equal_nan=True)
    if unary == "conjugate" and np.dtype(dtype).kind == "c":
        assert np.all(got.imag == -a.T.imag)


BINARY = {"add": np.add, "mul": np.multiply, "min": np.fmin, "max": np.fmax}


@st.composite
def broadcast_pair(draw, dtypes):
    shape = draw(shapes(min_dims=1, max_dims=4))
    dtype_a = draw(st.sampled_from(dtypes))
    dtype_b = draw(st.sampled_from(dtypes))
    shape_b = tuple(1 if draw(st.booleans()) else e for e in shape)
    a = draw(strided(shape, dtype_a))
    b = draw(strided(shape_b, dtype_b))
    return a, b


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("op", sorted(BINARY))
@settings(max_examples=25, deadline=None)
@given(pair=broadcast_pair(REAL), alpha=st.sampled_from([1, 2.0]),
       beta=st.sampled_from([1, -3.0]))
def test_binary_matches_numpy(kernels, op, pair, alpha, beta):
    a, b = pair
    modes = "ijkl"[: a.ndim]
    operation = ta.Operation.elementwise_binary(
        ta.Operand(a, modes), ta.Operand(b, modes), out_modes=modes[::-1], op=op
    )
    got = ta.Plan(operation, backend=kernels).execute(a, b, alpha=alpha, beta=beta)
    compute = operation.compute
    expected = BINARY[op](alpha * a.astype(compute), beta * b.astype(compute))
    expected = expected.transpose(range(a.ndim)[::-1]).astype(got.dtype)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kernels", KERNELS)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_trinary_with_broadcast_matches_numpy(kernels, data, dtype):
    n, m = data.draw(st.integers(0, 6)), data.draw(st.integers(1, 6))
    a = data.draw(strided((n, m), dtype))
    b = data.draw(strided((1, m), dtype))
    c = data.draw(strided((m,), dtype))
    operation = ta.Operation.elementwise_trinary(
        ta.Operand(a, "ij"), ta.Operand(b, "ij"), ta.Operand(c, "j"), out_modes="ij"
    )
    got = ta.Plan(operation, backend=kernels).execute(a, b, c, alpha=2, beta=3, gamma=0.5)
    compute = operation.compute
    expected = (2 * a.astype(compute) + 3 * b.astype(compute)) + 0.5 * c.astype(compute)
    np.testing.assert_allclose(wide(got), wide(expected.astype(dtype)), rtol=tolerance(dtype))


@pytest.mark.parametrize("kernels", KERNELS)
def test_min_max_nan_and_signed_zero(kernels):
    a = np.array([np.nan, 1.0, 0.0, -0.0])
    b = np.array([1.0, np.nan, -0.0, 0.0])
    for op, zero_sign in (("min", True), ("max", False)):
        operation = ta.Operation.elementwise_binary(ta.Operand(a, "i"), ta.Operand(b, "i"),
                                                    out_modes="i", op=op)
        got = ta.Plan(operation, backend=kernels).execute(a, b)
        assert np.isnan(got[0]) and np.isnan(got[1])
        assert np.signbit(got[2]) == zero_sign and np.signbit(got[3]) == zero_sign


def test_mixed_dtypes_promote_and_convert_at_the_write():
    a = np.ones(4, np.float16)
    b = np.full(4, 0.1, np.float32)
    got = ta.elementwise_binary(a, "i", b, "i", "i")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.float32(1) + np.float32(0.1))


def test_front_end_permute_and_binary():
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(ta.permute(a, (2, 0, 1), alpha=2),
                                  2 * a.transpose(2, 0, 1))
    out = np.empty((4, 2, 3))
    assert ta.permute(a, (2, 0, 1), out=out) is out
    np.testing.assert_array_equal(out, a.transpose(2, 0, 1))
    x = ta.elementwise_binary(a, "ijk", a[0, 0], "k", "kij", op="mul", unary_b="negate")
    np.testing.assert_array_equal(x, (a * -a[0, 0]).transpose(2, 0, 1))

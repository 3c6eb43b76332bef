"""The tensor-train layer's Numba kernels against the twins that serve while they compile
(kernels.compiler): the same values, for every dtype and edge a rounding meets."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenalg.kernels import compiler
from tenalg.linalg import smallchol, truncation
from tenalg.tt.linalg import batched

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture
def compiling(monkeypatch):
    """Every kernel reads as not compiled yet: the twins run."""
    monkeypatch.setattr(compiler, "ready_for", lambda kernel, args, key: False)


def _random(rng, shape, dtype):
    scales = 10.0 ** rng.integers(-30, 30, size=shape[:1] + (1,) * (len(shape) - 1))
    x = rng.standard_normal(shape) * scales
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.sampled_from(DTYPES), st.integers(0, 2**16),
       st.booleans())
def test_normalize_kernel_matches_numpy(g, n, dtype, seed, strided):
    """The same products and logs, exactly: each row times the power of two at or just
    above its largest modulus; rows of zeros, infinities and NaN are scaled by 1."""
    rng = np.random.default_rng(seed)
    x = _random(rng, (g, n, 3, n), dtype)
    x[0] = 0
    if g > 2:
        x[1, 0, 0, 0] = np.inf
        x[2, -1, -1, -1] = np.nan
    if strided:
        x = x.transpose(0, 3, 2, 1)
    logs = rng.standard_normal(g)
    y, new = batched.normalize(x, logs)
    e = batched._exponents(x)  # the twin's powers of two
    used = np.rint((new - logs) / batched.LN2).astype(int)  # the kernel's
    if np.dtype(dtype).kind == "c":  # moduli may differ in the last bit: a power apart
        assert np.all(np.abs(used - e) <= 1)
    else:
        np.testing.assert_array_equal(used, e)
    np.testing.assert_array_equal(new, logs + used * batched.LN2)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(y, x * np.ldexp(1.0, -used).reshape(-1, 1, 1, 1))
    assert y.dtype == x.dtype and y.shape == x.shape


@pytest.mark.parametrize("value,dtype", [(5e-324, np.float64), (1e-45, np.float32),
                                         (1.5e307, np.float64), (3e38, np.float32)])
def test_scaling_is_exact_at_the_ends_of_the_range(value, dtype):
    """2^1074 does not fit a float64 nor 2^148 a float32: the powers go in two factors."""
    x = np.full((1, 2, 3), value, dtype)
    x[0, 1, 2] = -value
    y, logs = batched.normalize(x, np.zeros(1))
    assert np.isfinite(y).all() and 0.5 < np.abs(y).max() <= 1.0
    assert np.ldexp(1.0, int(round(logs[0] / batched.LN2))) * y[0, 0, 0] == x[0, 0, 0]


def test_normalize_twin_serves_while_compiling(compiling):
    x = np.array([[3.0, -6.0]])
    y, logs = batched.normalize(x, np.zeros(1))
    assert y.tolist() == [[0.375, -0.75]] and logs.tolist() == [np.log(8.0)]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("order", ["C", "F"])
def test_gram_factors_kernel_matches_numpy(monkeypatch, dtype, order):
    rng = np.random.default_rng(3)
    v = _random(rng, (5, 6, 6), dtype)
    if order == "F":  # each matrix column-major, as LAPACK's dsyevd gives it
        v = np.asfortranarray(v.transpose(0, 2, 1)).transpose(0, 2, 1)
    s = np.sort(np.abs(rng.standard_normal((5, 6))), axis=1)[:, ::-1].copy()
    s[1, 2:] = 0  # a zero singular value kept: scaled by 0, not by inf
    k = np.array([3, 4, 1, 6, 2])
    scaled, right = truncation._factors(s, v, k)
    monkeypatch.setattr(compiler, "ready_for", lambda kernel, args, key: False)
    scaled0, right0 = truncation._factors(s, v, k)
    np.testing.assert_array_equal(scaled, scaled0)
    np.testing.assert_array_equal(right, right0)
    assert not scaled[2, :, 1:].any() and not right[4, 2:].any()


@pytest.mark.parametrize("g", [3, smallchol.MIN_STACK + 2])
def test_shifted_cholesky_kernel_matches_lapack(compiling, g):
    """Per matrix: the factors and weights to rounding, the same positive-definite flags; a
    matrix that is not positive definite spoils none of its neighbours."""
    rng = np.random.default_rng(g)
    x = rng.standard_normal((g, 5, 9))
    a = x @ x.transpose(0, 2, 1)
    a[1] = -np.eye(5)
    shift = np.abs(rng.standard_normal(g))
    shift[1] = 0.5  # -1 + 0.5: still not positive definite
    twin = smallchol.shifted_cholesky(a, shift)  # LAPACK, one matrix at a time
    for f in (smallchol._factor, smallchol._factor_each):
        c, inv = np.empty_like(a), np.empty_like(a)
        pd, weight = np.empty(g, dtype=bool), np.empty(g)
        f(a, shift, c, inv, pd, weight)
        assert pd.tolist() == twin[2].tolist() == [i != 1 for i in range(g)]
        np.testing.assert_allclose(c[pd], twin[0][pd], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(inv[pd], twin[1][pd], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weight[pd], twin[3][pd], rtol=1e-10)
        np.testing.assert_allclose(c[pd] @ c[pd].transpose(0, 2, 1),
                                   a[pd] + shift[pd, None, None] * np.eye(5), atol=1e-12)

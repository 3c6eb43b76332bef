"""Batched Cholesky factors and inverses against LAPACK's."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenalg.tt.linalg import smallchol

U = np.finfo(np.float64).eps


def _spd(rng, g, n, cond):
    """Symmetric positive definite matrices with eigenvalues from 1 down to 1 / cond."""
    out = []
    for _ in range(g):
        q = np.linalg.qr(rng.standard_normal((n, n)))[0]
        out.append((q * np.geomspace(1, 1 / cond, n)) @ q.T)
    return np.array(out)


def _check(a, c, inv):
    c0, inv0 = smallchol.reference_cholesky_inverse(a)
    n = a.shape[1]
    for i in range(len(a)):
        kappa = np.linalg.cond(a[i])
        assert np.array_equal(np.triu(c[i], 1), np.zeros((n, n)))
        assert np.linalg.norm(c[i] @ c[i].T - a[i]) <= 4 * n * U * np.linalg.norm(a[i])
        np.testing.assert_allclose(c[i], c0[i], atol=4 * n * U * kappa * np.abs(c0[i]).max())
        np.testing.assert_allclose(inv[i], inv0[i], atol=4 * n * U * kappa * np.abs(inv0[i]).max())


@pytest.mark.parametrize("n", [1, 3, 16, 33])
@pytest.mark.parametrize("cond", [1.0, 1e4, 1e12])
def test_matches_lapack(n, cond):
    rng = np.random.default_rng(n)
    a = _spd(rng, smallchol.MIN_STACK + 3, n, cond)
    c, inv = smallchol.cholesky_inverse(a)
    _check(a, c, inv)


def test_not_positive_definite_raises_like_lapack():
    rng = np.random.default_rng(1)
    a = _spd(rng, 20, 5, 10.0)
    for bad in (-np.eye(5), np.zeros((5, 5))):
        b = a.copy()
        b[7] = bad
        for f in (smallchol.cholesky_inverse, smallchol.reference_cholesky_inverse):
            with pytest.raises(np.linalg.LinAlgError):
                f(b)
    a[7, 2, 1] = np.nan  # LAPACK does not check for NaN: it spreads into that matrix
    c, inv = smallchol.cholesky_inverse(a)
    c0, inv0 = smallchol.reference_cholesky_inverse(a)
    assert np.isnan(c[7]).any() and np.array_equal(np.isnan(c[7]), np.isnan(c0[7]))
    keep = np.arange(20) != 7
    _check(a[keep], c[keep], inv[keep])


def test_small_stacks_one_at_a_time_and_complex_on_lapack():
    """Fewer than MIN_STACK matrices go through the scalar kernel: the blocked kernel's
    results bit for bit, LAPACK's to rounding; complex stacks are LAPACK's."""
    rng = np.random.default_rng(2)
    a = _spd(rng, 20, 7, 1e6)
    c_all, inv_all = smallchol.cholesky_inverse(a)
    for b in (a[:1], a[3:6]):
        c, inv = smallchol.cholesky_inverse(b)
        lo = 0 if len(b) == 1 else 3
        np.testing.assert_array_equal(c, c_all[lo:lo + len(b)])
        np.testing.assert_array_equal(inv, inv_all[lo:lo + len(b)])
        _check(b, c, inv)
    with pytest.raises(np.linalg.LinAlgError):
        smallchol.cholesky_inverse(-a[:2])
    for x, y in zip(smallchol.cholesky_inverse(a + 0j),
                    smallchol.reference_cholesky_inverse(a + 0j), strict=True):
        np.testing.assert_array_equal(x, y)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 20), st.integers(16, 40), st.integers(0, 2**16), st.floats(-100, 100))
def test_hypothesis(n, g, seed, log_scale):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((g, n, n + 2))
    a = (x @ x.transpose(0, 2, 1)) * 2.0 ** log_scale
    c, inv = smallchol.cholesky_inverse(a)
    _check(a, c, inv)

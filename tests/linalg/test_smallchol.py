"""Batched Cholesky factors and inverses against LAPACK's."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenalg.linalg import smallchol

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
    c, inv = smallchol.cholesky_inverse(a + 0j)
    _check(a, c.real, inv.real)
    assert not c.imag.any() and not inv.imag.any()


@pytest.mark.parametrize("g", [1, smallchol.MIN_STACK + 1])
def test_large_matrices_on_lapack(g):
    """Matrices over MAX_SIZE x MAX_SIZE go to LAPACK's potrf and trtri, one at a time: a
    matrix's results do not depend on the stack's size; one not positive definite is
    flagged, its neighbours untouched."""
    rng = np.random.default_rng(3)
    n = smallchol.MAX_SIZE + 7
    a = _spd(rng, g, n, 1e6)
    c, inv = smallchol.cholesky_inverse(a)
    _check(a, c, inv)
    one = smallchol.cholesky_inverse(a[-1:])
    np.testing.assert_array_equal(one[0][0], c[-1])
    b = a.copy()
    b[0] = -np.eye(n)
    c2, inv2, pd, weight = smallchol.shifted_cholesky(b, np.zeros(g))
    assert pd.tolist() == [False] + [True] * (g - 1) and np.isnan(weight[0])
    np.testing.assert_array_equal(c2[1:], c[1:])
    np.testing.assert_allclose(weight[1:], (inv[1:] ** 2).sum(axis=(1, 2)), rtol=1e-12)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 20), st.integers(16, 40), st.integers(0, 2**16), st.floats(-100, 100))
def test_hypothesis(n, g, seed, log_scale):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((g, n, n + 2))
    a = (x @ x.transpose(0, 2, 1)) * 2.0 ** log_scale
    c, inv = smallchol.cholesky_inverse(a)
    _check(a, c, inv)


def _semidefinite(rng, g, n, rank, spread):
    """Gram matrices M M^T of rank ``rank`` (M n x 3n, singular values from 1 to 1/spread)."""
    out = []
    for _ in range(g):
        u = np.linalg.qr(rng.standard_normal((n, n)))[0][:, :rank]
        v = np.linalg.qr(rng.standard_normal((3 * n, n)))[0][:, :rank]
        m = (u * np.geomspace(1, 1 / spread, rank)) @ v.T
        out.append(m @ m.T)
    return np.array(out)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 24), st.integers(1, 24), st.integers(1, 40), st.integers(0, 2**16),
       st.sampled_from([1.0, 1e3]))
def test_pivoted_cholesky_stops_at_the_rank(n, rank, g, seed, spread):
    """P^T A P = L L^T to rounding on the pivots, F A F^T = I_k, C F A = A (the Schur
    complement of a rank-k matrix is roundoff), zeros past k; k is A's rank."""
    rank = min(rank, n)
    rng = np.random.default_rng(seed)
    a = _semidefinite(rng, g, n, rank, spread)
    tol = np.full(g, 1e-10)
    c, f, k = smallchol.pivoted_cholesky(a, tol)
    assert (k == rank).all()
    for i in range(g):
        scale = np.linalg.norm(a[i])
        assert not c[i][:, rank:].any() and not f[i][rank:].any()
        eye = np.diag([1.0] * rank + [0.0] * (n - rank))
        np.testing.assert_allclose(f[i] @ a[i] @ f[i].T, eye, atol=1e3 * n * U * spread**2)
        np.testing.assert_allclose(c[i] @ f[i] @ a[i], a[i], atol=1e3 * n * U * spread**2 * scale)
        # F = L11^-1 P_k^T uses exactly the k pivot rows of A
        assert (np.abs(f[i]).sum(axis=0) > 0).sum() == rank


def test_pivoted_cholesky_edges():
    """A zero matrix has rank 0 (F = 0); a NaN stops the factorisation; one full-rank
    matrix is a permuted Cholesky factorisation (F A F^T = I); tolerances are per matrix."""
    rng = np.random.default_rng(5)
    a = _spd(rng, 4, 6, 10.0)
    a[1] = 0
    a[2, 3, 3] = np.nan
    c, f, k = smallchol.pivoted_cholesky(a, np.array([1e-12, 1e-12, 1e-12, 10.0]))
    assert k[0] == 6 and k[1] == 0 and not f[1].any() and not c[1].any()
    assert k[2] < 6 and k[3] == 0  # every pivot of a[3] (eigenvalues <= 1) is below 10
    np.testing.assert_allclose(f[0] @ a[0] @ f[0].T, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(c[0] @ c[0].T, a[0], atol=1e-14)

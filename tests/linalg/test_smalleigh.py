"""The batched Jacobi eigensolver against LAPACK's eigh."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenalg.linalg import smalleigh

U = np.finfo(np.float64).eps


def _orthogonal(rng, n):
    return np.linalg.qr(rng.standard_normal((n, n)))[0]


def _with_spectrum(rng, spectra):
    """Symmetric matrices Q diag(w) Q^T, one per row of ``spectra``."""
    out = []
    for w in spectra:
        q = _orthogonal(rng, len(w))
        out.append((q * np.asarray(w, dtype=float)) @ q.T)
    return np.array(out)


def _kinds(rng, n, count):
    """Stacks of each kind of matrix the solver must handle, ``count`` matrices each."""
    sym = rng.standard_normal((count, n, n))
    tall = rng.standard_normal((count, 3 * n, n))
    graded = np.geomspace(1, 1e-15, n)
    return {
        "random": sym + sym.transpose(0, 2, 1),
        "gram": tall.transpose(0, 2, 1) @ tall,
        "clustered": _with_spectrum(rng, [np.r_[np.ones(n // 2), 1 + 1e-13 * np.arange(n - n // 2)]
                                          * (1 + i) for i in range(count)]),
        "rank-deficient": _with_spectrum(rng, [np.r_[rng.random(n // 3) + 1, np.zeros(n - n // 3)]
                                               for _ in range(count)]),
        "zero": np.zeros((count, n, n)),
        "graded": _with_spectrum(rng, [graded * 10.0 ** i for i in range(-3, count - 3)]),
        "diagonally graded": np.array([np.diag(graded) + 1e-8 * np.outer(graded, graded)
                                       for _ in range(count)]) * 1e100,
    }


def _check(a, w, v):
    """Eigenvalues of LAPACK, and the backward error and subspaces at LAPACK's level."""
    n = a.shape[1]
    w0, v0 = np.linalg.eigh(a)
    for i in range(len(a)):
        norm = np.linalg.norm(a[i])
        bound = 16 * n * U * norm
        np.testing.assert_array_less(np.abs(w[i] - w0[i]), bound + 1e-300)
        assert np.all(np.diff(w[i]) >= 0)
        assert np.linalg.norm(a[i] @ v[i] - v[i] * w[i]) <= bound + 1e-300
        assert np.linalg.norm(v[i].T @ v[i] - np.eye(n)) <= 16 * n * U
        # every group of eigenvalues separated from the rest by a gap spans the same
        # subspace as LAPACK's (to error / gap)
        cuts = [0, *(np.flatnonzero(np.diff(w0[i]) > 1e-6 * norm) + 1), n]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            p = v[i][:, lo:hi] @ v[i][:, lo:hi].T
            p0 = v0[i][:, lo:hi] @ v0[i][:, lo:hi].T
            assert np.linalg.norm(p - p0) <= 1e-8


@pytest.mark.parametrize("n", [1, 2, 5, 8, 16, 32])
def test_eigh_matches_lapack(n):
    rng = np.random.default_rng(n)
    for kind, a in _kinds(rng, n, smalleigh.MIN_STACK).items():
        w, v = smalleigh.eigh(a)
        assert w.dtype == v.dtype == np.float64, kind
        _check(a, w, v)


def test_jacobi_serves_every_kind():
    """No kind above needs the LAPACK fallback, and each matrix's result is the same
    whatever matrices share its block."""
    rng = np.random.default_rng(0)
    kinds = _kinds(rng, 12, 4)
    a = np.concatenate(list(kinds.values()))
    w, v, ok = np.empty(a.shape[:2]), np.empty(a.shape), np.empty(len(a), dtype=bool)
    smalleigh._jacobi(a, w, v, ok)
    assert ok.all()
    w1, v1, ok1 = np.empty(a.shape[:2]), np.empty(a.shape), np.empty(len(a), dtype=bool)
    smalleigh._jacobi(a[::-1].copy(), w1, v1, ok1)
    np.testing.assert_array_equal(w1[::-1], w)
    np.testing.assert_array_equal(v1[::-1], v)


def test_only_the_lower_triangle_is_read():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((20, 6, 6))
    w, v = smalleigh.eigh(a)
    w0, v0 = np.linalg.eigh(a)  # LAPACK reads the lower triangle too
    np.testing.assert_allclose(w, w0, atol=1e-13 * np.abs(w0).max())


def test_fallbacks():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((20, 4, 4))
    a = a + a.transpose(0, 2, 1)
    for b in (a[:3], a + 1j * a.transpose(0, 2, 1),
              rng.standard_normal((20, smalleigh.MAX_SIZE + 1, smalleigh.MAX_SIZE + 1))):
        w, v = smalleigh.eigh(b)
        w0, v0 = smalleigh.reference_eigh(b)
        np.testing.assert_array_equal(w, w0)
        np.testing.assert_array_equal(v, v0)
    a[3, 1, 0] = np.nan  # not finite: LAPACK's answer, an error
    with pytest.raises(np.linalg.LinAlgError):
        smalleigh.eigh(a)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 20), st.integers(16, 40), st.integers(0, 2**16),
       st.floats(-200, 200), st.booleans())
def test_eigh_hypothesis(n, g, seed, log_scale, low_rank):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((g, n, max(1, n // 3) if low_rank else n))
    a = (x @ x.transpose(0, 2, 1) - (n // 2) * np.eye(n)) * 2.0 ** log_scale
    w, v = smalleigh.eigh(a)
    _check(a, w, v)

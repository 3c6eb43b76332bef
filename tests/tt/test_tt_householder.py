"""householder.qr against np.linalg.qr on stacks of every core dtype and shape."""

import numpy as np
import pytest
from tt_helpers import DTYPES, tol

from tenalg.linalg import householder


def _stack(g, m, n, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((g, m, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((g, m, n))
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("g, m, n", [(1, 2880, 90), (3, 200, 30), (2, 40, 300), (1, 90, 90),
                                     (2, 70, 64), (4, 16, 8)])
def test_qr_matches_numpy(g, m, n, dtype):
    a = _stack(g, m, n, dtype, seed=m + n)
    q, r = householder.qr(a)
    q0, r0 = np.linalg.qr(a)
    k = min(m, n)
    assert q.shape == q0.shape == (g, m, k) and r.shape == r0.shape == (g, k, n)
    assert q.dtype == r.dtype == np.dtype(dtype)
    scale = np.linalg.norm(a)
    np.testing.assert_allclose(q @ r, a, atol=20 * tol(dtype) * scale)
    eye = np.broadcast_to(np.eye(k), (g, k, k))
    np.testing.assert_allclose(q.conj().transpose(0, 2, 1) @ q, eye, atol=20 * tol(dtype) * m)
    assert np.array_equal(r, np.triu(r))
    # the same reflectors as LAPACK's geqrf: R agrees up to rounding, signs included
    np.testing.assert_allclose(r, r0, atol=20 * tol(dtype) * scale)


def test_qr_of_a_rank_deficient_matrix():
    """Householder QR stays orthonormal where the columns are dependent."""
    a = _stack(1, 500, 40, np.float64, seed=1)
    a[:, :, 20:] = a[:, :, :20]
    q, r = householder.qr(a)
    np.testing.assert_allclose(q[0].T @ q[0], np.eye(40), atol=1e-13)
    np.testing.assert_allclose(q @ r, a, atol=1e-12)

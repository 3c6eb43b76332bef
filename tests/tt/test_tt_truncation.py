"""Bond factorisations: the Gram fast paths against LAPACK's QR and SVD."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tt_helpers import DTYPES, tol

from tenalg import tt
from tenalg.linalg import cholqr, truncation


def _unitary(rng, n, k, dtype):
    x = rng.standard_normal((n, k))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal((n, k))
    return np.linalg.qr(x)[0]


def _with_spectrum(rng, spectra, rows, cols, dtype):
    """A stack of (rows, cols) matrices with the given singular values (one row each)."""
    out = []
    for s in spectra:
        p = len(s)
        u, v = _unitary(rng, rows, p, dtype), _unitary(rng, cols, p, dtype)
        out.append((u * np.asarray(s)) @ v.conj().T)
    return np.array(out).astype(dtype)


SPECTRA = [
    np.linspace(1, 0.1, 8),                          # well separated: Gram path
    np.geomspace(1, 1e-14, 8),                       # decays to roundoff: fine cuts, LAPACK
    np.r_[np.ones(4), np.zeros(4)],                  # rank-deficient
    np.r_[1.0, 0.5, 0.5 + 1e-12, 0.2, np.full(4, 1e-9)],  # cluster at a cut
    np.zeros(8),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps, max_rank", [(1e-8, None), (1e-3, None), (1e-8, 2), (0.3, 3),
                                           (0.0, None)])
def test_truncated_svd_matches_lapack(dtype, eps, max_rank):
    rng = np.random.default_rng(0)
    m = _with_spectrum(rng, SPECTRA * 2, 24, 8, dtype)
    norms = np.linalg.norm(m.astype(np.complex128), axis=(1, 2))
    delta = eps * norms
    left, right, k, tail, _ = truncation.truncated_svd(m, delta, max_rank)
    l0, r0, k0, t0 = truncation.reference_svd(m, delta, max_rank)
    assert left.dtype == right.dtype == np.dtype(dtype)
    kept = np.linalg.svd(m.astype(np.complex128), compute_uv=False)
    for i in range(len(m)):
        s = kept[i]
        # the same rank unless the spectrum has a gap at roundoff level at the cut
        if abs(k[i] - k0[i]) and min(abs(s[k0[i] - 1] - s[min(k0[i], 7)]), s[k0[i] - 1]) > 1e-6:
            raise AssertionError(f"rank {k[i]} != {k0[i]} for spectrum {s}")
        approx = left[i] @ right[i]
        err = np.linalg.norm(m[i] - approx)
        assert err <= max(delta[i], np.sqrt(t0[i]) * (1 + 1e-6)) + 10 * tol(dtype) * norms[i]
        kk = k[i]
        q = left[i][:, :kk]
        if s[kk - 1] > 1e-6 * s[0]:
            np.testing.assert_allclose(q.conj().T @ q, np.eye(kk), atol=100 * tol(dtype))
    assert np.all(k >= 1) and (max_rank is None or np.all(k <= max_rank))


def test_both_paths_run():
    rng = np.random.default_rng(1)
    m = _with_spectrum(rng, SPECTRA, 24, 8, np.float64)
    delta = 1e-8 * np.linalg.norm(m, axis=(1, 2))
    left, right, k, tail, ok, _ = truncation._gram(m, delta, None)
    # singular values that matter under the noise: LAPACK; an exact rank 4 under a
    # tolerance below the noise: proven by the residual, LAPACK's rank, its weight
    assert ok[0] and not ok[1] and ok[2] and k[2] == 4
    assert tail[2] == pytest.approx(np.linalg.norm(m[2] - left[2] @ right[2]) ** 2, abs=1e-28)
    assert tail[2] < delta[2] ** 2
    ok = truncation._gram(m, 1e-3 * np.linalg.norm(m, axis=(1, 2)), None)[4]
    assert ok[0] and ok[2]  # above the Gram floor a rank-deficient cut is resolved
    # a cut at the cap inside a cluster (1, 0.5 + 1e-12 | 0.5, ...) needs no gap: the
    # factors are orthonormal and their product a best rank-2 approximation
    left, right, k, tail, ok, _ = truncation._gram(m, 1e-8 * np.linalg.norm(m, axis=(1, 2)), 2)
    assert ok[0] and ok[3] and k[3] == 2
    np.testing.assert_allclose(left[3].T @ left[3], np.eye(2), atol=1e-12)
    best = 0.5 ** 2 + 0.2 ** 2 + 4e-18
    assert np.linalg.norm(m[3] - left[3] @ right[3]) ** 2 == pytest.approx(best, abs=1e-12)
    assert tail[3] == pytest.approx(best, abs=1e-12)
    # an eps cut there is certified only where the tolerance has room for the error of
    # the kept subspace (the Gram bound over the gap of 1e-12): 0.4 has, 0.2901 has not
    cluster = np.repeat(m[3:4], 2, axis=0)
    k, ok = truncation._gram(cluster, np.sqrt([0.4, 0.2901]), None)[2::2]
    assert k.tolist() == [2, 2] and ok.tolist() == [True, False]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 12), st.sampled_from(DTYPES),
       st.integers(0, 2**16), st.booleans())
def test_lq_hypothesis(g, rows, cols, dtype, seed, deficient):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((g, rows, cols))
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.standard_normal(m.shape)
    if deficient and rows > 1:
        m[0, -1] = m[0, 0]
    m = m.astype(dtype)
    l, f, b, _ = truncation.lq(m)
    q = f @ b
    l0, q0 = truncation.reference_lq(m)
    assert l.dtype == q.dtype == np.dtype(dtype)
    # as LAPACK's, or narrower where every train's rank is below rows (truncation._finish)
    width = l.shape[2]
    assert l.shape[:2] == l0.shape[:2] and q.shape == (g, width, cols) and width <= l0.shape[2]
    scale = np.abs(m).max() + 1
    np.testing.assert_allclose(l @ q, m, atol=100 * tol(dtype) * scale)
    _assert_rank_revealing(l, q, m, 100 * tol(dtype))


def _assert_rank_revealing(l, q, m, atol):
    """Rows of Q orthonormal, or zero together with L's column where a rank-revealing LQ
    dropped them (:func:`cholqr.rank_revealing`), never fewer than M's rank."""
    k = q.shape[1]
    gram = q @ q.conj().transpose(0, 2, 1)
    kept = np.abs(np.diagonal(gram, axis1=1, axis2=2)) > 0.5
    np.testing.assert_allclose(gram, kept[:, :, None] * np.eye(k), atol=atol)
    assert not np.where(kept[:, None, :], 0, l).any()
    ranks = [np.linalg.matrix_rank(x.astype(np.complex128)) for x in m]
    assert (kept.sum(axis=1) >= ranks).all()


def test_lq_fast_path_and_fallback():
    rng = np.random.default_rng(2)
    m = rng.standard_normal((4, 4, 32))
    m[1, 3] = m[1, 0] + m[1, 1]  # rank-deficient: rank-revealing LQ from eigh(M M^H)
    m[2] = _with_spectrum(rng, [[1, 1, 1, 1e-9]], 4, 32, np.float64)[0]  # Householder
    q_ref = truncation.reference_lq(m)[1]
    l, f, b, _ = truncation.lq(m)
    q = f @ b
    np.testing.assert_allclose(l @ q, m, atol=1e-13)
    _assert_rank_revealing(l, q, m, 1e-12)
    # the rank-deficient train keeps 3 rows; L has M's singular values (LAPACK's L too)
    assert (np.abs(q[1]).sum(axis=1) > 0).sum() == 3
    np.testing.assert_allclose(np.linalg.svd(l[1], compute_uv=False),
                               np.linalg.svd(m[1], compute_uv=False), atol=1e-13)
    # the ill-conditioned one (its 1e-9 is above roundoff) took Householder QR: LAPACK's Q
    np.testing.assert_array_equal(b[2], q_ref[2])
    np.testing.assert_array_equal(f[2], np.eye(4))
    np.testing.assert_array_equal(b[0], m[0])


def test_fast_paths_report_use():
    rng = np.random.default_rng(3)
    m = rng.standard_normal((2, 4, 32))
    assert truncation.lq(m)[3] and not truncation.lq(m, gram=False)[3]
    m[:, 3] = m[:, 0]  # every train rank-deficient: the rank-revealing LQ serves them
    l, f, b, hint = truncation.lq(m)
    assert hint == truncation.REVEALING and l.shape == (2, 4, 3) and f.shape == (2, 3, 4)
    np.testing.assert_allclose(l @ f @ b, m, atol=1e-13)
    assert truncation.lq(m, hint)[3] == truncation.REVEALING  # straight to the rank-revealing path
    assert truncation.lq(m[:, :3], hint)[3] is True  # full rank: the next bond tries Cholesky
    m = _with_spectrum(rng, [[1, 1, 1, 1e-9]] * 2, 4, 32, np.float64)  # ill-conditioned
    assert not truncation.lq(m)[3]
    tall = rng.standard_normal((2, 8, 4))  # not tried: the sweep goes on trying
    assert truncation.lq(tall)[3] and not truncation.lq(tall, gram=False)[3]
    t = rng.standard_normal((2, 32, 4))
    assert truncation.truncated_svd(t, np.full(2, 1e-3), None)[4]
    # at delta 0 the Gram eigenvalues prove nothing: the SVD of the Cholesky factor serves
    left, right, k, tail, used = truncation.truncated_svd(t, np.full(2, 0.0), None)
    assert used and k.tolist() == [4, 4]
    np.testing.assert_allclose(left @ right, t, atol=1e-13)
    np.testing.assert_allclose(left.transpose(0, 2, 1) @ left, np.eye(4)[None].repeat(2, 0),
                               atol=1e-13)
    bad = _with_spectrum(rng, [[1, 1, 1, 1e-9]] * 2, 32, 4, np.float64)  # neither certifies
    assert not truncation.truncated_svd(bad, np.full(2, 0.0), None)[4]
    square = _with_spectrum(rng, [[1, 1, 1, 1e-9]] * 2, 5, 4, np.float64)  # but try again
    assert truncation.truncated_svd(square, np.full(2, 0.0), None)[4]


def test_sweep_tries_cholesky_after_a_tall_last_core(monkeypatch, batched_sweep):
    """The last core of a sum of two trains is tall (l = 2r > n): LAPACK's QR serves it
    alone, and every other bond of the right-to-left sweep takes the Cholesky path."""
    calls = []
    reference = truncation.reference_lq
    monkeypatch.setattr(truncation, "reference_lq", lambda m: calls.append(m.shape) or reference(m))
    a, b = (tt.random((4,) * 6, 3, rng=s) for s in (1, 2))
    tt.round_sum([a, b], eps=1e-8, max_rank=3)
    assert calls == [(1, 6, 4)]


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(8, 60), cols=st.integers(2, 8), rank=st.integers(1, 7),
       low=st.floats(0.01, 1.0), dtype=st.sampled_from([np.float64, np.complex128]),
       seed=st.integers(0, 2**16))
def test_exact_ranks_under_a_fine_tolerance_take_the_gram_path(rows, cols, rank, low, dtype,
                                                               seed):
    """An exact rank below the matrix's (an unfolding of X + X) at eps = 1e-8, below the
    Gram matrix's noise: the residual proves LAPACK's rank, and the cut is within delta."""
    rank = min(rank, cols - 1)
    rng = np.random.default_rng(seed)
    s = np.r_[np.geomspace(1, low, rank), np.zeros(cols - rank)]
    m = _with_spectrum(rng, [s, s], rows, cols, dtype)
    delta = 1e-8 * np.linalg.norm(m, axis=(1, 2))
    left, right, k, tail, ok, _ = truncation._gram(m, delta, None)
    k0 = truncation.reference_svd(m, delta, None)[2]
    assert ok.all() and np.array_equal(k, k0) and np.all(k == rank)
    for i in range(2):
        assert np.linalg.norm(m[i] - left[i] @ right[i]) <= delta[i]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_rank_revealing_paths_agree(monkeypatch, dtype):
    """Pivoted Cholesky (real) and the eigendecomposition (complex, and real while the
    kernel compiles) both give L F M = M to roundoff with F M orthonormal, at M's rank,
    on a stack where some trains are rank-deficient and some need LAPACK."""
    rng = np.random.default_rng(7)
    m = rng.standard_normal((6, 5, 40)).astype(dtype)
    m[0, 4] = m[0, 1] - m[0, 2]
    m[1, 3:] = 2 * m[1, :2]
    m[2] = _with_spectrum(rng, [[1, 1, 1, 1, 1e-9]], 5, 40, dtype)[0]  # Householder
    m[3] = 0
    m[4, 1:] = m[4, :1]
    results = [truncation.lq(m)]
    monkeypatch.setattr(cholqr.smallchol, "pivoted_cholesky", lambda a, tol: None)
    results.append(truncation.lq(m))
    for l, f, b, _ in results:
        q = f @ b
        np.testing.assert_allclose(l @ q, m, atol=1e-13)
        _assert_rank_revealing(l, q, m, 1e-12)
        kept = (np.abs(q).sum(axis=2) > 0).sum(axis=1)
        assert kept.tolist() == [4, 3, 5, 5, 1, 5]  # the zero train went to LAPACK


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(40, 400), r=st.integers(4, 30), cap=st.integers(1, 30),
       dtype=st.sampled_from([np.float64, np.complex128]), seed=st.integers(0, 2**16))
def test_dense_spectra_cut_by_the_cholesky_factor_svd(rows, r, cap, dtype, seed):
    """A cut inside a dense spectrum (the Gram eigenvalues cannot resolve its gap): the SVD
    of the Cholesky factor gives LAPACK's singular values to eta, its rank where the cut
    is not within eta of a tie, orthonormal left factors, and a truncation within the
    discarded weight it reports."""
    rng = np.random.default_rng(seed)
    s = np.sort(rng.uniform(0.5, 1.0, r))[::-1]
    m = _with_spectrum(rng, [s, s[::-1][::-1] * 0.7], rows, r, dtype)
    cap = min(cap, r)
    products = np.matmul(m.conj().transpose(0, 2, 1), m)
    delta = np.full(2, 1e-12)
    left, right, k, tail, served = truncation._qr_svd(m, products, delta, cap)
    assert served.all() and (k == cap).all()
    s_ref = np.linalg.svd(m, compute_uv=False)
    np.testing.assert_allclose(tail, (s_ref[:, cap:] ** 2).sum(axis=1), rtol=1e-7, atol=1e-12)
    eye = np.eye(cap)
    np.testing.assert_allclose(left.conj().transpose(0, 2, 1) @ left, eye[None].repeat(2, 0),
                               atol=1e-7)
    weight = (np.abs(m - left @ right) ** 2).sum(axis=(1, 2))
    np.testing.assert_allclose(weight, tail, rtol=1e-6, atol=1e-12)


def test_sweep_of_dense_spectra_takes_no_lapack_svd(monkeypatch, batched_sweep):
    """Rounding a random sum capped at the summands' rank: every interior cut is inside a
    dense spectrum; the Cholesky-factor SVD serves them, LAPACK's SVD none, and the
    result is LAPACK's rounding to eta (the same ranks and error)."""
    a, b = (tt.random((24,) * 5, 6, rng=s) for s in (1, 2))
    x = a + b
    reference = truncation.reference_svd
    monkeypatch.setattr(truncation, "_qr_svd", lambda m, p, d, r: (*reference(m, d, r),
                                                                np.zeros(len(m), bool)))
    y_ref = tt.round(x, 1e-10, 6)
    monkeypatch.undo()
    calls = []
    monkeypatch.setattr(truncation, "reference_svd",
                        lambda m, *a: calls.append(m.shape) or reference(m, *a))
    y = tt.round(x, 1e-10, 6)
    assert y.ranks == y_ref.ranks == (1, 6, 6, 6, 6, 1)
    assert calls == []
    error, error_ref = tt.norm(y - x), tt.norm(y_ref - x)
    assert error == pytest.approx(error_ref, rel=1e-6)
    assert tt.norm(y - y_ref) <= 1e-6 * tt.norm(x)


def test_second_cholesky_pass_certifies_wide_unfoldings(monkeypatch):
    """A well-conditioned 100 x 6000 unfolding: the a-priori bound of the first Cholesky
    pass cannot certify it (k^2 (k + n) u > eta), the second pass does; an
    ill-conditioned one (cond 1e7, first bound above 1) is not tried and takes LAPACK's
    QR."""
    rng = np.random.default_rng(11)
    m = rng.standard_normal((2, 100, 6000))
    m[1] = _with_spectrum(rng, [np.geomspace(1, 1e-7, 100)], 100, 6000, np.float64)[0]
    second, lapack = [], []
    second_pass, reference = cholqr.second_pass, truncation.reference_lq
    monkeypatch.setattr(cholqr, "second_pass",
                        lambda x, c, i, eta: second.append(len(x)) or second_pass(x, c, i, eta))
    monkeypatch.setattr(truncation, "reference_lq", lambda x: lapack.append(len(x)) or reference(x))
    l, f, b, used = truncation.lq(m)
    q = f @ b
    # the ill-conditioned one (first bound above 1) skips the second pass
    assert second == [1] and lapack == [1] and used
    np.testing.assert_allclose(q[0] @ q[0].T, np.eye(100), atol=1e-13)
    np.testing.assert_allclose(l @ q, m, atol=1e-12)
    np.testing.assert_array_equal(f[1], np.eye(100))  # LAPACK's Q itself
    assert np.allclose(np.tril(l[0]), l[0])  # C1 C2 is lower triangular


def test_near_redundant_sums_stay_off_lapack_qr(monkeypatch, batched_sweep):
    """a + (a + 1e-2 c): every interior bond is rank-deficient with components between
    the Gram matrix's noise and err / eta; the pivoted LQ is factored again down to the
    noise and certified by the second pass instead of LAPACK's QR, with LAPACK's ranks
    and an error within eps."""
    a = tt.random((48,) * 4, 12, rng=1)
    c = tt.random((48,) * 4, 2, rng=2)
    x = a + (a + (1e-2 * tt.norm(a) / tt.norm(c)) * c)
    calls = []
    reference = truncation.reference_lq
    monkeypatch.setattr(truncation, "reference_lq", lambda m: calls.append(m.shape) or reference(m))
    y = tt.round(x, 1e-3)
    assert calls == []
    assert y.ranks == (1, 14, 14, 14, 1)
    assert tt.norm(y - x) <= 1e-3 * tt.norm(x)


def test_float32_factors_are_accepted_at_float32s_roundoff(monkeypatch, batched_sweep):
    """Float32 a + (a + 1e-2 c): the weak directions' Gram factors are orthonormal to
    about 1e-8, not sqrt(u) of double; stored in float32 they are accepted
    (cholqr.accepted), so every truncation is certified from the Gram matrix (no LAPACK
    SVD), with LAPACK's ranks and an error within eps."""
    a = tt.random((16,) * 10, 10, rng=1, dtype=np.float32)
    c = tt.random((16,) * 10, 2, rng=2, dtype=np.float32)
    x = a + (a + (1e-2 * tt.norm(a) / tt.norm(c)) * c)
    assert cholqr.accepted(np.float32) > cholqr.accepted(np.float64) == cholqr.ETA
    calls = []
    reference = truncation.reference_svd
    monkeypatch.setattr(truncation, "reference_svd",
                        lambda m, *args: calls.append(m.shape) or reference(m, *args))
    y = tt.round(x, 1e-3)
    assert calls == []
    assert y.ranks == (1,) + (12,) * 9 + (1,)
    assert tt.norm(y - x) <= 1e-3 * tt.norm(x)

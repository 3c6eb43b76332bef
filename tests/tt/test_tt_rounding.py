"""Rounding with each method against dense results."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tt_helpers import DTYPES, STORAGES, batched_sweep, long_train, rand, rel, tol

from tenalg import tt
from tenalg.errors import OperationError
from tenalg.linalg import svd

METHODS = tt.METHODS
DIMS = (3, 4, 3, 4, 3)


def _round(x, eps, method, **kw):
    return tt.round(x, eps, method=method, rng=0, **kw)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_eps_zero_preserves_and_eps_bound_holds(method, storage, dtype):
    a, b = rand(DIMS, 3, dtype, storage, seed=1), rand(DIMS, 2, dtype, storage, seed=2)
    x = a + b + a
    dense = x.to_dense()
    y = _round(x, 0.0, method)
    assert y.dtype == np.dtype(dtype) and y.storage == storage
    assert rel(y.to_dense(), dense) < (1e-12 if tol(dtype) < 1e-8 else 1e-5)
    z = _round(x, 0.1, method)
    assert z.dtype == np.dtype(dtype)
    assert rel(z.to_dense(), dense) <= 0.1
    assert all(r <= s for r, s in zip(z.ranks, (a + b).ranks, strict=True))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_redundant_sums_compress_exactly(method, dtype):
    x = rand(DIMS, 3, dtype, seed=3)
    eps = 10 * tt.gram_floor(dtype)
    for seed in range(3):
        x = rand(DIMS, 3, dtype, seed=seed)
        y = _round(x + x, eps, method)
        assert y.ranks == x.ranks
        assert rel(y.to_dense(), 2 * x.to_dense()) <= eps
    y = x - x
    info = tt.round_(y, eps, method=method, rng=0)
    assert y.ranks == (1, 1, 1, 1, 1, 1) and info.ranks_after == y.ranks
    assert np.linalg.norm(y.to_dense()) <= 10 * tol(dtype) * tt.norm(x)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_small_component_is_kept_above_the_floor(method, dtype):
    a = rand(DIMS, 2, dtype, seed=4)
    b = rand(DIMS, 2, dtype, seed=5)
    small = 1e3 * tt.gram_floor(dtype)
    x = a + small * (tt.norm(a) / tt.norm(b)) * b
    y = _round(x, tt.gram_floor(dtype) * 3, method)
    assert y.ranks == (1, 3, 4, 4, 3, 1)
    d_small = rel(y.to_dense(), a.to_dense())
    assert abs(d_small - small) < 0.1 * small


@pytest.mark.parametrize("dtype", DTYPES)
def test_gram_two_sided_compresses_x_plus_x_at_tight_eps(dtype):
    eps = 2 * tt.gram_floor(dtype)
    # single precision is rounded with double-precision Gram matrices, certain at its
    # floor; in double precision their noise (about sqrt(n u)) cannot certify a cut at
    # 3e-8, and those trains go to the SVD sweep
    single = tol(dtype) > 1e-8
    for seed in range(8):
        x = rand((4, 5, 6, 5, 4), 4, dtype, seed=seed)
        with batched_sweep():  # else a train this small takes the compiled SVD sweep
            info = tt.round_(x + x, eps, method="gram")
            assert info.method == ("gram" if single else "svd") and info.ranks_after == x.ranks
            info = tt.round_(x + x, max(eps, 1e-4), method="gram")
            assert info.method == "gram" and info.ranks_after == x.ranks
            below = tt.round_(x + x, 0.5 * tt.gram_floor(dtype), method="gram")
            assert below.method == "svd" and below.ranks_after == x.ranks


def test_complex_rounding_conjugates():
    x = rand(DIMS, 3, np.complex128, seed=6) * (1 + 2j)
    for method in METHODS:
        y = _round(x + x, 1e-6, method)
        assert y.ranks == x.ranks
        assert rel(y.to_dense(), 2 * x.to_dense()) < 1e-6


@pytest.mark.parametrize("method", METHODS)
def test_long_train_rounds_without_overflow(method):
    x, nu = long_train(400, 2, 2, 4.0)
    y = _round(x + x, 1e-6, method)
    assert y.ranks == x.ranks
    assert all(np.isfinite(c.array()).all() for c in y.cores)
    assert tt.norm(y - 2 * x) <= 1e-6 * tt.norm(2 * x)
    tiny, _ = long_train(400, 2, 2, 0.25, seed=1)
    z = _round(tiny + tiny, 1e-6, method)
    assert z.ranks == tiny.ranks and tt.norm(z) > 0
    assert tt.norm(z - 2 * tiny) <= 1e-6 * tt.norm(2 * tiny)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32, np.complex64])
def test_a_core_of_subnormal_numbers_rounds_to_the_bound(method, dtype):
    """A train scaled to subnormal entries (1e-310 in double, 1e-40 in single precision):
    the sweeps' scalings by the reciprocal of the largest modulus overflowed (the Gram
    and randomized sweeps raised LAPACK's "did not converge", a complex norm came out
    NaN and the SVD sweep kept rank 1)."""
    x = rand(DIMS, 2, dtype, seed=3) + rand(DIMS, 3, dtype, seed=4)
    scale = 1e-310 if np.finfo(dtype).bits == 64 else 1e-40
    cores = [c.array() for c in x.cores]
    small = tt.TensorTrain([cores[0] * np.asarray(scale, cores[0].dtype)] + cores[1:])
    y = tt.round(small, 1e-2, method=method, rng=0)
    assert y.ranks == tt.round(x, 1e-2, method=method, rng=0).ranks
    # the error read in the normal range: the first cores of both scaled back up (in two
    # steps: 1 / 1e-310 is inf)
    up = 1 / np.sqrt(scale)
    lift = tt.TensorTrain([y.cores[0].array().astype(np.complex128) * up * up]
                          + [c.array() for c in y.cores[1:]])
    back = tt.TensorTrain([small.cores[0].array().astype(np.complex128) * up * up]
                          + cores[1:])
    assert tt.norm(lift - back) <= 1e-2 * tt.norm(back)


@pytest.mark.parametrize("method", METHODS)
def test_complex_coefficients_of_real_trains_and_a_zero_train(method):
    """Found by a probe: round_sum(..., method="gram") cast 2 A + 1j B back to the real
    trains' dtype (error 0.998, a ComplexWarning), and Gram rounding of a zero train
    reported norm 1.0."""
    a, b = rand((3, 4, 3), 2, np.float64, seed=1), rand((3, 4, 3), 2, np.float64, seed=2)
    z = tt.round_sum([a, b], [2, 1j], 1e-2, method=method, rng=0)
    want = 2 * a.to_dense() + 1j * b.to_dense()
    assert z.dtype == np.complex128 and rel(z.to_dense(), want) <= 1e-2
    info = tt.round_(tt.TensorTrain.zeros((3, 4, 3), 2), 1e-2, method=method, rng=0)
    assert info.norm == 0.0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_duplicates_collapse_and_round_sum(method, dtype):
    x = rand(DIMS, 1, dtype, seed=7)
    y = tt.round_sum([x] * 5, eps=10 * tt.gram_floor(dtype), method=method, rng=0)
    assert y.ranks == (1,) * 6 and y.dtype == np.dtype(dtype)
    assert rel(y.to_dense(), 5 * x.to_dense()) < 10 * tt.gram_floor(dtype)
    terms = [rand(DIMS, r, dtype, seed=s) for s, r in enumerate((2, 3, 1))]
    coef = [1.5, -0.5, 2.0]
    want = sum(c * t.to_dense() for c, t in zip(coef, terms, strict=True))
    z = tt.round_sum(terms, coef, eps=0.0, method=method, rng=0)
    assert rel(z.to_dense(), want) < (1e-5 if tol(dtype) > 1e-8 else 1e-12)
    w = tt.round_sum(terms, coef, eps=0.2, method=method, rng=0)
    assert rel(w.to_dense(), want) <= 0.2


@pytest.mark.parametrize("method", METHODS)
def test_max_rank_and_rmax(method):
    x = rand(DIMS, 4, seed=8)
    y = _round(x, 0.0, method, max_rank=2)
    assert max(y.ranks) == 2
    z = _round(x, 0.0, method, rmax=2)
    assert z.ranks == y.ranks
    u, s, vh = np.linalg.svd(x.to_dense().reshape(3, -1))
    assert rel(_round(x, 0.0, method, max_rank=1).to_dense(), x.to_dense()) >= np.sqrt(
        (s[1:] ** 2).sum()) / np.linalg.norm(s) - 1e-12


def test_round_info_versions_and_copies():
    x = rand(DIMS, 2, seed=9)
    y = x + x
    dense = y.to_dense()
    z = tt.round(y, 1e-8)
    assert y.ranks == (1, 4, 4, 4, 4, 1) and z.ranks == (1, 2, 2, 2, 2, 1)
    v = y.version
    info = tt.round_(y, 1e-8)
    assert y.version == v + 1 and y.ranks == z.ranks
    assert info.ranks_before == (1, 4, 4, 4, 4, 1) and info.ranks_after == y.ranks
    assert info.method == "svd" and info.discarded < 1e-8
    np.testing.assert_allclose(info.norm, np.linalg.norm(dense), rtol=1e-12)
    assert tt.round_(y, 1e-12, method="gram").method == "svd"
    with batched_sweep():
        assert tt.round_(y, 1e-6, method="gram").method == "gram"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gram_rounds_a_small_real_train_by_the_compiled_sweep(dtype):
    """What Gram rounding saves is GEMM work: one small real train takes the compiled SVD
    sweep for "gram" too (the same cores as "svd"), and says so; a complex one, the Gram
    sweep."""
    x = rand((4, 5, 6, 5, 4), 3, dtype, seed=3)
    y = x + 2 * x + rand((4, 5, 6, 5, 4), 1, dtype, seed=4)
    z = y.copy()
    info = tt.round_(y, 1e-3, method="gram")
    assert info.method == "svd" and tt.round_(z, 1e-3).ranks_after == info.ranks_after
    for a, b in zip(y.cores, z.cores, strict=True):
        np.testing.assert_array_equal(a.array(), b.array())
    summed = tt.round_sum([x, 2 * x], eps=1e-3, method="gram")
    assert summed.ranks == tt.round(3 * x, 1e-3).ranks == x.ranks
    c = rand((4, 5, 6, 5, 4), 3, np.complex128, seed=3)
    assert tt.round_(c + 2 * c, 1e-3, method="gram").method == "gram"


@pytest.mark.parametrize("method", ["svd", "gram", "randomized"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, complex(1, np.inf)])
def test_round_sum_refuses_a_coefficient_that_is_nan_or_inf(method, bad):
    """Found by a probe: finite cores and a NaN or inf coefficient raised LAPACK's bare
    LinAlgError or returned NaN cores; the cores alone were checked."""
    x = rand(DIMS, 2)
    with pytest.raises(OperationError, match="coefficient is NaN or inf"):
        tt.round_sum([x, x], [1, bad], eps=1e-6, method=method, rng=0)


def test_bad_options_and_open_trains():
    x = rand(DIMS, 2)
    opened = rand((2, 3), 2, left_bond=2)
    with pytest.raises(OperationError, match="closed"):
        tt.round(opened, 0.1)
    with pytest.raises(OperationError, match="closed"):
        tt.round_sum([x, opened], eps=0.1)
    with pytest.raises(OperationError, match="method"):
        tt.round(x, 0.1, method="qr")
    with pytest.raises(OperationError, match="eps"):
        tt.round(x, -1.0)
    with pytest.raises(OperationError, match="disagree"):
        tt.round(x, 0.1, max_rank=2, rmax=3)
    with pytest.raises(OperationError):
        tt.round_sum([x, x], [1.0], eps=0.1)


@pytest.mark.parametrize("method", METHODS)
def test_a_core_holding_nan_or_inf_is_named_and_nothing_changes(method):
    """LAPACK's "did not converge" becomes an error that says why; in-place roundings
    leave their trains as they were."""
    good = rand(DIMS, 3, seed=1)
    cores = [c.array().copy() for c in rand(DIMS, 3, seed=2).cores]
    cores[2][1, 2, 0] = np.nan
    bad = tt.TensorTrain(cores)
    pack = tt.TrainPack([good, bad])
    calls = [lambda: tt.round_(bad, 1e-8, method=method, rng=0),
             lambda: tt.round_sum([good, bad], eps=1e-8, method=method, rng=0),
             lambda: pack.round_(1e-8, method=method, rng=0)]
    for call in calls:
        with pytest.raises(OperationError, match="NaN or inf"):
            call()
    assert pack[0, 0].ranks == good.ranks == (1, 3, 3, 3, 3, 1)
    assert np.isnan(pack[0, 1].cores[2].array()[1, 2, 0])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("dims", [(3, 2), (4, 4, 4), (3,)])
def test_a_rank_one_train_holding_nan_or_inf_is_refused(method, bad, dims):
    """LAPACK passes NaN through the 1 x 1 problems of rank-1 bonds without failing: the
    Gram sweep zeroed the finite entries and reported a finite norm."""
    cores = [c.array().copy() for c in rand(dims, 1, seed=3).cores]
    cores[0][0, 1, 0] = bad
    x = tt.TensorTrain(cores)
    pack = tt.TrainPack([x.copy()])
    for call in (lambda: tt.round(x, 1e-3, method=method, rng=0),
                 lambda: tt.round_(x, 1e-3, method=method, rng=0),
                 lambda: pack.round_(1e-3, method=method, rng=0)):
        with pytest.raises(OperationError, match="NaN or inf"):
            call()
    for t in (x, pack[0, 0]):
        got = t.cores[0].array()
        assert (np.isnan(got[0, 1, 0]) if np.isnan(bad) else got[0, 1, 0] == bad)


@pytest.mark.parametrize("options", [
    {"max_rank": np.nan}, {"max_rank": np.inf}, {"max_rank": "2"}, {"max_rank": 2.0},
    {"max_rank": True}, {"max_rank": 0}, {"eps": "0.1"}, {"eps": np.nan}, {"eps": -0.5},
])
def test_bad_truncation_options_are_refused_alike(options):
    """tt.round, tt.from_dense and linalg.svd check eps and max_rank as one function does
    (a string eps was read by float(), max_rank=nan raised ValueError)."""
    x = rand(DIMS, 2)
    calls = [lambda: tt.round(x, **options), lambda: tt.from_dense(x.to_dense(), **options),
             lambda: svd(x.to_dense(), (0,), **options)]
    for call in calls:
        with pytest.raises(OperationError, match=next(iter(options))):
            call()


@pytest.mark.parametrize("method", METHODS)
def test_storages_round_identically(method):
    x = rand(DIMS, 3, seed=10) + rand(DIMS, 3, seed=11)
    a = _round(x, 0.05, method)
    b = _round(x.to_storage("fiber"), 0.05, method)
    assert a.ranks == b.ranks and b.storage == "fiber"
    np.testing.assert_allclose(b.to_dense(), a.to_dense(), rtol=1e-13, atol=1e-13)


def test_single_core_trains():
    x = tt.TensorTrain([np.arange(4.0).reshape(1, 4, 1)])
    for method in METHODS:
        y = tt.round_sum([x, x], [1, 2], eps=0.0, method=method, rng=0)
        np.testing.assert_allclose(y.to_dense(), 3 * np.arange(4.0))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.integers(1, 3),
       st.integers(1, 3), st.sampled_from(METHODS), st.sampled_from(DTYPES),
       st.sampled_from(STORAGES), st.integers(0, 2**16))
def test_rounding_hypothesis(dims, ra, rb, method, dtype, storage, seed):
    a = rand(dims, ra, dtype, storage, seed=seed)
    b = rand(dims, rb, dtype, storage, seed=seed + 1)
    dense = a.to_dense() + b.to_dense()
    exact = tt.round(a + b, 0.0, method=method, rng=seed)
    assert exact.dtype == np.dtype(dtype) and exact.storage == storage
    assert rel(exact.to_dense(), dense) < 100 * tol(dtype)
    loose = tt.round_sum([a, b], eps=0.3, method=method, rng=seed)
    assert rel(loose.to_dense(), dense) <= 0.3 + 100 * tol(dtype)
    assert all(r <= s for r, s in zip(loose.ranks, (a + b).ranks, strict=True))


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("method", ["svd", "gram", "randomized"])
def test_a_norm_past_float64s_range_is_inf_without_a_warning(method):
    """Rounding a train whose norm exceeds float64's range gave info.norm inf, as
    documented, but with NumPy's 'overflow encountered in exp' (found by a probe of the
    docs); a norm whose exponential factor alone overflows is finite."""
    x = rand((2,) * 40, 2, seed=0)
    big = tt.TensorTrain([c.array() * 1e20 for c in x.cores])  # norm about 1e800
    info = tt.round_(big + big, 1e-6, method=method, max_rank=4)
    assert info.norm == np.inf
    small = tt.TensorTrain([c.array() * 1e-3 for c in x.cores])
    info = tt.round_(small + small, 1e-8, method=method, max_rank=4)
    assert info.norm == pytest.approx(2 * tt.norm(small), rel=1e-10)


def test_large_products_of_a_rounding_are_shared_among_threads(monkeypatch):
    """A rounding runs BLAS on one thread; its products of SPLIT_FLOPS or more are cut
    into parts that tenalg's threads take (tenalg.blas.matmul): the same rounding as
    with every product whole."""
    import numba

    from tenalg import blas
    x = rand((48, 48, 48), 24, seed=5) + rand((48, 48, 48), 24, seed=6)
    split_flops = blas.SPLIT_FLOPS
    monkeypatch.setattr(blas, "SPLIT_FLOPS", 1 << 62)
    whole = _round(x, 1e-10, "svd")
    monkeypatch.setattr(blas, "SPLIT_FLOPS", split_flops)
    parts = []
    pool = blas._pool
    monkeypatch.setattr(blas, "_pool", lambda w, pid: parts.append(w) or pool(w, pid))
    shared = _round(x, 1e-10, "svd")
    assert bool(parts) == (numba.get_num_threads() > 1)
    assert shared.ranks == whole.ranks
    assert rel(shared.to_dense(), whole.to_dense()) < 1e-12

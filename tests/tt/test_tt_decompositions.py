"""TT-SVD (from_dense) and TT-cross against dense results."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tt_helpers import DTYPES, STORAGES, rand, rel, tol

from tenalg import tt
from tenalg.errors import DTypeError, OperationError
from tenalg.tt import decompositions

DIMS = (4, 5, 3, 5, 4)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dense_recovers_ranks(storage, dtype):
    x = rand(DIMS, (3, 4, 2, 3), dtype, seed=1)
    dense = x.to_dense()
    y = tt.from_dense(dense, eps=10 * tol(dtype), storage=storage)
    assert y.ranks == x.ranks and y.dtype == np.dtype(dtype) and y.storage == storage
    assert rel(y.to_dense(), dense) < 10 * tol(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_from_dense_eps_bound_and_max_rank(dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(DIMS).astype(dtype)
    for eps in (0.0, 0.1, 0.5):
        y = tt.from_dense(a, eps=eps)
        assert y.dtype == np.dtype(dtype)
        assert rel(y.to_dense(), a) <= max(eps, 10 * tol(dtype))
    assert tt.from_dense(a, eps=0.5).ranks < tt.from_dense(a).ranks
    assert max(tt.from_dense(a, max_rank=2).ranks) == 2
    assert tt.from_dense(np.arange(5.0)).ranks == (1, 1)
    assert tt.from_dense(np.ones((3, 4), dtype=np.int32)).dtype == np.float64


def _with_singular_values(s, cols, dtype, seed):
    """A len(s) x cols matrix of dtype with singular values s."""
    rng = np.random.default_rng(seed)
    def orthonormal(n, k):
        z = rng.standard_normal((n, k))
        if np.dtype(dtype).kind == "c":
            z = z + 1j * rng.standard_normal((n, k))
        return np.linalg.qr(z)[0]
    return ((orthonormal(len(s), len(s)) * s) @ orthonormal(cols, len(s)).conj().T).astype(dtype)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(2, 12), extra=st.integers(0, 40), decay=st.floats(0.05, 0.9),
       cut=st.integers(0, 11), dtype=st.sampled_from([np.float64, np.complex128]),
       seed=st.integers(0, 2**16))
def test_gram_bond_keeps_the_svd_rank(rows, extra, decay, cut, dtype, seed):
    """Where the Gram path answers, its rank is the SVD's and its residual is within
    delta; delta lies midway (geometrically) between two tails, so the rank is clear."""
    s = decay ** np.arange(rows, dtype=np.float64)
    m = _with_singular_values(s, rows + extra, dtype, seed)
    tails = np.cumsum((s**2)[::-1])[::-1]  # tails[j]: the weight of s[j:]
    want = cut % rows + 1  # delta^2 between tails[want] and tails[want - 1]
    delta = np.sqrt(np.sqrt(tails[want] * tails[want - 1]) if want < rows
                    else 0.5 * tails[rows - 1])
    got = decompositions._gram_bond(m, delta, None)
    k = int(decompositions._lapack_bond(m, delta, None)[0].shape[1])
    assert k == want
    if got is None:  # only where the cut lies near the Gram matrix's noise
        assert s[k - 1] ** 2 < 1e6 * rows * 1e-16 * (rows + extra + rows)
        return
    u, rest = got
    assert u.shape == (rows, k) and rest.shape == (k, rows + extra)
    assert np.linalg.norm(m - u @ rest) <= delta
    np.testing.assert_allclose(u.conj().T @ u, np.eye(k), atol=1e-12)


def test_gram_bond_leaves_cuts_it_cannot_prove_to_lapack():
    m = _with_singular_values(np.array([1.0, 0.5, 1e-9, 1e-10]), 50, np.float64, 0)
    d = decompositions
    assert d._gram_bond(m, 1e-3, None)[0].shape == (4, 2)  # a clear cut
    assert d._gram_bond(m, 1e-3, 1) is None  # max_rank cuts deeper: LAPACK
    assert d._gram_bond(m, 1e-11, None) is None  # singular values under the noise matter
    assert d._gram_bond(m, 0.0, None) is None
    m[0, 0] = np.nan
    assert d._gram_bond(m, 1e-3, None) is None
    with pytest.raises(OperationError, match="NaN or inf"):  # not LAPACK's "did not converge"
        tt.from_dense(m.reshape(2, 2, 50), eps=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dense_gram_bonds_match_lapack(dtype, monkeypatch):
    """TT-SVD of a 4^8 tensor of rank 5: the same ranks, and the eps bound, with the
    Gram bonds as with LAPACK's SVD alone (which the Gram path serves, mostly)."""
    dense = rand((4,) * 8, 5, dtype, seed=3).to_dense()
    eps = 100 * tol(dtype)
    calls = []
    gram_bond = decompositions._gram_bond
    monkeypatch.setattr(decompositions, "_gram_bond",
                        lambda *a: calls.append(1) or gram_bond(*a))
    y = tt.from_dense(dense, eps=eps)
    monkeypatch.setattr(decompositions, "_gram_bond", lambda *a: None)
    z = tt.from_dense(dense, eps=eps)
    assert y.ranks == z.ranks and y.dtype == z.dtype == np.dtype(dtype)
    assert rel(y.to_dense(), dense) <= eps and len(calls) >= 4


def test_from_dense_bad_input():
    with pytest.raises(OperationError, match="axis"):
        tt.from_dense(np.float64(3.0))
    with pytest.raises(DTypeError):
        tt.from_dense(np.ones((2, 2), dtype=np.float16))
    with pytest.raises(OperationError, match="empty"):
        tt.from_dense(np.zeros((3, 0, 2)))
    for bad in (np.nan, np.inf):
        dense = np.ones((3, 4))
        dense[1, 2] = bad
        with pytest.raises(OperationError, match="NaN or inf"):
            tt.from_dense(dense)
    with pytest.raises(OperationError, match="dimension >= 1"):
        tt.TensorTrain([np.ones((1, 2, 1)), np.ones((1, 0, 1))])


def test_from_dense_reads_byte_swapped_floats_as_it_reads_integers():
    """from_dense converted integers and bools but refused '>f8' (found by a probe)."""
    dense = np.random.default_rng(3).random((3, 4, 5))
    for swapped in (dense.astype(">f8"), (dense + 1j * dense).astype(">c16")):
        train = tt.from_dense(swapped, eps=1e-13)
        assert train.dtype == swapped.dtype.newbyteorder("=")
        np.testing.assert_allclose(train.to_dense(), swapped, rtol=1e-12)


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_from_dense_keeps_the_bound_at_any_scale(scale, dtype):
    """Huge entries overflowed the squared singular values and tiny ones underflowed them
    (rank 1 kept, half the tensor lost); the array is scaled by a power of two first."""
    dense = rand((4, 5, 6), 3, dtype=dtype, seed=2).to_dense()
    y = tt.from_dense(dense * scale, eps=1e-10)
    assert y.ranks == (1, 3, 3, 1)
    assert rel(y.to_dense() / scale, dense) <= 1e-10


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_recovers_a_low_rank_train(storage, dtype):
    x = rand((5,) * 6, 3, dtype, seed=3)
    y, info = tt.cross(x.evaluate, x.dims, 3, rng=0, storage=storage)
    assert info.converged and y.ranks == x.ranks
    assert y.dtype == np.dtype(dtype) and y.storage == storage
    assert tt.norm(y - x) <= (1e-10 if tol(dtype) < 1e-8 else 1e-5) * tt.norm(x)
    assert info.nevals > 0 and len(info.index_sets) == 5


def test_cross_separable_function_at_rank_1():
    def f(idx):
        return np.prod(np.exp(-0.1 * idx) * (1 + idx), axis=1)

    y, info = tt.cross(f, (6,) * 8, 1, rng=0)
    assert info.converged and y.ranks == (1,) * 9
    idx = np.random.default_rng(4).integers(0, 6, size=(50, 8))
    np.testing.assert_allclose(y.evaluate(idx), f(idx), rtol=1e-12)


def test_cross_clips_ranks_and_warm_starts():
    y, _ = tt.cross(lambda i: 1.0 + i.sum(axis=1), (2, 3, 2), 10, rng=0)
    assert y.ranks == (1, 2, 2, 1)
    x = rand((4,) * 5, 2, seed=5)
    first, info = tt.cross(x.evaluate, x.dims, 2, nsweeps=1, rng=1)
    again, info2 = tt.cross(x.evaluate, x.dims, index_sets=info.index_sets)
    assert info2.converged and info2.nsweeps == 1 and again.ranks == x.ranks
    assert tt.norm(again - x) <= 1e-10 * tt.norm(x)
    # printed, the index sets are their sizes, not hundreds of lines of indices
    assert repr(info2) == (f"CrossInfo(converged=True, nsweeps=1, nevals={info2.nevals}, "
                           "index_sets=<4 sets of 2, 2, 2, 2 rows>)")


def test_cross_bad_input():
    with pytest.raises(OperationError, match="ranks"):
        tt.cross(lambda i: np.ones(len(i)), (2, 2))
    with pytest.raises(OperationError, match="shape"):
        tt.cross(lambda i: np.ones((len(i), 2)), (2, 2), 1, rng=0)
    with pytest.raises(OperationError, match="index set"):
        tt.cross(lambda i: np.ones(len(i)), (2, 2, 2), index_sets=[np.zeros((1, 2), int)])
    with pytest.raises(OperationError, match="index set 1"):
        tt.cross(lambda i: np.ones(len(i)), (2, 2, 2), 1,
                 index_sets=[np.zeros((2, 2), int), np.zeros((1, 1), int)])
    ones = lambda i: np.ones(len(i))  # noqa: E731
    for bad, words in (([[0, 0], [-1, 1]], "index -1 for mode 1"),
                       ([[0, 0], [1, 3]], "index 3 for mode 2")):  # never reach f
        with pytest.raises(OperationError, match=words):
            tt.cross(ones, (4, 3, 3), index_sets=[np.array(bad), np.array([[0], [1]])])
    for kwargs, words in [({"dims": (2, 0, 2)}, "dimensions >= 1"), ({"dims": ()}, "dimensions"),
                          ({"nsweeps": 0}, "nsweeps"), ({"nsweeps": 1.5}, "nsweeps"),
                          ({"tau": 0.5}, "tau"), ({"tau": float("nan")}, "tau")]:
        with pytest.raises(OperationError, match=words):
            tt.cross(ones, **{"dims": (2, 3, 2), "ranks": 1, **kwargs})
    with pytest.raises(OperationError, match=r"NaN or inf at 1 of 3 points"):
        tt.cross(lambda i: np.where(i[:, 1] == 2, np.inf, 1.0), (2, 3, 2), 1, rng=0)
    with pytest.raises(OperationError, match="tau"):
        tt.maxvol(np.ones((4, 2)), tau=0.9)


def test_maxvol_finds_a_dominant_submatrix():
    a = np.random.default_rng(6).standard_normal((40, 4))
    rows = tt.maxvol(a, tau=1.01)
    coef = np.linalg.solve(a[rows].T, a.T).T
    assert len(set(rows.tolist())) == 4 and np.abs(coef).max() <= 1.01 + 1e-12


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 5), (3, 1, 4), (1, 6, 1), (2, 1, 1, 3)])
def test_from_dense_of_unit_axes(shape, dtype):
    """A Gram matrix of one row is 1 x 1: LAPACK's eigh was handed one row of it (the
    stack of one matrix was confused with the matrix), for real data only."""
    a = np.random.default_rng(4).standard_normal(shape).astype(dtype) + 1
    for eps in (0.0, 0.1):
        y = tt.from_dense(a, eps)
        assert y.dims == shape and rel(y.to_dense(), a) <= max(eps, 10 * tol(dtype))


def test_from_dense_of_a_vector_owns_its_core():
    v = np.arange(5.0)
    x = tt.from_dense(v)
    v[0] = 99.0
    np.testing.assert_array_equal(x.to_dense(), np.arange(5.0))

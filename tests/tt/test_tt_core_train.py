"""Cores, storage models and trains against dense results."""

import copy

import numpy as np
import pytest
from tt_helpers import DTYPES, STORAGES, rand, rel, tol

from tenalg import tt
from tenalg.errors import DescriptorError, DTypeError, OperationError
from tenalg.tt.core import zero_fiber
from tenalg.tt.train import LazySum


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_core_views_and_unfoldings(storage, dtype):
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(dtype)
    a[1, :, 2] = 0
    c = tt.TensorCore(a, storage=storage)
    assert (c.lr, c.dd, c.rr, c.dtype, c.storage) == (2, 3, 4, np.dtype(dtype), storage)
    np.testing.assert_array_equal(c.array(), a)
    np.testing.assert_array_equal(c.vertical_unfolding(), a.reshape(6, 4))
    np.testing.assert_array_equal(c.horizontal_unfolding(), a.reshape(2, 12))
    assert c[1, 2, 3] == a[1, 2, 3]
    np.testing.assert_array_equal(c.fiber(0, 1), a[0, :, 1])
    np.testing.assert_array_equal(c.take(np.array([2, 0, 2])),
                                  a[:, [2, 0, 2], :].transpose(1, 0, 2))
    v = np.arange(3.0).astype(dtype)
    np.testing.assert_allclose(c.matvec(v), np.einsum("lnr,n->lr", a, v), rtol=tol(dtype))
    np.testing.assert_allclose(c.scaled(2).array(), 2 * a, rtol=tol(dtype))
    assert c.scaled(2).dtype == np.dtype(dtype)
    if storage == "fiber":
        assert c.nonzero_fibers() == 7
        assert c.fiber(1, 2) is zero_fiber(3, np.dtype(dtype))


def test_zero_fibers_are_shared_and_cores_immutable():
    z = tt.TensorCore.zeros(3, 5, 2, storage="fiber")
    assert z.nonzero_fibers() == 0
    assert z.fiber(0, 0) is z.fiber(2, 1)
    a = np.ones((1, 2, 1))
    c = tt.TensorCore(a)
    a[0, 0, 0] = 7
    assert c[0, 0, 0] == 1.0
    with pytest.raises(ValueError):
        c.array()[0, 0, 0] = 3
    d = c.copy()
    assert not np.shares_memory(d.array(), c.array())


def test_core_bad_input():
    with pytest.raises(DescriptorError):
        tt.TensorCore(np.ones((2, 3)))
    with pytest.raises(DTypeError):
        tt.TensorCore(np.ones((1, 2, 1), dtype=np.float16))
    with pytest.raises(OperationError):
        tt.TensorCore(np.ones((1, 2, 1)), storage="dense")
    assert tt.TensorCore(np.ones((1, 2, 1), dtype=np.int32)).dtype == np.float64


def test_construction_names_the_disagreeing_cores():
    with pytest.raises(OperationError, match="cores 1 and 2 disagree"):
        tt.TensorTrain([np.ones((1, 2, 2)), np.ones((2, 2, 3)), np.ones((2, 2, 1))])


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_train_dense_elements_and_evaluate(storage, dtype):
    x = rand((3, 4, 2, 3), (2, 3, 2), dtype, storage)
    cores = [c.array() for c in x.cores]
    dense = np.einsum("aib,bjc,ckd,dle->ijkl", *cores)
    assert x.dims == (3, 4, 2, 3) and x.ranks == (1, 2, 3, 2, 1) and x.ncores == 4
    assert x.closed and not x.empty and x.dtype == np.dtype(dtype) and x.storage == storage
    assert x.to_dense().dtype == np.dtype(dtype)
    np.testing.assert_allclose(x.to_dense(), dense, rtol=tol(dtype), atol=tol(dtype))
    idx = np.random.default_rng(1).integers(0, (3, 4, 2, 3), size=(20, 4))
    np.testing.assert_allclose(x.evaluate(idx), dense[tuple(idx.T)], rtol=tol(dtype),
                               atol=tol(dtype))
    np.testing.assert_allclose(x[2, 1, 0, 2], dense[2, 1, 0, 2], rtol=tol(dtype))
    with pytest.raises(OperationError):
        x.evaluate(np.array([[0, 0, 0, 3]]))


@pytest.mark.parametrize("storage", STORAGES)
def test_open_train(storage):
    x = rand((2, 3), 2, storage=storage, left_bond=3, right_bond=2)
    assert not x.closed and x.ranks == (3, 2, 2)
    dense = np.einsum("aib,bjc->aijc", *[c.array() for c in x.cores])
    np.testing.assert_allclose(x.to_dense(), dense)
    np.testing.assert_allclose(x.evaluate(np.array([[1, 2]])), dense[:, 1, 2, :][None])


def test_storages_give_identical_results():
    x = rand((3, 4, 5), 3, np.complex128, "contiguous")
    y = x.to_storage("fiber")
    assert y.storage == "fiber" and all(c.storage == "fiber" for c in y.cores)
    np.testing.assert_allclose(y.to_dense(), x.to_dense(), rtol=1e-14)
    assert np.array_equal(y.to_storage("contiguous").cores[1].array(), x.cores[1].array())


@pytest.mark.parametrize("storage", STORAGES)
def test_copy_clear_build_fresh_and_versions(storage):
    x = rand((2, 3, 4), 2, storage=storage)
    alias = x
    y = x.copy()
    assert y.version == 0 and y.ranks == x.ranks
    assert not np.shares_memory(y.cores[0].array(), x.cores[0].array()) or storage == "fiber"
    v = x.version
    x.clear()
    assert x.empty and alias.empty and x.ranks == () and x.version == v + 1
    assert not x.closed
    np.testing.assert_allclose(y.to_dense(), rand((2, 3, 4), 2).to_dense())
    with pytest.raises(OperationError):
        x.to_dense()
    x.build_fresh(3, dims=(2, 2))
    assert x.ranks == (1, 3, 1) and x.version == v + 2 and x.storage == storage
    assert not x.to_dense().any()
    y.build_fresh([1, 5, 2, 1])
    assert y.ranks == (1, 5, 2, 1)


def test_zeros_random_and_astype():
    z = tt.TensorTrain.zeros((2, 3), [4], left_bond=2, storage="fiber", dtype=np.complex64)
    assert z.ranks == (2, 4, 1) and z.dtype == np.complex64
    assert all(c.nonzero_fibers() == 0 for c in z.cores)
    x = tt.random((2, 2), 2, rng=3, dtype=np.complex64)
    assert x.dtype == np.complex64 and np.iscomplexobj(x.to_dense())
    assert x.astype(np.complex128).dtype == np.complex128
    with pytest.raises(OperationError):
        tt.random((2, 2), [1, 2])


def test_copies_are_deep():
    x = rand((2, 3), 2, storage="fiber")
    y = x.copy()
    assert y.cores[0].fiber(0, 0) is not x.cores[0].fiber(0, 0)
    assert rel(y.to_dense(), x.to_dense()) == 0


@pytest.mark.parametrize("storage", STORAGES)
def test_shallow_copies_share_cores_and_change_alone(storage):
    x, z = rand((2, 3, 4), 2, storage=storage), rand((2, 3, 4), 1, seed=5, storage=storage)
    y = copy.copy(x)
    assert type(y) is tt.TensorTrain and y.cores == x.cores and y.storage == storage
    dense = x.to_dense()
    y.clear()
    assert y.empty and x.ranks == (1, 2, 2, 1)
    np.testing.assert_array_equal(x.to_dense(), dense)

    s = LazySum(x, z)
    t = copy.copy(s)
    assert type(t) is type(s) and t.summands is not None and t.summands == s.summands
    tt.round_(t, 1e-12)
    assert s.summands is not None and s.ranks == (1, 3, 3, 1)
    np.testing.assert_allclose(t.to_dense(), dense + z.to_dense(), atol=1e-12)
    np.testing.assert_allclose(s.to_dense(), t.to_dense(), atol=1e-12)


def test_a_rank_of_zero_is_refused():
    with pytest.raises(OperationError, match="rank >= 1"):
        tt.TensorTrain([np.zeros((1, 2, 0)), np.zeros((0, 2, 1))])

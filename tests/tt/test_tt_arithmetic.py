"""Sums, scaling, Hadamard products, inner products, norms and contractions vs dense."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tt_helpers import DTYPES, STORAGES, delta, long_train, rand, rel, tol

from tenalg import tt
from tenalg.errors import OperationError
from tenalg.tt.train import block_sum

DIMS = (3, 2, 4, 3)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sums_products_and_scalars(storage, dtype):
    a = rand(DIMS, 2, dtype, storage, seed=1)
    b = rand(DIMS, (3, 1, 2), dtype, storage, seed=2)
    da, db = a.to_dense(), b.to_dense()
    s = tt.add(a, b)
    assert s.ranks == (1, 5, 3, 4, 1) and s.dtype == np.dtype(dtype) and s.storage == storage
    cases = [(s, da + db), (a + b, da + db), (a - b, da - db), (tt.sub(a, b), da - db),
             (2.5 * a, 2.5 * da), (a * 2.5, 2.5 * da), (a / 4, da / 4), (-a, -da),
             (tt.neg(a), -da), (tt.scale(a, 3), 3 * da), (tt.hadamard(a, b), da * db),
             (a * b, da * db)]
    for x, want in cases:
        assert x.dtype == np.dtype(dtype)
        np.testing.assert_allclose(x.to_dense(), want, rtol=tol(dtype), atol=tol(dtype) * 10)
    assert tt.hadamard(a, b).ranks == (1, 6, 2, 4, 1)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dot_norm_sum_and_vector_contractions(storage, dtype):
    a = rand(DIMS, 2, dtype, storage, seed=1)
    b = rand(DIMS, 3, dtype, storage, seed=2)
    da, db = a.to_dense(), b.to_dense()
    scalars = [(tt.dot(a, b), np.vdot(da, db)), (tt.norm(a), np.linalg.norm(da)),
               (tt.sum(a), da.sum())]
    vs = [np.arange(1, n + 1).astype(dtype) for n in DIMS]
    scalars.append((tt.contract_vectors(a, vs), np.einsum("ijkl,i,j,k,l->", da, *vs)))
    for got, want in scalars:
        assert np.asarray(got).dtype in (np.dtype(dtype), np.finfo(dtype).dtype)
        np.testing.assert_allclose(got, want, rtol=tol(dtype) * 10)
    assert np.asarray(tt.norm(a)).dtype == np.finfo(dtype).dtype


@pytest.mark.parametrize("low,high", [(np.float32, np.float64), (np.complex64, np.float64),
                                      (np.float32, np.complex128)])
def test_a_mixed_precision_dot_is_as_exact_as_its_result_type(low, high):
    """The float32 train's values are exact in float64; scaling its cores by their
    largest modulus rounded them (a relative 1e-7), by a power of two does not."""
    a, b = rand((3, 4, 5, 3), 3, low, seed=4), rand((3, 4, 5, 3), 2, high, seed=5)
    wide = [tt.TensorTrain([c.array().astype(np.complex128) for c in t.cores]).to_dense()
            for t in (a, b)]
    exact = np.vdot(*wide)
    for got in (tt.dot(a, b), np.conj(tt.dot(b, a))):
        assert abs(complex(got) - exact) <= 1e-14 * abs(exact)


def test_dot_conjugates_the_first_argument():
    a = rand((2, 3), 2, np.complex128, seed=1)
    b = rand((2, 3), 2, np.complex128, seed=2)
    np.testing.assert_allclose(tt.dot(a, b), np.vdot(a.to_dense(), b.to_dense()))
    np.testing.assert_allclose(tt.dot(b, a), np.conj(tt.dot(a, b)))


def test_open_trains_dot_norm_contract():
    a = rand((2, 3), 2, left_bond=2, right_bond=3, seed=1)
    b = rand((2, 3), 1, left_bond=2, right_bond=3, seed=2)
    np.testing.assert_allclose(tt.dot(a, b), np.vdot(a.to_dense(), b.to_dense()))
    np.testing.assert_allclose(tt.norm(a), np.linalg.norm(a.to_dense()))
    m = tt.contract_vectors(a, [np.ones(2), np.ones(3)])
    np.testing.assert_allclose(m, a.to_dense().sum(axis=(1, 2)))


@pytest.mark.parametrize("op", [tt.add, tt.add_, tt.sub, tt.hadamard])
def test_open_trains_rejected(op):
    closed = rand((2, 3), 2)
    opened = rand((2, 3), 2, left_bond=2)
    with pytest.raises(OperationError, match="closed"):
        op(closed, opened)
    with pytest.raises(OperationError, match="closed"):
        op(opened, closed)


def test_mismatched_dims_rejected():
    with pytest.raises(OperationError, match="dims"):
        tt.add(rand((2, 3), 1), rand((2, 4), 1))
    with pytest.raises(OperationError, match="dims"):
        tt.dot(rand((2, 3), 1), rand((3, 3), 1))


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_delta_trains_reconstruct_exactly(storage, dtype):
    dims = (3, 4, 2)
    points = [(0, 1, 1), (2, 3, 0), (1, 0, 1)]
    s = delta(dims, points[0], dtype, storage)
    for p in points[1:]:
        s = s + delta(dims, p, dtype, storage)
    want = np.zeros(dims, dtype=dtype)
    for p in points:
        want[p] = 1
    np.testing.assert_array_equal(s.to_dense(), want)
    h = tt.hadamard(s, delta(dims, points[1], dtype, storage) + delta(dims, points[2], dtype,
                                                                     storage))
    want_h = np.zeros(dims, dtype=dtype)
    want_h[points[1]] = want_h[points[2]] = 1
    np.testing.assert_array_equal(h.to_dense(), want_h)
    assert h.dtype == np.dtype(dtype)
    if storage == "fiber":
        inner = s.cores[1]
        assert inner.nonzero_fibers() == 3 and inner.lr * inner.rr == 9
        assert h.cores[1].nonzero_fibers() == 6


@pytest.mark.parametrize("storage", STORAGES)
def test_destructive_sum(storage):
    a, b = rand((2, 3, 2), 2, storage=storage, seed=1), rand((2, 3, 2), 1, storage=storage)
    want = a.to_dense() + b.to_dense()
    b_fiber = b.cores[1].fiber(0, 0)
    va = a.version
    alias = b
    tt.add_(a, b)
    assert b.empty and alias.empty and a.version == va + 1 and a.ranks == (1, 3, 3, 1)
    np.testing.assert_allclose(a.to_dense(), want)
    if storage == "fiber":
        assert a.cores[1].fiber(2, 2) is b_fiber
    tt.add_(a, a)
    np.testing.assert_allclose(a.to_dense(), 2 * want)


def test_fiber_sum_copies_no_data():
    a, b = rand((2, 3, 2), 2, storage="fiber", seed=1), rand((2, 3, 2), 2, storage="fiber")
    s = a + b
    assert s.cores[1].fiber(0, 1) is a.cores[1].fiber(0, 1)
    assert s.cores[1].fiber(3, 2) is b.cores[1].fiber(1, 0)
    assert s.cores[1].fiber(0, 3) is s.cores[1].fiber(3, 0)


def test_mixed_dtypes_promote_and_scalars_do_not_widen():
    a = rand((2, 3), 2, np.float32)
    assert (a * np.float64(2.0)).dtype == np.float32
    assert (a + rand((2, 3), 2, np.complex64)).dtype == np.complex64
    assert (a + rand((2, 3), 2, np.float64)).dtype == np.float64
    assert (a * 1j).dtype == np.complex64


def test_long_train_norm_and_dot_do_not_overflow():
    x, nu = long_train(400, 3, 2, 4.0)
    log_norm = 399 * np.log(4.0) + np.log(nu)
    n = tt.norm(x)
    assert np.isfinite(n) and abs(np.log(n) - log_norm) < 1e-9
    small = x * 4.0 ** -399
    np.testing.assert_allclose(tt.dot(small, small), nu**2, rtol=1e-9)
    np.testing.assert_allclose(tt.norm(small), nu, rtol=1e-9)
    tiny, _ = long_train(400, 3, 2, 0.25)
    assert tt.norm(tiny) > 0 and np.isfinite(np.log(tt.norm(tiny * 4.0**399)))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from(STORAGES), st.integers(0, 2**16))
def test_sums_and_products_hypothesis(dims, ra, rb, storage, seed):
    a, b = rand(dims, ra, storage=storage, seed=seed), rand(dims, rb, storage=storage,
                                                           seed=seed + 1)
    da, db = a.to_dense(), b.to_dense()
    np.testing.assert_allclose((a + b).to_dense(), da + db, atol=1e-12)
    np.testing.assert_allclose(tt.hadamard(a, b).to_dense(), da * db, atol=1e-12)
    np.testing.assert_allclose(tt.dot(a, b), np.vdot(da, db), atol=1e-10)
    assert rel(tt.norm(a), np.linalg.norm(da)) < 1e-12


def test_division_subtraction_and_one_core_trains_as_numpy():
    """Found by a probe: x / np.float32(3) took 1/3 in float32 (a float64 train off by
    3e-8), a - 1 raised AttributeError where a + 1 raises OperationError, x / x named
    the wrong operand, and a one-core train's to_dense() was the core's read-only
    buffer."""
    x = rand((2, 3), 2, seed=0)
    dense = x.to_dense()
    for three in (np.float32(3), np.float16(3), 3, 3.0):
        np.testing.assert_allclose((x / three).to_dense(), dense / 3, rtol=1e-15)
    for bad in (lambda: x - 1, lambda: x + 1):
        with pytest.raises(OperationError, match="TensorTrains, got int"):
            bad()
    with pytest.raises(TypeError, match="'TensorTrain' and 'TensorTrain'"):
        x / x
    one = rand((5,), 1, seed=1)
    full = one.to_dense()
    full[0] = 7.0  # a new, writeable array
    assert one.to_dense()[0] != 7.0


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("d", [1, 2, 5])
def test_sums_of_several_trains_and_products_of_mixed_dtypes(storage, d):
    """Contiguous trains' sums and products are built from their arrays directly; fiber
    ones core by core: the same tensors, in the promoted dtype."""
    dims = (2, 3, 1, 4, 2)[:d]
    a = rand(dims, 2, np.float32, storage, seed=1)
    b = rand(dims, 3, np.float64, storage, seed=2)
    c = rand(dims, 1, np.complex64, storage, seed=3)
    want = [t.astype(np.complex128).to_dense() for t in (a, b, c)]
    total = block_sum(a, b, c)
    assert total.dtype == np.complex128 and total.storage == storage
    assert total.ranks == (1, *[6] * (d - 1), 1)
    np.testing.assert_allclose(total.to_dense(), sum(want), rtol=1e-6, atol=1e-6)
    product = tt.hadamard(a, b)
    assert product.dtype == np.float64 and product.ranks == (1, *[6] * (d - 1), 1)
    np.testing.assert_allclose(product.to_dense(), want[0] * want[1], rtol=1e-6, atol=1e-9)

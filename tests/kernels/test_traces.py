"""Sums over one diagonal that keep any number of free axes in their input order (issue 32:
three or more crashed in strided_sums), through every front end, against NumPy."""

import itertools
import string

import numpy as np
import pytest

import tenalg as ta
from tenalg.kernels import cpu, direct

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOLERANCE = {np.float32: 1e-5, np.complex64: 1e-5, np.float64: 1e-12, np.complex128: 1e-12}
# every pair of axes of ranks 2 to 8: traces keeping 0 to 6 free axes in order
PAIRS = [(rank, p, q) for rank in range(2, 9) for p, q in itertools.combinations(range(rank), 2)]


def operand(rank, p, q, dtype, seed):
    """An array of ``rank`` axes, extents 1 to 3 but for the traced pair (2 or 3 each)."""
    rng = np.random.default_rng(seed)
    shape = [int(e) for e in rng.integers(1, 4, rank)]
    shape[p] = shape[q] = int(rng.integers(2, 4))
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def modes(rank, p, q):
    """Einsum subscripts of the trace over axes p, q (free axes in input order)."""
    letters = list(string.ascii_letters[1:rank + 1])
    letters[p] = letters[q] = "a"
    return "".join(letters), "".join(m for m in letters if m != "a")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("rank", "p", "q"), PAIRS)
def test_traces_keep_any_number_of_free_axes(rank, p, q, dtype):
    a = operand(rank, p, q, dtype, seed=rank * 100 + p * 10 + q)
    subscripts, kept = modes(rank, p, q)
    want = np.trace(a, axis1=p, axis2=q)
    tol = TOLERANCE[dtype]
    for got in (ta.trace(a, p, q), ta.partial_trace(a, [(p, q)]),
                ta.einsum(f"{subscripts}->{kept}", a), ta.reduce(a, subscripts, kept, "sum")):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_the_issues_examples():
    a = np.random.default_rng(1).standard_normal((2,) * 5)
    want = np.einsum("iijkl->jkl", a)
    np.testing.assert_allclose(ta.trace(a, 0, 1), want, rtol=1e-14)
    np.testing.assert_allclose(ta.einsum("iijkl->jkl", a), want, rtol=1e-14)
    np.testing.assert_allclose(ta.reduce(a, "iijkl", "jkl", "sum"), want, rtol=1e-14)
    np.testing.assert_allclose(ta.partial_trace(a, [(0, 1)]), want, rtol=1e-14)


def runner(a, subscripts, kept):
    op = ta.Operation.reduction(ta.Operand(a, subscripts), out_modes=kept)
    return op, direct.runner(op)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_free_axes_that_continue_one_another_are_one_lane_of_the_kernel(dtype):
    """``iijkl->jkl`` of a C array: j, k, l lie one after the other in memory and in the
    output, so the strided-sums kernel adds them as one lane of 8 sums."""
    a = np.random.default_rng(2).standard_normal((128, 128, 2, 2, 2)).astype(dtype)
    op, run = runner(a, "iijkl", "jkl")
    assert run.describe.startswith("cpu.strided_sums") and "lanes [(8, 1)]" in run.describe
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(run((a,)), np.einsum("iijkl->jkl", a), rtol=tol, atol=tol)
    np.testing.assert_allclose(ta.Plan(op).execute(a), np.einsum("iijkl->jkl", a), rtol=tol,
                               atol=tol)


def test_three_free_axes_apart_go_to_numpy():
    """j, k and l separated by the diagonal's axes: three lanes, which the kernel declines
    (None, not a crash); NumPy's einsum sums them."""
    a = np.random.default_rng(3).standard_normal((2, 64, 2, 64, 2))
    op, run = runner(a, "jikil", "jkl")
    assert run.describe.startswith("numpy.einsum")
    np.testing.assert_allclose(run((a,)), np.einsum("jikil->jkl", a), rtol=1e-13)
    assert cpu.strided_sums(np.dtype(np.float64), 64, 130, [(2, 8192), (2, 128), (2, 1)]) is None

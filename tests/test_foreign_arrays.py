"""tenalg's NumPy-named front ends hand arrays of other kinds to the front end registered
for their kind (tenalg.seam): Dask arrays stay lazy and go to tenalg.distributed."""

import numpy as np
import pytest

import tenalg as ta

da = pytest.importorskip("dask.array")


@pytest.fixture
def x():
    rng = np.random.default_rng(0)
    return rng.standard_normal((6, 5, 6))


def _lazy(result, expected):
    assert isinstance(result, da.Array)
    np.testing.assert_allclose(result.compute(scheduler="synchronous"), expected, atol=1e-12)


def test_dask_arrays_stay_dask_arrays_through_every_front_end(x):
    d = da.from_array(x, chunks=(4, 3, 5))
    _lazy(ta.einsum("ijk,kjl->il", d, d), np.einsum("ijk,kjl->il", x, x))
    _lazy(ta.einsum("iji->j", d), np.einsum("iji->j", x))
    _lazy(ta.sum(d, axis=(0, 2)), x.sum(axis=(0, 2)))
    _lazy(ta.trace(d, 0, 2), np.trace(x, axis1=0, axis2=2))
    _lazy(ta.partial_trace(d, [(0, 2)]), np.trace(x, axis1=0, axis2=2))
    _lazy(ta.permute(d, (2, 0, 1)), x.transpose(2, 0, 1))
    _lazy(ta.reduce(d, "ijk", "j", "max"), x.max(axis=(0, 2)))
    _lazy(ta.contract(d, "ijk", x, "kjl", "il"), np.einsum("ijk,kjl->il", x, x))


def test_a_plan_for_dask_arrays_asks_the_dask_backend(x):
    pytest.importorskip("dask.distributed")
    operation = ta.Operation.reduction(
        ta.Operand(ta.TensorDescriptor.contiguous(x.shape, x.dtype), "ijk"), out_modes="j")
    plan = ta.Plan(operation, kind="dask")
    assert plan.backend == "dask"
    _lazy(plan.execute(da.from_array(x, chunks=3), alpha=2), 2 * x.sum(axis=(0, 2)))


def test_numpy_operands_never_import_dask_front_ends():
    assert ta.seam.foreign_kind([np.ones(2), [1, 2], 3.0, "ij"]) is None

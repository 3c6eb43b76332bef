"""Plans and data objects pickle, for process pools and Dask workers: plans as their
recipe (operation and backend asked for, or expression, options and operand layouts),
planned again where they are unpickled; trains, packs and block tensors as their data."""

import pickle

import numpy as np
import pytest

import tenalg as ta
from tenalg import symmetric as sym
from tenalg import tt


def _again(obj):
    return pickle.loads(pickle.dumps(obj))


def test_plans_of_every_kind_are_planned_again_when_unpickled():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    ops = ta.Operation
    cases = [
        (ops.permutation(ta.Operand(a[::-1], "ij"), out_modes="ji"), (a[::-1],), a[::-1].T),
        (ops.reduction(ta.Operand(a, "ij"), out_modes="j"), (a,), a.sum(axis=0)),
        (ops.contraction(ta.Operand(a, "ij"), ta.Operand(b, "jk"), out_modes="ik"), (a, b),
         a @ b),
        (ops.elementwise_binary(ta.Operand(a, "ij"), ta.Operand(a.T.copy(), "ji"),
                                out_modes="ij"), (a, a.T.copy()), 2 * a),
    ]
    for operation, arrays, expected in cases:
        for backend in ("auto", "reference"):
            plan = ta.Plan(operation, backend)
            again = _again(plan)
            assert type(again) is ta.Plan and again is not plan
            assert again.backend == plan.backend and again.kind == plan.kind
            np.testing.assert_allclose(again.execute(*arrays), expected, rtol=1e-13)


def test_einsum_plans_are_planned_again_when_unpickled():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 6)), rng.standard_normal((5, 6))[:, ::-1]
    plan = ta.einsum_plan("ij,kj->ik", x, y, optimize="greedy", order="F")
    again = _again(plan)
    np.testing.assert_allclose(again(x, y), x @ y.T, rtol=1e-13)
    assert again(x, y).flags.f_contiguous and again.explain() == plan.explain()
    view = _again(ta.einsum_plan("ii->i", x[:, :4]))
    assert np.shares_memory(view(x[:, :4]), x)
    ints = np.arange(12).reshape(3, 4)
    assert np.array_equal(_again(ta.einsum_plan("ij,kj", ints, ints))(ints, ints), ints @ ints.T)


def test_an_einsum_plan_on_strides_of_no_whole_items_pickles():
    buf = np.arange(64, dtype=np.uint8)
    odd = np.ndarray((3,), np.float64, buffer=buf.data, strides=(12,))
    again = _again(ta.einsum_plan("i->", odd))
    assert again(odd) == np.einsum("i->", odd)
    with pytest.raises(ta.InputMismatchError):
        again(odd[:2])


def test_trains_packs_and_block_tensors_pickle_as_their_data():
    train = tt.random((3, 4, 5), 2, rng=2)
    assert np.array_equal(_again(train).to_dense(), train.to_dense())
    pack = tt.TrainPack([[tt.random((3,) * 4, 2, rng=i + 2 * j) for j in range(2)]
                         for i in range(2)])
    again = _again(pack)
    assert np.array_equal(again.norm(), pack.norm())
    bond = sym.Leg(sym.U1(), [(0, 2), (1, 3)])
    block = sym.BlockTensor.random((bond, bond.conj()), rng=3)
    assert np.array_equal(_again(block).to_dense(), block.to_dense())


@pytest.mark.parametrize("storage", ["contiguous", "fiber"])
def test_train_cores_stay_read_only_when_pickled_or_deep_copied(storage):
    """Cores are immutable (docs/tt.md): NumPy brought their arrays back writeable, and a
    write into a deep copy's core changed every train that shared it (found by a probe)."""
    import copy

    x = tt.random((3, 4, 3), 2, rng=0)
    x = tt.TensorTrain([tt.TensorCore(c.array(), storage=storage) for c in x.cores])
    for again in (_again(x), copy.deepcopy(x)):
        assert [c.storage for c in again.cores] == [storage] * 3
        np.testing.assert_array_equal(again.to_dense(), x.to_dense())
        for core in again.cores:
            if storage == "contiguous":
                with pytest.raises(ValueError, match="read-only"):
                    core.array()[...] = 0.0
            else:  # its fibers, shared zero fiber included
                assert not any(f.flags.writeable for f in core._grid.reshape(-1))

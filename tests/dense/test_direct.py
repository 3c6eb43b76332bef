"""Direct runners (one NumPy call for small plain plans) against the reference kernels."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta

from .strategies import COMPLEX, shapes, strided, tolerance, wide

DTYPES = [np.float32, np.float64] + COMPLEX  # compute type = storage type


def _pair(operation):
    auto = ta.Plan(operation)
    assert auto.backend == "direct", auto.explain()
    return auto, ta.Plan(operation, backend="reference")


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=shapes(max_dims=5, max_side=4), dtype=st.sampled_from(DTYPES),
       order=st.sampled_from("KC"))
def test_permutation(data, shape, dtype, order):
    a = data.draw(strided(shape, dtype, allow_broadcast=True))
    axes = data.draw(st.permutations(range(a.ndim)))
    operation = ta.Operation.permutation(ta.Operand(a, range(a.ndim)), out_modes=axes,
                                         order=order)
    auto, reference = _pair(operation)
    got, expected = auto.execute(a), reference.execute(a)
    assert [s for s, n in zip(got.strides, got.shape, strict=True) if n > 1] == [
        s for s, n in zip(expected.strides, expected.shape, strict=True) if n > 1]
    np.testing.assert_array_equal(got, expected)
    run = auto.runner.call  # the one-array shortcut and the general call agree
    for result in (run((a,)),) + ((run.single(a),) if run.single else ()):
        assert result.strides == got.strides
        np.testing.assert_array_equal(result, expected)
    out = np.full_like(got, 7)
    assert auto.execute_into(out, a) is out
    np.testing.assert_array_equal(out, got)


def _moving(x):
    """The strides of ``x``'s axes of extent above 1 (an axis of extent 1 never moves:
    its stride is any, as in NumPy's contiguity flags)."""
    return [s for s, n in zip(x.strides, x.shape, strict=True) if n > 1]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=shapes(max_dims=5, max_side=4), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(["sum", "product"]))
def test_reduction(data, shape, dtype, op):
    a = data.draw(strided(shape, dtype, allow_broadcast=True))
    modes = list(range(a.ndim))
    kept = data.draw(st.permutations(modes))[: data.draw(st.integers(0, a.ndim))]
    operation = ta.Operation.reduction(ta.Operand(a, modes), out_modes=kept, op=op)
    auto, reference = _pair(operation)
    got = auto.execute(a)
    assert got.shape == tuple(a.shape[m] for m in kept)
    np.testing.assert_allclose(wide(got), wide(reference.execute(a)),
                               rtol=tolerance(dtype), atol=tolerance(dtype))
    run = auto.runner.call  # NumPy's own result, where taken, is the general call's
    general = run((a,))
    assert auto.single is run.single
    if run.single is not None:
        single = run.single(a)
        assert type(single) is np.ndarray and _moving(single) == _moving(general)
        np.testing.assert_array_equal(single, general)
    if kept == sorted(kept) and kept and a.flags.c_contiguous and a.size:
        assert run.single is not None  # the common sum: NumPy's own result


def test_a_reduction_keeping_an_axis_of_extent_1_agrees_whatever_its_stride():
    """Hypothesis's case: a (2, 1) float32 input of strides (4, 8), every mode kept. The
    general call keeps the stride 8 of the extent-1 axis, NumPy's own result has 4; both
    are the same layout."""
    a = np.lib.stride_tricks.as_strided(np.arange(8, dtype=np.float32), (2, 1), (4, 8))
    run = ta.Plan(ta.Operation.reduction(ta.Operand(a, [0, 1]), out_modes=[0, 1])).runner.call
    general = run((a,))
    assert run.single is not None and _moving(run.single(a)) == _moving(general) == [4]
    np.testing.assert_array_equal(run.single(a), general)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), shape=shapes(max_dims=4, max_side=4), dtype=st.sampled_from(DTYPES),
       ops=st.tuples(st.sampled_from(["add", "mul"]), st.sampled_from(["add", "mul"])),
       trinary=st.booleans())
def test_elementwise(data, shape, dtype, ops, trinary):
    """Operands in any order of out's modes; all but the first may lack some (broadcast)."""
    modes = list(range(len(shape)))
    orders = [data.draw(st.permutations(modes)) for _ in range(3 if trinary else 2)]
    orders[1:] = [order[:data.draw(st.integers(0, len(order)))] for order in orders[1:]]
    arrays = [data.draw(strided(tuple(shape[m] for m in order), dtype, allow_broadcast=True))
              for order in orders]
    operands = [ta.Operand(x, order) for x, order in zip(arrays, orders, strict=True)]
    if trinary:
        operation = ta.Operation.elementwise_trinary(*operands, out_modes=modes, op_ab=ops[0],
                                                     op_abc=ops[1])
    else:
        operation = ta.Operation.elementwise_binary(*operands, out_modes=modes, op=ops[0])
    auto, reference = _pair(operation)
    values = data.draw(st.lists(st.sampled_from([1, 2.5, -0.5, 0, -1]), min_size=len(arrays),
                                max_size=len(arrays)))
    scalars = dict(zip(("alpha", "beta", "gamma"), values, strict=False))  # binary: 2
    expected = reference.execute(*arrays, **scalars)
    out = np.full_like(expected, 7)
    for got in (auto.execute(*arrays, **scalars), auto.execute_into(out, *arrays, **scalars)):
        if np.dtype(dtype).kind == "f":  # the reference's operations in its order
            np.testing.assert_array_equal(got, expected)
        else:  # complex products may round differently (NumPy's scalar and array loops)
            np.testing.assert_allclose(got, expected, rtol=tolerance(dtype),
                                       atol=tolerance(dtype))


def test_execute_into_shortcut_keeps_every_check():
    """A direct plan of one input runs ``execute_into`` straight where ``out`` has the
    plan's layout and shares nothing with the input; any other ``out`` meets the checks,
    which say what is wrong before anything is written."""
    a = np.arange(16.0).reshape(4, 4)
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji", order="C"))
    assert plan.backend == "direct"
    out = np.zeros((4, 4))
    assert plan.execute_into(out, a) is out and np.array_equal(out, a.T)
    assert plan.execute_into(out, a, alpha=2) is out and np.array_equal(out, 2 * a.T)
    row = np.zeros((2, 4, 4))[1]  # a view: its memory is compared with the input's
    assert plan.execute_into(row, a) is row and np.array_equal(row, a.T)
    memory = np.arange(20.0)
    overlapping = memory[:16].reshape(4, 4), memory[4:].reshape(4, 4)
    read_only = np.zeros((4, 4))
    read_only.flags.writeable = False
    own = np.ones((4, 4))  # owns its memory (no base), as ``out`` then is
    for target, x, error in [(a, a, ta.AliasError), (own, own, ta.AliasError),
                             (overlapping[1], overlapping[0], ta.AliasError),
                             (read_only, a, ta.OutputMismatchError),
                             (np.zeros((4, 4)).T, a, ta.OutputMismatchError),
                             (np.zeros((4, 4), np.float32), a, ta.OutputMismatchError)]:
        before, source = target.copy(), x.copy()
        with pytest.raises(error):
            plan.execute_into(target, x)
        assert np.array_equal(target, before) and np.array_equal(x, source)
    b = np.ones((4, 4))  # two inputs: out apart from each of them
    added = ta.Plan(ta.Operation.elementwise_binary(ta.Operand(a, "ij"), ta.Operand(b, "ji"),
                                                    out_modes="ij"))
    assert added.backend == "direct"
    assert added.execute_into(row, a, b) is row and np.array_equal(row, a + 1)
    for target, x, y in [(a, a, b), (b, a, b), (overlapping[1], a, overlapping[0]),
                         (read_only, a, b)]:
        before, sources = target.copy(), (x.copy(), y.copy())
        with pytest.raises((ta.AliasError, ta.OutputMismatchError)):
            added.execute_into(target, x, y)
        assert np.array_equal(target, before)
        assert all(np.array_equal(s, z) for s, z in zip(sources, (x, y), strict=True))
    summed = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out_modes="i"))
    assert summed.backend == "direct"
    into = np.full(4, np.nan)
    assert summed.execute_into(into, a) is into and into.tolist() == a.sum(axis=1).tolist()


def test_scalars_take_the_reference_path():
    a = np.arange(6.0).reshape(2, 3)
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out_modes="i"))
    assert plan.backend == "direct" and "direct (numpy.add.reduce" in plan.explain()
    assert plan.execute(a).tolist() == [3.0, 12.0]
    assert plan.execute(a, alpha=2).tolist() == [6.0, 24.0]
    assert plan.execute(a, alpha=1, beta=0).tolist() == [3.0, 12.0]


@pytest.mark.parametrize("operation", [
    ta.Operation.permutation(ta.Operand(np.ones((2, 3)), "ij", "negate"), out_modes="ji"),
    ta.Operation.permutation(ta.Operand(np.ones((2, 3), np.float32), "ij"), out="float64",
                             out_modes="ji"),
    ta.Operation.reduction(ta.Operand(np.ones((3, 3)), "ii"), out_modes="", op="product"),
    ta.Operation.reduction(ta.Operand(np.ones((3, 3)), "ij"), out_modes="i", op="max"),
    ta.Operation.reduction(ta.Operand(np.ones((2, 3), np.float16), "ij"), out_modes="i"),
], ids=["unary", "conversion", "diagonal-product", "max",
         "float16-computes-in-f32"])
def test_not_one_numpy_call(operation):
    assert ta.Plan(operation).backend == "reference"


@settings(max_examples=40, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_diagonal_sum(data, dtype):
    """Repeated modes (a diagonal) in a plain sum run as one np.einsum call, or as
    np.add.reduce of NumPy's diagonal view when everything is summed."""
    ndim = data.draw(st.integers(2, 5))
    labels = data.draw(st.lists(st.integers(0, 2), min_size=ndim, max_size=ndim))
    labels[-1] = labels[0]  # at least one repeat
    side = {m: data.draw(st.integers(0, 3)) for m in labels}
    a = data.draw(strided(tuple(side[m] for m in labels), dtype, allow_broadcast=True))
    distinct = list(dict.fromkeys(labels))
    kept = data.draw(st.permutations(distinct))[: data.draw(st.integers(0, len(distinct)))]
    auto, reference = _pair(ta.Operation.reduction(ta.Operand(a, labels), out_modes=kept))
    assert ("numpy.add.reduce of A's diagonal" if not kept else "numpy.einsum") in auto.explain()
    got, expected = auto.execute(a), reference.execute(a)
    np.testing.assert_allclose(wide(got), wide(expected), rtol=tolerance(dtype),
                               atol=tolerance(dtype))
    out = np.full_like(got, 7)
    assert auto.execute_into(out, a) is out
    np.testing.assert_array_equal(out, got)


def test_diagonal_sum_is_einsum_below_the_kernel_sizes():
    b = np.random.default_rng(0).random((64, 64, 8))
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(b, "iij"), out_modes="j"))
    assert "direct (numpy.einsum('aab->b')" in plan.explain()
    np.testing.assert_allclose(plan.execute(b), np.einsum("iij->j", b))
    assert ta.Plan(ta.Operation.reduction(ta.Operand(b, "iij"), out_modes="j", op="max"),
                   ).backend != "direct"


def test_a_plan_probes_numpy_on_zeros_not_on_uninitialised_memory():
    # the probe that decides whether NumPy's reduction gives the output's layout is
    # computed on; uninitialised memory (here infinities of both signs left by a freed
    # block of its size, which NumPy's allocation cache hands out again) made planning
    # warn of invalid values
    a = np.ones((6, 5))
    freed = np.resize([np.inf, -np.inf], a.size)
    del freed  # its block is handed out again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out=np.float64,
                                              out_modes="j"))
    assert plan.backend == "direct", plan.explain()
    np.testing.assert_array_equal(plan.execute(a), np.full(5, 6.0))


@pytest.mark.parametrize("rank", [28, 53, 60])
def test_diagonal_sums_of_more_modes_than_letters(rank):
    """The direct diagonal sum names modes by np.einsum's 52 letters (past 26 it used
    '{' ...); past 52 another runner takes the sum."""
    x = np.arange(4.0).reshape((2,) + (1,) * (rank - 2) + (2,))
    expected = np.trace(x, 0, 0, rank - 1)
    np.testing.assert_array_equal(ta.trace(x, 0, rank - 1), expected)
    np.testing.assert_array_equal(ta.partial_trace(x, [(0, rank - 1)]), expected)
    np.testing.assert_array_equal(ta.einsum("a...a->...", x), expected)


@pytest.mark.parametrize("rank", [64, 65, 70])
def test_plans_of_descriptors_past_numpys_rank(rank):
    """A descriptor may have more modes than a NumPy array (64): its plans build (a
    reduction's layout probe had raised NumPy's raw ValueError at 65)."""
    d = ta.TensorDescriptor((1,) * rank, (1,) * rank, np.float64)
    modes = list(range(rank))
    for op in (ta.Operation.permutation(ta.Operand(d, modes), out_modes=modes[::-1]),
               ta.Operation.reduction(ta.Operand(d, modes), out_modes=[])):
        assert ta.Plan(op).operation is op

"""A sum's, trace's or permute's first call on a new layout is NumPy's answer, its plan
built off the thread (``calls.call``'s ``first``, :func:`tenalg.kernels.compiler.later`); later
calls run the plan.  Both give the same values, shape, dtype and layout."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta
from tenalg import api, calls
from tenalg.allocation import strides_match
from tenalg.kernels import compiler

from .strategies import tolerance, values

FIRST_TYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture
def background(monkeypatch):
    """Background compilation (the suite waits for the compiler) and no cached calls."""
    monkeypatch.setenv("TENALG_COMPILE", "background")
    monkeypatch.setattr(calls, "CALLS", {})
    monkeypatch.setattr(compiler, "_failed", set())
    yield
    assert compiler.wait(timeout=600)


def _sum_key(x, axis):
    return (("sum", axis), x.shape, x.strides, x.dtype, None)


@st.composite
def sums(draw):
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=8)))
    axis = draw(st.one_of(
        st.none(), st.integers(-max(len(shape), 1), max(len(shape), 1) - 1),
        st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True,
                 max_size=len(shape)).map(tuple)))
    if not shape and axis not in (None, 0, -1, ()):
        axis = None
    dtype = draw(st.sampled_from(FIRST_TYPES))
    return values(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), shape, dtype), axis


@st.composite
def traces(draw):
    """(array, pairs): disjoint axis pairs of an array of rank 2 to 6, negative axes too."""
    rank = draw(st.integers(2, 6))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    axes = draw(st.permutations(range(rank)))
    count = draw(st.integers(1, rank // 2))
    pairs = tuple((axes[2 * k] - draw(st.sampled_from([0, rank])), axes[2 * k + 1])
                  for k in range(count))
    dtype = draw(st.sampled_from(FIRST_TYPES))
    x = values(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), shape, dtype)
    return x, pairs


def _first_then_planned(run, key):
    """``run()``'s first call (NumPy's: nothing planned yet) and a planned one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TENALG_COMPILE", "background")
        mp.setattr(calls, "CALLS", {})
        # the plan is held back until checked (the compiling thread may build it at once)
        later, deferred = compiler.later, []
        mp.setattr(compiler, "later", lambda k, job: deferred.append((k, job)))
        first = run()
        assert key not in calls.CALLS and key in [k for k, _ in deferred]  # NumPy answered
        mp.setattr(compiler, "later", later)
        for k, job in deferred:
            later(k, job)
        assert compiler.wait(timeout=600)
        assert key in calls.CALLS  # planned on the compiling thread
        planned = run()
        assert compiler.wait(timeout=600)
    return first, planned


def _agree(first, planned, expected, scale, dtype, x):
    assert type(first) is np.ndarray and type(planned) is np.ndarray
    assert first.flags.writeable and not np.shares_memory(first, x)
    assert (first.shape, first.dtype) == (planned.shape, planned.dtype)
    # the same layout (an axis of extent 1 may have any stride: NumPy's (2, 1) result of
    # a (2, 2, 1, 2) float32 trace over (0, 3) had strides (4, 8), the plan's (4, 4))
    assert strides_match(first.strides, planned.strides, first.shape)
    assert np.all(np.abs(first - expected) <= tolerance(dtype) * scale)
    assert np.all(np.abs(planned - first) <= tolerance(dtype) * scale)


@settings(max_examples=60, deadline=None)
@given(case=sums())
def test_first_sum_is_numpy_and_the_plan_agrees(case):
    x, axis = case
    first, planned = _first_then_planned(lambda: ta.sum(x, axis=axis), _sum_key(x, axis))
    _agree(first, planned, np.sum(x, axis=axis), np.sum(np.abs(x), axis=axis) + 1, x.dtype, x)


@settings(max_examples=60, deadline=None)
@given(case=traces())
def test_first_trace_is_numpy_and_the_plan_agrees(case):
    x, pairs = case
    axes = [(i % x.ndim, j % x.ndim) for i, j in pairs]
    index, letters = [slice(None)] * x.ndim, list("abcdef"[:x.ndim])
    for i, j in axes:  # the leading square of each pair, one label for both its axes
        index[i] = index[j] = slice(0, min(x.shape[i], x.shape[j]))
        letters[j] = letters[i]
    traced = {k for pair in axes for k in pair}
    spec = "".join(letters) + "->" + "".join(
        letters[k] for k in range(x.ndim) if k not in traced)
    square = x[tuple(index)]
    expected, scale = np.einsum(spec, square), np.einsum(spec, np.abs(square)) + 1
    key = (("partial_trace", pairs), x.shape, x.strides, x.dtype, None)
    first, planned = _first_then_planned(lambda: ta.partial_trace(x, pairs), key)
    _agree(first, planned, expected, scale, x.dtype, x)
    if len(pairs) == 1:
        key = (("trace", pairs), x.shape, x.strides, x.dtype, None)
        first, planned = _first_then_planned(lambda: ta.trace(x, *pairs[0]), key)
        _agree(first, planned, expected, scale, x.dtype, x)


@settings(max_examples=40, deadline=None)
@given(case=sums(), data=st.data())
def test_first_permute_is_numpys_copy_and_the_plan_agrees(case, data):
    x = case[0]
    axes = tuple(data.draw(st.permutations(range(x.ndim))))
    key = (("permute", axes), x.shape, x.strides, x.dtype, None)
    first, planned = _first_then_planned(lambda: ta.permute(x, axes), key)
    _agree(first, planned, np.transpose(x, axes), 1, x.dtype, x)
    np.testing.assert_array_equal(first, planned)  # a copy: exactly the same values
    assert first.flags.c_contiguous and planned.flags.c_contiguous


def test_a_first_permute_with_alpha_or_bad_axes_plans_at_once(background):
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ta.permute(x, (1, 0), alpha=2), 2 * x.T)
    assert (("permute", (1, 0)), x.shape, x.strides, x.dtype, None) in calls.CALLS
    with pytest.raises(ta.DescriptorError):
        ta.permute(np.ones((2, 3, 4)), (0, 0, 1))
    assert compiler.pending() == 0


@pytest.mark.parametrize("x", [
    np.ones((4, 5), np.float16),              # NumPy adds float16 slowly
    np.ones((6, 5)).T,                        # not C-ordered
    np.ones((api.FIRST_SIZE + 1,)),           # large: planning is small beside the work
], ids=["float16", "transposed", "large"])
def test_other_first_calls_plan_at_once(background, x):
    assert float(ta.sum(x, axis=0)[()] if x.ndim == 1 else ta.sum(x, axis=0)[0]) == len(x)
    assert _sum_key(x, 0) in calls.CALLS


def test_a_bad_axis_raises_on_the_first_call(background):
    with pytest.raises(np.exceptions.AxisError):
        ta.sum(np.ones((2, 3)), axis=2)
    with pytest.raises(ta.OperationError):
        ta.sum(np.ones((2, 3)), axis=(0, -2))
    assert compiler.pending() == 0


def test_wait_mode_plans_the_first_call(monkeypatch):
    monkeypatch.setenv("TENALG_COMPILE", "wait")
    monkeypatch.setattr(calls, "CALLS", {})
    x = np.ones((3, 4))
    assert ta.sum(x, axis=1).tolist() == [4.0] * 3
    assert _sum_key(x, 1) in calls.CALLS


def test_a_planned_small_call_is_numpys_own_result_and_keeps_the_bounds_check(monkeypatch):
    monkeypatch.setenv("TENALG_COMPILE", "wait")
    monkeypatch.setattr(calls, "CALLS", {})
    x = np.arange(64.0).reshape(8, 8)
    planned = ta.sum(x, axis=1)  # plans, and keeps the plan's unchecked run for the layout
    single = calls.CALLS[_sum_key(x, 1)[:-1]]
    assert single is calls.CALLS[_sum_key(x, 1)][0].single
    again = ta.sum(x.copy(), axis=1)
    np.testing.assert_array_equal(again, planned)
    np.testing.assert_array_equal(again, np.add.reduce(x, axis=1))
    # the same layout, reaching past its buffer: refused, never read
    bad = np.lib.stride_tricks.as_strided(np.arange(8.0), x.shape, x.strides)
    with pytest.raises(ta.BoundsError, match="input A"):
        ta.sum(bad, axis=1)


def test_planned_permutes_and_sums_keep_their_argument_checks(monkeypatch):
    """A planned call's key equals one whose axes are 1.0 or True: those still raise."""
    monkeypatch.setenv("TENALG_COMPILE", "wait")
    monkeypatch.setattr(calls, "CALLS", {})
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ta.permute(x, (1, 0)), x.T)
    assert (("permute", (1, 0)), x.shape, x.strides, x.dtype) in calls.CALLS
    np.testing.assert_array_equal(ta.permute(x, (1, 0)), x.T)  # the planned call
    np.testing.assert_array_equal(ta.permute(x, (np.int64(1), 0)), x.T)  # as NumPy
    for axes in [(1.0, 0), (True, 0)]:
        with pytest.raises(ta.DescriptorError, match="axis must be an integer"):
            ta.permute(x, axes)
    np.testing.assert_array_equal(ta.sum(x, axis=1), [3.0, 12.0])
    np.testing.assert_array_equal(ta.sum(x, axis=1), [3.0, 12.0])  # the planned call
    with pytest.raises(TypeError):
        ta.sum(x, axis=1.0)


def test_a_plan_that_fails_off_the_thread_fails_in_the_next_call(background, monkeypatch):
    def failing_plan(*args):
        raise ta.OperationError("no plan")

    monkeypatch.setattr(api, "_sum_plan", failing_plan)
    x = np.ones((3, 4))
    assert ta.sum(x, axis=1).tolist() == [4.0] * 3  # NumPy's answer; the plan failed later
    assert compiler.wait(timeout=600)
    assert not compiler.deferring(_sum_key(x, 1))
    with pytest.raises(ta.OperationError, match="no plan"):
        ta.sum(x, axis=1)


def test_a_full_queue_plans_the_first_call(background, monkeypatch):
    monkeypatch.setattr(compiler, "MAX_QUEUED", 0)  # a thread this busy plans nothing more
    x = np.ones((3, 5))
    assert ta.sum(x, axis=0).tolist() == [3.0] * 5
    assert _sum_key(x, 0) in calls.CALLS


def test_a_queued_plan_keeps_no_array_alive(background):
    import gc
    import weakref

    x = np.ones((7, 9))
    key, ref = _sum_key(x, 1), weakref.ref(x)
    with compiler._busy:  # the compiling thread runs no job meanwhile
        assert ta.sum(x, axis=1).tolist() == [9.0] * 7
        del x
        gc.collect()
        assert ref() is None and key not in calls.CALLS
    assert compiler.wait(timeout=600) and key in calls.CALLS


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_a_planned_trace_of_a_matrix_is_one_numpy_call(background, dtype):
    """Once planned, the trace of a matrix is the plan's one NumPy call on its diagonal,
    reached without calls.call's steps (8 x 8: 2.6 -> 1.6 us, np.trace 1.3): NumPy's
    values in a 0-d array of the plan's type, for reversed and strided views too."""
    rng = np.random.default_rng(4)
    base = values(rng, (12, 9), dtype)
    for x in (base[:8, :8], base[::-1, ::-1][:8, 1:9], base[::2, :6].T):
        pair = (1, 0) if x.flags.f_contiguous else (0, 1)
        first = ta.trace(x, *pair)
        assert compiler.wait(timeout=600)
        single = calls.planned(("trace", (pair,)), x)
        assert single is not None
        got = ta.trace(x, *pair)
        assert type(got) is np.ndarray and got.shape == () and got.dtype == first.dtype
        np.testing.assert_array_equal(got, single(x))
        expected = np.trace(x.astype(np.complex128), axis1=pair[0], axis2=pair[1])
        scale = np.trace(np.abs(x.astype(np.float64))) + 1
        assert abs(complex(got) - expected) <= tolerance(dtype) * scale

"""A sum's first call on a new layout is NumPy's answer, its plan built off the thread
(``calls.call``'s ``first``, :func:`tenalg.kernels.compiler.later`); later calls run the
plan.  Both give the same values, shape, dtype and layout."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta
from tenalg import api, calls
from tenalg.kernels import compiler

from .strategies import tolerance, values

FIRST_TYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture
def background(monkeypatch):
    """Background compilation (the suite waits for the compiler) and no cached calls."""
    monkeypatch.setenv("TENALG_COMPILE", "background")
    monkeypatch.setattr(calls, "_CALLS", {})
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


@settings(max_examples=60, deadline=None)
@given(case=sums())
def test_first_call_is_numpy_and_the_plan_agrees(case):
    x, axis = case
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TENALG_COMPILE", "background")
        mp.setattr(calls, "_CALLS", {})
        first = ta.sum(x, axis=axis)
        assert _sum_key(x, axis) not in calls._CALLS  # NumPy answered; no plan yet
        assert compiler.wait(timeout=600)
        assert _sum_key(x, axis) in calls._CALLS  # planned on the compiling thread
        planned = ta.sum(x, axis=axis)
        assert compiler.wait(timeout=600)
    expected = np.sum(x, axis=axis)
    assert type(first) is np.ndarray and type(planned) is np.ndarray
    assert first.flags.writeable and not np.shares_memory(first, x)
    assert (first.shape, first.dtype, first.strides) == (
        planned.shape, planned.dtype, planned.strides)
    scale = np.sum(np.abs(x), axis=axis) + 1
    assert np.all(np.abs(first - expected) <= tolerance(x.dtype) * scale)
    assert np.all(np.abs(planned - first) <= tolerance(x.dtype) * scale)


@pytest.mark.parametrize("x", [
    np.ones((4, 5), np.float16),              # NumPy adds float16 slowly
    np.ones((6, 5)).T,                        # not C-ordered
    np.ones((api.FIRST_SIZE + 1,)),           # large: planning is small beside the work
], ids=["float16", "transposed", "large"])
def test_other_first_calls_plan_at_once(background, x):
    assert float(ta.sum(x, axis=0)[()] if x.ndim == 1 else ta.sum(x, axis=0)[0]) == len(x)
    assert _sum_key(x, 0) in calls._CALLS


def test_a_bad_axis_raises_on_the_first_call(background):
    with pytest.raises(np.exceptions.AxisError):
        ta.sum(np.ones((2, 3)), axis=2)
    with pytest.raises(ta.OperationError):
        ta.sum(np.ones((2, 3)), axis=(0, -2))
    assert compiler.pending() == 0


def test_wait_mode_plans_the_first_call(monkeypatch):
    monkeypatch.setenv("TENALG_COMPILE", "wait")
    monkeypatch.setattr(calls, "_CALLS", {})
    x = np.ones((3, 4))
    assert ta.sum(x, axis=1).tolist() == [4.0] * 3
    assert _sum_key(x, 1) in calls._CALLS


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
    monkeypatch.setattr(compiler, "MAX_QUEUED", 0)  # (queued jobs hold their arrays)
    x = np.ones((3, 5))
    assert ta.sum(x, axis=0).tolist() == [3.0] * 5
    assert _sum_key(x, 0) in calls._CALLS

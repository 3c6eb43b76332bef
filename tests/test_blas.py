"""one_blas_thread: one BLAS thread inside, the setting found restored on the way out."""

import contextlib
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from tenalg.blas import one_blas_thread


def _blas_threads():
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture
def two_threads():
    with threadpool_limits(limits=2, user_api="blas"):
        yield


def test_one_thread_inside_and_restored(two_threads):
    assert _blas_threads() == {2}
    with one_blas_thread():
        assert _blas_threads() == {1}
        with one_blas_thread():  # nested
            assert _blas_threads() == {1}
        assert _blas_threads() == {1}
    assert _blas_threads() == {2}


def test_restored_after_an_error(two_threads):
    with pytest.raises(np.linalg.LinAlgError), one_blas_thread():
        np.linalg.cholesky(-np.eye(2))
    assert _blas_threads() == {2}


def test_other_threads_change_nothing(two_threads):
    """Off the main thread a use (here as a decorator) leaves the setting alone, and
    inside the main thread's use the other threads see its one thread."""
    seen = []

    @one_blas_thread()
    def other():
        seen.append(_blas_threads())

    for expected in ({2}, {1}):
        with one_blas_thread() if expected == {1} else contextlib.nullcontext():
            worker = threading.Thread(target=other)
            worker.start()
            worker.join(10)
        assert seen.pop() == expected and _blas_threads() == {2}


def test_complex_data_keeps_the_setting(two_threads):
    with one_blas_thread(np.complex128):
        assert _blas_threads() == {2}
    with one_blas_thread(np.float32):
        assert _blas_threads() == {1}
    assert _blas_threads() == {2}

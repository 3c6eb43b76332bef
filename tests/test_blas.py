"""one_blas_thread: one BLAS thread inside, the setting found restored on the way out."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import numba
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from tenalg import blas
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


def test_every_count_found_is_restored(two_threads):
    """Found by a probe: a library at one thread on entry whose count code inside raised
    kept the raised count (only the libraries lowered were restored)."""
    with threadpool_limits(limits=1, user_api="blas"):
        with one_blas_thread():
            threadpool_limits(limits=2, user_api="blas")  # raised inside, not undone
            assert _blas_threads() == {2}
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("g, m, k, n", [(256, 64, 64, 64), (7, 100, 90, 80), (3, 200, 10, 300),
                                        (1000, 8, 8, 8), (2, 4, 4, 4), (16, 128, 128, 128),
                                        (200, 32, 32, 32)])
@pytest.mark.parametrize("broadcast", ["", "a", "b"])
def test_matmul_matches_numpy(g, m, k, n, dtype, broadcast, monkeypatch):
    """Split stacks (enough work, of small products) and unsplit ones alike, into strided
    outs too; either operand may be one matrix broadcast along the stack."""
    rng = np.random.default_rng(g + m)
    a = rng.standard_normal((1 if broadcast == "a" else g, m, k)).astype(dtype)
    b = rng.standard_normal((1 if broadcast == "b" else g, n, k)).astype(dtype).swapaxes(1, 2)
    parts = []
    pool = blas._pool
    monkeypatch.setattr(blas, "_pool", lambda w, pid: parts.append(w) or pool(w, pid))
    out = np.zeros((g, n, m), dtype).swapaxes(1, 2)
    assert blas.matmul(a, b, out) is out
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=tol, atol=tol * k)
    flops = 2 * g * m * k * n
    split = (blas.STACK_SPLIT_FLOPS <= flops < g * blas.SPLIT_FLOPS
             and numba.get_num_threads() > 1)
    assert bool(parts) == split


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("m, k, n", [(4096, 64, 48), (48, 64, 4096), (40, 4096, 48),
                                     (600, 600, 600), (30, 40, 50)])
@pytest.mark.parametrize("limited", [False, True])
@pytest.mark.parametrize("stack", [False, True])
def test_one_product_is_split_among_threads(m, k, n, dtype, limited, stack,
                                                         monkeypatch):
    """One product is cut along m or n, or k where k is over four times both (the parts
    summed), inside one_blas_thread, where OpenBLAS's own threads do not share it, from
    SPLIT_FLOPS (outside it, OpenBLAS's threads take it whole); 2-d or a stack of one,
    into strided outs too."""
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype).T  # strided
    out = np.zeros((n, m), dtype).T
    if stack:
        a, b, out = a[None], b[None], out[None]
    parts = []
    pool = blas._pool
    monkeypatch.setattr(blas, "_pool", lambda w, pid: parts.append(w) or pool(w, pid))
    with one_blas_thread() if limited else contextlib.nullcontext():
        assert blas.matmul(a, b, out) is out
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=tol, atol=tol * k)
    flops = 2 * m * k * n
    split = numba.get_num_threads() > 1 and limited and flops >= blas.SPLIT_FLOPS
    assert bool(parts) == split


def test_matmul_refuses_what_np_matmul_refuses_before_writing(monkeypatch):
    """An out of a shape np.matmul refuses raises its ValueError, with nothing written
    (one it takes, as (1, m, n), is taken whole); lists are NumPy's to take."""
    a, b = np.ones((600, 600)), np.ones((600, 600))
    with one_blas_thread():  # (where one product is cut)
        for shape in ((601, 600), (600, 601), (360000,)):
            out = np.full(shape, 7.0)
            with pytest.raises(ValueError):
                blas.matmul(a, b, out)
            assert (out == 7.0).all()
        out = np.zeros((1, 600, 600))
        assert blas.matmul(a, b, out) is out and (out == 600).all()
    assert blas.matmul([[1.0, 2.0]], [[3.0], [4.0]]).tolist() == [[11.0]]


def test_a_failing_part_lets_every_part_finish_first(monkeypatch):
    """When the calling thread's part raises, the pool's parts have ended before the
    error propagates: nothing writes into out after the call."""
    done = []

    def work(lo, hi):
        if threading.current_thread() is threading.main_thread():
            raise RuntimeError("a part failed")
        time.sleep(0.05)
        done.append(lo)

    with pytest.raises(RuntimeError):
        blas._shared(work, 64, 2)
    finished = len(done)
    time.sleep(0.2)
    assert len(done) == finished


def test_matmul_keeps_aliased_and_off_main_thread_calls_whole(monkeypatch):
    monkeypatch.setattr(blas, "_pool", lambda w, pid: pytest.fail("split"))
    a = np.ones((64, 64, 64))
    np.testing.assert_array_equal(blas.matmul(a, a, a), np.full_like(a, 64))  # out is a
    result, ones = [], np.ones((64, 64, 64))
    worker = threading.Thread(
        target=lambda: result.append(blas.matmul(ones, ones, np.empty_like(ones))))
    worker.start()
    worker.join(10)
    np.testing.assert_array_equal(result[0], np.full_like(ones, 64))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_matmul_in_a_forked_child():
    """A child forked after the parent split a stack gets its own worker threads."""
    a = np.ones((64, 64, 64))
    blas.matmul(a, a, np.empty_like(a))  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the split product is right
        signal.alarm(30)  # a child waiting on the parent's threads would hang: die instead
        ok = (blas.matmul(a, a, np.empty_like(a)) == 64).all()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_controller_knows_scipys_blas():
    """Made before anything imported SciPy, the controller still limits SciPy's OpenBLAS
    (SciPy's LAPACK serves tenalg.tt's QR)."""
    code = ("import tenalg.blas as b\n"
            "known = {x.filepath for x in b._controller().lib_controllers}\n"
            "import scipy.linalg\n"
            "from threadpoolctl import threadpool_info\n"
            "assert {x['filepath'] for x in threadpool_info()} <= known, known\n")
    subprocess.run([sys.executable, "-c", code], check=True)

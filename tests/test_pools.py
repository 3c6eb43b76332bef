"""tenalg.pools: the pools' spin settings (the user's kept) and the free cores by
/proc/loadavg (sampled, parsed, missing)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from tenalg import pools


def test_quiet_spins_sets_what_is_missing_and_keeps_the_users():
    env = pools.quiet_spins({"OPENBLAS_THREAD_TIMEOUT": "28"})
    assert env == {"OPENBLAS_THREAD_TIMEOUT": "28", "GOMP_SPINCOUNT": pools.SPINS["GOMP_SPINCOUNT"]}
    assert int(pools.SPINS["OPENBLAS_THREAD_TIMEOUT"]) in range(4, 31)  # OpenBLAS's range


def test_import_tenalg_sets_the_spins_before_any_kernel():
    code = ("import os, tenalg\n"
            "print(os.environ['GOMP_SPINCOUNT'], os.environ['OPENBLAS_THREAD_TIMEOUT'])\n"
            "print('libgomp' in open('/proc/self/maps').read())\n")
    env = {k: v for k, v in os.environ.items() if k not in pools.SPINS}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[:2] == [pools.SPINS["GOMP_SPINCOUNT"], pools.SPINS["OPENBLAS_THREAD_TIMEOUT"]]
    if os.path.exists("/proc/self/maps"):
        assert out[2] == "False"  # libgomp not loaded yet: it will read the setting
    env["GOMP_SPINCOUNT"] = "7"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == "7"


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(pools, "_sample", [-1.0, None])


def loadavg(tmp_path, running):
    path = tmp_path / "loadavg"
    path.write_text(f"1.50 0.80 0.40 {running}/135 5410\n")
    return str(path)


@pytest.mark.usefixtures("fresh")
def test_free_cores_counts_the_other_runnable_threads(tmp_path):
    # the reader is one of the runnable threads: 1 means none other
    assert pools.free_cores(2, loadavg(tmp_path, 1), now=0.0) == 2
    assert pools.free_cores(2, loadavg(tmp_path, 2), now=1.0) == 1
    assert pools.free_cores(8, loadavg(tmp_path, 4), now=2.0) == 5
    assert pools.free_cores(2, loadavg(tmp_path, 9), now=3.0) == 1  # never below one


@pytest.mark.usefixtures("fresh")
def test_free_cores_reads_at_most_every_sample_period(tmp_path):
    busy, idle = loadavg(tmp_path, 3), str(tmp_path / "idle")
    with open(idle, "w") as file:
        file.write("0 0 0 1/100 1\n")
    assert pools.free_cores(4, busy, now=10.0) == 2
    assert pools.free_cores(4, idle, now=10.0 + pools.SAMPLE_S / 2) == 2  # the old sample
    assert pools.free_cores(4, idle, now=10.0 + 2 * pools.SAMPLE_S) == 4


@pytest.mark.usefixtures("fresh")
def test_free_cores_without_proc_loadavg_is_every_core(tmp_path):
    assert pools.free_cores(2, str(tmp_path / "missing"), now=0.0) == 2
    bad = tmp_path / "bad"
    bad.write_text("not a loadavg line")
    assert pools.free_cores(2, str(bad), now=1.0) == 2


def test_free_cores_of_this_machine():
    assert 1 <= pools.free_cores() <= (os.cpu_count() or 1)


def _threads_on_a_fake_clock(monkeypatch, free):
    """tenalg.kernels.cpu.threads with its clock at 100.0 s (advance by adding to
    ``clock[0]``), no call before, a parallel one last, and ``free`` free cores; the
    ``ours`` each look at the load was given go into ``asked``."""
    import numba

    from tenalg.kernels.cpu import threads

    if numba.get_num_threads() < 2:
        pytest.skip("one thread")
    clock, asked = [100.0], []

    def free_cores(ours=0, now=None):
        asked.append(ours)
        return free

    monkeypatch.setattr(threads, "_clock", lambda: clock[0])
    monkeypatch.setattr(threads, "_ended", [float("-inf")])
    monkeypatch.setattr(threads, "_was_parallel", [True])
    monkeypatch.setattr(threads, "free_cores", free_cores)
    return threads, clock, asked


def test_kernels_take_no_more_threads_than_the_free_cores(monkeypatch):
    """thread_count() (the kernels' plans key their calls by it) is numba's setting capped
    by free_cores(); after a parallel call this pool's own workers are not counted."""
    import numba

    from tenalg.kernels.cpu import one_thread

    threads, _, asked = _threads_on_a_fake_clock(monkeypatch, 1)
    assert threads.thread_count() == 1 and threads._threads(1 << 30) == 1
    assert asked == [numba.get_num_threads() - 1, 0]  # then serial: every other counts
    monkeypatch.setattr(threads, "free_cores", lambda ours=0, now=None: 64)
    assert threads.thread_count() == numba.get_num_threads()
    assert threads._threads(1) == 1  # small work: one thread, no look at the load
    with one_thread():
        assert threads.thread_count() == 1  # no look either


def test_small_work_after_a_pause_runs_on_one_thread(monkeypatch):
    """A call of less than _IDLE_SERIAL_WORK elements more than IDLE_S after the last one
    (its start, or its end where told: ended()) runs on one thread, without a look at the
    load: waking the sleeping workers costs more than they save.  One soon after it, or
    larger work, takes the free cores."""
    import numba

    threads, clock, asked = _threads_on_a_fake_clock(monkeypatch, 64)
    small, large = threads._IDLE_SERIAL_WORK - 1, threads._IDLE_SERIAL_WORK
    assert threads.thread_count(small) == 1 and asked == []
    clock[0] += threads.IDLE_S / 2  # the next call of a loop
    assert threads.thread_count(small) == numba.get_num_threads() and len(asked) == 1
    clock[0] += 3 * threads.IDLE_S  # a long call, then its end told: the workers awake
    threads.ended()
    clock[0] += threads.IDLE_S / 2
    assert threads.thread_count(small) == numba.get_num_threads()
    clock[0] += 3 * threads.IDLE_S
    assert threads.thread_count(small) == 1
    clock[0] += 3 * threads.IDLE_S
    assert threads.thread_count(large) == numba.get_num_threads()
    clock[0] += 3 * threads.IDLE_S
    assert threads.thread_count() == numba.get_num_threads()  # work not said: the load only


def test_all_threads_takes_numbas_setting_whatever_the_load_or_pause(monkeypatch):
    """Inside all_threads() (tenalg compile's runs) small work after a pause on a busy
    machine still takes Numba's whole setting: the parallel kernels that calls in a loop
    on an idle machine take are the ones compiled ahead; one_thread() still lowers it."""
    import numba

    from tenalg.kernels.cpu import all_threads, one_thread

    threads, clock, asked = _threads_on_a_fake_clock(monkeypatch, 1)
    small = threads._IDLE_SERIAL_WORK - 1
    with all_threads():
        assert threads.thread_count(small) == numba.get_num_threads() and asked == []
        with one_thread():
            assert threads.thread_count(small) == 1
    clock[0] += 3 * threads.IDLE_S
    assert threads.thread_count(small) == 1  # outside: the pause and the load count again


def test_a_plan_after_a_pause_runs_serially_and_then_in_parallel(monkeypatch):
    """End to end: a sum plan of parallel size run after a pause takes its one-thread call,
    the next run at once its parallel one; both give the same values."""
    import numba

    import tenalg as ta

    threads, clock, _ = _threads_on_a_fake_clock(monkeypatch, 64)
    a = np.random.default_rng(0).standard_normal((512, 512))
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out_modes="j"), backend="cpu")
    first = plan.execute(a)
    clock[0] += 1e-6
    second = plan.execute(a)
    np.testing.assert_allclose(first, a.sum(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, first, rtol=1e-14, atol=1e-14)
    assert sorted(key[1] for key in plan.runner._calls) == [1, numba.get_num_threads()]


FORK_AFTER_A_PARALLEL_KERNEL = """
import os, numpy as np, tenalg as ta
from numba import threading_layer
from tenalg.kernels.cpu.threads import all_threads
a = np.arange(64 * 64 * 80, dtype=np.float64).reshape(64, 64, 80)
with all_threads():  # a parallel kernel, as on an idle machine
    assert np.array_equal(ta.permute(a, (2, 1, 0)), a.transpose(2, 1, 0))
pid = os.fork()
if pid == 0:
    with all_threads():  # as the parent's: the pool's threads, were they there
        os._exit(0 if np.array_equal(ta.permute(a, (2, 1, 0)), a.transpose(2, 1, 0)) else 3)
print(threading_layer(), os.waitpid(pid, 0)[1])
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_child_forked_after_a_parallel_kernel_computes():
    """GNU OpenMP's pool does not survive a fork: the child's first parallel kernel ended
    it ("Terminating: fork() called from a process already using GNU OpenMP"), and a
    fork-context pool then waited for good (found by a probe). The child runs the
    kernels' serial twins."""
    env = {**os.environ, "TENALG_COMPILE": "wait"}
    done = subprocess.run([sys.executable, "-c", FORK_AFTER_A_PARALLEL_KERNEL], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "0", done.stdout + done.stderr[-2000:]


ONE_THREAD = """
import threading, numpy as np, numba.np.ufunc.parallel as pool
import tenalg as ta
from tenalg.kernels.cpu import one_thread, on_threads, thread_count
x = np.random.default_rng(0).standard_normal((16, 12, 16, 10))
big = np.ones((128, 128, 64))
with one_thread():
    with on_threads(2):  # inside one_thread(), more is still one
        inner = thread_count(1 << 22)
    assert np.allclose(ta.sum(x[::-1, :, ::2], axis=(0, 2)), x[::-1, :, ::2].sum((0, 2)))
    assert np.allclose(ta.sum(big, axis=1), big.sum(1))  # 2^20 elements, on this thread
    other = []
    t = threading.Thread(target=lambda: other.append(thread_count()))
    t.start(); t.join()
print(inner, other[0] == thread_count(), pool._is_initialized)
for _ in range(3):
    ta.sum(x[::-1, :, ::2], axis=(0, 2))  # small work through on_threads(1)
print(pool._is_initialized)
"""


def test_one_thread_blocks_start_no_thread_pool(tmp_path):
    """one_thread() and the small calls that run on one thread take no Numba setting, which
    would start its thread pool (21 ms, and a child forked later runs serially): a mark
    of this thread's, which thread_count reads, caps them at one, nested blocks too; other
    threads keep their count."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "TENALG_COMPILE": "wait"}
    run = subprocess.run([sys.executable, "-c", ONE_THREAD], env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["1", "True", "False", "False"]

"""tenalg.pools: the pools' spin settings (the user's kept) and the free cores by
/proc/loadavg (sampled, parsed, missing)."""

import os
import subprocess
import sys

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


def test_kernels_take_no_more_threads_than_the_free_cores(monkeypatch):
    """thread_count() (the kernels' plans key their calls by it) is numba's setting capped
    by free_cores(); after a parallel call this pool's own workers are not counted."""
    import numba

    from tenalg.kernels.cpu import one_thread, threads

    if numba.get_num_threads() < 2:
        pytest.skip("one thread")
    asked = []

    def fake(free):
        def free_cores(ours=0):
            asked.append(ours)
            return free
        return free_cores

    monkeypatch.setattr(threads, "_was_parallel", [True])
    monkeypatch.setattr(threads, "free_cores", fake(1))
    assert threads.thread_count() == 1 and threads._threads(1 << 30) == 1
    assert asked == [numba.get_num_threads() - 1, 0]  # then serial: every other counts
    monkeypatch.setattr(threads, "free_cores", fake(64))
    assert threads.thread_count() == numba.get_num_threads()
    assert threads._threads(1) == 1  # small work: one thread, no look at the load
    assert asked[-1] == 0 and len(asked) == 3
    with one_thread():
        assert threads.thread_count() == 1 and len(asked) == 3  # no look either

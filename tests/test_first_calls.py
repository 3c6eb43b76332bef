"""No call waits on the compiler: a plan's first call whose Numba kernel is not compiled
runs NumPy code while the kernel compiles off the thread, then the kernel takes over.
Each case runs in a fresh interpreter, whose dispatchers have compiled nothing."""

import os
import subprocess
import sys
import textwrap

import numpy as np

from tenalg.kernels import compiler

FIRST_CALLS = """
import sys, numpy as np, tenalg as ta
from tenalg.kernels import compiler
x = np.random.default_rng(0).standard_normal((64, 64, 80))
plan = ta.Plan(ta.Operation.permutation(ta.Operand(x, "ijk"), out_modes="kji", order="C"))
assert plan.backend == "cpu", plan.explain()
assert np.array_equal(plan.execute(x), x.transpose(2, 1, 0))
assert plan.runner._compiling and not plan.runner._calls  # the reference twin ran
assert "compiling off the thread" in plan.explain()
assert float(ta.norm(x)) == pytest_approx(np.linalg.norm(x))  # (norm's kernel: NumPy)
m = np.random.default_rng(1).standard_normal((2048, 2048))
assert abs(ta.trace(m) - np.trace(m)) < 1e-9  # the direct backend's strided sums
from tenalg import calls
s = np.random.default_rng(2).standard_normal((512, 512))  # deferred, and the kernels' work
key = (("sum", 1), s.shape, s.strides, s.dtype, None)
later, deferred = compiler.later, []  # the plan held back until checked (the compiling
compiler.later = lambda k, job: deferred.append((k, job))  # thread may build it at once)
assert np.allclose(ta.sum(s, axis=1), s.sum(axis=1))
assert key not in calls.CALLS and key in [k for k, _ in deferred]  # NumPy's sum answered
compiler.later = later
for k, job in deferred:
    later(k, job)  # the plan is built off the thread
if sys.argv[1] == "wait":  # (the threads a call takes follow the machine's load: a call
    for _ in range(3):     # on another count of threads may queue the other twin)
        assert compiler.wait(timeout=600)
        assert np.array_equal(plan.execute(x), x.transpose(2, 1, 0))
        if plan.runner._calls:
            break
    assert plan.runner._calls, plan.explain()  # the kernel ran
    assert compiler.wait(timeout=600)  # the plan built off the thread queued its kernels
    runner = calls.CALLS[key][0].runner
    assert np.allclose(ta.sum(s, axis=1), s.sum(axis=1))
    assert runner._calls and not runner._compiling, calls.CALLS[key][0].explain()
    v = np.random.default_rng(3).standard_normal((1024, 1024))[:, ::2]  # read through
    assert np.allclose(ta.sum(v, axis=0), v.sum(axis=0))  # its address (_bits_address)
    assert compiler.wait(timeout=600)  # which compiles off the thread, under its lock
print("ok")
"""


def _run(mode, cache):
    code = "def pytest_approx(v):\n    import pytest\n    return pytest.approx(v)\n" + FIRST_CALLS
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("TENALG_COMPILE", None)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), mode], env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_first_calls_with_an_empty_cache_run_numpy_and_exit_without_waiting(tmp_path):
    _run("exit", tmp_path)  # the compiling thread is abandoned at exit
    leftovers = [p.name for p in tmp_path.rglob("*") if p.suffix not in (".nbi", ".nbc", "")]
    # no temporary file of a half-written entry: the kernels' lock files only
    assert leftovers and all(n.startswith("tenalg-compile-") and n.endswith(".lock")
                             for n in leftovers), leftovers


STOP_AT_EXIT = """
import threading, time, numpy as np, tenalg as ta
from numba.core import event
from tenalg.kernels import compiler
calls = []  # the compiling thread's calls into LLVM
class Count(event.Listener):
    def on_start(self, ev):
        if threading.current_thread() is compiler._worker:
            calls.append(1)
    def on_end(self, ev):
        pass
event.register("numba:llvm_lock", Count())
x = np.random.default_rng(0).standard_normal((64, 64, 80))
ta.permute(x, (2, 0, 1)), ta.permute(x, (2, 0, 1))  # the kernels compile off the thread
start = time.perf_counter()
while not compiler._busy.locked():
    assert time.perf_counter() - start < 60
    time.sleep(0.01)
time.sleep(0.3)  # inside the compilation (seconds with an empty cache)
start = time.perf_counter()
compiler._stop_at_exit()  # what the exit runs first
waited = time.perf_counter() - start
left, made = compiler.pending(), len(calls)
time.sleep(2)
assert 1 <= left == compiler.pending() and compiler._worker.is_alive(), left  # stopped
assert made > 0 and len(calls) == made, (made, len(calls))  # no LLVM call since
print("ok", round(waited, 2))
"""


def test_an_exit_stops_the_compilation_at_its_next_llvm_call(tmp_path):
    """An exit while a kernel compiles: the thread is let finish the LLVM call it is in
    and makes no other (left running, compilations aborted the process in LLVM); the
    exit then goes on, and completes."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    env.pop("TENALG_COMPILE", None)
    result = subprocess.run([sys.executable, "-c", STOP_AT_EXIT], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.startswith("ok"), result.stderr[-3000:]
    assert float(result.stdout.split()[1]) < 10  # one LLVM call, not the compilation


def test_the_kernel_takes_over_once_compiled(tmp_path):
    _run("wait", tmp_path)  # compiles into an empty cache; then loads it in a fresh process
    # only kernels that Python calls are cached, each compiled under its own lock (the
    # helpers compiled into them are not: two processes would write their indexes at once)
    cached = {p.name.split("-")[0] for p in tmp_path.rglob("*.nbi")}
    locked = {p.name for p in tmp_path.glob("tenalg-compile-*.lock")}
    assert "permutation_tiles._tiles_kernel_sequential" in cached, cached
    assert "calls._bits_address" in cached, cached
    assert all(any(n.endswith(f".{c}.lock") for n in locked) for c in cached), (cached, locked)
    _run("wait", tmp_path)


def test_calls_while_their_plan_is_queued_queue_it_once(monkeypatch):
    import tenalg as ta
    from tenalg import calls

    monkeypatch.setenv("TENALG_COMPILE", "background")
    monkeypatch.setattr(calls, "CALLS", {})  # the layout's first calls, whatever ran before
    queued = []

    def later(key, job):  # queued and never run: every call meanwhile is a first one
        queued.append(key)
        compiler._queued.add(("later", key))

    monkeypatch.setattr(compiler, "later", later)
    s = np.random.default_rng(3).standard_normal((64, 48))
    try:
        for _ in range(3):
            assert np.array_equal(ta.sum(s, axis=0), s.sum(axis=0))  # NumPy's answer
    finally:
        for key in queued:
            compiler._queued.discard(("later", key))
    assert len(queued) == 1 and not calls.CALLS


def test_wait_mode_compiles_on_the_calling_thread(monkeypatch):
    import numba

    @numba.njit
    def thrice(x):
        return 3 * x

    monkeypatch.setenv("TENALG_COMPILE", "wait")
    assert compiler.mode() == "wait"
    assert compiler.ready(thrice, (numba.float64,)) and thrice(2.0) == 6.0
    monkeypatch.setenv("TENALG_COMPILE", "background")
    assert compiler.mode() == "background"


def test_a_fork_waits_for_the_compilation_and_the_child_compiles_afresh():
    import numba

    @numba.njit
    def plus_one(x):
        return x + 1

    signature = (numba.int32,)
    compiler.ready(plus_one, signature)  # queued: the fork below waits for it
    pid = os.fork()
    if pid == 0:  # the child: a fresh queue, no lock held by a thread it does not have
        code = 0 if compiler.pending() == 0 and plus_one(np.int32(1)) == 2 else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert compiler.wait(timeout=300) and compiler.ready(plus_one, signature)


def test_described_argument_types_are_the_dispatchers():
    """compiler.describe's stand-ins give the Numba types the dispatcher reads off the
    arguments (what a queued compilation must be for): arrays of each dtype, rank,
    layout and writeability, Python and NumPy scalars."""
    import numba

    @numba.njit
    def probe(x):
        return x

    base = np.zeros((4, 6), np.float32)
    readonly = np.ones(3)
    readonly.flags.writeable = False
    values = [np.zeros(5, np.int64), np.zeros((2, 2), np.complex128), base, base.T,
              base[:, ::2], base[::-1], readonly, np.zeros((0, 3), np.float16),
              np.zeros((), np.float64), 7, -(2**40), 2**63 - 1, True, 1.5, 2j,
              np.float32(1), np.int8(3)]
    for value in values:
        described = compiler.numba_types((compiler.describe(value),))
        assert described == (probe.typeof_pyval(value),), value


def test_a_compilation_lets_calls_have_the_gil_often():
    """While a kernel compiles off the thread, a call waits at most SWITCH_INTERVAL for
    the GIL (Python's default, 5 ms, made calls during a compilation take 6-11 ms)."""
    import numba

    seen = []

    class Kernel:
        overloads = {}

        def compile(self, signature):
            seen.append(sys.getswitchinterval())

    before = sys.getswitchinterval()
    compiler._compile(Kernel(), (numba.float64,))
    assert seen == [compiler.SWITCH_INTERVAL] and sys.getswitchinterval() == before


def _lock_held_elsewhere(path):
    """Whether another open file description holds the lock on ``path``."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_compilations_hold_their_kernels_lock(tmp_path, monkeypatch):
    """Off the thread or on it, a kernel compiles holding its own lock file beside the
    cache (processes compiling one kernel at once garble Numba's index); other kernels'
    locks stay free."""
    import numba

    monkeypatch.setattr(compiler, "_lock_directory", str(tmp_path))
    held = []

    class Kernel:
        overloads = {}

        def py_func(self):
            """stands for the kernel's Python function"""

        def compile(self, signature):
            held.append((_lock_held_elsewhere(compiler.lock_file(self)),
                         _lock_held_elsewhere(compiler.lock_file(len))))

    kernel = Kernel()
    compiler._compile(kernel, (numba.float64,))
    assert compiler.ready(kernel, (numba.int64,), now=True)
    assert compiler.lock_file(kernel) == str(tmp_path / (
        "tenalg-compile-test_first_calls.test_compilations_hold_their_kernels_lock"
        ".<locals>.Kernel.py_func.lock"))
    assert held == [(True, False), (True, False)]
    assert not _lock_held_elsewhere(compiler.lock_file(kernel))


def test_a_kernels_lock_excludes_other_processes_and_not_other_kernels(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from tenalg.kernels import compiler
        compiler.lock_cache({str(tmp_path)!r})
        with compiler.cache_locked(len):
            print("locked", flush=True)
            sys.stdin.readline()  # until the test says so
        """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    lock = tmp_path / "tenalg-compile-builtins.len.lock"
    try:
        assert child.stdout.readline().strip() == "locked"
        assert _lock_held_elsewhere(lock)
        assert not _lock_held_elsewhere(tmp_path / "tenalg-compile-builtins.abs.lock")
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0
        assert not _lock_held_elsewhere(lock)
    finally:
        child.kill()


def test_an_unwritable_lock_file_locks_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(compiler, "_lock_directory", str(tmp_path / "missing"))
    with compiler.cache_locked(len):
        pass
    assert not (tmp_path / "missing").exists()


def test_overlapping_compilations_restore_the_switch_interval():
    """Two compilations that overlap (the thread's and a caller's in "wait" mode) leave
    Python's own interval behind them, whichever ends first."""
    before = sys.getswitchinterval()
    first, second = compiler._often_switching.held(), compiler._often_switching.held()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert sys.getswitchinterval() == compiler.SWITCH_INTERVAL
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == before
    compiler._often_switching.held().__enter__()  # then a fork: the holder is not there
    compiler._often_switching.forget_holders()
    assert compiler._often_switching.holders == 0 and sys.getswitchinterval() == before

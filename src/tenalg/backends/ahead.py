"""Every Numba kernel compiled ahead of time (``tenalg compile``), for images and clusters:
Numba's on-disk cache is filled, so that later processes load the kernels in milliseconds.

A kernel is compiled once per dtype and thread mode, whatever the rank or layout (each
array reaches it as 1-D memory with strides: :mod:`tenalg.kernels.cpu`); so one small
representative of each kind of work per storage dtype, run once on the calling thread's
threads and once on one thread, compiles what the library's plans call. The tensor-train
layer's kernels (:mod:`tenalg.tt.linalg`) compile through roundings of a train and of a
pack per compute type.

>>> steps = workloads(["float64"])
>>> len(steps) > 5 and all(callable(run) for _, run in steps)
True
"""

import multiprocessing
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

from .. import tt
from ..descriptors import Operand
from ..dtypes import STORAGE_TYPES, bfloat16, float16
from ..kernels import compiler, cpu
from ..operations import Operation
from ..plan import Plan

# big enough for the parallel kernels, the tiled permutation and the lane reductions
_SHAPE = (64, 64, 80)
_COMPUTE = {float16: np.float32, bfloat16: np.float32}
_STRIDED = (np.dtype(np.float32), np.dtype(np.float64))


def _array(dtype, shape=_SHAPE):
    data = np.random.default_rng(0).standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        data = data + 1j * data
    return data.astype(dtype)


def _plans(dtype):
    """(name, backend, operation, inputs) of one dtype: the kinds of work the cpu backend
    runs, and the direct backend's diagonal sums (kernels.cpu.strided_sums)."""
    a, b = _array(dtype), _array(dtype)
    bt = b.transpose(2, 1, 0).copy()  # b in the other axis order
    m = _array(dtype, (640, 640))
    ops = Operation
    for axes in ("kji", "ikj", "jik"):
        yield (f"permute ijk->{axes}", "cpu",
               ops.permutation(Operand(a, "ijk"), out_modes=axes, order="C"), (a,))
    for kept in ("ij", "ik", "jk", ""):
        yield f"sum ijk->{kept}", "cpu", ops.reduction(Operand(a, "ijk"), out_modes=kept), (a,)
    yield "trace", "cpu", ops.reduction(Operand(m, "ii"), out_modes=""), (m,)
    yield "add", "cpu", ops.elementwise_binary(Operand(a, "ijk"), Operand(bt, "kji"),
                                               out_modes="ijk"), (a, bt)
    yield "fused trinary", "cpu", ops.elementwise_trinary(
        Operand(a, "ijk"), Operand(b, "ijk"), Operand(a, "ijk"), out_modes="ijk"), (a, b, a)
    if dtype in _STRIDED:
        big = _array(dtype, (2048, 2048))
        yield ("strided diagonal sums", "direct",
               ops.reduction(Operand(big, "ii"), out_modes=""), (big,))


def workloads(dtypes=None):
    """[(name, run)]: zero-argument functions whose runs compile every kernel of ``dtypes``
    (names; default: every storage dtype)."""
    chosen = [np.dtype(d) for d in (dtypes or [t.name for t in STORAGE_TYPES])]
    steps = []
    for dtype in chosen:
        for name, backend, operation, inputs in _plans(dtype):
            # the cpu backend asked for by name compiles on the thread; the direct one
            # queues its compilation, which compile_all waits for
            plan = Plan(operation, backend=backend)

            def run(plan=plan, inputs=inputs):
                with cpu.all_threads():  # (else one, for small work after a pause)
                    plan.execute(*inputs)
                with cpu.one_thread():
                    plan.execute(*inputs)

            steps.append((f"{name}, {dtype.name}", run))
        if dtype.kind in "fc" and dtype not in _COMPUTE and dtype.itemsize >= 4:
            steps.append((f"tensor trains, {dtype.name}",
                          lambda dtype=dtype: _tt_operations(dtype)))
    return steps


def _tt_operations(dtype):
    """One rounding of each method of a small train (the compiled sweep of
    :mod:`tenalg.tt.linalg.smallsweep` for real ones) and of a pack of two (the batched
    sweeps and their factorisations); a small train's dot, norm and sum (the compiled
    chains of :mod:`tenalg.tt.linalg.smallchain`)."""
    x = tt.random((4,) * 4, 3, rng=0, dtype=dtype)
    pack = tt.TrainPack([x, x])
    for method in tt.METHODS:
        tt.round(x + x, 1e-6, method=method)
        tt.add(pack, pack).round_(1e-6, method=method)
    tt.dot(x, x), tt.norm(x), tt.sum(x)


def compile_all(dtypes=None, report=None, processes=1):
    """Run :func:`workloads` (each compiles its kernels), in ``processes`` processes side
    by side (each kernel compiles under its own lock: two processes wait for one another
    only on one kernel); ``report(k, n, name, seconds)`` is called after each. Returns
    the total seconds."""
    start = time.perf_counter()
    if processes <= 1:
        steps = workloads(dtypes)
        for k, (name, run) in enumerate(steps, 1):
            began = time.perf_counter()
            run()
            compiler.wait()
            if report is not None:
                report(k, len(steps), name, time.perf_counter() - began)
        return time.perf_counter() - start
    ends = deque((dtype, k, name) for dtype in dtypes or [t.name for t in STORAGE_TYPES]
                 for k, (name, _) in enumerate(workloads([dtype])))
    # taken from both ends in turn, the steps that run at once are of different dtypes and
    # kernels (one kernel's compilations take turns on its lock)
    tasks = [ends.popleft() if k % 2 == 0 else ends.pop() for k in range(len(ends))]
    context = multiprocessing.get_context("spawn")  # no fork of the compiling thread
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        names = {pool.submit(_compile_step, dtype, k): name for dtype, k, name in tasks}
        for done, future in enumerate(as_completed(names), 1):
            seconds = future.result()
            if report is not None:
                report(done, len(tasks), names[future], seconds)
    return time.perf_counter() - start


def _compile_step(dtype, k):
    """Step ``k`` of :func:`workloads` of one dtype, in a pool's process: its seconds."""
    began = time.perf_counter()
    workloads([dtype])[k][1]()
    compiler.wait()
    return time.perf_counter() - began

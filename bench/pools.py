"""A diagnostic: tenalg's parallel kernels beside NumPy's GEMMs and beside a busy process.

Two stalls of issue 29, measured step by step in one process, the competitors taking
turns: a (32,)^4 float64 permutation (0, 2, 1, 3) right after a 1024^2 ``np.matmul``
and alone (the pools' threads spin after a call on the cores that the other pool needs
next), and a (64,)^4 float32 partial trace over axes (1, 3) beside ``np.trace`` and
tenalg's own serial kernel, with ``load`` busy processes on the machine (a kernel split
evenly over the cores waits for the thread that the OS deschedules).  The "free cores"
steps run tenalg on one thread where :func:`tenalg.pools.free_cores` finds one core or
none free (the policy the kernels' thread control takes).

``python -m tenalg.bench.pools`` prints median, 95th percentile and mean per step;
``--load N`` starts N busy processes first; ``--env`` runs every setting of
:data:`SETTINGS` in a child process of its own, twice, alternating (thread-pool settings
are read when a library loads, so only a fresh process can try them; NumPy's OpenBLAS
loads before tenalg here, so the children get the settings in their environment).

>>> sorted(steps(rounds=1, calls=2, n=4, size=8, gemm_n=16))[:3]
['gemm after permutes', 'gemm alone', 'partial_trace numpy']
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import tenalg as ta
from tenalg.kernels.cpu import one_thread
from tenalg.pools import SPINS, free_cores

from .load import busy

# environments tried by --env: each one pool setting read when its library loads
SETTINGS = {
    "the libraries' spins": {"GOMP_SPINCOUNT": "300000", "OPENBLAS_THREAD_TIMEOUT": "28"},
    "tenalg's spins (tenalg.pools)": SPINS,
    "no gomp spin": {**SPINS, "GOMP_SPINCOUNT": "0"},
    "numba workqueue, tenalg's spins": {"NUMBA_THREADING_LAYER": "workqueue", **SPINS},
}


def steps(rounds=20, calls=20, n=32, size=64, gemm_n=1024):
    """{step: per-call seconds}: ``rounds`` rounds, each a GEMM, ``calls`` permutations,
    a GEMM, a pause, ``calls`` permutations alone, then the partial trace three ways
    (tenalg, tenalg on one thread, NumPy), ``calls`` calls each in turn."""
    rng = np.random.default_rng(0)
    a = rng.random((n,) * 4)
    g = rng.random((gemm_n, gemm_n))
    t = rng.random((size,) * 4, dtype=np.float32)
    times = {}

    def timed(key, fn):
        start = time.perf_counter()
        fn()
        times.setdefault(key, []).append(time.perf_counter() - start)

    def serial_trace():
        with one_thread():
            return ta.partial_trace(t, [(1, 3)])

    def on_free_cores(fn):
        """``fn`` on no more threads than the cores free now (tenalg.pools.free_cores)."""
        def call():
            if free_cores() > 1:
                return fn()
            with one_thread():
                return fn()
        return call

    permute = on_free_cores(lambda: ta.permute(a, (0, 2, 1, 3)))
    traces = {"partial_trace tenalg": lambda: ta.partial_trace(t, [(1, 3)]),
              "partial_trace tenalg one thread": serial_trace,
              "partial_trace tenalg free cores": on_free_cores(
                  lambda: ta.partial_trace(t, [(1, 3)])),
              "partial_trace numpy": lambda: np.trace(t, axis1=1, axis2=3)}
    for fn in (lambda: ta.permute(a, (0, 2, 1, 3)), *traces.values()):
        fn()  # compile (or load), fault the pages in
    for _ in range(rounds):
        timed("gemm alone", lambda: np.matmul(g, g))
        for _ in range(calls):
            timed("permute after gemm", lambda: ta.permute(a, (0, 2, 1, 3)))
        np.matmul(g, g)
        for _ in range(calls):
            timed("permute after gemm, free cores", permute)
        timed("gemm after permutes", lambda: np.matmul(g, g))
        time.sleep(0.2)  # every pool's threads go to sleep
        for _ in range(calls):
            timed("permute alone", lambda: ta.permute(a, (0, 2, 1, 3)))
        for key, fn in traces.items():
            for _ in range(calls):
                timed(key, fn)
    return times


def summary(times):
    """{step: (median, 95th percentile, mean)} in seconds."""
    return {key: (statistics.median(v), float(np.percentile(v, 95)), statistics.fmean(v))
            for key, v in sorted(times.items())}


def _print(label, times):
    print(label)
    for key, (median, p95, mean) in summary(times).items():
        print(f"  {key:32s} median {median * 1e3:7.3f} ms  p95 {p95 * 1e3:7.3f} ms  "
              f"mean {mean * 1e3:7.3f} ms")
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tenalg.bench.pools")
    parser.add_argument("--load", type=int, default=0, help="busy processes to start first")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--env", action="store_true", help="every setting, a child each")
    parser.add_argument("--json", action="store_true", help="print the times as JSON")
    args = parser.parse_args(argv)
    if args.env:
        for label, env in [*SETTINGS.items()] * 2:
            command = [sys.executable, "-m", "tenalg.bench.pools", "--json",
                       "--rounds", str(args.rounds), "--load", str(args.load)]
            done = subprocess.run(command, env={**os.environ, **env}, check=True,
                                  capture_output=True, text=True)
            _print(f"{label} (load {args.load})", json.loads(done.stdout))
        return
    with busy(args.load):
        times = steps(rounds=args.rounds)
    if args.json:
        print(json.dumps(times))
    else:
        _print(f"load {args.load}", times)


if __name__ == "__main__":
    main()

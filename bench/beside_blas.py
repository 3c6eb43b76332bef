"""A diagnostic: tenalg's parallel kernels and NumPy's GEMMs taking turns on the cores.

Each pool of threads spins for a while after its call returns (Numba's OpenMP workers
after a kernel, OpenBLAS's threads after a GEMM) on the cores that the other one needs
next.  ``python -m tenalg.bench.beside_blas`` times a 4096^2 trace and a 512^3 GEMM, each
alone and each right after the other, with the kernels on Numba's pool and inside
:func:`tenalg.kernels.cpu.one_thread`, and prints the medians (docs/dense.md, "Threads
beside BLAS").  The suite times engines alone, so its table does not show this.

>>> sorted(turns(n=64, gemm_n=16, rounds=2, burst=2))
['gemm after traces', 'gemm alone', 'trace alone', 'traces after gemm', 'traces after gemm, mean']
"""

import time

import numpy as np

import tenalg as ta


def turns(n=4096, gemm_n=512, rounds=10, burst=40):
    """Seconds: the median trace of an n x n matrix alone and within a burst of
    ``burst`` traces right after a gemm_n^3 float64 GEMM (and their mean, which shows
    the calls that waited long for a core), and the median GEMM alone and right after
    such a burst; ``rounds`` rounds, each after 0.2 s of sleep (in which the pools'
    threads go to sleep too)."""
    t = np.random.default_rng(0).random((n, n))
    a = np.random.default_rng(1).random((gemm_n, gemm_n))
    times = {"trace alone": [], "traces after gemm": [], "gemm alone": [],
             "gemm after traces": []}

    def timed(key, fn):
        start = time.perf_counter()
        fn()
        times[key].append(time.perf_counter() - start)

    for _ in range(rounds):
        time.sleep(0.2)
        timed("gemm alone", lambda: np.matmul(a, a))
        for _ in range(burst):
            timed("traces after gemm", lambda: ta.trace(t))
        timed("gemm after traces", lambda: np.matmul(a, a))
        time.sleep(0.2)
        for _ in range(burst):
            timed("trace alone", lambda: ta.trace(t))
    medians = {key: float(np.median(v)) for key, v in times.items()}
    return {**medians, "traces after gemm, mean": float(np.mean(times["traces after gemm"]))}


if __name__ == "__main__":
    from contextlib import nullcontext

    from tenalg.kernels.cpu import one_thread

    turns(rounds=1)  # compile, fault the pages in
    for label, context in (("Numba's pool", nullcontext), ("one_thread()", one_thread)):
        with context():
            result = turns()
        print(f"{label:14s}" + "  ".join(f"{k} {v * 1e6:7.1f} us" for k, v in result.items()))

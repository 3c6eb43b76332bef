"""The machine's limits, measured in the same run as the workloads.

Bandwidths count bytes read plus bytes written (a copy of N bytes moves 2N), the same
way workloads count their ``bytes``; GEMM peaks count 2 n^3 flops per n x n product.
A limit is what the machine can do, so each one comes from its fastest timed batch (the
workloads use medians); other processes on the machine lower both alike.

- ``copy-1t``: ``np.copyto`` (one thread); ``copy-mt``: a Numba ``prange`` copy (all
  cores); ``copy``: the better of the two, the limit of permutations and elementwise work
  into an existing output.
- ``copy-new-1t``: ``np.copy``; ``copy-new-mt``: the ``prange`` copy into a new
  ``np.empty`` array; ``copy-new``: the better of the two, the limit of work that returns
  a new array: its pages are faulted in (zeroed by the kernel) as they are first written.
- ``read``: a Numba ``prange`` sum, the limit of reductions.
- ``gemm-f32``, ``gemm-f64``: ``np.matmul`` (BLAS, all cores).

:func:`line_reads` (``python -m tenalg.bench.limits``) is a diagnostic, not a limit of
the table: the rate at which a plain ``prange`` loop reads isolated cache lines, the
ceiling of diagonal reads (docs/bench.md).

>>> limits = measure_limits(quick=True, budget=0.01)
>>> sorted(limits) == sorted(KEYS) and all(v > 0 for v in limits.values())
True
"""

import numba
import numpy as np

from .timing import measure

KEYS = ("copy-1t", "copy-mt", "copy", "copy-new-1t", "copy-new-mt", "copy-new", "read",
        "gemm-f32", "gemm-f64")


@numba.njit(parallel=True, cache=True)
def _parallel_copy(dst, src):
    for i in numba.prange(src.size):
        dst[i] = src[i]


@numba.njit(parallel=True, fastmath=True, cache=True)
def _parallel_sum(a):
    total = 0.0
    for i in numba.prange(a.size):
        total += a[i]
    return total


@numba.njit(parallel=True, fastmath=True, cache=True)
def _strided_sum(a, step, count):
    """The sum of a[i * step] for i < count, in 16 parts side by side."""
    total, part = 0.0, count // 16
    for p in numba.prange(16):
        for i in range(p * part, (p + 1) * part):
            total += a[i * step]
    return total


def line_reads(steps=(64, 128, 512, 32776), lines=1 << 21, size=1 << 30, budget=0.5):
    """{step in bytes: bytes/s of 64-byte lines} read one float64 a line, the lines
    ``step`` bytes apart in an array of ``size`` bytes (fewer lines where they would not
    fit: the 32 KB steps of a 4096^2 trace give 32768 lines, 2 MB, which stay cached
    from call to call as the trace's do).

    >>> rates = line_reads(steps=(64, 4096), lines=1 << 12, size=1 << 24, budget=0.01)
    >>> sorted(rates) == [64, 4096] and all(r > 0 for r in rates.values())
    True
    """
    a = np.ones(size // 8)
    counts = {s: min(lines, a.size // (s // 8)) // 16 * 16 for s in steps}
    fns = {s: (lambda s=s: _strided_sum(a, s // 8, counts[s])) for s in steps}
    for fn in fns.values():
        fn()  # compile, fault the pages in
    times = measure(fns, budget)
    return {s: 64 * counts[s] / min(times[s]) for s in steps}


def _copy_new(src):
    dst = np.empty_like(src)
    _parallel_copy(dst, src)
    return dst


def measure_limits(quick=False, budget=0.5):
    """Bandwidths in bytes/s and GEMM peaks in flop/s, keyed as :data:`KEYS`.

    Bandwidths use 128 MB arrays (well beyond the caches); GEMMs 2048^2 matrices, or
    1024^2 when ``quick``.
    """
    elements = 16 * 1024 * 1024
    n = 1024 if quick else 2048
    rng = np.random.default_rng(0)
    src = rng.random(elements)
    dst = np.empty_like(src)
    a32 = rng.random((n, n), dtype=np.float32)
    b32 = rng.random((n, n), dtype=np.float32)
    a64, b64 = a32.astype(np.float64), b32.astype(np.float64)
    fns = {
        "copy-1t": lambda: np.copyto(dst, src),
        "copy-mt": lambda: _parallel_copy(dst, src),
        "copy-new-1t": src.copy,
        "copy-new-mt": lambda: _copy_new(src),
        "read": lambda: _parallel_sum(src),
        "gemm-f32": lambda: np.matmul(a32, b32),
        "gemm-f64": lambda: np.matmul(a64, b64),
    }
    for fn in fns.values():
        fn()  # compile, fault the pages in
    times = measure(fns, budget)
    work = {
        "copy-1t": 2 * src.nbytes,
        "copy-mt": 2 * src.nbytes,
        "copy-new-1t": 2 * src.nbytes,
        "copy-new-mt": 2 * src.nbytes,
        "read": src.nbytes,
        "gemm-f32": 2 * n**3,
        "gemm-f64": 2 * n**3,
    }
    limits = {key: work[key] / min(times[key]) for key in fns}
    limits["copy"] = max(limits["copy-1t"], limits["copy-mt"])
    limits["copy-new"] = max(limits["copy-new-1t"], limits["copy-new-mt"])
    return {key: limits[key] for key in KEYS}


if __name__ == "__main__":
    for step, rate in line_reads().items():
        print(f"lines {step:6d} bytes apart: {rate / 1e9:5.1f} GB/s of lines")

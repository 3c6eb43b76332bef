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

The bandwidth limits are also measured in each workload's own rounds (:class:`Probes`,
:data:`IN_ROUNDS`): the host's bandwidth wanders by up to 2x within minutes, and a
fraction of a limit measured at another time says as much about the host as about the
engine.

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


# the measurements behind each limit (the limit is the best of them)
SOURCES = {"copy": ("copy-1t", "copy-mt"), "copy-new": ("copy-new-1t", "copy-new-mt"),
           "read": ("read",), "gemm-f32": ("gemm-f32",), "gemm-f64": ("gemm-f64",)}
IN_ROUNDS = ("copy", "copy-new", "read")  # limits also measured in each workload's rounds


class Probes:
    """The functions timed for the limits, on arrays made once: ``fns`` and ``work`` (bytes
    or flops a call) by measurement (the keys of :data:`SOURCES`' values).

    Bandwidths use 128 MB arrays (well beyond the caches); GEMMs 2048^2 matrices, or
    1024^2 when ``quick``.

    >>> probes = Probes(quick=True)
    >>> probes.limits({key: [1.0] for key in probes.fns})["copy"] == 2 * 128 * 2**20
    True
    """

    def __init__(self, quick=False):
        elements = 16 * 1024 * 1024
        n = 1024 if quick else 2048
        rng = np.random.default_rng(0)
        src = rng.random(elements)
        dst = np.empty_like(src)
        a32 = rng.random((n, n), dtype=np.float32)
        b32 = rng.random((n, n), dtype=np.float32)
        a64, b64 = a32.astype(np.float64), b32.astype(np.float64)
        self.fns = {
            "copy-1t": lambda: np.copyto(dst, src),
            "copy-mt": lambda: _parallel_copy(dst, src),
            "copy-new-1t": src.copy,
            "copy-new-mt": lambda: _copy_new(src),
            "read": lambda: _parallel_sum(src),
            "gemm-f32": lambda: np.matmul(a32, b32),
            "gemm-f64": lambda: np.matmul(a64, b64),
        }
        copy = 2 * src.nbytes
        self.work = {"copy-1t": copy, "copy-mt": copy, "copy-new-1t": copy,
                     "copy-new-mt": copy, "read": src.nbytes, "gemm-f32": 2 * n**3,
                     "gemm-f64": 2 * n**3}
        for fn in self.fns.values():
            fn()  # compile, fault the pages in

    @staticmethod
    def in_rounds(limit):
        """The measurements to time in the rounds of a workload whose limit is ``limit``
        (none for the GEMM peaks: a 2048^2 float64 product takes half a second)."""
        return SOURCES[limit] if limit in IN_ROUNDS else ()

    def rates(self, times):
        """{measurement: work per second of its fastest call} for ``times`` (per-call
        seconds by measurement)."""
        return {key: self.work[key] / min(t) for key, t in times.items()}

    def limits(self, times):
        """The limits (keyed as :data:`KEYS`) that per-call ``times`` of every measurement
        give: each measurement's best rate, each limit the best of its sources."""
        rates = self.rates(times)
        best = {limit: max(rates[key] for key in keys) for limit, keys in SOURCES.items()}
        return {key: rates.get(key, best.get(key)) for key in KEYS}


def measure_limits(quick=False, budget=0.5, probes=None):
    """Bandwidths in bytes/s and GEMM peaks in flop/s, keyed as :data:`KEYS`, timed on
    ``probes`` (new :class:`Probes` when None)."""
    probes = probes or Probes(quick)
    return probes.limits(measure(probes.fns, budget))


if __name__ == "__main__":
    for step, rate in line_reads().items():
        print(f"lines {step:6d} bytes apart: {rate / 1e9:5.1f} GB/s of lines")

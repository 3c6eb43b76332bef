"""A diagnostic: tenalg against NumPy over many layouts, slowest ratios first.

The suite's workloads are a few chosen layouts; "never slower than NumPy" is a claim about
all of them.  ``python -m tenalg.bench.against_numpy sum float32`` times ``ta.sum`` against
``np.sum`` over every subset of axes of 2-, 3- and 4-d arrays of assorted extents (``perm``:
``ta.permute`` into an array against ``np.copyto`` of the transposed view, every
permutation; ``add``: ``ta.elementwise_binary`` against ``np.add`` with the second operand
whole or broadcast along one axis) and prints the cases where NumPy is fastest relative
to tenalg, among those where NumPy takes 10 µs or more (below that the front end's
microsecond is the difference: docs/bench.md).  Medians over 20 ms, the two timed in
alternating blocks (:func:`~tenalg.bench.timing.measure`); other processes on the
machine move them by 10% or more, so a case worth fixing is one that stays slow when
timed again.

>>> rows = compare("sum", np.float64, shapes=[(4, 5)], budget=0.0)
>>> sorted(case for _, _, case, _, _ in rows)
[(0,), (0, 1), (1,)]
"""

import itertools
import sys

import numpy as np

import tenalg as ta

from .timing import measure

SHAPES = ([(n, m) for n in (3, 17, 64, 300, 1024, 4096) for m in (3, 17, 64, 300, 1024, 4096)
           if n * m <= 1 << 22]
          + [(a, b, c) for a in (2, 8, 64, 512) for b in (3, 8, 64, 512)
             for c in (1, 4, 8, 64, 512) if 64 <= a * b * c <= 1 << 22]
          + [(8,) * 4, (16,) * 4, (32,) * 4, (4, 64, 4, 64), (64, 4, 64, 4), (2, 3, 64, 512)])


def _cases(kind, a, rng):
    """(case, tenalg call, NumPy call) for each case of ``kind`` on array ``a``."""
    nd = a.ndim
    if kind == "sum":
        for r in range(1, nd + 1):
            for axes in itertools.combinations(range(nd), r):
                yield axes, (lambda ax=axes: ta.sum(a, axis=ax)), (
                    lambda ax=axes: np.sum(a, axis=ax))
    elif kind == "perm":
        for axes in itertools.permutations(range(nd)):
            if axes != tuple(range(nd)):
                out = np.empty(tuple(a.shape[k] for k in axes), a.dtype)
                yield axes, (lambda ax=axes, o=out: ta.permute(a, ax, out=o)), (
                    lambda ax=axes, o=out: np.copyto(o, a.transpose(ax)))
    elif kind == "add":
        modes, out = "ijkl"[:nd], np.empty_like(a)
        for k in range(-1, nd):
            b = rng.random(tuple(1 if j == k else e for j, e in enumerate(a.shape))).astype(
                a.dtype)
            yield b.shape, (lambda b=b: ta.elementwise_binary(a, modes, b, modes, modes,
                                                              out=out)), (
                lambda b=b: np.add(a, b, out=out))
    else:
        raise ValueError(f"kind is sum, perm or add, not {kind!r}")


def compare(kind, dtype, shapes=SHAPES, budget=0.02):
    """(NumPy's time / tenalg's, shape, case, tenalg's seconds, NumPy's) for every case of
    ``kind`` on arrays of ``dtype`` and ``shapes``, the slowest ratio first."""
    rng = np.random.default_rng(0)
    rows = []
    for shape in shapes:
        a = rng.random(shape).astype(dtype)
        for case, mine, theirs in _cases(kind, a, rng):
            mine(), theirs()  # compile, fault in
            times = measure({"tenalg": mine, "numpy": theirs}, budget)
            t_mine, t_numpy = (float(np.median(times[k])) for k in ("tenalg", "numpy"))
            rows.append((t_numpy / t_mine, shape, case, t_mine, t_numpy))
    return sorted(rows, key=lambda row: row[0])


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    kind, dtype = args[0], np.dtype(args[1] if len(args) > 1 else "float64")
    rows = [row for row in compare(kind, dtype) if row[4] >= 1e-5]
    slow = [row for row in rows if row[0] < 0.9]
    print(f"{kind} {dtype}: {len(rows)} cases where NumPy takes 10 us or more, "
          f"{len(slow)} of them slower in tenalg (< 0.9x)")
    for ratio, shape, case, mine, theirs in rows[:25]:
        print(f"{ratio:5.2f}x  {shape!s:22} {case!s:16} tenalg {mine * 1e6:8.1f} us  "
              f"numpy {theirs * 1e6:8.1f} us")


if __name__ == "__main__":
    main()

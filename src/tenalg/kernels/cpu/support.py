"""Whether the Numba kernels should run a problem (:func:`supports`): sizes below which
NumPy's own loops cost less, measured per kind and layout.

>>> import numpy as np
>>> supports("permutation", (np.dtype(np.float64),) * 2, 2, 16)
False
"""

import math

import numpy as np

from ...dtypes import STORAGE_TYPES
from .. import compiler
from .lowlevel import _FORMATS
from .permutation_tiles import _plain_side
from .threads import _SERIAL_WORK

# Below these sizes NumPy's reference path has lower overhead (measured on contiguous data)
_MIN_ELEMENTS = {"permutation": 1 << 15, "reduction": 1 << 18, "elementwise_binary": 1 << 18,
                 "elementwise_trinary": 1 << 18}
# ... unless NumPy would run its inner loop this many times (a reduction of at least
# _MIN_SLOW_NUMPY elements): each run costs it some 20 ns (a float64 sum of (32, 32, 32)
# over axis 1, 1024 runs, NumPy 22.5 us, the kernels 15.9, on Zen 4; of (256, 128) over
# axis 1, 256 runs, 11.1 and 14.1)
_NUMPY_LOOPS, _MIN_SLOW_NUMPY = 1 << 9, 1 << 12
# Permutations whose tiles (out's fastest extent x a's) hold fewer elements than this cost
# more per element than NumPy's loop: only two threads make up for it (a 15^4 block's
# 15 x 15 tiles, (2, 0, 3, 1): 0.78x NumPy's speed on one thread; 16 x 16: 1.0-1.2x)
_MIN_TILE = 256
# Permutations that keep the innermost axis (rows of n elements): NumPy's strided copy
# runs whole rows, so the kernels need n * _ROW_ELEMENTS elements, at most _MIN_ROWS
_ROW_ELEMENTS, _MIN_ROWS = 1 << 12, 1 << 18

# Elementwise rows (out's fastest loop) shorter than this cost the row kernel more per
# row than NumPy's loop: (64, 512, 8) + (64, 512, 1) float32 835 us on two threads of Zen
# 4, NumPy 126; rows of 128 (2048, 128) + (2048, 1) 126 against 61, of 256 84 against 57
_MIN_ROW = 512

def _fastest(loops, k):
    """The loop where operand k (0: the output) has its smallest non-zero stride."""
    return min((loop for loop in loops if loop.strides[k] and loop.extent > 1),
               key=lambda loop: abs(loop.strides[k]), default=None)


def _min_elements(kind, loops, bits):
    """The problem size from which the kernels beat NumPy, for this kind and layout
    (``bits``: of the narrowest element type)."""
    if loops and kind == "reduction":
        inner = _fastest(loops, 1)
        runs = math.prod(loop.extent for loop in loops) // inner.extent if inner else 0
        if runs >= _NUMPY_LOOPS:  # NumPy's inner loop (along a's fastest axis) runs often
            return _MIN_SLOW_NUMPY
    if loops and kind == "permutation":
        row, inner = _fastest(loops, 0), _fastest(loops, 1)
        if row is not None and row is inner:
            return min(max(row.extent * _ROW_ELEMENTS, _MIN_ELEMENTS[kind]), _MIN_ROWS)
        if row is not None and inner is not None and (
                row.extent * inner.extent < _MIN_TILE
                or min(row.extent, inner.extent) < _plain_side(bits)):
            return _SERIAL_WORK
    if loops and kind.startswith("elementwise"):
        row = _fastest(loops, 0)
        if row is not None and row.extent < _MIN_ROW:
            return math.inf
    return _MIN_ELEMENTS.get(kind, math.inf)


def supports(kind, dtypes, ndim, elements, loops=None):
    """Whether the Numba kernels should run this problem (large enough, known dtypes).

    ``loops`` (the layout's, optional) refines the size needed: a reduction qualifies
    smaller where NumPy would run its inner loop (along the input's smallest-stride loop)
    many times, each run paying its per-loop cost (``iij->j`` on (2048, 2048, 8): 2048
    runs of 8 elements; a sum of (32, 32, 32) over axis 1: 1024 of 32); a permutation
    that keeps the innermost axis needs more, the longer its rows (NumPy copies them
    whole), and one whose tiles are small, or narrower than a register block (moved
    element by element), two threads' worth: on one thread of Zen 4 (64, 512, 4)
    float64 to axes (0, 2, 1) took 70.6 us against NumPy's 42.9, on two (1024, 512, 4)
    931 against 1269.  Elementwise work along rows shorter than _MIN_ROW stays on
    NumPy.  16-bit data that NumPy would convert qualifies from _MIN_SLOW_NUMPY
    elements: a float16 sum of (64, 4096) took 0.82 ms that way on Zen 1, 0.083 ms in
    the kernels (torch 0.05).

    >>> supports("reduction", (np.dtype(np.float32),) * 2, 2, 1 << 20)
    True
    """
    if compiler.jit_off() or not all(np.dtype(d) in STORAGE_TYPES for d in dtypes):
        return False
    if any(d in _FORMATS for d in dtypes) and (kind != "permutation" or len(set(dtypes)) > 1):
        return elements >= _MIN_SLOW_NUMPY  # NumPy converts 16-bit storage 5-20x slower
    return elements >= _min_elements(kind, loops,
                                     8 * min(np.dtype(d).itemsize for d in dtypes))

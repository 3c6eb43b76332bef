"""Numba CPU kernels: blocked permutation, strided reduction, fused elementwise.

Same interface as :mod:`tenalg.kernels.reference`: every argument is a strided view
already shaped by the layout analysis (output first; for a reduction the input's
trailing axes are the reduced ones).  Each array reaches Numba as a 1-D view of the
memory it spans plus an element offset and element strides, so one compiled kernel
serves every rank and layout; only the dtypes select a specialisation.

The modules, lowest first: :mod:`.lowlevel` (operator codes, 16-bit loads and stores,
intrinsics) and :mod:`.vectors` (LLVM vector helpers); :mod:`.threads`; :mod:`.calls`
(memory views, prepared calls); the kernels with their argument preparation beside them:
:mod:`.elementwise_rows`, :mod:`.permutation_tiles` and :mod:`.permutation_rows`
(prepared in :mod:`.permutation`), :mod:`.row_sums`, :mod:`.reduction_lanes` and
:mod:`.reduction_rows` (prepared in :mod:`.reduction`), :mod:`.diagonal_sums`; and
:mod:`.support` (whether the kernels should run a problem).  Compile options and the
on-disk cache are :mod:`tenalg.kernels.jit`'s.

>>> import numpy as np
>>> from tenalg.descriptors import Unary
>>> out = np.empty((3, 2))
>>> permute(out, np.arange(6.0).reshape(2, 3).T, alpha=2, unary=Unary.IDENTITY,
...         compute=np.dtype(np.float64))
>>> out.tolist()
[[0.0, 6.0], [2.0, 8.0], [4.0, 10.0]]
"""

from .diagonal_sums import strided_sums
from .elementwise_rows import elementwise
from .elementwise_rows import elementwise_call
from .permutation import permute
from .permutation import permute_call
from .reduction import reduce
from .reduction import reduce_call
from .reduction_rows import sum_of_squares
from .support import supports
from .threads import all_threads
from .threads import ended
from .threads import on_threads
from .threads import one_thread
from .threads import thread_count

"""NumPy's ``tensordot``, ``transpose`` and ``einsum_path`` over tenalg's einsum.

With :func:`tenalg.einsum` these are the functions tensor-network tools look up in a
backend module: ``opt_einsum.contract(eq, *ops, backend="tenalg")`` calls
``tenalg.tensordot``, ``tenalg.transpose`` and ``tenalg.einsum``; autoray (quimb,
cotengra) finds the same names once ``numpy.ndarray`` is registered to tenalg (see
docs/einsum.md).  ``tensordot`` runs as a planned, cached einsum (a BLAS GEMM for
float and complex data, NumPy's routine for the other dtypes); ``transpose`` is NumPy's
view; ``einsum_path`` returns np.einsum_path's pair (path, report).

>>> import numpy as np
>>> a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 4))
>>> tensordot(a, b, axes=1).tolist()[1]
[12.0, 12.0, 12.0, 12.0]
>>> transpose(a).shape, np.shares_memory(transpose(a), a)
((3, 2), True)
>>> einsum_path("ij,jk,kl->il", a, b, b.T)[0]
['einsum_path', (1, 2), (0, 1)]
"""

import functools
import operator

import numpy as np
import opt_einsum

from .contraction import find_path
from .einsum import bind, einsum, interleaved, parse
from .einsum_numpy import NUMPY_OPTIMIZE, mode_extents
from .errors import AxisError, ExtentError, OperationError
from .seam import foreign_kind


def _normalize(axes, ndim, which):
    out = []
    for axis in axes:
        axis = operator.index(axis)
        if not -ndim <= axis < ndim:
            raise AxisError(f"tensordot: axis {axis} is out of bounds for {which} of "
                                 f"rank {ndim}")
        out.append(axis % ndim)
    if len(set(out)) != len(out):
        raise OperationError("tensordot: duplicate axes are not allowed")
    return tuple(out)


@functools.lru_cache(maxsize=512)
def _tensordot_expression(ndim_a, ndim_b, axes_a, axes_b):
    """The einsum expression of a tensordot (unicode labels past 52 axes)."""
    symbols = [opt_einsum.get_symbol(k) for k in range(ndim_a + ndim_b)]
    a = symbols[:ndim_a]
    b = symbols[ndim_a:]
    for i, j in zip(axes_a, axes_b, strict=True):
        b[j] = a[i]
    out = [s for k, s in enumerate(a) if k not in axes_a]
    out += [s for k, s in enumerate(b) if k not in axes_b]
    return "".join(a) + "," + "".join(b) + "->" + "".join(out)


def tensordot(a, b, axes=2):
    """np.tensordot: sum products over ``axes`` (an int N: a's last N with b's first N;
    or a pair of axis sequences); a's free axes, then b's.

    >>> import numpy as np
    >>> tensordot(np.ones((2, 3)), np.ones((3, 2)), axes=([1], [0])).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    if not foreign_kind((a, b)):  # (Dask arrays, say, go to einsum's front end for them)
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "mM" or b.dtype.kind in "mM":  # no einsum for times: NumPy's dot
            return np.tensordot(a, b, axes)
    if np.ndim(axes) == 0:  # an int N: a's last N axes with b's first N
        n = operator.index(axes)
        if n < 0 or n > min(a.ndim, b.ndim):
            raise AxisError(f"tensordot: axes={n} with ranks {a.ndim} and {b.ndim}")
        axes_a, axes_b = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        axes_a, axes_b = axes
    axes_a = (axes_a,) if np.ndim(axes_a) == 0 else axes_a
    axes_b = (axes_b,) if np.ndim(axes_b) == 0 else axes_b
    axes_a, axes_b = _normalize(axes_a, a.ndim, "a"), _normalize(axes_b, b.ndim, "b")
    if len(axes_a) != len(axes_b):
        raise OperationError(f"tensordot: {len(axes_a)} axes of a, {len(axes_b)} of b")
    for i, j in zip(axes_a, axes_b, strict=True):
        if a.shape[i] != b.shape[j]:  # NumPy broadcasts nothing here
            raise ExtentError(f"a's axis {i} with b's axis {j}", a.shape[i], b.shape[j],
                              "tensordot shape mismatch")
    return einsum(_tensordot_expression(a.ndim, b.ndim, axes_a, axes_b), a, b)


def transpose(a, axes=None):
    """np.transpose: a view with the axes permuted (reversed when ``axes`` is None).  For
    a new array in the permuted order use :func:`tenalg.permute` (a blocked parallel copy).

    >>> import numpy as np
    >>> transpose(np.zeros((2, 3, 4)), (1, 0, 2)).shape
    (3, 2, 4)
    """
    return np.transpose(a, axes)


def einsum_path(subscripts, *operands, optimize="greedy", einsum_call=False):
    """np.einsum_path: ``(["einsum_path", *steps], report)``.

    NumPy's own answer for NumPy's optimize values (True, False, "greedy", "optimal", an
    explicit path) on NumPy's labels; tenalg's optimizers ("auto", "dp", an opt_einsum
    ``PathOptimizer``) plan the path that NumPy then reports.  Labels beyond NumPy's 52
    letters are reported by opt_einsum (the same format).

    >>> import numpy as np
    >>> x = np.ones((4, 4))
    >>> path, report = einsum_path("ij,jk,kl->il", x, x, x, optimize="auto")
    >>> path, report.splitlines()[0].split(":")[0].strip()
    (['einsum_path', (0, 1), (0, 1)], 'Complete contraction')
    """
    if einsum_call:
        raise OperationError("einsum_call is NumPy's internal option; tenalg does not take it")
    if not isinstance(subscripts, str):
        subscripts, operands = interleaved((subscripts, *operands))
    arrays = [np.asarray(x) for x in operands]
    if not (optimize in NUMPY_OPTIMIZE or isinstance(optimize, list | tuple)):
        optimize = _tenalg_path(subscripts, arrays, optimize)
    if subscripts.isascii():
        return np.einsum_path(subscripts, *arrays, optimize=optimize)
    if optimize is False or optimize is True:
        optimize = "greedy"
    if isinstance(optimize, list | tuple) and optimize and optimize[0] == "einsum_path":
        optimize = list(optimize[1:])
    path, info = opt_einsum.contract_path(subscripts, *arrays, optimize=optimize)
    return ["einsum_path", *path], str(info)


def _tenalg_path(subscripts, arrays, optimize):
    """The path tenalg's planner takes with ``optimize``, as np.einsum_path's list."""
    modes, out_modes = bind(parse(subscripts), [x.shape for x in arrays])
    extents = mode_extents(modes, [x.shape for x in arrays])
    return ["einsum_path", *find_path(modes, out_modes, extents, optimize)]

"""Elementwise front ends on Dask arrays: ``elementwise_binary`` and
``elementwise_trinary``, each block computed by tenalg's own plan for it.

Operands broadcast by mode labels, as in :func:`tenalg.elementwise_binary`; Dask aligns
their chunks along each shared mode.  The operation is checked where the graph is built
(modes, extents, ops, unaries, scalars), not when it computes.

>>> import dask.array as da, numpy as np
>>> a = da.ones((4, 3), chunks=2)
>>> b = da.arange(3.0, chunks=2)
>>> elementwise_binary(a, "ij", b, "j", "ij", "mul", alpha=2).compute()[0].tolist()
[0.0, 2.0, 4.0]
"""

import functools

import dask.array as da  # optional dependency: imported only in tenalg.distributed
import numpy as np

from .. import api
from ..descriptors import Operand, TensorDescriptor, normalize_modes
from ..errors import OperationError
from ..operations import Operation
from .dense import _dask


def elementwise_binary(a, modes_a, b, modes_b, modes_out, op="add", *, alpha=1, beta=1,
                       unary_a=None, unary_b=None, compute_dtype=None):
    """``op(alpha unary_a(a), beta unary_b(b))`` on Dask arrays, lazily."""
    return _elementwise(api.elementwise_binary, (a, b), (modes_a, modes_b), modes_out,
                        (op,), {"alpha": alpha, "beta": beta, "unary_a": unary_a,
                                "unary_b": unary_b, "compute_dtype": compute_dtype})


def elementwise_trinary(a, modes_a, b, modes_b, c, modes_c, modes_out, op_ab="add",
                        op_abc="add", *, alpha=1, beta=1, gamma=1, unary_a=None,
                        unary_b=None, unary_c=None, compute_dtype=None):
    """``op_abc(op_ab(alpha a, beta b), gamma c)`` on Dask arrays, lazily, in one pass
    over each block.

    >>> import dask.array as da
    >>> x = da.ones((3, 2), chunks=2)
    >>> elementwise_trinary(x, "ij", x, "ij", x, "ij", "ji", gamma=3).compute().shape
    (2, 3)
    """
    return _elementwise(api.elementwise_trinary, (a, b, c), (modes_a, modes_b, modes_c),
                        modes_out, (op_ab, op_abc),
                        {"alpha": alpha, "beta": beta, "gamma": gamma, "unary_a": unary_a,
                         "unary_b": unary_b, "unary_c": unary_c,
                         "compute_dtype": compute_dtype})


def _elementwise(function, arrays, modes, modes_out, ops, options):
    arrays = [_dask(x) for x in arrays]
    modes = [normalize_modes(m, "modes") for m in modes]
    modes_out = normalize_modes(modes_out, "output modes")
    options = {k: v for k, v in options.items() if v is not None}
    kind = function.__name__
    _check(kind, arrays, modes, modes_out, ops, options)
    block = functools.partial(_block, function, modes, modes_out, ops, options)
    # the tiny blocks' result checks the scalars and gives the result type
    dtype = block(*[np.zeros((1,) * x.ndim, x.dtype) for x in arrays]).dtype
    pairs = [item for x, m in zip(arrays, modes, strict=True) for item in (x, m)]
    return da.blockwise(block, modes_out, *pairs, dtype=dtype, token=f"tenalg-{kind}")


def _check(kind, arrays, modes, modes_out, ops, options):
    """The operation's own checks (modes, extents, ops, unaries), on the arrays' shapes;
    and repeated modes refused (Dask's blockwise does not read diagonals)."""
    names = "ABC"[:len(arrays)]
    unaries = [options.get(f"unary_{n.lower()}", "identity") for n in names]
    operands = [Operand(TensorDescriptor.contiguous(x.shape, x.dtype), m, u, n)
                for x, m, u, n in zip(arrays, modes, unaries, names, strict=True)]
    named_ops = dict(zip(("op",) if len(ops) == 1 else ("op_ab", "op_abc"), ops, strict=True))
    getattr(Operation, kind)(*operands, out_modes=modes_out,
                             compute=options.get("compute_dtype"), **named_ops)
    for name, m in zip(names, modes, strict=True):
        if len(set(m)) != len(m):
            raise OperationError(f"{kind} of Dask arrays: input {name} repeats a mode "
                                 f"({m}); take its diagonal first (ta.diagonal)")


def _block(function, modes, modes_out, ops, options, *blocks):
    args = [item for x, m in zip(blocks, modes, strict=True) for item in (x, m)]
    return np.asarray(function(*args, modes_out, *ops, **options))

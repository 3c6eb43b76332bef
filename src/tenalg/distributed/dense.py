"""Dense front ends on Dask arrays: einsum, contract, permute, sum, reduce, trace,
diagonal, inner_product, norm, to_host.

Each takes ``dask.array.Array`` operands (NumPy arrays are wrapped) and returns a lazy
Dask array. Multi-operand expressions follow opt_einsum's path; every pairwise step is
one :func:`~tenalg.distributed.blockwise.blockwise` operation whose chunks the memory
model chooses, and whose tasks run ``tenalg.einsum`` (plans cached per block shape) on
NumPy blocks.

>>> import dask.array as da, numpy as np
>>> a = da.from_array(np.arange(12.0).reshape(3, 4), chunks=(2, 3))
>>> b = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(3, 1))
>>> bool(np.allclose(einsum("ij,jk->ik", a, b).compute(), a.compute() @ b.compute()))
True
"""

import functools
import math

import dask  # optional dependency: imported only in tenalg.distributed
import dask.array as da
import numpy as np
import opt_einsum
from dask.utils import parse_bytes
from opt_einsum import parser

from .. import api
from ..descriptors import Unary
from ..einsum import einsum as _ta_einsum
from ..einsum_numpy import check_casting, numpy_dtype
from ..errors import DescriptorError, OperationError
from ..views import check_offset, normalize_axes, normalize_axis
from . import cluster
from .blockwise import blockwise

try:  # a running client tells the workers' memory limits
    from distributed import get_client
except ImportError:  # dask without distributed: the config decides
    get_client = None

COMBINE = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum}


def memory_limit_of(memory_limit=None):
    """Bytes per worker: ``memory_limit`` (int or "2GB"), else the smallest limit of the
    current client's workers, else 8 times Dask's ``array.chunk-size``.

    >>> memory_limit_of("1 MiB")
    1048576
    """
    if memory_limit is not None:
        return parse_bytes(memory_limit) if isinstance(memory_limit, str) else int(memory_limit)
    if get_client is not None:
        try:
            workers = cluster.workers(get_client()).values()
            limits = [w.get("memory_limit") or 0 for w in workers]
            if limits and min(limits) > 0:
                return int(min(limits))
        except ValueError:  # no client: not on a cluster
            pass
    return 8 * parse_bytes(dask.config.get("array.chunk-size"))


def _dask(x):
    """``x`` as a Dask array of known chunk sizes (the memory model reads them)."""
    x = x if isinstance(x, da.Array) else da.asarray(x)
    if any(math.isnan(c) for chunks in x.chunks for c in chunks):
        raise OperationError("a Dask array of unknown chunk sizes (nan, after boolean "
                             "indexing say): call its compute_chunk_sizes() first")
    return x


def _einsum_block(subscripts, *blocks):
    return np.asarray(_ta_einsum(subscripts, *blocks))


def _step(arrays, labels, out_labels, limit, split_every):
    """One 1- or 2-operand einsum step as a blockwise operation."""
    subscripts = ",".join("".join(x) for x in labels) + "->" + "".join(out_labels)
    dtype = np.einsum(subscripts, *[np.zeros((1,) * a.ndim, a.dtype) for a in arrays]).dtype
    return blockwise(functools.partial(_einsum_block, subscripts), arrays, labels, out_labels,
                     dtype, memory_limit=limit, split_every=split_every, name="tenalg-einsum")


def contraction_path(subscripts, *shapes, optimize="auto"):
    """opt_einsum's pairwise path for the expression on these shapes.

    >>> contraction_path("ij,jk,kl->il", (2, 30), (30, 40), (40, 5))
    [(0, 1), (0, 1)]
    >>> contraction_path("ij,jk,kl->il", (2, 3), (3, 4), (4, 5),
    ...                  optimize=["einsum_path", (1, 2), (0, 1)])
    [(1, 2), (0, 1)]
    """
    if len(shapes) < 3:
        return [tuple(range(len(shapes)))]
    optimize = "auto" if optimize in (True, "auto", None) else optimize
    if isinstance(optimize, list | tuple) and optimize and optimize[0] == "einsum_path":
        optimize = list(optimize[1:])  # NumPy's spelling of an explicit path
    return list(opt_einsum.contract_path(subscripts, *shapes, shapes=True,
                                         optimize=optimize)[0])


def einsum(subscripts, *operands, dtype=None, casting="safe", optimize="auto",
           memory_limit=None, split_every=4):
    """NumPy's einsum on Dask arrays (ellipsis, implicit output, repeated labels, a
    ``dtype`` the operands cast to under ``casting``), lazily; ``memory_limit`` bytes
    per worker (default: :func:`memory_limit_of`)."""
    arrays = [_dask(x) for x in operands]
    if dtype is not None:  # NumPy computes in dtype: the operands are cast first
        dtype = numpy_dtype([a.dtype for a in arrays], dtype, check_casting(casting))
        arrays = [a.astype(dtype) for a in arrays]
    inputs, output, _ = parser.parse_einsum_input([subscripts, *[a.shape for a in arrays]],
                                                  shapes=True)
    labels = [tuple(s) for s in inputs.split(",")]
    if len(labels) != len(arrays):
        raise OperationError(f"einsum: {len(labels)} operands in the expression, "
                             f"{len(arrays)} given")
    limit = memory_limit_of(memory_limit)
    path = contraction_path(f"{inputs}->{output}", *[a.shape for a in arrays],
                            optimize=optimize)
    items = list(zip(arrays, labels, strict=True))
    for step, pair in enumerate(path):
        taken = [items[i] for i in pair]
        items = [x for i, x in enumerate(items) if i not in pair]
        if step == len(path) - 1:
            out = tuple(output)
        else:
            later = set(output).union(*[set(lab) for _, lab in items])
            out = tuple(dict.fromkeys(x for _, lab in taken for x in lab if x in later))
        items.append((_step([a for a, _ in taken], [lab for _, lab in taken], out, limit,
                            split_every), out))
    return items[0][0]


def _letters(*mode_lists):
    """Letters for arbitrary hashable mode labels, the same letter for the same label."""
    names = {}
    for modes in mode_lists:
        for m in modes:
            names.setdefault(m, opt_einsum.get_symbol(len(names)))
    return ["".join(names[m] for m in modes) for modes in mode_lists]


def _scaled(result, alpha, c, beta):
    result = result if alpha == 1 else alpha * result
    return result if c is None or beta == 0 else result + beta * _dask(c)


LAZY_UNARIES = (Unary.IDENTITY, Unary.CONJUGATE)  # what Dask's own operations read lazily


def read(array, unary, what="operand"):
    """``array`` read through ``unary``: as it is (None or "identity") or conjugated,
    the two that Dask's own operations give lazily."""
    unary = Unary.coerce("identity" if unary is None else unary)
    if unary is Unary.IDENTITY:
        return array
    if unary is Unary.CONJUGATE:
        return da.conj(array)
    raise OperationError(f"{what}: Dask arrays are read as they are or conjugated, "
                         f"not through {unary.value!r}")


def contract(a, modes_a, b, modes_b, modes_out, *, alpha=1, c=None, beta=0, unary_a=None,
             unary_b=None, memory_limit=None, split_every=4):
    """D = alpha * sum A B + beta * C over the modes absent from ``modes_out``.

    >>> import dask.array as da
    >>> contract(da.ones((2, 3)), "ij", da.ones((3,)), "j", "i").compute().tolist()
    [3.0, 3.0]
    """
    sa, sb, so = _letters(modes_a, modes_b, modes_out)
    a, b = read(_dask(a), unary_a, "input A"), read(_dask(b), unary_b, "input B")
    result = einsum(f"{sa},{sb}->{so}", a, b, memory_limit=memory_limit,
                    split_every=split_every)
    return _scaled(result, alpha, c, beta)


def inner_product(a, b, *, memory_limit=None):
    """``sum(conj(a) * b)`` as a rank-0 Dask array.

    >>> import dask.array as da
    >>> float(inner_product(da.ones((3, 2), chunks=2), da.full((3, 2), 2.0)).compute())
    12.0
    """
    a, b = _dask(a), _dask(b)
    if a.shape != b.shape:
        raise DescriptorError(f"inner_product of shapes {a.shape} and {b.shape}")
    letters = _letters(range(a.ndim))[0]
    return einsum(f"{letters},{letters}->", da.conj(a), b, memory_limit=memory_limit)


def _block_norm(block):
    return np.asarray(api.norm(block)).reshape((1,) * block.ndim)


def _norm_of_norms(norms):
    return np.asarray(api.norm(norms))


def norm(a):
    """The Frobenius norm as a rank-0 Dask array: each block's norm by
    :func:`tenalg.norm` (scaled where squares would overflow or underflow), then the
    norm of those norms, which is the whole array's.

    >>> import dask.array as da
    >>> float(norm(da.full((4, 4), 1e300, chunks=2)).compute())
    4e+300
    """
    a = _dask(a)
    dtype = _block_norm(np.zeros((1,) * a.ndim, a.dtype)).dtype  # checks the dtype
    norms = a.map_blocks(_block_norm, chunks=tuple((1,) * n for n in a.numblocks),
                         dtype=dtype)
    return norms.reshape(-1).rechunk(-1).map_blocks(_norm_of_norms, drop_axis=0, dtype=dtype)


def to_host(x):
    """``x`` computed, as a NumPy array."""
    return np.asarray(_dask(x).compute())


def diagonal(a, axis1=0, axis2=1, *, offset=0):
    """NumPy's diagonal of axes ``axis1`` and ``axis2`` (its axis last), lazily.

    >>> import dask.array as da
    >>> diagonal(da.eye(3, chunks=2), offset=1).compute().tolist()
    [0.0, 0.0]
    """
    a = _dask(a)
    axis1, axis2 = normalize_axes((axis1, axis2), a.ndim)
    if axis1 == axis2:
        raise DescriptorError(f"axes repeat in the diagonal pair ({axis1}, {axis2})")
    return da.diagonal(a, check_offset(offset), axis1, axis2)


def _reduce_block(modes_in, modes_out, op, block):
    return np.asarray(api.reduce(block, modes_in, modes_out, op=op))


def reduce(a, modes_in, modes_out, op="sum", *, alpha=1, c=None, beta=0, unary_a=None,
           memory_limit=None, split_every=4):
    """D = alpha * reduce(unary_a(A)) + beta * C, ``op`` one of sum, product, min, max
    (``unary_a`` None, "identity" or "conjugate").

    >>> import dask.array as da
    >>> reduce(da.arange(6.0, chunks=4).reshape(2, 3), "ij", "i", "max").compute().tolist()
    [2.0, 5.0]
    """
    if str(op).lower() not in COMBINE:
        raise OperationError(f"reduce: op {op!r} is not one of {sorted(COMBINE)}")
    op = str(op).lower()
    a = read(_dask(a), unary_a, "input A")
    modes_in, modes_out = list(modes_in), list(modes_out)
    kernel = functools.partial(_reduce_block, modes_in, modes_out, op)
    dtype = kernel(np.zeros((1,) * a.ndim, a.dtype)).dtype
    result = blockwise(kernel, [a], [tuple(modes_in)], tuple(modes_out), dtype,
                       combine=COMBINE[op], memory_limit=memory_limit_of(memory_limit),
                       split_every=split_every, name="tenalg-reduce")
    return _scaled(result, alpha, c, beta)


def _sum_block(axes, dtype, block):
    return np.asarray(api.sum(block, axis=axes, dtype=dtype))


def _typed(a, dtype):
    """``a`` read as ``dtype`` (None: as it is): NumPy's sums with ``dtype=`` add each
    entry cast to it."""
    return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)


def sum(a, axis=None, dtype=None, keepdims=False, *, memory_limit=None,  # noqa: A001
        split_every=4):
    """NumPy's sum over ``axis`` (int, tuple or None) on a Dask array, in ``dtype``.

    >>> import dask.array as da
    >>> float(sum(da.ones((5, 4), chunks=2)).compute())
    20.0
    >>> sum(da.ones((5, 4), chunks=2), 0, "float32", keepdims=True).dtype.name
    'float32'
    """
    a = _typed(_dask(a), dtype)
    axes = api.sum_axes(axis, a.ndim)
    labels = tuple(range(a.ndim))
    kernel = functools.partial(_sum_block, axes, dtype)  # partials in dtype (int8 wraps)
    dtype = np.sum(np.zeros((1,) * a.ndim, a.dtype), axis=axes, dtype=dtype).dtype
    total = blockwise(kernel, [a], [labels], tuple(x for x in labels if x not in axes), dtype,
                      memory_limit=memory_limit_of(memory_limit), split_every=split_every,
                      name="tenalg-sum")
    if keepdims:
        total = total.reshape(tuple(1 if k in axes else n for k, n in enumerate(a.shape)))
    return total


def _trace_block(pairs, dtype, block):
    total = np.asarray(api.partial_trace(block, pairs))
    return total if dtype is None else total.astype(dtype, copy=False)


def partial_trace(a, pairs, *, memory_limit=None, split_every=4):
    """Traces over several axis pairs at once; survivors keep their order.

    >>> import dask.array as da, numpy as np
    >>> x = da.from_array(np.arange(16.0).reshape(2, 2, 2, 2), chunks=1)
    >>> partial_trace(x, [(0, 2)]).compute().tolist()
    [[10.0, 12.0], [18.0, 20.0]]
    """
    return _traced(_dask(a), pairs, None, memory_limit, split_every)


def _traced(a, pairs, dtype, memory_limit, split_every):
    """:func:`partial_trace`, each task's sums cast to ``dtype`` (None: NumPy's type of
    them): a narrow integer's partial sums wrap around as NumPy's sum in it does, a
    bool's are any()."""
    pairs = [tuple(normalize_axis(x, a.ndim) for x in pair) for pair in pairs]
    if len({x for p in pairs for x in p}) != 2 * len(pairs):
        raise OperationError(f"axes repeat across the trace pairs {pairs}")
    square = [slice(None)] * a.ndim  # unequal extents trace the leading square, as NumPy's
    for i, j in pairs:
        square[i] = square[j] = slice(0, min(a.shape[i], a.shape[j]))
    a = a[tuple(square)]
    labels = list(range(a.ndim))
    for i, j in pairs:
        labels[j] = labels[i]
    traced = {x for p in pairs for x in p}
    out = tuple(x for x in range(a.ndim) if x not in traced)
    kernel = functools.partial(_trace_block, pairs, dtype)
    dtype = kernel(np.zeros((1,) * a.ndim, a.dtype)).dtype
    return blockwise(kernel, [a], [tuple(labels)], out, dtype,
                     memory_limit=memory_limit_of(memory_limit), split_every=split_every,
                     name="tenalg-trace")


def trace(a, axis1=0, axis2=1, *, offset=0, dtype=None, memory_limit=None, split_every=4):
    """The trace over ``axis1`` and ``axis2`` of the diagonal ``offset`` above the main
    one (below where negative), in ``dtype``; a rank-0 array for a matrix.

    >>> import dask.array as da
    >>> float(trace(da.eye(5, chunks=2)).compute()), float(trace(da.eye(5, k=1), offset=1))
    (5.0, 4.0)
    """
    a = _typed(_dask(a), dtype)
    a = a[api.offset_index(a, (axis1, axis2), offset)] if check_offset(offset) else a
    return _traced(a, [(axis1, axis2)], dtype, memory_limit, split_every)


def _permute_block(axes, alpha, block):
    return np.asarray(api.permute(block, axes, alpha=alpha))


def permute(a, axes=None, *, alpha=1, memory_limit=None):
    """alpha * a with its axes in the order ``axes`` (None: reversed; a new array, not a
    view).

    >>> import dask.array as da
    >>> permute(da.ones((2, 3, 4), chunks=2), (2, 0, 1)).shape
    (4, 2, 3)
    """
    a = _dask(a)
    axes = api.permutation(range(a.ndim)[::-1] if axes is None else axes, a.ndim)
    kernel = functools.partial(_permute_block, axes, alpha)
    dtype = kernel(np.zeros((1,) * a.ndim, a.dtype)).dtype
    return blockwise(kernel, [a], [tuple(range(a.ndim))], axes, dtype,
                     memory_limit=memory_limit_of(memory_limit), name="tenalg-permute")

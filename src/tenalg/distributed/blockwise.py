"""One blockwise operation on Dask arrays: a task per block combination, a tree per output.

Every operand axis carries a label; labels shared between (or within) operands share
chunks, so a task reads exactly the blocks that meet. Each task runs a tenalg kernel on
its NumPy blocks. Over the summed labels, a task takes as many block combinations as
the memory model and the cluster's threads allow and sums their kernels' outputs in
place (:func:`tenalg.distributed.planner.group_size`); the tasks' partials are combined
in a tree of fan-in ``split_every`` (never all at once, as ``dask.array.tensordot``
does in dask issue 6907). Chunks come from :func:`tenalg.distributed.planner.plan_chunks`.

>>> import dask.array as da, numpy as np
>>> x = da.ones((4, 6), chunks=(3, 2))
>>> y = blockwise(lambda b: b.sum(axis=1), [x], [("i", "j")], ("i",), np.float64,
...               memory_limit=1 << 20)
>>> y.compute().tolist()
[6.0, 6.0, 6.0, 6.0]
"""

import functools
import itertools
import math
import os

import dask.array as da  # optional dependency: imported only in tenalg.distributed
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from ..errors import ExtentError
from . import threads
from .planner import PANELS, group_size, plan_chunks


def _combine_all(combine, parts):
    return functools.reduce(combine, parts)


def _summed(kernel, combine, n, split, *blocks):
    """``kernel`` on each successive ``n`` of ``blocks``, combined in place into the
    first's output.  After the first, each output is made and combined a panel at a time
    along one free label (``split``: its axis in the output and its axes in each
    operand; None: whole), so that the total and one panel are alive at once."""
    total = None
    for k in range(0, len(blocks), n):
        each = blocks[k : k + n]
        if total is None:
            part = np.asarray(kernel(*each))
            mine = part.flags.writeable and not any(np.may_share_memory(part, b)
                                                    for b in blocks)
            total = part if mine else part.copy()
            continue
        if split is None:
            combine(total, np.asarray(kernel(*each)), out=total)
            continue
        axis, axes = split
        step = -(-total.shape[axis] // PANELS)
        for lo in range(0, total.shape[axis], step):
            panel = slice(lo, lo + step)
            target = total[_at(total.ndim, (axis,), panel)]
            part = np.asarray(kernel(*[b[_at(b.ndim, ax, panel)]
                                       for b, ax in zip(each, axes, strict=True)]))
            combine(target, part, out=target)
            del part  # before the next panel's is made: one alive at a time
    return total


def _at(ndim, axes, panel):
    """The index taking ``panel`` of ``axes`` and all of the other axes."""
    return tuple(panel if d in axes else slice(None) for d in range(ndim))


def _split(labels, out_labels, chunks, arrays, extents):
    """The free label whose blocks :func:`_summed` combines in panels (the one of the
    largest chunks): its output axis and each operand's axes of it; None if no chunk of
    a free label is 2 long."""
    free = max(out_labels, key=lambda x: max(chunks[x]), default=None)
    if free is None or max(chunks[free]) < 2:
        return None
    axes = [tuple(d for d, (x, b) in enumerate(zip(labs, _broadcast(a, labs, extents),
                                                   strict=True)) if x == free and not b)
            for a, labs in zip(arrays, labels, strict=True)]
    return out_labels.index(free), axes


def label_extents(arrays, labels):
    """label -> extent (extent-1 axes broadcast against larger ones, as in einsum)."""
    extents = {}
    for a, labs in zip(arrays, labels, strict=True):
        for n, x in zip(a.shape, labs, strict=True):
            m = extents.get(x, 1 if n != 0 else 0)
            if m not in (1, n) and n != 1:
                raise ExtentError(x, m, n, "distributed")
            extents[x] = n if m == 1 else m
    return extents


def _given_chunks(arrays, labels, extents):
    """The operands' own chunks of each label where every full-extent axis agrees."""
    seen = {}
    for a, labs in zip(arrays, labels, strict=True):
        for chunks, x in zip(a.chunks, labs, strict=True):
            if sum(chunks) == extents[x]:
                seen.setdefault(x, set()).add(tuple(chunks))
    return {x: next(iter(c)) if len(c) == 1 else (max(max(t) for t in c),)
            for x, c in seen.items()}


def _broadcast(a, labels, extents):
    return [n == 1 and extents[x] != 1 for n, x in zip(a.shape, labels, strict=True)]


def plan(arrays, labels, out_labels, itemsize, memory_limit, split_every=4):
    """Chunks per label for this operation under ``memory_limit`` bytes per worker.

    The model of one task must fit half the limit: the other half is for the blocks a
    worker holds for its next task and for results not yet fetched.
    """
    extents = label_extents(arrays, labels)
    return plan_chunks(extents, [tuple(x) for x in labels], tuple(out_labels), itemsize,
                       memory_limit // 2, _given_chunks(arrays, labels, extents),
                       split_every)


def _rechunked(a, labs, chunks, extents):
    target = tuple((1,) if b else chunks[x]
                   for x, b in zip(labs, _broadcast(a, labs, extents), strict=True))
    return a if a.chunks == target else a.rechunk(target)


def blockwise(kernel, arrays, labels, out_labels, dtype, *, combine=np.add, memory_limit,
              split_every=4, name="tenalg-blockwise"):
    """A Dask array: ``kernel(*blocks)`` per block combination (its output block in
    ``out_labels`` order, the block's other labels reduced), combined with ``combine``
    in a tree over the labels absent from ``out_labels``.

    Operands with an empty axis are not split: the kernel runs once on empty stand-ins
    and its value (zeros, or the reduction's identity) fills the output.
    """
    dtype = np.dtype(dtype)
    extents = label_extents(arrays, labels)
    out_shape = tuple(extents[x] for x in out_labels)
    if 0 in extents.values():
        return _empty(kernel, arrays, labels, out_labels, extents, out_shape, dtype)
    itemsize = max([dtype.itemsize] + [a.dtype.itemsize for a in arrays])
    chunks = plan(arrays, labels, out_labels, itemsize, memory_limit, split_every)
    arrays = [_rechunked(a, labs, chunks, extents)
              for a, labs in zip(arrays, labels, strict=True)]
    summed = list(dict.fromkeys(x for labs in labels for x in labs if x not in out_labels))
    group = _group(chunks, labels, out_labels, summed, itemsize, memory_limit)
    token = tokenize(kernel, combine, [a.name for a in arrays], labels, out_labels, chunks,
                     group)
    out_name = f"{name}-{token}"
    fused = functools.partial(_summed, kernel, combine, len(arrays),
                              _split(labels, out_labels, chunks, arrays, extents))
    graph = {}
    ranges = [range(len(chunks[x])) for x in out_labels]
    for oidx in itertools.product(*ranges):
        at = dict(zip(out_labels, oidx, strict=True))
        combinations = []
        for sidx in itertools.product(*[range(len(chunks[x])) for x in summed]):
            at.update(zip(summed, sidx, strict=True))
            combinations.append([(a.name, *[0 if b else at[x] for x, b in
                                            zip(labs, _broadcast(a, labs, extents),
                                                strict=True)])
                                 for a, labs in zip(arrays, labels, strict=True)])
        tasks = [(threads.run, kernel, *each[0]) if len(each) == 1 else
                 (threads.run, fused, *itertools.chain(*each))
                 for each in (combinations[g : g + group]
                              for g in range(0, len(combinations), group))]
        if len(tasks) == 1:
            graph[(out_name, *oidx)] = tasks[0]
            continue
        keys = [(f"{out_name}-part", *oidx, g) for g in range(len(tasks))]
        graph.update(zip(keys, tasks, strict=True))
        graph.update(_tree(keys, combine, (out_name, *oidx), split_every))
    layer = HighLevelGraph.from_collections(out_name, graph, dependencies=arrays)
    return da.Array(layer, out_name, tuple(chunks[x] for x in out_labels), dtype=dtype,
                    meta=np.empty((0,) * len(out_labels), dtype))


def _group(chunks, labels, out_labels, summed, itemsize, memory_limit):
    """How many block combinations over the summed labels one task sums (in place): as
    many as half the memory limit holds, while every thread of the cluster keeps two
    tasks."""
    combinations = math.prod(len(chunks[x]) for x in summed)
    if combinations == 1:
        return 1
    sizes = {x: max(c) for x, c in chunks.items()}
    outputs = math.prod(len(chunks[x]) for x in out_labels)
    most = math.ceil(combinations / math.ceil(2 * _threads() / outputs))
    return group_size(sizes, [tuple(x) for x in labels], tuple(out_labels), itemsize,
                      memory_limit // 2, combinations, most)


def _threads():
    """The threads of the current client's workers; the machine's cores without one."""
    try:
        from distributed import get_client

        return sum(get_client().nthreads().values()) or 1
    except (ImportError, ValueError):
        return os.cpu_count() or 1


def _tree(keys, combine, final, split_every):
    """Tasks summing ``keys`` in a tree of fan-in ``split_every`` into ``final``."""
    graph, level = {}, 0
    fn = functools.partial(_combine_all, combine)
    while len(keys) > split_every:
        groups = [keys[i : i + split_every] for i in range(0, len(keys), split_every)]
        keys = []
        for i, group in enumerate(groups):
            key = (f"{final[0]}-tree{level}", *final[1:], i)
            graph[key] = (fn, group)
            keys.append(key)
        level += 1
    graph[final] = (fn, keys)
    return graph


def _empty(kernel, arrays, labels, out_labels, extents, out_shape, dtype):
    """The result where some label has extent 0: the kernel's value on stand-ins with
    every other label of extent 1."""
    mini = [np.zeros(tuple(min(n, 1) if extents[x] else 0 for n, x in zip(a.shape, labs,
                                                                            strict=True)),
                     a.dtype) for a, labs in zip(arrays, labels, strict=True)]
    value = np.asarray(kernel(*mini))
    fill = value.flat[0] if value.size else 0
    return da.full(out_shape, fill, dtype=dtype)

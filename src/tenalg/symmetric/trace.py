"""Traces of block tensors over one or several leg pairs at once.

A traced pair must be a leg and its dual with equal sectors; only blocks carrying the
same charge on both legs of every pair lie on the diagonal, and the output block they
feed is fixed by their other charges. Its blocks are summed by a dense reduction plan
over each block's diagonal (summed strides: no transpose copy, no identity tensor),
accumulating (beta = 1); or, where the diagonals are small, they are copied one after
the other along a single traced axis (:mod:`.gather`), and one reduction plan sums
them all at once, for all output blocks of one layout (shapes) stacked together. The
schedule (gathers, plans) is cached per structure.

>>> import numpy as np
>>> from tenalg.symmetric import U1, Leg, BlockTensor
>>> leg = Leg(U1(), [(0, 2), (1, 3)])
>>> t = BlockTensor.random((leg, leg, leg.conj()), flux=1, rng=0)
>>> np.allclose(trace(t, 1, 2).to_dense(), np.trace(t.to_dense(), axis1=1, axis2=2))
True
"""

import math

import numpy as np

from ..errors import OperationError
from ..plan_cache import cached_plans
from ..views import normalize_axes
from . import dense
from .gather import BATCH, Gather, worth_copying
from .sectors import block_shape
from .tensor import BlockTensor, check_keys, read_block


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return strides[::-1]


class _Schedule:
    """The work of one structure: gathered sums (batched by layout), then direct blocks."""

    def __init__(self, group, legs, flux, keys, pairs, dtype):
        check_keys(group, legs, flux, keys)
        self.kept = tuple(ax for ax in range(len(legs)) if all(ax not in p for p in pairs))
        self.legs = tuple(legs[ax] for ax in self.kept)
        modes = list(range(len(legs)))
        for i, j in pairs:
            modes[j] = i
        members = {}
        for n, key in enumerate(keys):
            if all(key[i] == key[j] for i, j in pairs):
                members.setdefault(tuple(key[ax] for ax in self.kept), []).append(n)
        by_layout = {}
        for out_key, ns in members.items():
            shape = block_shape(self.legs, out_key)
            diagonals = tuple(tuple(legs[i].dims[keys[n][i]] for i, _ in pairs) for n in ns)
            by_layout.setdefault((shape, diagonals), []).append((out_key, ns))
        self.gathered, self.direct = [], []
        for (shape, diagonals), outputs in by_layout.items():
            total = sum(math.prod(d) for d in diagonals) * math.prod(shape)
            if worth_copying(len(outputs) * total, len(outputs) * len(diagonals) - 1):
                self.gathered.append(self._gather(legs, keys, pairs, outputs, diagonals, shape,
                                                  dtype))
                continue
            for out_key, ns in outputs:
                shapes = [block_shape(legs, keys[n]) for n in ns]
                self.direct.append((out_key, shape, [(n, block, dense.reduction_plan(
                    block, dtype, tuple(modes), shape, dtype, self.kept, k > 0))
                    for k, (n, block) in enumerate(zip(ns, shapes, strict=True))]))

    def _gather(self, legs, keys, pairs, outputs, diagonals, shape, dtype):
        """The diagonals of each output's blocks along one axis (output blocks stacked
        when several), the plan summing that axis, and where each output block lies."""
        lead, batch = ((len(outputs),), (BATCH,)) if len(outputs) > 1 else ((), ())
        itemsize = np.dtype(dtype).itemsize
        cells = []
        for g, (_, ns) in enumerate(outputs):
            start = 0
            for n, diagonal in zip(ns, diagonals, strict=True):
                strides = _c_strides(block_shape(legs, keys[n]), itemsize)
                view = tuple(strides[i] + strides[j] for i, j in pairs) + tuple(
                    strides[ax] for ax in self.kept)
                size = math.prod(diagonal)
                window = (g,) * len(lead) + (slice(start, start + size),)
                cells.append((n, window, diagonal + shape, (block_shape(legs, keys[n]), view)))
                start += size
        gather = Gather(lead + (start,) + shape, dtype, cells)
        modes = tuple(range(len(shape) + 1))
        plan = dense.reduction_plan(gather.shape, dtype, batch + modes, lead + shape, dtype,
                                    batch + modes[1:], False)
        places = [(key, (g,) * len(lead) + (...,)) for g, (key, _) in enumerate(outputs)]
        return gather, plan, places

    def run(self, blocks, dtype):
        out = {}
        for gather, plan, places in self.gathered:
            sums = dense.execute_gathered(plan, gather(blocks))
            for key, index in places:
                out[key] = sums[index]  # a view, an array even of rank 0
        for key, shape, steps in self.direct:
            block = np.empty(shape, dtype)
            for n, block_in, plan in steps:
                dense.execute(plan, block, read_block(blocks[n], block_in, dtype))
            out[key] = block
        return out


@cached_plans(256)
def _schedule(group, legs, flux, keys, pairs, dtype):
    return _Schedule(group, legs, flux, keys, pairs, dtype)


def partial_trace(t, pairs):
    """Trace ``t`` over every leg pair in ``pairs`` (e.g. ``[(0, 2), (1, 3)]``) at once.

    Surviving legs keep their order; the flux is unchanged.
    """
    pairs = tuple(normalize_axes(pair, t.ndim) for pair in pairs)
    if any(len(pair) != 2 for pair in pairs):
        raise OperationError(f"trace pairs {pairs} must be pairs of axes")
    used = [ax for p in pairs for ax in p]
    if len(set(used)) != len(used):
        raise OperationError(f"trace pairs {pairs} repeat an axis")
    for i, j in pairs:
        t.legs[i].check_contracts_with(t.legs[j], f"tracing legs {i} and {j}")
    schedule = _schedule(t.group, t.legs, t.flux, tuple(t.blocks), pairs, t.dtype)
    blocks = schedule.run(tuple(t.blocks.values()), t.dtype)
    return BlockTensor._new(schedule.legs, t.flux, blocks, t.dtype, t.group)


def trace(t, axis1=0, axis2=1):
    """Trace over the legs ``axis1`` and ``axis2`` (dual to each other)."""
    return partial_trace(t, [(axis1, axis2)])

"""Traces of block tensors over one or several leg pairs at once.

A traced pair must be a leg and its dual with equal sectors; only blocks carrying the
same charge on both legs of every pair lie on the diagonal. Each such block goes to a
dense reduction plan over its diagonal view (summed strides: no transpose copy, no
identity tensor), accumulating into the output block it maps to (beta = 1); small
blocks of equal shapes have their diagonals (views) stacked into one batched reduction
(:mod:`.schedule`).

>>> import numpy as np
>>> from tenalg.symmetric import U1, Leg, BlockTensor
>>> leg = Leg(U1(), [(0, 2), (1, 3)])
>>> t = BlockTensor.random((leg, leg, leg.conj()), flux=1, rng=0)
>>> np.allclose(trace(t, 1, 2).to_dense(), np.trace(t.to_dense(), axis1=1, axis2=2))
True
"""

import functools

import numpy as np

from ..errors import OperationError
from ..views import diagonals
from . import dense
from .schedule import BATCH, Schedule
from .sectors import block_shape
from .tensor import BlockTensor


def _axis(ax, ndim):
    if not -ndim <= ax < ndim:
        raise OperationError(f"trace axis {ax} is out of range for {ndim} legs")
    return ax % ndim


@functools.lru_cache(maxsize=256)
def _structure(legs, keys, pairs):
    """Output legs, dense modes, kept modes, and the :class:`Schedule` of the blocks."""
    kept = tuple(ax for ax in range(len(legs)) if all(ax not in p for p in pairs))
    out_legs = tuple(legs[ax] for ax in kept)
    modes = list(range(len(legs)))
    for i, j in pairs:
        modes[j] = i
    groups = {}
    for n, key in enumerate(keys):
        if all(key[i] == key[j] for i, j in pairs):
            groups.setdefault(tuple(key[ax] for ax in kept), []).append(n)
    entries = [(k, block_shape(out_legs, k), ns) for k, ns in groups.items()]
    schedule = Schedule(entries, lambda n: (block_shape(legs, keys[n]),))
    return out_legs, tuple(modes), kept, schedule


def partial_trace(t, pairs):
    """Trace ``t`` over every leg pair in ``pairs`` (e.g. ``[(0, 2), (1, 3)]``) at once.

    Surviving legs keep their order; the flux is unchanged.
    """
    pairs = tuple((_axis(i, t.ndim), _axis(j, t.ndim)) for i, j in pairs)
    used = [ax for p in pairs for ax in p]
    if len(set(used)) != len(used):
        raise OperationError(f"trace pairs {pairs} repeat an axis")
    for i, j in pairs:
        t.legs[i].check_contracts_with(t.legs[j], f"tracing legs {i} and {j}")
    blocks_in = tuple(t.blocks.values())
    out_legs, modes, kept, schedule = _structure(t.legs, tuple(t.blocks), pairs)

    def run_one(out, n, beta):
        return dense.trace_into(out, blocks_in[n], modes, kept, beta)

    def run_batch(members, shape):  # stacks only the diagonals: survivors, one axis a pair
        views = [diagonals(blocks_in[n], pairs) for n in members]
        stack = np.empty((len(views),) + views[0].shape, t.dtype)  # C order, as plans expect
        for k, view in enumerate(views):
            stack[k] = view
        out = np.empty((len(members),) + shape, t.dtype)
        return dense.trace_into(out, stack, (BATCH,) + kept + tuple(i for i, _ in pairs),
                                (BATCH,) + kept, 0)

    blocks = schedule.execute(run_one, run_batch, t.dtype)
    return BlockTensor._new(out_legs, t.flux, blocks, t.dtype, t.group)


def trace(t, axis1=0, axis2=1):
    """Trace over the legs ``axis1`` and ``axis2`` (dual to each other)."""
    return partial_trace(t, [(axis1, axis2)])

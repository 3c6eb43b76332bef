"""Contraction of two block tensors: sector logic first, then dense plans on blocks.

Blocks are matched by a hash join on the contracted charges (never an all-pairs scan);
each output block is the sum over its matching block pairs, one dense contraction plan
per pair accumulating into the block (beta = 1), small pairs of equal shapes stacked into
one batched plan (:mod:`.schedule`). The matching and the schedule are cached per
structure (legs, modes and block keys of both inputs).

>>> import numpy as np
>>> from tenalg.symmetric import U1, Leg, BlockTensor
>>> leg = Leg(U1(), [(0, 2), (1, 3)])
>>> a = BlockTensor.random((leg, leg.conj()), rng=0)
>>> c = contract(a, "ij", a, "jk", "ik")
>>> np.allclose(c.to_dense(), a.to_dense() @ a.to_dense())
True
"""

import functools

import numpy as np

from ..dtypes import result_type
from ..errors import OperationError
from . import dense
from .schedule import BATCH, Schedule
from .sectors import block_shape
from .tensor import BlockTensor


def _modes(modes, ndim, what):
    modes = tuple(modes)
    if len(modes) != ndim:
        raise OperationError(f"{what}: {len(modes)} modes for a tensor with {ndim} legs")
    if len(set(modes)) != len(modes):
        raise OperationError(f"{what}: modes {modes} repeat a label (use trace for that)")
    return modes


class _Spec:
    """Which legs contract, which survive, and the output legs; checked once per legs."""

    def __init__(self, legs_a, modes_a, legs_b, modes_b, modes_out):
        shared = [m for m in modes_a if m in modes_b]
        free = [m for m in modes_a if m not in modes_b] + [m for m in modes_b
                                                          if m not in modes_a]
        if len(modes_out) != len(free) or set(modes_out) != set(free):
            raise OperationError(
                f"output modes {modes_out} must list each uncontracted mode {tuple(free)} "
                "once (no batch or summed-away modes in symmetric contractions)"
            )
        for m in shared:
            i, j = modes_a.index(m), modes_b.index(m)
            legs_a[i].check_contracts_with(legs_b[j], f"contracting mode {m!r}")
        self.shared_a = tuple(modes_a.index(m) for m in shared)
        self.shared_b = tuple(modes_b.index(m) for m in shared)
        self.free_a = tuple(i for i, m in enumerate(modes_a) if m not in modes_b)
        self.free_b = tuple(j for j, m in enumerate(modes_b) if m not in modes_a)
        free_modes = [modes_a[i] for i in self.free_a] + [modes_b[j] for j in self.free_b]
        self.perm = tuple(free_modes.index(m) for m in modes_out)
        free_legs = [legs_a[i] for i in self.free_a] + [legs_b[j] for j in self.free_b]
        self.legs = tuple(free_legs[p] for p in self.perm)
        self.legs_a, self.legs_b = legs_a, legs_b
        # dense modes: integers, so that any hashable user labels work
        label = {m: k for k, m in enumerate(dict.fromkeys(modes_a + modes_b))}
        self.modes_a = tuple(label[m] for m in modes_a)
        self.modes_b = tuple(label[m] for m in modes_b)
        self.modes_out = tuple(label[m] for m in modes_out)


@functools.lru_cache(maxsize=256)
def _spec(legs_a, modes_a, legs_b, modes_b, modes_out):
    return _Spec(legs_a, modes_a, legs_b, modes_b, modes_out)


@functools.lru_cache(maxsize=256)
def _matching(spec, keys_a, keys_b):
    """The :class:`Schedule` of the block pairs ``(index_a, index_b)``, by a hash join."""
    by_charge = {}
    for ib, key in enumerate(keys_b):
        by_charge.setdefault(tuple(key[j] for j in spec.shared_b), []).append(ib)
    pairs = {}
    for ia, key_a in enumerate(keys_a):
        free_a = tuple(key_a[i] for i in spec.free_a)
        for ib in by_charge.get(tuple(key_a[i] for i in spec.shared_a), ()):
            free = free_a + tuple(keys_b[ib][j] for j in spec.free_b)
            out_key = tuple(free[p] for p in spec.perm)
            pairs.setdefault(out_key, []).append((ia, ib))
    entries = [(key, block_shape(spec.legs, key), pair_list) for key, pair_list in pairs.items()]
    return Schedule(entries, lambda pair: (block_shape(spec.legs_a, keys_a[pair[0]]),
                                           block_shape(spec.legs_b, keys_b[pair[1]])))


def contract(a, modes_a, b, modes_b, modes_out):
    """Contract the legs ``a`` and ``b`` share a mode label on; the rest in ``modes_out``.

    Contracted legs must be dual to each other with equal sectors (always checked).
    The result's flux is the fusion of the two fluxes.
    """
    if not isinstance(a, BlockTensor) or not isinstance(b, BlockTensor):
        raise OperationError("symmetric contract needs two BlockTensors")
    if a.group != b.group:
        raise OperationError(f"contracting tensors of groups {a.group} and {b.group}")
    modes_a = _modes(modes_a, a.ndim, "modes_a")
    modes_b = _modes(modes_b, b.ndim, "modes_b")
    spec = _spec(a.legs, modes_a, b.legs, modes_b, tuple(modes_out))
    keys_a, blocks_a = tuple(a.blocks), tuple(a.blocks.values())
    keys_b, blocks_b = tuple(b.blocks), tuple(b.blocks.values())
    dtype = result_type([a.dtype, b.dtype])

    def run_one(out, pair, beta):
        return dense.contract_into(out, blocks_a[pair[0]], spec.modes_a, blocks_b[pair[1]],
                                   spec.modes_b, spec.modes_out, beta)

    def run_batch(pairs, shape):
        stack_a = np.stack([blocks_a[ia] for ia, _ in pairs])
        stack_b = np.stack([blocks_b[ib] for _, ib in pairs])
        out = np.empty((len(pairs),) + shape, dtype)
        return dense.contract_into(out, stack_a, (BATCH,) + spec.modes_a, stack_b,
                                   (BATCH,) + spec.modes_b, (BATCH,) + spec.modes_out, 0)

    blocks = _matching(spec, keys_a, keys_b).execute(run_one, run_batch, dtype)
    return BlockTensor._new(spec.legs, a.group.fuse(a.flux, b.flux), blocks, dtype, a.group)

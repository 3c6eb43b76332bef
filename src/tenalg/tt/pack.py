"""Packs of trains over a (var, block) grid, as on a simulation mesh, with batched kernels.

Pack operations group the trains by core shapes (dims, ranks, dtype) and run one
batched kernel per group (of at most CHUNK trains) on stacked (g, l, n, r) arrays, not a
Python loop per train.
Pack rounding is eps-adaptive per train: each train gets its own ranks and the ragged
results are repacked into the trains.

A pack owns nothing: it points at trains, and operations reshape those trains in place.
:meth:`TrainPack.device_pack` stacks the cores of every group into a
:class:`DevicePack`, which records the version of each train it was built from; using
it after any of them changed (every in-place operation bumps the version) raises
:class:`StalePackError`.

>>> from tenalg import tt
>>> p = tt.TrainPack([[tt.random((4, 4, 4), 2, rng=s) for s in range(3)]])
>>> q = tt.add(p, p)
>>> infos = q.round_(1e-10)
>>> q[0, 1].ranks, q.shape
((1, 2, 2, 1), (1, 3))
"""

import functools
import gc
import itertools
from collections.abc import Iterable

import numpy as np

from ..errors import OperationError
from ..linalg.workspace import FRESH
from .core import TensorCore
from .errors import StalePackError
from .linalg import batched
from .linalg.dense import common_dtype, python_scalar
from .linalg.workers import map_chunks
from .rounding import infos, resolve_options, run
from .train import (
    LazySum,
    TensorTrain,
    kron_product,
    require_closed,
    require_dot_pair,
    require_same_dims,
    scaled,
)

# Trains per batched kernel call: small enough that a group's stacked cores stay in cache
# (2x faster than one call over 2048 trains of d=6, n=16, rank 16), large enough that the
# per-call overhead is shared.
CHUNK = 128


def _gc_paused(operation):
    """``operation`` with Python's cyclic garbage collector paused while it runs.

    A pack operation makes tens of thousands of objects (a core object per core of every
    train, the trains' tuples) that all stay alive. Their number triggers collections,
    and a full collection walks every object of the process: with the 380 000 of the
    4096-train benchmark, paused collections took the median of add + round from 650 to
    580 ms and its slowest calls from 820 to 640 ms. The collector resumes afterwards
    (unless it was off before), and the next allocations trigger it as before.

    >>> _gc_paused(gc.isenabled)(), gc.isenabled()
    (False, True)
    """

    @functools.wraps(operation)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return operation(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


def _signature(t):
    """Trains of equal signatures are stacked together: equal dtypes and core shapes (sums
    not yet built: equal shapes of their summands' cores)."""
    parts = t.summands if isinstance(t, LazySum) else None
    cores = [c for part in parts for c in part] if parts else t.cores
    return t.dtype, parts is not None, tuple([c._shape for c in cores])  # no property: 2x


class DevicePack:
    """Stacked cores of a pack's trains, one group per core-shape signature.

    ``groups`` is a list of (positions, cores): the (var, block) positions of the group's
    trains and d stacked arrays (g, l, n, r). ``versions`` maps positions to the train
    versions the pack was built from.
    """

    def __init__(self, pack, groups):
        for positions in groups:
            shapes = [(pack[pos].dtype, pack[pos].dims, pack[pos].ranks) for pos in positions]
            odd = next((k for k, x in enumerate(shapes) if x != shapes[0]), None)
            if odd is not None:
                raise OperationError(
                    f"device_pack: the trains of a group must have equal core shapes and "
                    f"dtypes; the train at {positions[0]} has dims {shapes[0][1]}, ranks "
                    f"{shapes[0][2]}, {shapes[0][0]}, the one at {positions[odd]} dims "
                    f"{shapes[odd][1]}, ranks {shapes[odd][2]}, {shapes[odd][0]}")
        groups = [(tuple(positions), _stacked([pack[pos] for pos in positions]))
                  for positions in groups]
        self._trains = {pos: pack[pos] for positions, _ in groups for pos in positions}
        self.versions = {pos: t.version for pos, t in self._trains.items()}
        for _, cores in groups:
            for c in cores:
                c.flags.writeable = False
        self._groups = groups

    def check(self):
        """Raise StalePackError if a train changed since this device pack was built."""
        stale = [pos for pos, t in self._trains.items() if t.version != self.versions[pos]]
        if stale:
            raise StalePackError(
                f"device pack is stale: the trains at {stale[:5]}"
                f"{' and more' if len(stale) > 5 else ''} changed after it was built; "
                "build a new one with pack.device_pack()"
            )

    @property
    def groups(self):
        """[(positions, stacked cores)] (checked for staleness)."""
        self.check()
        return self._groups

    @property
    def cores(self):
        """The stacked core arrays of each group (checked for staleness)."""
        return [cores for _, cores in self.groups]


class TrainPack:
    """A (var, block) grid of trains: ``grid[var][block]`` (a flat list is one variable).

    >>> from tenalg import tt
    >>> tt.TrainPack([tt.random((2, 2), 1)] * 3).shape
    (1, 3)
    """

    def __init__(self, grid):
        grid = list(grid)
        if grid and isinstance(grid[0], TensorTrain):
            grid = [grid]
        for row in grid:
            if not isinstance(row, Iterable):  # TrainPack([1, 2]): a row of no trains
                raise OperationError(f"a TrainPack holds TensorTrains, got {type(row).__name__}")
        rows = [list(row) for row in grid]
        if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
            raise OperationError("a TrainPack needs a non-empty rectangular grid[var][block]")
        for row in rows:
            for t in row:
                if not isinstance(t, TensorTrain):
                    raise OperationError(f"a TrainPack holds TensorTrains, got {type(t).__name__}")
        self._grid = rows

    grid = property(lambda self: self._grid, doc="The trains, as grid[var][block].")
    nvars = property(lambda self: len(self._grid), doc="Number of variables.")
    nblocks = property(lambda self: len(self._grid[0]), doc="Number of blocks.")
    shape = property(lambda self: (self.nvars, self.nblocks), doc="(nvars, nblocks).")

    def __getitem__(self, index):
        var, block = index
        return self._grid[var][block]

    def positions(self):
        """Every (var, block), var-major."""
        return [(v, b) for v in range(self.nvars) for b in range(self.nblocks)]

    def _trains(self):
        """Every train, var-major (in the order of :meth:`positions`)."""
        return itertools.chain.from_iterable(self._grid)

    def __repr__(self):
        return f"TrainPack(nvars={self.nvars}, nblocks={self.nblocks})"

    def copy(self):
        """A pack of deep copies of the trains."""
        return TrainPack([[t.copy() for t in row] for row in self._grid])

    def _groups(self, other=None):
        """Positions grouped by core shapes (of both packs), in chunks of at most CHUNK."""
        groups = {}
        positions = self.positions()
        others = other._trains() if other is not None else [None] * len(positions)
        for pos, t, o in zip(positions, self._trains(), others, strict=True):
            groups.setdefault((_signature(t), o is not None and _signature(o)), []).append(pos)
        return [g[i : i + CHUNK] for g in groups.values() for i in range(0, len(g), CHUNK)]

    def device_pack(self, groups=None):
        """Stacked cores of every group of equal core shapes, with the trains' versions."""
        return DevicePack(self, self._groups() if groups is None else groups)

    def _check_pair(self, other, what):
        """Raise OperationError unless ``what`` (add, add_, hadamard or dot) is defined
        for each pair of trains."""
        if not isinstance(other, TrainPack) or other.shape != self.shape:
            raise OperationError(f"{what} needs two TrainPacks of the same shape")
        for x, y in zip(self._trains(), other._trains(), strict=True):
            if what == "dot":
                require_dot_pair(x, y)
            else:
                require_closed(what, x, y)
                require_same_dims(what, x, y)

    def _check_unshared(self, other):
        """Raise OperationError where :meth:`add_` would write a train it reads elsewhere:
        one train at two positions of this pack (its two sums would both be written to
        it), or ``other``'s train at a position of this pack other than its own (read
        after it was replaced, or emptied after it was written)."""
        mine = {}
        for pos in self.positions():
            first = mine.setdefault(id(self[pos]), pos)
            if first != pos:
                raise OperationError(f"add_: the train at {pos} is also at {first} of the "
                                     "pack added into (add the pack of its copies)")
        for pos in other.positions():
            at = mine.get(id(other[pos]), pos)
            if at != pos:
                raise OperationError(f"add_: the train at {pos} of the pack added is the one "
                                     f"at {at} of the pack added into")

    @_gc_paused
    def add(self, other):
        """A new pack of the trainwise sums (:class:`~tenalg.tt.train.LazySum`: the
        block-diagonal cores are built only when read; :meth:`round_` works on the
        summands' cores instead)."""
        self._check_pair(other, "add")
        return TrainPack([[LazySum(x, y) for x, y in zip(r, s, strict=True)]
                          for r, s in zip(self._grid, other._grid, strict=True)])

    def hadamard(self, other):
        """A new pack of the trainwise elementwise products (ranks multiply)."""
        self._check_pair(other, "hadamard")
        return TrainPack([[kron_product(x, y) for x, y in zip(r, s, strict=True)]
                          for r, s in zip(self._grid, other._grid, strict=True)])

    def scaled(self, alpha):
        """A new pack of alpha times each train."""
        return TrainPack([[scaled(t, alpha) for t in row] for row in self._grid])

    # the trains' operators, trainwise: p + q, p - q, p * q (Hadamard), 2.0 * p, p / 3, -p
    def __add__(self, other):
        return self.add(other) if isinstance(other, TrainPack) else NotImplemented

    def __sub__(self, other):
        return self.add(-other) if isinstance(other, TrainPack) else NotImplemented

    def __mul__(self, other):
        if isinstance(other, TrainPack):
            return self.hadamard(other)
        return NotImplemented if isinstance(other, TensorTrain) else self.scaled(other)

    def __rmul__(self, alpha):
        return NotImplemented if isinstance(alpha, TensorTrain) else self.scaled(alpha)

    def __truediv__(self, alpha):
        if isinstance(alpha, TrainPack | TensorTrain):
            return NotImplemented
        return self.scaled(1 / python_scalar(alpha))

    def __neg__(self):
        return self.scaled(-1)

    def map(self, fn):
        """``fn(train)`` for every train, as an (nvars, nblocks) array of its results."""
        return np.array([[fn(t) for t in row] for row in self._grid])

    @_gc_paused
    def add_(self, other):
        """Trainwise a += b in place; every train of ``other`` is emptied (unless it is
        the train of ``self`` at the same position: ``tt.add_(p, p)`` doubles p)."""
        self._check_pair(other, "add_")
        self._check_unshared(other)
        groups = self._groups(other)

        def chunk(positions, work):
            a = batched.stack([self[pos] for pos in positions])
            b = batched.stack([other[pos] for pos in positions])
            dtype = common_dtype([a[0].dtype, b[0].dtype])
            total = batched.block_sum([x.astype(dtype, copy=False) for x in a], b)
            return [[TensorCore._wrap(c[i], self[pos].storage) for c in total]
                    for i, pos in enumerate(positions)]

        for positions, cores in zip(groups, map_chunks(chunk, groups), strict=True):
            for pos, c in zip(positions, cores, strict=True):
                other[pos].clear()
                self[pos]._replace(c)

    def dot(self, other):
        """Trainwise <a, b> (a conjugated) as an (nvars, nblocks) array."""
        self._check_pair(other, "dot")
        groups = self._groups(other)

        def chunk(positions, work):
            return batched.dot(batched.stack([self[pos] for pos in positions]),
                               batched.stack([other[pos] for pos in positions]))

        return self._gather(groups, map_chunks(chunk, groups))

    def norm(self):
        """Trainwise Frobenius norms as an (nvars, nblocks) array."""
        for t in self._trains():
            t._need_cores("norm")
        groups = self._groups()

        def chunk(positions, work):
            return batched.norm(_stacked([self[pos] for pos in positions]))

        return self._gather(groups, map_chunks(chunk, groups))

    def _gather(self, groups, results):
        """The per-group ``results`` as an (nvars, nblocks) array."""
        dtype = np.result_type(*results)
        out = np.zeros(self.shape, dtype=dtype)
        for positions, values in zip(groups, results, strict=True):
            for pos, x in zip(positions, values, strict=True):
                out[pos] = x
        return out

    @_gc_paused
    def round_(self, eps=0.0, max_rank=None, method="svd", *, rmax=None, rng=None):
        """Round every train in place to its own eps-adaptive ranks (batched per group).

        Returns grid[var][block] of TruncationInfo.
        """
        require_closed("round_", *self._trains())
        groups = self._groups()
        options = [resolve_options(eps, max_rank, rmax, method, self[g[0]].dtype)
                   for g in groups]
        # one generator a chunk, drawn here: the sketches do not depend on the threads
        rngs = np.random.default_rng(rng).spawn(len(groups))

        def chunk(job, work):
            """Round one group; its trains' new cores, not yet swapped in, and infos."""
            positions, (eps_, max_rank_, used), rng_ = job
            trains = [self[pos] for pos in positions]
            summands = _summands(trains, work)
            res = run(used, summands, [1] * len(summands), eps_, max_rank_, rng_, work)
            cores = [[TensorCore._wrap(a, t.storage) for a in arrays]
                     for t, arrays in zip(trains, batched.unstack(res.cores, res.ranks),
                                          strict=True)]
            after = [tuple(r) for r in res.ranks.tolist()]
            return cores, infos(res, [trains[0].ranks] * len(trains), after, used)

        # every group is rounded before any train changes: an error leaves all as they were
        results = map_chunks(chunk, list(zip(groups, options, rngs, strict=True)))
        out = [[None] * self.nblocks for _ in range(self.nvars)]
        for positions, (cores, info) in zip(groups, results, strict=True):
            for (v, b), c, i in zip(positions, cores, info, strict=True):
                self[v, b]._replace(c)
                out[v][b] = i
        return out


def _summands(trains, work):
    """Stacks to round for a group of ``trains``: the cores of every summand of sums not
    yet built (in ``work``'s buffers; their shapes must agree), else the trains' own cores."""
    parts = [t.summands if isinstance(t, LazySum) else None for t in trains]
    if any(p is None for p in parts) or len({_signature(t) for t in trains}) > 1:
        return [batched.stack(trains)]
    return [[work.stack((j, k), [p[j][k].array() for p in parts], trains[0].dtype)
             for k in range(len(parts[0][j]))] for j in range(len(parts[0]))]


def _stacked(trains):
    """The stacked cores of ``trains`` (sums not yet built: formed from the summands'
    stacks in one batched block sum; the trains stay unbuilt)."""
    return functools.reduce(batched.block_sum, _summands(trains, FRESH))

"""A pack of trains whose (var, block) grid is split over Dask workers by block tiles.

Each worker holds one tile of blocks (slabs of rows of the block mesh, as Parthenon
gives mesh blocks to ranks) as a ``tenalg.tt.TrainPack`` behind a future pinned to it;
every operation is one task per tile on the tile's worker, so only scalars and requested
results come back, and a stencil step moves only the trains on the edges of each tile.

Tasks are pure: each returns new trains (sharing the cores it does not change) and never
touches its inputs, so Dask can recompute a lost tile from the inputs it still has. The
in-place operations (``add_``, ``round_``, ``stencil_``) swap in the new tiles only once
every tile's task has finished: an error (a worker lost for good, a bad argument) raises
:class:`PackOperationError` and leaves the pack as it was.

>>> from distributed import Client
>>> from tenalg import tt
>>> with Client(processes=False, n_workers=2, threads_per_worker=1,
...             dashboard_address=None) as client:
...     trains = [tt.random((4, 4, 4), 2, rng=b) for b in range(6)]
...     dp = DistributedPack.from_pack(client, tt.TrainPack(trains))
...     s = dp.add(dp)
...     infos = s.round_(1e-10)
...     round(float(s.norm()[0, 0] / dp.norm()[0, 0]), 12), s.tiles
(2.0, [[0, 1, 2], [3, 4, 5]])
"""

import copy
import pickle

import numpy as np

from .. import tt
from ..errors import OperationError
from . import (
    cluster,
    measure,  # registers the byte sizes of trains on workers
    stencil,
    threads,
)
from .futures import first_failure, task_key

_ = measure


class PackOperationError(OperationError):
    """A distributed pack operation failed; the pack was left as it was."""


def _fresh_pack(pack):
    """A new pack of new train objects sharing ``pack``'s cores (sums not yet built stay
    unbuilt), so that an in-place operation on it leaves ``pack`` as it was."""
    return tt.TrainPack([[copy.copy(t) for t in row] for row in pack.grid])


def _part(grid):
    return tt.TrainPack(grid)


def _generate(make, nvars, blocks):
    return tt.TrainPack([[make(v, b) for b in blocks] for v in range(nvars)])


def _add(p, q):
    return tt.add(p, q)


def _add_built(p, q):
    s = _fresh_pack(p)
    tt.add_(s, _fresh_pack(q))
    return s


def _emptied(q):
    return tt.TrainPack([[tt.TensorTrain([]) for _ in row] for row in q.grid])


def _round(p, eps, max_rank, method):
    s = _fresh_pack(p)
    return s, s.round_(eps, max_rank, method)


def _dot(p, q):
    return tt.dot(p, q)


def _norm(p):
    return tt.norm(p)


def _columns(p, indices):
    return stencil.columns(p, indices)


def _stencil(p, tile, mesh, coefficient, eps, max_rank, method, part, ghost_blocks,
             *ghosts):
    """The stencil step of the blocks ``part`` (positions in ``tile``) of a tile."""
    lookup = stencil.tile_lookup(p, tile, list(zip(ghost_blocks, ghosts, strict=True)))
    return stencil.step(stencil.columns(p, part), mesh, coefficient, eps, max_rank, method,
                        blocks=[tile[i] for i in part], lookup=lookup)


def _joined(size, parts, *results):
    """One tile's (pack, infos) from the results of its ``parts`` (positions in the tile)."""
    grids, infos = None, None
    for part, (pack, info) in zip(parts, results, strict=True):
        if grids is None:
            grids = [[None] * size for _ in range(pack.nvars)]
            infos = [[None] * size for _ in range(pack.nvars)]
        for v in range(pack.nvars):
            for j, i in enumerate(part):
                grids[v][i], infos[v][i] = pack[v, j], info[v][j]
    return tt.TrainPack(grids), infos


def _check_rounding(eps, max_rank, method):
    """The rounding options checked here, before any task (a worker would raise the same
    error, logged by Dask on every worker)."""
    tt.rounding.resolve_options(eps, max_rank, None, method, np.float64)


def _first(x):
    return x[0]


def _pickled_infos(x):
    """A tile's infos as one pickle: one frame for Dask to send, not one per info."""
    return pickle.dumps(x[1], protocol=pickle.HIGHEST_PROTOCOL)


class DistributedPack:
    """A (var, block) grid of trains split over the workers of ``client`` by tiles of
    blocks; build it with :meth:`from_pack` or :meth:`generate`."""

    def __init__(self, client, parts, tiles, workers, nvars, mesh):
        self._client, self.parts, self.tiles = client, list(parts), [list(t) for t in tiles]
        self.workers, self.nvars, self.mesh = list(workers), nvars, tuple(mesh)
        self.last_tasks = len(self.parts)

    client = property(lambda self: cluster.running(self._client),
                      doc="The client, checked to be running (else OperationError).")

    nblocks = property(lambda self: sum(len(t) for t in self.tiles), doc="Blocks in all.")
    shape = property(lambda self: (self.nvars, self.nblocks), doc="(nvars, nblocks).")

    def __repr__(self):
        return (f"DistributedPack(nvars={self.nvars}, nblocks={self.nblocks}, "
                f"tiles={[len(t) for t in self.tiles]})")

    @staticmethod
    def _layout(client, nblocks, mesh, workers):
        mesh = (nblocks,) if mesh is None else tuple(mesh)
        if int(np.prod(mesh)) != nblocks:
            raise OperationError(f"a mesh {mesh} does not hold {nblocks} blocks")
        workers = cluster.placed(client, workers)
        tiles = stencil.split_rows(mesh, len(workers))
        return mesh, tiles, workers[: len(tiles)]

    @classmethod
    def from_pack(cls, client, pack, mesh=None, workers=None):
        """Split a single-process ``pack`` over ``workers`` (default: all) by tiles of
        ``mesh`` (the blocks' grid, C order; default one row of blocks). The trains
        travel in the tasks' arguments, so the scheduler can rebuild a lost tile."""
        mesh, tiles, workers = cls._layout(client, pack.nblocks, mesh, workers)
        parts = [client.submit(_part, [[pack[v, b] for b in tile] for v in range(pack.nvars)],
                               key=task_key(_part), workers=[w],
                               allow_other_workers=True)
                 for tile, w in zip(tiles, workers, strict=True)]
        return cls(client, parts, tiles, workers, pack.nvars, mesh)

    @classmethod
    def generate(cls, client, make, nvars, nblocks, mesh=None, workers=None):
        """Each worker builds its own trains ``make(var, block)`` (nothing is sent but
        the function)."""
        mesh, tiles, workers = cls._layout(client, nblocks, mesh, workers)
        parts = [client.submit(threads.run, _generate, make, nvars, tile, workers=[w],
                               allow_other_workers=True, key=task_key(_generate))
                 for tile, w in zip(tiles, workers, strict=True)]
        return cls(client, parts, tiles, workers, nvars, mesh)

    # -- running tasks ------------------------------------------------------------------
    def _homes(self):
        """Each tile's worker; a tile whose worker is gone moves to a live one."""
        alive = sorted(cluster.workers(self.client))
        return [w if w in alive or not alive else alive[i % len(alive)]
                for i, w in enumerate(self.workers)]

    def _submit(self, fn, *per_tile, extra=()):
        """One task per tile: fn(tile arguments..., *extra) on the tile's worker."""
        homes = self._homes()
        self.workers = homes
        futures = [self.client.submit(threads.run, fn, *args, *extra, workers=[w],
                                      allow_other_workers=True, key=task_key(fn))
                   for w, *args in zip(homes, *per_tile, strict=True)]
        self.last_tasks = len(futures)
        return futures

    def _finished(self, futures, what):
        """Wait for every future; raise PackOperationError (naming the tile) if any failed."""
        failure = first_failure(futures)
        if failure is not None:
            i, error = failure[0] % len(self.tiles), failure[1]
            for g in futures:
                g.cancel()
            raise PackOperationError(
                f"{what} failed on tile {i} (blocks {self.tiles[i][0]}.."
                f"{self.tiles[i][-1]}): {error!r}; the pack was left as it was") from error
        return futures

    def _like(self, parts):
        return DistributedPack(self.client, parts, self.tiles, self.workers, self.nvars,
                               self.mesh)

    def _check_pair(self, other, what):
        if not isinstance(other, DistributedPack) or other.shape != self.shape or \
                other.tiles != self.tiles:
            raise OperationError(f"{what} needs two DistributedPacks of the same tiles")

    def _gather_grid(self, futures):
        """Per-tile (nvars, tile) arrays as one (nvars, nblocks) array."""
        values = self.client.gather(futures)
        out = np.zeros(self.shape, dtype=np.result_type(*values))
        for tile, v in zip(self.tiles, values, strict=True):
            out[:, tile] = v
        return out

    # -- operations ---------------------------------------------------------------------
    def add(self, other):
        """A new distributed pack of the trainwise sums (unbuilt, as ``tt.add``)."""
        self._check_pair(other, "add")
        return self._like(self._submit(_add, self.parts, other.parts))

    def add_(self, other):
        """self += other trainwise, in place; every train of ``other`` is emptied."""
        self._check_pair(other, "add_")
        new = self._finished(self._submit(_add_built, self.parts, other.parts), "add_")
        if other is not self:
            other.parts = other._submit(_emptied, other.parts)
        self.parts = new
        self.last_tasks = 2 * len(new)

    def round_(self, eps=0.0, max_rank=None, method="svd"):
        """Round every train in place to its own ranks; grid[var][block] of infos."""
        _check_rounding(eps, max_rank, method)
        both = self._submit(_round, self.parts, extra=(eps, max_rank, method))
        return self._commit_with_infos(both, "round_")

    def _commit_with_infos(self, both, what):
        """Split each tile's (pack, infos) result on its worker, wait for all (submitted
        together: one round trip), swap in the packs and return the infos' grid."""
        homes = self.workers
        parts = [self.client.submit(_first, f, workers=[w], allow_other_workers=True)
                 for f, w in zip(both, homes, strict=True)]
        infos = [self.client.submit(_pickled_infos, f, workers=[w], allow_other_workers=True)
                 for f, w in zip(both, homes, strict=True)]
        self._finished(both + parts + infos, what)
        out = [[None] * self.nblocks for _ in range(self.nvars)]
        for tile, blob in zip(self.tiles, self.client.gather(infos), strict=True):
            grid = pickle.loads(blob)
            for v in range(self.nvars):
                for i, b in enumerate(tile):
                    out[v][b] = grid[v][i]
        self.parts = parts
        self.last_tasks = 3 * len(parts)
        return out

    def dot(self, other):
        """Trainwise <a, b> as an (nvars, nblocks) array (only these scalars come back)."""
        self._check_pair(other, "dot")
        return self._gather_grid(self._finished(self._submit(_dot, self.parts, other.parts),
                                                "dot"))

    def norm(self):
        """Trainwise Frobenius norms as an (nvars, nblocks) array."""
        return self._gather_grid(self._finished(self._submit(_norm, self.parts), "norm"))

    def gather(self):
        """The whole pack as a single-process ``tt.TrainPack`` (every train comes back)."""
        grid = [[None] * self.nblocks for _ in range(self.nvars)]
        for tile, part in zip(self.tiles, self.client.gather(self.parts), strict=True):
            for v in range(self.nvars):
                for i, b in enumerate(tile):
                    grid[v][b] = part[v, i]
        return tt.TrainPack(grid)

    def stencil_(self, coefficient, eps, max_rank=None, method="svd"):
        """One stencil step in place (see :mod:`tenalg.distributed.stencil`): each tile
        receives only the trains of the neighbouring tiles' edge blocks. Returns
        grid[var][block] of TruncationInfo."""
        _check_rounding(eps, max_rank, method)
        owner = {b: i for i, tile in enumerate(self.tiles) for b in tile}
        homes = self._homes()
        ghost_blocks, ghost_parts, tasks = [], [], 0
        for tile in self.tiles:
            need = stencil.ghosts(tile, self.mesh)
            by_owner = {}
            for b in need:
                by_owner.setdefault(owner[b], []).append(b)
            blocks, futures = [], []
            for j, bs in sorted(by_owner.items()):
                local = [self.tiles[j].index(b) for b in bs]
                futures.append(self.client.submit(_columns, self.parts[j], local,
                                                  workers=[homes[j]], allow_other_workers=True))
                blocks.append(bs)
            tasks += len(futures)
            ghost_blocks.append(blocks)
            ghost_parts.append(futures)
        both = []
        for p, tile, w, blocks, futures in zip(self.parts, self.tiles, homes, ghost_blocks,
                                               ghost_parts, strict=True):
            # the interior blocks need no ghost: their task runs while the ghosts arrive
            inside = set(tile)
            interior = [set(stencil.neighbours(b, self.mesh)) <= inside for b in tile]
            inner = [i for i, x in enumerate(interior) if x]
            edge = [i for i, x in enumerate(interior) if not x]
            parts = [x for x in ((inner, (), ()), (edge, blocks, futures)) if x[0]]
            done = [self.client.submit(threads.run, _stencil, p, tile, self.mesh, coefficient,
                                       eps, max_rank, method, part, gb, *gf, workers=[w],
                                       allow_other_workers=True, key=task_key(_stencil))
                    for part, gb, gf in parts]
            both.append(self.client.submit(_joined, len(tile), [part for part, *_ in parts],
                                           *done, workers=[w], allow_other_workers=True,
                                           pure=False))
            tasks += len(done)
        infos = self._commit_with_infos(both, "stencil_")
        self.last_tasks += tasks + len(both)
        return infos

"""The stencil step over a mesh of blocks, on one process's trains (no Dask here).

Each block's train (every variable) gains ``coefficient`` times each neighbour's train
(periodic, the two neighbours along every mesh axis, in a fixed order) and the sums are
rounded once per block, as Parthenon's ``TTSend`` / ``TTSetBounds`` do with ghost
trains. :func:`step` is what each worker runs on its tile plus the ghost trains it
received; run on the whole pack it is the single-process reference.

>>> from tenalg import tt
>>> pack = tt.TrainPack([tt.random((3, 3), 1, rng=b) for b in range(4)])
>>> new, infos = step(pack, (2, 2), 0.5, 1e-10)
>>> new.shape, infos[0][0].ranks_after[1] <= 3
((1, 4), True)
"""

import math

from .. import tt


def neighbours(block, mesh):
    """The periodic neighbours of flat ``block`` in a C-ordered ``mesh``: along each axis
    the one below, then the one above.

    >>> neighbours(0, (3, 4))
    [8, 4, 3, 1]
    """
    index = list(divmod_all(block, mesh))
    out = []
    for axis, n in enumerate(mesh):
        for shift in (-1, 1):
            moved = list(index)
            moved[axis] = (index[axis] + shift) % n
            out.append(flat(moved, mesh))
    return out


def divmod_all(block, mesh):
    """The mesh index of flat ``block`` (C order)."""
    index = []
    for n in reversed(mesh):
        block, i = divmod(block, n)
        index.append(i)
    return tuple(reversed(index))


def flat(index, mesh):
    return sum(i * math.prod(mesh[k + 1:]) for k, i in enumerate(index))


def ghosts(tile, mesh):
    """The blocks outside ``tile`` (a list of flat blocks) whose trains its step reads."""
    inside = set(tile)
    return sorted({n for b in tile for n in neighbours(b, mesh)} - inside)


def step(pack, mesh, coefficient, eps, max_rank=None, method="svd", *, blocks=None,
         lookup=None):
    """Stencil step of the ``blocks`` of ``pack`` (default: all, the pack's columns):
    returns (new TrainPack of those blocks, grid of TruncationInfo). ``lookup(var,
    block)`` gives a neighbour's train (default: the pack's own)."""
    blocks = list(range(pack.nblocks)) if blocks is None else list(blocks)
    lookup = (lambda v, b: pack[v, b]) if lookup is None else lookup
    total = tt.TrainPack([[pack[v, i] for i in range(len(blocks))]
                          for v in range(pack.nvars)])
    around = [neighbours(b, mesh) for b in blocks]
    for k in range(2 * len(mesh)):
        addend = tt.TrainPack([[coefficient * lookup(v, n[k]) for n in around]
                               for v in range(pack.nvars)])
        total = tt.add(total, addend)
    infos = total.round_(eps, max_rank, method)
    return total, infos


def tile_lookup(part, tile, ghost_parts):
    """A ``lookup`` over a tile's own trains and the ghost trains it received:
    ``ghost_parts`` is a list of (blocks, TrainPack of those blocks)."""
    where = {b: (part, i) for i, b in enumerate(tile)}
    for blocks, ghost in ghost_parts:
        where.update({b: (ghost, i) for i, b in enumerate(blocks)})

    def lookup(v, b):
        p, i = where[b]
        return p[v, i]

    return lookup


def columns(pack, indices):
    """A TrainPack of the columns ``indices`` of ``pack`` (the trains shared, not copied)."""
    return tt.TrainPack([[pack[v, i] for i in indices] for v in range(pack.nvars)])


def split_rows(mesh, nparts):
    """Tiles: slabs of whole rows of the mesh's first axis, as even as they come.

    >>> split_rows((4, 2), 3)
    [[0, 1], [2, 3, 4, 5], [6, 7]]
    """
    rows, per_row = mesh[0], math.prod(mesh[1:])
    nparts = max(1, min(nparts, rows))
    bounds = [round(i * rows / nparts) for i in range(nparts + 1)]
    return [list(range(bounds[i] * per_row, bounds[i + 1] * per_row)) for i in range(nparts)]


"""Contraction of two block tensors: sector logic first, then dense plans on blocks.

Blocks are matched by a hash join on the contracted charges (never an all-pairs scan).
The pairs fall into sectors, one per total charge ``c`` of the contracted legs: every
row block ``(i, k)`` of ``a`` with ``k`` of charge ``c`` meets every column block
``(k, j)`` of ``b``, so the sector is one block matrix product. Where its blocks are
small, it runs as such: the row and contracted sectors of ``a`` gathered into one matrix
(:mod:`.gather`), the contracted sectors of ``b`` per column ``j`` into another, one
dense contraction plan per column, whose rows are the output blocks ``(i, j)`` (views,
no copy). Elsewhere each pair is one dense plan accumulating into its output block
(beta = 1). Gathering needs the output modes to list ``a``'s free legs, then ``b``'s (or
the reverse: the operands swap), and each operand's contracted legs to come all first
or all last, in one order; other contractions run pair by pair. The schedule (matching,
gathers, plans) is cached per structure (legs, modes, block keys and dtypes).

>>> import numpy as np
>>> from tenalg.symmetric import U1, Leg, BlockTensor
>>> leg = Leg(U1(), [(0, 2), (1, 3)])
>>> a = BlockTensor.random((leg, leg.conj()), rng=0)
>>> c = contract(a, "ij", a, "jk", "ik")
>>> np.allclose(c.to_dense(), a.to_dense() @ a.to_dense())
True
"""

import functools
import math

import numpy as np

from ..dtypes import result_type
from ..errors import OperationError
from ..plan_cache import cached_plans
from . import dense
from .gather import BATCH, Gather, worth_copying
from .sectors import block_shape, total_charge
from .tensor import BlockTensor, check_keys, read_block


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
        n_a = len(self.free_a)
        self.swap = self.perm != tuple(range(len(free))) and self.perm == tuple(
            range(n_a, len(free))) + tuple(range(n_a))
        self.gathers = (self.perm == tuple(range(len(free)))
                        and list(self.shared_b) == sorted(self.shared_b)
                        and _split(self.free_a, self.shared_a) is not None
                        and _split(self.shared_b, self.free_b) is not None)


def _split(first, last):
    """Whether the axes ``first + last`` are in order (True), ``last + first`` (False)."""
    axes = tuple(range(len(first) + len(last)))
    if first + last == axes:
        return True
    return False if last + first == axes else None


@functools.lru_cache(maxsize=256)
def _spec(legs_a, modes_a, legs_b, modes_b, modes_out):
    return _Spec(legs_a, modes_a, legs_b, modes_b, modes_out)


@cached_plans(256)
def _schedule(spec, keys_a, keys_b, dtype_a, dtype_b, group, fluxes):
    """The schedule of a structure, its blocks' keys checked (``fluxes``: a's and b's)."""
    check_keys(group, spec.legs_a, fluxes[0], keys_a)
    check_keys(group, spec.legs_b, fluxes[1], keys_b)
    return _Schedule(spec, keys_a, keys_b, dtype_a, dtype_b)


class _Sector:
    """One sector's matrix product laid out: the windows of its blocks in the gathered
    matrices, one gathered ``b`` per column ``j``, the output rows of each block.

    The matrix of ``a`` is (rows, contracted), or its transpose where ``a``'s contracted
    legs come first; that of ``b`` (contracted, columns), or its transpose. Sectors of
    equal ``layout`` (shapes and windows, not blocks) stack into one batched product.
    """

    def __init__(self, spec, keys_a, keys_b, pairs):
        self.pairs = pairs
        rows, inner, columns = {}, {}, {}
        for ia, ib, _ in pairs:
            rows.setdefault(tuple(keys_a[ia][i] for i in spec.free_a), None)
            inner.setdefault(tuple(keys_a[ia][i] for i in spec.shared_a), None)
            columns.setdefault(tuple(keys_b[ib][j] for j in spec.free_b), []).append(ib)
        row_at = _offsets(rows, [spec.legs_a[i] for i in spec.free_a])
        inner_at = _offsets(inner, [spec.legs_a[i] for i in spec.shared_a])
        self.n_rows, n_inner = _total(row_at), _total(inner_at)
        rows_first = _split(spec.free_a, spec.shared_a)
        inner_first = _split(spec.shared_b, spec.free_b)
        self.a_shape = (self.n_rows, n_inner) if rows_first else (n_inner, self.n_rows)
        self.a_cells = []
        for ia in dict.fromkeys(ia for ia, _, _ in pairs):
            key = keys_a[ia]
            r = row_at[tuple(key[i] for i in spec.free_a)]
            k = inner_at[tuple(key[i] for i in spec.shared_a)]
            self.a_cells.append((ia, (r, k) if rows_first else (k, r),
                                 block_shape(spec.legs_a, key)))
        self.columns = []
        for j, ibs in columns.items():
            n_cols = math.prod(block_shape([spec.legs_b[x] for x in spec.free_b], j))
            cells = []
            for ib in dict.fromkeys(ibs):
                key = keys_b[ib]
                k = inner_at[tuple(key[x] for x in spec.shared_b)]
                cells.append((ib, (k, (0, n_cols)) if inner_first else ((0, n_cols), k),
                              block_shape(spec.legs_b, key)))
            outputs = {out_key: (row_at[tuple(keys_a[ia][i] for i in spec.free_a)],
                                 block_shape(spec.legs, out_key))
                       for ia, ib, out_key in pairs if ib in ibs}
            shape = (n_inner, n_cols) if inner_first else (n_cols, n_inner)
            self.columns.append((cells, shape, n_cols, list(outputs.items())))
        self.layout = (self.a_shape, tuple(c[1:] for c in self.a_cells), tuple(
            (tuple(c[1:] for c in cells), shape, tuple(o for _, o in outputs))
            for cells, shape, _, outputs in self.columns))
        self.elements = math.prod(self.a_shape) + sum(math.prod(c[1]) for c in self.columns)
        self.modes = ((0, 1) if rows_first else (1, 0), (1, 2) if inner_first else (2, 1))

    def copies(self):
        """Elements copied to run this sector alone (blocks filling a matrix are views)."""
        matrices = [(self.a_cells, self.a_shape)] + [column[:2] for column in self.columns]
        return sum(math.prod(shape) for cells, shape in matrices
                   if len(cells) > 1 or math.prod(cells[0][2]) != math.prod(shape))


def _total(offsets):
    return sum(stop - start for start, stop in offsets.values())


class _Schedule:
    """The work of one structure: gathered (batched) sectors, then pairs one by one."""

    def __init__(self, spec, keys_a, keys_b, dtype_a, dtype_b):
        self.dtype = result_type([dtype_a, dtype_b])
        self.dtypes = (np.dtype(dtype_a), np.dtype(dtype_b))
        self.sectors, pairs = [], []
        by_layout = {}
        for sector in _sectors(spec, keys_a, keys_b).values():
            if spec.gathers:
                sector = _Sector(spec, keys_a, keys_b, sector)
                by_layout.setdefault(sector.layout, []).append(sector)
            else:
                pairs.extend(sector)
        for same in by_layout.values():
            n_pairs, n_cols = sum(len(s.pairs) for s in same), len(same[0].columns)
            if len(same) > 1 and worth_copying(len(same) * same[0].elements, n_pairs - n_cols):
                self._add(spec, same)
                continue
            for sector in same:
                if worth_copying(sector.copies(), len(sector.pairs) - n_cols):
                    self._add(spec, [sector])
                else:
                    pairs.extend(sector.pairs)
        by_key = {}
        for ia, ib, out_key in pairs:
            by_key.setdefault(out_key, []).append((ia, ib))
        self.direct = []
        for out_key, key_pairs in by_key.items():
            shape = block_shape(spec.legs, out_key)
            steps = []
            for k, (ia, ib) in enumerate(key_pairs):
                shape_a = block_shape(spec.legs_a, keys_a[ia])
                shape_b = block_shape(spec.legs_b, keys_b[ib])
                steps.append((ia, ib, shape_a, shape_b, dense.contraction_plan(
                    shape_a, dtype_a, spec.modes_a, shape_b, dtype_b, spec.modes_b, shape,
                    self.dtype, spec.modes_out, k > 0)))
            self.direct.append((out_key, shape, steps))

    def _add(self, spec, sectors):
        """Schedule ``sectors`` (of one layout) as one product per column, batched if several."""
        lead, batch = ((len(sectors),), (BATCH,)) if len(sectors) > 1 else ((), ())

        def cells(g, listed):
            at = (g,) if lead else ()
            return [(index, at + tuple(slice(*w) for w in window), shape, None)
                    for index, window, shape in listed]

        first = sectors[0]
        gather_a = Gather(lead + first.a_shape, self.dtypes[0], [
            cell for g, s in enumerate(sectors) for cell in cells(g, s.a_cells)])
        columns = []
        for c, (_, shape, n_cols, _) in enumerate(first.columns):
            gather_b = Gather(lead + shape, self.dtypes[1], [
                cell for g, s in enumerate(sectors) for cell in cells(g, s.columns[c][0])])
            out_shape = lead + (first.n_rows, n_cols)
            plan = dense.contraction_plan(
                gather_a.shape, gather_a.dtype, batch + first.modes[0], gather_b.shape,
                gather_b.dtype, batch + first.modes[1], out_shape, self.dtype, batch + (0, 2),
                False)
            outputs = [(key, (g,) * len(batch) + (slice(*rows),), block)
                       for g, s in enumerate(sectors) for key, (rows, block) in s.columns[c][3]]
            columns.append((gather_b, plan, outputs))
        self.sectors.append((gather_a, columns))

    def run(self, blocks_a, blocks_b):
        blocks = {}
        for gather_a, columns in self.sectors:
            a = gather_a(blocks_a)
            for gather_b, plan, outputs in columns:
                out = dense.execute_gathered(plan, a, gather_b(blocks_b))
                for key, index, block in outputs:
                    blocks[key] = out[index].reshape(block)
        for key, shape, steps in self.direct:
            out = np.empty(shape, self.dtype)
            for ia, ib, shape_a, shape_b, plan in steps:
                dense.execute(plan, out, read_block(blocks_a[ia], shape_a, self.dtypes[0]),
                              read_block(blocks_b[ib], shape_b, self.dtypes[1]))
            blocks[key] = out
        return blocks


def _offsets(keys, legs):
    """The index range ``(start, stop)`` of each key's block, the ``keys`` one after another."""
    out, start = {}, 0
    for key in keys:
        size = math.prod(block_shape(legs, key))
        out[key] = (start, start + size)
        start += size
    return out


def _sectors(spec, keys_a, keys_b):
    """The block pairs ``(index_a, index_b, output key)`` by contracted charge (a hash join)."""
    by_charge = {}
    for ib, key in enumerate(keys_b):
        by_charge.setdefault(tuple(key[j] for j in spec.shared_b), []).append(ib)
    legs_shared = tuple(spec.legs_a[i] for i in spec.shared_a)
    group = spec.legs_a[0].group if spec.legs_a else None
    sectors = {}
    for ia, key_a in enumerate(keys_a):
        shared = tuple(key_a[i] for i in spec.shared_a)
        free_a = tuple(key_a[i] for i in spec.free_a)
        charge = total_charge(group, legs_shared, shared) if shared else None
        for ib in by_charge.get(shared, ()):
            free = free_a + tuple(keys_b[ib][j] for j in spec.free_b)
            sectors.setdefault(charge, []).append((ia, ib, tuple(free[p] for p in spec.perm)))
    return sectors


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
    modes_out = tuple(modes_out)
    spec = _spec(a.legs, modes_a, b.legs, modes_b, modes_out)
    if spec.swap:  # b's free legs lead the output: b is the row side
        a, modes_a, b, modes_b = b, modes_b, a, modes_a
        spec = _spec(a.legs, modes_a, b.legs, modes_b, modes_out)
    schedule = _schedule(spec, tuple(a.blocks), tuple(b.blocks), a.dtype, b.dtype, a.group,
                         (a.flux, b.flux))
    blocks = schedule.run(tuple(a.blocks.values()), tuple(b.blocks.values()))
    return BlockTensor._new(spec.legs, a.group.fuse(a.flux, b.flux), blocks, schedule.dtype,
                            a.group)

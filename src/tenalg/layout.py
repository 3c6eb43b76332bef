"""Layout analysis: from mode labels and strides to the loops a kernel runs.

For each mode a record holds its extent and its stride in every operand (operand 0
is the output; 0 where an operand lacks the mode or broadcasts it).  Then, as in
seed 000: (1) an operand's repeated modes merge into one synthetic diagonal axis
whose stride is the sum of their strides; (2) extent-1 modes drop out; (3) modes are
ordered so that the smallest strides are innermost, the output weighted double;
(4) neighbours contiguous in every operand fuse.  Free modes (kept in the output)
come first, reduced modes after them.

>>> loops = analyse(("i", "j"), {"i": 4, "j": 5}, [((5, 1), ("i", "j")), ((1, 4), ("i", "j"))],
...                 [(4, 5), (4, 5)])
>>> [(l.extent, l.strides) for l in loops]
[(4, (5, 1)), (5, (1, 4))]
"""

import math
from dataclasses import dataclass

import numpy as np

from .descriptors import Reduce, modes_text
from .dtypes import is_complex


@dataclass(frozen=True)
class Loop:
    """One kernel axis: extent, element stride per operand, whether it is reduced."""

    extent: int
    strides: tuple
    reduced: bool
    modes: tuple


def merged_strides(modes, strides):
    """Stride of each distinct mode of one operand; repeated modes add up (a diagonal).

    >>> merged_strides(("i", "j", "i"), (12, 4, 1))
    {'i': 13, 'j': 4}
    """
    out = {}
    for mode, stride in zip(modes, strides, strict=True):
        out[mode] = out.get(mode, 0) + stride
    return out


def repeats(op):
    """(the reduced modes along which a reduction's input does not move (stride 0, a
    broadcast), the factor alpha is multiplied by where they are read once, or None): a
    sum is their extent times one term (once rounded, where adding the term over and
    over rounds at every step), a min or max the term itself.  Not products, nor complex
    sums: (n + 0j) (inf + 0j) is inf + nan j, where n terms add to inf.  Summed so,
    NumPy's sum of a (1000, 512) float64 broadcast of a row over axis 0 took 106 us,
    tenalg's 416."""
    reduce = Reduce.coerce(op.op) if op.kind == "reduction" else None
    if reduce in (None, Reduce.PRODUCT) or is_complex(op.compute):
        return frozenset(), None
    a = op.inputs[0]
    extents = dict(zip(a.modes, a.descriptor.extents, strict=True))
    modes = frozenset(m for m, stride in merged_strides(a.modes, a.descriptor.strides).items()
                      if stride == 0 and extents[m] > 1 and m not in op.out_modes)
    if not modes:
        return modes, None
    return modes, math.prod(extents[m] for m in modes) if reduce is Reduce.SUM else 1


def mode_records(out_modes, extents, operands, operand_extents):
    """Loops (unfused) for every mode: the output's modes first, then the reduced ones.

    ``operands`` is a sequence of ``(strides, modes)`` with the output first, and
    ``operand_extents`` their own extents; an operand that lacks a mode, or has extent 1
    for it, gets stride 0 there (broadcast).
    """
    per_operand = []
    for (strides, modes), own in zip(operands, operand_extents, strict=True):
        merged = merged_strides(modes, strides)
        sizes = dict(zip(modes, own, strict=True))
        per_operand.append({m: s for m, s in merged.items() if sizes[m] != 1})
    ordered = list(out_modes)
    for _, modes in operands[1:]:
        ordered.extend(m for m in modes if m not in ordered)
    out_set = set(out_modes)
    loops = []
    for mode in ordered:
        strides = tuple(ms.get(mode, 0) for ms in per_operand)
        loops.append(Loop(extents[mode], strides, mode not in out_set, (mode,)))
    return loops


def order_key(loop):
    """Outer-ness of a loop: 2 |output stride| + the sum of |input strides|."""
    return 2 * abs(loop.strides[0]) + sum(abs(s) for s in loop.strides[1:])


def fuse(loops):
    """Fuse neighbours (outer, inner) with outer.stride == inner.stride * inner.extent
    in every operand and the same reduced flag."""
    fused = []
    for loop in loops:
        if fused:
            outer = fused[-1]
            if outer.reduced == loop.reduced and all(
                so == si * loop.extent for so, si in zip(outer.strides, loop.strides, strict=True)
            ):
                fused[-1] = Loop(outer.extent * loop.extent, loop.strides, loop.reduced,
                                 outer.modes + loop.modes)
                continue
        fused.append(loop)
    return fused


def analyse(out_modes, extents, operands, operand_extents):
    """The kernel loops: merge, drop extent-1, order (free first), fuse.

    Arguments as for :func:`mode_records`.
    """
    kept = [loop for loop in mode_records(out_modes, extents, operands, operand_extents)
            if loop.extent != 1]
    free = sorted((l for l in kept if not l.reduced), key=order_key, reverse=True)
    reduced = sorted((l for l in kept if l.reduced), key=order_key, reverse=True)
    return fuse(free) + fuse(reduced)


def view_recipe(modes, descriptor, loops):
    """How to shape an operand's array into ``loops``: cheap transpose + reshape when
    possible, else explicit strides (diagonals, broadcasts).

    Returns ``("reshape", axes, shape)`` or ``("strided", shape, element_strides)``.
    """
    shape = tuple(loop.extent for loop in loops)
    own = dict(zip(modes, descriptor.extents, strict=True))
    merged = merged_strides(modes, descriptor.strides)
    ordered = [m for loop in loops for m in loop.modes]
    simple = len(set(modes)) == len(modes) and all(own.get(m, 1) > 1 for m in ordered)
    if simple:
        rest = [ax for ax, m in enumerate(modes) if m not in ordered]
        axes = tuple(rest + [modes.index(m) for m in ordered])
        return ("reshape", axes, shape)
    strides = []
    for loop in loops:
        inner = loop.modes[-1]
        strides.append(merged.get(inner, 0) if own.get(inner, 1) > 1 else 0)
    return ("strided", shape, tuple(strides))


def apply_recipe(array, recipe, writeable=False):
    """The view of ``array`` that :func:`view_recipe` describes (never a copy)."""
    kind, first, second = recipe
    if kind == "reshape":
        try:
            return array.transpose(first).reshape(second, copy=False)
        except ValueError:  # strides of extent-1 axes can block a no-copy reshape
            pass
        return np.lib.stride_tricks.as_strided(
            array.transpose(first), second,
            _fused_strides(array.transpose(first), second), writeable=writeable)
    item = array.dtype.itemsize
    byte_strides = tuple(s * item for s in second)
    if array.flags.c_contiguous:  # a plain buffer: NumPy's constructor is 10x cheaper
        try:
            return np.ndarray(first, array.dtype, array, 0, byte_strides)
        except (TypeError, ValueError, BufferError):  # dtypes that export no buffer
            pass
    return np.lib.stride_tricks.as_strided(array, first, byte_strides, writeable=writeable)


def _fused_strides(array, shape):
    """Byte strides of ``array`` (axes already in loop order) fused into ``shape``."""
    dims = [(e, s) for e, s in zip(array.shape, array.strides, strict=True) if e != 1]
    strides, k = [], 0
    for extent in shape:
        size, stride = 1, None
        while size < extent:
            e, s = dims[k]
            stride = s
            size *= e
            k += 1
        strides.append(stride if stride is not None else 0)
    return tuple(strides)


def describe(loops):
    """A one-line summary of loops, e.g. ``j:8 (1, 1), sum i:2048 (0, 16392)``."""
    parts = []
    for loop in loops:
        label = modes_text(loop.modes)
        tag = "sum " if loop.reduced else ""
        parts.append(f"{tag}{label}:{loop.extent} {loop.strides}")
    return ", ".join(parts) if parts else "(scalar)"

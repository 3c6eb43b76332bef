"""Layout analysis: from mode labels and strides to the loops a kernel runs.

For each mode a record holds its extent and its stride in every operand (operand 0
is the output; 0 where an operand lacks the mode or broadcasts it).  Then, as in
seed 000: (1) an operand's repeated modes merge into one synthetic diagonal axis
whose stride is the sum of their strides; (2) extent-1 modes drop out; (3) modes are
ordered so that the smallest strides are innermost, the output weighted double;
(4) neighbours contiguous in every operand fuse.  Free modes (kept in the output)
come first, reduced modes after them.

>>> loops = analyse(("i", "j"), {"i": 4, "j": 5}, [((5, 1), ("i", "j")), ((1, 4), ("i", "j"))])
>>> [(l.extent, l.strides) for l in loops]
[(4, (5, 1)), (5, (1, 4))]
"""

from dataclasses import dataclass

import numpy as np


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


def mode_records(out_modes, extents, operands):
    """Loops (unfused) for every mode: the output's modes first, then the reduced ones.

    ``operands`` is a sequence of ``(strides, modes)`` with the output first; an
    operand whose extent for a mode is 1 while the mode's extent is larger gets
    stride 0 (broadcast).
    """
    per_operand = [merged_strides(modes, strides) for strides, modes in operands]
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


def analyse(out_modes, extents, operands, operand_extents=None):
    """The kernel loops: merge, drop extent-1, order (free first), fuse.

    ``operands``: ``(strides, modes)`` per operand, output first.  ``operand_extents``:
    the operands' own extents (to find broadcasts); by default the mode extents.
    """
    loops = mode_records(out_modes, extents, operands)
    if operand_extents is not None:
        loops = _zero_broadcast(loops, operands, operand_extents)
    kept = [loop for loop in loops if loop.extent != 1]
    free = sorted((l for l in kept if not l.reduced), key=order_key, reverse=True)
    reduced = sorted((l for l in kept if l.reduced), key=order_key, reverse=True)
    return fuse(free) + fuse(reduced)


def _zero_broadcast(loops, operands, operand_extents):
    own = [
        dict(zip(modes, ext, strict=True))
        for (_, modes), ext in zip(operands, operand_extents, strict=True)
    ]
    fixed = []
    for loop in loops:
        (mode,) = loop.modes
        strides = tuple(
            0 if own[k].get(mode, 1) == 1 else s for k, s in enumerate(loop.strides)
        )
        fixed.append(Loop(loop.extent, strides, loop.reduced, loop.modes))
    return fixed


def loop_view(array, loops, operand, free_only=False):
    """A strided view of ``array`` shaped by ``loops`` for operand number ``operand``."""
    chosen = [l for l in loops if not (free_only and l.reduced)]
    item = array.dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        array,
        shape=tuple(l.extent for l in chosen),
        strides=tuple(l.strides[operand] * item for l in chosen),
        writeable=operand == 0,
    )


def describe(loops):
    """A one-line summary of loops, e.g. ``[ij:4096 (1, 4097)] + sum[k:8 (0, 1)]``."""
    parts = []
    for loop in loops:
        label = "".join(str(m) for m in loop.modes)
        tag = "sum " if loop.reduced else ""
        parts.append(f"{tag}{label}:{loop.extent} {loop.strides}")
    return ", ".join(parts) if parts else "(scalar)"

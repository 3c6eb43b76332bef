"""Modes fused into BLAS matrix axes: what a contraction may hand to GEMM without a copy.

>>> import numpy as np
>>> from tenalg.descriptors import Operand, TensorDescriptor
>>> d = TensorDescriptor.contiguous((2, 3, 4), np.float64)
>>> strides = fold(Operand(d, "ijk"))
>>> matrix(strides, dict(i=2, j=3, k=4), ("i", "j"), ("k",))
((6, 4), (4, 1))
"""

import itertools


def fold(operand):
    """``{mode: stride}`` of an operand: repeated modes merged, extent-1 modes dropped.

    >>> import numpy as np
    >>> from tenalg.descriptors import Operand, TensorDescriptor
    >>> d = TensorDescriptor((3, 1, 3), (4, 3, 1), np.float64)
    >>> fold(Operand(d, "iji"))
    {'i': 5}
    """
    strides = {}
    for mode, extent, stride in zip(operand.modes, operand.descriptor.extents,
                                    operand.descriptor.strides, strict=True):
        if extent != 1:
            strides[mode] = strides.get(mode, 0) + stride
    return strides


def fused(strides, extents, order):
    """(extent, stride) of the modes ``order`` (outer first) fused into one axis, or None.

    >>> fused({"i": 4, "j": 1}, {"i": 3, "j": 4}, ("i", "j"))
    (12, 1)
    >>> fused({"i": 1, "j": 3}, {"i": 3, "j": 4}, ("i", "j")) is None
    True
    """
    if not order:
        return 1, 1
    extent, stride = extents[order[-1]], strides[order[-1]]
    for inner, outer in itertools.pairwise(order[::-1]):
        if strides[outer] != strides[inner] * extents[inner]:
            return None
        extent *= extents[outer]
    return extent, stride


def blasable(rows, cols):
    """True when two fused axes ``(extent, stride)`` form a BLAS matrix (either order).

    >>> blasable((4, 8), (8, 1)), blasable((4, 1), (8, 4)), blasable((4, 2), (8, 2))
    (True, True, False)
    """
    (m, sm), (n, sn) = rows, cols
    if m <= 1 and n <= 1:
        return True
    if m <= 1:
        return sn == 1 or n <= 1
    if n <= 1:
        return sm == 1
    return (sn == 1 and sm >= n) or (sm == 1 and sn >= m)


def natural_order(strides, group):
    """The modes of ``group`` sorted outer first by the operand's strides."""
    return tuple(sorted(group, key=lambda m: (-abs(strides[m]), str(m))))


def matrix(strides, extents, rows, cols):
    """The fused (rows, cols) axes of a layout when they make a BLAS matrix, else None."""
    r, c = fused(strides, extents, rows), fused(strides, extents, cols)
    if r is None or c is None or r[1] < 0 or c[1] < 0 or not blasable(r, c):
        return None
    return r, c

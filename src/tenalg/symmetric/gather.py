"""Gathers: blocks, or strided views of them, copied into windows of one new array.

A dense plan call costs microseconds of overhead, about as much as copying
``COPY_PER_CALL`` elements. So small blocks that meet in one dense operation (the row
and contracted sectors of one contraction, the traced sectors of one output block) are
worth copying side by side into one array: one plan call then does the work of many.
A gather of one block filling the whole array returns a reshaped view of the block.

>>> import numpy as np
>>> g = Gather((2, 3), np.float64, [(0, (slice(0, 1),), (1, 3), None),
...                                 (1, (slice(1, 2),), (1, 3), None)])
>>> g([np.zeros((1, 3)), np.ones((1, 3))]).tolist()
[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
>>> worth_copying(10_000, 1), worth_copying(10_000, 2)
(False, True)
"""

import math

import numpy as np

from .tensor import read_block

COPY_PER_CALL = 1 << 13  # elements whose copy costs about one dense plan call's overhead
BATCH = -1  # the dense mode of an axis stacking gathers of one layout (others are >= 0)


def worth_copying(elements, calls_saved):
    """Whether copying ``elements`` pays for itself by ``calls_saved`` fewer plan calls."""
    return elements <= COPY_PER_CALL * calls_saved


class Gather:
    """A new C-ordered array of ``shape`` and ``dtype`` assembled from blocks.

    Each cell ``(index, window, source_shape, view)`` copies ``blocks[index]`` into
    ``array[window]``: the block itself (of ``source_shape``), or with ``view`` a pair
    ``(block_shape, strides)`` the view of ``source_shape`` and ``strides`` (bytes) into
    the memory of the block, C-ordered of ``block_shape`` (a diagonal).  The window must
    be ``source_shape`` after splitting axes, or contiguous. Where the cells leave part of
    the array uncovered, it is zero.  Blocks are read by
    :func:`tenalg.symmetric.tensor.read_block` (checked, converted) wherever they are
    not C-ordered arrays of the gather's dtype and shape.
    """

    def __init__(self, shape, dtype, cells):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        probe = np.broadcast_to(self.dtype.type(0), self.shape)  # window shapes, no memory
        self.cells = [(index, window, tuple(source) if probe[window].shape != tuple(source)
                       else None, source, strides)
                      for index, window, source, strides in cells
                      if math.prod(source)]  # empty cells copy nothing
        covered = sum(math.prod(cell[3]) for cell in self.cells)
        self.complete = covered == math.prod(self.shape)
        self.single = self.complete and len(self.cells) == 1 and self.cells[0][4] is None

    @property
    def copies(self):
        """Elements copied per call (none when the gather is a view of one block)."""
        return 0 if self.single else math.prod(self.shape)

    def __call__(self, blocks):
        """The gathered array: C-contiguous, of ``shape`` and ``dtype`` whatever the
        blocks are (plans run on it unchecked)."""
        dtype = self.dtype
        if self.single:
            index, _, _, shape, _ = self.cells[0]
            return read_block(blocks[index], shape, dtype).reshape(self.shape)
        array = (np.empty if self.complete else np.zeros)(self.shape, dtype)
        for index, window, split, shape, view in self.cells:
            block = blocks[index]
            if view is not None:  # strides into a C-ordered block's memory (checks inline:
                # as a call, 8% of a trace)
                if (type(block) is not np.ndarray or block.dtype is not dtype
                        or block.shape != view[0] or not block.flags.c_contiguous):
                    block = read_block(block, view[0], dtype)
                block = np.ndarray(shape, dtype, block, 0, view[1])
            elif (type(block) is not np.ndarray or block.dtype is not dtype
                  or block.shape != shape):
                block = read_block(block, shape, dtype)
            if split is None:
                array[window] = block
            else:
                array[window].reshape(split)[...] = block
        return array

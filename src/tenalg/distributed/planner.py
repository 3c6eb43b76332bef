"""Chunk planning for blockwise operations: a memory model per task, no Dask needed.

A blockwise operation is described by labels (one per mode), each operand's labels, the
output labels and an item size. Every task of the graph reads one block of each operand
and writes one partial output block; partials over the summed labels are combined in a
tree of fan-in ``split_every``. :func:`task_bytes` is the model of one task's peak
memory and :func:`plan_chunks` shrinks chunk sizes until it fits the budget, so a
batch label is chunked like any other output label and never multiplies the memory of a
task (the failure of dask issue 10053) and output blocks are sized from the model, not
guessed (11627).

>>> chunks = plan_chunks({"b": 64, "i": 256, "j": 256, "k": 256}, [("b", "i", "j"),
...                      ("b", "j", "k")], ("b", "i", "k"), 8, budget=4 << 20)
>>> task_bytes({k: max(v) for k, v in chunks.items()}, [("b", "i", "j"), ("b", "j", "k")],
...            ("b", "i", "k"), 8) <= 4 << 20
True
"""

import math

# Each operand block is read once and may be copied once by the block's kernel (a
# permutation to a GEMM layout); the output block is written and may be copied once
# (converted or permuted at the final write).
COPIES_IN, COPIES_OUT = 2, 2
PANELS = 4  # a task summing several block combinations makes each output a quarter at a time


def task_bytes(sizes, operands, out_labels, itemsize, split_every=4):
    """Peak bytes of one task: the larger of a block task (operand blocks plus the
    partial output, each with one copy) and a combine task (``split_every`` partials
    and their sum).

    >>> task_bytes({"i": 10, "j": 10}, [("i", "j")], ("i",), 8)
    1760
    """
    def block(labels):
        return math.prod(sizes[x] for x in labels)

    out = block(out_labels)
    kernel = COPIES_IN * sum(block(labels) for labels in operands) + COPIES_OUT * out
    combine = (split_every + 1) * out
    return itemsize * max(kernel, combine)


def group_size(sizes, operands, out_labels, itemsize, budget, combinations, most):
    """How many block combinations of one output block a task takes at most (``most``,
    which keeps tasks for every worker) while its model fits ``budget`` bytes: all of
    their operand blocks, one combination's copies, the running total and one panel of
    a partial with its copies. Summed in one task, G partials never exist at once (the
    failure of dask issue 10053: a partial per chunk of the summed labels, all alive
    before their sum).

    >>> group_size({"a": 2, "i": 4}, [("a", "i")], ("i",), 8, 1 << 20, 16, 8)
    8
    """
    inputs = sum(math.prod(sizes[x] for x in labels) for labels in operands)
    out = math.prod(sizes[x] for x in out_labels)
    group = max(1, min(combinations, most))
    while group > 1 and itemsize * ((group + COPIES_IN - 1) * inputs
                                    + (1 + COPIES_OUT / PANELS) * out) > budget:
        group -= 1
    return group


def _regular(extent, size):
    """Chunks of ``size`` (the last one shorter) covering ``extent``."""
    if extent == 0:
        return (0,)
    full, rest = divmod(extent, size)
    return (size,) * full + ((rest,) if rest else ())


def plan_chunks(extents, operands, out_labels, itemsize, budget, given=None, split_every=4):
    """Chunks per label (label -> tuple) whose :func:`task_bytes` fit ``budget`` bytes.

    ``given`` (label -> chunks) are the operands' own chunks: kept where they fit (uneven
    chunks and chunks of extent 1 included), else replaced by regular ones. The label
    whose halving saves the most memory is halved until the model fits or every chunk
    is 1.

    >>> plan_chunks({"i": 10, "j": 6}, [("i", "j")], ("i",), 8, 320, {"i": (3, 7)})
    {'i': (2, 2, 2, 2, 2), 'j': (6,)}
    """
    given = dict(given or {})
    sizes = {x: max(given[x]) if x in given else max(n, 1) for x, n in extents.items()}
    sizes = {x: max(min(s, max(extents[x], 1)), 1) for x, s in sizes.items()}

    def cost(s):
        return task_bytes(s, operands, out_labels, itemsize, split_every)

    while cost(sizes) > budget:
        best, saved = None, 0
        for x, s in sizes.items():
            if s > 1:
                trial = {**sizes, x: (s + 1) // 2}
                gain = cost(sizes) - cost(trial)
                if gain > saved:
                    best, saved = x, gain
        if best is None:
            break
        sizes[best] = (sizes[best] + 1) // 2
    out = {}
    for x, n in extents.items():
        keep = x in given and max(given[x]) <= sizes[x] and sum(given[x]) == n
        out[x] = tuple(given[x]) if keep else _regular(n, sizes[x])
    return out

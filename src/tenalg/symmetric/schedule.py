"""Batching of block operations: small blocks of equal shapes run as one stacked plan.

Python and plan overhead per block (tens of microseconds) dominate small blocks, so the
members (block pairs of a contraction, blocks of a trace) whose operands are small are
grouped by shape; each group's operands are stacked and go through one dense plan with an
extra batch mode. Large members run one by one, straight from and into their blocks. An
output block is then (a copy of) its slice of the group's result, plus the other members
it sums over.

>>> s = Schedule([("x", (2,), ((0,), (1,))), ("y", (2,), ((2,),))], lambda m: ((2, 2),))
>>> len(s.batches), [len(members) for members in s.batches.values()]
(1, [3])
>>> Schedule([("x", (2,), ((0,),))], lambda m: ((2, 2),)).batches  # one alone runs directly
{}
"""

import math

import numpy as np

SMALL = 1 << 14  # elements (operands and output) below which a member is batched
BATCH = -1  # the dense mode label of the stacking axis (structure labels are >= 0)


class Schedule:
    """The order of work for one structure: batched groups, then the direct members.

    ``entries`` are ``(out_key, out_shape, members)``; ``member_shapes(member)`` gives
    the shapes of the member's operands.
    """

    def __init__(self, entries, member_shapes):
        groups = {}
        for _, shape, members in entries:
            for member in members:
                shapes = member_shapes(member) + (shape,)
                if sum(math.prod(s) for s in shapes) <= SMALL:
                    groups.setdefault(shapes, []).append(member)
        # a group of one gains nothing from stacking: it runs directly
        self.batches = {sig: members for sig, members in groups.items() if len(members) > 1}
        position = {
            member: (sig, k) for sig, members in self.batches.items()
            for k, member in enumerate(members)
        }
        self.keys = [
            (key, shape, tuple(position.get(member, (None, member)) for member in members))
            for key, shape, members in entries
        ]

    def execute(self, run_one, run_batch, dtype):
        """The output blocks: ``run_batch(members, out_shape)`` returns a stacked result,
        ``run_one(out, member, beta)`` accumulates one member into ``out``."""
        stacks = {
            signature: run_batch(members, signature[-1])
            for signature, members in self.batches.items()
        }
        blocks = {}
        for key, shape, steps in self.keys:
            block = None
            for signature, ref in steps:
                if signature is not None:
                    part = stacks[signature][ref, ...]
                    if block is None:
                        block = part.copy()  # an own array: views cost a bounds check
                    else:
                        block += part
                elif block is None:
                    block = run_one(np.empty(shape, dtype), ref, 0)
                else:
                    run_one(block, ref, 1)
            blocks[key] = block
        return blocks

"""einsum over block tensors: traces, pairwise contractions along a path, a permutation.

Each label appears once (a free leg, listed in the output) or twice (a contracted or
traced pair of dual legs); a label repeated within one operand is a trace. Several
operands contract pairwise along an opt_einsum path computed on the dense extents.

>>> import numpy as np
>>> from tenalg.symmetric import U1, Leg, BlockTensor
>>> leg = Leg(U1(), [(0, 2), (1, 3)])
>>> a = BlockTensor.random((leg, leg.conj()), rng=0)
>>> np.allclose(einsum("ij,jk,kl->il", a, a, a).to_dense(),
...             np.linalg.matrix_power(a.to_dense(), 3))
True
"""

from collections import Counter

import opt_einsum

from ..errors import ExpressionError
from .contract import contract
from .tensor import BlockTensor, permute
from .trace import partial_trace


def _parse(expression, count):
    text = expression.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    for k, ch in enumerate(text):
        if not (ch.isalpha() or ch in ",->"):
            raise ExpressionError(f"unexpected character {ch!r}", expression, k)
    if len(terms) != count:
        raise ExpressionError(f"{len(terms)} operand terms for {count} tensors", expression, 0)
    counts = Counter(inputs.replace(",", ""))
    if not arrow:
        output = "".join(sorted(ch for ch, n in counts.items() if n == 1))
    for ch, n in counts.items():
        where = text.index(ch)
        if n > 2:
            raise ExpressionError(f"label {ch!r} appears {n} times (at most twice)",
                                  expression, where)
        if n == 2 and ch in output:
            raise ExpressionError(f"label {ch!r} is contracted and also in the output",
                                  expression, where)
        if n == 1 and ch not in output:
            raise ExpressionError(f"label {ch!r} appears once but is not in the output "
                                  "(summing one leg away breaks the symmetry)", expression,
                                  where)
    for ch in output:
        if ch not in counts or output.count(ch) > 1:
            raise ExpressionError(f"output label {ch!r} is unknown or repeated", expression,
                                  len(inputs) + 2 + output.index(ch))
    return terms, output


def _check_pairs(tensors, terms):
    """Every repeated label pairs a leg with its dual (OperationError naming the label),
    checked before anything is computed (opt_einsum's path would raise first)."""
    seen = {}
    for t, term in zip(tensors, terms, strict=True):
        for leg, ch in zip(t.legs, term, strict=True):
            if ch in seen:
                seen[ch].check_contracts_with(leg, f"label {ch!r}")
            else:
                seen[ch] = leg


def _trace_repeats(t, term):
    """Trace the labels repeated within one term; the term of the result."""
    repeated = [ch for ch in dict.fromkeys(term) if term.count(ch) == 2]
    if not repeated:
        return t, term
    pairs = [(term.index(ch), term.rindex(ch)) for ch in repeated]
    return partial_trace(t, pairs), "".join(ch for ch in term if ch not in repeated)


def einsum(expression, *tensors):
    """Evaluate an einsum ``expression`` (letters only, no ellipsis) on BlockTensors."""
    if not all(isinstance(t, BlockTensor) for t in tensors):
        raise ExpressionError("symmetric einsum takes BlockTensors only", expression, 0)
    terms, output = _parse(expression, len(tensors))
    for t, term in zip(tensors, terms, strict=True):
        if len(term) != t.ndim:
            raise ExpressionError(f"term {term!r} has {len(term)} labels for {t.ndim} legs",
                                  expression, expression.index(term))
    _check_pairs(tensors, terms)
    operands = [_trace_repeats(t, term) for t, term in zip(tensors, terms, strict=True)]
    if len(operands) > 1:
        shapes = [t.shape for t, _ in operands]
        path, _ = opt_einsum.contract_path(
            ",".join(term for _, term in operands) + "->" + output, *shapes, shapes=True,
            optimize="auto",
        )
        for i, j in path:
            (b, term_b), (a, term_a) = operands.pop(max(i, j)), operands.pop(min(i, j))
            term = "".join(ch for ch in term_a + term_b if (term_a + term_b).count(ch) == 1)
            operands.append((contract(a, term_a, b, term_b, term), term))
    t, term = operands[0]
    return permute(t, [term.index(ch) for ch in output])

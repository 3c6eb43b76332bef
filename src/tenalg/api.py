"""TEMPORARY stubs of the dense front ends (replaced by the real plans)."""

import numpy as np


def einsum(subscripts, *operands, out=None, dtype=None, compute_dtype=None, optimize="auto"):
    return np.einsum(subscripts, *operands, optimize=True)


def contract(a, modes_a, b, modes_b, modes_out, *, alpha=1, c=None, beta=0, out=None):
    labels = {}
    def sub(modes):
        return "".join(labels.setdefault(m, chr(97 + len(labels))) for m in modes)
    r = alpha * np.einsum(f"{sub(modes_a)},{sub(modes_b)}->{sub(modes_out)}", a, b)
    if c is not None and beta != 0:
        r = r + beta * c
    return r


def trace(a, axis1=0, axis2=1):
    return np.trace(a, axis1=axis1, axis2=axis2)


def partial_trace(a, pairs):
    for k, (i, j) in enumerate(sorted(pairs, reverse=True)):
        a = np.trace(a, axis1=i, axis2=j)
    return a

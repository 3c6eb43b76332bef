"""Batched kernels on stacks of trains with equal core shapes.

A stack is a list of d arrays of shape (g, l, n, r): core k of g trains. A single train
is a stack with g = 1, so the single-train operations and the pack operations run the
same code. Long chains are kept finite by normalising every core and the carried factor
before they are multiplied, accumulating the logarithms of the scales.

>>> import numpy as np
>>> a = [np.ones((1, 1, 2, 1)), np.ones((1, 1, 2, 1))]
>>> dot(a, a).tolist()
[4.0]
"""

import numpy as np

from ._dense import einsum, safe_log, scaled_by_log


def stack(trains):
    """Core arrays of ``trains`` (equal shapes) as a stack."""
    return [np.concatenate([t.cores[k].array()[None] for t in trains])
            for k in range(trains[0].ncores)]


def _max_abs(x):
    s = np.abs(x).max(axis=tuple(range(1, x.ndim)), initial=0)
    return np.where((s > 0) & np.isfinite(s), s, 1).astype(s.dtype)


def frobenius(x):
    """Frobenius norm of each train's slice of ``x`` (scaled: no underflow of squares)."""
    s = _max_abs(x)
    y = x / s.reshape((-1,) + (1,) * (x.ndim - 1))
    return s * np.sqrt((np.abs(y) ** 2).sum(axis=tuple(range(1, x.ndim))))


def normalize(x, logs):
    """Divide each train's slice of ``x`` by its largest modulus; add its log to ``logs``."""
    s = _max_abs(x)
    return x / s.reshape((-1,) + (1,) * (x.ndim - 1)), logs + safe_log(s)


def block_sum(a, b):
    """Stacks of the sums a + b: first core [A B], interior diag(A, B), last [A; B]."""
    d = len(a)
    if d == 1:
        return [a[0] + b[0]]
    out = []
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        g, la, n, ra = x.shape
        lb, rb = y.shape[1], y.shape[3]
        l0 = 0 if k == 0 else la
        r0 = 0 if k == d - 1 else ra
        z = np.zeros((g, l0 + lb if k else 1, n, r0 + rb if k < d - 1 else 1),
                     dtype=np.result_type(x, y))
        z[:, :la, :, :ra] = x
        z[:, l0 : l0 + lb, :, r0 : r0 + rb] = y
        out.append(z)
    return out


def dot(a, b):
    """<a, b> for each train pair, conjugating a; open outer bonds are summed over."""
    e = np.broadcast_to(np.eye(a[0].shape[1], dtype=np.result_type(a[0], b[0])),
                        (a[0].shape[0], a[0].shape[1], b[0].shape[1]))
    logs = np.zeros(a[0].shape[0])
    for x, y in zip(a, b, strict=True):
        x, logs = normalize(x, logs)
        y, logs = normalize(y, logs)
        e = einsum("ganc,gand->gcd", x.conj(), einsum("gab,gbnd->gand", e, y))
        e, logs = normalize(e, logs)
    return scaled_by_log(einsum("gaa->g", e), logs)


def norm(a):
    """Frobenius norm of each train, by a left-to-right QR sweep (no sum of squares)."""
    logs = np.zeros(a[0].shape[0])
    r = None
    for x in a:
        x, logs = normalize(x, logs)
        m = x if r is None else einsum("gab,gbnc->ganc", r, x)
        g, l, n, rr = m.shape
        r = np.linalg.qr(m.reshape(g, l * n, rr), mode="r")
        r, logs = normalize(r, logs)
    return scaled_by_log(frobenius(r), logs)


def spread(cores, logs):
    """Multiply each train's cores by exp(logs / d), giving back a carried scale evenly."""
    d = len(cores)
    return [scaled_by_log(c, (logs / d).reshape(-1, 1, 1, 1)) for c in cores]


def reverse(cores):
    """The stack of the reversed trains (core k becomes core d-1-k, transposed)."""
    return [c.transpose(0, 3, 2, 1) for c in reversed(cores)]


def unstack(cores, ranks):
    """Per train, its cores cut to its own ranks (``ranks`` is (g, d+1))."""
    return [
        [np.ascontiguousarray(c[i, : ranks[i, k], :, : ranks[i, k + 1]])
         for k, c in enumerate(cores)]
        for i in range(cores[0].shape[0])
    ]

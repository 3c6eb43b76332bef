"""Hypothesis strategies and dense references for the symmetric tests."""

import numpy as np
from hypothesis import strategies as st

from tenalg import symmetric as sym

GROUPS = (sym.U1(), sym.Zn(3), sym.ProductGroup(sym.U1(), sym.Zn(2)))
DTYPES = (np.float64, np.complex128, np.float32, np.complex64)


def charge_pool(group):
    if isinstance(group, sym.U1):
        return [-2, -1, 0, 1, 2]
    if isinstance(group, sym.Zn):
        return list(range(group.n))
    return [(q, p) for q in (-1, 0, 1) for p in (0, 1)]


@st.composite
def legs(draw, group, min_sectors=1, max_sectors=3, max_dim=3):
    pool = charge_pool(group)
    charges = draw(st.lists(st.sampled_from(pool), min_size=min_sectors,
                            max_size=max_sectors, unique=True))
    dims = draw(st.lists(st.integers(1, max_dim), min_size=len(charges),
                         max_size=len(charges)))
    return sym.Leg(group, list(zip(charges, dims, strict=True)), dual=draw(st.booleans()))


@st.composite
def flux_for(draw, legs_):
    """A flux some block conserves: the total of one random sector per leg."""
    group = legs_[0].group
    key = [draw(st.sampled_from(leg.charges)) for leg in legs_]
    return group.fuse_many(leg.signed(q) for leg, q in zip(legs_, key, strict=True))


def tolerance(dtype):
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def close(x, y, dtype):
    tol = tolerance(dtype)
    return np.allclose(x, y, rtol=tol, atol=tol * max(1.0, float(np.max(np.abs(y), initial=0))))


def in_blocks(t):
    """True if every block is an array that conserves the flux and has its sectors' shape."""
    for key, block in t.blocks.items():
        if not isinstance(block, np.ndarray) or block.dtype != t.dtype:
            return False
        total = t.group.fuse_many(leg.signed(q) for leg, q in zip(t.legs, key, strict=True))
        if total != t.flux or block.shape != tuple(leg.dims[q] for leg, q in
                                                   zip(t.legs, key, strict=True)):
            return False
    return True

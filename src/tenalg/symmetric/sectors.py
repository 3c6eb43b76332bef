"""Sector logic: which charge tuples conserve a flux, cached per leg structure.

A block key is a tuple with one charge per leg; it conserves ``flux`` when the signed
charges (duals on dual legs) fuse to ``flux``.

>>> from tenalg.symmetric import U1, Leg
>>> leg = Leg(U1(), [(0, 1), (1, 1)])
>>> allowed_keys(U1(), (leg, leg, leg.conj()), 1)
((0, 1, 0), (1, 0, 0), (1, 1, 1))
>>> block_shapes(U1(), (leg, leg.conj()), 0)
{(0, 0): (1, 1), (1, 1): (1, 1)}
"""

import functools


def total_charge(group, legs, key):
    """The fusion of the signed charges of ``key`` on ``legs``."""
    return group.fuse_many(leg.signed(q) for leg, q in zip(legs, key, strict=True))


@functools.lru_cache(maxsize=1024)
def allowed_keys(group, legs, flux):
    """Every conserving key, in lexicographic order of the legs' sector orders.

    Built leg by leg on partial sums; the last charge is looked up, not enumerated.
    """
    if not legs:
        return ((),) if flux == group.identity else ()
    partial = {(): group.identity}
    for leg in legs[:-1]:
        partial = {
            key + (q,): group.fuse(total, leg.signed(q))
            for key, total in partial.items()
            for q in leg.charges
        }
    last = legs[-1]
    needed = {last.signed(q): q for q in last.charges}
    keys = []
    for key, total in partial.items():
        q = needed.get(group.fuse(flux, group.dual(total)))
        if q is not None:
            keys.append(key + (q,))
    return tuple(keys)


def block_shape(legs, key):
    """The dense shape of block ``key``."""
    return tuple(leg.dims[q] for leg, q in zip(legs, key, strict=True))


@functools.lru_cache(maxsize=1024)
def block_shapes(group, legs, flux):
    """``{key: block_shape(legs, key)}`` for every conserving key: one lookup checks a
    key and gives its block's shape."""
    return {key: block_shape(legs, key) for key in allowed_keys(group, legs, flux)}

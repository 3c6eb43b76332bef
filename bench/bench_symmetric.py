"""Symmetric (U(1)) workloads: MPS steps, a 4-leg trace, many small blocks.

Engines: ``tenalg`` (block-sparse, tenalg.symmetric), ``dense-numpy`` and ``dense-tenalg``
(the same operation on the dense arrays), ``blocks-alone`` (only the dense contractions
of the matching block pairs, np.tensordot one by one: the floor for any block-sparse
engine), and TeNPy / symmray where they import (legs sorted and bunched, one block per
charge; symmray both in its default mode, which fuses legs, and block by block).
Results of the engines differ in type, so the setup checks them against each other once
(``compare=False``).

>>> names = [w.name for w in workloads()]
>>> "sym-mps-theta-chi256-s9-f64" in names and "sym-trace-4leg-chi64-s9-f64" in names
True
"""

import numpy as np

import tenalg as ta
from tenalg import symmetric as sym
from tenalg.symmetric.sectors import allowed_keys, block_shape

from .registry import Workload

try:
    import tenpy.linalg.np_conserved as npc
    from tenpy.linalg.charges import ChargeInfo, LegCharge
except ImportError:
    npc = None

try:
    import symmray
except ImportError:
    symmray = None


def bond_leg(chi, sectors):
    """A U(1) bond of total dimension ~chi over ``sectors`` charges centred on 0.

    Sector sizes follow a Gaussian profile (as in an MPS), sorted by charge.
    """
    charges = np.arange(sectors) - sectors // 2
    weights = np.exp(-(charges / max(sectors / 4, 1)) ** 2)
    dims = np.maximum(1, np.round(chi * weights / weights.sum())).astype(int)
    return sym.Leg(sym.U1(), list(zip(charges.tolist(), dims.tolist(), strict=True)))


PHYS = sym.Leg(sym.U1(), [(0, 1), (1, 1)])  # a spin-1/2 / hard-core boson site


def _tenpy_leg(leg):
    starts = np.cumsum([0] + [d for _, d in leg.sectors])
    charges = np.array([[q] for q in leg.charges])
    return LegCharge.from_qind(ChargeInfo([1]), starts, charges, qconj=-1 if leg.dual else 1)


def _tenpy(t):
    return npc.Array.from_ndarray(t.to_dense(), [_tenpy_leg(leg) for leg in t.legs],
                                  qtotal=[t.flux])


def _symmray(t):
    indices = [symmray.BlockIndex(dict(leg.sectors), dual=leg.dual) for leg in t.legs]
    return symmray.U1Array.from_blocks(dict(t.blocks), indices, t.flux)


def _symmray_dense(result, legs):
    """A symmray result as a dense array over ``legs`` (symmray drops unused sectors)."""
    return sym.BlockTensor(legs, 0, dict(result.blocks)).to_dense()


def _agrees(got, expected):
    return np.allclose(got, expected, rtol=1e-8, atol=1e-8 * np.max(np.abs(expected)))


def _check(name, got, expected):
    if not _agrees(got, expected):
        raise AssertionError(f"{name} disagrees with the dense result")


def _checked(name, fn, got, expected):
    """``fn``, or where a peer's result is wrong a function that says so (runner: error)."""
    if _agrees(got, expected):
        return fn

    def wrong():
        raise AssertionError(f"{name} disagrees with the dense result")

    return wrong


def _keys_by(keys, axes):
    grouped = {}
    for key in keys:
        grouped.setdefault(tuple(key[ax] for ax in axes), []).append(key)
    return grouped


def _pairs(a, axes_a, b, axes_b):
    """The block pairs ``(block_a, block_b)`` the contraction multiplies."""
    by_charge = _keys_by(b.blocks, axes_b)
    return [(a.blocks[ka], b.blocks[kb]) for ka in a.blocks
            for kb in by_charge.get(tuple(ka[ax] for ax in axes_a), ())]


def _flops(legs_a, axes_a, legs_b, axes_b):
    """Flops of the block pairs, from the structure alone (no data)."""
    keys_b = _keys_by(allowed_keys(legs_b[0].group, legs_b, 0), axes_b)
    total = 0.0
    for ka in allowed_keys(legs_a[0].group, legs_a, 0):
        size_a = np.prod(block_shape(legs_a, ka))
        for kb in keys_b.get(tuple(ka[ax] for ax in axes_a), ()):
            shape_b = block_shape(legs_b, kb)
            total += 2.0 * size_a * np.prod(shape_b) / np.prod([shape_b[ax] for ax in axes_b])
    return total


def _contraction(name, legs_a, legs_b, expression, quick=False):
    """One contraction of two random flux-0 tensors, ``expression`` like "lpm,mqr->lpqr"."""
    inputs, out = expression.split("->")
    ma, mb = inputs.split(",")
    shared = [m for m in ma if m in mb]
    axes = ([ma.index(m) for m in shared], [mb.index(m) for m in shared])
    free = [m for m in ma + mb if m not in shared]

    def setup():
        a = sym.BlockTensor.random(legs_a, rng=1)
        b = sym.BlockTensor.random(legs_b, rng=2)
        pairs = _pairs(a, axes[0], b, axes[1])
        da, db = a.to_dense(), b.to_dense()
        expected = np.einsum(expression, da, db)
        _check("tenalg", sym.contract(a, ma, b, mb, out).to_dense(), expected)
        engines = {
            "tenalg": lambda: sym.contract(a, ma, b, mb, out),
            "dense-numpy": lambda: np.einsum(expression, da, db, optimize=True),
            "dense-tenalg": lambda: ta.einsum(expression, da, db),
            "blocks-alone": lambda: [np.tensordot(x, y, axes=axes) for x, y in pairs],
        }
        order = [free.index(m) for m in out]
        if npc is not None:
            ta_, tb = _tenpy(a), _tenpy(b)
            got = npc.tensordot(ta_, tb, axes=axes).to_ndarray().transpose(order)
            engines["tenpy"] = _checked("tenpy", lambda: npc.tensordot(ta_, tb, axes=axes),
                                        got, expected)
        if symmray is not None:
            sa, sb = _symmray(a), _symmray(b)
            free_legs = [leg for k, leg in enumerate(legs_a) if k not in axes[0]] + [
                leg for k, leg in enumerate(legs_b) if k not in axes[1]]
            got = _symmray_dense(symmray.tensordot(sa, sb, axes=axes), free_legs)
            got = got.transpose(order)
            engines["symmray"] = _checked(
                "symmray", lambda: symmray.tensordot(sa, sb, axes=axes), got, expected)
            engines["symmray-blockwise"] = _checked(
                "symmray", lambda: symmray.tensordot(sa, sb, axes=axes, mode="blockwise"), got,
                expected)
        return engines

    return Workload(name, "symmetric", setup, limit="gemm-f64",
                    flops=_flops(legs_a, axes[0], legs_b, axes[1]), quick=quick, compare=False)


def _mps_theta(chi, sectors, quick=False):
    """theta[l, p, q, r] = A[l, p, m] B[m, q, r]: the two-site step of an MPS sweep."""
    bond = bond_leg(chi, sectors)
    legs = (bond, PHYS, bond.conj())
    return _contraction(f"sym-mps-theta-chi{chi}-s{sectors}-f64", legs, legs, "lpm,mqr->lpqr",
                        quick)


def _mps_environment(chi, sectors):
    """E[r, s] = A[l, p, r] A*[l, p, s]: each output block sums over several block pairs."""
    bond = bond_leg(chi, sectors)
    legs = (bond, PHYS, bond.conj())
    return _contraction(f"sym-mps-env-chi{chi}-s{sectors}-f64", legs,
                        tuple(leg.conj() for leg in legs), "lpr,lps->rs")


def _trace_4leg(chi, sectors, quick=False):
    """rho[b, b'] = sum_a T[a, b, a', b']: a partial trace of a 4-leg U(1) tensor."""
    bond = bond_leg(chi, sectors)
    legs = (bond, bond, bond.conj(), bond.conj())
    diagonal = [block_shape(legs, k) for k in allowed_keys(bond.group, legs, 0) if k[0] == k[2]]
    traffic = sum(8.0 * np.prod(shape) / shape[0] for shape in diagonal)

    def setup():
        t = sym.BlockTensor.random(legs, rng=3)
        d = t.to_dense()
        expected = np.trace(d, axis1=0, axis2=2)
        _check("tenalg", sym.trace(t, 0, 2).to_dense(), expected)
        engines = {
            "tenalg": lambda: sym.trace(t, 0, 2),
            "dense-numpy": lambda: np.trace(d, axis1=0, axis2=2),
            "dense-tenalg": lambda: ta.trace(d, 0, 2),
        }
        if npc is not None:
            tt = _tenpy(t)
            engines["tenpy"] = _checked("tenpy", lambda: npc.trace(tt, 0, 2),
                                        npc.trace(tt, 0, 2).to_ndarray(), expected)
        if symmray is not None:
            st = _symmray(t)
            engines["symmray"] = _checked("symmray", lambda: symmray.einsum("abad->bd", st),
                                          _symmray_dense(symmray.einsum("abad->bd", st),
                                                         (bond, bond.conj())), expected)
        return engines

    return Workload(f"sym-trace-4leg-chi{chi}-s{sectors}-f64", "symmetric", setup,
                    limit="read", bytes=traffic, quick=quick, compare=False)


def workloads():
    return [
        _mps_theta(256, 9, quick=True),
        _mps_theta(512, 9),
        _mps_theta(1024, 9),
        _mps_theta(1024, 15),
        *(_mps_theta(512, s) for s in (1, 2, 4, 16)),
        _mps_theta(64, 41),  # many small blocks: per-block overhead
        _mps_environment(512, 9),
        _trace_4leg(64, 9, quick=True),
        _trace_4leg(128, 13),
    ]

"""Symmetric (U(1)) workloads: an MPS step, a 4-leg trace, many small blocks.

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
    return symmray.U1Array.from_blocks(dict(t.blocks), [leg.dual for leg in t.legs], t.flux)


def _check(name, got, expected):
    if not np.allclose(got, expected, rtol=1e-8, atol=1e-8 * np.max(np.abs(expected))):
        raise AssertionError(f"{name} disagrees with the dense result")


def _pairs(a, b):
    """The block pairs a contraction over a's last and b's first leg multiplies."""
    by_charge = {}
    for key, block in b.blocks.items():
        by_charge.setdefault(key[0], []).append(block)
    return [(x, y) for key, x in a.blocks.items() for y in by_charge.get(key[-1], ())]


def _theta_flops(bond):
    """Flops of the block pairs of theta = A B (A, B with legs bond, PHYS, bond.conj())."""
    legs = (bond, PHYS, bond.conj())
    keys = allowed_keys(bond.group, legs, 0)
    shapes = [block_shape(legs, k) for k in keys]
    return sum(2.0 * np.prod(x) * np.prod(y[1:]) for x in shapes for y in shapes
               if x[2] == y[0])


def _mps_theta(chi, sectors, quick=False):
    """theta[l, p, q, r] = A[l, p, m] B[m, q, r]: the two-site step of an MPS sweep."""
    bond = bond_leg(chi, sectors)

    def setup():
        legs = (bond, PHYS, bond.conj())
        a = sym.BlockTensor.random(legs, rng=1)
        b = sym.BlockTensor.random(legs, rng=2)
        pairs = _pairs(a, b)
        da, db = a.to_dense(), b.to_dense()
        expected = np.tensordot(da, db, axes=(2, 0))
        _check("tenalg", sym.contract(a, "lpm", b, "mqr", "lpqr").to_dense(), expected)
        engines = {
            "tenalg": lambda: sym.contract(a, "lpm", b, "mqr", "lpqr"),
            "dense-numpy": lambda: np.tensordot(da, db, axes=(2, 0)),
            "dense-tenalg": lambda: ta.einsum("lpm,mqr->lpqr", da, db),
            "blocks-alone": lambda: [np.tensordot(x, y, axes=(2, 0)) for x, y in pairs],
        }
        if npc is not None:
            ta_, tb = _tenpy(a), _tenpy(b)
            _check("tenpy", npc.tensordot(ta_, tb, axes=(2, 0)).to_ndarray(), expected)
            engines["tenpy"] = lambda: npc.tensordot(ta_, tb, axes=(2, 0))
        if symmray is not None:
            sa, sb = _symmray(a), _symmray(b)
            _check("symmray", symmray.tensordot(sa, sb, axes=((2,), (0,))).to_dense(),
                   expected)
            engines["symmray"] = lambda: symmray.tensordot(sa, sb, axes=((2,), (0,)))
            engines["symmray-blockwise"] = lambda: symmray.tensordot(
                sa, sb, axes=((2,), (0,)), mode="blockwise")
        return engines

    return Workload(f"sym-mps-theta-chi{chi}-s{sectors}-f64", "symmetric", setup,
                    limit="gemm-f64", flops=_theta_flops(bond), quick=quick, compare=False)


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
            _check("tenpy", npc.trace(tt, 0, 2).to_ndarray(), expected)
            engines["tenpy"] = lambda: npc.trace(tt, 0, 2)
        if symmray is not None:
            st = _symmray(t)
            _check("symmray", symmray.einsum("abad->bd", st).to_dense(), expected)
            engines["symmray"] = lambda: symmray.einsum("abad->bd", st)
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
        _trace_4leg(64, 9, quick=True),
        _trace_4leg(128, 13),
    ]

"""Symmetric block-sparse tensors: abelian charges, legs, blocks lowered to dense plans.

>>> import numpy as np
>>> from tenalg import symmetric as sym
>>> leg = sym.Leg(sym.U1(), [(0, 2), (1, 2)])
>>> t = sym.BlockTensor.random((leg, leg.conj()), rng=0)
>>> np.allclose(sym.trace(t).to_dense(), np.trace(t.to_dense()))
True
"""

from .contract import contract
from .einsum import einsum
from .groups import U1
from .groups import Group
from .groups import ProductGroup
from .groups import Zn
from .legs import Leg
from .legs import LegFusion
from .linalg import TruncationInfo
from .linalg import qr
from .linalg import svd
from .tensor import BlockTensor
from .tensor import permute
from .trace import partial_trace
from .trace import trace

__all__ = [
    "BlockTensor",
    "Group",
    "Leg",
    "LegFusion",
    "ProductGroup",
    "TruncationInfo",
    "U1",
    "Zn",
    "contract",
    "einsum",
    "partial_trace",
    "permute",
    "qr",
    "svd",
    "trace",
]

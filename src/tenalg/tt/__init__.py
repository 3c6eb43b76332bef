"""Tensor trains: cores in two storage models, arithmetic, rounding, TT-SVD, TT-cross, packs.

>>> from tenalg import tt
>>> x = tt.random((4, 4, 4), 3, rng=0)
>>> y = tt.round(x + x, 1e-10, method="gram")
>>> y.ranks, bool(tt.norm(y - 2 * x) <= 1e-7 * tt.norm(x))
((1, 3, 3, 1), True)
"""

from .arithmetic import (
    add,
    add_,
    contract_vectors,
    dot,
    hadamard,
    neg,
    norm,
    scale,
    sub,
    sum,
)
from .core import STORAGES, TensorCore
from .decompositions import CrossInfo, cross, from_dense, maxvol
from .errors import StalePackError
from .pack import DevicePack, TrainPack
from .rounding import METHODS, TruncationInfo, gram_floor, round, round_, round_sum
from .train import TensorTrain, random

__all__ = [
    "METHODS",
    "STORAGES",
    "CrossInfo",
    "DevicePack",
    "StalePackError",
    "TensorCore",
    "TensorTrain",
    "TrainPack",
    "TruncationInfo",
    "add",
    "add_",
    "contract_vectors",
    "cross",
    "dot",
    "from_dense",
    "gram_floor",
    "hadamard",
    "maxvol",
    "neg",
    "norm",
    "random",
    "round",
    "round_",
    "round_sum",
    "scale",
    "sub",
    "sum",
]

"""tenalg on Dask (the extra ``tenalg[distributed]``): dense operations on Dask arrays,
packs of trains split over workers, and distributed rounding of one large train.

Dask is imported only here: ``import tenalg`` never imports it. The same code runs on a
``LocalCluster`` and on a real cluster (``distributed.Client("scheduler-address")``).

>>> import dask.array as da
>>> from tenalg import distributed as tad
>>> float(tad.einsum("ii->", da.eye(4, chunks=3)).compute())
4.0
"""

from . import cluster
from .backend import BACKEND
from .backend import DaskBackend
from .backend import run_operation
from .dense import contract
from .dense import contraction_path
from .dense import diagonal
from .dense import einsum
from .dense import inner_product
from .dense import memory_limit_of
from .dense import norm
from .dense import partial_trace
from .dense import permute
from .dense import reduce
from .dense import sum
from .dense import to_host
from .dense import trace
from .elementwise import elementwise_binary
from .elementwise import elementwise_trinary
from .pack import DistributedPack
from .pack import PackOperationError
from .stencil import step as stencil_step
from .train import DistributedTrain
from .. import seam

__all__ = [
    "BACKEND",
    "DaskBackend",
    "DistributedPack",
    "DistributedTrain",
    "PackOperationError",
    "contract",
    "contraction_path",
    "diagonal",
    "einsum",
    "elementwise_binary",
    "elementwise_trinary",
    "inner_product",
    "memory_limit_of",
    "norm",
    "partial_trace",
    "permute",
    "reduce",
    "run_operation",
    "stencil_step",
    "sum",
    "to_host",
    "trace",
]

# plans for Dask arrays (Plan(op, kind="dask")) run on the dask backend
seam.register(BACKEND)

"""The backends that ship with tenalg, registered in the order plans ask them:

1. ``blas``: contractions and sum_products as batched GEMM;
2. ``cpu``: the Numba kernels, where the work pays for them;
3. ``direct``: one NumPy call, where the operation is one;
4. ``reference``: NumPy code that is obviously right, for everything else.

:mod:`tenalg.seam` says what a backend is and how to add one (``docs/architecture.md``).

>>> from tenalg import seam
>>> [b.name for b in seam.registered()][:4]
['blas', 'cpu', 'direct', 'reference']
"""

from .. import seam
from .blas import BlasBackend
from .cpu import CpuBackend
from .direct import DirectBackend
from .reference import ReferenceBackend

for _backend in (BlasBackend(), CpuBackend(), DirectBackend(), ReferenceBackend()):
    seam.register(_backend)
# Dask arrays go to tenalg.distributed (the extra tenalg[distributed]), which registers
# the "dask" backend when it is first imported
seam.register_front_end("dask", "tenalg.distributed")

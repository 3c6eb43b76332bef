"""Dense decompositions: the truncated SVD of a tensor over a bipartition of its axes
(:func:`svd`), and the batched small linear algebra under it, which the tensor-train layer
(:mod:`tenalg.tt`) runs on every bond of a rounding sweep.

Every function below :func:`svd` takes stacks of matrices (g, rows, cols) as NumPy arrays:

- :mod:`~tenalg.linalg.truncation`: LQ and truncated SVD of a stack, through the Gram
  matrix where a rounding-error bound proves it as good as LAPACK, else LAPACK;
- :mod:`~tenalg.linalg.cholqr`: certified Cholesky QR (a second pass, CholeskyQR2, and a
  rank-revealing pivoted variant);
- :mod:`~tenalg.linalg.householder`, :mod:`~tenalg.linalg.smallchol`,
  :mod:`~tenalg.linalg.smalleigh`: QR by compact-WY LAPACK, batched Cholesky with its
  inverse, batched Jacobi eigh (Numba, the matrix index fastest);
- :mod:`~tenalg.linalg.lapackcalls`: BLAS threads for LAPACK calls, unit roundoffs;
- :mod:`~tenalg.linalg.workspace`: scratch buffers reused from one chunk to the next.

>>> import numpy as np
>>> from tenalg import linalg
>>> u, s, v, info = linalg.svd(np.diag([3.0, 2.0, 1e-9]), (0,), max_rank=2)
>>> s.round(12).tolist(), info.discarded_weight < 1e-17
([3.0, 2.0], True)
"""

from .svd import TruncationInfo, svd

__all__ = ["TruncationInfo", "svd"]

"""The tensor-train layer's dense engine: batched small linear algebra on stacked cores.

Nothing here knows trains, packs or cores as objects: every function takes NumPy arrays,
a stack being d arrays (g, l, n, r), core k of g trains (a single train is g = 1). The
user-facing model and operations above (:mod:`tenalg.tt.core`, ``train``, ``pack``,
``arithmetic``, ``rounding``, ``decompositions``) stack their trains and call in here;
nothing here imports them.

- :mod:`~tenalg.tt.linalg.dense`: tenalg's einsum for the cores, dtype rules, scales
  carried as logarithms.
- :mod:`~tenalg.tt.linalg.batched`: batched GEMM-level operations on stacks (dot, norm,
  block sums, stacking, reusable workspaces).
- :mod:`~tenalg.tt.linalg.householder`, :mod:`~tenalg.tt.linalg.smallchol`,
  :mod:`~tenalg.tt.linalg.smalleigh`: QR by compact-WY LAPACK, batched Cholesky with its
  inverse, batched Jacobi eigh (Numba, the matrix index fastest).
- :mod:`~tenalg.tt.linalg.cholqr`: certified Cholesky QR of a stack (a second pass,
  CholeskyQR2, and a rank-revealing pivoted variant).
- :mod:`~tenalg.tt.linalg.bondsvd`: one bond's LQ and truncated SVD for a stack, through
  the Gram matrix where a rounding-error bound proves it, else LAPACK.
- :mod:`~tenalg.tt.linalg.sweeps`: the rounding sweeps (SVD, Gram, randomised) on stacks.
- :mod:`~tenalg.tt.linalg.workers`: a pack's chunks on worker threads.

>>> import numpy as np
>>> from tenalg.tt.linalg import batched
>>> batched.norm([np.ones((1, 1, 4, 1))]).tolist()
[2.0]
"""

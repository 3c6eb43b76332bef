"""The tensor-train layer's dense engine: batched small linear algebra on stacked cores.

Nothing here knows trains, packs or cores as objects: every function takes NumPy arrays,
a stack being d arrays (g, l, n, r), core k of g trains (a single train is g = 1). The
user-facing model and operations above (:mod:`tenalg.tt.core`, ``train``, ``pack``,
``arithmetic``, ``rounding``, ``decompositions``) stack their trains and call in here;
nothing here imports them. The factorisations of each bond's matrices (QR, Cholesky, eigh,
the certified truncated SVD) are the dense layer's: :mod:`tenalg.linalg`.

- :mod:`~tenalg.tt.linalg.dense`: tenalg's einsum for the cores, dtype rules, scales
  carried as logarithms.
- :mod:`~tenalg.tt.linalg.batched`: batched GEMM-level operations on stacks (dot, norm,
  block sums, stacking).
- :mod:`~tenalg.tt.linalg.sweeps`: the rounding sweeps (SVD, Gram, randomised) on stacks.
- :mod:`~tenalg.tt.linalg.workers`: a pack's chunks on worker threads.

>>> import numpy as np
>>> from tenalg.tt.linalg import batched
>>> batched.norm([np.ones((1, 1, 4, 1))]).tolist()
[2.0]
"""

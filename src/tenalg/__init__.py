"""tenalg: tensor linear algebra for Python.

Strided dense primitives behind descriptors and plans, an einsum front end,
tensor trains (:mod:`tenalg.tt`) and symmetric block-sparse tensors
(:mod:`tenalg.symmetric`).

>>> import numpy as np, tenalg as ta
>>> float(ta.trace(np.eye(3)))
3.0
"""

from .api import contract, einsum, partial_trace, trace

__version__ = "0.1.0"

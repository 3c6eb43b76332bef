"""Errors of the tensor-train layer.

>>> from tenalg import tt
>>> issubclass(tt.StalePackError, RuntimeError)
True
"""

from ..errors import TenalgError


class StalePackError(TenalgError, RuntimeError):
    """A device pack used after one of the trains it was built from changed."""

"""How the front ends read their array arguments: as ``np.asarray`` reads them.

Lists, scalars and objects with ``__array__`` become arrays, and an ndarray subclass
becomes its base ndarray, as ``numpy.einsum`` reads it (an ``np.matrix`` is then a plain
2-D array: its sums are not forced back to 2-D).  A masked array that hides entries is
refused: the kernels read every entry, where ``numpy.sum``, ``numpy.trace`` and the
ufuncs would skip the masked ones, so its result would differ from NumPy's without a word.

>>> as_array(np.matrix([[1.0, 2.0]]), "a").sum(axis=0)
array([1., 2.])
>>> try:
...     as_array(np.ma.masked_equal([1.0, 2.0], 2.0), "a")
... except TypeError as error:
...     print(str(error)[:47])
a: a masked array with masked entries: tenalg r
"""

import sys

import numpy as np

from .errors import DescriptorError, DTypeError, type_name
from .seam import foreign_kind


def as_array(x, what):
    """``x`` as ``np.asarray(x)`` reads it, checked as the module says."""
    if type(x) is np.ndarray:
        return x
    masked = sys.modules.get("numpy.ma")  # no masked array exists before it is imported
    if masked is not None and isinstance(x, masked.MaskedArray) and masked.is_masked(x):
        raise DTypeError(f"{what}: a masked array with masked entries: tenalg reads every "
                         "entry; fill them first (x.filled(0) sums only the unmasked ones) "
                         "or drop the mask (np.ma.getdata(x))")
    try:
        return np.asarray(x)
    except TypeError as exc:
        raise DTypeError(f"{what}: cannot read a {type_name(x)} as an array") from exc
    except ValueError as exc:
        raise DescriptorError(f"{what}: cannot read a {type_name(x)} as an array: "
                              f"{exc}") from exc


def host_array(x, what, layer, dtype=None, order=None):
    """``x`` as ``np.asarray(x, dtype, order)`` reads it, for the layers that compute on
    NumPy arrays (``layer``: "tenalg.tt", "tenalg.symmetric"): an array of a kind with a
    front end of its own (Dask's, a GPU's) is refused, not computed or copied to the host
    behind the user's back.

    >>> host_array([1, 2], "x", "tenalg.tt")
    array([1, 2])
    """
    if type(x) is not np.ndarray and (kind := foreign_kind((x,))):
        raise DTypeError(f"{what}: {layer} computes on NumPy arrays, not {kind} arrays; "
                         "bring it to the host first (ta.to_host(x))")
    return np.asarray(x, dtype, order)

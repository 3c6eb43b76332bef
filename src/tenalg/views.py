"""Views: synthetic diagonals and validated strided views, never copies.

A diagonal of axes (i, j) is one axis whose stride is the sum of theirs.  Every view
made here is checked against the memory of the array it views: a layout that would
reach outside that buffer raises :class:`BoundsError` instead of reading foreign memory.

>>> import numpy as np, tenalg as ta
>>> a = np.arange(9.0).reshape(3, 3)
>>> ta.diagonal(a).tolist(), np.shares_memory(ta.diagonal(a), a)
([0.0, 4.0, 8.0], True)
"""

import operator

import numpy as np

from .descriptors import overlapping
from .errors import AxisError, BoundsError, DescriptorError, IntegerTypeError, type_name
from .seam import call_front_end, changed, foreign_kind


def _owner(a):
    """The array at the root of ``a``'s chain of bases (as_strided wrappers included)."""
    root = a
    while True:
        base = root.base
        if isinstance(base, np.ndarray):
            root = base
        elif isinstance(getattr(base, "base", None), np.ndarray):
            root = base.base
        else:
            return root


def made_by_numpy(a):
    """True when every view in ``a``'s chain of bases comes from NumPy's own indexing.

    Slicing, transposes, reshapes and broadcasts cannot leave their buffer; only
    layouts forced through an array interface (``as_strided``) can, and those are the
    arrays whose bounds a plan checks.
    """
    base = a.base
    while isinstance(base, np.ndarray):
        base = base.base
    return base is None or isinstance(base, bytes | bytearray | memoryview)


def _byte_bounds(shape, byte_strides):
    """(lowest, highest) byte offset of an element's first byte, or None when empty."""
    if 0 in shape:
        return None
    lo = sum(s * (e - 1) for e, s in zip(shape, byte_strides, strict=True) if s < 0)
    hi = sum(s * (e - 1) for e, s in zip(shape, byte_strides, strict=True) if s > 0)
    return lo, hi


def buffer_interval(a):
    """(first, last) byte address of the memory that ``a`` lives in.

    >>> a = np.zeros(10)
    >>> lo, hi = buffer_interval(a[2:5])
    >>> hi - lo + 1
    80
    """
    root = _owner(a)
    start = root.__array_interface__["data"][0]
    bounds = _byte_bounds(root.shape, root.strides)
    if bounds is None:
        return start, start - 1
    return start + bounds[0], start + bounds[1] + root.dtype.itemsize - 1


def check_in_buffer(a, offset, extents, strides, what="view"):
    """Raise BoundsError unless the layout stays inside ``a``'s buffer (element units)."""
    item = a.dtype.itemsize
    bounds = _byte_bounds(extents, [s * item for s in strides])
    if bounds is not None:
        _refuse_outside(a, a.__array_interface__["data"][0] + offset * item, bounds,
                        f"{what}: extents {tuple(extents)} with strides {tuple(strides)} at "
                        f"offset {offset}")


def check_inside(x, what):
    """Raise BoundsError unless every element of the array ``x`` lies in the buffer it
    views; looked at only where ``x`` is not :func:`made_by_numpy` (an ``as_strided``
    layout), since NumPy's own views cannot leave their buffer."""
    if x.base is None or made_by_numpy(x):
        return
    bounds = _byte_bounds(x.shape, x.strides)
    if bounds is not None:
        _refuse_outside(x, x.__array_interface__["data"][0], bounds,
                        f"{what}: extents {x.shape} with byte strides {x.strides}")


def _refuse_outside(a, origin, bounds, about):
    first, last = buffer_interval(a)
    low, high = origin + bounds[0], origin + bounds[1] + a.dtype.itemsize - 1
    if low < first or high > last:
        raise BoundsError(f"{about} reach bytes [{low - first}, {high - first}] of a "
                          f"{last - first + 1}-byte buffer")


def strided_view(a, extents, strides, offset=0, writeable=False):
    """A view of ``a``'s memory with element ``strides`` from element ``offset``.

    Refuses (BoundsError) any layout that reaches outside the buffer ``a`` lives in;
    a view whose elements overlap is never writeable.

    >>> a = np.arange(6.0)
    >>> strided_view(a, (2, 2), (1, 2), offset=1).tolist()
    [[1.0, 3.0], [2.0, 4.0]]
    """
    if not isinstance(a, np.ndarray):
        raise DescriptorError(f"strided_view needs a numpy.ndarray, got {type_name(a)}")
    extents, strides = tuple(extents), tuple(strides)
    check_in_buffer(a, offset, extents, strides)
    item = a.dtype.itemsize
    base = a if offset == 0 or a.size == 0 else _element(a, offset)
    return np.lib.stride_tricks.as_strided(
        base,
        shape=extents,
        strides=tuple(s * item for s in strides),
        writeable=bool(writeable and a.flags.writeable and not overlapping(extents, strides)),
    )


def _element(a, offset):
    """A 1-element view of ``a`` whose data pointer is ``offset`` elements from a's origin."""
    item = a.dtype.itemsize
    interface = dict(a.__array_interface__)
    interface["data"] = (interface["data"][0] + offset * item, not a.flags.writeable)
    interface["shape"] = (1,)
    interface["strides"] = (item,)
    holder = _Interface(interface, a)
    return np.asarray(holder).view(a.dtype)


class _Interface:
    """Exposes an array interface while keeping the source array alive."""

    def __init__(self, interface, base):
        self.__array_interface__ = interface
        self.base = base


def diagonals(a, pairs):
    """Survivor axes in order, then one diagonal axis per ``(i, j)`` pair (a view).

    Each diagonal has the smaller of the two extents; its stride is the sum of theirs.

    >>> a = np.arange(16.0).reshape(2, 2, 2, 2)
    >>> diagonals(a, [(0, 2), (1, 3)]).tolist()
    [[0.0, 5.0], [10.0, 15.0]]
    >>> diagonals(a, [(0, 1)]).shape
    (2, 2, 2)
    """
    if not isinstance(a, np.ndarray):
        raise DescriptorError(f"expected a numpy.ndarray, got {type_name(a)}")
    traced = [normalize_axis(ax, a.ndim) for pair in pairs for ax in _pair(pair)]
    if len(set(traced)) != len(traced):
        raise DescriptorError(f"axes repeat across the pairs {list(pairs)}")
    steps, axes = [], list(range(a.ndim))  # NumPy's calls: 2 us (as_strided: 20)
    for i, j in zip(traced[::2], traced[1::2], strict=True):
        steps.append((axes.index(i), axes.index(j)))  # each diagonal's axis goes last
        axes = [ax for ax in axes if ax not in (i, j)] + [None]
    view = diagonal_calls(a.view(), steps)
    view.flags.writeable = False
    return view


def diagonal_steps(modes):
    """How NumPy's ``diagonal`` calls merge the repeated labels of ``modes``: the axis
    pairs (i, j) of ``x.diagonal(0, i, j)``, one call after the other (each moves its
    merged axis last), and the labels of the result's axes.

    >>> diagonal_steps("ijij")
    (((0, 2), (0, 1)), ['i', 'j'])
    """
    modes, pairs = list(modes), []
    for mode in dict.fromkeys(modes):
        while modes.count(mode) > 1:
            i = modes.index(mode)
            j = modes.index(mode, i + 1)
            pairs.append((i, j))
            modes = [m for k, m in enumerate(modes) if k not in (i, j)] + [mode]
    return tuple(pairs), modes


def diagonal_calls(x, pairs):
    """``x`` through the ``diagonal`` calls of :func:`diagonal_steps` (NumPy's own views:
    read-only once there is a call, and within ``x``'s memory)."""
    for i, j in pairs:
        x = x.diagonal(0, i, j)
    return x


def check_offset(offset):
    """``offset`` as an int: an integer, not a bool (IntegerTypeError otherwise)."""
    if isinstance(offset, bool) or not isinstance(offset, int | np.integer):
        raise IntegerTypeError(f"offset must be an integer, got {offset!r}")
    return int(offset)


def diagonal(a, axis1=0, axis2=1, *, offset=0):
    """The diagonal of axes ``axis1`` and ``axis2`` as a read-only view (axis last).

    NumPy's ``diagonal`` for any array-like and dtype (a view moves no data, whatever it
    means); ``offset`` is a keyword: the positional arguments after ``a`` are the axes
    (DESIGN's signature), where ``numpy.diagonal`` takes ``offset`` first.

    >>> diagonal(np.arange(9).reshape(3, 3), offset=1).tolist()
    [1, 5]
    """
    if (type(a) is np.ndarray and type(axis1) is int and type(axis2) is int  # checked here:
            and type(offset) is int):
        n = a.ndim  # an 8x8 diagonal 10 -> 1.0 us (np.diagonal 2.2)
        if -n <= axis1 < n and -n <= axis2 < n and axis1 % n != axis2 % n:
            return a.diagonal(offset, axis1, axis2)  # read-only
    if not isinstance(a, np.ndarray):
        if kind := foreign_kind((a,)):  # Dask arrays, say
            return call_front_end(kind, "diagonal", a, axis1, axis2,
                                  offset=changed(offset, 0))
        a = np.asarray(a)
    elif type(a) is not np.ndarray:  # NumPy's own for subclasses (an np.matrix's is 1-D)
        i, j = normalize_axis(axis1, a.ndim), normalize_axis(axis2, a.ndim)
        if i == j:
            raise DescriptorError(f"axes repeat in the diagonal pair ({axis1}, {axis2})")
        return np.diagonal(a, check_offset(offset), i, j)
    check_offset(offset)
    view = diagonals(a, [(axis1, axis2)])
    return view if offset == 0 else a.diagonal(offset, axis1, axis2)


def _pair(pair):
    pair = tuple(pair)
    if len(pair) != 2:
        raise DescriptorError(f"a trace pair has two axes, got {pair}")
    return pair


def normalize_axes(axes, ndim):
    """``axes`` (an int or a sequence of them) as a tuple of :func:`normalize_axis`'s.

    >>> normalize_axes(-1, 3), normalize_axes((0, -2), 3)
    ((2,), (0, 1))
    """
    if one_axis(axes):
        axes = (axes,)
    return tuple(normalize_axis(ax, ndim) for ax in axes)


def one_axis(axes):
    """Whether ``axes`` is one axis rather than a sequence of them: an int, or what NumPy
    reads as one (a NumPy integer, a 0-d array, an object with ``__index__``)."""
    if isinstance(axes, np.ndarray):
        return axes.ndim == 0
    return isinstance(axes, int | np.integer) or (hasattr(type(axes), "__index__")
                                                  and not hasattr(axes, "__iter__"))


def axis_index(axis):
    """``axis`` as the int NumPy reads it as (``operator.index``: a NumPy integer, a 0-d
    integer array, an object with ``__index__``); a bool or anything else raises
    IntegerTypeError.

    >>> axis_index(np.array(-1))
    -1
    """
    if type(axis) is int:
        return axis
    try:
        if isinstance(axis, bool | np.bool_):
            raise TypeError
        return operator.index(axis)
    except TypeError:
        raise IntegerTypeError(f"axis must be an integer, got {axis!r}") from None


def normalize_axis(axis, ndim):
    """``axis`` (:func:`axis_index`) in range(ndim), negatives counted from the end;
    DescriptorError otherwise (AxisError, also NumPy's, for an integer out of range)."""
    axis = axis_index(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of range for a tensor of rank {ndim}")
    return int(axis) % ndim

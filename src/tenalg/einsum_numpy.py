"""NumPy's einsum contract for tenalg's einsum: keywords, casting, labels, the fallback.

``ta.einsum`` is a drop-in for ``np.einsum``.  This module holds what that takes beyond
tenalg's own planning: the ``order`` and ``casting`` keywords, NumPy's result dtype and
its 'safe'-casting checks, the labels of the interleaved form (any hashable), and the
fallback that runs NumPy's own routine where tenalg has no kernel (integer, bool,
longdouble and object data), chosen when a plan is made.

>>> import numpy as np
>>> numpy_dtype([np.dtype(np.float32), np.dtype(np.int64)], None, "safe")
dtype('float64')
>>> check_order("f"), kernel_reason([np.dtype(np.int64)], None)
('F', 'int64 has no tenalg kernel')
>>> run = NumpyEinsum("ij,jk->ik", None, "safe", "K", False, "int64 has no tenalg kernel")
>>> run((np.ones((2, 2), int), np.ones((2, 2), int)), None).tolist()
[[2, 2], [2, 2]]
"""

import contextlib
import functools

import numpy as np
import opt_einsum

from .blas import one_blas_thread
from .dtypes import COMPUTE_TYPES, STORAGE_TYPES
from .errors import (
    DTypeError,
    ExpressionError,
    OperationError,
    OutputTypeError,
    SublistError,
    type_name,
)

try:  # np.einsum's C routine: its Python wrapper costs 1.5 us of a 3 us small call
    from numpy._core.multiarray import c_einsum
except ImportError:  # a NumPy that moved it: np.einsum, a little slower
    c_einsum = None

CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
ORDERS = ("K", "C", "F", "A")
NUMPY_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
NUMPY_OPTIMIZE = (True, False, None, "greedy", "optimal")  # None: NumPy's path of one step
_FIRST_FREE = 0x100000  # Supplementary Private Use Area-B: labels for non-int hashables
_PRIVATE_COUNT = 0xFFFE  # its size (U+10FFFE and U+10FFFF are not characters)
_MORE_SYMBOLS = 1_000_000  # get_symbol(52 + k) stays below the area for these k


def check_order(order):
    """``order`` upper-cased, as NumPy accepts it ('K', 'C', 'F', 'A', any case)."""
    upper = order.upper() if isinstance(order, str) else None
    if upper not in ORDERS:
        raise OperationError(f"order must be one of 'K', 'C', 'F', 'A', not {order!r}")
    return upper


def check_casting(casting):
    """``casting`` when it is one of NumPy's rules."""
    if casting not in CASTINGS:
        raise OperationError(f"casting must be one of {CASTINGS}, not {casting!r}")
    return casting


def numpy_dtype(dtypes, dtype, casting):
    """The dtype NumPy's einsum computes in and returns, after its input-casting checks."""
    result = np.result_type(*dtypes) if dtype is None else np.dtype(dtype)
    for k, d in enumerate(dtypes):
        if not np.can_cast(d, result, casting):
            raise DTypeError(f"operand {k}: cannot cast {d} to {result} under the rule "
                             f"{casting!r} (as np.einsum)")
    return result


def check_out_cast(result, out, casting):
    """Raise OutputTypeError unless ``out`` is an array the ``result`` dtype casts to."""
    if not isinstance(out, np.ndarray):
        raise OutputTypeError(f"out: expected a numpy.ndarray, got {type_name(out)}")
    if out.dtype != result and not np.can_cast(result, out.dtype, casting):
        raise OutputTypeError(f"out: cannot cast the result's {result} to out's {out.dtype} "
                              f"under the rule {casting!r} (as np.einsum)")


def kernel_reason(dtypes, dtype):
    """Why tenalg's kernels cannot give NumPy's result for these dtypes (None if they can).

    Integer and bool arithmetic must wrap around exactly as NumPy's; longdouble and
    object have no kernel.  A real ``dtype=`` for complex inputs drops the imaginary parts
    before the products in NumPy, which a complex kernel would not do.
    """
    for d in dtypes:
        if d not in STORAGE_TYPES:
            return f"{d} has no tenalg kernel"
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in STORAGE_TYPES:
            return f"dtype={dt} has no tenalg kernel"
        if dt.kind != "c" and any(d.kind == "c" for d in dtypes):
            return f"dtype={dt} discards the inputs' imaginary parts first"
    return None


def wider_compute(dtypes, dtype, natural):
    """The compute type NumPy would use for ``dtype=`` when it is wider than ``natural``."""
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    if dt in COMPUTE_TYPES and dt != natural and np.can_cast(natural, dt, "safe"):
        return dt
    return None


def f_contiguous(shapes_strides):
    """True when every (shape, byte strides, itemsize) is Fortran-contiguous."""
    for shape, strides, itemsize in shapes_strides:
        expected = itemsize
        for extent, stride in zip(shape, strides, strict=True):
            if extent > 1 and stride != expected:
                return False
            expected *= extent
    return True


def sublist_labels(terms):
    """Each interleaved sublist as a string of labels, one character per distinct label.

    Ints in [0, 52) read as NumPy's letters ('A'-'Z', 'a'-'z'); other ints raise, as in
    NumPy.  Beyond NumPy, any other hashable (a string, a tuple) is a label, as many as
    needed, read as private-use characters after NumPy's letters, in the labels' sorted
    order (opt_einsum's, so an implicit output lists them sorted; in order of first
    appearance where they do not compare); ``Ellipsis`` is ``...``.

    >>> sublist_labels([[0, 1], [1, "x", Ellipsis, "b"]])
    ['AB', 'B\\U00100001...\\U00100000']
    """
    for k, sublist in enumerate(terms):
        if isinstance(sublist, str | bytes) or not hasattr(sublist, "__iter__"):
            raise SublistError(f"sublist {k}: expected a list of labels, got {sublist!r}")
    terms = [list(sublist) for sublist in terms]
    others = {}
    for k, sublist in enumerate(terms):
        for item in sublist:
            try:
                if item is Ellipsis or isinstance(item, int | np.integer) or item in others:
                    continue
            except TypeError as exc:
                raise SublistError(f"sublist {k}: label {item!r} is not hashable") from exc
            others[item] = None
    with contextlib.suppress(TypeError):  # labels that do not compare keep their order
        others = sorted(others)
    chars = {item: _private(j) for j, item in enumerate(others)}
    return ["".join(_label(item, chars, k) for item in sublist)
            for k, sublist in enumerate(terms)]


def _private(j):
    """The character of the ``j``-th hashable label: Supplementary Private Use Area-B,
    then opt_einsum's symbols past NumPy's letters (below that area for a million more).

    >>> _private(0), _private(65534)
    ('\\U00100000', 'À')
    """
    if j < _PRIVATE_COUNT:
        return chr(_FIRST_FREE + j)
    if j >= _PRIVATE_COUNT + _MORE_SYMBOLS:
        raise ExpressionError(f"more than {_PRIVATE_COUNT + _MORE_SYMBOLS} distinct labels")
    return opt_einsum.get_symbol(52 + j - _PRIVATE_COUNT)


def _label(item, chars, k):
    """The character(s) of one label of sublist ``k``."""
    if item is Ellipsis:
        return "..."
    if isinstance(item, int | np.integer):  # NumPy's rule and error for ints
        if not 0 <= item < 52:
            raise ExpressionError(f"sublist {k}: int label {item} is not in [0, 52) "
                                  "(NumPy's letters); use any other hashable")
        return NUMPY_LETTERS[item]
    return chars[item]


def mode_extents(modes, shapes):
    """Each mode's extent over all operands (an extent 1 yields to any other).

    >>> mode_extents([("i", "j"), ("j",)], [(2, 1), (3,)])
    {'i': 2, 'j': 3}
    """
    extents = {}
    for ms, shape in zip(modes, shapes, strict=True):
        for m, e in zip(ms, shape, strict=True):
            if extents.get(m, 1) == 1:
                extents[m] = e
    return extents


def numpy_expression(modes, out_modes):
    """An explicit expression in NumPy's 52 letters for bound mode tuples, or None when
    there are more than 52 distinct modes (ellipsis axes count as modes)."""
    letters = {}
    for m in (*[m for ms in modes for m in ms], *out_modes):
        if m not in letters:
            if len(letters) == len(NUMPY_LETTERS):
                return None
            letters[m] = NUMPY_LETTERS[len(letters)]
    terms = ",".join("".join(letters[m] for m in ms) for ms in modes)
    return terms + "->" + "".join(letters[m] for m in out_modes)


class NumpyEinsum:
    """The fallback: NumPy's own einsum with the plan's options, for dtypes tenalg has no
    kernel for (integer and bool arithmetic then wraps around exactly as NumPy's);
    ``call(*arrays, out=None)`` is that NumPy call itself."""

    def __init__(self, expression, dtype, casting, order, optimize, reason):
        if expression is None:
            raise ExpressionError(f"{reason}, and NumPy's einsum takes at most 52 labels")
        self.expression, self.reason = expression, reason
        self.options = dict(dtype=dtype, casting=casting, order=order, optimize=optimize)
        if optimize is False and c_einsum is not None:  # what np.einsum itself would call
            given = {k: v for k, v in self.options.items()
                     if k != "optimize" and v != dict(dtype=None, casting="safe", order="K")[k]}
            self.call = functools.partial(c_einsum, expression, **given)
        else:
            self.call = functools.partial(np.einsum, expression, **self.options)
        self._single = None if optimize is False else functools.partial(
            np.einsum, expression, **{**self.options, "optimize": False})

    def __call__(self, arrays, out):
        try:
            return self.call(*arrays) if out is None else self.call(*arrays, out=out)
        except AttributeError:
            if self._single is None:
                raise
            # NumPy's pairwise path hands an object-typed 0-d intermediate on as the
            # Python object it is, not an array, and fails on it (",,aa" on object
            # operands, NumPy 2.4); its single pass computes the same sum, and the path
            # failed before writing out
            return self._single(*arrays) if out is None else self._single(*arrays, out=out)

    def explain(self):
        options = ", ".join(f"{k}={v!r}" for k, v in self.options.items()
                            if v is not None and (k, v) != ("casting", "safe"))
        return [f"kernel: numpy.einsum({self.expression!r}, {options}): {self.reason}"]


class ExactIntegers:
    """Integer products through float64 BLAS where that is exact, else the fallback.

    When ``prod(max(1, max|x|)) * (product of the summed extents) <= min(2^53, the result
    type's max)``, every partial sum of every pairwise step is an integer that float64
    holds exactly and the result type holds without wrapping: converting the inputs, the
    float64 plan and a conversion back give NumPy's exact result (a 256^2 int64 product
    1.2 ms against np.einsum's 24).  Otherwise (or with ``out=``) NumPy's own einsum runs.
    """

    def __init__(self, fallback, run_float, summed, result):
        self.fallback, self.run_float, self.summed = fallback, run_float, summed
        self.result = np.dtype(result)
        self.limit = min(2**53, int(np.iinfo(self.result).max))

    def exact(self, arrays):
        bound = self.summed
        for x in arrays:
            if x.size:
                bound *= max(1, int(x.max()), -int(x.min()))
        return bound <= self.limit

    def __call__(self, arrays, out):
        if out is not None or not self.exact(arrays):
            return self.fallback(arrays, out)
        # one BLAS thread: OpenBLAS's woken threads on a busy machine made the 256^2
        # product 26-40 ms (np.einsum's loop 19-21), on one 1.2 ms and robust
        with one_blas_thread():
            result = self.run_float([x.astype(np.float64) for x in arrays])
        return result.astype(self.result)

    def explain(self):
        return [f"kernel: float64 GEMMs when exact (max|x| products * {self.summed} <= "
                f"{self.limit}), then {self.result}; else", *self.fallback.explain()]


def exact_integers(fallback, run_float, dtypes, dtype, out_modes, extents):
    """An :class:`ExactIntegers` over ``fallback`` where it may pay (two or more integer
    operands, NumPy's result type, an integer, a loop of 2^16 or more), else ``fallback``
    itself; ``run_float(arrays)`` is the same einsum on float64 arrays."""
    if (dtype is not None or len(dtypes) < 2 or any(d.kind not in "iu" for d in dtypes)
            or np.result_type(*dtypes).kind not in "iu"  # int64 and uint64: float64
            or fallback.options["order"] not in ("K", "C")):
        return fallback
    if np.prod([float(e) for e in extents.values()]) < 2**16:
        return fallback
    summed = 1
    for m, e in extents.items():
        if m not in out_modes:
            summed *= int(e)
    return ExactIntegers(fallback, run_float, summed, np.result_type(*dtypes))


class NativeOrder:
    """Operands of swapped byte order (``'>f8'`` on a little-endian machine) copied to the
    native order, then the same einsum on tenalg's kernels; with ``out=``, NumPy's own
    einsum.  NumPy's matmul copies them too: its einsum without a path ran a 512^2
    ``'>f8'`` product in a loop of its own, 97 ms against 4.2 ms (``be @ be``)."""

    def __init__(self, fallback, run_native):
        self.fallback, self.run_native = fallback, run_native

    def __call__(self, arrays, out):
        if out is not None:
            return self.fallback(arrays, out)
        return self.run_native([x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))
                                for x in arrays])

    def explain(self):
        return ["kernel: operands copied to the native byte order, then tenalg's einsum; "
                "with out=:", *self.fallback.explain()]


def native_order(fallback, run_native, dtypes, dtype):
    """A :class:`NativeOrder` over ``fallback`` where swapped byte order alone keeps the
    operands' dtypes (and ``dtype``) from tenalg's kernels, else ``fallback`` itself."""
    if all(d.isnative for d in dtypes) or (dtype is not None and not np.dtype(dtype).isnative):
        return fallback
    if kernel_reason([d.newbyteorder("=") for d in dtypes], dtype) is not None:
        return fallback
    return NativeOrder(fallback, run_native)


def full_reduction_is_scalar(expression, shapes, optimize):
    """Whether ``np.einsum(expression, ...)`` on operands of ``shapes`` returns its full
    reduction as a NumPy scalar rather than a 0-d array: always with optimize=False (one
    C call) and for one operand; with a path, as its last pairwise step does (a matrix
    product over shared labels returns an array, a plain product of two reduced terms a
    scalar: NumPy 2's ``bmm_einsum``). An expression NumPy cannot take (None: more than
    52 labels), or an optimize that only tenalg takes ("dp", an opt_einsum
    PathOptimizer, a path without NumPy's "einsum_path" head), gives a scalar, as
    tenalg's default call does (such options reached np.einsum_path and raised).

    >>> full_reduction_is_scalar("a,a->", ((3,), (3,)), "greedy")
    False
    >>> full_reduction_is_scalar("a,b->", ((3,), (4,)), "greedy")
    True
    >>> full_reduction_is_scalar("a,a,a->", ((3,),) * 3, "dp")
    True
    """
    numpy_takes = (optimize is None or isinstance(optimize, bool | str)
                   and optimize in NUMPY_OPTIMIZE
                   or isinstance(optimize, list | tuple) and len(optimize) > 0
                   and isinstance(optimize[0], str) and optimize[0] == "einsum_path")
    if optimize is False or len(shapes) == 1 or expression is None or not numpy_takes:
        return True
    return _last_step_is_scalar(expression, shapes, optimize
                                if optimize is None or isinstance(optimize, bool | str)
                                else tuple(tuple(x) if isinstance(x, list | tuple) else x
                                           for x in optimize))


@functools.lru_cache(maxsize=256)
def _last_step_is_scalar(expression, shapes, optimize):
    stand_ins = [np.lib.stride_tricks.as_strided(np.zeros(1), s, (0,) * len(s)) for s in shapes]
    path = list(optimize) if isinstance(optimize, tuple) else optimize
    _, steps = np.einsum_path(expression, *stand_ins, optimize=path, einsum_call=True)
    last = next(x for x in steps[-1] if isinstance(x, str) and "->" in x)
    terms = last.split("->")[0].split(",")
    return len(terms) != 2 or not set(terms[0]) & set(terms[1])


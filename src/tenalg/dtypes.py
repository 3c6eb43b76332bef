"""Storage and compute types, promotion and conversion.

tenalg stores float16, bfloat16, float32, float64, complex64 and complex128.
Arithmetic runs in a *compute type*: float32 or float64 (complex64 or
complex128 for complex data); 16-bit storage always computes in float32 or wider.

>>> import numpy as np
>>> from tenalg import dtypes
>>> dtypes.compute_type([np.float16, np.float32])
dtype('float32')
>>> dtypes.result_type([np.float16, np.float32])
dtype('float32')
"""

import ml_dtypes
import numpy as np

from .errors import DTypeError

bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)

STORAGE_TYPES = (float16, bfloat16, float32, float64, complex64, complex128)
COMPUTE_TYPES = (float32, float64, complex64, complex128)
_WIDE = (float64, complex128)


def storage_type(dtype, what="array"):
    """Return ``dtype`` as a NumPy dtype, or raise DTypeError if tenalg cannot store it."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise DTypeError(f"{what}: {dtype!r} is not a dtype") from exc
    if dt not in STORAGE_TYPES:
        if not dt.isnative and dt.newbyteorder("=") in STORAGE_TYPES:
            raise DTypeError(f"{what}: dtype {dt.str} is {dt.newbyteorder('=')} in the other "
                             "byte order; the kernels read the machine's: pass "
                             "x.astype(x.dtype.newbyteorder('='))")
        names = ", ".join(str(t) for t in STORAGE_TYPES)
        raise DTypeError(f"{what}: dtype {dt} is not supported; tenalg stores {names}")
    return dt


def is_complex(dtype):
    """True for complex64 and complex128."""
    return np.dtype(dtype).kind == "c"


def is_wide(dtype):
    """True for the 64-bit-precision types float64 and complex128."""
    return np.dtype(dtype) in _WIDE


def _with_precision(wide, complex_):
    if complex_:
        return complex128 if wide else complex64
    return float64 if wide else float32


def compute_type(dtypes, requested=None):
    """The compute type for inputs of ``dtypes``.

    float64 if any input is 64-bit, else float32; complex if any input is complex.
    A ``requested`` type narrower than a 64-bit input is a DTypeError, and so is a real
    request with complex inputs (the imaginary parts would be lost).
    """
    dts = [storage_type(d) for d in dtypes]
    wide = any(is_wide(d) for d in dts)
    complex_ = any(is_complex(d) for d in dts)
    if requested is None:
        return _with_precision(wide, complex_)
    req = _compute_request(requested)
    if req not in COMPUTE_TYPES:
        raise DTypeError(
            f"compute type {req} is not supported; use float32, float64, complex64 or complex128"
        )
    if wide and not is_wide(req):
        raise DTypeError(f"compute type {req} is narrower than a 64-bit input; use float64")
    if complex_ and not is_complex(req):
        raise DTypeError(f"compute type {req} is real but an input is complex")
    return req


def _compute_request(requested):
    """A requested compute type as a dtype (NumPy's "data type 'foo' not understood"
    names no argument)."""
    try:
        return np.dtype(requested)
    except TypeError:
        raise DTypeError(f"compute type {requested!r} is not a dtype") from None


def result_type(dtypes, compute=None):
    """Output storage type: the shared input dtype, else the promoted type; complex, of
    the wider precision, where the ``compute`` type (as requested, or chosen) is complex
    and the data real (a complex alpha's result, as ``np.einsum(..., dtype=complex)``).

    >>> result_type([np.float32]), result_type([np.float32], np.complex64)
    (dtype('float32'), dtype('complex64'))
    """
    dts = [storage_type(d) for d in dtypes]
    if (compute is not None and is_complex(_compute_request(compute))
            and not any(map(is_complex, dts))):
        return _with_precision(is_wide(compute) or any(map(is_wide, dts)), True)
    if dts and all(d == dts[0] for d in dts):
        return dts[0]
    return _with_precision(any(is_wide(d) for d in dts), any(is_complex(d) for d in dts))


def real_type(dtype):
    """The real counterpart of a compute or storage type (complex64 -> float32)."""
    dt = np.dtype(dtype)
    if dt == complex64:
        return float32
    if dt == complex128:
        return float64
    return dt

"""Errors raised by tenalg.

Every error derives from :class:`TenalgError` and from the builtin that fits it
(``ValueError`` or ``TypeError``), so ``except ValueError`` keeps working.
All checks happen before anything is written.

>>> import tenalg as ta
>>> issubclass(ta.ExtentError, ValueError)
True
"""

import numpy as np


class TenalgError(Exception):
    """Base class of every tenalg error."""


class ExpressionError(TenalgError, ValueError):
    """An einsum expression that cannot be parsed; carries the position."""

    def __init__(self, message, expression=None, position=None):
        self.expression = expression
        self.position = position
        if expression is not None and position is not None:
            message = f"{message}\n  {expression}\n  {' ' * position}^ (position {position})"
        super().__init__(message)


class DescriptorError(TenalgError, ValueError):
    """A tensor descriptor or operand that is malformed."""


class OperationError(TenalgError, ValueError):
    """An operation whose operands, modes or options do not fit together."""


class ExtentError(OperationError):
    """Two extents of the same mode disagree."""

    def __init__(self, mode, left, right, where=""):
        self.mode, self.left, self.right = mode, left, right
        suffix = f" ({where})" if where else ""
        super().__init__(f"mode {mode!r} has incompatible extents {left} and {right}{suffix}")


class DTypeError(TenalgError, TypeError):
    """A dtype that tenalg does not store or compute in."""


class InputCountError(TenalgError, ValueError):
    """A plan executed with the wrong number of arrays."""


class ScalarCountError(TenalgError, ValueError):
    """A scalar passed that the operation does not take."""


class InputMismatchError(TenalgError, ValueError):
    """An input array that does not match its descriptor in the plan."""


class OutputMismatchError(TenalgError, ValueError):
    """An output array that does not match the plan's output descriptor."""


class OutputTypeError(OutputMismatchError, TypeError):
    """An ``out=`` that is not an array, or whose dtype the result may not be cast to
    under the casting rule (NumPy raises TypeError for both)."""


class SublistError(ExpressionError, TypeError):
    """An interleaved-form sublist that is not a sequence of labels (NumPy: TypeError)."""


class IntegerTypeError(DescriptorError, TypeError):
    """An axis, offset, extent or stride that is not an integer (bools included): a
    DescriptorError and the TypeError NumPy raises there."""


class AxisError(DescriptorError, np.exceptions.AxisError):
    """An axis out of range: a DescriptorError and NumPy's AxisError (a ValueError and an
    IndexError), as NumPy raises there."""


class AliasError(TenalgError, ValueError):
    """An output that overlaps itself or shares memory with an input."""


class BoundsError(TenalgError, ValueError):
    """A layout that would reach outside its array's buffer."""


def type_name(x):
    """The qualified name of the type of ``x`` ("torch.Tensor", "cupy._core.core.ndarray"):
    a bare "ndarray" beside "expected a numpy.ndarray" says nothing.

    >>> type_name(np.ones(2)), type_name(1.0)
    ('numpy.ndarray', 'float')
    """
    cls = type(x)
    return cls.__qualname__ if cls.__module__ == "builtins" else (
        f"{cls.__module__}.{cls.__qualname__}")

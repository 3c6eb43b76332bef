"""tenalg: tensor linear algebra for Python.

Strided dense primitives behind a descriptor -> plan -> execute API, einsum, tensor
trains (:mod:`tenalg.tt`) and symmetric block-sparse tensors (:mod:`tenalg.symmetric`).

>>> import numpy as np, tenalg as ta
>>> float(ta.trace(np.eye(3)))
3.0
"""

# first: the thread pools' spin settings, read once by each library as it loads
from . import pools
# the backends that ship with tenalg register themselves with the seam (tenalg.seam)
from . import backends
from . import seam
from .api import contract
from .api import diagonal
from .api import diagonals
from .api import elementwise_binary
from .api import elementwise_trinary
from .api import inner_product
from .api import inner_product_host
from .api import norm
from .api import norm_host
from .api import partial_trace
from .api import permute
from .api import reduce
from .api import sum
from .api import sum_host
from .api import to_host
from .api import trace
from .descriptors import Binary
from .einsum import EinsumPlan
from .einsum import einsum
from .einsum import einsum_plan
from .numpy_backend import einsum_path
from .numpy_backend import tensordot
from .numpy_backend import transpose
from .descriptors import Operand
from .descriptors import Reduce
from .descriptors import TensorDescriptor
from .descriptors import Unary
from .dtypes import bfloat16
from .errors import AliasError
from .errors import AxisError
from .errors import BoundsError
from .errors import DescriptorError
from .errors import DTypeError
from .errors import ExpressionError
from .errors import ExtentError
from .errors import InputCountError
from .errors import InputMismatchError
from .errors import IntegerTypeError
from .errors import OperationError
from .errors import OutputMismatchError
from .errors import OutputTypeError
from .errors import ScalarCountError
from .errors import SublistError
from .errors import TenalgError
from .operations import Operation
from .plan import Plan
from .views import strided_view

__all__ = [
    "AliasError",
    "AxisError",
    "Binary",
    "BoundsError",
    "DTypeError",
    "DescriptorError",
    "EinsumPlan",
    "ExpressionError",
    "ExtentError",
    "InputCountError",
    "InputMismatchError",
    "IntegerTypeError",
    "Operand",
    "Operation",
    "OperationError",
    "OutputMismatchError",
    "OutputTypeError",
    "Plan",
    "Reduce",
    "ScalarCountError",
    "SublistError",
    "TenalgError",
    "TensorDescriptor",
    "Unary",
    "bfloat16",
    "contract",
    "diagonal",
    "diagonals",
    "einsum",
    "einsum_path",
    "einsum_plan",
    "elementwise_binary",
    "elementwise_trinary",
    "inner_product",
    "inner_product_host",
    "norm",
    "norm_host",
    "partial_trace",
    "permute",
    "reduce",
    "strided_view",
    "sum",
    "sum_host",
    "tensordot",
    "to_host",
    "trace",
    "transpose",
]

__version__ = "0.1.0"

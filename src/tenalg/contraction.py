"""Contractions: ``D = alpha * sum op(A) op(B) + beta * op(C)`` lowered to batched GEMM.

:class:`ContractionKernel` is what a :class:`~tenalg.plan.Plan` runs for the kinds
"contraction" and "sum_product".  For two operands it classifies every mode (batch,
free in A, free in B, contracted, summed in one operand only, broadcast-only in the
output), fuses each group into one matrix axis where the strides allow, and calls
``np.matmul`` in the compute type.  An operand is copied (by a permutation or reduction
plan, converting 16-bit storage to float32 on the way) only when its strides cannot form
a matrix, its dtype is not the compute type, or a unary transform must be applied; the
group orders are chosen so that the fewest bytes move.  The product goes straight into
the output when its layout is a valid GEMM destination, else through a buffer and one
fused epilogue pass.  A sum_product runs pairwise along an opt_einsum path.

>>> import numpy as np, tenalg as ta
>>> a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
>>> op = ta.Operation.contraction(ta.Operand(a, "ik"), ta.Operand(b, "kj"), out_modes="ij")
>>> bool(np.allclose(ta.Plan(op).execute(a, b), a @ b))
True
"""

import functools
import itertools
import math

import numpy as np
import opt_einsum

from . import blas, seam
from .allocation import allocator, strides_match
from .descriptors import Operand, TensorDescriptor, Unary, modes_text
from .dtypes import is_complex
from .einsum_numpy import c_einsum
from .errors import OperationError
from .kernels.reference import load
from .matrices import fold, matrix, natural_order
from .operations import Operation, resolve_extents
from .plan import Plan
from .products import elementwise_product

_LINEAR = (Unary.IDENTITY, Unary.CONJUGATE)
# np.einsum's own C loop, without its Python wrapper (np.einsum where NumPy moved it)
sum_of_products = c_einsum or functools.partial(np.einsum, optimize=False)


class Viewer:
    """Views arrays of one layout as ``groups`` of modes fused into axes (no copy).

    ``modes``/``extents``/``strides`` describe the array; each group is a tuple of its
    folded modes, outer first, that fuse.  Plain arrays go through indexing, transpose
    and reshape (cheap); arrays with repeated modes (diagonals) through ``as_strided``.
    """

    def __init__(self, modes, extents, strides, itemsize, groups):
        folded = fold(Operand(TensorDescriptor(extents, strides, np.float64), modes))
        extent_of = dict(zip(modes, extents, strict=True))
        self.shape = tuple(math.prod(extent_of[m] for m in g) for g in groups)
        self.byte_strides = tuple(folded[g[-1]] * itemsize if g else itemsize for g in groups)
        self.strided = len(set(modes)) != len(modes)
        kept = [m for m, e in zip(modes, extents, strict=True) if e != 1]
        self.index = (*(0 if e == 1 else slice(None) for e in extents), Ellipsis) if (
            1 in extents) else None
        order = tuple(kept.index(m) for g in groups for m in g) if not self.strided else ()
        self.perm = None if order == tuple(range(len(kept))) else order

    @property
    def identity(self):
        """True when arrays of the planned layout are returned as they are."""
        return not self.strided and self.index is None and self.perm is None

    def __call__(self, array):
        if self.strided:
            return np.lib.stride_tricks.as_strided(array, self.shape, self.byte_strides)
        x = array if self.index is None else array[self.index]
        if self.perm is not None:
            x = x.transpose(self.perm)
        return x if x.shape == self.shape else x.reshape(self.shape)


def _viewer(operand, groups):
    d = operand.descriptor
    return Viewer(operand.modes, d.extents, d.strides, d.dtype.itemsize, groups)


class _Side:
    """How one operand reaches the GEMM: a view of the array, or a copy plan."""

    def __init__(self, operand, compute, batch, summed, extents):
        self.operand, self.strides, self.extents = operand, fold(operand), extents
        self.batch, self.summed, self.compute = batch, summed, compute
        real = not is_complex(compute)
        self.unary = Unary.IDENTITY if real and operand.unary is Unary.CONJUGATE else operand.unary
        self.conjugate = self.unary is Unary.CONJUGATE
        self.elements = math.prod(extents[m] for m in self.strides)
        self.fold_view = _viewer(operand, tuple((m,) for m in self.strides))
        if operand.dtype != compute:
            self.forced = f"converts {operand.dtype} to {compute}"
        elif summed:
            self.forced = "sums its own modes first"
        elif self.unary not in _LINEAR:
            self.forced = f"applies {self.unary.value}"
        else:
            self.forced = None

    def reason(self, rows, cols):
        """Why this side must be copied with these group orders (None: it need not)."""
        if self.forced:
            return self.forced
        return None if matrix(self.strides, self.extents, rows, cols) else "cannot form a matrix"

    def finish(self, rows, cols, unary, alpha):
        """Fix the orders; build the copy plan (applying ``unary``, times alpha) if needed."""
        self.copy = self.reason(rows, cols)
        self.alpha, self.plan, self.streams = alpha, None, None
        # a batch mode this side lacks (lifted from the other side's free modes) is an
        # axis of extent 1 here, which np.matmul broadcasts
        groups = tuple((m,) if m in self.strides else () for m in self.batch) + (rows, cols)
        self.shape = tuple(math.prod(self.extents[m] for m in g) for g in groups)
        if self.copy is None:
            self.view = _viewer(self.operand, groups)
            return
        folded = tuple(self.strides)
        self.view = self.fold_view
        source = Operand(TensorDescriptor([self.extents[m] for m in folded],
                                          [self.strides[m] for m in folded],
                                          self.operand.dtype), folded, unary)
        order = tuple(m for m in self.batch if m in self.strides) + rows + cols
        target = dict(out=self.compute, out_modes=order, order="C", compute=self.compute)
        if (not self.summed and unary in _LINEAR and self.operand.dtype == self.compute
                and order and order[-1] == min(folded, key=lambda m: abs(self.strides[m]))):
            # the innermost axis stays innermost: NumPy's strided copy streams it well (its
            # conversions are slow, 16-bit ones 5-20x: those stay with the tenalg plan)
            self.streams = tuple(folded.index(m) for m in order)
            self.target_shape, self.conjugate_copy = tuple(self.extents[m] for m in order), (
                unary is Unary.CONJUGATE and is_complex(self.compute))
            return
        if self.summed:
            self.plan = Plan(Operation.reduction(source, **target))
        else:
            self.plan = Plan(Operation.permutation(source, **target))
        self.beside_gemm = _beside_gemm(self.plan)

    def prepare(self, array, alpha):
        """The operand as a ``(*batch, rows, cols)`` array in the compute type."""
        if self.copy is None:
            return self.view(array)
        scale = alpha if self.alpha else 1
        if self.streams is None:
            with self.beside_gemm():
                return self.plan.execute(self.view(array), alpha=scale).reshape(self.shape)
        x = self.view(array).transpose(self.streams)
        result = np.empty(self.target_shape, self.compute)
        if self.conjugate_copy:
            np.conjugate(x, out=result)
        else:
            np.copyto(result, x, casting="unsafe")
        if scale != 1:
            result *= scale
        return result.reshape(self.shape)


class ContractionKernel:
    """Executes a contraction or sum_product Operation (see the module docstring)."""

    def __init__(self, operation):
        self.operation = operation
        if operation.kind == "sum_product":
            self._impl = Chain(
                operation.inputs, operation.out_modes, path_of(operation, "auto"),
                out=operation.output, addend=operation.addend, compute=operation.compute,
                make=ContractionKernel,
            )
        else:
            self._impl = Pairwise(operation)

    def run(self, out, arrays, c, alpha, beta):
        """out = alpha * contraction(arrays) + beta * op(c); c is unread when beta == 0."""
        self._impl.run(out, arrays, c, alpha, beta)

    @property
    def bare_matmul(self):
        """np.matmul where ``np.matmul(a, b)`` is this contraction into a new output of
        the operation's layout, with nothing else to do; else None."""
        return getattr(self._impl, "bare_matmul", None)

    def explain(self):
        """Lines describing the lowering (GEMM shape, copies, FLOPs, bytes)."""
        return self._impl.explain()


def _unbroadcast(operand, other, out_modes):
    """``operand`` read with extent 1 along its zero-stride axes (a broadcast:
    ``np.broadcast_to``) whose mode only it has and the output keeps: the product is the
    same all along such a mode, so it is computed once and the output broadcast along it
    (a broadcast (2^16, 2^16) operand of ``ij,j->i`` was copied whole, 32 GiB, where
    NumPy's einsum reads its zero stride).

    >>> d = TensorDescriptor((4, 3), (0, 1), np.float64)
    >>> _unbroadcast(Operand(d, "ij"), Operand(d, "kj"), "ikj").descriptor.extents
    (1, 3)
    """
    d = operand.descriptor
    extents = tuple(
        1 if stride == 0 and extent > 1 and mode in out_modes and mode not in other.modes
        and operand.modes.count(mode) == 1 else extent
        for mode, extent, stride in zip(operand.modes, d.extents, d.strides, strict=True))
    if extents == d.extents:
        return operand
    return Operand(TensorDescriptor(extents, d.strides, d.dtype), operand.modes,
                   operand.unary)


# An operand whose contracted modes lie between its free ones ('lnr,n->lr') becomes a
# stack of matrices, its outer free modes the stack's, where its slices hold at least this
# many elements: np.matmul then broadcasts the other operand along them, where the
# operand had been copied.  Each slice costs a product call (about 0.1 us): a
# (100, 32, 100) float64 'lnr,n->lr' copied took 0.29 ms, lifted 0.07, NumPy's einsum 0.11
_LIFT_SLICE = 1 << 7
# ... where the other operand's free modes span at most this many elements: against wider
# products a copy and one GEMM on all threads can cost less ('lnr,nm->lmr' float64, medians
# of alternating runs: m 8 (30, 64, 30) 0.15-0.17 -> 0.07-0.08 ms, (16, 16, 1000) 0.57-0.60
# -> 0.25-0.38; lifted at m 128 (30, 64, 30) 0.37-0.39 -> 0.68-0.70 ms, (16, 16, 1000)
# 2.6-3.0 -> 1.7-2.2; at m 512 (100, 32, 100) 11.5-11.7 -> 15-20 ms)
_LIFT_WIDTH = 16


def lift(a, b, sa, sb, free_a, free_b, inner, extents, compute, out_modes):
    """(the modes that become batch modes (:func:`_lifted`), which operand they are
    lifted from: 0, 1, or None where none are)."""
    options = [_lifted(a, sa, free_a, inner, extents, compute, out_modes, free_b),
               _lifted(b, sb, free_b, inner, extents, compute, out_modes, free_a)]
    side = max((0, 1), key=lambda k: options[k][1])
    return (options[side][0], side) if options[side][0] else ((), None)


def _lifted(operand, strides, free, inner, extents, compute, out_modes, other):
    """(the outer free modes of ``operand`` (``strides`` folded) that the contraction may
    take as batch modes, the elements whose copy that saves): where the operand cannot
    form a matrix of its free and contracted modes in any order and can without them,
    its slices are large enough (:data:`_LIFT_SLICE`) and the products narrow (the
    ``other`` operand's free modes, :data:`_LIFT_WIDTH`), and it would not be copied for
    another reason (its type, a transform, modes summed alone).  One operand at most is
    so lifted: lifted from both, (100, 32, 100) 'lnr,mnk->lrmk' made 5000 small
    products, 62 ms against 34 with both copied."""
    none = (), 0
    if (not inner or operand.dtype != compute or operand.unary not in _LINEAR
            or any(m not in inner and m not in out_modes for m in strides)
            or math.prod(extents[m] for m in other) > _LIFT_WIDTH):
        return none
    deepest = max(abs(strides[m]) for m in inner)
    outer = tuple(m for m in natural_order(strides, free) if abs(strides[m]) > deepest)
    rest = free.difference(outer)
    if not outer or not rest or math.prod(extents[m] for m in rest | inner) < _LIFT_SLICE:
        return none

    def forms(group):  # (only the stride order can fuse; either orientation serves)
        return matrix(strides, extents, natural_order(strides, group),
                      natural_order(strides, inner)) is not None

    elements = math.prod(extents[m] for m in strides)
    return (outer, elements) if forms(rest) and not forms(free) else none


class Pairwise:
    """One contraction of two operands, lowered to np.matmul."""

    def __init__(self, op):
        self.op = op
        extents = op.extents
        a, b = op.inputs
        a, b = _unbroadcast(a, b, op.out_modes), _unbroadcast(b, a, op.out_modes)
        sa, sb, sd = fold(a), fold(b), fold(Operand(op.output, op.out_modes))
        self.out_strides = sd
        free_a = {m for m in sa if m in sd and m not in sb}
        free_b = {m for m in sb if m in sd and m not in sa}
        inner = {m for m in sa if m in sb and m not in sd}
        lifted, _ = lift(a, b, sa, sb, free_a, free_b, inner, extents, op.compute,
                         op.out_modes)
        free_a, free_b = free_a.difference(lifted), free_b.difference(lifted)
        batch = tuple(m for m in sd if (m in sa and m in sb) or m in lifted)
        self.groups = {
            "batch": batch, "free A": free_a, "free B": free_b, "contracted": inner,
            "summed in A": {m for m in sa if m not in sb and m not in sd},
            "summed in B": {m for m in sb if m not in sa and m not in sd},
            "broadcast": {m for m in sd if m not in sa and m not in sb},
        }
        self.empty = op.output.elements == 0
        self.zero = any(extents[m] == 0 for m in (*sa, *sb))
        self.a = _Side(a, op.compute, batch, self.groups["summed in A"], extents)
        self.b = _Side(b, op.compute, batch, self.groups["summed in B"], extents)
        self.batch_size, self.m, self.n, self.k = (
            math.prod(extents[m] for m in g) for g in (batch, free_a, free_b, inner))
        # Batched dots and Hadamard products make 1x1 GEMMs: a direct kernel serves them,
        # and one dot that GEMM could not read in place (a strided or broadcast vector:
        # copying both sides of a 512 MB one took 4-6 s and 1 GB, NumPy's loop 0.1 s)
        self.direct = self.m == 1 and self.n == 1 and (
            self.batch_size > 1 or not self._dot_in_place(sa, sb, inner))
        # work to share among threads goes to blas.matmul (whose parts the threads take in
        # turn: OpenBLAS's own even split waits for a thread that a busy core delays), the
        # rest to np.matmul bare (the check per call cost an 8 x 8 einsum a tenth of its 3 us)
        self.split = blas.splits(self.batch_size, self.m, self.n, self.k)
        # an outer product (k = 1) is NumPy's broadcast product, the same values (one term
        # each): GEMM with k = 1 ran at a third of its speed
        product = np.multiply if self.k == 1 else np.matmul
        self.matmul = blas.matmul if self.split and self.k > 1 else product
        self._choose(sa, sb, sd, free_a, free_b, inner)
        # a narrow product whose operands GEMM could read only as copies: the sum of
        # products reads them once where the copies and GEMM read them three times
        # ('lnr,lmr->nm' of (256, 4, 256) float64 0.86 ms copied, 0.34 so)
        # (copies that convert or transform keep the plans that do that fast)
        if (not self.direct and not self.a.forced and not self.b.forced
                and (self.a.copy or self.b.copy) and self.m * self.n <= 2 * (self.m + self.n)):
            self.direct = True
            self._choose(sa, sb, sd, free_a, free_b, inner)
        self._epilogues = {}
        self.product = elementwise_product(op)  # what runs it without C (products.py)
        if self.direct:  # np.einsum's labels and which sides convert, worked out once
            used = dict.fromkeys([*self.a.strides, *self.b.strides, *self.buffer_modes])
            labels = {m: k for k, m in enumerate(used)}
            self._direct_sides = [
                (side, [labels[m] for m in side.strides],
                 side.operand.dtype != op.compute or side.unary is not Unary.IDENTITY)
                for side in (self.a, self.b)]
            self._direct_out = [labels[m] for m in self.buffer_modes]

    # -- analysis -----------------------------------------------------------------------
    def _dot_in_place(self, sa, sb, inner):
        """Whether a single dot's two sides are vectors that BLAS reads as they are."""
        return any(not (self.a.reason((), ks) or self.b.reason(ks, ()))
                   for ks in {natural_order(sa, inner), natural_order(sb, inner)})

    def _out_matrix(self, rows, cols):
        """The output's fused (rows, cols) axes if GEMM may write there directly."""
        op = self.op
        if (op.output.dtype != op.compute or self.groups["broadcast"] or self.zero
                or self.direct):
            return None
        return matrix(self.out_strides, op.extents, rows, cols)

    def _choose(self, sa, sb, sd, free_a, free_b, inner):
        """Group orders that copy the fewest bytes; conjugation and alpha placement."""
        item = np.dtype(self.op.compute).itemsize

        def candidates(group, *layouts):
            return list(dict.fromkeys(natural_order(s, group) for s in layouts))

        best = None
        for rows, cols, ks in itertools.product(candidates(free_a, sa, sd),
                                                candidates(free_b, sb, sd),
                                                candidates(inner, sa, sb)):
            cost = sum(side.elements * item for side, r, c in ((self.a, rows, ks),
                                                               (self.b, ks, cols))
                       if side.reason(r, c))
            if self._out_matrix(rows, cols) is None:
                cost += 2 * self.op.output.elements * item
            if best is None or cost < best[0]:
                best = (cost, rows, cols, ks)
        _, rows, cols, ks = best
        sides = ((self.a, rows, ks), (self.b, ks, cols))
        kept = [s for s, r, c in sides if not s.reason(r, c)]
        if len({s.conjugate for s in kept}) > 1 or (
            any(s.conjugate for s in kept)
            and any(s.unary not in _LINEAR for s, r, c in sides if s.reason(r, c))
        ):
            # conj(A) B needs conj on one side: copy the smaller of the uncopied sides
            smaller = min(kept, key=lambda s: s.elements if s.conjugate else math.inf)
            smaller.forced = "applies conjugate"
            kept.remove(smaller)
        # conj(A) conj(B) = conj(A B): when the uncopied sides are conjugated, so is D.
        self.conj_result = bool(kept) and kept[0].conjugate and not self.direct
        copied = [s for s, r, c in sides if s.reason(r, c)]
        fold_alpha = min(copied, key=lambda s: s.elements) if copied else None
        for side, r, c in sides:
            unary = side.unary
            if self.conj_result:
                unary = Unary.IDENTITY if unary is Unary.CONJUGATE else Unary.CONJUGATE
            side.finish(r, c, unary, side is fold_alpha)
        self.alpha_folded = fold_alpha is not None
        self.rows, self.cols, self.ks = rows, cols, ks
        self.buffer_modes = self.groups["batch"] + rows + cols
        self.buffer_shape = tuple(self.op.extents[x] for x in self.buffer_modes)
        self.out_matrix = self._out_matrix(rows, cols)
        if self.out_matrix is not None:
            (_, _), (n, sn) = self.out_matrix
            self.swap = n > 1 and sn != 1  # D is column-major: compute D^T = B^T A^T
            groups = tuple((m,) for m in self.groups["batch"]) + (rows, cols)
            self.out_view = _viewer(Operand(self.op.output, self.op.out_modes), groups)
        # NumPy casts a buffer into the output fast when the innermost axis stays innermost
        # (but 16-bit conversions 5-20x slower than the tenalg plan)
        modes = self.buffer_modes
        self.cast_view = None
        if not self.groups["broadcast"] and self.op.output.dtype.itemsize > 2 and (
                not modes or modes[-1] == min(modes, key=lambda m: abs(sd[m]))):
            self.cast_view = _viewer(Operand(self.op.output, self.op.out_modes),
                                     tuple((m,) for m in modes))
        # a direct sum of products in the output's type goes straight into it: through a
        # buffer and a copy, a 256^2 'ij,ij->ij' took 344 us, np.einsum 56
        self.direct_into = (self.direct and self.cast_view is not None
                            and self.op.output.dtype == self.op.compute)
        # the arrays themselves are the GEMM's matrices: one np.matmul call and nothing else
        self.plain = (self.out_matrix is not None and not self.swap and not self.conj_result
                      and all(s.copy is None and s.view.identity and s.operand.descriptor.ndim
                              == len(s.shape) and s.shape == s.operand.descriptor.extents
                              for s in (self.a, self.b))
                      and self.out_view.identity
                      and self.out_view.shape == self.op.output.extents)
        # ... into a new output that np.matmul's own (np.empty, C-ordered) would equal:
        # einsum calls it bare
        out = self.op.output
        self.bare_matmul = self.matmul if (
            self.plain and self.matmul in (np.matmul, blas.matmul)
            and strides_match(out.strides, TensorDescriptor.contiguous(
                out.extents, out.dtype).strides, out.extents)) else None

    # -- execution ----------------------------------------------------------------------
    def run(self, out, arrays, c, alpha, beta):
        if self.plain and alpha == 1 and beta == 0:
            self.matmul(arrays[0], arrays[1], out=out)
            return
        if self.product is not None and (c is None or beta == 0):
            self.product.execute_into(out, *arrays, alpha=alpha)
            return
        if self.empty:
            return
        if self.direct_into and (c is None or beta == 0):
            d = self.cast_view(out)
            self._direct(arrays, d)
            if alpha != 1:
                np.multiply(d, alpha, out=d)
            return
        if self.zero or self.direct:
            t = (np.zeros(self.buffer_shape, self.op.compute) if self.zero
                 else self._direct(arrays))
            self._epilogue(out, t, c, alpha, beta)
            return
        scale = np.conj(alpha) if self.conj_result else alpha
        a = self.a.prepare(arrays[0], scale)
        b = self.b.prepare(arrays[1], scale)
        if self.out_matrix is not None and beta == 0:
            d = self.out_view(out)
            if self.swap:
                self.matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2), out=d.swapaxes(-1, -2))
            else:
                self.matmul(a, b, out=d)
            if self.conj_result:
                np.conjugate(d, out=d)
            if alpha != 1 and not self.alpha_folded:
                np.multiply(d, alpha, out=d)
            return
        t = self.matmul(a, b)
        if self.conj_result:
            np.conjugate(t, out=t)
        if (c is out and beta == 1 and (alpha == 1 or self.alpha_folded)
                and self.out_matrix is not None and self.op.addend.unary is Unary.IDENTITY):
            d = self.out_view(out)  # D += A B in place, the sum over block pairs
            np.add(d, t, out=d)
            return
        self._epilogue(out, t.reshape(self.buffer_shape), c,
                       1 if self.alpha_folded else alpha, beta)

    def _direct(self, arrays, out=None):
        """A strided sum of products over the folded views (np.einsum, no BLAS), into
        ``out`` (the output viewed in buffer order) where given; the labels numbered over
        the modes the views have (np.einsum takes 52: an einsum of 53 modes, most of
        extent 1, failed inside NumPy)."""
        args = []
        for (side, labels, converts), array in zip(self._direct_sides, arrays, strict=True):
            x = side.fold_view(array)
            if converts:
                x = load(x, side.unary, self.op.compute)
            args += [x, labels]
        # (a 0-d result: np.einsum returns a NumPy scalar, the epilogue writes an array)
        if out is None:  # (NumPy's C routine refuses out=None)
            return np.asarray(sum_of_products(*args, self._direct_out))
        return sum_of_products(*args, self._direct_out, out=out)

    def _epilogue(self, out, t, c, alpha, beta):
        """out = alpha * t + beta * op(C) in one pass (permuting, broadcasting, casting).

        A reduction plan over no modes: it takes the addend C, even C = out in place.
        """
        plain = c is None or beta == 0
        if self.cast_view is not None and plain:
            if alpha != 1:
                np.multiply(t, alpha, out=t)
            np.copyto(self.cast_view(out), t, casting="unsafe")
            return
        epilogue = self._epilogues.get((t.dtype, plain))
        if epilogue is None:
            op = self.op
            source = Operand(TensorDescriptor.contiguous(self.buffer_shape, t.dtype),
                             self.buffer_modes)
            target = dict(out=op.output, out_modes=op.out_modes, compute=op.compute)
            operation = (Operation.permutation(source, **target) if plain
                         else Operation.reduction(source, op.addend, **target))
            plan = Plan(operation)
            epilogue = self._epilogues[t.dtype, plain] = plan, _beside_gemm(plan)
        plan, beside_gemm = epilogue
        t = t if t.flags.c_contiguous else np.array(t, order="C")
        with beside_gemm():
            if plain:
                plan.execute_into(out, t, alpha=alpha)
            else:
                plan.execute_into(out, t, c, alpha=alpha, beta=beta)

    # -- explanation --------------------------------------------------------------------
    def explain(self):
        g = dict(self.groups, **{"free A": self.rows, "free B": self.cols,
                                 "contracted": self.ks})
        lines = ["modes: " + "; ".join(f"{name} {_names(ms)}" for name, ms in g.items() if ms)]
        if self.product is not None:
            lines.append(f"kernel: elementwise product ({self.product.backend} plan); "
                         "with C:")
        if self.direct:
            lines.append(f"kernel: direct strided sum of products (batch={self.batch_size})")
        elif self.k == 1:
            lines.append(f"kernel: outer product m={self.m} n={self.n} batch={self.batch_size}"
                         f" (np.multiply, broadcast, {self.op.compute})")
        else:
            lines.append(f"kernel: GEMM m={self.m} n={self.n} k={self.k} "
                         f"batch={self.batch_size} (np.matmul, {self.op.compute}"
                         + (", split among threads)" if blas.splits(
                             self.batch_size, self.m, self.n, self.k, limited=False) else ")")
                         + (", conjugated result" if self.conj_result else ""))
        if self.direct:  # the sides read in place, converted where they must be
            copies = [f"{name} ({side.forced}, NumPy)" for name, side in (("A", self.a),
                      ("B", self.b)) if side.forced and not side.summed]
        else:
            copies = [f"{name} ({side.copy}, {_method(side)})"
                      for name, side in (("A", self.a), ("B", self.b)) if side.copy is not None]
        lines.append("copies: " + (", ".join(copies) if copies else "none"))
        if self.out_matrix:
            lines.append("output: written directly by the "
                         + ("product" if self.k == 1 else "GEMM"))
        elif self.direct_into:
            lines.append("output: written directly by the sum of products (C unused)")
        else:
            how = "a NumPy cast when C is unused" if self.cast_view else "a tenalg plan"
            lines.append(f"output: through a buffer, then one pass ({how})")
        lines.append(f"FLOPs: {flops(self.op):.3g}, bytes: {traffic(self.op):.3g}")
        return lines


def _beside_gemm(plan):
    """The context a copy plan runs in next to the GEMM: the Numba kernels on one thread
    (:func:`tenalg.kernels.cpu.one_thread`), other backends as they are."""
    return seam.beside_gemm(plan.runner)


def _method(side):
    return "NumPy strided copy" if side.streams is not None else "tenalg plan"


def _names(modes):
    return " ".join(modes_text([m]) for m in modes) if modes else "-"


def flops(op):
    """FLOPs of a contraction: 2 per real multiply-add, 8 per complex one."""
    modes = set(op.out_modes).union(*(x.modes for x in op.inputs))
    per = 8 if is_complex(op.compute) else 2
    return per * math.prod(op.extents[m] for m in modes)


def traffic(op):
    """Bytes read and written at least once: every input and the output."""
    parts = [x.descriptor for x in op.inputs] + [op.output]
    return float(sum(d.elements * d.dtype.itemsize for d in parts))


# -- n factors: a pairwise chain along a path --------------------------------------------
def path_of(operation, optimize):
    """An opt_einsum path for the factors of a sum_product ``operation``."""
    return find_path([x.modes for x in operation.inputs], operation.out_modes,
                     operation.extents, optimize)


def find_path(modes, out_modes, extents, optimize):
    """A contraction path (list of position tuples, opt_einsum's format) for the factors.

    ``optimize``: "auto", "greedy", "optimal", "dp", "branch-*", True ("auto"),
    False or None (left to right), an explicit path, or an opt_einsum ``PathOptimizer``.

    >>> find_path(["ij", "jk", "kl"], "il", dict(i=100, j=2, k=100, l=2), "optimal")
    [(1, 2), (0, 1)]
    """
    if isinstance(optimize, list | tuple):
        steps = list(optimize[1:] if optimize and optimize[0] == "einsum_path" else optimize)
        return check_path([tuple(step) for step in steps], len(modes))
    if len(modes) == 1:
        return [(0,)]
    if optimize is False or optimize is None or len(modes) == 2:  # (two operands: every
        return [(0, 1)] * (len(modes) - 1)  # optimizer's path; opt_einsum took 0.1 ms)
    present = set(itertools.chain(*modes))  # broadcast-only output modes leave no trace
    out_modes = [m for m in out_modes if m in present]
    symbols = {}
    for m in itertools.chain(*modes, out_modes):
        symbols.setdefault(m, opt_einsum.get_symbol(len(symbols)))
    expression = ",".join("".join(symbols[m] for m in ms) for ms in modes)
    expression += "->" + "".join(symbols[m] for m in out_modes)
    shapes = [tuple(extents[m] for m in ms) for ms in modes]
    path, _ = opt_einsum.contract_path(expression, *shapes, shapes=True,
                                       optimize="auto" if optimize is True else optimize)
    return [tuple(step) for step in path]


def check_path(path, n):
    """``path`` as steps of one or two operands, if it contracts ``n`` operands down to
    one: a step of more (NumPy's and opt_einsum's paths may have them) becomes pairwise
    steps in the order it lists its operands, the result the same.

    >>> check_path([(0, 2), (0, 1)], 3)
    [(0, 2), (0, 1)]
    >>> check_path([(3, 0, 1), (0, 1)], 4)
    [(3, 0), (0, 2), (0, 1)]
    """
    count, pairs = n, []
    for step in path:
        if not step or len(set(step)) != len(step) or not all(
                isinstance(p, int | np.integer) and 0 <= p < count for p in step):
            raise OperationError(f"path step {step} is not distinct positions among {count} "
                                 f"operands (path {path})")
        pairs.append(tuple(step[:2]))
        for k, p in enumerate(step[2:], 2):  # the partial result is last: count - k
            pairs.append((p - sum(q < p for q in step[:k]), count - k))
        count -= len(step) - 1
    if count != 1 or not path:
        raise OperationError(f"path {path} leaves {count} operands of {n}, not one")
    return pairs


def gemm_layout(a, b, out_modes, dtype):
    """A descriptor for the product of ``a`` and ``b`` that a GEMM writes directly.

    Physically: modes in neither operand outermost, then batch modes, A's free modes,
    and B's free modes innermost, each group in its operand's stride order; where the
    contraction lifts an operand's outer free modes to batch modes (:func:`lift`), those
    follow the batch modes and that operand's other free modes go innermost (the wide
    side of the products: a (100, 32, 100) 'lnr,nm->lmr' with m 8 took 0.35 ms into
    (l, r, m), 0.28 into (l, m, r)).

    >>> x = Operand(TensorDescriptor.contiguous((2, 3, 4), np.float32), "bij")
    >>> y = Operand(TensorDescriptor.contiguous((2, 4, 5), np.float32), "bjk")
    >>> gemm_layout(x, y, "bik", np.float32).strides
    (15, 5, 1)
    """
    extents = resolve_extents([("A", a), ("B", b)])
    sa, sb = fold(a), fold(b)
    out_modes = tuple(out_modes)
    rest = [m for m in out_modes if m not in sa and m not in sb]
    batch = natural_order(sa, [m for m in out_modes if m in sa and m in sb])
    free_a = {m for m in out_modes if m in sa and m not in sb}
    free_b = {m for m in out_modes if m in sb and m not in sa}
    inner = {m for m in sa if m in sb and m not in out_modes}
    lifted, side = lift(a, b, sa, sb, free_a, free_b, inner, extents, dtype, out_modes)
    if lifted:
        batch += natural_order((sa, sb)[side], lifted)
    free_a = natural_order(sa, free_a.difference(lifted))
    free_b = natural_order(sb, free_b.difference(lifted))
    free = (*free_b, *free_a) if side == 0 else (*free_a, *free_b)
    strides, step = {}, 1
    for m in reversed((*rest, *batch, *free)):
        strides[m] = step
        step *= max(extents.get(m, 1), 1)
    return TensorDescriptor([extents.get(m, 1) for m in out_modes],
                            [strides[m] for m in out_modes], dtype)


class RunnerStep:
    """A seam runner (:mod:`tenalg.seam`) as one step of a :class:`Chain`."""

    bare_matmul = None

    def __init__(self, runner, operation):
        self.runner = runner
        self._addend = operation.addend is not None

    def run(self, out, arrays, c, alpha, beta):
        arrays = [*arrays, c] if self._addend else arrays
        self.runner.run(out, arrays, {"alpha": alpha, "beta": beta})

    def explain(self):
        return self.runner.explain()


class Chain:
    """Pairwise contractions along ``path``; intermediates in the compute type.

    ``make(operation)`` builds what runs one step, with ContractionKernel's ``run(out,
    arrays, c, alpha, beta)``: a ContractionKernel, or for einsum what the seam chooses
    (a :class:`RunnerStep`); the last step writes ``out`` (a descriptor or dtype) with
    the addend.
    """

    def __init__(self, operands, out_modes, path, *, out, addend, compute, make, order="K"):
        current = list(operands)
        self.steps = []
        self.one = np.ones((), compute)
        for k, pair in enumerate(path):
            picked = [current[p] for p in sorted(pair)]
            for p in sorted(pair, reverse=True):
                del current[p]
            last = k == len(path) - 1
            if len(picked) == 1:
                picked.append(Operand(TensorDescriptor((), (), compute), ()))
            if last:
                target = out
                if not isinstance(out, TensorDescriptor) and order == "K":
                    target = gemm_layout(*picked, out_modes, out)
                operation = Operation.contraction(*picked, addend, out=target, order=order,
                                                  out_modes=out_modes, compute=compute)
            else:
                later = set(out_modes).union(*(x.modes for x in current))
                modes = tuple(dict.fromkeys(m for x in picked for m in x.modes if m in later))
                operation = Operation.contraction(*picked, out=gemm_layout(*picked, modes, compute),
                                                  out_modes=modes, compute=compute)
                current.append(Operand(operation.output, modes))
            self.steps.append((tuple(sorted(pair)), make(operation), operation))
        self._allocate = [allocator(operation.output) for _, _, operation in self.steps]
        self.path = [pair for pair, _, _ in self.steps]

    def run(self, out, arrays, c, alpha, beta):
        if len(self.steps) == 1 and len(arrays) == 2:
            self.steps[0][1].run(out, arrays, c, alpha, beta)
            return
        arrays = list(arrays)
        for k, (pair, runner, _) in enumerate(self.steps):
            picked = [arrays[p] for p in pair]
            for p in reversed(pair):
                del arrays[p]
            if len(picked) == 1:
                picked.append(self.one)
            if k == len(self.steps) - 1:
                runner.run(out, picked, c, alpha, beta)
            else:
                result = self._allocate[k]()
                runner.run(result, picked, None, 1, 0)
                arrays.append(result)

    @property
    def bare_matmul(self):
        """The single step's :attr:`ContractionKernel.bare_matmul`, where there is one."""
        if len(self.steps) != 1 or self.steps[0][0] != (0, 1):
            return None
        return getattr(self.steps[0][1], "bare_matmul", None)

    def explain(self):
        total = sum(flops(operation) for _, _, operation in self.steps)
        lines = [f"path: {self.path} ({len(self.steps)} pairwise steps, {total:.3g} FLOPs)"]
        for k, (pair, runner, operation) in enumerate(self.steps):
            ins = " * ".join(modes_text(x.modes, "(scalar)") for x in operation.inputs)
            lines.append(f"step {k}: {pair} {ins} -> "
                         f"{modes_text(operation.out_modes, '(scalar)')}")
            lines.extend("  " + line for line in runner.explain())
        return lines



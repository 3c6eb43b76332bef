"""The backend seam: plans ask registered backends in order and keep the first runner;
a backend added from outside (here, one that counts calls and delegates to the reference
kernels, and one for arrays that are not NumPy's) plugs in without touching plan.py."""

import threading

import numpy as np
import pytest

import tenalg as ta
from tenalg import seam
from tenalg.backends.reference import ReferenceBackend


class Counting:
    """Runs everything the reference backend runs, and counts what it prepares and runs."""

    name = "counting"

    def __init__(self):
        self.prepared = self.runs = 0
        self._reference = ReferenceBackend()

    def supports(self, operation, kind):
        return self._reference.supports(operation, kind)

    def prepare(self, operation, chosen=False):
        self.prepared += 1
        inner = self._reference.prepare(operation, chosen)
        backend = self

        class Runner:
            reason = "counts calls, then runs the reference"

            def run(self, out, arrays, scalars):
                backend.runs += 1
                inner.run(out, arrays, scalars)

            def explain(self):
                return ["counted"] + inner.explain()

        return Runner()


@pytest.fixture
def counting():
    backend = Counting()
    seam.register(backend, first=True)
    yield backend
    seam.unregister("counting")


def test_a_backend_registered_first_runs_every_kind(counting):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    cases = [
        (ta.Operation.contraction(ta.Operand(a, "ij"), ta.Operand(b, "jk"), out_modes="ik"),
         (a, b), a @ b),
        (ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"), (a,), a.T),
        (ta.Operation.reduction(ta.Operand(a, "ij"), out_modes="j"), (a,), a.sum(0)),
        (ta.Operation.elementwise_binary(ta.Operand(a, "ij"), ta.Operand(a, "ij"),
                                         out_modes="ij", op="mul"), (a, a), a * a),
    ]
    for k, (operation, arrays, expected) in enumerate(cases, 1):
        plan = ta.Plan(operation)
        assert plan.backend == "counting"
        assert "backend: counting (counts calls, then runs the reference)" in plan.explain()
        np.testing.assert_allclose(plan.execute(*arrays), expected)
        out = np.empty_like(expected)
        plan.execute_into(out, *arrays, alpha=2.0)
        np.testing.assert_allclose(out, 2 * expected)
        assert (counting.prepared, counting.runs) == (k, 2 * k)


def test_unregistered_backends_are_no_longer_asked(counting):
    seam.unregister("counting")
    a = np.ones((2, 2))
    assert ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji")).backend \
        == "direct"
    assert counting.prepared == 0


def test_the_default_order_and_who_takes_what():
    assert [b.name for b in seam.registered()][:4] == ["blas", "cpu", "direct", "reference"]
    small, big = np.ones((4, 4)), np.ones((256, 256, 4))
    permute = ta.Operation.permutation
    assert ta.Plan(permute(ta.Operand(small, "ij"), out_modes="ji")).backend == "direct"
    plan = ta.Plan(permute(ta.Operand(big, "ijk"), out_modes="kji", order="C"))
    assert plan.backend == "cpu" and "elements of work pay for the Numba kernels" in plan.reason
    plan = ta.Plan(permute(ta.Operand(small, "ij", unary="exp"), out_modes="ji"))
    assert plan.backend == "reference" and "direct declined" in plan.explain()
    contraction = ta.Operation.contraction(ta.Operand(small, "ij"), ta.Operand(small, "jk"),
                                           out_modes="ik")
    assert ta.Plan(contraction).backend == "blas"


@pytest.mark.parametrize("name", ["blas", "reference"])
def test_contractions_agree_between_backends(name):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 5)) + 1j * rng.standard_normal((3, 4, 5))
    b = rng.standard_normal((5, 4, 2))
    c = rng.standard_normal((2, 3)).astype(complex)
    operation = ta.Operation.contraction(ta.Operand(a, "ijk", unary="conjugate"),
                                         ta.Operand(b, "kjl"), ta.Operand(c, "li"),
                                         out_modes="li")
    got = ta.Plan(operation, backend=name).execute(a, b, c, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(got, 0.5 * np.einsum("ijk,kjl->li", a.conj(), b) + 2 * c)


def test_a_backend_asked_for_by_name_must_support_the_operation():
    a = np.ones((2, 2))
    contraction = ta.Operation.contraction(ta.Operand(a, "ij"), ta.Operand(a, "jk"),
                                           out_modes="ik")
    with pytest.raises(ta.OperationError, match="'cpu' does not run this contraction"):
        ta.Plan(contraction, backend="cpu")
    with pytest.raises(ta.OperationError, match="no backend 'gpu'"):
        ta.Plan(contraction, backend="gpu")
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"),
                   backend="cpu")  # small, but asked for: the cpu backend takes it
    assert plan.backend == "cpu" and plan.reason == "asked for by name"


def test_the_kernels_keyword_still_works_and_says_it_is_deprecated():
    a = np.arange(4.0).reshape(2, 2)
    with pytest.warns(DeprecationWarning, match="backend="):
        plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"),
                       kernels="reference")
    assert plan.backend == "reference"
    np.testing.assert_array_equal(plan.execute(a), a.T)
    with pytest.raises(ta.OperationError), pytest.warns(DeprecationWarning):
        ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"), kernels="gpu")


class Boxed:
    """An array type that is not NumPy's: its kind is this module's name."""

    def __init__(self, data):
        self.data = data

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype


class BoxedBackend:
    """Runs permutations on Boxed arrays; checks its own arrays (the plan cannot)."""

    name = "boxed"

    def supports(self, operation, kind):
        return kind == seam.array_kind(Boxed(None)) and operation.kind == "permutation"

    def prepare(self, operation, chosen=False):
        axes = [operation.inputs[0].modes.index(m) for m in operation.out_modes]

        class Runner:
            reason = "boxed arrays"

            def execute(self, arrays, scalars):
                (x,) = arrays
                if not isinstance(x, Boxed):
                    raise ta.InputMismatchError("expected a Boxed array")
                return Boxed(scalars["alpha"] * np.transpose(x.data, axes))

            def execute_into(self, out, arrays, scalars):
                out.data = self.execute(arrays, scalars).data
                return out

            def explain(self):
                return [f"kernel: np.transpose {axes} on boxed data"]

        return Runner()


def test_a_backend_for_arrays_that_are_not_numpys():
    seam.register(BoxedBackend())
    try:
        x = Boxed(np.arange(6.0).reshape(2, 3))
        operation = ta.Operation.permutation(ta.Operand(ta.TensorDescriptor.contiguous(
            (2, 3), np.float64), "ij"), out_modes="ji")
        plan = ta.Plan(operation, kind=seam.array_kind(x))
        assert plan.backend == "boxed" and "np.transpose [1, 0]" in plan.explain()
        np.testing.assert_array_equal(plan.execute(x, alpha=2).data, 2 * x.data.T)
        out = Boxed(np.empty((3, 2)))
        assert plan.execute_into(out, x) is out
        np.testing.assert_array_equal(out.data, x.data.T)
        with pytest.raises(ta.InputMismatchError):
            plan.execute(x.data)
        # what a plan can check of any array: count, extents, a NumPy dtype
        with pytest.raises(ta.InputCountError):
            plan.execute(x, x)
        with pytest.raises(ta.InputMismatchError, match="extents"):
            plan.execute(Boxed(np.ones((3, 2))))
        with pytest.raises(ta.InputMismatchError, match="dtype"):
            plan.execute(Boxed(x.data.astype(np.float32)))
        with pytest.raises(ta.InputMismatchError, match="expected an array"):
            plan.execute([[1.0] * 3] * 2)
        out = Boxed(np.ones((2, 3)))
        with pytest.raises(ta.OutputMismatchError, match="extents"):
            plan.execute_into(out, x)
        assert out.data.shape == (2, 3)
        with pytest.raises(ta.OperationError, match="no registered backend"):
            ta.Plan(ta.Operation.reduction(ta.Operand(operation.inputs[0].descriptor, "ij"),
                                           out_modes="i"), kind=seam.array_kind(x))
    finally:
        seam.unregister("boxed")


def test_register_checks_what_it_is_given():
    with pytest.raises(ta.OperationError, match="'prepare'"):
        seam.register(type("Half", (), {"name": "half", "supports": None})())
    with pytest.raises(ta.OperationError, match="before"):
        seam.register(Counting(), before="nowhere")
    assert "counting" not in [b.name for b in seam.registered()]


def test_a_runner_for_other_arrays_must_take_the_call_whole():
    """A plan of another kind hands its arrays to the runner's execute: a runner without
    one (the docs' counting wrapper around such a backend) is refused when planned, not
    met with NumPy's checks when run."""

    class Wrapper(Counting):
        name = "wrapper"

        def __init__(self):
            super().__init__()
            self._reference = BoxedBackend()

    seam.register(Wrapper(), first=True)
    try:
        operation = ta.Operation.permutation(ta.Operand(ta.TensorDescriptor.contiguous(
            (2, 3), np.float64), "ij"), out_modes="ji")
        with pytest.raises(ta.OperationError, match="without execute and execute_into"):
            ta.Plan(operation, kind=seam.array_kind(Boxed(None)))
    finally:
        seam.unregister("wrapper")


def test_cached_plans_ask_a_backend_registered_after_them():
    """Each front end, einsum and the symmetric layer keep plans, and a plan keeps its
    backend: registering or removing one empties them (a backend registered after a
    layout's first call was never asked; one removed kept running)."""
    from tenalg.symmetric import U1, BlockTensor, Leg
    from tenalg.symmetric import contract as sym_contract

    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    leg = Leg(U1(), [(0, 2), (1, 3)])
    t = BlockTensor.random((leg, leg.conj()), rng=3)
    calls = [
        (lambda: ta.sum(a, axis=0), a.sum(0)),
        (lambda: ta.permute(a, (1, 0)), a.T),
        (lambda: ta.contract(a, "ij", b, "jk", "ik"), a @ b),
        (lambda: ta.einsum("ij,jk->ki", a, b), (a @ b).T),
        (lambda: ta.elementwise_binary(a, "ij", a, "ij", "ij"), 2 * a),
        (lambda: sym_contract(t, "ij", t, "jk", "ik").to_dense(), t.to_dense() @ t.to_dense()),
    ]
    for call, expected in calls:  # each layout planned, with the shipped backends
        np.testing.assert_allclose(call(), expected)
    counting = Counting()
    seam.register(counting, first=True)
    try:
        for k, (call, expected) in enumerate(calls):
            before = counting.runs
            np.testing.assert_allclose(call(), expected)
            assert counting.runs > before, k
    finally:
        seam.unregister("counting")
    runs = counting.runs
    for call, expected in calls:
        np.testing.assert_allclose(call(), expected)
    assert counting.runs == runs


def test_einsum_contractions_ask_the_seam():
    """ta.einsum's pairwise contractions are plans' contractions: a backend registered
    first runs them (they went to the GEMM kernel directly)."""
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal(s) for s in ((2, 3, 4), (4, 3, 5), (5, 6)))
    counting = Counting()
    seam.register(counting, first=True)
    try:
        np.testing.assert_allclose(ta.einsum("ijk,kjl->il", a, b),
                                   np.einsum("ijk,kjl->il", a, b))
        assert counting.runs == 1
        np.testing.assert_allclose(ta.einsum("ijk,kjl,lm->im", a, b, c),
                                   np.einsum("ijk,kjl,lm->im", a, b, c))
        assert counting.runs == 3
        assert "counted" in ta.einsum_plan("ijk,kjl,lm->im", a, b, c).explain()
    finally:
        seam.unregister("counting")
    assert "counted" not in ta.einsum_plan("ijk,kjl,lm->im", a, b, c).explain()


class Box2(Boxed):
    """A subclass of another module's array type."""


Box2.__module__ = "elsewhere.arrays"


def test_a_front_end_for_another_kind_of_array():
    """register_front_end takes a module or its name; the options a user gave reach it
    (tenalg's defaults do not); a function it lacks is refused, not computed after a
    conversion; a subclass from another package has its base's kind."""
    import types

    module = types.ModuleType("boxed_front_end")
    given = []

    def einsum(subscripts, *operands, dtype=None):
        given.append(dtype)
        return Boxed(np.einsum(subscripts, *[x.data for x in operands]))

    def to_host(x):
        return x.data

    module.einsum, module.to_host = einsum, to_host
    kind = seam.array_kind(Boxed(None))
    seam.register_front_end(kind, module)
    try:
        x = Boxed(np.arange(6.0).reshape(2, 3))
        got = ta.einsum("ij->j", x)
        assert isinstance(got, Boxed) and got.data.tolist() == [3.0, 5.0, 7.0]
        assert ta.einsum("ij->i", x, dtype=np.float32).data.tolist() == [3.0, 12.0]
        assert given == [None, np.float32]
        with pytest.raises(ta.OperationError, match="does not take out="):
            ta.einsum("ij->i", x, out=np.empty(2))
        assert ta.to_host(x) is x.data
        assert seam.array_kind(Box2(None)) == kind
        assert ta.einsum("ij->i", Box2(x.data)).data.tolist() == [3.0, 12.0]
        for call in (lambda: ta.norm(x), lambda: ta.sum(x), lambda: ta.diagonal(x),
                     lambda: ta.elementwise_binary(x, "ij", x, "ij", "ij"),
                     lambda: ta.einsum_plan("ij->i", x), lambda: ta.inner_product(x, x)):
            with pytest.raises(ta.OperationError, match="does not take .* arrays"):
                call()
    finally:
        del seam._FRONT_ENDS[kind]
    assert seam.array_kind(Box2(None)) == "elsewhere"


def test_a_front_end_gets_only_what_the_user_changed_and_every_array_of_its_kind():
    """Front ends were passed tenalg's defaults (alpha=1, beta, offset=0), so a minimal
    one refused plain calls; optimize=False was dropped; an addend c or out of its kind
    beside NumPy operands was read by np.asarray; einsum_plan could not name a kind; the
    host layers read such arrays with np.asarray (found by a second backend probe)."""
    import types

    from tenalg import tt
    from tenalg.symmetric import U1, BlockTensor, Leg

    module = types.ModuleType("boxed_minimal")
    calls = []

    def record(name):
        def function(*args, **options):
            calls.append((name, len(args), options))
            return Boxed(np.zeros(1))
        function.__name__ = name
        return function

    for name in ("reduce", "trace", "diagonal", "sum", "permute", "to_host"):
        setattr(module, name, record(name))

    def contract(a, modes_a, b, modes_b, modes_out, *, c=None):  # no alpha, no beta
        calls.append(("contract", 5, {"c": c}))
        return Boxed(np.zeros(1))

    def elementwise_binary(a, modes_a, b, modes_b, modes_out, op):
        calls.append(("elementwise_binary", 6, {}))
        return Boxed(np.zeros(1))

    def einsum(subscripts, *operands, optimize=None, out=None):
        calls.append(("einsum", subscripts, {"optimize": optimize, "out": out}))
        return Boxed(np.zeros(1))

    def einsum_plan(subscripts, *operands):
        calls.append(("einsum_plan", subscripts, {}))
        return "a plan"

    module.contract, module.elementwise_binary = contract, elementwise_binary
    module.einsum, module.einsum_plan = einsum, einsum_plan
    kind = seam.array_kind(Boxed(None))
    seam.register_front_end(kind, module)
    try:
        x, n = Boxed(np.ones((2, 2))), np.ones((2, 2))
        ta.contract(x, "ij", x, "jk", "ik")
        ta.contract(n, "ij", n, "jk", "ik", c=x)  # an addend of the kind: its front end
        assert calls[-1] == ("contract", 5, {"c": x})
        ta.elementwise_binary(x, "ij", x, "ij", "ij")
        ta.reduce(x, "ij", "i")
        ta.trace(x)
        ta.diagonal(x)
        ta.sum(x, axis=0)
        ta.permute(x)
        assert [options for _, _, options in calls[-5:]] == [{}] * 5
        ta.sum(n, out=x)  # an out of the kind: its front end
        assert calls[-1] == ("sum", 2, {"out": x})
        ta.einsum("ij->i", x, optimize=False)
        assert calls[-1] == ("einsum", "ij->i", {"optimize": False, "out": None})
        ta.einsum(n, [0, 1], [0], out=x)
        assert calls[-1] == ("einsum", "AB->A", {"optimize": None, "out": x})
        descriptor = ta.TensorDescriptor.contiguous((2, 2), np.float64)
        assert ta.einsum_plan("ij->i", descriptor, kind=kind) == "a plan"
        assert ta.einsum_plan(descriptor, [0, 1], [1], kind=kind) == "a plan"
        assert calls[-1] == ("einsum_plan", "AB->B", {})
        with pytest.raises(ta.OperationError, match="does not take alpha="):
            ta.contract(x, "ij", x, "jk", "ik", alpha=2)
        with pytest.raises(ta.OperationError, match="no front end takes nowhere arrays"):
            ta.einsum_plan("ij->i", descriptor, kind="nowhere")
        leg = Leg(U1(), [(0, 2)])
        for call in (lambda: tt.from_dense(x), lambda: tt.TensorCore(x),
                     lambda: BlockTensor.from_dense(x, (leg, leg.conj()))):
            with pytest.raises(ta.DTypeError, match="computes on NumPy arrays.*to_host"):
                call()
    finally:
        del seam._FRONT_ENDS[kind]


def test_errors_name_the_type_in_full_and_execute_into_returns_out():
    a = np.arange(6.0).reshape(2, 3)
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"))
    with pytest.raises(ta.InputMismatchError, match=r"got test_seam\.Boxed"):
        plan.execute(Boxed(a))

    class Quiet(BoxedBackend):  # its execute_into returns nothing
        name = "quiet"

        def prepare(self, operation, chosen=False):
            runner = super().prepare(operation, chosen)
            inner = runner.execute_into
            runner.execute_into = lambda out, arrays, scalars: inner(out, arrays, scalars) and None
            return runner

    seam.register(Quiet())
    try:
        operation = ta.Operation.permutation(ta.Operand(ta.TensorDescriptor.contiguous(
            (2, 3), np.float64), "ij"), out_modes="ji")
        out = Boxed(np.empty((3, 2)))
        plan = ta.Plan(operation, backend="quiet", kind=seam.array_kind(out))
        assert plan.execute_into(out, Boxed(a)) is out
        np.testing.assert_array_equal(out.data, a.T)
    finally:
        seam.unregister("quiet")


class Slow(Counting):
    """Counting, whose prepare waits until told to go on: a plan in the making."""

    name = "slow"

    def __init__(self):
        super().__init__()
        self.preparing, self.go = threading.Event(), threading.Event()

    def prepare(self, operation, chosen=False):
        self.preparing.set()
        assert self.go.wait(60)
        return super().prepare(operation, chosen)


@pytest.mark.parametrize("change", ["register", "unregister"])
@pytest.mark.parametrize("front", ["permute", "einsum", "contract"])
def test_a_plan_made_while_the_backends_change_is_not_kept(change, front):
    """A plan made from the old registry, put in its cache after a registration emptied
    it, stayed: the new backend was never asked, or a removed one kept running (found by
    a probe of threads)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 4 + len(change) + len(front)))  # a layout of its own
    call, expected = {
        "permute": (lambda: ta.permute(a, (2, 1, 0)), a.transpose(2, 1, 0)),
        "einsum": (lambda: ta.einsum("ijk,ijl->kl", a, a), np.einsum("ijk,ijl->kl", a, a)),
        "contract": (lambda: ta.contract(a, "ijk", a, "ljk", "il"),
                     np.einsum("ijk,ljk->il", a, a)),
    }[front]
    slow, counting = Slow(), Counting()
    seam.register(slow, first=True)
    try:
        worker = threading.Thread(target=call)
        worker.start()
        assert slow.preparing.wait(60)
        if change == "register":
            seam.register(counting, first=True)
        else:
            seam.unregister("slow")
        slow.go.set()
        worker.join(60)
        runs = slow.runs
        for _ in range(3):
            np.testing.assert_allclose(call(), expected)
        if change == "register":
            assert counting.runs >= 3  # asked from the next call
        else:
            assert slow.runs == runs  # no longer run
    finally:
        slow.go.set()
        seam.unregister("slow")
        seam.unregister("counting")

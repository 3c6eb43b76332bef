"""Dense front ends on Dask arrays against NumPy, on a real LocalCluster."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
tad = pytest.importorskip("tenalg.distributed")

import tenalg as ta  # noqa: E402
from tenalg.distributed import planner  # noqa: E402
from tenalg.distributed.blockwise import plan  # noqa: E402


def _rand(shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _close(got, want, dtype=np.float64):
    tol = {4: 2e-4, 8: 1e-11}[np.finfo(dtype).dtype.itemsize if np.dtype(dtype).kind == "f"
                               else np.dtype(dtype).itemsize // 2]
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(
        initial=0)))


CASES = [
    ("ij,jk->ik", [(7, 5), (5, 9)], [((3, 4), (2, 3)), ((2, 3), (4, 5))]),
    ("bij,bjk->bik", [(6, 4, 5), (6, 5, 3)], [((1, 2, 3), (4,), (2, 3)), ((1, 5), (5,), (3,))]),
    ("ijk,jkl,lm->im", [(4, 5, 6), (5, 6, 3), (3, 7)], [((1, 3), (2, 3), (6,)),
                                                       ((5,), (1, 5), (1, 2)), ((1, 2), (7,))]),
    ("ii->i", [(6, 6)], [((2, 4), (3, 3))]),
    ("...ij,...jk", [(2, 3, 4), (4, 5)], [((1, 1), (3,), (2, 2)), ((4,), (5,))]),
    ("ij,ij->", [(8, 3), (8, 3)], [((5, 3), (1, 2)), ((8,), (3,))]),
    ("ij,j->ij", [(4, 3), (1,)], [((4,), (1, 2)), ((1,),)]),
]


@pytest.mark.parametrize("expr,shapes,chunks", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_einsum_matches_numpy(client, expr, shapes, chunks, dtype):
    xs = [_rand(s, dtype, i) for i, s in enumerate(shapes)]
    ds = [da.from_array(x, chunks=c) for x, c in zip(xs, chunks, strict=True)]
    got = tad.einsum(expr, *ds, memory_limit=1 << 20).compute()
    _close(got, np.einsum(expr, *xs), dtype)


def test_einsum_small_memory_limit_splits_every_label(client):
    a, b = _rand((40, 30, 20)), _rand((40, 20, 30), seed=1)
    y = tad.einsum("bij,bjk->bik", da.from_array(a, chunks=(40, 30, 20)),
                   da.from_array(b, chunks=(40, 20, 30)), memory_limit=64 << 10)
    assert all(len(c) > 1 for c in y.chunks)
    _close(y.compute(), np.einsum("bij,bjk->bik", a, b))


def test_plan_fits_half_the_limit():
    a = da.ones((4096, 512, 512), chunks=(64, 512, 512))
    b = da.ones((4096, 512, 16), chunks=(64, 512, 16))
    limit = 256 << 20
    chunks = plan([a, b], [tuple("bij"), tuple("bjk")], tuple("bik"), 8, limit)
    sizes = {x: max(c) for x, c in chunks.items()}
    assert planner.task_bytes(sizes, [tuple("bij"), tuple("bjk")], tuple("bik"), 8) <= limit // 2
    assert sum(chunks["b"]) == 4096


def test_empty_arrays(client):
    a, b = np.zeros((0, 4)), np.ones((4, 3))
    got = tad.einsum("ij,jk->ik", da.from_array(a), da.from_array(b)).compute()
    _close(got, a @ b)
    got = tad.einsum("ji,jk->ik", da.from_array(a), da.zeros((0, 3))).compute()
    _close(got, np.zeros((4, 3)))
    assert float(tad.sum(da.zeros((0, 5))).compute()) == 0.0
    assert tad.reduce(da.zeros((3, 0)), "ij", "i", "max").compute().tolist() == [-np.inf] * 3


def test_contract_alpha_beta(client):
    a, b, c = _rand((5, 6)), _rand((6, 4), seed=1), _rand((4, 5), seed=2)
    got = tad.contract(da.from_array(a, chunks=(2, 5)), "ij", da.from_array(b, chunks=(5, 1)),
                       "jk", "ki", alpha=2.0, c=c, beta=-1.0).compute()
    _close(got, 2 * (a @ b).T - c)
    got = tad.contract(da.from_array(a, chunks=2), [0, 1], da.from_array(b, chunks=2), [1, 2],
                       [0, 2]).compute()
    _close(got, a @ b)


@pytest.mark.parametrize("op", ["sum", "product", "min", "max"])
def test_reduce(client, op):
    x = _rand((7, 5, 4))
    got = tad.reduce(da.from_array(x, chunks=(3, 1, 4)), "ijk", "ki", op).compute()
    want = {"sum": np.sum, "product": np.prod, "min": np.min, "max": np.max}[op](x, axis=1).T
    _close(got, np.ascontiguousarray(want))
    if op == "sum":  # ta.reduce's unary_a reaches the Dask front end
        z = x + 1j * x[::-1]
        got = ta.reduce(da.from_array(z, chunks=(3, 1, 4)), "ijk", "ki", unary_a="conjugate")
        _close(got.compute(), np.ascontiguousarray(z.conj().sum(axis=1).T))
        with pytest.raises(ta.OperationError, match="conjugated"):
            tad.reduce(da.from_array(z), "ijk", "ki", unary_a="abs")


@pytest.mark.parametrize("axis", [None, 0, (0, 2), -1])
def test_sum(client, axis):
    x = _rand((9, 4, 5))
    got = tad.sum(da.from_array(x, chunks=((2, 7), (1, 3), 5)), axis=axis).compute()
    _close(got, np.asarray(np.sum(x, axis=axis)))


def test_narrow_integer_and_bool_dtypes_as_numpys(client):
    """sum and trace with dtype=int8, int16 or bool wrap around (or OR) as NumPy's do:
    the Dask path summed in int64 whatever dtype= said (found by a probe)."""
    x = np.full((4, 6), 100, np.int8)
    d = da.from_array(x, chunks=(3, 4))
    for got, want in ((ta.sum(d, dtype=np.int8), np.sum(x, dtype=np.int8)),
                      (ta.sum(d, axis=0, dtype=np.int16), np.sum(x, axis=0, dtype=np.int16)),
                      (ta.trace(d, dtype=np.int8), np.trace(x, dtype=np.int8)),
                      (ta.sum(d > 0, dtype=bool), np.sum(x > 0, dtype=bool))):
        got = got.compute()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_trace_and_partial_trace(client):
    x = _rand((6, 5, 6, 5))
    d = da.from_array(x, chunks=((1, 5), 2, (4, 2), (3, 2)))
    _close(tad.partial_trace(d, [(0, 2), (1, 3)]).compute(),
           np.asarray(np.einsum("ijij->", x)))
    _close(tad.partial_trace(d, [(0, 2)]).compute(), np.einsum("ijil->jl", x))
    m = _rand((7, 7))
    _close(tad.trace(da.from_array(m, chunks=3)).compute(), np.asarray(np.trace(m)))
    _close(np.asarray(ta.trace(m)), np.asarray(np.trace(m)))


def test_front_ends_of_integer_axes_split_chunks_for_a_small_limit(client):
    """sum, permute, trace and partial_trace label axes with ints: a memory model that
    had to split their chunks raised 'keywords must be strings' (einsum's str labels
    did not)."""
    x = _rand((64, 64))
    d = da.from_array(x, chunks=64)
    limit = 8 << 10  # a 32 KB chunk against 4 KB tasks
    for got, want in ((tad.sum(d, axis=0, memory_limit=limit), x.sum(axis=0)),
                      (tad.permute(d, memory_limit=limit), x.T),
                      (tad.trace(d, memory_limit=limit), np.trace(x)),
                      (tad.partial_trace(d, [(0, 1)], memory_limit=limit), np.trace(x))):
        assert got.npartitions > 1 or got.ndim == 0
        _close(got.compute(), np.asarray(want))


def test_unknown_chunk_sizes_and_numpys_path_spelling(client):
    m = _rand((5, 4))
    d = da.from_array(m, chunks=2)
    unknown = d[d[:, 0] > 0.3]  # nan chunk sizes
    for run in (lambda: ta.einsum("ij,kj->ik", unknown, d), lambda: ta.sum(unknown, axis=0)):
        with pytest.raises(ta.OperationError, match="compute_chunk_sizes"):
            run()
    got = ta.einsum("ij,jk,kl->il", d, d.T, d, optimize=["einsum_path", (1, 2), (0, 1)])
    _close(got.compute(), m @ m.T @ m)


def test_permute(client):
    x = _rand((5, 1, 6, 3), np.float32)
    got = tad.permute(da.from_array(x, chunks=(2, 1, 4, 3)), (2, 0, 3, 1), alpha=2).compute()
    _close(got, 2 * np.transpose(x, (2, 0, 3, 1)), np.float32)


def test_numpys_options_through_ta_are_honoured_or_refused(client):
    """ta's front ends hand a Dask array every option given: the Dask front end honours
    it (as NumPy does) or refuses it by name; none is dropped."""
    x = _rand((6, 4, 5))
    d = da.from_array(x, chunks=((1, 5), 3, 2))
    _close(ta.sum(d, axis=(0, 2), keepdims=True).compute(),
           np.sum(x, axis=(0, 2), keepdims=True))
    _close(ta.sum(d, axis=1, dtype=np.float32).compute(),
           np.sum(x, axis=1, dtype=np.float32), np.float32)
    for offset in (0, 2, -3):  # unequal extents: the leading square, as NumPy's
        _close(ta.trace(d, 0, 2, offset=offset).compute(), np.trace(x, offset, 0, 2))
    _close(ta.trace(d, 2, 0, offset=1, dtype=np.complex64).compute(),
           np.trace(x, 1, 2, 0, dtype=np.complex64), np.float32)
    _close(ta.partial_trace(d, [(1, 2)]).compute(), np.trace(x, 0, 1, 2))
    _close(ta.permute(d).compute(), np.transpose(x).copy())
    out = np.zeros(4)
    refused = [(lambda: ta.sum(d, axis=0, out=out), "out="),
               (lambda: ta.sum(d, where=x > 0), "where="),
               (lambda: ta.sum(d, compute_dtype=np.float64), "compute_dtype="),
               (lambda: ta.trace(d, out=out), "out="),
               (lambda: ta.permute(d, out=out), "out="),
               (lambda: ta.einsum("ijk->j", d, out=out), "out="),
               (lambda: ta.einsum("ijk->j", d, order="F"), "order=")]
    for call, option in refused:
        with pytest.raises(ta.OperationError, match=f"of dask arrays does not take {option}"):
            call()
    assert not out.any()
    with pytest.raises(ta.OperationError, match="unknown Unary 'conj'"):
        ta.contract(d, "ijk", d, "ijk", "j", unary_a="conj")


def test_axes_and_casting_are_checked_as_numpy_checks_them(client):
    """Axes were taken modulo the rank (sum over axis 2 of a matrix summed axis 0), and a
    dtype= was a cast of the result: now NumPy's AxisError, and its casting rule with
    the operands cast first."""
    x = _rand((5, 4))
    d = da.from_array(x, chunks=2)
    for call in (lambda: ta.sum(d, axis=2), lambda: ta.sum(d, axis=(0, -3)),
                 lambda: ta.permute(d, (0, 2)), lambda: ta.partial_trace(d, [(0, 2)])):
        with pytest.raises(np.exceptions.AxisError):
            call()
    with pytest.raises(ta.OperationError, match="repeat"):
        ta.partial_trace(da.ones((2, 2, 2, 2), chunks=1), [(0, 1), (1, 0)])
    for offset in (True, 0.0, 1.5):  # as the NumPy front end refuses them
        with pytest.raises(ta.IntegerTypeError):
            ta.trace(d, offset=offset)
    with pytest.raises(TypeError, match="'safe'"):
        ta.einsum("ij,jk->ik", d, d.T, dtype=np.float32)
    narrow = np.einsum("ij,jk->ik", x, x.T, dtype=np.float32, casting="same_kind")
    _close(ta.einsum("ij,jk->ik", d, d.T, dtype=np.float32, casting="same_kind").compute(),
           narrow, np.float32)
    x32 = x.astype(np.float32)  # computed in float64, as NumPy does, not cast after
    wide = ta.einsum("ij,jk->ik", da.from_array(x32, chunks=2), x32.T, dtype=np.float64)
    _close(wide.compute(), np.einsum("ij,jk->ik", x32, x32.T, dtype=np.float64))


def test_run_operation(client):
    a, b = _rand((4, 5)), _rand((5, 3), seed=1)
    op = ta.Operation.contraction(ta.Operand(a, "ij"), ta.Operand(b, "jk"), out_modes="ki")
    got = tad.run_operation(op, [da.from_array(a, chunks=2), da.from_array(b, chunks=2)],
                            alpha=3).compute()
    _close(got, 3 * (a @ b).T)
    perm = ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji")
    _close(tad.BACKEND.prepare(perm).execute([da.from_array(a, chunks=3)]).compute(), a.T.copy())
    out = np.empty((3, 4))
    tad.BACKEND.prepare(op).run(out, [a, b], {"alpha": 2})
    _close(out, 2 * (a @ b).T)
    assert not tad.BACKEND.supports(perm, "numpy")


def test_an_addend_is_read_by_its_modes_and_unary(client):
    """The dask backend added C as given (found by a probe: A @ B + C where the NumPy
    plan gives A @ B + C.T, or + conj(C)); an addend lacking an output mode broadcasts."""
    a, b = _rand((3, 4)), _rand((4, 5), seed=1)
    c = _rand((5, 3), seed=2) + 1j * _rand((5, 3), seed=3)
    for modes, unary, expected in (("ki", "identity", c.T), ("ki", "conjugate", c.T.conj()),
                                   ("k", "identity", c[:, 0])):
        addend = c if len(modes) == 2 else c[:, 0]
        op = ta.Operation.contraction(ta.Operand(a, "ij"), ta.Operand(b, "jk"),
                                      ta.Operand(addend, modes, unary), out_modes="ik")
        got = ta.Plan(op, kind="dask").execute(
            *(da.from_array(x, chunks=2) for x in (a, b, addend)), beta=2).compute()
        _close(got, a @ b + 2 * expected, np.complex128)
        _close(got, ta.Plan(op).execute(a, b, addend, beta=2), np.complex128)


def test_peak_memory_within_twice_the_limit(client):
    """A worker's memory grows by at most twice the limit beyond the blocks it fetched
    from the other worker for its queued tasks (those are Dask's to bound)."""
    from tenalg.distributed.measure import PeakMemory, received

    rng = da.random.default_rng(0)
    a = client.persist(rng.random((32, 256, 256), chunks=(8, 256, 256)))   # 16 MiB
    b = client.persist(rng.random((32, 256, 256), chunks=(8, 256, 256)))
    limit = 8 << 20
    y = tad.einsum("bij,bjk->ik", a, b, memory_limit=limit)
    client.compute(y).result()  # kernels compiled and plans cached in each worker first
    before = received(client)
    with PeakMemory(client) as memory:
        got = client.compute(y).result()
    fetched = {w: n - before[w] for w, n in received(client).items()}
    for w, growth in memory.growth.items():
        assert growth <= 2 * limit + fetched[w], (growth, fetched[w])
    want = np.einsum("bij,bjk->ik", a.compute(), b.compute())
    _close(got, want)


def test_summed_chunks_are_summed_in_place_within_tasks_then_in_a_tree(client):
    """One output block over 8 chunks of j on a cluster of 2 threads: 4 tasks (each
    keeps 2 threads busy twice), each summing 2 block products in place, then a tree."""
    a, b = _rand((6, 64)), _rand((64, 5), seed=1)
    y = tad.einsum("ij,jk->ik", da.from_array(a, chunks=(6, 8)),
                   da.from_array(b, chunks=(8, 5)), memory_limit=1 << 30)
    parts = [k for k in y.__dask_graph__() if isinstance(k, tuple) and "-part" in k[0]]
    assert len(parts) == 4
    _close(y.compute(), a @ b)


def test_a_task_holds_its_total_and_a_panel_not_a_partial_per_batch_chunk():
    """dask issue 10053's shapes (batch axis a in 4, then 8 chunks): a task of tenalg's
    einsum allocates at most twice its output block, dask.array.einsum's more (its
    partials and their sum); measured per task in a fresh process."""
    from tenalg.bench.bench_distributed import w3_task_peaks_apart

    for nchunks in (4, 8):
        peaks = w3_task_peaks_apart(256, 6, nchunks)
        assert peaks["tenalg"] <= 2 < peaks["dask-einsum"], peaks


def test_a_plan_maps_over_a_dask_arrays_blocks(client):
    """A plan built once on the client is shipped to the workers (pickled as its recipe,
    planned again there) and run on every block."""
    import dask.array as da

    x = np.random.default_rng(7).standard_normal((40, 6, 5))
    products = ta.einsum_plan("bij,bkj->bik", x[:10], x[:10])
    blocks = da.from_array(x, chunks=(10, 6, 5))
    got = blocks.map_blocks(lambda b: products(b, b), dtype=x.dtype).compute()
    np.testing.assert_allclose(got, np.einsum("bij,bkj->bik", x, x), rtol=1e-13)
    sums = ta.Plan(ta.Operation.reduction(ta.Operand(x[:10], "bij"), out_modes="bi"))
    got = blocks.map_blocks(sums.execute, drop_axis=2, dtype=x.dtype).compute()
    np.testing.assert_allclose(got, x.sum(axis=2), rtol=1e-13)


def test_every_front_end_takes_dask_arrays(client):
    """The front ends that converted a Dask array to NumPy (computing it whole) or
    refused it with a NumPy error run on it lazily, or refuse it clearly (found by a
    probe that wrote a backend from the docs)."""
    x = _rand((5, 4), np.complex128)
    y = _rand((4,), seed=1)
    dx, dy = da.from_array(x, chunks=(2, 3)), da.from_array(y, chunks=3)
    got = ta.elementwise_binary(dx, "ij", dy, "j", "ji", "mul", alpha=2,
                                unary_a="conjugate")
    assert isinstance(got, da.Array)
    _close(got.compute(), (2 * x.conj() * y).T, np.complex128)
    got = ta.elementwise_binary(dx, "ij", dy, "j", "ij", "add", unary_a="abs")
    _close(got.compute(), ta.elementwise_binary(x, "ij", y, "j", "ij", "add", unary_a="abs"),
           np.complex128)  # (the result type of complex inputs: complex)
    _close(got.compute().real, np.abs(x) + y)
    got = ta.elementwise_trinary(dx, "ij", dy, "j", x, "ij", "ij", "mul", "add", gamma=3)
    _close(got.compute(), x * y + 3 * x, np.complex128)
    _close(ta.inner_product(dx, dx).compute(), np.asarray(np.vdot(x, x)), np.complex128)
    assert ta.inner_product_host(dy, dy) == pytest.approx(float(y @ y))
    _close(ta.norm(dx).compute(), np.asarray(np.linalg.norm(x)))
    assert ta.norm_host(dx) == pytest.approx(np.linalg.norm(x))
    assert ta.norm_host(da.full((4, 4), 1e300, chunks=3)) == pytest.approx(4e300)
    assert ta.norm_host(da.from_array(np.array(-3.0))) == 3.0
    assert ta.norm_host(da.zeros((0, 3), chunks=2)) == 0.0
    assert ta.sum_host(dy) == pytest.approx(y.sum())
    host = ta.to_host(dx)
    assert type(host) is np.ndarray and np.array_equal(host, x)
    np.testing.assert_array_equal(ta.diagonal(dx, 1, 0, offset=-1).compute(),
                                  np.diagonal(x, -1, 1, 0))
    got = ta.tensordot(dx, dy, axes=([1], [0]))
    assert isinstance(got, da.Array)
    _close(got.compute(), np.tensordot(x, y, ([1], [0])), np.complex128)
    _close(ta.contract(dx, "ij", dy, "j", "i", unary_a="conjugate").compute(), x.conj() @ y,
           np.complex128)
    refused = [
        (lambda: ta.einsum_plan("ij->j", dx), "einsum_plan does not take dask"),
        (lambda: ta.elementwise_binary(dx, "ij", dy, "j", "ij", out=np.empty((5, 4))),
         "does not take out="),
        (lambda: ta.elementwise_binary(dx[:4], "ii", dy, "i", "i"), "repeats a mode"),
        (lambda: ta.elementwise_binary(dx, "ij", da.ones(3), "j", "ij"), "extents"),
        (lambda: ta.elementwise_binary(dx, "ij", dy, "j", "i"), "cannot reduce"),
        (lambda: ta.elementwise_binary(dx, "ij", dy, "j", "ij", alpha="x"), "number"),
        (lambda: ta.contract(dx, "ij", dy, "j", "i", unary_a="sqrt"), "conjugated"),
        (lambda: ta.inner_product(dx, dy), "shapes"),
        (lambda: ta.diagonal(dx, 1, -1), "repeat"),
    ]
    for call, message in refused:  # when the graph is built, not when it computes
        with pytest.raises(ta.TenalgError, match=message):
            call()


def test_a_dask_plan_is_checked_as_a_numpy_one(client):
    """Plan(kind="dask") ran whatever it was given: a (5, 3) array through a (4, 3)
    plan, float32 through a float64 one, a surplus array ignored, a wrong out raised
    NumPy's error after computing; and it claimed abs reductions it then refused."""
    a = _rand((4, 3))
    op = ta.Operation.reduction(ta.Operand(a, "ij"), out_modes="j")
    plan = ta.Plan(op, kind="dask")
    _close(plan.execute(da.from_array(a, chunks=2)).compute(), a.sum(0))
    with pytest.raises(ta.InputMismatchError, match="extents"):
        plan.execute(da.ones((5, 3)))
    with pytest.raises(ta.InputMismatchError, match="dtype"):
        plan.execute(da.ones((4, 3), dtype=np.float32))
    with pytest.raises(ta.InputCountError):
        plan.execute(da.ones((4, 3)), da.ones((4, 3)))
    out = np.zeros(4)
    with pytest.raises(ta.OutputMismatchError, match="extents"):
        plan.execute_into(out, da.ones((4, 3)))
    assert not out.any()
    absolute = ta.Operation.reduction(ta.Operand(a, "ij", unary="abs"), out_modes="j")
    assert not tad.BACKEND.supports(absolute, "dask")
    with pytest.raises(ta.OperationError, match="no registered backend"):
        ta.Plan(absolute, kind="dask")

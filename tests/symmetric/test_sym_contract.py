"""Contraction, traces and einsum of block tensors against the same on dense arrays."""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sym_helpers import DTYPES, GROUPS, charge_pool, close, flux_for, in_blocks, legs

from tenalg import errors as ta_errors
from tenalg import symmetric as sym
from tenalg.errors import ExpressionError, OperationError

contract_module = importlib.import_module("tenalg.symmetric.contract")  # not the function
trace_module = importlib.import_module("tenalg.symmetric.trace")


@st.composite
def contraction_case(draw):
    """Two tensors sharing 0-2 dual legs, modes as letters, a random output order."""
    group = draw(st.sampled_from(GROUPS))
    shared = draw(st.lists(legs(group), max_size=2))
    free_a = draw(st.lists(legs(group), max_size=2))
    free_b = draw(st.lists(legs(group), max_size=2))
    letters = iter("abcdefgh")
    s_modes = [next(letters) for _ in shared]
    a_modes = [next(letters) for _ in free_a]
    b_modes = [next(letters) for _ in free_b]
    order_a = draw(st.permutations(range(len(shared) + len(free_a))))
    order_b = draw(st.permutations(range(len(shared) + len(free_b))))
    legs_a = [(m, leg) for m, leg in zip(s_modes + a_modes, shared + free_a, strict=True)]
    legs_b = [(m, leg.conj()) for m, leg in zip(s_modes, shared, strict=True)] + list(
        zip(b_modes, free_b, strict=True))
    legs_a = [legs_a[k] for k in order_a]
    legs_b = [legs_b[k] for k in order_b]
    dtype_a, dtype_b = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))
    tensors = []
    for pairs, dtype in ((legs_a, dtype_a), (legs_b, dtype_b)):
        legs_ = tuple(leg for _, leg in pairs)
        flux = draw(flux_for(legs_)) if legs_ else group.identity
        t = sym.BlockTensor.random(legs_, flux, dtype=dtype, rng=draw(st.integers(0, 99)),
                                   group=group)
        tensors.append((t, "".join(m for m, _ in pairs)))
    out = "".join(draw(st.permutations(a_modes + b_modes)))
    return tensors[0], tensors[1], out


@settings(max_examples=60, deadline=None)
@given(contraction_case())
def test_contract_matches_dense(case):
    (a, ma), (b, mb), out = case
    c = sym.contract(a, ma, b, mb, out)
    expected = np.einsum(f"{ma},{mb}->{out}", a.to_dense(), b.to_dense())
    assert in_blocks(c) and c.flux == a.group.fuse(a.flux, b.flux)
    assert c.dtype == np.result_type(a.dtype, b.dtype)
    assert close(c.to_dense(), expected, c.dtype)
    again = sym.contract(a, list(ma), b, list(mb), list(out))  # cached structure, same result
    assert np.array_equal(again.to_dense(), c.to_dense())


def test_contract_with_a_missing_block_and_int_modes():
    g = sym.ProductGroup(sym.U1(), sym.Zn(2))
    leg = sym.Leg(g, [((0, 0), 2), ((1, 1), 3), ((1, 0), 1)])
    a = sym.BlockTensor.random((leg, leg, leg.conj()), flux=(1, 1), dtype=np.complex128, rng=3)
    b = sym.BlockTensor.random((leg, leg.conj()), flux=(0, 1), rng=4)
    del a.blocks[next(iter(a.blocks))]
    c = sym.contract(a, (0, 1, 2), b, (2, 3), (3, 1, 0))
    assert close(c.to_dense(), np.einsum("ijk,kl->lji", a.to_dense(), b.to_dense()),
                 np.complex128)


@pytest.mark.parametrize("modes", [("ij", "ij", ""), ("ij", "jk", "ik")])
def test_contract_checks_duality_and_sectors(modes):
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    a = sym.BlockTensor.random((leg, leg), rng=0, flux=1)
    with pytest.raises(OperationError, match="dual"):
        sym.contract(a, modes[0], a, modes[1], modes[2])
    other = sym.Leg(sym.U1(), [(0, 2), (1, 2)], dual=True)
    b = sym.BlockTensor.random((other, other), rng=0, flux=-1)
    with pytest.raises(OperationError, match="sectors differ"):
        sym.contract(a, modes[0], b, modes[1], modes[2])


def test_contract_mode_errors():
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    a = sym.BlockTensor.random((leg, leg.conj()), rng=0)
    for ma, mb, out in [("ij", "jk", "ijk"), ("ij", "jk", "i"), ("ii", "jk", "ik"),
                        ("ijk", "jk", "i")]:
        with pytest.raises(OperationError):
            sym.contract(a, ma, a, mb, out)
    z = sym.BlockTensor.random((sym.Leg(sym.Zn(2), [(0, 1)]),), rng=0)
    with pytest.raises(OperationError, match="groups"):
        sym.contract(a, "ij", z, "k", "ijk")


@st.composite
def trace_case(draw):
    group = draw(st.sampled_from(GROUPS))
    traced = draw(st.lists(legs(group), min_size=1, max_size=2))
    free = draw(st.lists(legs(group), max_size=2))
    pool = [("t", k, leg) for k, leg in enumerate(traced)]
    pool += [("d", k, leg.conj()) for k, leg in enumerate(traced)]
    pool += [("f", k, leg) for k, leg in enumerate(free)]
    order = draw(st.permutations(range(len(pool))))
    pool = [pool[k] for k in order]
    legs_ = tuple(leg for _, _, leg in pool)
    t = sym.BlockTensor.random(legs_, draw(flux_for(legs_)), dtype=draw(st.sampled_from(DTYPES)),
                               rng=draw(st.integers(0, 99)))
    pairs = [(pool.index(next(p for p in pool if p[:2] == ("t", k))),
              pool.index(next(p for p in pool if p[:2] == ("d", k)))) for k in range(len(traced))]
    if draw(st.booleans()):
        pairs = [(j, i - t.ndim) for i, j in pairs]  # either order, negative axes
    return t, pairs


def _dense_partial_trace(d, pairs):
    labels = list("abcdefgh"[: d.ndim])
    for i, j in pairs:
        labels[j % d.ndim] = labels[i % d.ndim]
    used = {ax % d.ndim for p in pairs for ax in p}
    kept = "".join(labels[k] for k in range(d.ndim) if k not in used)
    return np.einsum("".join(labels) + "->" + kept, d)


@settings(max_examples=50, deadline=None)
@given(trace_case())
def test_partial_trace_matches_dense(case):
    t, pairs = case
    r = sym.partial_trace(t, pairs)
    assert in_blocks(r) and r.flux == t.flux
    assert close(r.to_dense(), _dense_partial_trace(t.to_dense(), pairs), t.dtype)
    if len(pairs) == 1:
        assert np.array_equal(sym.trace(t, *pairs[0]).to_dense(), r.to_dense())


def test_trace_errors():
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    t = sym.BlockTensor.random((leg, leg, leg.conj()), flux=1, rng=0)
    with pytest.raises(OperationError, match="dual"):
        sym.trace(t, 0, 1)
    with pytest.raises(OperationError, match="repeat"):
        sym.partial_trace(t, [(0, 2), (2, 1)])
    with pytest.raises(ta_errors.AxisError, match="out of range"):
        sym.trace(t, 0, 3)
    with pytest.raises(ta_errors.IntegerTypeError, match="integer"):
        sym.trace(t, 0, 1.0)
    with pytest.raises(OperationError, match="pairs of axes"):
        sym.partial_trace(t, [(0, 2, 1)])


@settings(max_examples=25, deadline=None)
@given(contraction_case(), st.data())
def test_einsum_matches_dense(case, data):
    (a, ma), (b, mb), out = case
    e = sym.einsum(f"{ma},{mb}->{out}", a, b)
    assert close(e.to_dense(), np.einsum(f"{ma},{mb}->{out}", a.to_dense(), b.to_dense()),
                 e.dtype)


def test_einsum_chains_traces_and_implicit_output():
    leg = sym.Leg(sym.U1(), [(-1, 2), (0, 3), (1, 2)])
    phys = sym.Leg(sym.U1(), [(0, 1), (1, 1)])
    a = sym.BlockTensor.random((leg, phys, leg.conj()), rng=1, dtype=np.complex128)
    w = sym.BlockTensor.random((phys.conj(), phys, leg, leg.conj()), rng=2)
    da, dw = a.to_dense(), w.to_dense()
    got = sym.einsum("ipj,pqkk,jrl->iqrl", a, w, a)
    assert close(got.to_dense(), np.einsum("ipj,pqkk,jrl->iqrl", da, dw, da), np.complex128)
    b = sym.permute(a.conj(), (2, 1, 0))
    got = sym.einsum("ipj,jqi", a, b)  # implicit output "pq"
    assert got.legs == (phys, phys.conj())
    assert close(got.to_dense(), np.einsum("ipj,jqi", da, b.to_dense()), np.complex128)
    with pytest.raises(OperationError, match="dual"):
        sym.einsum("ipj,ipj->", a, a)
    assert close(sym.einsum("ipj,ipj->", a.conj(), a).to_dense(), np.vdot(da, da),
                 np.complex128)


@pytest.mark.parametrize("expr", ["ij,jk->ik,", "ij->i", "ij,jk->ijk", "iij->j", "i.j",
                                  "ij->ii", "ij,jk"])
def test_einsum_expression_errors(expr):
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    a = sym.BlockTensor.random((leg, leg.conj()), rng=0)
    with pytest.raises(ExpressionError):
        sym.einsum(expr, a)


def test_large_and_small_sectors_mix_gathered_and_direct_work():
    """Sectors of 1 and 80 (20 in the trace): small ones gathered, large ones pair by pair."""
    leg = sym.Leg(sym.U1(), [(0, 80), (1, 1), (2, 2), (-1, 1)])
    phys = sym.Leg(sym.U1(), [(0, 1), (1, 1)])
    a = sym.BlockTensor.random((leg, phys, leg.conj()), rng=0)
    b = sym.BlockTensor.random((leg.conj(), phys.conj(), leg), dtype=np.complex128, rng=1)
    spec = contract_module._spec(a.legs, tuple("lpm"), b.legs, tuple("lpr"), tuple("mr"))
    schedule = contract_module._schedule(spec, tuple(a.blocks), tuple(b.blocks), a.dtype,
                                         b.dtype, a.group, (a.flux, b.flux))
    assert schedule.sectors and schedule.direct
    c = sym.contract(a, "lpm", b, "lpr", "mr")  # sums over l and p
    assert close(c.to_dense(), np.einsum("lpm,lpr->mr", a.to_dense(), b.to_dense()),
                 np.complex128)
    c = sym.contract(b, "lpr", a, "lpm", "mr")  # a's free leg first: the operands swap
    assert close(c.to_dense(), np.einsum("lpm,lpr->mr", a.to_dense(), b.to_dense()),
                 np.complex128)
    leg = sym.Leg(sym.U1(), [(0, 20), (1, 1)])
    t = sym.BlockTensor.random((leg, leg, leg.conj(), leg.conj()), rng=2)
    schedule = trace_module._schedule(t.group, t.legs, t.flux, tuple(t.blocks), ((0, 2),),
                                          t.dtype)
    assert schedule.gathered and schedule.direct
    assert close(sym.partial_trace(t, [(0, 2)]).to_dense(),
                 np.einsum("abad->bd", t.to_dense()), np.float64)
    assert close(sym.partial_trace(t, [(0, 2), (3, 1)]).to_dense(),
                 np.einsum("abab->", t.to_dense()), np.float64)


def test_gathered_output_blocks_are_views_that_later_operations_accept():
    leg = sym.Leg(sym.U1(), [(-1, 2), (0, 3), (1, 2)])
    phys = sym.Leg(sym.U1(), [(0, 1), (1, 1)])
    a = sym.BlockTensor.random((leg, phys, leg.conj()), rng=5)
    theta = sym.contract(a, "lpm", a, "mqr", "lpqr")
    assert any(block.base is not None for block in theta.blocks.values())
    assert all(block.flags.c_contiguous for block in theta.blocks.values())
    d = np.einsum("lpm,mqr->lpqr", a.to_dense(), a.to_dense())
    assert close(sym.partial_trace(theta, [(0, 3)]).to_dense(), np.einsum("lpql->pq", d),
                 np.float64)
    u, s, v, info = sym.svd(theta, (0, 1), (2, 3))
    back = sym.contract(sym.contract(u, "lpx", s, "xy", "lpy"), "lpy", v, "yqr", "lpqr")
    assert close(back.to_dense(), d, np.float64) and info.discarded_weight == 0


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(GROUPS), st.integers(1, 3), st.sampled_from(DTYPES),
       st.sampled_from(DTYPES), st.data())
def test_sectors_of_one_layout_run_batched(group, dim, dtype_a, dtype_b, data):
    """Sectors of equal dimensions stack into batched plans (contraction and trace)."""
    if dim == 1 and group == sym.U1():  # the batching itself, on one structure
        u1 = sym.Leg(group, [(q, 1) for q in range(-2, 3)])
        a = sym.BlockTensor.random((u1, u1.conj()), rng=0)
        spec = contract_module._spec(a.legs, "ij", a.legs, "jk", "ik")
        schedule = contract_module._schedule(spec, tuple(a.blocks), tuple(a.blocks), a.dtype,
                                             a.dtype, a.group, (a.flux, a.flux))
        assert [gather.shape for gather, _ in schedule.sectors] == [(5, 1, 1)]
        t = sym.BlockTensor.random((u1, u1, u1.conj(), u1.conj()), rng=0)
        schedule = trace_module._schedule(t.group, t.legs, t.flux, tuple(t.blocks), ((0, 2),),
                                          t.dtype)
        assert [gather.shape for gather, _, _ in schedule.gathered] == [(5, 5, 1, 1)]
    charges = charge_pool(group)[:4]
    leg = sym.Leg(group, [(q, dim) for q in charges])
    phys = sym.Leg(group, [(q, 1) for q in charges[:2]])
    legs_ = (leg, phys, leg.conj())
    a = sym.BlockTensor.random(legs_, data.draw(flux_for(legs_)), dtype=dtype_a, rng=0)
    b = sym.BlockTensor.random(legs_, data.draw(flux_for(legs_)), dtype=dtype_b, rng=1)
    da, db = a.to_dense(), b.to_dense()
    tol = np.result_type(dtype_a, dtype_b)
    for out in ("lpqr", "qrlp"):
        c = sym.contract(a, "lpm", b, "mqr", out)
        assert in_blocks(c) and close(c.to_dense(), np.einsum(f"lpm,mqr->{out}", da, db), tol)
    env = sym.contract(a, "lpr", b.conj(), "lps", "rs")
    assert close(env.to_dense(), np.einsum("lpr,lps->rs", da, db.conj()), tol)
    del a.blocks[data.draw(st.sampled_from(sorted(a.blocks)))]  # a hole in a gathered matrix
    env = sym.contract(a, "lpr", b.conj(), "lps", "rs")
    assert close(env.to_dense(), np.einsum("lpr,lps->rs", a.to_dense(), db.conj()), tol)
    t = sym.BlockTensor.random((leg, leg, leg.conj(), leg.conj()), dtype=dtype_a, rng=2)
    for pairs, expr in (([(0, 2)], "abad->bd"), ([(0, 2), (1, 3)], "abab->")):
        r = sym.partial_trace(t, pairs)
        assert in_blocks(r) and close(r.to_dense(), np.einsum(expr, t.to_dense()), dtype_a)


def test_blocks_changed_by_hand_are_read_as_they_are_or_refused():
    """The gathered plans run unchecked on the layer's own buffers: a block the user put
    in Fortran order or another dtype is gathered as its values; a block of the wrong
    shape is refused with a tenalg error, on the pairwise path too."""
    u1 = sym.Leg(sym.U1(), [(0, 3), (1, 4)])
    a = sym.BlockTensor.random((u1, u1.conj()), rng=0)
    b = sym.BlockTensor.random((u1, u1.conj()), rng=1)
    expected = a.to_dense() @ b.to_dense()
    key = sorted(a.blocks)[0]
    a.blocks[key] = np.asfortranarray(a.blocks[key])
    b.blocks[key] = b.blocks[key].astype(np.float32).astype(np.float64)[::1]
    np.testing.assert_allclose(sym.contract(a, "ij", b, "jk", "ik").to_dense(), expected)
    a.blocks[key] = np.asfortranarray(a.blocks[key]).astype(np.float32)  # another dtype
    np.testing.assert_allclose(sym.contract(a, "ij", b, "jk", "ik").to_dense(), expected,
                               rtol=1e-6)
    t = sym.BlockTensor.random((u1, u1, u1.conj(), u1.conj()), rng=2)
    dense = t.to_dense()
    key = sorted(t.blocks)[0]
    t.blocks[key] = np.asfortranarray(t.blocks[key])
    np.testing.assert_allclose(sym.trace(t, 0, 2).to_dense(), np.trace(dense, axis1=0, axis2=2))
    t.blocks[key] = t.blocks[key].astype(np.float32)  # another dtype, read by strides
    np.testing.assert_allclose(sym.trace(t, 0, 2).to_dense(),
                               np.trace(dense, axis1=0, axis2=2), rtol=1e-6)
    a.blocks[key[:2]] = np.ones((2, 2))  # the wrong shape
    with pytest.raises(ta_errors.InputMismatchError, match="shape"):
        sym.contract(a, "ij", b, "jk", "ik")
    a.blocks[key[:2]] = np.ones((3, 1))  # a shape that the copy would broadcast
    with pytest.raises(ta_errors.InputMismatchError, match="shape"):
        sym.contract(a, "ij", b, "jk", "ik")
    a.blocks[key[:2]] = 1j * np.ones((3, 3))  # a complex block in a real tensor
    with pytest.raises(ta_errors.InputMismatchError, match="complex"):
        sym.contract(a, "ij", b, "jk", "ik")

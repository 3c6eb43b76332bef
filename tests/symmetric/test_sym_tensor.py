"""BlockTensor construction, dense round trips, arithmetic and permutation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sym_helpers import DTYPES, GROUPS, close, flux_for, in_blocks, legs

from tenalg import bfloat16
from tenalg import symmetric as sym
from tenalg.errors import DescriptorError, DTypeError, InputMismatchError, OperationError


@st.composite
def tensors(draw, min_legs=1, max_legs=4):
    group = draw(st.sampled_from(GROUPS))
    legs_ = tuple(draw(st.lists(legs(group), min_size=min_legs, max_size=max_legs)))
    flux = draw(flux_for(legs_))
    dtype = draw(st.sampled_from(DTYPES))
    return sym.BlockTensor.random(legs_, flux, dtype=dtype, rng=draw(st.integers(0, 99)))


def _dense_reference(t):
    """Dense array built entry by entry from the conservation law."""
    out = np.zeros(t.shape, t.dtype)
    sector = [np.concatenate([[q] * d for q, d in
                              [(i, d) for i, (_, d) in enumerate(leg.sectors)]]).astype(int)
              for leg in t.legs]
    for index in np.ndindex(*t.shape):
        key = tuple(leg.charges[s[i]] for leg, s, i in zip(t.legs, sector, index, strict=True))
        if key in t.blocks:
            local = tuple(i - leg.slice(q).start for leg, q, i in
                          zip(t.legs, key, index, strict=True))
            out[index] = t.blocks[key][local]
    return out


@settings(max_examples=40, deadline=None)
@given(tensors())
def test_random_conserves_and_round_trips(t):
    assert in_blocks(t)
    assert set(t.blocks) == set(sym.sectors.allowed_keys(t.group, t.legs, t.flux))
    d = t.to_dense()
    assert d.dtype == t.dtype and d.shape == t.shape
    assert np.array_equal(d, _dense_reference(t))
    back = sym.BlockTensor.from_dense(d, t.legs, t.flux)
    assert back.blocks.keys() == t.blocks.keys() and np.array_equal(back.to_dense(), d)
    assert np.isclose(t.norm(), np.linalg.norm(d), rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(tensors(), st.data())
def test_arithmetic_and_conj_match_dense(t, data):
    u = sym.BlockTensor.random(t.legs, t.flux, dtype=t.dtype, rng=data.draw(st.integers(0, 9)))
    del u.blocks[next(iter(u.blocks))]  # a missing block is zero
    d, e = t.to_dense(), u.to_dense()
    assert close((t + u).to_dense(), d + e, t.dtype)
    assert close((t - 2.0 * u).to_dense(), d - 2 * e, t.dtype)
    assert close((-t / 4).to_dense(), -d / 4, t.dtype)
    assert (2.0 * t).dtype == t.dtype
    z = (1j * t)
    assert np.iscomplexobj(z.to_dense()) and close(z.to_dense(), 1j * d, t.dtype)
    c = t.conj()
    assert in_blocks(c) and all(a.dual != b.dual for a, b in zip(c.legs, t.legs, strict=True))
    assert close(c.to_dense(), np.conj(d), t.dtype)
    copy = t.copy()
    next(iter(copy.blocks.values()))[...] = 7
    assert np.array_equal(t.to_dense(), d)


@settings(max_examples=30, deadline=None)
@given(tensors(), st.data())
def test_permute_matches_dense(t, data):
    axes = data.draw(st.permutations(range(t.ndim)))
    p = sym.permute(t, axes)
    assert in_blocks(p) and p.legs == tuple(t.legs[a] for a in axes)
    assert np.array_equal(p.to_dense(), t.to_dense().transpose(axes))
    assert np.array_equal(t.permute(axes).to_dense(), p.to_dense())


def test_zeros_and_rank_zero():
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    z = sym.BlockTensor.zeros((leg, leg.conj()), dtype=np.complex64)
    assert set(z.blocks) == {(0, 0), (1, 1)} and z.dtype == np.complex64 and z.norm() == 0
    s = sym.BlockTensor((), 0, {(): np.array(3.0)})
    assert s.to_dense()[()] == 3.0 and s.shape == ()


def test_from_dense_of_integers_is_float64():
    """As tt.from_dense: it raised DTypeError for an int array (found by a probe)."""
    leg = sym.Leg(sym.U1(), [(0, 1), (1, 2)])
    t = sym.BlockTensor.from_dense(np.eye(3, dtype=int), (leg, leg.conj()))
    assert t.dtype == np.float64
    np.testing.assert_array_equal(t.to_dense(), np.eye(3))


def test_from_dense_names_the_offending_entry():
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    d = sym.BlockTensor.random((leg, leg.conj()), rng=0).to_dense()
    d[0, 2] = 0.5
    with pytest.raises(DescriptorError, match=r"entry \(0, 2\) = 0.5 lies in block \(0, 1\)"):
        sym.BlockTensor.from_dense(d, (leg, leg.conj()))
    d[0, 2] = 1e-14
    sym.BlockTensor.from_dense(d, (leg, leg.conj()))  # within atol
    d[2, 0] = np.nan  # compares false with atol: it was taken as zero
    with pytest.raises(DescriptorError, match=r"entry \(2, 0\) = nan lies in block \(1, 0\)"):
        sym.BlockTensor.from_dense(d, (leg, leg.conj()))
    with pytest.raises(DescriptorError, match="shape"):
        sym.BlockTensor.from_dense(d[:2], (leg, leg.conj()))


def test_constructor_errors():
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    legs_ = (leg, leg.conj())
    with pytest.raises(DescriptorError, match="total charge"):
        sym.BlockTensor(legs_, 0, {(0, 1): np.zeros((2, 1))})
    with pytest.raises(DescriptorError, match="shape"):
        sym.BlockTensor(legs_, 0, {(0, 0): np.zeros((2, 1))})
    with pytest.raises(DescriptorError, match="sector"):
        sym.BlockTensor(legs_, 0, {(5, 5): np.zeros((2, 1))})
    with pytest.raises(DescriptorError, match="one charge per leg"):
        sym.BlockTensor(legs_, 0, {(0,): np.zeros(2)})
    with pytest.raises(DescriptorError, match="mix groups"):
        sym.BlockTensor((leg, sym.Leg(sym.Zn(2), [(0, 1)])))
    t = sym.BlockTensor.random(legs_, rng=0)
    with pytest.raises(OperationError, match="different legs or flux"):
        t + sym.BlockTensor.random(legs_, flux=1, rng=0)
    with pytest.raises(OperationError, match="permutation"):
        sym.permute(t, (0, 0))


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
def test_16_bit_blocks_accumulate_in_float32(dtype):
    leg = sym.Leg(sym.U1(), [(0, 30), (1, 20)])
    a = sym.BlockTensor.random((leg, leg.conj(), leg), flux=1, dtype=dtype, rng=0)
    wide = a.to_dense().astype(np.float32)
    assert np.isclose(a.norm(), np.linalg.norm(wide), rtol=1e-3)
    c = sym.contract(a, "ijk", a.conj(), "ljk", "il")
    assert c.dtype == dtype
    expected = np.einsum("ijk,ljk->il", wide, wide)
    assert np.allclose(c.to_dense().astype(np.float32), expected, rtol=2e-2,
                       atol=2e-2 * np.abs(expected).max())
    t = sym.trace(a, 0, 1)
    assert np.allclose(t.to_dense().astype(np.float32), np.einsum("iik->k", wide), atol=0.3)


def test_arguments_a_user_gets_wrong_are_refused_clearly():
    """A fractional axis was read by int() (1.9 as 1), complex blocks in a real tensor
    lost their imaginary part with only a ComplexWarning."""
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    t = sym.BlockTensor.random((leg, leg, leg.conj()), flux=1, rng=0)
    with pytest.raises(DescriptorError, match="integer"):
        sym.permute(t, (0, 1.9, 2))
    with pytest.raises(DescriptorError, match="out of range"):
        sym.permute(t, (0, 1, 3))
    key = next(iter(t.blocks))
    with pytest.raises(DTypeError, match="imaginary"):
        sym.BlockTensor(t.legs, t.flux, {key: 1j * t.blocks[key]}, dtype=np.float64)
    z = sym.BlockTensor(t.legs, t.flux, {key: 1j * t.blocks[key]})
    assert z.dtype == np.complex128 and np.iscomplexobj(z.to_dense())


def test_einsum_names_a_label_whose_legs_do_not_pair_before_computing():
    bond = sym.Leg(sym.U1(), [(0, 2), (1, 3)])
    phys = sym.Leg(sym.U1(), [(0, 1), (1, 1)])
    a = sym.BlockTensor.random((bond, phys, bond.conj()), rng=0)
    with pytest.raises(OperationError, match="label 'j'"):  # was opt_einsum's ValueError
        sym.einsum("iji,jkl->kl", a, a)
    with pytest.raises(OperationError, match="label 'i'"):
        sym.einsum("ijk,ilm->jklm", a, a)  # two non-dual legs


def _operations():
    """Every operation that reads a tensor's blocks, each with its dense reference on
    ``d``, the tensor's dense array (read from the blocks as they are)."""
    def rebuilt(factors):
        *left, right = factors
        out = left[0]
        for f in left[1:] + [right]:
            out = sym.contract(out, "ax", f, "xb", "ab")
        return out.to_dense()

    return {
        "trace": (lambda t: sym.trace(t, 0, 1).to_dense(), np.trace),
        "partial_trace": (lambda t: sym.partial_trace(t, [(0, 1)]).to_dense(), np.trace),
        "contract": (lambda t: sym.contract(t, "ij", t, "jk", "ik").to_dense(),
                     lambda d: d @ d),
        "contract conj": (lambda t: sym.contract(t, "ij", t.conj(), "kj", "ik").to_dense(),
                          lambda d: d @ d.conj().T),
        "einsum": (lambda t: sym.einsum("ij,jk->ik", t, t).to_dense(), lambda d: d @ d),
        "permute": (lambda t: sym.permute(t, (1, 0)).to_dense(), np.transpose),
        "svd": (lambda t: rebuilt(sym.svd(t, (0,), (1,))[:3]), lambda d: d),
        "qr": (lambda t: rebuilt(sym.qr(t, (0,), (1,))), lambda d: d),
        "add": (lambda t: (t + t).to_dense(), lambda d: 2 * d),
        "scale": (lambda t: (2 * t).to_dense(), lambda d: 2 * d),
        "conj": (lambda t: t.conj().to_dense(), np.conj),
        "norm": (lambda t: t.norm(), np.linalg.norm),
    }


@pytest.mark.parametrize("size", [1, 40])  # blocks gathered, blocks one by one
@pytest.mark.parametrize("name", list(_operations()))
def test_blocks_a_user_put_in_the_dict_are_read_as_values_or_refused(name, size):
    """docs/symmetric.md: a block of another order or real width is read as its values;
    one of another shape, a complex block in a real tensor, or a key that does not
    conserve the flux raises InputMismatchError, in every operation, before any result."""
    operation, reference = _operations()[name]
    leg = sym.Leg(sym.U1(), [(0, size), (1, 2 * size)])

    def edited(edit):
        t = sym.BlockTensor.random((leg, leg.conj()), rng=0)
        block = t.blocks[(1, 1)]
        t.blocks[(1, 1)] = {"fortran": np.asfortranarray(block),
                            "float32": block.astype(np.float32),
                            "list": block.tolist()}.get(edit, block)
        if edit == "shape":
            t.blocks[(0, 0)] = np.ones((size + 1, size + 1))
        elif edit == "complex":
            t.blocks[(1, 1)] = 1j * block
        elif edit == "key":
            t.blocks[(0, 1)] = np.ones((size, 2 * size))
        return t

    for edit in ("fortran", "float32", "list"):
        t = edited(edit)
        expected = reference(edited("none").to_dense())
        np.testing.assert_allclose(operation(t), expected, rtol=1e-5, atol=1e-5 * size)
    for edit, words in (("shape", "shape"), ("complex", "complex"), ("key", "conserve")):
        with pytest.raises(InputMismatchError, match=words):
            operation(edited(edit))

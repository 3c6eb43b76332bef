"""SVD and QR over a bipartition of legs, checked on dense arrays."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sym_helpers import GROUPS, close, flux_for, in_blocks, legs

from tenalg import symmetric as sym
from tenalg.errors import DescriptorError, OperationError

LETTERS = "abcdefgh"


@st.composite
def split_case(draw):
    group = draw(st.sampled_from(GROUPS))
    legs_ = tuple(draw(st.lists(legs(group, max_dim=4), min_size=2, max_size=4)))
    dtype = draw(st.sampled_from([np.float64, np.complex128]))
    t = sym.BlockTensor.random(legs_, draw(flux_for(legs_)), dtype=dtype,
                               rng=draw(st.integers(0, 99)))
    axes = draw(st.permutations(range(t.ndim)))
    cut = draw(st.integers(1, t.ndim - 1))
    return t, tuple(axes[:cut]), tuple(axes[cut:])


def _rebuild(left, middle, right, rows, cols):
    """left . middle . right as a tensor in the order rows + cols."""
    r, c = LETTERS[: len(rows)], LETTERS[len(rows): len(rows) + len(cols)]
    x = left
    if middle is not None:
        x = sym.contract(left, r + "x", middle, "xy", r + "y")
    return sym.contract(x, r + "y", right, "y" + c, r + c)


def _identity_check(q, rows_axes):
    """Q^dagger Q is the identity on the bond (orthonormal columns in every sector)."""
    r = LETTERS[: len(rows_axes)]
    g = sym.contract(q.conj(), r + "x", q, r + "y", "xy").to_dense()
    return np.allclose(g, np.eye(g.shape[0]), atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(split_case())
def test_full_svd_and_qr_rebuild_the_tensor(case):
    t, rows, cols = case
    dense = t.to_dense().transpose(rows + cols)
    u, s, v, info = sym.svd(t, rows, cols)
    assert all(in_blocks(x) for x in (u, s, v)) and info.discarded_weight == 0
    assert u.legs[-1] == s.legs[1] and s.legs[0] == u.legs[-1].conj() == v.legs[0]
    assert v.flux == t.flux and u.flux == s.flux == t.group.identity
    assert close(_rebuild(u, s, v, rows, cols).to_dense(), dense, t.dtype)
    assert _identity_check(u, rows)
    assert np.allclose(np.sort(np.diag(s.to_dense()))[::-1],
                       np.linalg.svd(dense.reshape(np.prod([t.shape[a] for a in rows]), -1),
                                     compute_uv=False)[: s.shape[0]])
    q, r = sym.qr(t, rows, cols)
    assert in_blocks(q) and in_blocks(r) and r.flux == t.flux
    assert close(_rebuild(q, None, r, rows, cols).to_dense(), dense, t.dtype)
    assert _identity_check(q, rows)


@settings(max_examples=30, deadline=None)
@given(split_case(), st.integers(1, 6), st.sampled_from([None, 0.3]))
def test_truncation_error_is_the_discarded_weight(case, max_rank, cutoff):
    t, rows, cols = case
    u, s, v, info = sym.svd(t, rows, cols, max_rank=max_rank, cutoff=cutoff)
    all_values = np.linalg.svd(
        t.to_dense().transpose(rows + cols).reshape(np.prod([t.shape[a] for a in rows]), -1),
        compute_uv=False)
    kept = np.diag(s.to_dense())
    assert 1 <= len(kept) <= max_rank and sum(info.ranks.values()) == len(kept)
    assert np.allclose(np.sort(kept)[::-1], all_values[: len(kept)])  # the largest ones
    if cutoff is not None:
        assert np.all(kept[1:] > cutoff * all_values[0])
    error = _rebuild(u, s, v, rows, cols).to_dense() - t.to_dense().transpose(rows + cols)
    assert np.isclose(np.linalg.norm(error) ** 2, info.discarded_weight, rtol=1e-8, atol=1e-10)
    assert np.isclose(info.discarded_weight, np.sum(all_values[len(kept):] ** 2), atol=1e-10)


def test_bipartition_errors():
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    t = sym.BlockTensor.random((leg, leg, leg.conj()), flux=1, rng=0)
    for rows, cols in [((0,), (1,)), ((), (0, 1, 2)), ((0, 1), (1, 2))]:
        with pytest.raises(OperationError):
            sym.svd(t, rows, cols)
        with pytest.raises(OperationError):
            sym.qr(t, rows, cols)
    for max_rank in (0, 2.5, True):
        with pytest.raises(OperationError, match="max_rank"):
            sym.svd(t, (0,), (1, 2), max_rank=max_rank)
    # out of range (was taken modulo the rank), not an integer
    for rows, cols in [((0, 1), (5,)), ((0, 4), (2,)), ((0.0, 1), (2,))]:
        with pytest.raises(DescriptorError, match="axis"):
            sym.svd(t, rows, cols)
    u, s, v, _ = sym.svd(t, 0, (1, 2))  # one axis as an int, as linalg.svd takes it
    assert close(sym.contract(u, "ia", sym.contract(s, "ab", v, "bjk", "ajk"), "ajk",
                              "ijk").to_dense(), t.to_dense(), t.dtype)
    for cutoff in (-1e-3, float("nan"), float("inf")):
        with pytest.raises(OperationError, match="cutoff"):
            sym.svd(t, (0,), (1, 2), cutoff=cutoff)


def test_product_group_sectors_are_kept_apart():
    g = sym.ProductGroup(sym.U1(), sym.Zn(2))
    leg = sym.Leg(g, [((0, 0), 3), ((0, 1), 2), ((1, 1), 2)])
    t = sym.BlockTensor.random((leg, leg.conj()), rng=5, dtype=np.complex128)
    u, s, v, info = sym.svd(t, (0,), (1,))
    assert set(info.ranks) == {(0, 0), (0, 1), (1, 1)} and info.full_ranks == info.ranks
    assert set(s.blocks) == {(q, q) for q in info.ranks}

"""Groups, legs, fusion."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sym_helpers import GROUPS, legs

from tenalg import symmetric as sym
from tenalg.errors import DescriptorError, OperationError


def test_group_arithmetic():
    u, z = sym.U1(), sym.Zn(3)
    assert (u.fuse(2, -3), u.dual(2), u.identity) == (-1, -2, 0)
    assert (z.fuse(2, 2), z.dual(1), z.canonical(-1)) == (1, 2, 2)
    g = sym.ProductGroup(u, z)
    assert g.fuse_many([(1, 1), (2, 2), (0, 1)]) == (3, 1)
    assert g.dual((1, 1)) == (-1, 2) and g.identity == (0, 0)
    assert g == sym.ProductGroup(sym.U1(), sym.Zn(3)) and g != sym.ProductGroup(u, sym.Zn(2))


@pytest.mark.parametrize("bad", [lambda: sym.Zn(0), lambda: sym.ProductGroup(),
                                 lambda: sym.U1().canonical(1.5),
                                 lambda: sym.ProductGroup(sym.U1()).canonical((1, 2))])
def test_group_errors(bad):
    with pytest.raises(DescriptorError):
        bad()


def test_leg_basics():
    leg = sym.Leg(sym.Zn(2), [(0, 2), (3, 1)])
    assert leg.sectors == ((0, 2), (1, 1)) and leg.dim == 3
    assert leg.slice(1) == slice(2, 3)
    assert leg.conj().dual and leg.conj().conj() == leg and leg != leg.conj()
    assert leg.signed(1) == 1 and leg.conj().signed(1) == 1
    assert hash(leg) == hash(sym.Leg(sym.Zn(2), [(0, 2), (1, 1)]))


@pytest.mark.parametrize("sectors", [[(0, 1), (0, 2)], [(0, -1)], [(0, 1.5)], [(0, 1, 2)]])
def test_leg_errors(sectors):
    with pytest.raises(DescriptorError):
        sym.Leg(sym.U1(), sectors)


def test_contract_compatibility():
    leg = sym.Leg(sym.U1(), [(0, 2), (1, 1)])
    leg.check_contracts_with(leg.conj(), "here")
    with pytest.raises(OperationError, match="dual"):
        leg.check_contracts_with(leg, "here")
    with pytest.raises(OperationError, match="sectors"):
        leg.check_contracts_with(sym.Leg(sym.U1(), [(0, 2), (1, 2)], dual=True), "here")
    with pytest.raises(OperationError, match="groups"):
        leg.check_contracts_with(sym.Leg(sym.Zn(2), [(0, 2), (1, 1)], dual=True), "here")


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_fusion_covers_every_combination(data):
    group = data.draw(st.sampled_from(GROUPS))
    parts = data.draw(st.lists(legs(group), min_size=1, max_size=3))
    dual = data.draw(st.booleans())
    fusion = sym.LegFusion(parts, dual=dual)
    assert fusion.split() == tuple(parts) and fusion.leg.dual == dual
    assert fusion.leg.dim == _product(leg.dim for leg in parts)
    for combo in itertools.product(*(leg.charges for leg in parts)):
        fused, start, shape = fusion.locate[combo]
        total = group.fuse_many(leg.signed(q) for leg, q in zip(parts, combo, strict=True))
        assert fusion.leg.signed(fused) == total
        assert shape == tuple(leg.dims[q] for leg, q in zip(parts, combo, strict=True))
        assert (combo, start, shape) in fusion.parts[fused]
    for fused, entries in fusion.parts.items():  # the parts tile each fused sector
        starts = [start for _, start, _ in entries]
        sizes = [_product(shape) for _, _, shape in entries]
        assert starts == [sum(sizes[:k]) for k in range(len(sizes))]
        assert sum(sizes) == fusion.leg.dims[fused]


def _product(values):
    out = 1
    for v in values:
        out *= v
    return out

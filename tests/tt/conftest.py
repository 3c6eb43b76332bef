"""Fixtures of the tensor-train tests."""

import pytest
from tt_helpers import batched_sweep as _batched_sweep


@pytest.fixture
def batched_sweep():
    """Single trains take the batched SVD sweep, whose bond factorisations a test watches,
    not the compiled sweep of small real trains."""
    with _batched_sweep():
        yield

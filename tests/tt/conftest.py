"""Fixtures of the tensor-train tests."""

import pytest

from tenalg.tt.linalg import smallsweep


@pytest.fixture
def batched_sweep(monkeypatch):
    """Single trains take the batched SVD sweep (tenalg.tt.linalg.sweeps), whose bond
    factorisations a test watches, not the compiled sweep of small real trains."""
    monkeypatch.setattr(smallsweep, "LIMITS", {})

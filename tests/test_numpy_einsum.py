"""NumPy's own einsum test file, run on ``tenalg.einsum``.

The file ships inside the installed NumPy (``numpy/_core/tests/test_einsum.py``); it is
read at test time, never copied here.  As /work/shared/tools/numpy_einsum_tests.py does,
every call ``np.einsum(`` becomes ``tenalg.einsum(`` (the references ``np.einsum`` that
parametrize ``einsum_fn`` beside ``np.einsum_path`` stay NumPy's).  Its tests are
collected into this module.  All 78 pass with NumPy 2.4; KNOWN_DIFFERENCES lists any
test expected to fail, with the reason (docs/einsum.md repeats it) - none today.
"""

import pathlib
import re
import sys
import types

import numpy as np
import pytest

import tenalg

SOURCE = pathlib.Path(np.__file__).parent / "_core" / "tests" / "test_einsum.py"

# test name -> why tenalg differs from NumPy there (marked xfail, strict)
KNOWN_DIFFERENCES = {}


def _load():
    """NumPy's test module with np.einsum( calls on tenalg, or None when not shipped."""
    if not SOURCE.exists():
        return None
    text = re.sub(r"\bnp\.einsum\(", "tenalg.einsum(", SOURCE.read_text())
    module = types.ModuleType("numpy_einsum_tests_on_tenalg")
    module.__file__ = str(SOURCE)
    module.tenalg = tenalg
    sys.modules[module.__name__] = module
    exec(compile(text, str(SOURCE), "exec"), module.__dict__)  # noqa: S102 - NumPy's tests
    return module


_MODULE = _load()
if _MODULE is None:
    pytest.skip(f"NumPy ships no einsum tests at {SOURCE}", allow_module_level=True)

for _name, _value in vars(_MODULE).items():
    if _name.startswith("Test") and isinstance(_value, type):
        globals()[_name] = type(_name, (_value,), {"__module__": __name__})
    elif _name.startswith("test_") and callable(_value):
        globals()[_name] = _value


@pytest.fixture(autouse=True)
def _known_difference(request):
    """Marks the tests of KNOWN_DIFFERENCES as expected failures (strict: a fix shows)."""
    reason = KNOWN_DIFFERENCES.get(request.node.originalname or request.node.name)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))


def test_the_substitution_reaches_tenalg():
    """The collected tests call tenalg.einsum: an int einsum goes through tenalg's plan."""
    assert "tenalg.einsum(" in re.sub(r"\bnp\.einsum\(", "tenalg.einsum(", SOURCE.read_text())
    assert _MODULE.tenalg.einsum is tenalg.einsum

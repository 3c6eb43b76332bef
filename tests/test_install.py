"""Any installation imports and computes (issue 29): a read-only copy of the package, with
no writable home, cache directory or NUMBA_CACHE_DIR, in a fresh interpreter.

Root ignores permission bits, so besides ``chmod -R a-w`` every place Numba or tenalg
could write is made unwritable for root too: the package's ``__pycache__`` directories
and the homes are regular files (nothing can be created under a file).  The kernels pick
the place by trying to create a file there (:mod:`tenalg.kernels.jit`).
"""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import tenalg

SCRIPT = """
import json, sys
import numpy as np
import tenalg as ta
import tenalg.tt  # its small factorisations are Numba functions too
from tenalg.kernels import cpu, jit

# (64, 64, 64): the Numba kernels (some 40 s to compile both on two cores); else NumPy's
# paths, and one small kernel of the cache to fill
n = 64 if sys.argv[1] == "kernels" else 8
x = np.random.default_rng(0).standard_normal((n, n, n))
assert np.array_equal(ta.permute(x, (2, 0, 1)), np.transpose(x, (2, 0, 1)))
np.testing.assert_allclose(ta.sum(x, axis=1), x.sum(axis=1), rtol=1e-12)
assert cpu.sum_of_squares(np.full(1 << 19, 0.5)) == 1 << 17
print(json.dumps({"file": ta.__file__, "place": jit.CACHE_PLACE,
                  "directory": jit.CACHE_DIRECTORY}))
"""

NO_TEMPORARY = """
import tempfile

def no_temporary(*args, **kwargs):
    raise PermissionError("no temporary directory")

tempfile.mkdtemp = no_temporary
"""


def read_only_copy(tmp_path):
    """The installed package's source copied under tmp_path/site, unwritable for anyone."""
    site = tmp_path / "site"
    shutil.copytree(Path(tenalg.__file__).parent, site / "tenalg",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for package in [site / "tenalg", *(site / "tenalg").rglob("*")]:
        if package.is_dir():
            (package / "__pycache__").write_text("")  # a file: no cache directory under it
    for path in [site, *site.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return site


def run(tmp_path, prelude="", kernels=False, **env):
    site = read_only_copy(tmp_path)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    environ = {k: v for k, v in os.environ.items()
               if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH")}
    environ.update(PYTHONPATH=str(site), HOME=str(blocked / "home"),
                   NUMBA_CACHE_DIR=str(blocked / "numba"), PYTHONDONTWRITEBYTECODE="1")
    environ.update({k: str(v) for k, v in env.items() if v is not None})
    for k in [k for k, v in env.items() if v is None]:
        environ.pop(k, None)
    done = subprocess.run([sys.executable, "-c", prelude + SCRIPT,
                           "kernels" if kernels else "numpy"], env=environ,
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["file"] == str(site / "tenalg" / "__init__.py")  # the read-only copy ran
    return result, done.stderr


def restore(tmp_path):
    """Make the copy writable again, so that pytest can remove it."""
    for path in (tmp_path / "site").rglob("*"):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.fixture
def tmp(tmp_path):
    yield tmp_path
    restore(tmp_path)
    (tmp_path / "site").chmod(0o755)


def test_read_only_install_without_home_caches_in_a_temporary_directory(tmp):
    """Nothing writable but the temporary directory: one warning, correct results, a
    cache for this process that is gone after it."""
    result, stderr = run(tmp, kernels=True, XDG_CACHE_HOME=None)
    assert result["place"] == "temporary"
    assert stderr.count("CacheWarning") == 1 and "for this process only" in stderr
    assert not Path(result["directory"]).exists()  # removed at exit


def test_nothing_writable_runs_uncached(tmp):
    """Not even a temporary directory (root can always make one in /tmp, so the test
    takes mkdtemp away): the kernels compile uncached, one warning."""
    result, stderr = run(tmp, NO_TEMPORARY, XDG_CACHE_HOME=None)
    assert result["place"] == "none" and result["directory"] is None
    assert stderr.count("CacheWarning") == 1 and "compile on every run" in stderr
    # the warning names the line that imported tenalg (it named one of tenalg's own)
    assert stderr.split("CacheWarning")[0].splitlines()[-1].startswith("<string>:")


def test_a_writable_user_cache_takes_the_compiled_kernels(tmp):
    """XDG_CACHE_HOME writable: no warning, and the kernels' cache files are there."""
    result, stderr = run(tmp, XDG_CACHE_HOME=tmp / "xdg")
    assert result["place"] == "user" and result["directory"] == str(tmp / "xdg" / "tenalg")
    assert "CacheWarning" not in stderr
    assert list((tmp / "xdg" / "tenalg").rglob("*.nbi"))  # Numba's cache index files


NO_JIT = """
import numpy as np
import tenalg as ta
from tenalg import linalg, tt

rng = np.random.default_rng(0)
x = rng.random((64, 70, 80))
checks = {
    "sum": np.allclose(ta.sum(x), x.sum()),
    "sum over 2": np.allclose(ta.sum(x, axis=2), x.sum(2)),
    "sum over 0, 2": np.allclose(ta.sum(x, axis=(0, 2)), x.sum((0, 2))),
    "permute": np.array_equal(ta.permute(x, (2, 0, 1)), x.transpose(2, 0, 1)),
    "permute float16": np.array_equal(ta.permute(x.astype(np.float16), (2, 0, 1)),
                                      x.astype(np.float16).transpose(2, 0, 1)),
    "trinary": np.allclose(ta.elementwise_trinary(x, "ijk", x, "ijk", x, "ijk", "kij",
                                                  gamma=3), (5 * x).transpose(2, 0, 1)),
    "norm float32": np.isclose(ta.norm(x.astype(np.float32)),
                               np.linalg.norm(x.astype(np.float32))),
    "trace": np.allclose(ta.trace(x[:, :64, :64], 1, 2), np.trace(x[:, :64, :64], 0, 1, 2)),
}
u, s, v, _ = linalg.svd(x[0], [0])
checks["svd"] = np.allclose((u * s) @ v, x[0])
train = tt.random((4,) * 6, 3, rng=1)
twice = tt.round(train + train, 1e-10)
checks["tt.round"] = np.allclose(twice.to_dense(), 2 * train.to_dense())
assert all(checks.values()), checks
"""


def test_numba_with_its_jit_disabled_runs_numpy_code():
    """NUMBA_DISABLE_JIT=1 (set to debug one's own Numba code) turned the kernels into
    Python functions whose intrinsics do nothing: large sums came back nan, permutations
    wrong, other calls raised; `tenalg compile` ended in a traceback (found by a probe).
    The kernels are then never ready: every call takes its NumPy twin."""
    environ = {**os.environ, "NUMBA_DISABLE_JIT": "1", "TENALG_COMPILE": "background"}
    done = subprocess.run([sys.executable, "-c", NO_JIT], env=environ, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "tenalg", "compile", "--dtype", "float64"],
                          env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "NUMBA_DISABLE_JIT is set" in done.stderr, done.stderr


def test_the_compile_mode_is_read_in_any_case_and_an_unknown_one_warns(monkeypatch):
    """TENALG_COMPILE=Wait (or any value but the two) meant "background", silently."""
    from tenalg.kernels import compiler

    for value, expected in (("Wait", "wait"), (" BACKGROUND ", "background"),
                            ("", "background")):
        monkeypatch.setenv("TENALG_COMPILE", value)
        assert compiler.mode() == expected
    monkeypatch.setenv("TENALG_COMPILE", "bogus")
    with pytest.warns(UserWarning, match="'bogus' is neither"):
        assert compiler.mode() == "background"

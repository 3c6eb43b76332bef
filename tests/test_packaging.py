"""What a non-editable install ships: every package under src/tenalg is listed in
pyproject.toml (setuptools installs only the listed ones)."""

import pathlib
import tomllib

import pytest

import tenalg

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject():
    pyproject = ROOT / "pyproject.toml"
    source = ROOT / "src" / "tenalg"
    if not pyproject.exists() or not source.exists():
        pytest.skip("the tests run against an installed tenalg, not a checkout")
    listed = set(tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(source.parent).parts)
             for init in source.rglob("__init__.py")}
    assert found - listed == set(), "packages missing from pyproject.toml"
    assert "tenalg.bench" in listed and tenalg.__name__ in listed

"""Every ```python block of README.md and docs/*.md runs, so the docs cannot rot.

One test per file (new docs/*.md files are picked up as they appear); a file's blocks run
in order in one namespace, in a scratch directory.  A block that shows ``>>>`` prompts
runs as a doctest (ELLIPSIS, NORMALIZE_WHITESPACE), so the outputs it shows are checked;
other python blocks run as scripts.  bash, sh and unlabelled blocks (commands, sample
output) are not run.
"""

import doctest
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[ \t]*([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def python_blocks(text):
    """``(line, code)`` of each ```python block of a markdown ``text``, in order."""
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2))
            for m in FENCE.finditer(text) if m.group(1).lower() in ("python", "py", "pycon")]


def test_blocks_are_found():
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n```\nout\n```\n```python\n>>> x\n1\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (12, ">>> x\n1\n")]


def run_blocks(path, namespace):
    """Run the python blocks of ``path`` in ``namespace``: failures raise AssertionError
    naming the file and line."""
    for line, code in python_blocks(path.read_text()):
        where = f"{path.name}:{line}"
        if re.search(r"^\s*>>> ", code, re.MULTILINE):
            test = doctest.DocTestParser().get_doctest(code, namespace, where, str(path), line)
            runner = doctest.DocTestRunner(optionflags=FLAGS)
            runner.run(test, clear_globs=False)
            assert runner.failures == 0, f"{runner.failures} example(s) failed in {where}"
        else:
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own code


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_code_blocks_run(path, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib").use("Agg")  # no windows from examples that plot
    monkeypatch.chdir(tmp_path)  # files an example writes land in a scratch directory
    run_blocks(path, {"__name__": "__main__"})  # as a script runs them (guards included)


PACKAGES = ["tenalg", "tenalg.linalg", "tenalg.tt", "tenalg.symmetric", "tenalg.distributed"]


def documented_names(text):
    """{package: names} of docs/api.md: the first column of the tables under each
    ``## `package` `` heading."""
    sections = re.split(r"^## `([\w.]+)`\n", text, flags=re.MULTILINE)
    return {package: set(re.findall(r"^\| `(\w+)` \|", body, re.MULTILINE))
            for package, body in zip(sections[1::2], sections[2::2], strict=True)}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_is_in_all_and_in_the_api_page(name):
    if name == "tenalg.distributed":
        pytest.importorskip("dask.distributed")
    package = __import__(name, fromlist=["_"])
    public = {n for n, value in vars(package).items()
              if not n.startswith("_") and type(value).__name__ != "module"}
    public -= {"annotations"}
    assert set(package.__all__) == public
    assert len(package.__all__) == len(set(package.__all__))
    assert documented_names((ROOT / "docs" / "api.md").read_text())[name] == public


def test_the_api_page_is_read_by_package():
    text = "## `a`\n| `x` | y |\n| `z` | w |\n## `a.b`\n| `v` | u |\n"
    assert documented_names(text) == {"a": {"x", "z"}, "a.b": {"v"}}

"""The package's import graph has no circles, and no module imports another of tenalg's
inside a function to dodge one; every module imports on its own in a fresh interpreter."""

import ast
import pathlib
import subprocess
import sys

import tenalg

ROOT = pathlib.Path(tenalg.__file__).parent


def _module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module, node):
    """The absolute names a ``from ... import`` or ``import`` node of ``module`` loads."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = module.split(".")
    is_package = (ROOT.parent / pathlib.Path(*package) / "__init__.py").exists()
    base = package if is_package else package[:-1]
    base = base[:len(base) - node.level + 1] if node.level else []
    stem = ".".join(base + ([node.module] if node.module else []))
    submodules = [f"{stem}.{alias.name}" for alias in node.names]  # those imported by name
    # ``from . import x`` needs the package only begun (x itself is loaded)
    return submodules if node.module is None else [stem, *submodules]


def _graph():
    """{module: (modules imported at top level, tenalg modules imported in functions)}."""
    # (an installed tenalg holds the bench suite as tenalg.bench: `tenalg bench` loads it,
    # and the workloads' optional engines, on demand; it is not part of the library)
    modules = {name: p for p in ROOT.rglob("*.py")
               if not (name := _module_name(p)).startswith("tenalg.bench")}
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        top, inner = set(), set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = {t for t in _resolve(name, node) if t in modules and t != name}
            (top if node in tree.body or _in_guard(tree, node) else inner).update(targets)
        graph[name] = (top, inner)
    return graph


def _in_guard(tree, node):
    """Whether ``node`` sits in a module-level try/if (still a top-level import)."""
    for statement in tree.body:
        if isinstance(statement, ast.Try | ast.If) and node in list(ast.walk(statement)):
            return True
    return False


def _cycle(graph):
    """One import circle among the top-level imports, or None."""
    state = {}

    def visit(module, stack):
        state[module] = "open"
        for target in sorted(graph[module][0]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target, stack + [target])):
                return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module, [module])):
            return found
    return None


def test_no_import_circles():
    assert _cycle(_graph()) is None


def test_no_tenalg_module_is_imported_inside_a_function():
    inner = {name: sorted(targets) for name, (_, targets) in _graph().items() if targets}
    assert inner == {}


def test_every_module_imports_in_a_fresh_interpreter_leaves_first():
    names = sorted(n for n in _graph() if not n.startswith(("tenalg.bench", "tenalg.distributed"))
                   and n != "tenalg.__main__")
    script = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    result = subprocess.run([sys.executable, "-c", script, *reversed(names)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]

"""Numba's compile options for every tenalg kernel, and where their compiled code is cached.

Numba's ``cache=True`` raises at decoration time ("cannot cache function ...: no locator
available") when no directory it knows of is writable: a read-only site-packages without
a writable HOME, or a read-only NUMBA_CACHE_DIR.  tenalg decides once, on import, in
this order, and uses the first place it can write a file in:

1. ``$NUMBA_CACHE_DIR`` (Numba's own choice when set);
2. the package's ``__pycache__`` directories (Numba's default);
3. ``$XDG_CACHE_HOME/tenalg``, else ``~/.cache/tenalg``;
4. a fresh temporary directory, for this process only (removed at exit);
5. nowhere: the kernels compile on every run, uncached.

Cases 4 and 5 print one warning (a :class:`CacheWarning`); nothing here raises.  Other
modules that compile with Numba take :data:`CACHE` for their ``cache=`` option and
:data:`KERNEL` / :data:`PARALLEL` for the full options of the kernels that Python calls,
:data:`JIT` for the helpers compiled into them.

>>> CACHE_PLACE in ("NUMBA_CACHE_DIR", "package", "user", "temporary", "none")
True
>>> KERNEL["cache"] == CACHE, JIT["cache"]
(True, False)
"""

import atexit
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from types import FunctionType

from numba import config, njit
from numba.core import caching, typed_passes
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import register_pass
from numba.core.cpu_options import ParallelOptions

from . import compiler


class CacheWarning(UserWarning):
    """Compiled kernels are cached for this process only, or not at all."""


def writable(path):
    """Whether a file can be created in ``path`` (created when missing).  Tried, not
    judged from permission bits, which root ignores."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _user_cache():
    """``$XDG_CACHE_HOME/tenalg`` or ``~/.cache/tenalg`` (None without a home)."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        home = os.path.expanduser("~")
        if home == "~":
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "tenalg")


def _temporary():
    try:
        path = tempfile.mkdtemp(prefix="tenalg-numba-")
    except OSError:
        return None
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _importer_level():
    """The ``stacklevel`` of a warning at import that names the line importing tenalg: the
    first frame, outward from the caller, outside tenalg and Python's import machinery
    (it named a line of tenalg's own).  ``warnings`` skips the import machinery's frames
    in its count; so does this."""
    frame, level = sys._getframe(1).f_back, 1
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen importlib"):
            level += 1
            if not name.startswith(_PACKAGE):
                break
        frame = frame.f_back
    return level


def choose_cache():
    """(place, directory): where the kernels' compiled code goes, in the documented order.
    The directory is None where Numba finds it itself (places 1 and 2) or where nothing
    is writable ("none")."""
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir and writable(numba_dir):
        return "NUMBA_CACHE_DIR", None
    if writable(Path(__file__).parent / "__pycache__"):
        return "package", None
    user = _user_cache()
    if user is not None and writable(user):
        return "user", user
    temporary = _temporary()
    return ("temporary", temporary) if temporary else ("none", None)


# Numba's caching classes (public names from Numba 0.60 on, private before)
_USER_PROVIDED = getattr(caching, "UserProvidedCacheLocator",
                         getattr(caching, "_UserProvidedCacheLocator", None))
_CACHE_IMPL = getattr(caching, "CacheImpl", getattr(caching, "_CacheImpl", None))


class _Locator(_USER_PROVIDED or object):
    """Numba's locator for a chosen directory, for tenalg's own source files only."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(CACHE_DIRECTORY,
                                        self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.abspath(py_file).startswith(_PACKAGE):
            return None
        return caching._SourceFileBackedLocatorMixin.from_function.__func__(cls, py_func,
                                                                           py_file)


_PACKAGE = str(Path(__file__).resolve().parent.parent) + os.sep
CACHE_PLACE, CACHE_DIRECTORY = choose_cache()
if CACHE_DIRECTORY is not None:
    # Numba's list of locators (a class attribute) is where a locator is added
    if _USER_PROVIDED is not None and hasattr(_CACHE_IMPL, "_locator_classes"):
        _CACHE_IMPL._locator_classes.insert(0, _Locator)
    else:  # pragma: no cover - a Numba without them: run uncached
        CACHE_PLACE, CACHE_DIRECTORY = "none", None
CACHE = CACHE_PLACE != "none"
# where compilations lock their kernels' files (kernels.compiler.lock_cache), beside the cache
_LOCK_DIRECTORY = {"NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR"),
                   "package": Path(__file__).parent / "__pycache__"}.get(CACHE_PLACE,
                                                                         CACHE_DIRECTORY)
compiler.lock_cache(None if _LOCK_DIRECTORY is None else str(_LOCK_DIRECTORY))
if CACHE_PLACE in ("temporary", "none"):
    warnings.warn(
        "tenalg: no writable cache for compiled kernels (tried NUMBA_CACHE_DIR, the "
        "package's __pycache__, $XDG_CACHE_HOME/tenalg and ~/.cache/tenalg); they "
        + (f"are cached in {CACHE_DIRECTORY} for this process only" if CACHE
           else "compile on every run") + ". Set NUMBA_CACHE_DIR to a writable directory.",
        CacheWarning, stacklevel=_importer_level())



def cache_location():
    """Where the compiled kernels are kept, in words (``tenalg compile`` says it)."""
    return {"NUMBA_CACHE_DIR": f"{os.environ.get('NUMBA_CACHE_DIR')} (NUMBA_CACHE_DIR)",
            "package": f"{Path(__file__).resolve().parent.parent} (the package's "
                       f"__pycache__ folders)",
            "user": f"{CACHE_DIRECTORY} (the user's cache)",
            "temporary": f"{CACHE_DIRECTORY} (this process only)",
            "none": "nowhere (uncached)"}[CACHE_PLACE]


# Helpers (JIT) are compiled into each kernel that calls them and are not cached by
# themselves: only the kernels that Python calls (KERNEL, PARALLEL) write cache entries, each
# under its own lock (kernels.compiler.cache_locked), so that processes compiling different
# kernels at once do not wait for one another, and no two write one function's index
JIT = {"cache": False, "fastmath": False, "error_model": "numpy", "nogil": True}
KERNEL = {**JIT, "cache": CACHE}
PARALLEL = {**KERNEL, "parallel": True}


def _no_parfors():
    """Numba's ``parallel`` option with every transformation off: no loop runs on threads,
    but the parfor passes still run, and they propagate copies.  Inlining an
    ``inline="always"`` helper copies each array it takes into a variable of its own,
    which costs an atomic incref and decref per call in a kernel's loop where the plain
    pipeline leaves them: the few-terms sum over axis 1 of a (65536, 8, 8) float64 array
    spent half its 9.6 ms in them on one thread, 1.7 ms so (the parallel twin on one
    thread 1.6; nine arrays a unit of 64 terms).  Options, not a dict: Numba empties a
    dict when it reads it, and a kernel's next signature would then compile parallel."""
    return ParallelOptions(dict.fromkeys(("comprehension", "reduction", "inplace_binop",
                                          "setitem", "numpy", "stencil", "fusion",
                                          "prange"), False))


@register_pass(mutates_CFG=True, analysis_only=False)
class _QuietParforPass(typed_passes.ParforPass):
    """Numba's parfor pass without its warning that no loop became parallel, which is
    what :func:`_no_parfors` asks for, and without the hook it leaves in the cached code
    that starts Numba's thread pool when the code loads (a serial kernel needs none; a
    pool started makes forked children run serially).  Numba's setting is switched off
    while the pass runs only, under Numba's compiler lock: no other compilation warns
    meanwhile."""

    _name = "tenalg_quiet_parfor_pass"

    def run_pass(self, state):
        before = config.DISABLE_PERFORMANCE_WARNINGS
        config.DISABLE_PERFORMANCE_WARNINGS = True
        try:
            changed = super().run_pass(state)
        finally:
            config.DISABLE_PERFORMANCE_WARNINGS = before
        pool_hook = getattr(typed_passes, "_reload_parfors", None)
        state.reload_init[:] = [hook for hook in state.reload_init if hook is not pool_hook]
        return changed


class _SequentialCompiler(CompilerBase):
    """Numba's pipeline with the quiet parfor pass (for :func:`_no_parfors` options)."""

    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.passes = [(_QuietParforPass if cls is typed_passes.ParforPass else cls, about)
                     for cls, about in pm.passes]
        pm.finalize()
        return [pm]


def twins(kernel):
    """``kernel`` compiled twice: (parallel over its prange, serial); small problems run
    the serial one, which costs no thread-pool launch.  The serial twin compiles a copy
    named ``<name>_sequential`` (:func:`_no_parfors`): Numba's on-disk cache keys a
    function by its name and signature, not by its options, so twins of one name would
    load whichever of them was compiled first (a parallel kernel running on one thread),
    and a cache filled before the serial twin's options changed would keep its code."""
    serial = FunctionType(kernel.__code__, kernel.__globals__,
                          kernel.__name__ + "_sequential", kernel.__defaults__,
                          kernel.__closure__)
    serial.__qualname__ = kernel.__qualname__ + "_sequential"
    pair = njit(**PARALLEL)(kernel), njit(**KERNEL, parallel=_no_parfors(),
                                          pipeline_class=_SequentialCompiler)(serial)
    compiler.siblings(*pair)  # compiled together: the thread count a call takes varies
    return pair

"""The registry of named workloads: what one benchmark is, and where to find them all.

A workload builds its inputs once (``setup``) and returns one zero-argument function per
engine; the runner times them side by side.

>>> import numpy as np
>>> w = Workload("sum-4-f64", "dense", lambda: {"numpy": lambda: np.ones(4).sum()})
>>> w.setup()["numpy"]()
np.float64(4.0)
"""

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

# The modules that contribute workloads, in the order their workloads are listed.
MODULES = ("bench_dense", "bench_einsum", "bench_tt", "bench_symmetric", "bench_mixed",
           "bench_distributed")  # its rows skip where dask.distributed is missing
# The groups a workload belongs to (``tenalg bench --group``): one area each, and
# "mixed", whole inner loops of several operations (bench_mixed).
GROUPS = ("dense", "einsum", "tt", "symmetric", "mixed", "distributed")
LIMITS = ("read", "copy", "copy-new", "gemm-f32", "gemm-f64")


class Skip(Exception):
    """Raised by a workload's setup when it cannot run here (a front end is missing)."""


@dataclass
class Workload:
    name: str  # unique, e.g. "einsum-ik,kj->ij-2048-f32"
    group: str  # one of GROUPS
    setup: Callable[[], dict[str, Callable[[], object]]]  # engine name -> zero-arg function
    limit: str | None = None  # one of LIMITS, or None
    bytes: float = 0.0  # bytes that must be read + written (memory-bound workloads)
    flops: float = 0.0  # floating-point operations (compute-bound workloads)
    quick: bool = False  # part of `tenalg bench --quick`
    compare: bool = True  # check the engines' results against each other
    budget: float = 0.0  # seconds per engine at least (the run's budget when it is more)
    # a loop that times its own steps (bench_mixed.Steps: ``times[engine][step]`` seconds,
    # ``clear()``), reported per step beside the whole call; None for one-step workloads
    steps: object = None

    def __post_init__(self):
        if self.limit is not None and self.limit not in LIMITS:
            raise ValueError(f"workload {self.name}: limit {self.limit!r} is not one of {LIMITS}")


def all_workloads(modules=MODULES):
    """Workloads of every bench module that imports; a module that fails is skipped.

    A module missing altogether is skipped silently (not written yet); one that raises
    while importing or listing its workloads is skipped with a warning.
    """
    found, seen = [], set()
    for name in modules:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
            workloads = list(module.workloads())
        except ModuleNotFoundError as error:
            if error.name != f"{__package__}.{name}":
                warnings.warn(f"bench module {name} skipped: {error}", stacklevel=2)
            continue
        except Exception as error:  # noqa: BLE001 - one broken module must not stop the suite
            warnings.warn(f"bench module {name} skipped: {error!r}", stacklevel=2)
            continue
        for workload in workloads:
            if workload.name in seen:
                raise ValueError(f"two workloads are named {workload.name!r}")
            seen.add(workload.name)
            found.append(workload)
    return found


# groups that --quick runs only when --group names them: the distributed rows start two
# LocalClusters (35 s of a 1 min 30 s quick run), whose processes kept a core busy while
# the other rows were timed (8 of 39 marked suspect)
ASKED_FOR = ("distributed",)


def select(workloads, *, quick=False, only=None, group=None):
    """The workloads to run: one group (or all), then those matching ``only`` (an exact
    name, else a substring of names), or without ``only`` the quick ones when ``quick``
    (of the groups in ASKED_FOR only when ``group`` names them)."""
    chosen = [w for w in workloads if group in (None, w.group)]
    if only is None:
        return [w for w in chosen
                if not quick or (w.quick and (group or w.group not in ASKED_FOR))]
    exact = [w for w in chosen if w.name == only]
    return exact or [w for w in chosen if only in w.name]

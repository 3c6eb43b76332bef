"""Reports of a run: JSON (machine, limits, every engine's times) and a PNG chart.

The chart (:mod:`.chart`) has two panels: tenalg's speed-up over each baseline (log
scale) and the fraction of the machine's limit that each engine reached, per workload.

>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "r.json")
>>> write_json(path, [], {"copy": 1e10}, {"quick": True})
>>> json.load(open(path))["limits"]
{'copy': 10000000000.0}
"""

import datetime
import json
import os
import platform
from importlib import metadata

from . import chart
from .runner import step_stats

ENGINE_PACKAGES = ("tenalg", "numpy", "numba", "scipy", "opt_einsum", "torch")


def machine():
    """What ran the benchmark: platform, processor, cores, package versions."""
    versions = {}
    for package in ENGINE_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),  # 1, 5, 15 minutes: other processes' demand
        "python": platform.python_version(),
        "versions": versions,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def result_record(result, limits):
    """One workload's result as plain JSON data."""
    w = result.workload
    engines = {}
    for engine, times in result.times.items():
        low, middle, high = result.spread(engine)
        engines[engine] = {
            "median_s": result.median(engine),
            "p95_s": result.p95(engine),
            "spread_s": {"min": low, "median": middle, "max": high},  # of round medians
            "times_s": times,
            "rounds_s": result.rounds.get(engine, []),
            "rate": result.rate(engine),
            "fraction_of_limit": result.fraction(engine, limits),
            "fraction_of_run_limit": result.fraction(engine, limits, in_rounds=False),
        }
    return {
        "name": w.name,
        "group": w.group,
        "limit": w.limit,
        "limit_in_rounds": result.limit_in_rounds,
        "limit_times_s": result.limit_times,
        "bytes": w.bytes,
        "flops": w.flops,
        "check": result.check,
        "wall_s": result.seconds,
        "errors": result.errors,
        "load": result.load,
        "background_processes": result.background,
        "suspect": result.suspect() if result.times else [],
        "engines": engines,
        "speedup": result.speedups() if result.times else {},
        # loops that time their steps: engine -> step -> median and 95th percentile
        "steps": {engine: {step: dict(zip(("median_s", "p95_s"), step_stats(times),
                                          strict=True)) | {"count": len(times)}
                           for step, times in by_step.items()}
                  for engine, by_step in result.steps.items()},
    }


def write_json(path, results, limits, settings):
    """Write ``bench-results.json``: machine, settings, limits, one record per workload."""
    data = {
        "machine": machine(),
        "settings": settings,
        "limits": limits,
        "results": [result_record(r, limits) for r in results],
    }
    with open(path, "w") as file:
        json.dump(data, file, indent=1)


def write_chart(path, results, limits, title="tenalg bench"):
    """Write the PNG chart (:func:`chart.draw`); ImportError without matplotlib."""
    chart.draw(path, results, limits, title)

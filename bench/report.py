"""Reports of a run: JSON (machine, limits, every engine's times) and a PNG chart.

The chart has two panels: the fraction of the machine's limit that each engine reached
per workload (grouped bars), and tenalg's speed-up over each baseline (log scale).

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

import numpy as np

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
    engines = {
        engine: {
            "median_s": result.median(engine),
            "times_s": times,
            "rate": result.rate(engine),
            "fraction_of_limit": result.fraction(engine, limits),
            "fraction_of_run_limit": result.fraction(engine, limits, in_rounds=False),
        }
        for engine, times in result.times.items()
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
        "engines": engines,
        "speedup": result.speedups() if result.times else {},
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


def write_chart(path, results, limits):
    """Write the PNG chart: fraction of limit per workload and engine; speed-ups (log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in results if r.times]
    names = [r.workload.name for r in timed]
    x = np.arange(len(names))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 0.7 * len(names) + 3), 9),
                                      sharex=True, constrained_layout=True)
    fractions = {}
    for k, r in enumerate(timed):
        for engine in r.times:
            value = r.fraction(engine, limits)
            if value is not None:
                fractions.setdefault(engine, {})[k] = value
    _grouped_bars(top, x, fractions)
    top.axhline(1.0, color="grey", linewidth=0.8)
    top.set_ylabel("fraction of the machine's limit")
    top.set_title("Fraction of the measured limit (read / copy / copy into a new array in the "
                  "workload's rounds; GEMM peak of the run)")
    speedups = {}
    for k, r in enumerate(timed):
        for engine, ratios in r.speedups().items():
            for baseline, ratio in ratios.items():
                speedups.setdefault(f"{engine} vs {baseline}", {})[k] = ratio
    _grouped_bars(bottom, x, speedups)
    bottom.set_yscale("log")
    bottom.axhline(1.0, color="grey", linewidth=0.8)
    bottom.set_ylabel("speed-up (baseline time / tenalg time)")
    bottom.set_title("tenalg's speed-up over each baseline (log scale, > 1 is faster)")
    bottom.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _grouped_bars(axes, x, series):
    """At each x, one bar per series that has a value there, centred; a colour per series
    (the same in every group) and a legend naming them."""
    colours = dict(zip(series, _palette(len(series)), strict=True))
    for k in range(len(x)):
        present = [label for label, values in series.items() if k in values]
        width = 0.8 / max(len(present), 1)
        for j, label in enumerate(present):
            axes.bar(x[k] + (j - (len(present) - 1) / 2) * width, series[label][k], width,
                     color=colours[label])
    handles = [axes.bar([0], [0], 0, color=colours[label], label=label) for label in series]
    if handles:
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _palette(n):
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(k % cmap.N) for k in range(n)]

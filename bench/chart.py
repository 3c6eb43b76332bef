"""The chart of a run, drawn for a person: a row of bars per workload, in two panels side
by side (the same rows): tenalg's speed-up over each baseline (log scale, clipped, the
clipped value written), and the fraction of the machine's limit each engine reached.

Every engine keeps one colour in both panels (a speed-up bar takes its baseline's
colour); every bar carries its value; workloads are grouped under their group's name;
a suspect row (runner.Result.suspect) has its name in red after a ``?``.

>>> import os, tempfile
>>> from tenalg.bench.registry import Workload
>>> from tenalg.bench.runner import Result
>>> r = Result(Workload("w", "dense", dict), times={"tenalg": [1.0], "numpy": [2.0]})
>>> path = os.path.join(tempfile.mkdtemp(), "c.png")
>>> draw(path, [r], {})
>>> open(path, "rb").read(4)
b'\\x89PNG'
"""

import textwrap

import numpy as np

# One colour per engine (tab10's), the same in every chart; engines not named here take
# the colours left, in the order they first appear.
COLOURS = {"tenalg": "#1f77b4", "tenalg-plan": "#17becf", "numpy": "#ff7f0e",
           "torch": "#9467bd", "scipy": "#2ca02c"}
# then tab20's and tab20b's (red is left out: it marks suspect rows)
SPARE = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#2ca02c", "#aec7e8", "#ffbb78",
         "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
         "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#8ca252",
         "#bd9e39", "#ad494a", "#a55194")
SPEEDUP_CLIP = 30.0  # speed-ups beyond 1/30 .. 30 are drawn at the edge, their value written
FRACTION_CLIP = 1.5  # fractions above it likewise
FRACTION_NOTE = (
    "Fraction of the limit: the engine's rate (the bytes the operation must read and "
    "write, or its flops, per median call) divided by the machine's limit for that kind "
    "of work, measured in the same run: read or copy bandwidth (in the workload's own "
    "rounds), GEMM peak. 1 = as fast as the hardware allows; above 1 the data came from "
    "the caches. Rows without a limit time fixed costs: read their speed-up.")
SPEEDUP_NOTE = ("tenalg's speed-up: the baseline's median time / tenalg's, the bar in the "
                "baseline's colour; > 1: tenalg is faster. Hatched: another tenalg engine than "
                "the front end (tenalg-plan, a prebuilt plan; a method), named on the bar.")


def colours(results):
    """{engine: colour} for every engine of ``results``."""
    found = dict(COLOURS)
    spare = iter(c for c in SPARE if c not in found.values())
    for result in results:
        for engine in result.times:
            if engine not in found:
                found[engine] = next(spare, "#333333")
    return found


def _bars(result, limits):
    """The row's bars: ([(engine, fraction)], [(tenalg engine, baseline, speed-up)])."""
    fractions = [(e, result.fraction(e, limits)) for e in result.times]
    speedups = [(e, b, x) for e, ratios in result.speedups().items() for b, x in ratios.items()]
    return [(e, f) for e, f in fractions if f is not None], speedups


def draw(path, results, limits, title="tenalg bench"):
    """Write the PNG chart of ``results`` to ``path``."""
    import matplotlib  # optional (tenalg[bench]): loaded only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = sorted((r for r in results if r.times), key=lambda r: r.workload.group)
    palette = colours(timed)
    rows = [(r, *_bars(r, limits)) for r in timed]
    heights = [max(len(f), len(s), 1) for _, f, s in rows]
    groups = len({r.workload.group for r in timed})
    bars_inches = 0.22 * (sum(heights) + 0.8 * len(rows) + 1.5 * groups)
    fig, (left, right) = plt.subplots(1, 2, sharey=True, constrained_layout=True,
                                      figsize=(15, max(4.5, bars_inches + 3.0)))
    y, ticks, names, group = 0.0, [], [], None
    for (result, fractions, speedups), height in zip(rows, heights, strict=True):
        if result.workload.group != group:
            group = result.workload.group
            y += 1.0 if ticks else 0.2
            for axes in (left, right):
                axes.axhline(y - 0.6, color="#999999", linewidth=0.6)
            left.text(1 / SPEEDUP_CLIP, y - 0.55, f" {group}", va="bottom", ha="left",
                      fontsize=9, fontweight="bold", color="#555555")
            y += 0.5
        slots = y + np.arange(height)
        _speedup_bars(left, slots, speedups, palette)
        _fraction_bars(right, slots, fractions, palette, result)
        ticks.append(y + (height - 1) / 2)
        names.append(("? " if result.suspect() else "") + result.workload.name)
        y += height + 0.8
    left.set_yticks(ticks, names, fontsize=8)
    for label, result in zip(left.get_yticklabels(), timed, strict=True):
        if result.suspect():
            label.set_color("#d62728")
    left.set_ylim(y - 0.4, -0.8)  # the first workload on top
    _frame_speedups(left)
    _frame_fractions(right)
    handles = [matplotlib.patches.Patch(color=c, label=e) for e, c in palette.items()
               if any(e in r.times for r in timed)]
    handles.append(matplotlib.patches.Patch(facecolor="white", edgecolor="#d62728",
                                            label="? red name: suspect row (rounds spread "
                                                  "or other load; see the table)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6),
               fontsize=9, frameon=False)
    fig.suptitle(textwrap.fill(title, 120), fontsize=11)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _speedup_bars(axes, slots, speedups, palette):
    for slot, (engine, baseline, value) in zip(slots, speedups, strict=False):
        shown = min(max(value, 1 / SPEEDUP_CLIP), SPEEDUP_CLIP)
        # a bar from 1 (no speed-up) to the value, on the log scale
        axes.barh(slot, abs(shown - 1.0), height=0.8, left=min(shown, 1.0),
                  color=palette[baseline], hatch="//" if engine != "tenalg" else None,
                  edgecolor="white" if engine != "tenalg" else None)
        clipped = shown != value
        text = ("" if engine == "tenalg" else f"{engine}: ") + _times(value) + (
            " (clipped)" if clipped else "") + f" vs {baseline}"
        # a slower bar's value goes right of the 1 line (room there); a faster one's at its
        # end, or inside it near the edge
        inside = shown >= 1 and (clipped or np.log(shown) > np.log(SPEEDUP_CLIP) * 0.6)
        x = 1.0 if shown < 1 else shown / 1.08 if inside else shown
        ha = "right" if inside else "left"
        axes.text(x, slot, f" {text} ", va="center", ha=ha, fontsize=7,
                  fontweight="bold" if clipped else None, bbox=_INSIDE if inside else None)


# a value written inside its bar: on a pale box, readable on any bar colour
_INSIDE = {"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.75, "linewidth": 0}


def _times(value):
    """'2000x', '3.14x', '0.0123x'."""
    return f"{value:.0f}x" if value >= 100 else f"{value:.3g}x"


def _fraction_bars(axes, slots, fractions, palette, result):
    if not fractions:
        axes.text(0.02, slots[0], "no limit: fixed costs, or a loop of several operations "
                  "(read its speed-up)",
                  va="center", fontsize=7, color="#777777", style="italic")
        return
    for slot, (engine, value) in zip(slots, fractions, strict=False):
        shown = min(value, FRACTION_CLIP)
        axes.barh(slot, shown, height=0.8, color=palette[engine])
        clipped = shown != value
        text = f"{value:.2f} {engine}" + (" (clipped)" if clipped else "")
        axes.text(shown if not clipped else shown - 0.02, slot, f" {text} ", va="center",
                  ha="left" if not clipped else "right", fontsize=7,
                  fontweight="bold" if clipped else None, bbox=_INSIDE if clipped else None)
    axes.text(FRACTION_CLIP, slots[0] - 0.5, f"{result.workload.limit} ", ha="right",
              va="top", fontsize=6, color="#777777")


def _frame_speedups(axes):
    axes.set_xscale("log")
    axes.set_xlim(1 / SPEEDUP_CLIP, SPEEDUP_CLIP)
    ticks = [t for t in (1 / 30, 0.1, 0.3, 1, 3, 10, 30) if 1 / SPEEDUP_CLIP <= t <= SPEEDUP_CLIP]
    axes.set_xticks(ticks, [f"{t:.2g}x" for t in ticks])
    axes.minorticks_off()
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("tenalg's speed-up (log scale; < 1 slower, > 1 faster)")
    axes.set_title(textwrap.fill(SPEEDUP_NOTE, 80), fontsize=8, loc="left")
    axes.grid(axis="x", which="major", color="#dddddd", linewidth=0.6)
    axes.set_axisbelow(True)


def _frame_fractions(axes):
    axes.set_xlim(0, FRACTION_CLIP)
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("fraction of the machine's limit (1 = the hardware's limit)")
    axes.set_title(textwrap.fill(FRACTION_NOTE, 80), fontsize=8, loc="left")
    axes.grid(axis="x", color="#dddddd", linewidth=0.6)
    axes.set_axisbelow(True)

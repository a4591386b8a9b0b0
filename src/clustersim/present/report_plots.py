"""The report's figures as static files for ``--plot`` (matplotlib, ``present.figures``): the same numbers as
the page's Plotly figures, taken from the same functions (``report_training.step_bars``, ``memory_bars``,
``busbw_curve``; ``report_tables.cases_by_kind``) applied to the commands' ``--json``.

Each drawn bar or set of points carries an SVG id (``gid``: ``exposed_s-0``, ``measured``, ...), so a reader of
the SVG can find and count them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clustersim.present.figures import figure
from clustersim.present.report_tables import cases_by_kind, interval_above, interval_below
from clustersim.present.report_training import COLORS, busbw_curve, memory_bars, step_bars

GIB = 2.0**30
BAND = "#4C72B0"


def plot_training(train: dict[str, Any], path: Path) -> None:
    """``train --json``'s step by term (stacked: exposed, then the overlapped part of the link time) and its
    memory per device by kind against the capacity, side by side."""
    import numpy as np

    bars = step_bars(train)
    with figure(path, ncols=2, figsize=(12, 4.5)) as (_, (step, memory)):
        x = np.arange(len(bars.names))
        for name, values, bottom, color in (
            ("exposed_s", bars.exposed_s, None, COLORS["exposed"]),
            ("overlapped_s", bars.overlapped_s, bars.exposed_s, COLORS["overlapped"]),
        ):
            drawn = step.bar(x, values, bottom=bottom, color=color, label=name)
            for i, patch in enumerate(drawn.patches):
                patch.set_gid(f"{name}-{i}")
        step.set_xticks(x, bars.names, rotation=30, ha="right", fontsize="small")
        step.set_ylabel("seconds per step")
        step.set_title(f"step {train['step_s']:.4g} s by term")
        step.legend(fontsize="small")
        capacity, required = train["capacity_bytes"], train["memory_bytes"]["required"]
        below = 0.0
        for kind, value in memory_bars(train):
            (patch,) = memory.bar([0], [value / GIB], bottom=below, label=kind, width=0.5).patches
            patch.set_gid(f"memory-{kind}")
            below += value / GIB
        memory.axhline(capacity / GIB, color=COLORS["capacity"], linestyle="--", label="capacity", gid="capacity")
        memory.set_xticks([0], ["per device"])
        memory.set_xlim(-1, 1)
        memory.set_ylim(0, 1.05 * max(capacity, required) / GIB)
        memory.set_ylabel("GiB")
        memory.set_title(f"memory per device: {required / GIB:.1f} of {capacity / GIB:.1f} GiB")
        memory.legend(fontsize="small", loc="lower right")


def plot_busbw(
    title: str,
    rows: list[dict[str, Any]],
    measured: list[dict[str, Any]],
    path: Path,
    *,
    job: tuple[float, float] | None = None,
) -> None:
    """busbw against size from ``collective --json``'s ``rows`` (its interval as a band), the measured points
    (``size_bytes``, ``busbw_GBps``) and, given, the job's own message (size, busbw)."""
    curve = busbw_curve(rows)
    with figure(path, figsize=(8, 4.5)) as (_, ax):
        if curve.band is not None:
            low, high, level = curve.band
            ax.fill_between(curve.size_bytes, low, high, color=BAND, alpha=0.2, label=f"{level:.0%} interval",
                            gid="interval", linewidth=0)  # fmt: skip
        ax.plot(curve.size_bytes, curve.busbw_GBps, marker="o", markersize=3, color=BAND, label="predicted busbw",
                gid="predicted")  # fmt: skip
        if job is not None:
            ax.plot([job[0]], [job[1]], "*", markersize=14, color=COLORS["exposed"], label="the job's message",
                    gid="job")  # fmt: skip
        if measured:
            ax.plot([m["size_bytes"] for m in measured], [m["busbw_GBps"] for m in measured], "x", color="#222222",
                    markersize=7, label=f"measured ({len(measured)})", gid="measured")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size_bytes (per rank)")
        ax.set_ylabel("busbw_GBps")
        ax.set_title(title)
        ax.legend(fontsize="small")


def plot_validation(report: dict[str, Any], source_of: Mapping[str, str], path: Path) -> None:
    """``validate --json``: per case kind, predicted against measured on log-log axes, coloured by source, each
    case's interval as an error bar, the line predicted = measured; each file's interval coverage above."""
    import matplotlib

    kinds = cases_by_kind(report, source_of)
    palette = matplotlib.colormaps["tab20"]
    with figure(path, ncols=max(len(kinds), 1), figsize=(5.2 * max(len(kinds), 1), 5.2)) as (fig, axes):
        panels = list(axes) if len(kinds) > 1 else [axes]
        for ax, (kind, sources) in zip(panels, kinds.items(), strict=False):
            values = [c[k] for cases in sources.values() for c in cases for k in ("predicted", "measured")]
            low, high = min(values), max(values)
            ax.plot([low, high], [low, high], ":", color="#888888", label="predicted = measured", gid=f"{kind}-y=x")
            for j, (source, cases) in enumerate(sources.items()):
                ax.errorbar(
                    [c["measured"] for c in cases],
                    [c["predicted"] for c in cases],
                    yerr=[[interval_below(c) for c in cases], [interval_above(c) for c in cases]],
                    fmt="o", markersize=3, elinewidth=0.6, label=source or "(no source)", gid=f"cases-{kind}-{j}",
                    color=palette(j % palette.N),
                )  # fmt: skip
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("measured")
            ax.set_ylabel("predicted")
            count = sum(len(cases) for cases in sources.values())
            ax.set_title(f"{kind}: {count} cases")
            ax.legend(fontsize=5, loc="upper left")
        covered = [
            f"{f['path']} {f['coverage']:.0%}" for f in report["files"] if f.get("coverage") is not None
        ]  # fmt: skip
        fig.suptitle(f"share of measured inside the {report['level']:.0%} interval: " + ", ".join(covered))

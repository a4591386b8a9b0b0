"""How several jobs on one fabric and a training step's communication on the fabric are shown."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clustersim.present.figures import figure

if TYPE_CHECKING:
    from rich.table import Table

    from clustersim.network.flowsim.results import JobsResult
    from clustersim.training.fabric_step import StepOnFabric

GB = 1e9


def jobs_view(result: JobsResult) -> Table:
    """Each job's time with the others and alone, and its slowdown."""
    from rich.table import Table

    table = Table(title=f"{len(result.together)} jobs at once (binding tier {result.links.binding_tier})")
    for name in ("job", "time ms", "alone ms", "slowdown", "busbw GB/s"):
        table.add_column(name, justify="right")
    for k, (r, alone, slow) in enumerate(zip(result.together, result.alone_time_s, result.slowdown, strict=True)):
        table.add_row(
            str(k), f"{r.time_s * 1e3:.3f}", f"{alone * 1e3:.3f}", f"{slow:.3f}", f"{r.busbw_bytes_per_s / GB:.1f}"
        )
    return table


def step_view(step: StepOnFabric) -> list[Table]:
    """Per kind of group: the collective, simulated alone and with every kind at once, against the
    analytic model; the hottest links of the run with everything at once."""
    from rich.table import Table

    table = Table(title=f"one step's communication of {step.title} on the fabric ({step.routing})")
    columns = ("kind", "collective", "groups x ranks", "size MB", "per step", "sim ms", "ideal ms", "analytic ms")
    for name in (*columns, "all at once ms", "busbw GB/s", "max util", "binding tier"):
        table.add_column(name, justify="left" if name in ("kind", "collective", "binding tier") else "right")
    for k in step.kinds:
        c = k.collective
        table.add_row(
            c.kind,
            f"{c.op.value} ({k.algorithm.value})",
            f"{c.num_groups} x {c.group_ranks}",
            f"{c.size_bytes / 1e6:.2f}",
            f"{c.per_step:g}",
            f"{k.time_s * 1e3:.3f}",
            f"{c.ideal_time_s * 1e3:.3f}",
            f"{c.analytic_time_s * 1e3:.3f}",
            f"{k.together_time_s * 1e3:.3f}",
            f"{k.busbw_bytes_per_s / GB:.1f}",
            f"{k.links.max_link_utilization:.3f}",
            k.links.binding_tier,
        )
    hot = Table(title=f"hottest links, every kind at once (binding tier {step.together.binding_tier})")
    hot.add_column("link")
    hot.add_column("utilization", justify="right")
    for name, util in step.together.hottest_links:
        hot.add_row(name, f"{util:.3f}")
    return [table, hot]


def plot_step(step: StepOnFabric, path: Path) -> None:
    """The run with every kind at once into ``path``: link utilization by tier (box plot) and each
    kind's flow completion times (CDF)."""
    import numpy as np

    from clustersim.present.fabric import tier_boxes

    with figure(path, ncols=2, figsize=(11, 4)) as (_, (left, right)):
        tier_boxes(left, step.together.utilization, step.together.tier)
        for k, kind in enumerate(step.kinds):
            ends = np.sort(step.flow_end_s[step.flow_kind == k])
            if ends.size:
                right.plot(ends * 1e3, np.arange(1, ends.size + 1) / ends.size, label=kind.collective.kind)
        right.set_xlabel("flow completion (ms, simulated steps)")
        right.set_ylabel("fraction of flows")
        right.set_title(f"every kind at once, {step.routing}")
        right.legend(fontsize="small")

"""A run's failure model: the interval, the expected run beside the Monte-Carlo spread, the sensitivity
table, and a histogram of the simulated times to train (matplotlib, written to a file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from clustersim.present.figures import figure
from clustersim.reliability.failures import DAY_S, FailureRate, Goodput
from clustersim.reliability.montecarlo import RunSpread
from clustersim.reliability.plan import Policy, SensitivityRow
from clustersim.training.job import FailureTotals
from clustersim.units import format_bytes_per_s, format_seconds

PERCENTILES = (5.0, 50.0, 95.0)


def _run_json(run: Goodput) -> dict[str, Any]:
    return {
        "expected_time_s": run.expected_time_s,
        "goodput": run.goodput,
        "interval_s": run.interval_s,
        "num_checkpoints": run.num_checkpoints,
        "expected_failures": run.expected_failures,
        "lost_s": run.lost_s,
    }


def reliability_json(
    policy: Policy,
    rate: FailureRate,
    num_devices: int,
    num_nodes: int,
    spread: RunSpread | None,
    rows: list[SensitivityRow],
) -> dict[str, Any]:
    """Inputs, intervals, the expected run, the simulated spread and the sensitivity rows."""
    run = policy.run()
    out: dict[str, Any] = {
        "failure_rate": {
            "name": rate.name,
            "per_device_hour": rate.per_device_hour,
            "per_node_hour": rate.per_node_hour,
            "source": rate.source,
        },
        "num_devices": num_devices,
        "num_nodes": num_nodes,
        "job_mtbf_s": policy.mtbf_s,
        "work_s": policy.work_s,
        "checkpoint_s": policy.checkpoint_s,
        "restart_s": policy.restart_s,
        "young_interval_s": policy.young_s,
        "daly_interval_s": policy.daly_s,
        "checkpoint_interval_s": run.interval_s,
        **_run_json(run),
        "sensitivity": [{"input": r.factor_name, "factor": r.factor, **_run_json(r.run)} for r in rows],
    }
    if spread is not None:
        out["monte_carlo"] = {
            "runs": int(spread.time_s.size),
            "mean_s": spread.mean_s,
            "std_error_s": spread.std_error_s,
            "percentiles_s": {f"p{q:g}": spread.percentile_s(q) for q in PERCENTILES},
            "mean_failures": float(spread.failures.mean()),
            "relative_difference_from_formula": spread.mean_s / run.expected_time_s - 1,
        }
    return out


def _days(seconds: float) -> str:
    days = seconds / DAY_S
    return f"{days:,.2f} d" if days < 1e9 else f"{days:.3g} d"


def _count(value: float) -> str:
    return f"{value:,.0f}" if value < 1e12 else f"{value:.3g}"


def reliability_view(
    policy: Policy,
    rate: FailureRate,
    num_devices: int,
    num_nodes: int,
    spread: RunSpread | None,
    rows: list[SensitivityRow],
) -> list[RenderableType]:
    """Headline lines, the spread and the sensitivity table."""
    run = policy.run()
    lines: list[RenderableType] = [
        f"{num_devices:,} devices at {rate.per_device_hour:.3g} failures per device-hour and {num_nodes:,} nodes at "
        f"{rate.per_node_hour:.3g} per node-hour ({rate.name}): job MTBF "
        f"{format_seconds(policy.mtbf_s)}; checkpoint {format_seconds(policy.checkpoint_s)}, restart "
        f"{format_seconds(policy.restart_s)}",
        f"interval {format_seconds(run.interval_s)} (Young {format_seconds(policy.young_s)}, Daly "
        f"{format_seconds(policy.daly_s)}): {_days(policy.work_s)} of work take {_days(run.expected_time_s)} "
        f"expected, goodput {run.goodput:.1%}, {_count(run.expected_failures)} failures, {run.num_checkpoints:,} "
        f"checkpoints",
    ]
    if spread is not None:
        p5, p50, p95 = (spread.percentile_s(q) for q in PERCENTILES)
        lines.append(
            f"Monte-Carlo, {spread.time_s.size:,} runs: mean {_days(spread.mean_s)} "
            f"({spread.mean_s / run.expected_time_s - 1:+.2%} from the formula), p5 {_days(p5)}, median "
            f"{_days(p50)}, p95 {_days(p95)}"
        )
    table = Table(title="sensitivity (interval chosen again unless given)")
    for column in ("input", "x", "interval", "time to train", "goodput"):
        table.add_column(column, justify="left" if column == "input" else "right")
    for r in rows:
        table.add_row(
            r.factor_name, f"{r.factor:g}", format_seconds(r.run.interval_s), _days(r.run.expected_time_s),
            f"{r.run.goodput:.1%}",
        )  # fmt: skip
    return [*lines, table]


def plot_spread(spread: RunSpread, expected_s: float, path: Path) -> None:
    """A histogram of the simulated times to train with the formula's mean, as a PNG (or any format
    matplotlib writes by the file's suffix)."""
    with figure(path, figsize=(7, 4)) as (_, ax):
        ax.hist(spread.time_s / DAY_S, bins=60, color="#4C72B0")
        ax.axvline(expected_s / DAY_S, color="#C44E52", label="expected (Daly)")
        ax.set_xlabel("time to train (days)")
        ax.set_ylabel("runs")
        ax.set_title(f"{spread.time_s.size:,} simulated runs")
        ax.legend()


def _tier(failures: FailureTotals) -> str:
    return "local NVMe, drained to " if failures.tier == "nvme" else ""


def failures_line(failures: FailureTotals) -> str:
    """What checkpoints and failures add to a training job, in one line."""
    run = failures.run
    line = (
        f"checkpoints and failures ({failures.failure_rate}, on {_tier(failures)}{failures.storage}): every "
        f"{format_seconds(run.interval_s)} of work, {format_seconds(run.checkpoint_s)} stall each, "
        f"{_count(run.expected_failures)} failures expected (MTBF {format_seconds(run.mtbf_s)}, restart "
        f"{format_seconds(failures.restart_s)}): goodput {run.goodput:.1%}, {_days(failures.failure_free_time_s)} "
        f"failure-free become {_days(run.expected_time_s)}"
    )
    if failures.storage_cost_usd is not None:
        line += f"; file system ${failures.storage_cost_usd:,.0f}"
    line += (
        f"; energy counts the {format_seconds(run.waiting_s)} of stalls and restarts at "
        f"{failures.idle_power_fraction:.1%} of board power (an idle prior)"
    )
    if failures.data is not None:
        data = failures.data
        line += (
            f"; data loading needs {format_bytes_per_s(data.need_bytes_per_s)} of "
            f"{format_bytes_per_s(data.supply_bytes_per_s)} ({data.supply.bound})"
        )
    return line

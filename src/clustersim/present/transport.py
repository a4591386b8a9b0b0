"""The transport simulator's and the data-path model's results: JSON, rich tables, matplotlib figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from clustersim.network.transport.datapath import DataPath, InstancePaths
from clustersim.network.transport.experiments import GroupResult, Scenario, TransportResult
from clustersim.network.transport.seeds import Seeded
from clustersim.present.figures import figure
from clustersim.units import format_bytes


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def _count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _gbit(value: float) -> str:
    return f"{value / 1e9:,.2f}"


def _cell(s: Seeded[Any], name: str, fmt: Callable[[float], str]) -> str:
    """A figure's median, with its min-max over the seeds beside it where they differ as printed."""
    low, high = (fmt(v) for v in s.low_high(name))
    return fmt(getattr(s.result, name)) + (f" ({low}-{high})" if low != high else "")


def _cells(s: Seeded[TransportResult]) -> tuple[str, ...]:
    """A transport's cells in every table of flows: name, Gbit/s, p50, p99, p99.9 (us), retransmissions."""
    return (
        s.result.transport,
        _cell(s, "throughput_bits_per_s", _gbit),
        _cell(s, "p50_s", _us),
        _cell(s, "p99_s", _us),
        _cell(s, "p999_s", _us),
        _cell(s, "retransmissions", _count),
    )


def _seeded_json(results: Sequence[Seeded[Any]]) -> list[dict[str, Any]]:
    """One object per transport: each figure's median under its own key, and ``spread``: per figure its
    min, max, the seeds and the value at each."""
    return [asdict(s.result) | {"spread": s.spread_json()} for s in results]


def scenario_json(scenario: Scenario) -> dict[str, Any]:
    """The scenario's settings, SI units."""
    return asdict(scenario)


def results_json(results: Sequence[Seeded[TransportResult]]) -> list[dict[str, Any]]:
    """One object per transport: throughput, p50/p99/p99.9 message time, retransmissions, ... (medians
    over the seeds), and their ``spread``."""
    return _seeded_json(results)


def results_table(results: Sequence[Seeded[TransportResult]], title: str) -> Table:
    """Throughput and message-time percentiles per transport."""
    table = Table(title=title, caption="throughput in Gbit/s of payload; message times in us")
    for column in ("transport", "Gbit/s", "p50", "p99", "p99.9", "retransmissions", "timeouts", "events"):
        table.add_column(column, justify="left" if column == "transport" else "right", no_wrap=True)
    for s in results:
        table.add_row(*_cells(s), _cell(s, "timeouts", _count), _cell(s, "num_events", _count))
    return table


def sweep_table(field: str, rows: Sequence[tuple[float, Sequence[Seeded[TransportResult]]]]) -> Table:
    """One row per swept value and transport."""
    table = Table(title=f"SRD vs RC vs TCP as {field} rises", caption="throughput in Gbit/s; message times in us")
    for column in (field, "transport", "Gbit/s", "p50", "p99", "p99.9", "retransmissions"):
        table.add_column(column, justify="right", no_wrap=True)
    for value, results in rows:
        for r in results:
            table.add_row(f"{value:.4g}", *_cells(r))
    return table


def group_json(results: Sequence[Seeded[GroupResult]]) -> list[dict[str, Any]]:
    """One object per transport for a many-flow experiment (medians over the seeds, and their ``spread``)."""
    return _seeded_json(results)


def group_table(results: Sequence[Seeded[GroupResult]], title: str) -> Table:
    """When the last flow finishes, the flows' spread, retransmissions and drops, per transport."""
    table = Table(title=title, caption="times in us")
    for column in ("transport", "completion", "p50 flow", "p99 flow", "retransmissions", "timeouts", "drops"):
        table.add_column(column, justify="left" if column == "transport" else "right", no_wrap=True)
    for s in results:
        table.add_row(
            s.result.transport,
            *(_cell(s, name, _us) for name in ("completion_s", "p50_flow_s", "p99_flow_s")),
            *(_cell(s, name, _count) for name in ("retransmissions", "timeouts", "drops")),
        )
    return table


def _crossover(path: DataPath) -> int | None:
    crossover = path.crossover_bytes()
    return None if crossover is None else round(crossover)


def datapath_json(paths: InstancePaths, message_bytes: float) -> dict[str, Any]:
    """Each path's one-way time, achieved bandwidth, crossover size and step breakdown."""
    return {
        "instance": paths.instance,
        "nitro": paths.nitro,
        "gpudirect_rdma": paths.gpudirect_rdma,
        "efa_path": paths.efa_path.value,
        "message_bytes": message_bytes,
        "paths": [
            {
                "path": path.kind.value,
                "line_bits_per_s": path.line_bits_per_s,
                "one_way_s": path.one_way_s(message_bytes),
                "bytes_per_s": path.bytes_per_s(message_bytes),
                "ceiling_bytes_per_s": path.ceiling_bytes_per_s,
                "crossover_bytes": _crossover(path),
                "steps": [{"step": name, "s": seconds} for name, seconds in path.breakdown(message_bytes)],
            }
            for path in paths.paths
        ],
    }


def datapath_tables(paths: InstancePaths, message_bytes: float) -> list[Table]:
    """A summary row per path, then each path's steps."""
    direct = "GPUDirect RDMA" if paths.device == "GPU" else f"EFA RDMA to {paths.device} memory"
    gdr = direct if paths.gpudirect_rdma else f"no {direct} (host-staged)"
    nitro = paths.nitro or "no Nitro generation"
    summary = Table(
        title=f"{paths.instance} ({nitro}; {gdr}): one {format_bytes(message_bytes)} message",
        caption="per NIC; crossover = message size at which one message reaches 90% of line rate",
    )
    for column in ("path", "one way (us)", "achieved", "ceiling", "crossover"):
        summary.add_column(column, justify="left" if column == "path" else "right", no_wrap=True)
    for path in paths.paths:
        crossover = _crossover(path)
        summary.add_row(
            path.kind.value + (" *" if path.kind is paths.efa_path else ""),
            _us(path.one_way_s(message_bytes)),
            f"{path.bytes_per_s(message_bytes) * 8 / 1e9:,.2f} Gbit/s",
            f"{path.ceiling_bytes_per_s * 8 / 1e9:,.1f} Gbit/s",
            "never" if crossover is None else format_bytes(crossover),
        )
    out = [summary]
    for path in paths.paths:
        steps = Table(title=f"{path.kind.value}: steps", caption=None)
        steps.add_column("step", no_wrap=True)
        steps.add_column("us", justify="right", no_wrap=True)
        for name, seconds in path.breakdown(message_bytes):
            steps.add_row(name, f"{seconds * 1e6:,.2f}")
        steps.add_row("total", _us(path.one_way_s(message_bytes)))
        out.append(steps)
    return out


def plot_results(results: Sequence[TransportResult], path: Path, title: str) -> None:
    """Throughput and p50/p99/p99.9 bars per transport."""
    with figure(path, ncols=2, figsize=(8.0, 4.0), dpi=120) as (fig, (left, right)):
        names = [r.transport for r in results]
        left.bar(names, [r.throughput_bits_per_s / 1e9 for r in results], color="tab:blue")
        left.set_ylabel("throughput (Gbit/s)")
        width = 0.25
        for k, (label, key) in enumerate((("p50", "p50_s"), ("p99", "p99_s"), ("p99.9", "p999_s"))):
            right.bar(
                [i + (k - 1) * width for i in range(len(results))],
                [getattr(r, key) * 1e6 for r in results],
                width,
                label=label,
            )
        right.set_xticks(range(len(results)), names)
        right.set_yscale("log")
        right.set_ylabel("message time (us)")
        right.legend()
        fig.suptitle(title)


def plot_sweep(field: str, rows: Sequence[tuple[float, Sequence[TransportResult]]], path: Path) -> None:
    """Throughput and p99 against the swept value, one line per transport."""
    with figure(path, ncols=2, figsize=(8.0, 4.0), dpi=120) as (_, (left, right)):
        values = [v for v, _ in rows]
        for i, name in enumerate(r.transport for r in rows[0][1]):
            left.plot(values, [results[i].throughput_bits_per_s / 1e9 for _, results in rows], marker="o", label=name)
            right.plot(values, [results[i].p99_s * 1e6 for _, results in rows], marker="o", label=name)
        left.set_xlabel(field)
        left.set_ylabel("throughput (Gbit/s)")
        right.set_xlabel(field)
        right.set_ylabel("p99 message time (us)")
        right.set_yscale("log")
        left.legend()


def plot_datapath(paths: InstancePaths, message_bytes: float, path: Path) -> None:
    """Stacked step times per path, and achieved bandwidth against message size."""
    import numpy as np

    with figure(path, ncols=2, figsize=(10.0, 4.5), dpi=120) as (fig, (left, right)):
        for i, data_path in enumerate(paths.paths):
            bottom = 0.0
            for name, seconds in data_path.breakdown(message_bytes):
                left.bar(i, seconds * 1e6, bottom=bottom, label=name if i == 0 else None)
                bottom += seconds * 1e6
        left.set_xticks(range(len(paths.paths)), [p.kind.value for p in paths.paths])
        left.set_ylabel(f"one way, {format_bytes(message_bytes)} (us)")
        sizes = np.logspace(0, 30, 61, base=2)
        for data_path in paths.paths:
            right.plot(sizes, [data_path.bytes_per_s(s) * 8 / 1e9 for s in sizes], label=data_path.kind.value)
        right.axhline(
            0.9 * paths.paths[0].line_bits_per_s / 1e9, color="grey", linestyle="--", label="90% of line rate"
        )
        right.set_xscale("log", base=2)
        right.set_xlabel("message (bytes)")
        right.set_ylabel("Gbit/s")
        right.legend(fontsize="small")
        fig.suptitle(paths.instance)


def plot_group(results: Sequence[GroupResult], path: Path, title: str) -> None:
    """Completion of the last flow and the p99 flow per transport."""
    with figure(path, ncols=2, figsize=(8.0, 4.0), dpi=120) as (fig, (left, right)):
        names = [r.transport for r in results]
        left.bar(names, [r.completion_s * 1e6 for r in results])
        left.set_ylabel("last flow done (us)")
        left.set_yscale("log")
        right.bar(names, [r.retransmissions for r in results])
        right.set_ylabel("retransmissions")
        fig.suptitle(title)


def drawn_by_seed(scenario: Any, flows: int = 1, *, one_receiver: bool = False) -> list[str]:
    """What the seed draws in a transport run: the packets lost, the background load's arrivals, where
    several flows share equal-cost paths the paths RC's and TCP's hash gives them, and where RC runs
    DCQCN and a queue can build the switches' random RED/ECN marks (``lossless.LosslessNetwork._marks``:
    probability rising from 0 at Kmin to Pmax at Kmax). A queue builds where several flows go to
    ``one_receiver`` (an incast), where several may hash onto one path, or where other traffic loads it;
    flows to distinct receivers on one path do not queue (the leaf's uplinks carry every NIC at once)."""
    drawn = ["the losses"] if scenario.loss > 0 else []
    loaded = scenario.background > 0 or scenario.collision
    hashed = flows > 1 and scenario.num_paths > 1
    drawn += ["the background load"] if loaded else []
    drawn += ["RC's and TCP's ECMP hash"] if hashed else []
    queues = loaded or hashed or (flows > 1 and one_receiver)
    return drawn + (["DCQCN's ECN marks"] if scenario.dcqcn and queues else [])


def seeds_json(drawn: list[str], seeds: list[int]) -> dict[str, Any]:
    """The seeds run and what they draw (``fabric.draw_json``)."""
    from clustersim.present.fabric import draw_json

    return draw_json(drawn, seeds)


def seeds_line(drawn: list[str], seeds: list[int]) -> str | None:
    """Whether the answer is one draw or the median over several seeds (``fabric.draw_line``; --seeds)."""
    from clustersim.present.fabric import draw_line

    return draw_line(drawn, seeds, seeds_option=True)

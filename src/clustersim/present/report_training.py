"""The sections of a training job's report, from ``train --json``'s payload and the job's collectives.

Each figure is drawn from the same numbers as its table: the step's terms (exposed and overlapped time:
link time less exposed time), memory per device by kind against the capacity, busbw against message size
for each collective the step runs (the analytic model's curve on the job's group, its interval as a band,
measured nccl-tests points of the same instance, operation and group shape), where the expected wall time
goes with checkpoints and failures, and the cost and energy of the token budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clustersim.present.report_html import Cell, Section

DAY_S = 86400.0
MEMORY_KINDS = ("weights", "gradients", "optimizer", "activations", "overhead")
COLORS = {"exposed": "#C44E52", "overlapped": "#8FB1D9", "capacity": "#222222", "band": "rgba(76,114,176,0.18)"}


def summary_rows(train: dict[str, Any]) -> list[list[Cell]]:
    """The job and system in a few lines."""
    layout = train["layout"]
    shown = ", ".join(f"{k} {layout[k]}" for k in ("tp", "pp", "vp", "cp", "ep", "dp", "micro_batch", "zero"))
    rows: list[list[Cell]] = [
        ["model", f"{train['model']} ({train['params']:,} parameters)"],
        ["system", train["system"]],
        ["layout", shown + (" (chosen)" if train["layout_chosen"] else "")],
        ["framework, precision", f"{train['framework']}, {train['precision']}"],
        ["global batch (sequences x tokens)", f"{train['global_batch_sequences']} x {train['seq_len']}"],
        ["step_s", train["step_s"]],
        ["mfu", train["mfu"]],
        ["tokens_per_s_per_device", train["tokens_per_s_per_device"]],
        ["bottleneck", train["bottleneck"]],
    ]
    network = train.get("network")
    if network:
        rows.append([
            "network",
            f"flow simulator: {network['placement']} placement, {network['routing']}, "
            f"{network['oversubscription']:g}:1; contention adds {network['added_fraction']:.1%} to the step",
        ])  # fmt: skip
    step = train.get("intervals", {}).get("step_s")
    if step:
        rows.append([f"step_s {step['level']:.0%} interval", f"{step['low']:.4g} - {step['high']:.4g}"])
    return rows


@dataclass(frozen=True)
class StepBars:
    """The step's terms that take time: each one's exposed seconds and the overlapped part of its link time."""

    names: list[str]
    link_s: list[float]
    exposed_s: list[float]
    overlapped_s: list[float]


def step_bars(train: dict[str, Any]) -> StepBars:
    """The step figure's numbers, from ``train --json``: the terms with link or exposed time, each one's
    exposed time and its link time less the exposed time (the overlapped part)."""
    terms = [t for t in train["terms"] if t["link_s"] > 0 or t["exposed_s"] > 0]
    overlapped = [max(t["link_s"] - t["exposed_s"], 0.0) for t in terms]
    return StepBars(
        [t["name"] for t in terms], [t["link_s"] for t in terms], [t["exposed_s"] for t in terms], overlapped
    )


def memory_bars(train: dict[str, Any]) -> list[tuple[str, float]]:
    """The memory figure's numbers, from ``train --json``: bytes per device of each kind present."""
    memory = train["memory_bytes"]
    return [(kind, float(memory[kind])) for kind in MEMORY_KINDS if kind in memory]


def step_section(train: dict[str, Any]) -> Section:
    """Stacked bars per term: the exposed time and the overlapped part of its link time."""
    bars = step_bars(train)
    names, exposed, overlapped = bars.names, bars.exposed_s, bars.overlapped_s
    figure = {
        "data": [
            {"type": "bar", "name": "exposed_s", "x": names, "y": exposed, "marker": {"color": COLORS["exposed"]}},
            {
                "type": "bar",
                "name": "overlapped_s",
                "x": names,
                "y": overlapped,
                "marker": {"color": COLORS["overlapped"]},
            },
        ],
        "layout": {
            "barmode": "stack",
            "title": {"text": f"step {train['step_s']:.4g} s by term"},
            "yaxis": {"title": {"text": "seconds per step"}},
        },
    }
    rows: list[list[Cell]] = [
        [name, link, e, o, e / train["step_s"]]
        for name, link, e, o in zip(names, bars.link_s, exposed, overlapped, strict=True)
    ]
    return Section(
        "step", "Step time by term", ["term", "link_s", "exposed_s", "overlapped_s", "share_of_step"], rows, figure,
        ["Overlapped: the part of a term's link time hidden behind compute (link time less exposed time)."],
    )  # fmt: skip


def memory_section(train: dict[str, Any]) -> Section:
    """Bytes per device by kind, stacked, against the device's capacity."""
    memory, capacity = train["memory_bytes"], train["capacity_bytes"]
    bars = memory_bars(train)
    gib = 2.0**30
    data: list[dict[str, Any]] = [
        {"type": "bar", "name": kind, "x": ["per device"], "y": [value / gib]} for kind, value in bars
    ]
    figure = {
        "data": data,
        "layout": {
            "barmode": "stack",
            "title": {"text": f"memory per device: {memory['required'] / gib:.1f} of {capacity / gib:.1f} GiB"},
            "yaxis": {"title": {"text": "GiB"}, "range": [0, 1.05 * max(capacity, memory["required"]) / gib]},
            "shapes": [
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": capacity / gib,
                    "y1": capacity / gib,
                    "line": {"color": COLORS["capacity"], "dash": "dash"},
                }
            ],
        },
    }
    rows: list[list[Cell]] = [[kind, value, value / capacity] for kind, value in bars]
    rows += [["required", memory["required"], memory["required"] / capacity], ["capacity", capacity, 1.0]]
    notes = [f"fits: {'yes' if train['fits'] else 'no'}; the dashed line is the device's capacity."]
    return Section("memory", "Memory per device", ["kind", "bytes", "share_of_capacity"], rows, figure, notes)


@dataclass(frozen=True)
class BusbwCurve:
    """busbw against size, as ``collective --json``'s rows give it, with their interval (``band``: low, high,
    level; None: rows without intervals)."""

    size_bytes: list[int]
    busbw_GBps: list[float]
    band: tuple[list[float], list[float], float] | None


def busbw_curve(rows: list[dict[str, Any]]) -> BusbwCurve:
    """The busbw figure's numbers from ``collective --json``'s ``rows``."""
    band = None
    if rows and "intervals" in rows[0]:
        low = [r["intervals"]["busbw_GBps"]["low"] for r in rows]
        high = [r["intervals"]["busbw_GBps"]["high"] for r in rows]
        band = (low, high, float(rows[0]["intervals"]["busbw_GBps"]["level"]))
    return BusbwCurve([r["size_bytes"] for r in rows], [r["busbw_GBps"] for r in rows], band)


def collective_section(index: int, item: dict[str, Any]) -> Section:
    """busbw against size on one of the step's groups: the model's curve, its interval band, the job's message
    and the measured points of the same instance, operation and shape."""
    rows_in = item["sweep"]["rows"]
    curve = busbw_curve(rows_in)
    sizes, busbw = curve.size_bytes, curve.busbw_GBps
    label = f"{item['kind']}: {item['op']} on {item['ranks']} ranks ({item['nodes']} x {item['per_node']})"
    data: list[dict[str, Any]] = []
    if curve.band is not None:
        low, high, level = curve.band
        data += [
            {"type": "scatter", "mode": "lines", "x": sizes, "y": low, "line": {"width": 0}, "showlegend": False,
             "name": "interval low", "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": sizes, "y": high, "line": {"width": 0}, "fill": "tonexty",
             "fillcolor": COLORS["band"], "name": f"{level:.0%} interval"},
        ]  # fmt: skip
    data.append({"type": "scatter", "mode": "lines+markers", "name": "predicted busbw", "x": sizes, "y": busbw,
                 "marker": {"size": 4}})  # fmt: skip
    data.append(
        {"type": "scatter", "mode": "markers", "name": "the job's message", "x": [item["size_bytes"]],
         "y": [item["busbw_GBps"]], "marker": {"size": 12, "symbol": "star", "color": COLORS["exposed"]}}
    )  # fmt: skip
    measured = item["measured"]
    if measured:
        data.append(
            {"type": "scatter", "mode": "markers", "name": "measured", "x": [m["size_bytes"] for m in measured],
             "y": [m["busbw_GBps"] for m in measured], "marker": {"size": 8, "symbol": "x", "color": "#222"},
             "text": [m["source"] for m in measured]}
        )  # fmt: skip
    figure = {
        "data": data,
        "layout": {
            "title": {"text": label},
            "xaxis": {"type": "log", "title": {"text": "size_bytes (per rank)"}},
            "yaxis": {"title": {"text": "busbw_GBps"}},
        },
    }
    measured_at = {m["size_bytes"]: m["busbw_GBps"] for m in measured}
    rows: list[list[Cell]] = [
        [r["size_bytes"], r["time_us"], r["busbw_GBps"],
         r["intervals"]["busbw_GBps"]["low"] if "intervals" in r else None,
         r["intervals"]["busbw_GBps"]["high"] if "intervals" in r else None,
         measured_at.get(r["size_bytes"])]
        for r in rows_in
    ]  # fmt: skip
    notes = [
        f"The job runs it {item['per_step']:,.0f} times a step at {item['size_bytes']:,.0f} bytes per rank "
        f"({item['time_us']:.4g} us each by the model, {item['busbw_GBps']:.4g} GB/s busbw); "
        f"{item['groups']:,} groups of this shape at once."
    ]
    if abs(item["step_time_us"] - item["time_us"]) > 0.01 * item["time_us"]:
        notes.append(
            f"The step prices it at {item['step_time_us']:.4g} us, not the curve's {item['time_us']:.4g} us: "
            "the framework's dispatch (per node for EP) moves other bytes than a plain collective."
        )
    if measured:
        notes.append(f"Measured: {len(measured)} nccl-tests cases of this shape ({', '.join(item['sources'])}).")
    else:
        notes.append(item["measured_note"])
    columns = ["size_bytes", "time_us", "busbw_GBps", "busbw_low_GBps", "busbw_high_GBps", "measured_busbw_GBps"]
    return Section(f"collective-{index}", f"Collective: {label}", columns, rows, figure, notes)


def checkpoint_section(train: dict[str, Any]) -> Section | None:
    """Where the expected wall time goes with checkpoints and failures (None: no checkpoint policy)."""
    job = train.get("job") or {}
    if "goodput" not in job:
        return None
    parts = [("failure_free_time_s", "work"), ("rework_s", "rework after failures"),
             ("waiting_s", "checkpoint stalls and restarts")]  # fmt: skip
    data = [
        {"type": "bar", "orientation": "h", "name": name, "y": ["expected run"], "x": [job[key] / DAY_S]}
        for key, name in parts
    ]
    figure = {
        "data": data,
        "layout": {
            "barmode": "stack",
            "title": {"text": f"expected {job['time_s'] / DAY_S:,.1f} days, goodput {job['goodput']:.1%}"},
            "xaxis": {"title": {"text": "days"}},
        },
    }
    keys = ["time_s", "failure_free_time_s", "rework_s", "waiting_s", "goodput", "checkpoint_interval_s",
            "checkpoint_stall_s", "num_checkpoints", "expected_failures", "job_mtbf_s", "restart_s", "failure_rate",
            "checkpoint_tier", "storage"]  # fmt: skip
    rows: list[list[Cell]] = [[key, job[key]] for key in keys if key in job]
    notes = [
        f"A checkpoint every {job['checkpoint_interval_s'] / 3600:.2f} h of work stalls "
        f"{job['checkpoint_stall_s']:.3g} s; {job['expected_failures']:.1f} failures expected (one every "
        f"{job['job_mtbf_s'] / 3600:.1f} h), each costing a restart of {job['restart_s']:.0f} s and the work "
        "since the last checkpoint."
    ]
    return Section("checkpoints", "Checkpoints and failures", ["figure", "value"], rows, figure, notes)


def cost_section(train: dict[str, Any]) -> Section | None:
    """The token budget's time, device-hours, cost and energy, each with its interval (a table only)."""
    job = train.get("job")
    if not job:
        return None
    intervals = job.get("intervals", {})
    keys = ["tokens", "steps", "time_s", "device_hours", "cost_usd", "storage_cost_usd", "energy_kwh",
            "price_usd_per_hour", "price_offer", "price_as_of", "price_region"]  # fmt: skip
    rows: list[list[Cell]] = []
    for key in keys:
        if key in job:
            found = intervals.get(key)
            rows.append([key, job[key], found["low"] if found else None, found["high"] if found else None])
    notes = [job["price_note"]] if "price_note" in job else []
    return Section("cost", "Cost and energy", ["figure", "value", "low", "high"], rows, None, notes)


def training_sections(
    train: dict[str, Any], collectives: list[dict[str, Any]], fabric: list[Section] | None = None
) -> list[Section]:
    """Every section of a training report, in reading order (``fabric``: the fabric view, after the
    collectives)."""
    found: list[Section | None] = [step_section(train), memory_section(train)]
    found += [collective_section(i, item) for i, item in enumerate(collectives)]
    found += fabric or []
    found += [checkpoint_section(train), cost_section(train)]
    return [s for s in found if s is not None]

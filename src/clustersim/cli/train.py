"""``clustersim train``: step time, memory, MFU and the cost of a training job on catalogued instances."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, user_errors
from clustersim.compute.efficiency import efficiency_for, efficiency_table
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, Recompute
from clustersim.plan.search import choose_layout
from clustersim.system import System, system_for_instance
from clustersim.training.estimate import Estimate, estimate_training
from clustersim.training.job import JobTotals, TrainingJob
from clustersim.units import format_bytes, format_count, format_seconds, parse_count
from clustersim.workload.zoo import load_model

_BAR_WIDTH = 30


def train_command(
    model: Annotated[str, typer.Argument(help="Zoo id (e.g. llama3-70b), a model TOML or a HF config.json.")],
    instance: Annotated[str, typer.Option("--instance", help="Instance id, e.g. p5en.48xlarge.")] = "p5en.48xlarge",
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="Number of instances.")] = 16,
    devices_per_node: Annotated[
        int | None,
        typer.Option(
            "--devices-per-node", min=1, help="Ranks per instance (default: one per chip; 32 on trn1 = NeuronCores)."
        ),
    ] = None,
    tp: Annotated[int | None, typer.Option("--tp", min=1, help="Tensor parallel degree.")] = None,
    pp: Annotated[int | None, typer.Option("--pp", min=1, help="Pipeline parallel degree.")] = None,
    vp: Annotated[int, typer.Option("--vp", min=1, help="Model chunks per pipeline rank (interleaved 1F1B).")] = 1,
    cp: Annotated[int, typer.Option("--cp", min=1, help="Context parallel degree.")] = 1,
    ep: Annotated[int, typer.Option("--ep", min=1, help="Expert parallel degree.")] = 1,
    micro_batch: Annotated[int, typer.Option("--micro-batch", min=1, help="Sequences per micro-batch.")] = 1,
    zero: Annotated[int, typer.Option("--zero", min=0, max=3, help="ZeRO stage 0-3 (3 = FSDP).")] = 1,
    sp: Annotated[
        bool | None, typer.Option("--sp/--no-sp", help="Sequence parallelism (default: on if tp > 1).")
    ] = None,
    recompute: Annotated[
        Recompute, typer.Option("--recompute", case_sensitive=False, help="Activation recompute.")
    ] = Recompute.SELECTIVE,
    tokens: Annotated[str, typer.Option("--tokens", help="Training budget in tokens, e.g. 15T, 300B.")] = "1T",
    global_batch: Annotated[int, typer.Option("--global-batch", min=1, help="Sequences per optimizer step.")] = 1024,
    seq: Annotated[int | None, typer.Option("--seq", min=1, help="Sequence length (default: the model's).")] = None,
    precision: Annotated[str, typer.Option("--precision", help="bf16, fp16 or fp8.")] = "bf16",
    offer: Annotated[str, typer.Option("--price", help="on_demand or capacity_block.")] = "on_demand",
    models: Annotated[list[Path] | None, typer.Option("--models", help="Extra model zoo directories.")] = None,
    efficiency: Annotated[
        list[Path] | None,
        typer.Option("--efficiency", help="A TOML of achieved fractions per accelerator family (overrides fields)."),
    ] = None,
    uneven: Annotated[
        bool,
        typer.Option("--uneven-stages", help="Allow layers that do not divide by pp*vp (fullest stage sets pace)."),
    ] = False,
    ops: Annotated[bool, typer.Option("--ops", help="Also show each operation's time per layer.")] = False,
    compare: Annotated[
        str | None, typer.Option("--compare", help="Another instance type to run the same job on, side by side.")
    ] = None,
    compare_nodes: Annotated[
        int | None, typer.Option("--compare-nodes", min=1, help="Instances of the --compare type (default: --nodes).")
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Estimate a training job: step time by term, memory per device, MFU, time, cost and energy.

    Without --tp/--pp the fastest layout that fits is chosen and named.
    """
    with user_errors():
        transformer = load_model(model, extra_dirs=models or ())
        cat = load_catalog(catalog or ())
        dtype = _precision(precision)
        job = TrainingJob(
            global_batch=global_batch,
            seq_len=seq if seq is not None else transformer.seq_len,
            precision=dtype,
            tokens=parse_count(tokens),
        )
        chosen = tp is None and pp is None

        table = efficiency_table(efficiency or ())

        def run_on(system: System) -> Estimate:
            fractions = efficiency_for(system.accelerator, table)
            if chosen:
                layout = choose_layout(transformer, system, job, efficiency=fractions)
            else:
                layout = _given_layout(
                    system, tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, micro_batch=micro_batch, zero=zero,
                    sp=sp, recompute=recompute, uneven=uneven,
                )  # fmt: skip
            notes = (f"layout chosen (fastest that fits): {layout.describe()}",) if chosen else ()
            return estimate_training(transformer, system, layout, job, offer=offer, efficiency=fractions, notes=notes)

        estimate = run_on(system_for_instance(cat, instance, nodes, devices_per_node=devices_per_node))
        other = run_on(system_for_instance(cat, compare, compare_nodes or nodes)) if compare else None
    if other is not None:
        _print_comparison(estimate, other, as_json)
        return
    if as_json:
        emit_json({"params": transformer.num_params(), "layout_chosen": chosen, **estimate.to_json()})
        return
    _print(estimate, transformer.num_params())
    if ops:
        _print_operations(estimate)


def _given_layout(
    system: System,
    *,
    tp: int | None,
    pp: int | None,
    vp: int,
    cp: int,
    ep: int,
    micro_batch: int,
    zero: int,
    sp: bool | None,
    recompute: Recompute,
    uneven: bool,
) -> Layout:
    """The layout the options give; data parallel fills the devices, SP defaults to on with tp > 1."""
    t, p = tp or 1, pp or 1
    if system.num_devices % (t * p * cp):
        raise ClusterSimError(
            f"tp*pp*cp = {t}*{p}*{cp} = {t * p * cp} does not divide the {system.num_devices} devices of {system.name}"
        )
    return Layout(
        tp=t,
        pp=p,
        vp=vp,
        cp=cp,
        ep=ep,
        dp=system.num_devices // (t * p * cp),
        micro_batch=micro_batch,
        zero=zero,
        sequence_parallel=t > 1 if sp is None else sp,
        recompute=recompute,
        uneven_stages=uneven,
    )


def _summary(estimate: Estimate) -> dict[str, Any]:
    """The figures a comparison shows, numbers in SI units."""
    totals = estimate.totals
    return {
        "system": estimate.system,
        "layout": estimate.layout.describe(),
        "step_s": estimate.step_s,
        "tokens_per_s_per_device": estimate.tokens_per_s_per_device,
        "tokens_per_s": estimate.tokens_per_s_per_device * estimate.num_devices,
        "mfu": estimate.mfu,
        "memory_required_bytes": estimate.memory.required_bytes,
        "capacity_bytes": estimate.capacity_bytes,
        "fits": estimate.fits,
        "bottleneck": estimate.bottleneck,
        "time_s": totals.time_s if totals else None,
        "device_hours": totals.device_hours if totals else None,
        "cost_usd": totals.cost_usd if totals else None,
        "energy_kwh": totals.energy_kwh if totals else None,
    }


def _print_comparison(first: Estimate, second: Estimate, as_json: bool) -> None:
    a, b = _summary(first), _summary(second)
    ratios = {
        key: b[key] / a[key]
        for key in a
        if isinstance(a[key], float) and isinstance(b[key], float) and a[key] and not isinstance(a[key], bool)
    }
    if as_json:
        emit_json({"first": first.to_json(), "second": second.to_json(), "ratios_second_to_first": ratios})
        return
    table = Table(title=f"{first.model}: {a['system']} vs {b['system']}")
    for column in ("", a["system"], b["system"], "ratio"):
        table.add_column(column, overflow="fold")

    def plain(value: object) -> str:
        return f"{value:,.0f}" if isinstance(value, float) else str(value)

    formats: dict[str, Callable[[float], str]] = {
        "step_s": format_seconds,
        "time_s": lambda v: f"{v / 86400:,.1f} days",
        "memory_required_bytes": format_bytes,
        "capacity_bytes": format_bytes,
        "mfu": lambda v: f"{100 * v:.1f}%",
        "cost_usd": lambda v: f"${v:,.0f}",
        "energy_kwh": lambda v: f"{v / 1000:,.1f} MWh",
    }
    for key in a:
        show = formats.get(key, plain)
        cells = ["unknown" if v is None else show(v) for v in (a[key], b[key])]
        ratio = f"{ratios[key]:.2f}x" if key in ratios else ""
        table.add_row(key.replace("_", " "), *cells, ratio)
    console.print(table)
    for estimate in (first, second):
        for note in estimate.notes:
            console.print(f"note ({estimate.system}): {note}")


def _print_operations(estimate: Estimate) -> None:
    table = Table(title="operations per micro-batch (one layer; the head runs on the last stage)")
    for column in ("operation", "scope", "forward", "backward"):
        table.add_column(column, justify="left" if column in ("operation", "scope") else "right")
    for op in estimate.operations:
        table.add_row(op.name, op.scope, format_seconds(op.forward_s), format_seconds(op.backward_s))
    console.print(table)


def _precision(text: str) -> Dtype:
    try:
        return Dtype(text.lower())
    except ValueError:
        raise ClusterSimError(f"unknown precision {text!r} (valid: bf16, fp16, fp8)") from None


def _print(estimate: Estimate, params: int) -> None:
    layout, job = estimate.layout, estimate.job
    console.print(
        f"[bold]{estimate.model}[/] ({format_count(params)} parameters) on {estimate.system}: "
        f"{layout.describe()}, global batch {job.global_batch} sequences = {format_count(job.tokens_per_step)} "
        f"tokens of {job.seq_len}, {job.precision.value}"
    )
    table = Table(title=f"step {format_seconds(estimate.step_s)}")
    for column in ("term", "link time", "exposed", "share"):
        table.add_column(column, justify="left" if column in ("term", "share") else "right")
    for term in estimate.terms:
        if term.link_s <= 0 and term.exposed_s <= 0:
            continue
        share = term.exposed_s / estimate.step_s
        bar = "█" * round(share * _BAR_WIDTH)
        table.add_row(
            term.name, format_seconds(term.link_s), format_seconds(term.exposed_s), f"{bar} {100 * share:.1f}%"
        )
    console.print(table)
    memory = Table(title=f"memory per device (capacity {format_bytes(estimate.capacity_bytes)})")
    memory.add_column("kind")
    memory.add_column("bytes", justify="right")
    for kind, value in estimate.memory.to_json().items():
        memory.add_row(kind, format_bytes(value))
    console.print(memory)
    headroom = estimate.capacity_bytes - estimate.memory.required_bytes
    fit = "fits" if estimate.fits else "[bold red]does not fit[/]"
    console.print(
        f"{fit} (headroom {format_bytes(headroom)}); MFU {100 * estimate.mfu:.1f}%, HFU {100 * estimate.hfu:.1f}%, "
        f"{estimate.tokens_per_s_per_device:,.0f} tokens/s per device; bottleneck: {estimate.bottleneck}"
    )
    _print_job(estimate.totals)
    for note in estimate.notes:
        console.print(f"note: {note}")


def _print_job(totals: JobTotals | None) -> None:
    if totals is None:
        return
    line = (
        f"{format_count(totals.tokens)} tokens: {totals.steps:,} steps, {totals.time_s / 86400:,.1f} days, "
        f"{totals.device_hours:,.0f} device-hours"
    )
    if totals.cost_usd is not None and totals.price_usd_per_hour is not None:
        line += (
            f", ${totals.cost_usd:,.0f} at ${totals.price_usd_per_hour:,.2f}/h per instance "
            f"({totals.price_offer.replace('_', ' ')}, {totals.price_region}, {totals.price_as_of})"
        )
    else:
        line += f", cost unknown ({totals.price_note})"
    if totals.energy_kwh is not None:
        line += f", {totals.energy_kwh / 1000:,.1f} MWh at board power"
    console.print(line)

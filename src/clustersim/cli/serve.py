"""``clustersim serve``: serving throughput and latency of a model on a catalogued instance.

Registered in ``clustersim.cli.app``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, user_errors
from clustersim.errors import ClusterSimError
from clustersim.plan.serving import ServingScenario, best_serving_layout
from clustersim.serving.engine import ServingSystem, parse_precision, serving_system_for_instance
from clustersim.serving.estimate import (
    Batching,
    Request,
    ServingEstimate,
    compare_offline,
    estimate_offline,
)
from clustersim.serving.latency import estimate_server, max_rate
from clustersim.units import format_bytes, format_count, format_seconds
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model

# (label, ServingEstimate field or a derived one: layout, precisions, batch_text).
_ROWS: tuple[tuple[str, str], ...] = (
    ("layout", "layout"),
    ("precision (weights / KV)", "precisions"),
    ("batch per replica (limited by)", "batch_text"),
    ("weights per device", "weights_bytes_per_device"),
    ("KV cache per token per device", "kv_bytes_per_token_per_device"),
    ("KV room per device, tokens", "kv_capacity_tokens_per_device"),
    ("step", "step_s"),
    ("  GEMM compute", "gemm_compute_s"),
    ("  GEMM weight reads", "gemm_memory_s"),
    ("  decode attention (KV reads)", "decode_attention_s"),
    ("  prefill attention", "prefill_attention_s"),
    ("  elementwise (norms, residuals)", "elementwise_s"),
    ("  tensor/pipeline communication", "communication_s"),
    ("  overheads (step, per sequence)", "overhead_s"),
    ("memory-bound share of the step", "memory_bound_share"),
    ("TTFT", "ttft_s"),
    ("TPOT", "tpot_s"),
    ("requests/s", "request_rate_per_s"),
    ("output tokens/s per device", "output_tokens_per_s_per_device"),
    ("output tokens/s (system)", "output_tokens_per_s"),
)
_BOLD = {"output_tokens_per_s", "output_tokens_per_s_per_device"}
_TIMES = {field for _, field in _ROWS if field.endswith("_s") and "_per_s" not in field}


def serve_command(
    model: Annotated[str, typer.Argument(help="Zoo id (e.g. llama2-70b), a model TOML or a HF config.json.")],
    instance: Annotated[str, typer.Option("--instance", help="Instance id, e.g. p5.48xlarge.")] = "p5.48xlarge",
    tp: Annotated[
        int | None, typer.Option("--tp", help="Tensor parallel degree (default: the best that fits).")
    ] = None,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline parallel degree.")] = 1,
    input_tokens: Annotated[int, typer.Option("--input", help="Prompt tokens per request (mean).")] = 2048,
    output_tokens: Annotated[int, typer.Option("--output", help="Output tokens per request (mean).")] = 128,
    batch: Annotated[
        int | None, typer.Option("--batch", help="Sequences in flight per replica (default: the best that fits).")
    ] = None,
    precision: Annotated[str, typer.Option("--precision", help="Weights and GEMMs: bf16, fp16 or fp8.")] = "bf16",
    kv_cache: Annotated[
        str | None, typer.Option("--kv-cache", help="KV cache precision (default: as --precision).")
    ] = None,
    batching: Annotated[
        Batching, typer.Option("--batching", case_sensitive=False, help="continuous (in-flight) or static.")
    ] = Batching.CONTINUOUS,
    rate: Annotated[
        float | None, typer.Option("--rate", help="Server mode: requests/s for the whole instance.")
    ] = None,
    ttft_target: Annotated[
        float | None, typer.Option("--ttft-target", help="Server mode: highest rate with mean TTFT <= this (s).")
    ] = None,
    tpot_target: Annotated[
        float | None, typer.Option("--tpot-target", help="Server mode: highest rate with mean TPOT <= this (s).")
    ] = None,
    compare: Annotated[
        str | None, typer.Option("--compare", help="A second instance to show side by side, e.g. p5e.48xlarge.")
    ] = None,
    models: Annotated[list[Path] | None, typer.Option("--models", help="Extra model zoo directories.")] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Serving throughput (offline) or latency at a request rate (server) on one instance.

    Offline: output tokens/s of the whole instance at the best batch that fits (dp replicas fill
    it). Server: --rate gives TTFT and TPOT at that rate; --ttft-target/--tpot-target give the
    highest rate that meets them. --compare shows a second instance and why it is faster or slower.
    """
    with user_errors():
        transformer = load_model(model, extra_dirs=models or ())
        cat = load_catalog(catalog or ())
        weights = parse_precision(precision, "--precision")
        request = Request(
            input_tokens=float(input_tokens),
            output_tokens=float(output_tokens),
            precision=weights,
            kv_precision=parse_precision(kv_cache, "--kv-cache") if kv_cache else None,
            batching=batching,
        )
        if rate is not None and (ttft_target is not None or tpot_target is not None):
            raise ClusterSimError("--rate: give either a rate or latency targets (--ttft-target/--tpot-target)")
        instances = [instance] + ([compare] if compare else [])
        estimates = [
            _run(transformer, cat, name, tp, pp, request, (batch, rate, ttft_target, tpot_target)) for name in instances
        ]
        reasons: tuple[str, ...] = ()
        if compare and rate is None and ttft_target is None and tpot_target is None:
            first, second = (serving_system_for_instance(cat, e.system, tp=e.tp, pp=e.pp, dp=e.dp) for e in estimates)
            if (first.tp, first.pp) == (second.tp, second.pp):
                reasons = compare_offline(transformer, first, second, request, batch=batch).reasons
    if as_json:
        payload: dict[str, Any] = {"params": transformer.num_params(), **estimates[0].to_json()}
        if compare:
            payload = {
                "first": estimates[0].to_json(),
                "second": estimates[1].to_json(),
                "ratio": estimates[1].output_tokens_per_s / estimates[0].output_tokens_per_s,
                "reasons": list(reasons) or _generic_reasons(*estimates),
            }
        emit_json(payload)
        return
    _print(transformer, estimates, list(reasons) or (_generic_reasons(*estimates) if compare else []))


def _run(
    model: Transformer,
    catalog: Catalog,
    instance: str,
    tp: int | None,
    pp: int,
    request: Request,
    scenario: tuple[int | None, float | None, float | None, float | None],
) -> ServingEstimate:
    """The estimate on ``instance``; ``scenario`` is (batch, rate, ttft target, tpot target); no ``tp``:
    the best degree (``clustersim.plan.serving``)."""
    batch, rate, ttft_target, tpot_target = scenario
    wanted = ServingScenario(batch=batch, rate_per_s=rate, ttft_target_s=ttft_target, tpot_target_s=tpot_target)
    return best_serving_layout(model, catalog, instance, request, tp=tp, pp=pp, scenario=wanted)


def _scenario(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    batch: int | None,
    rate: float | None,
    ttft_target: float | None,
    tpot_target: float | None,
) -> ServingEstimate:
    if rate is not None:
        return estimate_server(model, system, request, rate)
    if ttft_target is not None or tpot_target is not None:
        return max_rate(
            model,
            system,
            request,
            ttft_target_s=ttft_target if ttft_target is not None else float("inf"),
            tpot_target_s=tpot_target if tpot_target is not None else float("inf"),
        )
    return estimate_offline(model, system, request, batch=batch)


def _generic_reasons(first: ServingEstimate, second: ServingEstimate) -> list[str]:
    reasons = [
        f"batch: {first.batch} ({first.batch_limited_by}, KV room {first.kv_capacity_tokens_per_device:,.0f} "
        f"tokens/device) vs {second.batch} ({second.batch_limited_by}, "
        f"{second.kv_capacity_tokens_per_device:,.0f})",
        f"memory-bound share of the step: {first.memory_bound_share:.0%} vs {second.memory_bound_share:.0%}",
    ]
    if (first.tp, first.pp) != (second.tp, second.pp):
        reasons.append(
            f"layout: {first.dp} x tp{first.tp} pp{first.pp} vs {second.dp} x tp{second.tp} pp{second.pp}; "
            f"communication {format_seconds(first.communication_s)} vs {format_seconds(second.communication_s)} "
            f"per step"
        )
    return reasons


def _cell(estimate: ServingEstimate, field: str) -> str:
    if field == "layout":
        return f"{estimate.dp} x (tp {estimate.tp} x pp {estimate.pp}) on {estimate.device}"
    if field == "precisions":
        return f"{estimate.precision} / {estimate.kv_precision}"
    if field == "batch_text":
        return f"{estimate.batch} of {estimate.max_batch} ({estimate.batch_limited_by})"
    value = getattr(estimate, field)
    if field in _TIMES:
        return format_seconds(value)
    if field.endswith("_bytes_per_device") or field.endswith("_per_token_per_device"):
        return format_bytes(value)
    if field == "memory_bound_share":
        return f"{100 * value:.0f}%"
    if field == "kv_capacity_tokens_per_device":
        return format_count(value)
    return f"{value:,.4g}" if value < 100 else f"{value:,.0f}"


def _ratio(first: ServingEstimate, second: ServingEstimate, field: str) -> str:
    key = "batch" if field == "batch_text" else field
    value = getattr(first, key, None)
    other = getattr(second, key, None)
    if not isinstance(value, int | float) or not isinstance(other, int | float) or value == 0:
        return ""
    return f"{other / value:.2f}x"


def _print(model: Transformer, estimates: list[ServingEstimate], reasons: list[str]) -> None:
    head = estimates[0]
    scenario = "offline" if head.scenario == "offline" else "server"
    console.print(
        f"[bold]{model.name}[/] ({format_count(model.num_params())} parameters), {scenario}, "
        f"{head.input_tokens:,.0f} in / {head.output_tokens:,.0f} out tokens, {head.batching} batching"
    )
    table = Table(title=" vs ".join(e.system for e in estimates))
    table.add_column("")
    for estimate in estimates:
        table.add_column(estimate.system, justify="right")
    if len(estimates) == 2:
        table.add_column("ratio", justify="right")
    for label, field in _ROWS:
        cells = [_cell(e, field) for e in estimates]
        if len(estimates) == 2:
            cells.append(_ratio(estimates[0], estimates[1], field))
        table.add_row(label, *cells, style="bold" if field in _BOLD else None)
    console.print(table)
    for reason in reasons:
        console.print(f"why: {reason}", highlight=False)

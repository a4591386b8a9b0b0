"""``clustersim plan MODEL --dataset NAME``: the serving mode of ``plan`` (``clustersim.plan.serving_search``).

``--dataset`` turns it on; ``--rate`` or ``--concurrency`` give the load (neither: the highest rate meeting
``--slo``, which then needs a TTFT bound). Options of the training plan are refused here by name, and the serving
options in a training plan. ``plan_serving_view`` draws the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from clustersim.cli.common import given_options
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.plan.serving_rows import ServingLoad, ServingPlan
    from clustersim.serving.estimate import Request
    from clustersim.workload.transformer import Transformer

# The serving plan's own options (parameter names): any of them without --dataset is refused.
SERVING_ONLY = ("rate", "concurrency", "slo", "engine", "simulate_top", "requests")
# The training plan's options a serving plan does not read.
TRAINING_ONLY = (
    "devices_per_node", "tokens", "global_batch", "batch_tokens", "seq", "framework", "storage", "checkpoint",
    "checkpoint_every", "failure_rate", "safe", "deadline", "budget", "micro_batch", "vp", "cp", "ep", "etp",
    "headroom",
    "keep", "efficiency", "software", "torch_compile", "bf16_layers", "operation_formats", "executor", "address",
    "workers",
)  # fmt: skip
DEFAULT_NODES = "1..8"
DEFAULT_SIMULATED = 3  # top rows the simulator runs (each some 0.1-0.5 s at 1,000 requests)
DEFAULT_SIM_REQUESTS = 1000


def serving_mode(ctx: typer.Context, dataset: str | None) -> bool:
    """Whether ``plan`` plans a serving deployment; a serving option without ``--dataset`` is refused."""
    if dataset is not None:
        return True
    _refuse_given(
        ctx,
        SERVING_ONLY,
        "a serving plan's option; plan a serving deployment with --dataset NAME (e.g. sharegpt), or drop it for a "
        "training plan",
    )
    return False


def _refuse_given(ctx: typer.Context, names: tuple[str, ...], why: str) -> None:
    """Refuse, in one line naming it, the first of the options ``names`` the command line gives."""
    given = given_options(ctx, names)
    if given:
        raise ClusterSimError(f"{given[0]}: {why}", field=given[0])


def run_serving_plan(ctx: typer.Context, p: dict[str, Any]) -> None:
    """Plan the serving deployment the options ``p`` (the command's parameters by name) describe and print it."""
    from clustersim.catalog import registry
    from clustersim.cli.common import emit_json, print_all, user_errors
    from clustersim.cli.fabric_options import calibration_line
    from clustersim.cli.progress import progress_bar
    from clustersim.cli.spreads import serving_spread
    from clustersim.plan.planner_grid import expand_counts
    from clustersim.plan.serving_search import ServingGrid, plan_serving
    from clustersim.scenario.training import model_spec, user_files
    from clustersim.serving.sim_requests import request_sampler
    from clustersim.workload import zoo

    with user_errors():
        _refuse_given(
            ctx,
            TRAINING_ONLY,
            "a training plan's option; a serving plan (--dataset) searches instances, nodes, precisions and tp x pp "
            "layouts at --rate/--concurrency within --slo",
        )
        objective = p["objective"] if given_options(ctx, ("objective",)) else "cost"
        load = _load(p)
        if p["engine"] is not None:
            from clustersim.serving.engines import engine_profile

            try:
                engine_profile(p["engine"])
            except ClusterSimError as exc:
                raise ClusterSimError(f"--engine: {exc}", field="--engine", value=p["engine"]) from None
        cat = registry.load_catalog(user_files(registry.ENV_VAR, p["catalog"] or []), use_env=False)
        model = zoo.load_model(
            model_spec(p["model"]), extra_dirs=user_files(zoo.ENV_VAR, p["models"] or []), use_env=False
        )
        requests, notes, lengths = _requests(model, p["dataset"], listed([p["precision"]], "--precision"))
        offers = listed([p["offer"]], "--price")
        if len(offers) > 1:
            raise ClusterSimError(f"--price: a serving plan prices one offer, got {offers}", field="--price",
                                  value=p["offer"])  # fmt: skip
        nodes = expand_counts(p["nodes"] if given_options(ctx, ("nodes",)) else DEFAULT_NODES, "--nodes")
        if p["max_nodes"] is not None:
            nodes = tuple(n for n in nodes if n <= p["max_nodes"])
            if not nodes:
                raise ClusterSimError(f"--max-nodes: {p['max_nodes']} is below every --nodes count",
                                      field="--max-nodes", value=p["max_nodes"])  # fmt: skip
        grid = ServingGrid(
            instances=listed(p["instances"] or ["p5en.48xlarge"], "--instances"), nodes=nodes, requests=requests,
            engine=p["engine"], offer=offers[0],
        )  # fmt: skip
        catalogs = p["catalog"] or []
        simulate_top = DEFAULT_SIMULATED if p["simulate_top"] is None else p["simulate_top"]
        if simulate_top == 0 and p["requests"] is not None:
            raise ClusterSimError("--requests: sizes the simulations of the top rows; --simulate-top 0 runs none",
                                  field="--requests", value=p["requests"])  # fmt: skip
        sampler = request_sampler(lengths.dataset, lengths.input_tokens, lengths.output_tokens)
        with progress_bar("plan (serving)", "deployments") as progress:
            plan = plan_serving(
                model, cat, grid, load, objective=objective, top=p["top"], simulate_top=simulate_top,
                spread_of=lambda estimate, instance, field: serving_spread(estimate, instance, p["level"], catalogs,
                                                                           field, experts=model.moe is not None),
                sampler=sampler, sim_requests=p["requests"] or DEFAULT_SIM_REQUESTS, dataset=p["dataset"],
                progress=progress,
            )  # fmt: skip
        plan = _with_notes(plan, notes)
        if p["plot"] is not None:
            from clustersim.cli.common import write_figure
            from clustersim.cli.plan_serving_view import plot_serving_plan

            write_figure(lambda: plot_serving_plan(plan, p["plot"]), p["plot"])
    from clustersim.cli.fabric_options import calibration_in_force
    from clustersim.cli.plan_serving_view import serving_plan_json, serving_plan_view

    calibrated = calibration_in_force()
    if p["as_json"]:
        emit_json(serving_plan_json(plan, model) | {"calibration": calibrated})
        return
    print_all(*serving_plan_view(plan, model), calibration_line(calibrated))


def _load(p: dict[str, Any]) -> ServingLoad:
    """The load and SLO the options give; a max-rate plan (no --rate, no --concurrency) needs a TTFT bound."""
    from clustersim.plan.serving_rows import SERVING_OBJECTIVES, ServingLoad
    from clustersim.serving.sim_report import parse_slo

    if p["objective"] not in SERVING_OBJECTIVES:
        raise ClusterSimError(
            f"--objective: {p['objective']!r} is not a serving objective (valid: {', '.join(SERVING_OBJECTIVES)})",
            field="--objective", value=p["objective"],
        )  # fmt: skip
    if p["rate"] is not None and p["concurrency"] is not None:
        raise ClusterSimError("--concurrency: give one load, --rate R or --concurrency N", field="--concurrency",
                              value=p["concurrency"])  # fmt: skip
    slo = None if p["slo"] is None else parse_slo(p["slo"])
    if p["rate"] is None and p["concurrency"] is None:
        if slo is None or slo.ttft_s is None:
            raise ClusterSimError(
                "--slo: without --rate or --concurrency the plan finds each deployment's highest rate meeting the "
                "SLO, which needs a TTFT bound, e.g. --slo ttft=2s,itl=50ms",
                field="--slo", value=p["slo"],
            )  # fmt: skip
        if slo.e2e_s is not None:
            raise ClusterSimError(
                "--slo: the highest rate is found for ttft and itl bounds; e2e needs --rate or --concurrency",
                field="--slo", value=p["slo"],
            )  # fmt: skip
    return ServingLoad(rate_per_s=p["rate"], concurrency=p["concurrency"], slo=slo)


def _requests(
    model: Transformer, dataset: str, precisions: tuple[str, ...]
) -> tuple[tuple[Request, ...], list[str], Any]:
    """One request per weight precision at the dataset's mean lengths (as ``serve --dataset``), with the
    dataset's notes (its longest request beyond the context is refused, as there)."""
    from clustersim.scenario.schema import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
    from clustersim.serving.dataset_context import dataset_context_notes
    from clustersim.serving.datasets import resolve_lengths
    from clustersim.serving.engine import parse_precision
    from clustersim.serving.estimate import Request
    from clustersim.serving.sim_requests import request_sampler, request_spread

    lengths = resolve_lengths(dataset, None, None, defaults=(DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS))
    spread = request_spread(request_sampler(lengths.dataset, lengths.input_tokens, lengths.output_tokens))
    requests = tuple(
        Request(
            lengths.input_tokens,
            lengths.output_tokens,
            precision=parse_precision(name, "--precision"),
            **spread,
        )
        for name in precisions
    )
    notes = list(dataset_context_notes(model, lengths.dataset, requests[0]))
    for request in requests:
        notes += [note for note in request.notes(model) if note not in notes]
    return requests, notes, lengths


def _with_notes(plan: ServingPlan, notes: list[str]) -> ServingPlan:
    from dataclasses import replace

    return replace(plan, notes=tuple(notes) + plan.notes)


def listed(given: list[str], flag: str) -> tuple[str, ...]:
    """Comma lists and repeated options, in order, each once; an empty entry is refused naming ``flag``."""
    names = [name.strip() for item in given for name in item.split(",")]
    if any(not name for name in names):
        raise ClusterSimError(
            f"{flag}: an empty entry in {','.join(given)!r} (give names separated by commas, or repeat {flag})",
            field=flag,
            value=",".join(given),
        )
    return tuple(dict.fromkeys(names))

"""Planning a serving deployment: instance types x node counts x precisions x layouts (tp x pp on one instance,
replicas filling the nodes), each priced at the load by ``serve``'s closed forms (``serving.latency``
``estimate_server`` / ``max_rate``, ``serving.concurrency.estimate_concurrency``), kept where they meet the SLO,
ranked by cost per million output tokens, latency or energy per token, with the cost-latency Pareto front.

The request-level simulator (``serving.simulate``) then runs the top rows only (a few hundred ms each), for their
p99 TTFT and ITL and the share of requests that meet the SLO.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.intervals import Spread
from clustersim.plan.search import pareto_front
from clustersim.plan.serving import tp_candidates
from clustersim.plan.serving_rows import (
    MAX_RATE_TOLERANCE,
    Deployment,
    ServingLoad,
    ServingPlan,
    ServingRow,
    SimulatedFigures,
    margin_of,
)
from clustersim.plan.ties import ties
from clustersim.serving.concurrency import estimate_concurrency
from clustersim.serving.engine import ServingSystem, serving_system_for_instance
from clustersim.serving.engines import engine_for
from clustersim.serving.estimate import Request, ServingEstimate
from clustersim.serving.latency import estimate_server, max_rate
from clustersim.serving.sim_requests import RequestLengthSampler
from clustersim.serving.simulate import Load, simulate
from clustersim.workload.transformer import Transformer

# What a closed form's refusal says, by the field its message opens with.
LEFT_OUT = {
    "model": "weights do not fit",
    "rate": "saturated at the rate",
    "latency targets": "miss the SLO even unloaded",
    "concurrency": "concurrency",
    "ttft_target_s": "the ITL bound holds to saturation",
    "precision": "a precision the chip or engine lacks",
}
# Refusals that hold at every node count (per-device memory, formats, latency with no load): priced once a layout.
NODES_NEVER_HELP = frozenset({"model", "precision", "latency targets"})
SpreadOf = Callable[[ServingEstimate, str, str], "Spread | None"]  # an estimate on an instance, a field -> its spread


@dataclass(frozen=True)
class ServingGrid:
    """What a serving plan searches: instances, node counts, weight precisions (one ``Request`` each) and the
    engine (None: each accelerator family's default)."""

    instances: tuple[str, ...]
    nodes: tuple[int, ...]
    requests: tuple[Request, ...]
    engine: str | None = None
    offer: str = "on_demand"


def pp_candidates(model: Transformer, catalog: Catalog, instance: str) -> list[int]:
    """Pipeline degrees worth trying on one instance (``serve --pp``): powers of two with a tp degree left."""
    devices = int(catalog.instance(instance).num_accelerators.value)
    return [1 << k for k in range(devices.bit_length()) if tp_candidates(model, catalog, instance, pp=1 << k)]


def deployment_system(catalog: Catalog, d: Deployment, one: ServingSystem | None = None) -> ServingSystem:
    """``serve``'s system on one replica's instances (``one``, if built already) with the replicas of every node:
    they share the load evenly."""
    one = one or serving_system_for_instance(catalog, d.instance, tp=d.tp, pp=d.pp, nodes=d.nodes_per_replica)
    return replace(one, dp=d.replicas)


def price_deployment(
    model: Transformer, system: ServingSystem, request: Request, load: ServingLoad, engine: str
) -> ServingEstimate:
    """The closed form of ``load`` on ``system``: at the rate, at the concurrency, or the highest rate whose
    mean TTFT and TPOT meet the SLO."""
    if load.rate_per_s is not None:
        return estimate_server(model, system, request, load.rate_per_s, engine=engine)
    if load.concurrency is not None:
        return estimate_concurrency(model, system, request, load.concurrency, engine=engine)
    slo = load.slo
    assert slo is not None and slo.ttft_s is not None  # the command refuses a max-rate plan without a TTFT bound
    return max_rate(
        model, system, request, ttft_target_s=slo.ttft_s, tpot_target_s=math.inf if slo.itl_s is None else slo.itl_s,
        engine=engine,
    )  # fmt: skip


def _deployments(
    model: Transformer, catalog: Catalog, grid: ServingGrid, notes: list[str]
) -> Iterable[tuple[Deployment, Request]]:
    for instance in grid.instances:
        chip = catalog.accelerator(catalog.instance(instance).accelerator)
        try:
            engine = engine_for(grid.engine, chip.family, accelerator=chip.id).name
        except ClusterSimError as exc:
            notes.append(f"{instance} skipped: {exc}")
            continue
        devices = int(catalog.instance(instance).num_accelerators.value)
        layouts = [(tp, pp) for pp in pp_candidates(model, catalog, instance) for tp in tp_candidates(
            model, catalog, instance, pp=pp)]  # fmt: skip
        if not layouts:
            notes.append(f"{instance} skipped: no tp x pp within its {devices} devices divides {model.name}'s heads")
        whole = devices in tp_candidates(model, catalog, instance, pp=1)  # TP over a whole instance divides heads
        for nodes in grid.nodes:
            for request in grid.requests:
                for tp, pp in layouts:
                    per_node = devices // (tp * pp)
                    yield Deployment(instance, nodes, tp, pp, per_node, request.precision.value, engine), request
                # a replica over several instances: TP within each, a pipeline stage an instance (their sends on
                # the network), as serving stacks run a model one instance cannot hold
                for span in (m for m in range(2, nodes + 1) if whole and nodes % m == 0):
                    d = Deployment(instance, nodes, devices, span, 0, request.precision.value, engine, span)
                    yield d, request


def _row(
    model: Transformer,
    catalog: Catalog,
    d: Deployment,
    request: Request,
    load: ServingLoad,
    offer: str,
    systems: dict[tuple[str, int, int, int], ServingSystem],
) -> ServingRow:
    key = (d.instance, d.tp, d.pp, d.nodes_per_replica)
    if key not in systems:
        systems[key] = serving_system_for_instance(catalog, d.instance, tp=d.tp, pp=d.pp, nodes=d.nodes_per_replica)
    system = deployment_system(catalog, d, systems[key])
    estimate = price_deployment(model, system, request, load, d.engine)
    price = system.system.price(offer)  # an instance's
    watts = system.system.power_watts
    return ServingRow(
        deployment=d,
        system=system,
        request=request,
        estimate=estimate,
        price_usd_per_hour=None if price is None or price.usd_per_hour is None else price.usd_per_hour * d.nodes,
        power_watts=None if watts is None else watts * system.system.devices_per_node * d.nodes,
        offer=offer,
    )


def plan_serving(
    model: Transformer,
    catalog: Catalog,
    grid: ServingGrid,
    load: ServingLoad,
    *,
    objective: str = "cost",
    top: int = 5,
    spread_of: SpreadOf | None = None,
    simulate_top: int = 0,
    sampler: RequestLengthSampler | None = None,
    sim_requests: int = 1000,
    dataset: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> ServingPlan:
    """Every deployment of ``grid`` priced at ``load``; those meeting its SLO ranked by ``objective``; the top
    ``simulate_top`` rows simulated with ``sim_requests`` requests drawn by ``sampler``."""
    started = time.perf_counter()
    notes: list[str] = []
    todo = list(_deployments(model, catalog, grid, notes))
    if not todo:
        raise ClusterSimError(
            f"plan: no deployment to price: {'; '.join(notes)}", field="--engine" if grid.engine else "--instances"
        )
    rows: list[ServingRow] = []
    failed: dict[str, int] = {}
    systems: dict[tuple[str, int, int, int], ServingSystem] = {}
    refused: dict[tuple[str, int, int, str], str] = {}  # a layout refused whatever its node count, and why
    for done, (d, request) in enumerate(todo, start=1):
        layout = (d.instance, d.tp, d.pp, d.precision)
        try:
            if layout in refused:
                reason = refused[layout]
                failed[reason] += 1
                continue
            row = _row(model, catalog, d, request, load, grid.offer, systems)
        except ClusterSimError as exc:  # does not fit, saturates at the rate, or misses the SLO even unloaded
            opening = str(exc).split(":")[0]
            reason = LEFT_OUT.get(opening, opening[:60])
            failed[reason] = failed.get(reason, 0) + 1
            if opening in NODES_NEVER_HELP:
                refused[layout] = reason
            continue
        finally:
            if progress is not None:
                progress(done, len(todo))
        if row.meets(load.slo, MAX_RATE_TOLERANCE if load.mode == "max_rate" else 1e-9):
            rows.append(row)
        else:
            failed["misses the SLO"] = failed.get("misses the SLO", 0) + 1
    priced_s = time.perf_counter() - started
    if failed:
        notes.append("left out: " + ", ".join(f"{n} ({why})" for why, n in sorted(failed.items())))
    ranked = _ranked(rows, objective, notes)
    if not ranked:
        raise ClusterSimError(
            f"plan: none of the {len(todo)} deployments serves the load within the SLO ({notes[-1] if notes else ''}); "
            "relax --slo, lower the load, or add --instances/--nodes",
            field="--slo",
        )
    best = _best_per_point(ranked)
    with_why = _explained(best, objective)
    shown = [_spread(row, spread_of) for row in with_why[:top]]
    for i, row in enumerate(shown[:simulate_top]):
        try:
            shown[i] = _simulated(model, row, load, sampler, sim_requests, spread_of)
        except ClusterSimError as exc:  # an engine the simulator does not model (static-shape Neuron buckets)
            notes.append(f"row {i + 1} not simulated: {exc}")
    front = _front(ranked, spread_of)
    return ServingPlan(
        objective=objective, load=load, dataset=dataset, input_tokens=todo[0][1].input_tokens,
        output_tokens=todo[0][1].output_tokens, rows=tuple(ranked), pareto=tuple(front), top=tuple(shown),
        notes=tuple(notes), evaluated=len(todo), elapsed_s=time.perf_counter() - started, priced_s=priced_s,
        points=len({(d.instance, d.nodes, d.precision) for d, _ in todo}),
    )  # fmt: skip


def _ranked(rows: list[ServingRow], objective: str, notes: list[str]) -> list[ServingRow]:
    """Rows with the objective's figure, best first (ties: the lower latency, else cost per token, then fewer
    devices, then the name)."""
    kept = [row for row in rows if row.value(objective) is not None]
    if len(kept) < len(rows):
        notes.append(f"{len(rows) - len(kept)} deployments left out of objective {objective}: no catalogued figure")

    def key(row: ServingRow) -> tuple[float, float, int, str]:
        figure = row.value(objective)
        assert figure is not None
        second = row.latency_s if objective != "time" else row.cost_usd_per_mtok or math.inf
        return figure, second, row.deployment.nodes * row.system.system.devices_per_node, row.deployment.name

    return sorted(kept, key=key)


def _best_per_point(ranked: list[ServingRow]) -> list[ServingRow]:
    seen: set[tuple[str, int, str]] = set()
    out = []
    for row in ranked:
        point = (row.deployment.instance, row.deployment.nodes, row.deployment.precision)
        if point not in seen:
            seen.add(point)
            out.append(row)
    return out


def _explained(rows: list[ServingRow], objective: str) -> list[ServingRow]:
    """Each row with why it beats the next and by how much (the last: alone, no margin)."""
    out = []
    for row, runner in zip(rows, [*rows[1:], None], strict=True):
        if runner is None:
            out.append(replace(row, why="the last point" if len(rows) > 1 else "the only point"))
            continue
        mine, theirs = row.value(objective), runner.value(objective)
        assert mine is not None and theirs is not None
        out.append(replace(row, why=why_wins(row, runner, objective), margin=margin_of(mine, theirs),
                           runner_up=runner.deployment.name))  # fmt: skip
    return out


def why_wins(row: ServingRow, runner: ServingRow, objective: str) -> str:
    """The term of the objective that shrinks most against ``runner`` (the larger log ratio)."""
    a, b = row.estimate, runner.estimate
    mine_value, theirs_value = row.value(objective), runner.value(objective)
    if objective != "time" and mine_value is not None and theirs_value is not None and ties(mine_value, theirs_value):
        return f"ties on {objective}; lower latency: {row.latency_s:.3g} vs {runner.latency_s:.3g} s a request"
    tokens = f"{a.output_tokens_per_s:,.0f} vs {b.output_tokens_per_s:,.0f} output tokens/s"
    if objective == "time":
        later = a.output_tokens - 1.0
        ttft_gain, tpot_gain = b.ttft_s - a.ttft_s, later * (b.tpot_s - a.tpot_s)
        if tpot_gain >= ttft_gain:
            return f"TPOT {a.tpot_s * 1e3:.1f} vs {b.tpot_s * 1e3:.1f} ms ({tpot_gain:+.3g} s a request)"
        return f"TTFT {a.ttft_s * 1e3:.0f} vs {b.ttft_s * 1e3:.0f} ms"
    mine = row.price_usd_per_hour if objective == "cost" else row.power_watts
    theirs = runner.price_usd_per_hour if objective == "cost" else runner.power_watts
    assert mine is not None and theirs is not None
    spend = f"${mine:,.2f} vs ${theirs:,.2f} an hour" if objective == "cost" else f"{mine:,.0f} vs {theirs:,.0f} W"
    cheaper = math.log(theirs / mine)
    faster = math.log(a.output_tokens_per_s / b.output_tokens_per_s)
    if abs(cheaper) >= abs(faster):
        return spend + ("" if faster == 0 else f" ({tokens})")
    return tokens + f" ({spend})"


def _spread(row: ServingRow, spread_of: SpreadOf | None) -> ServingRow:
    if spread_of is None:
        return row
    estimate, instance = row.estimate, row.deployment.instance
    return replace(
        row, spread=spread_of(estimate, instance, ""), latency_spread=spread_of(estimate, instance, "tpot_s")
    )


def _front(ranked: list[ServingRow], spread_of: SpreadOf | None) -> list[ServingRow]:
    """The rows no other beats on both cost per token and latency, lowest latency first."""
    priced = [row for row in ranked if row.cost_usd_per_mtok is not None]
    if not priced:
        return []
    keep = pareto_front([[row.cost_usd_per_mtok or 0.0, row.latency_s] for row in priced])
    front = sorted((priced[i] for i in keep), key=lambda row: (row.latency_s, row.cost_usd_per_mtok or 0.0))
    return [_spread(row, spread_of) for row in front]


def _simulated(
    model: Transformer,
    row: ServingRow,
    load: ServingLoad,
    sampler: RequestLengthSampler | None,
    requests: int,
    spread_of: SpreadOf | None = None,
) -> ServingRow:
    """``row`` with the simulator's figures at its load (max-rate plans: at the rate the closed form found) and the
    spread of their p99 TTFT (published p99 TTFTs' residuals)."""
    if load.concurrency is not None:
        arrive = Load(concurrency=load.concurrency)
    else:
        arrive = Load(rate_per_s=load.rate_per_s or row.estimate.request_rate_per_s)
    result = simulate(model, row.system, row.request, arrive, requests=requests, sampler=sampler, slo=load.slo,
                      engine=row.deployment.engine).to_json()  # fmt: skip
    goodput = result["goodput"]
    figures = SimulatedFigures(
        ttft_mean_s=result["ttft_s"]["mean"], ttft_p99_s=result["ttft_s"]["p99"], itl_mean_s=result["itl_s"]["mean"],
        itl_p99_s=result["itl_s"]["p99"], goodput_share=None if goodput is None else goodput["fraction"],
        output_tokens_per_s=result["throughput"]["output_tokens_per_s"], requests=result["requests"],
    )  # fmt: skip
    spread = None if spread_of is None else spread_of(row.estimate, row.deployment.instance, "ttft_p99_s")
    return replace(row, simulated=figures, simulated_spread=spread)

"""``clustersim serve --simulate``: the request-level simulator from the command line.

``--simulate`` turns it on, and so does any option only it reads (``--concurrency``, ``--requests``, ``--slo``,
``--seed``, ``--seeds``, ``--prefix-hit``, ``--trace``, ``--rates``, ``--plot``). The load is one of ``--rate``
(Poisson arrivals), ``--concurrency`` (a closed loop), ``--trace`` or ``--rates`` (a sweep: the same deployment
simulated at each rate of a grid, ``clustersim.serving.rate_grid``, one row per rate). ``--plot FILE`` draws a run's
TTFT and ITL distributions, or a sweep's latency against throughput. ``--batch`` caps the sequences in flight per
replica (static batching: the batch). ``--seeds N`` runs seeds ``--seed`` to ``--seed + N - 1``: each figure is the
median over them, with its min-max (``spread``). Each figure with published residuals gets an interval at
``--level`` (``intervals``: the output rate's, TTFT's and TPOT's median, p99 and mean, each from its own field's
left-out residuals, ``clustersim.cli.spreads.simulation_spreads``). Options of the closed forms it cannot honour
(``--ttft-target``, ``--tpot-target``: give ``--slo``; ``--compare``, ``--scenario``, ``--save-scenario``) are refused
by name. Without ``--tp`` the degree is the closed form's for the same question (at ``--rate``: the lowest TPOT; else,
or past every degree's saturation, the most output tokens/s). The closed form of the same load is shown beside the
simulation where one applies (``closed_form``). ``--disaggregate P:D`` runs separate prefill and decode pools
(``clustersim.serving.sim_disaggregated``); ``--speculative K --acceptance A`` speculative decoding, simulated
with a load, else priced by its closed form (``run_speculative_closed_form``); ``--pp`` pipelined replicas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from clustersim.cli.common import emit_json, given_options, print_all, user_errors
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from pathlib import Path

    from clustersim.catalog.registry import Catalog
    from clustersim.serving.estimate import Request
    from clustersim.serving.sim_report import SimulationResult
    from clustersim.serving.simulate import Load
    from clustersim.serving.speculative import Speculation
    from clustersim.workload.transformer import Transformer

# Options only the simulator reads: any of them turns it on.
SIMULATION_OPTIONS = (
    "simulate",
    "concurrency",
    "requests",
    "slo",
    "seed",
    "seeds",
    "prefix_hit",
    "routing",
    "admission",
    "trace",
    "rates",
    "plot",
    "disaggregate",
)
# Options of speculative decoding: with a simulation they change it; without one, the closed form prices them.
SPECULATIVE_OPTIONS = ("speculative", "acceptance", "draft_model")  # fmt: skip
# Options of the closed forms that a simulation cannot honour.
REFUSED = ("ttft_target", "tpot_target", "compare", "scenario", "save_scenario")
DEFAULT_REQUESTS = 2000  # as clustersim.serving.simulate.DEFAULT_REQUESTS (a test holds them together)
MAX_REQUESTS = 10_000_000
SECONDS_PER_REQUEST = 3e-4  # simulated requests take about this long each on a 2-core machine


def wanted(ctx: typer.Context, simulate: bool) -> bool:
    """Whether the command line asks for a simulation."""
    return simulate or bool(given_options(ctx, SIMULATION_OPTIONS[1:]))


def run_simulation(ctx: typer.Context, p: dict[str, Any]) -> None:
    """Simulate what the options ``p`` (the command's parameters by name) describe and print it."""
    with user_errors():
        refused = given_options(ctx, REFUSED)
        if refused:
            raise ClusterSimError(
                f"{refused[0]}: not used by the simulator (--simulate, --concurrency, --slo, --requests, --seed(s), "
                "--prefix-hit, --trace, --rates); latency bounds are --slo, and the closed forms run without those "
                "options",
                field=refused[0],
            )
        stated = given_options(ctx, ("input_tokens", "output_tokens", "dataset"))
        loads = given_options(ctx, ("rate", "concurrency", "trace", "rates"))
        if len(loads) != 1:
            what = "got " + " and ".join(loads) if loads else "none given"
            raise ClusterSimError(
                f"--simulate: give one load: --rate R (Poisson arrivals), --concurrency N (a closed loop of N "
                f"clients), --trace FILE or --rates A:B (a sweep) ({what})",
                field=loads[-1] if loads else "--rate",
            )
        if p["concurrency"] is not None and given_options(ctx, ("routing",)):
            raise ClusterSimError(
                f"--routing {p['routing']}: a closed loop's clients each keep to one replica, spread over them in "
                "turn; route an open loop (--rate, --trace or --rates)",
                field="--routing",
                value=p["routing"],
            )
        if p["trace"] is not None and (stated or given_options(ctx, ("requests",))):
            extra = (stated + given_options(ctx, ("requests",)))[0]
            raise ClusterSimError(
                f"{extra}: a trace gives each request's arrival and lengths; drop {extra} or --trace",
                field=extra,
            )
        payload, notes, results = _simulate(p, stated)
        if p["plot"] is not None:
            _plot(payload, results, p["plot"])
    from clustersim.present.serving_simulation import simulation_view, sweep_view

    if p["as_json"]:
        emit_json(payload | {"notes": notes})
        return
    print_all(*(sweep_view if payload["mode"] == "sweep" else simulation_view)(payload, notes))


def _plot(payload: dict[str, Any], results: list[SimulationResult], path: Path) -> None:
    """A sweep's latency against throughput, or a run's TTFT and ITL distributions, written to ``path``."""
    from clustersim.cli.common import write_figure
    from clustersim.present.serving_simulation import plot_latency_cdf, plot_rate_sweep

    if payload["mode"] == "sweep":
        write_figure(lambda: plot_rate_sweep(payload, path), path)
    else:
        write_figure(lambda: plot_latency_cdf(results, payload, path), path)


# A sweep's row per rate: the figures a load generator's sweep reports.
ROW_KEYS = (
    "requests", "ttft_s", "itl_s", "tpot_s", "e2e_s", "throughput", "goodput", "preemptions", "duration_s", "spread",
)  # fmt: skip


def _inputs(p: dict[str, Any], stated: list[str]) -> tuple[Any, Any, Request, Any, Any, list[str], str]:
    """The model, catalog, request (its lengths from --input/--output or --dataset), the lengths, how a run
    draws them (the sampler), the notes on them and the engine's name that the options ``p`` name."""
    from clustersim.catalog.registry import ENV_VAR as CATALOG_ENV_VAR
    from clustersim.catalog.registry import load_catalog
    from clustersim.scenario.schema import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
    from clustersim.scenario.training import model_spec, user_files
    from clustersim.serving.dataset_context import dataset_context_notes
    from clustersim.serving.datasets import resolve_lengths
    from clustersim.serving.engine import parse_precision
    from clustersim.serving.engines import engine_for
    from clustersim.serving.estimate import Request
    from clustersim.serving.sim_requests import request_sampler, request_spread
    from clustersim.workload import zoo

    dataset = p["dataset"]
    given_in, given_out = "--input" in stated, "--output" in stated
    lengths = resolve_lengths(
        dataset,
        p["input_tokens"] if dataset is None or given_in else None,
        p["output_tokens"] if dataset is None or given_out else None,
        defaults=(DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS),
    )
    model = zoo.load_model(model_spec(p["model"]), extra_dirs=user_files(zoo.ENV_VAR, p["models"] or []), use_env=False)
    catalog = load_catalog(user_files(CATALOG_ENV_VAR, p["catalog"] or []), use_env=False)
    drawn = request_sampler(lengths.dataset, lengths.input_tokens, lengths.output_tokens, stated=(given_in, given_out))
    request = Request(
        input_tokens=lengths.input_tokens,
        output_tokens=lengths.output_tokens,
        precision=parse_precision(p["precision"], "--precision"),
        kv_precision=parse_precision(p["kv_cache"], "--kv-cache") if p["kv_cache"] else None,
        batching=p["batching"],
        beyond_context=p["beyond_context"],
        **request_spread(drawn),
    )
    notes = list(dataset_context_notes(model, lengths.dataset, request)) + list(request.notes(model))
    chip = catalog.accelerator(catalog.instance(p["instance"]).accelerator)
    engine = engine_for(p["engine"], chip.family, accelerator=chip.id).name
    return model, catalog, request, lengths, drawn, notes, engine


def run_speculative_closed_form(ctx: typer.Context, p: dict[str, Any]) -> None:
    """``--speculative`` without a simulation: the closed form at ``--rate`` (server) or offline."""
    from clustersim.serving.engine import serving_system_for_instance
    from clustersim.serving.simulate import Load
    from clustersim.serving.speculative import speculative_closed_form, speculative_offline

    with user_errors():
        refused = given_options(ctx, ("compare", "scenario", "save_scenario", "ttft_target", "tpot_target", "level"))
        if refused:
            raise ClusterSimError(
                f"{refused[0]}: the speculative closed form takes --rate (server) or no load (offline); drop "
                f"{refused[0]}, or simulate (--simulate with --rate, --concurrency or --trace)",
                field=refused[0],
            )
        stated = given_options(ctx, ("input_tokens", "output_tokens", "dataset"))
        model, catalog, request, lengths, _, notes, engine = _inputs(p, stated)
        speculation = _speculation(p, model)
        assert speculation is not None  # the command comes here with --speculative/--acceptance given
        load = Load(rate_per_s=p["rate"]) if p["rate"] is not None else Load(concurrency=1)
        tp = p["tp"] or _chosen_tp(model, catalog, p["instance"], p["pp"], request, load, engine, p["nodes"])
        system = serving_system_for_instance(catalog, p["instance"], tp=tp, pp=p["pp"], nodes=p["nodes"])
        if p["rate"] is not None:
            found = speculative_closed_form(model, system, request, speculation, load, engine) or {}
        else:
            found = speculative_offline(model, system, request, speculation, batch=p["batch"], engine=engine)
        if "error" in found:
            raise ClusterSimError(f"--rate: {found['error']}", field="--rate", value=p["rate"])
    payload = {
        "mode": "speculative closed form", "model": model.name, "system": system.name,
        "nodes": system.system.num_nodes, "tp": system.tp,
        "pp": system.pp, "dp": system.dp, "engine": engine, "dataset": lengths.dataset,
        "speculation": speculation.to_json(), **found, "notes": notes,
    }  # fmt: skip
    if p["as_json"]:
        emit_json(payload)
        return
    from clustersim.present.serving_simulation import speculative_view

    print_all(*speculative_view(payload))


def _simulate(p: dict[str, Any], stated: list[str]) -> tuple[dict[str, Any], list[str], list[SimulationResult]]:
    """The run's JSON payload, its notes and the runs themselves (a sweep: none kept)."""
    from clustersim.catalog.registry import ENV_VAR as CATALOG_ENV_VAR
    from clustersim.choices import Batching
    from clustersim.cli.progress import progress_bar
    from clustersim.cli.spreads import simulation_spreads
    from clustersim.present.serving_simulation import simulation_intervals
    from clustersim.scenario.training import user_files
    from clustersim.serving.engine import serving_system_for_instance
    from clustersim.serving.engines import engine_profile
    from clustersim.serving.rate_grid import parse_rates
    from clustersim.serving.sim_report import over_seeds, parse_slo
    from clustersim.serving.simulate import Load, simulate
    from clustersim.serving.traces import read_trace

    slo = parse_slo(p["slo"]) if p["slo"] is not None else None
    trace = read_trace(p["trace"]) if p["trace"] is not None else None
    rates = parse_rates(p["rates"]) if p["rates"] is not None else None
    top = Load(rate_per_s=max(rates)) if rates else None
    load = top or Load(rate_per_s=p["rate"], concurrency=p["concurrency"], trace=trace)
    model, catalog, request, lengths, sampler, notes, engine = _inputs(p, stated)
    if trace is not None:  # refused (or priced as asked) past the model's context, as a request set's longest is
        longest = int((trace.input_tokens + trace.output_tokens).argmax())
        n, o = int(trace.input_tokens[longest]), int(trace.output_tokens[longest])
        what = f"--trace {p['trace']}'s longest request, {n:,} + {o:,},"
        beyond = model.check_context(n + o, what, beyond_context=p["beyond_context"])
        notes.extend([beyond] if beyond else [])
    tp = p["tp"] or _chosen_tp(model, catalog, p["instance"], p["pp"], request, load, engine, p["nodes"])
    system = serving_system_for_instance(catalog, p["instance"], tp=tp, pp=p["pp"], nodes=p["nodes"])
    speculation = _speculation(p, model)
    if speculation is not None and speculation.tokens_per_step > 1:
        notes.append(
            "speculative decoding: the KV cache holds one slot a verify step, not the accepted tokens' "
            f"{speculation.tokens_per_step:.3g}; a run near its KV capacity preempts less than an engine would"
        )
    deployment = None
    if p["disaggregate"] is not None:
        from clustersim.serving.disaggregation import deploy, parse_pools

        if p["nodes"] != 1:
            raise ClusterSimError(
                f"--nodes: the disaggregated pools place their workers on instances of their own (P:D); got --nodes "
                f"{p['nodes']}",
                field="--nodes",
                value=p["nodes"],
            )

        if p["pp"] != 1:
            raise ClusterSimError(
                f"--pp: the disaggregated pools run one pipeline stage per worker; got --pp {p['pp']}",
                field="--pp",
                value=p["pp"],
            )
        if p["admission"] is not None:
            raise ClusterSimError(
                "--admission: the disaggregated pools admit paged (a decode pool takes each prompt's KV as it "
                "comes); drop --admission or --disaggregate",
                field="--admission",
                value=p["admission"],
            )
        deployment = deploy(catalog, p["instance"], parse_pools(p["disaggregate"]), tp, model, request.kv)
        system = deployment.decode
    if p["admission"] is not None and request.batching is Batching.STATIC:
        raise ClusterSimError(
            "--admission: a static batch takes the blocks of its requests' whole lengths; drop --admission or "
            "--batching static",
            field="--admission",
            value=p["admission"],
        )
    admission = p["admission"] or ("paged" if deployment else engine_profile(engine, system.family).kv_admission)
    count = trace.arrival_s.size if trace is not None else p["requests"]
    seeds = list(range(p["seed"], p["seed"] + p["seeds"]))
    loads = [Load(rate_per_s=rate) for rate in rates] if rates else [load]
    total = count * len(seeds) * len(loads)
    rows, results = [], []
    what = f"simulating {len(loads)} rates" if rates else "simulating requests"
    with progress_bar(what, "requests", _work(total)) as progress:
        for number, (each, seed) in enumerate((each, seed) for each in loads for seed in seeds):
            report = None if progress is None else _offset(progress, number * count, total)
            options: dict[str, Any] = dict(
                requests=p["requests"], sampler=sampler, seed=seed, prefix_hit_rate=p["prefix_hit"],
                max_batch=p["batch"], slo=slo, engine=engine, progress=report, routing=p["routing"],
            )  # fmt: skip
            if deployment is not None:
                from clustersim.serving.sim_disaggregated import simulate_disaggregated

                result = simulate_disaggregated(model, deployment, request, each, **options)
            else:
                result = simulate(model, system, request, each, speculation=speculation, admission=admission, **options)
            rows.append(result.to_json())
            if not rates:
                results.append(result)
    payload = {
        "mode": "sweep" if rates else "simulation",
        "model": model.name,
        "params": model.num_params(),
        "system": system.name,
        "nodes": system.system.num_nodes,
        "device": system.device_name,
        "tp": system.tp,
        "pp": system.pp,
        "dp": system.dp,
        "engine": engine,
        "precision": request.precision.value,
        "kv_precision": request.kv.value,
        "batching": request.batching.value,
        "dataset": lengths.dataset,
        "lengths": {"input": sampler.input.describe(), "output": sampler.output.describe()}
        if trace is None
        else {"input": "from the trace", "output": "from the trace"},
        "trace": None if p["trace"] is None else str(p["trace"]),
        "seed": p["seed"],
        "prefix_hit_rate": p["prefix_hit"],
        "routing": p["routing"],
        "admission": admission,
        "max_batch": p["batch"],
        "pools": None if deployment is None else deployment.to_json()["pools"],
    }
    devices = system.tp * system.pp * system.dp
    if deployment is not None:
        devices = sum(pool["workers"] * pool["tp"] for pool in payload["pools"].values())
    catalog_files = user_files(CATALOG_ENV_VAR, p["catalog"] or [])
    experts = model.moe is not None
    spreads = simulation_spreads(engine, p["instance"], devices, p["level"], catalog_files, experts=experts)
    if rates:
        sweep = []
        for k, each in enumerate(loads):
            merged = over_seeds(rows[k * len(seeds) : (k + 1) * len(seeds)], seeds)
            closed = _closed_form(model, system, request, each, engine, speculation, deployment)
            row = {"rate_per_s": each.rate_per_s, **{key: merged[key] for key in ROW_KEYS}, "closed_form": closed}
            row["intervals"] = simulation_intervals(merged, spreads)
            sweep.append(row | ({"disaggregation": merged["disaggregation"]} if deployment else {}))
        extra = {"slo": None if slo is None else slo.to_json(), "seeds": seeds, "requests": count}
        extra["sim_wall_s"] = sum(row["sim_wall_s"] for row in rows)
        extra["steps"] = sum(row["steps"] for row in rows)
        return payload | extra | {"rates": sweep}, notes, results
    closed = _closed_form(model, system, request, load, engine, speculation, deployment)
    payload |= {**over_seeds(rows, seeds), "closed_form": closed}
    payload["intervals"] = simulation_intervals(payload, spreads)
    return payload, notes, results


def _offset(progress: Any, done_before: int, total: int) -> Any:
    """A run's ``progress(done, its total)`` reported as the whole command's, after ``done_before``."""

    def report(done: int, _: int) -> None:
        progress(done_before + done, total)

    return report


def _work(requests: int) -> Any:
    from clustersim.network.work import WorkEstimate

    seconds = requests * SECONDS_PER_REQUEST
    return WorkEstimate(
        what=f"{requests:,} requests",
        events=requests,
        unit="requests",
        seconds=seconds,
        memory_bytes=0.0,
        default_bound=float("inf"),
    )


def _chosen_tp(
    model: Transformer,
    catalog: Catalog,
    instance: str,
    pp: int,
    request: Request,
    load: Load,
    engine: str,
    nodes: int = 1,
) -> int:
    """The closed form's degree for the same question: at a rate the lowest TPOT, else the most tokens/s (one
    instance's: over ``nodes`` instances give --tp)."""
    from clustersim.plan.serving import ServingScenario, best_serving_layout

    if nodes > 1:  # refused as the closed forms refuse it
        best_serving_layout(model, catalog, instance, request, pp=pp, engine=engine, nodes=nodes)
    if load.rate_per_s is not None:
        try:
            scenario = ServingScenario(rate_per_s=load.rate_per_s)
            return best_serving_layout(model, catalog, instance, request, pp=pp, scenario=scenario, engine=engine).tp
        except ClusterSimError:
            pass  # saturated at every degree, or static batching: the offline choice
    return best_serving_layout(model, catalog, instance, request, pp=pp, engine=engine).tp


def _speculation(p: dict[str, Any], model: Transformer) -> Speculation | None:
    """``--speculative K --acceptance A [--draft-model M]`` as a ``Speculation``, or None."""
    from clustersim.scenario.training import model_spec, user_files
    from clustersim.serving.speculative import Speculation, check_speculation
    from clustersim.workload import zoo

    check_speculation(p["speculative"], p["acceptance"])
    if p["speculative"] is None:
        if p["draft_model"] is not None:
            raise ClusterSimError("--draft-model: drafts for --speculative K; give it too", field="--draft-model")
        return None
    if p["disaggregate"] is not None:
        raise ClusterSimError(
            "--speculative: the disaggregated simulation runs plain decoding; drop --speculative or --disaggregate",
            field="--speculative",
        )
    draft = None
    if p["draft_model"] is not None:
        found = user_files(zoo.ENV_VAR, p["models"] or [])
        draft = zoo.load_model(model_spec(p["draft_model"]), extra_dirs=found, use_env=False)
        if draft.vocab != model.vocab:
            raise ClusterSimError(
                f"--draft-model: {draft.name}'s vocabulary ({draft.vocab:,}) is not {model.name}'s ({model.vocab:,}); "
                "a draft proposes the target's tokens",
                field="--draft-model",
                value=p["draft_model"],
            )
    return Speculation(p["speculative"], p["acceptance"], draft)


def _closed_form(
    model: Transformer,
    system: Any,
    request: Request,
    load: Load,
    engine: str,
    speculation: Speculation | None = None,
    deployment: Any = None,
) -> dict[str, Any] | None:
    """The closed form of the same load at the mean lengths (server at a rate, concurrency; a disaggregated
    ``deployment``'s pools at a rate, ``serving.disaggregated_rate``), or None."""
    from clustersim.serving.concurrency import estimate_concurrency
    from clustersim.serving.latency import estimate_server

    if deployment is not None:
        return _disaggregated_closed_form(model, deployment, request, load, engine)
    if speculation is not None:
        from clustersim.serving.speculative import speculative_closed_form

        return speculative_closed_form(model, system, request, speculation, load, engine)

    try:
        if load.rate_per_s is not None:
            found = estimate_server(model, system, request, load.rate_per_s, engine=engine)
        elif load.concurrency is not None:
            found = estimate_concurrency(model, system, request, load.concurrency, engine=engine)
        else:
            return None
    except ClusterSimError as exc:
        return {"scenario": "server" if load.rate_per_s is not None else "concurrency", "error": str(exc)}
    return {
        "scenario": found.scenario,
        "input_tokens": found.input_tokens,
        "output_tokens": found.output_tokens,
        "ttft_s": found.ttft_s,
        "tpot_s": found.tpot_s,
        "output_tokens_per_s": found.output_tokens_per_s,
        "request_rate_per_s": found.request_rate_per_s,
        "batch": found.batch,
    }


def _disaggregated_closed_form(
    model: Transformer, deployment: Any, request: Request, load: Load, engine: str
) -> dict[str, Any] | None:
    """The disaggregated pools' closed form at the load's rate (the KV transfer at the mean prompt), or None."""
    from clustersim.serving.disaggregated_rate import disaggregated_server

    if load.rate_per_s is None:
        return None
    transfer_s = deployment.transfer_one_s(request.input_tokens)
    try:
        found = disaggregated_server(
            model, deployment.prefill, deployment.decode, request, load.rate_per_s, transfer_s=transfer_s,
            prefill_engine=engine, decode_engine=engine,
        )  # fmt: skip
    except ClusterSimError as exc:
        return {"scenario": "server", "error": str(exc)}
    lengths = {"input_tokens": request.input_tokens, "output_tokens": request.output_tokens}
    return {"scenario": "server", **lengths, **found.to_json(), "request_rate_per_s": found.rate_per_s}

"""``clustersim serve``: serving throughput and latency of a model on a catalogued instance.

The options (or a scenario file, ``--scenario``) become a ``ServingScenario``; the estimate comes
from ``clustersim.plan.serving``; ``clustersim.present.serving`` draws it. ``--save-scenario FILE``
writes the inputs the run used, with a chosen tensor-parallel degree filled in.
Registered in ``clustersim.cli.app``.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.choices import Batching
from clustersim.cli.calibrate import CalibrationOption, calibration_overlay, refuse_with_save_scenario
from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    ModelsOption,
    emit_json,
    given_options,
    number,
    option_errors,
    plot_path,
    print_all,
    replay_scenario,
    user_errors,
)
from clustersim.cli.job_options import BeyondContextOpt
from clustersim.cli.level_option import DEFAULT_LEVEL, LevelOption
from clustersim.cli.serve_estimate import serve_estimates
from clustersim.cli.serve_options import (
    AdmissionOpt,
    AttentionDpOpt,
    DisaggregateOpt,
    MoeExchangeOpt,
    PrefixHitOpt,
    RatesOpt,
    RoutingOpt,
    TraceOpt,
)
from clustersim.cli.serve_simulate import (
    DEFAULT_REQUESTS,
    MAX_REQUESTS,
    SPECULATIVE_OPTIONS,
    run_simulation,
    run_speculative_closed_form,
    wanted,
)
from clustersim.errors import ClusterSimError
from clustersim.serving.engine_names import engine_help
from clustersim.units import MAX_DEGREE, MAX_LATENCY_S, MAX_NODES, MAX_RATE_PER_S, MAX_SEQUENCE_TOKENS, MAX_SEQUENCES

if TYPE_CHECKING:
    from clustersim.present.serving import ServingSpreads
    from clustersim.scenario.schema import ServingScenario as ServingScenarioFile
    from clustersim.serving.estimate import ServingEstimate

# The options that are inputs of the run (a scenario file holds them all).
INPUTS = (
    "instance",
    "nodes",
    "tp",
    "pp",
    "attention_dp",
    "moe_exchange",
    "input_tokens",
    "output_tokens",
    "dataset",
    "beyond_context",
    "batch",
    "precision",
    "kv_cache",
    "batching",
    "rate",
    "ttft_target",
    "tpot_target",
    "engine",
    "models",
    "catalog",
)
_FLAGS = {
    "instance": "--instance",
    "nodes": "--nodes",
    "tp": "--tp",
    "pp": "--pp",
    "attention_dp": "--attention-dp",
    "moe_exchange": "--moe-exchange",
    "input_tokens": "--input",
    "output_tokens": "--output",
    "dataset": "--dataset",
    "precision": "--precision",
    "kv_cache": "--kv-cache",
    "batch": "--batch",
    "rate_per_s": "--rate",
    "ttft_target_s": "--ttft-target",
    "tpot_target_s": "--tpot-target",
}


def serve_command(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Argument(
            metavar="MODEL", help="Zoo id (e.g. llama2-70b), a model TOML or a HF config.json (not with --scenario)."
        ),
    ] = None,
    instance: Annotated[str, typer.Option("--instance", help="Instance id, e.g. p5.48xlarge.")] = "p5.48xlarge",
    nodes: Annotated[
        int,
        typer.Option(
            "--nodes",
            min=1,
            max=MAX_NODES,
            help="Instances the replicas fill; a replica of more devices than one holds (--tp x --pp) spans several, "
            "its TP all-reduces or PP sends between them on the network (needs --tp).",
        ),
    ] = 1,
    tp: Annotated[
        int | None,
        typer.Option("--tp", min=1, max=MAX_DEGREE, help="Tensor parallel degree (default: the best that fits)."),
    ] = None,
    pp: Annotated[int, typer.Option("--pp", min=1, max=MAX_DEGREE, help="Pipeline parallel degree.")] = 1,
    attention_dp: AttentionDpOpt = 1,
    moe_exchange: MoeExchangeOpt = "gather",
    input_tokens: Annotated[
        int, typer.Option("--input", min=1, max=MAX_SEQUENCE_TOKENS, help="Prompt tokens per request (mean).")
    ] = 2048,
    output_tokens: Annotated[
        int, typer.Option("--output", min=1, max=MAX_SEQUENCE_TOKENS, help="Output tokens per request (mean).")
    ] = 128,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            help="Take the lengths from a request set (serving/datasets.toml): openorca, cnn_dailymail, "
            "mlperf_mixtral, mlperf_llama3_405b, mlperf_deepseek_r1, sharegpt give their mean lengths "
            "(--input/--output are refused where the set gives one); the generators fixed and random take "
            "--input/--output as their lengths.",
        ),
    ] = None,
    beyond_context: BeyondContextOpt = False,
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch",
            min=1,
            max=MAX_SEQUENCES,
            help="Sequences in flight per replica (default: the best that fits).",
        ),
    ] = None,
    precision: Annotated[
        str,
        typer.Option(
            "--precision",
            help="Weights and GEMMs: bf16, fp16, fp8, or on Blackwell nvfp4 (4.5 bits with its block scales) or "
            "mxfp4 (4.25 bits).",
        ),
    ] = "bf16",
    kv_cache: Annotated[
        str | None,
        typer.Option(
            "--kv-cache",
            help="KV cache precision: bf16, fp16, fp8, or nvfp4 (TensorRT-LLM on Blackwell); default: as "
            "--precision, fp8 beside 4-bit weights.",
        ),
    ] = None,
    batching: Annotated[
        Batching, typer.Option("--batching", case_sensitive=False, help="continuous (in-flight) or static.")
    ] = Batching.CONTINUOUS,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            callback=number(gt=0, le=MAX_RATE_PER_S, unit="requests/s"),
            help="Server mode: requests/s for the whole instance.",
        ),
    ] = None,
    ttft_target: Annotated[
        float | None,
        typer.Option(
            "--ttft-target",
            callback=number(gt=0, le=MAX_LATENCY_S, unit="s"),
            help="Server mode: highest rate with mean TTFT <= this (s).",
        ),
    ] = None,
    tpot_target: Annotated[
        float | None,
        typer.Option(
            "--tpot-target",
            callback=number(gt=0, le=MAX_LATENCY_S, unit="s"),
            help="Server mode: highest rate with mean TPOT <= this (s).",
        ),
    ] = None,
    compare: Annotated[
        str | None, typer.Option("--compare", help="A second instance to show side by side, e.g. p5e.48xlarge.")
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help=f"The serving engine's profile (serving/engines.toml; more from $CLUSTERSIM_SERVING_ENGINES): "
            f"{engine_help()}.",
        ),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            "--scenario",
            help="Run what a scenario file describes (from --save-scenario); it holds every input, so MODEL and "
            "the run's options are refused with it (--compare, --json and --save-scenario still apply).",
        ),
    ] = None,
    save_scenario: Annotated[
        Path | None,
        typer.Option("--save-scenario", help="Write the inputs this run used (a chosen --tp filled in) to a TOML."),
    ] = None,
    simulate: Annotated[
        bool,
        typer.Option(
            "--simulate",
            help="Run the request-level simulator (requests drawn from --dataset, every engine step priced) at "
            "--rate, --concurrency or --trace; the options below imply it.",
        ),
    ] = False,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, max=MAX_SEQUENCES, help="Simulate a closed loop of N clients."),
    ] = None,
    requests: Annotated[
        int, typer.Option("--requests", min=1, max=MAX_REQUESTS, help="Requests to simulate.")
    ] = DEFAULT_REQUESTS,
    slo: Annotated[
        str | None,
        typer.Option("--slo", help="Goodput bounds, e.g. ttft=2s,itl=50ms,e2e=30s (itl: a request's mean; simulates)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the simulation's draws.")] = 0,
    seeds: Annotated[
        int,
        typer.Option(
            "--seeds", min=1, max=100, help="Seeds to simulate (--seed, --seed + 1, ...): the median, with min-max."
        ),
    ] = 1,
    prefix_hit: PrefixHitOpt = None,
    routing: RoutingOpt = "random",
    admission: AdmissionOpt = None,
    trace: TraceOpt = None,
    rates: RatesOpt = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            callback=plot_path,
            help="Draw the simulation (PNG, SVG, PDF): TTFT and ITL distributions, or a sweep's latency against "
            "throughput.",
        ),
    ] = None,
    disaggregate: DisaggregateOpt = None,
    speculative: Annotated[
        int | None,
        typer.Option(
            "--speculative",
            min=1,
            max=16,
            help="Speculative decoding: K draft tokens a step (closed form or simulated).",
        ),
    ] = None,
    acceptance: Annotated[
        float | None,
        typer.Option("--acceptance", callback=number(ge=0, le=1), help="Each draft token's acceptance rate, [0, 1]."),
    ] = None,
    draft_model: Annotated[
        str | None,
        typer.Option(
            "--draft-model", help="A zoo id drafting for --speculative (default: a one-layer EAGLE/MTP head)."
        ),
    ] = None,
    models: ModelsOption = None,
    calibration: CalibrationOption = None,
    level: LevelOption = DEFAULT_LEVEL,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Serving throughput (offline) or latency at a request rate (server) on one instance.

    Offline: output tokens/s of the whole instance at the best batch that fits (dp replicas fill
    it). Server: --rate gives TTFT and TPOT at that rate; --ttft-target/--tpot-target give the
    highest rate that meets them. --compare shows a second instance and why it is faster or slower.
    --simulate (or --concurrency, --slo, ...) runs the request-level simulator: TTFT, ITL and end-to-end
    percentiles, throughput and goodput.
    """
    with user_errors():
        refuse_with_save_scenario(calibration, save_scenario)
        ctx.with_resource(calibration_overlay(calibration))  # the collectives of every path below, until exit
        if wanted(ctx, simulate) or given_options(ctx, SPECULATIVE_OPTIONS):
            for flag, value in (("--attention-dp", attention_dp), ("--moe-exchange", moe_exchange)):
                if value not in (1, "gather"):  # attention data parallel and its exchange: closed forms only
                    raise ClusterSimError(
                        f"{flag}: {value} is priced by the closed forms only (not with --simulate, its load "
                        "options or --speculative)",
                        field=flag,
                        value=value,
                    )
    if wanted(ctx, simulate):
        run_simulation(ctx, ctx.params)
        return
    if given_options(ctx, SPECULATIVE_OPTIONS):
        run_speculative_closed_form(ctx, ctx.params)
        return
    from clustersim.scenario.files import save_scenario as save

    with user_errors():
        if scenario is not None:
            spec = _replay(scenario, ["MODEL"] * (model is not None) + given_options(ctx, INPUTS))
        elif model is None:
            raise ClusterSimError("give a MODEL (e.g. llama2-70b) or --scenario FILE", field="model")
        else:
            stated = given_options(ctx, ("input_tokens", "output_tokens"))  # with a dataset, only these count
            spec = _scenario_of_options(
                model=model, instance=instance, nodes=nodes, tp=tp, pp=pp, attention_dp=attention_dp,
                moe_exchange=moe_exchange,
                input_tokens=input_tokens if dataset is None or "--input" in stated else None,
                output_tokens=output_tokens if dataset is None or "--output" in stated else None, dataset=dataset,
                batch=batch, precision=precision, kv_cache=kv_cache, batching=batching, rate=rate,
                ttft_target=ttft_target, tpot_target=tpot_target, models=models or [], catalog=catalog or [],
                engine=engine, beyond_context=beyond_context,
            )  # fmt: skip
        transformer, estimates, reasons = serve_estimates(spec, compare)
        spreads = _spreads(spec, estimates, compare, level, experts=transformer.moe is not None)
        if save_scenario is not None:
            ran = spec.model_copy(
                update={"system": spec.system.model_copy(update={"tp": estimates[0].tp}), "engine": estimates[0].engine}
            )
            save(
                save_scenario,
                ran,
                header="clustersim serving scenario: replay with `clustersim serve --scenario FILE`.",
            )
    from clustersim.present.serving import generic_reasons, intervals_json, serving_view

    if as_json:
        dataset_name = spec.request.lengths().dataset
        payload: dict[str, Any] = {
            "params": transformer.num_params(),
            "dataset": dataset_name,
            **estimates[0].to_json(),
            **intervals_json(estimates[0], spreads[0]),
        }
        if compare:
            payload = {
                "first": estimates[0].to_json() | intervals_json(estimates[0], spreads[0]),
                "second": estimates[1].to_json() | intervals_json(estimates[1], spreads[1]),
                "ratio": estimates[1].output_tokens_per_s / estimates[0].output_tokens_per_s,
                "reasons": reasons or generic_reasons(*estimates),
                "dataset": dataset_name,
            }
        emit_json(payload)
        return
    why = reasons or (generic_reasons(*estimates) if compare else [])
    print_all(*serving_view(transformer, estimates, why, spreads))


def _spreads(
    spec: "ServingScenarioFile", estimates: "list[ServingEstimate]", compare: str | None, level: float, *, experts: bool
) -> "list[ServingSpreads | None]":
    """The spreads of each estimate's figures (the scenario's instance, then --compare's; ``experts``: MoE)."""
    from clustersim.cli.spreads import serving_spreads

    instances = [spec.system.instance, *([compare] if compare else [])]
    return [
        serving_spreads(estimate, instance, level, spec.options.catalog, experts=experts)
        for estimate, instance in zip(estimates, instances, strict=True)
    ]


def _replay(path: Path, given: list[str]) -> "ServingScenarioFile":
    """The serving scenario in ``path``; the options given with it are refused, by name."""
    from clustersim.scenario.schema import ServingScenario as ServingScenarioFile

    return replay_scenario(path, given, ServingScenarioFile, "train")


def _scenario_of_options(
    *,
    model: str,
    instance: str,
    nodes: int = 1,
    tp: int | None,
    pp: int,
    attention_dp: int = 1,
    moe_exchange: str = "gather",
    input_tokens: int | None,
    output_tokens: int | None,
    dataset: str | None,
    batch: int | None,
    precision: str,
    kv_cache: str | None,
    batching: Batching,
    rate: float | None,
    ttft_target: float | None,
    tpot_target: float | None,
    models: list[Path],
    catalog: list[Path],
    engine: str | None,
    beyond_context: bool = False,
) -> "ServingScenarioFile":
    """The scenario the options describe; without --tp the degree is chosen. ``input_tokens`` and
    ``output_tokens`` are None where not given beside a ``dataset``."""
    from clustersim.scenario.schema import (
        DEFAULT_INPUT_TOKENS,
        DEFAULT_OUTPUT_TOKENS,
        LoadSpec,
        RequestSpec,
        ServingSystemSpec,
    )
    from clustersim.scenario.serving import serving_scenario
    from clustersim.serving.datasets import resolve_lengths
    from clustersim.serving.engine import parse_precision

    # a length given beside a dataset that sets it, or an unknown dataset, is refused by its flag
    resolve_lengths(dataset, input_tokens, output_tokens, defaults=(DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS))

    weights = parse_precision(precision, "--precision").value
    kv = parse_precision(kv_cache, "--kv-cache").value if kv_cache else None
    from clustersim.plan.serving import check_load

    check_load(batch, rate, ttft_target, tpot_target)  # one mode, its options named
    with option_errors(_FLAGS):
        system = ServingSystemSpec(
            instance=instance, nodes=nodes, tp="choose" if tp is None else tp, pp=pp, attention_dp=attention_dp,
            moe_exchange=moe_exchange,
        )  # fmt: skip
        request = RequestSpec(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            dataset=dataset,
            precision=weights,
            kv_cache=kv,
            batching=batching,
            beyond_context=beyond_context,
        )
        load = LoadSpec(batch=batch, rate_per_s=rate, ttft_target_s=ttft_target, tpot_target_s=tpot_target)
    return serving_scenario(
        model=model, system=system, request=request, load=load, catalog=catalog, models=models, engine=engine
    )

"""``clustersim explain``: set a measured training step against the prediction and rank the terms whose
plausible ranges could explain the gap (``clustersim.diagnose``).

The job and layout options are ``train``'s, declared once in ``cli.job_options`` and parsed by its
``_scenario_of_options`` (with --tp and --pp the layout is given, otherwise chosen as ``train`` chooses it:
--uneven-stages, --last-stage-layers, --ep-overlap, --torch-compile and --headroom as there), or a
``train --save-scenario`` file (--scenario, replayed as ``train`` replays it); the measurement is one of
--measured-step, --measured-tokens-per-s or --measured-mfu, turned into seconds per step with the estimate's own tokens,
FLOPs and peak, or a Megatron-LM or torchtitan log (``cli.explain_log``). ``train``'s options that do not
change a step (--tokens, --price, the checkpoint and failure options, --compare, --ops, --plot,
--save-scenario) are not offered. With --network sim the job's groups are simulated once on the fabric where
--placement and the other fabric options put it, and each group shape's contention factor is held while a
lever moves the analytic model under it (``diagnose.StepInputs.contention``): the prediction is ``train
--network sim``'s.
"""

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.calibrate import CalibrationOption, calibration_overlay
from clustersim.cli.common import CatalogOption, JsonOption, ModelsOption, emit_json, given_options, user_errors
from clustersim.cli.job_options import (
    BeyondContextOpt,
    Bf16LayersOpt,
    CpOpt,
    CudaGraphsOpt,
    DevicesPerNodeOpt,
    EfficiencyOpt,
    EpDispatcherOpt,
    EpOpt,
    EpOverlapOpt,
    EtpOpt,
    FrameworkOpt,
    HeadroomOpt,
    LastStageLayersOpt,
    MicroBatchOpt,
    OffloadLayersOpt,
    OperationFormatOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeModulesOpt,
    RecomputeOpt,
    SafeOpt,
    SeqOpt,
    SoftwareOpt,
    SpOpt,
    TorchCompileOpt,
    TpOpt,
    TrainGlobalBatchOpt,
    UnevenStagesOpt,
    VpOpt,
    ZeroOpt,
)
from clustersim.cli.level_option import DEFAULT_LEVEL, LevelOption
from clustersim.cli.train_inputs import (
    BackgroundOpt,
    NetworkOpt,
    SimHostsOpt,
    SimOversubOpt,
    SimPlacementOpt,
    SimRoutingOpt,
    SimSeedOpt,
    SimSeedsOpt,
)
from clustersim.errors import ClusterSimError
from clustersim.units import MAX_NODES

if TYPE_CHECKING:
    from clustersim.diagnose import StepInputs
    from clustersim.scenario.training import TrainingRun
    from clustersim.training.contention import Contention, FabricPlacement
    from clustersim.training.estimate import Estimate

MEASURED = ("--measured-step", "--measured-tokens-per-s", "--measured-mfu", "--log")


def explain_command(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Argument(
            metavar="MODEL", help="Zoo id (e.g. llama3-70b), a model TOML or a HF config.json (not with --scenario)."
        ),
    ] = None,
    measured_step: Annotated[
        float | None, typer.Option("--measured-step", help="The run's measured seconds per training step.")
    ] = None,
    measured_tokens_per_s: Annotated[
        float | None,
        typer.Option("--measured-tokens-per-s", help="The run's measured tokens per second, the whole job's."),
    ] = None,
    measured_mfu: Annotated[
        float | None,
        typer.Option("--measured-mfu", help="The run's measured model FLOPs utilization, a fraction (0.42, not 42)."),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option(
            "--log",
            help="A Megatron-LM or torchtitan training log: the median after 2 warm-up steps of its step time "
            "(Megatron) or tokens/s per device (torchtitan) is the measurement, and the settings it prints (layout, "
            "batch, sequence, precision, framework) fill the options not given (they must agree).",
        ),
    ] = None,
    instance: Annotated[str, typer.Option("--instance", help="Instance id, e.g. p5en.48xlarge.")] = "p5en.48xlarge",
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=MAX_NODES, help="Number of instances.")] = 16,
    devices_per_node: DevicesPerNodeOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    vp: VpOpt = None,
    cp: CpOpt = 1,
    ep: EpOpt = 1,
    etp: EtpOpt = None,
    micro_batch: MicroBatchOpt = None,
    zero: ZeroOpt = None,
    sp: SpOpt = None,
    recompute: RecomputeOpt = None,
    recompute_modules: RecomputeModulesOpt = None,
    uneven: UnevenStagesOpt = None,
    last_stage_layers: LastStageLayersOpt = None,
    offload_layers: OffloadLayersOpt = None,
    ep_overlap: EpOverlapOpt = None,
    ep_dispatcher: EpDispatcherOpt = None,
    torch_compile: TorchCompileOpt = None,
    cuda_graphs: CudaGraphsOpt = None,
    headroom: HeadroomOpt = None,
    safe: SafeOpt = False,
    global_batch: TrainGlobalBatchOpt = None,
    seq: SeqOpt = None,
    beyond_context: BeyondContextOpt = False,
    precision: PrecisionOpt = "bf16",
    bf16_layers: Bf16LayersOpt = 0,
    operation_formats: OperationFormatOpt = None,
    framework: FrameworkOpt = None,
    efficiency: EfficiencyOpt = None,
    software: SoftwareOpt = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            "--scenario",
            help="Explain the job a scenario file describes (train --save-scenario); it holds every input, so MODEL "
            "and the job's options are refused with it (a --log must agree with it).",
        ),
    ] = None,
    network: NetworkOpt = "analytic",
    placement: SimPlacementOpt = None,
    routing: SimRoutingOpt = None,
    oversubscription: SimOversubOpt = None,
    fabric_seed: SimSeedOpt = None,
    fabric_seeds: SimSeedsOpt = None,
    fabric_hosts: SimHostsOpt = None,
    background: BackgroundOpt = None,
    models: ModelsOption = None,
    calibration: CalibrationOption = None,
    level: LevelOption = DEFAULT_LEVEL,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Explain a measured step: compare it with the prediction and its interval at --level, and rank the
    terms (GEMMs, attention, memory-bound work, TP/CP/EP/PP/DP exposed communication, the bubble, the
    optimizer, recompute, data loading) by how far into its plausible range each would have to move alone
    to close the gap, with the step's sensitivity to each, re-estimated."""
    from clustersim.choices import Recompute
    from clustersim.cli.explain_log import (
        SETTINGS,
        check_replayed,
        check_run,
        compiled_of,
        framework_of,
        graphs_of,
        host_caveat,
        merged,
        read_log,
        refuse_headroom,
    )
    from clustersim.cli.explain_show import show
    from clustersim.cli.fabric_options import calibration_in_force
    from clustersim.cli.train import INPUTS, LAYOUT_OPTIONS, _replay, _scenario_of_options
    from clustersim.cli.train_inputs import fabric_placement
    from clustersim.diagnose import explain_step
    from clustersim.scenario.training import run_training
    from clustersim.training.contention import FabricPlacement

    with user_errors():
        where = fabric_placement(
            placement, routing, oversubscription, fabric_seed, fabric_hosts, fabric_seeds, background, network
        )
        given = _measurement(measured_step, measured_tokens_per_s, measured_mfu, log)
        logged = None if log is None else read_log(log)
        if scenario is not None:
            spec = _replay(scenario, ["MODEL"] * (model is not None) + given_options(ctx, INPUTS))
        elif model is None:
            raise ClusterSimError("give a MODEL (e.g. llama3-70b) or --scenario FILE", field="model")
        else:
            job: dict[str, Any] = {
                "tp": tp, "pp": pp, "vp": vp, "cp": cp, "ep": ep, "etp": etp, "micro_batch": micro_batch, "zero": zero,
                "sp": sp, "recompute": recompute, "recompute_modules": recompute_modules, "global_batch": global_batch,
                "seq": seq, "precision": precision, "ep_overlap": ep_overlap, "ep_dispatcher": ep_dispatcher,
                "bf16_layers": bf16_layers, "operation_formats": operation_formats,
            }  # fmt: skip
            layout_given = set(given_options(ctx, LAYOUT_OPTIONS))
            if logged is not None:
                job = merged(logged, job, set(given_options(ctx, list(job))))
                layout_given |= {f for _, name, f in SETTINGS if name in logged.settings and name in LAYOUT_OPTIONS}
                if isinstance(job["recompute"], str):
                    job["recompute"] = Recompute(job["recompute"])
                framework = framework_of(logged, framework, software or [])
                torch_compile = compiled_of(logged, torch_compile)
                cuda_graphs = graphs_of(logged, cuda_graphs)
                refuse_headroom(logged, headroom)
            spec = _scenario_of_options(
                model=model, instance=instance, nodes=nodes, devices_per_node=devices_per_node, **job, uneven=uneven,
                last_stage_layers=last_stage_layers, offload_layers=offload_layers,
                headroom=headroom, safe=safe,
                beyond_context=beyond_context, tokens="1T",
                offer="on_demand", models=models or [], efficiency=efficiency or [], catalog=catalog or [],
                framework=framework, software=software or [], given=layout_given, torch_compile=torch_compile,
                cuda_graphs=cuda_graphs,
            )  # fmt: skip
        # one step: no token budget, so no checkpoints either
        spec = spec.model_copy(update={"job": spec.job.model_copy(update={"tokens": None}), "checkpoint": None})
        with calibration_overlay(calibration):
            calibrated = calibration_in_force()
            simulated = network == "sim"  # simulated once below, on the layout run_training gives
            run = run_training(spec, network="analytic" if simulated else network, fabric=None if simulated else where)
            if logged is not None:
                check_run(logged, run.model, run.estimate.layout, run.scenario.system.nodes)
                if scenario is not None:
                    check_replayed(logged, run, scenario)
            inputs, contention = _inputs(run, (where or FabricPlacement()) if simulated else None)
            if logged is not None:
                measured_s = logged.step_s(run.estimate)
            else:
                measured_s = _step_s(run.estimate, given[0], float(given[1]))
            explanation = explain_step(inputs, measured_s, bounds=_bounds(), level=level)
    if as_json:
        emit_json(
            {
                "model": run.model.name,
                "system": run.estimate.system,
                "framework": run.estimate.framework,
                "torch_compile": run.scenario.torch_compile,  # none: not a setting of the framework
                "layout": run.estimate.layout.model_dump(mode="json"),
                "layout_chosen": run.layout_chosen,
                "measured": {"option": given[0], "value": given[1]} if logged is None else logged.to_json(),
                "calibration": calibrated,
                "network": network,
                "contention": None if contention is None else contention.to_dict(),
                "caveats": host_caveat(logged, run),
                **explanation.to_json(),
            }
        )
        return
    notes = [] if contention is None else [contention.describe()]  # the estimate's own notes say the host's part
    show(run, explanation, _said(given, logged), notes, safe=safe)


def _said(given: tuple[str, float | str], logged: Any) -> str:
    """The measurement in words, for the text."""
    if logged is None:
        return f"{given[0]} {format(float(given[1]), 'g')}"
    what = {"step_time_s": "s per step", "tokens_per_s_per_device": "tokens/s per device"}[logged.measure]
    return f"--log {logged.path}, {logged.framework}: {logged.value:,.6g} {what}, median of {logged.steps} step(s)"


def _measurement(
    step: float | None, tokens_per_s: float | None, mfu: float | None, log: Path | None
) -> tuple[str, float | str]:
    """The one measurement given, as (its flag, its value); none, two, or a value out of range refused."""
    values = (step, tokens_per_s, mfu, None if log is None else str(log))
    given: list[tuple[str, float | str]] = [
        (flag, value) for flag, value in zip(MEASURED, values, strict=True) if value is not None
    ]
    if not given:
        raise ClusterSimError(
            f"give the run's measurement: one of {', '.join(MEASURED)} (e.g. --measured-step 14.2)",
            field="--measured-step",
        )
    if len(given) > 1:
        raise ClusterSimError(
            f"{' and '.join(flag for flag, _ in given)} both give the measurement; give one",
            field=given[1][0],
            value=given[1][1],
        )
    flag, value = given[0]
    if isinstance(value, str):  # a log: read where the job is built
        return flag, value
    import math

    if not math.isfinite(value) or value <= 0:
        raise ClusterSimError(f"{flag}: {value!r} is not a positive number", field=flag, value=value)
    if flag == "--measured-mfu" and value > 1:
        raise ClusterSimError(
            f"{flag}: {value!r} is above 1 (give a fraction of the dense peak: 0.42 for 42%)", field=flag, value=value
        )
    return flag, value


def _step_s(estimate: "Estimate", flag: str, value: float) -> float:
    """Seconds per step the measurement means, with the estimate's tokens, model FLOPs and peak."""
    if flag == "--measured-tokens-per-s":
        return estimate.job.tokens_per_step / value
    if flag == "--measured-mfu":
        return estimate.model_flops_per_step / (value * estimate.num_devices * estimate.peak_flop_per_s)
    return value


def _inputs(run: "TrainingRun", where: "FabricPlacement | None") -> tuple["StepInputs", "Contention | None"]:
    """The inputs ``run_training`` priced the step with (the same files, system, profile and calibration); with
    ``where`` (--network sim), the contention of the job's groups simulated there, as ``run_training`` finds it."""
    from clustersim.diagnose import StepInputs
    from clustersim.network.analytic import collective_calibration
    from clustersim.scenario.training import run_system
    from clustersim.training.contention import Contention, contention_factors

    catalog, system, software, efficiency = run_system(run)
    estimate = run.estimate
    inputs = StepInputs(
        model=run.model, system=system, layout=estimate.layout, job=estimate.job, efficiency=efficiency,
        software=software, calibration=collective_calibration(),
    )  # fmt: skip
    if where is None:
        return inputs, None
    cost, drawn, routing, oversubscription = contention_factors(
        run.model, system, estimate.layout, estimate.job, catalog, where, software=software, efficiency=efficiency
    )
    inputs = replace(inputs, contention=cost.factors)
    found = Contention(
        where.placement, routing, oversubscription, where.seed, drawn.factors, estimate.step_s,
        float(sum(inputs.terms_s().values())), drawn.spread, drawn.seeds, drawn.loaded,
    )  # fmt: skip
    return inputs, found


def _bounds() -> Any:
    """The fit bounds the plausible ranges use: the collective fit's network efficiency and the training fit's
    fixed cost per step (``clustersim.validation.specs``, the bounds ``calibrate`` and the shipped fits use)."""
    from clustersim.diagnose import Bounds
    from clustersim.validation.specs import COLLECTIVE_BOUNDS, TRAINING_BOUNDS

    return Bounds(
        network_efficiency=COLLECTIVE_BOUNDS["network_efficiency"],
        step_s=TRAINING_BOUNDS["step_s"],
        source="clustersim.validation.specs",
    )

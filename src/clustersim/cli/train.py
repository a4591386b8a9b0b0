"""``clustersim train``: step time, memory, MFU and the cost of a training job on catalogued instances.

The options (or a scenario file, ``--scenario``) become a ``TrainingScenario``; ``run_training``
estimates it; ``clustersim.present.training`` draws the result. With both --tp and --pp the layout is
given: the layout options not given (--zero, --sp/--no-sp, --recompute, --micro-batch) take the
framework's documented defaults (``compute.software.resolve_layout``, the same function the validation
reader uses for a case's null fields). Otherwise the layout is chosen, and every layout option the
command line gives (--tp or --pp alone included) holds that dimension fixed in the search.
``--save-scenario FILE`` writes the inputs the run used, with a chosen layout filled in, so that
``--scenario FILE`` replays it.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from clustersim.choices import CudaGraphs, EpDispatcher, Recompute
from clustersim.cli.calibrate import CalibrationOption, calibration_overlay, refuse_with_save_scenario
from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    ModelsOption,
    emit_json,
    given_options,
    option_errors,
    plot_path,
    print_all,
    replay_scenario,
    user_errors,
)
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
    framework_profile,
    job_precision,
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
    checkpoint_spec,
    compared_instances,
    fabric_placement,
)
from clustersim.errors import ClusterSimError
from clustersim.units import MAX_NODES

if TYPE_CHECKING:
    from clustersim.scenario.schema import CheckpointSpec, TrainingScenario
    from clustersim.scenario.training import TrainingRun
    from clustersim.training.comparison import TrainingComparison

# The options that are inputs of the job (a scenario file holds them all).
INPUTS = (
    "instance", "nodes", "devices_per_node", "tp", "pp", "vp", "cp", "ep", "etp", "micro_batch", "zero", "sp",
    "recompute", "recompute_modules", "tokens", "global_batch", "seq", "precision", "bf16_layers", "offer", "models",
    "efficiency", "framework", "operation_formats",
    "software", "uneven", "last_stage_layers", "offload_layers", "headroom", "safe", "ep_overlap", "ep_dispatcher",
    "torch_compile", "cuda_graphs", "catalog", "storage", "checkpoint_every", "async_checkpoint", "nvme_checkpoint",
    "failure_rate", "beyond_context",
)  # fmt: skip
# The layout options; any given one constrains the layout search (names of train_command's parameters).
LAYOUT_OPTIONS = (
    "tp", "pp", "vp", "cp", "ep", "etp", "micro_batch", "zero", "sp", "recompute", "recompute_modules", "uneven",
    "headroom", "safe", "ep_overlap", "ep_dispatcher", "last_stage_layers", "offload_layers",
)  # fmt: skip
_FLAGS = {
    "instance": "--instance",
    "nodes": "--nodes",
    "devices_per_node": "--devices-per-node",
    "global_batch": "--global-batch",
    "seq_len": "--seq",
    "precision": "--precision",
    "bf16_layers": "--bf16-layers",
    "operation_formats": "--operation-format",
    "tokens": "--tokens",
    "price": "--price",
    "tp": "--tp",
    "pp": "--pp",
    "vp": "--vp",
    "cp": "--cp",
    "ep": "--ep",
    "etp": "--etp",
    "micro_batch": "--micro-batch",
    "zero": "--zero",
    "sequence_parallel": "--sp/--no-sp",
    "recompute": "--recompute",
    "recompute_modules": "--recompute-modules",
    "headroom": "--headroom",
    "safe": "--safe",
    "ep_overlap": "--ep-overlap",
    "ep_dispatcher": "--ep-dispatcher",
    "offload_layers": "--offload-layers",
}


def train_command(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Argument(
            metavar="MODEL", help="Zoo id (e.g. llama3-70b), a model TOML or a HF config.json (not with --scenario)."
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
    tokens: Annotated[str, typer.Option("--tokens", help="Training budget in tokens, e.g. 15T, 300B.")] = "1T",
    global_batch: TrainGlobalBatchOpt = None,
    seq: SeqOpt = None,
    beyond_context: BeyondContextOpt = False,
    precision: PrecisionOpt = "bf16",
    bf16_layers: Bf16LayersOpt = 0,
    operation_formats: OperationFormatOpt = None,
    offer: Annotated[str, typer.Option("--price", help="on_demand or capacity_block.")] = "on_demand",
    models: ModelsOption = None,
    efficiency: EfficiencyOpt = None,
    framework: FrameworkOpt = None,
    software: SoftwareOpt = None,
    uneven: UnevenStagesOpt = None,
    last_stage_layers: LastStageLayersOpt = None,
    offload_layers: OffloadLayersOpt = None,
    ep_overlap: EpOverlapOpt = None,
    ep_dispatcher: EpDispatcherOpt = None,
    torch_compile: TorchCompileOpt = None,
    cuda_graphs: CudaGraphsOpt = None,
    headroom: HeadroomOpt = None,
    safe: SafeOpt = False,
    ops: Annotated[bool, typer.Option("--ops", help="Also show each operation's time per layer.")] = False,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare",
            help="Other instance types to run the same job on, side by side with each term's ratio and its reason "
            "(repeat it, or a comma list: p6-b200.48xlarge,trn2.48xlarge).",
        ),
    ] = None,
    compare_nodes: Annotated[
        int | None,
        typer.Option(
            "--compare-nodes",
            min=1,
            max=MAX_NODES,
            help="Instances of each --compare type (default: as many as hold the first system's devices).",
        ),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            "--scenario",
            help="Run the job a scenario file describes (from --save-scenario); it holds every input, so MODEL and "
            "the job's options are refused with it (--ops, --compare, --json and --save-scenario still apply).",
        ),
    ] = None,
    save_scenario: Annotated[
        Path | None,
        typer.Option("--save-scenario", help="Write the inputs this run used (a chosen layout filled in) to a TOML."),
    ] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Checkpoint to this file system and count failures: fsx:TIER:CAPACITY[:efa][:mdiops=N], e.g. "
            "fsx:PERSISTENT_2-1000:100800GiB:efa (its price is added to the cost).",
        ),
    ] = None,
    checkpoint_every: Annotated[
        str | None,
        typer.Option("--checkpoint-every", help="Work between checkpoints: auto (Young/Daly, default) or e.g. 2h."),
    ] = None,
    async_checkpoint: Annotated[
        bool, typer.Option("--async-checkpoint", help="Copy checkpoints to host memory; drain in the background.")
    ] = False,
    nvme_checkpoint: Annotated[
        bool,
        typer.Option(
            "--nvme-checkpoint", help="Write checkpoints to local NVMe; drain to --storage in the background."
        ),
    ] = False,
    failure_rate: Annotated[
        str | None,
        typer.Option("--failure-rate", help="llama3 (default), rsc1, rsc2, or failures per device-hour."),
    ] = None,
    network: NetworkOpt = "analytic",
    placement: SimPlacementOpt = None,
    routing: SimRoutingOpt = None,
    oversubscription: SimOversubOpt = None,
    fabric_seed: SimSeedOpt = None,
    fabric_seeds: SimSeedsOpt = None,
    fabric_hosts: SimHostsOpt = None,
    background: BackgroundOpt = None,
    calibration: CalibrationOption = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", callback=plot_path, help="Draw the step by term and memory per device.")
    ] = None,
    level: LevelOption = DEFAULT_LEVEL,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Estimate a training job: step time by term, memory per device, MFU, time, cost and energy, the
    headline figures with their interval at --level (from left-out residuals of published runs).

    With --tp and --pp the layout is given (--zero, --sp, --recompute, --micro-batch not given: the
    framework's defaults); otherwise the fastest layout that fits is chosen and named, every layout
    option given (--tp or --pp alone, --zero, --micro-batch, --sp/--no-sp, ...) held fixed.
    """
    from clustersim.scenario.compare import compare_training
    from clustersim.scenario.files import save_scenario as save
    from clustersim.scenario.training import run_training

    with user_errors():
        if scenario is not None:
            spec = _replay(scenario, ["MODEL"] * (model is not None) + given_options(ctx, INPUTS))
        elif model is None:
            raise ClusterSimError("give a MODEL (e.g. llama3-70b) or --scenario FILE", field="model")
        else:
            spec = _scenario_of_options(
                model=model, instance=instance, nodes=nodes, devices_per_node=devices_per_node,
                tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, etp=etp, micro_batch=micro_batch, zero=zero, sp=sp,
                recompute=recompute, recompute_modules=recompute_modules, uneven=uneven, headroom=headroom, safe=safe,
                ep_overlap=ep_overlap, tokens=tokens,
                ep_dispatcher=ep_dispatcher, global_batch=global_batch, last_stage_layers=last_stage_layers,
                offload_layers=offload_layers, seq=seq,
                precision=precision, bf16_layers=bf16_layers, operation_formats=operation_formats, offer=offer,
                beyond_context=beyond_context, models=models or [], efficiency=efficiency or [], catalog=catalog or [],
                framework=framework, software=software or [], given=set(given_options(ctx, LAYOUT_OPTIONS)),
                torch_compile=torch_compile, cuda_graphs=cuda_graphs,
                checkpoint=checkpoint_spec(storage, checkpoint_every, async_checkpoint, failure_rate, nvme_checkpoint),
            )  # fmt: skip
        if compare_nodes is not None and compare is None:
            raise ClusterSimError(
                "--compare-nodes: the node count of the --compare instance; give --compare too",
                field="--compare-nodes",
                value=compare_nodes,
            )
        others = compared_instances(compare or [])
        for other in others if scenario is None else []:  # the format as given (a scenario keeps its catalog dtype)
            job_precision(precision, other, catalog or [], "--compare")
        if network != "analytic" and save_scenario is not None:
            raise ClusterSimError(
                f"--network {network} is not part of a scenario file; run --save-scenario with the analytic model, "
                f"then --scenario FILE --network {network}",
                field="--network",
                value=network,
            )
        refuse_with_save_scenario(calibration, save_scenario)
        where = fabric_placement(
            placement, routing, oversubscription, fabric_seed, fabric_hosts, fabric_seeds, background, network
        )
        with calibration_overlay(calibration):
            run = run_training(spec, network=network, fabric=where)
            comparison = compare_training(spec, others, nodes=compare_nodes, network=network) if others else None
        if plot is not None:
            from clustersim.cli.report_collectives import plot_training_run

            plot_training_run(run, level, plot, comparing=comparison is not None)
        if save_scenario is not None:
            save(save_scenario, run.scenario, header=_header(run, safe))
    if comparison is not None:
        _show_comparison(comparison, as_json=as_json, level=level, catalog=run.scenario.options.catalog)
        return
    _show(run, as_json=as_json, ops=ops, level=level)


def _replay(path: Path, given: list[str]) -> "TrainingScenario":
    """The training scenario in ``path``; the options given with it are refused, by name."""
    from clustersim.scenario.schema import TrainingScenario

    return replay_scenario(path, given, TrainingScenario, "serve")


def _scenario_of_options(
    *,
    model: str,
    instance: str,
    nodes: int,
    devices_per_node: int | None,
    tp: int | None,
    pp: int | None,
    vp: int | None,
    cp: int,
    ep: int,
    micro_batch: int | None,
    zero: int | None,
    sp: bool | None,
    recompute: Recompute | None,
    uneven: bool | None,
    recompute_modules: str | None = None,
    ep_overlap: bool | None = None,
    etp: int | None = None,
    last_stage_layers: int | None = None,
    offload_layers: int | None = None,
    ep_dispatcher: EpDispatcher | None = None,
    tokens: str,
    global_batch: int | None,
    seq: int | None,
    precision: str,
    offer: str,
    models: list[Path],
    efficiency: list[Path],
    catalog: list[Path],
    framework: str | None,
    software: list[Path],
    given: set[str],
    checkpoint: "CheckpointSpec | None" = None,
    beyond_context: bool = False,
    headroom: float | None = None,
    safe: bool = False,
    torch_compile: bool | None = None,
    cuda_graphs: CudaGraphs | None = None,
    bf16_layers: int = 0,
    operation_formats: list[str] | None = None,
) -> "TrainingScenario":
    """The scenario the options describe: with --tp and --pp a given layout, the options not in ``given``
    (their flags) at the framework's defaults; otherwise a chosen one, the layout options in ``given``
    held fixed. ``sp`` None: not given."""
    from clustersim.cli.job_options import operation_formats as parse_formats
    from clustersim.cli.job_options import recompute_modules as parse_recompute_modules
    from clustersim.cli.job_options import refuse_given_only
    from clustersim.compute.bf16_layers import check_bf16_layers_precision
    from clustersim.compute.software import resolve_layout
    from clustersim.scenario.schema import LayoutSearchSpec, LayoutSpec, SystemSpec, TrainingJobSpec
    from clustersim.scenario.training import training_scenario
    from clustersim.units import parse_count

    dtype = job_precision(precision, instance, catalog)
    check_bf16_layers_precision(bf16_layers, dtype, field="--bf16-layers")
    budget = parse_count(tokens)
    modules = parse_recompute_modules(recompute_modules)
    if offer not in ("on_demand", "capacity_block"):
        raise ClusterSimError(
            f"unknown price offer {offer!r} (valid: on_demand, capacity_block)", field="--price", value=offer
        )
    with option_errors(_FLAGS):
        system = SystemSpec(instance=instance, nodes=nodes, devices_per_node=devices_per_node)
        job = TrainingJobSpec(
            global_batch=global_batch, seq_len=seq, precision=dtype, bf16_layers=bf16_layers, tokens=budget,
            price=offer, beyond_context=beyond_context, operation_formats=parse_formats(operation_formats),
        )  # fmt: skip
        layout: LayoutSpec | LayoutSearchSpec | Literal["choose"] = "choose"
        if tp is not None and pp is not None:
            stated = {
                "tp": tp, "pp": pp, "vp": vp if "--vp" in given else None, "cp": cp, "ep": ep, "etp": etp,
                "sequence_parallel": sp, "micro_batch": micro_batch if "--micro-batch" in given else None,
                "zero": zero if "--zero" in given else None,
                "recompute": recompute if "--recompute" in given else None,
            }  # fmt: skip
            if modules is not None and "--recompute" not in given:  # naming modules asks for selective
                stated["recompute"] = Recompute.SELECTIVE
            fields, _ = resolve_layout(stated, framework_profile(framework, instance, software, catalog))
            if headroom is not None:
                raise ClusterSimError(
                    "--headroom is the memory a chosen layout leaves free; with --tp and --pp the layout is given "
                    "(drop --headroom, or one of --tp/--pp to have the layout chosen)",
                    field="--headroom",
                    value=headroom,
                )
            if safe:
                raise ClusterSimError(
                    "--safe chooses a layout by the upper end of its interval; with --tp and --pp the layout is given "
                    "(drop --safe, or one of --tp/--pp to have the layout chosen)",
                    field="--safe",
                    value=True,
                )
            layout = LayoutSpec(
                **fields, uneven_stages=bool(uneven), ep_overlap=ep_overlap, ep_dispatcher=ep_dispatcher,
                last_stage_layers=last_stage_layers, offload_layers=offload_layers,
                recompute_modules=modules,
            )  # fmt: skip
        else:
            refuse_given_only(last_stage_layers=last_stage_layers, offload_layers=offload_layers)
        if layout == "choose" and given:
            values = {
                "tp": tp, "pp": pp, "vp": vp, "cp": cp, "ep": ep, "etp": etp, "micro_batch": micro_batch, "zero": zero,
            }  # fmt: skip
            fixed = {name: value for name, value in values.items() if f"--{name.replace('_', '-')}" in given}
            layout = LayoutSearchSpec(
                choose=True, **fixed, sequence_parallel=sp, uneven_stages=uneven, headroom=headroom,
                safe=safe or None, ep_overlap=ep_overlap, ep_dispatcher=ep_dispatcher,
                recompute=recompute if "--recompute" in given else None,
                recompute_modules=modules,
            )  # fmt: skip
    return training_scenario(
        model=model, system=system, layout=layout, job=job, efficiency=efficiency, catalog=catalog, models=models,
        framework=framework, software=software, checkpoint=checkpoint, torch_compile=torch_compile,
        cuda_graphs=cuda_graphs,
    )  # fmt: skip


def _header(run: "TrainingRun", safe: bool) -> str:
    lines = ["clustersim training scenario: replay with `clustersim train --scenario FILE`."]
    if run.layout_chosen:
        how = "the lowest upper end of its 80% interval, --safe" if safe else "the fastest that fits"
        lines.append(f"The layout was chosen by clustersim ({how}) for this job and system.")
    return "\n".join(lines)


def _show_comparison(comparison: "TrainingComparison", *, as_json: bool, level: float, catalog: Sequence[Path]) -> None:
    from clustersim.cli.spreads import training_spread
    from clustersim.present import training as present

    spreads = [training_spread(s.estimate, s.instance, level, catalog) for s in comparison.systems]
    if as_json:
        emit_json(present.comparison_json(comparison, spreads))
    else:
        print_all(*present.comparison_view(comparison), present.ranking_line(comparison, spreads))


def _show(run: "TrainingRun", *, as_json: bool, ops: bool, level: float = DEFAULT_LEVEL) -> None:
    from clustersim.cli.report_collectives import train_json
    from clustersim.cli.spreads import memory_spread, training_spread
    from clustersim.present import training as present

    if as_json:
        emit_json(train_json(run, level))  # the one definition of train's JSON (the report embeds it too)
        return
    estimate = run.estimate
    where = run.scenario.system.instance, level, run.scenario.options.catalog
    spread, memory = training_spread(estimate, *where), memory_spread(estimate, *where)
    print_all(*present.estimate_view(estimate, run.model.num_params(), spread, memory))
    if estimate.totals is not None and estimate.totals.failures is not None:
        from clustersim.present.reliability import failures_line

        print_all(failures_line(estimate.totals.failures))
    if ops:
        print_all(present.operations_table(estimate))

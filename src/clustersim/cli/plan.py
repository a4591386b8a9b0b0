"""``clustersim plan``: what to rent and how to lay a training job out, over instance types x node counts x
frameworks x precisions x batches x price offers x checkpoint policies x layouts (``clustersim.plan.planner``).

The options become a ``PlanGrid`` (``plan.planner_grid``); checkpoint policies become the same function
``train --storage`` uses (``scenario.resilience.with_checkpoints``); ``cli.plan_view`` draws the answer.
``--dataset`` plans a serving deployment instead (``cli.plan_serving``): instances x nodes x tp x pp at
``--rate``/``--concurrency`` within ``--slo``.
"""

from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.calibrate import CalibrationOption, calibration_overlay
from clustersim.cli.common import CatalogOption, JsonOption, ModelsOption, number, plot_path, user_errors
from clustersim.cli.job_options import (
    Bf16LayersOpt,
    DevicesPerNodeOpt,
    EfficiencyOpt,
    OperationFormatOpt,
    SeqOpt,
    SoftwareOpt,
    TorchCompileOpt,
)
from clustersim.cli.level_option import DEFAULT_LEVEL, LevelOption
from clustersim.cli.plan_serving import listed as _listed
from clustersim.cli.sweep import Executor
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.catalog.registry import Catalog
    from clustersim.compute.software import SoftwareProfile
    from clustersim.plan.planner import Resilient
    from clustersim.plan.planner_grid import PlanGrid
    from clustersim.plan.space import SearchSpace
    from clustersim.system import System
    from clustersim.training.estimate import Estimate
    from clustersim.workload.transformer import Transformer

CHECKPOINT_MODES = ("sync", "async", "nvme")


def plan_command(
    ctx: typer.Context,
    model: Annotated[
        str, typer.Argument(metavar="MODEL", help="Zoo id (e.g. llama3.1-405b), a model TOML or a HF config.json.")
    ],
    instances: Annotated[
        list[str] | None,
        typer.Option("--instances", help="Instance types to plan on (comma list or repeated; default p5en.48xlarge)."),
    ] = None,
    nodes: Annotated[
        str,
        typer.Option(
            "--nodes", help="Node counts: 64, a list 16,24,32, or a range 128..2048 (its powers of two and both ends)."
        ),
    ] = "16",
    devices_per_node: DevicesPerNodeOpt = None,
    tokens: Annotated[str, typer.Option("--tokens", help="Training budget in tokens, e.g. 15T, 300B.")] = "1T",
    global_batch: Annotated[
        str | None,
        typer.Option(
            "--global-batch",
            help="Sequences per step: a count, a list or a range (default: about 4M tokens, "
            "1,024 tokens per device past 4,096 devices, as train).",
        ),
    ] = None,
    batch_tokens: Annotated[
        str | None,
        typer.Option(
            "--batch-tokens",
            help="Tokens per step instead of --global-batch: a count, list or range, "
            "e.g. 4M..16M (rounded to whole sequences).",
        ),
    ] = None,
    seq: SeqOpt = None,
    # Not job_options.FrameworkOpt (one framework, default the accelerator's): the plan searches over frameworks,
    # so this takes a comma list or repeats, and a framework that does not run on a chip is skipped with a note.
    framework: Annotated[
        list[str] | None,
        typer.Option(
            "--framework",
            help="Frameworks to try (comma list or repeated; default: each accelerator's). "
            "A framework that does not run on a chip is skipped there, with a note.",
        ),
    ] = None,
    precision: Annotated[
        str, typer.Option("--precision", help="GEMM formats to try, comma list: bf16, fp16, fp8, mxfp8, nvfp4, mxfp4.")
    ] = "bf16",
    offer: Annotated[
        str, typer.Option("--price", help="Price offers, comma list: on_demand, capacity_block.")
    ] = "on_demand",
    storage: Annotated[
        list[str] | None,
        typer.Option(
            "--storage",
            help="Checkpoint file systems to try (repeat): fsx:TIER:CAPACITY[:efa], e.g. "
            "fsx:PERSISTENT_2-1000:100800GiB:efa; adds failures, checkpoints and the storage's price.",
        ),
    ] = None,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="Checkpoint policies to try with --storage, comma list: sync (default), "
            "async (host memory), nvme (local NVMe, drained).",
        ),
    ] = None,
    checkpoint_every: Annotated[
        str | None, typer.Option("--checkpoint-every", help="Work between checkpoints: auto (Young/Daly) or e.g. 2h.")
    ] = None,
    failure_rate: Annotated[
        str | None, typer.Option("--failure-rate", help="llama3 (default), rsc1, rsc2, or failures per device-hour.")
    ] = None,
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="What to minimize: time, cost, energy, or goodput (the expected time "
            "with failures and checkpoints; needs --storage). Serving (--dataset): cost (default, per 1M output "
            "tokens), time (mean end-to-end latency) or energy (per output token).",
        ),
    ] = "time",
    safe: Annotated[
        bool,
        typer.Option(
            "--safe",
            help="Rank by the upper end of each row's interval of the objective (what it costs if the model errs as "
            "on the left-out published runs whose layouts share its features) instead of the prediction, and keep "
            "only layouts that fit at the upper end of their memory's interval.",
        ),
    ] = False,
    deadline: Annotated[str | None, typer.Option("--deadline", help="Longest wall time, e.g. 90d.")] = None,
    budget: Annotated[
        float | None, typer.Option("--budget", callback=number(gt=0, unit="USD"), help="Largest cost, USD.")
    ] = None,
    max_nodes: Annotated[int | None, typer.Option("--max-nodes", min=1, help="Most instances a plan may use.")] = None,
    micro_batch: Annotated[
        str | None, typer.Option("--micro-batch", help="Micro-batch sizes to search (list or range; default 1,2,4).")
    ] = None,
    vp: Annotated[str | None, typer.Option("--vp", help="Interleaving degrees to search (default 1,2,4).")] = None,
    cp: Annotated[
        str | None,
        typer.Option("--cp", help="Context-parallel degrees to search (default 1, and 1-16 from 16k tokens)."),
    ] = None,
    ep: Annotated[
        str | None,
        typer.Option("--ep", help="Expert-parallel degrees to search (default: powers of two dividing the experts)."),
    ] = None,
    etp: Annotated[
        str | None,
        typer.Option(
            "--etp",
            help="Expert tensor-parallel degrees to search, 'derived' for tp's (default for MoE: derived,1).",
        ),
    ] = None,
    headroom: Annotated[
        float | None,
        typer.Option("--headroom", min=0, max=0.9, help="Share of device memory a layout leaves free (default 0.1)."),
    ] = None,
    top: Annotated[int, typer.Option("--top", min=1, max=1000, help="Rows of the ranking to show.")] = 5,
    keep: Annotated[
        int, typer.Option("--keep", min=1, max=100, help="Fastest layouts kept per point (the runner-ups).")
    ] = 3,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", callback=plot_path, help="Draw time against cost, the Pareto front highlighted."),
    ] = None,
    models: ModelsOption = None,
    efficiency: EfficiencyOpt = None,
    software: SoftwareOpt = None,
    torch_compile: TorchCompileOpt = None,
    bf16_layers: Bf16LayersOpt = 0,
    operation_formats: OperationFormatOpt = None,
    calibration: CalibrationOption = None,
    executor: Annotated[
        Executor,
        typer.Option(
            "--executor",
            case_sensitive=False,
            help="local (the points one after another here) or ray (the 'ray' "
            "extra: partitions of points on Ray workers; the same plan).",
        ),
    ] = Executor.LOCAL,
    address: Annotated[
        str | None, typer.Option("--address", help="With --executor ray: the cluster to join (default: a local one).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, max=4096, help="CPUs of a new local Ray (default: all cores).")
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", help="Plan a serving deployment for this request set (as serve --dataset)."),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option("--rate", callback=number(gt=0, unit="requests/s"), help="Serving: requests/s, all nodes."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", min=1, help="Serving: clients in a closed loop, all nodes.")
    ] = None,
    slo: Annotated[
        str | None,
        typer.Option(
            "--slo",
            help="Serving: bounds on the mean ttft, itl, e2e, e.g. ttft=2s,itl=50ms "
            "(without --rate/--concurrency: each deployment's highest rate meeting them).",
        ),
    ] = None,
    engine: Annotated[str | None, typer.Option("--engine", help="Serving engine (default: each family's).")] = None,
    simulate_top: Annotated[
        int | None, typer.Option("--simulate-top", min=0, max=50, help="Serving: top rows simulated (default 3).")
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", min=10, max=100_000, help="Serving: requests a simulation draws.")
    ] = None,
    level: LevelOption = DEFAULT_LEVEL,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Plan a training job: instance types x node counts x frameworks x precisions x layouts, priced over the
    token budget; prints the Pareto front of time against cost and the top rows by --objective, each with
    its interval at --level, the term it shrinks against its runner-up and its margin. With --dataset, a serving
    deployment: instances x nodes x tp x pp at --rate or --concurrency within --slo, ranked by cost per token
    (default), latency or energy per token."""
    from clustersim.cli.plan_serving import run_serving_plan, serving_mode

    with user_errors():
        serving = serving_mode(ctx, dataset)
    if serving:
        with user_errors(), calibration_overlay(calibration):
            run_serving_plan(ctx, ctx.params)
        return
    from clustersim.catalog import registry
    from clustersim.cli.fabric_options import calibration_in_force, calibration_line
    from clustersim.cli.plan_recipe import bf16_layers_in, operation_formats_in
    from clustersim.cli.plan_view import plan_json, plan_view, plot_plan
    from clustersim.cli.progress import progress_bar
    from clustersim.compute import efficiency as efficiencies
    from clustersim.compute import software as profiles
    from clustersim.plan.planner import Constraints, plan_training
    from clustersim.plan.planner_grid import PlanGrid, expand_counts, grid_points
    from clustersim.scenario.training import model_spec, user_files
    from clustersim.units import MAX_SEQUENCES, MAX_TOKENS
    from clustersim.workload import zoo

    with user_errors(), calibration_overlay(calibration):
        calibrated = calibration_in_force()
        if global_batch is not None and batch_tokens is not None:
            raise ClusterSimError(
                "--global-batch and --batch-tokens both give the batch; give one", field="--batch-tokens",
                value=batch_tokens,
            )  # fmt: skip
        cat = registry.load_catalog(user_files(registry.ENV_VAR, catalog or []), use_env=False)
        table = profiles.software_profiles(user_files(profiles.ENV_VAR, software or []), use_env=False)
        fractions = efficiencies.efficiency_table(user_files(efficiencies.ENV_VAR, efficiency or []), use_env=False)
        transformer = zoo.load_model(model_spec(model), extra_dirs=user_files(zoo.ENV_VAR, models or []), use_env=False)
        grid = PlanGrid(
            instances=_listed(instances or ["p5en.48xlarge"], "--instances"),
            nodes=expand_counts(nodes, "--nodes"),
            tokens=_tokens(tokens),
            seq_len=seq,
            frameworks=_listed(framework, "--framework") if framework else (None,),
            precisions=_listed([precision], "--precision"),
            global_batches=None
            if global_batch is None
            else expand_counts(global_batch, "--global-batch", limit=MAX_SEQUENCES),
            batch_tokens=None
            if batch_tokens is None
            else expand_counts(batch_tokens, "--batch-tokens", limit=int(MAX_TOKENS), tokens=True),
            offers=_listed([offer], "--price"),
            checkpoints=_checkpoints(storage, checkpoint, checkpoint_every, failure_rate, transformer, cat),
            devices_per_node=devices_per_node,
        )
        limits = Constraints(
            deadline_s=None if deadline is None else _deadline(deadline),
            budget_usd=budget,
            max_nodes=max_nodes,
        )
        table, compiled = _compiled(table, torch_compile, grid, cat)
        table, kept = bf16_layers_in(table, bf16_layers, grid, transformer)
        table, formats = operation_formats_in(table, operation_formats, grid, transformer, cat)
        points, notes = grid_points(transformer, cat, grid, profiles=table, efficiency=fractions)
        notes += compiled + kept + formats
        memory_level = level if safe else None  # --safe: the layout fits at its memory interval's upper end too
        space = _space(headroom, memory_level, micro_batch=micro_batch, vp=vp, cp=cp, ep=ep, etp=etp)
        with (
            _executor(executor, address, workers) as run,
            progress_bar(f"plan ({executor.value})", "points") as progress,
        ):
            plan = plan_training(
                transformer, points, objective=objective, safe=safe, constraints=limits, top=top, keep=keep,
                space=space, level=level, notes=notes, progress=progress, executor=run,
                workers=getattr(run, "cpus", 1),
            )  # fmt: skip
        if plot is not None:
            from clustersim.cli.common import write_figure

            write_figure(lambda: plot_plan(plan, plot), plot)
    if as_json:
        from clustersim.cli.common import emit_json

        emit_json(plan_json(plan, transformer) | {"calibration": calibrated, "executor": executor.value})
        return
    from clustersim.cli.common import print_all

    print_all(*plan_view(plan, transformer), calibration_line(calibrated))


def _compiled(
    table: dict[str, "SoftwareProfile"], torch_compile: bool | None, grid: "PlanGrid", cat: "Catalog"
) -> tuple[dict[str, "SoftwareProfile"], list[str]]:
    """The profiles with --torch-compile/--no-torch-compile applied, and a note saying so; refused where a
    framework the plan tries prices its own fused kernels (``scenario.training.compiled_software``)."""
    from clustersim.compute.software import software_for
    from clustersim.scenario.training import compile_note, compiled_software

    if torch_compile is None:
        return table, []
    said: list[str] = []
    for instance in grid.instances:
        chip = cat.accelerator(cat.instance(instance).accelerator)
        for framework in grid.frameworks:
            try:
                software = software_for(framework, chip.family, table, accelerator=chip.id)
            except ClusterSimError:
                continue  # a framework that does not run on the chip: grid_points skips it, with a note
            note = compile_note(compiled_software(software, torch_compile, table), torch_compile)
            said += [note] if note and note not in said else []
    compiled = {name: compiled_software(p, torch_compile) if p.eager_elementwise else p for name, p in table.items()}
    return compiled, said


def _executor(kind: Executor, address: str | None, workers: int | None) -> AbstractContextManager[Any]:
    """Where the points are searched: here, or on Ray (``--address`` and ``--workers`` only there)."""
    from contextlib import nullcontext

    from clustersim.plan.parallel import RayPoints, run_here

    if kind is Executor.LOCAL:
        for flag, value in (("--address", address), ("--workers", workers)):
            if value is not None:
                raise ClusterSimError(
                    f"{flag}: only with --executor ray (local searches the points in this process)", field=flag,
                    value=value,
                )  # fmt: skip
        return nullcontext(run_here)
    if address is not None and workers is not None:
        raise ClusterSimError(
            "--workers: sizes a new local Ray; the cluster at --address has its own CPUs", field="--workers",
            value=workers,
        )  # fmt: skip
    from clustersim.processes import default_workers
    from clustersim.sweep.execute import import_ray

    return RayPoints(import_ray(), address=address, workers=None if address else workers or default_workers())


def _space(headroom: float | None, memory_level: float | None = None, **axes: str | None) -> "SearchSpace":
    """The layout space: the axes given (``--micro-batch 1,2,4,8``) replace the planner's defaults; ``memory_level``:
    a layout fits only at the upper end of its memory's interval (``--safe``)."""
    from dataclasses import replace

    from clustersim.plan.planner_grid import expand_counts
    from clustersim.plan.space import DEFAULT_HEADROOM, ETP_DERIVED, SearchSpace
    from clustersim.units import MAX_DEGREE, MAX_SEQUENCES

    etp = axes.pop("etp", None)
    given: dict[str, Any] = {
        name: expand_counts(
            text, f"--{name.replace('_', '-')}", limit=MAX_SEQUENCES if name == "micro_batch" else MAX_DEGREE
        )
        for name, text in axes.items()
        if text is not None
    }
    if etp is not None:  # 'derived' (tp's degree, or folded) and stated degrees
        words = [w.strip() for w in etp.split(",")]
        stated = ",".join(w for w in words if w != "derived")
        degrees = expand_counts(stated, "--etp", limit=MAX_DEGREE) if stated else ()
        given["etp"] = tuple(sorted(({ETP_DERIVED} if "derived" in words else set()) | set(degrees)))
    headroom = DEFAULT_HEADROOM if headroom is None else headroom
    return replace(SearchSpace(headroom=headroom, memory_level=memory_level), **given)


def _tokens(text: str) -> float:
    from clustersim.units import parse_count

    try:
        return parse_count(text)
    except ClusterSimError as exc:
        raise ClusterSimError(f"--tokens: {exc}", field="--tokens", value=text) from None


def _deadline(text: str) -> float:
    from clustersim.units import parse_seconds

    try:
        value = parse_seconds(text)
    except ClusterSimError as exc:
        raise ClusterSimError(f"--deadline: {exc}", field="--deadline", value=text) from None
    if not value > 0:
        raise ClusterSimError(
            f"--deadline: {text!r} must be a positive duration (e.g. 90d, 2000h)", field="--deadline", value=text
        )
    return value


def _checkpoints(
    storage: list[str] | None,
    modes: str | None,
    every: str | None,
    rate: str | None,
    model: "Transformer",
    catalog: "Catalog",
) -> tuple[tuple[str, "Resilient | None"], ...]:
    """One (name, function) per storage tier and checkpoint mode; none without --storage (whose options
    alone are refused, by name)."""
    from clustersim.cli.common import option_errors
    from clustersim.reliability.failures import failure_rate
    from clustersim.scenario.schema import CheckpointSpec
    from clustersim.storage.fsx import parse_storage

    if not storage:
        orphans = [flag for flag, value in (("--checkpoint", modes), ("--checkpoint-every", every),
                                            ("--failure-rate", rate)) if value]  # fmt: skip
        if orphans:
            raise ClusterSimError(
                f"{', '.join(orphans)} need --storage (where checkpoints go), e.g. --storage "
                "fsx:PERSISTENT_2-1000:100800GiB",
                field=orphans[0],
            )
        return (("none", None),)
    chosen = _listed([modes or "sync"], "--checkpoint")
    unknown = [m for m in chosen if m not in CHECKPOINT_MODES]
    if unknown:
        raise ClusterSimError(
            f"--checkpoint: unknown policy {unknown[0]!r} (valid: {', '.join(CHECKPOINT_MODES)})",
            field="--checkpoint",
            value=unknown[0],
        )
    try:
        failure_rate(rate or "llama3")
    except ClusterSimError as exc:
        raise ClusterSimError(f"--failure-rate: {exc}", field="--failure-rate", value=rate) from None
    out: list[tuple[str, Resilient | None]] = []
    for tier in storage:
        try:
            parse_storage(catalog, tier)
        except ClusterSimError as exc:
            raise ClusterSimError(f"--storage: {exc}", field="--storage", value=tier) from None
        for mode in chosen:
            with option_errors({"every": "--checkpoint-every", "failure_rate": "--failure-rate"}):
                spec = CheckpointSpec(
                    storage=tier, every=every or "auto", async_save=mode == "async", nvme=mode == "nvme",
                    failure_rate=rate or "llama3",
                )  # fmt: skip
            out.append((f"{mode} on {tier}", partial(_resilient, spec=spec, model=model, catalog=catalog)))
    return tuple(out)


def _resilient(
    estimate: "Estimate", system: "System", *, spec: object, model: "Transformer", catalog: "Catalog"
) -> "Estimate":
    """``estimate`` with failures and checkpoints, as ``train --storage`` computes them."""
    from clustersim.scenario.resilience import with_checkpoints
    from clustersim.scenario.schema import CheckpointSpec

    assert isinstance(spec, CheckpointSpec)
    return with_checkpoints(estimate, spec, model=model, system=system, catalog=catalog, framework=estimate.framework)

"""``clustersim reliability``: how often a large job fails, how often to checkpoint, the goodput and the
spread of the time to train (a seeded Monte-Carlo of whole runs)."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    ModelsOption,
    emit_json,
    given_options,
    plot_path,
    print_all,
    user_errors,
    write_figure,
)
from clustersim.errors import ClusterSimError
from clustersim.units import MAX_NODES

if TYPE_CHECKING:
    from clustersim.catalog.schema import Instance
    from clustersim.storage.checkpoint import CheckpointTiming

MAX_RUNS = 1_000_000


def _seconds(text: str, flag: str, *, allow_zero: bool = False) -> float:
    import math

    from clustersim.units import parse_seconds

    try:
        value = parse_seconds(text)
    except ClusterSimError as exc:
        raise ClusterSimError(f"{flag}: {exc}", field=flag, value=text) from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        rule = "zero or more" if allow_zero else "more than zero"
        raise ClusterSimError(f"{flag}: {text!r} must be a duration {rule}", field=flag, value=text)
    return value


def reliability_command(
    ctx: typer.Context,
    instance: Annotated[str, typer.Option("--instance", help="Instance id, e.g. p5.48xlarge.")] = "p5.48xlarge",
    nodes: Annotated[
        int,
        typer.Option(
            "--nodes", min=1, max=MAX_NODES, help="Instances in the job (at most its largest catalogued cluster)."
        ),
    ] = 2048,
    work: Annotated[str, typer.Option("--work", help="Failure-free time to train, e.g. 54d, 1000h.")] = "30d",
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="Training stall per checkpoint, e.g. 60s.")] = "60s",
    restart: Annotated[
        str, typer.Option("--restart", help="Detection, replacement, reload and warm-up per failure, e.g. 20min.")
    ] = "20min",
    model: Annotated[
        str | None,
        typer.Option("--model", help="Derive --checkpoint and --restart from this model's checkpoint on --storage."),
    ] = None,
    storage: Annotated[
        str | None, typer.Option("--storage", help="With --model: the file system, fsx:TIER:CAPACITY[:efa][:mdiops=N].")
    ] = None,
    async_save: Annotated[
        bool, typer.Option("--async", help="With --model: asynchronous checkpoints (stall for the host copy).")
    ] = False,
    models: ModelsOption = None,
    interval: Annotated[
        str, typer.Option("--interval", help="Work between checkpoints: auto (Young/Daly) or a duration, e.g. 2h.")
    ] = "auto",
    failure_rate: Annotated[
        str,
        typer.Option("--failure-rate", help="llama3, rsc1, rsc2, or failures per device-hour (e.g. 2e-5)."),
    ] = "llama3",
    runs: Annotated[
        int, typer.Option("--runs", min=0, max=MAX_RUNS, help="Monte-Carlo runs (0: the formula only).")
    ] = 10_000,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the Monte-Carlo runs.")] = 0,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", callback=plot_path, help="Write a histogram of the simulated times to train (PNG, SVG, PDF)."
        ),
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Checkpoint interval (Young/Daly), expected time to train and goodput, their spread over simulated
    runs, and how they move with the failure rate, the checkpoint time and the restart time."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.network.topology import check_cluster_size
    from clustersim.reliability.failures import daly_interval_s, job_mtbf_s
    from clustersim.reliability.failures import failure_rate as rate_of
    from clustersim.reliability.montecarlo import simulate_runs
    from clustersim.reliability.plan import Policy, sensitivity

    with user_errors():
        if plot is not None and runs == 0:
            raise ClusterSimError("--plot draws the Monte-Carlo runs; give --runs of at least 1", field="--plot")
        cat = load_catalog(catalog or ())
        entry = cat.instance(instance)
        check_cluster_size(cat, entry, nodes)
        devices = nodes * int(entry.num_accelerators.value)
        rate = rate_of(failure_rate)
        fixed = None if interval.strip().lower() == "auto" else _seconds(interval, "--interval")
        mtbf = job_mtbf_s(rate, num_devices=devices, num_nodes=nodes)
        derived = _derived(ctx, model, storage, async_save, catalog, models, entry, nodes)
        if derived is None:
            stall, restart_s = _seconds(checkpoint, "--checkpoint"), _seconds(restart, "--restart", allow_zero=True)
        else:
            timing, restart_s = derived
            stall = timing.stall_at(fixed) if fixed is not None else timing.stall_s
            if fixed is None and timing.drain_s > daly_interval_s(stall, mtbf):
                fixed, stall = timing.drain_s, timing.stall_s  # checkpoint no faster than the drain keeps up
        policy = Policy(
            work_s=_seconds(work, "--work"), checkpoint_s=stall, restart_s=restart_s, mtbf_s=mtbf, interval_s=fixed
        )
        run = policy.run()
        spread = None
        if runs:
            spread = simulate_runs(
                policy.work_s, interval_s=run.interval_s, checkpoint_s=policy.checkpoint_s,
                restart_s=policy.restart_s, mtbf_s=policy.mtbf_s, num_runs=runs, seed=seed,
            )  # fmt: skip
        rows = sensitivity(policy)
    from clustersim.present import reliability as present

    if plot is not None and spread is not None:
        with user_errors():
            write_figure(lambda: present.plot_spread(spread, run.expected_time_s, plot), plot)
    if as_json:
        payload = present.reliability_json(policy, rate, devices, nodes, spread, rows)
        if plot is not None:
            payload["plot"] = str(plot)
        emit_json(payload)
        return
    print_all(*present.reliability_view(policy, rate, devices, nodes, spread, rows))
    if plot is not None:
        print_all(f"histogram written to {plot}")


def _derived(
    ctx: typer.Context,
    model: str | None,
    storage: str | None,
    async_save: bool,
    catalog: list[Path] | None,
    models: list[Path] | None,
    entry: "Instance",
    nodes: int,
) -> "tuple[CheckpointTiming, float] | None":
    """With --model and --storage: the checkpoint's timing and the restart (detection and replacement,
    the checkpoint's load, warm-up); the options they replace are refused beside them."""
    if model is None and storage is None:
        if async_save:
            raise ClusterSimError("--async needs --model and --storage", field="--async")
        return None
    if model is None or storage is None:
        missing = "--storage" if model is not None else "--model"
        raise ClusterSimError(f"{missing}: --model and --storage go together", field=missing)
    clash = given_options(ctx, ("checkpoint", "restart"))
    if clash:
        raise ClusterSimError(
            f"{', '.join(clash)}: derived from --model and --storage; give one or the other", field=clash[0]
        )
    from clustersim.catalog.registry import load_catalog
    from clustersim.reliability.failures import DETECT_REPLACE_S, WARMUP_S
    from clustersim.storage.checkpoint import SaveMode, plan_checkpoint
    from clustersim.storage.fsx import parse_storage
    from clustersim.system import device_host_copy_bytes_per_s
    from clustersim.workload import zoo

    cat = load_catalog(catalog or ())
    fs = parse_storage(cat, storage)
    device = cat.accelerator(entry.accelerator)
    timing = plan_checkpoint(
        zoo.load_model(model, extra_dirs=models or ()), fs, instance=entry, num_nodes=nodes,
        devices_per_node=int(entry.num_accelerators.value), mode=SaveMode.ASYNC if async_save else SaveMode.SYNC,
        accelerator=device, host_copy_bytes_per_s=device_host_copy_bytes_per_s(cat, device),
    )  # fmt: skip
    return timing, DETECT_REPLACE_S + timing.load.time_s + WARMUP_S

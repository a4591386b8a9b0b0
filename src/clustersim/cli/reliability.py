"""``clustersim reliability``: how often a large job fails, how often to checkpoint, the goodput and the
spread of the time to train (a seeded Monte-Carlo of whole runs)."""

from pathlib import Path
from typing import Annotated

import typer

from clustersim.cli.common import CatalogOption, JsonOption, emit_json, print_all, user_errors
from clustersim.errors import ClusterSimError
from clustersim.units import MAX_NODES

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
    instance: Annotated[str, typer.Option("--instance", help="Instance id, e.g. p5.48xlarge.")] = "p5.48xlarge",
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=MAX_NODES, help="Instances in the job.")] = 2048,
    work: Annotated[str, typer.Option("--work", help="Failure-free time to train, e.g. 54d, 1000h.")] = "30d",
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="Training stall per checkpoint, e.g. 60s.")] = "60s",
    restart: Annotated[
        str, typer.Option("--restart", help="Detection, replacement, reload and warm-up per failure, e.g. 20min.")
    ] = "20min",
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
        Path | None, typer.Option("--plot", help="Write a histogram of the simulated times to train (PNG, SVG, PDF).")
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Checkpoint interval (Young/Daly), expected time to train and goodput, their spread over simulated
    runs, and how they move with the failure rate, the checkpoint time and the restart time."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.reliability.failures import failure_rate as rate_of
    from clustersim.reliability.failures import job_mtbf_s
    from clustersim.reliability.montecarlo import simulate_runs
    from clustersim.reliability.plan import Policy, sensitivity

    with user_errors():
        if plot is not None and runs == 0:
            raise ClusterSimError("--plot draws the Monte-Carlo runs; give --runs of at least 1", field="--plot")
        entry = load_catalog(catalog or ()).instance(instance)
        devices = nodes * int(entry.num_accelerators.value)
        rate = rate_of(failure_rate)
        fixed = None if interval.strip().lower() == "auto" else _seconds(interval, "--interval")
        policy = Policy(
            work_s=_seconds(work, "--work"),
            checkpoint_s=_seconds(checkpoint, "--checkpoint"),
            restart_s=_seconds(restart, "--restart", allow_zero=True),
            mtbf_s=job_mtbf_s(rate, num_devices=devices, num_nodes=nodes),
            interval_s=fixed,
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
            try:
                present.plot_spread(spread, run.expected_time_s, plot)
            except (OSError, ValueError) as exc:
                raise ClusterSimError(f"--plot: cannot write {plot}: {exc}", field="--plot", value=str(plot)) from None
    if as_json:
        payload = present.reliability_json(policy, rate, devices, nodes, spread, rows)
        if plot is not None:
            payload["plot"] = str(plot)
        emit_json(payload)
        return
    print_all(*present.reliability_view(policy, rate, devices, nodes, spread, rows))
    if plot is not None:
        print_all(f"histogram written to {plot}")

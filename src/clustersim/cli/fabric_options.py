"""The options and helpers every ``clustersim fabric`` command shares (``simulate``, ``compare``,
``step``, ``pattern``): the job, the fat-tree, routing, placement, failures, and parsing the size,
the routing, the progress bar and the plot."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.calibrate import COLLECTIVE_ENV_VAR
from clustersim.cli.common import number, plot_path, write_figure
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Algorithm
from clustersim.units import MAX_COLLECTIVE_BYTES

if TYPE_CHECKING:
    from clustersim.network.work import WorkEstimate

InstanceOpt = Annotated[str, typer.Option("--instance", help="Instance id or alias, e.g. p5.48xlarge.")]
NodesOpt = Annotated[int, typer.Option("--nodes", min=1, max=50_000, help="Instances in the job.")]
CollectiveOpt = Annotated[
    str, typer.Option("--collective", help="all_reduce, all_gather, reduce_scatter, alltoall, sendrecv.")
]
SizeOpt = Annotated[str, typer.Option("--size", help="Bytes per rank (nccl-tests' size), e.g. 1G, 64MiB.")]
AlgoOpt = Annotated[
    Algorithm | None,
    typer.Option(
        "--algo",
        case_sensitive=False,
        help="ring, tree, hierarchical, nvls (one node), nvlstree (2+ nodes), pairwise, direct; "
        "default: what NCCL's tuner picks for the size.",
    ),
]
OversubOpt = Annotated[
    float | None,
    typer.Option(
        "--oversubscription",
        callback=number(ge=1, le=32),
        help="Leaf-to-spine oversubscription (2 = 2:1); default: the cluster template's (1).",
    ),
]
RoutingOpt = Annotated[str, typer.Option("--routing", help="ecmp (a hash per flow), spray (SRD), flowlet or adaptive.")]
PlacementOpt = Annotated[str, typer.Option("--placement", help="packed, spread or random (seeded).")]
FailOpt = Annotated[int, typer.Option("--fail-links", min=0, help="Leaf-spine cables of the job's leaves to fail.")]
FailSwitchOpt = Annotated[
    int,
    typer.Option("--fail-switches", min=0, help="Spine switches of the job's pods to fail (seeded; all their links)."),
]
FailLeafOpt = Annotated[
    int,
    typer.Option(
        "--fail-leaves",
        min=0,
        help="Leaf switches of the job to fail (seeded): their hosts lose those NICs; NCCL's PXN sends through a "
        "peer GPU's NIC.",
    ),
]
JobsOpt = Annotated[
    int,
    typer.Option(
        "--jobs", min=1, max=1024, help="Copies of the job side by side (placed by --placement); each one's slowdown."
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Seed of ECMP's hash, placement and failures.")]
SeedsOpt = Annotated[
    int,
    typer.Option(
        "--seeds",
        min=1,
        max=100,
        help="Seeds to run (--seed, --seed + 1, ...) where the seed draws the answer: the median, with min-max.",
    ),
]
RadixOpt = Annotated[int, typer.Option("--radix", min=4, max=1024, help="Switch ports (assumed; default 64).")]
HostsOpt = Annotated[
    int | None,
    typer.Option("--fabric-hosts", min=1, max=50_000, help="Hosts of the whole fabric; default: the cluster's."),
]
StepsOpt = Annotated[
    int,
    typer.Option(
        "--max-steps", min=1, max=64, help="Ring steps or all-to-all rounds simulated; the rest extrapolated."
    ),
]
IdealOpt = Annotated[
    bool,
    typer.Option(
        "--ideal",
        help="Datasheet links without latency (the link-bound view); default: the calibrated links the analytic "
        "model prices, with NCCL's per-step latencies and the fitted ramp, as nccl-tests would measure.",
    ),
]
PlotOpt = Annotated[
    Path | None,
    typer.Option("--plot", callback=plot_path, help="Write link utilization and flow completion (PNG, SVG, PDF)."),
]


def links_line(links: str, ramp: str | None = None) -> str:
    """Says which links a simulation ran on (and, calibrated, where its message-size ramp came from)."""
    if links == "ideal":
        return "links: ideal (datasheet line rates, no latency: the link bound, not what nccl-tests measures)"
    line = "links: calibrated (calibration.toml's achieved fractions"
    if ramp == "fitted":
        return line + "); latency and ramp: the analytic model's, fitted, over the simulated bandwidth"
    if ramp == "simulated":
        return line + ", NCCL's per-step latencies, Simple protocol); ramp: simulated (NCCL's structure)"
    return line + ")"


def parse_size(text: str) -> float:
    from clustersim.cli.collective import _bytes_suffix
    from clustersim.units import parse_bytes

    size = parse_bytes(_bytes_suffix(text))
    if not 1 <= size <= MAX_COLLECTIVE_BYTES:
        raise ClusterSimError(f"--size: {size:g} bytes is out of range (1 byte to 1 TiB)", field="--size", value=text)
    return size


@contextmanager
def flow_progress(estimate: WorkEstimate | None) -> Iterator[Callable[[int, int], None] | None]:
    """A transient progress bar on stderr fed by the simulator's flow counts (``cli.progress``: a run
    estimated over ~2 s, on a terminal), nothing on stdout."""
    from clustersim.cli.progress import progress_bar

    with progress_bar("simulating", "flows", estimate) as update:
        yield update


def write_plot(draw: Callable[[Any, Path], None], result: Any, path: Path) -> None:
    """``draw(result, path)``, an unwritable path refused naming --plot (``cli.common.write_figure``)."""
    write_figure(lambda: draw(result, path), path)


def parse_routing(name: str) -> str:
    from clustersim.errors import UnknownNameError
    from clustersim.network.flowsim.routing import Routing

    key = name.strip().lower()
    if key not in {r.value for r in Routing}:
        raise UnknownNameError("routing", name, [r.value for r in Routing])
    return key


def refuse_ideal_calibration(ideal: bool, calibration: list[Path] | None) -> None:
    """``--calibration`` prices the calibrated links; ``--ideal`` runs on datasheet links that no calibration
    touches: the pair is refused."""
    if ideal and calibration:
        raise ClusterSimError(
            "--calibration prices the calibrated links; --ideal runs on the datasheet links, which no calibration "
            "changes: drop one of them",
            field="--calibration",
            value=",".join(str(p) for p in calibration),
        )


def calibration_in_force() -> list[str]:
    """The collective calibration overlays in force over the packaged values (``$CLUSTERSIM_COLLECTIVE_CALIBRATION``,
    which ``--calibration`` extends for its command), for an answer to name; empty: the packaged values."""
    return [path for path in os.environ.get(COLLECTIVE_ENV_VAR, "").split(os.pathsep) if path]


def calibration_line(files: list[str]) -> str:
    """Says which collective calibration priced the answer."""
    if not files:
        return "collective calibration: packaged"
    return f"collective calibration: packaged, with {', '.join(files)} over it"

"""``clustersim train``'s inputs that are not the job's or the layout's: where checkpoints go, the systems
compared, and where the job sits on the simulated fabric (``--network sim``)."""

from typing import TYPE_CHECKING, Annotated

import typer

from clustersim.cli.common import option_errors
from clustersim.cli.fabric_options import HostsOpt, OversubOpt
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.scenario.schema import CheckpointSpec
    from clustersim.training.contention import FabricPlacement

NetworkOpt = Annotated[
    str,
    typer.Option(
        "--network",
        help="Collective cost model: analytic, or sim (the step's groups simulated together on the cluster's fabric, "
        "their contention added to the analytic times).",
    ),
]
SimPlacementOpt = Annotated[
    str | None,
    typer.Option(
        "--placement", help="With --network sim: packed (default), spread or random (seeded by --fabric-seed)."
    ),
]
SimRoutingOpt = Annotated[
    str | None,
    typer.Option(
        "--routing",
        help="With --network sim: ecmp, spray, flowlet or adaptive (default: the instance's: EFA sprays, others hash).",
    ),
]
SimOversubOpt = OversubOpt  # fabric simulate's option (with --network sim only)
SimSeedOpt = Annotated[
    int | None, typer.Option("--fabric-seed", min=0, help="With --network sim: seed of placement and ECMP's hash.")
]
SimSeedsOpt = Annotated[
    int | None,
    typer.Option(
        "--fabric-seeds",
        min=1,
        max=100,
        help="With --network sim: seeds --fabric-seed.. where a seed draws the answer (random placement, a hash): "
        "each kind's median factor, with min-max (default 5 then, else 1).",
    ),
]
SimHostsOpt = HostsOpt  # fabric simulate's option (with --network sim only)
BackgroundOpt = Annotated[
    str | None,
    typer.Option(
        "--background",
        metavar="SHARE[:PATTERN]",
        help="With --network sim (and in fabric step): other tenants' traffic on the fabric's other hosts (the "
        "cluster's, or --fabric-hosts, less the job's), a steady PATTERN (permutation, default; shift, incast, "
        "all-to-all) rate-limited to SHARE (0-0.99) of each of their NICs, sharing the links max-min fairly with "
        "the job's flows, e.g. 0.5 or 0.5:all-to-all.",
    ),
]


def fabric_placement(
    placement: str | None,
    routing: str | None,
    oversubscription: float | None,
    seed: int | None,
    fabric_hosts: int | None,
    seeds: int | None = None,
    background: str | None = None,
    network: str = "sim",
) -> "FabricPlacement | None":
    """Where the job sits on the simulated fabric and the other tenants' traffic there (None: no option
    given; ``run_training`` refuses the placement options without ``--network sim``, this --background)."""
    from clustersim.cli.fabric_options import parse_routing
    from clustersim.network.flowsim.cluster import parse_placement
    from clustersim.training.background import parse_background
    from clustersim.training.contention import FabricPlacement

    if background is not None and network != "sim":
        raise ClusterSimError(
            f"--background {background}: other tenants' traffic runs on the simulated fabric; it needs --network sim",
            field="--background",
            value=background,
        )
    if all(v is None for v in (placement, routing, oversubscription, seed, fabric_hosts, seeds, background)):
        return None
    if placement is not None:
        parse_placement(placement)
    return FabricPlacement(
        placement=placement or "packed",
        routing=None if routing is None else parse_routing(routing),
        oversubscription=oversubscription,
        seed=seed or 0,
        seeds=seeds,
        fabric_hosts=fabric_hosts,
        background=None if background is None else parse_background(background),
    )


def checkpoint_spec(
    storage: str | None, every: str | None, async_save: bool, rate: str | None, nvme: bool = False
) -> "CheckpointSpec | None":
    """The checkpoint policy the options give; its options without --storage are refused, by name."""
    from clustersim.scenario.schema import CheckpointSpec

    if async_save and nvme:
        raise ClusterSimError(
            "--async-checkpoint and --nvme-checkpoint: choose one way to take the save off the critical path",
            field="--nvme-checkpoint",
        )
    if storage is None:
        given = (("--checkpoint-every", every), ("--async-checkpoint", async_save), ("--nvme-checkpoint", nvme),
                 ("--failure-rate", rate))  # fmt: skip
        orphans = [flag for flag, value in given if value]
        if orphans:
            raise ClusterSimError(
                f"{', '.join(orphans)} need --storage (where checkpoints go), e.g. "
                f"--storage fsx:PERSISTENT_2-1000:100800GiB",
                field=orphans[0],
            )
        return None
    flags = {"storage": "--storage", "every": "--checkpoint-every", "failure_rate": "--failure-rate"}
    with option_errors(flags):
        return CheckpointSpec(
            storage=storage, every=every or "auto", async_save=async_save, nvme=nvme, failure_rate=rate or "llama3"
        )


def compared_instances(given: list[str]) -> list[str]:
    """The --compare instances: repeated options and comma lists, in order, each once."""
    names = [name.strip() for item in given for name in item.split(",")]
    if any(not name for name in names):
        raise ClusterSimError(
            f"--compare: an empty instance name in {', '.join(given)!r} (give ids such as p6-b200.48xlarge, "
            "repeated or comma-separated)",
            field="--compare",
            value=",".join(given),
        )
    return list(dict.fromkeys(names))

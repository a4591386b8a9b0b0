"""Contention that reaches the step estimate: the step's groups simulated on the cluster's fabric.

``train --network sim`` lays the job out as the analytic model would, then runs one step's TP, CP, EP, PP
and DP collectives on the fat-tree the job sits in (``training.fabric_step.step_on_fabric``: the
catalog's cluster, its oversubscription unless given, the job's hosts placed packed, spread or at random,
ECMP hashing or spraying), each kind on its own groups, all of that kind's groups at once. A kind's factor
is its simulated time there over its simulated time with the job packed on a sprayed, non-blocking fabric,
the case the analytic model describes: the simulator's own differences from the analytic model cancel,
what placement, routing and oversubscription cost remains, and the reference case gives the analytic
answer exactly. The estimate is then made again with every collective of that shape (operation, ranks,
stride) priced at the analytic time times its kind's factor, so the exposed part of each kind's
communication, and only that, grows. Kinds are not run against each other: in a step they mostly take
turns (a reduce-scatter, then the all-gather), and ``fabric step`` shows the worst case of all at once.

With other tenants' traffic (``FabricPlacement.background``, ``training.background``) each kind runs with
it on the fabric's other hosts; its factor is then its time there over the same reference (no
background), and the factors without it (same fabric, placement and seeds) are kept beside (``Loaded``).

Routing by default is the instance's: EFA sprays each message over many paths (SRD, the catalog's ``srd``
transport: multipath), InfiniBand and RoCE hash each flow onto one (the catalog's ``ib-rc`` and ``rocev2``:
one path per queue pair) unless adaptive routing is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from clustersim.catalog.registry import Catalog
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import SoftwareProfile
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.network.collectives import Algorithm, Op
from clustersim.network.collectives import Protocol as NcclProtocol
from clustersim.network.cost import ANALYTIC, CollectiveCost, CollectiveTable
from clustersim.network.fabric import Fabric
from clustersim.system import System
from clustersim.training.background import Background, refuse_no_other_hosts
from clustersim.training.job import TrainingJob
from clustersim.workload.transformer import Transformer

if TYPE_CHECKING:
    from clustersim.network.flowsim.engine import Flows

FloatArray = npt.NDArray[np.float64]
SPRAYING_ADAPTERS = ("efa",)  # adapter ids (prefixes) whose transport sprays: SRD
DEFAULT_SEEDS = 5  # seeds run where one draws the answer (random placement, a hash), unless given


@dataclass(frozen=True)
class Drawn:
    """Each kind's factor: the median over the seeds run, and (several seeds) its min and max."""

    factors: dict[str, float]
    spread: dict[str, tuple[float, float]] | None
    seeds: tuple[int, ...]
    loaded: Loaded | None = None  # with other tenants' traffic: the background and the factors without it


@dataclass(frozen=True)
class Loaded:
    """Other tenants' traffic the step ran with: the background, its hosts, each kind's factor without it."""

    background: Background
    hosts: int  # the fabric's hosts that are not the job's: where the background runs
    unloaded: dict[str, float]  # kind -> median factor with no background (same fabric, placement, seeds)
    unloaded_spread: dict[str, tuple[float, float]] | None = None

    def describe(self) -> str:
        kinds = ", ".join(f"{kind} x{factor:.2f}" for kind, factor in self.unloaded.items())
        return (
            f"background: {self.background.describe()}, {self.hosts:,} hosts; without it {kinds} "
            f"(the factors above are with it)"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            **self.background.to_dict(),
            "hosts": self.hosts,
            "factors_without": dict(self.unloaded),
            "spread_without": None
            if self.unloaded_spread is None
            else {k: {"min": lo, "max": hi} for k, (lo, hi) in self.unloaded_spread.items()},
        }


@dataclass(frozen=True)
class FabricPlacement:
    """Where the job sits on the cluster's fabric and how its flows are routed (``fabric step``'s options)."""

    placement: str = "packed"
    routing: str | None = None  # None: the instance's (``default_routing``)
    oversubscription: float | None = None  # None: the cluster's
    seed: int = 0
    seeds: int | None = None  # seeds seed.. seed + seeds - 1 where the seed draws the answer (None: 5 then, else 1)
    fabric_hosts: int | None = None  # None: the cluster's
    radix: int = 64
    max_events: float | None = None  # the work bound (None: the default)
    background: Background | None = None  # other tenants' traffic on the fabric's other hosts (None: none)


@dataclass(frozen=True)
class Contention:
    """What the job's place on the fabric costs the step: per kind, the factor on the analytic time."""

    placement: str
    routing: str
    oversubscription: float
    seed: int
    factors: dict[str, float]  # kind -> simulated where placed / simulated packed, sprayed, non-blocking
    analytic_step_s: float
    step_s: float
    spread: dict[str, tuple[float, float]] | None = None  # kind -> min, max factor over the seeds (None: one)
    seeds: tuple[int, ...] = (0,)
    loaded: Loaded | None = None  # the other tenants' traffic the factors are with (None: none)

    @property
    def added_fraction(self) -> float:
        """How much longer the step is for contention (0: none)."""
        return self.step_s / self.analytic_step_s - 1.0

    def describe(self) -> str:
        """One line: the fabric the flows ran on and what contention cost."""
        ranges = self.spread or {}
        kinds = ", ".join(
            f"{kind} x{factor:.2f}" + (f" ({ranges[kind][0]:.2f}-{ranges[kind][1]:.2f})" if kind in ranges else "")
            for kind, factor in self.factors.items()
        )
        drawn = f"seed {self.seed}" if len(self.seeds) == 1 else f"median of seeds {self.seeds[0]}-{self.seeds[-1]}"
        return (
            f"network: the flow simulator ran the step's groups on the fabric ({self.placement} placement, {drawn}, "
            f"{self.routing}, {self.oversubscription:g}:1 leaf-to-spine) against packed, sprayed and "
            f"non-blocking: contention adds "
            f"{100 * self.added_fraction:.1f}% to the step ({self.analytic_step_s:.4g} s analytic -> "
            f"{self.step_s:.4g} s; {kinds})" + ("" if self.loaded is None else f"; {self.loaded.describe()}")
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "model": "sim",
            "placement": self.placement,
            "routing": self.routing,
            "oversubscription": self.oversubscription,
            "seed": self.seed,
            "seeds": list(self.seeds),
            "factors": dict(self.factors),
            "spread": None
            if self.spread is None
            else {k: {"min": lo, "max": hi} for k, (lo, hi) in self.spread.items()},
            "analytic_step_s": self.analytic_step_s,
            "step_s": self.step_s,
            "added_fraction": self.added_fraction,
            "background": None if self.loaded is None else self.loaded.to_dict(),
        }


@dataclass(frozen=True)
class ContendedCost:
    """The analytic model with each group shape's time scaled by its kind's contention factor."""

    factors: dict[tuple[Op, Fabric], float]
    base: CollectiveCost = ANALYTIC
    name: str = "sim"

    def time_s(self, op: Op, size_bytes: npt.ArrayLike, fabric: Fabric) -> FloatArray:
        return np.asarray(self.base.time_s(op, size_bytes, fabric) * self.factors.get((op, fabric), 1.0))

    def table(
        self,
        op: Op,
        size_bytes: npt.ArrayLike,
        fabric: Fabric,
        *,
        algorithm: Algorithm | None = None,
        protocol: NcclProtocol | None = None,
    ) -> CollectiveTable:
        return self.base.table(op, size_bytes, fabric, algorithm=algorithm, protocol=protocol)


def default_routing(system: System) -> str:
    """``spray`` where the instance's adapter runs SRD (EFA), ``ecmp`` elsewhere (one path per flow)."""
    instance = system.instance
    adapter = instance.network.adapter if instance is not None and instance.network is not None else ""
    return "spray" if str(adapter).startswith(SPRAYING_ADAPTERS) else "ecmp"


def contention_factors(
    model: Transformer,
    system: System,
    layout: Layout,
    job: TrainingJob,
    catalog: Catalog,
    where: FabricPlacement,
    *,
    software: SoftwareProfile | None = None,
    efficiency: FamilyEfficiency | None = None,
) -> tuple[ContendedCost, Drawn, str, float]:
    """Simulate one step's groups where ``where`` puts the job and, unless that is already so, packed, sprayed
    and non-blocking: the cost model carrying each kind's factor (its time there over its time in the
    reference), the factors by kind, the routing that ran and the leaf-to-spine oversubscription."""
    from clustersim.network.flowsim.cluster import fat_tree_for_instance, parse_placement, place
    from clustersim.network.flowsim.patterns import Pattern
    from clustersim.network.flowsim.routing import Routing
    from clustersim.network.flowsim.work import estimate_flows
    from clustersim.network.work import check_work
    from clustersim.training.fabric_step import step_collectives, step_on_fabric

    if system.instance is None:
        raise ClusterSimError(
            "--network sim needs a catalogued instance: the fabric is the instance's cluster", field="network"
        )
    routing = Routing(where.routing or default_routing(system))
    nodes = system.num_nodes
    collectives = step_collectives(model, system, layout, job, software=software, efficiency=efficiency)
    if not collectives:
        return ContendedCost({}), Drawn({}, None, (where.seed,)), routing.value, 1.0
    instance = system.instance.id

    def bounded(flows: Flows) -> None:
        what = f"one training step's groups on {nodes:,} nodes"
        check_work(estimate_flows(flows, what=what, runs=2), where.max_events)

    fabric_hosts: list[int] = []  # the fabric's size, as built

    def alone_s(
        placement: str, route: Routing, oversubscription: float | None, seed: int, background: Background | None = None
    ) -> tuple[dict[str, float], float]:
        """Each kind's simulated time alone on the job's hosts (with ``background`` on the others), and the
        fabric's oversubscription."""
        tree = fat_tree_for_instance(
            catalog, instance, nodes, fabric_hosts=where.fabric_hosts, radix=where.radix,
            oversubscription=oversubscription, topology=system.topology,
        )  # fmt: skip
        hosts = place(tree, nodes, parse_placement(placement), seed)
        step = step_on_fabric(
            collectives, tree, hosts, layout=layout, title=model.name, routing=route, seed=seed,
            before_run=bounded, background=background,
        )  # fmt: skip
        fabric_hosts.append(tree.spec.num_hosts)
        return {k.collective.kind: k.time_s for k in step.kinds}, float(tree.spec.oversubscription)

    given = where.background
    background = given if given is not None and given.active else None
    hashed = where.placement == "random" or routing in (Routing.ECMP, Routing.FLOWLET)  # what a seed decides
    drawn = hashed or (background is not None and background.pattern is Pattern.PERMUTATION)
    seeds = list(range(where.seed, where.seed + (where.seeds or DEFAULT_SEEDS))) if drawn else [where.seed]
    runs = [
        alone_s(where.placement, routing, where.oversubscription, seed) for seed in (seeds if hashed else seeds[:1])
    ]
    runs = runs if hashed else runs * len(seeds)  # the same answer for every seed the background draws
    oversubscription = runs[0][1]
    reference = (where.placement == "packed", routing is Routing.SPRAY, oversubscription == 1.0)
    base = runs[0][0] if all(reference) else alone_s("packed", Routing.SPRAY, 1.0, where.seed)[0]

    def factors(found: list[tuple[dict[str, float], float]]) -> dict[str, list[float]]:
        return {c.kind: [t[c.kind] / base[c.kind] if base[c.kind] > 0 else 1.0 for t, _ in found] for c in collectives}

    by_seed = factors(runs)
    loaded = None
    if given is not None:
        hosts = fabric_hosts[0] - nodes
        if hosts == 0:
            refuse_no_other_hosts(fabric_hosts[0])
        unloaded = by_seed
        if background is not None:
            by_seed = factors([alone_s(where.placement, routing, where.oversubscription, s, background) for s in seeds])
        loaded = Loaded(given, hosts, {k: float(np.median(v)) for k, v in unloaded.items()}, _spread(unloaded))
    by_kind = {kind: float(np.median(values)) for kind, values in by_seed.items()}
    by_shape: dict[tuple[Op, Fabric], float] = {}
    for c in collectives:
        ranks = 2 if c.op is Op.SENDRECV else int(c.groups.shape[1])
        fabric = system.group_fabric(ranks, c.stride)
        if fabric is not None:
            by_shape[(c.op, fabric)] = max(by_kind[c.kind], by_shape.get((c.op, fabric), 0.0))
    drawn_factors = Drawn(by_kind, _spread(by_seed), tuple(seeds), loaded)
    return ContendedCost(by_shape), drawn_factors, routing.value, oversubscription


def _spread(by_seed: dict[str, list[float]]) -> dict[str, tuple[float, float]] | None:
    """Each kind's min and max over the seeds (None: one seed)."""
    several = any(len(v) > 1 for v in by_seed.values())
    return {kind: (min(v), max(v)) for kind, v in by_seed.items()} if several else None

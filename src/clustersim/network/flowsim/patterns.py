"""Point-to-point traffic patterns over the GPUs of a job's hosts, the classic fabric stress tests,
and what one does on the fat-tree against the bound of a non-blocking fabric.

* ``permutation``: every GPU sends to one other and receives from one, a seeded uniform derangement;
* ``shift``: GPU ``i`` sends to GPU ``i + k x gpus_per_host`` (job order, wrapping): host ``h`` to
  host ``h + k``, every GPU on its own rail, the fat-tree's worst case under ECMP hashing;
* ``incast``: ``N`` senders, spread over the hosts, to one receiver GPU (the job's first);
* ``all_to_all``: every GPU to every other at once, independent flows (no rounds, unlike the
  collective's pairwise exchange).

The ideal is the endpoint bound (``endpoint_bound_s``): the busiest NIC port or scale-up port's
bytes over its bandwidth, what a non-blocking fabric gives at best. The simulator lands a flow
between hosts on the *sender's* rails of the receiving host (rail-local, ``routing``), so senders on
the receiver's own rail load its NICs; the others load their rails of the receiver's host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.network.flowsim.engine import Flows, independent, route_flows, run
from clustersim.network.flowsim.failover import pxn_flows
from clustersim.network.flowsim.results import LinkReport, link_report
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTree, FloatArray, IntArray

MAX_PATTERN_FLOWS = 1 << 21  # about 2 million flows: an all-to-all of 1,448 GPUs


class Pattern(StrEnum):
    """Which point-to-point pattern."""

    PERMUTATION = "permutation"
    SHIFT = "shift"
    INCAST = "incast"
    ALL_TO_ALL = "all_to_all"


def parse_pattern(name: str) -> Pattern:
    """``name`` as a ``Pattern`` (``all-to-all`` and ``alltoall`` too), or an error naming the valid ones."""
    key = name.strip().lower().replace("-", "_")
    key = "all_to_all" if key == "alltoall" else key
    if key not in {p.value for p in Pattern}:
        raise UnknownNameError("pattern", name, [p.value for p in Pattern])
    return Pattern(key)


@dataclass(frozen=True, slots=True, eq=False)
class PatternFlows:
    """A pattern's flows (all released at 0) and a one-line description of them."""

    pattern: Pattern
    flows: Flows
    description: str


def job_gpus(tree: FatTree, hosts: IntArray) -> IntArray:
    """Global GPU numbers of ``hosts``, host by host (the job's GPU order)."""
    g = tree.spec.gpus_per_host
    return (np.asarray(hosts, dtype=np.int64)[:, None] * g + np.arange(g, dtype=np.int64)[None, :]).reshape(-1)


def permutation(tree: FatTree, hosts: IntArray, size_bytes: float, seed: int = 0) -> PatternFlows:
    """Each GPU sends ``size_bytes`` to one other GPU and receives from one: a uniform random
    derangement of the job's GPUs (rejection sampling, seeded)."""
    gpus = job_gpus(tree, hosts)
    n = gpus.size
    if n < 2:
        raise ClusterSimError(f"a permutation needs at least 2 GPUs, the job has {n}", field="nodes", value=n)
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n)
        if not np.any(order == np.arange(n)):
            break
    flows = _flows(gpus, gpus[order], size_bytes)
    return PatternFlows(Pattern.PERMUTATION, flows, f"random derangement of {n} GPUs (seed {seed})")


def shift(tree: FatTree, hosts: IntArray, size_bytes: float, k: int = 1) -> PatternFlows:
    """GPU ``i`` sends ``size_bytes`` to GPU ``i + k x gpus_per_host`` of the job (wrapping): host ``h``
    to host ``h + k``, GPU to the same GPU index, so every flow stays on its rail."""
    num_hosts = int(np.size(hosts))
    if num_hosts < 2:
        raise ClusterSimError(
            f"a shift needs at least 2 hosts, the job has {num_hosts}", field="nodes", value=num_hosts
        )
    if not 1 <= k < num_hosts:
        raise ClusterSimError(
            f"shift must be between 1 and {num_hosts - 1} (the job's hosts - 1), got {k}", field="shift", value=k
        )
    gpus = job_gpus(tree, hosts)
    step = k * tree.spec.gpus_per_host
    flows = _flows(gpus, np.roll(gpus, -step), size_bytes)
    return PatternFlows(Pattern.SHIFT, flows, f"shift by {k} hosts: host h -> host h+{k}, GPU to GPU")


def incast(tree: FatTree, hosts: IntArray, size_bytes: float, senders: int | None = None) -> PatternFlows:
    """``senders`` GPUs (default one per other host) each send ``size_bytes`` to the job's first GPU.
    Senders are spread over the hosts: the receiver's GPU index on every other host first (its
    rail), then the next index, and so on; the receiver's own host's GPUs (over NVLink) last."""
    gpus = job_gpus(tree, hosts)
    g, num_hosts = tree.spec.gpus_per_host, int(np.size(hosts))
    n = max(num_hosts - 1, 1) if senders is None else senders
    if not 1 <= n <= gpus.size - 1:
        raise ClusterSimError(
            f"senders must be between 1 and {gpus.size - 1} (the job's GPUs but the receiver), got {n}",
            field="senders",
            value=n,
        )
    remote = gpus.reshape(num_hosts, g)[1:].T.reshape(-1)  # GPU index by GPU index, host by host
    src = np.concatenate([remote, gpus[1:g]])[:n]  # the receiver's own host last
    flows = _flows(src, np.full(n, gpus[0]), size_bytes)
    return PatternFlows(Pattern.INCAST, flows, f"incast: {n} sender{'s' if n != 1 else ''} to GPU {int(gpus[0])}")


def all_to_all(tree: FatTree, hosts: IntArray, size_bytes: float) -> PatternFlows:
    """Every GPU sends ``size_bytes`` to every other at once: ``n (n - 1)`` independent flows."""
    gpus = job_gpus(tree, hosts)
    n = gpus.size
    if n < 2:
        raise ClusterSimError(f"an all-to-all needs at least 2 GPUs, the job has {n}", field="nodes", value=n)
    _check_count(n * (n - 1))
    src, dst = np.meshgrid(gpus, gpus, indexing="ij")
    off = ~np.eye(n, dtype=bool)
    flows = _flows(src[off], dst[off], size_bytes)
    return PatternFlows(Pattern.ALL_TO_ALL, flows, f"all-to-all of {n} GPUs: {n * (n - 1):,} flows at once")


def pattern_flows(
    tree: FatTree,
    hosts: IntArray,
    pattern: Pattern,
    size_bytes: float,
    *,
    seed: int = 0,
    senders: int | None = None,
    k: int | None = None,
) -> PatternFlows:
    """The flows of ``pattern``; ``senders`` only for incast, ``k`` only for shift (refused elsewhere)."""
    if senders is not None and pattern is not Pattern.INCAST:
        raise ClusterSimError(
            f"senders applies to the incast pattern only, not {pattern.value}", field="senders", value=senders
        )
    if k is not None and pattern is not Pattern.SHIFT:
        raise ClusterSimError(f"shift applies to the shift pattern only, not {pattern.value}", field="shift", value=k)
    if pattern is Pattern.PERMUTATION:
        return permutation(tree, hosts, size_bytes, seed)
    if pattern is Pattern.SHIFT:
        return shift(tree, hosts, size_bytes, 1 if k is None else k)
    if pattern is Pattern.INCAST:
        return incast(tree, hosts, size_bytes, senders)
    return all_to_all(tree, hosts, size_bytes)


def endpoint_bound_s(tree: FatTree, flows: Flows) -> float:
    """The time a non-blocking fabric needs at best: the busiest NIC port (each direction, a flow
    striped over the sender GPU's rails at both hosts) or GPU scale-up port, bytes over bandwidth."""
    spec = tree.spec
    g, r = spec.gpus_per_host, spec.nics_per_host
    src, dst, size = flows.src_gpu, flows.dst_gpu, flows.size_bytes
    local = src // g == dst // g
    num_gpus = spec.num_hosts * g
    scaleup = max(
        np.bincount(src[local], weights=size[local], minlength=num_gpus).max(initial=0.0),
        np.bincount(dst[local], weights=size[local], minlength=num_gpus).max(initial=0.0),
    )
    rails = tree.nic_rails(src[~local] % g)  # (flows, rails per GPU)
    share = np.repeat(size[~local] / rails.shape[1], rails.shape[1])
    up = (src[~local] // g * r)[:, None] + rails
    down = (dst[~local] // g * r)[:, None] + rails
    nic = max(
        np.bincount(up.reshape(-1), weights=share, minlength=tree.num_nics).max(initial=0.0),
        np.bincount(down.reshape(-1), weights=share, minlength=tree.num_nics).max(initial=0.0),
    )
    return float(max(scaleup / spec.scaleup_bytes_per_s, nic / spec.nic_bytes_per_s))


@dataclass(frozen=True, slots=True, eq=False)
class PatternResult:
    """A simulated pattern: per-flow completion against the non-blocking bound, and the links."""

    pattern: Pattern
    description: str
    routing: Routing
    num_nodes: int
    num_gpus: int
    size_bytes: float
    num_flows: int
    time_s: float  # the last flow's arrival
    p50_s: float
    p99_s: float
    ideal_s: float  # endpoint bound (``endpoint_bound_s``)
    total_bytes: float
    flow_end_s: FloatArray  # per flow of the pattern
    links: LinkReport
    num_events: int
    wall_s: float

    @property
    def slowdown(self) -> float:
        """The last flow's time over the non-blocking bound (1: the fabric costs nothing)."""
        return self.time_s / self.ideal_s

    @property
    def throughput_bytes_per_s(self) -> float:
        """All the pattern's bytes over its time."""
        return self.total_bytes / self.time_s

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (no wall-clock figures, so the same seed gives the same bytes)."""
        return {
            "pattern": self.pattern.value,
            "description": self.description,
            "routing": self.routing.value,
            "num_nodes": self.num_nodes,
            "num_gpus": self.num_gpus,
            "size_bytes": self.size_bytes,
            "num_flows": self.num_flows,
            "time_s": self.time_s,
            "p50_s": self.p50_s,
            "p99_s": self.p99_s,
            "ideal_s": self.ideal_s,
            "slowdown": self.slowdown,
            "throughput_bytes_per_s": self.throughput_bytes_per_s,
            "max_link_utilization": self.links.max_link_utilization,
            "tier_utilization": self.links.tier_utilization,
            "hottest_links": [{"link": name, "utilization": u} for name, u in self.links.hottest_links],
            "binding_tier": self.links.binding_tier,
            "num_events": self.num_events,
        }


def simulate_pattern(
    tree: FatTree,
    hosts: IntArray,
    plan: PatternFlows,
    *,
    routing: Routing = Routing.SPRAY,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> PatternResult:
    """Run ``plan`` on ``tree`` (GPUs whose rails are down send through a peer's, NCCL's PXN)."""
    began = time.perf_counter()
    ideal = endpoint_bound_s(tree, plan.flows)
    flows = pxn_flows(tree, plan.flows)  # the pattern's flows keep their indices; NVLink legs follow
    times = run(tree, flows, route_flows(tree, flows, routing, seed), began=began, progress=progress)
    n = plan.flows.num_flows
    ends = times.end_s[:n]
    return PatternResult(
        pattern=plan.pattern,
        description=plan.description,
        routing=routing,
        num_nodes=int(np.size(hosts)),
        num_gpus=int(np.size(hosts)) * tree.spec.gpus_per_host,
        size_bytes=float(plan.flows.size_bytes.max()),
        num_flows=n,
        time_s=times.makespan_s,
        p50_s=float(np.percentile(ends, 50)),
        p99_s=float(np.percentile(ends, 99)),
        ideal_s=ideal,
        total_bytes=float(plan.flows.size_bytes.sum()),
        flow_end_s=ends,
        links=link_report(tree, times),
        num_events=times.num_events,
        wall_s=times.wall_s,
    )


def _check_count(num_flows: int) -> None:
    if num_flows > MAX_PATTERN_FLOWS:
        raise ClusterSimError(
            f"the pattern has {num_flows:,} flows, more than {MAX_PATTERN_FLOWS:,}: use fewer nodes",
            field="nodes",
            value=num_flows,
        )


def _flows(src: IntArray, dst: IntArray, size_bytes: float) -> Flows:
    if not (np.isfinite(size_bytes) and size_bytes > 0):
        raise ClusterSimError(f"size must be positive, got {size_bytes!r}", field="size_bytes", value=size_bytes)
    return independent(src, dst, np.full(np.size(src), float(size_bytes)))

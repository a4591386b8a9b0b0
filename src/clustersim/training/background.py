"""Other tenants' traffic on the fabric a job's step runs on (``--background SHARE[:PATTERN]``).

The fabric's hosts that the job does not use (all of the cluster's, or ``--fabric-hosts``) run a steady
point-to-point pattern among themselves (``network.flowsim.patterns``: a random permutation of their
GPUs by default, or shift, incast, all-to-all), rate-limited at their NICs: each of those hosts' NIC
uplinks carries at most ``share`` of its line rate (on calibrated links, of its achieved rate), so a
tenant keeps up to that share of its NIC bandwidth busy and no more, as a shaped or paced sender would.
Where the fabric is congested (an oversubscribed spine, hash collisions) the background's flows share
the links max-min fairly with the job's, as TCP, SRD or RC flows of one priority class do. Flows
between two GPUs of one host (over its scale-up fabric) are dropped: they load no network link.

Every background flow starts with the job's and is sized to outlast the job's flows (its share of the
NIC for ``horizon_s`` seconds; ``step_on_fabric`` lengthens the horizon until it does), so the job
sees the load for its whole run. A pipelined collective's remaining pieces go at the pace of the busiest
resource it shares (``results.collective_time_s``): there the background's bytes are counted for the
job's window only (``window_bytes``): each flow's bytes pro rata to the part of its life in the window
(an upper bound, as a tenant sharing links with the job goes faster once the job is done), no resource
carrying more than its capacity over the window.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.engine import Flows, FlowTimes, route_flows, run
from clustersim.network.flowsim.groups import concatenate
from clustersim.network.flowsim.patterns import MAX_PATTERN_FLOWS, Pattern, parse_pattern, pattern_flows
from clustersim.network.flowsim.routing import Incidence, Routing
from clustersim.network.flowsim.topology import BoolArray, FatTree, FloatArray, IntArray

MAX_HORIZON_TRIES = 8  # doublings of the horizon before the background is taken as outlasting the job
MAX_SHARE = 0.99  # a NIC fully busy with other traffic would leave its host nothing: refused


@dataclass(frozen=True)
class Background:
    """Other tenants' steady traffic: ``share`` of each other host's NIC bandwidth, in ``pattern``."""

    share: float
    pattern: Pattern = Pattern.PERMUTATION

    @property
    def active(self) -> bool:
        return self.share > 0.0

    def describe(self) -> str:
        return f"{self.share:g} of the other hosts' NICs busy ({self.pattern.value.replace('_', '-')})"

    def to_dict(self) -> dict[str, object]:
        return {"share": self.share, "pattern": self.pattern.value}


def parse_background(text: str) -> Background:
    """``SHARE[:PATTERN]`` (e.g. ``0.5`` or ``0.5:all-to-all``), or one line naming what is wrong."""
    share_text, _, pattern_text = text.strip().partition(":")
    try:
        share = float(share_text)
    except ValueError:
        share = float("nan")
    if not 0.0 <= share <= MAX_SHARE:
        raise ClusterSimError(
            f"--background: share {share_text!r} must be a number from 0 to {MAX_SHARE} (the fraction of each other "
            f"host's NIC bandwidth its traffic keeps busy), as SHARE[:PATTERN], e.g. 0.5 or 0.5:permutation",
            field="--background",
            value=text,
        )
    if not pattern_text:
        return Background(share)
    try:
        pattern = parse_pattern(pattern_text)
    except ClusterSimError:
        valid = ", ".join(p.value.replace("_", "-") for p in Pattern)
        raise ClusterSimError(
            f"--background: unknown pattern {pattern_text!r} (valid: {valid})", field="--background", value=text
        ) from None
    return Background(share, pattern)


def other_hosts(tree: FatTree, hosts: IntArray) -> IntArray:
    """The fabric's hosts the job does not use (refused when there are none)."""
    others = np.setdiff1d(np.arange(tree.spec.num_hosts, dtype=np.int64), np.asarray(hosts, dtype=np.int64))
    if others.size == 0:
        refuse_no_other_hosts(tree.spec.num_hosts)
    return others


def refuse_no_other_hosts(num_hosts: int) -> NoReturn:
    """The refusal of a background on a fabric of the job's hosts only."""
    raise ClusterSimError(
        f"--background: the fabric's {num_hosts} hosts are all the job's, so no other tenant has a host; give "
        f"--fabric-hosts above {num_hosts} (or leave it at the cluster's size)",
        field="--background",
        value=num_hosts,
    )


def limited(tree: FatTree, others: IntArray, share: float) -> FatTree:
    """``tree`` with the NIC uplinks of ``others`` at ``share`` of their capacity (the tenants' rate limit)."""
    r = tree.spec.nics_per_host
    nics = (others[:, None] * r + np.arange(r, dtype=np.int64)[None, :]).reshape(-1)
    cap = tree.capacity_bytes_per_s.copy()
    cap[tree.nic_up0 + nics] *= share
    return dataclasses.replace(tree, capacity_bytes_per_s=cap)


def background_flows(
    tree: FatTree, others: IntArray, background: Background, horizon_s: float, seed: int, group: int
) -> Flows:
    """The tenants' flows between ``others``' GPUs: each GPU's flows together carry its share of its
    NICs' bandwidth (``tree``'s, before the limit) for ``horizon_s``; intra-host flows dropped; ``group``
    labels them all (adaptive routing balances them apart from the job's)."""
    spec = tree.spec
    gpus = int(others.size) * spec.gpus_per_host
    if background.pattern is Pattern.ALL_TO_ALL and gpus * (gpus - 1) > MAX_PATTERN_FLOWS:
        raise ClusterSimError(
            f"--background: an all-to-all of the {others.size:,} other hosts' {gpus:,} GPUs is "
            f"{gpus * (gpus - 1):,} flows, more than {MAX_PATTERN_FLOWS:,}: give --fabric-hosts (fewer tenants' "
            "hosts) or another pattern",
            field="--background",
            value=background.pattern.value,
        )
    plan = pattern_flows(tree, others, background.pattern, 1.0, seed=seed).flows
    g = spec.gpus_per_host
    crossing = plan.src_gpu // g != plan.dst_gpu // g
    if not crossing.any():
        raise ClusterSimError(
            f"--background: the {background.pattern.value} pattern over {others.size} other host(s) sends nothing "
            f"between hosts; give more hosts (--fabric-hosts) or another pattern",
            field="--background",
            value=background.pattern.value,
        )
    src, dst = plan.src_gpu[crossing], plan.dst_gpu[crossing]
    per_gpu_bytes = background.share * spec.nics_per_host * spec.nic_bytes_per_s / g * horizon_s
    fan_out = np.bincount(src, minlength=int(src.max()) + 1)[src]
    n = src.size
    return Flows(
        src_gpu=src,
        dst_gpu=dst,
        size_bytes=per_gpu_bytes / fan_out.astype(np.float64),
        start_at_s=np.zeros(n),
        dep_ptr=np.zeros(n + 1, dtype=np.int64),
        dep_idx=np.zeros(0, dtype=np.int64),
        group=np.full(n, group, dtype=np.int64),
    )


def outlasted(times: FlowTimes, num_job_flows: int) -> bool:
    """Whether every background flow (those after the job's first ``num_job_flows``) was still sending
    when the job's last flow ended."""
    job_end = float(np.max(times.end_s[:num_job_flows]))
    return bool(np.min(times.tx_end_s[num_job_flows:]) >= job_end)


def window_bytes(
    times: FlowTimes, inc: Incidence, flows: Flows, num_job_flows: int, capacity_bytes_per_s: FloatArray
) -> FlowTimes:
    """The job's flows' times (the first ``num_job_flows``), each resource's bytes those of the job's
    window: the job's flows in full, each background flow's pro rata to its life before the job ended,
    at most the resource's capacity over the window."""
    job_end = float(np.max(times.end_s[:num_job_flows]))
    life = np.maximum(times.tx_end_s - times.start_s, 1e-300)
    part: FloatArray = np.clip((job_end - times.start_s) / life, 0.0, 1.0)
    part[:num_job_flows] = 1.0
    carried = inc.weight * (flows.size_bytes * part)[inc.flow]
    resource_bytes = np.bincount(inc.resource, weights=carried, minlength=times.resource_bytes.size)
    resource_bytes = np.minimum(resource_bytes, np.maximum(capacity_bytes_per_s * job_end, 0.0))
    mine = slice(0, num_job_flows)
    return dataclasses.replace(
        times,
        start_s=times.start_s[mine],
        tx_end_s=times.tx_end_s[mine],
        end_s=times.end_s[mine],
        resource_bytes=resource_bytes.astype(np.float64),
    )


def first_horizon_s(tree: FatTree, flows: Flows) -> float:
    """A first guess at how long the job's flows take, generous (a longer horizon costs no more events, a
    short one a rerun): eight times the busiest GPU's bytes at its NICs' rate."""
    spec = tree.spec
    per_gpu = spec.nics_per_host * spec.nic_bytes_per_s / spec.gpus_per_host
    sent = np.bincount(flows.src_gpu, weights=flows.size_bytes)
    return 8.0 * float(sent.max()) / per_gpu


def run_loaded(
    tree: FatTree,
    flows: Flows,
    routing: Routing,
    seed: int,
    others: IntArray,
    background: Background,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[FlowTimes, Incidence]:
    """Run the job's ``flows`` on ``tree`` (``others``' NICs ``limited`` already) with the background on
    ``others`` (seeded with ``seed``, as the job's hashing is), the horizon doubled until the background
    outlasts the job: the job's flows' times (bytes on the resources: ``window_bytes``), the routes run.

    Only the background flows that cross a resource the job's flows cross are run (``sharing``): the rest
    load none of the job's links; what they would do to those flows elsewhere (slow them where they
    share a congested link) is left out, so the job sees its neighbours at their rate limit or the
    fair share of the links they share with it, never less than with every tenant simulated."""
    group = int(flows.group.max()) + 1 if flows.group.size else 0
    n = flows.num_flows
    unit = background_flows(tree, others, background, 1.0, seed, group)  # one second's bytes
    inc = route_flows(tree, concatenate([flows, unit]), routing, seed)
    keep, inc = sharing(inc, n, unit.num_flows)
    unit = _subset(unit, keep)
    if unit.num_flows == 0:  # no tenant crosses the job's links
        return run(tree, flows, inc, progress=progress), inc
    horizon_s = first_horizon_s(tree, flows) / (1.0 - background.share)
    for _ in range(MAX_HORIZON_TRIES):
        both = concatenate([flows, dataclasses.replace(unit, size_bytes=unit.size_bytes * horizon_s)])
        times = run(tree, both, inc, progress=None if progress is None else _clipped(progress, n))
        if outlasted(times, n):
            break
        horizon_s *= 2.0
    else:
        raise ClusterSimError(
            f"--background: the tenants' flows ended before the job's {MAX_HORIZON_TRIES} times over (horizon up to "
            f"{horizon_s / 2:.3g} s); the job's flows cannot finish beside them",
            field="--background",
            value=background.share,
        )
    return window_bytes(times, inc, both, n, tree.capacity_bytes_per_s), inc


def sharing(inc: Incidence, n: int, num_background: int) -> tuple[BoolArray, Incidence]:
    """Which of the ``num_background`` flows after the job's ``n`` cross a resource one of the job's
    flows crosses, and the routes of the job's flows and those, renumbered."""
    used = np.zeros(int(inc.resource.max()) + 1 if inc.resource.size else 0, dtype=bool)
    used[inc.resource[inc.flow < n]] = True
    crossing = np.zeros(n + num_background, dtype=bool)
    crossing[inc.flow[used[inc.resource]]] = True
    crossing[:n] = True
    entries = crossing[inc.flow]
    renumber = np.cumsum(crossing) - 1
    routes = Incidence(
        flow=renumber[inc.flow[entries]], resource=inc.resource[entries], weight=inc.weight[entries],
        hops=inc.hops[crossing],
    )  # fmt: skip
    return crossing[n:], routes


def _subset(flows: Flows, keep: BoolArray) -> Flows:
    """Independent ``flows`` (no dependencies) restricted to ``keep``."""
    count = int(keep.sum())
    return Flows(
        src_gpu=flows.src_gpu[keep],
        dst_gpu=flows.dst_gpu[keep],
        size_bytes=flows.size_bytes[keep],
        start_at_s=flows.start_at_s[keep],
        dep_ptr=np.zeros(count + 1, dtype=np.int64),
        dep_idx=np.zeros(0, dtype=np.int64),
        group=flows.group[keep],
    )


def _clipped(progress: Callable[[int, int], None], n: int) -> Callable[[int, int], None]:
    """``progress`` counting the job's ``n`` flows only (the background's finish after them)."""

    def report(done: int, _total: int) -> None:
        progress(min(done, n), n)

    return report

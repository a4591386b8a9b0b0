"""One training step's communication on a simulated fabric: every group of a layout placed on the GPUs
the estimator's rank order gives it, each kind of group running its collective at once (all data-
parallel groups reduce together, so they share the fabric), set against the analytic model.

Ranks are numbered as ``clustersim.system`` says (Megatron-LM's order): tensor parallel innermost,
then context, data, and pipeline parallel outermost; rank ``r`` runs on GPU ``r mod G`` of the
``r // G``-th host of the placement (``G`` GPUs per host). The groups and their messages are those
the step terms price (``clustersim.training.step``):

* ``tp``: all-reduce of one micro-batch's activations over ``tp`` consecutive ranks;
* ``cp``: all-gather of the keys and values over ``cp`` ranks ``tp`` apart;
* ``ep dispatch`` and ``ep combine``: all-to-all of the routed tokens (the dispatch in FP8 bytes
  where the precision and framework send it so) over ``ep`` ranks ``tp x cp`` apart (Megatron-Core's
  folding: ``etp`` apart when ``ep`` does not divide ``dp x cp`` or the layout states ``etp``:
  ``LayoutArrays.ep_stride``), forward and backward. Where the
  framework dispatches per node (``ep_dispatch_per_node``: DeepEP, HybridEP) and the group spans
  ``N`` nodes of ``L`` of its ranks each, as the estimator prices it: a token crosses the network
  once per remote node holding one of its experts (an all-to-all of ``network_copy_ratio`` times the
  bytes: each rank sends one flow per remote node, to its peer there, on its own rails) and fans out
  over the node's scale-up fabric (an all-to-all of ``gpu_copy_ratio`` times the bytes over the node's ``L``
  ranks: once to each GPU holding one of its experts), the two at once (pipelined): the slower of the two;
  a group on one node runs the all-to-all of ``gpu_copy_ratio`` times the bytes;
* ``pp``: every rank of stage ``s`` sends its activation shard to the same rank of stage ``s + 1``
  (interleaved, ``vp > 1``: the last stage to the first too, where the next model chunk starts);
* ``dp``: the gradients (ZeRO 0: all-reduce; 1-2: reduce-scatter, then the parameters' all-gather;
  3: per-layer gathers and scatters) over ``dp x cp`` ranks ``tp`` apart.

Each kind is simulated alone and, as a stress case, with every other kind at once. By default on the
calibrated links (``network.flowsim.nccl``: the analytic model's achieved fractions), each kind's
simulated bandwidth priced as the analytic model prices a collective (its latency and fitted Simple
ramp for the group's fabric, ``StepCollective.latency_s`` and ``ramp_half_bytes``): so packed on a
non-blocking fabric a kind costs what the estimator charges, and contention, routing and placement
show as the difference. ``ideal``: the datasheet links, no latency or ramp. The analytic times are the
``CollectiveCost``'s price of the same collective on the group's fabric (what the estimator charges)
and its link-bound term on the datasheet links (``ideal_time_s``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clustersim.catalog.schema import Dtype
from clustersim.compute.dispatch import dispatch_copy_ratios
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_for
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays, Recompute
from clustersim.network.collectives import Algorithm, Op, busbw_factor
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.network.flowsim.collectives import CollectiveFlows
from clustersim.network.flowsim.engine import Flows, FlowTimes, route_flows, run
from clustersim.network.flowsim.failover import with_pxn
from clustersim.network.flowsim.groups import concatenate, dispatch_flows, group_flows, ideal_time_s, pair_flows
from clustersim.network.flowsim.nccl import link_model, price_terms
from clustersim.network.flowsim.results import LinkReport, collective_time_s, job_times, link_report
from clustersim.network.flowsim.routing import Incidence, Routing
from clustersim.network.flowsim.topology import FatTree, FloatArray, IntArray
from clustersim.network.flowsim.work import offset
from clustersim.network.topology import ranks_per_domain
from clustersim.system import System
from clustersim.training.background import Background, limited, other_hosts, run_loaded
from clustersim.training.job import TrainingJob
from clustersim.training.pricing import collective_s
from clustersim.training.step import ACT_BYTES, StepContext
from clustersim.workload.moe import MoE
from clustersim.workload.transformer import Transformer

ALGORITHMS = {
    Op.ALL_REDUCE: Algorithm.RING,
    Op.ALL_GATHER: Algorithm.RING,
    Op.REDUCE_SCATTER: Algorithm.RING,
    Op.ALLTOALL: Algorithm.PAIRWISE,
    Op.SENDRECV: Algorithm.DIRECT,
}


@dataclass(frozen=True)
class StepCollective:
    """One kind of the step's collectives: its groups (ranks, one row per group; for ``pp`` the
    (sender, receiver) pairs), its message and how often a step runs it, and its analytic times."""

    kind: str
    op: Op
    size_bytes: float  # per rank (nccl-tests' size); per pair for ``pp``
    groups: IntArray
    stride: int  # ranks between group members, as the estimator prices the group
    per_step: float
    analytic_time_s: float
    ideal_time_s: float
    copy_ratio: float = 1.0  # per-node EP dispatch: network bytes over the plain all-to-all's
    fan_out_ranks: int = 1  # per-node EP dispatch: a node's ranks of the group the tokens fan out to
    fan_out_ratio: float = 1.0  # per-node EP dispatch: fan-out bytes over the plain all-to-all's (once per GPU)
    latency_s: float = 0.0  # the analytic model's latency of the kind's algorithm on the group's fabric
    ramp_half_bytes: float = 0.0  # and its fitted Simple ramp's half size (0: none)

    @property
    def group_ranks(self) -> int:
        return 2 if self.op is Op.SENDRECV else int(self.groups.shape[1])

    @property
    def num_groups(self) -> int:
        return int(self.groups.shape[0])


def strided_groups(num_ranks: int, size: int, stride: int, block: int) -> IntArray:
    """Groups of ``size`` ranks ``stride`` apart, each inside a block of ``block`` consecutive ranks."""
    span = size * stride
    if block % span or num_ranks % block:
        raise ClusterSimError(
            f"groups of {size} ranks {stride} apart do not tile blocks of {block} ranks", field="layout", value=size
        )
    ranks = np.arange(num_ranks, dtype=np.int64).reshape(num_ranks // span, size, stride)
    return ranks.transpose(0, 2, 1).reshape(-1, size)


def step_collectives(
    model: Transformer,
    system: System,
    layout: Layout,
    job: TrainingJob,
    *,
    software: SoftwareProfile | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
) -> list[StepCollective]:
    """The collectives of one step of ``layout`` (see the module docstring), with their analytic times."""
    layout.check(model, num_devices=system.num_devices, global_batch=job.global_batch, seq_len=job.seq_len)
    sw = software or software_for(None, system.accelerator.family)
    eff = efficiency or efficiency_for(system.accelerator)
    lay = LayoutArrays.of([layout])
    ctx = StepContext(model, system, eff, sw, lay, job.seq_len, job.global_batch, job.precision, cost)
    tp, cp, dp, ep, pp = layout.tp, layout.cp, layout.dp, layout.ep, layout.pp
    world, stage = system.num_devices, tp * cp * dp
    m, layers = float(ctx.micro_batches[0]), float(ctx.layers_here[0])
    act, tokens = float(ctx.act_bytes[0]), float(ctx.tokens[0])
    found: list[tuple[str, Op, float, IntArray, int, float]] = []
    if tp > 1:
        count = 4 + 2 * (layout.recompute is Recompute.FULL) + layout.sequence_parallel
        found.append(("tp", Op.ALL_REDUCE, act, strided_groups(world, tp, 1, stage), 1, m * layers * count))
    if cp > 1:
        kv = ACT_BYTES * tokens * (model.kv_width + model.kv_heads * model.value_head_dim) / tp * cp
        found.append(("cp", Op.ALL_GATHER, kv, strided_groups(world, cp, tp, stage), tp, m * layers * 3))
    if ep > 1 and model.moe is not None:
        stride = int(lay.ep_stride[0])
        elements = tokens / tp * model.moe.top_k * model.expert_input  # a latent MoE dispatches its latent
        dispatch = sw.ep_dispatch_bytes_fp8 if job.precision is Dtype.FP8 else ACT_BYTES
        groups, n = strided_groups(world, ep, stride, stage), m * layers * model.moe_layers / model.layers * 2
        found.append(("ep dispatch", Op.ALLTOALL, dispatch * elements, groups, stride, n))
        found.append(("ep combine", Op.ALLTOALL, ACT_BYTES * elements, groups, stride, n))
    if pp > 1:
        senders = np.arange(world if layout.vp > 1 else world - stage, dtype=np.int64)
        pairs = np.stack([senders, (senders + stage) % world], axis=1)
        found.append(("pp", Op.SENDRECV, act / tp, pairs, stage, m * 2 * layout.vp))
    if dp * cp > 1:
        params, grad = float(ctx.params[0]), float(ctx.grad_bytes_per_element)
        dp_groups = strided_groups(world, dp * cp, tp, stage)
        if layout.zero == 0:
            found.append(("dp", Op.ALL_REDUCE, params * grad, dp_groups, tp, 1.0))
        elif layout.zero < 3:
            found.append(("dp reduce-scatter", Op.REDUCE_SCATTER, params * grad, dp_groups, tp, 1.0))
            found.append(("dp all-gather", Op.ALL_GATHER, params * ACT_BYTES, dp_groups, tp, 1.0))
        else:
            per_layer, n = params / layers / sw.zero3_collectives_per_layer, m * layers * sw.zero3_collectives_per_layer
            found.append(("dp reduce-scatter", Op.REDUCE_SCATTER, per_layer * grad, dp_groups, tp, n))
            found.append(("dp all-gather", Op.ALL_GATHER, per_layer * ACT_BYTES, dp_groups, tp, 2 * n))
    out = []
    for kind, op, size, groups, stride, per_step in found:
        ranks = 2 if op is Op.SENDRECV else int(groups.shape[1])
        if kind.startswith("ep") and model.moe is not None:
            per_node = bool(ctx.ep_per_node[0])
            out.append(_ep_collective(kind, size, groups, stride, per_step, system, per_node, model.moe, cost))
            continue
        analytic = float(collective_s(system, cost, op, np.array([size]), ranks, stride)[0])
        ideal = _ideal_s(system, op, size, ranks, stride)
        latency, half = _price_terms(system, op, ranks, stride)
        out.append(
            StepCollective(
                kind, op, size, groups, stride, per_step, analytic, ideal, latency_s=latency, ramp_half_bytes=half
            )
        )
    return out


def _price_terms(system: System, op: Op, ranks: int, stride: int) -> tuple[float, float]:
    """The analytic model's latency and ramp half size of ``op``'s simulated algorithm (Simple) on the
    group's fabric (``nccl.price_terms``)."""
    fabric = system.group_fabric(ranks, stride)
    return (0.0, 0.0) if fabric is None else price_terms(fabric, op, ALGORITHMS[op])


def ep_dispatch_shape(system: System, per_node: bool, moe: MoE, ranks: int, stride: int) -> tuple[float, int, float]:
    """(copy ratio, fan-out ranks, fan-out ratio) of an EP group of ``ranks`` ranks ``stride`` apart as the
    estimator prices its dispatch: (1, 1, 1) for a plain all-to-all; per node (``per_node``: DeepEP, HybridEP)
    on one node, (``gpu_copy_ratio``, 1, 1); across nodes, ``network_copy_ratio`` over the group's nodes, the
    group's ranks per node and ``gpu_copy_ratio``."""
    if not per_node:
        return 1.0, 1, 1.0
    local = int(ranks_per_domain(system.scaleup_devices, stride, ranks))
    nodes = -(-ranks // local)
    network, per_gpu = (float(r) for r in dispatch_copy_ratios(moe, nodes, ranks))
    return (per_gpu, 1, 1.0) if nodes == 1 else (network, local, per_gpu)


def _ep_collective(
    kind: str,
    size: float,
    groups: IntArray,
    stride: int,
    per_step: float,
    system: System,
    per_node: bool,
    moe: MoE,
    cost: CollectiveCost,
) -> StepCollective:
    """An EP dispatch or combine priced as ``StepContext._ep_alltoall`` does: NCCL's all-to-all, or per node
    (``per_node``: DeepEP, HybridEP) the all-to-all of the copies and the fan-out over the node's ranks, the
    slower of the two."""
    ranks = int(groups.shape[1])
    ratio, fan, fan_ratio = ep_dispatch_shape(system, per_node, moe, ranks, stride)
    analytic = float(collective_s(system, cost, Op.ALLTOALL, np.array([size * ratio]), ranks, stride)[0])
    ideal = _ideal_s(system, Op.ALLTOALL, size * ratio, ranks, stride)
    if fan > 1:
        fanned = np.array([size * fan_ratio])
        analytic = max(analytic, float(collective_s(system, cost, Op.ALLTOALL, fanned, fan, stride)[0]))
        ideal = max(ideal, _ideal_s(system, Op.ALLTOALL, size * fan_ratio, fan, stride))
    latency, half = _price_terms(system, Op.ALLTOALL, ranks, stride)
    return StepCollective(
        kind,
        Op.ALLTOALL,
        size,
        groups,
        stride,
        per_step,
        analytic,
        ideal,
        copy_ratio=ratio,
        fan_out_ranks=fan,
        fan_out_ratio=fan_ratio,
        latency_s=latency,
        ramp_half_bytes=half,
    )


def _ideal_s(system: System, op: Op, size: float, ranks: int, stride: int) -> float:
    fabric = system.group_fabric(ranks, stride)
    assert fabric is not None
    return ideal_time_s(op, size, fabric, ALGORITHMS[op])


@dataclass(frozen=True)
class KindOnFabric:
    """One kind's collective simulated: alone (``time_s``, its links) and with every kind at once."""

    collective: StepCollective
    algorithm: Algorithm
    time_s: float
    together_time_s: float
    links: LinkReport
    steps_simulated: int
    steps_total: int
    link_model: str = "ideal"  # "calibrated" or "ideal" (``network.flowsim.nccl``)
    bandwidth_time_s: float = 0.0  # the simulated bandwidth term alone

    @property
    def busbw_bytes_per_s(self) -> float:
        c = self.collective
        return c.size_bytes / self.time_s * busbw_factor(c.op, c.group_ranks)

    def to_dict(self) -> dict[str, Any]:
        c = self.collective
        return {
            "kind": c.kind,
            "op": c.op.value,
            "algorithm": self.algorithm.value,
            "links": self.link_model,
            "bandwidth_time_s": self.bandwidth_time_s,
            "num_groups": c.num_groups,
            "group_ranks": c.group_ranks,
            "stride": c.stride,
            "size_bytes": c.size_bytes,
            "per_step": c.per_step,
            "time_s": self.time_s,
            "busbw_bytes_per_s": self.busbw_bytes_per_s,
            "ideal_time_s": c.ideal_time_s,
            "analytic_time_s": c.analytic_time_s,
            "sim_over_ideal": self.time_s / c.ideal_time_s,
            "sim_over_analytic": self.time_s / c.analytic_time_s,
            "together_time_s": self.together_time_s,
            "step_time_s": c.per_step * self.time_s,
            "analytic_step_time_s": c.per_step * c.analytic_time_s,
            "steps_simulated": self.steps_simulated,
            "steps_total": self.steps_total,
            "max_link_utilization": self.links.max_link_utilization,
            "tier_utilization": self.links.tier_utilization,
            "hottest_links": [{"link": name, "utilization": u} for name, u in self.links.hottest_links],
            "binding_tier": self.links.binding_tier,
        }


@dataclass(frozen=True)
class StepOnFabric:
    """Every kind of the step on the fabric, and the run with all of them at once."""

    title: str
    layout: Layout
    routing: str
    kinds: list[KindOnFabric]
    together: LinkReport
    together_makespan_s: float
    flow_end_s: FloatArray  # every flow of the run with all kinds at once
    flow_kind: IntArray  # index into ``kinds`` of each of those flows
    links: str = "ideal"  # "calibrated" or "ideal"

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "layout": self.layout.model_dump(mode="json"),
            "routing": self.routing,
            "links": self.links,
            "collectives": [k.to_dict() for k in self.kinds],
            "together": {
                "makespan_s": self.together_makespan_s,
                "max_link_utilization": self.together.max_link_utilization,
                "tier_utilization": self.together.tier_utilization,
                "hottest_links": [{"link": name, "utilization": u} for name, u in self.together.hottest_links],
                "binding_tier": self.together.binding_tier,
            },
            "max_link_utilization": self.together.max_link_utilization,
        }


def rank_gpus(tree: FatTree, hosts: IntArray, num_ranks: int) -> IntArray:
    """The global GPU of each rank: rank ``r`` on GPU ``r mod G`` of host ``hosts[r // G]``."""
    g = tree.spec.gpus_per_host
    if hosts.size * g != num_ranks:
        raise ClusterSimError(
            f"{hosts.size} hosts of {g} GPUs hold {hosts.size * g} ranks, not the layout's {num_ranks}",
            field="nodes",
            value=int(hosts.size),
        )
    ranks = np.arange(num_ranks, dtype=np.int64)
    return np.asarray(hosts, dtype=np.int64)[ranks // g] * g + ranks % g


def step_on_fabric(
    collectives: list[StepCollective],
    tree: FatTree,
    hosts: IntArray,
    *,
    layout: Layout,
    title: str,
    routing: Routing = Routing.SPRAY,
    seed: int = 0,
    max_steps: int = 4,
    before_run: Callable[[Flows], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    ideal: bool = False,
    background: Background | None = None,
) -> StepOnFabric:
    """Simulate each kind of ``collectives`` on the GPUs of ``hosts`` alone, then all of them at once
    (a GPU whose NIC sits on a failed leaf sending through a peer's: ``failover.pxn_flows``).
    ``before_run(flows)`` sees every flow before any is simulated (a work estimate may refuse them);
    ``progress(done, total)`` counts flows done over the runs alone and together. Calibrated links
    (default) or ``ideal`` ones (see the module docstring). ``background``: other tenants' traffic on
    the fabric's other hosts during every run (``training.background``)."""
    if not collectives:
        raise ClusterSimError(f"layout {layout.describe()} has no communication to simulate", field="layout")
    gpu = rank_gpus(tree, hosts, layout.num_devices)
    model = link_model(tree.spec, ideal=ideal)
    datasheet, tree = tree, model.tree(tree, Algorithm.RING)

    def priced(c: StepCollective, bandwidth_s: float) -> float:
        """The kind's simulated bandwidth term with its latency and fitted ramp (itself when ideal)."""
        if model.ideal:
            return bandwidth_s
        return model.priced_s(c.latency_s, c.ramp_half_bytes, c.size_bytes * c.copy_ratio, bandwidth_s)

    g, cap = tree.spec.gpus_per_host, tree.capacity_bytes_per_s
    parts: list[list[CollectiveFlows]] = []
    for c in collectives:
        if c.op is Op.SENDRECV:
            plans = [pair_flows(gpu[c.groups[:, 0]], gpu[c.groups[:, 1]], c.size_bytes)]
        elif c.copy_ratio != 1.0 or c.fan_out_ranks > 1:
            plans = dispatch_flows(
                gpu[c.groups], g, c.size_bytes, c.copy_ratio, c.fan_out_ranks, c.fan_out_ratio, max_steps=max_steps
            )
        else:
            plans = [group_flows(gpu[c.groups], g, c.op, c.size_bytes, max_steps=max_steps)]
        parts.append([with_pxn(tree, p) for p in plans])
    flat = [p for plans in parts for p in plans]
    flows = concatenate([p.flows for p in flat])
    if before_run is not None:
        before_run(flows)
    total = 2 * flows.num_flows
    others = None if background is None or not background.active else other_hosts(tree, hosts)
    if background is not None and others is not None:
        tree = limited(tree, others, background.share)
        cap = tree.capacity_bytes_per_s  # the run's (links against the datasheet's, as ``link_report`` takes them)

    def simulate(mine: Flows, done: int) -> tuple[FlowTimes, Incidence]:
        if background is not None and others is not None:
            return run_loaded(tree, mine, routing, seed, others, background, offset(progress, done, total))
        inc = route_flows(tree, mine, routing, seed)
        return run(tree, mine, inc, progress=offset(progress, done, total)), inc

    alone: list[tuple[float, LinkReport, int]] = []
    for plans in parts:
        mine = concatenate([p.flows for p in plans])
        times, inc = simulate(mine, sum(a[2] for a in alone))
        report = link_report(datasheet, times, cap)
        alone.append((_parts_time_s(plans, times, inc, mine, 0, cap), report, mine.num_flows))
    times, inc = simulate(flows, total // 2)
    first = 0
    kinds = []
    for c, plans, (time_s, links, _) in zip(collectives, parts, alone, strict=True):
        together = _parts_time_s(plans, times, inc, flows, first, cap)
        first += sum(p.flows.num_flows for p in plans)
        main = plans[0]
        kinds.append(
            KindOnFabric(
                c, main.algorithm, priced(c, time_s), priced(c, together), links, main.num_steps, main.total_steps,
                model.links, time_s,
            )
        )  # fmt: skip
    counts = [sum(p.flows.num_flows for p in plans) for plans in parts]
    owner = np.repeat(np.arange(len(parts), dtype=np.int64), counts)
    shared = link_report(datasheet, times, cap)
    return StepOnFabric(title, layout, routing.value, kinds, shared, times.makespan_s, times.end_s, owner, model.links)


def _parts_time_s(
    plans: list[CollectiveFlows], times: FlowTimes, inc: Incidence, flows: Flows, first: int, cap: FloatArray
) -> float:
    """One kind's time where its parts (``plans``, from flow ``first`` of a run) go at once: the slowest."""
    out = 0.0
    for p in plans:
        part = job_times(times, inc, slice(first, first + p.flows.num_flows), cap)
        out = max(out, collective_time_s(p, part, cap))
        first += p.flows.num_flows
    return out

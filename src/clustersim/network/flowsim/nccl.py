"""What nccl-tests would measure on the simulated fabric: calibrated links and NCCL's per-step latency.

By default (``links="calibrated"``) a simulated collective runs on the links the analytic model
prices, from the same calibration (``analytic.CommCalibration``, one definition):

* every network link (NIC, leaf, spine, core) at ``network_efficiency`` of its line rate;
* every scale-up port at ``nvlink_efficiency`` times the generation's NVLink factor, or, for NVLS and
  NVLS tree, at the NVLink SHARP fraction (``nvls_efficiency``, both generation factors) as a port
  carries it (``nvls.nvls_port_efficiency``).

and with NCCL's structure in the schedule (Simple protocol: LL and LL128 are not simulated):

* each flow arrives a per-step latency after its last byte leaves, from NCCL's tuning constants as
  the analytic model holds them (``analytic``'s ``_BASE_US``, ``_NVLINK_US``, ``_NET_US``, NVLS
  ones) plus the adapter's own per-message latency on every network hop (``latency_s`` in the
  catalog's networks; twice on a Simple hop that flushes): a ring step pays the ring's latency over
  its steps (its NVLink and network hops averaged, as the tuner charges them), a tree or NVLS tree
  hop pays its link's hop latency, a pairwise all-to-all round pays a network hop and the posting
  of its peers; NCCL's base latency is paid once;
* the next step waits for the previous step's data to arrive, so small messages are latency-bound
  (doubling the steps doubles the time) and large ones bandwidth-bound;
* tree and NVLS tree pieces (``TREE_PIECE_BYTES``, ``NVLS_PIECE_BYTES``, per channel) leave each
  connection in order as soon as the previous piece has left (NCCL's FIFO of steps in flight), so the
  pipeline's fill (its depth in hops, each a latency and a piece) is simulated, not fitted.

That structure is a lower bound on time, and alone it misses the measured ramp: on the measured
multi-node collectives (``benchmarks/fabric_vs_measured.py``) it is 27-40% off by source, too fast at
mid sizes (NCCL on EFA ramps slower than its latencies and pipeline fill explain). So a fitted piece
stays, labelled as such (``ramp: fitted`` in the results): the same flows without latency give the
simulated bandwidth term, priced as the analytic model prices it (``fitted_time_s``: its latency, the
fitted Simple ramp of calibration.toml), and the slower of that and the simulated structure is the
answer. Contention, routing, placement and oversubscription reach both through the simulated flows.
``IDEAL`` (``--ideal``) keeps the link-bound view: datasheet links, no latency, no ramp.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from clustersim.network.analytic import (  # NCCL's tuning constants, as the analytic model holds them
    _BASE_US,
    _NET_US,
    _NVLINK_US,
    _NVLS_NVLINK_US,
    _NVLSTREE_NET_US,
    _PER_PEER_US,
    Candidate,
    CommCalibration,
    candidates,
    default_calibration,
)
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.fabric import Fabric
from clustersim.network.flowsim.dag import CollectiveFlows
from clustersim.network.flowsim.nvls import nvls_port_efficiency
from clustersim.network.flowsim.topology import FatTree, FatTreeSpec, FloatArray, IntArray

US = 1e-6
SIMPLE = 2  # index of the Simple protocol in NCCL's latency tables
NVLS_ALGORITHMS = (Algorithm.NVLS, Algorithm.NVLSTREE)
LINKS = ("calibrated", "ideal")


@dataclass(frozen=True, slots=True)
class LinkModel:
    """The links a simulation runs on and the latencies its schedule pays (see the module docstring)."""

    links: str  # "calibrated" or "ideal"
    network_efficiency: float = 1.0
    nvlink_efficiency: float = 1.0  # scale-up ports for rings, trees, sends and all-to-all
    nvls_efficiency: float = 1.0  # NVLS algbw over the NVLink bandwidth (before the port's (g+1)/g)
    calibration: CommCalibration | None = None

    @property
    def ideal(self) -> bool:
        return self.links == "ideal"

    def tree(self, tree: FatTree, algorithm: Algorithm) -> FatTree:
        """``tree`` with its capacities at the achieved fractions (itself on ideal links)."""
        if self.ideal:
            return tree
        scaleup = self.nvlink_efficiency
        if algorithm in NVLS_ALGORITHMS:
            scaleup = nvls_port_efficiency(self.nvls_efficiency, tree.spec.gpus_per_host)
        cap = tree.capacity_bytes_per_s.copy()
        cap[: tree.scaleup0] *= self.network_efficiency
        cap[tree.scaleup0 :] *= scaleup
        return dataclasses.replace(tree, capacity_bytes_per_s=cap)

    def schedule(self, tree: FatTree, hosts: IntArray, plan: CollectiveFlows) -> CollectiveFlows:
        """``plan`` with NCCL's per-step latencies on its flows and its queues (ideal: no latency, every
        dependency on arrival, as before)."""
        flows = plan.flows
        if self.ideal:
            return dataclasses.replace(plan, flows=dataclasses.replace(flows, dep_queue=np.zeros(0, dtype=bool)))
        latency, base = step_latency_s(tree, int(np.size(hosts)), plan)
        return dataclasses.replace(plan, flows=dataclasses.replace(flows, latency_s=latency), base_latency_s=base)

    def priced_s(self, latency_s: float, half_bytes: float, size_bytes: float, bandwidth_s: float) -> float:
        """``latency_s`` plus ``bandwidth_s`` slowed by the fitted Simple ramp of half size ``half_bytes``
        at ``size_bytes`` (calibration.toml ``ramp_exponent``): the analytic model's price of a candidate
        whose bandwidth term is ``bandwidth_s``."""
        cal = default_calibration() if self.calibration is None else self.calibration
        ramp = (half_bytes / max(size_bytes, 1.0)) ** cal.ramp_exponent if half_bytes > 0 else 0.0
        return latency_s + bandwidth_s * (1.0 + ramp)

    def fitted_time_s(
        self, spec: FatTreeSpec, num_nodes: int, plan: CollectiveFlows, size_bytes: float, bandwidth_s: float
    ) -> float:
        """The analytic model's price with the simulated bandwidth: its latency plus ``bandwidth_s`` (the
        collective simulated on these links without latency) slowed by the fitted Simple ramp
        ``1 + (S_half / S) ** p`` (calibration.toml ``ramp_bytes``, ``ramp_exponent``: fitted, not derived)."""
        candidate = _simple_candidate(plan.op, job_fabric(spec, num_nodes, plan.algorithm), plan.algorithm)
        return self.priced_s(candidate.latency_s, candidate.ramp_bytes, size_bytes, bandwidth_s)


IDEAL = LinkModel("ideal")


def bare(plan: CollectiveFlows) -> CollectiveFlows:
    """``plan`` without latencies or queues: its bandwidth alone on whatever links it runs."""
    flows = dataclasses.replace(plan.flows, latency_s=np.zeros(0), dep_queue=np.zeros(0, dtype=bool))
    return dataclasses.replace(plan, flows=flows, base_latency_s=0.0)


def link_model(spec: FatTreeSpec, *, ideal: bool = False, calibration: CommCalibration | None = None) -> LinkModel:
    """The calibrated links of ``spec``'s accelerator family (``calibration``: default the packaged
    one with the user's files over it), or ``IDEAL``."""
    if ideal:
        return IDEAL
    cal = default_calibration() if calibration is None else calibration
    generation = cal.nvlink_generation.factor(spec.family)
    return LinkModel(
        "calibrated",
        network_efficiency=cal.network_efficiency,
        nvlink_efficiency=cal.nvlink_efficiency * generation,
        nvls_efficiency=cal.nvls_efficiency * generation * cal.nvls_generation.factor(spec.family),
        calibration=cal,
    )


def job_fabric(spec: FatTreeSpec, num_nodes: int, algorithm: Algorithm) -> Fabric:
    """The analytic model's view of ``num_nodes`` hosts of ``spec``: its links, adapter and family."""
    return Fabric(
        name=spec.name,
        devices_per_node=spec.gpus_per_host,
        num_nodes=num_nodes,
        scaleup_bytes_per_s=spec.scaleup_bytes_per_s,
        network_bytes_per_s=spec.nic_bytes_per_s * spec.nics_per_host,
        in_network_reduction=algorithm in NVLS_ALGORITHMS,
        network_latency_s=spec.adapter_latency_s,
        network_ll_protocols=False,
        network_flush=spec.network_flush,
        scaleup_link=spec.scaleup_link,
        family=spec.family,
    )


def step_latency_s(tree: FatTree, num_nodes: int, plan: CollectiveFlows) -> tuple[FloatArray, float]:
    """Per flow of ``plan``, the latency NCCL's schedule adds to its arrival, and the base latency
    the collective pays once (see the module docstring)."""
    spec, flows = tree.spec, plan.flows
    g = spec.gpus_per_host
    adapter_us = spec.adapter_latency_s / US
    simple_adapter_us = adapter_us * (2 if spec.network_flush else 1)
    src, dst = flows.src_gpu, flows.dst_gpu
    switch = (src < 0) | (dst < 0)
    network = ~switch & (src // g != dst // g)
    algorithm = plan.algorithm
    if algorithm in (Algorithm.RING, Algorithm.HIERARCHICAL):
        fabric = job_fabric(spec, num_nodes, algorithm)
        ring = _simple_candidate(plan.op, fabric, algorithm).latency_s
        base = _BASE_US[Algorithm.RING][SIMPLE] * US
        return np.full(flows.num_flows, (ring - base) / max(plan.total_steps, 1)), base
    if algorithm is Algorithm.TREE:
        net, nvlink = _NET_US[Algorithm.TREE][SIMPLE] + simple_adapter_us, _NVLINK_US[Algorithm.TREE][SIMPLE]
        return np.where(network, net, nvlink) * US, _BASE_US[Algorithm.TREE][SIMPLE] * US
    if algorithm in NVLS_ALGORITHMS:
        # the NVLS latency once per domain, half on the reduce and half on the multicast
        net = _NVLSTREE_NET_US + simple_adapter_us
        return np.where(switch, _NVLS_NVLINK_US / 2, np.where(network, net, 0.0)) * US, 0.0
    net_hop = _NET_US[Algorithm.RING][SIMPLE] + simple_adapter_us
    nvlink_hop = _NVLINK_US[Algorithm.RING][SIMPLE]
    if algorithm is Algorithm.PAIRWISE:
        # a round: one network hop and the posting of the GPUs of the peer host; inside a host, g - 1 peers
        per_round = np.where(network, net_hop + g * _PER_PEER_US, nvlink_hop + (g - 1) * _PER_PEER_US)
        return per_round * US, 0.0
    return np.where(network, net_hop, nvlink_hop) * US, _BASE_US[Algorithm.RING][SIMPLE] * US


def _simple_candidate(op: Op, fabric: Fabric, algorithm: Algorithm) -> Candidate:
    """The analytic model's Simple-protocol candidate of ``algorithm`` for ``op`` on ``fabric``."""
    for c in candidates(op, fabric):
        if c.algorithm is algorithm and c.protocol is Protocol.SIMPLE:
            return c
    raise AssertionError(f"the analytic model has no {algorithm.value} for {op.value}")  # pragma: no cover


def price_terms(fabric: Fabric, op: Op, algorithm: Algorithm) -> tuple[float, float]:
    """The analytic model's latency and fitted ramp half size of ``algorithm`` (Simple) for ``op`` on
    ``fabric`` (0, 0 where it prices none: a NeuronLink torus, or no such candidate)."""
    if fabric.torus is not None:
        return 0.0, 0.0
    for c in candidates(op, fabric):
        if c.algorithm is algorithm and c.protocol is Protocol.SIMPLE:
            return c.latency_s, c.ramp_bytes
    return 0.0, 0.0

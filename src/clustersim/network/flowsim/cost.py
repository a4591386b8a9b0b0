"""The flow simulator behind the ``CollectiveCost`` interface, registered as ``sim``.

A ``Fabric`` describes a group: ``num_nodes`` hosts of ``devices_per_node`` GPUs. The simulator
builds a fat-tree of exactly those hosts, packed, with one rail per GPU carrying the GPU's share of
the node's network, non-blocking (the catalogue's UltraCluster) unless ``oversubscription`` says
otherwise, and runs each algorithm it knows as flows.

Like with like: the analytic model's achieved-bandwidth fractions are applied to the links
(``network_efficiency`` to the NICs, ``nvlink_efficiency`` to the scale-up ports), and what the
simulator does not model (NCCL's per-message latency, its message-size ramp, the LL protocols'
bandwidth factors) is taken from the analytic candidate of the same algorithm and protocol. So the
simulator replaces exactly one term, the bandwidth of the algorithm on the links, and the two
models differ only where contention, routing or placement make the links do worse than the
analytic bound. NVLS and NVLS tree take the NVLink SHARP fraction (``nvls_efficiency``, as
``nvls.nvls_port_efficiency`` turns it into a port's) on the scale-up ports instead.

A latency-free fluid flow model is scale-invariant (every size k times larger takes k times longer)
but for a pipeline's fill (tree, NVLS: pieces of fixed size), which is the analytic ramp's to
model, not to be counted twice; so one run per (op, algorithm, fabric) at ``REFERENCE_BYTES``, large
enough that the fill is under 1% at 2,048 nodes, prices every size.

With no algorithm forced, each size runs what NCCL would: NCCL's tuner picks by its own model, not
by what the links deliver (it knows nothing of contention, routing or placement), and the analytic
model is that model; so the simulator prices the analytic model's pick (ring, tree, hierarchical,
NVLS, NVLS tree, pairwise or direct), simulating only the algorithms picked. With a forced protocol
only, the pick is among that protocol's candidates; with a forced algorithm, the fastest simulated
protocol of it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError
from clustersim.network.analytic import (
    Candidate,
    CollectiveTable,
    CommCalibration,
    candidate_time_s,
    candidates,
    default_calibration,
    predict_collective,
    size_array,
)
from clustersim.network.collectives import Algorithm, Op
from clustersim.network.collectives import Protocol as NcclProtocol
from clustersim.network.cost import COST_MODELS
from clustersim.network.fabric import Fabric
from clustersim.network.flowsim.collectives import SUPPORTED, collective_flows
from clustersim.network.flowsim.engine import run
from clustersim.network.flowsim.nvls import nvls_port_efficiency
from clustersim.network.flowsim.results import collective_time_s
from clustersim.network.flowsim.routing import Routing, route
from clustersim.network.flowsim.topology import FatTreeSpec, FloatArray, build

REFERENCE_BYTES = float(1 << 36)  # 64 GiB per rank (see the module docstring)
NVLS_ALGORITHMS = (Algorithm.NVLS, Algorithm.NVLSTREE)


@functools.lru_cache(maxsize=512)
def simulated_algbw(
    op: Op,
    algorithm: Algorithm,
    fabric: Fabric,
    routing: Routing,
    oversubscription: float,
    network_efficiency: float,
    scaleup_efficiency: float,
) -> float:
    """Bytes per second of ``op`` by ``algorithm`` on ``fabric``'s links at the given efficiencies."""
    g = fabric.devices_per_node
    spec = FatTreeSpec(
        num_hosts=fabric.num_nodes,
        gpus_per_host=g,
        nics_per_host=g,
        nic_bytes_per_s=max(fabric.network_bytes_per_s, 1.0) / g * network_efficiency,
        scaleup_bytes_per_s=fabric.scaleup_bytes_per_s * scaleup_efficiency,
        radix=64,
        oversubscription=oversubscription,
        name=fabric.name,
    )
    tree = build(spec)
    hosts = np.arange(fabric.num_nodes, dtype=np.int64)
    plan = collective_flows(tree, hosts, op, REFERENCE_BYTES, algorithm, chunks=2)
    # Each step routed on its own (adaptive routing sees only the load of its step).
    inc = route(tree, plan.flows.src_gpu, plan.flows.dst_gpu, routing, group=plan.flows.group)
    return REFERENCE_BYTES / collective_time_s(plan, run(tree, plan.flows, inc), tree.capacity_bytes_per_s)


@dataclass(frozen=True)
class SimCost:
    """Collective costs from the flow simulator (see the module docstring)."""

    routing: Routing = Routing.SPRAY
    oversubscription: float = 1.0
    calibration: CommCalibration | None = None
    name: str = "sim"

    def _options(
        self,
        op: Op,
        fabric: Fabric,
        algorithm: Algorithm | None,
        protocol: NcclProtocol | None,
        among: set[Algorithm] | None = None,
    ) -> list[Candidate]:
        cal = default_calibration() if self.calibration is None else self.calibration
        known = SUPPORTED.get(op, ())
        if not known:
            raise ClusterSimError(
                f"the flow simulator has no algorithm for {op.value}; valid: {', '.join(o.value for o in SUPPORTED)}",
                field="collective",
                value=op.value,
            )
        all_candidates = candidates(op, fabric, cal)
        simple = {c.algorithm: c.algbw_bytes_per_s for c in all_candidates if c.protocol is NcclProtocol.SIMPLE}
        out: list[Candidate] = []
        for c in all_candidates:
            if c.algorithm not in known or (algorithm is not None and c.algorithm is not algorithm):
                continue
            if among is not None and c.algorithm not in among:
                continue
            if protocol is not None and c.protocol is not protocol:
                continue
            scaleup_efficiency = cal.nvlink_efficiency
            if c.algorithm in NVLS_ALGORITHMS:
                scaleup_efficiency = nvls_port_efficiency(cal.nvls_efficiency, fabric.devices_per_node)
            sim = simulated_algbw(
                op,
                c.algorithm,
                fabric,
                self.routing,
                self.oversubscription,
                cal.network_efficiency,
                scaleup_efficiency,
            )
            out.append(replace(c, algbw_bytes_per_s=sim * c.algbw_bytes_per_s / simple[c.algorithm]))
        if not out:
            forced = "/".join(x.value for x in (algorithm, protocol) if x is not None)
            valid = ", ".join(a.value for a in known)
            raise ClusterSimError(
                f"the flow simulator cannot run {op.value} as {forced} on {fabric.name}; algorithms: {valid}",
                field="algorithm",
                value=forced,
            )
        return out

    def _times(
        self, op: Op, sizes: FloatArray, fabric: Fabric, algorithm: Algorithm | None, protocol: NcclProtocol | None
    ) -> tuple[FloatArray, list[Candidate]]:
        cal = default_calibration() if self.calibration is None else self.calibration
        if algorithm is None:  # what NCCL's tuner runs: its own model's pick (the analytic one)
            tuned = predict_collective(op, sizes, fabric, protocol=protocol, cal=cal)
            wanted = list(zip(tuned.algorithm, tuned.protocol, strict=True))
            if all(a in SUPPORTED.get(op, ()) for a, _ in wanted):
                options = self._options(op, fabric, None, protocol, among={a for a, _ in wanted})
                by_name = {(c.algorithm, c.protocol): c for c in options}
                chosen = [by_name[w] for w in wanted]
                times = [float(candidate_time_s(c, sizes[i : i + 1], cal)[0]) for i, c in enumerate(chosen)]
                return np.array(times), chosen
        options = self._options(op, fabric, algorithm, protocol)
        times_all = np.stack([candidate_time_s(c, sizes, cal) for c in options])
        best = np.argmin(times_all, axis=0)
        return times_all[best, np.arange(sizes.size)], [options[i] for i in best]

    def time_s(self, op: Op, size_bytes: npt.ArrayLike, fabric: Fabric) -> FloatArray:
        """The simulated time of what NCCL would run at each size (see the module docstring)."""
        sizes = np.atleast_1d(np.asarray(size_bytes, dtype=np.float64))
        return self._times(op, sizes, fabric, None, None)[0]

    def table(
        self,
        op: Op,
        size_bytes: npt.ArrayLike,
        fabric: Fabric,
        *,
        algorithm: Algorithm | None = None,
        protocol: NcclProtocol | None = None,
    ) -> CollectiveTable:
        """nccl-tests' columns at each size from the simulated algorithms."""
        sizes = size_array(size_bytes)
        time_s, chosen = self._times(op, sizes, fabric, algorithm, protocol)
        note = f", simulated with {self.routing.value}"
        return CollectiveTable.from_candidates(op, fabric, sizes, time_s, chosen, note=note)


SIM = SimCost()
COST_MODELS.setdefault("sim", lambda: SIM)

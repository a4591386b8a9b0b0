"""N RoCE senders into one receiver over PFC links with DCQCN, measured in steady state: each sender's
payload rate over a window after the start-up transient, as a testbed's throughput-over-time figure shows
it (``benchmarks/transport_vs_published.py`` sets it beside the DCQCN paper's testbed).

The senders share one leaf, the receiver sits on another behind one spine path whose links are N times
a NIC's speed, so the receiver's port is the only bottleneck (``experiments.fabric_for``). Each sender
runs one RC queue pair with a message too long to finish; its rate over the window is the payload its
requester had acknowledged at the window's end less at its start.

``DCQCN_PAPER`` and ``PAPER_MARKING`` are the DCQCN paper's settings (Zhu et al., "Congestion Control for
Large-Scale RDMA Deployments", SIGCOMM 2015, https://conferences.sigcomm.org/sigcomm/2015/pdf/papers/p523.pdf;
as openfabric-systems/simllm docs/papers/msg-size-vs-bandwidth.md extracts them: g = 1/256 and the rate
timer every 55 us, F = 5 fast-recovery stages, a 10 MB byte counter, additive increase 40 Mbit/s, at most
one CNP per 50 us, the target reset at every cut; its 40 Gbit/s testbed marked with Kmin = Kmax = 40 KB,
Pmax = 1). The hyper-increase step is not in that extract: ConnectX's 50 Mbit/s is kept (``DcqcnParams``).
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.errors import ClusterSimError
from clustersim.network.transport.dcqcn import DcqcnParams
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.experiments import Scenario, fabric_for
from clustersim.network.transport.lossless import LosslessNetwork, LosslessSpec
from clustersim.network.transport.rc import RcFlow, RcParams
from clustersim.network.transport.topology import leaf_spine

DCQCN_PAPER = DcqcnParams(
    g=1 / 256,
    alpha_period_s=55e-6,
    time_reset_s=55e-6,
    byte_reset_bytes=10_000_000,
    threshold=5,
    ai_bits_per_s=40e6,
    cnp_interval_s=50e-6,
    clamp_target=True,
)
# Kmin = Kmax = 40 KB with Pmax = 1: every packet that joins a backlog above 40 KB is marked (a step;
# ``LosslessSpec`` needs Kmin < Kmax, so Kmax is one byte above)
PAPER_MARKING = LosslessSpec(mode="pfc", ecn=True, kmin_bytes=40_000, kmax_bytes=40_001, pmax=1.0)
NEVER_ENDS_BYTES = 1 << 40  # a message no window of a run reaches the end of


@dataclass(frozen=True, slots=True)
class SteadyIncast:
    """Each sender's payload rate over the window, and what DCQCN and PFC did over the whole run."""

    senders: int
    line_bits_per_s: float
    per_sender_bits_per_s: tuple[float, ...]
    cuts: int  # DCQCN rate cuts, all senders, whole run
    paused_s: float  # PFC pause time summed over the ports, whole run
    num_events: int

    @property
    def mean_bits_per_s(self) -> float:
        return sum(self.per_sender_bits_per_s) / self.senders

    @property
    def jain(self) -> float:
        """Jain's fairness index of the senders' rates (1: equal)."""
        rates = self.per_sender_bits_per_s
        return sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates))

    @property
    def fair_share_bits_per_s(self) -> float:
        """The line rate over the senders: what each gets if the bottleneck is shared equally and fully."""
        return self.line_bits_per_s / self.senders


def steady_incast(
    senders: int,
    *,
    line_bits_per_s: float = 40e9,
    dcqcn: DcqcnParams = DCQCN_PAPER,
    marking: LosslessSpec = PAPER_MARKING,
    warmup_s: float = 0.02,
    window_s: float = 0.02,
    seed: int = 1,
) -> SteadyIncast:
    """``senders`` RC queue pairs with ``dcqcn`` into one receiver, switches marking as ``marking`` says;
    each sender's payload rate from ``warmup_s`` to ``warmup_s + window_s``."""
    if senders < 1 or warmup_s < 0 or window_s <= 0:
        raise ClusterSimError(
            f"steady incast: senders {senders} >= 1, warmup_s {warmup_s} >= 0 and window_s {window_s} > 0 are needed",
            field="senders",
            value=senders,
        )
    if not marking.ecn or marking.mode != "pfc":
        raise ClusterSimError(
            "steady incast: DCQCN runs over PFC links that mark ECN (marking.mode pfc, marking.ecn True)",
            field="marking",
            value=marking.mode,
        )
    scenario = Scenario(line_bits_per_s=line_bits_per_s, num_paths=1, seed=seed)
    env = Environment(seed)
    net = LosslessNetwork(env, marking)
    topo = leaf_spine(net, fabric_for("rc", scenario, senders), hosts_per_leaf=senders, num_paths=1)
    params = RcParams(dcqcn=dcqcn)
    flows = [RcFlow(topo, s, senders, [NEVER_ENDS_BYTES], params, seed=seed) for s in range(senders)]
    env.run(until_ps=round(warmup_s * 1e12))
    start = [f.snd_una for f in flows]
    env.run(until_ps=round((warmup_s + window_s) * 1e12))
    rates = tuple((f.snd_una - s) * params.payload_bytes * 8 / window_s for f, s in zip(flows, start, strict=True))
    cuts = sum(f.rate.cuts for f in flows if f.rate is not None)
    return SteadyIncast(senders, line_bits_per_s, rates, cuts, sum(net.paused_ps) / 1e12, env.num_events)

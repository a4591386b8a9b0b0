"""Experiments over the packet simulator: SRD vs RC vs TCP for one flow (loss, background load, an ECMP
collision), incast, and one ring all-reduce step across two nodes.

Every transport runs in its own environment with the same seed, on a leaf-spine whose hosts are NICs
of the instance (per-card line rate): SRD and TCP on drop-tail Ethernet (EFA, ENA), RC on lossless
links as deployed (``rc_flow_control``: PFC with DCQCN for RoCE, credits for InfiniBand; ``none`` is
drop-tail) with selective repeat and NCCL's 4.3 s local ACK timeout by default. SRD and RC pay the EFA
NIC's latency at each end, TCP the ENA
and Nitro latency plus the kernel (a per-packet cost and ENA's single-flow ceiling, from the host
data-path constants) unless ``tcp_kernel`` is off. Messages go one after another per flow; a message
completes when its last byte is acknowledged to the sender.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NoReturn

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.transport.datapath import load_constants
from clustersim.network.transport.dcqcn import DcqcnParams
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.flows import MessageFlow
from clustersim.network.transport.links import NO_LIMIT, Network, PortSpec
from clustersim.network.transport.lossless import FLOW_CONTROLS, LosslessNetwork, LosslessSpec
from clustersim.network.transport.rc import NCCL_IB_RETRY_CNT, NCCL_IB_TIMEOUT, RECOVERIES, RcFlow, RcParams
from clustersim.network.transport.srd import SrdFlow, SrdParams
from clustersim.network.transport.tcp import TcpParams
from clustersim.network.transport.tcp_sack import tcp_flow
from clustersim.network.transport.topology import FabricSpec, Topology, leaf_spine

TRANSPORTS = ("srd", "rc", "tcp")
COLLISION_LOAD = 0.9  # the colliding elephant's share of the path it shares with a single-path flow
# Simulated time a run may reach (~53 days; well below links.NO_LIMIT, "never"): a transport whose messages
# are not all delivered by then is refused, not reported.
HORIZON_PS = min(1 << 62, NO_LIMIT >> 2)
# Events a run may take: a loss-free run takes ~4 per message and ~1 per KiB; loss multiplies that (RC's
# go-back-N most); past this budget (at least ~1-2 minutes of simulation) a run is refused, not left running.
MIN_EVENT_BUDGET = 10_000_000
EVENT_BUDGET_FACTOR = 16


def event_budget(flows: Sequence[MessageFlow], background: float = 0.0) -> int:
    """The events a run of ``flows`` may take before it is refused. On lossless links background packets
    are events (``lossless.Background``), as many as the run lasts: ``1 / (1 - background)`` times more."""
    loss_free = sum(4 * len(f.sizes) + sum(f.sizes) // 1024 for f in flows)
    budget = max(MIN_EVENT_BUDGET, EVENT_BUDGET_FACTOR * loss_free)
    if flows and isinstance(flows[0].net, LosslessNetwork) and background > 0:
        budget = int(budget / (1 - background))
    return budget


@dataclass(frozen=True, slots=True)
class Scenario:
    """One comparison: the fabric, the traffic and the transports' settings."""

    line_bits_per_s: float = 100e9
    num_paths: int = 16
    loss: float = 0.0
    background: float = 0.0  # Poisson load on every switch-to-switch port, a share of its speed
    collision: bool = False  # an elephant at COLLISION_LOAD on the path RC and TCP hash to
    message_bytes: int = 1 << 20
    num_messages: int = 200
    seed: int = 1
    buffer_bytes: float = 1_000_000
    srd_rto_s: float = 50e-6
    rc_timeout_exponent: int = NCCL_IB_TIMEOUT
    rc_retry_count: int = NCCL_IB_RETRY_CNT
    rc_flow_control: str = "pfc"  # RC's links: "pfc" (RoCE), "credit" (InfiniBand) or "none" (lossy drop-tail)
    rc_recovery: str = "selective"  # ConnectX-6 Dx/7's, or "go-back-n" (older NICs)
    rc_dcqcn: bool | None = None  # DCQCN on RC; None: as deployed, on with PFC (RoCE), off otherwise
    rc_outstanding: int = 1  # RC's messages in flight per queue pair (NCCL keeps up to 8 chunks: NCCL_STEPS)
    tcp_kernel: bool = True
    tcp_congestion: str = "cubic"  # Linux's default (RFC 9438), or "newreno"
    tcp_recovery: str = "rack"  # Linux's default (SACK, PRR, RACK-TLP), "sack" (ns-3's default) or "newreno"

    def __post_init__(self) -> None:
        checks = (
            ("loss", 0 <= self.loss < 1, "a probability in [0, 1)"),
            ("background", 0 <= self.background < 1, "a share of link speed in [0, 1)"),
            ("num_paths", 1 <= self.num_paths <= 255, "1..255"),
            ("message_bytes", self.message_bytes >= 1, "at least 1 byte"),
            ("num_messages", self.num_messages >= 1, "at least 1"),
            ("line_bits_per_s", self.line_bits_per_s > 0, "> 0"),
            ("seed", self.seed >= 0, "an integer, zero or more"),
        )
        try:
            TcpParams(congestion=self.tcp_congestion, recovery=self.tcp_recovery)
        except ClusterSimError as error:
            raise ClusterSimError(f"tcp_{error}", field=f"tcp_{error.field}", value=error.value) from None
        for name, ok, valid in checks:
            if not ok:
                value = getattr(self, name)
                raise ClusterSimError(f"{name}: {value!r} is out of range (valid: {valid})", field=name, value=value)
        self._check_rc()

    def _check_rc(self) -> None:
        for name, value, valid in (
            ("rc_flow_control", self.rc_flow_control, FLOW_CONTROLS),
            ("rc_recovery", self.rc_recovery, RECOVERIES),
        ):
            if value not in valid:
                raise ClusterSimError(f"{name}: {value!r} is not one of {', '.join(valid)}", field=name, value=value)
        if self.rc_dcqcn and self.rc_flow_control != "pfc":
            raise ClusterSimError(
                f"rc_dcqcn: DCQCN is RoCE's congestion control, modelled over PFC links (valid with rc_flow_control "
                f"pfc, got {self.rc_flow_control})",
                field="rc_dcqcn",
                value=self.rc_dcqcn,
            )
        RcParams(
            timeout_exponent=self.rc_timeout_exponent, retry_count=self.rc_retry_count, outstanding=self.rc_outstanding
        )

    @property
    def dcqcn(self) -> bool:
        """Whether RC runs DCQCN (``rc_dcqcn``, or as deployed: with PFC)."""
        return self.rc_flow_control == "pfc" if self.rc_dcqcn is None else self.rc_dcqcn


def network_for(transport: str, scenario: Scenario, env: Environment) -> Network:
    """The network a transport runs on: RC's lossless links (PFC, with ECN marking under DCQCN, or
    credits) unless its flow control is none; SRD and TCP on lossy drop-tail Ethernet, as EFA and ENA."""
    if transport != "rc" or scenario.rc_flow_control == "none":
        return Network(env)
    return LosslessNetwork(env, LosslessSpec(mode=scenario.rc_flow_control, ecn=scenario.dcqcn))


@dataclass(frozen=True, slots=True)
class TransportResult:
    """What one transport achieved over a scenario's messages."""

    transport: str
    throughput_bits_per_s: float  # payload bits over the summed message completion times
    p50_s: float
    p99_s: float
    p999_s: float
    retransmissions: int
    timeouts: int
    num_messages: int
    num_events: int


def fabric_for(transport: str, scenario: Scenario, hosts_per_leaf: int = 1) -> FabricSpec:
    """The fabric one transport sees: NIC latency at each end, and for TCP the kernel; switch links as
    fast as a NIC, or faster where a leaf's NICs would otherwise oversubscribe its spines (non-blocking,
    as an UltraCluster is)."""
    c = {name: constant.value for name, constant in load_constants().items()}
    stack = None
    host_latency = c["efa_nic_s"]
    if transport == "tcp":
        host_latency = c["ena_nic_s"]
        if scenario.tcp_kernel:
            stack = PortSpec(c["ena_flow_bits_per_s"], per_packet_s=c["tcp_per_packet_s"])
    fabric = scenario.line_bits_per_s * max(1.0, hosts_per_leaf / scenario.num_paths)
    return FabricSpec(
        host_bits_per_s=scenario.line_bits_per_s,
        fabric_bits_per_s=fabric,
        host_latency_s=host_latency,
        buffer_bytes=scenario.buffer_bytes,
        loss=scenario.loss,
        host_stack=stack,
    )


def make_flow(
    transport: str,
    topo: Topology,
    src: int,
    dst: int,
    sizes: Sequence[int],
    scenario: Scenario,
    *,
    path: int | None = None,
) -> MessageFlow:
    """A flow of ``transport`` from ``src`` to ``dst``; ``path`` pins RC and TCP to an ECMP path. SRD's
    and RC's windows cover twice the bandwidth-delay product of the route at its line rate (at least
    their defaults), so a faster NIC is not window-bound; SRD's first window is then cut to one
    bandwidth-delay product (``SrdParams.bdp_initial_window``), its limit stays 4 of them."""
    if transport == "srd":
        base = SrdParams()
        bdp = _window_packets(topo, src, dst, base.payload_bytes + base.header_bytes)
        window = SrdParams(
            rto_s=scenario.srd_rto_s,
            initial_window=max(base.initial_window, bdp),
            max_window=max(base.max_window, 4 * bdp),
        )
        return SrdFlow(topo, src, dst, sizes, window)
    if transport == "rc":
        return RcFlow(
            topo,
            src,
            dst,
            sizes,
            RcParams(
                timeout_exponent=scenario.rc_timeout_exponent,
                retry_count=scenario.rc_retry_count,
                recovery=scenario.rc_recovery,
                dcqcn=DcqcnParams() if scenario.dcqcn else None,
                outstanding=scenario.rc_outstanding,
                path=path,
                window=max(RcParams().window, _window_packets(topo, src, dst, 4096 + 82)),
            ),
            seed=scenario.seed,
        )
    if transport == "tcp":
        syscall = load_constants()["syscall_s"].value if scenario.tcp_kernel else 0.0
        params = TcpParams(
            syscall_s=syscall, path=path, congestion=scenario.tcp_congestion, recovery=scenario.tcp_recovery
        )
        return tcp_flow(topo, src, dst, sizes, params, seed=scenario.seed)
    raise ClusterSimError(
        f"transport: {transport!r} is not one of {', '.join(TRANSPORTS)}", field="transport", value=transport
    )


def _window_packets(topo: Topology, src: int, dst: int, wire_bytes: int) -> int:
    """Packets of ``wire_bytes`` in twice the bandwidth-delay product of the first route from ``src``
    to ``dst``: its line rate times its round trip without queues (propagation there and back, plus
    one packet's serialisation per hop)."""
    net = topo.net
    route = topo.routes(src, dst)[0]
    rate_bytes_per_ps = 1 / net.ps_per_byte[route[0]]
    round_trip_ps = 2 * sum(net.prop_ps[p] + wire_bytes * net.ps_per_byte[p] + net.fixed_ps[p] for p in route)
    return math.ceil(2 * round_trip_ps * rate_bytes_per_ps / wire_bytes)


def _summary(
    transport: str, flows: Sequence[MessageFlow], env: Environment, loss: float, budget: int
) -> TransportResult:
    times = np.array([t for f in flows for t in f.completions_ps], dtype=np.float64) / 1e12
    payload = sum(sum(f.sizes) for f in flows)
    if len(times) < sum(len(f.sizes) for f in flows):
        _undelivered(transport, flows, env, loss, budget)
    p50, p99, p999 = np.percentile(times, [50, 99, 99.9])
    return TransportResult(
        transport,
        float(payload * 8 / times.sum()),
        float(p50),
        float(p99),
        float(p999),
        sum(f.retransmissions for f in flows),
        sum(f.timeouts for f in flows),
        len(times),
        env.num_events,
    )


def _undelivered(transport: str, flows: Sequence[MessageFlow], env: Environment, loss: float, budget: int) -> NoReturn:
    """Refuse a run whose messages were not all delivered within the horizon (or at all)."""
    for f in flows:
        if f.failure is not None:
            raise ClusterSimError(f"{f.failure}; lower the loss", field="loss", value=loss)
    delivered = sum(len(f.completions_ps) for f in flows)
    total = sum(len(f.sizes) for f in flows)
    days = env.now_ps / 1e12 / 86400
    stop = (
        f"after {env.num_events:,} events, the budget of a run this size"
        if env.num_events >= budget
        else f"a run stops at {HORIZON_PS / 1e12 / 86400:,.1f} simulated days"
    )
    raise ClusterSimError(
        f"{transport}: {delivered:,} of {total:,} messages delivered in {days:,.4g} simulated days "
        f"({sum(f.timeouts for f in flows):,} timeouts at loss {loss:.4g}; {stop}); lower the loss or the messages",
        field="loss",
        value=loss,
    )


def run_transport(transport: str, scenario: Scenario) -> TransportResult:
    """One flow of ``transport`` between two leaves: the scenario's messages, loss, load, collision."""
    env = Environment(scenario.seed)
    net = network_for(transport, scenario, env)
    topo = leaf_spine(net, fabric_for(transport, scenario), hosts_per_leaf=1, num_paths=scenario.num_paths)
    flow = make_flow(
        transport,
        topo,
        0,
        1,
        [scenario.message_bytes] * scenario.num_messages,
        scenario,
        path=0 if scenario.collision else None,
    )
    for port in topo.fabric_ports:
        net.start_background(port, scenario.background)
    if scenario.collision:
        for port in topo.path_ports(0):
            net.start_background(port, COLLISION_LOAD)
    budget = event_budget([flow], max(scenario.background, COLLISION_LOAD if scenario.collision else 0.0))
    env.run(until_ps=HORIZON_PS, max_events=budget)
    return _summary(transport, [flow], env, scenario.loss, budget)


def compare(scenario: Scenario, transports: Sequence[str] = TRANSPORTS) -> list[TransportResult]:
    """Each transport over the same scenario."""
    return [run_transport(t, scenario) for t in transports]


def sweep(
    scenario: Scenario, field: str, values: Sequence[float], transports: Sequence[str] = TRANSPORTS
) -> list[tuple[float, list[TransportResult]]]:
    """``compare`` with ``field`` (loss, background) set to each of ``values``."""
    if field not in ("loss", "background"):
        raise ClusterSimError(f"sweep: {field!r} is not loss or background", field="sweep", value=field)
    return [(v, compare(at_point(scenario, field, v), transports)) for v in values]


def at_point(scenario: Scenario, field: str, value: float) -> Scenario:
    """``scenario`` with ``field`` (loss or background) set to ``value``: one point of a sweep."""
    return replace(scenario, loss=value) if field == "loss" else replace(scenario, background=value)


@dataclass(frozen=True, slots=True)
class GroupResult:
    """Many flows at once (incast, a collective step): when the last finishes, and their spread."""

    transport: str
    completion_s: float  # the last flow's last message
    p50_flow_s: float
    p99_flow_s: float
    retransmissions: int
    timeouts: int
    drops: int


def _group(
    transport: str, scenario: Scenario, pairs: Sequence[tuple[int, int]], topo_of: Topology, env: Environment
) -> GroupResult:
    flows = [
        make_flow(transport, topo_of, s, d, [scenario.message_bytes] * scenario.num_messages, scenario)
        for s, d in pairs
    ]
    for port in topo_of.fabric_ports:
        topo_of.net.start_background(port, scenario.background)
    budget = event_budget(flows, scenario.background)
    env.run(until_ps=HORIZON_PS, max_events=budget)
    if any(f.done_ps is None for f in flows):
        _undelivered(transport, flows, env, scenario.loss, budget)
    done = np.array([f.done_ps for f in flows], dtype=np.float64) / 1e12
    p50, p99 = np.percentile(done, [50, 99])
    return GroupResult(
        transport,
        float(done.max()),
        float(p50),
        float(p99),
        sum(f.retransmissions for f in flows),
        sum(f.timeouts for f in flows),
        sum(topo_of.net.drops),
    )


def incast(scenario: Scenario, num_senders: int, transports: Sequence[str] = TRANSPORTS) -> list[GroupResult]:
    """``num_senders`` hosts on one leaf each send the scenario's messages to one host on the other."""
    if num_senders < 1:
        raise ClusterSimError(f"num_senders: {num_senders} must be at least 1", field="num_senders", value=num_senders)
    out = []
    for transport in transports:
        env = Environment(scenario.seed)
        topo = leaf_spine(
            network_for(transport, scenario, env),
            fabric_for(transport, scenario, num_senders),
            hosts_per_leaf=num_senders,
            num_paths=scenario.num_paths,
        )
        out.append(_group(transport, scenario, [(s, num_senders) for s in range(num_senders)], topo, env))
    return out


def ring_step(
    scenario: Scenario, *, num_nics: int, num_ranks: int, buffer_bytes: int, transports: Sequence[str] = TRANSPORTS
) -> list[GroupResult]:
    """One step of a ring all-reduce over ``num_ranks`` ranks on two nodes: each rank's chunk
    (``buffer_bytes / num_ranks``) crosses between the nodes spread over the ``num_nics`` NICs of a
    node, one flow per NIC; the step ends when the last flow does."""
    if num_nics < 1 or num_ranks < 2 or buffer_bytes < num_ranks:
        raise ClusterSimError(
            "ring step needs num_nics >= 1, num_ranks >= 2 and buffer_bytes >= num_ranks; "
            f"got {num_nics}, {num_ranks}, {buffer_bytes}",
            field="buffer_bytes",
            value=buffer_bytes,
        )
    ranks_per_node = num_ranks // 2
    per_flow = max(1, buffer_bytes // num_ranks * ranks_per_node // num_nics)
    step = replace(scenario, message_bytes=per_flow, num_messages=1)
    out = []
    for transport in transports:
        env = Environment(scenario.seed)
        topo = leaf_spine(
            network_for(transport, step, env),
            fabric_for(transport, step, num_nics),
            hosts_per_leaf=num_nics,
            num_paths=scenario.num_paths,
        )
        out.append(_group(transport, step, [(i, num_nics + i) for i in range(num_nics)], topo, env))
    return out

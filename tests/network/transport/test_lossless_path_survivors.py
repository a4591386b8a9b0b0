"""Tests that kill what mutation testing of ``transport_rdma`` left alive in ``lossless_path.py``, the lossless
fabric's inner loop (benchmarks/mutation.py): a lost or overrun packet leaves the count of packets in flight (which
background traffic runs on), each overrun counts one drop, a loss draw equal to the loss probability keeps the packet,
credit lost with a packet goes back upstream from every port that spent it and from no other, background packets
leave their port's count as they leave, a port's fixed cost per packet is paid (not refunded), and a route of the
longest length is served.

Equivalent mutants left alive: falsy ``None`` for ``False`` in the ports' flags; a background packet's credit check
reading the packet kind instead of the flow id (a background route is one port long, so the check is false either
way); the held-packet branch's conditions widened (``or`` for ``and``, ``<=`` for ``<``, ``k - 1``: the held head is
sent at once by ``send``, which checks the credit itself, and the last hop never spends credit) and its ``send`` call
given no time (a held head is never sendable there: held behind a queue, a pause or missing credit, which restart it
themselves); RED's ``>=`` at exactly kmin (the marking probability is 0 there); the handlers built for one hop more
than the longest route. Not pinned: the time a lost packet's credit returns (``now - prop``: an earlier return only
shows where the upstream port waits for that credit at that instant) and PFC's resume and pause at exactly xon and
xoff."""

from __future__ import annotations

from clustersim.network.transport.engine import Environment
from clustersim.network.transport.flows import DATA
from clustersim.network.transport.links import MAX_HOPS, Packet, PortSpec
from clustersim.network.transport.lossless import LosslessNetwork, LosslessSpec
from clustersim.network.transport.rc import RcFlow, RcParams
from clustersim.network.transport.topology import FabricSpec, leaf_spine

from .test_rc_survivors import ScriptedLoss

LINE = 100e9
PS_PER_BYTE = 80  # at LINE


def _lossy_run(lost_at: dict[int, tuple[int, ...]], *, value: float = 1.0) -> tuple[RcFlow, LosslessNetwork, list[int]]:
    """A 64-packet RC message across a two-leaf credit fabric; on the route's ``k``-th port the draws numbered in
    ``lost_at[k]`` are lost (loss probability 0.5, every other draw ``value``): the flow, the network and the
    credits every link held before the run."""
    env = Environment(0)
    net = LosslessNetwork(env, LosslessSpec(mode="credit"))
    topo = leaf_spine(net, FabricSpec(), hosts_per_leaf=1, num_paths=1)
    flow = RcFlow(topo, 0, 1, [64 * 4096], RcParams(timeout_exponent=4))
    for k, draws in lost_at.items():
        port = flow.route[k]
        net.loss[port] = 0.5  # in place: the inner loop holds the lists
        net.streams[port] = ScriptedLoss(draws, kept=value)  # type: ignore[call-overload]
    credits = list(net.credits)
    env.run()
    return flow, net, credits


def test_lost_packets_leave_the_in_flight_count_and_their_credit_goes_back_from_where_it_was_spent() -> None:
    """Losses on each of the route's four ports (host link, leaf up, spine down, leaf to host): every lost packet
    is resent, nothing is left counted in flight, and every link ends with the credit it started with (the last
    hop spends none, so it is given none back)."""
    flow, net, credits = _lossy_run({0: (5,), 1: (9,), 2: (20, 21), 3: (40,)})
    assert [net.losses[port] for port in flow.route] == [1, 1, 2, 1]
    assert flow.done_ps is not None and flow.retransmissions == 5
    assert net.in_flight == 0
    assert net.credits == credits


def test_a_draw_equal_to_the_loss_probability_keeps_the_packet() -> None:
    flow, net, _ = _lossy_run({0: ()}, value=0.5)
    assert net.losses[flow.route[0]] == 0 and flow.retransmissions == 0


def test_each_overrun_of_a_link_s_credit_drops_one_packet_and_leaves_the_in_flight_count() -> None:
    net = LosslessNetwork(Environment(0), LosslessSpec(mode="credit", credit_bytes=10_000))
    link, port = net.add_port(PortSpec(LINE)), net.add_port(PortSpec(LINE))
    flow = net.add_receiver(lambda now_ps, packet: None)
    net.set_routes([(link, port)])
    net.ingress_bytes[link] = 10_000 - 100  # the switch holds all but 100 bytes of the link's credit
    net.in_flight = 2
    packet: Packet = (flow, DATA, 0, 4096, (link, port), 0, 0)
    for _ in range(2):
        net.hops[1](0, packet)
    assert net.drops[port] == 2 and net.in_flight == 0 and net.backlog_bytes[port] == 0


def test_background_packets_leave_their_port_s_count_as_they_are_sent() -> None:
    net = LosslessNetwork(Environment(0), LosslessSpec())
    port = net.add_port(PortSpec(LINE, buffer_bytes=100_000))
    net.start_background(port, 0.5, 9000)
    background = net._bg_at[port]
    for _ in range(3):
        background._enqueue(0)
    assert background.queued == 3
    net.env.run()  # no flow packet in flight: the three leave and no arrival follows
    assert background.queued == 0 and net.bg_packets == 3 and net.backlog_bytes[port] == 0


def test_a_port_s_fixed_cost_is_paid_by_each_packet_whether_it_finds_the_port_idle_or_queues() -> None:
    """1 us per packet and 1,000 bytes at 100 Gb/s (80 ns) on one port with 1 us of propagation: the first packet
    arrives at 2.08 us, the second, queued behind it, 1.08 us later."""
    net = LosslessNetwork(Environment(0), LosslessSpec())
    port = net.add_port(PortSpec(LINE, propagation_s=1e-6, per_packet_s=1e-6))
    got: list[int] = []
    flow = net.add_receiver(lambda now_ps, packet: got.append(now_ps))
    net.set_routes([(port,)])
    for seq in (0, 1):
        net.env.schedule(0, net.hop, (flow, DATA, seq, 1000, (port,), 0, 0))
    net.env.run()
    service = 1_000_000 + 1000 * PS_PER_BYTE
    assert got == [service + 1_000_000, 2 * service + 1_000_000]


def test_a_route_of_the_longest_length_is_served() -> None:
    net = LosslessNetwork(Environment(0), LosslessSpec(mode="pfc"))
    ports = [net.add_port(PortSpec(LINE)) for _ in range(MAX_HOPS)]
    got: list[int] = []
    flow = net.add_receiver(lambda now_ps, packet: got.append(now_ps))
    net.set_routes([tuple(ports)])
    net.env.schedule(0, net.hop, (flow, DATA, 0, 1000, tuple(ports), 0, 0))
    net.env.run()
    assert got == [MAX_HOPS * 1000 * PS_PER_BYTE]

"""The packet network's edges and a flow's construction, pinned where the transport_srd mutation run found them
unpinned (benchmarks/mutation.py): ECN marking above the threshold and not at it, routes of the longest length
and one port longer, a port's speed refused at zero, a receiver run in the event its data arrives for each flow,
and a flow's refusals and start."""

from __future__ import annotations

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.flows import DATA
from clustersim.network.transport.links import ECN_BIT, MAX_HOPS, Network, Packet, PortSpec
from clustersim.network.transport.srd import SrdFlow
from clustersim.network.transport.topology import FabricSpec, leaf_spine

BYTES_PER_NS = 8e9  # 1,000 ps a byte: a 1,000-byte packet is exactly 1 us on the wire


def _deliveries(ecn_bytes: float) -> list[tuple[int, int]]:
    """Two 1,000-byte packets into one port at the same instant: (arrival ps, tag) of each."""
    net = Network(Environment(1))
    port = net.add_port(PortSpec(BYTES_PER_NS, ecn_bytes=ecn_bytes))
    got: list[tuple[int, int]] = []
    flow = net.add_receiver(lambda now, packet: got.append((now, packet[6])))
    net.set_routes([(port,)])
    for seq in (0, 1):
        net.env.schedule(0, net.hop, (flow, DATA, seq, 1000, (port,), 0, 0))
    net.env.run()
    return got


def test_a_packet_is_marked_above_the_ecn_threshold_and_not_at_it():
    """The second packet waits exactly 1,000 bytes' worth behind the first."""
    assert _deliveries(ecn_bytes=1000) == [(1_000_000, 0), (2_000_000, 0)]
    assert _deliveries(ecn_bytes=999) == [(1_000_000, 0), (2_000_000, ECN_BIT)]


def _chain(extra_feeder: bool) -> tuple[Network, list[int]]:
    net = Network(Environment(1))
    ports = [net.add_port(PortSpec(BYTES_PER_NS)) for _ in range(MAX_HOPS)]
    routes = [tuple(ports)]
    if extra_feeder:  # a second port feeding the last one: the packet's chain breaks there, an event of its own
        routes.append((net.add_port(PortSpec(BYTES_PER_NS)), ports[-1]))
    net.set_routes(routes)
    return net, ports


@pytest.mark.parametrize("extra_feeder", [False, True])
def test_a_route_of_the_longest_length_delivers_store_and_forward(extra_feeder: bool):
    net, ports = _chain(extra_feeder)
    got: list[int] = []
    flow = net.add_receiver(lambda now, packet: got.append(now))
    packet: Packet = (flow, DATA, 0, 1000, tuple(ports), 0, 0)
    net.env.schedule(0, net.hop, packet)
    net.env.run()
    assert got == [MAX_HOPS * 1_000_000]


def test_a_route_longer_than_the_longest_is_refused():
    net = Network(Environment(1))
    ports = [net.add_port(PortSpec(BYTES_PER_NS)) for _ in range(MAX_HOPS + 1)]
    with pytest.raises(ValueError) as refused:
        net.set_routes([tuple(ports)])
    assert str(refused.value) == f"a route of {MAX_HOPS + 1} ports is longer than {MAX_HOPS}"


def test_a_port_needs_a_speed():
    net = Network(Environment(1))
    assert net.add_port(PortSpec(0.5)) == 0  # half a bit a second is slow, not refused
    with pytest.raises(ValueError) as refused:
        net.add_port(PortSpec(0.0))
    assert str(refused.value) == "port speed must be > 0 bits/s, got 0.0"


def test_each_flows_answering_receiver_runs_in_its_datas_event():
    """Two flows between four distinct hosts: each receiver alone sends into its host's uplink."""
    net = Network(Environment(1))
    topo = leaf_spine(net, FabricSpec(), hosts_per_leaf=2, num_paths=1)
    flows = [SrdFlow(topo, 0, 2, [8192]), SrdFlow(topo, 1, 3, [8192])]
    assert [net.inline[f.flow] for f in flows] == [True, True]


def test_a_flow_without_messages_or_with_an_empty_one_is_refused():
    topo = leaf_spine(Network(Environment(1)), FabricSpec(), hosts_per_leaf=1)
    with pytest.raises(ClusterSimError) as refused:
        SrdFlow(topo, 0, 1, [])
    assert str(refused.value) == "a flow needs at least one message"
    assert (refused.value.field, refused.value.value) == ("message_bytes", [])
    with pytest.raises(ClusterSimError) as refused:
        SrdFlow(topo, 0, 1, [8192, 0])
    assert str(refused.value) == "message size 0 must be at least 1 byte"
    assert (refused.value.field, refused.value.value) == ("message_bytes", 0)


def test_a_flow_starts_at_zero_unless_told():
    flow = SrdFlow(leaf_spine(Network(Environment(1)), FabricSpec(), hosts_per_leaf=1), 0, 1, [100])
    flow.env.run()
    assert flow.done_ps == flow.completions_ps[0]

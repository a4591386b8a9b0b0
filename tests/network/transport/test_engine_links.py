"""The event core and the links: event order, closed-form packet timing, drop-tail, ECN, loss."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.links import ECN_BIT, Network, PortSpec
from clustersim.network.transport.topology import FabricSpec, dumbbell, leaf_spine


def test_events_run_in_time_priority_then_schedule_order():
    env = Environment()
    seen = []

    def note(t, arg):
        seen.append((t, arg))
        if arg == "a":
            return [(t + 5, 0, note, "follow")]
        return None

    env.schedule(10, note, "late", priority=1)
    env.schedule(10, note, "early")
    env.schedule(10, note, "early2")
    env.schedule(3, note, "a")
    assert env.run() == 5
    assert seen == [(3, "a"), (8, "follow"), (10, "early"), (10, "early2"), (10, "late")]
    assert env.now_ps == 10


def test_run_stops_at_until_and_resumes():
    env = Environment()
    seen = []
    for t in (1, 2, 3):
        env.schedule(t, lambda now, _: seen.append(now))
    assert env.run(until_ps=2) == 2
    assert env.pending == 1
    env.run()
    assert seen == [1, 2, 3]


def test_scheduling_in_the_past_is_refused():
    env = Environment()
    env.schedule(5, lambda now, _: None)
    env.run()
    with pytest.raises(ValueError, match="before now"):
        env.schedule(4, lambda now, _: None)


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=20, deadline=None)
def test_uniforms_are_a_function_of_the_seed(seed):
    a, b = Environment(seed), Environment(seed)
    draws = [a.uniform() for _ in range(10)]
    assert draws == [b.uniform() for _ in range(10)]
    assert all(0 <= d < 1 for d in draws)


def _deliveries(net, route, sizes, at_ps=0):
    arrivals = []
    flow = net.add_receiver(lambda now, packet: arrivals.append((now, packet)))
    for seq, size in enumerate(sizes):
        net.env.schedule(at_ps, net.hop, (flow, 0, seq, size, route, at_ps, 0))
    net.env.run()
    return arrivals


def test_one_packet_crosses_a_route_in_service_plus_propagation_per_hop():
    env = Environment()
    net = Network(env)
    a = net.add_port(PortSpec(100e9, propagation_s=1e-6))  # 80 ps per byte
    b = net.add_port(PortSpec(400e9, propagation_s=0.5e-6, per_packet_s=2e-9))  # 20 ps per byte + 2 ns
    ((arrival, packet),) = _deliveries(net, (a, b), [1000])
    assert arrival == 1000 * 80 + ps(1e-6) + 2000 + 1000 * 20 + ps(0.5e-6)
    assert packet[2] == 0


def test_a_fifo_port_serialises_a_burst_back_to_back():
    env = Environment()
    net = Network(env)
    port = net.add_port(PortSpec(8e9))  # 1000 ps per byte
    arrivals = _deliveries(net, (port,), [100, 200, 300])
    assert [t for t, _ in arrivals] == [100_000, 300_000, 600_000]


def test_drop_tail_buffer_drops_what_does_not_fit():
    env = Environment()
    net = Network(env)
    port = net.add_port(PortSpec(8e9, buffer_bytes=2000))
    arrivals = _deliveries(net, (port,), [1000] * 5)
    assert len(arrivals) == 2
    assert net.drops[port] == 3


def test_ecn_marks_packets_queued_above_the_threshold():
    env = Environment()
    net = Network(env)
    port = net.add_port(PortSpec(8e9, ecn_bytes=1500))
    arrivals = _deliveries(net, (port,), [1000] * 4)
    marks = [bool(packet[6] & ECN_BIT) for _, packet in arrivals]
    assert marks == [False, False, True, True]


def test_random_loss_rate_and_seed():
    def lost(seed):
        env = Environment(seed)
        net = Network(env)
        port = net.add_port(PortSpec(1e12, loss=0.1))
        _deliveries(net, (port,), [100] * 4000)
        return net.losses[port]

    assert lost(7) == lost(7)
    assert 320 < lost(7) < 480  # 400 expected; 4 sigma is 76
    assert lost(7) != lost(8)


def test_background_load_occupies_the_share_of_a_port_asked_and_delays_a_packet():
    env = Environment(3)
    net = Network(env)
    port = net.add_port(PortSpec(100e9))
    net.start_background(port, 0.5, packet_bytes=1000)
    arrivals = _deliveries(net, (port,), [1], at_ps=ps(200e-6))
    busy_share = net.bg_packets * 1000 * 80 / ps(200e-6)
    assert busy_share == pytest.approx(0.5, rel=0.1)
    assert env.num_events == 2  # background packets are replayed, not scheduled
    assert arrivals[0][0] >= ps(200e-6) + 80
    with pytest.raises(ValueError, match="background load"):
        net.start_background(port, 1.0)


def test_background_replay_matches_the_fifo_backlog_of_the_same_arrivals():
    """Replaying on each packet's arrival gives the same backlog as one replay at the end."""

    def final_busy(probes):
        env = Environment(11)
        net = Network(env)
        port = net.add_port(PortSpec(100e9, buffer_bytes=50_000))
        net.start_background(port, 0.8, packet_bytes=1000)
        for t in probes:
            env.schedule(t, lambda now, _: net._replay_background(port, now))
        env.run()
        net._replay_background(port, ps(50e-6))
        return net.busy_until[port], net.drops[port]

    assert final_busy([]) == final_busy([ps(t * 1e-6) for t in range(1, 50, 3)])


def test_leaf_spine_has_one_route_per_spine_across_leaves():
    net = Network(Environment())
    topo = leaf_spine(net, FabricSpec(), hosts_per_leaf=2, num_paths=4)
    routes = topo.routes(0, 3)
    assert len(routes) == 4
    assert len({r[1:3] for r in routes}) == 4  # distinct spine ports
    assert all(r[0] == topo.uplinks[0] and r[-1] == topo.downlinks[3] for r in routes)
    assert len(topo.routes(0, 1)) == 1  # same leaf
    with pytest.raises(ClusterSimError, match="host 9"):
        topo.routes(0, 9)


def test_dumbbell_shares_one_bottleneck_and_host_stack_ports_wrap_routes():
    net = Network(Environment())
    stack = PortSpec(10e9, per_packet_s=1e-6)
    topo = dumbbell(net, FabricSpec(host_stack=stack), hosts_per_side=2)
    assert topo.routes(0, 2)[0][2] == topo.routes(1, 3)[0][2]
    assert topo.routes(0, 2)[0][0] == topo.stack_tx[0]
    assert topo.routes(0, 2)[0][-1] == topo.stack_rx[2]


@pytest.mark.parametrize("loss", [-0.1, 1.0])
def test_fabric_refuses_a_loss_that_is_not_a_probability(loss):
    with pytest.raises(ClusterSimError, match="loss"):
        FabricSpec(loss=loss)

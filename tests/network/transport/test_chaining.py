"""Crossing a solo port (fed by one port only) in its feeder's event is exact: the same results, to the
picosecond, as one event per hop, with fewer events."""

from dataclasses import asdict

import pytest

from clustersim.network.transport.engine import Environment
from clustersim.network.transport.experiments import Scenario, incast, run_transport
from clustersim.network.transport.links import Network
from clustersim.network.transport.topology import FabricSpec, dumbbell, leaf_spine


def _one_event_per_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Network, "set_routes", lambda self, routes: None)


@pytest.mark.parametrize("transport", ["srd", "rc", "tcp"])
def test_chained_hops_give_the_same_results_as_one_event_per_hop(transport, monkeypatch):
    scenario = Scenario(
        message_bytes=64 << 10, num_messages=12, num_paths=4, loss=0.01, background=0.3, seed=5, rc_flow_control="none"
    )  # chaining is the lossy network's (RC's lossless links make an event of every hop)
    chained = asdict(run_transport(transport, scenario))
    _one_event_per_hop(monkeypatch)
    per_hop = asdict(run_transport(transport, scenario))
    assert chained.pop("num_events") < per_hop.pop("num_events")
    assert chained == per_hop


def test_chained_hops_are_exact_where_many_senders_share_ports(monkeypatch):
    scenario = Scenario(message_bytes=32 << 10, num_messages=2, loss=0.002, background=0.2, seed=3)
    chained = [asdict(r) for r in incast(scenario, 4, ("srd", "tcp"))]
    _one_event_per_hop(monkeypatch)
    assert chained == [asdict(r) for r in incast(scenario, 4, ("srd", "tcp"))]


def test_only_ports_with_a_single_feeding_port_are_solo():
    net = Network(Environment())
    topo = leaf_spine(net, FabricSpec(), hosts_per_leaf=2, num_paths=2)
    assert not any(net.solo[p] for p in topo.uplinks)  # hosts inject there
    assert not any(net.solo[p] for p in topo.downlinks)  # fed by the leaf's peer host and the spines
    # a leaf's uplink to a spine is fed by the leaf's two hosts; a spine's downlink by one leaf only
    assert [net.solo[p] for p in topo.fabric_ports] == [False] * 4 + [True] * 4
    one = dumbbell(Network(Environment()), FabricSpec(), hosts_per_side=1)
    assert [one.net.solo[p] for p in one.fabric_ports] == [True, True]


def test_loss_draws_of_a_port_do_not_depend_on_other_ports():
    """Each port draws from its own stream: adding a lossy port elsewhere leaves a port's losses alone."""

    def losses(extra_lossy_ports: int) -> list[float]:
        env = Environment(9)
        net = Network(env)
        topo = leaf_spine(net, FabricSpec(loss=0.3), hosts_per_leaf=1 + extra_lossy_ports)
        stream = net.streams[topo.uplinks[0]]
        assert stream is not None
        return [stream.uniform() for _ in range(5)]

    assert losses(0) == losses(3)

"""Lossless links (``lossless.py``): PFC and credit flow control never drop a packet, pauses travel
upstream to the senders and block an innocent flow that shares a paused port (head-of-line blocking),
and RC's incast then finishes near the bottleneck's line rate."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.experiments import Scenario, event_budget, incast, run_transport
from clustersim.network.transport.links import Network, PortSpec
from clustersim.network.transport.lossless import MTU_FRAME_BYTES, LosslessNetwork, LosslessSpec, headroom
from clustersim.network.transport.rc import RcFlow
from clustersim.network.transport.topology import FabricSpec, leaf_spine

# spines four times a host's speed: the only bottleneck is a receiver's downlink
SPEC = FabricSpec(host_bits_per_s=100e9, fabric_bits_per_s=400e9, host_latency_s=1e-6, hop_latency_s=0.5e-6)
WIRE_SHARE = MTU_FRAME_BYTES / 4096  # wire bytes per payload byte of a full RC packet


def _net(mode: str, env: Environment, **spec: object) -> Network:
    return Network(env) if mode == "none" else LosslessNetwork(env, LosslessSpec(mode=mode, **spec))  # type: ignore[arg-type]


@given(
    mode=st.sampled_from(["pfc", "credit"]),
    senders=st.integers(2, 6),
    kib=st.sampled_from([64, 256]),
    seed=st.integers(0, 50),
)
@settings(max_examples=10, deadline=None)
def test_a_lossless_fabric_never_drops_a_packet(mode, senders, kib, seed):
    scenario = Scenario(message_bytes=kib << 10, num_messages=2, num_paths=4, seed=seed, rc_flow_control=mode)
    (rc,) = incast(scenario, senders, ("rc",))
    assert (rc.drops, rc.retransmissions, rc.timeouts) == (0, 0, 0)
    # the same incast on drop-tail links, its flows on one path (no hash collision upstream to pace them), drops
    one_path = replace(scenario, rc_flow_control="none", num_paths=1)
    lossy = incast(one_path, 6, ("rc",))[0] if senders == 6 and kib == 256 else None
    assert lossy is None or lossy.drops > 0


def test_credits_all_come_back_even_when_the_wire_corrupts_packets():
    env = Environment(4)
    net = LosslessNetwork(env, LosslessSpec(mode="credit"))
    topo = leaf_spine(net, replace(SPEC, loss=0.02), hosts_per_leaf=3, num_paths=2)
    given = list(net.credits)
    flows = [RcFlow(topo, s, 3 + s % 3, [64 << 10] * 20) for s in range(3)]
    env.run()
    assert all(f.done_ps is not None for f in flows) and sum(net.losses) > 0
    assert net.credits == given  # a lost packet's credit came back: no link is left blocked


def test_a_headroom_below_the_links_round_trip_drops():
    """The one drop a PFC fabric can make: more in flight after the pause than the headroom holds."""
    env = Environment(1)
    net = LosslessNetwork(env, LosslessSpec(mode="pfc", headroom_bytes=1000))
    topo = leaf_spine(net, SPEC, hosts_per_leaf=4, num_paths=1)
    flows = [RcFlow(topo, s, 4, [1 << 20]) for s in range(3)]
    env.run()
    assert sum(net.drops) > 0 and all(f.done_ps is not None for f in flows)  # selective repeat resends them
    # the default: a host link's round trip at 100 Gbit/s (1.5 us each way: 37.5 kB) and two frames at each end
    assert headroom(PortSpec(100e9, propagation_s=1.5e-6)) == 37_500 + 2 * MTU_FRAME_BYTES + 2 * 84


def _victim(mode: str, *, incast_flows: bool = True) -> tuple[float, Network, object]:
    """Hosts 0-2 send 1 MiB each to host 4; host 3 (same leaf) sends 1 MiB to host 5 (the other leaf):
    the victim shares the leaf's uplink and the spine's downlink with the incast, not its receiver."""
    env = Environment(1)
    net = _net(mode, env)
    topo = leaf_spine(net, SPEC, hosts_per_leaf=4, num_paths=1)
    if incast_flows:
        for s in (0, 1, 2):
            RcFlow(topo, s, 4, [1 << 20])
    victim = RcFlow(topo, 3, 5, [1 << 20])
    env.run()
    assert victim.done_ps is not None
    return victim.done_ps / 1e12, net, topo


def test_pfc_pauses_reach_the_senders_and_block_an_innocent_flow():
    alone, _, _ = _victim("pfc", incast_flows=False)
    ideal_s = (1 << 20) * WIRE_SHARE * 8 / 100e9
    assert ideal_s < alone < ideal_s + 10e-6  # line rate, and the last acknowledgement's round trip
    blocked, net, topo = _victim("pfc")
    lossy, _, _ = _victim("none")
    assert blocked > 2 * alone  # head-of-line blocking behind the incast's pauses
    assert lossy < 1.05 * alone  # on drop-tail links the victim's ports never stop
    assert isinstance(net, LosslessNetwork) and net.pause_frames > 0 and sum(net.drops) == 0
    spine_down, leaf_up = topo.fabric_ports[3], topo.fabric_ports[0]  # spine -> leaf 1, leaf 0 -> spine
    for port in (spine_down, leaf_up, topo.uplinks[3]):  # the pause travels hop by hop to the victim's NIC
        assert net.paused_ps[port] > 0


def test_credit_links_block_the_innocent_flow_as_well():
    alone, _, _ = _victim("credit", incast_flows=False)
    blocked, net, _ = _victim("credit")
    assert blocked > 2 * alone and sum(net.drops) == 0 and net.pause_frames == 0


@pytest.mark.parametrize("mode", ["pfc", "credit"])
def test_a_lossless_incast_finishes_near_the_bottlenecks_line_rate(mode):
    scenario = Scenario(message_bytes=256 << 10, num_messages=4, num_paths=16, rc_flow_control=mode, rc_dcqcn=False)
    (rc,) = incast(scenario, 8, ("rc",))
    ideal_s = 8 * 4 * (256 << 10) * WIRE_SHARE * 8 / 100e9
    assert ideal_s < rc.completion_s < 1.1 * ideal_s
    lossy = incast(replace(scenario, rc_flow_control="none"), 8, ("rc",))[0]
    assert lossy.completion_s > 100 * rc.completion_s  # drops wait out NCCL's 4.3 s timeout


def test_background_runs_on_lossless_links_and_stops_with_the_flows():
    scenario = Scenario(message_bytes=64 << 10, num_messages=10, num_paths=2, background=0.5, loss=0.01)
    clean = run_transport("rc", replace(scenario, background=0.0, loss=0.0))
    loaded = run_transport("rc", scenario)
    assert loaded.num_messages == 10 and loaded.p50_s > clean.p50_s  # the load queues ahead of the flow
    env = Environment(3)
    net = LosslessNetwork(env, LosslessSpec())
    topo = leaf_spine(net, SPEC, hosts_per_leaf=1, num_paths=1)
    RcFlow(topo, 0, 1, [64 << 10])
    for port in topo.fabric_ports:
        net.start_background(port, 0.5)
    env.run()  # returns: the arrivals stop once no flow packet is in the network
    assert net.bg_packets > 0 and net.in_flight == 0


def test_bad_lossless_settings_are_refused_with_the_field():
    for kwargs, field in (
        ({"mode": "none"}, "flow_control"),
        ({"xoff_bytes": 100}, "xoff_bytes"),
        ({"xon_bytes": 200_000}, "xon_bytes"),
        ({"kmin_bytes": 300_000}, "ecn"),
    ):
        with pytest.raises(ClusterSimError) as error:
            LosslessSpec(**kwargs)  # type: ignore[arg-type]
        assert error.value.field == field


def test_the_event_budget_grows_with_background_on_lossless_links_only():
    """Background packets are events on lossless links, as many as the run lasts."""
    flows = []
    for net in (LosslessNetwork(Environment(), LosslessSpec()), Network(Environment())):
        flows.append(RcFlow(leaf_spine(net, SPEC, hosts_per_leaf=1), 0, 1, [1 << 20]))
    lossless, lossy = flows
    assert event_budget([lossless], 0.9) == pytest.approx(10 * event_budget([lossless]), rel=1e-9)
    assert event_budget([lossy], 0.9) == event_budget([lossy])

"""SRD under heavy inelastic background (issue 13): the delay target's flow-based scaling (Swift's), by
its closed form, at the window floor, and in the experiment where a fixed target starved the flow."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.experiments import Scenario, fabric_for
from clustersim.network.transport.links import Network
from clustersim.network.transport.srd import SrdFlow, SrdParams
from clustersim.network.transport.topology import leaf_spine

US = 1_000_000  # picoseconds per microsecond


def test_the_target_is_the_base_plus_the_full_range_at_one_packet_and_the_base_from_the_window_on():
    p = SrdParams(target_delay_s=4e-6, flow_scaling_s=20e-6, flow_scaling_window=100)
    assert p.target_ps(1) == 24 * US
    assert p.target_ps(0.25) == 24 * US  # below one packet: the window's floor
    assert p.target_ps(100) == 4 * US
    assert p.target_ps(400) == 4 * US
    # 25 packets: alpha = 20 / (1 - 1/10) us, extra = alpha * (1/5 - 1/10) = 20/9 us
    assert p.target_ps(25) == ps(4e-6 + 20e-6 / 9)
    assert SrdParams(flow_scaling_s=0).target_ps(1) == ps(SrdParams().target_delay_s)


@given(st.floats(1, 1000), st.floats(1, 1000))
def test_the_target_never_grows_with_the_window(a, b):
    p = SrdParams()
    lo, hi = sorted((a, b))
    assert p.target_ps(lo) >= p.target_ps(hi)
    assert ps(p.target_delay_s) <= p.target_ps(hi) <= ps(p.target_delay_s + p.flow_scaling_s)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"flow_scaling_s": -1e-6}, "flow_scaling_s"),
        ({"flow_scaling_s": math.nan}, "flow_scaling_s"),
        ({"flow_scaling_s": math.inf}, "flow_scaling_s"),
        ({"flow_scaling_window": 1.0}, "flow_scaling_window"),
    ],
)
def test_bad_scaling_settings_are_refused_by_name(kwargs, field):
    with pytest.raises(ClusterSimError, match=field) as err:
        SrdParams(**kwargs)
    assert err.value.field == field


def _flow(params: SrdParams) -> SrdFlow:
    topo = leaf_spine(Network(Environment(1)), fabric_for("srd", Scenario()), hosts_per_leaf=1, num_paths=2)
    return SrdFlow(topo, 0, 1, [8192], params)


@pytest.mark.parametrize(("scaling_s", "grows"), [(20e-6, True), (0.0, False)])
def test_at_one_packet_a_queue_above_the_base_target_but_under_the_scaled_one_no_longer_cuts(scaling_s, grows):
    """10 us of queue it cannot drain: the fixed 4 us target holds the window at its floor of one
    packet; the scaled one (24 us at one packet) lets it grow by 1/cwnd per ACK."""
    flow = _flow(SrdParams(flow_scaling_s=scaling_s))
    flow.cwnd = 1.0
    flow._on_rtt(0, 0, 20 * US)  # the base round trip
    flow.cwnd = 1.0
    for k in range(1, 5):
        flow._on_rtt(k * 40 * US, 0, 30 * US)  # each a round trip apart: a cut may happen every time
    assert flow.cwnd == (pytest.approx(1 + 1 + 1 / 2 + 1 / 2.5 + 1 / 2.9, rel=1e-3) if grows else 1.0)


def _srd_throughput(background: float, scaling_s: float) -> tuple[float, float]:
    """Throughput over the last 10 of 20 messages of 256 KiB (the first ride the initial window) and
    the final window."""
    env = Environment(1)
    net = Network(env)
    scenario = Scenario(background=background)
    topo = leaf_spine(net, fabric_for("srd", scenario), hosts_per_leaf=1, num_paths=16)
    sizes = [256 << 10] * 20
    flow = SrdFlow(topo, 0, 1, sizes, SrdParams(flow_scaling_s=scaling_s))
    for port in topo.fabric_ports:
        net.start_background(port, background)
    env.run()
    return sum(sizes[10:]) * 8 / (sum(flow.completions_ps[10:]) / 1e12), flow.cwnd


def test_srd_at_90_percent_background_takes_more_than_one_paths_leftover_where_a_fixed_target_starved():
    """Background at 90% of every spine port leaves 10 Gbit/s on each of the 16 paths (160 Gbit/s
    spare, the NIC's 100 Gbit/s the limit): a single-path transport can get about 10, and SRD, which
    sprays over all 16, must get more. With the fixed 4 us target (no scaling) the background's own
    queue, about 13 us per round trip, holds its window near one packet and its throughput under half of that."""
    leftover = (1 - 0.9) * 100e9
    scaled, scaled_cwnd = _srd_throughput(0.9, SrdParams().flow_scaling_s)
    fixed, fixed_cwnd = _srd_throughput(0.9, 0.0)
    assert scaled > leftover
    assert fixed < 0.5 * leftover
    assert scaled_cwnd > 3 > fixed_cwnd

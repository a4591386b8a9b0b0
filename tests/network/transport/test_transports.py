"""SRD-, RC- and TCP-like transports: closed-form timing without loss, and the issue's checks by
construction (line rate, loss sensitivity, paths and tails, timeouts in the tail, seeded repeats)."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.experiments import Scenario, compare, replace, run_transport
from clustersim.network.transport.flows import ACK_BYTES
from clustersim.network.transport.links import Network
from clustersim.network.transport.rc import RcFlow, RcParams, ecmp_path
from clustersim.network.transport.srd import SrdFlow, SrdParams
from clustersim.network.transport.tcp import TcpParams
from clustersim.network.transport.tcp_sack import tcp_flow
from clustersim.network.transport.topology import FabricSpec, leaf_spine

SPEC = FabricSpec(host_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6)  # 80 ps per byte
SUM_PROP_PS = ps(1.5e-6) + ps(0.5e-6) + ps(0.5e-6) + ps(1.5e-6)  # host-leaf, leaf-spine, spine-leaf, leaf-host


def _one_message(make, size, spec=SPEC, num_paths=1):
    env = Environment(1)
    topo = leaf_spine(Network(env), spec, hosts_per_leaf=1, num_paths=num_paths)
    flow = make(topo, size)
    env.run()
    return flow


def _closed_form_ps(num_packets, wire_bytes):
    """Store and forward over 4 equal-speed hops: the last packet leaves the host after all n, crosses 3
    more hops, and its acknowledgement comes back over 4."""
    s, a = wire_bytes * 80, ACK_BYTES * 80
    return (num_packets + 3) * s + 4 * a + 2 * SUM_PROP_PS


def test_srd_message_time_is_the_store_and_forward_closed_form():
    flow = _one_message(lambda topo, m: SrdFlow(topo, 0, 1, [m]), 32 * 8192)
    assert flow.completions_ps == [_closed_form_ps(32, 8192 + 84)]
    assert flow.retransmissions == 0


def test_rc_message_time_is_the_store_and_forward_closed_form():
    flow = _one_message(lambda topo, m: RcFlow(topo, 0, 1, [m]), 64 * 4096)
    assert flow.completions_ps == [_closed_form_ps(64, 4096 + 82)]


def test_tcp_with_an_open_window_and_no_kernel_meets_the_closed_form():
    flow = _one_message(lambda topo, m: tcp_flow(topo, 0, 1, [m], TcpParams(initial_window=1000)), 30 * 8949)
    assert flow.completions_ps == [_closed_form_ps(30, 8949 + 90)]


def test_tcp_slow_start_makes_the_first_message_slower_than_an_open_window():
    slow = _one_message(lambda topo, m: tcp_flow(topo, 0, 1, [m]), 200 * 8949)
    fast = _one_message(lambda topo, m: tcp_flow(topo, 0, 1, [m], TcpParams(initial_window=1000)), 200 * 8949)
    assert slow.completions_ps[0] > fast.completions_ps[0]


@pytest.mark.parametrize(
    ("make", "payload", "header"),
    [
        (lambda topo, sizes: SrdFlow(topo, 0, 1, sizes), 8192, 84),
        (lambda topo, sizes: RcFlow(topo, 0, 1, sizes), 4096, 82),
        (lambda topo, sizes: tcp_flow(topo, 0, 1, sizes, TcpParams(initial_window=1000)), 8949, 90),
    ],
)
def test_every_transport_reaches_line_rate_less_headers_on_one_clean_path(make, payload, header):
    """The marginal rate of a long message (extra bytes over extra time) is the line rate less headers."""
    short = _one_message(lambda topo, m: make(topo, [m]), 100 * payload).completions_ps[0]
    long = _one_message(lambda topo, m: make(topo, [m]), 300 * payload).completions_ps[0]
    rate = 200 * payload * 8 / ((long - short) / 1e12)
    assert rate == pytest.approx(100e9 * payload / (payload + header), rel=1e-9)


def test_go_back_n_rc_throughput_falls_faster_with_loss_than_srd():
    """RC as older NICs run it (go-back-N, a 67 ms timeout) on drop-tail links."""
    base = Scenario(
        message_bytes=256 << 10,
        num_messages=20,
        num_paths=4,
        tcp_kernel=False,
        rc_flow_control="none",
        rc_recovery="go-back-n",
        rc_timeout_exponent=14,
    )
    clean = {r.transport: r.throughput_bits_per_s for r in compare(base, ("srd", "rc"))}
    lossy = {r.transport: r.throughput_bits_per_s for r in compare(replace(base, loss=0.01), ("srd", "rc"))}
    assert lossy["rc"] / clean["rc"] < lossy["srd"] / clean["srd"] < 1


def test_more_paths_never_raise_srd_tail_latency_in_an_uncongested_fabric():
    p99 = [
        run_transport("srd", Scenario(message_bytes=64 << 10, num_messages=50, num_paths=n, background=0.3)).p99_s
        for n in (1, 2, 4, 8)
    ]
    # One seeded realization of Poisson background: p99 of 50 messages carries ~1% of sampling noise
    # (other seeds rise by up to 0.3 us between 2 and 4 or 4 and 8 paths, the old shared random stream
    # included), so "never raises" is checked to within that noise, and the gain from 1 to 8 strictly.
    assert all(later <= earlier * 1.01 for earlier, later in itertools.pairwise(p99))
    assert p99[-1] < 0.95 * p99[0]


@pytest.mark.parametrize(
    ("make", "rto_s"),
    [
        (lambda topo, sizes: SrdFlow(topo, 0, 1, sizes, SrdParams(rto_s=50e-6)), 50e-6),
        (lambda topo, sizes: RcFlow(topo, 0, 1, sizes, RcParams(timeout_exponent=8)), 4.096e-6 * 2**8),
        (lambda topo, sizes: tcp_flow(topo, 0, 1, sizes, TcpParams(recovery="newreno")), 0.2),
    ],
)
def test_a_retransmission_timeout_shows_in_a_message_time_exactly_when_one_fired(make, rto_s):
    env = Environment(5)
    topo = leaf_spine(Network(env), replace(SPEC, loss=0.03), hosts_per_leaf=1, num_paths=2)
    flow = make(topo, [4 * 8192] * 60)
    env.run()
    assert any(flow.message_timeouts), "the seed should make at least one timeout"
    assert not all(flow.message_timeouts)
    for took_ps, timeouts in zip(flow.completions_ps, flow.message_timeouts, strict=True):
        assert (took_ps >= ps(rto_s)) == (timeouts > 0)


def test_results_are_identical_for_a_seed_and_differ_across_seeds():
    scenario = Scenario(message_bytes=64 << 10, num_messages=20, num_paths=4, loss=0.01, background=0.2)
    assert compare(scenario) == compare(scenario)
    assert compare(scenario) != compare(replace(scenario, seed=2))


def test_srd_sprays_and_reorders_while_rc_keeps_one_path():
    env = Environment(1)
    topo = leaf_spine(Network(env), replace(SPEC, fabric_bits_per_s=50e9), hosts_per_leaf=1, num_paths=4)
    srd = SrdFlow(topo, 0, 1, [64 * 8192])
    env.run()
    used = {p for p in range(4) if any(topo.net.busy_until[port] for port in topo.path_ports(p))}
    assert used == {0, 1, 2, 3}
    assert srd.packets_sent == 64
    assert (
        RcFlow(
            leaf_spine(Network(Environment()), SPEC, hosts_per_leaf=1, num_paths=8), 0, 1, [1], RcParams(path=3)
        ).path
        == 3
    )


def test_ecmp_hash_spreads_flows_over_paths_and_depends_on_the_seed():
    paths = [ecmp_path(flow, 16, seed=0) for flow in range(1600)]
    counts = [paths.count(p) for p in range(16)]
    assert min(counts) > 60 and max(counts) < 140
    assert paths != [ecmp_path(flow, 16, seed=1) for flow in range(1600)]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: RcParams(timeout_exponent=32), "timeout_exponent: 32"),
        (lambda: SrdParams(rto_s=0), "rto_s"),
        (lambda: TcpParams(initial_window=0), "initial_window: 0"),
        (lambda: Scenario(loss=1.5), "loss: 1.5"),
        (lambda: Scenario(num_paths=0), "num_paths: 0"),
    ],
)
def test_bad_settings_are_refused_by_name(build, match):
    with pytest.raises(ClusterSimError, match=match):
        build()


def test_a_flow_needs_messages_of_at_least_a_byte():
    topo = leaf_spine(Network(Environment()), SPEC, hosts_per_leaf=1)
    with pytest.raises(ClusterSimError, match="message size 0"):
        SrdFlow(topo, 0, 1, [0])


def test_srd_steers_away_from_a_path_an_elephant_loads():
    env = Environment(2)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=4)
    for port in topo.path_ports(0):
        topo.net.start_background(port, 0.9)
    flow = SrdFlow(topo, 0, 1, [64 * 8192] * 10)
    env.run()
    assert sum(flow.path_packets) == flow.packets_sent
    assert flow.path_packets[0] < 0.5 * min(flow.path_packets[1:])


@given(
    seed=st.integers(0, 10_000),
    loss=st.floats(0.0, 0.05),
    transport=st.sampled_from(["srd", "rc", "tcp"]),
    packets=st.integers(1, 12),
)
@settings(max_examples=25, deadline=None)
def test_every_message_arrives_and_loss_never_makes_it_faster(seed, loss, transport, packets):
    """On one path a loss can only add a retransmission's delay. (With several paths it need not:
    a lost ACK changes which paths SRD's congestion-aware choice takes next, and that run may end
    sooner, so the multipath runs are checked for delivery only.)"""
    one_path = Scenario(message_bytes=packets * 4096, num_messages=3, num_paths=1, seed=seed, tcp_kernel=False)
    clean = run_transport(transport, one_path)
    lossy = run_transport(transport, replace(one_path, loss=loss))
    assert clean.num_messages == lossy.num_messages == 3
    assert clean.retransmissions == 0
    assert lossy.p50_s >= clean.p50_s * (1 - 1e-12)
    assert lossy.throughput_bits_per_s <= clean.throughput_bits_per_s * (1 + 1e-12)
    multipath = run_transport(transport, replace(one_path, num_paths=3, loss=loss))
    assert multipath.num_messages == 3

"""The SRD sender's and receiver's bookkeeping, pinned where the transport_srd mutation run found it unpinned
(benchmarks/mutation.py): a message's short last packet, RFC 6298's estimate sample by sample, the delay-based
window at and one picosecond beside its target, the first burst, spraying over two paths and probing four,
out-of-order arrivals, the window's accounting through real losses, a host stack's fixed cost in the base round
trip, and the steady-incast experiment's refusals, fairness index and units.

What the recheck leaves (83 of srd.py's and steady_incast.py's mutants) is equivalent or unreachable in the
topologies the package builds: state that ``post`` sets again for every message (the constructor's acknowledgement,
attempt and path lists and counters), sentinels read only by their sign (-1 or -2: no timer, no path, no cut,
nothing seen), an acknowledgement flag read only as true, attempt bits that the acknowledgement's path field masks
off, bounds no packet reaches (an index equal to the message's length, a bandwidth-delay product under two packets,
a smoothed RTT under 2 ps), ties that both branches treat alike, the steady incast's seeds on one path (no ECMP
choice), its spine at one or N times the host speed (the same bottleneck speed), a transport name other than
"tcp" for the fabric, and picosecond rounding of 1e12 + 1. Two are not equivalent and not pinned: an expired
packet's path marked +1 instead of -1 frees the window twice only if its late acknowledgement arrives while its
resend still waits behind a full window, and ``break`` for ``continue`` on an acknowledged resend postpones the
next send to the flow's next event."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.flows import ACK_BYTES, DATA
from clustersim.network.transport.links import Network, PortSpec
from clustersim.network.transport.lossless import LosslessSpec
from clustersim.network.transport.srd import SrdFlow, SrdParams, base_rtt_ps
from clustersim.network.transport.steady_incast import SteadyIncast, steady_incast
from clustersim.network.transport.topology import FabricSpec, leaf_spine

SPEC = FabricSpec(host_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6, buffer_bytes=1_000_000)
HEADER = SrdParams().header_bytes
FULL = SrdParams().payload_bytes + HEADER


def _flow(sizes: list[int], params: SrdParams | None = None, *, paths: int = 2, spec: FabricSpec = SPEC) -> SrdFlow:
    net = Network(Environment(1))
    return SrdFlow(leaf_spine(net, spec, hosts_per_leaf=1, num_paths=paths), 0, 1, sizes, params)


def _run(flow: SrdFlow) -> SrdFlow:
    flow.env.run()
    assert flow.done_ps is not None
    return flow


def _idle_rtt(flow: SrdFlow, wire_bytes: int) -> int:
    return base_rtt_ps(flow.topo, flow.routes[0], flow.back_routes[0], wire_bytes)


# --- a message's last packet carries only what is left --------------------------------------------------


def test_a_message_shorter_than_a_packet_crosses_as_one_short_packet():
    flow = _run(_flow([100]))
    assert flow.packets_sent == 1
    assert flow.completions_ps == [_idle_rtt(flow, 100 + HEADER)]
    assert flow.completions_ps[0] < _idle_rtt(flow, FULL)


def test_a_message_of_a_packet_and_a_bit_ends_with_a_short_packet():
    """On one path the short second packet trails the first through every port and is acknowledged one short
    packet's serialisation (80 ps a byte at 100 Gbit/s) after the first packet's round trip."""
    flow = _run(_flow([8192 + 100], paths=1))
    assert flow.packets_sent == 2
    assert flow.completions_ps == [_idle_rtt(flow, FULL) + (100 + HEADER) * 80]
    whole = _run(_flow([2 * 8192], paths=1))
    assert whole.completions_ps == [_idle_rtt(whole, FULL) + FULL * 80]


# --- the round-trip estimate and the delay-based window ---------------------------------------------------


def test_the_rto_follows_rfc_6298_sample_by_sample():
    flow = _flow([FULL], SrdParams(queue_aware_rto=False, rto_s=1e-12, flow_scaling_s=0.0))
    flow._on_rtt(10**9, 0, 100_000)
    assert flow.rto_ps == 100_000 + 4 * 50_000  # first sample: srtt = R, rttvar = R / 2
    flow._on_rtt(10**9, 0, 60_000)  # |deviation| 40,000: rttvar 50,000 + (40,000 - 50,000) / 4
    assert flow.rto_ps == (95_000 + 4 * 47_500)


def test_a_deviation_of_one_picosecond_counts_as_one():
    flow = _flow([FULL], SrdParams(queue_aware_rto=False, rto_s=1e-12, flow_scaling_s=0.0))
    flow._on_rtt(10**9, 0, 1000)
    flow._on_rtt(10**9, 0, 999)
    assert flow.rto_ps == int(999.875 + 4 * (500 + (1 - 500) / 4))


def _window_flow(**overrides: int) -> SrdFlow:
    params = SrdParams(queue_aware_rto=False, flow_scaling_s=0.0, bdp_initial_window=False, **overrides)
    return _flow([FULL], params)


def test_the_window_grows_below_and_at_the_target_and_is_cut_one_picosecond_above():
    flow = _window_flow(initial_window=10)
    base, target = 10_000_000, flow.target_ps
    flow._on_rtt(10**9, 0, base)  # the first sample is the base: no queueing, grow by 1 / cwnd
    assert flow.cwnd == pytest.approx(10.1)
    grown = flow.cwnd
    flow._on_rtt(10**9, 0, base + target)  # exactly the target: still grows
    assert flow.cwnd == pytest.approx(grown + 1 / grown)
    grown = flow.cwnd
    flow._on_rtt(10**9, 0, base + target + 1)  # one picosecond over: cut in proportion to the excess
    assert flow.cwnd == grown * (1 - 0.5 * 1 / (base + target + 1))


def test_the_window_stops_at_its_maximum():
    flow = _window_flow(initial_window=2, max_window=2)
    flow._on_rtt(10**9, 0, 10_000_000)
    assert flow.cwnd == 2.0


def test_cuts_are_spaced_by_more_than_one_base_round_trip():
    flow = _window_flow(initial_window=50)
    base = 10_000_000
    flow._on_rtt(10**9, 0, base)
    high = base + 4 * flow.target_ps
    flow._on_rtt(2 * 10**9, 0, high)
    once = flow.cwnd
    assert once < 50
    flow._on_rtt(2 * 10**9 + base, 0, high)  # exactly one base round trip later: not yet
    assert flow.cwnd == once
    flow._on_rtt(2 * 10**9 + base + 1, 0, high)
    assert flow.cwnd < once


# --- sending ----------------------------------------------------------------------------------------------


def test_the_first_burst_is_exactly_the_window():
    flow = _flow([100 * 8192])
    window = flow.cwnd
    assert window == 17  # one bandwidth-delay product (tests/network/transport/test_srd_incast.py)
    flow.env.run(until_ps=1)
    assert flow.packets_sent == window and flow._inflight == window


def test_two_paths_both_carry_packets():
    flow = _run(_flow([40 * 8192]))
    assert flow.num_paths == 2 and all(n > 0 for n in flow.path_packets)
    assert sum(flow.path_packets) == flow.packets_sent == 40


def test_a_path_is_chosen_among_the_next_four_only():
    flow = _flow([FULL], paths=8)
    flow.path_inflight[:] = [5, 5, 5, 5, 0, 5, 5, 5]
    assert flow._choose_path() == 0  # paths 0-3 weighed, all equal: the first; the idle path 4 is beyond
    assert flow._rr == 1
    flow._rr = 2
    assert flow._choose_path() == 4  # paths 2-5 weighed
    assert flow._rr == 5


# --- the receiver -----------------------------------------------------------------------------------------


def test_arrivals_below_the_highest_seen_are_counted_out_of_order_once_each():
    flow = _flow([10 * 8192])
    for seq in (0, 2, 1, 2, 3, 6, 4, 5):  # 1, 4 and 5 arrive after a higher one; the second 2 is a duplicate
        flow.on_data(0, (flow.flow, DATA, seq, FULL, flow.routes[0], 0, 0))
    assert flow.out_of_order == 3


# --- losses -------------------------------------------------------------------------------------------------


def test_the_window_accounting_balances_through_real_losses():
    """Messages long enough that the window is still full when a lost packet's timer fires."""
    flow = _run(_flow([1000 * 8192] * 2, spec=replace(SPEC, loss=0.01)))
    assert flow.timeouts > 0 and flow.retransmissions == flow.timeouts
    assert flow._inflight == 0 and flow.path_inflight == [0, 0]
    assert flow.packets_sent == 2 * 1000 + flow.retransmissions


def test_the_window_accounting_balances_through_spurious_timeouts():
    """A 5 us timer with no queue-aware floor fires on the first window's packets, only queued (the round trip
    is 10 us): their late acknowledgements must not free the window a second time."""
    params = SrdParams(rto_s=5e-6, queue_aware_rto=False, bdp_initial_window=False)
    flow = _run(_flow([1000 * 8192], params))
    assert flow.timeouts >= 64 and sum(flow.net.drops) == sum(flow.net.losses) == 0  # every timeout spurious
    assert flow._inflight == 0 and flow.path_inflight == [0, 0]


# --- the base round trip ------------------------------------------------------------------------------------


def test_a_host_stacks_fixed_cost_is_paid_once_each_way():
    stack = PortSpec(400e9, 0.0, per_packet_s=2e-6)
    plain, stacked = _flow([FULL]), _flow([FULL], spec=replace(SPEC, host_stack=stack))
    # two stack ports each way (the sender's and the receiver's), each its fixed 2 us and 20 ps a byte
    extra = 2 * 2 * ps(2e-6) + 2 * (FULL + ACK_BYTES) * 20
    assert _idle_rtt(stacked, FULL) - _idle_rtt(plain, FULL) == extra


# --- the steady incast experiment ---------------------------------------------------------------------------


def test_jains_index_of_unequal_rates():
    assert SteadyIncast(2, 40e9, (3.0, 1.0), 0, 0.0, 1).jain == pytest.approx(0.8)  # 16 / (2 x 10)
    assert SteadyIncast(3, 40e9, (1.0, 1.0, 1.0), 0, 0.0, 1).jain == pytest.approx(1.0)


def test_a_lone_sender_with_no_warm_up_is_a_valid_incast_and_its_units_are_seconds():
    found = steady_incast(1, warmup_s=0.0, window_s=0.001)
    assert found.line_bits_per_s == 40e9 and found.senders == 1
    assert found.num_events > 0 and found.paused_s == 0.0
    assert 0.9 * 40e9 * 8192 / FULL <= found.per_sender_bits_per_s[0] <= 40e9


def test_an_eight_way_incast_pauses_for_a_fraction_of_the_run():
    found = steady_incast(8, warmup_s=0.001, window_s=0.001)
    assert 0.0 < found.paused_s < 0.002 * 64  # seconds, summed over far fewer than 64 ports
    assert found.cuts > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"senders": 0}, "senders 0 >= 1"),
        ({"senders": 4, "warmup_s": -1.0}, "warmup_s -1.0 >= 0"),
        ({"senders": 4, "window_s": 0.0}, "window_s 0.0 > 0"),
    ],
)
def test_settings_out_of_range_are_refused_naming_the_senders(kwargs, message):
    with pytest.raises(ClusterSimError, match=message) as refused:
        steady_incast(**kwargs)
    assert refused.value.field == "senders" and refused.value.value == kwargs["senders"]


@pytest.mark.parametrize("marking", [LosslessSpec(mode="credit"), LosslessSpec(mode="pfc", ecn=False)])
def test_dcqcn_needs_pfc_links_that_mark(marking):
    with pytest.raises(ClusterSimError) as refused:
        steady_incast(4, marking=marking)
    assert str(refused.value) == (
        "steady incast: DCQCN runs over PFC links that mark ECN (marking.mode pfc, marking.ecn True)"
    )
    assert refused.value.field == "marking" and refused.value.value == marking.mode


# --- settings and what a flow is built with ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["payload_bytes", "initial_window", "max_window"])
def test_each_count_setting_is_refused_below_one_and_accepted_at_one(name: str) -> None:
    assert getattr(SrdParams(**{name: 1}), name) == 1
    with pytest.raises(ClusterSimError) as refused:
        SrdParams(**{name: 0})
    assert str(refused.value) == f"{name}: 0 must be at least 1"
    assert (refused.value.field, refused.value.value) == (name, 0)


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"rto_s": 0.0}, "rto_s", "rto_s: 0.0 must be > 0 s"),
        ({"flow_scaling_s": -1e-6}, "flow_scaling_s", "flow_scaling_s: -1e-06 must be a finite number >= 0 s"),
        ({"flow_scaling_window": 1.0}, "flow_scaling_window", "flow_scaling_window: 1.0 must be > 1 packet"),
    ],
)
def test_time_settings_out_of_range_are_refused_by_name_and_value(kwargs, field, message) -> None:
    with pytest.raises(ClusterSimError) as refused:
        SrdParams(**kwargs)
    assert str(refused.value) == message
    assert (refused.value.field, refused.value.value) == (field, kwargs[field])


def test_a_scaling_window_just_above_one_packet_is_accepted() -> None:
    assert SrdParams(flow_scaling_window=1.5).target_ps(1.0) == ps(4e-6 + 20e-6)


def test_num_paths_caps_the_spray_and_zero_is_refused() -> None:
    flow = _run(_flow([40 * 8192], SrdParams(num_paths=1)))
    assert flow.num_paths == 1 and flow.path_packets == [40]
    with pytest.raises(ClusterSimError) as refused:
        _flow([FULL], SrdParams(num_paths=0))
    assert str(refused.value) == "num_paths: 0 must be at least 1"
    assert (refused.value.field, refused.value.value) == ("num_paths", 0)


def test_without_finite_buffers_the_rto_floor_is_the_round_trip() -> None:
    flow = _flow([FULL], SrdParams(rto_s=1e-12), spec=replace(SPEC, buffer_bytes=float("inf")))
    assert flow.min_rto_ps == _idle_rtt(flow, FULL)


def test_the_first_window_is_the_host_links_bandwidth_delay_product() -> None:
    """With switch links four times the host's, the bandwidth-delay product is still the host link's."""
    flow = _flow([FULL], spec=replace(SPEC, fabric_bits_per_s=400e9))
    assert flow.cwnd == -(-_idle_rtt(flow, FULL) // (FULL * 80))


def test_a_flow_posts_its_first_message_at_its_start() -> None:
    start = ps(5e-6)
    net = Network(Environment(1))
    flow = SrdFlow(leaf_spine(net, SPEC, hosts_per_leaf=1, num_paths=2), 0, 1, [100], start_ps=start)
    _run(flow)
    assert flow.done_ps == start + flow.completions_ps[0]


def test_every_packet_but_a_short_last_one_is_a_full_frame() -> None:
    flow = _flow([2 * 8192 + 100])
    flow.env.run(until_ps=1)
    assert [flow.wire_bytes(s) for s in range(3)] == [FULL, FULL, 100 + HEADER]


def test_a_single_path_delivers_in_order() -> None:
    flow = _run(_flow([40 * 8192], paths=1))
    assert flow.out_of_order == 0


def test_the_receivers_contiguous_prefix_waits_for_the_first_packet() -> None:
    flow = _flow([10 * 8192])
    arrive = [1, 2, 0, 4, 3]
    prefix = []
    for seq in arrive:
        flow.on_data(0, (flow.flow, DATA, seq, FULL, flow.routes[0], 0, 0))
        prefix.append(flow._rcv_cum)
    assert prefix == [0, 0, 3, 3, 5]

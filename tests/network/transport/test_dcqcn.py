"""DCQCN (``dcqcn.py``): the reaction point's cuts, alpha and recovery stages, and, end to end over PFC
links with RED marking, two flows on one bottleneck converge to a fair share of it."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.transport.dcqcn import DcqcnParams, DcqcnRate
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.experiments import Scenario, incast
from clustersim.network.transport.lossless import LosslessNetwork, LosslessSpec
from clustersim.network.transport.rc import RcFlow, RcParams
from clustersim.network.transport.topology import FabricSpec, leaf_spine

LINE = 100e9
US = 10**6  # picoseconds


def test_a_cnp_cuts_by_half_alpha_at_most_once_per_period():
    rate = DcqcnRate(DcqcnParams(), LINE)
    assert rate.on_cnp(0)
    alpha = (1 - 5 / 1024) * (1023 / 1024) + 5 / 1024
    assert rate.alpha == pytest.approx(alpha) and rate.rate == pytest.approx(LINE * (1 - alpha / 2))
    assert rate.target == LINE  # the first cut keeps the target (clamp_tgt_rate off)
    assert not rate.on_cnp(3 * US)  # inside the 4 us monitor period: alpha rises, the rate holds
    assert rate.on_cnp(8 * US) and rate.cuts == 2


def test_alpha_decays_by_one_minus_g_each_period_without_cnps():
    rate = DcqcnRate(DcqcnParams(), LINE)
    rate.on_cnp(0)
    before = rate.alpha
    rate.on_cnp(100 * US)
    assert rate.alpha == pytest.approx(before * (1 - 5 / 1024) ** 100 * (1 - 5 / 1024) + 5 / 1024)


def test_recovery_goes_halfway_to_the_target_then_raises_it():
    params = DcqcnParams(threshold=2)
    rate = DcqcnRate(params, LINE)
    rate.on_cnp(0)
    cut = rate.rate
    rate.on_timer()  # fast recovery: the target stays, the rate goes halfway
    assert rate.target == LINE and rate.rate == pytest.approx((LINE + cut) / 2)
    rate.on_cnp(10 * US)  # a cut after a timer increase: the target takes the current rate
    assert rate.target < LINE
    target = rate.target
    for _ in range(2):
        rate.on_timer()
    assert rate.target == pytest.approx(target)  # both counts still below the threshold of 2
    rate.on_timer()  # the timer count reaches 2: additive increase
    assert rate.target == pytest.approx(target + params.ai_bits_per_s)
    rate.on_sent(4 * params.byte_reset_bytes)  # three more additive stages, then both counts past 2: hyper
    assert rate.target == pytest.approx(target + 4 * params.ai_bits_per_s + params.hai_bits_per_s)


@given(cnps=st.lists(st.integers(0, 2000), min_size=1, max_size=60))
@settings(max_examples=40, deadline=None)
def test_the_rate_stays_between_the_floor_and_the_line(cnps):
    params = DcqcnParams()
    rate = DcqcnRate(params, LINE)
    for at in sorted(cnps):
        rate.on_cnp(at * US)
        assert params.min_rate_bits_per_s <= rate.rate <= rate.target <= LINE
        rate.on_sent(4178)
        rate.on_timer()
        assert params.min_rate_bits_per_s <= rate.rate <= LINE and 0 <= rate.alpha <= 1


def _two_flows(dcqcn: bool, seed: int) -> tuple[list[float], int]:
    """Two 16 MiB flows into one 25 Gbit/s receiver, the second 300 us after the first: each flow's
    goodput (Gbit/s) from 2 to 5 ms, and the pause frames sent."""
    spec = FabricSpec(host_bits_per_s=25e9, fabric_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6)
    env = Environment(seed)
    net = LosslessNetwork(env, LosslessSpec(mode="pfc", ecn=dcqcn))
    topo = leaf_spine(net, spec, hosts_per_leaf=2, num_paths=1)
    params = RcParams(dcqcn=DcqcnParams() if dcqcn else None)
    flows = [RcFlow(topo, s, 2, [16 << 20], params, start_ps=ps(s * 300e-6)) for s in range(2)]
    marks: list[list[int]] = []
    for at in (2e-3, 5e-3):
        env.schedule(ps(at), lambda _now, _arg: marks.append([f.snd_una for f in flows]))
    env.run()
    return [(b - a) * 4096 * 8 / 3e-3 / 1e9 for a, b in zip(*marks, strict=True)], net.pause_frames


@pytest.mark.parametrize("seed", [1, 2])
def test_dcqcn_converges_two_flows_to_a_fair_share_with_fewer_pauses(seed):
    goodput, pauses = _two_flows(True, seed)
    fair = 25 * 4096 / 4178 / 2
    assert all(abs(g / fair - 1) < 0.2 for g in goodput), goodput  # within 20% of half the line rate each
    assert sum(goodput) > 0.9 * 2 * fair
    _, pfc_only = _two_flows(False, seed)
    assert pauses < 0.8 * pfc_only  # the senders slow down before the switch has to stop them


def test_bad_dcqcn_settings_are_refused():
    with pytest.raises(ClusterSimError) as error:
        DcqcnParams(g=1.5)
    assert error.value.field == "g" and "in (0, 1)" in str(error.value)


def test_a_rate_rise_shortens_the_gap_the_waiting_packet_was_given():
    """A packet sent at a cut-down rate set the next one's slot far out (at ~3 Mbit/s a 4 KiB packet is
    ~10 ms); when the increase timer raises the rate, the next packet goes at the new rate's gap, as a
    NIC's rate limiter applies a new rate at once (it was held to the old, ~10 ms, gap: issue 23 item 3)."""
    env = Environment(1)
    net = LosslessNetwork(env, LosslessSpec(mode="pfc", ecn=True))
    topo = leaf_spine(net, FabricSpec(host_bits_per_s=LINE), hosts_per_leaf=1, num_paths=1)
    flow = RcFlow(topo, 0, 1, [1 << 20], RcParams(dcqcn=DcqcnParams()))
    assert flow.rate is not None
    for k in range(30):  # a CNP storm: one cut every 5 us, to a few Mbit/s
        flow.rate.on_cnp(k * 5 * US)
    slow = flow.rate.rate
    assert slow < 10e6
    env.run(until_ps=160 * US)  # the flow sends at the cut rate: its next packet waits ~10 ms
    waiting = flow._next_tx_ps
    assert waiting - flow._slot_ps > 5_000 * US
    flow._rate_due_ps = env.now_ps
    events = flow._rate_timer(env.now_ps, None) or []
    assert flow.rate.rate > 1000 * slow  # fast recovery: halfway to the target (the line rate)
    expected = flow._slot_ps + math.ceil(flow._slot_wire * 8e12 / flow.rate.rate)
    assert flow._next_tx_ps == expected < waiting
    assert any(handler == flow._paced for _, _, handler, _ in events)  # the pacer brought forward


def test_dcqcn_incast_finishes_near_pfc_alone():
    """8 senders x 4 x 256 KiB into one 100 Gbit/s NIC (the README's incast): with DCQCN the cut-down
    senders resume at the recovered rate, so the incast takes 1.06 ms against PFC alone's 0.72 (it took
    13 ms, 18x, while each cut-down sender's next packet waited out a gap set at a few Mbit/s)."""
    base = Scenario(message_bytes=256 << 10, num_messages=4, num_paths=16, seed=1)
    dcqcn = incast(replace(base, rc_dcqcn=True), 8, ("rc",))[0].completion_s
    pfc = incast(replace(base, rc_dcqcn=False), 8, ("rc",))[0].completion_s
    assert pfc < dcqcn < 2 * pfc


# NVIDIA's published defaults (DOCA SDK documentation, "DCQCN CC Parameters", ConnectX-4 and later:
# https://networking-docs.nvidia.com/doca/archive/3-4-0/dcqcn-cc-parameters): dce_tcp_g 1019 (fixed point,
# 10 fraction bits), dce_tcp_rtt 1 us, initial_alpha_value 1023, rpg_min_rate 1 Mb/s, the period between
# rate reductions 4 us, rpg_min_dec_fac 50 % (one cut keeps at least half the rate) and rpg_gd 11 (2.0 in
# fixed point: the cut is alpha / 2)
def test_the_defaults_are_nvidias_published_ones():
    params = DcqcnParams()
    assert params.g == pytest.approx((1024 - 1019) / 1024)
    assert params.alpha_period_s == pytest.approx(1e-6)
    assert params.initial_alpha == pytest.approx(1023 / 1024)
    assert params.min_rate_bits_per_s == pytest.approx(1e6)
    assert params.reduce_period_s == pytest.approx(4e-6)


@given(cnps=st.lists(st.integers(0, 400), min_size=1, max_size=40))
@settings(max_examples=40, deadline=None)
def test_one_cut_keeps_at_least_half_the_rate(cnps):
    """rpg_min_dec_fac 50 with rpg_gd 11: a cut is rate x (1 - alpha / 2), alpha <= 1."""
    rate = DcqcnRate(DcqcnParams(), LINE)
    for at in sorted(cnps):
        before = rate.rate
        if rate.on_cnp(at * US):
            assert rate.rate >= max(DcqcnParams().min_rate_bits_per_s, 0.5 * before) * (1 - 1e-12)

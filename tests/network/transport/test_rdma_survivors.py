"""Tests that kill what mutation testing of ``transport_rdma`` (DCQCN's rate machine, the lossless links' settings and
their RED marking; benchmarks/mutation.py) left alive: each setting's refusal names it and its value and accepts the
edge of its range, and the rate machine's edges (a cut exactly one reduce period after the last, the paper's clamped
target, one byte stage, a recovery that ends at the line rate exactly) hold.

Equivalent mutants left alive: a new rate machine's counters starting at 1 (the first cut resets them, and until it
the rate is at the line, where neither counter is read); alpha's decay over zero periods (a factor of 1); the snap to
the line at exactly 0.1% short (a rate never lands there); a background packet's flow, sequence and stamp fields
(nothing reads them: its route ends at its port); the placeholder ``_send`` and hop handlers the constructor replaces
before any packet runs; falsy ``None`` for ``False`` in the ports' flags; the base network's ``inline`` and ``solo``
flags (the lossless inner loop reads neither); a port's pause start before its first pause (set by the pause); the
background warm-up's first arrival and busy time at 1 ps instead of 0. A woken background's queue is topped up to the
warm backlog less what it still holds (the last test)."""

from __future__ import annotations

import math

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.dcqcn import DcqcnParams, DcqcnRate
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.links import PortSpec
from clustersim.network.transport.lossless import MTU_FRAME_BYTES, LosslessNetwork, LosslessSpec
from clustersim.network.transport.rc import RcFlow
from clustersim.network.transport.topology import FabricSpec, leaf_spine

LINE = 100e9


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        ("g", 0.0, "in (0, 1)"),
        ("g", 1.0, "in (0, 1)"),
        ("alpha_period_s", 0.0, "> 0 s"),
        ("initial_alpha", -0.01, "in [0, 1]"),
        ("initial_alpha", 1.01, "in [0, 1]"),
        ("time_reset_s", 0.0, "> 0 s"),
        ("byte_reset_bytes", 0, "at least 1 byte"),
        ("threshold", -1, "0 or more"),
        ("min_rate_bits_per_s", 0.0, "> 0"),
        ("cnp_interval_s", -1e-6, ">= 0 s"),
    ],
)
def test_a_dcqcn_setting_out_of_range_is_refused_by_name_and_value(name: str, value: float, valid: str) -> None:
    with pytest.raises(ClusterSimError) as caught:
        DcqcnParams(**{name: value})  # type: ignore[arg-type]
    assert str(caught.value) == f"dcqcn {name}: {value!r} is out of range (valid: {valid})"
    assert (caught.value.field, caught.value.value) == (name, value)


def test_the_edges_of_each_dcqcn_range_are_accepted() -> None:
    params = DcqcnParams(
        g=1e-9, alpha_period_s=1e-12, initial_alpha=0.0, time_reset_s=1e-12, byte_reset_bytes=1, threshold=0,
        min_rate_bits_per_s=1e-9, cnp_interval_s=0.0,
    )  # fmt: skip
    assert params.threshold == 0 and DcqcnParams(initial_alpha=1.0).initial_alpha == 1.0
    assert DcqcnParams(min_rate_bits_per_s=0.5).min_rate_bits_per_s == 0.5  # a rate below 1 bit/s is still a rate


def test_a_cnp_exactly_one_reduce_period_after_a_cut_cuts_again() -> None:
    rate = DcqcnRate(DcqcnParams(), LINE)
    assert rate.on_cnp(0)
    assert not rate.on_cnp(ps(4e-6) - 1)  # inside the period: alpha rises, the rate holds
    assert rate.on_cnp(ps(4e-6)) and rate.cuts == 2


def test_the_paper_s_clamp_sets_the_target_at_every_cut() -> None:
    """With clamp_target each cut takes the current rate as the target; without it a cut that follows a cut with no
    increase between keeps the target where it was (ConnectX's default)."""
    clamped, default = DcqcnRate(DcqcnParams(clamp_target=True), LINE), DcqcnRate(DcqcnParams(), LINE)
    for rate in (clamped, default):
        rate.on_cnp(0)
    after_first = clamped.rate
    for rate in (clamped, default):
        rate.on_cnp(ps(4e-6))
    assert clamped.target == after_first < LINE
    assert default.target == LINE


def test_one_byte_stage_before_a_cut_makes_the_rate_the_target() -> None:
    params = DcqcnParams()
    rate = DcqcnRate(params, LINE)
    rate.on_cnp(0)
    rate.on_sent(params.byte_reset_bytes // 2)
    rate.on_sent(params.byte_reset_bytes - params.byte_reset_bytes // 2)  # two sends make one stage together
    assert rate.byte_count == 1
    before = rate.rate
    rate.on_cnp(ps(4e-6))
    assert rate.target == before


def test_a_recovery_ends_at_the_line_rate_exactly() -> None:
    """Each timer stage halves the distance to the target (raised by the additive and hyper steps): within 0.1% of
    the line the rate snaps to it, and the machine reports it is at line rate, not one step short forever."""
    rate = DcqcnRate(DcqcnParams(), LINE)
    rate.on_cnp(0)
    assert not rate.at_line_rate
    seen = []
    for _ in range(10_000):
        if rate.at_line_rate:
            break
        rate.on_timer()
        seen.append(rate.rate)
    assert rate.rate == LINE and rate.at_line_rate
    assert all(LINE - r >= 1e-3 * LINE for r in seen[:-1])  # no stage stops within 0.1% of the line short of it
    rate.on_sent(10 * DcqcnParams().byte_reset_bytes)  # at the line, bytes sent count no stage
    assert rate.byte_count == 0


@pytest.mark.parametrize(
    ("spec", "field", "message", "value"),
    [
        ({"mode": "none"}, "flow_control", "flow control: 'none' is not lossless (valid: pfc, credit)", "none"),
        (
            {"xoff_bytes": 2 * MTU_FRAME_BYTES - 1},
            "xoff_bytes",
            f"xoff_bytes: {2 * MTU_FRAME_BYTES - 1} is below two frames ({2 * MTU_FRAME_BYTES} B)",
            2 * MTU_FRAME_BYTES - 1,
        ),
        ({"xon_bytes": -1}, "xon_bytes", "xon_bytes: -1 must be in [0, xoff_bytes 100000)", -1),
        ({"xon_bytes": 100_000}, "xon_bytes", "xon_bytes: 100000 must be in [0, xoff_bytes 100000)", 100_000),
        (
            {"kmin_bytes": -1},
            "ecn",
            "ecn: kmin -1 < kmax 200000 and pmax 0.01 in (0, 1] are needed",
            (-1, 200_000, 0.01),
        ),
        (
            {"kmin_bytes": 200_000},
            "ecn",
            "ecn: kmin 200000 < kmax 200000 and pmax 0.01 in (0, 1] are needed",
            (200_000, 200_000, 0.01),
        ),
        (
            {"credit_bytes": MTU_FRAME_BYTES - 1},
            "credit_bytes",
            f"credit_bytes: {MTU_FRAME_BYTES - 1} is below one frame ({MTU_FRAME_BYTES} B): no full packet could ever "
            "cross the link",
            MTU_FRAME_BYTES - 1,
        ),
        ({"headroom_bytes": -1}, "headroom_bytes", "headroom_bytes: -1 must be 0 or more", -1),
        ({"pmax": 0.0}, "ecn", "ecn: kmin 5000 < kmax 200000 and pmax 0.0 in (0, 1] are needed", (5000, 200_000, 0.0)),
        ({"pmax": 1.5}, "ecn", "ecn: kmin 5000 < kmax 200000 and pmax 1.5 in (0, 1] are needed", (5000, 200_000, 1.5)),
    ],
)
def test_a_lossless_setting_out_of_range_is_refused_by_name_and_value(spec, field, message, value) -> None:
    with pytest.raises(ClusterSimError) as caught:
        LosslessSpec(**spec)
    assert str(caught.value) == message
    assert (caught.value.field, caught.value.value) == (field, value)


def test_the_edges_of_each_lossless_range_are_accepted_and_resume_defaults_two_frames_below_pause() -> None:
    edge = LosslessSpec(xoff_bytes=2 * MTU_FRAME_BYTES, xon_bytes=0, kmin_bytes=0, kmax_bytes=1, pmax=1.0)
    assert edge.xon == 0
    assert LosslessSpec(xon_bytes=99_999).xon == 99_999
    assert LosslessSpec().xon == 100_000 - 2 * MTU_FRAME_BYTES


def test_a_credit_link_holding_exactly_one_frame_of_credit_still_sends() -> None:
    """A full RC packet is one frame on the wire: credit for exactly one lets the link send one at a time, and every
    credit comes back."""
    env = Environment(1)
    net = LosslessNetwork(env, LosslessSpec(mode="credit", credit_bytes=MTU_FRAME_BYTES))
    spec = FabricSpec(host_bits_per_s=LINE, fabric_bits_per_s=4 * LINE, host_latency_s=1e-6, hop_latency_s=0.5e-6)
    topo = leaf_spine(net, spec, hosts_per_leaf=1, num_paths=1)
    flow = RcFlow(topo, 0, 1, [64 << 10])
    env.run()
    assert flow.done_ps is not None and flow.failure is None
    assert net.credits == [MTU_FRAME_BYTES] * len(net.credits)


class _Draws:
    """A marking stream that returns the given uniform draws."""

    def __init__(self, *draws: float) -> None:
        self.draws = list(draws)

    def uniform(self) -> float:
        return self.draws.pop(0)


def _marking_port(backlog: int, *draws: float, kmin: int = 5_000, kmax: int = 205_000, pmax: float = 0.5):
    net = LosslessNetwork(Environment(seed=0), LosslessSpec(ecn=True, kmin_bytes=kmin, kmax_bytes=kmax, pmax=pmax))
    port = net.add_port(PortSpec(bits_per_s=LINE, propagation_s=1e-6))
    net.backlog_bytes[port] = backlog
    net._ecn_stream[port] = _Draws(*draws)  # type: ignore[assignment]
    return net, port


def test_red_marks_with_a_probability_rising_from_kmin_to_pmax_at_kmax() -> None:
    """Kmin 5 KB, Kmax 205 KB, Pmax 0.5: nothing at or below Kmin, everything at or above Kmax, and halfway between
    them a quarter of the packets (a draw below 0.25 marks, one at 0.25 does not)."""
    net, port = _marking_port(5_000)
    assert not net._marks(port)  # at Kmin: no draw taken
    net, port = _marking_port(205_000)
    assert net._marks(port)  # at Kmax: marked without a draw
    net, port = _marking_port(105_000, 0.2499, 0.25)
    assert net._marks(port) and not net._marks(port)
    net, port = _marking_port(45_000, 0.0999, 0.1001)  # a fifth of the way: p = 0.1
    assert net._marks(port) and not net._marks(port)
    net, port = _marking_port(45_000, 0.0199, 0.0201, kmin=25_000, kmax=125_000, pmax=0.1)  # p = 0.1 x 0.2
    assert net._marks(port) and not net._marks(port)
    assert math.isclose(0.1 * (45_000 - 25_000) / (125_000 - 25_000), 0.02)


def _background_port(buffer_bytes: float = 20_000, packet_bytes: int = 9000, load: float = 0.5):
    net = LosslessNetwork(Environment(seed=0), LosslessSpec())
    port = net.add_port(PortSpec(bits_per_s=LINE, propagation_s=1e-6, buffer_bytes=buffer_bytes))
    net.start_background(port, load, packet_bytes)
    net.sending[port] = True  # the transmitter is busy: what is queued stays queued
    return net, port, net._bg_at[port]


def test_background_fills_the_port_s_buffer_and_counts_each_packet_that_does_not_fit():
    """A 20,000-byte buffer holds two 9,000-byte background packets (18,000 bytes); the third and fourth are dropped
    one count each; a 2,000-byte packet then fits exactly (20,000 bytes)."""
    net, port, background = _background_port()
    assert background.buffer_bytes == pytest.approx(20_000, rel=1e-6)  # the port's buffer, in bytes
    for _ in range(4):
        background._enqueue(0)
    assert (net.backlog_bytes[port], background.queued, net.bg_drops) == (18_000, 2, 2)
    assert len(net.queues[port][1]) == 2
    background.size = 2_000
    background._enqueue(0)
    assert (net.backlog_bytes[port], background.queued, net.bg_drops) == (20_000, 3, 2)


def test_background_arrivals_stop_once_no_flow_packet_is_in_the_network():
    net, port, background = _background_port()
    background.running = True
    net.in_flight = 0
    background.arrive(0, None)
    assert background.running is False and net.backlog_bytes[port] == 0  # nothing enqueued, nothing scheduled
    net.in_flight = 1
    background.arrive(0, None)
    assert net.backlog_bytes[port] == 9000 and background.queued == 1


@pytest.mark.parametrize("load", [-0.1, 1.0])
def test_a_background_load_outside_zero_to_one_is_refused(load: float) -> None:
    net = LosslessNetwork(Environment(seed=0), LosslessSpec())
    port = net.add_port(PortSpec(bits_per_s=LINE))
    with pytest.raises(ValueError, match=rf"^background load must be in \[0, 1\), got {load}$"):
        net.start_background(port, load)
    net.start_background(port, 0.0)
    assert port not in net._bg_at  # no load, no background


def test_a_port_s_paused_time_counts_from_its_pause_to_its_resume_only():
    """Paused at 100 ps and resumed at 300: 200 ps; a second pause while paused keeps the first start; a resume
    while running adds nothing; the transmitter restarts on a resume only where it is idle."""
    net = LosslessNetwork(Environment(seed=0), LosslessSpec())
    port = net.add_port(PortSpec(bits_per_s=LINE))
    sent: list[int] = []
    net._send = lambda now_ps, p: sent.append(now_ps)  # type: ignore[method-assign]
    net.sending[port] = True
    net._set_pause(100, (port, True))
    net._set_pause(200, (port, True))
    assert net.paused[port] and net.paused_ps[port] == 0
    net._set_pause(300, (port, False))
    assert not net.paused[port] and net.paused_ps[port] == 200 and sent == []  # busy: nothing to restart
    net._set_pause(400, (port, False))
    assert net.paused_ps[port] == 200
    net.sending[port] = False
    net._set_pause(500, (port, True))
    assert sent == []  # a pause starts nothing
    net._set_pause(600, (port, False))
    assert net.paused_ps[port] == 300 and sent == [600]  # idle: the resume restarts the transmitter


@pytest.mark.parametrize("mode", ["pfc", "credit"])
def test_a_link_drops_above_its_pause_point_and_headroom_under_pfc_and_above_its_credit_otherwise(mode: str) -> None:
    net = LosslessNetwork(Environment(seed=0), LosslessSpec(mode=mode, headroom_bytes=30_000, credit_bytes=50_000))
    port = net.add_port(PortSpec(bits_per_s=LINE, propagation_s=1e-6))
    assert net.limit_bytes[port] == (100_000 + 30_000 if mode == "pfc" else 50_000)
    assert net.credits[port] == 50_000


def test_a_woken_background_tops_its_queue_up_to_the_warm_backlog_counting_what_is_still_queued():
    """Two ports at 95% background load with the same seed, one still holding a background packet from before:
    waking, each ends with the same number queued (the warm backlog's), the second enqueuing one fewer."""
    woken = []
    for held in (0, 1):
        net, port, background = _background_port(buffer_bytes=10**9, load=0.95)
        for _ in range(held):
            background._enqueue(0)
        background.wake(0)
        woken.append((background.queued, net.backlog_bytes[port]))
    assert woken[0][0] >= 1  # a warm backlog of a packet or more: the comparison means something
    assert woken[1] == woken[0]

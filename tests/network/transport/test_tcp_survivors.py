"""Tests that kill what mutation testing of ``transport_tcp`` left alive (benchmarks/mutation.py): NewReno's
retransmission timeout (RFC 6298 and RFC 6582 section 3.2 step 4), its fast retransmit and fast recovery
(RFC 5681 section 3.2, RFC 6582 sections 3.2 and 4.1) at each boundary, the round-trip sample, the
retransmission timer's arming, a lossless message sent exactly once, CUBIC's window (RFC 9438), and the SACK
connection's loss detection (RFC 6675's DupThresh scoreboard, RFC 8985's RACK) and timeout.

Equivalent mutants left alive: ``_send`` handed ``None`` for the event list (no ``_send`` of the NewReno or
SACK connection appends to it: a data packet's hop schedules its own event); CUBIC's ``cwnd < w_max`` as
``<=`` (at equality both branches give K = 0 and W_max = cwnd); CUBIC's initial K, W_est and W_max (the first
acknowledgement in congestion avoidance sets all three before any is read); the DupThresh scan starting above the
highest segment sent (nothing there is SACKed); RACK's earliest deadline taken at ``left <= due`` (a tie changes
nothing); the SACK connection's initial RACK send time at another negative value, its initial RACK sequence and
RTT, PRR counters, quota, probe flag (None reads as False) and aux-timer deadline and generation (each set before
it is read: on the first delivery, on entering recovery, on arming); a SACK equal to
the cumulative ACK or to the highest segment sent (the receiver acknowledges the one cumulatively and never sees
the other); RACK's tie at the delivered copy's own sequence (that segment is SACKed or acknowledged before the
check); NewReno's initial ``recover`` moved by one, ``highest_ack`` at 1, RTTVAR, deadline and timer flag
(overwritten or read alike before they matter), ``float("INF")``; the receiver's first expected segment at 1 (the
segment it then drops is acknowledged all the same: nothing downstream reads a payload); the last segment's size
taken through ``wire_bytes`` for more segments (it returns the full size for all but the last); a data packet's
unused tag; CUBIC's clock or SRTT divided by 1e12 + 1; branches no state reaches (``seq >= rcv_nxt`` after the
equal case, every message done with data outstanding); the refusal listing the one recovery NewReno's connection
runs (a join of one name); the ECMP hash's seed offset (another fixed hash); the receiver's SACK tag on an in-order
ACK at 1 (it decodes to segment 0, below the cumulative point the ACK then carries); the send call's event
priority at an instant nothing else shares."""

from __future__ import annotations

import dataclasses

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.cubic import CUBIC_ALPHA, CUBIC_C, Cubic
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.flows import ACK, ACK_BYTES, TIMER_PRIORITY
from clustersim.network.transport.links import Network
from clustersim.network.transport.tcp import MAX_RTO_S, TcpFlow, TcpParams
from clustersim.network.transport.tcp_sack import SackTcpFlow, tcp_flow
from clustersim.network.transport.topology import FabricSpec, Topology, leaf_spine
from tests.network.transport.test_tcp_recover import LossyTcp

SPEC = FabricSpec(host_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6)
NEWRENO = TcpParams(congestion="newreno", recovery="newreno")


def _flow(segments: int = 100, params: TcpParams = NEWRENO) -> tuple[Environment, TcpFlow]:
    env = Environment(1)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=1)
    return env, TcpFlow(topo, 0, 1, [segments * params.payload_bytes], params)


def _mid_flight(flow: TcpFlow) -> TcpFlow:
    """A connection 20 segments out past segment 10, in recovery with two duplicate ACKs counted."""
    flow._base, flow._end = 0, 100
    flow.snd_una, flow.snd_nxt, flow.high_sent = 10, 30, 30
    flow.cwnd, flow.ssthresh = 20.0, 40.0
    flow.in_recovery, flow.dupacks, flow.recover = True, 2, 5
    flow.rto_ps = ps(0.2)
    return flow


def test_a_timeout_halves_the_flight_restarts_from_one_segment_and_doubles_the_rto():
    """RFC 5681 (ssthresh = max(FlightSize / 2, 2), cwnd = 1 segment), RFC 6582 section 3.2 step 4 (recover =
    the highest segment sent), RFC 6298 section 5.5 (the RTO doubles): then go-back-N resends segment 10 alone."""
    _, flow = _flow()
    flow = _mid_flight(flow)
    now = ps(1.0)
    flow._on_timeout(now)
    assert flow.ssthresh == 10.0  # (30 - 10) / 2: the segments out, not their sum
    assert flow.cwnd == 1.0
    assert flow.in_recovery is False and flow.dupacks == 0
    assert flow.recover == 29
    assert flow.rto_ps == ps(0.4) and flow._deadline == now + ps(0.4)
    assert (flow.snd_una, flow.snd_nxt, flow.retransmissions) == (10, 11, 1)  # one segment resent


def test_the_rto_backoff_stops_at_linux_s_maximum():
    _, flow = _flow()
    flow = _mid_flight(flow)
    flow.rto_ps = ps(100.0)
    flow._on_timeout(ps(1.0))
    assert flow.rto_ps == ps(MAX_RTO_S)


def test_a_small_flight_keeps_two_segments_of_threshold():
    _, flow = _flow()
    flow = _mid_flight(flow)
    flow.snd_nxt = 13  # three segments out: half is below the floor of two
    flow._on_timeout(ps(1.0))
    assert flow.ssthresh == 2.0


def test_after_a_timeout_the_next_loss_of_the_same_window_waits_for_new_data_to_be_acknowledged():
    """Three duplicate ACKs of segment 30 (= recover + 1 after the timeout) are ambiguous; with the window at
    one segment the heuristic says needless resends, not a loss (RFC 6582 section 4.1)."""
    _, flow = _flow()
    flow = _mid_flight(flow)
    flow._on_timeout(ps(1.0))
    flow.highest_ack, flow.prev_highest_ack = 30, 29
    assert flow._may_fast_retransmit(30) is False


@pytest.mark.parametrize(
    ("ack", "cwnd", "advance", "starts"),
    [
        (7, 1.0, 9, True),  # beyond recover + 1 (recover 5): always, whatever the heuristic says
        (6, 1.0, 1, False),  # exactly recover + 1, a window of one segment: the timer decides
        (6, 2.0, 1, True),  # a window above one segment and a short advance: a loss
        (6, 2.0, 4, True),  # an advance of exactly 4 segments still counts as short
        (6, 2.0, 5, False),  # 5 segments: needless resends after a timeout could do that
        (6, 1.5, 4, True),
    ],
)
def test_fast_retransmit_guard_at_each_boundary(ack, cwnd, advance, starts):
    _, flow = _flow()
    flow = _mid_flight(flow)
    flow.cwnd = cwnd
    flow.highest_ack, flow.prev_highest_ack = 20 + advance, 20
    assert flow._may_fast_retransmit(ack) is starts


@pytest.mark.parametrize("congestion", ["newreno", "cubic"])
def test_a_lossless_message_sends_each_segment_once(congestion):
    segments = 300
    env, flow = _flow(segments, TcpParams(congestion=congestion, recovery="newreno"))
    env.run()
    assert flow.done_ps is not None and flow.timeouts == 0
    assert flow.packets_sent == segments and flow.retransmissions == 0
    assert flow.high_sent == segments


def _ack(flow: TcpFlow, ack: int, stamp_ps: int = 0, sack: int = 0) -> tuple:
    return (flow.flow, ACK, ack, ACK_BYTES, flow.back_route, stamp_ps, sack)


def _open(flow: TcpFlow) -> TcpFlow:
    """20 segments out past segment 10, out of recovery, the last ACK an advance of 5 segments."""
    flow._base, flow._end = 0, 100
    flow.snd_una, flow.snd_nxt, flow.high_sent = 10, 30, 30
    flow.cwnd, flow.ssthresh = 20.0, 40.0
    flow.highest_ack, flow.prev_highest_ack = 10, 5
    flow._timer_armed = True
    return flow


def test_the_third_duplicate_ack_starts_recovery_with_the_window_inflated_by_three():
    """RFC 5681 section 3.2 steps 2-4: ssthresh = FlightSize / 2, resend the hole, cwnd = ssthresh + 3 (the three
    segments that left the network); each further duplicate ACK inflates cwnd by one segment."""
    _, flow = _flow()
    flow = _open(flow)
    now = ps(1.0)
    for count in (1, 2):
        flow.on_control(now, _ack(flow, 10))
        assert (flow.dupacks, flow.in_recovery, flow.retransmissions, flow.cwnd) == (count, False, 0, 20.0)
    flow.on_control(now, _ack(flow, 10))
    assert flow.in_recovery and flow.retransmissions == 1
    assert flow.ssthresh == 10.0 and flow.cwnd == 13.0 and flow.recover == 29
    flow.on_control(now, _ack(flow, 10))
    assert flow.cwnd == 14.0 and flow.dupacks == 4 and flow.retransmissions == 1


def test_an_old_or_idle_ack_is_not_a_duplicate():
    """A duplicate ACK acknowledges snd_una while data is out (RFC 5681's definition): an ACK below snd_una, or
    one when nothing is outstanding, counts for nothing."""
    _, flow = _flow()
    flow = _open(flow)
    flow.on_control(ps(1.0), _ack(flow, 8))
    assert flow.dupacks == 0
    flow.snd_nxt = flow.high_sent = 10  # everything sent is acknowledged
    flow.on_control(ps(1.0), _ack(flow, 10))
    assert flow.dupacks == 0


def test_new_data_acknowledged_clears_the_duplicate_count():
    _, flow = _flow()
    flow = _open(flow)
    for _ in range(2):
        flow.on_control(ps(1.0), _ack(flow, 10))
    flow.on_control(ps(1.0), _ack(flow, 12))
    assert flow.dupacks == 0 and flow.snd_una == 12


@pytest.mark.parametrize(("cwnd", "after"), [(15.0, 11.0), (3.0, 1.0)])
def test_a_partial_ack_resends_the_next_hole_and_deflates_by_what_it_acknowledged(cwnd, after):
    """RFC 6582 section 3.2 step 5: resend the first unacknowledged segment, deflate cwnd by the data newly
    acknowledged and add back one segment, never below one segment."""
    _, flow = _flow()
    flow = _open(flow)
    flow.in_recovery, flow.recover, flow.cwnd = True, 29, cwnd
    flow.on_control(ps(1.0), _ack(flow, 15))  # 5 segments acknowledged, 15 still a hole
    assert flow.in_recovery and flow.snd_una == 15
    assert flow.cwnd == after and flow.retransmissions == 1


def test_a_full_ack_ends_recovery_at_ssthresh():
    _, flow = _flow()
    flow = _open(flow)
    flow.in_recovery, flow.recover, flow.cwnd, flow.ssthresh = True, 29, 25.0, 10.0
    flow.on_control(ps(1.0), _ack(flow, 30))
    assert not flow.in_recovery and flow.cwnd == 10.0


def test_the_round_trip_sample_is_the_ack_time_less_the_echoed_send_time():
    """RFC 6298 section 2.2: the first sample R sets SRTT = R and RTTVAR = R / 2; the echoed time is the
    packet's send stamp, not its SACK field."""
    _, flow = _flow()
    flow = _open(flow)
    sent, rtt = ps(1.0), ps(7e-6)
    flow.on_control(sent + rtt, _ack(flow, 12, stamp_ps=sent, sack=40))
    assert flow.srtt_ps == rtt and flow.rttvar_ps == rtt / 2
    assert flow.rto_ps == ps(TcpParams().min_rto_s)  # 7 us + 4 x 3.5 us is far below Linux's 200 ms floor


def test_the_retransmission_timer_is_armed_once_and_only_while_data_is_outstanding():
    _, flow = _flow()
    flow = _open(flow)
    flow._timer_armed = False
    first = flow._pump(ps(1.0))
    assert [e for e in first if e[1] == TIMER_PRIORITY] and flow._timer_armed is True
    assert not [e for e in flow._pump(ps(1.0)) if e[1] == TIMER_PRIORITY]  # armed already
    flow._timer_armed = False
    flow.snd_una = flow.snd_nxt = flow.high_sent = flow._end  # all acknowledged
    assert flow._pump(ps(1.0)) == []


def test_cubic_s_first_ack_above_the_last_loss_starts_the_curve_there():
    """RFC 9438 section 4.8: a window at or above W_max starts an epoch with K = 0 and W_max = cwnd (there the
    Reno-friendly estimate leads); the next ACK, 1 s into the epoch, aims at W_cubic(1 s + RTT) = 0.4 x 8 + 10."""
    cubic = Cubic()
    assert cubic.on_ack(10.0, now_s=5.0, rtt_s=1.0, acked=1) == pytest.approx(10.0 + CUBIC_ALPHA / 10.0)
    assert (cubic.k_s, cubic.w_max, cubic.epoch_start_s) == (0.0, 10.0, 5.0)
    cubic.w_est = 0.0  # keep the Reno-friendly estimate out of the way
    grown = cubic.on_ack(10.0, now_s=6.0, rtt_s=1.0, acked=1)
    assert grown == pytest.approx(10.0 + (13.2 - 10.0) / 10.0)


def test_cubic_aims_at_most_one_and_a_half_windows_ahead():
    """RFC 9438 section 4.2: the target is clamped to 1.5 cwnd; far past K the curve is beyond it."""
    cubic = Cubic()
    cubic.epoch_start_s, cubic.k_s, cubic.w_max, cubic.w_est = 0.0, 0.0, 10.0, 0.0
    assert cubic.on_ack(10.0, now_s=10.0, rtt_s=0.0, acked=2) == pytest.approx(10.0 + 5.0 * 2 / 10.0)


def test_cubic_follows_its_curve_when_the_curve_meets_the_reno_estimate_exactly():
    """Section 4.3: the Reno-friendly region is where W_cubic(t) < W_est, strictly; at equality the window
    follows the cubic curve (here toward W_cubic(1 s) = W_max + 0.4)."""
    cubic = Cubic()
    cubic.epoch_start_s, cubic.k_s, cubic.w_est = 0.0, 0.0, 9.5
    cubic.w_max = 9.5 + CUBIC_ALPHA * 1 / 8.0  # what w_est becomes on this ACK: W_cubic(0) equals it
    expected = 8.0 + (cubic.w_max + CUBIC_C - 8.0) * 1 / 8.0
    assert cubic.on_ack(8.0, now_s=0.0, rtt_s=1.0, acked=1) == pytest.approx(expected)


# ---- the SACK connection's loss detection (RFC 6675's DupThresh, RFC 8985's RACK) and its timeout ----------------


def _sack(recovery: str) -> SackTcpFlow:
    env = Environment(1)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=1)
    params = TcpParams(congestion="newreno", recovery=recovery)
    flow = SackTcpFlow(topo, 0, 1, [100 * params.payload_bytes], params)
    flow._base, flow._end = 0, 100
    flow.snd_una, flow.snd_nxt, flow.high_sent = 10, 20, 20
    flow.cwnd, flow.ssthresh = 10.0, 40.0
    flow._timer_armed = True
    return flow


@pytest.mark.parametrize(
    ("sacked", "resent", "lost"),
    [
        ({17, 18, 19}, set(), set(range(10, 17))),  # three SACKed above: every hole below is lost
        ({18, 19}, set(), set()),  # two are not enough
        ({16, 17, 19}, set(), {10, 11, 12, 13, 14, 15}),  # 18 has only 19 above it; 15 and below have three
        ({17, 18, 19}, {12}, set(range(10, 17)) - {12}),  # a hole resent in this recovery is not marked again
    ],
)
def test_a_hole_is_lost_once_three_segments_above_it_are_sacked(sacked, resent, lost):
    """RFC 6675 section 4 (IsLost): DupThresh = 3 SACKed segments above a hole mark it lost."""
    flow = _sack("sack")
    flow.sacked, flow.resent = set(sacked), set(resent)
    assert flow._detect(ps(1.0), []) is bool(lost)
    assert flow.lost == lost


def _racked(now: int) -> SackTcpFlow:
    """Segments 10-19 out, 10-15 sent at 0, 16-19 at 20 us; the most recently sent copy delivered left at
    20 us (segment 17, SACKed); RACK.rtt 10 us and min RTT 8 us: a segment is lost 12 us after it left."""
    flow = _sack("rack")
    flow.sent_ps = {seq: (0 if seq < 16 else ps(20e-6)) for seq in range(10, 20)}
    flow.sent_ps[3] = 0  # an acknowledged segment's stale entry: below snd_una, never marked
    flow.sacked = {17}
    flow.rack_sent_ps, flow.rack_seq, flow.rack_rtt_ps, flow.min_rtt_ps = ps(20e-6), 17, ps(10e-6), ps(8e-6)
    return flow


def test_rack_marks_what_left_a_reordering_window_before_the_latest_delivered_copy():
    """RFC 8985 section 6.2: a segment sent before the most recently sent copy delivered (or at the same
    time with a lower sequence) is lost once RACK.rtt + reo_wnd (min_rtt / 4) has passed since it left."""
    now = ps(40e-6)
    flow = _racked(now)
    assert flow._detect(now, []) is True
    assert flow.lost == set(range(10, 16)) | {16}  # 16 left with 17 and has a lower sequence; 18, 19 after it


def test_rack_skips_sacked_and_later_sent_segments_without_stopping_and_arms_the_timer_for_the_first_due():
    flow = _racked(0)
    flow.sacked = {10, 17}
    flow.sent_ps[11] = ps(30e-6)  # resent after the delivered copy left: no evidence about it yet
    events: list = []
    now = ps(12e-6) - 1  # one picosecond before segments sent at 0 are due
    assert flow._detect(now, events) is False and flow.lost == set()
    assert flow._aux_deadline == ps(12e-6) and events  # the earliest due (12-15, sent at 0) armed
    assert flow._detect(ps(12e-6), []) is True and flow.lost == {12, 13, 14, 15}


def test_rack_at_time_zero_is_evidence_and_before_any_delivery_is_none():
    flow = _racked(0)
    flow.rack_sent_ps, flow.rack_seq = 0, 14  # a delivered copy sent at t = 0
    flow.sacked = {14}
    assert flow._detect(ps(1.0), []) is True and flow.lost == {10, 11, 12, 13}
    flow = _racked(0)
    flow.rack_sent_ps = -1  # nothing delivered yet
    assert flow._detect(ps(1.0), []) is False and flow.lost == set()


def test_a_sack_timeout_marks_every_unsacked_segment_lost_and_resends_the_first():
    """RFC 6675 section 5.1 and RFC 6298: ssthresh from the flight, cwnd one segment, recover = the highest
    sent, every outstanding segment not SACKed lost, the RTO doubled, no tail probe until progress."""
    flow = _sack("rack")
    flow.in_recovery, flow.recover, flow.sacked, flow.resent = True, 3, {15, 16}, {11}
    flow.rto_ps = ps(0.2)
    flow._on_timeout(ps(1.0))
    assert flow.ssthresh == 5.0 and flow.cwnd == 1.0  # (20 - 10) / 2
    assert flow.in_recovery is False and flow.recover == 19
    assert flow.lost == set(range(11, 20)) - {15, 16}  # segment 10 resent at once
    assert flow.resent == {10} and flow.retransmissions == 1
    assert flow.rto_ps == ps(0.4) and flow._probe_out is True


def test_a_marked_loss_is_outstanding_until_resent_and_delivered():
    flow = _sack("sack")
    flow.lost = {12}
    assert flow._loss_outstanding() is True
    flow.lost, flow.resent, flow.sacked = set(), {12}, set()
    assert flow._loss_outstanding() is True
    flow.sacked = {12}
    assert flow._loss_outstanding() is False


def test_the_aux_timer_is_rearmed_only_for_an_earlier_deadline():
    """An event already pending at or before the new deadline is moved on lazily; an earlier deadline gets
    its own event, of the next generation (the older one lapses)."""
    flow = _sack("rack")
    events: list = []
    flow._arm_aux(ps(1e-3), events)
    assert len(events) == 1 and events[0][3] == flow._aux_generation == 1
    flow._arm_aux(ps(1e-3), events)  # the same instant: the pending event serves
    flow._arm_aux(ps(2e-3), events)  # later: the pending one fires first and re-arms
    assert len(events) == 1 and flow._aux_deadline == ps(2e-3)
    flow._arm_aux(ps(0.5e-3), events)
    assert len(events) == 2 and events[1][0] == ps(0.5e-3) and events[1][3] == flow._aux_generation == 2


def _probing(flow: SackTcpFlow) -> SackTcpFlow:
    """RACK connection with segments 10-19 out, nothing SACKed, the aux timer's event due now."""
    flow._aux_generation, flow._aux_event_ps, flow._aux_deadline = 5, ps(1.0), ps(1.0)
    flow.rto_ps = ps(0.2)
    return flow


def test_a_tail_loss_probe_sends_new_data_when_it_may():
    """RFC 8985 section 7.3: the probe timeout with nothing deemed lost sends one new segment if the window
    and the data allow, counts a probe, and holds further probes until an acknowledgement shows progress."""
    flow = _probing(_sack("rack"))
    flow.probes = 3
    flow._aux_timer(ps(1.0), 5)
    assert (flow.probes, flow._probe_out, flow.snd_nxt, flow.retransmissions) == (4, True, 21, 0)
    assert flow._deadline == ps(1.0) + ps(0.2)


@pytest.mark.parametrize(
    ("snd_nxt", "max_window"),
    [
        (100, 4096),  # no new data: the message is all sent
        (20, 10),  # the receive window is full (20 - 10 segments out)
        (20, 25),  # room by the segments out (10 < 25), not by their sum with the cumulative point
    ],
)
def test_a_tail_loss_probe_resends_the_last_segment_when_no_new_one_may_go(snd_nxt, max_window):
    flow = _sack("rack")
    flow.params = dataclasses.replace(flow.params, max_window=max_window)
    flow.snd_nxt = flow.high_sent = snd_nxt
    flow = _probing(flow)
    flow._aux_timer(ps(1.0), 5)
    expected_window_room = snd_nxt < flow._end and snd_nxt - flow.snd_una < max_window
    assert expected_window_room is (max_window == 25)
    assert flow.probes == 1
    if expected_window_room:
        assert (flow.snd_nxt, flow.retransmissions) == (21, 0)
    else:
        assert (flow.snd_nxt, flow.retransmissions, flow.resent) == (snd_nxt, 1, {snd_nxt - 1})


def test_no_probe_without_data_outstanding_or_after_the_message():
    flow = _probing(_sack("rack"))
    flow.snd_una = flow.snd_nxt = flow.high_sent = 20  # all acknowledged, more to send
    assert flow._aux_timer(ps(1.0), 5) == [] and flow.probes == 0
    flow = _probing(_sack("rack"))
    flow.snd_una = flow.high_sent = flow.snd_nxt = flow._end  # the message acknowledged
    assert flow._aux_timer(ps(1.0), 5) is None and flow.probes == 0


def test_the_reordering_timer_in_recovery_marks_what_is_due_and_does_not_probe():
    """In recovery the aux timer is RACK's reordering timer: it marks the segments due, arms itself for the
    next, counts nothing delivered for PRR and sends no tail probe."""
    flow = _racked(0)
    flow = _probing(flow)
    flow.in_recovery, flow.recover, flow.ssthresh, flow.recover_fs = True, 19, 5.0, 10
    flow.sacked, flow._aux_deadline = {17}, ps(12e-6)
    events = flow._aux_timer(ps(12e-6), 5)
    assert flow.lost | flow.resent == set(range(10, 16)) and flow.probes == 0 and flow.prr_delivered == 0
    assert events is not None and flow._aux_deadline == ps(32e-6)  # 16 (sent with 17): due 12 us after 20 us
    flow.lost.clear()
    flow.sent_ps = {seq: ps(20e-6) for seq in range(10, 20)}  # nothing due yet
    flow._aux_generation, flow._aux_event_ps, flow._aux_deadline = 9, None, ps(32e-6) - 1
    flow._aux_timer(ps(32e-6) - 1, 9)
    assert flow.probes == 0 and not flow.lost


def test_the_factory_starts_the_connection_when_asked_and_hashes_its_path_with_seed_zero():
    env = Environment(1)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=8)
    late = tcp_flow(topo, 0, 1, [8949 * 10], start_ps=ps(1e-3))
    env.run()
    assert late.done_ps is not None and late.done_ps > ps(1e-3) > late.completions_ps[0]

    def fresh() -> Topology:  # the same flow id in each
        return leaf_spine(Network(Environment(1)), SPEC, hosts_per_leaf=1, num_paths=8)

    paths = {seed: tcp_flow(fresh(), 0, 1, [8949], seed=seed).path for seed in range(2)}
    assert tcp_flow(fresh(), 0, 1, [8949]).path == paths[0] != paths[1]


def test_cubic_fast_convergence_only_below_the_last_maximum():
    """RFC 9438 section 4.7: a loss below the previous W_max lowers W_max to cwnd (1 + beta) / 2; at or
    above it W_max is the window at the loss."""
    cubic = Cubic()
    cubic.w_max = 20.0
    assert cubic.on_loss(20.0, 20.0) == pytest.approx(14.0) and cubic.w_max == 20.0
    assert cubic.on_loss(10.0, 10.0) == pytest.approx(7.0) and cubic.w_max == pytest.approx(8.5)
    assert cubic.epoch_start_s is None


# ---- the SACK connection's acknowledgement processing and PRR (RFC 6937) ------------------------------------------


def test_a_cumulative_ack_cleans_the_scoreboard_and_counts_what_was_not_sacked():
    """Segments 10-13 acknowledged, 12 and 13 SACKed before: two newly delivered; 10-13 leave every set and
    their send times; the RTO restarts from now; RACK remembers the send time of the copy that just arrived
    and its sequence (the last acknowledged, 13: no SACK on this ACK)."""
    flow = _sack("rack")
    flow.sacked, flow.lost, flow.resent = {12, 13, 17}, {11}, {11}
    flow.sent_ps = {seq: (ps(800e-6) if seq < 14 else ps(990e-6)) for seq in range(10, 20)}  # 14-19 after it
    flow._probe_out = True
    now, stamp = ps(1e-3), ps(900e-6)
    flow.on_control(now, _ack(flow, 14, stamp_ps=stamp))
    assert flow.snd_una == 14 and flow.sacked == {17} and flow.lost == set() and flow.resent == set()
    assert min(flow.sent_ps) >= 14
    assert flow._deadline == now + flow.rto_ps and flow._probe_out is False
    assert (flow.rack_sent_ps, flow.rack_seq, flow.rack_rtt_ps) == (stamp, 13, now - stamp)


def test_rack_keeps_the_latest_sent_copy_and_among_equal_times_the_highest_sequence():
    flow = _sack("rack")
    flow.rack_sent_ps, flow.rack_seq, flow.rack_rtt_ps = ps(5e-6), 15, ps(1e-6)
    sack_of = lambda seq: seq + 1  # noqa: E731 - the tag carries the SACKed segment plus one
    flow.on_control(ps(20e-6), _ack(flow, 10, stamp_ps=ps(5e-6), sack=sack_of(14)))  # same time, lower: kept
    assert (flow.rack_seq, flow.rack_rtt_ps) == (15, ps(1e-6))
    flow.on_control(ps(21e-6), _ack(flow, 10, stamp_ps=ps(5e-6), sack=sack_of(15)))  # the same copy again
    assert (flow.rack_seq, flow.rack_rtt_ps) == (15, ps(1e-6))
    flow.on_control(ps(22e-6), _ack(flow, 10, stamp_ps=ps(5e-6), sack=sack_of(16)))  # same time, higher
    assert (flow.rack_seq, flow.rack_rtt_ps) == (16, ps(17e-6))


def test_a_sack_of_a_segment_deemed_lost_takes_it_off_the_lost_list_and_counts_it_delivered():
    """A duplicate ACK SACKing 12 (marked lost, only late): 12 is SACKed, no longer lost, and PRR counts one
    delivered (in recovery); the retransmission timer is not restarted by it."""
    flow = _sack("sack")
    flow.in_recovery, flow.recover, flow.ssthresh, flow.recover_fs = True, 19, 5.0, 10
    flow.lost, flow.sacked, flow._probe_out = {12}, {15, 16, 17}, True
    deadline = flow._deadline
    flow.on_control(ps(1.0), _ack(flow, 10, stamp_ps=ps(0.5), sack=13))
    assert 12 in flow.sacked and 12 not in flow.lost and flow.prr_delivered == 1
    assert flow._deadline == deadline and flow._probe_out is False


def test_an_ack_that_acknowledges_and_sacks_counts_both_for_prr():
    flow = _sack("sack")
    flow.in_recovery, flow.recover, flow.ssthresh, flow.recover_fs = True, 19, 5.0, 10
    flow.sacked = {15, 16, 17}
    flow.on_control(ps(1.0), _ack(flow, 12, stamp_ps=ps(0.5), sack=19))  # 10, 11 acknowledged; 18 SACKed
    assert flow.prr_delivered == 3


def test_a_plain_cumulative_ack_starts_no_episode_even_with_a_resent_segment_outstanding():
    """RFC 6675 section 5 counts a SACK afresh once recovery ends; an acknowledgement that SACKs nothing new
    does not start an episode, and outside recovery it opens the window."""
    flow = _sack("sack")
    flow.recover, flow.resent, flow.cwnd, flow.ssthresh = 5, {15}, 10.0, 40.0
    flow.on_control(ps(1.0), _ack(flow, 12, stamp_ps=ps(0.5)))
    assert not flow.in_recovery and flow.cwnd == 12.0  # slow start: one segment each


def test_in_recovery_an_ack_sets_the_window_to_pipe_plus_the_prr_quota_and_does_not_grow_it():
    """A partial ACK in recovery (10, 11 delivered; 19 SACKed, nothing marked lost): pipe 7 above ssthresh 4,
    PRR's proportional quota ceil(2 x 4 / 10) = 1, cwnd 8; the window does not also grow as outside recovery."""
    flow = _sack("sack")
    flow.in_recovery, flow.recover, flow.ssthresh, flow.recover_fs = True, 19, 4.0, 10
    flow.sacked = {19}
    flow.on_control(ps(1.0), _ack(flow, 12, stamp_ps=ps(0.5)))
    assert flow.in_recovery and flow.cwnd == 8.0 and flow.prr_out == 1


def _recovering() -> SackTcpFlow:
    """In recovery with RACK before any delivery: nothing is marked lost by time, so pipe is what is set."""
    flow = _sack("rack")
    flow.in_recovery, flow.recover, flow.ssthresh, flow.recover_fs = True, 19, 4.0, 10
    return flow


@pytest.mark.parametrize(
    ("sacked", "prr_delivered", "prr_out", "delivered", "quota"),
    [
        # pipe 7 > ssthresh 4: proportional, ceil(prr_delivered x ssthresh / RecoverFS) - prr_out
        ({17, 18, 19}, 3, 0, 2, 2),  # ceil(5 x 4 / 10) - 0
        ({17, 18, 19}, 6, 2, 1, 1),  # ceil(7 x 4 / 10) - 2
        # pipe 4 = ssthresh: the slow-start reduction bound, min(ssthresh - pipe, max(delivered so far, now) + 1)
        ({14, 15, 16, 17, 18, 19}, 1, 1, 1, 0),
        # pipe 2 < ssthresh 4: min(4 - 2, max(3 - 1, 1) + 1) = 2
        ({12, 13, 14, 15, 16, 17, 18, 19}, 2, 1, 1, 2),
        # pipe 3: min(4 - 3, max(0 - 2, 0) + 1) = 1
        ({11, 12, 13, 14, 15, 16, 17}, 0, 2, 0, 1),
        # pipe 4 = ssthresh, nothing out yet and nothing lost: no segment either
        ({14, 15, 16, 17, 18, 19}, 0, 0, 0, 0),
        # pipe 4 = ssthresh with much delivered: still the reduction bound (0), not the proportional ceil(10 x 4 / 10)
        ({14, 15, 16, 17, 18, 19}, 9, 0, 1, 0),
        # pipe 0: min(4 - 0, max(2 - 1, 1) + 1) = 2, the delivered-so-far term
        (set(range(10, 20)), 1, 1, 1, 2),
    ],
)
def test_prr_quota(sacked, prr_delivered, prr_out, delivered, quota):
    """RFC 6937 section 3 (PRR-SSRB): the segments PRR lets out on this acknowledgement, and cwnd = pipe + quota."""
    flow = _recovering()
    flow.sacked, flow.prr_delivered, flow.prr_out = set(sacked), prr_delivered, prr_out
    flow._detect_and_recover(ps(1.0), delivered, [])
    assert flow.prr_delivered == prr_delivered + delivered
    assert flow.quota == quota and flow.cwnd == float(flow.pipe + quota)


def test_on_entering_recovery_the_fast_retransmit_alone_goes_out():
    """A hole marked lost with nothing sent in the episode yet: at least one segment (the retransmission), not
    two, whatever PRR computes (here min(4 - 3, 0 + 1) = 1)."""
    flow = _recovering()
    flow.sacked, flow.lost = {14, 15, 16, 17, 18, 19}, {10}
    flow._detect_and_recover(ps(1.0), 0, [])
    assert flow.quota == 1


def test_recovery_ends_only_past_its_recovery_point_and_a_new_one_starts_only_past_it():
    """RFC 6675 section 5: recovery ends when the cumulative ACK passes RecoveryPoint (recover), not at it; a
    new episode needs the ACK past the last one's point; entering sets recover to the highest segment sent."""
    flow = _recovering()
    flow.recover, flow.snd_una = 15, 15
    flow._detect_and_recover(ps(1.0), 0, [])
    assert flow.in_recovery is True
    flow.snd_una = 16
    flow._detect_and_recover(ps(1.0), 0, [])
    assert flow.in_recovery is False and flow.cwnd == flow.ssthresh
    flow = _sack("sack")
    flow.recover, flow.sacked = 10, {17, 18, 19}  # holes below three SACKed segments, but snd_una = recover
    flow._detect_and_recover(ps(1.0), 0, [])
    assert flow.in_recovery is False and flow.lost == set(range(10, 17))
    flow = _sack("sack")
    flow.recover, flow.sacked = 5, {17, 18, 19}
    flow._detect_and_recover(ps(1.0), 0, [])
    assert flow.in_recovery is True and flow.recover == 19 and flow.recover_fs == 10


def test_prr_sends_its_quota_from_the_lost_segments_and_counts_each():
    flow = _recovering()
    flow.lost, flow.sacked, flow.quota, flow.cwnd, flow.prr_out = {10, 11, 12}, {17, 18, 19}, 2, 50.0, 0
    flow._pump(ps(1.0))
    assert flow.retransmissions == 2 and flow.lost == {12} and (flow.prr_out, flow.quota) == (2, 0)


def test_new_data_stops_at_the_receive_window():
    """Five segments SACKed leave pipe 5 and room in the window for 7, but the receive window (12 segments past
    snd_una 10) stops new data at segment 21."""
    flow = _sack("rack")
    flow.params = dataclasses.replace(flow.params, max_window=12)
    flow.cwnd, flow.sacked = 100.0, {15, 16, 17, 18, 19}
    flow._pump(ps(1.0))
    assert flow.snd_nxt == 22


def test_no_timer_without_data_outstanding():
    """Everything sent is acknowledged and the window admits nothing new: RACK's probe timer is not armed (the
    RTO is, the message being unfinished); with the whole message acknowledged neither is."""
    flow = _sack("rack")
    flow.snd_una = flow.snd_nxt = flow.high_sent = 20
    flow.cwnd, flow._timer_armed = 0.5, False
    assert [event[2].__name__ for event in flow._pump(ps(1.0))] == ["_timer"] and flow._aux_event_ps is None
    flow._timer_armed = False
    flow.snd_una = flow.snd_nxt = flow.high_sent = flow._end
    assert flow._pump(ps(1.0)) == []


def test_a_message_acknowledged_ends_recovery_and_clears_the_scoreboard():
    flow = _recovering()
    flow.sacked, flow.lost, flow.resent, flow.quota = {17}, {11}, {10}, 3
    flow.sent_ps = {11: 0}
    flow._after_message()
    assert flow.in_recovery is False and flow.cwnd == flow.ssthresh and flow.quota == 0
    assert not (flow.sacked or flow.lost or flow.resent or flow.sent_ps)


def test_a_fresh_rack_connection_has_no_delivery_to_judge_by():
    flow = _sack("rack")
    flow.sent_ps = {seq: 0 for seq in range(10, 20)}
    assert flow._detect(ps(1.0), []) is False and flow.lost == set()


def test_the_sack_connection_starts_at_zero_and_hashes_its_path_with_seed_zero_by_default():
    def run(**kwargs: int) -> SackTcpFlow:
        env = Environment(1)
        topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=8)
        flow = SackTcpFlow(topo, 0, 1, [8949 * 4], TcpParams(), **kwargs)
        env.run()
        return flow

    default, explicit = run(), run(start_ps=0, seed=0)
    assert (default.done_ps, default.path) == (explicit.done_ps, explicit.path)
    assert run(seed=1).path != explicit.path


# ---- NewReno's connection: its RTT estimator, CUBIC's clock, its timer and what it refuses ----------------------


def test_the_rto_follows_rfc_6298_over_successive_samples():
    """RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT <- 7/8 SRTT + 1/8 R, RTO = SRTT + 4 RTTVAR (a floor far below)."""
    _, flow = _flow(params=TcpParams(congestion="newreno", recovery="newreno", min_rto_s=1e-9))
    flow._on_rtt(ps(100e-6))
    assert (flow.srtt_ps, flow.rttvar_ps, flow.rto_ps) == (ps(100e-6), ps(50e-6), ps(300e-6))
    flow._on_rtt(ps(200e-6))
    assert flow.rttvar_ps == pytest.approx(ps(62.5e-6)) and flow.srtt_ps == pytest.approx(ps(112.5e-6))
    assert flow.rto_ps == int(ps(112.5e-6) + 4 * ps(62.5e-6))


def test_cubic_is_driven_in_seconds_and_by_the_smoothed_round_trip():
    """The window follows CUBIC's curve at the connection's clock and SRTT in seconds: a second into the epoch
    with SRTT 0.5 s it aims at W_cubic(1.5 s) = 0.4 x 1.5^3 + W_max, below the 1.5 x cwnd clamp."""
    _, flow = _flow(params=TcpParams(congestion="cubic", recovery="newreno"))
    flow.cwnd, flow.ssthresh, flow.srtt_ps = 10.0, 5.0, float(ps(0.5))
    reference = Cubic()
    flow._grow(1, ps(3.0))
    expected = reference.on_ack(10.0, 3.0, 0.5, 1)
    assert flow.cwnd == pytest.approx(expected)
    flow._grow(1, ps(4.0))
    following = reference.on_ack(expected, 4.0, 0.5, 1)
    assert flow.cwnd == pytest.approx(following) and following < expected + 0.5  # the clamp would add 0.5


def test_the_retransmission_timer_stops_with_the_message_and_rearms_before_its_deadline():
    _, flow = _flow()
    flow = _mid_flight(flow)
    flow._timer_armed, flow._deadline = True, ps(2.0)
    events = flow._timer(ps(1.0), None)
    assert events == [(ps(2.0), TIMER_PRIORITY, flow._timer, None)] and flow._timer_armed is True
    flow.snd_una = flow._end  # this message acknowledged, the next not posted yet
    assert flow._timer(ps(3.0), None) is None and flow._timer_armed is False and flow.timeouts == 0


def test_the_first_segment_lost_is_fast_retransmitted():
    """Three duplicate ACKs of segment 0 (nothing acknowledged yet): ack - 1 = -1 is not beyond the initial
    recover (-1), and the last advance (none, 0 - 0) is short: a loss, retransmitted at once."""
    _, flow = _flow()
    flow._base, flow._end = 0, 100
    flow.snd_nxt = flow.high_sent = 10
    flow._timer_armed = True
    for _ in range(3):
        flow.on_control(ps(1.0), _ack(flow, 0))
    assert flow.in_recovery and flow.retransmissions == 1


def test_newreno_s_connection_defaults_and_refusals():
    """Without params it is NewReno's recovery with Linux's CUBIC; a SACK recovery is refused naming the field,
    the value and the class that runs it; a pinned path is kept; it starts at 0 and hashes its path with seed 0."""

    def fresh(**kwargs) -> TcpFlow:
        env = Environment(1)
        topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=8)
        flow = TcpFlow(topo, 0, 1, [8949 * 4], **kwargs)
        env.run()
        return flow

    default = fresh()
    assert (default.params.recovery, default.params.congestion) == ("newreno", "cubic")
    explicit = fresh(start_ps=0, seed=0)
    assert (default.done_ps, default.path) == (explicit.done_ps, explicit.path) and fresh(seed=1).path != default.path
    assert fresh(start_ps=ps(1e-3)).done_ps > ps(1e-3)
    assert fresh(params=TcpParams(recovery="newreno", path=3)).path == 3
    refusal = r"^recovery: 'sack' is not run by TcpFlow \(newreno\); tcp_sack\.tcp_flow picks the connection for it$"
    with pytest.raises(ClusterSimError, match=refusal) as error:
        fresh(params=TcpParams(recovery="sack"))
    assert (error.value.field, error.value.value) == ("recovery", "sack")


def test_the_receiver_keeps_no_out_of_order_segment_once_the_gap_fills():
    env = Environment(1)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=1)
    flow = LossyTcp(topo, 0, 1, [400 * 8949], NEWRENO, drop=frozenset({20}))
    env.run()
    assert flow.done_ps is not None and flow.rcv_nxt == 400 and flow._ooo == set()


@pytest.mark.parametrize(
    ("change", "message", "field", "value"),
    [
        ({"congestion": "bbr"}, "congestion: 'bbr' is not one of newreno, cubic", "congestion", "bbr"),
        ({"payload_bytes": 0}, "payload_bytes: 0 must be at least 1", "payload_bytes", 0),
        ({"max_window": 0}, "max_window: 0 must be at least 1", "max_window", 0),
        (
            {"recovery": "newreno", "reduction_basis": "pipe"},
            "reduction_basis: 'pipe' needs a SACK scoreboard (recovery sack or rack), not recovery newreno",
            "reduction_basis",
            "pipe",
        ),
        ({"min_rto_s": 0.0}, "min_rto_s: 0.0 must be > 0 s", "min_rto_s", 0.0),
    ],
)
def test_tcp_settings_are_refused_whole_naming_the_field_and_value(change, message, field, value):
    with pytest.raises(ClusterSimError) as error:
        TcpParams(**change)
    assert (str(error.value), error.value.field, error.value.value) == (message, field, value)


def test_the_smallest_tcp_settings_are_valid():
    params = TcpParams(payload_bytes=1, initial_window=1, max_window=1, min_rto_s=1e-12)
    assert (params.payload_bytes, params.initial_window, params.max_window) == (1, 1, 1)


def test_without_a_sack_or_a_recovery_nothing_is_judged_lost_and_no_episode_starts_unasked():
    """Loss detection runs on SACK information or in recovery: with neither, RACK's timing marks nothing;
    and a call that does not say a SACK arrived starts no episode for a resent segment still out."""
    flow = _racked(0)
    flow.sacked = set()
    flow._detect_and_recover(ps(1.0), 0, [])
    assert flow.lost == set() and not flow.in_recovery
    flow = _sack("rack")
    flow.recover, flow.sacked, flow.resent = 5, {12}, {15}  # 15 resent, neither SACKed nor acknowledged
    flow._detect_and_recover(ps(1.0), 0, [])
    assert not flow.in_recovery

"""Tests that kill what mutation testing of ``transport_rdma`` left alive in ``rc.py`` (benchmarks/mutation.py): each
setting's refusal by exact message, field and value with the edges of its range accepted; a flow's start, its default
ECMP seed and its messages' short last packets; recovery from losses placed on chosen packets (a scripted loss
stream on the sender's host link): the first packet, a single hole, two holes, a lost resend, every packet, every
packet after progress, each stating the counters exactly (resends, timeouts), so a NAK that is not sent, sent twice
or suppressed, or a retry counter off by one, shows; DCQCN's increase timer armed again by a cut after a full
recovery, and a CNP exactly one interval after the last.

Left alive, equivalent: initial values the flow overwrites before it reads them (``_deadline``, ``_retries``,
``_slot_ps``, ``_slot_wire``, ``_rate_due_ps``; falsy ``None`` for ``False`` in its flags; ``_nak_for`` of -2 or
None, any value that is not a PSN); the packet tuple's flag field and stamp in data, acknowledgements and CNPs (RC
reads neither: ECN is bit 30); ``>=`` for ``>`` after the equal case has returned; the line rate's 8e12 read as 8e12
+ 1; the timer's tests of a finished flow (each end state is caught by another of its three tests) and a second timer
armed beside the first (it finds the deadline moved and arms again); a pacer after the flow's end (nothing is left to
send); a timer armed at ``snd_una == end`` (it finds the message done); the order of equal-time pacer events; at the
line rate the byte counter's stage (it cannot raise the rate past the line) and a repace at an unchanged rate; a
NAK for a PSN not yet sent (the responder never names one). Unpinned: a duplicate acknowledgement restarting the
timeout (``>=`` in ``on_control``), which only a run of duplicates with no progress would show."""

from __future__ import annotations

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.dcqcn import DcqcnParams
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.flows import TIMER_PRIORITY
from clustersim.network.transport.lossless import LosslessNetwork, LosslessSpec
from clustersim.network.transport.rc import RcFlow, RcParams, ecmp_path
from clustersim.network.transport.topology import FabricSpec, leaf_spine

PS_PER_BYTE = 80  # 100 Gb/s host links
PAYLOAD = 4096


class ScriptedLoss:
    """A port's loss stream: the n-th packet through the port draws 0 (lost at any loss probability) when n is in
    ``lost`` or from ``all_from`` on, else ``kept`` (kept at a loss probability of ``kept`` or less)."""

    def __init__(self, lost: tuple[int, ...] = (), all_from: int | None = None, kept: float = 1.0) -> None:
        self.lost, self.all_from, self.kept, self.drawn = set(lost), all_from, kept, 0

    def uniform(self) -> float:
        n, self.drawn = self.drawn, self.drawn + 1
        return 0.0 if n in self.lost or (self.all_from is not None and n >= self.all_from) else self.kept


def _flow(sizes: list[int], *, lost: tuple[int, ...] = (), all_from: int | None = None, **params) -> tuple[RcFlow, int]:
    """One queue pair across a two-leaf credit fabric whose only losses are the scripted ones on the sender's host
    link: the finished flow and the packets that link lost."""
    env = Environment(0)
    net = LosslessNetwork(env, LosslessSpec(mode="credit"))
    topo = leaf_spine(net, FabricSpec(loss=0.5), hosts_per_leaf=1, num_paths=1)
    port = topo.uplinks[0]
    net.loss[:] = [0.5 if p == port else 0.0 for p in range(len(net.loss))]  # in place: the hot path holds the list
    net.streams[port] = ScriptedLoss(lost, all_from)  # type: ignore[call-overload]
    flow = RcFlow(topo, 0, 1, sizes, RcParams(**params))
    env.run()
    return flow, net.losses[port]


def _idle(sizes: list[int], *, start_ps: int = 0, num_paths: int = 1) -> RcFlow:
    env = Environment(0)
    topo = leaf_spine(
        LosslessNetwork(env, LosslessSpec(mode="credit")), FabricSpec(), hosts_per_leaf=1, num_paths=num_paths
    )
    flow = RcFlow(topo, 0, 1, sizes, start_ps=start_ps)
    env.run()
    return flow


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout_exponent": 32}, "timeout_exponent: 32 is not a 5-bit IB timeout (0..31)"),
        ({"timeout_exponent": -1}, "timeout_exponent: -1 is not a 5-bit IB timeout (0..31)"),
        ({"recovery": "sack"}, "recovery: 'sack' is not one of selective, go-back-n"),
        ({"retry_count": 8}, "retry_count: 8 is not a 3-bit IB retry count (0..7)"),
        ({"retry_count": -1}, "retry_count: -1 is not a 3-bit IB retry count (0..7)"),
        ({"payload_bytes": 0}, "payload_bytes: 0 must be at least 1"),
        ({"window": 0}, "window: 0 must be at least 1"),
        ({"outstanding": 0}, "outstanding: 0 must be at least 1"),
    ],
)
def test_each_rc_setting_out_of_range_is_refused_by_message_field_and_value(kwargs, message) -> None:
    with pytest.raises(ClusterSimError) as caught:
        RcParams(**kwargs)
    ((field, value),) = kwargs.items()
    assert str(caught.value) == message
    assert (caught.value.field, caught.value.value) == (field, value)


def test_the_edges_of_each_rc_range_are_accepted() -> None:
    for exponent in (0, 31):
        assert RcParams(timeout_exponent=exponent).timeout_exponent == exponent
    for retries in (0, 7):
        assert RcParams(retry_count=retries).retry_count == retries
    assert RcParams(payload_bytes=1, window=1, outstanding=1).window == 1


def test_a_flow_started_later_finishes_later_by_exactly_its_start() -> None:
    assert _idle([PAYLOAD], start_ps=10**6).done_ps == _idle([PAYLOAD]).done_ps + 10**6


def test_a_one_packet_message_is_sent_and_acknowledged() -> None:
    flow = _idle([1])
    assert flow.packets_sent == 1 and flow.done_ps is not None and flow.done_ps > 0


def test_a_short_last_packet_is_short_on_the_wire() -> None:
    """A 4,196-byte message is a full packet and one of 100 bytes (plus headers): it finishes 3,996 bytes' serialisation
    before a message of two full packets."""
    assert _idle([2 * PAYLOAD]).done_ps - _idle([PAYLOAD + 100]).done_ps == (PAYLOAD - 100) * PS_PER_BYTE


def test_the_path_is_the_ecmp_hash_of_the_flow_with_seed_zero_by_default() -> None:
    env = Environment(0)
    topo = leaf_spine(LosslessNetwork(env, LosslessSpec(mode="credit")), FabricSpec(), hosts_per_leaf=1, num_paths=8)
    flows = [RcFlow(topo, 0, 1, [PAYLOAD]) for _ in range(8)]
    assert [f.path for f in flows] == [ecmp_path(f.flow, 8, 0) for f in flows]
    assert any(ecmp_path(f.flow, 8, 0) != ecmp_path(f.flow, 8, 1) for f in flows)  # the seed matters here


@pytest.mark.parametrize("hole", [0, 1, 2])
def test_selective_repeat_resends_one_lost_packet_once_on_a_nak(hole: int) -> None:
    """The first packet lost, or a later one: the packets behind it draw one NAK and the hole alone goes again."""
    flow, lost = _flow([64 * PAYLOAD], lost=(hole,), timeout_exponent=4)
    assert (lost, flow.retransmissions, flow.timeouts) == (1, 1, 0)
    assert flow.epsn == 64 and flow.done_ps is not None


def test_selective_repeat_naks_the_next_hole_once_when_the_first_fills() -> None:
    flow, lost = _flow([64 * PAYLOAD], lost=(1, 3), timeout_exponent=4)
    assert (lost, flow.retransmissions, flow.timeouts) == (2, 2, 0)


@pytest.mark.parametrize("hole", [0, 1, 2])
def test_go_back_n_resends_from_the_hole_on_one_nak(hole: int) -> None:
    flow, lost = _flow([64 * PAYLOAD], lost=(hole,), recovery="go-back-n", timeout_exponent=4)
    assert (lost, flow.retransmissions, flow.timeouts) == (1, 64 - hole, 0)


def test_a_queue_pair_that_never_gets_through_fails_after_its_retry_count_plus_one_timeouts() -> None:
    flow, _ = _flow([8 * PAYLOAD], all_from=0, timeout_exponent=3, retry_count=2)
    assert flow.timeouts == 3 and flow.packets_sent == 3 * 8 and flow.done_ps is None
    assert flow.failure == (
        "rc: queue pair 0 went to the error state: 3 local ACK timeouts of 3.277e-05 s in a row at PSN 0"
        " (retry count 2)"
    )


def test_progress_restarts_the_count_of_timeouts_in_a_row() -> None:
    """The first packet is acknowledged (well inside the 33 us timeout), then nothing gets through: three timeouts in
    a row from there, not two."""
    flow, _ = _flow([8 * PAYLOAD], all_from=1, timeout_exponent=3, retry_count=2)
    assert flow.timeouts == 3 and flow.failure is not None and "at PSN 1" in flow.failure


def test_selective_repeat_does_not_nak_a_hole_twice_so_a_lost_resend_waits_for_the_timer() -> None:
    """256 packets, a window of 128: holes at PSNs 1 and 3, and the resend of PSN 3 lost too (the port carries PSNs 0 to
    128, the resends of 1 and 3, then PSN 129 on). The packets the opened window lets go after it do not NAK PSN 3
    again: the timer repairs it."""
    flow, lost = _flow([256 * PAYLOAD], lost=(1, 3, 130), timeout_exponent=4)
    assert lost == 3 and flow.timeouts == 1 and flow.done_ps is not None


def test_a_one_packet_message_is_as_short_on_the_wire_as_its_bytes() -> None:
    """A 100-byte message's one packet is stored and forwarded over the route's four links (host, leaf, spine, leaf)
    3,996 bytes' serialisation sooner at each than a full packet."""
    assert _idle([PAYLOAD]).done_ps - _idle([100]).done_ps == 4 * (PAYLOAD - 100) * PS_PER_BYTE


def _dcqcn_flow(**dcqcn) -> RcFlow:
    env = Environment(0)
    topo = leaf_spine(LosslessNetwork(env, LosslessSpec(mode="pfc")), FabricSpec(), hosts_per_leaf=1)
    return RcFlow(topo, 0, 1, [PAYLOAD], RcParams(dcqcn=DcqcnParams(**dcqcn)))


def test_a_cut_after_a_full_recovery_arms_the_rate_timer_again() -> None:
    """A CNP cuts the rate and arms the increase timer; the timer runs the rate back to the line and stops; a later
    CNP's cut arms it again (else the rate would never recover from the second cut)."""
    flow = _dcqcn_flow()
    assert flow.rate is not None
    now = 0
    assert flow._on_cnp(now)  # the cut arms the timer: one event
    stages = 0
    while flow._rate_timer(flow._rate_due_ps, None) is not None:
        stages += 1
        assert stages < 100_000
    assert flow.rate.at_line_rate and stages > 0
    now = flow._rate_due_ps + ps(1e-3)
    assert flow._on_cnp(now) == [(now + ps(flow.rate.params.time_reset_s), TIMER_PRIORITY, flow._rate_timer, None)]


def test_a_marked_packet_draws_a_cnp_once_the_interval_has_passed_exactly() -> None:
    flow = _dcqcn_flow(cnp_interval_s=50e-6)
    gap = ps(50e-6)
    for now in (0, gap - 1, gap):
        flow._notify(now, 0)
    assert flow.cnps == 2  # at 0 and exactly one interval later, not inside it

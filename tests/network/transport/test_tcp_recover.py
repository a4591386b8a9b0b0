"""NewReno's guard on fast retransmit (RFC 6582 sections 3.2 and 4.1) with losses placed by hand: a
segment lost right after a recovery episode is repaired by fast retransmit, not a 200 ms timeout,
where the RFC's ACK heuristic says the duplicate ACKs mean a loss."""

from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.links import Network
from clustersim.network.transport.tcp import TcpFlow, TcpParams
from clustersim.network.transport.topology import FabricSpec, leaf_spine

SPEC = FabricSpec(host_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6)
SEGMENTS = 400
FIRST_LOSS = 20


class LossyTcp(TcpFlow):
    """A TCP flow whose first transmissions of the segments in ``drop`` never leave the host; it notes
    the highest segment sent (plus one) when the first retransmission of ``FIRST_LOSS`` goes out."""

    def __init__(self, *args, drop: frozenset[int] = frozenset(), **kwargs) -> None:
        self.drop = drop
        self.sent_when_repaired: int | None = None
        self.fast_retransmits = 0
        super().__init__(*args, **kwargs)

    def _send(self, now_ps, seq, events):
        first = seq >= self.high_sent
        if not first and seq == FIRST_LOSS and self.sent_when_repaired is None:
            self.sent_when_repaired = self.high_sent
        if first and seq in self.drop:
            self.high_sent = seq + 1
            self.packets_sent += 1
            return
        super()._send(now_ps, seq, events)

    def on_control(self, now_ps, packet):
        was = self.in_recovery
        events = super().on_control(now_ps, packet)
        self.fast_retransmits += self.in_recovery and not was
        return events


def _run(drop: frozenset[int]) -> LossyTcp:
    env = Environment(1)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=1)
    flow = LossyTcp(topo, 0, 1, [SEGMENTS * 8949], TcpParams(congestion="newreno", recovery="newreno"), drop=drop)
    env.run()
    assert flow.done_ps is not None
    return flow


def _recover_point() -> int:
    """One past the highest segment sent when fast retransmit of FIRST_LOSS began (RFC 6582's recover + 1)."""
    flow = _run(frozenset({FIRST_LOSS}))
    assert flow.timeouts == 0 and flow.fast_retransmits == 1
    assert flow.sent_when_repaired is not None
    return flow.sent_when_repaired


def test_a_loss_right_after_a_recovery_episode_is_fast_retransmitted():
    """Losses at FIRST_LOSS, at the last segment of that window (R - 1) and at the first one sent after
    it (R): recovery repairs the first two (a partial ACK for R - 1), ends on the full ACK of R (one
    segment past the partial ACK), and the duplicate ACKs of R that follow acknowledge exactly
    recover. Section 4.1's heuristic (the last advance at most 4 segments, a window above one) calls
    it a loss: a second fast retransmit, no 200 ms timeout."""
    r = _recover_point()
    flow = _run(frozenset({FIRST_LOSS, r - 1, r}))
    assert flow.timeouts == 0
    assert flow.fast_retransmits == 2
    assert flow.retransmissions == 3
    assert flow.completions_ps[0] < ps(TcpParams().min_rto_s)


def test_duplicate_acks_after_a_long_cumulative_jump_wait_for_the_timer():
    """One loss at FIRST_LOSS, then R: the full ACK jumps the whole window, more than 4 segments, so
    by RFC 6582 (section 3.2 step 2, section 4.1) the duplicate ACKs of R do not start a fast
    retransmit (they could be needless resends) and the retransmission timer repairs R."""
    r = _recover_point()
    flow = _run(frozenset({FIRST_LOSS, r}))
    assert r - FIRST_LOSS > 4
    assert flow.fast_retransmits == 1
    assert flow.timeouts == 1
    assert flow.completions_ps[0] > ps(TcpParams().min_rto_s)

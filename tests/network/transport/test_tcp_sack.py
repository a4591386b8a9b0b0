"""SACK recovery with PRR, by duplicate threshold (RFC 6675) and by time (RACK-TLP, RFC 8985), with losses
placed by hand: what each repairs without the 200 ms retransmission timeout, and what it does not."""

from __future__ import annotations

import statistics

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.experiments import Scenario, run_transport
from clustersim.network.transport.flows import DATA
from clustersim.network.transport.links import Network
from clustersim.network.transport.tcp import TcpFlow, TcpParams
from clustersim.network.transport.tcp_sack import SackTcpFlow, tcp_flow
from clustersim.network.transport.topology import FabricSpec, leaf_spine

SPEC = FabricSpec(host_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6)
SEGMENTS = 400
MIN_RTO_PS = ps(TcpParams().min_rto_s)


class DroppingNetwork:
    """The network as one flow sees it: the first ``drops[seq]`` copies of data segment ``seq`` vanish
    on the sender's host (after the sender has counted them sent)."""

    def __init__(self, net: Network, drops: dict[int, int]) -> None:
        self._net, self.drops = net, drops

    def hop(self, now_ps, packet):
        seq = packet[2]
        if packet[1] == DATA and self.drops.get(seq, 0) > 0:
            self.drops[seq] -= 1
            return None
        return self._net.hop(now_ps, packet)

    def __getattr__(self, name):
        return getattr(self._net, name)


class Dropping:
    """A flow whose data meet ``DroppingNetwork``; it notes the segments it sends in recovery."""

    def __init__(self, *args, drops: dict[int, int] | None = None, **kwargs) -> None:
        self.recovery_sent: list[int] = []
        super().__init__(*args, **kwargs)
        self.net = DroppingNetwork(self.net, dict(drops or {}))

    def _send(self, now_ps, seq, events):
        if self.in_recovery:
            self.recovery_sent.append(seq)
        super()._send(now_ps, seq, events)


class DroppingNewReno(Dropping, TcpFlow):
    pass


class DroppingSack(Dropping, SackTcpFlow):
    pass


def _run(recovery: str, drops: dict[int, int], segments: int = SEGMENTS):
    env = Environment(1)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=1)
    params = TcpParams(recovery=recovery, congestion="newreno")
    kind = DroppingNewReno if recovery == "newreno" else DroppingSack
    flow = kind(topo, 0, 1, [segments * 8949], params, drops=drops)
    env.run()
    assert flow.done_ps is not None
    return flow


@pytest.mark.parametrize("recovery", ["sack", "rack"])
def test_without_loss_the_sack_senders_match_newreno_to_the_picosecond(recovery):
    assert _run(recovery, {}).completions_ps == _run("newreno", {}).completions_ps


@pytest.mark.parametrize("recovery", ["newreno", "sack", "rack"])
def test_one_loss_mid_window_is_repaired_by_one_retransmission(recovery):
    flow = _run(recovery, {20: 1})
    assert flow.timeouts == 0 and flow.retransmissions == 1
    assert flow.completions_ps[0] < MIN_RTO_PS


def test_prr_sends_ssthresh_over_recover_fs_of_what_was_delivered_and_ends_at_ssthresh():
    """RFC 6937: while pipe is above ssthresh, the sends in recovery track ssthresh / RecoverFS of the
    data delivered; on leaving recovery the window is ssthresh (NewReno: half the window at the loss, which
    is below RecoverFS by the segments SACKed above the hole)."""
    flow = _run("sack", {60: 1})
    assert flow.timeouts == 0 and not flow.in_recovery
    assert flow.recover_fs - 3 <= 2 * flow.ssthresh <= flow.recover_fs
    expected = -(-flow.prr_delivered * flow.ssthresh // flow.recover_fs)
    assert abs(flow.prr_out - expected) <= 1 + int(flow.ssthresh)  # the last ACKs may switch to slow start
    assert flow.recovery_sent[0] == 60  # the hole goes first


@pytest.mark.parametrize("recovery,probes,timeouts", [("newreno", None, 1), ("sack", 0, 1), ("rack", 1, 0)])
def test_a_lost_last_segment_waits_for_the_timer_unless_a_tail_loss_probe_draws_it_out(recovery, probes, timeouts):
    """The message's last segment lost: no segment after it, so no duplicate ACK or SACK. NewReno and
    duplicate-threshold SACK wait 200 ms for the timer; RACK-TLP's probe after two round trips
    resends it."""
    flow = _run(recovery, {SEGMENTS - 1: 1})
    assert flow.timeouts == timeouts
    assert getattr(flow, "probes", None) == probes
    assert (flow.completions_ps[0] < MIN_RTO_PS) == (timeouts == 0)


def test_rack_finds_a_lost_retransmission_by_time_where_the_duplicate_threshold_waits_for_the_timer():
    """Segment 20 lost twice: its retransmission is lost too. Segments sent after the retransmission
    are SACKed, so RACK marks it lost a round trip later and resends it; RFC 6675 resends a hole once
    per recovery and leaves the lost copy to the retransmission timer."""
    rack, sack = _run("rack", {20: 2}), _run("sack", {20: 2})
    assert rack.timeouts == 0 and rack.completions_ps[0] < MIN_RTO_PS
    assert sack.timeouts == 1 and sack.completions_ps[0] > MIN_RTO_PS


def test_at_one_percent_loss_rack_keeps_most_of_the_rate_that_timeouts_cost_newreno():
    """One flow of 1 MiB messages at 1% loss, three seeds: RACK-TLP repairs tails and lost
    retransmissions without most timeouts, so its median goodput is several times NewReno's."""

    def median_rate(recovery: str) -> float:
        runs = [
            run_transport("tcp", Scenario(loss=0.01, seed=s, num_messages=40, tcp_recovery=recovery)) for s in (1, 2, 3)
        ]
        return statistics.median(r.throughput_bits_per_s for r in runs)

    assert median_rate("rack") > 3 * median_rate("newreno")


def test_the_factory_makes_the_connection_the_recovery_names_and_bad_names_are_refused():
    env = Environment(1)
    topo = leaf_spine(Network(env), SPEC, hosts_per_leaf=1, num_paths=1)
    assert type(tcp_flow(topo, 0, 1, [1000], TcpParams(recovery="newreno"))) is TcpFlow
    assert type(tcp_flow(topo, 0, 1, [1000], TcpParams(recovery="sack"))) is SackTcpFlow
    assert TcpParams().recovery == "rack" and TcpParams().congestion == "cubic"  # Linux's defaults
    with pytest.raises(ClusterSimError, match="recovery: 'rack' is not run by TcpFlow"):
        TcpFlow(topo, 0, 1, [1000], TcpParams(recovery="rack"))
    with pytest.raises(ClusterSimError, match="recovery: 'fack' is not one of newreno, sack, rack"):
        TcpParams(recovery="fack")
    with pytest.raises(ClusterSimError, match="tcp_recovery: 'fack' is not one of newreno, sack, rack") as error:
        Scenario(tcp_recovery="fack")
    assert error.value.field == "tcp_recovery"


def test_a_probe_timer_that_finds_nothing_due_probes_once_instead_of_rearming_forever():
    """At 90% loss a SACKed segment can sit above holes that RACK cannot yet call lost (sent after it): the
    probe timer then sends its one probe and leaves the rest to the retransmission timer, so the run ends
    at the simulated horizon after its timeouts, not by burning the whole event budget on the timer."""
    with pytest.raises(ClusterSimError) as error:
        run_transport("tcp", Scenario(loss=0.9, num_messages=20, line_bits_per_s=400e9))
    assert "a run stops at" in str(error.value) and "events" not in str(error.value)

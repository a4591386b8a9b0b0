"""The loss reductions of the SACK connection: ssthresh comes from the window at the loss, as Linux and ns-3
take it, not from every segment between the cumulative point and the highest sent (RFC 5681's FlightSize),
which counts the segments SACKed above a hole that outlived its recovery episode; and a loss in data sent
during a recovery episode, which that episode repairs, still starts the next episode once it ends."""

from __future__ import annotations

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.cubic import CUBIC_BETA
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.links import Network
from clustersim.network.transport.tcp import TcpParams
from clustersim.network.transport.tcp_sack import SackTcpFlow
from clustersim.network.transport.topology import FabricSpec, leaf_spine
from tests.network.transport.test_tcp_sack import SPEC, DroppingSack, _run

# the path of benchmarks/tcp_vs_ns3.py: four 100 Gbit/s links, 10 us one way, 1% loss on each host's uplink
LOSSY = FabricSpec(host_bits_per_s=100e9, hop_latency_s=2.5e-6, host_latency_s=0.0, loss=0.01)


class Recording:
    """A SACK connection that notes (window before, ssthresh after, pipe) at each entry into recovery."""

    def __init__(self, *args, **kwargs) -> None:
        self.cuts: list[tuple[float, float]] = []
        self.pipes: list[int] = []
        super().__init__(*args, **kwargs)

    def _detect_and_recover(self, now_ps, delivered, events, **kwargs):
        window, was = self.cwnd, self.in_recovery
        super()._detect_and_recover(now_ps, delivered, events, **kwargs)
        if self.in_recovery and not was:
            self.cuts.append((window, self.ssthresh))
            self.pipes.append(self.pipe)  # before PRR sends anything


class Recorded(Recording, SackTcpFlow):
    pass


class RecordedDropping(Recording, DroppingSack):
    pass


def _cuts(congestion: str, seed: int, mib: int) -> list[tuple[float, float]]:
    env = Environment(seed)
    topo = leaf_spine(Network(env), LOSSY, hosts_per_leaf=1, num_paths=1)
    params = TcpParams(congestion=congestion, recovery="sack", max_window=1 << 20)
    flow = Recorded(topo, 0, 1, [mib << 20], params, seed=seed)
    env.run()
    assert flow.done_ps is not None
    return flow.cuts


@pytest.mark.parametrize("congestion,beta", [("newreno", 0.5), ("cubic", CUBIC_BETA)])
def test_each_reduction_leaves_ssthresh_at_most_beta_times_the_window_at_the_loss(congestion, beta):
    """At 1% loss over seeds 1-7 (4 MiB each), every entry into recovery sets ssthresh to at most beta x the
    window (at least 2). Taking FlightSize instead gave up to 1.16x that here, and on seed 8 of the 32 MiB
    benchmark a window of 176 segments fell to 168 (not 88): the hole left by a lost segment of the previous
    episode kept 160 SACKed segments in FlightSize."""
    cuts = [cut for seed in range(1, 8) for cut in _cuts(congestion, seed, 4)]
    assert len(cuts) > 10
    worst = max(ssthresh / max(window * beta, 2.0) for window, ssthresh in cuts)
    assert worst <= 1.0 + 1e-9


def test_a_loss_in_data_sent_during_recovery_costs_a_second_reduction_once_that_recovery_ends():
    """600 segments, segment 200 lost: one episode, which halves the window (210 -> 105). Segments 405 (in the
    same window) and 413 (sent during the recovery, after its recovery point 411) lost as well: the episode
    resends 413 itself, and when it ends (405 repaired) 413's copy is still in flight with SACKs arriving above
    it. RFC 6675 section 5 counts those duplicate ACKs afresh and enters a new recovery (IsLost(HighACK + 1)),
    as Linux (lost_out > 0) and ns-3 do: the window is halved again. Waiting for a newly marked loss instead
    kept the window at 105 segments."""
    one = _run("sack", {200: 1}, segments=600)
    assert one.timeouts == 0 and one.ssthresh == 105
    same_window = _run("sack", {200: 1, 405: 1}, segments=600)
    assert same_window.ssthresh == one.ssthresh  # two losses in one window: one reduction
    later = _run("sack", {200: 1, 405: 1, 413: 1}, segments=600)
    assert later.timeouts == 0 and later.ssthresh == one.ssthresh / 2


def test_the_pipe_basis_halves_the_data_in_the_network_as_ns3_newreno_does_and_needs_sack():
    """Segment 60 of 400 lost: at the third SACK the window counts the hole and the three segments SACKed
    above it, pipe does not; ns-3's NewReno halves pipe (its BytesInFlight), Linux the window, so the pipe
    basis leaves the lower ssthresh. Without a scoreboard there is no pipe: refused."""

    def cut(basis: str) -> RecordedDropping:
        topo = leaf_spine(Network(Environment(1)), SPEC, hosts_per_leaf=1, num_paths=1)
        params = TcpParams(congestion="newreno", recovery="sack", reduction_basis=basis)
        flow = RecordedDropping(topo, 0, 1, [400 * 8949], params, drops={60: 1})
        topo.net.env.run()
        assert flow.done_ps is not None and flow.timeouts == 0 and len(flow.cuts) == 1
        return flow

    window, pipe = cut("cwnd"), cut("pipe")
    assert window.ssthresh == max(int(window.cuts[0][0]), 2) / 2
    assert pipe.ssthresh == max(pipe.pipes[0], 2) / 2
    assert pipe.ssthresh < window.ssthresh
    with pytest.raises(ClusterSimError, match="reduction_basis: 'pipe' needs a SACK scoreboard") as error:
        TcpParams(recovery="newreno", reduction_basis="pipe")
    assert error.value.field == "reduction_basis"
    with pytest.raises(ClusterSimError, match="reduction_basis: 'flight' is not one of cwnd, pipe"):
        TcpParams(reduction_basis="flight")

"""CUBIC (RFC 9438): the window follows C (t - K)^3 + W_max between losses, the Reno-friendly estimate
at short round trips, beta = 0.7 on loss; named beside NewReno in the TCP-like transport."""

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.cubic import CUBIC_ALPHA, Cubic
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.links import Network
from clustersim.network.transport.tcp import TcpFlow, TcpParams
from clustersim.network.transport.topology import FabricSpec, dumbbell


def _grow(cubic: Cubic, cwnd: float, rtt_s: float, until_s: float, acks_per_rtt: int = 10) -> dict[float, float]:
    """An ACK clock: ``acks_per_rtt`` ACKs per round trip, each for a share of the window."""
    t, seen = 0.0, {}
    while t < until_s:
        for _ in range(acks_per_rtt):
            cwnd = cubic.on_ack(cwnd, t, rtt_s, max(1, round(cwnd / acks_per_rtt)))
            t += rtt_s / acks_per_rtt
        seen[round(t, 6)] = cwnd
    return seen


def test_the_window_follows_the_cubic_curve_through_its_plateau():
    """W_max = 1000, a loss leaves 700: K = cbrt(300 / 0.4) = cbrt(750) s, and W(K/2) = 1000 - 0.4 x 750 / 8
    = 962.5, W(K) = 1000, W(3K/2) = 1037.5 (a 100 ms round trip keeps the Reno-friendly estimate below)."""
    cubic = Cubic()
    cubic.w_max = 1000.0
    rtt = 0.1
    seen = _grow(cubic, 700.0, rtt, 14.0)
    k = 750 ** (1 / 3)
    assert cubic.k_s == pytest.approx(k)
    for t, expected in ((k / 2, 962.5), (k, 1000.0), (1.5 * k, 1037.5)):
        at = min(seen, key=lambda x: abs(x - t))
        assert cubic.window(at) - 0.5 <= seen[at] <= cubic.window(at + rtt) + 0.5
        assert seen[at] == pytest.approx(expected, abs=3.5)  # the nearest ACK is within 0.05 s of t
    assert cubic.w_est < 800


def test_at_data_centre_round_trips_the_window_grows_by_alpha_per_round_trip():
    """RTT 100 us, W_max = 100, cwnd 70: the cubic curve stays near 70 for seconds, so the window is the
    Reno-friendly estimate, 70 + alpha per round trip, alpha = 3 (1 - 0.7) / 1.7."""
    cubic = Cubic()
    cubic.w_max = 100.0
    seen = _grow(cubic, 70.0, 100e-6, 0.02, acks_per_rtt=7)
    last = seen[max(seen)]
    assert abs(CUBIC_ALPHA - 0.9 / 1.7) < 1e-12
    assert last == pytest.approx(70 + 200 * CUBIC_ALPHA, rel=0.03)


def test_a_loss_keeps_beta_of_the_flight_and_fast_convergence_lowers_w_max():
    cubic = Cubic()
    assert cubic.on_loss(cwnd=100.0, flight=100) == pytest.approx(70.0)
    assert cubic.w_max == 100.0 and cubic.epoch_start_s is None
    cubic.on_loss(cwnd=80.0, flight=80)  # below the last W_max: release bandwidth sooner
    assert cubic.w_max == pytest.approx(80 * 1.7 / 2)
    assert cubic.on_loss(cwnd=2.0, flight=1) == 2.0


def test_the_tcp_flow_reduces_to_beta_with_cubic_and_to_half_with_newreno():
    """Two flows alike up to their first loss (a 10 Gbit/s bottleneck behind a 150 kB buffer): at the
    first fast retransmit CUBIC keeps 0.7 of the flight and NewReno 0.5, and CUBIC remembers W_max."""

    def first_reduction(congestion: str) -> TcpFlow:
        env = Environment(1)
        spec = FabricSpec(host_bits_per_s=100e9, fabric_bits_per_s=10e9, buffer_bytes=150_000)
        flow = TcpFlow(
            dumbbell(Network(env), spec, hosts_per_side=1),
            0,
            1,
            [400 * 8949],
            TcpParams(congestion=congestion, recovery="newreno"),
        )
        while flow.ssthresh == float("inf"):
            assert env.run(max_events=1) == 1
        return flow

    reno, cubic = first_reduction("newreno"), first_reduction("cubic")
    assert reno.high_sent == cubic.high_sent and reno.snd_una == cubic.snd_una
    assert cubic.ssthresh / reno.ssthresh == pytest.approx(0.7 / 0.5)
    # window-limited in slow start, the whole window is in flight: W_max = cwnd = flight
    assert cubic.cubic is not None and cubic.cubic.w_max == pytest.approx(reno.ssthresh * 2)


def test_an_unknown_congestion_control_is_refused_by_name():
    with pytest.raises(ClusterSimError, match="congestion: 'bbr' is not one of newreno, cubic"):
        TcpParams(congestion="bbr")
